// Columns as lanes: a column sum — a reduction down the rows of a matrix, each output a column, the lanes of a
// row side by side in memory (a bias's gradient summed over the batch, a LayerNorm weight's over batch and
// sequence) — walks the rows once, each row from its first column to its last, with every column's accumulator
// in a DEFINE_LOCAL array (reduce_lanes_in_local_memory, the rewrite rows_as_lanes uses):
//
//   for c0 in 0..N/32:                              for r in 0..R:
//     acc0..acc31 = 0                                 for c in 0..N:                     (vectorized)
//     for r in 0..R:                        →           acc[c] += x[r, c]
//       acc0 += x[r, 32·c0] … acc31 += …            for c in 0..N: out[c] = acc[c]
//     out[32·c0 + 0..31] = acc0..acc31
//
// upcast_global's form (left) reads 32 columns of every row per pass, so N = 128 columns make 4 passes down
// the rows, each taking 128 bytes from every 512-byte row: a strided walk that the hardware prefetchers follow
// slower than a stream, from memory or L3 four times over the same pages. The lanes' form reads each row once,
// in order. Measured on C (1 thread, Zen 4), alone, a d128 transformer's LayerNorm weight gradient (512 rows of
// 128, the normalized input times the output gradient summed): in the caches 6.2 -> 4.9 us, its inputs
// evicted (a 64 MiB write in between) 51 -> 33 us; a plain column sum of the same shape 4.2 -> 3.0 and 29 ->
// 24 us. On a GPU the same IR is one workgroup per N columns, a thread per column, each walking the rows.
//
// Recorded as LANES(n). Applies on devices without workgroups (C, INTERP), by default (a plan's LANES=0 turns it
// off, LANES=n asks for n lanes; an UPCAST_GLOBAL asked for without LANES is upcast_global's) to the innermost
// global loop when: its bound is a multiple of 16 above 32 (at most 32
// columns upcast_global covers in one pass), taken 256 columns at a time at most; its body is one reduce block
// with one float32 or int32 accumulator and one reduce loop of at least 16 rows; every load that moves with
// the columns moves by one element per column and by at least a row of them per trip of the reduce loop (the
// lanes are a row's neighbours), and moves with every global loop around it too (a matmul reuses its weight
// row across the rows of x: that is register_tile's); and the kernel is too small for the C device to split
// over threads (the lanes' form leaves one trip of the global loop when N <= 256).
#include <cstdlib>

#include "opt/pass_manager.h"

namespace ts {

namespace {
using ir::Inst;
using ir::Op;
using ir::ValueId;

constexpr int64_t kUpcastCovers = 32;  // upcast_global's widest upcast: up to this many columns in one pass
constexpr int64_t kMinRows = 16;

// The columns taken side by side: all of them up to kMaxLanes, else the widest multiple of 16 that divides n
int64_t lane_count(int64_t n) {
  for (int64_t l = std::min(n, kMaxLanes) / 16 * 16; l > kUpcastCovers; l -= 16)
    if (n % l == 0) return l;
  return 0;
}
}  // namespace

void columns_as_lanes(ir::Kernel& k) {
  const int asked = k.plan.get(ir::AppliedOpt::Lanes);  // LANES: kAuto (the rule above), 0 (off) or the lanes
  if (k.target.workgroups() || asked == 0) return;
  if (asked == ir::OptPlan::kAuto && k.plan.get(ir::AppliedOpt::UpcastGlobal) != ir::OptPlan::kAuto) return;
  const std::vector<Inst>& insts = k.insts;
  for (const Inst& in : insts)
    if (in.op == Op::DefineLocal || (in.op == Op::Range && in.arg == ir::kLocalLoop)) return;
  const std::vector<size_t> loops = global_loops(insts);
  if (loops.empty()) return;
  const size_t g = loops.back();
  if (insts[insts[g].src[0]].op != Op::Const) return;
  const int64_t n = static_cast<int64_t>(insts[insts[g].src[0]].value);
  const bool automatic = asked == ir::OptPlan::kAuto;
  const int64_t lanes = !automatic ? (asked <= kMaxLanes && n % asked == 0 ? asked : 0)
                                   : (n > kUpcastCovers && n % 16 == 0 ? lane_count(n) : 0);
  if (lanes == 0) return;
  if (automatic && loops.size() == 1 && loop_work(k) >= kMinParallelWork) return;  // the C device's threads split g
  const std::vector<ReduceBlock> blocks = upcastable_body(insts, g);
  if (blocks.size() != 1) return;
  const ReduceBlock& b = blocks[0];
  const DType acc_type = insts[b.first_acc].dtype;
  if (acc_type != DType::Float32 && acc_type != DType::Int32) return;
  for (size_t i = b.first_acc + 1; i < b.range; i++)
    if (insts[i].op == Op::DefineAcc) return;
  const Inst& rows = insts[insts[b.range].src[0]];
  if (rows.op != Op::Const || rows.value < kMinRows) return;
  for (size_t i = b.range + 1; i < b.end; i++)
    if (insts[i].op == Op::Range || (insts[i].op == Op::Assign && i + 1 != b.end)) return;
  if (insts[b.end - 1].op != Op::Assign) return;
  const size_t g_end = end_of_range(insts, g);
  for (size_t i = g + 1; i < b.range; i++)
    if (insts[i].op == Op::Store) return;

  const ValueId col = static_cast<ValueId>(g), row = static_cast<ValueId>(b.range);
  std::vector<int8_t> memo_col(insts.size(), -1), memo_row(insts.size(), -1);
  std::vector<std::vector<int8_t>> memo_outer(loops.size() - 1, std::vector<int8_t>(insts.size(), -1));
  for (size_t i = g + 1; i < g_end; i++) {
    if (insts[i].op != Op::Load || !depends_on(insts, static_cast<ValueId>(i), col, memo_col)) continue;
    const ValueId at = insts[i].src[1];
    auto index = [&](ValueId var, int64_t v) { return eval_index(insts, at, var, v); };
    // one element per column across the lanes (checked at both ends: no wrap of a div or mod in between)
    const int64_t base = index(col, 0);
    if (index(col, 1) - base != 1 || index(col, lanes - 1) - base != lanes - 1 || index(col, n - 1) - base != n - 1) return;
    if (i > b.range && i < b.end && depends_on(insts, static_cast<ValueId>(i), row, memo_row) &&
        std::abs(index(row, 1) - index(row, 0)) < n)
      return;  // the reduce walks along the columns' row: not a column sum
    for (size_t o = 0; o + 1 < loops.size(); o++)
      if (!depends_on(insts, static_cast<ValueId>(i), static_cast<ValueId>(loops[o]), memo_outer[o])) return;
  }
  reduce_lanes_in_local_memory(k, g, {b}, lanes);
}

}  // namespace ts
