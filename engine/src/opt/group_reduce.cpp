// GROUP (tinygrad's OptOps.GROUP): a reduction split across the lanes of a GPU workgroup.
//
// Without it a GPU runs one thread per output, and each thread walks its whole reduce loop alone: a full
// sum of a big tensor is one thread, a softmax over 8 rows is 8 threads, and the rest of the GPU idles.
// With GROUP(L) each output gets a workgroup of L threads. Lane l reduces every L-th element of the loop
// (l, l+L, l+2L, ...: neighbouring lanes read neighbouring elements, which a GPU merges into one wide
// load), writes its partial result to local memory, and after a BARRIER the partials are combined:
//
//   acc = 0                                  DEFINE_LOCAL partial[L]
//   for r in 0..N:        (reduce)           for lane in 0..L:                (local loop: the threads)
//     acc += x[r]                              acc_lane = 0
//   out = f(acc)                               for q in 0..N/L:               (reduce)
//                                                acc_lane += x[q*L + lane]
//                                              partial[lane] = acc_lane
//                                            BARRIER
//                                            acc = 0
//                                            for t in 0..L: acc += partial[t]  (every lane, same values)
//                                            out = f(acc)                      (stored by lane 0)
//
// Read sequentially (ir.h: a local loop is a plain loop, BARRIER a no-op) this is the same sum in another
// order, which is how the interpreter and the C device run it; a GPU runs the local loop's iterations as
// the workgroup's threads (OpenCL get_local_id, GLSL gl_LocalInvocationID, CUDA threadIdx) and the BARRIER
// as barrier(CLK_LOCAL_MEM_FENCE) / memoryBarrierShared()+barrier() / __syncthreads(). Sums are
// reassociated, so results change in the last bits — identically on every device, which all run this IR.
//
// Legal for a reduce block (DEFINE_ACCs, a reduce RANGE with a constant bound, its body, END_RANGE) whose
// enclosing loops are all global, when every accumulator the block updates is a sum (ADD, MULACC) or a
// max (MAX) of float32 or int32 — `acc = acc op x`, nothing else reading acc inside the loop — and one
// loop of the block that holds every ASSIGN has a trip count that is a multiple of L (the innermost such
// loop is split: it is the one along which the loads are contiguous). Only on devices with workgroups and
// local memory (ir::Kernel::target, set by realize for the target device), for L a power of two from 2
// to 256 within the device's workgroup size, with the partials (accumulators × L × 4 bytes) within its
// local memory and within 16 KiB (kMaxPartialBytes). Every legal block of the kernel is grouped; what was
// applied is GROUP(L) in Kernel::opts.
//
// GROUPTOP(L) (tinygrad's name: the lanes are the top, slowest axis of the split loop) is the same with
// lane l taking the contiguous chunk l*N/L .. (l+1)*N/L - 1. A GPU runs its lanes in lockstep, so GROUP's
// interleaving gives one wide load per step; PoCL on a CPU runs the lanes of a workgroup one after another
// between barriers, so GROUP has each lane stride through all of memory and GROUPTOP streams. The plan
// asks for one of them (GROUP wins when both are set).
//
// The pass runs after the UPCAST passes of the output loops (whose partial outputs it takes as they are:
// one local array per accumulator) and before upcast_reduce, max_reduce_as_int and fuse_multiply_add,
// which then work on each lane's loop (and on the combine loop) as on any reduce loop. The BEAM search
// (TENSORSCOPE_BEAM) tries the amounts autotune.cpp lists.
//
// The default plan (kAuto) applies GROUP on a GPU whose lanes run in lockstep (Target::lockstep_gpu: warps
// of 32 or more) to a kernel whose reductions run on at most kAutoGroupThreads threads and have at most
// kAutoGroupMaxAccs accumulators each: 256 lanes where legal, else 16. This is tinygrad's hand-coded rule
// (GROUPTOP 256, else 16, for at most 2048 outputs) with a higher bound, since a GPU holds hundreds of
// thousands of threads. Measured on an H100 (CUDA, kernel times): a sum of 16M 4.41 -> 0.046 ms (PyTorch
// 0.046), a softmax over 4096 rows of 4096 0.95 -> 0.10 ms (PyTorch 0.07); register-tiled matmuls were
// 2-3x slower grouped, hence the accumulator bound. Elsewhere it stays off: on PoCL (the lanes of a
// workgroup run one after another on a CPU core) GROUP made every reduction 3-7x slower and GROUPTOP paid
// only for sums over a few long rows (8 rows of 2M: about 1.5-2x); lavapipe's subgroups of 8 are a CPU's too.
#include <algorithm>
#include <optional>

