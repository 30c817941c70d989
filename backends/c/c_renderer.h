// The C renderer: C99 for the system C compiler, one function
// `void <name>(void** bufs, int ts_core, int ts_cores)` run once per thread (THREADS).
#pragma once
#include "cstyle.h"

namespace ts {

class CRenderer : public CStyleRenderer {
 public:
  CRenderer();

 protected:
  std::string signature(const ir::Kernel& kernel) const override;
  // THREADS: the outermost global loop runs only this thread's block [TS_LO, TS_HI) of its range.
  SourceListing render(const ir::Kernel& kernel) const override;
};

const CRenderer& c_renderer();

}  // namespace ts
