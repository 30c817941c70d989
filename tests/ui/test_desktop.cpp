// QtTest of the debugger's desktop habits, offscreen: no text widens the window; the layout, the
// device and the theme survive a restart (in a temporary settings file); every toolbar button has a
// tooltip naming its shortcut and Help ▸ Keyboard Shortcuts lists every shortcut; Light and Dark
// themes reach the panels that paint their own colours; File ▸ Export writes the graph as DOT and PNG
// and the listings as text; View ▸ Presentation's Explain pane and font zoom.
#include <Qsci/qscilexerpython.h>

#include <QApplication>
#include <QComboBox>
#include <QDockWidget>
#include <QDir>
#include <QFile>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QToolBar>
#include <QGraphicsView>
#include <QImageReader>
#include <QGraphicsScene>
#include <QSettings>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>
#include <QStandardItemModel>
#include <algorithm>

#include "tensorscope/device.h"

#include "core/run_model.h"
#include "core/theme.h"
#include "main_window.h"
#include "panels/buffer_inspector.h"
#include "panels/explain_panel.h"
#include "panels/graph_scene_items.h"
#include "panels/kernel_details_panel.h"
#include "panels/graph_panel.h"
#include "panels/kernel_list_panel.h"
#include "panels/properties_panel.h"
#include "panels/script_editor.h"
#include "widgets/code_view.h"

namespace {

constexpr int kRunTimeoutMs = 120000;
const QString kQuickstart = QStringLiteral(TS_SOURCE_DIR "/samples/quickstart.py");

QDockWidget* dockNamed(const tsui::MainWindow& window, const QString& name) {
  return window.findChild<QDockWidget*>(name);
}

// Runs quickstart.py on C in `window` and waits for the run and the graph.
bool runQuickstart(tsui::MainWindow& window) {
  window.show();
  if (!window.openScript(kQuickstart)) return false;
  window.setDevice("C");
  window.runScript();
  return QTest::qWaitFor([&] { return !window.isBusy(); }, kRunTimeoutMs) && window.lastRunOk() &&
         window.clusterCount() > 0;
}

QByteArray readFile(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// The graph's first node box as drawn (the scene's items), or nullptr.
const tsui::NodeItem* firstNodeItem(const tsui::MainWindow& window) {
  for (QGraphicsItem* item : window.graphPanel()->findChild<QGraphicsView*>()->scene()->items())
    if (item->type() == tsui::NodeItem::Type) return static_cast<const tsui::NodeItem*>(item);
  return nullptr;
}

}  // namespace

class DesktopTest : public QObject {
  Q_OBJECT
  QTemporaryDir settingsDir_;

 private slots:
  void initTestCase() {
    QVERIFY2(QFile::exists(QCoreApplication::applicationDirPath() + "/tensorscope-cli"), "tensorscope-cli not built");
    QSettings::setDefaultFormat(QSettings::IniFormat);  // an ini file in a temporary directory
    QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settingsDir_.path());
  }

  void cleanup() {
    tsui::setHighContrast(false);
    tsui::setFontZoomStep(0);
    tsui::applyTheme(tsui::Theme::System);
    QSettings().clear();  // each test starts from a new installation
  }

  // A 7,000-character error message once made the main window 7,212 pixels wide.
  void aLongMessageNeverWidensTheWindow() {
    QTemporaryDir dir;
    const QString path = dir.filePath("long_error.py");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("from tensorscope import Tensor\n"
               "x = (Tensor([1.0, 2.0]) * 2).numpy()\n"
               "print('y' * 7000)\n"
               "raise ValueError('x' * 7000)\n");
    file.close();

    tsui::MainWindow window;
    window.resize(1200, 800);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    const QSize before = window.size();
    QVERIFY(window.openScript(path));
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY(!window.lastRunOk());
    QVERIFY2(window.statusText().size() > 7000, qPrintable(window.statusText().left(200)));
    window.editor()->setCursorPosition(1, 0);  // the status bar's "line 2 made … → kernels …"
    QApplication::processEvents();
    QCOMPARE(window.size(), before);
    QVERIFY2(window.minimumSizeHint().width() < 1200, qPrintable(QString::number(window.minimumSizeHint().width())));
    QVERIFY(window.minimumSize().width() < 1200);

    // A runner's note on a buffer it could not read lands in the buffer inspector (a tab beside the
    // kernel's code, whose widest page sets the dock's and so the window's minimum width).
    window.bufferInspector()->setBuffers({{"output", {2}, "float32", {}, "cannot read: " + QString(7000, 'z')}});
    QApplication::processEvents();
    QCOMPARE(window.size(), before);
    QVERIFY2(window.minimumSizeHint().width() < 1200, qPrintable(QString::number(window.minimumSizeHint().width())));
  }

