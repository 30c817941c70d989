#include "main_window.h"

#include "tensorscope/device.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDialog>
#include <QRegularExpression>
#include <QDialogButtonBox>
#include <QHeaderView>
#include <QTableWidget>
#include <QComboBox>
#include <QStandardItemModel>
#include <QDateTime>
#include <QElapsedTimer>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QMimeData>
#include <QSettings>
#include <QEventLoop>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QVBoxLayout>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressDialog>
#include <QSaveFile>
#include <QStatusBar>
#include <QStyle>
#include <QTimer>
#include <QToolBar>
#include <QWidgetAction>
#include <functional>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/layout_scheduler.h"
#include "core/run_model.h"
#include "panels/buffer_inspector.h"
#include "panels/console_panel.h"
#include "panels/event_browser.h"
#include "panels/explain_panel.h"
#include "panels/graph_panel.h"
#include "panels/kernel_details_panel.h"
#include "panels/kernel_list_panel.h"
#include "panels/properties_panel.h"
#include "panels/script_editor.h"
#include "panels/timeline_panel.h"
#include "widgets/code_view.h"
#include "widgets/elided_label.h"

namespace tsui {
namespace {

// While a script runs, schedules can arrive by the thousand (a training loop): rebuild and lay
// out the graph at most this often, so that the GUI and the layout thread leave the CPU to the
// script (its kernels use every core: a core the GUI takes slows them down more than its share).
// The final graph is built as soon as the run ends.
constexpr int kGraphRebuildMs = 1000;
// The lazy graph shows at most this many of its newest nodes (a script can hold thousands unrealized).
constexpr int kLazyNodeLimit = 300;
// Run ▸ Record Buffers: how much of the launches' buffers a run keeps, in all.
constexpr int kRecordBuffersMb = 64;
// File ▸ Open Recent: how many scripts and recordings it lists.
constexpr int kRecentFiles = 8;
// QMainWindow::saveState's version: bump it when the docks change, so that an old layout is not restored.
constexpr int kDockStateVersion = 3;  // 3: the Timeline dock
// View ▸ Presentation's font zoom until the user picks another (core/theme.h: steps of 10 %).
constexpr int kPresentationZoom = 4;

// "&Open…" -> "Open"
QString plainText(const QAction* a) { return a->text().remove('&').remove(QStringLiteral("…")).remove("..."); }

// Every action with a shortcut names it in its tooltip ("Run the script (F5)"), unless it already does.
void addShortcutToTooltip(QAction* a) {
  const QString keys = a->shortcut().toString(QKeySequence::NativeText);
  if (keys.isEmpty()) return;
  QString tip = a->toolTip();
  if (tip.isEmpty()) tip = plainText(a);
  if (!tip.contains("(" + keys) && !tip.contains(keys + ")") && !tip.contains(keys + ";"))
    tip += QString(" (%1)").arg(keys);
  a->setToolTip(tip);
}

// IEEE 754 binary16 to float (the buffer inspector's float16 buffers).
float halfToFloat(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float v;
  if (exponent == 0) v = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31) v = mantissa ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  return sign ? -v : v;
}

QDockWidget* dock(QMainWindow* window, const QString& title, const QString& name, QWidget* content,
                  Qt::DockWidgetArea area) {
  auto* d = new QDockWidget(title, window);
  d->setObjectName(name);
  d->setWidget(content);
  d->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable | QDockWidget::DockWidgetClosable);
  window->addDockWidget(area, d);
  return d;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      model_(new RunModel(this)),
      runner_(new RunnerProcess(this)),
      layout_(new LayoutScheduler(this)),
      graphTimer_(new QTimer(this)) {
  graphTimer_->setSingleShot(true);
  graphTimer_->setInterval(kGraphRebuildMs);
  buildPanels();
  buildActions();
  connectEngine();
  resize(1600, 1000);
  defaultDockState_ = saveState(kDockStateVersion);
  restoreSettings();
  setAcceptDrops(true);
  updateTitle();
  updateActions();
}

MainWindow::~MainWindow() {
  deviceProbe_->waitForFinished();  // the probe's thread must not outlive the window it reports to
}

bool MainWindow::devicesProbed() const { return devicesFilled_; }

void MainWindow::ensureDevicesListed() {
  if (devicesFilled_) return;
  deviceProbe_->waitForFinished();
  fillDevices(deviceProbe_->result());
}

// every device the registry offers; compile-only ones (CUDA without a GPU) are listed but disabled
void MainWindow::fillDevices(const std::vector<ts::DeviceProperties>& devices) {
  if (devicesFilled_) return;  // ensureDevicesListed() was first
  devicesFilled_ = true;
  const QString current = device_->currentData().toString();
  const QSignalBlocker blocker(device_);
  device_->clear();
  for (const ts::DeviceProperties& d : devices) {
    QString label = QString::fromStdString(d.name);
    if (!d.description.empty() && d.name != "C" && d.name != "INTERP") label += " — " + QString::fromStdString(d.description);
    device_->addItem(label, QString::fromStdString(d.name));
    if (!d.can_run) {
      auto* model = qobject_cast<QStandardItemModel*>(device_->model());
      if (model) model->item(device_->count() - 1)->setEnabled(false);
      device_->setItemData(device_->count() - 1, QString::fromStdString("compile-only: " + d.note), Qt::ToolTipRole);
    }
  }
  setDevice(current);
}

void MainWindow::buildPanels() {
  editor_ = new ScriptEditor;
  graph_ = new GraphPanel;
  kernels_ = new KernelListPanel(model_);
  details_ = new KernelDetailsPanel;
  properties_ = new PropertiesPanel(model_);
  console_ = new ConsolePanel;
  explain_ = new ExplainPanel(model_);
  events_ = new EventBrowser;
  events_->setModel(model_);
  buffers_ = new BufferInspector;
  timeline_ = new TimelinePanel(model_);
  // the console and, under it, the pause console's input line
  consoleInput_ = new QLineEdit;
  consoleInput_->setFont(console_->font());
  consoleInput_->setPlaceholderText(">>> Python in the paused frame (pause on a line: F9, Ctrl+F10)");
  consoleInput_->setToolTip("The pause console: evaluates Python in the script's frame while it is paused on a "
                            "line, e.g. x.shape, x.numpy(), print(loss.item())");
  consoleInput_->setEnabled(false);
  auto* consoleBox = new QWidget;
  auto* consoleLayout = new QVBoxLayout(consoleBox);
  consoleLayout->setContentsMargins(0, 0, 0, 0);
  consoleLayout->setSpacing(2);
  consoleLayout->addWidget(console_);
  consoleLayout->addWidget(consoleInput_);

  setCentralWidget(graph_);
  // The left column (script over its console) runs the full height, Compiler Explorer style;
  // the kernel list and the kernel's code share the bottom under the graph.
  setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);
  setDockOptions(AnimatedDocks | AllowNestedDocks | AllowTabbedDocks);
  QDockWidget* scriptDock = dock(this, "Script", "script", editor_, Qt::LeftDockWidgetArea);
  QDockWidget* consoleDock = dock(this, "Console", "console", consoleBox, Qt::LeftDockWidgetArea);
  QDockWidget* eventsDock = dock(this, "Events", "events", events_, Qt::RightDockWidgetArea);
  QDockWidget* buffersDock = dock(this, "Buffers", "buffers", buffers_, Qt::BottomDockWidgetArea);
  QDockWidget* propertiesDock = dock(this, "Properties", "properties", properties_, Qt::RightDockWidgetArea);
  QDockWidget* kernelsDock = dock(this, "Kernels", "kernels", kernels_, Qt::BottomDockWidgetArea);
  QDockWidget* detailsDock = dock(this, "Kernel IR and source", "kernel", details_, Qt::BottomDockWidgetArea);
  QDockWidget* explainDock = dock(this, "Explain", "explain", explain_, Qt::RightDockWidgetArea);
  QDockWidget* timelineDock = dock(this, "Timeline", "timeline", timeline_, Qt::BottomDockWidgetArea);
  splitDockWidget(scriptDock, consoleDock, Qt::Vertical);
  splitDockWidget(kernelsDock, detailsDock, Qt::Horizontal);
  splitDockWidget(propertiesDock, eventsDock, Qt::Vertical);
  tabifyDockWidget(detailsDock, buffersDock);
  tabifyDockWidget(detailsDock, timelineDock);
  tabifyDockWidget(propertiesDock, explainDock);
  detailsDock->raise();
  propertiesDock->raise();
  docks_ = {scriptDock, consoleDock, propertiesDock, eventsDock, kernelsDock, detailsDock, buffersDock, explainDock,
            timelineDock};
  arrangeDocks();

  // Status texts can be as long as a script's error message: elided labels show what fits, and the
  // whole text in their tooltip, so that no message widens the window.
  runStatus_ = new ElidedLabel("Ready");
  runStatus_->setObjectName("runStatus");
  statusBar()->addWidget(runStatus_, 3);
  lineInfo_ = new ElidedLabel;
  lineInfo_->setObjectName("lineInfo");
  lineInfo_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  statusBar()->addPermanentWidget(lineInfo_, 2);
}

void MainWindow::arrangeDocks() {
  QDockWidget *script = docks_[0], *console = docks_[1], *properties = docks_[2], *kernels = docks_[4],
              *details = docks_[5];
  resizeDocks({script, properties}, {440, 360}, Qt::Horizontal);
  resizeDocks({script, console}, {640, 360}, Qt::Vertical);
  resizeDocks({kernels}, {310}, Qt::Vertical);
  resizeDocks({kernels, details}, {430, 730}, Qt::Horizontal);
}

