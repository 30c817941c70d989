// The debugger's main window: the script editor, the graph, the kernel list, the kernel's IR and
// source, the properties sidebar and the console, linked by one current selection (RenderDoc's
// "current event" model: selecting a kernel anywhere updates every panel).
//
// Data flow: RunnerProcess runs the script in a runner process and brings its events to the GUI
// thread; an opened recording (.tsrec) is read on a worker thread into the same events. Either way the
// events go into the RunModel (one model for a live run and a recording); panels redraw from the
// RunModel; graph layouts run on the layout thread through the LayoutScheduler. No user code runs here.
#pragma once
#include <QFutureWatcher>
#include <QMainWindow>
#include <vector>

#include "tensorscope/device.h"

#include "core/graph_layout.h"
#include "core/runner_process.h"
#include "core/theme.h"

class QAction;
class QComboBox;
class QDockWidget;
class QLabel;
class QMenu;
class QDragEnterEvent;
class QLineEdit;
class QDropEvent;
class QTimer;
class QToolBar;

namespace tsui {

class BufferInspector;
class CodeView;
class ConsolePanel;
class ElidedLabel;
class EventBrowser;
class ExplainPanel;
class GraphPanel;
class KernelDetailsPanel;
class KernelListPanel;
class LayoutScheduler;
class PropertiesPanel;
class RunModel;
class ScriptEditor;
class TimelinePanel;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  bool openScript(const QString& path);
  // Opens a recording: every panel shows the recorded run, and the editor its script (unsaved, so the
  // user's files are never touched). Returns false and shows a one-line error for a bad file.
  bool openRecording(const QString& path, QString* error = nullptr);
  // Opens a script (.py) or a recording (.tsrec), by its content.
  bool openFile(const QString& path);
  // Copies the last run's recording to `path` (SQLite backup: also while it is written).
  bool saveRecording(const QString& path, QString* error);
  void setDevice(const QString& device);
  void runScript();
  void stopScript();
  // Autotune (issue 14). The debugger runs no user code: both run the script again in the runner with the
  // engine's BEAM search on (RunnerProcess::Autotune), and the trials stream into the timeline's autotune
  // lane and the event browser like any event. autotuneKernel searches the kernels named like this one
  // afresh (the kernel list's and the graph's context menu); autotuneRun searches every kernel, taking
  // plans found before from the autotune cache (Run ▸ Autotune Whole Run). False when a run is going on.
  static constexpr int kAutotuneBeam = 2;
  bool autotuneKernel(int kernelId);
  bool autotuneRun();
  // The debugger keys: F5 continue (or run), F10 step to the next kernel launch, F11 step into the
  // next stage (Shift+F11: to the end of the schedule); a script that is not running starts paused.
  void continueOrRun();
  void stepToNextLaunch();
  void stepIntoNextStage();
  bool isPaused() const { return runner_->isPaused(); }
  // Ctrl+F10: run (or go on) until the editor's cursor line.
  void runToCursor();
  // F9: a line breakpoint on the editor's cursor line, or off.
  void toggleBreakpoint();
  // The pause console: evaluates Python in the paused frame (paused on a script line).
  void evaluate(const QString& code);

  // The current event (RenderDoc's): an index into RunModel::events() that every panel follows: the
  // kernel's IR and source, the graph as it was then (with the lazy nodes of that moment), the event
  // browser's marker. -1: none. In a finished run or a recording, stepRecording moves it to the next
  // (+1) or previous (-1) launch: stepping backwards restores the panels of an earlier event.
  void setCurrentEvent(int eventIndex);
  int currentEvent() const { return currentEvent_; }
  void stepRecording(int direction);
  EventBrowser* eventBrowser() const { return events_; }
  BufferInspector* bufferInspector() const { return buffers_; }
  TimelinePanel* timeline() const { return timeline_; }
  // File ▸ Export Trace: the run (or the opened recording) as Chrome trace JSON, as `tensorscope-cli
  // export --trace` writes it from the recording.
  bool exportTrace(const QString& path, QString* error = nullptr);
  GraphPanel* graphPanel() const { return graph_; }
  // The status bar's "line 13 made 5 nodes → kernels …" for the editor's cursor line.
  QString lineInfoText() const;
  // Breakpoints that are not script lines: kernel name patterns, ops, graph node uids.
  void setKernelBreakpoints(const QStringList& patterns, const QStringList& ops, const QList<quint64>& nodes);
  // File ▸ Export: the shown graph as a standalone SVG, a PNG image at `scale` times 72 dpi (1, 2, 4…)
  // or its DOT text (graphviz runs on a worker thread while a progress dialog keeps the window alive);
  // the kernel panel's IR after the selected pass, that pass's unified diff or the shown source as text.
  // The menu's actions ask for a file (and a scale) and call these.
  enum class GraphFormat { Svg, Png, Dot };
  bool exportGraph(const QString& path, GraphFormat format, double scale, QString* error);
  bool exportSvg(const QString& path, QString* error) { return exportGraph(path, GraphFormat::Svg, 1, error); }
  enum class Listing { Ir, PassDiff, Source };
  bool exportListing(const QString& path, Listing listing, QString* error);