  void layoutDeviceAndThemeSurviveARestart() {
    QSize size;
    {
      tsui::MainWindow window;
      window.show();
      QVERIFY(QTest::qWaitForWindowExposed(&window));
      window.resize(700, 520);
      size = window.size();
      dockNamed(window, "events")->hide();
      window.addDockWidget(Qt::LeftDockWidgetArea, dockNamed(window, "properties"));
      window.setDevice("INTERP");
      window.setTheme(tsui::Theme::Dark);
      window.close();  // closing saves the settings
    }
    tsui::applyTheme(tsui::Theme::System);
    tsui::MainWindow window;
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QCOMPARE(window.size(), size);
    QVERIFY(!dockNamed(window, "events")->isVisible());
    QCOMPARE(window.dockWidgetArea(dockNamed(window, "properties")), Qt::LeftDockWidgetArea);
    QCOMPARE(window.findChild<QComboBox*>("device")->currentData().toString(), QString("INTERP"));
    QCOMPARE(tsui::currentTheme(), tsui::Theme::Dark);
    QVERIFY(tsui::isDarkTheme());

    window.resetLayout();  // View ▸ Reset Layout
    QVERIFY(dockNamed(window, "events")->isVisible());
    QCOMPARE(window.dockWidgetArea(dockNamed(window, "properties")), Qt::RightDockWidgetArea);
  }

  // The device list: C and INTERP at once (a script given on the command line starts without waiting for
  // the GPU drivers), then every device of the registry, compile-only ones disabled; a remembered device
  // the first list lacks (a GPU one) is chosen after the probe.
  void theDeviceListFillsFromTheRegistryInTheBackground() {
    const std::vector<ts::DeviceProperties> registry = ts::DeviceRegistry::list();
    {
      tsui::MainWindow window;
      auto* combo = window.findChild<QComboBox*>("device");
      QVERIFY(combo->findData("C") >= 0);
      QVERIFY(combo->findData("INTERP") >= 0);
      QTRY_VERIFY_WITH_TIMEOUT(window.devicesProbed(), 30000);
      QCOMPARE(combo->count(), static_cast<int>(registry.size()));
      for (const ts::DeviceProperties& d : registry) {
        const int at = combo->findData(QString::fromStdString(d.name));
        QVERIFY2(at >= 0, d.name.c_str());
        auto* model = qobject_cast<QStandardItemModel*>(combo->model());
        QCOMPARE(model->item(at)->isEnabled(), d.can_run);
      }
      QCOMPARE(combo->currentData().toString(), QString("C"));
    }
    const auto gpu = std::find_if(registry.begin(), registry.end(),
                                  [](const ts::DeviceProperties& d) { return d.name != "C" && d.name != "INTERP"; });
    if (gpu == registry.end()) QSKIP("no device besides C and INTERP in this build");
    QSettings().setValue("device", QString::fromStdString(gpu->name));
    tsui::MainWindow window;  // restoreSettings waits for the probe: the remembered device is chosen
    QCOMPARE(window.findChild<QComboBox*>("device")->currentData().toString(), QString::fromStdString(gpu->name));
    QVERIFY(window.devicesProbed());
  }

  void everyToolbarButtonHasATooltipWithItsShortcut() {
    tsui::MainWindow window;
    const QList<QAction*> actions = window.toolbarActions();
    QVERIFY(actions.size() >= 7);  // new, open, save, run, step, pause, stop
    for (QAction* a : actions) {
      const QString plain = a->text().remove('&');
      QVERIFY2(!a->toolTip().isEmpty() && a->toolTip() != plain, qPrintable(plain + ": " + a->toolTip()));
      const QString keys = a->shortcut().toString(QKeySequence::NativeText);
      if (!keys.isEmpty()) QVERIFY2(a->toolTip().contains(keys), qPrintable(a->toolTip() + " lacks " + keys));
    }
  }

