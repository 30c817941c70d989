// TRANSPOSE_TILE (C): a copy that transposes — x.T.contiguous(), a Linear's weight Wᵀ packed (and padded)
// for the matmul that reads it — runs in 8×8 tiles. With b the loop along which the store is contiguous (the
// input's rows) and a the one along which the load is (the input's columns), the loop nest
//
//   for a in 0..A:                       for b0 in 0..B/16:                (the input's rows outside, if 8 divides B;
//                                                                            the output's, a0, where 16 divides both
//                                                                            or B >= 64: see below)
//     for b in 0..B:               →       for a0 in 0..A/8:
//       out[a*S + b] = in[b*T + a]            out[(8a0+j)*S + 16b0+i] = in[(16b0+i)*T + 8a0+j]   i < 16, j < 8
//                                          [for a in 8*(A/8)..A: for i < 16: the element as before]  (the tail)
//
// is written as 64 loads and 64 stores per tile: eight rows of eight contiguous inputs, eight rows of eight
// contiguous outputs. The C renderer writes each tile as what it is, eight vector loads, an in-register
// transpose (24 shuffles; ts_transpose_8x8 in the C prelude) and eight vector stores (c_renderer.cpp); gcc
// left the element-by-element form scalar in every loop order. Measured on C (1 thread, Zen 4, the copy alone
// with its data in the caches): a 300×784 weight transposed 90 → 35 µs, (50, 4096) 120 → 50 µs, (256, 512)
// 23–30 → 20–22 µs; read from memory (as a step's weight is, written by the optimizer a step earlier) about the
// same as before, within this machine's noise. (The cache- and register-blocked transpose, as BLAS libraries
// pack their panels.)
//
// A weight packed into panels for the matmul (Tensor::matmul_packed: W (N, K) read as Wᵀ into (N/NR, K, NR))
// is a transpose per panel: the panels' loop is a batch loop around the two the tiles take, its offset a
// constant per tile (the 784×512 weight of an MLP's first layer, AVX2's panels of 16: 0.09-0.17 → 0.06 ms).
//
// A copy that also computes (a convolution's NHWC output + bias, ReLU, stored NCHW: an elementwise function of
// the moved element and of other loads, inside a batch loop) copies the moved elements in tiles unchanged, then
// runs the old loop nest again over the output, reading each element back in place, contiguous, and storing the
// function of it (gcc left the strided form scalar).
//
// It applies to an elementwise kernel of two global loops (inside at most one batch loop), perfectly nested,
// whose only load and store are a float32 element moved unchanged (or, as above, stored as a function of it):
// the load contiguous along one loop, the store along the other, both indices affine (no division), the load
// gated at most by `b < N` (the rows of a padded Wᵀ past the weight's are zeros; not a gate that depends on the
// batch loop: a padded weight's last panel, which split_index_set splits off instead). One of the two loops must
// divide by 8, the other must have at least 8 trips; the tiles' loop over the divisible axis stays outermost (the
// C device's threads split it, or the batch loop around it). Output rows a multiple of 4 KiB apart are left to
// upcast_global, and a copy that computes into output rows of one vector register or less to gcc (see below).
#include <functional>

#include "opt/pass_manager.h"

