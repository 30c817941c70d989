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
// split (TS_LO/TS_HI) — and then to the loop around it (a 2-D col2im). When no comparison there depends on
// that loop alone, to the outermost loop of a kernel that runs on one thread anyway, with each comparison's
// answer over the loops inside it found by interval arithmetic (split_outer_loop: a weight packed in padded
// panels; small kernels of several shapes merged into one, whose outputs end at different indices). In a
// kernel with reductions, to the loop PADTO padded and the global loop around it (split_padded_tile, below), and
// to its short innermost reduce loops (a convolution's taps along a row: split_tap_loops).
// Kernels for devices with workgroups are left alone (a GPU runs one thread per element; its masks cost no loop
// trips). At most kMaxRanges ranges, and the copies stay under kMaxUnrolledInsts.
#include <algorithm>
#include <optional>
#include <set>

#include "opt/pass_manager.h"

namespace ts {

namespace {
// At most this many ranges a loop: a recurrent network unrolled over 20 steps assembles its input projection's
// gradient from 20 per-step slices (a GRU's (32, 20, 300): 1.1 ms with 20 masked loads per element; split, every
// element one load and the kernel gone from the step's slowest)
constexpr size_t kMaxRanges = 32;
constexpr int kMaxSplitLoops = 4;  // an elementwise kernel's loops split, from the innermost out

using ir::Inst;
using ir::Op;
using ir::ValueId;

constexpr int64_t kMaxScannedTrips = 1 << 14;  // the longest loop whose comparisons are evaluated at every index
// split_outer_loop's bound on trips × comparisons (each an interval walk of an index expression: a few
// milliseconds of lowering at most; a merged kernel of 32 small outputs of up to 4,096 elements is 131,072)
constexpr int64_t kMaxOuterEvaluations = int64_t{1} << 18;

// Whether int32 value v is computed from loop g and constants only (no other loop, no load): eval_index
// then gives its value at any g.
bool of_loop_only(const std::vector<Inst>& insts, ValueId v, size_t g, int depth = 0) {
  const Inst& in = insts[v];
  if (v == static_cast<ValueId>(g) || in.op == Op::Const) return true;
  if (depth > 32 || in.dtype != DType::Int32) return false;
  switch (in.op) {
    case Op::Add: case Op::Mul: case Op::IDiv: case Op::Mod:
      return of_loop_only(insts, in.src[0], g, depth + 1) && of_loop_only(insts, in.src[1], g, depth + 1);
    case Op::Neg: return of_loop_only(insts, in.src[0], g, depth + 1);
    default: return false;
  }
}

// Rewrites global loop g (constant bound) as one sequential loop per range [bounds[r], bounds[r + 1]); false (the
// kernel unchanged) when there are fewer than 2 ranges, more than kMaxRanges, or the copies would exceed
// `max_insts`.
bool split_at(ir::Kernel& k, size_t g, const std::vector<int64_t>& bounds, size_t max_insts) {
  const std::vector<Inst> old = k.insts;
  const size_t g_end = end_of_range(old, g);
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

// 0, n and every index of global loop g (n trips) where some comparison's answer flips: a range between two of
// them keeps every answer. `answer(c, at)` is comparison c's answer at g = at.
template <class Answer>
std::vector<int64_t> cuts_of(const std::vector<size_t>& comparisons, int64_t n, Answer answer) {
  std::set<int64_t> cuts;
  for (size_t c : comparisons) {
    int last = answer(c, 0);
    for (int64_t at = 1; at < n && cuts.size() <= kMaxRanges; at++)
      if (const int now = answer(c, at); now != last) {
        cuts.insert(at);
        last = now;
      }
  }
  std::vector<int64_t> bounds = {0};
  for (int64_t c : cuts)
    if (c > 0 && c < n) bounds.push_back(c);
  bounds.push_back(n);
  return bounds;
}

// Splits global loop g (constant bound) into one sequential loop per range of indices over which every
// comparison of its index in its body keeps its answer; false (the kernel unchanged) when there are fewer
// than 2 ranges, more than kMaxRanges, or the copies would exceed `max_insts`.
bool split_loop(ir::Kernel& k, size_t g, size_t max_insts) {
  const std::vector<Inst>& old = k.insts;
  const size_t g_end = end_of_range(old, g);
  const int64_t n = static_cast<int64_t>(old[old[g].src[0]].value);
  if (n > kMaxScannedTrips) return false;
  // Where the answers change: each comparison of two values computed from g and constants alone (j < c,
  // 16·j0 + c < 100: PADTO's mask of a padded tile) is evaluated at every g, and a range ends where its answer
  // flips. n is a loop's trip count (thousands at most), each evaluation a walk of a short expression.
  std::vector<size_t> comparisons;
  std::vector<int8_t> memo(old.size(), -1);
  for (size_t i = g + 1; i < g_end; i++)
    if (old[i].op == Op::CmpLt && of_loop_only(old, old[i].src[0], g) && of_loop_only(old, old[i].src[1], g) &&
        depends_on(old, static_cast<ValueId>(i), static_cast<ValueId>(g), memo))
      comparisons.push_back(i);
  const std::vector<int64_t> bounds = cuts_of(comparisons, n, [&](size_t c, int64_t at) {
    return static_cast<int>(eval_index(old, old[c].src[0], static_cast<ValueId>(g), at) <
                            eval_index(old, old[c].src[1], static_cast<ValueId>(g), at));
  });
  return split_at(k, g, bounds, max_insts);
}

// The values int32 value v takes with loop g at `at` and every other loop anywhere in its range (interval
// arithmetic over constants, loop indices, +, ·, -x, max, and / and % by a positive constant); nullopt for
// anything else (a load, a loop without a constant bound).
std::optional<std::pair<int64_t, int64_t>> interval_at(const std::vector<Inst>& insts, ValueId v, size_t g,
                                                       int64_t at, int depth = 0) {
  using Interval = std::pair<int64_t, int64_t>;
  const Inst& in = insts[v];
  if (v == static_cast<ValueId>(g)) return Interval{at, at};
  if (in.op == Op::Const) return Interval{static_cast<int64_t>(in.value), static_cast<int64_t>(in.value)};
  if (depth > 32 || in.dtype != DType::Int32) return std::nullopt;
  if (in.op == Op::Range) {
    if (insts[in.src[0]].op != Op::Const || insts[in.src[0]].value < 1) return std::nullopt;
    return Interval{0, static_cast<int64_t>(insts[in.src[0]].value) - 1};
  }
  if (in.op != Op::Add && in.op != Op::Max && in.op != Op::Mul && in.op != Op::IDiv && in.op != Op::Mod &&
      in.op != Op::Neg)
    return std::nullopt;
  const auto a = interval_at(insts, in.src[0], g, at, depth + 1);
  if (!a) return std::nullopt;
  if (in.op == Op::Neg) return Interval{-a->second, -a->first};
  const auto b = interval_at(insts, in.src[1], g, at, depth + 1);
  if (!b) return std::nullopt;
  switch (in.op) {
    case Op::Add: return Interval{a->first + b->first, a->second + b->second};
    case Op::Max: return Interval{std::max(a->first, b->first), std::max(a->second, b->second)};
    case Op::Mul: {
      const int64_t c[4] = {a->first * b->first, a->first * b->second, a->second * b->first, a->second * b->second};
      return Interval{*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    }
    case Op::IDiv:  // C's division truncates, which never decreases as the dividend grows
      if (b->first != b->second || b->first < 1) return std::nullopt;
      return Interval{a->first / b->first, a->second / b->first};
    case Op::Mod: {
      const int64_t d = b->first;
      if (b->first != b->second || d < 1 || a->first < 0) return std::nullopt;
      if (a->first / d == a->second / d) return Interval{a->first % d, a->second % d};
      return Interval{0, d - 1};
    }
    default: return std::nullopt;
  }
}

// A comparison's answer over the iterations of loop g at `at`: 1 always true, 0 always false, 2 either (it
// depends on another loop), -1 when interval_at cannot tell.
int answer_at(const std::vector<Inst>& insts, const Inst& cmp, size_t g, int64_t at) {
  const auto a = interval_at(insts, cmp.src[0], g, at), b = interval_at(insts, cmp.src[1], g, at);
  if (!a || !b) return -1;
  if (a->second < b->first) return 1;
  if (a->first >= b->second) return 0;
  return 2;
}

// Global loop g split where the answers of the comparisons that depend on it (and maybe on loops inside it)
// change, each answer over the inner loops found by interval arithmetic (answer_at); false (the kernel
// unchanged) unless some range answers every comparison it can evaluate, or the copies would exceed max_insts.
bool split_by_intervals(ir::Kernel& k, size_t g, size_t max_insts) {
  const std::vector<Inst>& insts = k.insts;
  if (insts[insts[g].src[0]].op != Op::Const) return false;
  const int64_t n = static_cast<int64_t>(insts[insts[g].src[0]].value);
  if (n > kMaxScannedTrips) return false;
  const size_t g_end = end_of_range(insts, g);
  std::vector<size_t> comparisons;  // of indices (a ReLU compares floats: data, not a mask) that depend on g
  std::vector<int8_t> memo(insts.size(), -1);
  for (size_t i = g + 1; i < g_end; i++)
    if (insts[i].op == Op::CmpLt && insts[insts[i].src[0]].dtype == DType::Int32 &&
        depends_on(insts, static_cast<ValueId>(i), static_cast<ValueId>(g), memo) && answer_at(insts, insts[i], g, 0) >= 0)
      comparisons.push_back(i);
  // each comparison is evaluated at every index of the loop, a walk of its index expression each time
  if (comparisons.empty() || n * static_cast<int64_t>(comparisons.size()) > kMaxOuterEvaluations) return false;
  auto answer = [&](size_t c, int64_t at) { return answer_at(insts, insts[c], g, at); };
  const std::vector<int64_t> bounds = cuts_of(comparisons, n, answer);
  bool resolved = false;  // some range where every comparison has one answer
  for (size_t r = 0; r + 1 < bounds.size() && !resolved; r++) {
    resolved = true;
    for (size_t c : comparisons) resolved = resolved && answer(c, bounds[r]) < 2;
  }
  return resolved && split_at(k, g, bounds, max_insts);
}

// The outermost global loop, split where the answers of comparisons that also depend on loops inside it
// change. A weight packed for the matmul in panels of 32 rows (Caffe's LeNet's 500×800 fc weight: 16
// panels, the last one holding 20 rows) masks every load with 32·panel + lane < 500, which depends on the
// panel and on the lane inside it: no range of lanes is always in bounds, and the masked load keeps gcc's
// loop scalar (E_16_800_32: 258 us). Over the panels the answer is known: true for panels 0 to 14 (at most
// 32·14 + 31 = 479), either in panel 15; split there, simplify drops the first range's masks (84 us).
// Only where the kernel runs on one thread anyway (split_keeps_threads: the outermost loop is the one the
// C device's threads divide), and only when some range answers every comparison it can evaluate.
// The copies' size is checked after simplify, which drops each range's masked-off work: small kernels of several
// shapes merged into one (Lowerer::run_ragged) compute every output at every index, and a range keeps only the
// outputs that have elements there. MobileNet's SGD update of 12 small tensors, E_512 (UPCAST by 16: a body of
// 1,750 instructions, 4 ranges, 7,000 before simplify): kept whole, every output was computed and masked at all
// 512 indices, 14 us in the step (1 thread, this session's Xeon); split, about 3,200 instructions in all, 6-7 us.
// transformer_tiny's Adam update of its small tensors, E_384: 10 -> 1 us.
bool split_outer_loop(ir::Kernel& k) {
  const std::vector<size_t> loops = global_loops(k.insts);
  if (loops.empty() || !split_keeps_threads(k, loops.front())) return false;
  ir::Kernel split = k;
  if (!split_by_intervals(split, loops.front(), kMaxRanges * kMaxUnrolledInsts)) return false;
  simplify(split);
  if (split.insts.size() > kMaxUnrolledInsts) return false;
  k = std::move(split);
  return true;
}

// Whether global loop loops[i] (global_loops' order) lies inside another global loop.
bool enclosed(const std::vector<Inst>& insts, const std::vector<size_t>& loops, size_t i) {
  const size_t end = end_of_range(insts, loops[i]);
  for (size_t l = 0; l < i; l++)
    if (end_of_range(insts, loops[l]) > end) return true;
  return false;
}
}  // namespace

bool split_keeps_threads(const ir::Kernel& k, size_t g) {
  for (size_t i = 0; i < g; i++)
    if (k.insts[i].op == Op::Range && k.insts[i].arg == ir::kGlobalLoop) return true;
  return loop_work(k) < kMinParallelWork;
}

// The short reduce loops of a register tile (a convolution's taps along a row, kx = 0..2) split where their
// comparisons with the tile's lanes keep one answer: each lane of a row read through a pad view is gated by its
// column kx + lane - 1 lying in the image, which for the row's first lane fails at kx = 0 only, for its last real
// lane at kx = 2 only. Split there (kx = 0, then 1..2), every lane's gate folds to a constant in each range and
// the masks the C renderer builds at run time for AVX2's masked loads, a few instructions per load, become
// constants, and the C renderer's vectors continue from one range into the next. The loop's iterations run in
// the same order: the same sums, the same bits. Applied to innermost reduce loops of at most kMaxTapTrips
// iterations whose every comparison interval arithmetic resolves in some range, at most kMaxRanges of them a
// kernel. Depthwise 3x3 forwards alone on Zen 3 (AVX2, 1 thread): 32 x 16 x 28 x 28 0.151-0.178 -> 0.146 ms,
// 32 x 32 x 14 x 14 0.10 -> 0.093 ms, 32 x 64 x 7 x 7 0.100 -> 0.054 ms.
constexpr int64_t kMaxTapTrips = 7;
static void split_tap_loops(ir::Kernel& k) {
  for (size_t i = 0, splits = 0; i < k.insts.size() && splits < kMaxRanges; i++) {
    const Inst& in = k.insts[i];
    if (in.op != Op::Range || in.arg != ir::kReduceLoop || k.insts[in.src[0]].op != Op::Const) continue;
    const int64_t trips = static_cast<int64_t>(k.insts[in.src[0]].value);
    if (trips < 2 || trips > kMaxTapTrips) continue;
    // innermost loops only: a loop around another (the taps' rows, ky) gates whole rows of lanes, which the C
    // renderer reads behind one condition each (row ? load : 0) with constant lane masks already; split, a
    // range where a row is wholly off leaves that row's lanes as constants
    bool innermost = true;
    for (size_t j = i + 1, end = end_of_range(k.insts, i); j < end && innermost; j++) innermost = k.insts[j].op != Op::Range;
    if (!innermost) continue;
    // the kernel holds the tile's copies (split_padded_tile's limit), each tap loop's ranges one more copy of its body
    if (split_by_intervals(k, i, 3 * kMaxUnrolledInsts)) splits++;
  }
}

// A register tile over columns PADTO padded (padto.cpp): out (10, 100) = a (10, 100) @ b (100, 100) runs 7
// blocks of 16 columns, and in every block the loads of b and the stores are gated with 16·j0 + c < 100.
// gcc compiles the gated loads of the 16 lanes to branches and leaves the tile scalar (27 us; 2 us unmasked).
// Split at j0 = 6, the first 6 blocks have no mask left and the last keeps 4 lanes: the 12 padded lanes'
// loads read 0 and their stores, gated false, are dropped, and with them everything they computed.
// The ranges are where the comparisons of its index alone change; others may stay (a depthwise convolution
// reading its input through a pad view: the window's column depends on the tap too), as masks the C renderer
// loads rows through (CRenderer::vector_accumulators), while the padded columns' stores, gated by the
// loop alone, go (32 x 16 x 28 x 28 3x3: 0.51 -> 0.13 ms, its stores had been lane by lane, each behind a
// branch). The loop is the innermost global loop; when it is the kernel's outermost (the
// tile took all rows), the ranges leave the kernel without a loop to run on several threads, so only a
// kernel below the work for which the C device uses threads is split.
static void split_padded_tile_loops(ir::Kernel& k) {
  const std::vector<size_t> loops = global_loops(k.insts);
  // from the innermost out, the first global loop that some comparison depends on (register_tile may have
  // put the padded columns outside the tile's groups of rows)
  for (size_t l = loops.size(); l-- > 0;) {
    const size_t g = loops[l];
    if (k.insts[k.insts[g].src[0]].op != Op::Const) return;
    const size_t g_end = end_of_range(k.insts, g);
    std::vector<int8_t> memo(k.insts.size(), -1);
    bool compares = false;
    for (size_t i = g + 1; i < g_end; i++) {
      const Inst& in = k.insts[i];
      // comparisons of indices (a ReLU compares floats: data, not a mask)
      if (in.op != Op::CmpLt || k.insts[in.src[0]].dtype != DType::Int32 ||
          !depends_on(k.insts, static_cast<ValueId>(i), static_cast<ValueId>(g), memo))
        continue;
      if (of_loop_only(k.insts, in.src[0], g) && of_loop_only(k.insts, in.src[1], g)) compares = true;
    }
    if (!compares) continue;
    if (!split_keeps_threads(k, g)) return;
    // each range's copy of the tile stays under the limit (the tile did); the kernel holds two of them
    if (!split_loop(k, g, 2 * kMaxUnrolledInsts) || l == 0) return;
    // Then the global loop around it, where its comparisons with the loops inside it have one answer over a
    // range of it: a depthwise convolution's groups of 4 output rows read rows 4·group + ky - 1, in the image
    // for every tap ky from the second group to the second-to-last. Split there, the middle groups read their
    // rows with masks that fold to constants (a plain vector load where every lane is in the image; AVX2 builds
    // every other mask at run time, a few instructions per load), and only the first and last groups keep the
    // row masks. 32 x 16 x 28 x 28 3x3 on Zen 3 (1 thread): forward and input gradient 0.18-0.19 -> 0.16 ms each.
    const std::vector<size_t> after = global_loops(k.insts);
    if (l - 1 < after.size() && split_keeps_threads(k, after[l - 1])) split_by_intervals(k, after[l - 1], 3 * kMaxUnrolledInsts);
    return;
  }
}

// The padded tile's loops, then its tap loops
static void split_padded_tile(ir::Kernel& k) {
  split_padded_tile_loops(k);
  split_tap_loops(k);
}

void split_index_set(ir::Kernel& k) {
  // a tiled transpose's gate (rows past a padded weight's) stays per tile row: the renderer reads it as a mask
  if (k.target.workgroups() || has_applied(k, ir::AppliedOpt::TransposeTile)) return;
  for (const Inst& in : k.insts)
    if (in.op == Op::DefineAcc) return split_padded_tile(k);
  for (const Inst& in : k.insts)
    if (in.op == Op::Range && in.arg != ir::kGlobalLoop) return;  // elementwise: global loops only
  // The innermost loop first: the one whose comparisons are evaluated most often. Then the loops around it, while
  // they compare their indices too: in a 2-D col2im which of the kernel's rows reach an input row depends on the
  // row as the columns do on the column, and splitting only the columns left a masked load (a branch) per row tap
  // (Caffe's LeNet's 50 -> 20 channels 5x5, 12x12: 1.33 -> 0.57 ms alone); a strided depthwise convolution's input
  // gradient by phases (N, C, Q, 2, Q, 2) compares the phase loops and the shifted views' edges, four loops in all
  // (conv's depthwise_input_grad_by_phases: 0.50 -> 0.12 ms with all four split; with 4x4 planes the edges' loops of
  // 4 now stay whole, below). A loop that compares nothing is
  // stepped over: a concatenation along a middle axis (20 time steps' slices of (32, 1, 300) into (32, 20, 300))
  // compares only the loop around the rows. Each copy of an outer loop holds the inner ranges with every masked
  // load; simplify drops the masked-off ones, most of them (that col2im: 9 x 9 bodies with 1,600 of their 20,000
  // loads), so the size limit is checked after it. The outermost loop stays whole (the C device's threads split
  // it); when no loop inside it splits, split_outer_loop may split it.
  bool split_any = false;
  size_t passed = 0;  // loops from the innermost out that were not split
  for (int level = 0; level < kMaxSplitLoops; level++) {
    const std::vector<size_t> loops = global_loops(k.insts);
    if (loops.size() < passed + 2) break;
    const size_t g = loops[loops.size() - 1 - passed];
    if (k.insts[k.insts[g].src[0]].op != Op::Const || !enclosed(k.insts, loops, loops.size() - 1 - passed)) break;
    // A loop of 3 or 4 trips around the innermost one stays whole: split, its ranges are loops of 1 to 3 trips that
    // gcc neither vectorizes nor packs; whole, gcc unrolls it completely and packs the stores of its trips, and
    // its edge's gate stays a masked load. The stride-2 depthwise input gradient by phases on 4x4 output-gradient
    // planes, (32, 64, 4, 2, 4, 2) with the phase loops split and the two loops of 4 whole: 0.128 -> 0.074 ms in
    // MobileNet's step; loops of 8 split (whole: 0.148 -> 0.245 ms for (32, 32, 8, 2, 8, 2)).
    if (const int64_t trips = static_cast<int64_t>(k.insts[k.insts[g].src[0]].value); level > 0 && trips > 2 && trips <= 4) {
      passed++;
      continue;
    }
    ir::Kernel split = k;
    const bool innermost = level == 0;  // split as before: the copies' size checked before simplify
    if (split_loop(split, g, innermost ? kMaxUnrolledInsts : kMaxRanges * kMaxUnrolledInsts)) {
      if (!innermost) simplify(split);
      if (split.insts.size() <= kMaxUnrolledInsts) {
        k = std::move(split);
        split_any = true;
        continue;
      }
    }
    passed++;
  }
  if (!split_any) split_outer_loop(k);
}

}  // namespace ts