  void theShortcutsDialogListsEveryShortcut() {
    tsui::MainWindow window;
    window.show();
    QSet<QString> expected;  // every shortcut of every action the window holds
    for (const QAction* a : window.findChildren<QAction*>())
      for (const QKeySequence& k : a->shortcuts()) expected << k.toString(QKeySequence::NativeText);
    QVERIFY(expected.contains("F5") && expected.contains("F10") && expected.contains("F11"));
    QStringList listed;
    int rows = -1;
    QTimer::singleShot(0, this, [&] {  // the dialog is modal: read it, then close it
      QWidget* dialog = QApplication::activeModalWidget();
      auto* table = dialog ? dialog->findChild<QTableWidget*>("shortcuts") : nullptr;
      if (table) {
        if (qEnvironmentVariableIsSet("TS_GUI_SHOTS")) dialog->grab().save(QDir::temp().filePath("ts_shortcuts.png"));
        rows = table->rowCount();
        for (int r = 0; r < rows; ++r) listed << table->item(r, 1)->text();
      }
      if (dialog) dialog->close();
    });
    window.showShortcuts();
    QCOMPARE(rows, static_cast<int>(window.shortcuts().size()));
    for (const QString& keys : expected) QVERIFY2(listed.contains(keys), qPrintable(keys + " is not listed"));
    // where each lives: "Run ▸ Step to Next Launch"
    bool named = false;
    for (const tsui::MainWindow::Shortcut& s : window.shortcuts()) named |= s.action == "Run ▸ Step to Next Launch";
    QVERIFY(named);
  }

  void darkThemeReachesThePanelsThatPaintTheirOwnColours() {
    tsui::MainWindow window;
    window.show();
    auto* ir = window.findChild<tsui::CodeView*>("ir");
    auto* graphView = window.graphPanel()->findChild<QGraphicsView*>();
    QVERIFY(ir && graphView);
    QVERIFY(ir->paper().lightness() > 128);
    window.setTheme(tsui::Theme::Dark);
    QVERIFY(tsui::isDarkTheme());
    QVERIFY(ir->paper().lightness() < 64);
    QVERIFY(ir->color().lightness() > 160);  // light text on the dark paper
    QVERIFY(window.editor()->lexer()->paper(0).lightness() < 64);  // the script's Python lexer
    QVERIFY(window.editor()->lexer()->color(QsciLexerPython::Comment).lightness() > 100);
    auto* source = window.findChild<tsui::CodeView*>("source");
    QVERIFY(source->lexer() && source->lexer()->paper(0).lightness() < 64);  // the C++ lexer
    QVERIFY(graphView->backgroundBrush().color().lightness() < 64);
    QCOMPARE(QSettings().value("theme").toString(), QString("dark"));
    window.setTheme(tsui::Theme::Light);
    QVERIFY(!tsui::isDarkTheme());
    QVERIFY(ir->paper().lightness() > 200);
    QVERIFY(window.editor()->lexer()->paper(0).lightness() > 200);
    QVERIFY(graphView->backgroundBrush().color().lightness() > 200);
  }

  // Edit ▸ Find over quickstart.py: line 6 (z = y.matmul(x).sum()) made the graph's SUM; kernels by name.
  void findLocatesANodeByScriptLineAndAKernelByName() {
    tsui::MainWindow window;
    window.show();
    QVERIFY(window.openScript(kQuickstart));
    window.setDevice("C");
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY2(window.lastRunOk(), qPrintable(window.consoleText()));
    int zLine = 0;
    for (int l = 0; l < window.editor()->lines() && !zLine; ++l)
      if (window.editor()->text(l).startsWith("z = y.matmul(x).sum()")) zLine = l + 1;
    QVERIFY(zLine > 0);

    const int byLine = window.find(QString("line %1").arg(zLine));
    QVERIFY2(byLine >= 1, "no node made by the matmul line is drawn");
    QVERIFY2(window.findMatchText().startsWith(QString("1 of %1 · node %").arg(byLine)), qPrintable(window.findMatchText()));
    // the match is selected as if clicked: the editor shows its line, the graph highlights it
    int cursorLine = 0, index = 0;
    window.editor()->getCursorPosition(&cursorLine, &index);
    QCOMPARE(cursorLine + 1, zLine);
    QCOMPARE(window.find(QString(":%1").arg(zLine)), byLine);
    window.findNext(+1);
    window.findNext(-1);
    QVERIFY(window.findMatchText().startsWith("1 of"));

    const QString name = QString::fromStdString(window.model().kernel(window.model().kernelIds().back())->name);
    QVERIFY(window.find(name) >= 1);
    QVERIFY2(window.findMatchText().contains("kernel #"), qPrintable(window.findMatchText()));
    QCOMPARE(QString::fromStdString(window.model().kernel(window.selectedKernel())->name).contains(name), true);
    QCOMPARE(window.find("#" + QString::number(window.model().kernelIds().front())), 1);
    QCOMPARE(window.selectedKernel(), window.model().kernelIds().front());
    QVERIFY(window.find("3x3") >= 1);  // x is 3x3
    if (qEnvironmentVariableIsSet("TS_GUI_SHOTS")) {
      window.findChild<QToolBar*>("find bar")->show();
      window.grab().save(QDir::temp().filePath("ts_find.png"));
    }
    QCOMPARE(window.find("no such op or kernel"), 0);
    QVERIFY(window.findMatchText().isEmpty());
  }

