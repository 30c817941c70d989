// QtTest of the debugger's desktop habits, offscreen: no text widens the window; the layout, the
// device and the theme survive a restart (in a temporary settings file); every toolbar button has a
// tooltip naming its shortcut and Help ▸ Keyboard Shortcuts lists every shortcut; Light and Dark
// themes reach the panels that paint their own colours.
#include <Qsci/qscilexerpython.h>

#include <QApplication>
#include <QComboBox>
#include <QDockWidget>
#include <QDir>
#include <QFile>
#include <QToolBar>
#include <QGraphicsView>
#include <QSettings>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include "core/run_model.h"
#include "core/theme.h"
#include "main_window.h"
#include "panels/buffer_inspector.h"
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
};

QTEST_MAIN(DesktopTest)
#include "test_desktop.moc"
