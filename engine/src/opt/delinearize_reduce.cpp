// DELINEARIZE a reduce loop: a reduce over several axes merged into one loop (a convolution's input channels
// and taps, k = c·25 + ky·5 + kx for a 5×5 kernel) whose index is taken apart again by division and modulo
// (the input is read at c·1152 + ky·36 + kx: k / 25, k / 5 % 5, k % 5) runs as one nested loop per axis,
//
//   for k in 0..75:                         for c in 0..3:
//     x[(k / 25)·1152 + (k / 5 % 5)·36   →     for ky in 0..5:
//       + k % 5] · w[k]                           for kx in 0..5:  x[c·1152 + ky·36 + kx] · w[c·25 + ky·5 + kx]
//
// so that every index is a sum of loop indices times constants again, which the C compiler strength-reduces to
// pointer increments. The merged loop is what the earlier passes tile (one reduce loop for REGISTER_TILE and
// UPCAST_GLOBAL); this pass runs after them and the simplify pass, on the reduce loop of their kernels. The
// loop's index becomes Σ q_i·d_i over the new loops (d_i: the divisors the index is divided by, each dividing
// the next) and the pass then runs simplify again, which folds the divisions away (div/mod of sums of multiples,
// Builder::divide_terms). The accumulators and the order of the multiply-adds are unchanged, so are the results.
// Measured on Zen 3 (AVX2, 1 thread, alone): LeNet-5's first convolution r_32_6_28_32_75 (6 × 16 tile, K = 75)
// 420 -> 263 us: per step of k the divisions had cost about as many instructions as the 12 multiply-adds.
//
// Elementwise kernels (no accumulator) get the same for any loop but the outermost output loop (the one the
// C device's threads split): a copy of attention's heads (B, H, T, D) back into rows (B, T, H·D) loops over
// H·D and reads the input at j / D · T·D + j % D, which gcc left scalar (16 x 4 x 32 x 32 alone, on this
// session's Xeon: 0.065 -> 0.016 ms). In a concatenation's kernel split_index_set's loop per piece starts its
// index at the piece's offset (j + 128), and a division of j + 128 by 32 splits the same way: that is why this
// pass runs after simplify, which has folded split_index_set's clamps and comparisons into such sums by then
// (the gradient of d128's qkv projection, E_16_32_384: 0.16 -> 0.044 ms in the training step; the forty-fifth
// session).
#include <algorithm>

#include "opt/pass_manager.h"

