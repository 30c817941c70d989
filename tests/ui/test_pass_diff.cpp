// QtTest of the pass diffs: the line diff is a shortest edit script (checked against a longest
// common subsequence table on random listings), and in the kernel details panel each pass of a
// real kernel shows its input and output as that diff, no-op passes flagged and hidden on request.
#include <QDir>
#include <QFile>
#include <QTabWidget>
#include <QSettings>
#include <QTemporaryDir>
#include <QtTest>
#include <random>

#include "core/line_diff.h"
#include "core/run_model.h"
#include "main_window.h"
#include "panels/kernel_details_panel.h"
#include "panels/kernel_list_panel.h"
#include "widgets/code_view.h"

namespace {

constexpr int kRunTimeoutMs = 120000;
const QString kQuickstart = QStringLiteral(TS_SOURCE_DIR "/samples/quickstart.py");

// The length of a longest common subsequence, by the textbook O(N·M) table.
int lcsLength(const QStringList& a, const QStringList& b) {
  std::vector<std::vector<int>> t(a.size() + 1, std::vector<int>(b.size() + 1, 0));
  for (int i = static_cast<int>(a.size()) - 1; i >= 0; --i)
    for (int j = static_cast<int>(b.size()) - 1; j >= 0; --j)
      t[i][j] = a[i] == b[j] ? t[i + 1][j + 1] + 1 : std::max(t[i + 1][j], t[i][j + 1]);
  return t[0][0];
}

// A diff listing split back into its two sides; `removed`/`added` count the marked lines.
struct Sides {
  QStringList before, after;
  int removed = 0, added = 0;
};

Sides sidesOf(const tsui::CodeView* view, const QString& text) {
  Sides s;
  const QStringList lines = tsui::listingLines(text);
  for (int i = 0; i < lines.size(); ++i) {
    const QString body = lines[i].mid(2);
    const unsigned markers = const_cast<tsui::CodeView*>(view)->markersAtLine(i);
    if (lines[i].startsWith("- ")) {
      s.before << body;
      s.removed += markers != 0;
    } else if (lines[i].startsWith("+ ")) {
      s.after << body;
      s.added += markers != 0;
    } else {
      s.before << body;
      s.after << body;
      if (markers != 0) return {};  // an unchanged line is not coloured
    }
  }
  return s;
}

}  // namespace

class PassDiffTest : public QObject {
  Q_OBJECT
  QTemporaryDir settingsDir_;

