// Runs a script in its own process and brings its events to the GUI thread (RenderDoc's model).
//
// The debugger runs no user code: each run starts `tensorscope-cli runner` (app/runner_command.h),
// which connects back to a QLocalServer of ours and streams the session's events as frames
// (tensorscope/recording.h), writing the same stream to a recording in a temporary directory. A script
// that aborts, segfaults, hangs or eats memory ends that process only: the events already received
// stay, and the end is reported in words ("ended by signal 11 (SIGSEGV) after kernel #41 r_64_16").
//
// Stop sends {"command":"stop"} (KeyboardInterrupt in the script) and kills the runner if it has not
// ended 2 s later. Events are decoded on the GUI thread and delivered in batches (kDeliveryMs).
#pragma once
#include <QElapsedTimer>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QTemporaryDir>
#include <QTimer>
#include <memory>
#include <vector>

#include "tensorscope/recording.h"

class QLocalServer;
class QLocalSocket;

namespace tsui {

struct ScriptOutcome {
  bool ok = true;
  QString ended;      // "finished", "error", "stopped", "exit", "signal" (RunInfo::ended)
  QString error;      // one line: "ValueError: boom", "ended by signal 11 (SIGSEGV) after kernel #4 E_3"
  int errorLine = 0;  // 1-based line in the script, 0 when unknown
  double seconds = 0;
};

class RunnerProcess : public QObject {
  Q_OBJECT
 public:
  explicit RunnerProcess(QObject* parent = nullptr);
  ~RunnerProcess() override;  // kills a runner that still runs

  // Starts a run of `source` (the editor's text) as the script `path` on `device`. Returns false (and
  // emits nothing) when a run is going on; a runner that cannot start is reported through finished().
  // How a run starts: running, paused before its first kernel launch (F10 on a script that is not
  // running), or paused at its first stop of any stage (F11).
  enum class Start { Running, PausedBeforeLaunch, PausedAtFirstStop };
  bool start(const QString& path, const QString& source, const QString& device, Start how = Start::Running);
  void stop();
  bool isRunning() const { return running_; }

  // The gate (issue 12): where the runner is paused, and the commands that move it on.
  struct PausePoint {
    QString stage;  // "line", "before launch", "after launch", "before schedule", ...
    int kernelId = -1;
    QString kernel;
    QString detail;  // "after pass": the pass; a breakpoint's reason ("breakpoint on op SUM")
    QString file;    // "line": the script line paused at
    int line = 0;
    qint64 number = 0;  // the runner's pause number (1, 2, ...): a 'P' sent again after an evaluation keeps it
  };
  bool isPaused() const { return paused_; }
  const PausePoint& pausePoint() const { return pausePoint_; }
  void continueRun();          // F5
  void stepToNextLaunch();     // F10
  void stepIntoNextStage();    // F11
  void stepToScheduleEnd();    // Shift+F11
  void pause();                // pauses at the next stop of any stage or the script's next line
  // Ctrl+F10: a paused run goes on until `line` of its script; otherwise the next start() runs to it.
  void runToLine(int line);

  // Breakpoints (app/debugger_gate.h): script lines of the run's script, kernel name patterns ("r_*"),
  // ops ("SUM") and graph node uids ("when this node is realized"). Kept for later runs; sent at once
  // to a running one.
  struct Breakpoints {
    QList<int> lines;
    QStringList kernels;
    QStringList ops;
    QList<quint64> nodes;
  };
  void setBreakpoints(const Breakpoints& breakpoints);
  const Breakpoints& breakpoints() const { return breakpoints_; }

