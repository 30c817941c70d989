#include "tensorscope/session.h"

#include <algorithm>
#include <stdexcept>

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

ScheduleEvent instantiate_schedule(const std::shared_ptr<const ScheduleEvent>& structure,
                                   std::vector<uint64_t> position_uids, const std::vector<int>& kernel_ids,
                                   int schedule_id) {
  if (kernel_ids.size() != structure->kernels.size())
    throw std::invalid_argument("schedule: " + std::to_string(kernel_ids.size()) + " kernel ids for " +
                                std::to_string(structure->kernels.size()) + " kernels");
  ScheduleEvent ev = *structure;
  auto uid = [&](uint64_t& u) {
    if (u >= position_uids.size()) throw std::invalid_argument("schedule: node position " + std::to_string(u) + " out of range");
    u = position_uids[u];
  };
  ev.schedule_id = schedule_id;
  for (GraphNodeInfo& n : ev.nodes) {
    uid(n.uid);
    for (uint64_t& s : n.srcs) uid(s);
  }
  for (size_t k = 0; k < ev.kernels.size(); k++) {
    KernelInfo& ki = ev.kernels[k];
    ki.id = kernel_ids[k];
    for (uint64_t& u : ki.node_uids) uid(u);
    for (BufferInfo& b : ki.inputs) uid(b.node_uid);
    for (BufferInfo& b : ki.outputs) uid(b.node_uid);
  }
  ev.structure = structure;
  ev.position_uids = std::move(position_uids);
  return ev;
}

}  // namespace ts
