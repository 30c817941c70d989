#include "ir/lower.h"

#include <cmath>
#include <limits>
#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "ir/builder.h"
#include "opt/pass_manager.h"

namespace ts {
namespace {

using ir::ValueId;
using ir::kNone;

// Adjacent loop axes lowered as one loop: {kNoNode, d} merges the output's dim d with its next dim of
// size > 1; {reduce node, a} merges the reduce's axis a with axis a + 1 (both reduced); in a ragged kernel
// (Lowerer::run_ragged), {the first output root of a shape, d} takes the dims d and the next one of every output
// of that shape apart from its linear index as one (Lowerer::output_indices).
using LoopMerges = std::set<std::pair<NodeId, int64_t>>;

// The owner of a ragged kernel's merges for its outputs of `shape` (LoopMerges): the first output whose loop
// root has that shape.
NodeId shape_owner(const ScheduleItem& item, const Shape& shape) {
  const Graph& g = Graph::get();
  for (NodeId out : item.outputs)
    if (const NodeId r = loop_root(g, item, out); g[r].shape == shape) return r;
  return kNoNode;
}

class Lowerer {
 public:
  Lowerer(const ScheduleItem& item, ir::Kernel& k, const LoopMerges& merges) : item_(item), k_(k), b_(k), merges_(merges) {}

  void run() {
    const Graph& g = Graph::get();
    k_.name = item_.name;
    const size_t outputs = item_.outputs.size();
    for (NodeId out : item_.outputs) k_.globals.push_back({g[out].dtype, shape_numel(g[out].shape), true});
    for (size_t i = 0; i < item_.inputs.size(); i++) {
      const Node& in = g[item_.inputs[i]];
      k_.globals.push_back({in.dtype, shape_numel(in.shape), false});
      slot_[item_.inputs[i]] = static_cast<int>(outputs + i);
    }
    std::vector<ValueId> out_bufs;
    for (size_t o = 0; o < outputs; o++) out_bufs.push_back(b_.global(static_cast<int>(o), g[item_.outputs[o]].dtype));
    // A reshape keeps the row-major order of the elements, so a kernel whose output is a reshape of what
    // it computes loops over the computed shape and stores at the same flat positions: a matmul's
    // (C_out, C_in·K) result stored as a (C_out, C_in, kh, kw) weight gradient keeps its one 72-long
    // output axis (which can be vectorized) instead of three short ones. The outputs of a multi-output
    // kernel compute this shape (the kernelizer's rule 6) and are stored in one loop; small ones of several
    // shapes go through run_ragged.
    if (loop_shapes(g, item_).size() > 1) return run_ragged(out_bufs);
    const Shape& loop_shape = g[loop_root(g, item_, item_.outputs[0])].shape;
    std::vector<int64_t> dims(loop_shape.size());
    for (size_t d = 0; d < dims.size(); d++) dims[d] = static_cast<int64_t>(d);
    std::vector<ValueId> idx(loop_shape.size(), b_.cint(0)), loops;
    open_loops(kNoNode, dims, loop_shape, /*global=*/true, idx, loops);
    for (size_t o = 0; o < outputs; o++) {
      const ValueId value = value_of(loop_root(g, item_, item_.outputs[o]), idx, kNone);
      b_.store(out_bufs[o], linear(idx, loop_shape), value);
    }
    for (size_t i = loops.size(); i-- > 0;) b_.end_range(loops[i]);
  }

