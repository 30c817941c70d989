#include "opencl/opencl_renderer.h"

namespace ts {

static CStyleLanguage opencl_language() {
  CStyleLanguage l;
  l.name = "OpenCL C";
  l.prelude =
      "/* no fused multiply-add: results match the interpreter bit for bit where IEEE allows */\n"
      "#pragma OPENCL FP_CONTRACT OFF\n"
      "/* NaN-propagating max, as torch.maximum (OpenCL's fmax would drop the NaN) */\n"
      "float ts_fmaxf(float a, float b) { return (isnan(a) || a > b) ? a : b; }\n"
      "/* float16 is storage only (PoCL has no cl_khr_fp16): values are floats, rounded through a 2-byte\n"
      "   private slot with the core vstore_half_rte (round to nearest even) */\n"
      "float ts_round_half(float x) { ushort h; vstore_half_rte(x, 0, (__private half*)&h); "
      "return vload_half(0, (__private const half*)&h); }\n";
  l.kernel_prefix = "__kernel void";
  l.buffer_qualifier = "restrict";
  l.bool_type = "bool";
  l.exp2 = "exp2", l.log2 = "log2", l.sin = "sin", l.sqrt = "sqrt", l.fma = "fma";  // overloaded builtins
  l.float_as_int = "as_int", l.int_as_float = "as_float";
  l.infinity = "INFINITY", l.neg_infinity = "(-INFINITY)", l.nan = "NAN";
  l.half_type = "half";  // only as a pointer target (OpenCL C 1.2 without cl_khr_fp16)
  for (int d = 0; d < 3; d++) {
    l.global_id[d] = "(int)get_global_id(" + std::to_string(d) + ")";
    l.global_size[d] = "(int)get_global_size(" + std::to_string(d) + ")";
    l.max_groups[d] = 1u << 31;  // OpenCL sets no limit (the global size is a size_t); ids are int here
    l.group_id[d] = "(int)get_group_id(" + std::to_string(d) + ")";
    l.num_groups[d] = "(int)get_num_groups(" + std::to_string(d) + ")";
  }
  l.local_id = "(int)get_local_id(0)";
  // OpenCL C 1.2 §6.12.8: every work-item of the work-group must reach it; CLK_LOCAL_MEM_FENCE makes the
  // __local writes before it visible to the whole work-group after it
  l.barrier = "barrier(CLK_LOCAL_MEM_FENCE);";
  l.local_qualifier = "__local";  // declared at kernel function scope (OpenCL allows no other place)
  return l;
}

OpenCLRenderer::OpenCLRenderer() : CStyleRenderer(opencl_language()) {}

std::string OpenCLRenderer::signature(const ir::Kernel& k) const {
  std::string args, doc;
  for (size_t i = 0; i < k.globals.size(); i++) {
    const ir::GlobalArg& g = k.globals[i];
    // OpenCL forbids bool in buffers (its size is up to the driver): a bool buffer holds one uchar per
    // element, which C's conversions turn into bool and back
    std::string t = g.dtype == DType::Bool ? "uchar" : buffer_type(g.dtype);
    std::string data = "data" + std::to_string(i);
    args += std::string(i ? ", " : "") + "__global " + (g.is_output ? "" : "const ") + t + "* restrict " + data;
    doc += std::string(i ? "; " : "") + data + ": " + (g.is_output ? "output, " : "input, ") +
           std::to_string(g.numel) + " elements";
  }
  return "/* " + doc + " */\n" + lang_.kernel_prefix + " " + k.name + "(" + args + ") {\n";
}

std::string OpenCLRenderer::load(const std::string& buf, const std::string& index, DType dtype) const {
  if (dtype == DType::Float16) return "vload_half(" + index + ", " + buf + ")";
  return CStyleRenderer::load(buf, index, dtype);
}

std::string OpenCLRenderer::store(const std::string& buf, const std::string& index, const std::string& value,
                                  DType dtype) const {
  if (dtype == DType::Float16) return "vstore_half_rte(" + value + ", " + index + ", " + buf + ");";
  return CStyleRenderer::store(buf, index, value, dtype);
}

const OpenCLRenderer& opencl_renderer() {
  static OpenCLRenderer r;
  return r;
}

static const bool registered = DeviceRegistry::add_renderer(&opencl_renderer());

}  // namespace ts
