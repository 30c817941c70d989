// Runs scripts on the script thread, one at a time, and reports back on the GUI thread.
//
// ts::ScriptRunner::run blocks until the script ends, so it must never be called on the GUI thread.
// The controller owns one long-lived thread with an event loop; a run is a task posted to it.
// Script output is batched: a script that prints in a tight loop would otherwise flood the GUI's
// event queue with one event per fragment.
#pragma once
#include <QElapsedTimer>
#include <QMutex>
#include <QObject>
#include <QString>
#include <QThread>
#include <vector>

namespace tsui {

struct ScriptOutcome {
  bool ok = true;
  QString error;      // "ValueError: boom"
  QString traceback;  // formatted Python traceback
  int errorLine = 0;  // 1-based line in the script, 0 when unknown
  double seconds = 0;
};

class ScriptController : public QObject {
  Q_OBJECT
 public:
  explicit ScriptController(QObject* parent = nullptr);
  // Interrupts a running script and waits for the thread: Python must not outlive its host.
  ~ScriptController() override;

  // Returns false (and does nothing) when a script is already running.
  bool start(const QString& path, const QString& source, const QString& device);
  // Raises KeyboardInterrupt in the script at its next bytecode boundary.
  void stop();
  bool isRunning() const { return running_; }

 signals:
  void started();
  void output(bool isStderr, const QString& text);
  void finished(const tsui::ScriptOutcome& outcome);

 private:
  void runOnScriptThread(const QString& path, const QString& source, const QString& device);
  void appendOutput(bool isStderr, QString text);  // script thread
  void flushOutput();                              // GUI thread

  QThread thread_;
  QObject* threadContext_ = nullptr;  // lives on thread_; tasks are posted to it
  bool running_ = false;

  QMutex outputMutex_;
  std::vector<std::pair<bool, QString>> pendingOutput_;
  bool flushScheduled_ = false;
};

}  // namespace tsui