  // View ▸ Presentation (Ctrl+Shift+P), for a classroom: the fonts of every panel at the presentation
  // zoom, a high-contrast palette and the Explain pane in front. View ▸ Zoom In / Zoom Out (Ctrl+= /
  // Ctrl+-) change the fonts of every panel (listings, graph labels, lists); each mode remembers its zoom.
  void setPresentation(bool on, bool remember = true);
  bool isPresentation() const;
  void setFontZoom(int step);  // 0: the normal size; steps of 10 % (core/theme.h)
  void zoomFonts(int delta) { setFontZoom(fontZoom() + delta); }
  int fontZoom() const;
  ExplainPanel* explainPanel() const { return explain_; }
  KernelDetailsPanel* kernelDetails() const { return details_; }
  // Selects a kernel as a click in the kernel list does.
  void showKernel(int kernelId) { selectKernel(kernelId, true); }

  // For tests and --screenshot: the state a person would look at.
  bool isRunning() const;
  // Whether the device list holds every device of the registry: C and INTERP are there at once, the
  // GPU devices once their drivers were probed (on a worker thread: PoCL loads LLVM, ~60 ms).
  bool devicesProbed() const;
  bool isLayoutPending() const;
  bool isBusy() const { return isRunning() || isLayoutPending(); }
  int kernelCount() const;
  int selectedKernel() const { return selectedKernel_; }
  int clusterCount() const;
  QString consoleText() const;
  bool lastRunOk() const { return lastRunOk_; }
  QString statusText() const;
  RunnerProcess* runner() const { return runner_; }
  void setBreakOnNan(bool on);
  void setRecordBuffers(bool on);
  const RunModel& model() const { return *model_; }
  // The last opened recording: how many events, and the seconds from File ▸ Open to every panel filled.
  struct OpenTiming {
    qint64 events = 0;
    double seconds = 0;
  };
  OpenTiming lastOpenTiming() const { return lastOpen_; }
  ScriptEditor* editor() const { return editor_; }

  // Desktop habits. The window's geometry, its docks (where, how big, shown or hidden), the device
  // and the theme are kept in QSettings when the window closes and restored when the next one opens;
  // View ▸ Reset Layout puts the docks back where a new installation has them.
  void saveSettings() const;
  void resetLayout();
  // View ▸ Theme: System (the default), Light or Dark, for the whole application; remembered unless
  // `remember` is false (tensorscope --theme, for one run).
  void setTheme(Theme theme, bool remember = true);
  // Every keyboard shortcut of the window's actions, read from the actions themselves (Help ▸
  // Keyboard Shortcuts shows this list): {where ("Run ▸ Step to Next Launch"), shortcut text}.
  struct Shortcut {
    QString action, keys;
  };
  QList<Shortcut> shortcuts() const;
  void showShortcuts();
  // The toolbar's actions, for tests: each has a tooltip naming its shortcut.
  QList<QAction*> toolbarActions() const;

  // Edit ▸ Find (Ctrl+F), Netron's: graph nodes by op ("exp2"), uid ("%12"), shape ("3x3") or the
  // script line that made them ("line 5", ":5"), kernels by name ("E_3") or id ("#2"), and words in
  // every kernel's IR and source listings. Returns how many match and goes to the first;
  // findNext(+1 / -1) (F3 / Shift+F3) goes on, wrapping round. The match is selected (as if
  // clicked) and centred in the graph, the kernel list or the listing (a listing match in another
  // kernel selects that kernel first: every panel follows).
  int find(const QString& query);
  void findNext(int direction);
  QString findMatchText() const;  // "2 of 5 · node %12 ADD 3x3"; empty when nothing matches

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildPanels();
  void buildActions();
  void connectEngine();
  void arrangeDocks();  // the default sizes of the docks
  void restoreSettings();

