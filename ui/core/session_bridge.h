// Carries engine events from the script thread to the GUI thread.
//
// The engine calls on_event() on the thread that runs the script, with the session's lock held.
// The bridge copies the event and posts it to its own (GUI) thread's event loop, so the engine never
// waits for a widget and widgets never see a half-built event. Signals are emitted on the GUI thread.
#pragma once
#include <QObject>

#include "tensorscope/session.h"

namespace tsui {

class SessionBridge : public QObject, public ts::SessionObserver {
  Q_OBJECT
 public:
  // Subscribes to ts::Session::get() for the bridge's lifetime.
  explicit SessionBridge(QObject* parent = nullptr);
  ~SessionBridge() override;

  void on_event(uint64_t seq, const ts::Event& event) override;

 signals:
  void scheduleReceived(const ts::ScheduleEvent& event);
  void kernelRunReceived(const ts::KernelRunEvent& event);
};

}  // namespace tsui