namespace ts {
namespace {

using ir::Inst;
using ir::Op;
using ir::ValueId;

constexpr int kTile = 8;  // a tile edge: 8 floats, one 256-bit vector

// Whether `v` is index arithmetic the pass can follow: constants, the two loops, ADD, and MUL by a constant
// (so an index is affine in the loops). Values defined before the first of the two loops (a batch loop's
// index and its arithmetic) are constants here: an offset for the whole tile.
bool affine(const std::vector<Inst>& insts, ValueId v, ValueId a, ValueId b) {
  const Inst& in = insts[v];
  if (v == a || v == b || in.op == Op::Const || v < std::min(a, b)) return true;
  if (in.op == Op::Add) return affine(insts, in.src[0], a, b) && affine(insts, in.src[1], a, b);
  if (in.op == Op::Mul)
    return (insts[in.src[0]].op == Op::Const && affine(insts, in.src[1], a, b)) ||
           (insts[in.src[1]].op == Op::Const && affine(insts, in.src[0], a, b));
  return false;
}

// The value of affine index `v` with loop `a` = x and loop `b` = y (and a batch loop's values taken as 0: the
// differences along a or b are what the pass reads).
int64_t at(const std::vector<Inst>& insts, ValueId v, ValueId a, ValueId b, int64_t x, int64_t y) {
  const Inst& in = insts[v];
  if (v == a) return x;
  if (v == b) return y;
  if (in.op == Op::Const) return static_cast<int64_t>(in.value);
  if (v < std::min(a, b)) return 0;
  const int64_t l = at(insts, in.src[0], a, b, x, y), r = at(insts, in.src[1], a, b, x, y);
  return in.op == Op::Add ? l + r : l * r;
}

}  // namespace

void transpose_tile(ir::Kernel& k) {
  const int planned = k.plan.get(ir::AppliedOpt::TransposeTile);
  if (k.target.workgroups() || (planned != ir::OptPlan::kAuto && planned != kTile)) return;
  const std::vector<Inst>& insts = k.insts;
  // the shape: two global loops, perfectly nested, closing the kernel, inside at most one batch loop (a weight
  // packed into panels, Tensor::matmul_packed: (N/NR, K, NR) from W (N, K), each panel a transpose of NR rows);
  // nothing else loops
  const std::vector<size_t> loops = global_loops(insts);
  size_t ranges = 0;
  for (const Inst& in : insts) ranges += in.op == Op::Range;
  if (loops.size() < 2 || loops.size() > 3 || ranges != loops.size()) return;
  const size_t outer = loops[loops.size() - 2], inner = loops.back();
  const size_t inner_end = end_of_range(insts, inner), outer_end = end_of_range(insts, outer);
  if (outer_end != inner_end + 1 || outer_end + loops.size() - 1 != insts.size()) return;  // batch loop's END last
  for (size_t i = 0; i < outer; i++)
    if (insts[i].op != Op::DefineGlobal && insts[i].op != Op::Const && insts[i].op != Op::Add && insts[i].op != Op::Mul &&
        insts[i].op != Op::Range)
      return;
  for (size_t loop : loops)
    if (insts[insts[loop].src[0]].op != Op::Const) return;
  // the body: index arithmetic, one load, one store of the loaded value, a gate. Or (inside a batch loop) the
  // store of an elementwise function of that load and of other loads (a convolution's NHWC output + bias, then
  // ReLU, written NCHW): the tiles then copy the load's transposed elements to the output unchanged, and a second
  // loop nest after them reads the output back in place, contiguous, applies the function and stores it (see
  // `elementwise` below).
  std::vector<size_t> loads;
  size_t store = insts.size();
  bool elementwise = false;
  for (size_t i = outer + 1; i < inner_end; i++) {
    if (i == inner) continue;
    const Op op = insts[i].op;
    if (op == Op::Load) loads.push_back(i);
    else if (op == Op::Store && store == insts.size()) store = i;
    else if (op == Op::Const || op == Op::Add || op == Op::Mul || op == Op::CmpLt) continue;
    else if (ir::is_alu(op) && insts[i].dtype != DType::Int32) elementwise = true;
    else return;
  }
  if (loads.empty() || store == insts.size()) return;
  const Inst& st = insts[store];
  if (st.num_src != 3 || insts[st.src[0]].op != Op::DefineGlobal || insts[st.src[0]].dtype != DType::Float32) return;
  elementwise = elementwise || loads.size() > 1 || insts[st.src[2]].op != Op::Load;
  // the moved load: the stored value itself, or (elementwise) the one load read along the loop the store is not
  const ValueId lo = static_cast<ValueId>(outer), li = static_cast<ValueId>(inner);
  if (!affine(insts, st.src[1], lo, li)) return;
  auto step = [&](ValueId index, bool along_outer) {
    return along_outer ? at(insts, index, lo, li, 1, 0) - at(insts, index, lo, li, 0, 0)
                       : at(insts, index, lo, li, 0, 1) - at(insts, index, lo, li, 0, 0);
  };
  size_t load = insts.size();
  if (!elementwise) {
    load = loads[0];
  } else {
    // only inside a batch loop: the C device's threads split the batch loop, so each thread reads back in the
    // second nest what it wrote in the first (without one, the two nests' outer loops would be split unlike)
    if (loops.size() != 3 || insts[st.src[2]].dtype != DType::Float32) return;
    for (size_t l : loads) {
      const Inst& in = insts[l];
      if (in.src[0] == st.src[0]) return;  // reads the output: not an elementwise function of the inputs
      // (contiguous along one loop and moving along the other: a bias read per channel moves along one only)
      const bool moved = in.dtype == DType::Float32 && in.num_src == 2 && affine(insts, in.src[1], lo, li) &&
                         ((step(in.src[1], true) == 1 && step(in.src[1], false) != 0 && step(st.src[1], false) == 1) ||
                          (step(in.src[1], false) == 1 && step(in.src[1], true) != 0 && step(st.src[1], true) == 1));
      if (moved && load != insts.size()) return;  // two transposed loads: not this pass's
      if (moved) load = l;
    }
    if (load == insts.size()) return;
  }
  const Inst& ld = insts[load];
  if (ld.dtype != DType::Float32 || insts[ld.src[0]].op != Op::DefineGlobal || insts[ld.src[0]].dtype != DType::Float32) return;
  if (!affine(insts, ld.src[1], lo, li)) return;
  // a: the loop along which the load is contiguous; b: the one along which the store is
  bool a_is_outer;
  if (step(ld.src[1], true) == 1 && step(st.src[1], false) == 1) a_is_outer = true;
  else if (step(ld.src[1], false) == 1 && step(st.src[1], true) == 1) a_is_outer = false;
  else return;
  const int64_t in_row = step(ld.src[1], !a_is_outer), out_row = step(st.src[1], a_is_outer);
  if (in_row < kTile || out_row < kTile) return;  // rows of a tile must not overlap
  // Output rows a multiple of 4 KiB apart fall into one L1 set: the 8 rows a tile writes (16 with the block's
  // second tile) evicted each other between their two halves, and (1024, 256) → (256, 1024) took 115 µs
  // against 56 µs upcast by upcast_global, whose lane count keeps to the set's ways (kL1Ways). Left to it.
  if (out_row * static_cast<int64_t>(sizeof(float)) % 4096 == 0) return;
  const ValueId a = a_is_outer ? lo : li, b = a_is_outer ? li : lo;
  // the gate: none, or b < N (rows of the input past the N-th read as zeros)
  if (ld.num_src == 3) {
    const Inst& g = insts[ld.src[2]];
    if (g.op != Op::CmpLt || g.src[0] != b || insts[g.src[1]].op != Op::Const) return;
  }
  for (size_t i = outer + 1; i < inner_end; i++)  // a compare of indices is only the gate
    if (insts[i].op == Op::CmpLt && insts[insts[i].src[0]].dtype == DType::Int32 &&
        (ld.num_src != 3 || static_cast<ValueId>(i) != ld.src[2]))
      return;
  const int64_t trips_outer = static_cast<int64_t>(insts[insts[outer].src[0]].value);
  const int64_t trips_inner = static_cast<int64_t>(insts[insts[inner].src[0]].value);
  // Where both loops divide by 16, blocks of 16 × 16 (four tiles) with the output's rows (a) outside: a trip then
  // writes whole 64-byte lines of 16 output rows and reads whole lines of 16 input rows, so no line is left half
  // done for a later trip, and the output is written along its rows, block after block. A copy's output is most
  // often a buffer no kernel touched lately (the step's transpose of a gradient for its weight gradient, read
  // while in the caches): written down its columns in the order below, each store missed to memory and the
  // lines' owners were fetched one by one. d128's (512, 384) → (384, 512), alone (1 thread, the Xeon): 53 →
  // 40 µs from the caches, 250 → 105 µs into an output flushed from them (inputs flushed: 86 → 104 µs); in its
  // training step (two of them) 0.09 + 0.18 → 0.08 + 0.125 ms.
  // Otherwise (short output rows, panels) the tiles' outer loop runs over the input's rows (b) when they divide by
  // 8: each tile then reads the next 32 bytes of the eight rows the one before it read, and a cache line is used up
  // by two tiles in a row (the other way round, eight input rows 2 KiB apart fell into two L1 sets and were
  // evicted before the next tile along them came back for the second half of their lines: a 256×512 copy 28 µs
  // against 23 µs upcast, from the caches). Otherwise over the input's columns (a).
  const bool b_is_outer = !a_is_outer;
  const int64_t trips_a = a_is_outer ? trips_outer : trips_inner, trips_b = a_is_outer ? trips_inner : trips_outer;
  // A copy that also computes, into output rows of at most one vector register (a 4x4 feature map's 16 positions
  // per channel, with AVX-512's 16 lanes), is left as it is: gcc vectorizes its loop over the channels, 16 rows
  // of 16 loaded and transposed in registers (vpermt2ps), the function applied once to each element, where the
  // tiles write every element, then read it back and store it again. Measured in place (1 thread, the fifty-sixth
  // session's Xeon with AVX-512; a 1x1 convolution's NHWC output, minus a mean, times a scale, ReLU, into NCHW):
  // (32, 128, 4, 4) 27 -> 10 us, (32, 256, 4, 4) 54 -> 30, (32, 64, 4, 4) 12 -> 7, (64, 16, 4, 4) 24 -> 20. Longer
  // rows keep the tiles: (16, 64, 7, 7) 17 us tiled against 359 us untiled (rows of 49: gcc left the loop scalar);
  // rows of 36, 144 and 196 took about the same either way. So do copies whose other loads are whole tensors too,
  // read along the output's rows (the backward's ReLU mask and BatchNorm input gradient, (32, 128, 4, 4) in
  // MobileNet's step: 0.04 ms tiled, 0.14 ms untiled, gathered along the channels). Not measured with AVX2, whose
  // rows of 8 it leaves too.
  if (elementwise && planned == ir::OptPlan::kAuto && trips_b <= k.target.vector_floats()) {
    bool per_channel = true;  // the other loads read per output row (a mean, a scale): constant along b
    for (size_t l : loads)
      if (l != load)
        per_channel = per_channel && affine(insts, insts[l].src[1], lo, li) && step(insts[l].src[1], b_is_outer) == 0;
    if (per_channel) return;
  }
  const bool blocks_of_16 = trips_a % (2 * kTile) == 0 && trips_b % (2 * kTile) == 0;
  bool tiles_outer_is_outer;
  // Output rows of 64 elements or more (whole lines, written in order) also go outside where a does not divide by 16
  // or by 8 (the last a % 8 rows element by element, the tail below), when the input's rows are not a multiple of
  // 1 KiB apart (eight of them in a few L1 sets, evicted before the next trip of a read the other half of their
  // lines) and the copy is not a panel pack (its batch loop outside already takes NR output rows at a time).
  // Measured alone (1 thread, the Xeon with AVX-512; inputs and output from the caches / out of L2 (a 16 MiB
  // write in between) / out of it and mostly of L3 (64 MiB)): an MLP's 100 x 300 weight into a padded (300, 128)
  // Wᵀ 15.1 / 23.9 / 31 -> 11.1 / 19.8 / 20-26 us; a GRU's (300, 100) into (100, 320) 9.9 / 18.0 / 18.0 ->
  // 8.7 / 15.4 / 15-20 us; (300, 50) into (50, 320) 3.3 / 7.6 / 8.6-10 -> 4.5 / 7.2 / 8.3-8.6 us (a step reads
  // them from beyond L2: the weights, written by the optimizer a step earlier). The last a % 8 rows are a loop of
  // their own after the tiles, at the top level, which the C device's threads would each run whole (it runs such a
  // kernel on one thread, see split_rows in c_device.cpp): so only where the copy is below kMinParallelWork and
  // runs on one thread anyway, or 8 divides a.
  const bool rows_first = loops.size() == 2 && trips_a >= kTile && trips_b >= 64 &&
                          (in_row * static_cast<int64_t>(sizeof(float))) % 1024 != 0 &&
                          (trips_a % kTile == 0 || loop_work(k) < kMinParallelWork);
  if (blocks_of_16 || rows_first) tiles_outer_is_outer = a_is_outer;
  else if (trips_b % kTile == 0 && trips_a >= kTile) tiles_outer_is_outer = b_is_outer;
  else if (trips_a % kTile == 0 && trips_b >= kTile) tiles_outer_is_outer = !b_is_outer;
  else return;
  const ValueId t_loop = tiles_outer_is_outer ? lo : li, r_loop = tiles_outer_is_outer ? li : lo;
  const int64_t t_trips = tiles_outer_is_outer ? trips_outer : trips_inner;
  const int64_t r_trips = tiles_outer_is_outer ? trips_inner : trips_outer;

  Rewrite w(insts);
  for (size_t i = 0; i < outer; i++) w.copy(i);
  auto constant = [&](int64_t v) { return w.emit(make_inst(Op::Const, DType::Int32, {}, 0, static_cast<double>(v))); };
  auto range = [&](int64_t trips) { return w.emit(make_inst(Op::Range, DType::Int32, {constant(trips)}, ir::kGlobalLoop)); };
  auto end_range = [&](ValueId r) { w.emit(make_inst(Op::EndRange, DType::Int32, {r})); };
  // `tile * 8 + offset`, or `first + index` for a tail
  auto add = [&](ValueId x, ValueId y) { return w.emit(make_inst(Op::Add, DType::Int32, {x, y})); };
  auto mul = [&](ValueId x, ValueId y) { return w.emit(make_inst(Op::Mul, DType::Int32, {x, y})); };
  // What the copy needs of the body: the load, its gate and the two indices (elementwise: not the function)
  std::vector<bool> needed(insts.size(), !elementwise);
  std::function<void(ValueId)> need = [&](ValueId v) {
    if (v <= lo || needed[v] || v == li) return;
    needed[v] = true;
    for (int s = 0; s < insts[v].num_src; s++) need(insts[v].src[s]);
  };
  need(static_cast<ValueId>(load));
  need(st.src[1]);
  // The body once, with the old loops' indices `t_value` (the tiled-outside axis) and `r_value`.
  auto body = [&](ValueId t_value, ValueId r_value) {
    w.remap[t_loop] = t_value;
    w.remap[r_loop] = r_value;
    for (size_t i = outer + 1; i < inner_end; i++) {
      if (i == inner || !needed[i]) continue;
      w.copy(i);
      if (elementwise && i == std::max<size_t>(load, st.src[1]))  // the store of the loaded element, unchanged
        w.emit(make_inst(Op::Store, DType::Float32, {w.remap[st.src[0]], w.remap[st.src[1]], w.remap[load]}));
    }
  };
  // Two tiles side by side along the outer loop where it divides by 16: the side of the copy that loop indexes
  // then moves whole 64-byte lines, and the inner loop moves through the other side's rows 32 bytes a tile,
  // finishing each line with the next tile (with one tile per trip, half lines: the other half came back a
  // whole inner loop later, often evicted by then).
  const int block = t_trips % (2 * kTile) == 0 ? 2 * kTile : kTile;
  const int r_block = blocks_of_16 ? 2 * kTile : kTile;  // and two along the inner loop too
  const ValueId t0 = range(t_trips / block);
  const ValueId t_base = mul(t0, constant(block));
  std::vector<ValueId> t_lane(block);
  for (int j = 0; j < block; j++) t_lane[j] = add(t_base, constant(j));
  const ValueId r0 = range(r_trips / r_block);
  const ValueId r_base = mul(r0, constant(r_block));
  for (int half = 0; half < block; half += kTile)
    for (int r_half = 0; r_half < r_block; r_half += kTile)
      for (int i = 0; i < kTile; i++) {    // row i of a tile's input (b = 8·b0 + i) ...
        for (int j = 0; j < kTile; j++) {  // ... element j of it (a = 8·a0 + j)
          const ValueId r_value = add(r_base, constant(r_half + (t_loop == a ? i : j)));
          body(t_lane[half + (t_loop == a ? j : i)], r_value);
        }
      }
  end_range(r0);
  if (r_trips % kTile) {  // the tail of the other axis, element by element
    const ValueId tail = range(r_trips % kTile);
    const ValueId r_value = add(tail, constant(r_trips / kTile * kTile));
    const ValueId lane = range(block);
    body(add(t_base, lane), r_value);
    end_range(lane);
    end_range(tail);
  }
  end_range(t0);
  if (t_trips % block) {  // the tail of the tiles' axis, element by element
    const ValueId tail = range(t_trips % block);
    const ValueId t_value = add(tail, constant(t_trips / block * block));
    const ValueId lane = range(r_trips);
    body(t_value, lane);
    end_range(lane);
    end_range(tail);
  }
  if (elementwise) {
    // The second nest: the old loops, the body with the moved load reading the output in place (at the store's
    // index, contiguous along the inner loop or the outer), the function applied and stored there. gcc vectorizes
    // it (LeNet-5's second convolution, NHWC (32·100, 16) + bias, then ReLU, into NCHW: 44 -> 8 us alone on Zen
    // 3; 0.115 ms in its training step before, left scalar by gcc's vectorizer for the loads 16 floats apart).
    w.remap[outer] = range(trips_outer);
    std::vector<bool> copied(insts.size(), false);
    auto copy_index = [&](auto&& self, ValueId v) -> void {  // the store's index first: the load reads at it
      if (v <= lo || copied[v] || v == li) return;
      for (int s = 0; s < insts[v].num_src; s++) self(self, insts[v].src[s]);
      w.copy(v);
      copied[v] = true;
    };
    for (size_t i = outer + 1; i < inner_end; i++) {
      if (i == inner) {
        w.remap[inner] = range(trips_inner);
        continue;
      }
      if (copied[i]) continue;
      if (i == load) {
        copy_index(copy_index, st.src[1]);
        w.remap[load] = w.emit(make_inst(Op::Load, DType::Float32, {w.remap[st.src[0]], w.remap[st.src[1]]}));
      } else {
        w.copy(i);
      }
      copied[i] = true;
    }
    end_range(w.remap[inner]);
    end_range(w.remap[outer]);
  }
  for (size_t i = outer_end + 1; i < insts.size(); i++) w.copy(i);  // the batch loop's END_RANGE
  k.insts = std::move(w.out);
  k.opts.push_back({ir::AppliedOpt::TransposeTile, kTile});
}

}  // namespace ts
