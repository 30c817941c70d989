#include "core/runner_process.h"

#include <QCoreApplication>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocalServer>
#include <QLocalSocket>
#include <QRegularExpression>
#include <QUuid>
#include <csignal>
#include <cstring>

namespace tsui {
namespace {

// "11 (SIGSEGV)"
QString signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? QString("%1 (SIG%2)").arg(sig).arg(abbrev) : QString::number(sig);
}

}  // namespace

RunnerProcess::RunnerProcess(QObject* parent) : QObject(parent) {
  deliveryTimer_.setSingleShot(true);
  deliveryTimer_.setInterval(kDeliveryMs);
  connect(&deliveryTimer_, &QTimer::timeout, this, &RunnerProcess::deliver);
  killTimer_.setSingleShot(true);
  connect(&killTimer_, &QTimer::timeout, this, [this] {
    if (running_ && process_ && process_->state() != QProcess::NotRunning) {
      killed_ = true;
      process_->kill();
    }
  });
}

RunnerProcess::~RunnerProcess() {
  if (process_ && process_->state() != QProcess::NotRunning) {
    process_->disconnect(this);
    process_->kill();
    process_->waitForFinished(2000);
  }
}

bool RunnerProcess::start(const QString& path, const QString& source, const QString& device, Start how) {
  if (running_) return false;
  running_ = true;
  paused_ = false;
  pausePoint_ = {};
  resumedPause_ = 0;
  processDone_ = streamDone_ = stopRequested_ = killed_ = haveEnd_ = false;
  exitCode_ = 0;
  exitStatus_ = QProcess::NormalExit;
  parser_ = {};
  decoder_ = {};
  decoder_.keep_schedules_thin(true);  // RunModel instantiates the schedules it shows
  pending_.clear();
  pendingTimes_.clear();
  end_ = {};
  lastKernel_.clear();
  protocolError_.clear();
  nativeStderr_.clear();
  clock_.start();
  Q_EMIT started();

  if (!dir_) dir_ = std::make_unique<QTemporaryDir>();
  if (!recordingPath_.isEmpty()) {  // only the last run's recording is kept (File ▸ Save Recording As)
    for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(recordingPath_ + suffix);
  }
  ++runNumber_;
  recordingPath_ = dir_->filePath(QString("run-%1.tsrec").arg(runNumber_));
  const QString sourcePath = dir_->filePath(QString("script-%1.py").arg(runNumber_));
  QFile file(sourcePath);
  if (!dir_->isValid() || !file.open(QIODevice::WriteOnly) || file.write(source.toUtf8()) < 0) {
    fail("cannot write the script to a temporary file: " + file.errorString());
    return true;
  }
  file.close();

  delete socket_;
  socket_ = nullptr;
  delete server_;
  server_ = new QLocalServer(this);
  server_->setSocketOptions(QLocalServer::UserAccessOption);
  if (!server_->listen("tensorscope-" + QUuid::createUuid().toString(QUuid::WithoutBraces))) {
    fail("cannot listen for the runner: " + server_->errorString());
    return true;
  }
  connect(server_, &QLocalServer::newConnection, this, &RunnerProcess::onConnection);

  if (process_) process_->deleteLater();
  process_ = new QProcess(this);
  connect(process_, &QProcess::finished, this, &RunnerProcess::onProcessFinished);
  connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) {
      processDone_ = streamDone_ = true;
      protocolError_ = "cannot start the runner " + process_->program() + ": " + process_->errorString();
      finishIfDone();
    }
  });
  // What the runner process writes itself (not the script's print(), which comes as events): a fatal
  // Python error, a C library's message, the kernel compiler's complaints.
  connect(process_, &QProcess::readyReadStandardError, this, [this] {
    const QString text = QString::fromUtf8(process_->readAllStandardError());
    nativeStderr_ += text;
    Q_EMIT output(true, text);
  });
  connect(process_, &QProcess::readyReadStandardOutput, this,
          [this] { Q_EMIT output(false, QString::fromUtf8(process_->readAllStandardOutput())); });
  QStringList args{"runner", "--connect", server_->fullServerName(), "--source", sourcePath, "--path", path,
                   "--record", recordingPath_};
  if (!device.isEmpty()) args << "--device" << device;
  if (memoryLimitMb_ > 0) args << "--memory-limit" << QString::number(memoryLimitMb_);
  if (how == Start::PausedBeforeLaunch) args << "--step" << "launch";
  if (how == Start::PausedAtFirstStop) args << "--step" << "stage";
  runPath_ = path;
  args << "--breakpoints" << QString::fromUtf8(breakpointsJson("breakpoints"));
  runToLine_ = 0;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.remove("TENSORSCOPE_RECORD");  // the runner records through its own streamer
  if (breakOnNan_) env.insert("TENSORSCOPE_BREAK_ON_NAN", "1");
  else env.remove("TENSORSCOPE_BREAK_ON_NAN");
  if (recordBuffersMb_ > 0) env.insert("TENSORSCOPE_RECORD_BUFFERS", QString::number(recordBuffersMb_));
  else env.remove("TENSORSCOPE_RECORD_BUFFERS");
  if (autotune_.beam > 0) {
    env.insert("TENSORSCOPE_BEAM", QString::number(autotune_.beam));
    if (!autotune_.kernel.isEmpty()) env.insert("TENSORSCOPE_BEAM_KERNEL", autotune_.kernel);
    else env.remove("TENSORSCOPE_BEAM_KERNEL");
    if (autotune_.fresh) env.insert("TENSORSCOPE_BEAM_FRESH", "1");
    else env.remove("TENSORSCOPE_BEAM_FRESH");
  }
  process_->setProcessEnvironment(env);
  process_->start(QCoreApplication::applicationDirPath() + "/tensorscope-cli", args);
  return true;
}

