#include "schedule/schedule.h"
#include "tensorscope/device.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace ts {
namespace {

std::string node_label(const Graph& g, NodeId id) {
  std::ostringstream o;
  o << op_name(g[id].op) << " #" << g[id].uid;
  return o.str();
}

// Post-order DFS over the unrealized part of the graph (iterative: graphs can be deep).
std::vector<NodeId> toposort(const Graph& g, const std::vector<NodeId>& targets) {
  std::vector<NodeId> order;
  std::set<NodeId> seen;
  std::vector<std::pair<NodeId, int>> stack;
  for (NodeId t : targets) {
    if (seen.count(t)) continue;
    stack.push_back({t, 0});
    seen.insert(t);
    while (!stack.empty()) {
      auto& [id, i] = stack.back();
      const Node& n = g[id];
      if (!n.realized() && i < n.num_src) {
        NodeId s = n.src[i++];
        if (!seen.count(s)) {
          seen.insert(s);
          stack.push_back({s, 0});
        }
        continue;
      }
      order.push_back(id);
      stack.pop_back();
    }
  }
  return order;
}

// The first broadcast dim of an expand that broadcasts a value only along trailing dims and keeps at least
// one leading dim of size > 1 (the shape test of is_row_local_expand); 0 for any other expand.
int64_t trailing_broadcast_start(const Graph& g, NodeId id) {
  const Node& e = g[id];
  const Shape& in = g[e.src[0]].shape;
  const Shape& out = e.shape;
  size_t first_broadcast = out.size();
  for (size_t d = 0; d < out.size(); d++)
    if (in[d] != out[d]) {
      first_broadcast = d;
      break;
    }
  if (first_broadcast == 0 || first_broadcast == out.size()) return 0;
  for (size_t d = first_broadcast; d < out.size(); d++)
    if (in[d] != 1) return 0;  // every trailing dim broadcast (a matmul operand's middle dim is not)
  int64_t rows = 1;
  for (size_t d = 0; d < first_broadcast; d++) rows *= out[d];
  return rows > 1 ? static_cast<int64_t>(first_broadcast) : 0;
}

bool is_transcendental(Op op) { return op == Op::Exp2 || op == Op::Log2 || op == Op::Sin || op == Op::Sqrt; }
// The transcendentals a register-tiled matmul's epilogue would run once per accumulator, unvectorized (SQRT is
// one instruction): transcendental_epilogue stores such a matmul, merge_multi_output keeps them out of a reduce's
// kernel.
bool is_polynomial_transcendental(Op op) { return op == Op::Exp2 || op == Op::Log2 || op == Op::Sin; }

// The values with an EXP2, LOG2, SIN or SQRT per element in their expression: among their ALU sources and
// the views of them that broadcast nothing, up to realized buffers and reduces. A softmax's gradient
// p * (g - sum(g * p)) holds p's EXP2 beside the broadcast sum. A transcendental behind an expand (a
// LayerNorm's 1/sqrt(var) per row) does not count: the row's value may be stored on its own, and then
// rule 3 sees no transcendental in the value. `nodes`: sources before consumers.
std::set<NodeId> per_element_transcendentals(const Graph& g, const std::vector<NodeId>& nodes) {
  std::set<NodeId> found;
  for (NodeId id : nodes) {
    const Node& n = g[id];
    if (n.realized() || is_reduce(n.op) || n.op == Op::Expand || !(is_alu(n.op) || is_movement(n.op))) continue;
    bool t = is_transcendental(n.op);
    for (int i = 0; i < n.num_src && !t; i++) t = found.count(n.src[i]) > 0;
    if (t) found.insert(id);
  }
  return found;
}

// An expand that broadcasts a value only along trailing dims, keeping at least one leading dim of size
// > 1 — a reduce's result over the rows (x.max(-1, keepdim=True).expand(x.shape)). A reduce read
// this way fuses into its consumer: in the consumer's loop nest the reduce depends only on the outer
// (row) loops, so loop-invariant code motion computes it once per row, before the loop over the row
// (softmax, log_softmax and layernorm become one kernel per row: beyond tinygrad's default fusion).
//
// The walk stops at a value the kernelizer stores anyway, whatever it reads: one with an EXP2, LOG2, SIN or
// SQRT in its elementwise expression (on the way from the expand, or in another operand: the classifier's
// softmax in the loss gradient that meets the broadcast sum) that a consumer reads through a broadcast of
// kBroadcastRecomputeLimit or more (`stored_broadcast`: rule 3 in schedule.h stores it). What reads it reads
// memory, so its loops do not matter. Attention's softmax is read that way by `p @ v` (and its gradient by
// the matmuls of the backward): without the stop, its max and sum were stored by kernels of their own.
// `stored_broadcast`: for each value, the largest broadcast a consumer reads it through, counting no
// expand that could be row-local (a lower bound of the factor the storing rule sees). `transcendentals`:
// per_element_transcendentals (what the walk passes is elementwise, so an EXP2 on the way from the
// expand is in the expression of every value after it).
bool is_row_local_expand(const Graph& g, const std::map<NodeId, std::vector<NodeId>>& consumers, NodeId id,
                         const std::map<NodeId, int64_t>& stored_broadcast, const std::set<NodeId>& transcendentals) {
  const int64_t first_broadcast_dim = trailing_broadcast_start(g, id);
  if (first_broadcast_dim == 0) return false;
  // Downstream, the broadcast value may only meet elementwise ops and reduces over the broadcast dims
  // themselves: then the row stays innermost in the consumer's loops. A reduce over another axis (a
  // matmul's backward summing over rows) would put the row loop outside the reduce and recompute the
  // broadcast reduction in every iteration; a movement op could reorder the loops.
  std::vector<NodeId> stack{id};
  std::set<NodeId> seen{id};
  while (!stack.empty()) {
    const NodeId cur = stack.back();
    stack.pop_back();
    if (transcendentals.count(cur)) {
      auto b = stored_broadcast.find(cur);
      if (b != stored_broadcast.end() && b->second >= kBroadcastRecomputeLimit) continue;  // stored: see above
    }
    auto it = consumers.find(cur);
    if (it == consumers.end()) continue;
    for (NodeId c : it->second) {
      if (!seen.insert(c).second) continue;
      if (seen.size() > 256) return false;
      const Node& n = g[c];
      if (is_reduce(n.op)) {
        for (int64_t a : n.arg)
          if (a < first_broadcast_dim) return false;
        continue;  // the reduce's own output is judged by its own expand
      }
      if (!is_alu(n.op)) return false;
      stack.push_back(c);
    }
  }
  return true;
}

// Do the consumers of `id` all feed, each through a chain of single-consumer ops, into one common node?
// Then they end up in one kernel: a tie-aware relu reads its input three times (x <= 0, x == 0, the
// WHERE) in one loop body, where the value is computed once. Sets *through_reduce when a chain passes a
// reduce before the common node: then the kernel evaluates the value in more than one loop (softmax
// reads exp(x - max) in the loop of its sum and again in the loop of its division).
bool consumers_converge(const Graph& g, std::map<NodeId, std::vector<NodeId>>& consumers,
                        const std::vector<NodeId>& cs, const std::set<NodeId>& targets, bool* through_reduce) {
  std::map<NodeId, int> hits;
  std::vector<std::vector<NodeId>> chains;
  for (NodeId c : cs) {
    std::set<NodeId> seen;
    std::vector<NodeId>& chain = chains.emplace_back();
    NodeId cur = c;
    for (int step = 0; step < 64; step++) {
      if (!seen.insert(cur).second) break;
      hits[cur]++;
      chain.push_back(cur);
      if (targets.count(cur)) break;  // a target is stored: what reads it is another kernel
      const Node& n = g[cur];
      auto it = consumers.find(cur);
      if (!(is_alu(n.op) || is_movement(n.op) || is_reduce(n.op)) || it == consumers.end() || it->second.size() != 1) break;
      cur = it->second[0];
    }
  }
  *through_reduce = false;
  for (const std::vector<NodeId>& chain : chains)
    for (NodeId node : chain) {
      if (hits[node] == static_cast<int>(cs.size())) break;  // the first common node
      if (is_reduce(g[node].op)) *through_reduce = true;
    }
  for (auto& [node, count] : hits)
    if (count == static_cast<int>(cs.size())) return true;
  return false;
}

// The ops that read the value of `id`: its consumers, and through chains of movement ops the consumers of
// those (a weight gradient reshaped and permuted, then read by Adam's first- and second-moment updates, is
// read twice: each reader inlines the movement ops and recomputes the reduction underneath). A movement
// op that is itself a target is a reader: it is stored, so it computes the value too.
std::vector<NodeId> value_readers(const Graph& g, std::map<NodeId, std::vector<NodeId>>& consumers, NodeId id,
                                  const std::set<NodeId>& targets) {
  std::vector<NodeId> readers, stack{id};
  std::set<NodeId> seen;
  while (!stack.empty()) {
    const NodeId cur = stack.back();
    stack.pop_back();
    for (NodeId c : consumers[cur]) {
      if (!seen.insert(c).second) continue;
      if (is_movement(g[c].op) && !g[c].realized() && !targets.count(c)) stack.push_back(c);
      else readers.push_back(c);
    }
  }
  return readers;
}

// A contiguous() that reads `id` through movement ops with a PERMUTE among them that moves the innermost axis
// (of more than one element, onto an axis of more than one): a transposing copy, an NCHW gradient copied
// channels-last for a convolution's weight gradient. None when no reader is one.
std::optional<NodeId> transposing_copy_reader(const Graph& g, std::map<NodeId, std::vector<NodeId>>& consumers, NodeId id,
                                              const std::set<NodeId>& targets) {
  std::vector<std::pair<NodeId, bool>> stack{{id, false}};  // (node, whether the path to it transposed)
  std::set<NodeId> seen;
  while (!stack.empty()) {
    const auto [cur, transposed] = stack.back();
    stack.pop_back();
    for (NodeId c : consumers[cur]) {
      const Node& n = g[c];
      if (n.realized() || !seen.insert(c).second) continue;
      if (n.op == Op::Contiguous && transposed) return c;
      if (!is_movement(n.op) || targets.count(c)) continue;
      const Shape& in = g[cur].shape;
      const bool moves_last = n.op == Op::Permute && !n.arg.empty() && n.arg.back() != static_cast<int64_t>(n.arg.size()) - 1 &&
                              in.back() > 1 && in[static_cast<size_t>(n.arg.back())] > 1;
      stack.push_back({c, transposed || moves_last});
    }
  }
  return std::nullopt;
}

// The inputs (realized or stored values) of `id`'s fused subtree with as many elements as `id`: the tensors an
// elementwise value moves element by element (a per-channel parameter read through a broadcast is not one).
int full_size_inputs(const Graph& g, NodeId id, const std::function<bool(NodeId)>& is_input) {
  const int64_t numel = shape_numel(g[id].shape);
  std::set<NodeId> inputs, seen{id};
  std::vector<NodeId> stack{id};
  while (!stack.empty() && seen.size() < 256) {
    const Node& n = g[stack.back()];
    stack.pop_back();
    for (int i = 0; i < n.num_src; i++) {
      const NodeId s = n.src[i];
      if (!seen.insert(s).second) continue;
      if (is_input(s)) {
        if (shape_numel(g[s].shape) == numel) inputs.insert(s);
      } else {
        stack.push_back(s);
      }
    }
  }
  return static_cast<int>(inputs.size());
}

// The first reduce among `readers` (value_readers: the ops that read a value, through movement ops).
std::optional<NodeId> reducing_reader(const Graph& g, const std::vector<NodeId>& readers) {
  for (NodeId r : readers)
    if (is_reduce(g[r].op)) return r;
  return std::nullopt;
}

// The first EXP2, LOG2 or SIN among the elementwise ops that would fuse behind `id` (its consumers
// through movement and ALU ops, up to a reduce or a target); "" when there is none.
std::string transcendental_epilogue(const Graph& g, std::map<NodeId, std::vector<NodeId>>& consumers, NodeId id,
                                    const std::set<NodeId>& targets) {
  std::vector<NodeId> stack{id};
  std::set<NodeId> seen{id};
  while (!stack.empty()) {
    const NodeId cur = stack.back();
    stack.pop_back();
    for (NodeId c : consumers[cur]) {
      const Node& n = g[c];
      if (!seen.insert(c).second || seen.size() > 64 || n.realized()) continue;
      if (is_polynomial_transcendental(n.op)) return op_name(n.op);
      if ((is_alu(n.op) || is_movement(n.op)) && !targets.count(c)) stack.push_back(c);
    }
  }
  return "";
}

// "12.8 MFLOP": the work of recomputing a reduction once (its input's elements times the ALU ops fused
// into the value: a matmul's multiply and add are 2 per element).
std::string flops_text(int64_t flops) {
  char text[32];
  if (flops >= 1000000000) std::snprintf(text, sizeof text, "%.1f GFLOP", static_cast<double>(flops) / 1e9);
  else if (flops >= 1000000) std::snprintf(text, sizeof text, "%.1f MFLOP", static_cast<double>(flops) / 1e6);
  else std::snprintf(text, sizeof text, "%.1f kFLOP", static_cast<double>(flops) / 1e3);
  return text;
}

// "1.5 MB": the bytes a stored value moves.
std::string bytes_text(double bytes) {
  char text[32];
  if (bytes >= 1e6) std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
  else std::snprintf(text, sizeof text, "%.1f kB", bytes / 1e3);
  return text;
}

// `shape` without its axes of size 1 (the same elements at the same flat positions)
Shape without_unit_axes(const Shape& shape) {
  Shape out;
  for (int64_t d : shape)
    if (d != 1) out.push_back(d);
  return out;
}

std::string kernel_name(const Graph& g, const ScheduleItem& item) {
  std::string name;
  std::vector<int64_t> dims = without_unit_axes(g[item.outputs[0]].shape);
  // a multi-output kernel of several shapes loops over the largest one's elements
  if (const std::set<Shape> shapes = loop_shapes(g, item); shapes.size() > 1) {
    int64_t largest = 0;
    for (const Shape& s : shapes) largest = std::max(largest, shape_numel(s));
    dims = {largest};
  }
  bool has_reduce = false;
  for (NodeId f : item.fused) {
    if (!is_reduce(g[f].op)) continue;
    for (int64_t a : g[f].arg)
      if (g[g[f].src[0]].shape[a] != 1) dims.push_back(g[g[f].src[0]].shape[a]);
    has_reduce = true;
  }
  name = has_reduce ? "r" : "E";
  if (dims.empty()) dims.push_back(1);
  for (int64_t d : dims) name += "_" + std::to_string(d);
  return name;
}


// Whether every read of `values` in `item` is elementwise at the kernel's own index (an ALU op of the same
// shape reads it directly): in a kernel that also computes them, each is then at hand in the same loop.
// Any stored value may be read so, whether realize() asked for it or the kernelizer stores it (a reduction
// several kernels read: BatchNorm's batch variance, whose per-channel 1/sqrt(var + eps) and running-statistics
// update then join the kernel that reduces it, one launch fewer per BatchNorm), except an explicit
// contiguous() that realize() did not ask for: it ends its kernel.
// A value may also be read through a reshape of it that only drops or adds axes of size 1, every reader of which
// is such an ALU op of the reshape's shape: BatchNorm's backward sums per channel, stored as (1, C, 1, 1), are read
// as (C) by its per-channel coefficients, which then join the kernel that computes the sums (one launch fewer per
// BatchNorm in a training step), and an Adam update of a bias joins the kernel of its gradient's (1, N) sum. Either
// shape keeps an element at one flat position.
bool reads_in_place(const Graph& g, const ScheduleItem& item, const std::set<NodeId>& values, const std::set<NodeId>& targets) {
  auto alu_at_own_index = [&](const Node& reader, NodeId value) {
    return is_alu(reader.op) && reader.shape == g[value].shape && (targets.count(value) || g[value].op != Op::Contiguous);
  };
  // `reshape`, fused in the item, only drops or adds axes of size 1 of `value`, and every reader of it in the item
  // reads it in place
  auto unit_axes_reshape = [&](NodeId reshape, NodeId value) {
    const Node& n = g[reshape];
    if (n.op != Op::Reshape || g[value].op == Op::Contiguous ||
        without_unit_axes(n.shape) != without_unit_axes(g[value].shape))
      return false;
    for (NodeId r : item.fused) {
      const Node& reader = g[r];
      for (int i = 0; i < reader.num_src; i++)
        if (reader.src[i] == reshape && !alu_at_own_index(reader, reshape)) return false;
    }
    return true;
  };
  for (NodeId f : item.fused) {
    const Node& n = g[f];
    for (int i = 0; i < n.num_src; i++)
      if (values.count(n.src[i]) && !alu_at_own_index(n, n.src[i]) && !unit_axes_reshape(f, n.src[i])) return false;
  }
  return true;
}

// Rule 6, multi-output kernels: elementwise kernels of one loop shape on one device that read a common
// buffer, or read what another of them stores at their own index, or are small enough that launching them
// costs more than their work, become one kernel storing all their outputs. Walks the kernels in launch
// order keeping groups that may still grow; a group stops growing once a kernel outside it reads one of its
// outputs (the merged kernel runs where its last member ran, so nothing before that may need its outputs).
// Adam's update of a parameter reads the gradient three times and the new m and v it stores: one kernel
// computes m, v and the parameter from one read of each. A reduce kernel may head a group (C, INTERP), which
// then takes only kernels reading its output in place: SGD's parameter update joins the kernel that computes
// the weight gradient and the momentum buffer it reads. Every merged kernel says so in its boundary reasons.
void merge_multi_output(const Graph& g, Schedule& sched, const std::set<NodeId>& targets) {
  struct Group {
    std::vector<size_t> members;  // indices into sched.items, in launch order
    std::set<NodeId> outputs, inputs;
    bool open = true;
    bool reduce = false;  // headed by a kernel with a reduce: only kernels that read its outputs in place join
    bool small = false;   // its members store at most kMultiOutputSmallElements elements: any shape may join
    std::set<Shape> listed;  // the loop shapes under which `candidates` lists it
  };
  auto has_reduce = [&](const ScheduleItem& item) {
    for (NodeId f : item.fused)
      if (is_reduce(g[f].op)) return true;
    return false;
  };
  // An EXP2, LOG2 or SIN does not join a reduce's kernel: in a register-tiled matmul it would run once per
  // accumulator, unvectorized (the reason transcendental_epilogue stores such a matmul: a GELU after it)
  auto transcendental_in = [&](const ScheduleItem& item) {
    for (NodeId f : item.fused)
      if (is_polynomial_transcendental(g[f].op)) return true;
    return false;
  };
  auto elementwise = [&](const ScheduleItem& item) {
    return !item.is_copy && shape_numel(g[item.outputs[0]].shape) > 0 && !has_reduce(item);
  };
  // A kernel of kMultiOutputOwnLoopTransposeElements or more that reads through a permute moving the last axis
  // (a transposing copy: a classifier head's Wᵀ packed for its matmul) keeps a loop of its own shape: in a loop
  // over another shape's elements its indices come from divisions of the flat index, which the C compiler
  // leaves scalar, and TRANSPOSE_TILE does not apply (LeNet-5's head, Wᵀ (10, 84) -> (84, 16) stored in the
  // loop of the (32, 84) ReLU before it: 7 µs for the pair, against about 1 µs for the two kernels apart).
  auto transposes = [&](const ScheduleItem& item) {
    if (shape_numel(g[item.outputs[0]].shape) < kMultiOutputOwnLoopTransposeElements) return false;
    for (NodeId f : item.fused) {
      const Node& n = g[f];
      if (n.op == Op::Permute && !n.arg.empty() && n.arg.back() != static_cast<int64_t>(n.arg.size()) - 1) return true;
    }
    return false;
  };
  // A reduce kernel heads a group on devices without workgroups (C, INTERP: its outputs' loop is the
  // kernel's loop; a GPU kernel's reduce passes expect one store)
  std::map<int, bool> without_workgroups;  // device → its properties say so (looked up once per device)
  auto may_head_reduce = [&](const ScheduleItem& item, int device) {
    if (item.is_copy || shape_numel(g[item.outputs[0]].shape) == 0 || item.outputs.size() != 1 || !has_reduce(item))
      return false;
    auto known = without_workgroups.find(device);
    if (known == without_workgroups.end())
      known = without_workgroups.emplace(device, DeviceRegistry::properties(device).max_workgroup_size == 0).first;
    return known->second;
  };
  std::vector<Group> groups;
  std::map<NodeId, size_t> group_of_output;  // a stored node → the group whose kernel stores it
  // the groups a kernel may join, by device and loop shape, in the order they were made
  std::map<std::pair<int, Shape>, std::vector<size_t>> candidates;
  // the groups of small kernels by device, whatever their shapes, in the order they were made
  std::map<int, std::vector<size_t>> small_candidates;
  std::map<int, uint32_t> most_buffers;  // device → the most buffers a merged kernel may take there
  for (size_t i = 0; i < sched.items.size(); i++) {
    const ScheduleItem& item = sched.items[i];
    // the groups whose outputs this kernel reads: it may join one of them (reading in place), and the others
    // stop growing, since their merged kernel would run after this one
    std::set<size_t> read;
    for (NodeId in : item.inputs)
      if (auto it = group_of_output.find(in); it != group_of_output.end()) read.insert(it->second);
    const NodeId root = loop_root(g, item, item.outputs[0]);
    const int device = g[root].device;
    std::vector<size_t>& same = candidates[{device, g[root].shape}];
    std::optional<size_t> join;
    if (elementwise(item)) {
      // at most kMaxMultiOutputBuffers, fewer where the device binds fewer (DeviceProperties::max_kernel_buffers)
      auto limit = most_buffers.find(device);
      if (limit == most_buffers.end()) {
        const uint32_t bound = DeviceRegistry::properties(device).max_kernel_buffers;
        limit = most_buffers.emplace(device, bound == 0 ? kMaxMultiOutputBuffers : std::min(bound, kMaxMultiOutputBuffers)).first;
      }
      const bool small = shape_numel(g[root].shape) <= kMultiOutputSmallElements;
      const bool any_shape_ok = small && !transposes(item);  // may share a loop with kernels of other shapes
      // the most recent groups of this shape, newest first (the last kMultiOutputLookBack of them)
      const size_t oldest = same.size() > kMultiOutputLookBack ? same.size() - kMultiOutputLookBack : 0;
      for (size_t c = same.size(); c-- > oldest && !join;) {
        const Group& group = groups[same[c]];
        if (!group.open) continue;
        const bool reads = read.count(same[c]) > 0;
        if (group.reduce && (!reads || transcendental_in(item))) continue;
        const bool shares = reads || std::any_of(item.inputs.begin(), item.inputs.end(),
                                                 [&](NodeId in) { return group.inputs.count(in) > 0; });
        if (!(shares || small) || (reads && !reads_in_place(g, item, group.outputs, targets))) continue;
        // the buffers of the merged kernel: every output, and every input that is not one of the outputs
        std::set<NodeId> buffers(group.outputs);
        buffers.insert(item.outputs.begin(), item.outputs.end());
        buffers.insert(group.inputs.begin(), group.inputs.end());
        buffers.insert(item.inputs.begin(), item.inputs.end());
        if (buffers.size() <= limit->second) join = same[c];
      }
      // A small kernel that found no group of its shape joins one of small kernels of other shapes (SGD's
      // updates of a network's biases of 16 and 8 elements, its loss): the merged kernel loops over the
      // largest one's elements and each stores where its own elements are (Lowerer::run). Not one whose
      // outputs it reads: a value computed in the kernel is read at the kernel's index, one shape's.
      std::vector<size_t>& any_shape = small_candidates[device];
      const size_t oldest_small = any_shape.size() > kMultiOutputLookBack ? any_shape.size() - kMultiOutputLookBack : 0;
      for (size_t c = any_shape.size(); any_shape_ok && !join && c-- > oldest_small;) {
        const Group& group = groups[any_shape[c]];
        if (!group.open || !group.small || read.count(any_shape[c])) continue;
        std::set<NodeId> buffers(group.outputs);
        buffers.insert(item.outputs.begin(), item.outputs.end());
        buffers.insert(group.inputs.begin(), group.inputs.end());
        buffers.insert(item.inputs.begin(), item.inputs.end());
        if (buffers.size() <= limit->second) join = any_shape[c];
      }
      if (!join) {
        join = groups.size();
        groups.emplace_back();
        groups.back().small = any_shape_ok;
        if (any_shape_ok) any_shape.push_back(*join);
      }
      // found by later kernels of this shape too (Adam's parameter update reads its m and v in place)
      if (groups[*join].listed.insert(g[root].shape).second) same.push_back(*join);
    }
    if (!join && may_head_reduce(item, device)) {
      join = groups.size();
      groups.emplace_back();
      groups.back().reduce = true;
      groups.back().listed.insert(g[root].shape);
      same.push_back(*join);
      // found too by kernels that loop over its shape without the axes of size 1 (reads_in_place: a (1, C, 1, 1)
      // sum read as (C))
      const Shape squeezed = without_unit_axes(g[root].shape);
      if (groups.back().listed.insert(squeezed).second) candidates[{device, squeezed}].push_back(*join);
    }
    for (size_t r : read)
      if (r != join) groups[r].open = false;
    if (!join) continue;
    Group& group = groups[*join];
    group.members.push_back(i);
    group.outputs.insert(item.outputs.begin(), item.outputs.end());
    group.inputs.insert(item.inputs.begin(), item.inputs.end());
    for (NodeId out : item.outputs) group_of_output[out] = *join;
  }

  // Each group of two or more becomes one item at its last member's place.
  std::vector<int> merged_into(sched.items.size(), -1);  // the group an item joined, for groups of 2+
  for (size_t gi = 0; gi < groups.size(); gi++)
    if (groups[gi].members.size() > 1)
      for (size_t m : groups[gi].members) merged_into[m] = static_cast<int>(gi);
  // the items that read each stored node: a value a merged kernel computes and only its own members read is
  // not stored (below)
  std::map<NodeId, std::vector<size_t>> readers_of;
  for (size_t i = 0; i < sched.items.size(); i++)
    for (NodeId in : sched.items[i].inputs) readers_of[in].push_back(i);
  std::vector<ScheduleItem> items;
  for (size_t i = 0; i < sched.items.size(); i++) {
    if (merged_into[i] < 0) {
      items.push_back(std::move(sched.items[i]));
      continue;
    }
    const Group& group = groups[merged_into[i]];
    if (group.members.back() != i) continue;
    ScheduleItem merged;
    std::set<NodeId> fused, inputs;
    std::set<std::string> reasons;
    std::set<uint64_t> decided;
    std::string also;
    std::set<NodeId> in_place;
    // the reasons of the parts that name an output of another part as an input: in the merged kernel it
    // is computed, not read
    std::vector<std::string> computed;
    for (NodeId out : group.outputs) computed.push_back("input " + node_label(g, out) + " ");
    // A value stored only because its readers were other kernels (a reduce read by two ops the cost model did
    // not see meet in one kernel: the GELU backward's two products of fc2's input gradient), whose readers all
    // joined the kernel that computes it, is used there and not stored: no kernel would read that buffer (d128's
    // fc2 input gradient, 512 x 512, stored 1 MB a layer for nothing). A target, a contiguous() and a value a
    // kernel outside the group reads stay stored.
    std::set<NodeId> unstored;
    for (NodeId out : group.outputs) {
      const std::vector<size_t>& readers = readers_of[out];
      const bool only_members = !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](size_t r) {
        return merged_into[r] == merged_into[i];
      });
      if (only_members && !targets.count(out) && g[out].op != Op::Contiguous) unstored.insert(out);
    }
    for (size_t m : group.members) {
      ScheduleItem& part = sched.items[m];
      const bool part_unstored = std::all_of(part.outputs.begin(), part.outputs.end(), [&](NodeId o) { return unstored.count(o) > 0; });
      for (NodeId out : part.outputs)
        if (!unstored.count(out)) merged.outputs.push_back(out);
      for (NodeId in : part.inputs) {
        if (group.outputs.count(in)) {
          in_place.insert(in);
          continue;
        }
        if (inputs.insert(in).second) merged.inputs.push_back(in);
      }
      fused.insert(part.fused.begin(), part.fused.end());
      for (std::string& r : part.reasons) {
        // (a part whose outputs are not stored has no boundary where it ended)
        const bool stale = std::any_of(computed.begin(), computed.end(), [&](const std::string& c) { return r.rfind(c, 0) == 0; }) ||
                           (part_unstored && r.rfind("ends: ", 0) == 0);
        if (!stale && reasons.insert(r).second) merged.reasons.push_back(std::move(r));
      }
      for (FusionDecision& d : part.decisions)
        if (decided.insert(d.node_uid).second) merged.decisions.push_back(std::move(d));
      for (NodeId out : part.outputs)
        if (!unstored.count(out)) also += (also.empty() ? "" : ", ") + node_label(g, out);
    }
    std::string computed_here, kept_in_registers;
    for (NodeId in : in_place) {
      std::string& list = unstored.count(in) ? kept_in_registers : computed_here;
      list += (list.empty() ? "" : ", ") + node_label(g, in);
    }
    for (FusionDecision& d : merged.decisions)
      for (NodeId out : unstored)
        if (d.node_uid == g[out].uid && d.stored) {
          d.stored = false;
          d.reason = "used where it is computed: every kernel that reads it joined the kernel that computes it "
                     "(multi-output kernel), so it is computed once and not stored (apart: " + d.reason + ")";
        }
    std::string shared;
    for (NodeId in : merged.inputs) {
      int readers = 0;
      for (size_t m : group.members) {
        const auto& ins = sched.items[m].inputs;
        readers += std::find(ins.begin(), ins.end(), in) != ins.end();
      }
      if (readers > 1) shared += (shared.empty() ? "" : ", ") + node_label(g, in);
    }
    const std::set<Shape> shapes = loop_shapes(g, merged);
    const std::string of_shapes = shapes.size() == 1 ? " values of one shape (" : " values of " + std::to_string(shapes.size()) + " shapes (";
    const size_t stored = merged.outputs.size();
    const std::string stores = stored == 1 ? "stores " + also + (kept_in_registers.empty() ? "" : " and computes " + kept_in_registers) + " in one loop"
                                           : "stores " + std::to_string(stored) + of_shapes + also + (shapes.size() == 1 ? ") in one loop" : ") in one loop over the largest");
    merged.reasons.push_back(std::string(stored == 1 ? "merged kernel: " : "multi-output kernel: ") + stores +
                             ", one launch instead of " + std::to_string(group.members.size()) +
                             (shared.empty() ? "" : "; " + shared + ", read by more than one of them, is read once") +
                             (computed_here.empty() ? "" : "; " + computed_here + " computed once and used where it is stored") +
                             (kept_in_registers.empty() ? "" : "; " + kept_in_registers + " computed once and used in the kernel, not stored: no other kernel reads it") +
                             (shared.empty() && computed_here.empty() && kept_in_registers.empty()
                                  ? "; each stores at most " + std::to_string(kMultiOutputSmallElements) +
                                        " elements: one launch costs more than such a kernel's work"
                                  : ""));
    for (NodeId n : sched.nodes)
      if (fused.count(n)) merged.fused.push_back(n);
    merged.name = kernel_name(g, merged);
    items.push_back(std::move(merged));
  }
  sched.items = std::move(items);
}
}  // namespace