void MainWindow::buildActions() {
  QStyle* s = style();
  QMenu* file = menuBar()->addMenu("&File");
  QAction* newAction =
      file->addAction(s->standardIcon(QStyle::SP_FileIcon), "&New", QKeySequence::New, this, &MainWindow::newScript);
  QAction* openAction = file->addAction(s->standardIcon(QStyle::SP_DialogOpenButton), "&Open…", QKeySequence::Open,
                                        this, &MainWindow::openDialog);
  QAction* saveAction = file->addAction(s->standardIcon(QStyle::SP_DialogSaveButton), "&Save", QKeySequence::Save, this,
                                        &MainWindow::save);
  newAction->setToolTip("Start a new script");
  openAction->setToolTip("Open a script (.py) or a recording (.tsrec)");
  saveAction->setToolTip("Save the script");
  file->addAction("Save &As…", QKeySequence::SaveAs, this, &MainWindow::saveAs)->setToolTip("Save the script under another name");
  recentMenu_ = file->addMenu("Open &Recent");
  updateRecentMenu();
  file->addSeparator();
  saveRecordingAction_ = file->addAction("Save &Recording As…", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R), this,
                                         &MainWindow::saveRecordingDialog);
  saveRecordingAction_->setToolTip("Keep the last run (or the opened recording) as a .tsrec file");
  QMenu* exportMenu = file->addMenu("&Export");
  exportAction_ = exportMenu->addAction("Graph as &SVG…", QKeySequence(Qt::CTRL | Qt::Key_E), this,
                                        [this] { exportGraphDialog(GraphFormat::Svg); });
  exportAction_->setToolTip("Save the graph as a standalone SVG image");
  exportMenu->addAction("Graph as &PNG…", this, [this] { exportGraphDialog(GraphFormat::Png); })
      ->setToolTip("Save the graph as a PNG image at 1x, 2x or 4x (72, 144 or 288 dpi)");
  exportMenu->addAction("Graph as &DOT…", this, [this] { exportGraphDialog(GraphFormat::Dot); })
      ->setToolTip("Save the graph as graphviz DOT text (one cluster per kernel), to lay out or edit elsewhere");
  exportMenu->addSeparator();
  exportMenu->addAction("&Trace (Chrome JSON)…", this, &MainWindow::exportTraceDialog)
      ->setToolTip("Save the run's schedules, compiles and launches as Chrome trace JSON, which chrome://tracing "
                   "and ui.perfetto.dev open (as tensorscope-cli export --trace)");
  exportMenu->addAction("&Listing as Text…", this, &MainWindow::exportListingDialog)
      ->setToolTip("Save the selected kernel's IR after the selected pass, the pass's diff (unified) or the "
                   "generated source as a text file");
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close)->setToolTip("Close the window");

  QMenu* edit = menuBar()->addMenu("&Edit");
  QAction* findAction = edit->addAction("&Find…", QKeySequence::Find, this, [this] {
    findBar_->show();
    findEdit_->setFocus();
    findEdit_->selectAll();
  });
  findAction->setToolTip("Find graph nodes by op, uid (%12), shape (3x3) or script line (line 5), and kernels by "
                         "name or id (#2)");
  QAction* findNextAction = edit->addAction("Find &Next", QKeySequence::FindNext, this, [this] { findNext(+1); });
  findNextAction->setToolTip("Go to the next match of Find");
  QAction* findPreviousAction =
      edit->addAction("Find &Previous", QKeySequence::FindPrevious, this, [this] { findNext(-1); });
  findPreviousAction->setToolTip("Go to the previous match of Find");

  QMenu* run = menuBar()->addMenu("&Run");
  runAction_ = run->addAction(s->standardIcon(QStyle::SP_MediaPlay), "&Run", QKeySequence(Qt::Key_F5), this,
                              &MainWindow::continueOrRun);
  runAction_->setToolTip("Run the script (F5); when paused, continue");
  stepAction_ = run->addAction(s->standardIcon(QStyle::SP_MediaSkipForward), "Step to Next &Launch",
                               QKeySequence(Qt::Key_F10), this, &MainWindow::stepToNextLaunch);
  stepAction_->setToolTip("Pause before the next kernel launch (F10); starts the script paused if it is not running");
  stepIntoAction_ = run->addAction("Step &Into Next Stage", QKeySequence(Qt::Key_F11), this,
                                   &MainWindow::stepIntoNextStage);
  stepIntoAction_->setToolTip("Pause at the next stage: schedule, lowering, each pass, compile, launch (F11)");
  stepOutAction_ = run->addAction("Step to End of &Schedule", QKeySequence(Qt::SHIFT | Qt::Key_F11), this, [this] {
    if (runner_->isPaused()) runner_->stepToScheduleEnd();
  });
  stepOutAction_->setToolTip("Run the rest of the current schedule and pause after it (Shift+F11)");
  pauseAction_ = run->addAction(s->standardIcon(QStyle::SP_MediaPause), "&Pause", QKeySequence(Qt::Key_Pause), this,
                                [this] { runner_->pause(); });
  pauseAction_->setToolTip("Pause the running script at its next line or the engine's next stop, whichever comes "
                           "first (Pause)");
  stopAction_ = run->addAction(s->standardIcon(QStyle::SP_MediaStop), "&Stop", QKeySequence(Qt::SHIFT | Qt::Key_F5),
                               this, &MainWindow::stopScript);
  stopAction_->setToolTip("Stop the running script (Shift+F5)");
  runToCursorAction_ = run->addAction("Run to &Cursor", QKeySequence(Qt::CTRL | Qt::Key_F10), this, &MainWindow::runToCursor);
  runToCursorAction_->setToolTip("Run (or go on) until the editor's cursor line and pause there (Ctrl+F10)");
  stepBackAction_ = run->addAction("Step &Back", QKeySequence(Qt::SHIFT | Qt::Key_F10), this, [this] { stepRecording(-1); });
  stepBackAction_->setToolTip("In a finished run or a recording: make the previous launch the current event "
                              "(F10 goes forward in a recording)");
  run->addSeparator();
  QAction* toggleBreakpointAction = run->addAction("Toggle &Breakpoint", QKeySequence(Qt::Key_F9), this,
                                                   &MainWindow::toggleBreakpoint);
  toggleBreakpointAction->setToolTip("A line breakpoint on the cursor's line, or off (F9; or click the gutter)");
  run->addAction("Break on &Kernel Name…", this, [this] {
    bool ok = false;
    const QString text = QInputDialog::getText(this, "Break on kernel name",
                                               "Pause before launching a kernel whose name matches one of these "
                                               "patterns (fnmatch, comma-separated; empty: none):",
                                               QLineEdit::Normal, kernelPatterns_.join(", "), &ok);
    if (ok) setKernelBreakpoints(text.split(',', Qt::SkipEmptyParts), opBreakpoints_, nodeBreakpoints_);
  });
  run->addAction("Break on &Op…", this, [this] {
    bool ok = false;
    const QString text = QInputDialog::getText(this, "Break on op",
                                               "Pause before launching a kernel that fuses one of these ops "
                                               "(e.g. SUM, REDUCE_MAX, EXP2; comma-separated; empty: none):",
                                               QLineEdit::Normal, opBreakpoints_.join(", "), &ok);
    if (ok) setKernelBreakpoints(kernelPatterns_, text.toUpper().split(',', Qt::SkipEmptyParts), nodeBreakpoints_);
  });
  run->addAction("Break When Selected &Node Is Realized", this, [this] {
    if (!selectedNodeUid_) {
      statusBar()->showMessage("Click a node in the graph first", 4000);
      return;
    }
    QList<quint64> nodes = nodeBreakpoints_;
    if (nodes.contains(selectedNodeUid_)) nodes.removeAll(selectedNodeUid_);
    else nodes << selectedNodeUid_;
    setKernelBreakpoints(kernelPatterns_, opBreakpoints_, nodes);
  });
  run->addAction("&Remove All Breakpoints", this, [this] {
    editor_->setBreakpoints({});
    setKernelBreakpoints({}, {}, {});
  });
  run->addSeparator();
  autotuneRunAction_ = run->addAction("&Autotune Whole Run", this, [this] { autotuneRun(); });
  autotuneRunAction_->setToolTip(QString("Run the script again with the BEAM search (width %1) on every kernel; each "
                                         "trial shows in the timeline's autotune lane. Plans found before come from "
                                         "the autotune cache. For one kernel: right-click it in the kernel list or "
                                         "the graph")
                                     .arg(kAutotuneBeam));
  run->addSeparator();
  breakOnNanAction_ = run->addAction("Break on &NaN/Inf");
  breakOnNanAction_->setCheckable(true);
  breakOnNanAction_->setToolTip("Stop the run at the first kernel whose output holds a NaN or an infinity, "
                                "and mark the script line that made it");
  connect(breakOnNanAction_, &QAction::toggled, runner_, &RunnerProcess::setBreakOnNan);
  recordBuffersAction_ = run->addAction("Record &Buffers");
  recordBuffersAction_->setCheckable(true);
  recordBuffersAction_->setToolTip(QString("Keep every launch's output and inputs in the run's recording (up to %1 MB "
                                           "in all), to inspect them after the run and in the saved recording")
                                       .arg(kRecordBuffersMb));
  connect(recordBuffersAction_, &QAction::toggled, this,
          [this](bool on) { runner_->setRecordBuffersMb(on ? kRecordBuffersMb : 0); });

  QMenu* view = menuBar()->addMenu("&View");
  view->addAction("&Fit Graph", QKeySequence(Qt::CTRL | Qt::Key_0), graph_, &GraphPanel::fitGraph)
      ->setToolTip("Fit the graph to the view");
  view->addSeparator();
  for (QDockWidget* d : docks_) {
    d->toggleViewAction()->setToolTip("Show or hide the " + d->windowTitle() + " panel");
    view->addAction(d->toggleViewAction());
  }
  view->addSeparator();
  presentationAction_ = view->addAction("&Presentation", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_P), this,
                                        [this](bool on) { setPresentation(on); });
  presentationAction_->setCheckable(true);
  presentationAction_->setToolTip("For a classroom: larger fonts in every panel, a high-contrast palette and the "
                                  "Explain pane, which says in words what the selected kernel is (Ctrl+Shift+P)");
  auto zoomBy = [this](int delta) {
    zoomFonts(delta);
    statusBar()->showMessage(QString("Font size %1 %").arg(qRound(fontScale() * 100)), 2000);
  };
  QAction* zoomIn = view->addAction("Zoom &In", this, [zoomBy] { zoomBy(+1); });
  zoomIn->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Equal), QKeySequence::ZoomIn});
  zoomIn->setToolTip("Larger fonts in every panel: listings, graph labels, lists (Ctrl+=)");
  QAction* zoomOut = view->addAction("Zoom &Out", this, [zoomBy] { zoomBy(-1); });
  zoomOut->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Minus)});
  zoomOut->setToolTip("Smaller fonts in every panel (Ctrl+-)");
  view->addAction("Reset &Zoom", this, [this] { setFontZoom(isPresentation() ? kPresentationZoom : 0); })
      ->setToolTip("Fonts back to their size in this mode (normal, or Presentation's larger one)");
  view->addSeparator();
  view->addAction("&Reset Layout", this, &MainWindow::resetLayout)
      ->setToolTip("Put every panel back where it is in a new installation");
  QMenu* themes = view->addMenu("&Theme");
  auto* themeGroup = new QActionGroup(this);
  for (Theme t : {Theme::System, Theme::Light, Theme::Dark}) {
    static const char* const kTitles[] = {"&System", "&Light", "&Dark"};
    QAction* a = themes->addAction(kTitles[static_cast<int>(t)], this, [this, t] { setTheme(t); });
    a->setCheckable(true);
    a->setChecked(t == Theme::System);
    a->setToolTip(t == Theme::System ? QString("Follow the desktop's colours")
                                     : QString("%1 colours, whatever the desktop's").arg(t == Theme::Light ? "Light" : "Dark"));
    themeGroup->addAction(a);
    themeActions_ << a;
  }

  QMenu* help = menuBar()->addMenu("&Help");
  help->addAction("&Keyboard Shortcuts", QKeySequence::HelpContents, this, &MainWindow::showShortcuts)
      ->setToolTip("Every keyboard shortcut of the window");
  help->addAction("&About Tensorscope", this, [this] {
    QMessageBox::about(this, "About Tensorscope",
                       "<b>Tensorscope</b><br>A lazy tensor engine and its debugger.<br><br>"
                       "Run a script (F5) to see its lazy graph cut into kernels, each kernel's IR after "
                       "every pass, and the source generated for the device.");
  });

  QToolBar* bar = toolbar_ = addToolBar("Main");
  bar->setObjectName("main toolbar");
  bar->setMovable(false);
  bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  bar->addAction(newAction);
  bar->addAction(openAction);
  bar->addAction(saveAction);
  bar->addSeparator();
  bar->addAction(runAction_);
  bar->addAction(stepAction_);
  bar->addAction(pauseAction_);
  bar->addAction(stopAction_);
  bar->addSeparator();
  bar->addWidget(new QLabel(" Device "));
  device_ = new QComboBox;
  device_->setObjectName("device");
  // C and INTERP at once; the rest of the registry's devices when their drivers have been probed on a
  // worker thread (PoCL loads LLVM, lavapipe and NVRTC load too: ~60 ms that would delay the window and
  // the run of a script given on the command line). A device chosen before that (the remembered one,
  // --device) is listed by name meanwhile and keeps its place in the full list.
  device_->addItem("C", "C");
  device_->addItem("INTERP", "INTERP");
  deviceProbe_ = new QFutureWatcher<std::vector<ts::DeviceProperties>>(this);
  connect(deviceProbe_, &QFutureWatcherBase::finished, this, [this] { fillDevices(deviceProbe_->result()); });
  deviceProbe_->setFuture(QtConcurrent::run([] { return ts::DeviceRegistry::list(); }));
  device_->setToolTip("Device the script's tensors realize on (C: compiled C kernels; INTERP: the IR interpreter; "
                      "OPENCL / VULKAN: GPU APIs, here on PoCL and lavapipe)");
  bar->addWidget(device_);

  // The find bar, under the toolbar: shown by Ctrl+F, hidden by Escape.
  addToolBarBreak();
  findBar_ = addToolBar("Find");
  findBar_->setObjectName("find bar");
  findBar_->setMovable(false);
  findEdit_ = new QLineEdit;
  findEdit_->setObjectName("find");
  findEdit_->setPlaceholderText("Find: op, %uid, shape 3x3, line 5, kernel name, #kernel");
  findEdit_->setToolTip(findAction->toolTip());
  findEdit_->setClearButtonEnabled(true);
  findEdit_->setMaximumWidth(420);
  findBar_->addWidget(findEdit_);
  findBar_->addAction(findPreviousAction);
  findBar_->addAction(findNextAction);
  findStatus_ = new QLabel;
  findStatus_->setContentsMargins(8, 0, 0, 0);
  findBar_->addWidget(findStatus_);
  QAction* closeFind = findBar_->addAction(s->standardIcon(QStyle::SP_DialogCloseButton), "Close Find");
  closeFind->setToolTip("Close the find bar (Escape)");
  connect(closeFind, &QAction::triggered, findBar_, &QWidget::hide);
  connect(findEdit_, &QLineEdit::textChanged, this, [this](const QString& text) { find(text); });
  connect(findEdit_, &QLineEdit::returnPressed, this, [this] { findNext(+1); });
  auto* escape = new QAction(findEdit_);
  escape->setShortcut(Qt::Key_Escape);
  escape->setShortcutContext(Qt::WidgetShortcut);
  escape->setText("Close Find");
  connect(escape, &QAction::triggered, findBar_, &QWidget::hide);
  findEdit_->addAction(escape);
  findBar_->hide();

  for (QAction* a : findChildren<QAction*>()) addShortcutToTooltip(a);
  for (QMenu* m : menuBar()->findChildren<QMenu*>()) m->setToolTipsVisible(true);
}