void RunnerProcess::sendCommand(const QByteArray& json) {
  if (socket_ && socket_->state() == QLocalSocket::ConnectedState)
    socket_->write(QByteArray::fromStdString(ts::frame_bytes('C', json.toStdString())));
}

void RunnerProcess::stop() {
  if (!running_ || stopRequested_) return;
  stopRequested_ = true;
  sendCommand(R"({"command":"stop"})");
  if (paused_) {
    paused_ = false;
    resumedPause_ = pausePoint_.number;
    Q_EMIT resumed();
  }
  killTimer_.start(kStopGraceMs);
}

QByteArray RunnerProcess::breakpointsJson(const QString& command) const {
  QJsonArray lines, kernels, ops, nodes;
  for (int line : breakpoints_.lines) lines.append(QJsonObject{{"file", runPath_}, {"line", line}});
  for (const QString& k : breakpoints_.kernels) kernels.append(k);
  for (const QString& o : breakpoints_.ops) ops.append(o);
  for (quint64 n : breakpoints_.nodes) nodes.append(static_cast<qint64>(n));
  QJsonObject c{{"command", command}, {"lines", lines}, {"kernels", kernels}, {"ops", ops}, {"nodes", nodes}};
  if (runToLine_ > 0) c.insert("run_to", QJsonObject{{"file", runPath_}, {"line", runToLine_}});
  return QJsonDocument(c).toJson(QJsonDocument::Compact);
}

void RunnerProcess::setBreakpoints(const Breakpoints& breakpoints) {
  breakpoints_ = breakpoints;
  if (running_) sendCommand(breakpointsJson("breakpoints"));
}

void RunnerProcess::runToLine(int line) {
  if (!running_) {
    runToLine_ = line;
    return;
  }
  resumeWith(QJsonDocument(QJsonObject{{"command", "run to line"}, {"file", runPath_}, {"line", line}})
                 .toJson(QJsonDocument::Compact));
}

void RunnerProcess::evaluate(const QString& code) {
  if (paused_) sendCommand(QJsonDocument(QJsonObject{{"command", "evaluate"}, {"code", code}}).toJson(QJsonDocument::Compact));
}

void RunnerProcess::requestBuffers() {
  if (paused_) sendCommand(R"({"command":"buffers"})");
}

void RunnerProcess::resumeWith(const QByteArray& json) {
  if (!paused_) return;
  paused_ = false;
  resumedPause_ = pausePoint_.number;
  sendCommand(json);
  Q_EMIT resumed();
}

void RunnerProcess::continueRun() { resumeWith(R"({"command":"continue"})"); }

