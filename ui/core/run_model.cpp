#include "core/run_model.h"

#include <QSet>
#include <algorithm>

namespace tsui {

void RunModel::clear() {
  events_.clear();
  nodeEvents_.clear();
  outputs_.clear();
  trials_.clear();
  trialsOfKernel_.clear();
  created_.clear();
  launchEvent_.clear();
  lazyNow_ = {};
  schedules_.clear();
  instantiated_.clear();
  scheduleKernelIds_.clear();
  kernelOrder_.clear();
  kernels_.clear();
  runs_.clear();
  nodes_.clear();
  nodesIndexed_ = 0;
  totalNodes_ = 0;
  Q_EMIT cleared();
}

void RunModel::addSchedule(ts::ScheduleEvent event, int64_t timeNs) {
  const int s = static_cast<int>(schedules_.size());
  events_.push_back({EventRef::Schedule, s, timeNs});
  schedules_.push_back(std::move(event));
  instantiated_.emplace_back();
  const ts::ScheduleEvent& stored = schedules_.back();
  std::vector<int>& ids = scheduleKernelIds_.emplace_back();
  ts::for_each_kernel(stored, [&](int id, const ts::KernelInfo&) { ids.push_back(id); });
  lazyNow_.apply(*this, events_.back());
  for (int i = 0; i < static_cast<int>(ids.size()); ++i) {
    const int id = ids[i];
    if (!kernels_.contains(id) && !runs_.contains(id)) kernelOrder_.push_back(id);
    kernels_.insert(id, {s, i});
  }
  totalNodes_ += nodeCountOf(s);
  Q_EMIT scheduleAdded(s);
}

void RunModel::indexNodes() const {
  for (; nodesIndexed_ < static_cast<int>(schedules_.size()); ++nodesIndexed_) {
    const int s = nodesIndexed_;
    const ts::ScheduleEvent& stored = schedules_[s];
    // A thin schedule's nodes are its structure's, their uids positions into its position_uids.
    const bool thin = stored.thin();
    const std::vector<ts::GraphNodeInfo>& nodes = thin ? stored.structure->nodes : stored.nodes;
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      const ts::GraphNodeInfo& n = nodes[i];
      if (thin && n.uid >= stored.position_uids.size()) continue;  // (the decoder checks positions)
      const uint64_t uid = thin ? stored.position_uids[n.uid] : n.uid;
      // Keep the computed description of a node over a later "it is a buffer now" one: the op says more.
      if (n.kernel < 0 && nodes_.contains(uid)) continue;
      nodes_.insert(uid, {s, i});
    }
  }
}

const ts::ScheduleEvent& RunModel::schedule(int index) const {
  const ts::ScheduleEvent& stored = schedules_[index];
  if (!stored.thin()) return stored;
  std::unique_ptr<const ts::ScheduleEvent>& whole = instantiated_[index];
  if (!whole) whole = std::make_unique<const ts::ScheduleEvent>(ts::full_schedule(stored));
  return *whole;
}

template <class F>
void RunModel::forEachComputedUid(const ts::ScheduleEvent& schedule, F&& f) {
  const bool thin = schedule.thin();
  const std::vector<ts::KernelInfo>& kernels = thin ? schedule.structure->kernels : schedule.kernels;
  for (int k = 0; k < static_cast<int>(kernels.size()); ++k)
    for (uint64_t u : kernels[k].node_uids) {
      if (!thin) f(k, u);
      else if (u < schedule.position_uids.size()) f(k, schedule.position_uids[u]);
    }
}

void RunModel::addKernelRun(ts::KernelRunEvent event, int64_t timeNs) {
  const int id = event.kernel_id;
  // A jit replay runs the code of the launch it captured: show that code with it.
  if (event.replayed && !event.code)
    if (const ts::KernelRunEvent* captured = kernelRun(event.replay_of)) event.code = captured->code;
  runs_.insert(id, std::move(event));
  launchEvent_.insert(id, static_cast<int>(events_.size()));
  events_.push_back({EventRef::Launch, id, timeNs});
  // A launch can arrive for a kernel whose schedule we did not see (an observer attached late).
  if (!kernels_.contains(id)) kernelOrder_.push_back(id);
  Q_EMIT kernelRunAdded(id);
}

const ts::KernelInfo* RunModel::kernel(int kernelId) const {
  auto it = kernels_.find(kernelId);
  if (it == kernels_.end()) return nullptr;
  return &schedule(it->schedule).kernels[it->index];
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
  indexNodes();
  auto it = nodes_.find(uid);
  if (it == nodes_.end()) return nullptr;
  return &schedule(it->schedule).nodes[it->index];
}

void RunModel::addNodes(ts::NodesEvent event, int64_t timeNs) {
  const int e = static_cast<int>(nodeEvents_.size());
  if (event.size() > 0) created_[event.first_uid] = e;
  events_.push_back({EventRef::Nodes, e, timeNs});
  nodeEvents_.push_back(std::move(event));
  lazyNow_.apply(*this, events_.back());
}

void RunModel::addOutput(ts::ScriptOutputEvent event, int64_t timeNs) {
  events_.push_back({EventRef::Output, static_cast<int>(outputs_.size()), timeNs});
  outputs_.push_back(std::move(event));
}

void RunModel::addTrial(ts::AutotuneTrialEvent event, int64_t timeNs) {
  const int t = static_cast<int>(trials_.size());
  events_.push_back({EventRef::Trial, t, timeNs});
  trialsOfKernel_[event.kernel_id].push_back(t);
  trials_.push_back(std::move(event));
}

