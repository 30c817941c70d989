// GLSL → SPIR-V in-process with glslang's C++ API (libshaderc on Debian 12 links the wrong glslang and
// crashes), and SPIR-V → readable assembly with SPIRV-Tools. The "SPIR-V" listing renderer shows the
// second form of every kernel, line-linked to the IR through the GLSL lines (OpLine debug info).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensorscope/device.h"

namespace ts {

struct SpirvModule {
  std::vector<uint32_t> words;
  // with debug_lines: for each instruction (in order, header excluded), the GLSL source line it came
  // from (0: none); OpLine and the source text are stripped from `words`
  std::vector<int> glsl_line;
};

// Compiles a GLSL 4.50 compute shader for Vulkan 1.1 (SPIR-V 1.3). Thread-safe. Throws
// std::runtime_error with glslang's messages (naming `what`, e.g. the kernel) when the GLSL is invalid.
SpirvModule compile_glsl(const std::string& glsl, const std::string& what, bool debug_lines = false);

// SPIRV-Tools' disassembly, one line per instruction (after a 5-line header).
std::string disassemble_spirv(const std::vector<uint32_t>& words);

class SpirvRenderer : public Renderer {
 public:
  std::string language() const override { return "SPIR-V"; }
  // The GLSL renderer's output, compiled and disassembled; the IR-op → line map goes IR → GLSL line →
  // first SPIR-V instruction from that line. A compile error becomes the listing's text.
  SourceListing render(const ir::Kernel& kernel) const override;
};

}  // namespace ts
