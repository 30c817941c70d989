#include "cuda/cuda_renderer.h"

namespace ts {

static CStyleLanguage cuda_language() {
  CStyleLanguage l;
  l.name = "CUDA C";
  l.prelude =
      "/* NaN-propagating max, as torch.maximum (fmaxf would drop the NaN) */\n"
      "__device__ inline float ts_fmaxf(float a, float b) { return (a != a || a > b) ? a : b; }\n";
  l.kernel_prefix = "extern \"C\" __global__ void";
  l.buffer_qualifier = "__restrict__";
  l.bool_type = "bool";
  l.infinity = "__int_as_float(0x7f800000)", l.neg_infinity = "__int_as_float(0xff800000)";
  l.nan = "__int_as_float(0x7fc00000)";
  l.half_type = "__half", l.half_to_float = "__half2float", l.float_to_half = "__float2half_rn";  // cuda_fp16.h
  const char* xyz[3] = {"x", "y", "z"};
  for (int d = 0; d < 3; d++) {
    std::string c = xyz[d];
    l.global_id[d] = "(int)(blockIdx." + c + " * blockDim." + c + " + threadIdx." + c + ")";
    l.global_size[d] = "(int)(gridDim." + c + " * blockDim." + c + ")";
  }
  l.max_groups[0] = 2147483647;  // gridDim.x; y and z stop at 65535
  return l;
}

CUDARenderer::CUDARenderer() : CStyleRenderer(cuda_language()) {}

std::string CUDARenderer::signature(const ir::Kernel& k) const {
  std::string args, doc;
  for (size_t i = 0; i < k.globals.size(); i++) {
    const ir::GlobalArg& g = k.globals[i];
    std::string data = "data" + std::to_string(i);
    args += std::string(i ? ", " : "") + (g.is_output ? "" : "const ") + buffer_type(g.dtype) + "* " +
            lang_.buffer_qualifier + " " + data;
    doc += std::string(i ? "; " : "") + data + ": " + (g.is_output ? "output, " : "input, ") +
           std::to_string(g.numel) + " elements";
  }
  // float16 kernels only: NVRTC spends time on every header
  std::string half = uses_float16(k) ? "#include <cuda_fp16.h>\n"
                                       "__device__ inline float ts_round_half(float x) { return __half2float(__float2half_rn(x)); }\n"
                                     : "";
  return half + "/* " + doc + " */\n" + lang_.kernel_prefix + " " + k.name + "(" + args + ") {\n";
}

const CUDARenderer& cuda_renderer() {
  static CUDARenderer r;
  return r;
}

static const bool registered = DeviceRegistry::add_renderer(&cuda_renderer());

}  // namespace ts