NodeId loop_root(const Graph& g, const ScheduleItem& item, NodeId out) {
  while (g[out].op == Op::Reshape && std::find(item.inputs.begin(), item.inputs.end(), out) == item.inputs.end())
    out = g[out].src[0];
  return out;
}

std::set<Shape> loop_shapes(const Graph& g, const ScheduleItem& item) {
  std::set<Shape> shapes;
  for (NodeId out : item.outputs) shapes.insert(g[loop_root(g, item, out)].shape);
  return shapes;
}

// Rule 7 (schedule.h): reorders sched.items by a list schedule. A kernel waits for the kernels that store its
// inputs, and a kernel storing a target of the size and dtype of a realized buffer it reads (an optimizer's
// update, which a jit replay may write over the old value: in_place_pairs in realize.cpp) also waits for the
// other kernels that read that buffer, unless they read what it stores. Once ready, its priority is fixed: the
// launch position of the latest kernel it waited for (the later, the sooner it runs; a kernel that waits for
// none comes after every other ready one), then a kernel whose outputs no kernel of this schedule reads
// before one whose outputs others read, then the order the items came in. So a heap gives O(n log n).
namespace {
// An update waits for at most this many other readers of the old value (a parameter is read by its layer's
// forward and backward kernels); beyond, it keeps no such order, and a jit replay writes it into a fresh
// buffer (the replay checks again that no later launch reads the old value): a realize of thousands of
// kernels that read one buffer would otherwise add a wait for every pair of them.
constexpr size_t kMaxOverwriteWaits = 16;

void order_for_locality(const Graph& g, Schedule& sched, const std::set<NodeId>& targets) {
  const size_t n = sched.items.size();
  std::map<NodeId, size_t> producer;  // a stored node -> the item that stores it
  for (size_t i = 0; i < n; i++)
    for (NodeId o : sched.items[i].outputs) producer[o] = i;
  std::vector<std::vector<size_t>> after(n), before(n);  // the kernels that wait for i; those i waits for
  std::vector<size_t> waiting(n, 0);                     // kernels it waits for, not launched yet
  std::vector<bool> outputs_read(n, false);              // another kernel of the schedule reads what i stores
  std::vector<int> readers(n, 0);                        // how many other kernels of the schedule do
  auto add_edge = [&](size_t from, size_t to) {
    if (from == to || std::find(before[to].begin(), before[to].end(), from) != before[to].end()) return;
    before[to].push_back(from);
    after[from].push_back(to);
    waiting[to]++;
  };
  std::map<NodeId, std::vector<size_t>> realized_readers;  // a realized buffer -> the items that read it
  for (size_t i = 0; i < n; i++)
    for (NodeId in : sched.items[i].inputs) {
      auto p = producer.find(in);
      if (p == producer.end()) {
        realized_readers[in].push_back(i);
      } else if (p->second != i) {
        if (std::find(before[i].begin(), before[i].end(), p->second) == before[i].end()) readers[p->second]++;
        add_edge(p->second, i);
        outputs_read[p->second] = true;
      }
    }
  // the items that depend on `i` through what it stores (a kernel among them cannot also wait for it)
  auto dependents = [&](size_t i) {
    std::vector<bool> seen(n, false);
    std::vector<size_t> stack{i};
    while (!stack.empty()) {
      size_t k = stack.back();
      stack.pop_back();
      for (size_t r : after[k])
        if (!seen[r]) seen[r] = true, stack.push_back(r);
    }
    return seen;
  };
  for (size_t i = 0; i < n; i++) {
    const ScheduleItem& item = sched.items[i];
    std::vector<bool> depends;  // dependents(i), once it is needed
    for (NodeId in : item.inputs) {
      auto readers = realized_readers.find(in);
      if (readers == realized_readers.end() || readers->second.size() < 2 ||
          readers->second.size() > kMaxOverwriteWaits)
        continue;
      bool may_overwrite = false;
      for (NodeId o : item.outputs)
        may_overwrite |= targets.count(o) && g[o].dtype == g[in].dtype &&
                         shape_numel(g[o].shape) == shape_numel(g[in].shape);
      if (!may_overwrite) continue;
      if (depends.empty()) depends = dependents(i);
      for (size_t j : readers->second)
        if (j != i && !depends[j]) add_edge(j, i);
    }
  }
  std::vector<int64_t> launched_at(n, 0);
  // (-position of the latest kernel waited for, 1 if others read its outputs, item index): smallest first
  using Priority = std::tuple<int64_t, int, size_t>;
  std::set<Priority> ready;
  // A small kernel that waits for none and whose outputs two or more kernels read (Adam's bias corrections from
  // its step count: two scalars that every parameter's update reads) runs first: as one that runs when no other is
  // ready, it held every update of the schedule back to its end, after the whole backward pass, when the
  // gradients they read had left the caches. With the siblings' rule below, d128's jitted step (1 thread, nine
  // rounds of 100 steps each way, alternated): median 16.0 -> 14.9 ms; each layer's bias gradient 0.07-0.10 ->
  // 0.01-0.02 ms. Its AdamW updates, now amid the backward, read their state from memory there as they did at the
  // end (0.04-0.10 ms each either way, with the machine's load; moving them back to the end was no faster).
  // Small: its inputs and outputs together at most kMultiOutputSmallElements elements.
  auto small_source = [&](size_t i) {
    if (!before[i].empty() || readers[i] < 2) return false;
    int64_t elements = 0;
    for (NodeId o : sched.items[i].outputs) elements += shape_numel(g[o].shape);
    for (NodeId in : sched.items[i].inputs) elements += shape_numel(g[in].shape);
    return elements <= kMultiOutputSmallElements;
  };
  auto make_ready = [&](size_t i) {
    int64_t latest = small_source(i) ? static_cast<int64_t>(n) : -1;  // -1: waits for none
    for (size_t b : before[i]) latest = std::max(latest, launched_at[b]);
    ready.insert({-latest, outputs_read[i] ? 1 : 0, i});
  };
  for (size_t i = 0; i < n; i++)
    if (waiting[i] == 0) make_ready(i);
  std::vector<ScheduleItem> items;
  items.reserve(n);
  int64_t siblings_of = 1;  // the -position of the kernel whose output the last launched one waited for (1: none)
  while (!ready.empty()) {
    // The other readers of what the last launched kernel waited for go first, before the kernels that wait
    // for the last one: all readers of a fresh buffer run while it is in the cache. Only the latest first
    // (a stack) ran the backward's chain of input gradients to its end and left each layer's weight and bias
    // gradients, which read the same output gradient, to the end of the schedule (d128: its 1 MB GELU gradient
    // read back from memory by the bias gradient, 0.10 ms, and the transposing copy for the weight gradient).
    auto next = ready.lower_bound({siblings_of, std::numeric_limits<int>::min(), 0});
    if (siblings_of == 1 || next == ready.end() || std::get<0>(*next) != siblings_of) next = ready.begin();
    const size_t i = std::get<2>(*next);
    siblings_of = std::get<0>(*next);
    ready.erase(next);
    launched_at[i] = static_cast<int64_t>(items.size());
    items.push_back(std::move(sched.items[i]));
    for (size_t a : after[i])
      if (--waiting[a] == 0) make_ready(a);
  }
  if (items.size() != n) throw std::logic_error("create_schedule: the kernels' dependences have a cycle");
  sched.items = std::move(items);
}
}  // namespace