namespace ts {
namespace {

using ir::Inst;
using ir::Op;
using ir::ValueId;

constexpr size_t kMaxAxes = 4;  // loops one merged loop may become

// The constant c when value `v` is `r + c` (c >= 0; split_index_set's loops start their index at the range's
// first value, j + 128, which simplify folds into the division once r is split), 0 when v is r itself, -1
// otherwise.
int64_t offset_from(const std::vector<Inst>& insts, ValueId v, ValueId r) {
  if (v == r) return 0;
  const Inst& in = insts[v];
  if (in.op != Op::Add) return -1;
  for (int s = 0; s < 2; s++)
    if (in.src[s] == r && insts[in.src[1 - s]].op == Op::Const && insts[in.src[1 - s]].value >= 0)
      return static_cast<int64_t>(insts[in.src[1 - s]].value);
  return -1;
}

// The divisors of loop `r`'s index (its IDIV and MOD users by positive constants, of the index itself or of the
// index plus a multiple of the divisor), sorted, each dividing the next and the last dividing the trip count;
// empty when there are none or they do not chain.
std::vector<int64_t> divisors(const std::vector<Inst>& insts, size_t r, int64_t trips) {
  std::vector<int64_t> ds;
  for (size_t i = r + 1; i < insts.size(); i++) {
    const Inst& in = insts[i];
    if (in.op != Op::IDiv && in.op != Op::Mod) continue;
    const int64_t offset = offset_from(insts, in.src[0], static_cast<ValueId>(r));
    if (offset < 0) continue;
    const Inst& d = insts[in.src[1]];
    if (d.op != Op::Const || d.value <= 1 || offset % static_cast<int64_t>(d.value) != 0) return {};
    ds.push_back(static_cast<int64_t>(d.value));
  }
  std::sort(ds.begin(), ds.end());
  ds.erase(std::unique(ds.begin(), ds.end()), ds.end());
  for (size_t j = 0; j < ds.size(); j++)
    if ((j + 1 < ds.size() ? ds[j + 1] : trips) % ds[j] != 0 || ds[j] >= trips) return {};
  if (ds.size() + 1 > kMaxAxes) return {};
  return ds;
}

}  // namespace

void delinearize_reduce(ir::Kernel& k) {
  if (k.target.workgroups()) return;  // a GPU's loops are left as the GPU views show them
  const bool tiled = has_applied(k, ir::AppliedOpt::RegisterTile) || has_applied(k, ir::AppliedOpt::UpcastGlobal);
  const bool elementwise =
      std::none_of(k.insts.begin(), k.insts.end(), [](const Inst& in) { return in.op == Op::DefineAcc; });
  if (!tiled && !elementwise) return;
  bool changed = false;
  for (size_t r = 0; r < k.insts.size(); r++) {
    const std::vector<Inst>& insts = k.insts;
    const Inst& range = insts[r];
    if (range.op != Op::Range || insts[range.src[0]].op != Op::Const) continue;
    // tiled: its reduce loop; elementwise: any loop but the outermost output loop, which the C device's threads
    // split (TS_LO / TS_HI)
    if (tiled ? range.arg != ir::kReduceLoop
              : range.arg == ir::kLocalLoop || (range.arg == ir::kGlobalLoop && loop_depth(insts, r) == 0))
      continue;
    const int64_t trips = static_cast<int64_t>(insts[range.src[0]].value);
    const std::vector<int64_t> ds = divisors(insts, r, trips);
    if (ds.empty()) continue;
    const size_t end = end_of_range(insts, r);
    // loop i (innermost first) steps the old index by d_i (d_0 = 1) and runs d_(i+1) / d_i trips (the outermost:
    // trips / d_last)
    std::vector<int64_t> strides{1};
    for (int64_t d : ds) strides.push_back(d);
    Rewrite w(insts);
    for (size_t i = 0; i < r; i++) w.copy(i);
    auto constant = [&](int64_t v) { return w.emit(make_inst(Op::Const, DType::Int32, {}, 0, static_cast<double>(v))); };
    std::vector<ValueId> loops(strides.size());  // innermost first
    for (size_t j = strides.size(); j-- > 0;) {
      const int64_t extent = (j + 1 < strides.size() ? strides[j + 1] : trips) / strides[j];
      loops[j] = w.emit(make_inst(Op::Range, DType::Int32, {constant(extent)}, range.arg));
    }
    // the old index: Σ q_j · d_j
    ValueId index = loops[0];
    for (size_t j = 1; j < loops.size(); j++) {
      const ValueId term = w.emit(make_inst(Op::Mul, DType::Int32, {loops[j], constant(strides[j])}));
      index = w.emit(make_inst(Op::Add, DType::Int32, {index, term}));
    }
    w.remap[r] = index;
    for (size_t i = r + 1; i < end; i++) w.copy(i);
    for (ValueId loop : loops) w.emit(make_inst(Op::EndRange, DType::Int32, {loop}));
    // (the old loop's END_RANGE is not copied: nothing reads it)
    for (size_t i = end + 1; i < insts.size(); i++) w.copy(i);
    k.insts = std::move(w.out);
    changed = true;
  }
  if (changed) simplify(k);  // folds the divisions of Σ q_j·d_j (and of the index plus a multiple of d_j)
}

}  // namespace ts