  // A multi-output kernel of small kernels of several shapes (the kernelizer's rule 6): one loop over the
  // largest output's N elements, one RANGE per axis of its own shape, and L the linear index of those axes.
  // The largest output is indexed as in a kernel of its own (no div/mod: a loss gradient's (64, 10), whose
  // per-row values are loaded once a row; over a flat loop of 640 each element took its row and column apart
  // by / 10 and % 10, 7.6 µs against 1-2). Any other output o, of n_o elements, stores at L where L < n_o; its value
  // is computed at min(L, n_o - 1), taken apart into its own shape's indices, so that no load leaves its
  // buffer where the store is masked off. split_index_set splits the loops where the masks change (at each
  // n_o) and simplify drops the masks: each range computes the outputs that have elements there, unmasked.
  void run_ragged(const std::vector<ValueId>& out_bufs) {
    const Graph& g = Graph::get();
    int64_t n = 1;
    NodeId largest = kNoNode;
    for (NodeId out : item_.outputs) {
      const NodeId root = loop_root(g, item_, out);
      const int64_t size = shape_numel(g[root].shape);
      if (largest == kNoNode || size > n) {
        n = size;
        largest = root;
      }
    }
    // one RANGE per axis, without open_loops' merges: lower() tries those on outputs[0]'s shape, which need
    // not be the largest one's
    const Shape& loop_shape = g[largest].shape;
    std::vector<ValueId> loop_idx(loop_shape.size(), b_.cint(0)), loops;
    for (size_t d = 0; d < loop_shape.size(); d++)
      if (loop_shape[d] != 1) loops.push_back(loop_idx[d] = b_.range(loop_shape[d], /*global=*/true));
    const ValueId l = linear(loop_idx, loop_shape);
    for (size_t o = 0; o < item_.outputs.size(); o++) {
      const NodeId root = loop_root(g, item_, item_.outputs[o]);
      const Shape& shape = g[root].shape;
      const int64_t n_o = shape_numel(shape);
      if (shape == loop_shape) {
        b_.store(out_bufs[o], l, value_of(root, loop_idx, kNone));
        continue;
      }
      ValueId at = l, gate = kNone;
      if (n_o < n) {
        const ValueId neg = b_.alu(ir::Op::Neg, DType::Int32, l);
        at = b_.alu(ir::Op::Neg, DType::Int32, b_.alu(ir::Op::Max, DType::Int32, neg, b_.cint(-(n_o - 1))));
        gate = b_.alu(ir::Op::CmpLt, DType::Bool, l, b_.cint(n_o));
      }
      b_.store(out_bufs[o], at, value_of(root, output_indices(shape_owner(item_, shape), shape, at), kNone), gate);
    }
    for (size_t i = loops.size(); i-- > 0;) b_.end_range(loops[i]);
  }

 private:
  // The indices of a ragged kernel's output of `shape` (see run_ragged) at its linear index `at`: its axes taken
  // apart by / and %, those that merges_ joins ({owner, d}: axis d with its next axis of size > 1; owner: the
  // first output root of that shape, shape_owner) as one run, its index taken apart in turn as open_loops takes a
  // merged loop's. The outputs of one shape share their indices (an SGD update's new momentum buffer and the
  // parameter computed from it). Where every view the output reads has the run's axes contiguous, the Builder puts
  // them back together (Builder::recombine_div_mod) and only the run's / and % are left: a weight gradient stored
  // transposed, (27, 16), read as the (16, 3, 3, 3) parameter it updates, is at / 27 + (at % 27)·16 instead of six
  // / and % of at by 3, 9 and 27 (lower() tries each merge).
  std::vector<ValueId> output_indices(NodeId owner, const Shape& shape, ValueId at) {
    std::vector<std::vector<size_t>> runs;
    int64_t prev = -1;
    for (size_t d = 0; d < shape.size(); d++) {
      if (shape[d] == 1) continue;
      if (prev >= 0 && merges_.count({owner, prev})) runs.back().push_back(d);
      else runs.push_back({d});
      prev = static_cast<int64_t>(d);
    }
    std::vector<ValueId> idx(shape.size(), b_.cint(0));
    int64_t stride = 1;
    for (size_t r = runs.size(); r-- > 0;) {
      int64_t total = 1;
      for (size_t d : runs[r]) total *= shape[d];
      ValueId q = stride == 1 ? at : b_.alu(ir::Op::IDiv, DType::Int32, at, b_.cint(stride));
      if (r > 0) q = b_.alu(ir::Op::Mod, DType::Int32, q, b_.cint(total));
      stride *= total;
      for (size_t j = runs[r].size(); j-- > 0;) {
        const size_t d = runs[r][j];
        if (j == 0) {
          idx[d] = q;
        } else {
          idx[d] = b_.alu(ir::Op::Mod, DType::Int32, q, b_.cint(shape[d]));
          q = b_.alu(ir::Op::IDiv, DType::Int32, q, b_.cint(shape[d]));
        }
      }
    }
    return idx;
  }

