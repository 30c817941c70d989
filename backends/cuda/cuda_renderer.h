// The CUDA C renderer: one `extern "C" __global__` function per IR kernel, compiled by NVRTC. The
// outermost global loops become grid-stride loops over blockIdx * blockDim + threadIdx (gpu_launch.h).
#pragma once
#include "cstyle.h"

namespace ts {

class CUDARenderer : public CStyleRenderer {
 public:
  CUDARenderer();

 protected:
  std::string signature(const ir::Kernel& kernel) const override;
};

const CUDARenderer& cuda_renderer();

}  // namespace ts
