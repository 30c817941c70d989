// PADTO (tinygrad's OptOps.PADTO): the loop UPCAST_GLOBAL is for (upcast_global_loop), N iterations, runs
// P = ceil(N/p)·p iterations instead, and the P - N extra ones are masked. An UPCAST needs a trip count its
// amount divides; with the loop padded, UPCAST_GLOBAL (and, after it, REGISTER_TILE) applies to widths that the
// vector widths do not divide: 10, 84, 120, 785 (the MLP's 10-wide output layer: 16 accumulators). Where the
// padded iterations are known to be real (simplify folds `16·j0 + c < 200` to true for c < 8), the mask goes.
//
//   for j in 0..10:                            for j in 0..16:
//     acc = 0                                    valid = j < 10
//     for k in 0..K:                     →       acc = 0
//       acc += x[k] * w[10k + j]                 for k in 0..K:
//     out[j] = acc                                 acc += x[k] * LOAD(w, 10k + j, gate: valid)
//                                                STORE(out, j, acc, gate: valid)
//
// The mask: every load whose index depends on the loop (directly, or through another load) is gated with
// `valid` (a gated load reads nothing and gives 0), and every store in the loop is gated (STORE's src3), so a
// padded iteration reads and writes nothing outside the buffers. Loads that do not depend on the loop (x[k]
// above) read what the loop read before and stay as they are.
//
// The default (kAuto) pads the columns of a matmul-like reduce to a multiple of 16 (matmul_like, below), a row
// of 9 to 15 to 16 and one of 5 to 7 inside other rows to 8 (kShortRowPad, below), any other width 16 does not
// divide to 16 where split_index_set will run
// the padded blocks unmasked (a column sum over 4096 rows of 100: 91 → 31 us warm, 473 → 220 us cold; 500
// columns of 64 rows 4.1 → 1.4 us), and pads to 16 where the heuristics
// would upcast nothing else (no 4, 8, 16 or 32 divides N,
// so the loop stays scalar, reading w down its columns) and the loop has at least 128 iterations, with
// UPCAST_GLOBAL left to its heuristic. Measured on C (1 thread, a loaded 2-core AMD EPYC VM; x (M, K) @ w (K, N),
// median launch, M = 128 or 64, K = 128-256): N = 255: 2.86 → 0.39 ms (7.4×), 333: 1.53 → 0.40 ms (3.9×), 785:
// 10.9 → 4.0 ms (2.7×), 1001: 7.9 → 2.5 ms (3.2×). Not below 128 (N = 10, 65, 67, 97: 0.94-1.1×). Where an upcast
// of 4 or 8 applies already (N = 72, 100, 200, 1000) padding was once slower (0.74-0.90×: gcc compiles the
// masked loads to branches), until REGISTER_TILE applied to padded loops: a matmul-like kernel gains 4× now.
//
// A requested amount p (OptPlan) is applied when it is legal:
//   - p ≥ 2, N a constant that p does not divide (otherwise there is nothing to pad);
//   - the padding adds less work than the loop has (P < 2N): 10 → 16 is fine, 5 → 16 is not;
//   - a padded iteration can change nothing outside itself: every ASSIGN in the loop updates an accumulator
//     the loop defines;
//   - integer division (IDIV, MOD) in the loop is by constants only: a masked load gives 0, and a 0 divisor is
//     undefined behaviour in C (and an error in the interpreter).
#include "opt/pass_manager.h"