void MainWindow::connectEngine() {
  connect(runner_, &RunnerProcess::eventsReady, this, [this] {
    std::vector<int64_t> times = runner_->takeEventTimes();
    addEvents(runner_->takeEvents(), times);
  });
  connect(model_, &RunModel::scheduleAdded, this, &MainWindow::onScheduleAdded);
  connect(model_, &RunModel::kernelRunAdded, this, &MainWindow::onKernelRunAdded);

  connect(runner_, &RunnerProcess::output, this, [this](bool isStderr, const QString& text) {
    console_->append(text, isStderr ? ConsolePanel::Stream::Stderr : ConsolePanel::Stream::Stdout);
  });
  connect(runner_, &RunnerProcess::finished, this, &MainWindow::onRunFinished);
  connect(runner_, &RunnerProcess::paused, this, &MainWindow::onPaused);
  connect(runner_, &RunnerProcess::resumed, this, [this] {
    runStatus_->setText("Running…");
    editor_->markCurrentLine(0);
    consoleInput_->setEnabled(false);
    updateActions();
  });

  connect(graphTimer_, &QTimer::timeout, this, &MainWindow::rebuildGraph);
  connect(layout_, &LayoutScheduler::laidOut, graph_, &GraphPanel::showLayout);
  connect(layout_, &LayoutScheduler::busyChanged, graph_, &GraphPanel::setLayoutBusy);
  connect(layout_, &LayoutScheduler::phaseChanged, graph_, &GraphPanel::setLayoutPhase);
  connect(graph_, &GraphPanel::cancelLayoutRequested, layout_, &LayoutScheduler::cancel);
  connect(graph_, &GraphPanel::unionModeChanged, this, &MainWindow::requestGraph);
  connect(graph_, &GraphPanel::collapseChanged, this, &MainWindow::requestGraph);
  connect(graph_, &GraphPanel::directionChanged, this, &MainWindow::requestGraph);
  connect(graph_, &GraphPanel::kernelClicked, this, [this](int id) { selectKernel(id, false); });
  connect(graph_, &GraphPanel::nodeClicked, this, &MainWindow::onNodeClicked);
  connect(kernels_, &KernelListPanel::kernelSelected, this, [this](int id) { selectKernel(id, true); });
  connect(kernels_, &KernelListPanel::autotuneRequested, this, &MainWindow::autotuneKernel);
  connect(graph_, &GraphPanel::autotuneRequested, this, &MainWindow::autotuneKernel);
  connect(timeline_, &TimelinePanel::kernelClicked, this, [this](int id) { selectKernel(id, true); });
  connect(details_, &KernelDetailsPanel::passSelected, this, &MainWindow::updateExplain);
  connect(docks_[7], &QDockWidget::visibilityChanged, this, [this](bool visible) {
    if (visible) QTimer::singleShot(0, this, &MainWindow::updateExplain);  // once its widget is shown too
  });

  connect(editor_, &QsciScintilla::modificationChanged, this, &MainWindow::updateTitle);
  connect(editor_, &ScriptEditor::breakpointsChanged, this, &MainWindow::updateBreakpoints);
  connect(editor_, &ScriptEditor::cursorLineChanged, this, &MainWindow::onCursorLine);
  connect(events_, &EventBrowser::eventSelected, this, &MainWindow::setCurrentEvent);
  connect(runner_, &RunnerProcess::buffersReady, this, &MainWindow::onBuffers);
  connect(consoleInput_, &QLineEdit::returnPressed, this, [this] {
    const QString code = consoleInput_->text();
    if (code.trimmed().isEmpty()) return;
    consoleInput_->clear();
    evaluate(code);
  });
}

// ---- running ----------------------------------------------------------------------------------

void MainWindow::runScript() { startRun(RunnerProcess::Start::Running); }

// F5: continue a paused run, else run.
void MainWindow::continueOrRun() {
  if (runner_->isPaused()) runner_->continueRun();
  else startRun(RunnerProcess::Start::Running);
}

// F10 / F11: step a paused run; a script that is not running starts paused (before its first launch /
// at its first stop).
void MainWindow::stepToNextLaunch() {
  if (runner_->isPaused()) runner_->stepToNextLaunch();
  else if (!recordingShown_.isEmpty() && !runner_->isRunning()) stepRecording(+1);  // a recording: forward
  else startRun(RunnerProcess::Start::PausedBeforeLaunch);
}

void MainWindow::runToCursor() {
  runner_->runToLine(editor_->cursorLine());
  if (!runner_->isRunning()) startRun(RunnerProcess::Start::Running);
}

void MainWindow::toggleBreakpoint() { editor_->toggleBreakpoint(editor_->cursorLine()); }

