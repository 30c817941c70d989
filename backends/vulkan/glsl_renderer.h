// The GLSL renderer: a GLSL 4.50 compute shader for Vulkan. Buffers are storage buffers (set 0, binding
// = slot); the workgroup size comes from specialization constants 0, 1, 2, chosen when the pipeline is
// created (see gpu_launch.h); array sizes are constants in the source, so no push constants are needed.
// GLSL is stricter than C (no implicit bool/int/float conversions, constructor casts, no bool buffers),
// which is what the hooks below spell out.
#pragma once
#include "cstyle.h"

namespace ts {

class GLSLRenderer : public CStyleRenderer {
 public:
  GLSLRenderer();
  // The line that asks for IEEE infinities, NaNs and signed zeros (SPIR-V SignedZeroInfNanPreserve).
  // Without it Vulkan lets the compiler assume there are none (x - x == 0, 0 * x == 0, isinf(x) == false);
  // a device that cannot keep them compiles the source with this line removed.
  static const char* const kPreserveInfNan;

 protected:
  std::string signature(const ir::Kernel& kernel) const override;
  std::string define_local(const ir::Kernel& kernel, ir::ValueId id, const std::string& name) const override;
  std::string cast(const std::string& expr, DType from, DType to) const override;
  std::string load(const std::string& buf, const std::string& index, DType dtype) const override;
  std::string store(const std::string& buf, const std::string& index, const std::string& value,
                    DType dtype) const override;
  std::string alu(const ir::Inst& in, const std::vector<std::string>& src,
                  const std::vector<DType>& src_dtype) const override;
};

const GLSLRenderer& glsl_renderer();

}  // namespace ts
