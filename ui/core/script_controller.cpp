#include "core/script_controller.h"

#include <QMetaObject>
#include <QMutexLocker>
#include <QThreadPool>

#include "runner.h"

namespace tsui {

ScriptController::ScriptController(QObject* parent) : QObject(parent) {
  thread_.setObjectName("script");
  threadContext_ = new QObject;
  threadContext_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, threadContext_, &QObject::deleteLater);
  thread_.start();
}

ScriptController::~ScriptController() {
  if (running_) ts::ScriptRunner::interrupt();
  thread_.quit();
  thread_.wait();
}

bool ScriptController::start(const QString& path, const QString& source, const QString& device) {
  if (running_) return false;
  running_ = true;
  Q_EMIT started();
  QMetaObject::invokeMethod(
      threadContext_, [this, path, source, device] { runOnScriptThread(path, source, device); }, Qt::QueuedConnection);
  return true;
}

void ScriptController::runOnScriptThread(const QString& path, const QString& source, const QString& device) {
  QElapsedTimer clock;
  clock.start();
  const ts::ScriptResult r = ts::ScriptRunner::run(
      path.toStdString(), source.toStdString(), device.toStdString(), [this](bool isStderr, std::string_view text) {
        appendOutput(isStderr, QString::fromUtf8(text.data(), qsizetype(text.size())));
      });
  const ScriptOutcome outcome{r.ok, QString::fromStdString(r.error), QString::fromStdString(r.traceback), r.error_line,
                              clock.elapsed() / 1000.0};
  QMetaObject::invokeMethod(
      this,
      [this, outcome] {
        flushOutput();  // every byte the script wrote is shown before its end is reported
        running_ = false;
        Q_EMIT finished(outcome);
      },
      Qt::QueuedConnection);
}

void ScriptController::stop() {
  // interrupt() takes the GIL, which a script inside a long engine call may hold for seconds:
  // ask from a pool thread so that the GUI thread never waits for it.
  if (running_) QThreadPool::globalInstance()->start([] { ts::ScriptRunner::interrupt(); });
}

void ScriptController::appendOutput(bool isStderr, QString text) {
  QMutexLocker lock(&outputMutex_);
  if (!pendingOutput_.empty() && pendingOutput_.back().first == isStderr)
    pendingOutput_.back().second += text;
  else
    pendingOutput_.emplace_back(isStderr, std::move(text));
  if (flushScheduled_) return;
  flushScheduled_ = true;
  QMetaObject::invokeMethod(
      this, [this] { flushOutput(); }, Qt::QueuedConnection);
}

void ScriptController::flushOutput() {
  std::vector<std::pair<bool, QString>> chunks;
  {
    QMutexLocker lock(&outputMutex_);
    chunks.swap(pendingOutput_);
    flushScheduled_ = false;
  }
  for (auto& [isStderr, text] : chunks) Q_EMIT output(isStderr, text);
}

}  // namespace tsui
