#include "core/session_bridge.h"

#include <QMetaObject>

namespace tsui {

SessionBridge::SessionBridge(QObject* parent) : QObject(parent) { ts::Session::get().subscribe(this); }

SessionBridge::~SessionBridge() { ts::Session::get().unsubscribe(this); }

void SessionBridge::on_event(uint64_t /*seq*/, const ts::Event& event) {
  // Script output is not forwarded here: the ScriptController receives it through the runner's
  // on_output callback, already tied to the run that produced it.
  if (auto* schedule = std::get_if<ts::ScheduleEvent>(&event)) {
    QMetaObject::invokeMethod(
        this, [this, copy = *schedule] { Q_EMIT scheduleReceived(copy); }, Qt::QueuedConnection);
  } else if (auto* run = std::get_if<ts::KernelRunEvent>(&event)) {
    QMetaObject::invokeMethod(
        this, [this, copy = *run] { Q_EMIT kernelRunReceived(copy); }, Qt::QueuedConnection);
  }
}

}  // namespace tsui
