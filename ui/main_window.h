// The debugger's main window: the script editor, the graph, the kernel list, the kernel's IR and
// source, the properties sidebar and the console, linked by one current selection (RenderDoc's
// "current event" model: selecting a kernel anywhere updates every panel).
//
// Data flow: ScriptController runs the script on the script thread; SessionBridge brings the
// engine's events to the GUI thread into the RunModel; panels redraw from the RunModel; graph
// layouts run on the layout thread through the LayoutScheduler.
#pragma once
#include <QMainWindow>

#include "core/graph_layout.h"
#include "core/script_controller.h"

class QAction;
class QComboBox;
class QDockWidget;
class QLabel;
class QTimer;

namespace tsui {

class ConsolePanel;
class GraphPanel;
class KernelDetailsPanel;
class KernelListPanel;
class LayoutScheduler;
class PropertiesPanel;
class RunModel;
class ScriptEditor;
class SessionBridge;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  bool openScript(const QString& path);
  void setDevice(const QString& device);
  void runScript();
  void stopScript();
  // Renders the shown graph to a standalone SVG at `path` (graphviz runs on a worker thread while
  // a progress dialog keeps the window alive).
  bool exportSvg(const QString& path, QString* error);

  // For tests and --screenshot: the state a person would look at.
  bool isRunning() const;
  bool isLayoutPending() const;
  bool isBusy() const { return isRunning() || isLayoutPending(); }
  int kernelCount() const;
  int selectedKernel() const { return selectedKernel_; }
  int clusterCount() const;
  QString consoleText() const;
  bool lastRunOk() const { return lastRunOk_; }
  ScriptEditor* editor() const { return editor_; }

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildPanels();
  void buildActions();
  void connectEngine();

  void onScheduleAdded(int scheduleIndex);
  void onKernelRunAdded(int kernelId);
  void onRunFinished(const ScriptOutcome& outcome);
  void onLayout(const GraphLayout& layout);
  void selectKernel(int kernelId, bool centreGraph);
  void requestGraph();  // soon: schedules arrive in bursts
  void rebuildGraph();
  void resetRun();

  void newScript();
  void openDialog();
  bool save();
  bool saveAs();
  void exportSvgDialog();
  bool maybeSave();
  void updateTitle();
  void updateActions();

  RunModel* model_;
  SessionBridge* bridge_;
  ScriptController* script_;
  LayoutScheduler* layout_;
  QTimer* graphTimer_;

  ScriptEditor* editor_;
  GraphPanel* graph_;
  KernelListPanel* kernels_;
  KernelDetailsPanel* details_;
  PropertiesPanel* properties_;
  ConsolePanel* console_;
  QComboBox* device_;
  QLabel* runStatus_;
  QList<QDockWidget*> docks_;

  QAction* runAction_ = nullptr;
  QAction* stopAction_ = nullptr;
  QAction* exportAction_ = nullptr;

  int selectedKernel_ = -1;
  int graphSchedule_ = -1;  // schedule shown when the graph is not the merged one; -1: merged
  bool lastRunOk_ = true;
};

}  // namespace tsui
