#include "core/run_model.h"

namespace tsui {

void RunModel::clear() {
  schedules_.clear();
  kernelOrder_.clear();
  kernels_.clear();
  runs_.clear();
  nodes_.clear();
  totalNodes_ = 0;
  Q_EMIT cleared();
}

void RunModel::addSchedule(ts::ScheduleEvent event) {
  const int s = static_cast<int>(schedules_.size());
  schedules_.push_back(std::move(event));
  const ts::ScheduleEvent& stored = schedules_.back();
  for (int i = 0; i < static_cast<int>(stored.kernels.size()); ++i) {
    const int id = stored.kernels[i].id;
    if (!kernels_.contains(id) && !runs_.contains(id)) kernelOrder_.push_back(id);
    kernels_.insert(id, {s, i});
  }
  for (int i = 0; i < static_cast<int>(stored.nodes.size()); ++i) {
    // Keep the computed description of a node over a later "it is a buffer now" one: the op says more.
    const ts::GraphNodeInfo& n = stored.nodes[i];
    if (n.kernel < 0 && nodes_.contains(n.uid)) continue;
    nodes_.insert(n.uid, {s, i});
  }
  totalNodes_ += static_cast<int>(stored.nodes.size());
  Q_EMIT scheduleAdded(s);
}

void RunModel::addKernelRun(ts::KernelRunEvent event) {
  const int id = event.kernel_id;
  // A jit replay runs the code of the launch it captured: show that code with it.
  if (event.replayed && !event.code)
    if (const ts::KernelRunEvent* captured = kernelRun(event.replay_of)) event.code = captured->code;
  runs_.insert(id, std::move(event));
  // A launch can arrive for a kernel whose schedule we did not see (an observer attached late).
  if (!kernels_.contains(id)) kernelOrder_.push_back(id);
  Q_EMIT kernelRunAdded(id);
}

const ts::KernelInfo* RunModel::kernel(int kernelId) const {
  auto it = kernels_.find(kernelId);
  if (it == kernels_.end()) return nullptr;
  return &schedules_[it->schedule].kernels[it->index];
}

const ts::KernelRunEvent* RunModel::kernelRun(int kernelId) const {
  auto it = runs_.find(kernelId);
  return it == runs_.end() ? nullptr : &*it;
}

int RunModel::scheduleOfKernel(int kernelId) const {
  auto it = kernels_.find(kernelId);
  return it == kernels_.end() ? -1 : it->schedule;
}

const ts::GraphNodeInfo* RunModel::node(uint64_t uid) const {
  auto it = nodes_.find(uid);
  if (it == nodes_.end()) return nullptr;
  return &schedules_[it->schedule].nodes[it->index];
}

}  // namespace tsui
