// The C-family renderer base (after tinygrad's cstyle renderer): a straight walk over the IR that
// prints one statement per instruction. Targets (C, OpenCL C, CUDA C, GLSL) differ only in the small
// table of spellings in CStyleLanguage.
#pragma once
#include <string>

#include "tensorscope/device.h"

namespace ts {

struct CStyleLanguage {
  std::string name;                     // "C"
  std::string prelude;                  // helper definitions before the kernel
  std::string kernel_prefix;            // "void"
  std::string buffer_qualifier;         // "restrict"
  std::string float_type = "float", int_type = "int", bool_type = "_Bool";
  std::string exp2 = "exp2f", log2 = "log2f", sin = "sinf", sqrt = "sqrtf";
  std::string max = "ts_fmaxf";         // must propagate NaN like torch.maximum
};

class CStyleRenderer : public Renderer {
 public:
  explicit CStyleRenderer(CStyleLanguage lang) : lang_(std::move(lang)) {}
  std::string language() const override { return lang_.name; }
  SourceListing render(const ir::Kernel& kernel) const override;

 protected:
  // The kernel's signature and the lines that bind the arguments to named buffers.
  virtual std::string signature(const ir::Kernel& kernel) const = 0;
  std::string type_name(DType dt) const;
  CStyleLanguage lang_;
};

}  // namespace ts