  const ScheduleItem& item_;
  ir::Kernel& k_;
  ir::Builder b_;
  std::map<NodeId, int> slot_;
  std::map<std::tuple<NodeId, std::vector<ValueId>, ValueId>, ValueId> memo_;
  const LoopMerges& merges_;

  // One RANGE per axis in `axes` of size > 1 (a size-1 axis has index 0), except that axes merged by
  // merges_ (owner: kNoNode for the output's axes, the reduce node for its reduced axes) share one
  // loop over their product, their indices taken back apart by div/mod: for a run (a, b) of sizes
  // (sa, sb), a = L / sb and b = L % sb. Where the two axes are contiguous in every view the kernel
  // reads, a·sb + b = (L / sb)·sb + L % sb folds back to L (Builder's rules) and no div/mod is left.
  void open_loops(NodeId owner, const std::vector<int64_t>& axes, const Shape& shape, bool global,
                  std::vector<ValueId>& idx, std::vector<ValueId>& loops) {
    std::vector<std::vector<int64_t>> runs;
    int64_t prev = -1;
    for (int64_t a : axes) {
      if (shape[a] == 1) continue;
      if (prev >= 0 && merges_.count({owner, prev})) runs.back().push_back(a);
      else runs.push_back({a});
      prev = a;
    }
    for (const std::vector<int64_t>& run : runs) {
      int64_t total = 1;
      for (int64_t a : run) total *= shape[a];
      loops.push_back(b_.range(total, global));
      ValueId q = loops.back();
      for (size_t j = run.size(); j-- > 0;) {
        if (j == 0) {
          idx[run[j]] = q;
        } else {
          idx[run[j]] = b_.alu(ir::Op::Mod, DType::Int32, q, b_.cint(shape[run[j]]));
          q = b_.alu(ir::Op::IDiv, DType::Int32, q, b_.cint(shape[run[j]]));
        }
      }
    }
  }

  bool is_input(NodeId id) const { return slot_.count(id) > 0; }

  ValueId linear(const std::vector<ValueId>& idx, const Shape& shape) {
    Shape st = contiguous_strides(shape);
    ValueId pos = b_.cint(0);
    for (size_t d = 0; d < idx.size(); d++) pos = b_.add(pos, b_.mul(idx[d], b_.cint(st[d])));
    return pos;
  }

  // Index arithmetic of one view: the flat position for logical index `idx`, and its validity.
  std::pair<ValueId, ValueId> apply_view(const View& v, const std::vector<ValueId>& idx) {
    ValueId pos = b_.cint(v.offset), valid = kNone;
    for (size_t d = 0; d < idx.size(); d++) {
      pos = b_.add(pos, b_.mul(idx[d], b_.cint(v.strides[d])));
      if (!v.mask.empty()) {
        auto [lo, hi] = v.mask[d];
        if (lo > 0) valid = b_.land(valid, b_.alu(ir::Op::CmpLt, DType::Bool, b_.cint(lo - 1), idx[d]));
        if (hi < v.shape[d]) valid = b_.land(valid, b_.alu(ir::Op::CmpLt, DType::Bool, idx[d], b_.cint(hi)));
      }
    }
    return {pos, valid};
  }

