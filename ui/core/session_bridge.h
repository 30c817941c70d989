// Carries engine events from the script thread to the GUI thread.
//
// The engine calls on_event() on the thread that runs the script, with the session's lock held.
// The bridge copies the event into a queue and makes sure one delivery is pending on the GUI
// thread, so the engine never waits for a widget. Events are delivered in batches, at most every
// kDeliveryMs: a training loop emits thousands of events a second, and handling each on its own
// would repaint the panels thousands of times, taking the CPU from the script. Signals are
// emitted on the GUI thread, in emission order.
#pragma once
#include <QMutex>
#include <QObject>
#include <vector>

#include "tensorscope/session.h"

namespace tsui {

class SessionBridge : public QObject, public ts::SessionObserver {
  Q_OBJECT
 public:
  // Subscribes to ts::Session::get() for the bridge's lifetime.
  explicit SessionBridge(QObject* parent = nullptr);
  ~SessionBridge() override;

  void on_event(uint64_t seq, const ts::Event& event) override;
  // Delivers what is queued now (when a run ends, so that its last events are not 50 ms late).
  void deliverPending();

  static constexpr int kDeliveryMs = 50;

 signals:
  void scheduleReceived(const ts::ScheduleEvent& event);
  void kernelRunReceived(const ts::KernelRunEvent& event);

 private:
  QMutex mutex_;
  std::vector<ts::Event> pending_;
  bool deliveryScheduled_ = false;
};

}  // namespace tsui