  // The pause console: runs Python in the paused frame (paused on a line); what it prints and realizes
  // arrives as events, then paused() again.
  void evaluate(const QString& code);
  // Asks for the paused launch's buffers (paused before or after a launch): buffersReady() answers.
  struct BufferData {
    QString role;    // "output" or "input"
    int index = 0;   // input number
    QString dtype;
    qint64 numel = 0;
    QByteArray bytes;  // host byte order; empty when not read (see note)
    QString note;      // why there are no bytes: "not computed yet: paused before the launch ..."
  };
  void requestBuffers();
  // The recording of the current or last run ("" before the first), complete once finished() came.
  QString recordingPath() const { return recordingPath_; }
  // The runner's address-space limit (RLIMIT_AS) in MiB; 0: none (the default).
  void setMemoryLimitMb(int mb) { memoryLimitMb_ = mb; }
  // Break on NaN/Inf: the run stops at the first kernel whose output holds one (NonFiniteError).
  void setBreakOnNan(bool on) { breakOnNan_ = on; }
  // Keep each launch's buffers in the run's events and recording, up to `mb` in all (0: off).
  void setRecordBuffersMb(int mb) { recordBuffersMb_ = mb; }
  // Autotune (issue 14): runs started while it is set search their kernels' optimization plans in the runner
  // (engine/src/runtime/autotune.h) and stream every trial as an event. `beam` 0: off (the default; a
  // TENSORSCOPE_BEAM of the debugger's own environment still applies). `kernel`: only kernels of this name or
  // IR hash (TENSORSCOPE_BEAM_KERNEL). `fresh`: search again even when the autotune cache has a plan.
  struct Autotune {
    int beam = 0;
    QString kernel;
    bool fresh = false;
  };
  void setAutotune(const Autotune& autotune) { autotune_ = autotune; }
  const Autotune& autotune() const { return autotune_; }
  // The events received since the last call, in order (moved out: the model keeps them, no copy).
  std::vector<ts::Event> takeEvents() { return std::exchange(ready_, {}); }
  // When each event of the last takeEvents() happened: ns since the start of the run, same order.
  std::vector<int64_t> takeEventTimes() { return std::exchange(readyTimes_, {}); }
  // How long Stop waits for KeyboardInterrupt before killing the runner.
  static constexpr int kStopGraceMs = 2000;
  // Events reach the panels in batches at most this often: each batch repaints them, and the GUI's
  // CPU time is taken from the script's kernels.
  static constexpr int kDeliveryMs = 200;

 signals:
  void started();
  // Events are waiting in takeEvents() (schedules, launches and the script's output, in order).
  void eventsReady();
  // What the runner process itself wrote to stdout/stderr (a fatal Python error, a C library's message).
  void output(bool isStderr, const QString& text);
  void finished(const tsui::ScriptOutcome& outcome);
  // The runner waits at the gate; every event before the stop has been delivered (takeEvents()).
  void paused();
  void resumed();
  void buffersReady(int kernelId, const QString& stage, const std::vector<tsui::RunnerProcess::BufferData>& buffers);

 private:
  void onConnection();
  void onReadyRead();
  void deliver();
  void onProcessFinished(int exitCode, QProcess::ExitStatus status);
  void finishIfDone();
  void fail(const QString& message);  // a protocol error: the runner is killed, the run ends
  void sendCommand(const QByteArray& json);
  QByteArray breakpointsJson(const QString& command) const;
  void resumeWith(const QByteArray& json);

  QLocalServer* server_ = nullptr;
  QLocalSocket* socket_ = nullptr;
  QProcess* process_ = nullptr;
  QTimer deliveryTimer_, killTimer_;
  std::unique_ptr<QTemporaryDir> dir_;
  QString recordingPath_;
  int runNumber_ = 0, memoryLimitMb_ = 0;
  bool breakOnNan_ = false;
  int recordBuffersMb_ = 0;
  Autotune autotune_;
  bool paused_ = false;
  PausePoint pausePoint_;
  qint64 resumedPause_ = 0;  // the number of the last pause resumed from: a late 'P' of it is not a pause
  Breakpoints breakpoints_;
  QString runPath_;  // the running script's path (its stacks' file name)
  int runToLine_ = 0;  // for the next start
  bool running_ = false, processDone_ = false, streamDone_ = false, stopRequested_ = false, killed_ = false;
  int exitCode_ = 0;
  QProcess::ExitStatus exitStatus_ = QProcess::NormalExit;
  QElapsedTimer clock_;

  ts::FrameParser parser_;
  ts::EventDecoder decoder_;
  std::vector<ts::Event> pending_;  // decoded, waiting for the delivery timer
  std::vector<ts::Event> ready_;    // delivered, waiting for takeEvents()
  std::vector<int64_t> pendingTimes_, readyTimes_;  // their times (EncodedEvent::time_ns)
  bool haveEnd_ = false;
  ts::RunInfo end_;
  QString lastKernel_;  // "#41 r_64_16": where a crash happened
  QString protocolError_;
  QString nativeStderr_;  // what the runner process itself wrote (a crash message, a fatal Python error)
};

}  // namespace tsui
