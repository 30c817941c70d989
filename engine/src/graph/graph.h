// The lazy graph: a slab of primitive-op nodes addressed by u32 ids, with reference counts.
//
// A node's id is its index in the slab; freed slots are reused, so every node also gets a uid that is
// unique for the process (the GUI and recordings use uids). A node holds references to its sources;
// Tensors hold references through NodeRef. When a node is realized it becomes a Buffer leaf: it keeps
// its id, uid, shape and dtype, gets a device buffer, and drops its sources (which may free them).
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "graph/ops.h"
#include "graph/view.h"
#include "tensorscope/device.h"
#include "tensorscope/dtype.h"

namespace ts {

using NodeId = uint32_t;
constexpr NodeId kNoNode = UINT32_MAX;

struct Node {
  Op op = Op::Const;
  DType dtype = DType::Float32;
  uint8_t num_src = 0;
  NodeId src[3] = {kNoNode, kNoNode, kNoNode};
  uint32_t refcount = 0;
  uint64_t uid = 0;
  int device = 0;                // index in the DeviceRegistry
  Shape shape;
  std::vector<int64_t> arg;      // Reshape/Expand: new shape; Permute: order; Pad/Shrink: flat pairs;
                                 // Flip: 0/1 per axis; Reduce*: reduced axes (sorted)
  double value = 0;              // Const: the value
  int stack = -1;                // where the script made it: an id in Session's stack table (-1: unknown)
  std::shared_ptr<Buffer> buffer;  // set once realized (op is then Buffer)

  bool realized() const { return buffer != nullptr; }
  // Back to a default-constructed node's values, keeping the memory of `shape` and `arg` for the next node
  // made in this slot (Graph::release).
  void reset() {
    Shape kept_shape = std::move(shape);
    std::vector<int64_t> kept_arg = std::move(arg);
    *this = Node{};
    kept_shape.clear();
    kept_arg.clear();
    shape = std::move(kept_shape);
    arg = std::move(kept_arg);
  }
};

class Graph {
 public:
  static Graph& get();

  // Creates a node; takes one reference on each of its `num_srcs` sources (at most 3; std::invalid_argument
  // otherwise). The new node starts with refcount 0: wrap it in a NodeRef. A freed slot is reused with the
  // memory of its shape, so that most nodes cost no allocation of their own (a training step makes hundreds).
  // The shape and `arg` are copied into the slot's kept memory.
  NodeId add(Op op, DType dtype, const Shape& shape, const NodeId* srcs, int num_srcs, const std::vector<int64_t>& arg,
             double value, int device);
  NodeId add(Op op, DType dtype, const Shape& shape, const std::vector<NodeId>& srcs, const std::vector<int64_t>& arg = {},
             double value = 0, int device = 0) {
    return add(op, dtype, shape, srcs.data(), static_cast<int>(srcs.size()), arg, value, device);
  }
  NodeId add_buffer(std::shared_ptr<Buffer> buffer, const Shape& shape);

  Node& operator[](NodeId id) { return nodes_[id]; }
  const Node& operator[](NodeId id) const { return nodes_[id]; }

  void retain(NodeId id) { nodes_[id].refcount++; }
  void release(NodeId id);

  // Turns a computed node into a Buffer leaf holding `buffer`, dropping its sources.
  void set_realized(NodeId id, std::shared_ptr<Buffer> buffer);

  size_t live_nodes() const { return nodes_.size() - free_.size(); }
  // One past the largest node id in use so far (for scratch arrays indexed by node id).
  size_t slab_size() const { return nodes_.size(); }

 private:
  Graph();
  // A deque, not a vector: adding a node never moves the others, so references to a node (and to its
  // shape) stay valid while new nodes are built from it.
  std::deque<Node> nodes_;
  std::vector<NodeId> free_;
  std::vector<NodeId> release_stack_;  // release()'s work list, kept between calls
  bool releasing_ = false;
  uint64_t next_uid_ = 1;
};

// Owning reference to a graph node (RAII refcount).
class NodeRef {
 public:
  NodeRef() = default;
  explicit NodeRef(NodeId id) : id_(id) {
    if (id_ != kNoNode) Graph::get().retain(id_);
  }
  NodeRef(const NodeRef& o) : NodeRef(o.id_) {}
  NodeRef(NodeRef&& o) noexcept : id_(o.id_) { o.id_ = kNoNode; }
  NodeRef& operator=(NodeRef o) {
    std::swap(id_, o.id_);
    return *this;
  }
  ~NodeRef() {
    if (id_ != kNoNode) Graph::get().release(id_);
  }
  NodeId id() const { return id_; }
  const Node& node() const { return Graph::get()[id_]; }

 private:
  NodeId id_ = kNoNode;
};

// Text of a node's argument for listings and the GUI ("(0, 2, 1)", "axes=(1)", "2.5").
std::string node_arg_str(const Node& n);

// The views a chain of movement ops composes to over a value of shape `base`: `chain` from the outermost
// op (the one read) down to the one that reads the value. What the lowering indexes a view with.
ViewStack compose_views(const Graph& g, const std::vector<NodeId>& chain, const Shape& base);

}  // namespace ts
