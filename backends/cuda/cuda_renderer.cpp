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
  l.float_as_int = "__float_as_int", l.int_as_float = "__int_as_float";
  // float16 buffers hold the bit patterns; the conversions are the PTX instructions cuda_fp16.h's
  // __half2float / __float2half_rn wrap (see signature()), so kernels need no header on NVRTC's search path
  l.half_type = "unsigned short";
  const char* xyz[3] = {"x", "y", "z"};
  for (int d = 0; d < 3; d++) {
    std::string c = xyz[d];
    l.global_id[d] = "(int)(blockIdx." + c + " * blockDim." + c + " + threadIdx." + c + ")";
    l.global_size[d] = "(int)(gridDim." + c + " * blockDim." + c + ")";
    l.group_id[d] = "(int)blockIdx." + c;
    l.num_groups[d] = "(int)gridDim." + c;
  }
  l.local_id = "(int)threadIdx.x";
  // waits for every thread of the block; shared-memory writes before it are visible to the block after it
  l.barrier = "__syncthreads();";
  l.local_qualifier = "__shared__";
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
  // float16 kernels only. cuda_fp16.h is not on NVRTC's default search path (it would need the toolkit's
  // include directory at run time); its conversions are these two instructions: cvt.rn rounds to nearest even
  std::string half =
      uses_float16(k)
          ? "__device__ inline float ts_half_to_float(unsigned short h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
            "__device__ inline unsigned short ts_float_to_half(float f) { unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
            "__device__ inline float ts_round_half(float f) { return ts_half_to_float(ts_float_to_half(f)); }\n"
          : "";
  return half + "/* " + doc + " */\n" + lang_.kernel_prefix + " " + k.name + "(" + args + ") {\n";
}

const CUDARenderer& cuda_renderer() {
  static CUDARenderer r;
  return r;
}

static const bool registered = DeviceRegistry::add_renderer(&cuda_renderer());

}  // namespace ts
