// Rows as lanes: a reduction over short rows whose body has a transcendental (a softmax over 12 keys: the
// sum of exp2 per row) computes 16 rows side by side, one row per lane, so that the C compiler's loop
// vectorizer evaluates the transcendental for 16 rows in one vector. It is UPCAST on the output axis (as
// upcast_global does for a matmul) with the lanes written as a loop instead of unrolled copies: gcc's SLP
// vectorizer, which packs unrolled copies, does not pack the branches of ts_exp2f, its loop vectorizer
// does (if-conversion). The accumulators live in a 16-element array, a DEFINE_LOCAL, and the lanes are a
// local loop: the IR of a workgroup of 16 threads, which on the C device is a plain loop (and on a GPU
// would be a correct kernel: one workgroup per 16 rows, one thread per row).
//
//   for row in 0..N:                           for r0 in 0..N/16:
//     acc = 0                                    for lane in 0..16: acc[lane] = 0
//     for j in 0..L:                    →        for j in 0..L:
//       acc += exp2(x[row, j] - m[row])            for lane in 0..16:                 (vectorized)
//     out[row] = 1 / acc                             row = 16·r0 + lane
//                                                    acc[lane] += exp2(x[row, j] - m[row])
//                                                for lane in 0..16: out[16·r0 + lane] = 1 / acc[lane]
//
// The loads along a row become strided across the lanes (gathered), the values per row (m[row]) and the
// stores contiguous. Measured on C (1 thread, Zen 4), the transformer sample's softmax denominators
// (1,536 rows of 12): 21.5 → 10.9 us; the row reduce kept as it was (UPCAST_REDUCE: 4 lanes of one row
// at a time) leaves 3 trips of a 4-wide loop per row.
// (Since then attention's exponentials are stored by the kernel that computes the row max, see
// is_row_local_expand in schedule.cpp, and its sums read them: no transcendental, no lanes. The
// transformer's loss, a log-softmax over 11 classes, still runs this way.)
//
// Recorded as LANES(16) (or 8); a plan's LANES=0 turns it off, LANES=n asks for n lanes (where n divides the
// loop, whether or not the body has a transcendental). By default it applies on devices without workgroups
// (C, INTERP) to the innermost global loop (constant bound, a multiple of 16 or 8) whose body is one or more
// reduce blocks, each one accumulator (float32 or int32) over a single loop of 2..15 trips, one of whose bodies
// holds EXP2, LOG2, SIN or SQRT, with no transcendental outside the reduce loops but after the last (what comes
// before a reduce loop is recomputed in each lane loop). A logsumexp is two blocks: the row max, then the sum of
// exp(x - max), whose lane loop loads each lane's max from the first block's array; the log after both.
// When the innermost loop is too short (the last 6 positions of each of 32 sequences) and perfectly nested in a
// global loop that is long enough, the two are interchanged and the outer loop's rows become the lanes.
// The rewrite itself is reduce_lanes_in_local_memory (below), which columns_as_lanes shares.
//
// A total over such rows (a kernel without global loops: a cross-entropy's mean over the batch, whose rows
// each select their target's log-probability out of 10 or 11 classes) gets the same lanes: its outer loop
// over the rows is a reduce loop, and one accumulator summed every element in order, a chain of dependent
// adds (the d128 transformer's loss over 256 rows of 11: 2,816 adds one after another, 6 us in the training
// step). Each lane then keeps its own partial total in local memory too, and the lanes' partials are added
// after the loop (total_lanes_in_local_memory): the sum is reassociated, as upcast_reduce's is. A row may hold
// several reductions here too (a cross-entropy evaluated without its gradient: the row's max, its sum of
// exponentials, the target's pick), a value with a transcendental between them (the log of the sum) computed
// once per row, in a lane loop of its own, and kept in local memory.
//
//   total = 0                                  for lane: part[lane] = 0
//   for row in 0..N:                           for r0 in 0..N/16:
//     acc = 0                                    for lane: acc[lane] = 0
//     for j in 0..L: acc += f(row, j)   →        for j in 0..L: for lane: acc[lane] += f(16·r0 + lane, j)
//     total += acc                               for lane: part[lane] += acc[lane]
//   out = total / N                            for lane in 0..16 (a reduce loop): total += part[lane]
//                                              out = total / N
// Here the lanes need no transcendental: the dependent adds are what they take apart. On a GPU the lanes'
// loops would be a workgroup's threads, one workgroup for the whole total (the pass runs on C and INTERP).
#include <optional>
#include <stdexcept>

