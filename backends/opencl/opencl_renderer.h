// The OpenCL C renderer: OpenCL C 1.2 (what PoCL 3 and every OpenCL driver accept). One `__kernel` per
// IR kernel; the outermost global loops become grid-stride loops over get_global_id (see gpu_launch.h).
#pragma once
#include "cstyle.h"

namespace ts {

class OpenCLRenderer : public CStyleRenderer {
 public:
  OpenCLRenderer();

 protected:
  std::string signature(const ir::Kernel& kernel) const override;
};

const OpenCLRenderer& opencl_renderer();

}  // namespace ts
