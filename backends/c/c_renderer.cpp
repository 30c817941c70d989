#include "c/c_renderer.h"

namespace ts {

static CStyleLanguage c_language() {
  CStyleLanguage l;
  l.name = "C";
  l.prelude =
      "#include <math.h>\n"
      "#include <stdint.h>\n"
      "/* NaN-propagating max, as torch.maximum (fmaxf would drop the NaN) */\n"
      "static inline float ts_fmaxf(float a, float b) { return (a != a || a > b) ? a : b; }\n";
  l.kernel_prefix = "void";
  l.buffer_qualifier = "restrict";
  return l;
}

CRenderer::CRenderer() : CStyleRenderer(c_language()) {}

std::string CRenderer::signature(const ir::Kernel& k) const {
  std::string s = "void " + k.name + "(void** bufs) {\n";
  for (size_t i = 0; i < k.globals.size(); i++) {
    std::string t = type_name(k.globals[i].dtype);
    std::string cq = k.globals[i].is_output ? "" : "const ";
    s += "  " + cq + t + "* restrict data" + std::to_string(i) + " = (" + cq + t + "*)bufs[" + std::to_string(i) +
         "];  /* " + (k.globals[i].is_output ? "output" : "input") + ", " + std::to_string(k.globals[i].numel) +
         " elements */\n";
  }
  return s;
}

const CRenderer& c_renderer() {
  static CRenderer r;
  return r;
}

static const bool registered = DeviceRegistry::add_renderer(&c_renderer());

}  // namespace ts