bool MainWindow::autotuneKernel(int kernelId) {
  const ts::KernelInfo* k = model_->kernel(kernelId);
  const ts::KernelRunEvent* run = model_->kernelRun(kernelId);
  const QString name = QString::fromStdString(k ? k->name : run ? run->name : std::string());
  if (runner_->isRunning() || name.isEmpty()) return false;
  runner_->setAutotune({kAutotuneBeam, name, true});
  startRun(RunnerProcess::Start::Running);
  runner_->setAutotune({});  // the runner has its environment: later runs do not search
  console_->append(QString("  autotune: BEAM=%1 over the plans of %2 (the trials are in the timeline's autotune lane)")
                       .arg(kAutotuneBeam)
                       .arg(name),
                   ConsolePanel::Stream::Info);
  return true;
}

bool MainWindow::autotuneRun() {
  if (runner_->isRunning()) return false;
  runner_->setAutotune({kAutotuneBeam, {}, false});
  startRun(RunnerProcess::Start::Running);
  runner_->setAutotune({});
  console_->append(QString("  autotune: BEAM=%1 over every kernel (plans found before come from the autotune cache)")
                       .arg(kAutotuneBeam),
                   ConsolePanel::Stream::Info);
  return true;
}

void MainWindow::setKernelBreakpoints(const QStringList& patterns, const QStringList& ops, const QList<quint64>& nodes) {
  kernelPatterns_.clear();
  for (const QString& p : patterns) kernelPatterns_ << p.trimmed();
  opBreakpoints_.clear();
  for (const QString& o : ops) opBreakpoints_ << o.trimmed();
  nodeBreakpoints_ = nodes;
  updateBreakpoints();
  QStringList said;
  if (!kernelPatterns_.isEmpty()) said << "kernels " + kernelPatterns_.join(", ");
  if (!opBreakpoints_.isEmpty()) said << "ops " + opBreakpoints_.join(", ");
  for (quint64 n : nodeBreakpoints_) said << QString("node #%1").arg(n);
  console_->append(said.isEmpty() ? "breakpoints on kernels: none" : "break before launching: " + said.join("; "),
                   ConsolePanel::Stream::Info);
}

void MainWindow::updateBreakpoints() {
  runner_->setBreakpoints({editor_->breakpointLines(), kernelPatterns_, opBreakpoints_, nodeBreakpoints_});
}

void MainWindow::evaluate(const QString& code) {
  if (!runner_->isPaused() || runner_->pausePoint().stage != "line") {
    console_->append("The console evaluates Python while the script is paused on a line (F9 sets a breakpoint, "
                     "Ctrl+F10 runs to the cursor).", ConsolePanel::Stream::Info);
    return;
  }
  console_->append(">>> " + code, ConsolePanel::Stream::Info);
  runner_->evaluate(code);
}

void MainWindow::onNodeClicked(const GraphSpecNode& node) {
  if (node.kernelId >= 0) selectKernel(node.kernelId, false);
  properties_->showNode(node);  // the node, not its kernel, is what was clicked
  selectedNodeUid_ = node.info.uid;
  // the script line that made it, selected in the editor
  const ts::SourceLocation where = model_->whereMade(node.info.uid);
  if (where.line > 0 && QString::fromStdString(where.file) == model_->scriptPath()) editor_->showLine(where.line);
}

// ---- find -------------------------------------------------------------------------------------

int MainWindow::find(const QString& query) {
  findMatches_.clear();
  findIndex_ = -1;
  const QString q = query.trimmed();
  static const QRegularExpression kLine(R"(^(?:line\s*|:)(\d+)$)", QRegularExpression::CaseInsensitiveOption);
  static const QRegularExpression kUid(R"(^(?:%|uid\s*)(\d+)$)", QRegularExpression::CaseInsensitiveOption);
  static const QRegularExpression kKernelId(R"(^#(\d+)$)");
  static const QRegularExpression kShape(R"(^\(?\[?\s*\d+(\s*[x×,]\s*\d+)*\s*,?\s*\]?\)?$)");
  const QRegularExpressionMatch line = kLine.match(q), uid = kUid.match(q), kernelId = kKernelId.match(q);
  const bool isShape = kShape.match(q).hasMatch();
  QString shape = q;
  shape.remove(QRegularExpression(R"([\[\]() ])")).replace(QRegularExpression("[×,]"), "x");
  if (shape.endsWith('x')) shape.chop(1);  // "(3,)"
  if (!q.isEmpty()) {
    auto matches = [&](const ts::GraphNodeInfo& info) {
      if (line.hasMatch()) {
        const ts::SourceLocation where = model_->whereMade(info.uid);
        return where.line == line.captured(1).toInt() && QString::fromStdString(where.file) == model_->scriptPath();
      }
      if (uid.hasMatch()) return info.uid == uid.captured(1).toULongLong();
      if (isShape) return shapeText(info.shape) == shape;
      return !kernelId.hasMatch() && QString::fromStdString(info.op).contains(q, Qt::CaseInsensitive);
    };
    for (const GraphSpecNode* node : graph_->drawnNodes()) {
      const ts::GraphNodeInfo& info = node->info;
      if (node->collapsedNodes > 0) {  // a collapsed kernel: one match for the nodes inside that match
        const auto inside = std::count_if(node->members.begin(), node->members.end(), matches);
        if (inside > 0 && node->kernelId >= 0)
          findMatches_.append({{}, node->kernelId, nullptr, -1, -1, 0,
                               QString("kernel #%1 %2 (collapsed): %3 matching node%4 inside")
                                   .arg(node->kernelId)
                                   .arg(QString::fromStdString(info.op))
                                   .arg(inside)
                                   .arg(inside == 1 ? "" : "s")});
        continue;
      }
      if (matches(info))
        findMatches_.append({node->key, -1, nullptr, -1, -1, 0, QString("node %%1 %2 %3").arg(info.uid).arg(QString::fromStdString(info.op),
                                                                                       shapeText(info.shape))});
    }
    for (int id : model_->kernelIds()) {
      const ts::KernelInfo* k = model_->kernel(id);
      const QString name = k ? QString::fromStdString(k->name) : QString();
      const bool hit = kernelId.hasMatch() ? id == kernelId.captured(1).toInt()
                                           : !line.hasMatch() && !uid.hasMatch() && !isShape && name.contains(q, Qt::CaseInsensitive);
      if (hit) findMatches_.append({{}, id, nullptr, -1, -1, 0, QString("kernel #%1 %2").arg(id).arg(name)});
    }
    // every kernel's IR and source, word by word (not for "line 5", "%12" or "#3"), in launch order:
    // the shown kernel's as shown (after the selected pass), another's as selecting it shows them.
    // Launches of one program share its listings (a training run: 22,000 launches of 114 programs),
    // so each program's listings are searched once.
    if (!line.hasMatch() && !uid.hasMatch() && !kernelId.hasMatch()) {
      const QList<CodeView*> views = details_->findableListings();  // the IR, then the source
      struct Found {
        QList<CodeView::Match> hits[2];  // in the IR, in the source
        int pass = -1;
      };
      QHash<const ts::KernelCode*, Found> searched;
      int budget = kMaxListingMatches;
      for (int id : model_->kernelIds()) {
        if (budget <= 0) break;
        const ts::KernelRunEvent* run = model_->kernelRun(id);
        const ts::KernelCode* code = run ? run->code.get() : nullptr;
        const bool shown = id == details_->shownKernel();
        if (!shown && !code) continue;
        Found found;
        if (auto it = searched.constFind(code); !shown && it != searched.constEnd()) {
          found = *it;
        } else {
          if (shown || details_->listingsMayHold(*code, q)) {
            const KernelDetailsPanel::Listings listings = details_->listingsOf(id, run);
            found.pass = listings.pass;
            found.hits[0] = CodeView::findIn(listings.ir, q, kMaxListingMatches);
            found.hits[1] = CodeView::findIn(listings.source, q, kMaxListingMatches);
          }
          if (!shown) searched.insert(code, found);
        }
        for (int v = 0; v < 2; ++v)
          for (qsizetype i = 0; i < found.hits[v].size() && budget > 0; ++i, --budget) {
            const CodeView::Match& m = found.hits[v][i];
            findMatches_.append({{}, id, views[v], m.line, m.column, static_cast<int>(q.size()),
                                 QString("kernel #%1 %2 line %3").arg(id).arg(v == 0 ? "IR" : "source").arg(m.line + 1),
                                 v == 0 ? found.pass : -1});
          }
      }
    }
  }
  if (!findMatches_.isEmpty()) findNext(+1);
  else if (findStatus_) findStatus_->setText(q.isEmpty() ? QString() : QString("no match"));
  return static_cast<int>(findMatches_.size());
}

void MainWindow::findNext(int direction) {
  if (findMatches_.isEmpty()) return;
  const int n = static_cast<int>(findMatches_.size());
  findIndex_ = findIndex_ < 0 ? (direction > 0 ? 0 : n - 1) : ((findIndex_ + direction) % n + n) % n;
  const FindMatch& m = findMatches_[findIndex_];
  if (m.listing) {  // a listing of this kernel: every panel follows the kernel, the line is centred
    if (details_->shownKernel() != m.kernelId) selectKernel(m.kernelId, true);
    if (m.pass >= 0 && details_->selectedPass() != m.pass) details_->selectPass(m.pass);
    details_->revealListing(m.listing);
    if (auto* dock = qobject_cast<QDockWidget*>(details_->parentWidget())) dock->raise();
    m.listing->showMatch(m.line, m.column, m.length);
  } else if (m.kernelId >= 0) {
    selectKernel(m.kernelId, true);
  } else {
    graph_->revealNode(m.nodeKey);
    for (const GraphSpecNode* node : graph_->drawnNodes())
      if (node->key == m.nodeKey) {
        onNodeClicked(*node);
        break;
      }
  }
  if (findStatus_) findStatus_->setText(findMatchText());
}

QString MainWindow::findMatchText() const {
  if (findIndex_ < 0 || findIndex_ >= findMatches_.size()) return {};
  return QString("%1 of %2 · %3").arg(findIndex_ + 1).arg(findMatches_.size()).arg(findMatches_[findIndex_].label);
}

