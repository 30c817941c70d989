// The selected kernel's IR (after any pass) next to its generated source, lines linked both ways:
// hovering an IR op highlights the source line rendered from it, and a source line highlights
// the IR ops it came from (Compiler Explorer's model).
#pragma once
#include <QWidget>

#include "core/ir_line_map.h"
#include "tensorscope/session.h"

class QComboBox;
class QLabel;

namespace tsui {

class CodeView;

class KernelDetailsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit KernelDetailsPanel(QWidget* parent = nullptr);

  // `run` may be null: the kernel is scheduled but was not launched (yet).
  void showKernel(int kernelId, const QString& name, const ts::KernelRunEvent* run);
  void clearKernel();
  int shownKernel() const { return kernelId_; }

 private:
  void showPass(int index);
  void showSource(int index);
  void updateLinking();
  void linkFromIr(int irLine);
  void linkFromSource(int sourceLine);

  QLabel* title_;
  QComboBox* passCombo_;
  QComboBox* rendererCombo_;
  QLabel* linkHint_;
  CodeView* ir_;
  CodeView* source_;

  int kernelId_ = -1;
  std::shared_ptr<const ts::KernelCode> code_ = std::make_shared<const ts::KernelCode>();
  int runKernelId_ = -1;  // the kernel whose launch report code_ comes from
  QString preferredRenderer_;  // the user's pick; until then, the source the kernel's device compiled
  IrSourceMap map_;
};

}  // namespace tsui