  std::vector<ValueId> unflatten(ValueId pos, const Shape& shape) {
    std::vector<ValueId> out(shape.size());
    if (shape_numel(shape) == 0) {  // nothing is valid in an empty view: any coordinates do (loads are gated off)
      for (auto& o : out) o = b_.cint(0);
      return out;
    }
    int64_t acc = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      ValueId q = b_.alu(ir::Op::IDiv, DType::Int32, pos, b_.cint(acc));
      out[d] = shape[d] == 1 ? b_.cint(0) : b_.alu(ir::Op::Mod, DType::Int32, q, b_.cint(shape[d]));
      acc *= shape[d];
    }
    return out;
  }

  // Index of the value underneath a ViewStack, as a flat position in the base's contiguous layout.
  std::pair<ValueId, ValueId> stack_position(const ViewStack& vs, const std::vector<ValueId>& idx) {
    std::vector<ValueId> cur = idx;
    ValueId valid = kNone;
    for (size_t k = vs.views.size(); k-- > 0;) {
      const View& v = vs.views[k];
      auto [pos, ok] = apply_view(v, cur);
      valid = b_.land(valid, ok);
      if (k == 0) return {pos, valid};
      if (v.has_mask()) {
        // The position only matters where the mask holds (the load is gated off elsewhere), so it is
        // computed from each index clamped to its mask [lo, hi): the Builder then knows its range, and the
        // div/mod of the unflatten below simplify as they would without the padding (a concatenation's
        // gradient, a pad then a reshape: a chain of six div/mods per load otherwise).
        // Each index enters as its distance from the mask's start (in [0, hi − lo)), the starts folded into
        // the constant offset (which a padding's shift then cancels).
        int64_t offset = v.offset;
        ValueId shifted = kNone;
        for (size_t d = 0; d < cur.size(); d++) {
          auto [lo, hi] = v.mask[d];
          ValueId u = cur[d];
          if (lo < hi && (lo > 0 || hi < v.shape[d])) {
            if (lo > 0) u = b_.alu(ir::Op::Max, DType::Int32, u, b_.cint(lo));
            if (hi < v.shape[d])  // min(x, hi − 1) = −max(−x, 1 − hi)
              u = b_.alu(ir::Op::Neg, DType::Int32,
                         b_.alu(ir::Op::Max, DType::Int32, b_.alu(ir::Op::Neg, DType::Int32, u), b_.cint(1 - hi)));
            u = b_.add(u, b_.cint(-lo));
            offset += lo * v.strides[d];
          }
          const ValueId term = b_.mul(u, b_.cint(v.strides[d]));
          shifted = shifted == kNone ? term : b_.add(shifted, term);
        }
        pos = shifted == kNone ? b_.cint(offset) : b_.add(shifted, b_.cint(offset));
      }
      cur = unflatten(pos, vs.views[k - 1].shape);
    }
    throw std::logic_error("empty ViewStack");
  }

  // Per-dimension index of the value underneath a ViewStack. A single view whose strides each select
  // one dimension of the base (permute, expand, shrink, flip, pad) maps index to index directly;
  // anything else goes through the flat position.
  std::pair<std::vector<ValueId>, ValueId> stack_index(const ViewStack& vs, const std::vector<ValueId>& idx,
                                                       const Shape& base) {
    if (vs.views.size() == 1) {
      const View& v = vs.views[0];
      Shape cs = contiguous_strides(base);
      std::vector<ValueId> out(base.size(), kNone);
      std::vector<int> from(base.size(), -1);  // view dim that indexes base dim k
      bool ok = true;
      for (size_t j = 0; j < v.shape.size() && ok; j++) {
        if (v.strides[j] == 0) continue;
        int64_t s = std::abs(v.strides[j]);
        size_t k = 0;
        while (k < base.size() && !(cs[k] == s && from[k] < 0)) k++;
        if (k == base.size()) ok = false;
        else from[k] = static_cast<int>(j);
      }
      // split the offset into per-dimension starts, and check that every valid index stays inside the
      // base (otherwise the split was ambiguous: fall back to the flat position)
      int64_t rem = v.offset;
      for (size_t k = 0; k < base.size() && ok; k++) {
        int64_t start = cs[k] ? rem / cs[k] : 0;
        if (cs[k]) rem -= start * cs[k];
        int64_t lo = start, hi = start;
        if (from[k] >= 0) {
          int j = from[k];
          int64_t mlo = v.mask.empty() ? 0 : v.mask[j].first, mhi = v.mask.empty() ? v.shape[j] : v.mask[j].second;
          int64_t sign = v.strides[j] > 0 ? 1 : -1;
          lo = std::min(start + sign * mlo, start + sign * (mhi - 1));
          hi = std::max(start + sign * mlo, start + sign * (mhi - 1));
          ValueId i = sign > 0 ? idx[j] : b_.alu(ir::Op::Neg, DType::Int32, idx[j]);
          out[k] = b_.add(i, b_.cint(start));
        } else {
          out[k] = b_.cint(start);
        }
        if (lo < 0 || hi >= std::max<int64_t>(base[k], 1)) ok = false;
      }
      if (ok && rem == 0) {
        ValueId valid = apply_view(v, idx).second;
        return {out, valid};
      }
    }
    auto [pos, valid] = stack_position(vs, idx);
    return {unflatten(pos, base), valid};
  }

