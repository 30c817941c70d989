// The sidebar (Netron's property panel): everything known about the selected kernel or node —
// op, shape, dtype, argument, inputs; for a kernel its buffers and why it ends where it ends.
#pragma once
#include <QTextBrowser>

#include "core/graph_spec.h"

namespace tsui {

class RunModel;

class PropertiesPanel : public QTextBrowser {
  Q_OBJECT
 public:
  explicit PropertiesPanel(const RunModel* model, QWidget* parent = nullptr);

  void showKernel(int kernelId);
  void showNode(const GraphSpecNode& node);
  void clearSelection();

 private:
  QString nodeSummary(uint64_t uid) const;
  const RunModel* model_;
};

}  // namespace tsui
