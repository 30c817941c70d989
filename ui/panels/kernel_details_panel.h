// The selected kernel's IR (after any pass) next to its generated source, lines linked both ways:
// hovering an IR op highlights the source line rendered from it, and a source line highlights
// the IR ops it came from (Compiler Explorer's model). Beside the IR after a pass, the Diff tab shows
// what that pass changed: its input and output as a line diff, removed lines red and added lines green
// (Compiler Explorer's optimization-pipeline view); passes that changed nothing can be hidden.
#pragma once
#include <QWidget>

#include "core/ir_line_map.h"
#include "tensorscope/session.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QStackedWidget;
class QTabWidget;

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

  // The pass snapshots of the shown kernel: 0 is the IR as lowered, i the IR after the i-th pass.
  int passCount() const;
  void selectPass(int index);
  int selectedPass() const;
  // A pass whose output equals its input ("inconsequential", as Compiler Explorer says).
  bool passChangedNothing(int index) const;
  // "Hide inconsequential passes": such passes leave the pass list (the one shown stays).
  void setHideUnchangedPasses(bool hide);
  bool isPassListed(int index) const;
  CodeView* diffView() const { return diff_; }
  // Side by side: the pass's input on the left, its output on the right, scrolled together.
  void setSideBySide(bool on);
  CodeView* diffLeft() const { return diffLeft_; }
  CodeView* diffRight() const { return diffRight_; }
  // What File ▸ Export ▸ … as Text writes: the IR after the selected pass, that pass's unified diff
  // (the Diff tab's text under "--- IR before PASS" / "+++ IR after PASS", worked out now if the tab
  // was not shown), the source shown. Empty when there is none.
  QString irText() const;
  QString diffText() const;
  QString sourceText() const;
  QString shownRenderer() const;
  // Find over the listings: the IR after the selected pass, then the generated source shown.
  QList<CodeView*> findableListings() const;
  // Find over every kernel: the texts findableListings() would hold with kernel `kernelId` shown
  // (run: its launch, may be null): for the shown kernel the IR after the selected pass, for another
  // the IR after the last pass (what showKernel selects); the source of the renderer it would show.
  struct Listings {
    QString ir, source;
    int pass = -1;  // the IR's pass index; -1: no IR
  };
  Listings listingsOf(int kernelId, const ts::KernelRunEvent* run) const;
  // Whether listingsOf() of another kernel with this code may hold `needle`: a look at the bytes
  // (ASCII, case-insensitive; a needle that is not ASCII may be anywhere) before any QString is made,
  // for Find, which runs on every keystroke over thousands of kernels.
  bool listingsMayHold(const ts::KernelCode& code, const QString& needle) const;
  // Brings `listing` to the front (the IR tab for the IR) so that a match in it can be seen.
  void revealListing(CodeView* listing);
  // The shown kernel's listings (its IR after every pass), for the Explain pane.
  std::shared_ptr<const ts::KernelCode> code() const { return code_; }

 signals:
  void passSelected(int index);

 private:
  void showPass(int index);
  void showDiff(int index);  // while the Diff tab is shown
  void updateHiddenPasses();
  void showSource();  // the listing of the language picked in the combo
  int rendererFor(const ts::KernelCode& code) const;  // the renderer user picked, else the device's
  // that renderer's listing of `code` (rendered now when it is another device's language), or nullptr
  const ts::SourceListing* listingFor(const ts::KernelCode& code) const;
  const ts::SourceListing* shownListing() const;  // the listing of the language picked in the combo
  void updateLinking();
  void linkFromIr(int irLine);
  void linkFromSource(int sourceLine);

  QLabel* title_;
  QComboBox* passCombo_;
  QComboBox* rendererCombo_;
  QLabel* linkHint_;
  CodeView* ir_;
  CodeView* diff_;
  CodeView* diffLeft_;
  CodeView* diffRight_;
  QCheckBox* sideBySide_;
  QStackedWidget* diffStack_;
  QTabWidget* irTabs_;
  QCheckBox* hideUnchanged_;
  CodeView* source_;

  int kernelId_ = -1;
  std::shared_ptr<const ts::KernelCode> code_ = std::make_shared<const ts::KernelCode>();
  int runKernelId_ = -1;  // the kernel whose launch report code_ comes from
  QString preferredRenderer_;  // the user's pick; until then, the source the kernel's device compiled
  IrSourceMap map_;
};

}  // namespace tsui
