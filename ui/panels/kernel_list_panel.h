// The kernel list: one row per kernel in launch order, filled in two steps — the schedule tells
// the name, the fused ops and the output; the launch report adds the device and the time.
#pragma once
#include <QHash>
#include <QTableWidget>

namespace tsui {

class RunModel;

class KernelListPanel : public QTableWidget {
  Q_OBJECT
 public:
  explicit KernelListPanel(const RunModel* model, QWidget* parent = nullptr);

  void clearKernels();
  void addSchedule(int scheduleIndex);
  void updateKernelRun(int kernelId);
  // Selects the row without emitting kernelSelected (the caller already knows).
  void selectKernel(int kernelId);
  int kernelCount() const { return rowCount(); }
  int selectedKernel() const;

 signals:
  void kernelSelected(int kernelId);

 private:
  enum Column { Id, Name, FusedOps, OutputShape, Device, Time, ColumnCount };
  int rowFor(int kernelId);  // appends a row if needed
  void fillFromSchedule(int row, int kernelId);

  const RunModel* model_;
  QHash<int, int> rowOfKernel_;
  bool updatingSelection_ = false;
};

}  // namespace tsui
