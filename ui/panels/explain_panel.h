// The Explain pane (View ▸ Presentation shows it; a classroom's narrator): the selected kernel in words.
// Why the run has the kernels it has (where this kernel ends, why each input is a buffer, the cost
// model's store-or-recompute decisions with their numbers), what the selected pass did to the kernel's
// IR (lines added and removed, the IR ops that appeared or disappeared) and where its time goes (its
// run time, and its FLOPs and bytes estimated from the shapes of the nodes fused into it).
#pragma once
#include <QMap>
#include <QTextBrowser>
#include <memory>

#include "tensorscope/session.h"

namespace tsui {

class RunModel;

class ExplainPanel : public QTextBrowser {
  Q_OBJECT
 public:
  explicit ExplainPanel(const RunModel* model, QWidget* parent = nullptr);

  // `code` and `pass`: the kernel panel's listings and selected pass (-1: none).
  void explain(int kernelId, std::shared_ptr<const ts::KernelCode> code, int pass);
  void clearKernel();
  int shownKernel() const { return kernelId_; }

  // FLOPs and bytes of a kernel from its schedule's node shapes, as scripts/bench_training.py's
  // kernel_cost: an elementwise node costs one FLOP per output element, a reduce one per input
  // element; bytes are the kernel's inputs and outputs read and written once. -1: not known (a node
  // or a shape is missing, e.g. in a recording that kept no nodes).
  struct Cost {
    double flops = -1, bytes = -1;
  };
  static Cost estimateCost(const RunModel& model, int kernelId);
  // How many times each IR op occurs in a listing ("MUL" from "%9 = MUL.float32 %7, %3").
  static QMap<QString, int> irOpCounts(const QString& listing);

 private:
  const RunModel* model_;
  int kernelId_ = -1;
};

}  // namespace tsui
