#include "tensorscope/session.h"

#include <algorithm>

namespace ts {

Session& Session::get() {
  static Session session;
  return session;
}

void Session::subscribe(SessionObserver* observer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (std::find(observers_.begin(), observers_.end(), observer) == observers_.end()) observers_.push_back(observer);
}

void Session::unsubscribe(SessionObserver* observer) {
  std::lock_guard<std::mutex> lock(mutex_);
  observers_.erase(std::remove(observers_.begin(), observers_.end(), observer), observers_.end());
}

void Session::emit(const Event& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t seq = seq_++;
  for (SessionObserver* o : observers_) o->on_event(seq, event);
}

}  // namespace ts
