// The C renderer: C99 for the system C compiler, one function `void <name>(void** bufs)`.
#pragma once
#include "cstyle.h"

namespace ts {

class CRenderer : public CStyleRenderer {
 public:
  CRenderer();

 protected:
  std::string signature(const ir::Kernel& kernel) const override;
};

const CRenderer& c_renderer();

}  // namespace ts
