// CUDA C → PTX with NVRTC, the CUDA runtime compiler. NVRTC is loaded with dlopen on first use, so
// libtensorscope loads (fast) on machines without the CUDA toolkit; there the CUDA device reports why it
// cannot compile. The "PTX" listing renderer shows the second form of every kernel, line-linked to the IR
// through the CUDA C lines (`.loc` directives from -lineinfo).
#pragma once
#include <string>

#include "tensorscope/device.h"

namespace ts {

// Compiles `cuda_source` for the virtual architecture compute_<arch> (e.g. 75 → sm_75 and newer GPUs).
// Thread-safe. Throws std::runtime_error with NVRTC's log, naming `what`, when the source does not compile
// or NVRTC cannot be loaded.
std::string compile_cuda_to_ptx(const std::string& cuda_source, const std::string& what, int arch = 75,
                                bool line_info = false);

// "NVRTC 13.0", or why NVRTC is unavailable.
std::string nvrtc_version();

class PTXRenderer : public Renderer {
 public:
  std::string language() const override { return "PTX"; }
  // The CUDA C renderer's output compiled for compute_75; a compile error becomes the listing's text.
  SourceListing render(const ir::Kernel& kernel) const override;
};

}  // namespace ts