namespace ts {

using ir::Inst;
using ir::Op;
using ir::ValueId;

namespace {
constexpr int kAutoPad = 16;            // the default's amount
constexpr int64_t kAutoMinTrips = 128;  // and the shortest loop it pads
// A short row of 9 to 15 (attention's 12 keys, a 10-class output layer) is padded to 16 and upcast by 8
// (upcast_global takes the amount from the padding): measured on C (1 thread, Zen 4; kernel time, the
// operand copies included), with the default (upcast 4 for 12, none for 10 and 14) → padded:
// q @ kᵀ (32, 4, 12, 8) 26.7 → 13.4 us, x (128, 64) @ w (64, N) for N = 12: 17.2 → 15.2, 10: 28.7 → 20.9,
// 14: 38.9 → 16.5 us. Padded to 16 and upcast by 16 it was slower than the default for 12 (34.6 us).
// A row of 5 to 7 inside other rows (a 7x7 feature map's) is padded to 8, one vector whose lanes past the row are
// masked off (CRenderer::vector_accumulators' partial vectors): a depthwise 3x3 of 32 x 32 x 7 x 7, forward 0.187
// -> 0.056 ms, with both gradients 0.84 -> 0.135 ms (Zen 3, 1 thread). A lone row of them (5 outputs of a long
// reduce) is left to upcast_reduce.
constexpr int kShortRowPad = 8;

// A matmul-like reduce: global loop g (the output columns j) lies inside another global loop (the rows),
// and its reduce block reads one operand that moves with j (w[k, j]) and one that does not (x[i, k]).
// REGISTER_TILE then applies to the padded loop, which is what the padding is for: a width 16 does not
// divide (72, 84, 100, 120, 200, 1000) otherwise gets an upcast of 4 or 8 and no tile. Measured on C
// (1 thread, Zen 4; x (M, K) @ w (K, N), the kernel alone): (128, 256) @ N = 72: 265 → 67 us, 100: 767 →
// 181, 200: 734 → 187, 1000: 3756 → 913; (64, 120) @ 84: 127 → 26, (64, 400) @ 120: 381 → 88, (128, 784)
// @ 120: 1561 → 297 us. A column sum (no operand that stays) got slower padded while its padded lanes were
// masked in every block (N = 100, 200, 1000 rows of 4096: 83 → 106, 86 → 152, 107 → 180 us); it is padded only
// where split_index_set will run its blocks unmasked (split_will_unmask, below).
// Global loop g lies inside another global loop (the rows around a row of outputs)
bool inside_rows(const std::vector<Inst>& insts, size_t g) {
  const size_t g_end = end_of_range(insts, g);
  for (size_t i = 0; i < g; i++)
    if (insts[i].op == Op::Range && insts[i].arg == ir::kGlobalLoop && end_of_range(insts, i) > g_end) return true;
  return false;
}

bool matmul_like(const std::vector<Inst>& insts, size_t g) {
  if (!inside_rows(insts, g)) return false;
  std::vector<int8_t> memo(insts.size(), -1);
  for (const ReduceBlock& b : upcastable_body(insts, g)) {
    bool moves = false, stays = false;
    for (size_t x = b.range + 1; x < b.end; x++) {
      if (insts[x].op != Op::Load) continue;
      (depends_on(insts, static_cast<ValueId>(x), static_cast<ValueId>(g), memo) ? moves : stays) = true;
    }
    if (moves && stays) return true;
  }
  return false;
}
// Whether split_index_set will split padded loop g at its last block (split_padded_tile, split_keeps_threads).
// Then the padded blocks but the last run unmasked, and a column sum padded to 16 (a bias gradient over 300 or
// 500 columns: otherwise upcast by 4) loses nothing to the masks that made it slower padded. The loop must
// compare its index nowhere yet (a padded view's mask along it could keep split_padded_tile from splitting, and
// the masked blocks would be slower than the plain upcast).
bool split_will_unmask(const std::vector<Inst>& insts, const ir::Kernel& k, size_t g) {
  if (k.target.workgroups()) return false;
  std::vector<int8_t> memo(insts.size(), -1);
  for (size_t i = g + 1, g_end = end_of_range(insts, g); i < g_end; i++)
    if (insts[i].op == Op::CmpLt && insts[insts[i].src[0]].dtype == DType::Int32 &&
        depends_on(insts, static_cast<ValueId>(i), static_cast<ValueId>(g), memo))
      return false;
  return split_keeps_threads(k, g);
}
}  // namespace

bool pad_loop(ir::Kernel& k, size_t g, int64_t p) {
  const std::vector<Inst> old = k.insts;
  if (old[old[g].src[0]].op != Op::Const) return false;
  const int64_t n = static_cast<int64_t>(old[old[g].src[0]].value);
  const int64_t padded = (n + p - 1) / p * p;
  if (n % p == 0 || padded >= 2 * n) return false;
  const size_t g_end = end_of_range(old, g);
  for (size_t x = g + 1; x < g_end; x++) {
    const Inst& in = old[x];
    if (in.op == Op::Assign && in.src[0] < g) return false;  // an accumulator from outside the loop
    if ((in.op == Op::IDiv || in.op == Op::Mod) && old[in.src[1]].op != Op::Const) return false;
  }
  std::vector<int8_t> memo(old.size(), -1);
  std::vector<bool> gate(old.size(), false);
  for (size_t x = g + 1; x < g_end; x++)
    gate[x] = old[x].op == Op::Store || (old[x].op == Op::Load && depends_on(old, static_cast<ValueId>(x), static_cast<ValueId>(g), memo));

  std::vector<Inst> out;
  std::vector<ValueId> remap(old.size(), ir::kNone);
  auto emit = [&](const Inst& in) {
    out.push_back(in);
    return static_cast<ValueId>(out.size() - 1);
  };
  auto int_const = [&](int64_t v) { return emit(Inst{Op::Const, DType::Int32, 0, {ir::kNone, ir::kNone, ir::kNone, ir::kNone}, 0, static_cast<double>(v)}); };
  ValueId valid = ir::kNone;
  for (size_t i = 0; i < old.size(); i++) {
    Inst in = old[i];
    for (int s = 0; s < in.num_src; s++) in.src[s] = remap[in.src[s]];
    if (i == g) {
      const ValueId bound = int_const(padded), real = int_const(n);
      in.src[0] = bound;
      remap[i] = emit(in);
      valid = emit(Inst{Op::CmpLt, DType::Bool, 2, {remap[i], real, ir::kNone, ir::kNone}, 0, 0});
      continue;
    }
    if (gate[i]) {
      const int slot = in.op == Op::Load ? 2 : 3;  // LOAD's gate is src2, STORE's src3
      if (in.num_src > slot) {  // gated already (a padded view's load): both must hold
        in.src[slot] = emit(Inst{Op::And, DType::Bool, 2, {in.src[slot], valid, ir::kNone, ir::kNone}, 0, 0});
      } else {
        in.src[slot] = valid;
        in.num_src = static_cast<uint8_t>(slot + 1);
      }
    }
    remap[i] = emit(in);
  }
  k.insts = std::move(out);
  return true;
}

void padto(ir::Kernel& k) {
  int p = k.plan.get(ir::AppliedOpt::Padto);
  if (p != ir::OptPlan::kAuto && p < 2) return;
  const std::vector<Inst> old = k.insts;
  for (const Inst& in : old)  // a workgroup kernel (TILE, GROUP) keeps its loops as its lanes need them
    if (in.op == Op::DefineLocal || (in.op == Op::Range && in.arg == ir::kLocalLoop)) return;
  const size_t g = upcast_global_loop(old, rows_every_other(k.target));
  if (g == old.size()) return;
  const int64_t n = static_cast<int64_t>(old[old[g].src[0]].value);
  if (p == ir::OptPlan::kAuto) {  // the default: see above
    const bool upcast_auto = k.plan.get(ir::AppliedOpt::UpcastGlobal) == ir::OptPlan::kAuto;
    if (upcast_auto && n % kAutoPad != 0 && n > kAutoPad && matmul_like(old, g)) p = kAutoPad;
    else if (upcast_auto && n % 4 != 0 && n >= kAutoMinTrips) p = kAutoPad;
    else if (upcast_auto && n > kShortRowPad && n < 2 * kShortRowPad) p = kShortRowPad;
    else if (upcast_auto && n > kShortRowPad / 2 && n < kShortRowPad && inside_rows(old, g)) p = kShortRowPad;
    else if (upcast_auto && n % kAutoPad != 0 && n > kAutoPad && split_will_unmask(old, k, g)) p = kAutoPad;
    else return;
  }
  if (pad_loop(k, g, p)) k.opts.push_back({ir::AppliedOpt::Padto, p});
}

}  // namespace ts
