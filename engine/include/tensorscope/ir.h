// Kernel IR: a linear list of small fixed-size instructions in an arena, addressed by u32 ids (zyx's
// design; op names after tinygrad's UOps).
//
// A kernel is one loop nest. Values are SSA — each instruction defines one value, used by later ones —
// except accumulators: DEFINE_ACC defines a variable that ASSIGN updates inside a loop and that later
// instructions read after the loop. RANGE opens a loop (`for i in 0..bound`), END_RANGE closes it.
// Index arithmetic is int32; LOAD/STORE index a DEFINE_GLOBAL buffer (or a DEFINE_LOCAL array) in elements.
//
// Workgroups (GPU devices; tinygrad's DEFINE_LOCAL / BARRIER and its local axes). A third kind of RANGE,
// the *local* loop, runs its iterations as the threads ("lanes") of one workgroup, side by side; a
// DEFINE_LOCAL is an array in the workgroup's shared memory (OpenCL __local, GLSL shared, CUDA __shared__);
// BARRIER waits until every lane of the workgroup got there, with their local-memory writes visible to all
// (OpenCL barrier(CLK_LOCAL_MEM_FENCE), GLSL memoryBarrierShared() + barrier(), CUDA __syncthreads()).
// The IR's meaning stays sequential — a local loop is a plain loop, a DEFINE_LOCAL a plain array, BARRIER a
// no-op — which is how the interpreter and the C device run them, so INTERP stays the reference. A GPU runs
// such a kernel as one workgroup per iteration of its global loops, with the local loop's bound as the
// workgroup size; the code outside the local loops runs in every lane with the same values (it reads only
// uniform values and local memory), and its STOREs to global memory are done by lane 0 only (a global loop
// there without barriers or local memory is shared out among the lanes instead, each storing its own
// iterations: the renderers decide, backends/cstyle.cpp). Both readings
// agree when the kernel keeps these rules, which ir::verify checks:
//   - every local loop of a kernel has the same constant bound: the workgroup size (at most kMaxLanes);
//   - a local loop is not inside another local loop, and holds no global loop and no BARRIER (a barrier
//     inside a loop over lanes would wait for lanes that run after it); BARRIERs are directly inside
//     global or sequential loops (or at the top level), where every lane of a workgroup reaches them;
//   - a value defined inside a local loop is not used after it (ordinary scoping), and an ASSIGN inside a
//     local loop updates a DEFINE_ACC defined inside that local loop: per-lane state crosses a barrier
//     only through local memory;
//   - DEFINE_LOCAL is at the top level of the kernel (outside every loop), of float32 or int32; STOREs to
//     it are inside local loops (each lane writes its own elements);
//   - local memory written in one local loop is read elsewhere (another local loop, or the uniform code
//     after it) only after a BARRIER, and read memory is written again only after a BARRIER (in program
//     order; across the back edge of a loop around local loops the GPU renderers add the barrier).
//
// float16 is a storage type here: a float16 value is a number exactly representable in float16, which
// backends may hold in a float32 register. LOAD/STORE convert between the 2-byte buffer element and it,
// CAST to float16 rounds to nearest (ties to even), CAST from float16 is exact. Only CONST, LOAD, STORE,
// CAST, WHERE and the comparisons have float16 operands or results; arithmetic on float16 tensors is lowered to float32
// arithmetic followed by a CAST to float16 (PyTorch's CPU rule), and the verifier enforces this.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensorscope/dtype.h"

