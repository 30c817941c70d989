#include "core/session_bridge.h"

#include <QMetaObject>
#include <QMutexLocker>
#include <QTimer>

namespace tsui {

SessionBridge::SessionBridge(QObject* parent) : QObject(parent) { ts::Session::get().subscribe(this); }

SessionBridge::~SessionBridge() { ts::Session::get().unsubscribe(this); }

void SessionBridge::on_event(uint64_t /*seq*/, const ts::Event& event) {
  // Script output is not forwarded here: the ScriptController receives it through the runner's
  // on_output callback, already tied to the run that produced it.
  if (std::holds_alternative<ts::ScriptOutputEvent>(event)) return;
  QMutexLocker lock(&mutex_);
  pending_.push_back(event);
  if (deliveryScheduled_) return;
  deliveryScheduled_ = true;
  // Timers belong to the GUI thread: post the request to start one there.
  QMetaObject::invokeMethod(
      this, [this] { QTimer::singleShot(kDeliveryMs, this, &SessionBridge::deliverPending); }, Qt::QueuedConnection);
}

void SessionBridge::deliverPending() {
  std::vector<ts::Event> events;
  {
    QMutexLocker lock(&mutex_);
    events.swap(pending_);
    deliveryScheduled_ = false;
  }
  for (const ts::Event& event : events) {
    if (auto* schedule = std::get_if<ts::ScheduleEvent>(&event))
      Q_EMIT scheduleReceived(*schedule);
    else if (auto* run = std::get_if<ts::KernelRunEvent>(&event))
      Q_EMIT kernelRunReceived(*run);
  }
}

}  // namespace tsui
