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
  // A bool-valued WHERE renders as bit arithmetic: gcc 12 at -O3 mis-vectorizes `c ? 1 : b` on bools
  // (tests/python/test_regressions.py::test_bool_select_feeding_a_float_select).
  std::string alu(const ir::Inst& in, const std::vector<std::string>& src,
                  const std::vector<DType>& src_dtype) const override;
  // MAX in an upcast kernel is the bit-mask ts_fmaxf_lanes (gcc's SLP packs no group of the branchy
  // ts_fmaxf) but for a lane no vector takes (unpaired_max_lane), a float WHERE in a kernel without upcast
  // outputs the select ts_select_f32 (see the .cpp).
  std::string alu_in(const ir::Kernel& kernel, const ir::Inst& in, const std::vector<std::string>& src,
                     const std::vector<DType>& src_dtype) const override;
  // Upcast kernels stage their strided store groups (see CStyleRenderer::render).
  bool stages_strided_store_groups(const ir::Kernel& kernel) const override;
  // TRANSPOSE_TILE kernels: each 8×8 tile's loads and stores as one ts_transpose_8x8 call; the multiply-adds
  // of 16 accumulators side by side as one vector statement (see the .cpp).
  std::vector<FusedStatement> fused_statements(const ir::Kernel& kernel) const override;
  // A float WHERE on a bool loaded once and shared by several WHEREs renders as `c ? a : b` (see the .cpp).
  std::string where_on_shared_loaded_condition(const ir::Kernel& kernel, const ir::Inst& in,
                                               const std::vector<std::string>& src,
                                               const std::vector<DType>& src_dtype) const override;
  // A loop whose trips read short runs far apart (a channel's 8×8 plane of each image of a batch, 16 KiB
  // apart): the next trip's runs are prefetched at the top of each trip (see the .cpp).
  std::vector<std::string> loop_prologue(const ir::Kernel& kernel, ir::ValueId range) const override;
  // The row strides of lane loops that are powers of two, each a variable whose value gcc does not know (see the .cpp).
  std::vector<std::string> kernel_prologue(const ir::Kernel& kernel) const override;
  // A lane loop (a local loop: rows_as_lanes) with a float MAX or a transcendental stays a loop for gcc's loop
  // vectorizer (see the .cpp).
  std::vector<std::string> loop_pragmas(const ir::Kernel& kernel, ir::ValueId range) const override;

 private:
  std::vector<FusedStatement> transpose_tiles(const ir::Kernel& kernel) const;
  std::vector<FusedStatement> vector_accumulators(const ir::Kernel& kernel) const;
  bool unpaired_max_lane(const ir::Kernel& kernel, ir::ValueId max) const;
};

const CRenderer& c_renderer();

}  // namespace ts