#include "opt/pass_manager.h"

namespace ts {

namespace {
using ir::Inst;
using ir::Op;
using ir::ValueId;

// rows of 16 or more vectorize along the row (upcast_reduce; except rows of 16 without a transcendental, which gcc
// vectorizes one row a lane by itself: upcast_reduce's short_contiguous_row)
constexpr int64_t kMaxRow = 15;

// The lanes for a loop of n trips: the plan's LANES where it divides n, else 16 or 8 where either does; 0: none.
int64_t lanes_for(int64_t n, int asked) {
  if (asked != ir::OptPlan::kAuto) return asked <= kMaxLanes && n % asked == 0 ? asked : 0;
  return n % 16 == 0 ? 16 : n % 8 == 0 ? 8 : 0;
}

// The reduce block of one accumulator over one constant loop of 2..kMaxRow trips without loops inside, its ASSIGN
// last, that begins at `first_acc` (a DEFINE_ACC) inside the loop that ends at `limit`; nullopt otherwise.
std::optional<ReduceBlock> short_row_block(const std::vector<Inst>& old, size_t first_acc, size_t limit) {
  ReduceBlock b{first_acc, first_acc + 1, 0};
  while (b.range < limit && old[b.range].op != Op::Range) {
    if (old[b.range].op == Op::DefineAcc || old[b.range].op == Op::Store || old[b.range].op == Op::Assign) return std::nullopt;
    b.range++;
  }
  if (b.range >= limit || old[b.range].arg != ir::kReduceLoop) return std::nullopt;
  const Inst& bound = old[old[b.range].src[0]];
  if (bound.op != Op::Const || bound.value < 2 || bound.value > kMaxRow) return std::nullopt;
  b.end = end_of_range(old, b.range);
  for (size_t i = b.range + 1; i < b.end; i++)
    if (old[i].op == Op::Range || old[i].op == Op::DefineAcc || old[i].op == Op::Store ||
        (old[i].op == Op::Assign && (old[i].src[0] != first_acc || i + 1 != b.end)))
      return std::nullopt;
  if (old[b.end - 1].op != Op::Assign) return std::nullopt;
  return b;
}

// The total form (see the top of this file): a kernel without global loops whose top level is
//   DEFINE_ACC total; ...; RANGE rows (reduce, constant); [values per row] DEFINE_ACC acc; [values per row]
//   RANGE j (2..15 trips) ... ASSIGN acc END_RANGE [values per row] t = total ⊕ (...); ASSIGN total, t
//   END_RANGE; [what uses total]
// with ⊕ an ADD or MAX whose other operand does not read total, and total read nowhere else in the loop.
void total_lanes_in_local_memory(ir::Kernel& k, int asked) {
  const std::vector<Inst> old = k.insts;
  size_t rows = old.size();
  for (size_t i = 0; i < old.size(); i++)
    if (old[i].op == Op::Range) {
      rows = i;
      break;
    }
  if (rows == old.size() || old[rows].arg != ir::kReduceLoop || old[old[rows].src[0]].op != Op::Const) return;
  const int64_t lanes = lanes_for(static_cast<int64_t>(old[old[rows].src[0]].value), asked);
  if (lanes == 0) return;
  const size_t rows_end = end_of_range(old, rows);
  const size_t outer_assign = rows_end - 1;  // ASSIGN total, t: the last thing a row does
  if (old[outer_assign].op != Op::Assign) return;
  const ValueId total = old[outer_assign].src[0], t = old[outer_assign].src[1];
  const DType type = old[total].dtype;
  if (total > rows || (type != DType::Float32 && type != DType::Int32)) return;
  const Inst& combine = old[t];
  if ((combine.op != Op::Add && combine.op != Op::Max) || combine.num_src != 2 || t < rows) return;
  const int side = combine.src[0] == total ? 1 : combine.src[1] == total ? 0 : -1;  // the operand that is not total
  if (side < 0 || combine.src[side] == total) return;
  for (size_t i = rows + 1; i < outer_assign; i++) {
    if (old[i].op == Op::Store) return;
    for (int s = 0; s < old[i].num_src; s++)
      if (old[i].src[s] == total && i != t) return;  // the running total read by anything but the combine
  }
  std::vector<ReduceBlock> blocks;  // a row's reductions, in order (a logsumexp's max and sum, then the target's pick)
  for (size_t i = rows + 1; i < outer_assign; i++) {
    const Inst& in = old[i];
    if (in.op == Op::DefineAcc) {
      const std::optional<ReduceBlock> b = short_row_block(old, i, outer_assign);
      if (!b) return;
      blocks.push_back(*b);
      i = b->end;
    } else if (in.op == Op::Range || in.op == Op::Assign) {
      return;
    }
  }
  if (blocks.empty() || t < blocks.back().end) return;
  for (const ReduceBlock& b : blocks)
    if (old[b.first_acc].dtype != DType::Float32 && old[b.first_acc].dtype != DType::Int32) return;
  const int64_t n = static_cast<int64_t>(old[old[rows].src[0]].value);
  std::vector<bool> in_loop(old.size(), false);  // inside a block's reduce loop
  for (const ReduceBlock& b : blocks)
    for (size_t i = b.range; i <= b.end; i++) in_loop[i] = true;
  // The row's values outside its reduce loops are recomputed in each lane loop, except those with a transcendental
  // ("heavy": the log of the row's sum of exponentials): each is computed once per row, in the lane loop in front
  // of the first reduce loop after it (the one that starts the rows' accumulators, for those in front of the
  // first), and kept in local memory for the lane loops after it.
  std::vector<bool> heavy(old.size(), false);
  std::vector<size_t> kept;  // heavy values read after the reduce loop that follows them
  std::vector<size_t> kept_before(old.size(), blocks.size());  // the block in front of which each is computed
  for (size_t i = rows + 1; i < outer_assign; i++) {
    if (in_loop[i]) continue;
    heavy[i] = is_transcendental(old[i].op);
    for (int s = 0; s < old[i].num_src; s++) heavy[i] = heavy[i] || heavy[old[i].src[s]];
  }
  for (size_t i = rows + 1; i < outer_assign; i++) {
    if (!heavy[i]) continue;
    size_t next = 0;  // the first block after it
    while (next < blocks.size() && blocks[next].range < i) next++;
    if (next == blocks.size()) {
      heavy[i] = false;  // after the last reduce loop: computed once anyway, in the lane loop that ends the row
      continue;
    }
    kept_before[i] = next;
  }
  for (size_t i = rows + 1; i < outer_assign; i++) {
    if (!heavy[i]) continue;
    bool read_elsewhere = false;  // by what is not computed with it, in the same lane loop
    for (size_t j = i + 1; j < outer_assign && !read_elsewhere; j++)
      for (int s = 0; s < old[j].num_src; s++)
        read_elsewhere = read_elsewhere || (old[j].src[s] == i && (in_loop[j] || !heavy[j] || kept_before[j] != kept_before[i]));
    if (!read_elsewhere) continue;
    if (old[i].dtype != DType::Float32 && old[i].dtype != DType::Int32) return;
    kept.push_back(i);
  }

  Rewrite w(old);
  std::vector<ValueId>& remap = w.remap;
  auto emit = [&](const Inst& in) { return w.emit(in); };
  auto cint = [&](int64_t v) { return emit(make_inst(Op::Const, DType::Int32, {}, 0, static_cast<double>(v))); };
  auto end = [&](ValueId r) { emit(make_inst(Op::EndRange, DType::Float32, {r})); };
  auto barrier = [&]() { emit(make_inst(Op::Barrier, DType::Float32, {})); };
  // local memory, at the top level: each lane's partial total, its row's accumulators and kept values
  const ValueId part = emit(make_inst(Op::DefineLocal, type, {}, lanes));
  std::vector<ValueId> mem, kept_mem;
  for (const ReduceBlock& b : blocks) mem.push_back(emit(make_inst(Op::DefineLocal, old[b.first_acc].dtype, {}, lanes)));
  for (size_t i : kept) kept_mem.push_back(emit(make_inst(Op::DefineLocal, old[i].dtype, {}, lanes)));
  for (size_t i = 0; i < rows; i++) w.copy(i);
  const ValueId total_here = remap[total];
  const ValueId width = cint(lanes);
  ValueId r0 = ir::kNone;
  auto lane_loop = [&]() {  // a loop over the lanes; the rows' index in it is lanes·r0 + lane
    const ValueId lane = emit(make_inst(Op::Range, DType::Int32, {width}, ir::kLocalLoop));
    remap[rows] = emit(make_inst(Op::Add, DType::Int32, {emit(make_inst(Op::Mul, DType::Int32, {r0, width})), lane}));
    return lane;
  };
  // in a lane loop: the lane's accumulators (their values so far) and the row's values up to `limit`, the heavy
  // ones computed in front of block `fresh` (a lane loop that keeps them) and loaded from local memory otherwise
  auto prefix = [&](ValueId lane, size_t limit, size_t fresh) {
    for (size_t x = 0; x < blocks.size(); x++)
      remap[blocks[x].first_acc] = emit(make_inst(Op::Load, old[blocks[x].first_acc].dtype, {mem[x], lane}));
    for (size_t x = 0; x < kept.size(); x++)
      if (kept_before[kept[x]] != fresh && kept[x] < limit)
        remap[kept[x]] = emit(make_inst(Op::Load, old[kept[x]].dtype, {kept_mem[x], lane}));
    for (size_t i = rows + 1; i < limit; i++)
      if (!in_loop[i] && old[i].op != Op::DefineAcc && (!heavy[i] || kept_before[i] == fresh)) w.copy(i);
    for (size_t x = 0; x < kept.size(); x++)
      if (kept_before[kept[x]] == fresh)
        emit(make_inst(Op::Store, old[kept[x]].dtype, {kept_mem[x], lane, remap[kept[x]]}));
  };
  auto has_fresh = [&](size_t x) {
    for (size_t i : kept)
      if (kept_before[i] == x) return true;
    return false;
  };

  ValueId lane = emit(make_inst(Op::Range, DType::Int32, {width}, ir::kLocalLoop));
  emit(make_inst(Op::Store, type, {part, lane, emit(make_inst(Op::Const, type, {}, 0, old[total].value))}));
  end(lane);
  barrier();
  r0 = emit(make_inst(Op::Range, DType::Int32, {cint(n / lanes)}, ir::kReduceLoop));
  lane = lane_loop();  // the rows' accumulators start at their initial value, the heavy values in front of them
  for (size_t x = 0; x < blocks.size(); x++) {
    const Inst& acc = old[blocks[x].first_acc];
    emit(make_inst(Op::Store, acc.dtype, {mem[x], lane, emit(make_inst(Op::Const, acc.dtype, {}, 0, acc.value))}));
  }
  if (has_fresh(0)) prefix(lane, blocks[0].range, 0);
  end(lane);
  barrier();
  for (size_t x = 0; x < blocks.size(); x++) {
    const ReduceBlock& b = blocks[x];
    if (x > 0 && has_fresh(x)) {  // the heavy values between the previous reduce loop and this one, once per row
      lane = lane_loop();
      prefix(lane, b.range, x);
      end(lane);
      barrier();
    }
    Inst row_loop = old[b.range];
    row_loop.src[0] = cint(static_cast<int64_t>(old[old[b.range].src[0]].value));
    remap[b.range] = emit(row_loop);
    lane = lane_loop();
    prefix(lane, b.range, blocks.size());
    for (size_t i = b.range + 1; i + 1 < b.end; i++) w.copy(i);
    emit(make_inst(Op::Store, old[b.first_acc].dtype, {mem[x], lane, remap[old[b.end - 1].src[1]]}));  // the ASSIGN
    end(lane);
    barrier();
    end(remap[b.range]);
  }
  lane = lane_loop();  // the rest of the row, its share added to the lane's partial total
  remap[total] = emit(make_inst(Op::Load, type, {part, lane}));
  prefix(lane, outer_assign, blocks.size());
  emit(make_inst(Op::Store, type, {part, lane, remap[t]}));
  end(lane);
  barrier();  // the next rows' accumulators overwrite these
  end(r0);
  // the lanes' partial totals, combined in lane order with the same op
  const ValueId each = emit(make_inst(Op::Range, DType::Int32, {width}, ir::kReduceLoop));
  Inst add = combine;
  add.src[1 - side] = total_here;
  add.src[side] = emit(make_inst(Op::Load, type, {part, each}));
  emit(make_inst(Op::Assign, type, {total_here, emit(add)}));
  end(each);
  remap[total] = total_here;
  for (size_t i = rows_end + 1; i < old.size(); i++) w.copy(i);
  k.insts = std::move(w.out);
  dead_code_elimination(k);  // the prefix values a lane loop does not read
  k.opts.push_back({ir::AppliedOpt::Lanes, static_cast<int>(lanes)});
}

bool lane_blocks(const std::vector<Inst>& old, size_t g, const std::vector<ReduceBlock>& blocks, int asked);

// The reduce blocks of loop `loop`'s body (as short_row_block takes them) when that body is those blocks and then,
// after the last, the rest of the row: its own values and loops over its elements that store them (a softmax's or a
// cross-entropy gradient's row written out), without accumulators; empty otherwise.
std::vector<ReduceBlock> blocks_then_row_loops(const std::vector<Inst>& old, size_t loop) {
  const size_t end = end_of_range(old, loop);
  std::vector<ReduceBlock> blocks;
  size_t tail = loop + 1;
  for (; tail < end && old[tail].op != Op::Range; tail++) {
    if (old[tail].op == Op::Assign || old[tail].op == Op::Barrier) return {};
    if (old[tail].op != Op::DefineAcc) continue;
    const std::optional<ReduceBlock> b = short_row_block(old, tail, end);
    if (!b) return {};
    blocks.push_back(*b);
    tail = b->end;
  }
  for (size_t i = tail; i < end; i++)
    if (old[i].op == Op::DefineAcc || old[i].op == Op::Assign || old[i].op == Op::Barrier || old[i].op == Op::DefineLocal ||
        (old[i].op == Op::Range && old[i].arg == ir::kLocalLoop))
      return {};
  return blocks;
}

// The rows of innermost global loop `g` as lanes (see the top of this file); false, the kernel unchanged, where
// its shape does not allow it. With `four`, rows that neither 16 nor 8 divide take 4 lanes where 4 does (a batch
// of 100): a quarter of a vector, but the transcendental is vectorized (the logsumexp of 100 rows of 10: 2.4 ->
// 1.7 us alone). Not for totals: their rows' loop without lanes is one chain of adds, which 4 partial totals made
// slower (0.15 -> 0.30 us).
bool global_rows_as_lanes(ir::Kernel& k, size_t g, int asked, bool four) {
  const std::vector<Inst> old = k.insts;
  if (old[old[g].src[0]].op != Op::Const) return false;
  const int64_t rows = static_cast<int64_t>(old[old[g].src[0]].value);
  int64_t lanes = lanes_for(rows, asked);
  if (lanes == 0 && four && asked == ir::OptPlan::kAuto && rows % 4 == 0) lanes = 4;
  if (lanes == 0) return false;
  const std::vector<ReduceBlock> blocks = upcastable_body(old, g);
  if (!lane_blocks(old, g, blocks, asked)) return false;
  reduce_lanes_in_local_memory(k, g, blocks, lanes);
  return true;
}

// Whether the reduce blocks `blocks` of loop `g`'s body can take lanes (and, by default, are worth it): each is one
// accumulator (float32 or int32) over one reduce loop without loops inside, of 2..kMaxRow trips, its ASSIGN last;
// one of them has a transcendental (unless a plan asks for lanes); nothing in front of the last block outside the
// blocks' loops has a transcendental or a store (each lane loop recomputes it). What follows the last block is the
// rows' own business (one lane loop runs it).
bool lane_blocks(const std::vector<Inst>& old, size_t g, const std::vector<ReduceBlock>& blocks, int asked) {
  if (blocks.empty()) return false;
  bool worth_it = false;
  for (const ReduceBlock& b : blocks) {
    for (size_t i = b.first_acc + 1; i < b.range; i++)
      if (old[i].op == Op::DefineAcc) return false;
    const DType acc_type = old[b.first_acc].dtype;
    if (acc_type != DType::Float32 && acc_type != DType::Int32) return false;
    const Inst& bound = old[old[b.range].src[0]];
    if (bound.op != Op::Const || bound.value < 2 || bound.value > kMaxRow) return false;
    for (size_t i = b.range + 1; i < b.end; i++) {
      if (old[i].op == Op::Range || (old[i].op == Op::Assign && i + 1 != b.end)) return false;
      worth_it = worth_it || is_transcendental(old[i].op);
    }
    // the ASSIGN ends the body (nothing reads the new value in it) and updates this block's accumulator
    if (old[b.end - 1].op != Op::Assign || old[b.end - 1].src[0] != b.first_acc) return false;
  }
  if (!worth_it && asked == ir::OptPlan::kAuto) return false;
  // What the lanes recompute in each lane loop: no transcendental outside the reduce loops except after the last
  // of them, no store in front of the last.
  const ReduceBlock& last = blocks.back();
  for (size_t i = g + 1; i < last.range; i++) {
    bool in_loop = false;
    for (const ReduceBlock& b : blocks) in_loop = in_loop || (i >= b.range && i <= b.end);
    if (!in_loop && (is_transcendental(old[i].op) || old[i].op == Op::Store)) return false;
  }
  return true;
}

}  // namespace

void rows_as_lanes(ir::Kernel& k) {
  const int asked = k.plan.get(ir::AppliedOpt::Lanes);  // LANES: kAuto (the rule below), 0 (off) or the lanes
  if (k.target.workgroups() || asked == 0) return;
  for (const Inst& in : k.insts)
    if (in.op == Op::DefineLocal || (in.op == Op::Range && in.arg == ir::kLocalLoop)) return;
  const std::vector<size_t> globals = global_loops(k.insts);
  if (globals.empty()) {
    total_lanes_in_local_memory(k, asked);
    return;
  }
  const size_t g = globals.back();  // the innermost global loop
  if (global_rows_as_lanes(k, g, asked, false)) return;
  // Rows of a few (the last 6 positions of each of 32 sequences: a causal model's loss over the second half of
  // its window) are too few for lanes, but the loop around them has enough (32): where the two loops are
  // perfectly nested, they are interchanged and the outer one's rows become the lanes.
  if (globals.size() >= 2) {
    const size_t outer = globals[globals.size() - 2];
    bool nested = end_of_range(k.insts, g) + 1 == end_of_range(k.insts, outer);
    for (size_t i = outer + 1; i < g && nested; i++) nested = is_alu(k.insts[i].op) || k.insts[i].op == Op::Const;
    ir::Kernel swapped = k;
    if (nested) interchange(swapped, outer, g);
    if (nested && global_rows_as_lanes(swapped, global_loops(swapped.insts).back(), asked, false)) {
      k = std::move(swapped);
      return;
    }
    // A row that computes its reductions and then writes out a value per element (a softmax or log-softmax over
    // 10 to 12 classes): its rows take the lanes for the reductions. Where its elements can be coalesced
    // (coalesce_short_rows: contiguous rows), that form first, its loop over the rows of a block as the lanes
    // (local_rows_as_lanes), so that the elements are then written in whole vectors; otherwise the rows' loop
    // around the elements' loop takes the lanes, and each lane writes its own row out. Alone (1 thread), a
    // log_softmax of 256 x 10: 8.5 -> 3.3 us, of 1,536 x 12: 34 -> 15-21 us; a softmax of 512 x 11: 13.4 -> 4.1 us.
    const Inst& bound = k.insts[k.insts[outer].src[0]];
    const int64_t lanes = bound.op == Op::Const ? lanes_for(static_cast<int64_t>(bound.value), asked) : 0;
    if (lanes > 0 && end_of_range(k.insts, g) < end_of_range(k.insts, outer)) {
      const std::vector<ReduceBlock> blocks = blocks_then_row_loops(k.insts, outer);
      if (!blocks.empty() && blocks.back().end < g && lane_blocks(k.insts, outer, blocks, asked)) {
        ir::Kernel coalesced = k;
        coalesce_short_rows(coalesced);
        if (has_applied(coalesced, ir::AppliedOpt::Lanes)) {
          k = std::move(coalesced);
          return;
        }
        reduce_lanes_in_local_memory(k, outer, blocks, lanes);
        return;
      }
    }
  }
  global_rows_as_lanes(k, g, asked, true);
}

bool local_rows_as_lanes(ir::Kernel& k, size_t loop) {
  const int asked = k.plan.get(ir::AppliedOpt::Lanes);
  const std::vector<Inst>& old = k.insts;
  if (asked == 0 || old[loop].op != Op::Range || old[loop].arg != ir::kLocalLoop || old[old[loop].src[0]].op != Op::Const)
    return false;
  const int64_t rows = static_cast<int64_t>(old[old[loop].src[0]].value);
  if (rows > kMaxLanes || (asked != ir::OptPlan::kAuto && asked != rows)) return false;
  const std::vector<ReduceBlock> blocks = blocks_then_row_loops(old, loop);
  if (!lane_blocks(old, loop, blocks, asked)) return false;
  reduce_lanes_in_local_memory(k, loop, blocks, rows);
  return true;
}


void reduce_lanes_in_local_memory(ir::Kernel& k, size_t g, const std::vector<ReduceBlock>& blocks, int64_t lanes) {
  const std::vector<Inst> old = k.insts;
  const int64_t n = static_cast<int64_t>(old[old[g].src[0]].value);
  const size_t g_end = end_of_range(old, g);
  const bool local = old[g].arg == ir::kLocalLoop;  // a loop over the lanes already: its trips are the lanes
  if (blocks.empty() || lanes < 1 || n % lanes != 0 || (local && lanes != n))
    throw std::logic_error("reduce_lanes_in_local_memory: not a lane-sized loop or no reduce block");
  for (const ReduceBlock& b : blocks)
    if (old[b.end - 1].op != Op::Assign || old[b.end - 1].src[0] != b.first_acc || old[old[b.range].src[0]].op != Op::Const)
      throw std::logic_error("reduce_lanes_in_local_memory: not a reduce block of a constant loop, its ASSIGN last");
  // the body's instructions outside the blocks' loops (the rows' values: index arithmetic, loads, what comes
  // between the reductions and after them)
  std::vector<bool> in_loop(old.size(), false);
  for (const ReduceBlock& b : blocks)
    for (size_t i = b.range; i < b.end + 1; i++) in_loop[i] = true;
  Rewrite w(old);
  auto emit = [&](const Inst& in) { return w.emit(in); };
  auto copy = [&](size_t i) { w.copy(i); };
  std::vector<ValueId>& remap = w.remap;
  auto cint = [&](int64_t v) { return emit(make_inst(Op::Const, DType::Int32, {}, 0, static_cast<double>(v))); };
  std::vector<ValueId> mem;  // local memory, at the top level: each block's accumulators, one per lane
  for (const ReduceBlock& b : blocks) mem.push_back(emit(make_inst(Op::DefineLocal, old[b.first_acc].dtype, {}, lanes)));
  for (size_t i = 0; i < g; i++) copy(i);
  const ValueId r0 = local ? ir::kNone : emit(make_inst(Op::Range, DType::Int32, {cint(n / lanes)}, ir::kGlobalLoop));
  const ValueId width = cint(lanes);
  // a loop over the lanes; `row` is the original loop's index in it: 16·r0 + lane (the lane, for a local loop)
  auto lane_loop = [&]() {
    const ValueId lane = emit(make_inst(Op::Range, DType::Int32, {width}, ir::kLocalLoop));
    remap[g] = local ? lane : emit(make_inst(Op::Add, DType::Int32, {emit(make_inst(Op::Mul, DType::Int32, {r0, width})), lane}));
    return lane;
  };
  auto end = [&](ValueId r) { emit(make_inst(Op::EndRange, DType::Float32, {r})); };
  auto barrier = [&]() { emit(make_inst(Op::Barrier, DType::Float32, {})); };
  // in each lane loop: the lane's accumulators (their values so far), then the rows' values up to `limit`
  // (a loop over the row's elements after the reductions runs inside a lane loop: not a global loop any more)
  auto prefix = [&](ValueId lane, size_t limit) {
    for (size_t x = 0; x < blocks.size(); x++)
      remap[blocks[x].first_acc] = emit(make_inst(Op::Load, old[blocks[x].first_acc].dtype, {mem[x], lane}));
    for (size_t i = g + 1; i < limit; i++) {
      if (in_loop[i] || old[i].op == Op::DefineAcc) continue;
      copy(i);
      if (old[i].op == Op::Range && old[i].arg == ir::kGlobalLoop) w.out.back().arg = ir::kReduceLoop;
    }
  };

  ValueId lane = lane_loop();  // accumulators start at their initial value
  for (size_t x = 0; x < blocks.size(); x++) {
    const Inst& acc = old[blocks[x].first_acc];
    emit(make_inst(Op::Store, acc.dtype, {mem[x], lane, emit(make_inst(Op::Const, acc.dtype, {}, 0, acc.value))}));
  }
  end(lane);
  barrier();
  for (size_t x = 0; x < blocks.size(); x++) {  // each reduction in turn, every trip across the lanes
    const ReduceBlock& b = blocks[x];
    Inst reduce = old[b.range];
    reduce.src[0] = cint(static_cast<int64_t>(old[old[b.range].src[0]].value));
    remap[b.range] = emit(reduce);
    lane = lane_loop();
    prefix(lane, b.range);
    for (size_t i = b.range + 1; i + 1 < b.end; i++) copy(i);
    emit(make_inst(Op::Store, old[b.first_acc].dtype, {mem[x], lane, remap[old[b.end - 1].src[1]]}));  // the ASSIGN
    end(lane);
    barrier();
    end(remap[b.range]);
  }
  lane = lane_loop();  // what follows the reductions, per row
  prefix(lane, g_end);
  end(lane);
  if (!local) {
    barrier();  // the next rows' accumulators overwrite these (after a local loop, its own barrier follows)
    end(r0);
  }
  for (size_t i = g_end + 1; i < old.size(); i++) copy(i);
  k.insts = std::move(w.out);
  dead_code_elimination(k);  // the prefix values a lane loop does not read
  k.opts.push_back({ir::AppliedOpt::Lanes, static_cast<int>(lanes)});
}

}  // namespace ts
