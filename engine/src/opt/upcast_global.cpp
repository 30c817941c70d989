// UPCAST of the innermost global loop around a reduction (tinygrad's UPCAST on an output axis):
// U neighbouring outputs are computed together, so one pass of the reduce loop feeds U accumulators
// from U contiguous elements.
//
//   for j in 0..N:                          for j0 in 0..N/16:
//     acc = 0                                 acc0 = … = acc15 = 0
//     for k in 0..K:                  →       for k in 0..K:
//       acc += x[i,k] * w[k,j]                  a = x[i,k]                         (loaded once)
//     out[i,j] = acc                            acc0 += a * w[k,16j0+0] … acc15 += a * w[k,16j0+15]
//                                             out[i,16j0+0] = acc0 … out[i,16j0+15] = acc15
//
// For a matmul this turns a loop that reads w down a column (one cache line per element) into one that
// reads 16 contiguous floats (one AVX-512 vector) per step of k, with 16 independent accumulators:
// register tiling along one axis (register_tile.cpp adds the second axis). It applies when the body
// has simple reduce blocks and some load in them moves by exactly one element when j does (otherwise
// the U copies would not be contiguous), or on the C device by two (a stride-2 convolution's or pooling's input
// row, which the C renderer loads as ts_vN_load2: two vector loads and a shuffle of their even elements; the
// depthwise 3x3 of 32 x 24 x 28 x 28 with stride 2, forward: scalar 0.36 ms, upcast 0.13 ms).
// A loop of at most 32 iterations is unrolled completely.
//
// upcast_loop() below does the rewriting for both UPCAST passes.
#include <cstdlib>
#include <map>
#include <numeric>

#include "opt/pass_manager.h"

