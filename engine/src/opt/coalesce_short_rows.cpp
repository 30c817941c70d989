// Coalescing short rows: the elementwise loop over a row of 3 to 15 elements (a softmax over 12 keys, a
// cross-entropy gradient over 10 or 11 classes) runs over G rows at once, as one loop over their G·L elements
// (loop coalescing, Polychronopoulos, "Loop coalescing: a compiler transformation for parallel machines",
// 1987), so that the C compiler vectorizes it in whole 16-lane vectors. Rows are contiguous (row r, element c
// at r·L + c), so G rows are G·L neighbouring elements. What each row computes first (its max, its sum: the
// reduce loops in front of the elementwise loop) runs per row as before, in a local loop over the G rows, and
// each value the elementwise loop reads from it is written out L times, once per element, into a DEFINE_LOCAL
// array of G·L (scalar expansion); so are the values that depend on the element's position in its row but not on
// the row's data (the class index a one-hot compares with a label):
//
//   for r in 0..N:                           for b in 0..N/G:
//     m = max(x[r, 0..L])                      for lane in 0..G:                 (local loop: a row each)
//     for c in 0..L:                  →          m = max(x[b·G + lane, 0..L])
//       y[r, c] = exp2(x[r, c] - m)              for c in 0..L: mm[lane·L + c] = m
//                                              for j in 0..G·L:                  (vectorized)
//                                                y[b·G·L + j] = exp2(x[b·G·L + j] - mm[j])
//
// The elementwise loop of L, left alone, is vectorized in pieces (8 + 4 for 12) or not at all (10, 11), and its
// exp2 runs a row at a time. Measured on C (1 thread, Zen 5), the transformer sample's attention softmax (1,536
// rows of 12): its exponentials 21 -> 14-15 us in a training step (DEBUG=1), its backward 10-12 us either way;
// alone, one input run again and again, 20.8 -> 12.2 us with G = 8, 13.9 with G = 4. Writing the row max once per
// row and reading it as mm[j / L] instead: 29 us (a division and a gather per element). The rows' maxima must
// not be combined with branches on the data (12 -> 35 us in the step): the C renderer writes that combine
// inside a local loop as ts_vN_hmax (CRenderer::vector_accumulators).
//
// Applies on devices without workgroups (C, INTERP) to a global loop of L = 3..15 trips, not a power of two (rows
// of 2, 4 and 8 are whole vectors already), holding no loop, no accumulator and only stores at the row's own
// contiguous index, that is the last thing in the body of a global loop over N rows (N a multiple of G) with no
// other global loop in it; the row index of every load and store that moves with the element is that row's
// start plus the element (an index computed from the rows' loop and constants, L apart from row to row).
// G: the fewest rows whose elements fill whole 16-lane vectors, doubled up to 64 elements and 32 rows at most.
// A kernel with local loops already (rows_as_lanes, columns_as_lanes) is left alone.
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "opt/pass_manager.h"

