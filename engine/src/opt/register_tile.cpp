// REGISTER TILING: the second UPCAST axis of a matmul-like reduction (BLAS's MR×NR micro-kernel,
// Goto & van de Geijn, "Anatomy of High-Performance Matrix Multiplication", 2008; tinygrad reaches the
// same shape with UPCAST on two output axes).
//
// After upcast_global, each trip of the reduce loop loads one row of w (NR = 16 or 32 contiguous
// floats) and one element of x, and does NR multiply-adds: two loads per two FLOPs, so the loop waits
// on memory. This pass takes the next global loop out (the rows i of x), moves it inside (loop
// interchange), and upcasts it by MR = 8 (when 8 does not divide M: 10, 9, or the largest divisor of M below 8):
//
//   for i in 0..M:                       for j0 in 0..N/NR:             (w's panel stays in cache)
//     for j0 in 0..N/NR:                   for i0 in 0..M/8:
//       acc[NR] = 0                  →       acc[8][NR] = 0
//       for k: a = x[i,k]                    for k: a0..a7 = x[8i0+0..7, k]    (8 loads)
//              acc[:] += a * w[k, j0·NR:]           w0..wNR = w[k, j0·NR:]     (NR loads, shared)
//                                                   acc[r][c] += a_r * w_c     (8·NR multiply-adds)
//
// Each w element loaded is now used 8 times and each x element NR times: 8 + NR loads feed 8·NR
// multiply-adds (with NR = 32: 40 loads, 256 FMAs, in 16 AVX-512 registers of accumulators). The
// interchange puts the loop that does not change w's panel innermost, so the panel (K·NR floats) is
// reused from cache by every group of rows.
//
// A short reduce (K ≤ 64) does few multiply-adds per output, and storing the output (and a fused epilogue's
// loads) is much of its work. When w's panels and a group's MR rows of x fit in a core's L2 ((N + MR)·K
// floats), such a kernel undoes the interchange after the upcast: the groups of rows outside, w's panels
// inside, each read again from L2 by every group. The tiles then store (and a fused epilogue reads) along the
// output's rows, from MR streams that the prefetchers follow, instead of in strips of NR columns in which
// every row is in a page of its own. (Caffe's LeNet's col2im input gradient (500, 50) @ (50, 4096), 8 MB of
// output: 2.6 -> 2.3 ms from cold caches; its weight gradient (500, 4096) @ (4096, 64), 1.2 MB a group, 2.4 ->
// 3.0 ms with the groups outside. A longer reduce keeps its panel in L1 with the groups inside: (256, 256) @
// (256, 256) 105 -> 99 GFLOP/s with them outside, (128, 784) @ (784, 512) 100 -> 90.)
//
// It applies when the two innermost global loops are perfectly nested (only index arithmetic, and loads of a
// row's own values, between them), the inner one was upcast (its reduce block has at least 8 accumulators)
// and some load in the reduce loop does not depend on the outer loop (that is the operand the tile reuses).
// When upcast_global unrolled the inner loop completely (N = 32: no loop is left for it) and the loop now
// innermost is one that the upcast operand's loads do not depend on, that loop is the tile's rows and is
// upcast where it is.
#include "opt/pass_manager.h"