// "What did line 13 become?": the nodes the line made are marked in the graph, and the status bar
// names the kernels they fell into.
void MainWindow::onCursorLine(int line) {
  const std::vector<uint64_t> made = model_->nodesMadeAt(line);
  const int shown = graph_->markNodes(QSet<quint64>(made.begin(), made.end()));
  if (made.empty()) {
    lineInfo_->clear();
    kernels_->markKernels({});
    return;
  }
  const std::vector<int> kernels = model_->kernelsFromLine(line);
  kernels_->markKernels(QSet<int>(kernels.begin(), kernels.end()));
  QStringList names;
  for (int id : kernels) {
    if (names.size() == 4) {
      names << QString("… %1 more").arg(kernels.size() - 4);
      break;
    }
    const ts::KernelInfo* k = model_->kernel(id);
    names << QString("#%1 %2").arg(id).arg(k ? QString::fromStdString(k->name) : QString());
  }
  lineInfo_->setText(QString("line %1 made %2 node%3 (%4 shown) → %5")
                         .arg(line)
                         .arg(made.size())
                         .arg(made.size() == 1 ? "" : "s")
                         .arg(shown)
                         .arg(kernels.empty() ? QString("no kernel yet (lazy)") : names.join(", ")));
}

void MainWindow::setCurrentEvent(int eventIndex) {
  const auto& events = model_->events();
  if (eventIndex < 0 || eventIndex >= static_cast<int>(events.size())) return;
  currentEvent_ = eventIndex;
  events_->setCurrentEvent(eventIndex);
  const RunModel::EventRef& ref = events[eventIndex];
  int kernelId = -1;
  if (ref.kind == RunModel::EventRef::Launch) kernelId = ref.index;
  if (ref.kind == RunModel::EventRef::Trial) kernelId = model_->trials()[ref.index].kernel_id;
  if (ref.kind == RunModel::EventRef::Schedule && !model_->kernelIdsOf(ref.index).empty())
    kernelId = model_->kernelIdsOf(ref.index).front();
  if (kernelId >= 0) {
    selectedKernel_ = kernelId;
    kernels_->selectKernel(kernelId);
    const ts::KernelInfo* k = model_->kernel(kernelId);
    details_->showKernel(kernelId, k ? QString::fromStdString(k->name) : QString(), model_->kernelRun(kernelId));
    properties_->showKernel(kernelId);
    updateExplain();
    graph_->highlightKernel(kernelId, true);
    timeline_->setCurrentKernel(kernelId);
  }
  if (!runner_->isRunning()) {  // a finished run or a recording: the buffers it recorded, if any
    const ts::KernelRunEvent* run = ref.kind == RunModel::EventRef::Launch ? model_->kernelRun(ref.index) : nullptr;
    if (run && !run->buffers.empty()) {
      showBuffers(run->kernel_id, run->buffers);
    } else {
      buffers_->clear();
      buffers_->setBuffers({{"buffers", {}, "", {}, "Buffers are read while a live run is paused before or after a "
                                                   "launch (F10, F11), and kept in runs made with Run ▸ Record "
                                                   "Buffers (tensorscope-cli --record-buffers)."}});
    }
  }
  requestGraph();  // the graph as it was then: the schedule's kernels and the lazy nodes of that moment
}

void MainWindow::stepRecording(int direction) {
  const auto& events = model_->events();
  int e = currentEvent_ < 0 ? (direction > 0 ? -1 : static_cast<int>(events.size())) : currentEvent_;
  for (e += direction; e >= 0 && e < static_cast<int>(events.size()); e += direction)
    if (events[e].kind == RunModel::EventRef::Launch) {
      setCurrentEvent(e);
      return;
    }
  statusBar()->showMessage(direction > 0 ? "No later launch" : "No earlier launch", 3000);
}

void MainWindow::stepIntoNextStage() {
  if (runner_->isPaused()) runner_->stepIntoNextStage();
  else startRun(RunnerProcess::Start::PausedAtFirstStop);
}

void MainWindow::onPaused() {
  const RunnerProcess::PausePoint& at = runner_->pausePoint();
  QString where;
  if (at.stage == "non-finite output") {  // break on NaN/Inf: the detail says it all (F5 raises it)
    where = "at a non-finite output: " + at.detail;
  } else {
    where = at.stage + (at.detail.isEmpty() ? QString() : " " + at.detail);
    if (at.kernelId >= 0) where += QString(" of kernel #%1 %2").arg(at.kernelId).arg(at.kernel);
  }
  if (at.stage == "line") where = QString("at line %1").arg(at.line);
  if (at.kernelId >= 0 && (model_->kernel(at.kernelId) || model_->kernelRun(at.kernelId)))
    selectKernel(at.kernelId, true);
  const bool again = runStatus_->text() == "Paused " + where;  // the console's evaluation is done
  runStatus_->setText("Paused " + where);
  if (!again) console_->append("⏸ paused " + where, ConsolePanel::Stream::Info);
  editor_->markCurrentLine(at.stage == "line" && at.file == model_->scriptPath() ? at.line : 0);
  consoleInput_->setEnabled(at.stage == "line");
  if (at.stage == "before launch" || at.stage == "after launch") runner_->requestBuffers();
  else buffers_->setBuffers({{"buffers", {}, "", {}, "Paused " + where + ": buffers are shown before and after a launch."}});
  if (!model_->events().empty()) {
    currentEvent_ = static_cast<int>(model_->events().size()) - 1;
    events_->setCurrentEvent(currentEvent_);
  }
  graphTimer_->stop();
  rebuildGraph();  // now, not in a second: the lazy graph as the pause left it
  updateActions();
}

// A paused launch's buffers, read by the runner on request.
void MainWindow::onBuffers(int kernelId, const QString&, const std::vector<RunnerProcess::BufferData>& data) {
  std::vector<ts::RecordedBuffer> buffers;
  for (const RunnerProcess::BufferData& d : data) {
    ts::RecordedBuffer b;
    b.role = d.role.toStdString();
    b.index = d.index;
    b.dtype = d.dtype.toStdString();
    b.numel = d.numel;
    if (!d.bytes.isEmpty() || d.numel == 0) b.bytes = std::make_shared<const std::string>(d.bytes.toStdString());
    b.note = d.note.toStdString();
    buffers.push_back(std::move(b));
  }
  showBuffers(kernelId, buffers);
}

// A launch's buffers in the inspector: their shapes come from the schedule's KernelInfo (output, inputs).
void MainWindow::showBuffers(int kernelId, const std::vector<ts::RecordedBuffer>& buffers) {
  const ts::KernelInfo* k = model_->kernel(kernelId);
  std::vector<BufferContents> shown;
  for (const ts::RecordedBuffer& d : buffers) {
    BufferContents b;
    const ts::BufferInfo* info = nullptr;
    const bool output = d.role == "output";
    if (k) {
      const std::vector<ts::BufferInfo>& infos = output ? k->outputs : k->inputs;
      if (d.index >= 0 && d.index < static_cast<int>(infos.size())) info = &infos[d.index];
    }
    // a multi-output kernel's outputs are numbered like its inputs
    const bool numbered = !output || (k && k->outputs.size() > 1);
    b.name = QString("#%1 ").arg(kernelId) + (output ? QString("output") : QString("input")) +
             (numbered ? QString(" %1").arg(d.index) : QString());
    int64_t elements = 1;
    if (info)
      for (int64_t dim : info->shape) elements *= dim;
    if (info) b.name += QString(" · uid %1").arg(info->node_uid);
    // the schedule's shape, when it holds what the launch says (a damaged recording may disagree)
    b.shape = info && elements == d.numel ? info->shape : std::vector<int64_t>{d.numel};
    b.dtype = QString::fromStdString(d.dtype);
    b.unavailable = QString::fromStdString(d.note);
    const char* p = d.bytes ? d.bytes->data() : nullptr;
    const int64_t n = p ? d.numel : 0;
    b.values.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      if (d.dtype == "float32") {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        b.values[i] = v;
      } else if (d.dtype == "int32") {
        int32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        b.values[i] = v;
      } else if (d.dtype == "bool") {
        b.values[i] = p[i] ? 1 : 0;
      } else if (d.dtype == "float16") {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        b.values[i] = halfToFloat(h);
      }
    }
    shown.push_back(std::move(b));
  }
  buffers_->setBuffers(std::move(shown));
}

void MainWindow::startRun(RunnerProcess::Start how) {
  if (runner_->isRunning()) return;
  resetRun();
  const QString path = editor_->filePath().isEmpty() ? "untitled.py" : editor_->filePath();
  console_->append(QString("▶ %1 on %2").arg(QFileInfo(path).fileName(), device_->currentData().toString()),
                   ConsolePanel::Stream::Info);
  runStatus_->setText("Running…");
  recordingShown_.clear();
  model_->setScriptPath(path);
  events_->setScriptText(editor_->text());
  runner_->setBreakpoints({editor_->breakpointLines(), kernelPatterns_, opBreakpoints_, nodeBreakpoints_});
  runner_->start(path, editor_->text(), device_->currentData().toString(), how);
  updateActions();
}

void MainWindow::stopScript() {
  if (!runner_->isRunning()) return;
  runner_->stop();
  runStatus_->setText("Stopping…");
}

void MainWindow::resetRun() {
  console_->clearConsole();
  editor_->clearError();
  model_->clear();
  kernels_->clearKernels();
  details_->clearKernel();
  properties_->clearSelection();
  explain_->clearKernel();
  graphTimer_->stop();
  layout_->cancel();
  graph_->clearGraph("Running…");
  graph_->highlightKernel(-1, false);
  graph_->highlightNode({});
  graph_->markNodes({});
  buffers_->clear();
  editor_->markCurrentLine(0);
  consoleInput_->setEnabled(false);
  lineInfo_->clear();
  selectedKernel_ = -1;
  selectedNodeUid_ = 0;
  currentEvent_ = -1;
  graphSchedule_ = -1;
}

