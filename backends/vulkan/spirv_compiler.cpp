#include "vulkan/spirv_compiler.h"

#include <glslang/Public/ResourceLimits.h>
#include <glslang/Public/ShaderLang.h>
#include <glslang/SPIRV/GlslangToSpv.h>
#include <spirv-tools/libspirv.hpp>

#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "gpu_cache.h"
#include "vulkan/glsl_renderer.h"

namespace ts {

namespace {

// glslang keeps process-wide tables: initialize them once, and compile one shader at a time (compiles
// take about a millisecond; kernels compile once and are cached).
std::mutex& glslang_mutex() {
  static std::mutex m;
  return m;
}
void initialize_glslang() {
  static bool ok = glslang::InitializeProcess();
  (void)ok;
}

// SPIR-V opcodes that only carry source text or line numbers (SPIR-V spec, section 3.32.2).
enum : uint32_t { kOpSourceContinued = 2, kOpSource = 3, kOpSourceExtension = 4, kOpString = 7, kOpLine = 8,
                  kOpNoLine = 317, kOpModuleProcessed = 330 };
constexpr size_t kHeaderWords = 5;

// Removes the debug-only instructions, remembering for each kept instruction the OpLine before it.
SpirvModule strip_lines(const std::vector<uint32_t>& in) {
  SpirvModule out;
  out.words.assign(in.begin(), in.begin() + std::min(kHeaderWords, in.size()));
  int line = 0;
  for (size_t i = kHeaderWords; i < in.size();) {
    uint32_t count = in[i] >> 16, opcode = in[i] & 0xFFFF;
    if (count == 0 || i + count > in.size()) break;  // malformed: keep what we have
    if (opcode == kOpLine && count >= 3) line = static_cast<int>(in[i + 2]);
    else if (opcode == kOpNoLine) line = 0;
    else if (opcode != kOpSource && opcode != kOpSourceContinued && opcode != kOpSourceExtension &&
             opcode != kOpString && opcode != kOpModuleProcessed) {
      out.words.insert(out.words.end(), in.begin() + i, in.begin() + i + count);
      out.glsl_line.push_back(line);
    }
    i += count;
  }
  return out;
}

}  // namespace

SpirvModule compile_glsl(const std::string& glsl, const std::string& what, bool debug_lines) {
  std::lock_guard lock(glslang_mutex());
  initialize_glslang();
  glslang::TShader shader(EShLangCompute);
  const char* text = glsl.c_str();
  const char* file = "kernel.comp";
  shader.setStringsWithLengthsAndNames(&text, nullptr, &file, 1);
  shader.setEnvInput(glslang::EShSourceGlsl, EShLangCompute, glslang::EShClientVulkan, 100);
  shader.setEnvClient(glslang::EShClientVulkan, glslang::EShTargetVulkan_1_1);
  shader.setEnvTarget(glslang::EShTargetSpv, glslang::EShTargetSpv_1_3);
  const auto messages = static_cast<EShMessages>(EShMsgSpvRules | EShMsgVulkanRules);
  if (!shader.parse(GetDefaultResources(), 450, false, messages))
    throw std::runtime_error("GLSL → SPIR-V: " + what + " does not compile:\n" + shader.getInfoLog() + "\nsource:\n" +
                             glsl);
  glslang::TProgram program;
  program.addShader(&shader);
  if (!program.link(messages)) throw std::runtime_error("GLSL → SPIR-V: linking " + what + ":\n" + program.getInfoLog());
  std::vector<uint32_t> words;
  spv::SpvBuildLogger logger;
  glslang::SpvOptions options;
  options.generateDebugInfo = debug_lines;
  glslang::GlslangToSpv(*program.getIntermediate(EShLangCompute), words, &logger, &options);
  if (words.size() < kHeaderWords)
    throw std::runtime_error("GLSL → SPIR-V: no code for " + what + ": " + logger.getAllMessages());
  if (debug_lines) return strip_lines(words);
  return SpirvModule{std::move(words), {}};
}

std::string disassemble_spirv(const std::vector<uint32_t>& words) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_1);
  std::string text;
  if (!tools.Disassemble(words, &text, SPV_BINARY_TO_TEXT_OPTION_INDENT | SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES))
    return "; SPIRV-Tools could not disassemble this module\n";
  return text;
}

SourceListing SpirvRenderer::render(const ir::Kernel& kernel) const {
  SourceListing glsl = glsl_renderer().render(kernel);
  SourceListing out;
  out.renderer = language();
  out.ir_op_line.assign(kernel.insts.size(), 0);
  SpirvModule mod;
  // glslang and the disassembler take ~10 ms a kernel, and every observed kernel is shown in SPIR-V:
  // keep the disassembly and its line map on disk ("<glsl line> ...\n" then the text)
  static const gpu::ProgramCache listings("spirv-listing");
  const std::string path = listings.path(kernel.name, "Vulkan 1.1 debug-lines\n" + glsl.code);
  if (auto hit = listings.read(path)) {
    const size_t eol = hit->find('\n');
    std::istringstream lines(hit->substr(0, eol));
    for (int line; lines >> line;) mod.glsl_line.push_back(line);
    out.code = eol == std::string::npos ? std::string() : hit->substr(eol + 1);
  } else {
    try {
      mod = compile_glsl(glsl.code, "kernel " + kernel.name, /*debug_lines=*/true);
    } catch (const std::exception& e) {
      out.code = std::string("; ") + e.what() + "\n";
      return out;
    }
    out.code = disassemble_spirv(mod.words);
    std::string entry;
    for (int line : mod.glsl_line) entry += std::to_string(line) + " ";
    listings.write(path, entry + "\n" + out.code);
  }
  // the disassembly has one line per instruction after the header; check before trusting the map
  size_t lines = 0;
  for (char c : out.code) lines += c == '\n';
  size_t header = lines >= mod.glsl_line.size() ? lines - mod.glsl_line.size() : 0;
  if (lines != header + mod.glsl_line.size() || header > 8) return out;
  // the first SPIR-V instruction of each GLSL line (one pass: big kernels have tens of thousands)
  std::unordered_map<int, int> first_spirv_line;
  for (size_t i = 0; i < mod.glsl_line.size(); i++)
    first_spirv_line.emplace(mod.glsl_line[i], static_cast<int>(header + i + 1));
  for (size_t op = 0; op < kernel.insts.size(); op++) {
    int want = glsl.ir_op_line[op];
    if (want == 0) continue;
    if (auto it = first_spirv_line.find(want); it != first_spirv_line.end()) out.ir_op_line[op] = it->second;
  }
  return out;
}

static const SpirvRenderer spirv_renderer;
static const bool registered = DeviceRegistry::add_renderer(&spirv_renderer);

}  // namespace ts
