// Index-set splitting (Wolfe, "High Performance Compilers for Parallel Computing", 1996; LLVM's
// inductive range check elimination does the same for bounds checks): a loop whose body compares its
// index with constants runs as one loop per range between those constants, and in each range every
// comparison has one known answer.
//
// The backward pass of a concatenation (a chunk's or a split's gradient: the transformer's q, k, v
// gradients written back into the qkv projection's (B, S, 96) gradient) reads each output element from
// one of its inputs, chosen by where the index falls:
//
//   for j in 0..96:                                     for j in 0..32:  out[j] = dq[f(j)]
//     out[j] = (j < 32 ? dq[f(j)] : 0)           →      for j in 0..32:  out[32 + j] = dk[g(j)]
//            + (31 < j && j < 64 ? dk[g(j)] : 0)        for j in 0..32:  out[64 + j] = dv[h(j)]
//            + (63 < j ? dv[h(j)] : 0)
//
// Here the pass only writes the loops: the index of range [a, b) is `j + a` with j in 0..b-a, and the
// simplify pass after it, which knows each value's range of values (ir::Builder::bounds), folds every
// comparison to true or false, drops the false gates' loads and the true gates, and the clamps (MAX)
// that kept masked-off addresses in bounds. Every element is still computed exactly once, in the same
// order of operations (a masked-off load read 0, and x + 0 stays in the code: -0 + 0 is +0).
//
// Applies to the innermost global loop of an elementwise kernel (no reduce loop) when it has a constant
// bound and lies inside another global loop — the outermost one is the loop the C device's threads
// split (TS_LO/TS_HI). Kernels for devices with workgroups are left alone (a GPU runs one thread per
// element; its masks cost no loop trips). At most kMaxRanges ranges, and the copies stay under
// kMaxUnrolledInsts.
#include <set>

#include "opt/pass_manager.h"

namespace ts {

namespace {
constexpr size_t kMaxRanges = 12;

using ir::Inst;
using ir::Op;
using ir::ValueId;

// Splits global loop g (constant bound) into one sequential loop per range between the constants its
// body compares it with; false (the kernel unchanged) when there are fewer than 2 ranges, more than
// kMaxRanges, or the copies would exceed `max_insts`.
bool split_loop(ir::Kernel& k, size_t g, size_t max_insts) {
  const std::vector<Inst> old = k.insts;
  const size_t g_end = end_of_range(old, g);
  const int64_t n = static_cast<int64_t>(old[old[g].src[0]].value);
  // where the answers change: j < c changes at c, c < j at c + 1
  std::set<int64_t> cuts;
  for (size_t i = g + 1; i < g_end; i++) {
    const Inst& in = old[i];
    if (in.op != Op::CmpLt) continue;
    if (in.src[0] == static_cast<ValueId>(g) && old[in.src[1]].op == Op::Const) cuts.insert(static_cast<int64_t>(old[in.src[1]].value));
    if (in.src[1] == static_cast<ValueId>(g) && old[in.src[0]].op == Op::Const) cuts.insert(static_cast<int64_t>(old[in.src[0]].value) + 1);
  }
  std::vector<int64_t> bounds = {0};
  for (int64_t c : cuts)
    if (c > 0 && c < n) bounds.push_back(c);
  bounds.push_back(n);
  const size_t ranges = bounds.size() - 1;
  if (ranges < 2 || ranges > kMaxRanges || (g_end - g) * ranges > max_insts) return false;

  Rewrite w(old);
  for (size_t i = 0; i < g; i++) w.copy(i);
  for (size_t r = 0; r < ranges; r++) {
    const int64_t from = bounds[r], to = bounds[r + 1];
    const ValueId trips = w.emit(make_inst(Op::Const, DType::Int32, {}, 0, static_cast<double>(to - from)));
    // a sequential loop (RANGE kind kReduceLoop, though nothing is reduced): the ranges run one after another
    // in each iteration of the enclosing global loop. As sibling global loops, a GPU view of the kernel would
    // map the first range onto the grid and run the others in every one of its threads.
    const ValueId range = w.emit(make_inst(Op::Range, DType::Int32, {trips}, ir::kReduceLoop));
    const ValueId offset = w.emit(make_inst(Op::Const, DType::Int32, {}, 0, static_cast<double>(from)));
    w.remap[g] = from == 0 ? range : w.emit(make_inst(Op::Add, DType::Int32, {range, offset}));
    for (size_t i = g + 1; i < g_end; i++) w.copy(i);
    w.emit(make_inst(Op::EndRange, DType::Float32, {range}));
  }
  for (size_t i = g_end + 1; i < old.size(); i++) w.copy(i);
  k.insts = std::move(w.out);
  return true;
}

// The innermost global loop with a constant bound that lies inside another global loop; insts.size() if none.
size_t inner_global_loop(const std::vector<Inst>& insts) {
  size_t g = insts.size();
  for (size_t i = 0; i < insts.size(); i++)
    if (insts[i].op == Op::Range && insts[i].arg == ir::kGlobalLoop) g = i;
  if (g == insts.size() || insts[insts[g].src[0]].op != Op::Const) return insts.size();
  const size_t g_end = end_of_range(insts, g);
  for (size_t i = 0; i < g; i++)
    if (insts[i].op == Op::Range && insts[i].arg == ir::kGlobalLoop && end_of_range(insts, i) > g_end) return g;
  return insts.size();
}
}  // namespace

void split_index_set(ir::Kernel& k) {
  if (k.target.workgroups()) return;
  for (const Inst& in : k.insts)
    if (in.op == Op::DefineAcc || (in.op == Op::Range && in.arg != ir::kGlobalLoop)) return;  // elementwise only
  // the innermost loop: the one whose comparisons are evaluated most often
  const size_t g = inner_global_loop(k.insts);
  if (g == k.insts.size() || !split_loop(k, g, kMaxUnrolledInsts)) return;
  // Then the loop around it, when it compares its index too: in a 2-D col2im which of the kernel's rows reach
  // an input row depends on the row as the columns do on the column, and splitting only the columns left a
  // masked load (a branch) per row tap (Caffe's LeNet's 50 -> 20 channels 5x5, 12x12: 1.33 -> 0.57 ms alone).
  // Its copies hold the inner ranges with every masked load; simplify drops the masked-off ones, most of
  // them (that col2im: 9 x 9 bodies with 1,600 of their 20,000 loads), so the size limit is checked after it.
  const size_t g2 = inner_global_loop(k.insts);
  if (g2 == k.insts.size()) return;
  ir::Kernel split = k;
  if (!split_loop(split, g2, kMaxRanges * kMaxUnrolledInsts)) return;
  simplify(split);
  if (split.insts.size() <= kMaxUnrolledInsts) k = std::move(split);
}

}  // namespace ts
