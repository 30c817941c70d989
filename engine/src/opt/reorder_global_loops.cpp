// Loop order of the output axes, chosen from the strides of the loads (tinygrad picks its upcast axes the
// same way: from each buffer's stride on each axis).
//
// Lowering nests the output loops in the order of the output's dims. The UPCAST passes work on the
// innermost loop (upcast_global: its U neighbouring outputs share one pass of the reduce loop and must
// read U contiguous elements) and the one around it (register_tile: a loop the contiguous operand does
// not depend on, so that each of its loads is reused by 8 rows). A matmul arrives in that order; its
// gradients often do not. The weight gradient of a Linear layer whose input was packed into panels
// reads that input with stride 8 along the last output dim, while the other operand (the output's
// gradient) is contiguous along an earlier dim:
//
//   for p in 0..16: for r in 0..32: for k in 0..784:      for p in 0..16: for k in 0..784: for r in 0..32:
//     acc = 0                                         →      acc = 0
//     for b in 0..128:                                        for b in 0..128:
//       acc += g[b, 32p + r] * x[b/8, k, b%8]                    acc += g[b, 32p + r] * x[b/8, k, b%8]
//
// Global loops are independent, so any order computes the same values. This pass moves innermost a
// loop along which some load of the reduce is contiguous (stride 1), and next to it a loop those
// contiguous loads do not depend on while another load does (the register tile's reuse). Kernels
// already in such an order are left as they are. The MLP 784-512-256-10's first weight gradient went
// from 2.6 to over 100 GFLOP/s on this machine's C device.
//
// It applies to a perfect nest of global loops (only index arithmetic between them, run before
// loop-invariant code motion) whose innermost body holds reduce blocks (upcastable_body).
#include "opt/pass_manager.h"

namespace ts {
using ir::Inst;
using ir::Op;
using ir::ValueId;

void reorder_global_loops(ir::Kernel& k) {
  const std::vector<Inst>& insts = k.insts;
  // the global loops, outermost first; they must form a perfect nest of constant-bound loops
  const std::vector<size_t> loops = global_loops(insts);
  if (loops.size() < 2) return;
  for (size_t j = 0; j < loops.size(); j++) {
    if (insts[insts[loops[j]].src[0]].op != Op::Const) return;
    if (j + 1 == loops.size()) break;
    if (end_of_range(insts, loops[j]) != end_of_range(insts, loops[j + 1]) + 1) return;
    for (size_t i = loops[j] + 1; i < loops[j + 1]; i++)
      if (!is_alu(insts[i].op) && insts[i].op != Op::Const) return;
  }
  const size_t innermost = loops.back();
  const std::vector<ReduceBlock> blocks = upcastable_body(insts, innermost);
  if (blocks.empty()) return;
  std::vector<ValueId> loads;
  for (const ReduceBlock& b : blocks)
    for (size_t x = b.range + 1; x < b.end; x++)
      if (insts[x].op == Op::Load) loads.push_back(static_cast<ValueId>(x));

  auto bound = [&](size_t loop) { return static_cast<int64_t>(insts[insts[loop].src[0]].value); };
  std::vector<std::vector<int8_t>> memo(loops.size(), std::vector<int8_t>(insts.size(), -1));
  auto depends = [&](ValueId load, size_t j) { return depends_on(insts, load, static_cast<ValueId>(loops[j]), memo[j]); };
  auto stride = [&](ValueId load, size_t j) {
    const ValueId idx = insts[load].src[1], var = static_cast<ValueId>(loops[j]);
    return eval_index(insts, idx, var, 1) - eval_index(insts, idx, var, 0);
  };
  const size_t n = loops.size();
  // A reduce whose loads do not depend on the innermost loop (a row's sum broadcast along the row and fused
  // into its consumer, see is_row_local_expand in schedule.cpp) is computed once per row by loop-invariant
  // code motion only while that loop stays innermost: moved outward, every element of the row recomputes it
  // (a LayerNorm's backward over rows of 256: 8.9 ms instead of 0.1). Such kernels keep their order.
  for (const ReduceBlock& b : blocks) {
    bool varies = false;
    for (size_t x = b.range + 1; x < b.end && !varies; x++)
      varies = insts[x].op == Op::Load && depends(static_cast<ValueId>(x), n - 1);
    if (!varies) return;
  }
  // the loads contiguous along each loop (stride 1): the candidates for the vectorized operand
  std::vector<std::vector<ValueId>> contiguous(n);
  for (size_t j = 0; j < n; j++)
    for (ValueId l : loads)
      if (stride(l, j) == 1 && depends(l, j)) contiguous[j].push_back(l);
  // loop j can be the vector axis when a load is contiguous along it and its bound upcasts by 16
  auto vector_axis = [&](size_t j) { return bound(loops[j]) % 16 == 0 && !contiguous[j].empty(); };
  // loop i can be the register tile's rows for vector axis j: the contiguous loads do not depend on it
  // (each is reused by every row) and some other load does
  auto row_axis = [&](size_t i, size_t j) {
    if (i == j || bound(loops[i]) % 2 != 0) return false;
    bool other = false;
    for (ValueId l : contiguous[j])
      if (depends(l, i)) return false;
    for (ValueId l : loads) other = other || depends(l, i);
    return other;
  };

  size_t inner = n - 1;
  if (!vector_axis(inner)) {
    inner = n;
    for (size_t j = n - 1; j-- > 0;)
      if (vector_axis(j)) {
        inner = j;
        break;
      }
    if (inner == n) return;  // no loop has a contiguous operand: leave the order (upcast_reduce's case)
  }
  size_t rows = n;
  if (inner == n - 1 && row_axis(n - 2, inner)) rows = n - 2;
  for (size_t i = n; rows == n && i-- > 0;)
    if (row_axis(i, inner)) rows = i;
  if (inner == n - 1 && (rows == n || rows == n - 2)) return;  // already in the best order

  // new order of the loops: the others as they were, then the rows, then the vector axis
  std::vector<size_t> order;
  for (size_t j = 0; j < n; j++)
    if (j != inner && j != rows) order.push_back(j);
  if (rows != n) order.push_back(rows);
  order.push_back(inner);

  std::vector<ValueId> ids;
  for (size_t i = 0; i < loops[0]; i++) ids.push_back(static_cast<ValueId>(i));
  for (size_t i = loops[0]; i < innermost; i++)  // constants between the loops first: bounds may be among them
    if (insts[i].op == Op::Const) ids.push_back(static_cast<ValueId>(i));
  for (size_t j : order) ids.push_back(static_cast<ValueId>(loops[j]));
  for (size_t i = loops[0]; i < innermost; i++)  // then the index arithmetic, inside every loop it may read
    if (insts[i].op != Op::Const && insts[i].op != Op::Range) ids.push_back(static_cast<ValueId>(i));
  const size_t body_end = end_of_range(insts, innermost);
  for (size_t i = innermost + 1; i < body_end; i++) ids.push_back(static_cast<ValueId>(i));
  for (size_t j = order.size(); j-- > 0;) ids.push_back(static_cast<ValueId>(end_of_range(insts, loops[order[j]])));
  for (size_t i = end_of_range(insts, loops[0]) + 1; i < insts.size(); i++) ids.push_back(static_cast<ValueId>(i));
  reorder_instructions(k, ids);
}

}  // namespace ts
