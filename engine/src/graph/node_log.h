// The node log: while an observer wants NodesEvents (tensorscope/session.h), Graph::add records every
// node it makes and Graph::release every node it frees; the session turns what is pending into a
// NodesEvent before its next event and when the debugger's gate pauses.
//
// Cost: a record is a copy of the node's few fields (about 0.1 µs). Building the event looks up the
// batch's structure (ops, shapes, sources as positions, stacks) in a table of the batches seen
// before: a training loop repeats the same batch every step, so after the first step an event is a
// table hit plus a list of the external uids, and a recording stores the structure once.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph.h"
#include "tensorscope/session.h"

namespace ts {

class NodeLog {
 public:
  static NodeLog& get();

  void created(const Node& node, const NodeId* srcs);  // srcs: node.num_src ids in the graph
  void freed(uint64_t uid) { freed_.push_back(uid); }
  bool empty() const { return created_.empty() && freed_.empty(); }
  // The pending nodes as events (one per run of consecutive uids: normally one), and clears them.
  std::vector<NodesEvent> take();

 private:
  // A node's fields; its shape and argument are ranges of ints_ (not two vectors of their own: two
  // allocations and two frees for every node a watched script makes).
  struct Created {
    uint64_t uid = 0;
    Op op = Op::Const;
    DType dtype = DType::Float32;
    int stack = -1;
    uint8_t num_src = 0;
    uint32_t rank = 0, arg_size = 0;
    size_t ints = 0;  // ints_[ints, ints + rank): the shape; then arg_size ints: the argument
    uint64_t src[3] = {0, 0, 0};
    double value = 0;
  };
  NodesEvent build(size_t begin, size_t end);

  std::vector<Created> created_;
  std::vector<int64_t> ints_;
  std::vector<uint64_t> freed_;
  // batch key (the structure's bytes) -> the batch; cleared when it grows past kMaxBatches
  std::unordered_map<std::string, std::shared_ptr<const NodeBatch>> batches_;
  static constexpr size_t kMaxBatches = 4096;
};

}  // namespace ts