namespace ts {

namespace {
using ir::Inst;
using ir::Op;
using ir::ValueId;

constexpr int64_t kMaxRowsPerBlock = 32;
constexpr int64_t kMinBlockElements = 64;

// The rows per block for rows of `length` in a loop of `rows`: 0 when none fits.
int64_t rows_per_block(int64_t length, int64_t rows) {
  const int64_t base = 16 / std::gcd(length, int64_t{16});  // the fewest rows that make whole vectors
  int64_t g = 0;
  for (int64_t t = base; t <= kMaxRowsPerBlock && rows % t == 0; t *= 2) {
    g = t;
    if (t * length >= kMinBlockElements) break;
  }
  return g;
}

// Whether int32 value v is computed from constants, the indices of loops up to `last_loop` (the rows' loop and
// those around it) and additions and multiplications only.
bool pure_index(const std::vector<Inst>& insts, ValueId v, ValueId last_loop, int depth = 0) {
  const Inst& in = insts[v];
  if (in.dtype != DType::Int32 || depth > 64) return false;
  if (in.op == Op::Const) return true;
  if (in.op == Op::Range) return v <= last_loop;
  if (in.op != Op::Add && in.op != Op::Mul) return false;
  return pure_index(insts, in.src[0], last_loop, depth + 1) && pure_index(insts, in.src[1], last_loop, depth + 1);
}
}  // namespace

void coalesce_short_rows(ir::Kernel& k) {
  if (k.target.workgroups()) return;
  const std::vector<Inst> old = k.insts;
  for (const Inst& in : old)
    if (in.op == Op::DefineLocal || (in.op == Op::Range && in.arg == ir::kLocalLoop)) return;
  const std::vector<size_t> loops = global_loops(old);
  if (loops.size() < 2) return;
  const size_t c = loops.back(), r = loops[loops.size() - 2];  // the elements' loop, the rows' loop
  const Inst &c_bound = old[old[c].src[0]], &r_bound = old[old[r].src[0]];
  if (c_bound.op != Op::Const || r_bound.op != Op::Const) return;
  const int64_t length = static_cast<int64_t>(c_bound.value), rows = static_cast<int64_t>(r_bound.value);
  if (length < 3 || length > 15 || (length & (length - 1)) == 0) return;
  const size_t c_end = end_of_range(old, c), r_end = end_of_range(old, r);
  if (c < r || c_end + 1 != r_end) return;  // the elements' loop ends the rows' body
  const int64_t g = rows_per_block(length, rows);
  if (g == 0) return;
  for (size_t i = c + 1; i < c_end; i++) {
    const Op op = old[i].op;
    if (op == Op::Range || op == Op::DefineAcc || op == Op::Assign || op == Op::Barrier) return;
  }

  // Which of the row's values move with its elements ("flat": computed in the coalesced loop) and which are the
  // same for every row of an element position or computed per row ("spread": written out into local memory).
  // A flat value is a row start plus the element index, or reads one.
  const ValueId rv = static_cast<ValueId>(r), cv = static_cast<ValueId>(c);
  std::vector<char> flat(old.size(), 0);
  std::vector<ValueId> start_of(old.size(), ir::kNone);  // a row start + the element index: that row start
  for (size_t i = c + 1; i < c_end; i++) {
    const Inst& in = old[i];
    for (int s = 0; s < in.num_src; s++) flat[i] = flat[i] || flat[in.src[s]];
    if (in.op == Op::Add && in.dtype == DType::Int32) {
      for (int s = 0; s < 2 && !flat[i]; s++) {
        const ValueId start = in.src[s], other = in.src[1 - s];
        if (other != cv || start >= cv || !pure_index(old, start, rv)) continue;
        const int64_t at0 = eval_index(old, start, rv, 0);
        if (eval_index(old, start, rv, 1) - at0 == length && eval_index(old, start, rv, rows - 1) - at0 == (rows - 1) * length) {
          flat[i] = 1;
          start_of[i] = start;
        }
      }
    }
    if (in.op == Op::Store && start_of[in.src[1]] == ir::kNone) return;  // a store at the row's own element only
  }
  // a load that moves with the element moves with the row too only through a row start (a transposed read would
  // be read per row and spread: more work, not less); a load of the element's position alone (a bias) is spread
  std::vector<int8_t> memo_elem(old.size(), -1), memo_row(old.size(), -1);
  for (size_t i = c + 1; i < c_end; i++) {
    const ValueId v = static_cast<ValueId>(i);
    if (old[i].op == Op::Load && !flat[i] && depends_on(old, v, cv, memo_elem) && depends_on(old, v, rv, memo_row)) return;
  }
  // the values a flat instruction reads from outside the flat ones: defined in the rows' loop (per row or per
  // element position), spread into local memory; defined before the rows' loop, read as they are
  std::map<ValueId, ValueId> spread;  // old value -> its DEFINE_LOCAL (set below)
  std::set<ValueId> uniform;          // constants and buffers defined in the rows' loop that flat values read: again
  for (size_t i = c + 1; i < c_end; i++) {
    if (!flat[i] || start_of[i] != ir::kNone) continue;  // a row start is recomputed per block
    for (int s = 0; s < old[i].num_src; s++) {
      const ValueId v = old[i].src[s];
      if (flat[v] || v < rv) continue;
      if (v == cv) return;  // the element index read otherwise than after a row start
      if (old[v].op == Op::Const || old[v].op == Op::DefineGlobal) {  // (an UPCAST's constants; with passes off,
        uniform.insert(v);                                              // a buffer defined where it is first read)
        continue;
      }
      if (old[v].dtype != DType::Float32 && old[v].dtype != DType::Int32) return;
      spread[v] = ir::kNone;
    }
  }

  Rewrite w(old);
  auto emit = [&](const Inst& in) { return w.emit(in); };
  auto cint = [&](int64_t v) { return emit(make_inst(Op::Const, DType::Int32, {}, 0, static_cast<double>(v))); };
  for (auto& [v, mem] : spread) mem = emit(make_inst(Op::DefineLocal, old[v].dtype, {}, g * length));
  for (size_t i = 0; i < r; i++) w.copy(i);
  const ValueId block = emit(make_inst(Op::Range, DType::Int32, {cint(rows / g)}, ir::kGlobalLoop));
  const ValueId rows_g = cint(g), len = cint(length);
  const ValueId first_row = emit(make_inst(Op::Mul, DType::Int32, {block, rows_g}));
  auto end = [&](ValueId loop) { emit(make_inst(Op::EndRange, DType::Float32, {loop})); };

  // each row of the block: its own values, then the spread values of each of its elements
  const ValueId lane = emit(make_inst(Op::Range, DType::Int32, {rows_g}, ir::kLocalLoop));
  w.remap[r] = emit(make_inst(Op::Add, DType::Int32, {first_row, lane}));
  for (size_t i = r + 1; i < c; i++) w.copy(i);
  const ValueId elem = emit(make_inst(Op::Range, DType::Int32, {len}, ir::kReduceLoop));
  w.remap[c] = elem;
  for (size_t i = c + 1; i < c_end; i++)
    if (!flat[i]) w.copy(i);
  const ValueId slot = emit(make_inst(Op::Add, DType::Int32, {emit(make_inst(Op::Mul, DType::Int32, {lane, len})), elem}));
  for (const auto& [v, mem] : spread) emit(make_inst(Op::Store, old[v].dtype, {mem, slot, w.remap[v]}));
  end(elem);
  end(lane);
  emit(make_inst(Op::Barrier, DType::Float32, {}));

  // the block's G·L elements in one loop: a row start becomes the block's start plus the position in the block
  std::map<ValueId, ValueId> at_first_row;  // a row start's index expression, for the block's first row
  std::function<ValueId(ValueId)> for_first_row = [&](ValueId v) -> ValueId {
    if (v < rv) return w.remap[v];
    if (v == rv) return first_row;
    if (auto it = at_first_row.find(v); it != at_first_row.end()) return it->second;
    Inst in = old[v];
    for (int s = 0; s < in.num_src; s++) in.src[s] = for_first_row(in.src[s]);
    return at_first_row[v] = emit(in);
  };
  std::map<ValueId, ValueId> starts;  // row start (old) -> the block's start (new), emitted before the loop
  for (size_t i = c + 1; i < c_end; i++)
    if (start_of[i] != ir::kNone && !starts.count(start_of[i])) starts[start_of[i]] = for_first_row(start_of[i]);
  for (ValueId v : uniform) w.remap[v] = emit(old[v]);
  const ValueId j = emit(make_inst(Op::Range, DType::Int32, {cint(g * length)}, ir::kGlobalLoop));
  for (const auto& [v, mem] : spread) w.remap[v] = emit(make_inst(Op::Load, old[v].dtype, {mem, j}));
  for (size_t i = c + 1; i < c_end; i++) {
    if (!flat[i]) continue;
    if (start_of[i] != ir::kNone) w.remap[i] = emit(make_inst(Op::Add, DType::Int32, {starts[start_of[i]], j}));
    else w.copy(i);
  }
  end(j);
  emit(make_inst(Op::Barrier, DType::Float32, {}));  // the next block's rows write the local arrays again
  end(block);
  for (size_t i = r_end + 1; i < old.size(); i++) w.copy(i);
  k.insts = std::move(w.out);
  dead_code_elimination(k);  // the per-row values only the elementwise loop read
  // the rows' own reductions (a cross-entropy gradient's logsumexp: the row max, the sum of exponentials) as lanes
  for (size_t i = 0; i < k.insts.size(); i++)
    if (k.insts[i].op == Op::Range && k.insts[i].arg == ir::kLocalLoop) {
      local_rows_as_lanes(k, i);
      break;
    }
}

}  // namespace ts