namespace ts {
namespace {

using ir::Inst;
using ir::Op;
using ir::ValueId;

// the inner loop must already be a vector's worth of outputs: 8 floats, one AVX2 vector or half of AVX-512's (the
// C renderer writes a run of 8 as a 256-bit vector there too). With 16 on AVX-512, a depthwise 3x3's rows of 14 or 7
// (upcast by 8) went untiled, every row's taps one chain of multiply-adds (see one_vector_rows below)
constexpr int kMinAccumulators = 8;
constexpr int64_t kL2Bytes = int64_t{1} << 20;  // a core's L2 (AMD Zen 4: 1 MiB; Intel since Ice Lake: 1.25-2)
constexpr int64_t kShortReduce = 64;            // K up to this: the groups of rows go back outside (see above)
constexpr int64_t kMaxWholeRows = 12;           // M up to this that no factor below divides is tiled whole
constexpr int kRowOrder[] = {8, 10, 9, 7, 6, 5, 4, 3, 2};  // the rows row_factor tries, best first

}  // namespace

void register_tile(ir::Kernel& k) {
  const std::vector<Inst>& insts = k.insts;
  size_t outer = insts.size(), inner = insts.size();
  for (size_t i = 0; i < insts.size(); i++)
    if (insts[i].op == Op::Range && insts[i].arg == 1) {
      outer = inner;
      inner = i;
    }
  if (inner == insts.size() || insts[insts[inner].src[0]].op != Op::Const) return;
  const size_t inner_end = end_of_range(insts, inner);
  const std::vector<ReduceBlock> blocks = upcastable_body(insts, inner);
  // (one vector's worth on a target with narrower vectors: SSE's 4; see upcast_global)
  const int64_t min_accumulators = std::min<int64_t>(kMinAccumulators, k.target.vector_floats());
  if (blocks.size() != 1 || static_cast<int64_t>(blocks[0].range - blocks[0].first_acc) < min_accumulators) return;
  // The rows of the tile: a loop that the loads of the upcast operand do not depend on. Usually the
  // loop around the inner one; but when upcast_global unrolled its loop completely (N = 32) the inner
  // loop itself is such a loop, and is upcast where it is.
  auto reused_loads = [&](size_t loop) {
    std::vector<int8_t> memo(insts.size(), -1);
    int n = 0;
    for (size_t x = blocks[0].range + 1; x < blocks[0].end; x++)
      n += insts[x].op == Op::Load && !depends_on(insts, static_cast<ValueId>(x), static_cast<ValueId>(loop), memo);
    return n;
  };
  const int planned = k.plan.get(ir::AppliedOpt::RegisterTile);
  if (planned == 0) return;
  bool selects_on_loaded_bools = false;
  for (size_t x = blocks[0].range + 1; x < blocks[0].end; x++)
    selects_on_loaded_bools = selects_on_loaded_bools || (insts[x].op == Op::Where && insts[insts[x].src[0]].op == Op::Load);
  // The tile's accumulators stay in vector registers: each row holds ceil(NR / lanes) vectors, and a few
  // registers are left for w's vectors and x's broadcast (4). With NR = 32 on AVX-512 (32 registers of 16
  // floats) that is up to 14 rows; with NR = 16 on AVX2 (16 registers of 8 floats), 6 (BLIS's Haswell
  // micro-kernel is 6x16). A tile of 8 rows there spills: (1024, 1024) @ (1024, 1024) on Zen 3, 1 thread, 56
  // GFLOP/s with 8 x 16, 59 with 4 x 16; (100, 784) @ (784, 300) 46 with 4 x 16, 57 with 5 x 16.
  int64_t accumulators = 0;  // the row's: NR
  for (size_t x = blocks[0].first_acc; x < blocks[0].range; x++) accumulators += insts[x].op == Op::DefineAcc;
  const int64_t trips = reduce_trips(insts, blocks[0]);
  const int64_t vectors_per_row = (accumulators + k.target.vector_floats() - 1) / k.target.vector_floats();
  const int64_t max_rows = std::max<int64_t>(2, (static_cast<int64_t>(k.target.vector_registers) - 4) / vectors_per_row);
  // A one-hot's product upcast by its whole row (upcast_global: 16 vectors of AVX2) stays one row: its rows share
  // only the loads of the trips whose branch is taken, and two rows' accumulators spill (the embedding of 512
  // positions over an 11-token vocabulary, rows of 128, on Zen 3: 7.1 us as 2 x 128, 6.1 us untiled)
  if (selects_on_loaded_bools && max_rows * vectors_per_row > static_cast<int64_t>(k.target.vector_registers)) return;
  auto row_factor = [&](size_t loop) {
    const int64_t m = static_cast<int64_t>(insts[insts[loop].src[0]].value);
    auto legal = [&](int u) { return u >= 2 && u <= m && m % u == 0 && (inner_end - inner) * u <= kMaxUnrolledInsts; };
    if (planned != ir::OptPlan::kAuto) return legal(planned) ? planned : 0;
    // the heuristic: MR = 8 rows when 8 divides M; else 10 or 9 (NR = 32: 20 or 18 vector accumulators of
    // the 32 AVX-512 registers), else the most rows below 8 that divide M. A convolution into 6 channels
    // (LeNet-5's first layer) computes its 6 output rows from each load of the positions, not 3 times 2
    // (28 -> 60 GFLOP/s); a batch of 100 rows goes 10 at a time, not 5 ((100, 784) @ (784, 320): 99 -> 113
    // GFLOP/s; 5 rows feed 10 multiply-adds with 7 loads). Where 8 divides, 10 gained nothing ((80, 512) @
    // (512, 512): 365 us with 8, 392 with 10).
    for (int u : kRowOrder)
      if (u <= max_rows && legal(u)) return u;
    // A prime M up to 12 (a transformer's 11-token vocabulary: its head's weight gradient, (11, 512) @ (512,
    // 128)) is tiled whole: 11 rows of NR = 32 are 22 vector accumulators, where untiled each step of K loaded
    // two vectors of w for two multiply-adds (41 -> 13 us). Not a one-hot's product (an embedding's gradient,
    // a bool loaded per row and selected on): untiled, gcc turns each row's select into a branch that skips
    // the rows whose bool is false, 10 of 11 (6 us; tiled, 46).
    if (m <= std::min(kMaxWholeRows, max_rows) && legal(static_cast<int>(m)) && !selects_on_loaded_bools) return static_cast<int>(m);
    return 0;
  };
  // Rows that the tile's preferred height does not divide (M = 512 rows on AVX2, whose tile is 6 x 16) are
  // padded to a multiple of it, the extra rows masked (pad_loop, PADTO's rewrite), instead of falling back to
  // a lower tile that divides M (4 x 16: 8 accumulators, too few to hide the multiply-add's latency).
  // split_index_set then runs every group but the last unmasked, and the last one computes the rows that are
  // left (BLIS's edge case: a partial micro-tile). Measured on Zen 3 (AVX2, 1 thread; the kernel alone): (512,
  // 128) @ (128, 512) 49 -> 62 GFLOP/s (78 with the FMA builtins, see the C renderer). Only while the wasted rows
  // are at most an eighth of M and the groups stay inside another global loop (split_index_set leaves the
  // outermost one whole for the threads), or the kernel runs on one thread anyway; not for a one-hot's product
  // (see row_factor), nor on a device with workgroups (split_index_set leaves their kernels alone, and every
  // group would keep its masks). Returns whether it padded `loop` (and tiled the padded kernel).
  int preferred = 0;
  for (int u : kRowOrder)
    if (!preferred && u <= max_rows) preferred = u;
  auto pad_rows = [&](size_t loop, bool groups_go_outside) {
    const int64_t m = static_cast<int64_t>(insts[insts[loop].src[0]].value);
    if (planned != ir::OptPlan::kAuto || !preferred || selects_on_loaded_bools || m <= preferred || k.target.workgroups() ||
        row_factor(loop) >= preferred - 1 || (inner_end - inner) * static_cast<size_t>(preferred) > kMaxUnrolledInsts)
      return false;
    const int64_t padded = (m + preferred - 1) / preferred * preferred;
    if ((padded - m) * 8 > m || (groups_go_outside && loop_work(k) >= kMinParallelWork) || !pad_loop(k, loop, preferred))
      return false;
    k.opts.push_back({ir::AppliedOpt::Padto, preferred});
    register_tile(k);  // the same kernel with rows a multiple of the preferred ones: row_factor takes them
    return true;
  };
  // A row of one vector whose rows reuse no load but a broadcast (a depthwise convolution of a 7x7 map: each output
  // row one vector of 8, its weight the one load the rows share) when no loop around the rows reuses any: the rows
  // are tiled where they are, for the tile's independent accumulators; one row at a time ran its taps' multiply-adds
  // as one chain (32 x 64 x 7 x 7, 3x3: 0.055 -> 0.043 ms alone on Zen 3)
  const int inner_reuse = reused_loads(inner);
  const bool one_vector_rows = vectors_per_row == 1 && inner_reuse > 0 && (outer == insts.size() || reused_loads(outer) == 0);
  if (inner_reuse >= min_accumulators || one_vector_rows) {
    // the rows loop is the innermost global loop: another one around it keeps the threads' loop whole
    const bool enclosed = outer != insts.size() && end_of_range(insts, outer) > inner_end;
    if (pad_rows(inner, !enclosed)) return;
    if (const int mr = row_factor(inner)) {
      upcast_loop(k, inner, mr, /*side_by_side=*/false);
      k.opts.push_back({ir::AppliedOpt::RegisterTile, mr});
    }
    return;
  }
  if (outer == insts.size() || insts[insts[outer].src[0]].op != Op::Const) return;
  const size_t outer_end = end_of_range(insts, outer);
  if (outer_end != inner_end + 1) return;  // not perfectly nested: something after the inner loop
  // Between the loops only index arithmetic, and loads of a row's own values from buffers the kernel does not
  // store to (a softmax's 1 / sum that scales row i of P in P @ V): they move into the rows' loop with the index
  // arithmetic. (d128's attention P @ V, r_16_4_32_32_32, was left one row of 16 columns: 2 accumulators, the
  // multiply-add's latency exposed: 114 -> 86 us alone on Zen 3; the 1 / sum multiplies x in the loop, 62 us
  // without it.)
  auto stored_to = [&](ValueId buffer) {
    return std::any_of(insts.begin(), insts.end(), [&](const Inst& in) { return in.op == Op::Store && in.src[0] == buffer; });
  };
  for (size_t i = outer + 1; i < inner; i++) {
    if (insts[i].op == Op::Load && !stored_to(insts[i].src[0])) continue;
    if (!is_alu(insts[i].op) && insts[i].op != Op::Const) return;
  }
  if (reused_loads(outer) == 0) return;
  const int64_t m = static_cast<int64_t>(insts[insts[outer].src[0]].value);
  // What one group of rows reads (assuming 4-byte elements): the operand the rows share, N outputs (the inner
  // loop's trips × its accumulators) × K, and the group's own MR rows of K
  auto group_bytes = [&](int64_t mr) {
    return (static_cast<int64_t>(insts[insts[inner].src[0]].value) * accumulators + mr) * trips * 4;
  };
  // step 3 below: the groups of rows go back outside (a short reduce whose panels fit in L2)
  // (and a loop of them is left: mr < rows)
  auto groups_outside = [&](int64_t mr, int64_t rows) {
    return trips <= kShortReduce && group_bytes(mr) < kL2Bytes && mr < rows;
  };
  if (pad_rows(outer, groups_outside(preferred, (m + preferred - 1) / preferred * preferred))) return;
  const int mr = row_factor(outer);
  if (!mr) return;
  const bool rows_outside = groups_outside(mr, m);  // decided before the loops move

  // 1. loop interchange: (constants), RANGE inner, RANGE outer, (index arithmetic), inner's body,
  //    END outer, END inner. Constants between the loops move up: inner's bound may be one of them.
  std::vector<ValueId> order;
  for (size_t i = 0; i < outer; i++) order.push_back(static_cast<ValueId>(i));
  for (size_t i = outer + 1; i < inner; i++)
    if (insts[i].op == Op::Const) order.push_back(static_cast<ValueId>(i));
  order.push_back(static_cast<ValueId>(inner));
  const size_t new_outer = order.size();
  order.push_back(static_cast<ValueId>(outer));
  for (size_t i = outer + 1; i < inner; i++)
    if (insts[i].op != Op::Const) order.push_back(static_cast<ValueId>(i));
  for (size_t i = inner + 1; i < inner_end; i++) order.push_back(static_cast<ValueId>(i));
  order.push_back(static_cast<ValueId>(outer_end));
  order.push_back(static_cast<ValueId>(inner_end));
  for (size_t i = outer_end + 1; i < insts.size(); i++) order.push_back(static_cast<ValueId>(i));
  reorder_instructions(k, order);
  // 2. upcast the loop that is now innermost; each row's statements stay together (row r: its NR
  //    multiply-adds over contiguous w), which is the order gcc's SLP vectorizer packs into vectors
  upcast_loop(k, new_outer, mr, /*side_by_side=*/false);
  k.opts.push_back({ir::AppliedOpt::RegisterTile, mr});
  // 3. the groups of rows back outside when w's panels fit in L2 (and a loop of them is left)
  if (rows_outside) {
    const std::vector<size_t> loops = global_loops(k.insts);
    interchange(k, loops[loops.size() - 2], loops.back());
  }
}

}  // namespace ts
