#include "panels/kernel_details_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QListView>
#include <QScrollBar>
#include <QStackedWidget>
#include <QTabWidget>
#include <QHBoxLayout>
#include <QLabel>
#include <QSplitter>
#include <QVBoxLayout>
#include <cctype>
#include <functional>

#include "core/line_diff.h"
#include "widgets/code_view.h"

namespace tsui {
namespace {

// A titled column: a header row (caption + combo) over a code view.
QWidget* column(const QString& caption, QComboBox* combo, QWidget* view, QWidget* extra = nullptr) {
  auto* box = new QWidget;
  auto* header = new QHBoxLayout;
  header->setContentsMargins(4, 2, 4, 2);
  auto* label = new QLabel(caption);
  label->setStyleSheet("font-weight: 600;");
  header->addWidget(label);
  header->addWidget(combo, 1);
  if (extra) header->addWidget(extra);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addLayout(header);
  layout->addWidget(view, 1);
  return box;
}

}  // namespace

KernelDetailsPanel::KernelDetailsPanel(QWidget* parent)
    : QWidget(parent),
      title_(new QLabel),
      passCombo_(new QComboBox),
      rendererCombo_(new QComboBox),
      linkHint_(new QLabel),
      ir_(new CodeView),
      diff_(new CodeView),
      diffLeft_(new CodeView),
      diffRight_(new CodeView),
      sideBySide_(new QCheckBox("Side by side")),
      diffStack_(new QStackedWidget),
      irTabs_(new QTabWidget),
      hideUnchanged_(new QCheckBox("Hide inconsequential passes")),
      source_(new CodeView) {
  source_->setLanguage(CodeView::Language::Cpp);
  ir_->setObjectName("ir");  // names for tests and style sheets
  diff_->setObjectName("passDiff");
  passCombo_->setObjectName("pass");
  hideUnchanged_->setToolTip("Leave out of the pass list the passes whose output equals their input");
  irTabs_->setDocumentMode(true);
  irTabs_->addTab(ir_, "IR");
  // The Diff tab: unified, or the input and the output side by side (scrolled together).
  diffLeft_->setObjectName("passDiffBefore");
  diffRight_->setObjectName("passDiffAfter");
  sideBySide_->setToolTip("Show the pass's input and output side by side instead of one unified listing");
  auto* sides = new QSplitter(Qt::Horizontal);
  sides->addWidget(diffLeft_);
  sides->addWidget(diffRight_);
  diffStack_->addWidget(diff_);
  diffStack_->addWidget(sides);
  for (auto [from, to] : {std::pair{diffLeft_, diffRight_}, std::pair{diffRight_, diffLeft_}}) {
    connect(from->verticalScrollBar(), &QScrollBar::valueChanged, to->verticalScrollBar(), &QScrollBar::setValue);
    connect(from->horizontalScrollBar(), &QScrollBar::valueChanged, to->horizontalScrollBar(), &QScrollBar::setValue);
  }
  auto* diffTab = new QWidget;
  auto* diffLayout = new QVBoxLayout(diffTab);
  diffLayout->setContentsMargins(0, 0, 0, 0);
  diffLayout->setSpacing(0);
  auto* diffHeader = new QHBoxLayout;
  diffHeader->setContentsMargins(4, 2, 4, 2);
  diffHeader->addStretch(1);
  diffHeader->addWidget(sideBySide_);
  diffLayout->addLayout(diffHeader);
  diffLayout->addWidget(diffStack_, 1);
  irTabs_->addTab(diffTab, "Diff");
  connect(sideBySide_, &QCheckBox::toggled, this, [this](bool on) {
    diffStack_->setCurrentIndex(on ? 1 : 0);
    showDiff(passCombo_->currentIndex());
  });
  connect(irTabs_, &QTabWidget::currentChanged, this, [this] { showDiff(passCombo_->currentIndex()); });
  irTabs_->setTabToolTip(0, "The kernel's IR after the pass");
  irTabs_->setTabToolTip(1, "What the pass changed: its input and output as a line diff (removed lines red, added green)");
  source_->setObjectName("source");
  rendererCombo_->setObjectName("renderer");
  passCombo_->setToolTip("The kernel's IR after lowering and after each optimization pass");
  rendererCombo_->setToolTip("The renderer (target language) of the generated source");
  linkHint_->setStyleSheet("color: #6b7280;");
  title_->setTextFormat(Qt::RichText);
  title_->setContentsMargins(6, 4, 6, 2);
  title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // a long kernel name is cut, never widens

  auto* splitter = new QSplitter(Qt::Horizontal);
  splitter->addWidget(column("IR after", passCombo_, irTabs_, hideUnchanged_));
  splitter->addWidget(column("Source", rendererCombo_, source_, linkHint_));
  splitter->setChildrenCollapsible(false);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addWidget(title_);
  layout->addWidget(splitter, 1);

  connect(passCombo_, &QComboBox::currentIndexChanged, this, &KernelDetailsPanel::showPass);
  connect(passCombo_, &QComboBox::currentIndexChanged, this, &KernelDetailsPanel::passSelected);
  connect(hideUnchanged_, &QCheckBox::toggled, this, &KernelDetailsPanel::updateHiddenPasses);
  connect(rendererCombo_, &QComboBox::currentIndexChanged, this, [this](int index) {
    if (index >= 0) preferredRenderer_ = rendererCombo_->itemText(index);
    showSource();
  });
  connect(ir_, &CodeView::lineHovered, this, &KernelDetailsPanel::linkFromIr);
  connect(ir_, &CodeView::lineClicked, this, &KernelDetailsPanel::linkFromIr);
  connect(source_, &CodeView::lineHovered, this, &KernelDetailsPanel::linkFromSource);
  connect(source_, &CodeView::lineClicked, this, &KernelDetailsPanel::linkFromSource);
  clearKernel();
}

void KernelDetailsPanel::clearKernel() {
  kernelId_ = -1;
  code_ = std::make_shared<const ts::KernelCode>();
  runKernelId_ = -1;
  title_->setText("<span style='color:#6b7280'>Select a kernel in the list or the graph.</span>");
  const QSignalBlocker b1(passCombo_), b2(rendererCombo_);
  passCombo_->clear();
  rendererCombo_->clear();
  ir_->setCode("");
  for (CodeView* v : {diff_, diffLeft_, diffRight_}) {
    v->setCode("");
    v->setDiffLines({}, {});
  }
  irTabs_->setTabText(1, "Diff");
  source_->setCode("");
  map_ = {};
  linkHint_->clear();
}

void KernelDetailsPanel::showKernel(int kernelId, const QString& name, const ts::KernelRunEvent* run) {
  const bool sameKernel = kernelId == kernelId_ && run && runKernelId_ == kernelId;
  const int keepPass = sameKernel ? passCombo_->currentIndex() : -1;
  clearKernel();
  kernelId_ = kernelId;
  if (!run) {
    title_->setText(QString("<b>#%1 %2</b> <span style='color:#6b7280'>— scheduled, not launched yet</span>")
                        .arg(kernelId)
                        .arg(name.toHtmlEscaped()));
    return;
  }
  code_ = run->code ? run->code : std::make_shared<const ts::KernelCode>();
  runKernelId_ = kernelId;
  title_->setText(QString("<b>#%1 %2</b> <span style='color:#6b7280'>— %3, %4 ms%5</span>")
                      .arg(kernelId)
                      .arg(QString::fromStdString(run->name).toHtmlEscaped())
                      .arg(QString::fromStdString(run->device))
                      .arg(run->time_ms, 0, 'f', 3)
                      .arg(run->compile_cache_hit ? ", cached program"
                                                  : QString(", compiled in %1 ms").arg(run->compile_ms, 0, 'f', 1)));

  const QSignalBlocker b1(passCombo_), b2(rendererCombo_);
  for (int i = 0; i < static_cast<int>(code_->ir.size()); ++i)
    passCombo_->addItem(
        QString("%1 · %2%3").arg(i).arg(QString::fromStdString(code_->ir[i].pass), passChangedNothing(i) ? "  (no change)" : ""));
  for (const std::string& language : code_->languages()) rendererCombo_->addItem(QString::fromStdString(language));
  const int preferred = rendererFor(*code_);
  // The last snapshot is the IR that was rendered, the one the source lines map to.
  passCombo_->setCurrentIndex(keepPass >= 0 ? keepPass : passCombo_->count() - 1);
  rendererCombo_->setCurrentIndex(preferred);
  updateHiddenPasses();
  showPass(passCombo_->currentIndex());
  showSource();
}

int KernelDetailsPanel::rendererFor(const ts::KernelCode& code) const {
  // The source shown: the renderer the user picked, else the one the kernel's device compiled.
  int preferred = -1, device = 0;
  const std::vector<std::string> languages = code.languages();
  for (int i = 0; i < static_cast<int>(languages.size()); ++i) {
    if (QString::fromStdString(languages[i]) == preferredRenderer_) preferred = i;
    if (languages[i] == code.device_renderer) device = i;
  }
  return preferred >= 0 ? preferred : device;
}

KernelDetailsPanel::Listings KernelDetailsPanel::listingsOf(int kernelId, const ts::KernelRunEvent* run) const {
  Listings out;
  if (kernelId == kernelId_) {
    out.pass = code_->ir.empty() ? -1 : selectedPass();
    out.ir = out.pass >= 0 ? ir_->text() : QString();
    out.source = source_->text();
    return out;
  }
  if (!run || !run->code) return out;
  const ts::KernelCode& code = *run->code;
  if (!code.ir.empty()) {
    out.pass = static_cast<int>(code.ir.size()) - 1;
    out.ir = QString::fromStdString(code.ir.back().ir());
  }
  if (const ts::SourceListing* source = listingFor(code)) out.source = QString::fromStdString(source->code);
  return out;
}

bool KernelDetailsPanel::listingsMayHold(const ts::KernelCode& code, const QString& needle) const {
  for (QChar c : needle)
    if (c.unicode() > 127) return true;
  const QByteArray lower = needle.toLower().toLatin1();
  // Boyer-Moore-Horspool: skips ahead by up to the needle's length
  const auto lowerByte = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  const std::boyer_moore_horspool_searcher searcher(
      lower.begin(), lower.end(), [&](char c) { return std::hash<char>()(lowerByte(c)); },
      [&](char a, char b) { return lowerByte(a) == lowerByte(b); });
  auto has = [&](const std::string& text) { return std::search(text.begin(), text.end(), searcher) != text.end(); };
  if (!code.ir.empty() && has(code.ir.back().ir())) return true;
  const ts::SourceListing* source = listingFor(code);
  return source && has(source->code);
}

int KernelDetailsPanel::passCount() const { return static_cast<int>(code_->ir.size()); }
QList<CodeView*> KernelDetailsPanel::findableListings() const { return {ir_, source_}; }

void KernelDetailsPanel::revealListing(CodeView* listing) {
  if (listing == ir_) irTabs_->setCurrentWidget(ir_);
}

void KernelDetailsPanel::selectPass(int index) { passCombo_->setCurrentIndex(index); }
int KernelDetailsPanel::selectedPass() const { return passCombo_->currentIndex(); }

bool KernelDetailsPanel::passChangedNothing(int index) const {
  return index > 0 && index < passCount() && code_->ir[index].same_ir(code_->ir[index - 1]);
}

void KernelDetailsPanel::setHideUnchangedPasses(bool hide) { hideUnchanged_->setChecked(hide); }
void KernelDetailsPanel::setSideBySide(bool on) { sideBySide_->setChecked(on); }

bool KernelDetailsPanel::isPassListed(int index) const {
  const auto* list = qobject_cast<const QListView*>(passCombo_->view());
  return index >= 0 && index < passCount() && !(list && list->isRowHidden(index));
}

void KernelDetailsPanel::updateHiddenPasses() {
  auto* list = qobject_cast<QListView*>(passCombo_->view());
  if (!list) return;
  for (int i = 0; i < passCount(); ++i)
    list->setRowHidden(i, hideUnchanged_->isChecked() && passChangedNothing(i) && i != passCombo_->currentIndex());
}

void KernelDetailsPanel::showPass(int index) {
  ir_->setCode(index >= 0 && index < static_cast<int>(code_->ir.size()) ? QString::fromStdString(code_->ir[index].ir())
                                                                      : QString());
  showDiff(index);
  updateHiddenPasses();  // the pass shown stays listed
  updateLinking();
}

// The pass's input (the snapshot before it; nothing before the lowering) against its output.
void KernelDetailsPanel::showDiff(int index) {
  if (index < 0 || index >= passCount()) {
    for (CodeView* v : {diff_, diffLeft_, diffRight_}) {
      v->setCode("");
      v->setDiffLines({}, {});
    }
    irTabs_->setTabText(1, "Diff");
    return;
  }
  const QString before = index > 0 ? QString::fromStdString(code_->ir[index - 1].ir()) : QString();
  const QString after = QString::fromStdString(code_->ir[index].ir());
  if (passChangedNothing(index)) irTabs_->setTabText(1, "Diff (no change)");
  // The diff costs O((N+M)·D) for a pass that rewrites a long listing: worked out only while its tab is
  // shown (switching to the tab works it out), so that stepping with F10 does not wait for it.
  if (irTabs_->currentIndex() != 1) {
    if (!passChangedNothing(index)) irTabs_->setTabText(1, "Diff");
    return;
  }
  const UnifiedDiff diff = unifiedDiff(before, after);
  diff_->setCode(diff.text);
  diff_->setDiffLines(diff.removed, diff.added);
  if (sideBySide_->isChecked()) {  // only when shown: a second diff per pass costs a little
    const SideBySideDiff sides = sideBySideDiff(before, after);
    diffLeft_->setCode(sides.left);
    diffLeft_->setDiffLines(sides.removed, {});
    diffRight_->setCode(sides.right);
    diffRight_->setDiffLines({}, sides.added);
  }
  irTabs_->setTabText(1, diff.changed() ? QString("Diff −%1 +%2").arg(diff.removed.size()).arg(diff.added.size())
                                        : QString("Diff (no change)"));
}

QString KernelDetailsPanel::irText() const {
  const int index = passCombo_->currentIndex();
  return index >= 0 && index < passCount() ? QString::fromStdString(code_->ir[index].ir()) : QString();
}

QString KernelDetailsPanel::diffText() const {
  const int index = passCombo_->currentIndex();
  if (index < 0 || index >= passCount()) return {};
  const QString before = index > 0 ? QString::fromStdString(code_->ir[index - 1].ir()) : QString();
  const QString header = QString("--- IR before %1\n+++ IR after %1\n").arg(QString::fromStdString(code_->ir[index].pass));
  return header + unifiedDiff(before, QString::fromStdString(code_->ir[index].ir())).text;
}

const ts::SourceListing* KernelDetailsPanel::listingFor(const ts::KernelCode& code) const {
  const std::vector<std::string> languages = code.languages();
  const int renderer = rendererFor(code);
  return renderer < static_cast<int>(languages.size()) ? code.listing(languages[renderer]) : nullptr;
}

const ts::SourceListing* KernelDetailsPanel::shownListing() const {
  const int index = rendererCombo_->currentIndex();
  return index >= 0 ? code_->listing(rendererCombo_->itemText(index).toStdString()) : nullptr;
}

QString KernelDetailsPanel::sourceText() const {
  const ts::SourceListing* source = shownListing();
  return source ? QString::fromStdString(source->code) : QString();
}

QString KernelDetailsPanel::shownRenderer() const { return rendererCombo_->currentText(); }

void KernelDetailsPanel::showSource() {  // rendered now if the language is another device's
  source_->setCode(sourceText());
  updateLinking();
}

void KernelDetailsPanel::updateLinking() {
  map_ = {};
  ir_->setLinkedLines({});
  source_->setLinkedLines({});
  const int pass = passCombo_->currentIndex();
  const ts::SourceListing* source = shownListing();
  if (pass < 0 || !source) {
    linkHint_->clear();
    return;
  }
  if (pass != passCombo_->count() - 1) {
    linkHint_->setText("lines linked after the last pass only");
    return;
  }
  map_ = IrSourceMap(QString::fromStdString(code_->ir[pass].ir()), source->ir_op_line);
  linkHint_->setText(map_.empty() ? "no line map" : "hover to link lines");
}

void KernelDetailsPanel::linkFromIr(int irLine) {
  if (map_.empty() || irLine < 0) return;
  const int sourceLine = map_.sourceLineOf(irLine);
  ir_->setLinkedLines(sourceLine >= 0 ? QList<int>{irLine} : QList<int>{});
  source_->setLinkedLines(sourceLine >= 0 ? QList<int>{sourceLine} : QList<int>{});
}

void KernelDetailsPanel::linkFromSource(int sourceLine) {
  if (map_.empty() || sourceLine < 0) return;
  const QList<int> irLines = map_.irLinesOf(sourceLine);
  source_->setLinkedLines(irLines.isEmpty() ? QList<int>{} : QList<int>{sourceLine});
  ir_->setLinkedLines(irLines);
}

}  // namespace tsui
