// The pass pipeline: named IR → IR transforms, one file each. The manager runs them in order, checks
// the IR with the verifier after each one, and keeps a snapshot of the IR after
// every pass for the GUI's "IR after pass N" view and the CLI's --out.
//
// TENSORSCOPE_DISABLE_PASSES=name1,name2 turns passes off; TENSORSCOPE_RANDOM_PASSES=<seed> turns a
// random subset off for each kernel (the test mode CI runs the op tests in). Results must never change
// with any subset disabled: every pass only removes or rearranges work.
//
// The UPCAST, TILE, GROUP and LOCAL passes take their amounts from the kernel's ir::OptPlan (the optimization actions as data);
// the default plan lets each use its heuristic. TENSORSCOPE_OPTS="UPCAST_GLOBAL=8,REGISTER_TILE=0" sets one
// plan for every kernel (for experiments and tests); an invalid value raises std::invalid_argument.
#pragma once
#include <algorithm>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "tensorscope/ir.h"
#include "tensorscope/session.h"

namespace ts {

struct Pass {
  const char* name;
  const char* description;
  std::function<void(ir::Kernel&)> run;
};

// The passes in pipeline order.
const std::vector<Pass>& pipeline();

// Runs the enabled passes on `kernel` in place. With `snapshots`, appends the IR after each pass.
// `kernel_id` names the kernel at the gate's AfterPass stop (Session::gate), one after each pass;
// `gated` false skips those stops (the autotuner's candidates are not stages a user steps through).
void run_passes(ir::Kernel& kernel, std::vector<PassSnapshot>* snapshots, int kernel_id = -1, bool gated = true);

// Passes (one file each).
void dead_code_elimination(ir::Kernel& kernel);
void hoist_constants(ir::Kernel& kernel);
void loop_invariant_code_motion(ir::Kernel& kernel);
void transpose_tile(ir::Kernel& kernel);
void padto(ir::Kernel& kernel);
void upcast_global(ir::Kernel& kernel);
void upcast_reduce(ir::Kernel& kernel);
void register_tile(ir::Kernel& kernel);
void split_index_set(ir::Kernel& kernel);
void delinearize_reduce(ir::Kernel& kernel);
void rows_as_lanes(ir::Kernel& kernel);
void columns_as_lanes(ir::Kernel& kernel);
void coalesce_short_rows(ir::Kernel& kernel);
void reorder_global_loops(ir::Kernel& kernel);
void simplify(ir::Kernel& kernel);
void fuse_multiply_add(ir::Kernel& kernel);
void sink_after_loops(ir::Kernel& kernel);
void max_reduce_as_int(ir::Kernel& kernel);
void group_reduce(ir::Kernel& kernel);
void tile_local(ir::Kernel& kernel);
void local_size(ir::Kernel& kernel);

// Generated sources stay reasonable (and compile in well under a second): an UPCAST that would make a
// loop body longer than this many instructions is not done.
constexpr size_t kMaxUnrolledInsts = 6000;

// The ops the C prelude computes as polynomials (ts_exp2f, ts_log2f, ts_sinf) or sqrtf: calls gcc's SLP vectorizer
// does not pack (rows_as_lanes writes their rows as lanes by hand; upcast_reduce leaves no such row to gcc)
inline bool is_transcendental(ir::Op op) {
  return op == ir::Op::Exp2 || op == ir::Op::Log2 || op == ir::Op::Sin || op == ir::Op::Sqrt;
}

// A float max-reduction over a loop of at least this many trips runs on integer keys (max_reduce_as_int),
// whose loop the C compiler vectorizes as a reduction; upcast_reduce leaves such a loop whole for it.
constexpr int64_t kMinKeyedMaxTrips = 16;

// A reduce block inside a global loop: DEFINE_ACC × n (first_acc..range-1), RANGE (reduce) at `range`,
// a body that ASSIGNs only those accumulators, END_RANGE at `end`. The body has no loops but a chain of
// perfectly nested reduce loops (a reduce over several axes: each inner END_RANGE right before the outer).
struct ReduceBlock {
  size_t first_acc, range, end;
};
// The reduce blocks of global loop `g` if its body holds only plain instructions and reduce blocks
// (the shape the UPCAST passes rewrite); empty otherwise.
std::vector<ReduceBlock> upcastable_body(const std::vector<ir::Inst>& insts, size_t g);
// The trips of a reduce block's loops together (the product of their constant bounds: K of a matmul, the batch
// times the sequence of a Linear's weight gradient).
int64_t reduce_trips(const std::vector<ir::Inst>& insts, const ReduceBlock& block);
// The loop upcast_global upcasts along a reduction: the innermost global loop, with a constant bound, when its
// body is plain instructions and reduce blocks (upcastable_body) and some load in them moves by one element
// when the loop does, or by two with `every_other` (see rows_every_other); insts.size() when there is none.
// PADTO pads this loop.
size_t upcast_global_loop(const std::vector<ir::Inst>& insts, bool every_other);
// True on targets whose renderer loads a row of every other element as one vector (the C device's
// ts_vN_load2: two loads and a shuffle): a stride-2 convolution's or pooling's input, read at 2·x + kx, is
// upcast like a contiguous row there. Devices with workgroups (GPUs) keep the plans they had.
inline bool rows_every_other(const ir::Target& target) { return !target.workgroups(); }
// PADTO's rewrite (padto.cpp), shared with register_tile: global loop `g` (a constant bound n) runs
// ceil(n/p)·p iterations, and in the extra ones every load that depends on g and every store is masked off
// (gated with g < n). False (the kernel unchanged) when p divides n, the padding would double the loop, an
// ASSIGN in the loop updates an accumulator defined outside it, or an IDIV/MOD divides by a non-constant.
bool pad_loop(ir::Kernel& kernel, size_t g, int64_t p);
// UPCAST global loop `g` (constant bound divisible by u): u iterations per trip, each instruction of
// the body u times with its own accumulators; values the same in every copy are computed once. With
// `side_by_side` the u copies of each instruction are adjacent, otherwise the body is written u times
// in a row. With u = the bound the loop disappears. Shared by upcast_global and register_tile.
void upcast_loop(ir::Kernel& kernel, size_t g, int u, bool side_by_side);

// The rewrite rows_as_lanes and columns_as_lanes share: global loop g (a constant bound that `lanes` divides),
// whose body is the reduce blocks `blocks` (each one accumulator, one constant reduce loop without loops inside,
// its ASSIGN to that accumulator last in that loop; no store in front of the last loop), computes `lanes`
// iterations of g side by side: each block's accumulators in a DEFINE_LOCAL array of `lanes` elements, every trip
// of each reduce loop a local loop over the lanes (on the C device a plain loop its compiler vectorizes; on a GPU
// the lanes of one workgroup), and what follows the reductions a local loop too. What precedes a reduce loop in
// g's body (the row's index arithmetic and loads; between two reductions, what the second reads of the first:
// the negated row max of a logsumexp) is recomputed in each lane loop, an earlier block's result loaded from
// its array. Throws std::logic_error when g and the blocks are not of that shape.
// g may also be a local loop (coalesce_short_rows' loop over the rows of a block) with `lanes` its trips: its lanes
// are its own iterations, and what follows the reductions may hold loops (the row's values written out per element).
void reduce_lanes_in_local_memory(ir::Kernel& kernel, size_t g, const std::vector<ReduceBlock>& blocks, int64_t lanes);
// The rows of local loop `loop` (coalesce_short_rows' rows of a block: each computes its max and sum of exponentials,
// then writes its values out per element) as lanes: its reduce blocks, as rows_as_lanes takes them, before the first
// loop of its body that is not one, rewritten by reduce_lanes_in_local_memory. False, the kernel unchanged, where its
// body is not of that shape, no block has a transcendental, or a plan's LANES is 0 or another count.
bool local_rows_as_lanes(ir::Kernel& kernel, size_t loop);
// The most lanes either pass takes, by default or when a plan's LANES asks: a 1 KiB array of accumulators.
constexpr int64_t kMaxLanes = 256;

// Swaps two perfectly nested loops (`outer` holds only index arithmetic before `inner`, and ends right after
// it): for o: for i: body  →  for i: for o: body. Shared by upcast_global and register_tile.
void interchange(ir::Kernel& kernel, size_t outer, size_t inner);

// The work of a kernel in loop iterations: its ALU and memory instructions, each times the trip counts of the
// loops around it (constant bounds; a loop without one counts its bound's value, 0).
double loop_work(const ir::Kernel& kernel);
// Below this much loop_work the C device runs a kernel on one thread (waking a worker costs more than it
// saves; see plan_threads in backends/c/c_device.cpp, which uses it). 8M is about 0.1 ms of one core.
constexpr double kMinParallelWork = 1 << 23;

// Whether split_index_set may split global loop g of a kernel with reductions (split_padded_tile): g lies
// inside another global loop (the outermost one stays for the C device's threads), or the kernel is below
// kMinParallelWork and runs on one thread anyway. Shared with padto, which pads a column sum only for the split.
bool split_keeps_threads(const ir::Kernel& kernel, size_t g);

// The global loops' RANGEs, outermost first. Shared by passes.
std::vector<size_t> global_loops(const std::vector<ir::Inst>& insts);

// The loops around instruction `i` (the RANGEs before it not yet closed). Shared by passes.
int loop_depth(const std::vector<ir::Inst>& insts, size_t i);

// Index of the END_RANGE that closes the RANGE at `range` (insts.size() if unbalanced). Shared by passes.
size_t end_of_range(const std::vector<ir::Inst>& insts, size_t range);

// Value of the int32 index expression `v` with loop `var` = `at` and every other loop index (and any
// load) taken as 0: eval_index(.., 1) - eval_index(.., 0) is the stride of an index along a loop.
int64_t eval_index(const std::vector<ir::Inst>& insts, ir::ValueId v, ir::ValueId var, int64_t at, int depth = 0);
// Whether value `v` reads `var`, directly or through its operands. `memo`: insts.size() entries of -1
// at first, reused across calls with the same `var`.
bool depends_on(const std::vector<ir::Inst>& insts, ir::ValueId v, ir::ValueId var, std::vector<int8_t>& memo);

// An instruction with these fields, for passes that write a new instruction list directly (no folding, no CSE;
// the Builder does those). At most 4 operands.
inline ir::Inst make_inst(ir::Op op, DType dt, std::initializer_list<ir::ValueId> src, int64_t arg = 0, double value = 0) {
  ir::Inst in;
  in.op = op;
  in.dtype = dt;
  in.num_src = static_cast<uint8_t>(src.size());
  std::copy(src.begin(), src.end(), in.src);
  in.arg = arg;
  in.value = value;
  return in;
}

// A new instruction list written from an old one, for passes that restructure loops: emit() appends an
// instruction, copy(i) appends old[i] with its operands renamed to their new ids (remap). Shared by passes.
struct Rewrite {
  const std::vector<ir::Inst>& old;
  std::vector<ir::Inst> out;
  std::vector<ir::ValueId> remap;  // old id -> new id (kNone until written)
  explicit Rewrite(const std::vector<ir::Inst>& insts) : old(insts), remap(insts.size(), ir::kNone) {}
  ir::ValueId emit(const ir::Inst& in) {
    out.push_back(in);
    return static_cast<ir::ValueId>(out.size() - 1);
  }
  ir::ValueId copy(size_t i) {
    ir::Inst in = old[i];
    for (int s = 0; s < in.num_src; s++) in.src[s] = remap[in.src[s]];
    return remap[i] = emit(in);
  }
};

// Whether a pass applied an action of `kind` to the kernel already.
inline bool has_applied(const ir::Kernel& kernel, ir::AppliedOpt::Kind kind) {
  return std::any_of(kernel.opts.begin(), kernel.opts.end(), [&](const ir::AppliedOpt& o) { return o.kind == kind; });
}

// Rebuilds `kernel` keeping instructions in `order` (old ids), renumbering operands. Shared by passes.
void reorder_instructions(ir::Kernel& kernel, const std::vector<ir::ValueId>& order);

}  // namespace ts