Schedule create_schedule(const std::vector<NodeId>& targets) {
  const Graph& g = Graph::get();
  Schedule sched;
  sched.nodes = toposort(g, targets);

  // consumers within this schedule
  std::map<NodeId, std::vector<NodeId>> consumers;
  for (NodeId id : sched.nodes) {
    const Node& n = g[id];
    if (n.realized()) continue;
    for (int i = 0; i < n.num_src; i++) {
      auto& c = consumers[n.src[i]];
      if (std::find(c.begin(), c.end(), id) == c.end()) c.push_back(id);
    }
  }

  // How many times each value is read, counting through chains of movement ops: a reshape that two ops
  // read reads its source twice. A value read only through one shared view has one consumer, but it is
  // inlined twice all the same; a chain of such values (a bitonic sort's stages) doubles at every step.
  std::map<NodeId, int64_t> reads;
  for (auto it = sched.nodes.rbegin(); it != sched.nodes.rend(); ++it) {
    int64_t r = 0;
    for (NodeId c : consumers[*it]) r += is_movement(g[c].op) ? reads[c] : 1;
    reads[*it] = std::min<int64_t>(r, 1 << 20);
  }

  // The value under a consumer's operand `cur`, through its chain of movement ops, and how many times the
  // consumer reads each of its elements: the product of the chain's expands that `counts` accepts. `padded`
  // is set when a PAD on the way at least doubles the value.
  auto value_under_views = [&](NodeId cur, auto counts, int64_t* factor, bool* padded) {
    *factor = 1;
    *padded = false;
    while (!g[cur].realized() && is_movement(g[cur].op)) {
      const int64_t in = shape_numel(g[g[cur].src[0]].shape), out = shape_numel(g[cur].shape);
      if (g[cur].op == Op::Expand && out > in && counts(cur)) *factor *= in > 0 ? out / in : 1;
      *padded = *padded || (g[cur].op == Op::Pad && out >= 2 * in);
      cur = g[cur].src[0];
    }
    return cur;
  };
  // fn(consumer, value, factor, padded) for every operand of every consumer that is not a view itself
  auto for_each_read = [&](auto counts, auto fn) {
    for (NodeId id : sched.nodes) {
      const Node& n = g[id];
      if (n.realized() || is_movement(n.op)) continue;
      for (int i = 0; i < n.num_src; i++) {
        int64_t factor;
        bool padded;
        const NodeId value = value_under_views(n.src[i], counts, &factor, &padded);
        fn(id, value, factor, padded);
      }
    }
  };

  // Row-local expands (see is_row_local_expand), decided once per expand: both walks below ask. Their
  // walks stop at values read through a broadcast: the largest broadcast each value is read through,
  // counting no expand that passes the row-local shape test (stored_broadcast).
  std::map<NodeId, int64_t> stored_broadcast;
  for_each_read([&](NodeId e) { return trailing_broadcast_start(g, e) == 0; },
                [&](NodeId, NodeId v, int64_t factor, bool) { stored_broadcast[v] = std::max(stored_broadcast[v], factor); });
  const std::set<NodeId> transcendentals = per_element_transcendentals(g, sched.nodes);
  std::set<NodeId> row_local;
  for (NodeId id : sched.nodes)
    if (!g[id].realized() && g[id].op == Op::Expand &&
        is_row_local_expand(g, consumers, id, stored_broadcast, transcendentals))
      row_local.insert(id);

  // Which values are read through an expand (broadcast)? Walk each consumer's operand down its chain
  // of movement ops to the value underneath. A row-local expand (see is_row_local_expand) does not
  // count: the reduce it broadcasts is fused as a second reduction over the same rows.
  // expand_factor: how many times the consumer reads each element (the largest such broadcast).
  std::map<NodeId, std::string> expanded_by;
  std::map<NodeId, int64_t> expand_factor;
  std::map<NodeId, std::string> padded_by;  // values read through a PAD that at least doubles them
  // How often each element of a value is computed if every reader recomputes it: the sum over its
  // readers of the broadcast each reads it through (relu reading x three times counts 3, a matmul's
  // operand read once per output column counts the column count).
  std::map<NodeId, int64_t> evaluations;
  for_each_read([&](NodeId e) { return !row_local.count(e); }, [&](NodeId id, NodeId cur, int64_t factor, bool padded) {
    if (padded && !padded_by.count(cur)) padded_by[cur] = node_label(g, id);
    if (factor > 1 && !expanded_by.count(cur)) expanded_by[cur] = node_label(g, id);
    expand_factor[cur] = std::max(expand_factor[cur], factor);
    evaluations[cur] = std::min<int64_t>(evaluations[cur] + factor, int64_t{1} << 40);
  });

  // Decide which nodes are stored (kernel outputs), sources before consumers.
  std::set<NodeId> target_set(targets.begin(), targets.end());
  std::map<NodeId, std::string> stored;  // node → reason its kernel ends there
  // What the value's fused subtree (everything up to stored or realized inputs) holds.
  struct Subtree {
    bool reduce = false;              // an unstored reduce
    bool elementwise_reduce = false;  // one whose result varies per element of the value (a matmul's
                                      // sum), not one per row broadcast along the row (a softmax's max):
                                      // recomputing the value recomputes that reduction
    bool transcendental = false;      // an EXP2, LOG2, SIN or SQRT
    int64_t cost = 0;                 // ALU ops (capped)
    int64_t reduce_elements = 0;      // the largest input of an unstored reduce (elements it sums)
    bool loads = false;               // reads a buffer: without, it is constants only, which loop-invariant
                                      // code motion computes once per kernel wherever it is fused
  };
  std::map<NodeId, Subtree> subtree;
  std::map<NodeId, FusionDecision> decisions;  // the cost model's, for values read more than once
  auto is_input = [&](NodeId id) { return g[id].realized() || stored.count(id); };
  // Whether `src`, read by the contiguous() `copy`, is in memory in row-major order of copy's shape: a realized
  // buffer of its own size (a Buffer leaf holds exactly its shape), a value stored by this schedule, or a
  // contiguous() of one of these (rule 4: not stored itself).
  std::set<NodeId> contiguous_in_memory;
  auto in_memory = [&](NodeId src, const Node& copy) {
    const Node& s = g[src];
    return s.shape == copy.shape && s.dtype == copy.dtype &&
           (s.realized() ? s.buffer->numel == shape_numel(copy.shape)
                         : stored.count(src) > 0 || contiguous_in_memory.count(src) > 0);
  };
  // A reduce whose readers meet in one kernel and read it only as one value per row (logsumexp: the row max shifts
  // the exponentials in the loop of their sum, and is added back to the sum's log after it): on the way to where
  // they meet, every op keeps its axes (elementwise, or a broadcast), and every reduction on the way sums over
  // axes along which the max has one element. In the kernel, each of its elements is a row's accumulator,
  // computed once before the row's loops (Lowerer's row_invariant_operands) and read by each of them. A matmul's
  // output read in two loops over its rows' elements (attention's dP in softmax's backward: dP·P summed over the
  // row, then dP − that sum per element) is not of this kind: each loop would run the dot products again.
  auto read_once_per_row = [&](NodeId id, const std::vector<NodeId>& readers) {
    if (expand_factor[id] > 1) return false;
    const Shape& shape = g[id].shape;
    std::vector<std::vector<NodeId>> chains;
    std::map<NodeId, size_t> hits;
    for (NodeId c : readers) {
      std::vector<NodeId>& chain = chains.emplace_back();
      for (NodeId cur = c; chain.size() < 64;) {
        chain.push_back(cur);
        hits[cur]++;
        auto it = consumers.find(cur);
        if (target_set.count(cur) || it == consumers.end() || it->second.size() != 1) break;
        cur = it->second[0];
      }
    }
    for (const std::vector<NodeId>& chain : chains)
      for (NodeId node : chain) {
        if (hits[node] == readers.size()) break;  // where the readers meet
        const Node& n = g[node];
        if (n.shape.size() != shape.size()) return false;  // a reshape: the axes are not followed
        if (is_reduce(n.op)) {
          for (int64_t a : n.arg)
            if (shape[a] != 1) return false;
        } else if (!is_alu(n.op) && n.op != Op::Expand) {
          return false;
        }
      }
    return true;
  };
  for (NodeId id : sched.nodes) {
    const Node& n = g[id];
    if (n.realized()) continue;
    Subtree t;
    t.reduce = t.elementwise_reduce = is_reduce(n.op);
    t.transcendental = n.op == Op::Exp2 || n.op == Op::Log2 || n.op == Op::Sin || n.op == Op::Sqrt;
    t.cost = is_alu(n.op) || is_reduce(n.op) ? 1 : 0;
    if (is_reduce(n.op)) t.reduce_elements = shape_numel(g[n.src[0]].shape);
    t.loads = n.op == Op::Buffer;
    for (int i = 0; i < n.num_src; i++) {
      if (is_input(n.src[i])) {
        t.loads = true;
        continue;
      }
      const Subtree& s = subtree[n.src[i]];
      t.loads = t.loads || s.loads;
      t.reduce = t.reduce || s.reduce;
      t.elementwise_reduce = t.elementwise_reduce || (s.elementwise_reduce && !row_local.count(id));
      t.transcendental = t.transcendental || s.transcendental;
      t.cost = std::min<int64_t>(t.cost + s.cost, 1 << 20);
      t.reduce_elements = std::max(t.reduce_elements, s.reduce_elements);
    }
    // ALU ops, and the index arithmetic of a view of loaded data that reorders or broadcasts it (a permute
    // or an expand puts a multiply or a div/mod on the loads beneath; a view of constants costs nothing):
    // a max-pool's gradient, read through its windows' expands, costs more than its 6 ALU ops. A pad,
    // shrink or flip (a bitonic sort's stages) only shifts the index and is not counted.
    if ((n.op == Op::Permute || n.op == Op::Expand) && t.loads) t.cost = std::min<int64_t>(t.cost + 1, 1 << 20);
    subtree[id] = t;
    // The cost model's numbers for this value (see rule 3 in schedule.h).
    const double numel = static_cast<double>(shape_numel(n.shape));
    const double bytes = numel * static_cast<double>(dtype_size(n.dtype));
    FusionDecision cost;
    cost.node_uid = n.uid;
    cost.op = op_name(n.op);
    cost.evaluations = std::max<int64_t>(evaluations[id], 1);
    cost.flops = std::max(numel, static_cast<double>(t.reduce_elements)) * static_cast<double>(std::max<int64_t>(t.cost, 1));
    cost.recompute_flops = static_cast<double>(cost.evaluations - 1) * cost.flops;
    cost.store_bytes = bytes * static_cast<double>(1 + reads[id]);
    std::vector<NodeId> readers;
    bool copied = false;  // the source of a COPY must be in memory on its own device
    for (NodeId c : consumers[id]) copied = copied || g[c].op == Op::Copy;
    std::optional<NodeId> copy;  // a transposing copy that reads the value, and the tensors it would move (below)
    int moved = 0;
    if (n.op == Op::Copy) {
      stored[id] = "device copy to " + DeviceRegistry::at(n.device).name();
    } else if (copied) {
      stored[id] = "copied to another device";
    } else if (target_set.count(id)) {
      stored[id] = "output requested (realize / numpy / backward)";
    } else if (n.op == Op::Contiguous && in_memory(n.src[0], n)) {
      // (rule 4) nothing to store: the source's buffer holds these values in this layout already
      contiguous_in_memory.insert(id);
      const NodeId src = n.src[0];
      FusionDecision fused = cost;
      fused.stored = false;
      fused.reason = "not stored: contiguous() of " + node_label(g, src) + ", which is " +
                     (g[src].realized()      ? "a realized buffer"
                      : stored.count(src) > 0 ? "stored by this schedule (" + stored[src] + ")"
                                              : "in memory already (" + decisions[src].reason + ")") +
                     ": its readers read that buffer, no copy";
      decisions[id] = fused;
    } else if (n.op == Op::Contiguous) {
      stored[id] = "explicit contiguous()";
    } else if (std::string op; is_reduce(n.op) && numel >= kTiledEpilogueMinOutputs &&
               t.reduce_elements >= kTiledEpilogueMinReduce * static_cast<int64_t>(numel) &&
               DeviceRegistry::at(n.device).name() == "C" &&
               !(op = transcendental_epilogue(g, consumers, id, target_set)).empty()) {
      stored[id] = "matmul-like reduction with " + op + " in its elementwise epilogue: in the register-tiled C kernel "
                   "the epilogue would run once per accumulator, unvectorized; stored, it runs in a vectorized kernel";
    } else if (std::optional<NodeId> outer;
               t.elementwise_reduce && !is_movement(n.op) && numel >= kTiledEpilogueMinOutputs &&
               t.reduce_elements >= kTiledEpilogueMinReduce * static_cast<int64_t>(numel) &&
               (outer = reducing_reader(g, value_readers(g, consumers, id, target_set)))) {
      // (a @ b).sum(), lin(x).relu().mean(axis=1): fused, the outer reduction's loop would run the matmul's dot
      // products one at a time inside it, with no register tile ((a @ b).relu().mean(0) of 256²: 14.6 ms
      // against 0.35 ms stored)
      stored[id] = "value holds a matmul-like reduction (" + std::to_string(t.reduce_elements / static_cast<int64_t>(numel)) +
                   " terms per element) read by the reduction " + node_label(g, *outer) +
                   ": fused, that reduction's loop would compute the dot products one at a time, without the register "
                   "tile; stored, the matmul is tiled and the reduction reads its output";
    } else if (t.reduce && !is_movement(n.op) && expanded_by.count(id)) {
      stored[id] = "reduce output is expanded (broadcast) by " + expanded_by[id] +
                   ": fusing would recompute the reduction for every broadcast element";
    } else if (t.reduce && !is_movement(n.op) && padded_by.count(id)) {
      // the gradient of chunk()/split() pads each part to the whole and adds them: fused, every element
      // of the sum would run every part's reduction loop with its loads masked off outside that part
      stored[id] = "reduce output is padded (at least doubled) by " + padded_by[id] +
                   ": fusing would run the reduction's loop, masked off, for every element of the padding";
    } else if (bool through_reduce = false, converge = false;
               t.reduce && !is_movement(n.op) && (readers = value_readers(g, consumers, id, target_set)).size() > 1 &&
               (!(converge = consumers_converge(g, consumers, readers, target_set, &through_reduce)) ||
                (through_reduce && t.elementwise_reduce && !read_once_per_row(id, readers)))) {
      // the reduction's cost, recomputed by every reader that inlines it
      const std::string each = t.reduce_elements > 0
                                   ? ", recomputing it costs " + flops_text(t.reduce_elements * std::max<int64_t>(t.cost, 1)) + " each"
                                   : "";
      stored[id] = converge
                       ? "value holds a reduction per element (a matmul) and " + std::to_string(readers.size()) +
                             " readers take it in different loops of one kernel: each loop would recompute the reduction" + each
                       : "stored: a reduction read by " + std::to_string(readers.size()) +
                             " ops (through reshapes/permutes too) that do not meet in one kernel" + each +
                             "; storing it once costs less";
    } else if (t.transcendental && !is_movement(n.op) && expand_factor[id] >= kBroadcastRecomputeLimit) {
      stored[id] = "value with EXP2/LOG2/SIN/SQRT is broadcast " + std::to_string(expand_factor[id]) + "x by " +
                   expanded_by[id] + ": computing it once per broadcast element costs more than storing it";
    } else if (!t.reduce && t.loads && !is_movement(n.op) && t.cost >= kBroadcastPrologueOps &&
               expand_factor[id] >= kBroadcastPrologueMinReads &&
               cost.recompute_flops > kRecomputeFlopsPerByte * cost.store_bytes) {
      // an elementwise prologue read through a broadcast (a LayerNorm recomputed in front of a weight
      // gradient, a convolution's output gradient read once per kernel tap): the consumer evaluates it
      // once per broadcast element
      stored[id] = "value with " + std::to_string(t.cost) + " ALU ops per element is broadcast " +
                   std::to_string(expand_factor[id]) + "x by " + expanded_by[id] + ": computed " +
                   std::to_string(cost.evaluations) + " times per element, recomputing it costs " +
                   flops_text(static_cast<int64_t>(cost.recompute_flops)) + " more, storing it moves " +
                   bytes_text(cost.store_bytes) + " (worth " +
                   flops_text(static_cast<int64_t>(kRecomputeFlopsPerByte * cost.store_bytes)) + ")";
    } else if (!t.reduce && t.loads && !is_movement(n.op) &&
               numel >= static_cast<double>(kTransposedCopyMinElements) && DeviceRegistry::at(n.device).name() == "C" &&
               (copy = transposing_copy_reader(g, consumers, id, target_set)) &&
               (moved = full_size_inputs(g, id, is_input)) >= 2) {
      // fused into the copy, each of the value's inputs would be read across the copy's rows, element by element
      // (TRANSPOSE_TILE tiles a copy of one tensor); stored, the copy moves one tensor in 8x8 tiles
      stored[id] = "value combines " + std::to_string(moved) + " tensors of its size and " +
                   node_label(g, *copy) + " copies it transposed: fused, the copy would read each of them across "
                   "its rows, element by element; stored, it moves one tensor in 8x8 tiles (TRANSPOSE_TILE)";
    } else if (const double extra = static_cast<double>(reads[id] - 1) * numel * static_cast<double>(t.cost);
               reads[id] > 1 && t.loads && !is_movement(n.op) && extra > kRecomputeFlopsPerByte * cost.store_bytes) {
      stored[id] = "value is read " + std::to_string(reads[id]) + " times and has " + std::to_string(t.cost) +
                   " ALU ops per element: recomputing it costs " + flops_text(static_cast<int64_t>(extra)) +
                   " more, storing it moves " + bytes_text(cost.store_bytes) + " (worth " +
                   flops_text(static_cast<int64_t>(kRecomputeFlopsPerByte * cost.store_bytes)) + ")";
    }
    // Keep the decision about every value that would be computed more than once if fused.
    // stored by a cost rule, not because the kernel must end there (a copy, a target, contiguous())
    const bool structural = n.op == Op::Copy || copied || target_set.count(id) || n.op == Op::Contiguous;
    const bool cost_decided = stored.count(id) && !structural;
    if (!is_movement(n.op) && t.cost > 0 && (cost.evaluations > 1 || cost_decided)) {
      cost.stored = stored.count(id) > 0;
      if (cost.stored) {
        cost.reason = stored[id];
      } else if (t.reduce) {
        cost.reason = "recomputed: its readers meet in one kernel, which computes the reduction once (in one loop "
                      "body, or once per row before the row's loop)";
      } else if (!t.loads) {
        cost.reason = "fused: constants only, which each kernel computes once, in front of its loops";
      } else if (bool through_reduce = false;
                 expand_factor[id] <= 1 && (readers = value_readers(g, consumers, id, target_set)).size() > 1 &&
                 consumers_converge(g, consumers, readers, target_set, &through_reduce) && !through_reduce) {
        cost.reason = "fused: its readers meet in one loop body of one kernel, which computes it once";
      } else if (const double worth = kRecomputeFlopsPerByte * cost.store_bytes; cost.recompute_flops <= worth) {
        cost.reason = "recomputed by each reader: " + flops_text(static_cast<int64_t>(cost.recompute_flops)) +
                      " more in all, less than storing it is worth (it moves " + bytes_text(cost.store_bytes) + ", worth " +
                      flops_text(static_cast<int64_t>(worth)) + ")";
      } else {
        cost.reason = "recomputed by each reader: " + flops_text(static_cast<int64_t>(cost.recompute_flops)) +
                      " more in all, above what storing it is worth (" + flops_text(static_cast<int64_t>(worth)) +
                      "), but a value read through a broadcast is stored only with at least " +
                      std::to_string(kBroadcastPrologueOps) + " ALU ops per element read " +
                      std::to_string(kBroadcastPrologueMinReads) + " times or more (a ReLU or a scale in front of a "
                      "matmul stays fused, and a broadcast of 2 does not pay for another kernel launch)";
      }
      decisions[id] = cost;
    }
  }

  // One kernel per stored node, in topological order; each fuses everything up to inputs.
  std::map<NodeId, int> kernel_of;
  for (NodeId id : sched.nodes) {
    if (!stored.count(id)) continue;
    ScheduleItem item;
    item.outputs = {id};
    item.reasons.push_back("ends: " + stored[id]);
    if (g[id].op == Op::Copy) {
      NodeId src = g[id].src[0];
      item.is_copy = true;
      item.inputs.push_back(src);
      item.fused.push_back(id);
      item.reasons.push_back("input " + node_label(g, src) + (g[src].realized() ? ": a realized buffer" : " is stored on " +
                             DeviceRegistry::at(g[src].device).name() + " first: copies move whole buffers"));
      item.name = "copy_" + std::to_string(shape_numel(g[id].shape)) + "_" + DeviceRegistry::at(g[src].device).name() + "_to_" +
                  DeviceRegistry::at(g[id].device).name();
      kernel_of[id] = static_cast<int>(sched.items.size());
      sched.items.push_back(std::move(item));
      continue;
    }
    std::set<NodeId> seen{id};
    std::vector<NodeId> stack{id};
    std::vector<NodeId> fused;
    while (!stack.empty()) {
      NodeId cur = stack.back();
      stack.pop_back();
      fused.push_back(cur);
      const Node& n = g[cur];
      for (int i = 0; i < n.num_src; i++) {
        NodeId s = n.src[i];
        if (!seen.insert(s).second) continue;
        if (is_input(s)) {
          item.inputs.push_back(s);
          if (g[s].realized()) {
            item.reasons.push_back("input " + node_label(g, s) + ": a realized buffer");
          } else {
            item.reasons.push_back("input " + node_label(g, s) + " is stored by kernel " +
                                   sched.items[kernel_of[s]].name + " because: " + stored[s]);
          }
        } else {
          stack.push_back(s);
        }
      }
    }
    // keep the schedule's topological order for the fused list
    std::set<NodeId> fused_set(fused.begin(), fused.end());
    for (NodeId n : sched.nodes)
      if (fused_set.count(n)) item.fused.push_back(n);
    item.name = kernel_name(g, item);
    for (NodeId f : item.fused) {
      auto d = decisions.find(f);
      if (d != decisions.end() && (f == id || !d->second.stored)) item.decisions.push_back(d->second);
    }
    kernel_of[id] = static_cast<int>(sched.items.size());
    sched.items.push_back(std::move(item));
  }
  merge_multi_output(g, sched, target_set);
  order_for_locality(g, sched, target_set);
  return sched;
}

}  // namespace ts
