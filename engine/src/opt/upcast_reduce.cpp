// UPCAST of a reduce loop (tinygrad's name): the innermost reduce loop runs U iterations per trip,
// each into its own accumulator, and the U partial results are combined after the loop.
//
//   acc = 0                          acc0 = acc1 = … = acc15 = 0
//   for r in 0..N:                   for r in 0..N/16:
//     acc += x[r]             →        acc0 += x[16r+0]; acc1 += x[16r+1]; … acc15 += x[16r+15]
//                                    for r in N/16*16..N:  (a tail when 16 does not divide N)
//                                      acc0 += x[r]
//                                    acc = (acc0 + acc1) + … (a tree)
//
// A single accumulator chains every addition to the previous one (4 cycles each on this CPU) and
// cannot be vectorized without reassociating floating-point sums, which C compilers may not do. U
// independent accumulators are U independent chains that the compiler turns into one vector add per
// trip. The sum is reassociated, so results change in the last bits (well within float32 tolerance),
// identically on every device, since every device runs this same IR.
#include <map>

#include "opt/pass_manager.h"

namespace ts {
namespace {

using ir::Inst;
using ir::Op;
using ir::ValueId;

constexpr int kMaxUpcast = 16;           // floats in one AVX-512 register
constexpr int kMaxStreamingUpcast = 64;  // four registers, for a body that only loads and adds

// A streaming reduction (x.sum(): the body is one load and the combine) is bound by memory, and one
// vector of partial sums has one add in flight at a time (4 cycles each); four vectors keep four loads
// in flight and are ~10% faster on this machine's 64 MiB sum (2.47 against 2.77 ms in plain C). With
// more work per element the body has enough independent instructions already, and the larger unroll
// only grows the code (softmax's exp loop got slower at 32).
// `planned`: OptPlan's amount for UPCAST_REDUCE (kAuto: the heuristic below); `body`: instructions in the
// loop. 1: no upcast.
//
// The U partial sums are combined after the loop by U - 1 scalar adds, each after extracting its lanes
// from the vector register: with U = 16 that is about 30 instructions per output, against 2 vector
// multiply-adds per output for a loop of 32. So 16 accumulators need at least 4 trips (a loop of 32 or 48
// takes 8): the classifier head's x @ Wᵀ (K = 32, 4224 outputs) went 19.3 → 10.8 us, with K = 48 21.2 →
// 13.0 us, a row sum of exp over 48 the same. Below 8 the rule does not apply: a loop of 16 with U = 4
// instead of 8 was slower (exp-sum of 4096 rows of 16: 66 against 44 us).
//
// A loop that no 16 or 8 divides but that is long enough for 16 (n ≥ 64: LeNet's K = 84, 120) is upcast
// by 16 anyway, and the n % 16 iterations left run after it in a tail loop into the first accumulator
// (a scalar remainder, as BLAS kernels have): before, K = 84 took U = 4 over 21 trips, which gcc turns
// into in-order vector reductions (the 10-output layer x @ Wᵀ, 64 × 10 × 84: 15 → 4.4 us alone).
// `outer_trips`: the trips of the reduce loops around this one (a reduce over several axes), over which the
// partial sums live on: they count towards the 4 trips (LeNet-5's weight gradient sums chunks of 8 runs of
// 32 positions: 16 lanes over 2 × 8 trips, not 8 lanes).
int upcast_factor(int64_t n, int64_t outer_trips, bool streaming, int planned, size_t body) {
  auto divides = [&](int u) { return n % u == 0 && n >= 2 * u; };
  if (planned != ir::OptPlan::kAuto)  // a requested factor also keeps the unrolled body to a sane size
    return planned >= 2 && n >= 2 * planned && body * static_cast<size_t>(planned) <= kMaxUnrolledInsts ? planned : 1;
  for (int u = streaming ? kMaxStreamingUpcast : kMaxUpcast; u >= 8; u /= 2)
    if (divides(u) && (streaming || u <= 8 || n * outer_trips >= 4 * u)) return u;
  if (!streaming && n >= 4 * kMaxUpcast) return kMaxUpcast;  // and a tail loop for the n % 16 left
  return divides(4) ? 4 : 1;
}

// Is the loop body old[begin, end) one LOAD plus index arithmetic, and the combine of the accumulator?
bool is_streaming_body(const std::vector<Inst>& old, size_t begin, size_t end) {
  int loads = 0, float_alu = 0;
  for (size_t b = begin; b < end; b++) {
    if (old[b].op == Op::Load) loads++;
    else if (ir::is_alu(old[b].op) && old[b].dtype != DType::Int32) float_alu++;
  }
  return loads == 1 && float_alu == 1;
}

// A row of 8 or 16 elements read contiguously (or not at all) along the reduce loop, without a transcendental:
// left whole (no upcast), gcc unrolls the short loop completely and vectorizes the loop around it, one output per
// lane, each row's sum kept in its order (what rows_as_lanes writes by hand for rows with a transcendental, whose
// calls gcc's SLP does not pack). Upcast by 8, each row took its two vectors of partial sums apart again into one
// scalar sum. Measured alone (1 thread, the fifty-sixth session's Xeon with AVX-512, each result realized, launch
// included): x.sum(-1) over (8192, 16) 27.4 -> 13.8 us, over (8192, 8) 14.2 -> 8.9; (x - m)² summed over (8192,
// 16) 41.7 -> 26.0; attention's q·k over 16 features, (32, 4, 12, 12) scores, 59.4 -> 26.2; MobileNet's global
// average pool over 4x4 positions (32, 128) 14.8 -> 11.9; (384, 11) dot products of 16 16.9 -> 15.5. Rows of 12
// (15.3 -> 25.2 us) and 32 (29.8 -> 38.4), and a sum down columns 16 floats apart (6.9 -> 8.6), lost: they keep
// the upcast.
bool short_contiguous_row(const std::vector<Inst>& old, size_t inner, size_t end, int64_t n) {
  if (n != 8 && n != 16) return false;
  for (size_t b = inner + 1; b < end; b++) {
    if (is_transcendental(old[b].op)) return false;
    if (old[b].op != Op::Load) continue;
    const int64_t stride = eval_index(old, old[b].src[1], static_cast<ValueId>(inner), 1) -
                           eval_index(old, old[b].src[1], static_cast<ValueId>(inner), 0);
    if (stride != 0 && stride != 1) return false;
  }
  return true;
}

}  // namespace

void upcast_reduce(ir::Kernel& k) {
  const std::vector<Inst> old = k.insts;
  std::vector<Inst> out;
  std::vector<ValueId> remap(old.size(), ir::kNone);
  auto emit = [&](Inst in) {
    out.push_back(in);
    return static_cast<ValueId>(out.size() - 1);
  };
  auto constant = [&](double v, DType dt) {
    Inst c;
    c.op = Op::Const;
    c.dtype = dt;
    c.value = v;
    return emit(c);
  };
  bool upcast_any = false;
  bool upcast_global = false;  // max_reduce_as_int leaves such kernels' maxima as they are
  for (const ir::AppliedOpt& o : k.opts) upcast_global = upcast_global || o.kind == ir::AppliedOpt::UpcastGlobal;
  size_t i = 0;
  while (i < old.size()) {
    // candidate: DEFINE_ACC, RANGE (reduce, constant bound) — or a perfectly nested chain of them — and
    // an innermost body without loops that ends with the accumulator's only ASSIGN, then the END_RANGEs
    bool done = false;
    // loop-invariant code motion may have put values between the accumulator and its loop
    size_t r = i + 1;
    while (r < old.size() && (old[r].op == Op::Const || old[r].op == Op::Load || ir::is_alu(old[r].op))) r++;
    if (old[i].op == Op::DefineAcc && r < old.size() && old[r].op == Op::Range && old[r].arg == 0 &&
        old[old[r].src[0]].op == Op::Const) {
      // A reduce over several axes that lowering could not merge is a chain of perfectly nested reduce
      // loops (only index arithmetic between them): the innermost one is upcast, and the partial
      // accumulators live across the whole chain.
      std::vector<size_t> outer;  // the enclosing loops of the chain, outermost first
      size_t inner = r;
      for (;;) {
        size_t s2 = inner + 1;
        while (s2 < old.size() && (old[s2].op == Op::Const || ir::is_alu(old[s2].op) || old[s2].op == Op::Load)) s2++;
        if (s2 < old.size() && old[s2].op == Op::Range && old[s2].arg == 0 && old[old[s2].src[0]].op == Op::Const) {
          outer.push_back(inner);
          inner = s2;
        } else {
          break;
        }
      }
      size_t end = inner + 1;
      int assigns = 0;
      bool simple = true;
      while (end < old.size() && old[end].op != Op::EndRange) {
        if (old[end].op == Op::Range || old[end].op == Op::DefineAcc) simple = false;
        if (old[end].op == Op::Assign) assigns++;
        end++;
      }
      // the chain closes right after the innermost loop, innermost first
      for (size_t o = 0; o < outer.size() && simple; o++) {
        const size_t at = end + 1 + o;
        simple = at < old.size() && old[at].op == Op::EndRange && old[at].src[0] == outer[outer.size() - 1 - o];
      }
      const int64_t n = static_cast<int64_t>(old[old[inner].src[0]].value);
      int64_t outer_trips = 1;
      for (size_t o : outer) outer_trips *= static_cast<int64_t>(old[old[o].src[0]].value);
      const int planned = k.plan.get(ir::AppliedOpt::UpcastReduce);
      // A float max over a loop of 16 or more (a row max: softmax's, attention's over 32 keys) is left whole
      // on devices without workgroups, for max_reduce_as_int's integer keys, whose loop gcc vectorizes as
      // a reduction. Upcast, its partial maxima are NaN-propagating selects that gcc 12 leaves scalar:
      // measured alone (C, 1 thread, Zen 4), a row max of 262,144 floats in rows of 16 / 32 / 64 / 128 /
      // 1024 took 51 / 105 / 144 / 195 / 51 us upcast against 24 / 36 / 34 / 32 / 29 us whole with keys,
      // and attention's max of (scores · scale + causal mask) over rows of 32 133 against 44 us.
      const bool keyed_max = planned == ir::OptPlan::kAuto && !k.target.workgroups() && !upcast_global &&
                             n >= kMinKeyedMaxTrips && old[i].dtype == DType::Float32 && end > inner + 1 &&
                             old[end - 1].op == Op::Assign && old[old[end - 1].src[1]].op == Op::Max;
      // (on every device, so that a row is summed in one order everywhere, as the upcast's 16 lanes are)
      const bool whole_row = planned == ir::OptPlan::kAuto && outer.empty() && short_contiguous_row(old, inner, end, n);
      const int u_count = keyed_max || whole_row
                              ? 1
                              : upcast_factor(n, outer_trips, is_streaming_body(old, inner + 1, end), planned,
                                              end - inner);
      simple = simple && end < old.size() && old[end].src[0] == inner && assigns == 1 && old[end - 1].op == Op::Assign &&
               old[end - 1].src[0] == i && u_count > 1;
      if (simple) {
        const Op combine = old[old[end - 1].src[1]].op;  // ADD or MAX
        simple = combine == Op::Add || combine == Op::Max;
        if (simple) {
          std::vector<ValueId> acc(u_count);
          for (int u = 0; u < u_count; u++) acc[u] = emit(old[i]);  // acc[0] keeps the old accumulator's role
          remap[i] = acc[0];
          for (size_t p = i + 1; p < inner; p++) {  // the values in front of the loop and the enclosing loops, unchanged
            Inst in = old[p];
            for (int s = 0; s < in.num_src; s++) in.src[s] = remap[in.src[s]];
            remap[p] = emit(in);
          }
          Inst range = old[inner];
          range.src[0] = constant(static_cast<double>(n / u_count), DType::Int32);
          ValueId r2 = emit(range);
          remap[inner] = r2;
          // the unrolled indices r2·U + u
          std::vector<ValueId> idx(u_count);
          ValueId scaled = emit(Inst{Op::Mul, DType::Int32, 2, {r2, constant(u_count, DType::Int32), ir::kNone}, 0, 0});
          for (int u = 0; u < u_count; u++)
            idx[u] = emit(Inst{Op::Add, DType::Int32, 2, {scaled, constant(u, DType::Int32), ir::kNone}, 0, 0});
          // One copy of body instruction old[b] whose loop index is `index` and accumulator `accumulator`;
          // `copied(v)` is this copy's value of the body's v (kNone: v comes from before the loop).
          auto copy_of = [&](size_t b, ValueId index, ValueId accumulator, auto&& copied) {
            Inst in = old[b];
            for (int s = 0; s < in.num_src; s++) {
              const ValueId v = in.src[s];
              const ValueId c = copied(v);
              in.src[s] = v == inner ? index : v == i ? accumulator : c != ir::kNone ? c : remap[v];
            }
            return emit(in);
          };
          // the body, instruction by instruction, U copies side by side (so the compiler sees U
          // isomorphic statements next to each other)
          std::map<ValueId, std::vector<ValueId>> copies;
          for (size_t b = inner + 1; b < end; b++) {
            std::vector<ValueId> ids(u_count);
            for (int u = 0; u < u_count; u++)
              ids[u] = copy_of(b, idx[u], acc[u], [&](ValueId v) {
                auto it = copies.find(v);
                return it == copies.end() ? ir::kNone : it->second[u];
              });
            copies[static_cast<ValueId>(b)] = ids;
          }
          Inst close = old[end];
          close.src[0] = r2;
          emit(close);
          // the tail: the last n % U iterations, once more the body, into acc[0]
          if (const int64_t tail = n % u_count; tail > 0) {
            Inst tail_range = old[inner];
            tail_range.src[0] = constant(static_cast<double>(tail), DType::Int32);
            ValueId r3 = emit(tail_range);
            ValueId tail_idx =
                emit(Inst{Op::Add, DType::Int32, 2, {r3, constant(static_cast<double>(n - tail), DType::Int32), ir::kNone}, 0, 0});
            std::map<ValueId, ValueId> tail_copy;
            for (size_t b = inner + 1; b < end; b++)
              tail_copy[static_cast<ValueId>(b)] = copy_of(b, tail_idx, acc[0], [&](ValueId v) {
                auto it = tail_copy.find(v);
                return it == tail_copy.end() ? ir::kNone : it->second;
              });
            Inst close_tail = old[end];
            close_tail.src[0] = r3;
            emit(close_tail);
          }
          for (size_t o = outer.size(); o-- > 0;) {  // END_RANGE of each enclosing loop of the chain
            Inst close_outer = old[end + outer.size() - o];
            close_outer.src[0] = remap[outer[o]];
            emit(close_outer);
          }
          // combine the partial accumulators pairwise, and leave the result in acc[0]
          std::vector<ValueId> level = acc;
          while (level.size() > 1) {
            std::vector<ValueId> next;
            for (size_t p = 0; p + 1 < level.size(); p += 2)
              next.push_back(emit(Inst{combine, old[i].dtype, 2, {level[p], level[p + 1], ir::kNone}, 0, 0}));
            if (level.size() % 2) next.push_back(level.back());  // an odd count (an OptPlan's U = 3): the last waits a level
            level = next;
          }
          emit(Inst{Op::Assign, old[i].dtype, 2, {acc[0], level[0], ir::kNone}, 0, 0});
          i = end + outer.size() + 1;
          done = true;
          k.opts.push_back({ir::AppliedOpt::UpcastReduce, u_count});
          upcast_any = true;
        }
      }
    }
    if (!done) {
      Inst in = old[i];
      for (int s = 0; s < in.num_src; s++) in.src[s] = remap[in.src[s]];
      remap[i] = emit(in);
      i++;
    }
  }
  k.insts = std::move(out);
  // The copies' indices are (r·U + u) + … with u a constant, and simplify ran before this pass: rebuilt through
  // the IR builder, each becomes (r·U + …) + u, one base shared by the U lanes plus a constant (the builder's
  // "constant offset added last"), which is what gcc's vectorizer needs to see U neighbouring loads, and the
  // listing loses its `x + 0`s. A window read as x[base + (o + k)], o the upcast loop (a convolution's weight
  // gradient summed along its output rows without an im2col, tried for LeNet-5's first layer), kept every
  // lane's o + k apart and gcc compiled it to scalar code: 3.8 ms, 1.0 ms rebuilt.
  if (upcast_any) simplify(k);
}

}  // namespace ts
