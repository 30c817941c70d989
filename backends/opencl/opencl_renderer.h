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
  // float16 buffers through vload_half / vstore_half_rte: core OpenCL C 1.2, no cl_khr_fp16 needed
  std::string load(const std::string& buf, const std::string& index, DType dtype) const override;
  std::string store(const std::string& buf, const std::string& index, const std::string& value,
                    DType dtype) const override;
};

const OpenCLRenderer& opencl_renderer();

}  // namespace ts