int RunModel::eventOfSchedule(int scheduleIndex) const {
  for (int i = 0; i < static_cast<int>(events_.size()); ++i)
    if (events_[i].kind == EventRef::Schedule && events_[i].index == scheduleIndex) return i;
  return -1;
}

RunModel::CreatedRef RunModel::createdRef(uint64_t uid) const {
  auto it = created_.upper_bound(uid);  // the batch with the greatest first uid <= uid
  if (it == created_.begin()) return {};
  --it;
  const ts::NodesEvent& ev = nodeEvents_[it->second];
  if (uid - ev.first_uid >= ev.size()) return {};
  return {it->second, static_cast<int>(uid - ev.first_uid)};
}

const ts::SourceStack* RunModel::stackOf(uint64_t uid) const {
  const CreatedRef ref = createdRef(uid);
  if (ref.event < 0) return nullptr;
  const ts::NodesEvent& ev = nodeEvents_[ref.event];
  const int s = ev.batch->stack[ref.position];
  return s < 0 ? nullptr : &ev.batch->stacks[s];
}

ts::SourceLocation RunModel::whereMade(uint64_t uid) const {
  const ts::SourceStack* stack = stackOf(uid);
  return stack ? stack->where() : ts::SourceLocation{};
}

std::optional<ts::GraphNodeInfo> RunModel::createdNode(uint64_t uid) const {
  const CreatedRef ref = createdRef(uid);
  if (ref.event < 0) return std::nullopt;
  const ts::NodesEvent& ev = nodeEvents_[ref.event];
  ts::GraphNodeInfo info = ev.batch->nodes[ref.position];
  info.uid = uid;
  for (uint64_t& src : info.srcs) src = ev.uid_at(src);
  return info;
}

std::vector<uint64_t> RunModel::nodesMadeAt(int line) const {
  std::vector<uint64_t> uids;
  const std::string path = scriptPath_.toStdString();
  for (const ts::NodesEvent& ev : nodeEvents_) {
    // per batch: which of its stacks are at that line (batches repeat, stacks are few)
    std::vector<char> atLine(ev.batch->stacks.size());
    bool any = false;
    for (size_t s = 0; s < atLine.size(); ++s) {
      const ts::SourceLocation w = ev.batch->stacks[s].where();
      atLine[s] = w.line == line && (path.empty() || w.file == path);
      any = any || atLine[s];
    }
    if (!any) continue;
    for (size_t i = 0; i < ev.size(); ++i)
      if (ev.batch->stack[i] >= 0 && atLine[ev.batch->stack[i]]) uids.push_back(ev.uid(i));
  }
  return uids;
}

std::vector<int> RunModel::kernelsFromLine(int line) const {
  const std::vector<uint64_t> made = nodesMadeAt(line);
  QSet<quint64> uids(made.begin(), made.end());
  std::vector<int> ids;
  for (size_t s = 0; s < schedules_.size(); ++s) {
    int matched = -1;  // the kernel (index in its schedule) already listed
    forEachComputedUid(schedules_[s], [&](int k, uint64_t u) {
      if (k != matched && uids.contains(u)) {
        ids.push_back(scheduleKernelIds_[s][k]);
        matched = k;
      }
    });
  }
  return ids;
}

void RunModel::LazyState::apply(const RunModel& model, const EventRef& ref) {
  if (ref.kind == EventRef::Nodes) {
    const ts::NodesEvent& ev = model.nodeEvents_[ref.index];
    for (size_t i = 0; i < ev.size(); ++i) {
      pending.insert(ev.uid(i), static_cast<int>(order.size()));
      order.push_back(ev.uid(i));
    }
    for (uint64_t u : ev.freed_uids) pending.remove(u);
  } else if (ref.kind == EventRef::Schedule) {
    forEachComputedUid(model.schedules_[ref.index], [&](int, uint64_t u) { pending.remove(u); });
  }
  // drop what is no longer pending once it is most of the list (a training loop frees every step)
  if (order.size() > 4096 && order.size() > 4 * static_cast<size_t>(pending.size())) {
    std::vector<uint64_t> kept;
    for (uint64_t u : order)
      if (pending.contains(u)) {
        pending[u] = static_cast<int>(kept.size());
        kept.push_back(u);
      }
    order.swap(kept);
  }
}

RunModel::LazyGraph RunModel::lazyGraphAt(int eventIndex, int limit) const {
  // A node is pending from its creation until a schedule computes it or it is freed. The state after
  // the last event is kept; an earlier event (a recording stepped back) replays from the start.
  LazyState replayed;
  const LazyState* state = &lazyNow_;
  if (eventIndex < static_cast<int>(events_.size()) - 1) {
    for (int e = 0; e <= eventIndex; ++e) replayed.apply(*this, events_[e]);
    state = &replayed;
  }
  LazyGraph g;
  for (uint64_t u : state->order)
    if (state->pending.contains(u)) g.pending.push_back(u);
  g.total = static_cast<int>(g.pending.size());
  if (static_cast<int>(g.pending.size()) > limit) g.pending.erase(g.pending.begin(), g.pending.end() - limit);
  QSet<quint64> shown(g.pending.begin(), g.pending.end()), inputs;
  for (uint64_t u : g.pending)
    if (auto info = createdNode(u))
      for (uint64_t src : info->srcs)
        if (!shown.contains(src) && !inputs.contains(src)) {
          inputs.insert(src);
          g.inputs.push_back(src);
        }
  return g;
}

}  // namespace tsui
