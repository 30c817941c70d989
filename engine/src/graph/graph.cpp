#include "graph/graph.h"

#include "graph/node_log.h"

#include <sstream>
#include <stdexcept>
#include <string>

#include "tensorscope/session.h"

namespace ts {

const char* op_name(Op op) {
  static const char* names[] = {"BUFFER", "CONST",  "RESHAPE", "PERMUTE", "EXPAND", "PAD",   "SHRINK", "FLIP",
                                "NEG",    "EXP2",   "LOG2",    "SIN",     "SQRT",   "RECIP", "CAST",   "ADD",
                                "MUL",    "MAX",    "CMPLT",   "CMPEQ",   "IDIV",   "MOD",   "WHERE",  "SUM",
                                "REDUCE_MAX", "CONTIGUOUS", "COPY"};
  return names[static_cast<int>(op)];
}

const char* op_class_name(OpClass c) {
  static const char* names[] = {"load", "const", "movement", "elementwise", "reduce", "other"};
  return names[static_cast<int>(c)];
}

Graph& Graph::get() {
  static Graph graph;
  return graph;
}

Graph::Graph() {
  Session::get().set_pending_nodes([] { return NodeLog::get().take(); });
}

NodeId Graph::add(Op op, DType dtype, const Shape& shape, const NodeId* srcs, int num_srcs, const std::vector<int64_t>& arg,
                  double value, int device) {
  if (num_srcs < 0 || num_srcs > 3)
    throw std::invalid_argument(std::string("Graph::add: a ") + op_name(op) + " node takes at most 3 sources, got " + std::to_string(num_srcs));
  NodeId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<NodeId>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& n = nodes_[id];  // a fresh or a freed node (release() left its fields at their defaults)
  n.op = op;
  n.dtype = dtype;
  n.shape.assign(shape.begin(), shape.end());
  n.arg.assign(arg.begin(), arg.end());
  n.value = value;
  n.device = device;
  n.uid = next_uid_++;
  n.num_src = static_cast<uint8_t>(num_srcs);
  for (int i = 0; i < num_srcs; i++) {
    n.src[i] = srcs[i];
    nodes_[srcs[i]].refcount++;
  }
  if (Session& s = Session::get(); s.tracking_sources()) {
    n.stack = s.locate_stack();
    if (s.logging_nodes()) NodeLog::get().created(n, n.src);
  }
  return id;
}

NodeId Graph::add_buffer(std::shared_ptr<Buffer> buffer, const Shape& shape) {
  DType dt = buffer->dtype;
  int dev = buffer->device_index;
  NodeId id = add(Op::Buffer, dt, shape, {}, {}, 0, dev);
  nodes_[id].buffer = std::move(buffer);
  return id;
}

void Graph::release(NodeId id) {
  if (nodes_[id].refcount > 1) {  // the common case: still referenced, nothing to free
    nodes_[id].refcount--;
    return;
  }
  // iterative, so that freeing a long chain cannot overflow the stack; the graph's own stack (no allocation
  // per call) unless this runs inside another release (a buffer's deleter making and dropping nodes)
  std::vector<NodeId> nested;
  std::vector<NodeId>& stack = releasing_ ? nested : release_stack_;
  const bool outermost = !releasing_;
  releasing_ = true;
  stack.clear();
  stack.push_back(id);
  const bool logging = Session::get().logging_nodes();
  while (!stack.empty()) {
    NodeId cur = stack.back();
    stack.pop_back();
    Node& n = nodes_[cur];
    if (--n.refcount > 0) continue;
    for (int i = 0; i < n.num_src; i++) stack.push_back(n.src[i]);
    if (logging) NodeLog::get().freed(n.uid);
    n.reset();
    free_.push_back(cur);
  }
  if (outermost) releasing_ = false;
}

void Graph::set_realized(NodeId id, std::shared_ptr<Buffer> buffer) {
  Node& n = nodes_[id];
  // a freed slot would keep the buffer for the next node made in it
  if (n.refcount == 0) throw std::logic_error("Graph::set_realized: node " + std::to_string(id) + " is not referenced (freed)");
  std::vector<NodeId> old(n.src, n.src + n.num_src);
  n.op = Op::Buffer;
  n.num_src = 0;
  n.arg.clear();
  n.buffer = std::move(buffer);
  for (NodeId s : old) release(s);
}

std::string node_arg_str(const Node& n) {
  std::ostringstream o;
  switch (n.op) {
    case Op::Const: o << n.value; break;
    case Op::Reshape: case Op::Expand: o << "(" << shape_str(n.arg) << ")"; break;
    case Op::Permute: o << "order=(" << shape_str(n.arg) << ")"; break;
    case Op::Pad: case Op::Shrink: {
      o << "(";
      for (size_t i = 0; i + 1 < n.arg.size(); i += 2) o << (i ? ", " : "") << "(" << n.arg[i] << "," << n.arg[i + 1] << ")";
      o << ")";
      break;
    }
    case Op::Flip: case Op::ReduceSum: case Op::ReduceMax: o << "axes=(" << shape_str(n.arg) << ")"; break;
    case Op::Cast: o << dtype_name(n.dtype); break;
    default: break;
  }
  return o.str();
}

ViewStack compose_views(const Graph& g, const std::vector<NodeId>& chain, const Shape& base) {
  ViewStack vs = ViewStack::make(base);
  for (size_t i = chain.size(); i-- > 0;) {
    const Node& m = g[chain[i]];
    switch (m.op) {
      case Op::Reshape: vs = vs.reshape(m.shape); break;
      case Op::Permute: vs = vs.permute(m.arg); break;
      case Op::Expand: vs = vs.expand(m.shape); break;
      case Op::Pad: case Op::Shrink: {
        Pairs p;
        for (size_t k = 0; k + 1 < m.arg.size(); k += 2) p.push_back({m.arg[k], m.arg[k + 1]});
        vs = m.op == Op::Pad ? vs.pad(p) : vs.shrink(p);
        break;
      }
      case Op::Flip: {
        std::vector<bool> axes(m.arg.begin(), m.arg.end());
        vs = vs.flip(axes);
        break;
      }
      default: break;
    }
  }
  return vs;
}

}  // namespace ts