  // The values of reduce `id`'s own shape that its body reads through an EXPAND (along the reduced axes), reached
  // from its source through elementwise ops of the source's shape that this kernel computes.
  std::vector<NodeId> row_invariant_operands(NodeId id) const {
    const Graph& g = Graph::get();
    const Shape& out = g[id].shape;
    const Shape& in = g[g[id].src[0]].shape;
    std::vector<NodeId> found, stack{g[id].src[0]};
    std::set<NodeId> seen;
    while (!stack.empty()) {
      const NodeId cur = stack.back();
      stack.pop_back();
      if (!seen.insert(cur).second || is_input(cur) || seen.size() > 64) continue;
      const Node& n = g[cur];
      if (n.op == Op::Expand && !is_input(n.src[0]) && g[n.src[0]].shape == out && n.shape == in) {
        found.push_back(n.src[0]);
      } else if (is_alu(n.op) && n.shape == in) {
        for (int i = 0; i < n.num_src; i++) stack.push_back(n.src[i]);
      }
    }
    return found;
  }

  ValueId value_of(NodeId id, const std::vector<ValueId>& idx, ValueId gate) {
    auto key = std::make_tuple(id, idx, gate);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    ValueId v = compute(id, idx, gate);
    memo_[key] = v;
    return v;
  }