void RunnerProcess::stepToNextLaunch() { resumeWith(R"({"command":"step","until":"launch"})"); }

void RunnerProcess::stepIntoNextStage() { resumeWith(R"({"command":"step","until":"stage"})"); }

void RunnerProcess::stepToScheduleEnd() { resumeWith(R"({"command":"step","until":"schedule end"})"); }

void RunnerProcess::pause() {
  if (running_ && !paused_) sendCommand(R"({"command":"pause"})");
}

void RunnerProcess::onConnection() {
  QLocalSocket* s = server_->nextPendingConnection();
  if (!s) return;
  if (socket_) {  // one runner, one connection
    s->deleteLater();
    return;
  }
  socket_ = s;
  connect(socket_, &QLocalSocket::readyRead, this, &RunnerProcess::onReadyRead);
  connect(socket_, &QLocalSocket::disconnected, this, [this] {
    onReadyRead();
    streamDone_ = true;
    finishIfDone();
  });
  if (stopRequested_) socket_->write(QByteArray::fromStdString(ts::frame_bytes('C', R"({"command":"stop"})")));
  onReadyRead();
}

void RunnerProcess::onReadyRead() {
  if (!socket_ || !protocolError_.isEmpty()) return;
  const QByteArray bytes = socket_->readAll();
  parser_.feed(std::string_view(bytes.constData(), static_cast<size_t>(bytes.size())));
  try {
    ts::Frame frame;
    while (parser_.next(frame)) {
      switch (frame.type) {
        case 'I': break;  // the run's description: the recording has it
        case 'B': decoder_.add_blob(ts::blob_from_frame_body(frame.body), /*verify=*/false); break;
        case 'E': {
          const ts::EncodedEvent encoded = ts::event_from_frame_body(frame.body);
          ts::Event event = decoder_.decode(encoded);
          pendingTimes_.push_back(encoded.time_ns);
          if (auto* run = std::get_if<ts::KernelRunEvent>(&event))
            lastKernel_ = QString("#%1 %2").arg(run->kernel_id).arg(QString::fromStdString(run->name));
          pending_.push_back(std::move(event));
          break;
        }
        case 'X':
          end_ = ts::run_info_from_json(frame.body);
          haveEnd_ = true;
          break;
        case 'P': {  // paused at the gate: show everything before the stop, then say where
          const QJsonObject where = QJsonDocument::fromJson(QByteArray::fromStdString(frame.body)).object();
          const qint64 number = where.value("pause").toInteger(0);
          if (number > 0 && number == resumedPause_) {  // sent again after an evaluation that crossed our resume
            deliver();
            break;
          }
          pausePoint_ = {where.value("stage").toString(), where.value("kernel_id").toInt(-1),
                         where.value("kernel").toString(), where.value("detail").toString(),
                         where.value("file").toString(), where.value("line").toInt(), number};
          deliver();
          paused_ = true;
          Q_EMIT paused();
          break;
        }
        case 'D': {  // a launch's buffers: a JSON line, then their bytes (app/debugger_gate.h)
          const size_t eol = frame.body.find('\n');
          if (eol == std::string::npos) throw ts::RecordingError("connection: a buffers frame without its header");
          const QJsonObject head = QJsonDocument::fromJson(QByteArray::fromStdString(frame.body.substr(0, eol))).object();
          std::vector<BufferData> buffers;
          size_t at = eol + 1;
          for (const QJsonValue& v : head.value("buffers").toArray()) {
            const QJsonObject b = v.toObject();
            BufferData d{b.value("role").toString(), b.value("index").toInt(), b.value("dtype").toString(),
                         static_cast<qint64>(b.value("numel").toDouble()), {}, b.value("note").toString()};
            const auto bytes = static_cast<size_t>(b.value("bytes").toDouble());
            if (bytes > frame.body.size() - at) throw ts::RecordingError("connection: a buffers frame is cut short");
            d.bytes = QByteArray(frame.body.data() + at, static_cast<qsizetype>(bytes));
            at += bytes;
            buffers.push_back(std::move(d));
          }
          Q_EMIT buffersReady(head.value("kernel_id").toInt(-1), head.value("stage").toString(), buffers);
          break;
        }
        default: throw ts::RecordingError("connection: a frame of unknown type");
      }
    }
  } catch (const ts::RecordingError& e) {
    fail(QString::fromUtf8(e.what()));
    return;
  }
  if (!pending_.empty() && !deliveryTimer_.isActive()) deliveryTimer_.start();
}