void MainWindow::onRunFinished(const ScriptOutcome& outcome) {
  lastRunOk_ = outcome.ok;
  editor_->markCurrentLine(0);
  consoleInput_->setEnabled(false);
  const int kernels = static_cast<int>(model_->kernelIds().size());
  const QString summary =
      QString("%1 kernel%2, %3 s").arg(kernels).arg(kernels == 1 ? "" : "s").arg(outcome.seconds, 0, 'f', 2);
  if (outcome.ok) {
    console_->append("✓ finished: " + summary, ConsolePanel::Stream::Info);
    runStatus_->setText("Finished: " + summary);
  } else if (outcome.ended == "stopped") {
    const QString how = outcome.error.startsWith("stopped:") ? outcome.error : QString("stopped");
    console_->append("■ " + how + ": " + summary, ConsolePanel::Stream::Info);
    runStatus_->setText("Stopped");
  } else {
    // A script error's traceback came with the script's stderr; a crash is said here in words.
    editor_->markError(outcome.errorLine, outcome.error);
    const QString where = outcome.errorLine > 0 ? QString(" (line %1)").arg(outcome.errorLine) : QString();
    console_->append("✗ " + outcome.error + where, ConsolePanel::Stream::Info);
    runStatus_->setText("Failed: " + outcome.error + where);
  }
  if (graphTimer_->isActive()) {
    graphTimer_->stop();
    rebuildGraph();
  } else if (model_->scheduleCount() == 0) {
    graph_->clearGraph(outcome.ok ? "The script realized no tensor: there is no graph to show."
                                  : "The script stopped before realizing any tensor.");
  }
  // Show something in the kernel panels right away: the last kernel is where a run ends.
  if (selectedKernel_ < 0 && kernels > 0) selectKernel(model_->kernelIds().back(), false);
  updateActions();
}

void MainWindow::addEvents(std::vector<ts::Event> events, const std::vector<int64_t>& timesNs) {
  addingEvents_ = true;
  launchedInBatch_.clear();
  for (size_t i = 0; i < events.size(); ++i) {
    ts::Event& event = events[i];
    const int64_t t = i < timesNs.size() ? timesNs[i] : -1;
    if (auto* schedule = std::get_if<ts::ScheduleEvent>(&event))
      model_->addSchedule(std::move(*schedule), t);
    else if (auto* run = std::get_if<ts::KernelRunEvent>(&event)) {
      if (runner_->isPaused())  // only the pause console runs anything while the script is paused
        console_->append(QString("  ↳ the console ran kernel #%1 %2").arg(run->kernel_id).arg(QString::fromStdString(run->name)),
                         ConsolePanel::Stream::Info);
      model_->addKernelRun(std::move(*run), t);
    }
    else if (auto* nodes = std::get_if<ts::NodesEvent>(&event)) {
      model_->addNodes(std::move(*nodes), t);
      requestGraph();  // the lazy graph grew
    }
    else if (auto* out = std::get_if<ts::ScriptOutputEvent>(&event)) {
      console_->append(QString::fromStdString(out->text),
                       out->stream == ts::ScriptOutputEvent::Stderr ? ConsolePanel::Stream::Stderr
                                                                    : ConsolePanel::Stream::Stdout);
      model_->addOutput(std::move(*out), t);
    }
    else if (auto* trial = std::get_if<ts::AutotuneTrialEvent>(&event))
      model_->addTrial(std::move(*trial), t);
  }
  addingEvents_ = false;
  kernels_->updateKernelRuns(launchedInBatch_);
  launchedInBatch_.clear();
  events_->refresh();
  timeline_->refresh();
}

// ---- engine events ----------------------------------------------------------------------------

void MainWindow::onScheduleAdded(int scheduleIndex) {
  kernels_->addSchedule(scheduleIndex);
  requestGraph();
}

void MainWindow::onKernelRunAdded(int kernelId) {
  if (addingEvents_) launchedInBatch_.push_back(kernelId);  // the list is updated once after the batch
  else kernels_->updateKernelRun(kernelId);
  if (kernelId == selectedKernel_) selectKernel(kernelId, false);  // the launch adds IR, source, time
}

void MainWindow::requestGraph() {
  if (!graphTimer_->isActive()) graphTimer_->start();
}

void MainWindow::rebuildGraph() {
  GraphSpec spec = buildViewGraph(*model_, graph_->unionMode(), selectedKernel_, graph_->toggledKernels());
  spec.leftToRight = graph_->leftToRight();
  spec.fontScale = fontScale();
  graphSchedule_ = spec.schedule;
  // The lazy graph of the current event (the latest while a run goes on): nodes made, not computed yet.
  const int last = static_cast<int>(model_->events().size()) - 1;
  const int at = runner_->isRunning() || currentEvent_ < 0 ? last : currentEvent_;
  if (at >= 0) {
    const RunModel::LazyGraph lazy = model_->lazyGraphAt(at, kLazyNodeLimit);
    const int drawn = lazy.pending.empty() ? 0 : addLazyGraph(spec, *model_, lazy.pending, lazy.inputs);
    if (drawn > 0) {
      if (!spec.description.isEmpty()) spec.description += " · ";
      spec.description += lazy.total > kLazyNodeLimit
                              ? QString("%1 lazy nodes (the newest %2 shown, dashed)").arg(lazy.total).arg(kLazyNodeLimit)
                              : QString("%1 lazy node%2 (dashed): not computed yet").arg(drawn).arg(drawn == 1 ? "" : "s");
    }
  }
  applyCollapse(spec, graph_->toggledKernels());  // a large graph: one box per kernel unless expanded
  if (spec.nodes.empty()) {
    layout_->cancel();
    graph_->clearGraph(model_->scheduleCount() == 0 ? "This run scheduled no kernels." : "The schedule has no nodes.");
    return;
  }
  graph_->setDescription(spec.description);
  layout_->request(std::move(spec));
}

void MainWindow::selectKernel(int kernelId, bool centreGraph) {
  selectedKernel_ = kernelId;
  if (const int e = model_->eventOfLaunch(kernelId); e >= 0) {  // one current event for every panel
    currentEvent_ = e;
    events_->setCurrentEvent(e);
  }
  kernels_->selectKernel(kernelId);
  const ts::KernelInfo* k = model_->kernel(kernelId);
  details_->showKernel(kernelId, k ? QString::fromStdString(k->name) : QString(), model_->kernelRun(kernelId));
  properties_->showKernel(kernelId);
  updateExplain();
  // When the graph shows one schedule only, a kernel of another schedule needs another graph.
  if (graphSchedule_ >= 0 && model_->scheduleOfKernel(kernelId) != graphSchedule_) requestGraph();
  graph_->highlightKernel(kernelId, centreGraph);
  timeline_->setCurrentKernel(kernelId);
}

// ---- files ------------------------------------------------------------------------------------

bool MainWindow::openScript(const QString& path) {
  QString error;
  if (!editor_->loadFile(path, &error)) {
    QMessageBox::warning(this, "Open script", QString("Cannot open %1:\n%2").arg(path, error));
    return false;
  }
  recordingShown_.clear();
  addRecent(path);
  updateTitle();
  return true;
}

bool MainWindow::openFile(const QString& path) {
  QFile file(path);
  QByteArray head;
  if (file.open(QIODevice::ReadOnly)) head = file.read(16);
  if (path.endsWith(".tsrec", Qt::CaseInsensitive) || head.startsWith(QByteArray("SQLite format 3\0", 16))) {
    QString error;
    if (openRecording(path, &error)) return true;
    QMessageBox::warning(this, "Open recording", error);
    return false;
  }
  return openScript(path);
}

namespace {
struct LoadedRecording {
  ts::RunInfo run;
  std::vector<ts::Event> events;
  std::vector<int64_t> times;  // ns since the start of the run
  QString error;
};
}  // namespace

bool MainWindow::openRecording(const QString& path, QString* error) {
  if (runner_->isRunning()) {
    if (error) *error = "Stop the run before opening a recording.";
    return false;
  }
  QElapsedTimer clock;
  clock.start();
  // SQLite and the decoding run on a worker while a local event loop keeps the window painting.
  QFutureWatcher<LoadedRecording> watcher;
  QEventLoop loop;
  connect(&watcher, &QFutureWatcher<LoadedRecording>::finished, &loop, &QEventLoop::quit);
  watcher.setFuture(QtConcurrent::run([file = path.toStdString()] {
    LoadedRecording r;
    try {
      ts::RecordingReader reader(file);
      r.run = reader.run();
      r.events.reserve(reader.event_count());
      r.times.reserve(reader.event_count());
      reader.read_events(
          [&](uint64_t, int64_t t, const ts::Event& e) {
            r.events.push_back(e);
            r.times.push_back(t);
          },
          /*thin_schedules=*/true);  // RunModel instantiates the schedules it shows
    } catch (const std::exception& e) {
      r.error = QString::fromUtf8(e.what());
    }
    return r;
  }));
  if (!watcher.isFinished()) loop.exec(QEventLoop::ExcludeUserInputEvents);
  LoadedRecording loaded = watcher.result();
  if (!loaded.error.isEmpty()) {
    if (error) *error = loaded.error;
    return false;
  }
  if (!maybeSave()) {
    if (error) *error = "Opening the recording was cancelled.";
    return false;
  }
  resetRun();
  recordingShown_ = path;
  // The recorded script, as a new unsaved text: saving it never overwrites the user's file by surprise.
  editor_->setText(QString::fromStdString(loaded.run.script_text));
  editor_->setFilePath({});
  editor_->setModified(false);
  model_->setScriptPath(QString::fromStdString(loaded.run.script_path));
  events_->setScriptText(editor_->text());
  const QString script = QFileInfo(QString::fromStdString(loaded.run.script_path)).fileName();
  const QDateTime started = QDateTime::fromMSecsSinceEpoch(loaded.run.start_time_ns / 1000000);
  console_->append(QString("▶ recording %1: %2 on %3, %4").arg(QFileInfo(path).fileName(), script,
                                                            QString::fromStdString(loaded.run.device),
                                                            started.toString(Qt::ISODate)),
                   ConsolePanel::Stream::Info);
  const size_t events = loaded.events.size();
  addEvents(std::move(loaded.events), loaded.times);
  ScriptOutcome outcome;
  outcome.ended = QString::fromStdString(loaded.run.ended);
  outcome.ok = loaded.run.ended == "finished";
  outcome.error = loaded.run.ended.empty() ? QString("cut off: the program died without saying how")
                                           : QString::fromStdString(loaded.run.end_message);
  if (loaded.run.end_time_ns > loaded.run.start_time_ns)
    outcome.seconds = (loaded.run.end_time_ns - loaded.run.start_time_ns) / 1e9;
  onRunFinished(outcome);
  lastOpen_ = {static_cast<qint64>(events), clock.elapsed() / 1000.0};
  console_->append(QString("  %1 events read and shown in %2 s").arg(events).arg(lastOpen_.seconds, 0, 'f', 2),
                   ConsolePanel::Stream::Info);
  addRecent(path);
  updateTitle();
  return true;
}