  ValueId compute(NodeId id, const std::vector<ValueId>& idx, ValueId gate) {
    const Graph& g = Graph::get();
    const Node& n = g[id];
    if (idx.size() != n.shape.size())
      throw std::logic_error(std::string("lowering: index rank mismatch at ") + op_name(n.op) + " #" + std::to_string(n.uid) +
                             " shape (" + shape_str(n.shape) + "), " + std::to_string(idx.size()) + " indices");
    if (is_input(id)) {
      ValueId buf = b_.global(slot_[id], n.dtype);
      return b_.load(buf, linear(idx, n.shape), gate);
    }
    if (n.op == Op::Const) return b_.constant(n.value, n.dtype);
    if (is_movement(n.op)) {
      // compose the chain of movement ops down to the value underneath. A contiguous() fused here (the
      // kernelizer's rule 4: its source is in memory already) is that source, in its shape: the chain goes
      // through it, so that the views above it and the buffer below compose into one index (stopping there
      // took the index apart into the contiguous()'s dimensions by div and mod and put it back together)
      std::vector<NodeId> chain;
      NodeId base = id;
      while (!is_input(base) && (is_movement(g[base].op) || g[base].op == Op::Contiguous)) {
        if (g[base].op != Op::Contiguous) chain.push_back(base);
        base = g[base].src[0];
      }
      const ViewStack vs = compose_views(g, chain, g[base].shape);
      const Node& bn = g[base];
      if (is_input(base)) {
        auto [pos, valid] = stack_position(vs, idx);
        return b_.load(b_.global(slot_[base], bn.dtype), pos, b_.land(gate, valid));
      }
      auto [bidx, valid] = stack_index(vs, idx, bn.shape);
      ValueId v = bn.op == Op::Const ? b_.constant(bn.value, bn.dtype) : value_of(base, bidx, b_.land(gate, valid));
      if (valid != kNone) v = b_.alu(ir::Op::Where, bn.dtype, valid, v, b_.constant(0, bn.dtype));
      return v;
    }
    if (is_reduce(n.op)) {
      const Node& src = g[n.src[0]];
      bool is_sum = n.op == Op::ReduceSum;
      // float16 reductions accumulate in float32 and round the result once (PyTorch's CPU rule)
      const bool half = n.dtype == DType::Float16;
      const DType acc_dt = half ? DType::Float32 : n.dtype;
      double init = is_sum ? 0.0
                           : (is_float(n.dtype) ? -std::numeric_limits<double>::infinity()
                                                : static_cast<double>(std::numeric_limits<int32_t>::min()));
      // Values of this reduce's shape that its body reads through a broadcast along the reduced axes (the
      // row max that logsumexp subtracts in the loop of its sum) do not depend on the loop: they are computed
      // here, in front of it, so that a reader after the loop (logsumexp adds the max back to the sum's log)
      // finds them instead of running their reduction a second time.
      for (NodeId s : row_invariant_operands(id)) value_of(s, idx, gate);
      ValueId acc = b_.acc(init, acc_dt);
      std::vector<ValueId> sidx = idx, loops;
      open_loops(id, n.arg, src.shape, /*global=*/false, sidx, loops);
      if (loops.empty()) {
        // nothing to reduce over (all reduced dims have size 1): the value itself, or the init for empty
        if (shape_numel(src.shape) == 0) return b_.constant(init, n.dtype);
        return value_of(n.src[0], sidx, gate);
      }
      ValueId v = b_.cast(value_of(n.src[0], sidx, gate), acc_dt);
      b_.assign(acc, b_.alu(is_sum ? ir::Op::Add : ir::Op::Max, acc_dt, acc, v));
      for (size_t i = loops.size(); i-- > 0;) b_.end_range(loops[i]);
      // values computed inside the reduce loop are out of scope after it: forget them
      for (auto it = memo_.begin(); it != memo_.end();) it = it->second > loops.front() ? memo_.erase(it) : std::next(it);
      return b_.cast(acc, n.dtype);
    }
    if (n.op == Op::Contiguous) return value_of(n.src[0], idx, gate);
    if (n.op == Op::Cast) return b_.cast(value_of(n.src[0], idx, gate), n.dtype);
    // elementwise
    ValueId s[3] = {kNone, kNone, kNone};
    for (int i = 0; i < n.num_src; i++) s[i] = value_of(n.src[i], idx, gate);
    static const std::map<Op, ir::Op> alu = {
        {Op::Neg, ir::Op::Neg},     {Op::Exp2, ir::Op::Exp2},   {Op::Log2, ir::Op::Log2}, {Op::Sin, ir::Op::Sin},
        {Op::Sqrt, ir::Op::Sqrt},   {Op::Recip, ir::Op::Recip}, {Op::Add, ir::Op::Add},   {Op::Mul, ir::Op::Mul},
        {Op::Max, ir::Op::Max},     {Op::CmpLt, ir::Op::CmpLt}, {Op::CmpEq, ir::Op::CmpEq}, {Op::IDiv, ir::Op::IDiv},
        {Op::Mod, ir::Op::Mod},     {Op::Where, ir::Op::Where}};
    auto it = alu.find(n.op);
    if (it == alu.end()) throw std::logic_error(std::string("lowering: unsupported op ") + op_name(n.op));
    // float16 arithmetic follows PyTorch's CPU rule: the operands widen to float32, the op runs in
    // float32 and its result is rounded to float16 (a WHERE only selects, so it stays float16)
    bool half = n.dtype == DType::Float16;
    for (int i = 0; i < n.num_src; i++) half |= b_.dtype(s[i]) == DType::Float16;
    if (!half || n.op == Op::Where) return b_.alu(it->second, n.dtype, s[0], s[1], s[2]);
    for (int i = 0; i < n.num_src; i++)
      if (b_.dtype(s[i]) == DType::Float16) s[i] = b_.cast(s[i], DType::Float32);
    ValueId v = b_.alu(it->second, n.dtype == DType::Float16 ? DType::Float32 : n.dtype, s[0], s[1], s[2]);
    return b_.cast(v, n.dtype);
  }
};

}  // namespace