  // Find over every kernel's listings: a match in another kernel's IR or source selects that kernel (every
  // panel follows: kernel list, listings, graph) and centres the line; next / previous walk across kernels.
  void findSearchesEveryKernelsListings() {
    tsui::MainWindow window;
    QVERIFY2(runQuickstart(window), qPrintable(window.consoleText()));
    auto* ir = window.findChild<tsui::CodeView*>("ir");
    auto* source = window.findChild<tsui::CodeView*>("source");
    QVERIFY(ir && source);
    // what each kernel's listings hold when it is selected (its IR after the last pass, its source)
    const std::vector<int> ids = window.model().kernelIds();
    const QString word = "range.int32";  // no op or kernel is called that
    QMap<int, int> inKernel;
    std::vector<int> withMatches;
    int total = 0;
    for (int id : ids) {
      window.showKernel(id);
      const int n = static_cast<int>(ir->findAll(word).size() + source->findAll(word).size());
      inKernel[id] = n;
      total += n;
      if (n > 0) withMatches.push_back(id);
    }
    QVERIFY2(withMatches.size() >= 2, "quickstart has two kernels with loops");
    window.showKernel(ids.back());  // the first match is in another kernel than the one shown

    QCOMPARE(window.find(word), total);
    const int first = withMatches.front(), second = withMatches[1];
    auto followed = [&](int kernelId) {  // every panel shows the match's kernel
      return window.selectedKernel() == kernelId && window.kernelDetails()->shownKernel() == kernelId &&
             window.graphPanel()->highlightedKernel() == kernelId &&
             window.findChild<tsui::KernelListPanel*>()->selectedKernel() == kernelId;
    };
    QVERIFY2(followed(first), qPrintable(window.findMatchText()));
    QVERIFY2(window.findMatchText().startsWith(QString("1 of %1 · kernel #%2 IR line ").arg(total).arg(first)),
             qPrintable(window.findMatchText()));
    QCOMPARE(ir->selectedText(), QString("RANGE.int32"));
    int line = -1, index = -1;
    ir->getCursorPosition(&line, &index);
    QCOMPARE(line, ir->findAll(word).front().line);

    for (int i = 1; i < inKernel[first]; ++i) {  // the rest of the first kernel's matches ...
      window.findNext(+1);
      QVERIFY(followed(first));
    }
    window.findNext(+1);  // ... then the next kernel's first
    QVERIFY2(followed(second), qPrintable(window.findMatchText()));
    QVERIFY2(window.findMatchText().startsWith(QString("%1 of %2 · kernel #%3 IR line ")
                                                   .arg(inKernel[first] + 1).arg(total).arg(second)),
             qPrintable(window.findMatchText()));
    QCOMPARE(ir->selectedText(), QString("RANGE.int32"));
    window.findNext(-1);  // back across the kernels
    QVERIFY(followed(first));
    QVERIFY(window.findMatchText().startsWith(QString("%1 of %2").arg(inKernel[first]).arg(total)));
    for (int i = 1; i < inKernel[first]; ++i) window.findNext(-1);
    window.findNext(-1);  // wraps round to the last kernel's last match
    QVERIFY2(window.findMatchText().startsWith(QString("%1 of %1").arg(total)), qPrintable(window.findMatchText()));
    QVERIFY(followed(withMatches.back()));

    // the source: "for (" in the generated C of every kernel
    int inSources = 0, inIrs = 0;
    for (int id : ids) {
      window.showKernel(id);
      inSources += static_cast<int>(source->findAll("for (").size());
      inIrs += static_cast<int>(ir->findAll("for (").size());
    }
    QVERIFY(inSources >= 2);
    QCOMPARE(window.find("for ("), inSources + inIrs);
    QVERIFY2(window.findMatchText().contains("source line"), qPrintable(window.findMatchText()));
    QCOMPARE(source->selectedText(), QString("for ("));
  }

