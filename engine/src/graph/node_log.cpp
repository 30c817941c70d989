#include "graph/node_log.h"

#include <cstring>

namespace ts {

NodeLog& NodeLog::get() {
  static NodeLog log;
  return log;
}

void NodeLog::created(const Node& n, const NodeId* srcs) {
  Created& c = created_.emplace_back();
  c.uid = n.uid;
  c.op = n.op;
  c.dtype = n.dtype;
  c.stack = n.stack;
  c.num_src = n.num_src;
  const Graph& g = Graph::get();
  for (int i = 0; i < n.num_src; i++) c.src[i] = g[srcs[i]].uid;
  c.rank = static_cast<uint32_t>(n.shape.size());
  c.arg_size = static_cast<uint32_t>(n.arg.size());
  c.ints = ints_.size();
  ints_.insert(ints_.end(), n.shape.begin(), n.shape.end());
  ints_.insert(ints_.end(), n.arg.begin(), n.arg.end());
  c.value = n.value;
}

namespace {

template <typename T>
void append(std::string& key, const T& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

NodesEvent NodeLog::build(size_t begin, size_t end) {
  NodesEvent ev;
  const size_t count = end - begin;
  ev.first_uid = created_[begin].uid;
  // Positions: the batch's own nodes first, then each earlier node it reads, in order of first use.
  std::unordered_map<uint64_t, uint64_t> external;
  auto position = [&](uint64_t uid) -> uint64_t {
    if (uid >= ev.first_uid && uid < ev.first_uid + count) return uid - ev.first_uid;
    auto [it, fresh] = external.emplace(uid, count + ev.external_uids.size());
    if (fresh) ev.external_uids.push_back(uid);
    return it->second;
  };
  // The key holds everything the batch's structure is made of; stack ids are the session's (stable).
  std::string key;
  key.reserve(count * 48);
  for (size_t i = begin; i < end; i++) {
    const Created& c = created_[i];
    append(key, static_cast<uint8_t>(c.op));
    append(key, static_cast<uint8_t>(c.dtype));
    append(key, c.num_src);
    append(key, c.rank);
    append(key, c.arg_size);
    append(key, c.stack);
    for (int s = 0; s < c.num_src; s++) append(key, position(c.src[s]));
    key.append(reinterpret_cast<const char*>(ints_.data() + c.ints), (c.rank + c.arg_size) * sizeof(int64_t));
    if (c.op == Op::Const) append(key, c.value);
  }
  if (auto it = batches_.find(key); it != batches_.end()) {
    ev.batch = it->second;
    return ev;
  }
  auto batch = std::make_shared<NodeBatch>();
  std::unordered_map<int, int> local_stack;  // session stack id -> index into batch->stacks
  Session& session = Session::get();
  for (size_t i = begin; i < end; i++) {
    const Created& c = created_[i];
    GraphNodeInfo info;
    info.uid = i - begin;
    info.op = op_name(c.op);
    info.op_class = op_class_name(op_class(c.op));
    const int64_t* ints = ints_.data() + c.ints;
    info.shape.assign(ints, ints + c.rank);
    info.dtype = dtype_name(c.dtype);
    for (int s = 0; s < c.num_src; s++) info.srcs.push_back(position(c.src[s]));
    Node scratch;  // node_arg_str reads these fields only
    scratch.op = c.op;
    scratch.dtype = c.dtype;
    scratch.arg.assign(ints + c.rank, ints + c.rank + c.arg_size);
    scratch.value = c.value;
    info.arg = node_arg_str(scratch);
    batch->nodes.push_back(std::move(info));
    int local = -1;
    if (c.stack >= 0) {
      auto [it, fresh] = local_stack.emplace(c.stack, static_cast<int>(batch->stacks.size()));
      if (fresh) batch->stacks.push_back(session.stack(c.stack));
      local = it->second;
    }
    batch->stack.push_back(local);
  }
  if (batches_.size() >= kMaxBatches) batches_.clear();
  batches_.emplace(std::move(key), batch);
  ev.batch = std::move(batch);
  return ev;
}

std::vector<NodesEvent> NodeLog::take() {
  std::vector<NodesEvent> events;
  if (empty()) return events;
  size_t begin = 0;
  for (size_t i = 1; i <= created_.size(); i++) {
    if (i < created_.size() && created_[i].uid == created_[i - 1].uid + 1) continue;
    events.push_back(build(begin, i));
    begin = i;
  }
  static const auto kNoNodes = std::make_shared<const NodeBatch>();  // one for every frees-only event
  if (events.empty()) events.emplace_back();  // frees only
  events.back().freed_uids = std::move(freed_);
  if (!events.back().batch) events.back().batch = kNoNodes;
  created_.clear();
  ints_.clear();
  freed_.clear();
  return events;
}

}  // namespace ts