bool MainWindow::saveRecording(const QString& path, QString* error) {
  const QString from = recordingShown_.isEmpty() ? runner_->recordingPath() : recordingShown_;
  if (from.isEmpty() || !QFileInfo::exists(from)) {
    if (error) *error = "There is no recording yet: run a script first.";
    return false;
  }
  if (QFileInfo(from).absoluteFilePath() == QFileInfo(path).absoluteFilePath()) return true;
  try {
    ts::copy_recording(from.toStdString(), path.toStdString());
  } catch (const std::exception& e) {
    if (error) *error = QString::fromUtf8(e.what());
    return false;
  }
  return true;
}

void MainWindow::saveRecordingDialog() {
  const QString base = editor_->filePath().isEmpty() ? "run" : QFileInfo(editor_->filePath()).completeBaseName();
  const QString path =
      QFileDialog::getSaveFileName(this, "Save recording as", base + ".tsrec", "Tensorscope recordings (*.tsrec)");
  if (path.isEmpty()) return;
  QString error;
  if (saveRecording(path, &error)) {
    statusBar()->showMessage("Saved the recording to " + path, 4000);
    addRecent(path);
  } else {
    QMessageBox::warning(this, "Save recording", error);
  }
}

void MainWindow::addRecent(const QString& path) {
  QSettings settings;
  QStringList recent = settings.value("recentFiles").toStringList();
  const QString absolute = QFileInfo(path).absoluteFilePath();
  recent.removeAll(absolute);
  recent.prepend(absolute);
  while (recent.size() > kRecentFiles) recent.removeLast();
  settings.setValue("recentFiles", recent);
  updateRecentMenu();
}

void MainWindow::updateRecentMenu() {
  recentMenu_->clear();
  const QStringList recent = QSettings().value("recentFiles").toStringList().mid(0, kRecentFiles);
  for (int i = 0; i < recent.size(); ++i) {
    const QString path = recent[i];
    QAction* a = recentMenu_->addAction(QString("&%1 %2").arg(i + 1).arg(QFileInfo(path).fileName()), this, [this, path] {
      if (path.endsWith(".tsrec", Qt::CaseInsensitive) || maybeSave()) openFile(path);
    });
    a->setToolTip(path);
  }
  if (!recent.isEmpty()) {
    recentMenu_->addSeparator();
    recentMenu_->addAction("&Clear Recent", this, [this] {
      QSettings().remove("recentFiles");
      updateRecentMenu();
    })->setToolTip("Forget the recently opened scripts and recordings");
  }
  recentMenu_->setEnabled(!recent.isEmpty());
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls() && event->mimeData()->urls().first().isLocalFile()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const QString path = event->mimeData()->urls().first().toLocalFile();
  event->acceptProposedAction();
  if (path.endsWith(".tsrec", Qt::CaseInsensitive) || maybeSave()) openFile(path);
}

void MainWindow::newScript() {
  if (!maybeSave()) return;
  editor_->setText("from tensorscope import Tensor\n\n");
  editor_->setFilePath({});
  editor_->setModified(false);
  updateTitle();
}

void MainWindow::openDialog() {
  if (!maybeSave()) return;
  const QString dir = editor_->filePath().isEmpty() ? QString() : QFileInfo(editor_->filePath()).absolutePath();
  const QString path = QFileDialog::getOpenFileName(
      this, "Open script or recording", dir,
      "Scripts and recordings (*.py *.tsrec);;Python scripts (*.py);;Tensorscope recordings (*.tsrec);;All files (*)");
  if (!path.isEmpty()) openFile(path);
}

bool MainWindow::save() {
  if (editor_->filePath().isEmpty()) return saveAs();
  QString error;
  if (!editor_->saveFile(editor_->filePath(), &error)) {
    QMessageBox::warning(this, "Save script", QString("Cannot save %1:\n%2").arg(editor_->filePath(), error));
    return false;
  }
  statusBar()->showMessage("Saved " + editor_->filePath(), 3000);
  updateTitle();
  return true;
}

bool MainWindow::saveAs() {
  const QString path =
      QFileDialog::getSaveFileName(this, "Save script as", editor_->filePath(), "Python scripts (*.py)");
  if (path.isEmpty()) return false;
  editor_->setFilePath(path);
  return save();
}

