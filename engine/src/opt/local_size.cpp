// LOCAL (tinygrad's OptOps.LOCAL): the number of threads in a GPU workgroup for an ordinary kernel.
//
// gpu::plan_grid puts 64 threads in each workgroup (filled along the grid's x dimension first: the loop
// along which memory is contiguous). The best size depends on the device: a GPU wants enough threads per
// workgroup to hide memory latency, PoCL runs one workgroup per CPU core as a loop over its work-items
// (vectorized across them), so there a larger workgroup is a longer vectorizable loop and fewer
// workgroups to schedule. This pass only records the choice, AppliedOpt::Local(amount), which plan_grid
// reads (the renderers and the device's launch both ask it, so source and launch agree; the size is part
// of the rendered source, so caches keyed by source tell two sizes apart).
//
// Legal on devices with workgroups (ir::Kernel::target) for a power of two 1..256 within the device's
// workgroup size, on a kernel with a global loop (one without has a single thread) and without local
// loops (GROUP fixes the workgroup size to its lanes). The default plan (kAuto) keeps 64, except for a kernel
// without reduce loops on a GPU whose lanes run in lockstep (Target::lockstep_gpu), which gets 256: on an H100
// an elementwise kernel over 16M floats ran 0.164 -> 0.064 ms (0.8 -> 2.1 TB/s), while matmuls and reductions
// got slower with 256, so they keep 64. The BEAM search tries the amounts autotune.cpp lists.
#include "opt/pass_manager.h"

namespace ts {

namespace {

// The default plan's workgroup size: 256 for an elementwise kernel on a lockstep GPU, else none (64).
int auto_local(const ir::Kernel& k) {
  if (!k.target.lockstep_gpu()) return ir::OptPlan::kAuto;
  for (const ir::Inst& in : k.insts)
    if (in.op == ir::Op::Range && in.arg == ir::kReduceLoop) return ir::OptPlan::kAuto;
  return 256;
}

}  // namespace

void local_size(ir::Kernel& k) {
  int u = k.plan.get(ir::AppliedOpt::Local);
  if (u == ir::OptPlan::kAuto) u = auto_local(k);
  if (u == ir::OptPlan::kAuto || u <= 0 || u > 256 || (u & (u - 1)) != 0) return;
  if (!k.target.workgroups() || static_cast<uint32_t>(u) > k.target.max_workgroup_size) return;
  if (ir::local_loop_lanes(k) > 0) return;
  bool global = false;
  for (const ir::Inst& in : k.insts) global = global || (in.op == ir::Op::Range && in.arg == ir::kGlobalLoop);
  if (!global) return;
  k.opts.push_back({ir::AppliedOpt::Local, u});
}

}  // namespace ts
