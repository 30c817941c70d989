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
// loop-invariant code motion) whose innermost body holds reduce blocks (upcastable_body). In an
// elementwise kernel it only orders the two outermost loops (order_outer_loops_by_pages below).
#include "opt/pass_manager.h"

#include <cstdlib>

namespace ts {
using ir::Inst;
using ir::Op;
using ir::ValueId;

// Nests the perfect nest of global `loops` (outermost first) in `order` (indices into loops, outermost first).
static void nest_loops(ir::Kernel& k, const std::vector<size_t>& loops, const std::vector<size_t>& order) {
  const std::vector<Inst>& insts = k.insts;
  const size_t innermost = loops.back();
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

// Elementwise kernels (no reduce): the order of the two outermost output loops, from how their steps move the
// loads and stores. Each access touches a piece of memory per pass of the loops inside the two (the piece: from
// its first to its last element there). An access is scattered along a loop when a step of that loop moves it
// by more than its piece and by 2 KiB or more: nearly every step starts on another page, which the hardware
// prefetchers do not follow (they stay within a page). Scattered pieces of one cache line are the costly
// ones (each waits for memory; longer pieces are streamed once begun). The two loops are swapped when that
// puts no access in one-line scattered pieces and takes some out of them. Caffe's LeNet's max-pool backward
// (`E_50_64_8_8`: channel, batch, row, column) reads the pooled maxima, their counts and the incoming gradient,
// laid out (batch, channel, ...), a 64-byte piece per (channel, batch), 3,200 bytes apart along the batch
// loop; its output and the convolution's output move 256 bytes along it, in 256-byte pieces. Batch outside
// channel: the three read in order, the other two in 256-byte pieces 16 KiB apart; in the training step
// (its data in memory) 0.18–0.23 → 0.13–0.17 ms. Swapping wherever fewer accesses were scattered, whatever
// their pieces, made two other kernels of that step slower (a panel packing whose 8 KiB output pieces were
// in order, a max-pool backward with 576-byte pieces): README, twenty-fifth session.
// Only where the device runs no workgroups (the C device, the interpreter: a GPU maps these loops to its grid),
// in nests of four loops or more (the two innermost are upcast_global's, its transpose tile's among them) and
// for kernels whose buffers do not fit in the L2.
static void order_outer_loops_by_pages(ir::Kernel& k, const std::vector<size_t>& loops) {
  constexpr int64_t kScatteredBytes = 2048, kLineBytes = 64, kCachedBytes = int64_t{1} << 20;
  const std::vector<Inst>& insts = k.insts;
  if (k.target.workgroups() || loops.size() < 4) return;
  // buffers that fit in a core's L2 (1 MiB here) stay cached between launches: their pages cost nothing
  // (the CNN sample's E_64_8_8_8, 128 KiB, was a few µs slower swapped)
  int64_t bytes = 0;
  for (const ir::GlobalArg& g : k.globals) bytes += g.numel * static_cast<int64_t>(dtype_size(g.dtype));
  if (bytes < kCachedBytes) return;
  const size_t body_end = end_of_range(insts, loops.back());
  auto at = [&](ValueId index, size_t loop, int64_t v) { return eval_index(insts, index, static_cast<ValueId>(loop), v); };
  auto bound = [&](size_t loop) { return static_cast<int64_t>(insts[insts[loop].src[0]].value); };
  // the accesses in one-line pieces scattered along loop j
  auto one_line_scattered = [&](size_t j) {
    int count = 0;
    for (size_t x = loops.back() + 1; x < body_end; x++) {
      if (insts[x].op != Op::Load && insts[x].op != Op::Store) continue;
      const ValueId index = insts[x].src[1];
      const int64_t size = static_cast<int64_t>(dtype_size(insts[insts[x].src[0]].dtype));
      int64_t piece = 1;
      for (size_t l = 2; l < loops.size(); l++) piece += std::abs(at(index, loops[l], bound(loops[l]) - 1) - at(index, loops[l], 0));
      const int64_t step = std::abs(at(index, loops[j], 1) - at(index, loops[j], 0));
      if (step > piece && step * size >= kScatteredBytes && piece * size <= kLineBytes) count++;
    }
    return count;
  };
  if (one_line_scattered(1) == 0 || one_line_scattered(0) != 0) return;
  std::vector<size_t> order = {1, 0};
  for (size_t j = 2; j < loops.size(); j++) order.push_back(j);
  nest_loops(k, loops, order);
}

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
  if (blocks.empty()) {
    bool reduces = false;
    for (const Inst& in : insts) reduces = reduces || in.op == Op::DefineAcc;
    if (!reduces) order_outer_loops_by_pages(k, loops);
    return;
  }
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
  // loop j can be the vector axis when a load is contiguous along it and its bound upcasts by 16, or is 8: a
  // row of 8 is one 256-bit vector. A depthwise convolution's weight gradient on 8x8 maps keeps the row of
  // positions as its partial sums' output axis (conv_weight_grad); where the output gradient is scaled per
  // channel (a BatchNorm in eval mode after it, its running statistics fixed: fine-tuning with frozen
  // BatchNorm), the channel loop was left innermost and the row summed a column at a time: 32 x 64 x 8 x 8,
  // that kernel alone 1.27 -> 0.33 ms, the row upcast by 8 under a register tile of the 9 taps
  auto vector_axis = [&](size_t j) {
    const int64_t b = bound(loops[j]);
    return (b % 16 == 0 || b == 8) && !contiguous[j].empty();
  };
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

  nest_loops(k, loops, order);
}

}  // namespace ts
