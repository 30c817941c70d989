// How a kernel's loop nest meets a GPU's grid of threads (shared by the OpenCL, Vulkan and CUDA backends:
// their renderers and their devices call plan_grid with the same limits, so the source and the launch agree).
//
// The outermost global RANGEs (up to 3, each directly inside the one before) become the grid's
// dimensions. The innermost of them is dimension 0 (x): neighbouring threads then touch neighbouring
// elements, which GPUs turn into one wide memory access (coalescing). Workgroups hold 64 threads, filled
// along x first. A grid dimension renders as
//     int i = global_id(d);  if (i < bound) { ... }                      (the grid covers the bound)
//     for (int i = global_id(d); i < bound; i += global_size(d)) { ... } (a grid-stride loop)
// The `if` is the bounds check (the grid is rounded up to whole workgroups). The loop is for bounds
// larger than the API lets one dispatch cover (Vulkan guarantees only 65535 workgroups per dimension):
// each thread then takes several iterations. It costs more than the `if` (PoCL, for one, vectorizes the
// loop form worse), so it is used only where needed. Global ranges have independent iterations (ir.h),
// so splitting them among threads never changes a result.
//
// The workgroup size is 64 unless the kernel's LOCAL action (ir::AppliedOpt::Local) asks for another.
//
// A workgroup kernel (one with local loops, ir.h; the GROUP action makes them) maps differently: the same
// global RANGEs become the dimensions of a grid of *workgroups* — one workgroup per iteration, its id
// (OpenCL get_group_id, GLSL gl_WorkGroupID, CUDA blockIdx) is the loop index — and each workgroup has
// `lanes` threads along x, the bound of the local loops, whose index is the thread's id in its workgroup
// (get_local_id, gl_LocalInvocationID, threadIdx). The grid then covers every bound exactly, so no thread
// is masked off and every BARRIER is reached by the whole workgroup.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensorscope/ir.h"

namespace ts::gpu {

// Threads per workgroup. Every device here allows it (Vulkan guarantees 128, CUDA 1024, PoCL 4096), and
// on NVIDIA 32 blocks of 64 fill a multiprocessor.
constexpr uint32_t kWorkgroupSize = 64;

struct Grid {
  std::vector<ir::ValueId> ranges;  // the RANGEs that are grid dimensions, dimension 0 (x) first
  uint32_t dims = 1;                // grid dimensions used (at least 1)
  uint32_t local[3] = {1, 1, 1};    // workgroup size
  uint32_t groups[3] = {1, 1, 1};   // workgroups per dimension
  bool strided[3] = {false, false, false};  // true: the range renders as a grid-stride loop
  uint32_t lanes = 0;               // a workgroup kernel: its local loops' bound (= local[0]); 0: none
  uint64_t global(int d) const { return static_cast<uint64_t>(local[d]) * groups[d]; }
  int dim_of(ir::ValueId range) const;  // 0..2, or -1 when the range is an ordinary loop
  std::string str() const;              // "groups 16x1x1 of 64x1x1"
};

// The grid for `kernel` on an API that launches at most max_groups[d] workgroups in dimension d.
// Threads per workgroup: the kernel's local loops' bound, else its LOCAL amount, else kWorkgroupSize.
Grid plan_grid(const ir::Kernel& kernel, const uint32_t max_groups[3]);

}  // namespace ts::gpu