  // Find reaches into a collapsed kernel (a box): one match for the kernel, the nodes inside counted.
  void findCountsTheMatchingNodesInsideACollapsedKernel() {
    tsui::MainWindow window;
    QVERIFY2(runQuickstart(window), qPrintable(window.consoleText()));
    int sumKernel = -1;
    for (const tsui::GraphSpecNode* node : window.graphPanel()->drawnNodes())
      if (node->info.op == "SUM") sumKernel = node->kernelId;
    QVERIFY(sumKernel >= 0);
    const QString box = QString("k%1").arg(sumKernel);
    window.graphPanel()->setKernelCollapsed(sumKernel, true);  // as its "−" marker does
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy() && window.graphPanel()->layout().spec &&
                                 window.graphPanel()->layout().spec->indexOfKey(box) >= 0,
                             30000);
    QCOMPARE(window.clusterCount(), window.kernelCount() - 1);
    const int found = window.find("SUM");
    QVERIFY(found >= 1);
    bool collapsedMatch = false;
    for (int i = 0; i < found; ++i, window.findNext(+1))
      if (window.findMatchText().contains(QString("kernel #%1").arg(sumKernel)) &&
          window.findMatchText().contains("(collapsed):") && window.findMatchText().contains("matching node")) {
        collapsedMatch = true;
        QCOMPARE(window.selectedKernel(), sumKernel);  // selected, its box highlighted and centred
        QCOMPARE(window.graphPanel()->highlightedKernel(), sumKernel);
      }
    QVERIFY2(collapsedMatch, qPrintable(window.findMatchText()));
  }

  // A match far down a listing is scrolled to the middle of the view.
  void listingMatchIsCentred() {
    tsui::CodeView view;
    view.resize(600, 300);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QStringList lines;
    for (int i = 0; i < 400; ++i) lines << (i == 250 ? QString("  %%1 = EXP2 %%2  // needle").arg(i).arg(i - 1) : QString("  %%1 = ADD").arg(i));
    view.setCode(lines.join('\n'));
    const QList<tsui::CodeView::Match> hits = view.findAll("NEEDLE");
    QCOMPARE(hits.size(), 1);
    QCOMPARE(hits.front().line, 250);
    view.showMatch(hits.front().line, hits.front().column, 6);
    QCOMPARE(view.selectedText(), QString("needle"));
    QVERIFY2(std::abs(view.centreLine() - 250) <= 1, qPrintable(QString::number(view.centreLine())));
    QVERIFY(view.firstVisibleLine() > 200);
    QCOMPARE(view.findAll("ADD").size(), 399);
    QCOMPARE(view.findAll("ADD", 10).size(), 10);
    QVERIFY(view.findAll({}).isEmpty());
  }

  // File ▸ Export: the graph as DOT (one cluster per kernel) and PNG (2x is twice 1x), the listings as text.
  void exportsTheGraphAsDotAndPngAndTheListingsAsText() {
    tsui::MainWindow window;
    QVERIFY2(runQuickstart(window), qPrintable(window.consoleText()));
    QTemporaryDir dir;
    QString error;
    QVERIFY2(window.exportGraph(dir.filePath("g.dot"), tsui::MainWindow::GraphFormat::Dot, 1, &error), qPrintable(error));
    const QString dot = QString::fromUtf8(readFile(dir.filePath("g.dot")));
    QVERIFY(dot.startsWith("digraph"));
    QCOMPARE(dot.count(QRegularExpression(R"(subgraph cluster_k\d+ \{)")), window.clusterCount());
    QVERIFY2(window.exportGraph(dir.filePath("g1.png"), tsui::MainWindow::GraphFormat::Png, 1, &error), qPrintable(error));
    QVERIFY2(window.exportGraph(dir.filePath("g2.png"), tsui::MainWindow::GraphFormat::Png, 2, &error), qPrintable(error));
    QVERIFY(readFile(dir.filePath("g1.png")).startsWith("\x89PNG\r\n\x1a\n"));
    const QSize one = QImageReader(dir.filePath("g1.png")).size(), two = QImageReader(dir.filePath("g2.png")).size();
    QVERIFY2(one.width() > 20 && std::abs(two.width() - 2 * one.width()) <= 2 && std::abs(two.height() - 2 * one.height()) <= 2,
             qPrintable(QString("1x %1x%2, 2x %3x%4").arg(one.width()).arg(one.height()).arg(two.width()).arg(two.height())));
    QVERIFY(window.exportSvg(dir.filePath("g.svg"), &error));
    QVERIFY(readFile(dir.filePath("g.svg")).contains("<svg"));

    tsui::KernelDetailsPanel* details = window.kernelDetails();
    QVERIFY(details->shownKernel() >= 0 && details->passCount() > 1);
    int changed = 1;
    while (changed < details->passCount() && details->passChangedNothing(changed)) ++changed;
    QVERIFY(changed < details->passCount());
    details->selectPass(changed);
    QVERIFY(window.exportListing(dir.filePath("ir.txt"), tsui::MainWindow::Listing::Ir, &error));
    QCOMPARE(QString::fromUtf8(readFile(dir.filePath("ir.txt"))).trimmed(), details->irText().trimmed());
    QVERIFY(details->irText().startsWith("kernel "));
    QVERIFY(window.exportListing(dir.filePath("pass.diff"), tsui::MainWindow::Listing::PassDiff, &error));
    const QString diff = QString::fromUtf8(readFile(dir.filePath("pass.diff")));
    QVERIFY2(diff.startsWith("--- IR before ") && diff.contains("\n+ ") && diff.contains("\n- "), qPrintable(diff.left(300)));
    QVERIFY(window.exportListing(dir.filePath("source.c"), tsui::MainWindow::Listing::Source, &error));
    QVERIFY(QString::fromUtf8(readFile(dir.filePath("source.c"))).contains("void"));
    details->clearKernel();
    QVERIFY(!window.exportListing(dir.filePath("none.txt"), tsui::MainWindow::Listing::Ir, &error));
    QVERIFY(!error.isEmpty());
  }

  // View ▸ Presentation: the Explain pane says why the selected kernel exists and what the selected pass
  // did; Ctrl+= enlarges the listings' and the graph labels' fonts, and the zoom is remembered.
  void presentationExplainsTheKernelAndZoomsEveryFont() {
    tsui::MainWindow window;
    QVERIFY2(runQuickstart(window), qPrintable(window.consoleText()));
    window.setPresentation(true);
    QVERIFY(tsui::isHighContrast());
    QCOMPARE(QApplication::palette().color(QPalette::Base), QColor(Qt::white));  // the light theme, black on white
    QVERIFY(dockNamed(window, "explain")->isVisible());
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);  // the graph again, at the presentation's size

    const int kernelId = window.model().kernelIds().front();
    window.showKernel(kernelId);
    const ts::KernelInfo* k = window.model().kernel(kernelId);
    QVERIFY(k && !k->boundary_reasons.empty());
    tsui::ExplainPanel* explain = window.explainPanel();
    QCOMPARE(explain->shownKernel(), kernelId);
    for (const std::string& reason : k->boundary_reasons)
      QVERIFY2(explain->toPlainText().contains(QString::fromStdString(reason)), qPrintable(explain->toPlainText()));
    QVERIFY(explain->toPlainText().contains(QString("The run has %1 kernels").arg(window.model().kernelIds().size())));
    QVERIFY2(explain->toPlainText().contains("FLOP") && explain->toPlainText().contains("ran in"),
             qPrintable(explain->toPlainText()));
    tsui::KernelDetailsPanel* details = window.kernelDetails();
    int changed = 1;
    while (changed < details->passCount() && details->passChangedNothing(changed)) ++changed;
    QVERIFY(changed < details->passCount());
    details->selectPass(changed);  // as if picked in the pass list
    const QString passName = QString::fromStdString(details->code()->ir[changed].pass);
    QVERIFY2(explain->toPlainText().contains(passName + QString(" (pass %1 of").arg(changed)) &&
                 explain->toPlainText().contains("removed") && explain->toPlainText().contains("ops that appeared"),
             qPrintable(explain->toPlainText()));
    if (qEnvironmentVariableIsSet("TS_GUI_SHOTS")) window.grab().save(QDir::temp().filePath("ts_presentation.png"));

    auto* ir = window.findChild<tsui::CodeView*>("ir");
    const long irHeight = ir->SendScintilla(QsciScintilla::SCI_TEXTHEIGHT, 0);
    const tsui::NodeItem* node = firstNodeItem(window);
    QVERIFY(node);
    const int labelPixels = node->labelFont().pixelSize();
    const double boxHeight = node->boundingRect().height();
    const int zoom = window.fontZoom();
    window.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&window));
    QTest::keyClick(&window, Qt::Key_Equal, Qt::ControlModifier);
    QTest::keyClick(&window, Qt::Key_Equal, Qt::ControlModifier);
    QCOMPARE(window.fontZoom(), zoom + 2);
    QVERIFY2(ir->SendScintilla(QsciScintilla::SCI_TEXTHEIGHT, 0) > irHeight, "the IR listing's font did not grow");
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    node = firstNodeItem(window);
    QVERIFY(node);
    QVERIFY2(node->labelFont().pixelSize() > labelPixels, "the graph labels did not grow");
    QVERIFY(node->boundingRect().height() > boxHeight);  // graphviz made the boxes fit the text
    QCOMPARE(QSettings().value("presentationFontZoom").toInt(), zoom + 2);
    QTest::keyClick(&window, Qt::Key_Minus, Qt::ControlModifier);
    QCOMPARE(window.fontZoom(), zoom + 1);

    window.setPresentation(false);  // back to the normal size and palette
    QVERIFY(!tsui::isHighContrast());
    QCOMPARE(window.fontZoom(), 0);
    QVERIFY(ir->SendScintilla(QsciScintilla::SCI_TEXTHEIGHT, 0) < irHeight);
  }

  // The buffer inspector's table and the graph's legend follow the font zoom (Ctrl+= / Ctrl+-) like
  // the other panels.
  void bufferInspectorAndLegendFollowTheFontZoom() {
    tsui::MainWindow window;
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    auto legendLabel = [&window] {  // the legend is drawn again at each zoom: look it up each time
      for (QLabel* label : window.graphPanel()->legend()->findChildren<QLabel*>())
        if (label->text() == "reduce") {
          label->ensurePolished();
          return label;
        }
      return static_cast<QLabel*>(nullptr);
    };
    QVERIFY(legendLabel());
    const int legendPixels = QFontInfo(legendLabel()->font()).pixelSize();
    const int legendWidth = window.graphPanel()->legend()->sizeHint().width();
    tsui::BufferInspector* inspector = window.bufferInspector();
    auto* table = inspector->findChild<QTableView*>();
    QVERIFY(table);
    const int tablePixels = QFontInfo(inspector->tableFont()).pixelSize();
    const int rowHeight = table->verticalHeader()->defaultSectionSize();
    const int columnWidth = table->horizontalHeader()->defaultSectionSize();

    window.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&window));
    for (int i = 0; i < 3; ++i) QTest::keyClick(&window, Qt::Key_Equal, Qt::ControlModifier);
    QCOMPARE(window.fontZoom(), 3);
    QVERIFY2(QFontInfo(legendLabel()->font()).pixelSize() > legendPixels,
             qPrintable(QString("legend text %1 px").arg(QFontInfo(legendLabel()->font()).pixelSize())));
    QVERIFY(window.graphPanel()->legend()->sizeHint().width() > legendWidth);
    QVERIFY2(QFontInfo(inspector->tableFont()).pixelSize() > tablePixels, "the buffer table's font did not grow");
    QVERIFY(table->font() == inspector->tableFont());
    QVERIFY(table->verticalHeader()->defaultSectionSize() > rowHeight);
    QVERIFY(table->horizontalHeader()->defaultSectionSize() > columnWidth);

    for (int i = 0; i < 3; ++i) QTest::keyClick(&window, Qt::Key_Minus, Qt::ControlModifier);
    QCOMPARE(window.fontZoom(), 0);
    QCOMPARE(QFontInfo(legendLabel()->font()).pixelSize(), legendPixels);
    QCOMPARE(QFontInfo(inspector->tableFont()).pixelSize(), tablePixels);
    QCOMPARE(table->verticalHeader()->defaultSectionSize(), rowHeight);
  }
};

QTEST_MAIN(DesktopTest)
#include "test_desktop.moc"