bool MainWindow::maybeSave() {
  if (!editor_->isModified()) return true;
  const auto answer = QMessageBox::question(
      this, "Unsaved changes",
      QString("Save the changes to %1?")
          .arg(editor_->filePath().isEmpty() ? "the new script" : QFileInfo(editor_->filePath()).fileName()),
      QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
  if (answer == QMessageBox::Save) return save();
  return answer == QMessageBox::Discard;
}

void MainWindow::exportGraphDialog(GraphFormat format) {
  const QString base = editor_->filePath().isEmpty() ? "graph" : QFileInfo(editor_->filePath()).completeBaseName();
  double scale = 1;
  if (format == GraphFormat::Png) {
    bool ok = false;
    const QString pick = QInputDialog::getItem(this, "Export graph as PNG",
                                               "Scale (1x: 72 dpi, one pixel per point of the layout):",
                                               {"1x", "2x", "4x"}, 1, false, &ok);
    if (!ok) return;
    scale = pick.chopped(1).toDouble();
  }
  static const char* const kTitles[] = {"Export graph as SVG", "Export graph as PNG", "Export graph as DOT"};
  static const char* const kSuffixes[] = {".svg", ".png", ".dot"};
  static const char* const kFilters[] = {"SVG images (*.svg)", "PNG images (*.png)", "graphviz DOT files (*.dot *.gv)"};
  const int f = static_cast<int>(format);
  const QString path = QFileDialog::getSaveFileName(this, kTitles[f], base + kSuffixes[f], kFilters[f]);
  if (path.isEmpty()) return;
  QString error;
  if (exportGraph(path, format, scale, &error))
    statusBar()->showMessage("Exported " + path, 4000);
  else
    QMessageBox::warning(this, "Export graph", error);
}

bool MainWindow::exportGraph(const QString& path, GraphFormat format, double scale, QString* error) {
  const std::shared_ptr<const GraphSpec> spec = graph_->layout().spec;
  const QByteArray dot = spec && !spec->nodes.empty() ? toDot(*spec) : QByteArray();
  if (dot.isEmpty()) {
    if (error) *error = "There is no graph to export yet: run a script first.";
    return false;
  }
  QByteArray data = dot;
  if (format != GraphFormat::Dot) {
    // graphviz lays the graph out again for the renderer; for a big graph that takes seconds,
    // so it runs on a worker while a local event loop keeps the window painting.
    QProgressDialog progress(format == GraphFormat::Png ? "Rendering the graph as PNG…" : "Rendering the graph as SVG…",
                             QString(), 0, 0, this);
    progress.setWindowModality(Qt::WindowModal);
    progress.setMinimumDuration(400);
    QString renderError;
    QFutureWatcher<QByteArray> watcher;
    QEventLoop loop;
    connect(&watcher, &QFutureWatcher<QByteArray>::finished, &loop, &QEventLoop::quit);
    watcher.setFuture(QtConcurrent::run([dot, format, scale, &renderError] {
      return format == GraphFormat::Png ? renderPng(dot, scale, &renderError) : renderSvg(dot, &renderError);
    }));
    if (!watcher.isFinished()) loop.exec(QEventLoop::ExcludeUserInputEvents);
    data = watcher.result();
    if (data.isEmpty()) {
      if (error) *error = renderError.isEmpty() ? QString("graphviz produced no image") : renderError;
      return false;
    }
  }
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly) || file.write(data) != data.size() || !file.commit()) {
    if (error) *error = QString("Cannot write %1: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

void MainWindow::exportTraceDialog() {
  const QString base = QFileInfo(model_->scriptPath()).completeBaseName();
  const QString path = QFileDialog::getSaveFileName(this, "Export trace", (base.isEmpty() ? "trace" : base) + ".json",
                                                    "Chrome trace JSON (*.json)");
  if (path.isEmpty()) return;
  QString error;
  if (exportTrace(path, &error)) statusBar()->showMessage("Wrote the trace to " + path, 5000);
  else QMessageBox::warning(this, "Export trace", error);
}

bool MainWindow::exportTrace(const QString& path, QString* error) {
  if (model_->events().empty()) {
    if (error) *error = "There is no run to export: run a script or open a recording first.";
    return false;
  }
  return timeline_->exportTrace(path, model_->scriptPath(), error);
}

void MainWindow::exportListingDialog() {
  static const QStringList kChoices = {"IR after the selected pass", "The selected pass's diff (unified)",
                                       "Generated source"};
  bool ok = false;
  const QString pick = QInputDialog::getItem(this, "Export listing as text", "Listing of the selected kernel:", kChoices,
                                             0, false, &ok);
  if (!ok) return;
  const auto listing = static_cast<Listing>(kChoices.indexOf(pick));
  const ts::KernelInfo* k = model_->kernel(selectedKernel_);
  QString base = k ? QString::fromStdString(k->name) : QString("kernel");
  const QString suffix = listing == Listing::Ir ? ".ir.txt" : listing == Listing::PassDiff ? ".diff" : ".txt";
  const QString path = QFileDialog::getSaveFileName(this, "Export listing as text", base + suffix,
                                                    "Text files (*.txt *.diff);;All files (*)");
  if (path.isEmpty()) return;
  QString error;
  if (exportListing(path, listing, &error))
    statusBar()->showMessage("Exported " + path, 4000);
  else
    QMessageBox::warning(this, "Export listing", error);
}

bool MainWindow::exportListing(const QString& path, Listing listing, QString* error) {
  const QString text = listing == Listing::Ir         ? details_->irText()
                       : listing == Listing::PassDiff ? details_->diffText()
                                                      : details_->sourceText();
  if (text.isEmpty()) {
    if (error)
      *error = details_->shownKernel() < 0 ? QString("Select a kernel first.")
                                           : QString("The selected kernel has no such listing (it has not run yet).");
    return false;
  }
  QByteArray data = text.toUtf8();
  if (!data.endsWith('\n')) data += '\n';
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly) || file.write(data) != data.size() || !file.commit()) {
    if (error) *error = QString("Cannot write %1: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

// ---- presentation -----------------------------------------------------------------------------

bool MainWindow::isPresentation() const { return presentationAction_->isChecked(); }
int MainWindow::fontZoom() const { return fontZoomStep(); }

void MainWindow::setPresentation(bool on, bool remember) {
  presentationAction_->setChecked(on);
  setHighContrast(on);
  setTheme(currentTheme(), false);  // the palette again, with or without the high contrast
  QSettings settings;
  if (remember) settings.setValue("presentationMode", on);
  setFontZoom(settings.value(on ? "presentationFontZoom" : "fontZoom", on ? kPresentationZoom : 0).toInt());
  if (on) {  // the Explain pane in front, wide enough for its sentences at the larger size
    docks_[7]->show();
    docks_[7]->raise();
    if (!docks_[7]->isFloating()) resizeDocks({docks_[7]}, {560}, Qt::Horizontal);
  }
}

void MainWindow::setFontZoom(int step) {
  setFontZoomStep(step);
  QSettings().setValue(isPresentation() ? "presentationFontZoom" : "fontZoom", fontZoomStep());
  applyFontZoom();
}

void MainWindow::applyFontZoom() {
  static const QFont base = QApplication::font();  // before any window zoomed it
  QFont font = base;
  if (font.pointSizeF() > 0) font.setPointSizeF(font.pointSizeF() * fontScale());
  else font.setPixelSize(qRound(font.pixelSize() * fontScale()));
  QApplication::setFont(font);
  // What sets its own font: the listings (Scintilla's zoom), the console, the buffer table, the graph's
  // legend and labels.
  for (QsciScintilla* view : findChildren<QsciScintilla*>()) CodeView::applyFontZoom(view);
  console_->setFont(CodeView::zoomedCodeFont());
  consoleInput_->setFont(CodeView::zoomedCodeFont());
  kernels_->verticalHeader()->setDefaultSectionSize(QFontMetrics(font).height() + 6);
  buffers_->applyFontZoom();
  graph_->applyFontZoom();
  if (!model_->scheduleCount() == 0) {
    graphTimer_->stop();
    rebuildGraph();  // the boxes grow with their labels: a new layout
  }
}

void MainWindow::updateExplain() {
  if (selectedKernel_ < 0) return explain_->clearKernel();
  // The pass's diff costs O((N+M)·D): worked out only while the pane is shown (showing it calls this),
  // so that stepping with F10 does not wait for it.
  if (!explain_->isVisible()) return;
  explain_->explain(selectedKernel_, details_->shownKernel() == selectedKernel_ ? details_->code() : nullptr,
                    details_->selectedPass());
}

// ---- window state -----------------------------------------------------------------------------

void MainWindow::setDevice(const QString& device) {
  // by registry name ("OPENCL" selects "OPENCL:0")
  QString want = device.toUpper();
  int found = device_->findData(want);
  if (found < 0) found = device_->findData(want + ":0");
  if (found < 0 && !devicesFilled_) {
    ensureDevicesListed();
    found = device_->findData(want);
    if (found < 0) found = device_->findData(want + ":0");
  }
  if (found < 0) {
    device_->addItem(device, device);
    found = device_->count() - 1;
  }
  device_->setCurrentIndex(found);
}

void MainWindow::updateTitle() {
  QString name = editor_->filePath().isEmpty() ? "untitled.py" : QFileInfo(editor_->filePath()).fileName();
  if (!recordingShown_.isEmpty() && editor_->filePath().isEmpty())
    name = QFileInfo(recordingShown_).fileName() + " (recording)";
  setWindowTitle(QString("Tensorscope — %1[*]").arg(name));
  setWindowModified(editor_->isModified());
}

void MainWindow::updateActions() {
  const bool running = runner_->isRunning(), paused = runner_->isPaused();
  runAction_->setEnabled(!running || paused);
  runAction_->setText(paused ? "&Continue" : "&Run");
  stepAction_->setEnabled(!running || paused);
  stepIntoAction_->setEnabled(!running || paused);
  pauseAction_->setEnabled(running && !paused);
  stepOutAction_->setEnabled(paused);
  runToCursorAction_->setEnabled(!running || paused);
  autotuneRunAction_->setEnabled(!running);
  stepBackAction_->setEnabled(!running && !model_->events().empty());
  stopAction_->setEnabled(running);
  saveRecordingAction_->setEnabled(!running && (!recordingShown_.isEmpty() || !runner_->recordingPath().isEmpty()));
  device_->setEnabled(!running);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (!maybeSave()) return event->ignore();
  runner_->stop();  // RunnerProcess's destructor kills a runner that is still there
  saveSettings();
  event->accept();
}

void MainWindow::saveSettings() const {
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/docks", saveState(kDockStateVersion));
  settings.setValue("device", device_->currentData().toString());
}

void MainWindow::restoreSettings() {
  QSettings settings;
  restoreGeometry(settings.value("window/geometry").toByteArray());
  restoreState(settings.value("window/docks").toByteArray(), kDockStateVersion);
  const Theme theme = themeFromName(settings.value("theme").toString());
  if (theme != currentTheme()) setTheme(theme);
  else themeActions_[static_cast<int>(theme)]->setChecked(true);
  const QString device = settings.value("device", "C").toString();
  if (!device.isEmpty() && device_->findData(device) < 0) ensureDevicesListed();  // a GPU device was remembered
  if (!device.isEmpty() && device_->findData(device) >= 0) setDevice(device);
  // the font zoom and the high contrast are process-wide (core/theme.h): set them whatever an earlier window left
  const bool presentation = settings.value("presentationMode", false).toBool();
  if (presentation || isHighContrast()) setPresentation(presentation, false);
  else setFontZoom(settings.value("fontZoom", 0).toInt());
}

void MainWindow::setTheme(Theme theme, bool remember) {
  applyTheme(theme);
  // The panels that paint their own colours take the new ones now (the rest follow the palette).
  editor_->applyThemeColours();
  for (CodeView* view : findChildren<CodeView*>()) CodeView::applyThemeColours(view);
  graph_->applyThemeColours();
  themeActions_[static_cast<int>(theme)]->setChecked(true);
  if (remember) QSettings().setValue("theme", themeName(theme));
}

void MainWindow::resetLayout() {
  restoreState(defaultDockState_, kDockStateVersion);
  for (QDockWidget* d : docks_) {
    d->setFloating(false);
    d->show();
  }
  docks_[5]->raise();  // the kernel's IR and source in front of the buffers, as at first
  arrangeDocks();
}

QList<QAction*> MainWindow::toolbarActions() const {
  QList<QAction*> actions;
  for (QAction* a : toolbar_->actions())
    if (!a->isSeparator() && !qobject_cast<QWidgetAction*>(a)) actions << a;
  return actions;
}

QList<MainWindow::Shortcut> MainWindow::shortcuts() const {
  // Walks the menus, so that the list says where each action lives; actions outside the menus
  // (a panel's own) follow.
  QList<Shortcut> list;
  QSet<const QAction*> seen;
  std::function<void(const QMenu*, const QString&)> walk = [&](const QMenu* menu, const QString& path) {
    for (QAction* a : menu->actions()) {
      if (a->menu()) {
        walk(a->menu(), path + plainText(a->menu()->menuAction()) + " ▸ ");
        continue;
      }
      seen.insert(a);
      for (const QKeySequence& k : a->shortcuts())
        list.append({path + plainText(a), k.toString(QKeySequence::NativeText)});
    }
  };
  for (QAction* top : menuBar()->actions())
    if (top->menu()) walk(top->menu(), plainText(top) + " ▸ ");
  for (const QAction* a : findChildren<QAction*>()) {
    if (seen.contains(a)) continue;
    for (const QKeySequence& k : a->shortcuts()) list.append({plainText(a), k.toString(QKeySequence::NativeText)});
  }
  return list;
}

void MainWindow::showShortcuts() {
  QDialog dialog(this);
  dialog.setWindowTitle("Keyboard Shortcuts");
  const QList<Shortcut> list = shortcuts();
  auto* table = new QTableWidget(list.size(), 2, &dialog);
  table->setObjectName("shortcuts");
  table->setHorizontalHeaderLabels({"Action", "Shortcut"});
  table->verticalHeader()->hide();
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  for (int i = 0; i < list.size(); ++i) {
    table->setItem(i, 0, new QTableWidgetItem(list[i].action));
    table->setItem(i, 1, new QTableWidgetItem(list[i].keys));
  }
  table->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  table->resizeColumnToContents(1);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, &dialog);
  connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  auto* layout = new QVBoxLayout(&dialog);
  layout->addWidget(table);
  layout->addWidget(buttons);
  dialog.resize(520, 560);
  dialog.exec();
}

bool MainWindow::isRunning() const { return runner_->isRunning(); }
void MainWindow::setBreakOnNan(bool on) { breakOnNanAction_->setChecked(on); }
void MainWindow::setRecordBuffers(bool on) { recordBuffersAction_->setChecked(on); }
QString MainWindow::statusText() const { return runStatus_->text(); }
bool MainWindow::isLayoutPending() const { return graphTimer_->isActive() || layout_->isBusy(); }
int MainWindow::kernelCount() const { return kernels_->kernelCount(); }
int MainWindow::clusterCount() const { return graph_->clusterCount(); }
QString MainWindow::consoleText() const { return console_->toPlainText(); }
QString MainWindow::lineInfoText() const { return lineInfo_->text(); }

}  // namespace tsui