void RunnerProcess::deliver() {
  deliveryTimer_.stop();
  if (pending_.empty()) return;
  if (ready_.empty()) ready_.swap(pending_);
  else std::move(pending_.begin(), pending_.end(), std::back_inserter(ready_)), pending_.clear();
  readyTimes_.insert(readyTimes_.end(), pendingTimes_.begin(), pendingTimes_.end());
  pendingTimes_.clear();
  Q_EMIT eventsReady();
}

void RunnerProcess::fail(const QString& message) {
  protocolError_ = message;
  if (process_ && process_->state() != QProcess::NotRunning) {
    process_->kill();
  } else {
    processDone_ = true;
  }
  streamDone_ = true;
  finishIfDone();
}

void RunnerProcess::onProcessFinished(int exitCode, QProcess::ExitStatus status) {
  exitCode_ = exitCode;
  exitStatus_ = status;
  processDone_ = true;
  killTimer_.stop();
  // The runner is gone, so its end of the socket is closed: what it sent is ours to read now.
  if (!socket_ && server_ && server_->hasPendingConnections()) onConnection();
  if (socket_) {
    socket_->waitForReadyRead(0);
    onReadyRead();
    if (socket_->state() != QLocalSocket::ConnectedState) streamDone_ = true;
  } else {
    streamDone_ = true;
  }
  // a socket that never says it is closed must not keep the run open
  if (!streamDone_)
    QTimer::singleShot(1000, this, [this] {
      streamDone_ = true;
      finishIfDone();
    });
  finishIfDone();
}

void RunnerProcess::finishIfDone() {
  if (!running_ || !processDone_ || !streamDone_) return;
  running_ = false;
  paused_ = false;
  killTimer_.stop();
  deliver();

  ScriptOutcome outcome;
  outcome.seconds = clock_.elapsed() / 1000.0;
  const QString after = lastKernel_.isEmpty() ? QString(" before any kernel ran") : " after kernel " + lastKernel_;
  ts::RunInfo end;
  if (!protocolError_.isEmpty()) {
    end.ended = "error";
    end.end_message = protocolError_.toStdString();
  } else if (haveEnd_) {
    end = end_;
  } else if (killed_ || (stopRequested_ && exitStatus_ == QProcess::CrashExit)) {
    end.ended = "stopped";
    end.end_message = QString("stopped: killed %1 s after Stop (the script did not stop)%2")
                          .arg(kStopGraceMs / 1000)
                          .arg(after)
                          .toStdString();
  } else if (exitStatus_ == QProcess::CrashExit) {
    end.ended = "signal";
    end.exit_status = exitCode_;
    QString msg = "ended by signal " + signalName(exitCode_) + after;
    if (exitCode_ == SIGKILL) msg += " (killed: out of memory?)";
    end.end_message = msg.toStdString();
  } else {
    end.ended = "exit";
    end.exit_status = exitCode_;
    end.end_message = QString("ended with exit status %1%2").arg(exitCode_).arg(after).toStdString();
  }
  end.end_time_ns = ts::wall_clock_ns();
  try {  // the recording says how the run ended, also when the runner could not
    if (!haveEnd_ && QFile::exists(recordingPath_)) ts::mark_recording_ended(recordingPath_.toStdString(), end);
  } catch (const ts::RecordingError&) {
  }

  outcome.ended = QString::fromStdString(end.ended);
  outcome.ok = end.ended == "finished";
  outcome.error = QString::fromStdString(end.end_message);
  // the runner appends " (line N)" to a script error
  static const QRegularExpression lineSuffix(R"( \(line (\d+)\)$)");
  if (const auto m = lineSuffix.match(outcome.error); m.hasMatch()) {
    outcome.errorLine = m.captured(1).toInt();
    outcome.error.chop(m.capturedLength());
  }
  Q_EMIT finished(outcome);
}

}  // namespace tsui
