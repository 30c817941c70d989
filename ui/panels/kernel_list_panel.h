// The kernel list: one row per kernel in launch order, filled in two steps — the schedule tells
// the name, the fused ops and the output; the launch report adds the device and the time.
//
// A view over the RunModel (Qt's model/view): a training run has tens of thousands of kernels, and
// rows cost nothing until they are painted, so adding 50,000 kernels is a row count, not 300,000
// table items.
#pragma once
#include <QSet>
#include <QTableView>
#include <vector>

class QMenu;

namespace tsui {

class RunModel;
class KernelTableModel;

class KernelListPanel : public QTableView {
  Q_OBJECT
 public:
  explicit KernelListPanel(const RunModel* model, QWidget* parent = nullptr);

  void clearKernels();
  void addSchedule(int scheduleIndex);
  void updateKernelRun(int kernelId);
  // updateKernelRun for many launches at once: one change over the rows they span (a training loop's batch
  // of launches was a signal per row).
  void updateKernelRuns(const std::vector<int>& kernelIds);
  // Selects the row without emitting kernelSelected (the caller already knows).
  void selectKernel(int kernelId);
  // Highlights the rows of these kernels (the kernels the editor's line fell into); {} clears.
  void markKernels(const QSet<int>& ids);
  int kernelCount() const;
  int selectedKernel() const;
  // The kernel id shown in `row` (Qt::UserRole of column 0), or -1.
  int kernelAt(int row) const;
  // The context menu of a kernel's row (a right-click shows it): "Autotune" (autotuneRequested).
  QMenu* kernelMenu(int kernelId, QWidget* parent);

 signals:
  void kernelSelected(int kernelId);
  void autotuneRequested(int kernelId);

 private:
  KernelTableModel* table_;
  bool updatingSelection_ = false;
};

}  // namespace tsui