#include "opt/pass_manager.h"

namespace ts {
namespace {

using ir::Inst;
using ir::Op;
using ir::ValueId;

constexpr int kMaxGroup = 256;
// At most this many bytes of partials (accumulators × lanes × 4) per workgroup, whatever the device allows:
// the 16 KiB every Vulkan device guarantees (maxComputeSharedMemorySize). More means a block of many
// accumulators (a register-tiled matmul: 256 of them), whose outputs keep the GPU busy without GROUP; on
// PoCL such a kernel with GROUP(256) ran 42 s per launch and stalled the search.
constexpr uint64_t kMaxPartialBytes = 16384;
// The default plan groups a kernel on a lockstep GPU when it has at most this many threads ungrouped.
constexpr int64_t kAutoGroupThreads = 16384;
// ... and when each reduce it groups has at most this many accumulators: a register-tiled matmul's (256) are
// parallel enough across its outputs, and grouped it ran 2-3x slower on an H100 (1024^2: 1.05 -> 2.11 ms).
constexpr size_t kAutoGroupMaxAccs = 4;

struct Block {
  size_t range, end;      // the outermost reduce RANGE and its END_RANGE
  size_t split;           // the RANGE split among the lanes (range or a loop inside it)
  std::vector<ValueId> accs;  // the accumulators the block updates (defined before it)
  std::vector<Op> combine;    // per accumulator: Add or Max
};

// How ASSIGN `a` (inside a block) updates its accumulator: Add or Max for acc = acc op x (MULACC x, y, acc
// is a sum), Op::Barrier (no reduction) otherwise.
Op reduction_of(const std::vector<Inst>& insts, const Inst& a) {
  const ValueId acc = a.src[0];
  const Inst& v = insts[a.src[1]];
  if (v.dtype != DType::Float32 && v.dtype != DType::Int32) return Op::Barrier;
  if ((v.op == Op::Add || v.op == Op::Max) && (v.src[0] == acc) != (v.src[1] == acc)) return v.op;
  if (v.op == Op::MulAcc && v.src[2] == acc && v.src[0] != acc && v.src[1] != acc) return Op::Add;
  return Op::Barrier;
}

// The reduce block at `range` (a reduce RANGE inside global loops only), if GROUP(lanes) may split it.
std::optional<Block> groupable(const ir::Kernel& k, size_t range, int lanes) {
  const std::vector<Inst>& insts = k.insts;
  Block b;
  b.range = range;
  b.end = end_of_range(insts, range);
  if (b.end >= insts.size()) return std::nullopt;
  // the accumulators, each with one consistent reduction; their reduce op is the only reader of each
  std::vector<int> uses(insts.size(), 0);
  std::vector<size_t> assigns;
  for (size_t i = range + 1; i < b.end; i++) {
    const Inst& in = insts[i];
    if (in.op == Op::Store || in.op == Op::Barrier || in.op == Op::DefineLocal) return std::nullopt;
    if (in.op == Op::Range && in.arg != ir::kReduceLoop) return std::nullopt;
    for (int s = 0; s < in.num_src; s++) uses[in.src[s]]++;
    if (in.op == Op::Assign) assigns.push_back(i);
  }
  for (size_t i : assigns) {
    const Inst& a = insts[i];
    if (a.src[0] > range) continue;  // an accumulator of an inner block: checked below with the split loop
    const Op op = reduction_of(insts, a);
    if (op == Op::Barrier) return std::nullopt;
    // acc is read by its reduce op only (counted with the ASSIGN's own use), and that value by the ASSIGN
    if (uses[a.src[0]] != 2 || uses[a.src[1]] != 1) return std::nullopt;
    auto it = std::find(b.accs.begin(), b.accs.end(), a.src[0]);
    if (it != b.accs.end()) return std::nullopt;  // assigned twice in the loop
    b.accs.push_back(a.src[0]);
    b.combine.push_back(op);
  }
  if (b.accs.empty()) return std::nullopt;
  // the loop to split: the innermost reduce loop of the block that holds every ASSIGN, whose bound is a
  // multiple of the lanes, and inside which only the block's accumulators (or its own) are assigned
  std::optional<size_t> split;
  for (size_t q = range; q < b.end; q++) {
    if (insts[q].op != Op::Range) continue;
    const size_t q_end = end_of_range(insts, q);
    const bool holds_all = std::all_of(assigns.begin(), assigns.end(), [&](size_t a) { return a > q && a < q_end; });
    if (!holds_all) continue;
    bool own_accs = true;
    for (size_t a : assigns) {
      const ValueId acc = insts[a].src[0];
      own_accs = own_accs && (acc > q || std::find(b.accs.begin(), b.accs.end(), acc) != b.accs.end());
    }
    const Inst& bound = insts[insts[q].src[0]];
    if (own_accs && bound.op == Op::Const && static_cast<int64_t>(bound.value) % lanes == 0 &&
        bound.value >= lanes)
      split = q;
  }
  if (!split) return std::nullopt;
  b.split = *split;
  return b;
}

// The threads that run the kernel's reductions without GROUP: the most, over its reduce loops, of the
// product of the trip counts of the global loops around one (a softmax's row loop, not the loop over the
// row's outputs after its reductions); -1 when one of those is not a constant.
int64_t reducing_threads(const ir::Kernel& k) {
  int64_t most = 0;
  std::vector<size_t> open;  // RANGEs open at i
  for (size_t i = 0; i < k.insts.size(); i++) {
    const Inst& in = k.insts[i];
    if (in.op == Op::EndRange) open.pop_back();
    if (in.op != Op::Range) continue;
    if (in.arg == ir::kReduceLoop) {
      int64_t threads = 1;
      for (size_t r : open) {
        if (k.insts[r].arg != ir::kGlobalLoop) continue;
        const Inst& bound = k.insts[k.insts[r].src[0]];
        if (bound.op != Op::Const) return -1;
        threads *= static_cast<int64_t>(bound.value);
      }
      most = std::max(most, threads);
    }
    open.push_back(i);
  }
  return most;
}

// Splits every legal reduce block of `k` across `lanes` lanes (GROUPTOP's order when `top`); false when
// nothing was applied, or when a block would have more than `max_accs` accumulators.
bool apply_group(ir::Kernel& k, int lanes, bool top, size_t max_accs = SIZE_MAX) {
  const ir::Target& t = k.target;
  if (!t.workgroups() || t.local_memory_bytes == 0 || lanes < 2 || lanes > kMaxGroup || (lanes & (lanes - 1)) != 0 ||
      static_cast<uint32_t>(lanes) > t.max_workgroup_size || ir::local_loop_lanes(k) > 0)
    return false;

  // the reduce blocks directly inside global loops (or at the top level)
  const std::vector<Inst>& old = k.insts;
  std::vector<Block> blocks;
  std::vector<size_t> open;  // RANGEs open at i
  uint64_t local_bytes = 0;
  for (size_t i = 0; i < old.size(); i++) {
    if (old[i].op == Op::EndRange) open.pop_back();
    if (old[i].op != Op::Range) continue;
    const bool in_globals = std::all_of(open.begin(), open.end(), [&](size_t r) { return old[r].arg == ir::kGlobalLoop; });
    open.push_back(i);
    if (old[i].arg != ir::kReduceLoop || !in_globals) continue;
    std::optional<Block> b = groupable(k, i, lanes);
    if (!b) continue;
    if (b->accs.size() > max_accs) return false;
    // the accumulators are defined inside the innermost global loop, where the combined ones will be
    const size_t scope = open.size() >= 2 ? open[open.size() - 2] : 0;
    if (open.size() >= 2 && std::any_of(b->accs.begin(), b->accs.end(), [&](ValueId a) { return a < scope; })) continue;
    local_bytes += b->accs.size() * static_cast<uint64_t>(lanes) * 4;
    if (local_bytes > std::min<uint64_t>(t.local_memory_bytes, kMaxPartialBytes)) return false;  // nothing is applied
    blocks.push_back(*b);
  }
  if (blocks.empty()) return false;

  // Rebuild the kernel. `remap`: old id → new id (an accumulator's changes: its lane's, then the combined).
  std::vector<Inst> out;
  std::vector<ValueId> remap(old.size(), ir::kNone);
  auto emit = [&](Inst in) {
    out.push_back(in);
    return static_cast<ValueId>(out.size() - 1);
  };
  auto constant = [&](double v, DType dt) { return emit(make_inst(Op::Const, dt, {}, 0, v)); };
  // at the top: the constants every block uses and one local array per (block, accumulator)
  const ValueId lanes_c = constant(lanes, DType::Int32);
  std::vector<std::vector<ValueId>> partial(blocks.size());
  for (size_t b = 0; b < blocks.size(); b++)
    for (ValueId acc : blocks[b].accs) partial[b].push_back(emit(make_inst(Op::DefineLocal, old[acc].dtype, {}, lanes)));
  std::vector<int> block_at(old.size(), -1);  // RANGE → its block
  std::vector<char> moved(old.size(), 0);     // accumulators defined again inside the local loop
  for (size_t b = 0; b < blocks.size(); b++) {
    block_at[blocks[b].range] = static_cast<int>(b);
    for (ValueId acc : blocks[b].accs) moved[acc] = 1;
  }
  std::pair<size_t, ValueId> split_loop{old.size(), ir::kNone};  // (old RANGE, new RANGE) of the current split
  int current = -1;
  ValueId lane = ir::kNone;
  for (size_t i = 0; i < old.size(); i++) {
    Inst in = old[i];
    if (moved[i]) continue;  // emitted inside the local loop
    if (block_at[i] >= 0) {  // the block begins: the lanes, each with its own accumulators
      current = block_at[i];
      lane = emit(make_inst(Op::Range, DType::Int32, {lanes_c}, ir::kLocalLoop));
      const Block& b = blocks[current];
      for (size_t a = 0; a < b.accs.size(); a++) {
        Inst acc = old[b.accs[a]];
        if (b.combine[a] == Op::Add) acc.value = 0;  // max is idempotent: the initial value may stay
        remap[b.accs[a]] = emit(acc);
      }
    }
    if (current >= 0 && i == blocks[current].split) {  // q runs N/L trips; r = q*L + lane (GROUPTOP: lane*N/L + q)
      const ValueId trips = constant(old[in.src[0]].value / lanes, DType::Int32);
      const ValueId q = emit(make_inst(Op::Range, DType::Int32, {trips}, ir::kReduceLoop));
      if (top) {
        remap[i] = emit(make_inst(Op::Add, DType::Int32, {emit(make_inst(Op::Mul, DType::Int32, {lane, trips})), q}));
      } else {
        remap[i] = emit(make_inst(Op::Add, DType::Int32, {emit(make_inst(Op::Mul, DType::Int32, {q, lanes_c})), lane}));
      }
      split_loop = {i, q};  // its END_RANGE closes q
      continue;
    }
    for (int s = 0; s < in.num_src; s++) in.src[s] = remap[in.src[s]];
    if (in.op == Op::EndRange && old[i].src[0] == split_loop.first) in.src[0] = split_loop.second;
    remap[i] = emit(in);
    if (current >= 0 && i == blocks[current].end) {  // the block ends: partials out, barrier, combine
      const Block& b = blocks[current];
      for (size_t a = 0; a < b.accs.size(); a++)
        emit(make_inst(Op::Store, old[b.accs[a]].dtype, {partial[current][a], lane, remap[b.accs[a]]}));
      emit(make_inst(Op::EndRange, DType::Int32, {lane}));
      emit(make_inst(Op::Barrier, DType::Int32, {}));
      std::vector<ValueId> combined;
      for (ValueId acc : b.accs) combined.push_back(emit(old[acc]));
      const ValueId t_range = emit(make_inst(Op::Range, DType::Int32, {lanes_c}, ir::kReduceLoop));
      for (size_t a = 0; a < b.accs.size(); a++) {
        const DType dt = old[b.accs[a]].dtype;
        const ValueId x = emit(make_inst(Op::Load, dt, {partial[current][a], t_range}));
        const ValueId v = emit(make_inst(b.combine[a], dt, {combined[a], x}));
        emit(make_inst(Op::Assign, dt, {combined[a], v}));
      }
      emit(make_inst(Op::EndRange, DType::Int32, {t_range}));
      for (size_t a = 0; a < b.accs.size(); a++) remap[b.accs[a]] = combined[a];
      current = -1;
      lane = ir::kNone;
    }
  }
  k.insts = std::move(out);
  k.opts.push_back({top ? ir::AppliedOpt::GroupTop : ir::AppliedOpt::Group, lanes});
  return true;
}

}  // namespace

void group_reduce(ir::Kernel& k) {
  // GROUP wins when both are asked for; 0 is off
  const int group = k.plan.get(ir::AppliedOpt::Group), top = k.plan.get(ir::AppliedOpt::GroupTop);
  if (group > 0) {
    apply_group(k, group, /*top=*/false);
  } else if (top > 0) {
    apply_group(k, top, /*top=*/true);
  } else if (group == ir::OptPlan::kAuto && top == ir::OptPlan::kAuto && k.target.lockstep_gpu()) {
    // the default plan on a GPU (see the header): few threads, so each output's reduce gets a workgroup
    const int64_t threads = reducing_threads(k);
    if (threads < 0 || threads > kAutoGroupThreads) return;
    for (int lanes : {256, 16})
      if (apply_group(k, lanes, /*top=*/false, kAutoGroupMaxAccs)) return;
  }
}

}  // namespace ts