 private slots:
  void initTestCase() {
    QSettings::setDefaultFormat(QSettings::IniFormat);
    QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settingsDir_.path());
  }

  void lineDiffIsAShortestEditScript() {
    std::mt19937 random(15);
    for (int trial = 0; trial < 3000; ++trial) {
      // short listings over a small alphabet: many repeated lines, the hard case for a diff
      QStringList a, b;
      const int alphabet = 1 + static_cast<int>(random() % 4);
      for (int i = static_cast<int>(random() % 14); i > 0; --i) a << QString("op %1").arg(random() % alphabet);
      for (int i = static_cast<int>(random() % 14); i > 0; --i) b << QString("op %1").arg(random() % alphabet);
      QStringList kept, before, after;
      int removed = 0, added = 0;
      for (const tsui::DiffLine& l : tsui::diffLines(a, b)) {
        if (l.kind != tsui::DiffLine::Added) before << a[l.oldLine];
        if (l.kind != tsui::DiffLine::Removed) after << b[l.newLine];
        if (l.kind == tsui::DiffLine::Same) QCOMPARE(a[l.oldLine], b[l.newLine]);
        removed += l.kind == tsui::DiffLine::Removed;
        added += l.kind == tsui::DiffLine::Added;
      }
      QCOMPARE(before, a);  // the script replays both listings in order
      QCOMPARE(after, b);
      const int common = lcsLength(a, b);
      QCOMPARE(removed, static_cast<int>(a.size()) - common);  // and is a shortest one
      QCOMPARE(added, static_cast<int>(b.size()) - common);
    }
    const tsui::UnifiedDiff d = tsui::unifiedDiff("a\nb\nc\n", "a\nB\nc\nd\n");
    QCOMPARE(d.text, QString("  a\n- b\n+ B\n  c\n+ d"));
    QCOMPARE(d.removed, (QList<int>{1}));
    QCOMPARE(d.added, (QList<int>{2, 4}));
    QVERIFY(!tsui::unifiedDiff("x\n", "x\n").changed());
    const tsui::SideBySideDiff sides = tsui::sideBySideDiff("a\nb\nc\n", "a\nB\nC\nc\nd\n");
    QCOMPARE(sides.left, QString("a\nb\n\nc\n"));  // b faces B, padding faces C, c faces c, padding faces d
    QCOMPARE(sides.right, QString("a\nB\nC\nc\nd"));
    QCOMPARE(sides.removed, (QList<int>{1}));
    QCOMPARE(sides.added, (QList<int>{1, 2, 4}));
    QCOMPARE(sides.leftPadding, (QList<int>{2, 4}));
  }

  void everyPassShowsWhatItChangedAndNoOpPassesHide() {
    tsui::MainWindow window;
    window.show();
    QVERIFY(window.openScript(kQuickstart));
    window.setDevice("C");
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY2(window.lastRunOk(), qPrintable(window.consoleText()));
    auto* details = window.findChild<tsui::KernelDetailsPanel*>();
    auto* list = window.findChild<tsui::KernelListPanel*>();
    QVERIFY(details && list && window.kernelCount() > 0);
    details->findChild<QTabWidget*>()->setCurrentIndex(1);  // the Diff tab: diffs are worked out while it is shown
    int changedPasses = 0, noOpPasses = 0;
    for (int row = 0; row < window.kernelCount(); ++row) {
      list->selectRow(row);
      const int passes = details->passCount();
      QVERIFY(passes >= 2);
      QStringList previous;  // the lowering's input: nothing
      for (int p = 0; p < passes; ++p) {
        details->selectPass(p);
        const QString ir = window.findChild<tsui::CodeView*>("ir")->text();
        const QStringList listing = tsui::listingLines(ir);
        const Sides s = sidesOf(details->diffView(), details->diffView()->text());
        QCOMPARE(s.before, previous);  // the diff is the pass's input...
        QCOMPARE(s.after, listing);    // ...and output,
        const int common = lcsLength(previous, listing);
        QCOMPARE(s.removed, static_cast<int>(previous.size()) - common);  // with the fewest lines marked
        QCOMPARE(s.added, static_cast<int>(listing.size()) - common);
        QCOMPARE(details->passChangedNothing(p), s.removed == 0 && s.added == 0 && p > 0);
        (details->passChangedNothing(p) ? noOpPasses : changedPasses)++;
        previous = listing;
      }
      // side by side: the input on the left, the output on the right, as many lines each
      details->setSideBySide(true);
      details->selectPass(passes - 1);
      const QString before = QString::fromStdString(window.model().kernelRun(window.selectedKernel())->code->ir[passes - 2].ir());
      const tsui::SideBySideDiff sides = tsui::sideBySideDiff(before, window.findChild<tsui::CodeView*>("ir")->text());
      QCOMPARE(details->diffLeft()->text(), sides.left);
      QCOMPARE(details->diffRight()->text(), sides.right);
      QCOMPARE(details->diffLeft()->lines(), details->diffRight()->lines());
      QStringList left = tsui::listingLines(sides.left + "\n"), right = tsui::listingLines(sides.right + "\n");
      for (int i = static_cast<int>(sides.leftPadding.size()) - 1; i >= 0; --i) left.removeAt(sides.leftPadding[i]);
      for (int i = static_cast<int>(sides.rightPadding.size()) - 1; i >= 0; --i) right.removeAt(sides.rightPadding[i]);
      QCOMPARE(left, tsui::listingLines(before));
      QCOMPARE(right, tsui::listingLines(window.findChild<tsui::CodeView*>("ir")->text()));
      details->setSideBySide(false);

      details->setHideUnchangedPasses(true);
      details->selectPass(passes - 1);
      for (int p = 0; p < passes - 1; ++p) QCOMPARE(details->isPassListed(p), !details->passChangedNothing(p));
      details->setHideUnchangedPasses(false);
      for (int p = 0; p < passes; ++p) QVERIFY(details->isPassListed(p));
    }
    // a pass picked while the IR tab is shown: the Diff tab works its diff out when it is opened
    auto* tabs = details->findChild<QTabWidget*>();
    tabs->setCurrentIndex(0);
    details->selectPass(1);
    tabs->setCurrentIndex(1);
    const auto& ir = window.model().kernelRun(window.selectedKernel())->code->ir;
    QCOMPARE(details->diffView()->text(),
             tsui::unifiedDiff(QString::fromStdString(ir[0].ir()), QString::fromStdString(ir[1].ir())).text);
    QVERIFY(changedPasses > 0);
    QVERIFY2(noOpPasses > 0, "quickstart's kernels have passes that change nothing");
    if (qEnvironmentVariableIsSet("TS_GUI_SHOTS")) {  // to look at: the Diff tab of a pass that changed lines
      for (int p = 1; p < details->passCount(); ++p)
        if (!details->passChangedNothing(p)) details->selectPass(p);
      window.grab().save(QDir::temp().filePath("ts_pass_diff.png"));
      details->setSideBySide(true);
      window.grab().save(QDir::temp().filePath("ts_pass_diff_side_by_side.png"));
    }
  }
};

QTEST_MAIN(PassDiffTest)
#include "test_pass_diff.moc"