  void onScheduleAdded(int scheduleIndex);
  void onKernelRunAdded(int kernelId);
  void onRunFinished(const ScriptOutcome& outcome);
  void onPaused();
  void startRun(RunnerProcess::Start how);
  void addEvents(std::vector<ts::Event> events, const std::vector<int64_t>& timesNs = {});
  void onLayout(const GraphLayout& layout);
  void selectKernel(int kernelId, bool centreGraph);
  void requestGraph();  // soon: schedules arrive in bursts
  void rebuildGraph();
  void resetRun();
  void updateBreakpoints();
  void onCursorLine(int line);
  void onNodeClicked(const GraphSpecNode& node);
  void onBuffers(int kernelId, const QString& stage, const std::vector<RunnerProcess::BufferData>& buffers);
  void showBuffers(int kernelId, const std::vector<ts::RecordedBuffer>& buffers);

  void newScript();
  void openDialog();
  bool save();
  bool saveAs();
  void exportGraphDialog(GraphFormat format);
  void exportListingDialog();
  void exportTraceDialog();
  void updateExplain();
  void applyFontZoom();
  void saveRecordingDialog();
  void addRecent(const QString& path);
  void updateRecentMenu();
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  bool maybeSave();
  void updateTitle();
  void updateActions();

  RunModel* model_;
  RunnerProcess* runner_;
  LayoutScheduler* layout_;
  QTimer* graphTimer_;

  ScriptEditor* editor_;
  GraphPanel* graph_;
  KernelListPanel* kernels_;
  KernelDetailsPanel* details_;
  PropertiesPanel* properties_;
  ConsolePanel* console_;
  ExplainPanel* explain_;
  QComboBox* device_;
  // The registry's devices, probed on a worker thread (see the constructor); fillDevices() lists them.
  QFutureWatcher<std::vector<ts::DeviceProperties>>* deviceProbe_ = nullptr;
  void fillDevices(const std::vector<ts::DeviceProperties>& devices);
  void ensureDevicesListed();  // waits for the probe: a device other than C or INTERP was asked for
  bool devicesFilled_ = false;
  // While addEvents adds a batch: the kernels launched in it, for one update of the kernel list after it.
  std::vector<int> launchedInBatch_;
  bool addingEvents_ = false;
  ElidedLabel* runStatus_;
  QList<QDockWidget*> docks_;

  QAction* runAction_ = nullptr;
  QAction* stopAction_ = nullptr;
  QAction* stepAction_ = nullptr;
  QAction* stepIntoAction_ = nullptr;
  QAction* stepOutAction_ = nullptr;
  QAction* pauseAction_ = nullptr;
  QAction* exportAction_ = nullptr;
  QAction* presentationAction_ = nullptr;
  QAction* saveRecordingAction_ = nullptr;
  QAction* breakOnNanAction_ = nullptr;
  QAction* runToCursorAction_ = nullptr;
  QAction* autotuneRunAction_ = nullptr;
  QAction* stepBackAction_ = nullptr;
  QAction* recordBuffersAction_ = nullptr;
  EventBrowser* events_ = nullptr;
  BufferInspector* buffers_ = nullptr;
  TimelinePanel* timeline_ = nullptr;
  QLineEdit* consoleInput_ = nullptr;
  ElidedLabel* lineInfo_ = nullptr;
  QToolBar* toolbar_ = nullptr;
  QList<QAction*> themeActions_;  // System, Light, Dark
  QToolBar* findBar_ = nullptr;
  QLineEdit* findEdit_ = nullptr;
  QLabel* findStatus_ = nullptr;
  struct FindMatch {
    QString nodeKey;    // a graph node's GraphSpecNode::key, or
    int kernelId = -1;  // a kernel, or
    CodeView* listing = nullptr;  // a match in the kernel panel's listing of `kernelId` at (line, column)
    int line = -1, column = -1, length = 0;
    QString label;
    int pass = -1;  // an IR match: the pass whose listing it is in
  };
  // Find over the listings stops here (a training run has thousands of kernels).
  static constexpr int kMaxListingMatches = 5000;
  QList<FindMatch> findMatches_;
  int findIndex_ = -1;
  QByteArray defaultDockState_;  // saveState() of the docks as built, for View ▸ Reset Layout
  QStringList kernelPatterns_, opBreakpoints_;
  QList<quint64> nodeBreakpoints_;
  quint64 selectedNodeUid_ = 0;
  int currentEvent_ = -1;
  QMenu* recentMenu_ = nullptr;
  QString recordingShown_;  // the opened recording, when the panels show one instead of a run
  OpenTiming lastOpen_;

  int selectedKernel_ = -1;
  int graphSchedule_ = -1;  // schedule shown when the graph is not the merged one; -1: merged
  bool lastRunOk_ = true;
};

}  // namespace tsui
