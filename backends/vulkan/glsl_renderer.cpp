#include "vulkan/glsl_renderer.h"

namespace ts {

static CStyleLanguage glsl_language() {
  CStyleLanguage l;
  l.name = "GLSL";
  l.prelude = "#version 450\n";
  l.kernel_prefix = "void main()";
  l.bool_type = "bool";
  l.exp2 = "exp2", l.log2 = "log2", l.sin = "sin", l.sqrt = "sqrt", l.fma = "fma";
  l.float_as_int = "floatBitsToInt", l.int_as_float = "intBitsToFloat";
  l.true_literal = "true", l.false_literal = "false";
  // GLSL has no INFINITY/NAN and may fold 1.0/0.0 to anything: spell the IEEE bit patterns
  l.infinity = "uintBitsToFloat(0x7F800000u)", l.neg_infinity = "uintBitsToFloat(0xFF800000u)";
  l.nan = "uintBitsToFloat(0x7FC00000u)";
  // float16 buffers hold float16_t (16-bit storage); conversions are constructor casts, which SPIR-V
  // OpFConvert rounds to nearest even on the devices we run (checked against the interpreter by the tests)
  l.half_type = "float16_t", l.half_to_float = "float", l.float_to_half = "float16_t";
  const char* xyz[3] = {"x", "y", "z"};
  for (int d = 0; d < 3; d++) {
    l.global_id[d] = std::string("int(gl_GlobalInvocationID.") + xyz[d] + ")";
    l.global_size[d] = std::string("int(gl_NumWorkGroups.") + xyz[d] + " * gl_WorkGroupSize." + xyz[d] + ")";
    l.group_id[d] = std::string("int(gl_WorkGroupID.") + xyz[d] + ")";
    l.num_groups[d] = std::string("int(gl_NumWorkGroups.") + xyz[d] + ")";
  }
  l.local_id = "int(gl_LocalInvocationID.x)";
  // barrier() synchronizes the invocations of the workgroup (it must be in uniform control flow);
  // memoryBarrierShared() before it orders the shared-memory writes, so reads after it see them
  l.barrier = "memoryBarrierShared(); barrier();";
  l.local_qualifier = "shared";  // at global scope: see signature()
  // max_groups stays 65535: the maxComputeWorkGroupCount every Vulkan device guarantees
  return l;
}

GLSLRenderer::GLSLRenderer() : CStyleRenderer(glsl_language()) {}

std::string GLSLRenderer::define_local(const ir::Kernel&, ir::ValueId, const std::string&) const {
  return "";  // declared before main() by signature()
}

const char* const GLSLRenderer::kPreserveInfNan =
    "spirv_execution_mode(extensions = [\"SPV_KHR_float_controls\"], capabilities = [4466], 4461, 32);"
    "  // IEEE inf/NaN\n";

std::string GLSLRenderer::signature(const ir::Kernel& k) const {
  std::string s;
  bool has_bool = false;
  for (const ir::GlobalArg& g : k.globals) has_bool |= g.dtype == DType::Bool;
  // bool buffers hold one byte per element (as on the host): that needs 8-bit storage
  if (has_bool) s += "#extension GL_EXT_shader_8bit_storage : require\n";
  // float16: 16-bit storage for the buffers, float16_t values for the rounding (shaderFloat16)
  const bool half = uses_float16(k);
  if (half) s += "#extension GL_EXT_shader_16bit_storage : require\n#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n";
  s += "#extension GL_EXT_spirv_intrinsics : require\n";
  s += kPreserveInfNan;
  s += "layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;\n";
  for (size_t i = 0; i < k.globals.size(); i++) {
    const ir::GlobalArg& g = k.globals[i];
    std::string n = std::to_string(i);
    std::string t = g.dtype == DType::Bool ? "uint8_t" : buffer_type(g.dtype);
    s += "layout(std430, set = 0, binding = " + n + ") " + (g.is_output ? "writeonly" : "readonly") + " buffer Buffer" +
         n + " { " + t + " data" + n + "[]; };  // " + (g.is_output ? "output, " : "input, ") +
         std::to_string(g.numel) + " elements\n";
  }
  s += "// NaN-propagating max, as torch.maximum (GLSL's max may return either operand for a NaN)\n";
  s += "float ts_fmaxf(float a, float b) { return (isnan(a) || a > b) ? a : b; }\n";
  if (half) s += "float ts_round_half(float x) { return float(float16_t(x)); }\n";
  // local memory (DEFINE_LOCAL): GLSL declares `shared` variables at global scope only
  for (size_t i = 0; i < k.insts.size(); i++)
    if (k.insts[i].op == ir::Op::DefineLocal)
      s += CStyleRenderer::define_local(k, static_cast<ir::ValueId>(i), local_name(static_cast<ir::ValueId>(i))) +
           "  // workgroup-shared memory\n";
  s += "// kernel " + k.name + "\n";
  return s + lang_.kernel_prefix + " {\n";
}

std::string GLSLRenderer::cast(const std::string& x, DType from, DType to) const {
  if (to == DType::Float16 || from == DType::Float16) return CStyleRenderer::cast(x, from, to);
  return type_name(to) + "(" + x + ")";  // constructor casts; bool(x) is x != 0
}

std::string GLSLRenderer::load(const std::string& buf, const std::string& index, DType dtype) const {
  if (dtype == DType::Bool) return "(uint(" + buf + "[" + index + "]) != 0u)";
  return CStyleRenderer::load(buf, index, dtype);
}

std::string GLSLRenderer::store(const std::string& buf, const std::string& index, const std::string& value,
                                DType dtype) const {
  // via uint: lavapipe turns uint8_t(true) into 255 (a sign-extended 1-bit value)
  if (dtype == DType::Bool) return buf + "[" + index + "] = uint8_t(" + value + " ? 1u : 0u);";
  return CStyleRenderer::store(buf, index, value, dtype);
}

std::string GLSLRenderer::alu(const ir::Inst& in, const std::vector<std::string>& s,
                              const std::vector<DType>& sdt) const {
  using ir::Op;
  bool bool_args = !sdt.empty() && sdt[0] == DType::Bool;
  if (in.dtype == DType::Bool && bool_args) {
    // arithmetic on bools, with C's meaning (the result converted back to bool)
    switch (in.op) {
      case Op::Add: case Op::Max: return "(" + s[0] + " || " + s[1] + ")";
      case Op::Mul: return "(" + s[0] + " && " + s[1] + ")";
      case Op::Neg: return s[0];
      case Op::CmpLt: return "(int(" + s[0] + ") < int(" + s[1] + "))";
      default: break;
    }
  }
  // GLSL's % follows the divisor's sign (SPIR-V OpSMod); C's and the interpreter's follow the dividend
  if (in.op == Op::Mod) return "(" + s[0] + " - (" + s[0] + " / " + s[1] + ") * " + s[1] + ")";
  return CStyleRenderer::alu(in, s, sdt);
}

const GLSLRenderer& glsl_renderer() {
  static GLSLRenderer r;
  return r;
}

static const bool registered = DeviceRegistry::add_renderer(&glsl_renderer());

}  // namespace ts