namespace {

ir::Kernel lower_with(const ScheduleItem& item, const LoopMerges& merges) {
  ir::Kernel k;
  Lowerer(item, k, merges).run();
  return k;
}

// The div/mod instructions a kernel still needs (an index taken apart and put back together leaves
// unused ones behind until dead-code elimination).
int divisions(ir::Kernel k) {
  dead_code_elimination(k);
  int n = 0;
  for (const ir::Inst& in : k.insts) n += in.op == ir::Op::IDiv || in.op == ir::Op::Mod;
  return n;
}

}  // namespace

ir::Kernel lower(const ScheduleItem& item) {
  // Adjacent axes that every view reads contiguously are one loop (tinygrad merges such dims of its
  // shapes): a reduce over (batch, sequence) of a Linear's weight gradient, or over (H, W) of a
  // BatchNorm's statistics, becomes one long loop that UPCAST can vectorize. Each pair of adjacent axes
  // is tried in turn, and the merge is kept when the kernel needs no more div/mod than without it (a
  // transposed or windowed view would need them to take the merged index apart).
  const Graph& g = Graph::get();
  LoopMerges merges;
  ir::Kernel best = lower_with(item, merges);
  int best_divisions = divisions(best);
  std::vector<std::pair<NodeId, int64_t>> candidates;
  auto adjacent_axes = [&](NodeId owner, const Shape& shape) {
    int64_t prev = -1;
    for (size_t d = 0; d < shape.size(); d++) {
      if (shape[d] == 1) continue;
      if (prev >= 0) candidates.push_back({owner, prev});
      prev = static_cast<int64_t>(d);
    }
  };
  if (loop_shapes(g, item).size() > 1) {
    // A ragged kernel: each output's own axes (Lowerer::output_indices), its innermost pairs first. A transposed
    // weight gradient (27, 16) read as (16, 3, 3, 3) needs the last three axes as one run and the first apart;
    // tried from the outside in, merging all four took no more / and % than none (6: the contiguous reads folded,
    // the transposed one not), and was kept before the last three alone (2) were tried.
    std::set<Shape> shapes;
    for (NodeId out : item.outputs)
      if (const NodeId r = loop_root(g, item, out); shapes.insert(g[r].shape).second) {
        const size_t first = candidates.size();
        adjacent_axes(r, g[r].shape);
        std::reverse(candidates.begin() + static_cast<std::ptrdiff_t>(first), candidates.end());
      }
  } else {
    adjacent_axes(kNoNode, g[loop_root(g, item, item.outputs[0])].shape);  // the shape Lowerer::run loops over
  }
  for (NodeId f : item.fused) {
    const Node& n = g[f];
    if (!is_reduce(n.op)) continue;
    const Shape& src = g[n.src[0]].shape;
    for (size_t i = 0; i + 1 < n.arg.size(); i++)
      if (n.arg[i + 1] == n.arg[i] + 1 && src[n.arg[i]] > 1 && src[n.arg[i + 1]] > 1) candidates.push_back({f, n.arg[i]});
  }
  for (const auto& c : candidates) {
    LoopMerges trial = merges;
    trial.insert(c);
    ir::Kernel k = lower_with(item, trial);
    if (const int d = divisions(k); d <= best_divisions) {
      merges = std::move(trial);
      best = std::move(k);
      best_divisions = d;
    }
  }
  return best;
}

}  // namespace ts