namespace ts::ir {

using ValueId = uint32_t;
constexpr ValueId kNone = UINT32_MAX;

enum class Op : uint8_t {
  DefineGlobal,  // arg: buffer slot; dtype: element type              → pointer
  DefineAcc,     // value: initial value                                → accumulator variable
  Const,         // value                                               → scalar
  Range,         // src0: bound (int32); arg: kGlobalLoop (1) = a loop over an output dim: its iterations are
                 // independent, so devices may run them in parallel — threads, GPU global or group ids;
                 // kReduceLoop (0) = a sequential loop (a reduction); kLocalLoop (2) = a loop over the lanes
                 // of a workgroup (see above)                            → loop index 0..bound-1
  EndRange,      // src0: the RANGE it closes
  Load,          // src0: DEFINE_GLOBAL or DEFINE_LOCAL, src1: index, [src2: gate] → element, or 0 when gate is false
  Store,         // src0: DEFINE_GLOBAL or DEFINE_LOCAL, src1: index, src2: value, [src3: gate: the store happens
                 // only when the bool gate is true (PADTO's padded iterations write nothing)]
  Assign,        // src0: DEFINE_ACC, src1: new value (inside its loop; after it, to combine partial sums)
  DefineLocal,   // arg: element count; dtype: element type: an array in workgroup-shared memory → pointer
  Barrier,       // every lane of the workgroup waits here; local-memory writes before it are seen after it
  // ALU (dtype is the result type)
  Neg, Exp2, Log2, Sin, Sqrt, Recip, Cast,
  Bitcast,       // the same 32 bits as the other type (float32 <-> int32), as C's memcpy / OpenCL's as_int
  Add, Mul, Max, CmpLt, CmpEq, IDiv, Mod, And,
  Where,         // src0: bool condition, src1: if true, src2: if false
  MulAcc,        // src0 * src1 + src2 with one rounding (fused multiply-add; tinygrad's MULACC). Made by
                 // the fuse_multiply_add pass, never by lowering.
};

// RANGE kinds (Inst::arg of a RANGE).
constexpr int64_t kReduceLoop = 0, kGlobalLoop = 1, kLocalLoop = 2;
// Lanes a local loop may have (the largest workgroup every device here allows: Vulkan guarantees 128
// invocations; lavapipe, PoCL and CUDA allow 1024 or more, and 256 is the most GROUP asks for).
constexpr int64_t kMaxLanes = 1024;

struct Inst {
  Op op = Op::Const;
  DType dtype = DType::Float32;
  uint8_t num_src = 0;
  ValueId src[4] = {kNone, kNone, kNone, kNone};  // the first num_src are operands (4: a gated STORE)
  int64_t arg = 0;   // DefineGlobal: buffer slot; DefineLocal: element count; Range: kind (kGlobalLoop, ...)
  double value = 0;  // Const / DefineAcc: the (initial) value
};

struct GlobalArg {
  DType dtype = DType::Float32;
  int64_t numel = 0;
  bool is_output = false;
};

// An optimization a pass or a device applied (tinygrad's Opt / applied_opts): shown in the IR header, and read
// by renderers and devices that run the kernel differently for it (the C renderer for register-tiled kernels).
struct AppliedOpt {
  enum Kind : uint8_t {
    UpcastGlobal,  // UPCAST a global loop by `amount` (u output elements per trip, in registers)
    RegisterTile,  // a u×16 register tile of a matmul-like reduce (two global loops upcast)
    UpcastReduce,  // UNROLL a reduce loop by `amount` with `amount` partial accumulators
    Local,         // GPU: `amount` threads per workgroup (along the grid's x dimension first; tinygrad's LOCAL),
                   // read by gpu::plan_grid instead of its default of 64
    Group,         // GPU: a reduce split across `amount` lanes of a workgroup, partial results combined in
                   // local memory after a BARRIER (tinygrad's GROUP; the group_reduce pass)
    Threads,       // CPU: the outermost global loop split over `amount` threads (a launch action: the C device
                   // records it in Device::plan_launch; the source is the same for every count)
    Padto,         // a global loop padded to a multiple of `amount`, the extra iterations masked (tinygrad's
                   // PADTO), so that an UPCAST of that amount applies to odd sizes
    GroupTop,      // GPU: GROUP with each of the `amount` lanes reducing one contiguous chunk of the loop
                   // (tinygrad's GROUPTOP) rather than every amount-th element: better where a workgroup's
                   // lanes run one after another over memory (PoCL on a CPU), worse for a GPU's coalescing
    Tile,          // GPU: a matmul in `amount`×`amount` output tiles, one workgroup each, with tiles of both
                   // operands staged in local memory (the shared-memory tiled matmul; the tile_local pass)
    TransposeTile, // C: a transposing copy in `amount`×`amount` tiles (8), each transposed in registers by the
                   // C renderer (the transpose_tile pass)
    Lanes,         // C, INTERP: `amount` iterations of a reduce kernel's innermost global loop computed side by
                   // side, the lanes of a local loop with their accumulators in local memory (the IR of one
                   // workgroup of `amount` threads): short rows with a transcendental (rows_as_lanes), the rows
                   // of a total over short rows, whose rows' loop is a reduce loop (rows_as_lanes: each lane's
                   // partial total in local memory too), a column sum's columns (columns_as_lanes)
  } kind;
  int amount;  // the upcast factor, thread count or multiple
};

// The optimization actions to take on a kernel, as data (tinygrad's OptOps; issue 14): for each kind of
// AppliedOpt, the amount its pass applies. kAuto (the default) lets the pass choose with its heuristic, so
// the default plan is today's hand-written choices; 0 turns the action off; otherwise the amount asked for.
// A pass applies a requested amount only when it is legal for the kernel (the loop exists, its trip count is
// a multiple of u, the unrolled body stays under kMaxUnrolledInsts, the access pattern is the one the action
// is for, the device has the feature); otherwise it applies nothing. What was applied is always Kernel::opts.
struct OptPlan {
  static constexpr int kAuto = -1;
  static constexpr int kKinds = 11;  // AppliedOpt::Kind values
  int amount[kKinds] = {kAuto, kAuto, kAuto, kAuto, kAuto, kAuto, kAuto, kAuto, kAuto, kAuto, kAuto};
  int get(AppliedOpt::Kind kind) const { return amount[kind]; }
  void set(AppliedOpt::Kind kind, int u) { amount[kind] = u; }
  bool automatic() const {
    for (int a : amount)
      if (a != kAuto) return false;
    return true;
  }
  // "UPCAST_GLOBAL=8,REGISTER_TILE=0" (kinds not named stay kAuto; "auto" is kAuto). Amounts: 0 (off) or
  // at least 2; THREADS and LOCAL also take 1. Throws std::invalid_argument naming the bad item and the
  // valid kinds.
  static OptPlan parse(const std::string& text);
  std::string str() const;  // the same form; "" for the default plan
};

// What the passes may assume about the device a kernel is compiled for. realize sets it from the target
// device's DeviceProperties before the passes run; the default (no workgroups, no local memory) is the C
// device's and the interpreter's, and makes the GPU-only actions (LOCAL, GROUP) illegal.
struct Target {
  uint32_t max_workgroup_size = 0;  // threads per workgroup; 0: the device runs no workgroups
  uint64_t local_memory_bytes = 0;  // DEFINE_LOCAL bytes a workgroup may use; 0: none
  // Threads the device runs in lockstep (a warp: 32 on NVIDIA GPUs, 32 or 64 on AMD's); 0 where unknown or
  // none (the C device, PoCL). The default plan's GPU rules (group_reduce, local_size) hold from 32 up:
  // below it the "GPU" is a CPU (lavapipe reports 8), where they were measured to lose.
  uint32_t subgroup_size = 0;
  // The CPU's vector registers, which the CPU passes size their upcasts and register tiles to: 64 bytes and 32
  // registers (AVX-512), 32 and 16 (AVX2), 16 and 16 (SSE, NEON). The default is AVX-512's, the machine the
  // heuristics were first measured on; GPU devices keep it, so their plans are the ones they always had.
  uint32_t vector_bytes = 64;
  uint32_t vector_registers = 32;
  int vector_floats() const { return static_cast<int>(vector_bytes / 4); }  // float lanes in one register
  bool workgroups() const { return max_workgroup_size > 0; }
  bool lockstep_gpu() const { return workgroups() && subgroup_size >= 32; }
};

struct Kernel {
  std::string name;
  std::vector<GlobalArg> globals;  // slot 0..n-1; outputs first
  std::vector<Inst> insts;         // the arena; ValueId = index
  std::vector<AppliedOpt> opts;    // in the order the passes applied them
  OptPlan plan;                    // what the passes are asked to apply (default: their heuristics)
  Target target;                   // the device's abilities the passes may use
};

// The bound of the kernel's local loops (its workgroup size on a GPU), or 0 when it has none.
int64_t local_loop_lanes(const Kernel& k);

const char* opt_name(AppliedOpt::Kind kind);
// The optimizations a kernel's passes applied, in order: "UPCAST_GLOBAL(4) UPCAST_REDUCE(2)"; "" for none.
std::string applied_str(const Kernel& k);

const char* op_name(Op op);
bool is_alu(Op op);
int alu_arity(Op op);

// The readable listing: one line per instruction, "%<id> = <op>.<dtype> <operands>", indented by loop depth.
std::string print(const Kernel& k);

// Checks every invariant (operands defined before use and still in scope, balanced ranges, operand
// dtypes, loads/stores on globals, accumulators assigned only inside loops). Returns the list of
// violations, each naming the instruction; empty when the kernel is valid.
std::vector<std::string> verify(const Kernel& k);

// Runs the kernel directly: the reference executor every backend is compared with.
// `buffers[i]` points to host memory of globals[i] (element type as declared).
void interpret(const Kernel& k, const std::vector<void*>& buffers);

}  // namespace ts::ir