namespace ts {
namespace {

using ir::Inst;
using ir::Op;
using ir::ValueId;

constexpr int kMaxUpcast = 32;  // two AVX-512 registers of floats

// Between a reduce block's DEFINE_ACCs and its RANGE: more accumulators, and values that earlier
// passes (loop-invariant code motion) moved in front of the loop.
bool in_block_prefix(Op op) { return op == Op::DefineAcc || op == Op::Const || op == Op::Load || is_alu(op); }

}  // namespace

int64_t reduce_trips(const std::vector<Inst>& insts, const ReduceBlock& block) {
  int64_t trips = 1;
  for (size_t x = block.range; x < block.end; x++)
    if (insts[x].op == Op::Range && insts[insts[x].src[0]].op == Op::Const) trips *= static_cast<int64_t>(insts[insts[x].src[0]].value);
  return trips;
}

std::vector<ReduceBlock> upcastable_body(const std::vector<Inst>& insts, size_t g) {
  const size_t g_end = end_of_range(insts, g);
  std::vector<ReduceBlock> blocks;
  for (size_t i = g + 1; i < g_end; i++) {
    if (insts[i].op == Op::DefineAcc) {
      ReduceBlock b{i, i, 0};
      while (b.range < g_end && in_block_prefix(insts[b.range].op)) b.range++;
      if (b.range >= g_end || insts[b.range].op != Op::Range || insts[b.range].arg != 0) return {};
      b.end = end_of_range(insts, b.range);
      // a reduce over several axes is a chain of perfectly nested reduce loops (a Linear's weight gradient
      // sums over batch and sequence): each inner loop ends right before the loop around it
      size_t enclosing_end = b.end;
      for (size_t x = b.range + 1; x < b.end; x++) {
        if (insts[x].op == Op::Range) {
          const size_t e = end_of_range(insts, x);
          if (insts[x].arg != 0 || e + 1 != enclosing_end) return {};
          enclosing_end = e;
        }
        if (insts[x].op == Op::DefineAcc) return {};
        if (insts[x].op == Op::Assign && (insts[x].src[0] < b.first_acc || insts[x].src[0] >= b.range)) return {};
      }
      blocks.push_back(b);
      i = b.end;
    } else if (insts[i].op == Op::Range || insts[i].op == Op::Assign) {
      return {};
    }
  }
  return blocks;
}

void upcast_loop(ir::Kernel& k, size_t g, int u_count, bool side_by_side) {
  const std::vector<Inst> old = k.insts;
  const size_t g_end = end_of_range(old, g);
  const int64_t n = static_cast<int64_t>(old[old[g].src[0]].value);
  std::vector<Inst> out;
  std::vector<ValueId> remap(old.size(), ir::kNone);
  // body value → its U copies; `varying` marks values that differ between the copies
  std::map<ValueId, std::vector<ValueId>> copies;
  std::vector<bool> varying(old.size(), false);
  auto emit = [&](Inst in) {
    out.push_back(in);
    return static_cast<ValueId>(out.size() - 1);
  };
  auto constant = [&](double v) { return emit(Inst{Op::Const, DType::Int32, 0, {ir::kNone, ir::kNone, ir::kNone}, 0, v}); };
  auto plain = [&](size_t i) {  // an instruction outside the rewritten loop
    Inst in = old[i];
    for (int s = 0; s < in.num_src; s++) in.src[s] = remap[in.src[s]];
    remap[i] = emit(in);
  };
  std::vector<ValueId> idx(u_count);
  auto clone = [&](size_t b, int u) {
    Inst in = old[b];
    for (int s = 0; s < in.num_src; s++) {
      ValueId v = in.src[s];
      if (v == g) in.src[s] = idx[u];
      else if (copies.count(v)) in.src[s] = copies[v][u];
      else in.src[s] = remap[v];
    }
    return emit(in);
  };
  // The U copies of the instructions in [from, to). A value that is the same in every copy (it reads
  // nothing that varies with the loop) is computed once and shared; accumulators and stores always get
  // their own copies. `side_by_side`: the U copies of each instruction are next to each other;
  // otherwise the whole range is written out once per copy.
  auto clone_range = [&](size_t from, size_t to) {
    for (size_t b = from; b < to; b++) {
      const Inst& in = old[b];
      bool varies = in.op == Op::DefineAcc || in.op == Op::Assign || in.op == Op::Store;
      for (int s = 0; s < in.num_src; s++) varies = varies || in.src[s] == g || varying[in.src[s]];
      varying[b] = varies;
      copies[static_cast<ValueId>(b)].assign(u_count, ir::kNone);
    }
    for (int pass = 0; pass < (side_by_side ? 1 : u_count); pass++)
      for (size_t b = from; b < to; b++)
        for (int u = side_by_side ? 0 : pass; u < (side_by_side ? u_count : pass + 1); u++) {
          std::vector<ValueId>& ids = copies[static_cast<ValueId>(b)];
          if (varying[b]) ids[u] = clone(b, u);
          else if (ids[0] == ir::kNone) ids.assign(u_count, clone(b, 0));
        }
  };

  for (size_t i = 0; i < g; i++) plain(i);
  ValueId g2 = ir::kNone;
  if (n / u_count > 1) {  // the loop stays, with N/U trips
    Inst range = old[g];
    range.src[0] = constant(static_cast<double>(n / u_count));
    g2 = emit(range);
    remap[g] = g2;
    ValueId scaled = emit(Inst{Op::Mul, DType::Int32, 2, {g2, constant(u_count), ir::kNone}, 0, 0});
    for (int u = 0; u < u_count; u++) idx[u] = emit(Inst{Op::Add, DType::Int32, 2, {scaled, constant(u), ir::kNone}, 0, 0});
  } else {  // unrolled completely: the loop disappears and the copies use the constants 0..U-1
    for (int u = 0; u < u_count; u++) idx[u] = constant(u);
  }
  for (size_t i = g + 1; i < g_end;) {
    if (old[i].op == Op::DefineAcc) {
      size_t r = i;
      while (in_block_prefix(old[r].op)) r++;
      clone_range(i, r);                     // U copies of each accumulator (and the values before the loop)
      const size_t e = end_of_range(old, r);
      // One shared reduce loop — or a shared chain of nested ones (upcastable_body checked that each
      // inner loop ends right before its enclosing one); what lies between two of them is cloned.
      std::vector<ValueId> shared;
      for (size_t at = r, stop = e;;) {
        Inst range = old[at];
        const ValueId bound = range.src[0];  // a constant, from before the loop or from its body
        range.src[0] = copies.count(bound) ? copies[bound][0] : remap[bound];
        shared.push_back(emit(range));
        copies[static_cast<ValueId>(at)] = std::vector<ValueId>(u_count, shared.back());
        size_t next = at + 1;
        while (next < stop && old[next].op != Op::Range) next++;
        clone_range(at + 1, next);
        if (next == stop) break;
        stop = end_of_range(old, next);
        at = next;
      }
      for (size_t s = shared.size(); s-- > 0;) emit(Inst{Op::EndRange, DType::Float32, 1, {shared[s], ir::kNone, ir::kNone}, 0, 0});
      i = e + 1;
    } else {  // a run of plain instructions up to the next reduce block or the loop's end
      size_t e = i;
      while (e < g_end && old[e].op != Op::DefineAcc) e++;
      clone_range(i, e);
      i = e;
    }
  }
  if (g2 != ir::kNone) emit(Inst{Op::EndRange, DType::Float32, 1, {g2, ir::kNone, ir::kNone}, 0, 0});
  for (size_t i = g_end + 1; i < old.size(); i++) plain(i);
  k.insts = std::move(out);
}

// The UPCAST_GLOBAL amount for loop `loop`: the plan's, when it is legal (it divides the trip count and
// the unrolled body stays under kMaxUnrolledInsts), or with kAuto the largest of largest, largest/2, …, 4
// that is; 0 for none.
static int upcast_amount(const ir::Kernel& k, size_t loop, int largest) {
  const std::vector<Inst>& insts = k.insts;
  const int64_t n = static_cast<int64_t>(insts[insts[loop].src[0]].value);
  const size_t body = end_of_range(insts, loop) - loop;
  auto legal = [&](int u) { return u >= 2 && u <= n && n % u == 0 && body * u <= kMaxUnrolledInsts; };
  if (const int planned = k.plan.get(ir::AppliedOpt::UpcastGlobal); planned != ir::OptPlan::kAuto)
    return legal(planned) ? planned : 0;
  for (int u = largest; u >= 4; u /= 2)
    if (legal(u)) return u;
  return 0;
}

// the L1 data caches of the x86-64 CPUs of these years: 64 sets of 64-byte lines, 8 ways (32 KiB, AMD Zen 4)
// to 12 (48 KiB, Intel since Ice Lake); the fewer ways, to be safe
constexpr int64_t kL1LineBytes = 64, kL1Sets = 64, kL1Ways = 8;

void interchange(ir::Kernel& k, size_t outer, size_t inner) {
  const std::vector<Inst> old = k.insts;
  const size_t inner_end = end_of_range(old, inner), outer_end = end_of_range(old, outer);
  Rewrite w(old);
  auto range_of = [&](size_t loop) {  // the loop's RANGE with its constant bound written before it
    Inst in = old[loop];
    const Inst& bound = old[in.src[0]];
    in.src[0] = w.emit(Inst{Op::Const, DType::Int32, 0, {ir::kNone, ir::kNone, ir::kNone, ir::kNone}, 0, bound.value});
    return w.emit(in);
  };
  auto end = [&](ValueId r) { w.emit(Inst{Op::EndRange, DType::Float32, 1, {r, ir::kNone, ir::kNone, ir::kNone}, 0, 0}); };
  for (size_t i = 0; i < outer; i++) w.copy(i);
  const ValueId i_loop = range_of(inner);
  const ValueId o_loop = range_of(outer);
  w.remap[outer] = o_loop;
  for (size_t i = outer + 1; i < inner; i++) w.copy(i);  // the index arithmetic of the outer loop
  w.remap[inner] = i_loop;
  for (size_t i = inner + 1; i < inner_end; i++) w.copy(i);
  end(o_loop);
  end(i_loop);
  for (size_t i = outer_end + 1; i < old.size(); i++) w.copy(i);
  k.insts = std::move(w.out);
}

// An elementwise kernel that reads a transposed view (a weight copied contiguous for x @ Wᵀ, a
// permute().contiguous()): out[k, n] = w[n, k], the load contiguous along the loop around the innermost one
// (k) and strided along the innermost (n), whose elements the stores write one after another. Every element
// of the innermost loop reads another cache line, and with a stride of 2 KiB the lines fall into the same
// few L1 sets and evict each other before the next k reads their neighbours: each line is loaded 16 times.
//
// The tile of a transpose (the packing step of a BLAS does the same): the innermost loop is upcast by U (U
// outputs side by side, read from U rows), and moved outside the k loop:
//
//   for k: for n: out[k,n] = w[n,k]     →     for n0: for k: out[k, U·n0+0 … U·n0+U-1] = w[U·n0+0 … +U-1, k]
//
// The U lines one n0 pass reads (one from each of U rows) serve the 16 k beside each other before the next
// lines, which the hardware prefetchers fetch along each row; the U stores of a k go to one output row side
// by side, which gcc packs into one vector store (U = 16 floats: a whole cache line). The lanes stored in
// step and read from U lines are what makes it fast: the earlier tile, lanes along k (U contiguous loads,
// U stores to U output rows, 1 KiB apart), wrote 16 partial lines per k and left its scalar stores waiting
// on the lines' reads from memory (the MLP's E_512_256, with the weight in DRAM after the optimizer's
// step: 0.2 ms alone; this tile 0.12 ms, and 46 → 23 us with everything in the caches).
// Only where the lines conflict: with a stride of 784 floats they spread over every set and stay cached, and
// the untiled loop is left to the compiler's vectorizer (tiled, a 512×784 transpose went 137 → 70 us alone,
// but the MLP's panel packing of that weight 65 → 79 us, and its training step did not change).
static void upcast_transpose(ir::Kernel& k, size_t inner) {
  const std::vector<Inst>& insts = k.insts;
  for (const Inst& in : insts)
    if (in.op == Op::DefineAcc || (in.op == Op::Range && in.arg == 0)) return;  // elementwise kernels only
  size_t outer = insts.size();
  for (size_t i = 0; i < inner; i++)
    if (insts[i].op == Op::Range && insts[i].arg == 1) outer = i;
  if (outer == insts.size() || insts[insts[outer].src[0]].op != Op::Const) return;
  for (size_t i = outer + 1; i < inner; i++)  // perfectly nested: only index arithmetic in between
    if (!is_alu(insts[i].op) && insts[i].op != Op::Const) return;
  const size_t inner_end = end_of_range(insts, inner);
  if (end_of_range(insts, outer) != inner_end + 1) return;
  // elements the index of load/store x moves by when `loop` moves by one
  auto step = [&](size_t x, size_t loop) {
    return eval_index(insts, insts[x].src[1], static_cast<ValueId>(loop), 1) -
           eval_index(insts, insts[x].src[1], static_cast<ValueId>(loop), 0);
  };
  // The L1 sets that accesses `stride` elements of buffer x's type apart fall into: 64 sets of 64-byte
  // lines, so a stride of s lines uses 64 / gcd(s, 64) of them; 0 when the stride is not whole lines.
  auto sets_of = [&](size_t x, int64_t stride) -> int64_t {
    const int64_t bytes = std::abs(stride) * static_cast<int64_t>(dtype_size(insts[insts[x].src[0]].dtype));
    if (bytes < kL1LineBytes || bytes % kL1LineBytes) return 0;
    return kL1Sets / std::gcd(bytes / kL1LineBytes, kL1Sets);
  };
  // A loop whose index is compared with constants is a concatenation's gradient (a chunk()'s parts padded to
  // the whole and added): split_index_set takes it apart into one loop per part later, and a tile across the
  // parts would keep a masked load per lane, which gcc leaves scalar (the q, k and v gradients of a transformer
  // of dim 128 written back into (16, 32, 384): 0.25 ms tiled, 0.05 ms split).
  for (size_t x = inner + 1; x < inner_end; x++)
    if (insts[x].op == Op::CmpLt && (insts[x].src[0] == inner || insts[x].src[1] == inner) &&
        (insts[insts[x].src[0]].op == Op::Const || insts[insts[x].src[1]].op == Op::Const))
      return;
  const int64_t trips = static_cast<int64_t>(insts[insts[inner].src[0]].value);
  bool transposed = false;  // some load, contiguous along the outer loop, reads one pass of the inner loop
  for (size_t x = inner + 1; x < inner_end; x++) {  // from fewer L1 sets than it has lines
    if (insts[x].op == Op::Store && step(x, inner) != 1) return;  // the lanes' stores would not be side by side
    if (insts[x].op != Op::Load || step(x, outer) != 1) continue;
    const int64_t sets = sets_of(x, step(x, inner));
    if (sets && insts[insts[inner].src[0]].op == Op::Const && trips > sets * kL1Ways) transposed = true;
  }
  if (!transposed) return;
  // The heuristic: a cache line of floats, or less where it does not divide, and no more lanes than the L1
  // keeps apart. Each lane reads a stream of its own, `step` elements from the next lane's; when those
  // streams are a multiple of 4 KiB apart they all fall into one L1 set, and more lanes than its ways
  // evict each other before the k beside them reads them again.
  int largest = 16;
  for (size_t x = inner + 1; x < inner_end; x++) {
    if (insts[x].op != Op::Load) continue;
    const int64_t sets = sets_of(x, step(x, inner));  // the sets the lanes spread over
    while (sets && largest > 4 && (largest + sets - 1) / sets > kL1Ways) largest /= 2;
  }
  const int chosen = upcast_amount(k, inner, largest);
  if (!chosen) {
    // No lane count divides the rows (a channels-first gradient copied channels-last for 50 channels:
    // (50, 4096) → (4096, 50), 585 µs with each element 16 KiB from the last). The lanes go along the loads
    // instead: U neighbouring k read side by side (one vector load per n), each lane stores into its own
    // output row, and the rows of one block (U × 50 floats) stay in L1 while the n loop fills them (127 µs).
    const int64_t k_trips = static_cast<int64_t>(insts[insts[outer].src[0]].value);
    int lanes = 0;
    for (int u : {16, 8, 4})
      if (k_trips % u == 0 && k_trips > u && (inner_end - inner) * u <= kMaxUnrolledInsts) {
        lanes = u;
        break;
      }
    if (!lanes || k.plan.get(ir::AppliedOpt::UpcastGlobal) != ir::OptPlan::kAuto) return;
    interchange(k, outer, inner);  // for n: for k
    upcast_loop(k, global_loops(k.insts).back(), lanes, /*side_by_side=*/true);
    k.opts.push_back({ir::AppliedOpt::UpcastGlobal, lanes});
    const std::vector<size_t> loops = global_loops(k.insts);  // for n: for k0  →  for k0: for n
    interchange(k, loops[loops.size() - 2], loops.back());
    return;
  }
  upcast_loop(k, inner, chosen, /*side_by_side=*/true);
  k.opts.push_back({ir::AppliedOpt::UpcastGlobal, chosen});
  if (trips == chosen) return;  // unrolled completely: the k loop is the innermost one left
  // the two global loops after the upcast: the k loop and, inside it, the n0 loop of the lanes
  const std::vector<size_t> loops = global_loops(k.insts);
  if (loops.size() >= 2 && end_of_range(k.insts, loops[loops.size() - 2]) == end_of_range(k.insts, loops.back()) + 1) {
    bool nested = true;  // only index arithmetic between them
    for (size_t i = loops[loops.size() - 2] + 1; i < loops.back(); i++)
      nested = nested && (is_alu(k.insts[i].op) || k.insts[i].op == Op::Const);
    if (nested) interchange(k, loops[loops.size() - 2], loops.back());
  }
}

// An elementwise kernel whose innermost loop (at most kMaxUpcast trips) is taken apart by a division: a
// max-pool's gradient writes (N, C, H, W) and reads the pooled gradient at (h / 2, w / 2). gcc's loop
// vectorizer cannot analyse a load at w / 2 and leaves the loop scalar; upcast completely, every lane's
// w / 2 is a constant, equal loads merge (simplify), and the lanes' side-by-side stores let gcc's SLP
// pack the group (the CNN sample's max-pool gradient E_64_8_8_8: 0.051 -> 0.016 ms in its step). The same
// for a division of any index the loop moves: an im2col written in column panels of 32 positions over
// image rows of 28 splits p = 32·panel + lane into image, row and column with three div/mods by 28 and 784
// per element; upcast, each lane's are loop-invariant in the tap loops inside the panel's and computed
// once per panel (LeNet-5's first layer: 720 -> 440 us).
// A row that the later passes take apart into (Q, g) loops, Q >= kLoopRowMinOuter and g <= kLoopRowMaxGroup,
// without a division left in it (w / 2, w % 2 of a 2x2 max-pool's gradient: delinearize_reduce runs it as (W / 2,
// 2)) is not upcast: gcc's loop vectorizer takes the Q loop with its g lanes as an interleaved group, where upcast
// its SLP packed each pooled value twice from scalars (max-pool gradients of 2x2 windows alone, the forty-fifth
// session's Xeon: 64 x 20 x 24 x 24 0.81 -> 0.29 ms, 32 x 6 x 28 x 28 0.155 -> 0.078, 64 x 16 x 16 x 16 0.27 ->
// 0.084, 16 x 32 x 12 x 12 0.074 -> 0.042). Rows of 8 or fewer stay upcast: as loops their Q is 4 trips, less than
// a vector (64 x 8 x 8 x 8: 0.033 upcast, 0.036 as loops; 4 x 4 0.016 and 0.020); so does a row split into
// loops of 5 x 5 (Caffe's first layer's taps padded to 32, an im2col of (N, 24, 24, 32): 0.28 upcast, 0.76 as
// loops).
constexpr int64_t kLoopRowMinOuter = 6, kLoopRowMaxGroup = 4;

// Whether the innermost loop of elementwise kernel `k`, not upcast, becomes such (Q, g) loops without a division
// inside, tried on a copy of the kernel with the passes that decide it: split_index_set (a row padded to 32,
// LeNet-5's widened rows of 28, is split at its gate), simplify (the pad's clamps and the divisions they hid fold,
// now that each piece's range is known) and delinearize_reduce (the pieces as nested loops). Before them
// LeNet-5's row is divided by 2, 28, 56 and 784. In the copy, every innermost loop (the row's pieces or the loops
// delinearize_reduce made of them) has no division, and either kLoopRowMinOuter trips or more (a plain row the
// loop vectorizer takes) or at most kLoopRowMaxGroup inside a loop of kLoopRowMinOuter or more; one at least is
// the latter.
static bool later_passes_run_it_as_grouped_loops(const ir::Kernel& k) {
  ir::Kernel trial = k;
  split_index_set(trial);
  simplify(trial);
  delinearize_reduce(trial);
  const std::vector<Inst>& insts = trial.insts;
  auto trips = [&](size_t range) {
    const Inst& bound = insts[insts[range].src[0]];
    return bound.op == Op::Const ? static_cast<int64_t>(bound.value) : int64_t{0};
  };
  bool grouped = false;
  std::vector<size_t> open;  // the RANGEs around the instruction walked
  bool innermost = false;    // no RANGE opened since the last one
  bool divides = false;      // a division since the last RANGE
  for (size_t i = 0; i < insts.size(); i++) {
    const Op op = insts[i].op;
    if (op == Op::IDiv || op == Op::Mod) divides = true;
    if (op == Op::Range) {
      open.push_back(i);
      innermost = true;
      divides = false;
    } else if (op == Op::EndRange) {
      if (innermost && !open.empty()) {
        const int64_t t = trips(open.back()), around = open.size() > 1 ? trips(open[open.size() - 2]) : 0;
        if (divides) return false;
        if (t <= kLoopRowMaxGroup && around >= kLoopRowMinOuter) grouped = true;
        else if (t < kLoopRowMinOuter) return false;
      }
      if (!open.empty()) open.pop_back();
      innermost = false;
    }
  }
  return grouped;
}

static bool upcast_divided_index(ir::Kernel& k, size_t inner) {
  const std::vector<Inst>& insts = k.insts;
  for (const Inst& in : insts)
    if (in.op == Op::DefineAcc || (in.op == Op::Range && in.arg == 0)) return false;  // elementwise kernels only
  const int64_t n = static_cast<int64_t>(insts[insts[inner].src[0]].value);
  if (n > kMaxUpcast) return false;
  bool divided = false;
  std::vector<int8_t> memo(insts.size(), -1);
  for (size_t x = inner + 1; x < end_of_range(insts, inner); x++)
    divided = divided || ((insts[x].op == Op::IDiv || insts[x].op == Op::Mod) && insts[insts[x].src[1]].op == Op::Const &&
                          depends_on(insts, insts[x].src[0], static_cast<ValueId>(inner), memo));
  if (!divided) return false;
  const int chosen = upcast_amount(k, inner, static_cast<int>(n));
  if (chosen != n) return false;
  // (the trial after the cheap checks: it copies the kernel and runs three passes on it)
  if (global_loops(insts).front() != inner && later_passes_run_it_as_grouped_loops(k)) return false;
  upcast_loop(k, inner, chosen, /*side_by_side=*/true);
  k.opts.push_back({ir::AppliedOpt::UpcastGlobal, chosen});
  return true;
}

// Whether a reduce block of loop g's body selects on a bool it loads (WHERE(LOAD.bool, x, y)) that does not
// depend on g: every output of the loop takes the same branch (a one-hot's product, see upcast_global).
static bool selects_on_invariant_bool(const std::vector<Inst>& insts, size_t g) {
  std::vector<int8_t> memo(insts.size(), -1);
  for (const ReduceBlock& b : upcastable_body(insts, g))
    for (size_t x = b.range + 1; x < b.end; x++)
      if (insts[x].op == Op::Where && insts[insts[x].src[0]].op == Op::Load &&
          !depends_on(insts, insts[x].src[0], static_cast<ValueId>(g), memo))
        return true;
  return false;
}

// The innermost global loop (the last global RANGE), when it has a constant bound; insts.size() otherwise.
static size_t innermost_global_loop(const std::vector<Inst>& insts) {
  size_t g = insts.size();
  for (size_t i = 0; i < insts.size(); i++)
    if (insts[i].op == Op::Range && insts[i].arg == 1) g = i;
  return g == insts.size() || insts[insts[g].src[0]].op != Op::Const ? insts.size() : g;
}

size_t upcast_global_loop(const std::vector<Inst>& insts, bool every_other) {
  const size_t g = innermost_global_loop(insts);
  if (g == insts.size()) return g;
  bool rows = false;  // some load in a reduce block moves by one element (or two) when the loop does
  bool inner_rows = false, inner_gathers = false;  // the same, and loads lanes would gather, in innermost loops
  for (const ReduceBlock& b : upcastable_body(insts, g)) {
    size_t inner = b.range;  // the innermost of the block's perfectly nested reduce loops
    for (size_t x = b.range + 1; x < b.end; x++)
      if (insts[x].op == Op::Range) inner = x;
    for (size_t x = b.range + 1; x < b.end; x++) {
      if (insts[x].op != Op::Load) continue;
      auto step_along = [&](size_t loop) {
        return eval_index(insts, insts[x].src[1], static_cast<ValueId>(loop), 1) -
               eval_index(insts, insts[x].src[1], static_cast<ValueId>(loop), 0);
      };
      const int64_t step = step_along(g);
      const bool row = step == 1 || (every_other && step == 2);
      rows = rows || row;
      if (x > inner) {  // in the innermost loop (after its RANGE come only its body and the loops' ends)
        inner_rows = inner_rows || row;
        inner_gathers = inner_gathers || (!row && step != 0 && step_along(inner) == 1);
      }
    }
  }
  // Where only loads outside the innermost reduce loop move by one element with this loop (a per-channel value
  // loaded once per image), while the loads that loop runs through read along it and lie rows apart across
  // the outputs (a BatchNorm backward's sums over (N, H, W) of NCHW tensors, a channel's H·W pixels one row),
  // upcast lanes would gather every element of the hot loop from another row: the rows are left to
  // UPCAST_REDUCE. Three of MobileNet's r_128_32_4_4 (its last block's sums over (32, ·, 4, 4)), alone: upcast
  // by 32 channels 23-26 us; by 8 along the rows, one vector accumulator (the C renderer's RowExpr), 11-13 us.
  // A sum that also reads a tensor in (N·H·W, C) order (a pointwise convolution's output, before its permute)
  // moves by one element with the channel in that loop too, and keeps the upcast.
  if (inner_gathers && !inner_rows) return insts.size();
  return rows ? g : insts.size();
}

void upcast_global(ir::Kernel& k) {
  if (has_applied(k, ir::AppliedOpt::TransposeTile)) return;  // its tiles are the upcast (transpose_tile.cpp)
  const std::vector<Inst>& insts = k.insts;
  const size_t innermost = innermost_global_loop(insts);
  if (innermost == insts.size()) return;
  if (upcastable_body(insts, innermost).empty()) {
    if (!upcast_divided_index(k, innermost)) upcast_transpose(k, innermost);
    return;
  }
  const size_t g = upcast_global_loop(insts, rows_every_other(k.target));
  if (g == insts.size()) return;
  // the heuristic: the largest of 32, 16, 8, 4 that divides the loop, at most two of the target's vector
  // registers (32 floats with AVX-512, 16 with AVX2: the register tile's NR); a loop that PADTO padded to a
  // multiple of 8 or less (a short row, see padto.cpp) is upcast by that amount
  // A row of 17 to 31 that PADTO padded to 32 (a 3×3 convolution's 28-wide rows of MNIST-sized images) is
  // upcast by 16, not unrolled whole: two blocks of 16 leave REGISTER_TILE a loop to tile (7 output rows of 28
  // share each step of the taps' loops), which 32 accumulators per row leave it without. Measured on C (1
  // thread, Zen 4), the depthwise 3×3 of 32×16×28×28: 0.167 → 0.121 ms.
  const int64_t n = static_cast<int64_t>(insts[insts[g].src[0]].value);
  const int max_upcast = std::min(kMaxUpcast, 2 * k.target.vector_floats());
  int largest = max_upcast;
  for (const ir::AppliedOpt& opt : k.opts)
    if (opt.kind == ir::AppliedOpt::Padto && opt.amount <= 8) largest = opt.amount;
    else if (opt.kind == ir::AppliedOpt::Padto && n <= kMaxUpcast) largest = std::min(16, max_upcast);
  // On AVX2 too the upcast is two vectors (16 floats) and the register tile 6 rows (register_tile.cpp), whatever
  // the length of the reduce. Until the C renderer's FMA builtins, a reduce of 768 trips or more took one vector
  // and 8 or 10 rows there, which the broadcasts that gcc assembled from vector loads made faster; with the
  // builtins the 6 x 16 tile won every case measured (Zen 3, 1 thread, the kernel alone): (100, 784) @ (784, 304)
  // 0.57-0.62 -> 0.48 ms, (100, 1024) @ (1024, 512) 2.2-2.4 -> 1.1 ms, (40, 784) @ (784, 256) 0.25 -> 0.22 ms,
  // (32, 784) @ (784, 512) 0.60 -> 0.40 ms; and with w packed in panels of 16, (1024, 1024) @ (1024, 1024)
  // 34.5 -> 22.2 ms (95 GFLOP/s).
  int chosen = upcast_amount(k, g, largest);
  // A row of 20 or 28 that PADTO left as it is (its padded lanes would keep their masks) is upcast by half of
  // it, not by 4, the largest power of two that divides it: 10 or 14 accumulators per row (vectors of 8, 4, 2)
  // and a register tile of 3 beside them. Measured on C (1 thread, Zen 4), the weight gradient of the depthwise
  // 3×3 of 32×16×28×28 (r_16_3_3_28_32_28: 9 taps × 28 columns, summed over the batch and rows): 0.62 → 0.28
  // ms; padded to 32 and upcast by 16, 0.44.
  const size_t body = end_of_range(insts, g) - g;
  if (chosen == 4 && k.plan.get(ir::AppliedOpt::UpcastGlobal) == ir::OptPlan::kAuto && n > 16 && n <= kMaxUpcast &&
      n % 8 == 4 && body * static_cast<size_t>(n / 2) <= kMaxUnrolledInsts)
    chosen = static_cast<int>(n / 2);
  // A one-hot's product (tinygrad's Tensor.embedding: where(token == v, weight[v, :], 0) summed over the
  // vocabulary v, and its weight gradient, where(token == v, grad[p, :], 0) summed over positions p): the reduce
  // selects on a bool loaded once per trip, the same for every output of the loop. The C renderer makes the
  // select a branch around the trip's adds, taken once in V; what costs is that branch and the loop around it,
  // once per trip for every upcast group. Upcast by the whole row (up to 16 of the target's vectors), the
  // branch is taken apart from the adds it skips once for all of them. Measured on C (1 thread, Zen 3, one-hot
  // bools of an 11-token vocabulary, rows of 128; the generated kernels alone): the embedding of 512 positions
  // 23 -> 6.1 us, its weight gradient 31 -> 6.0 us (the same with selects instead of branches: 57 us).
  if (k.plan.get(ir::AppliedOpt::UpcastGlobal) == ir::OptPlan::kAuto && !k.target.workgroups() &&
      selects_on_invariant_bool(insts, g)) {
    const int whole_row = static_cast<int>(std::min<int64_t>(n, 16 * k.target.vector_floats()));
    if (const int wide = upcast_amount(k, g, whole_row); wide > chosen) chosen = wide;
  }
  if (!chosen) return;
  upcast_loop(k, g, chosen, /*side_by_side=*/true);
  k.opts.push_back({ir::AppliedOpt::UpcastGlobal, chosen});
}

}  // namespace ts
