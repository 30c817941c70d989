// The C-family renderer base (after tinygrad's cstyle renderer): a straight walk over the IR that
// prints one statement per instruction. Targets (C, OpenCL C, CUDA C, GLSL) differ in the small table
// of spellings in CStyleLanguage, and in a few hooks where a table entry is not enough (the kernel's
// signature everywhere; casts, bool buffers and bool arithmetic in GLSL).
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gpu_launch.h"
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
  std::string fma = "fmaf";             // a * b + c with one rounding (MULACC)
  std::string float_as_int = "ts_float_to_bits", int_as_float = "ts_bits_to_float";  // BITCAST
  std::string true_literal = "1", false_literal = "0";
  std::string infinity = "(1.0f/0.0f)", neg_infinity = "(-1.0f/0.0f)", nan = "(0.0f/0.0f)";
  // float16 (see ir.h): values live in float registers, so only buffers and conversions differ. The
  // buffer element type, the function that widens one element to float, the one that rounds a float to
  // an element (to nearest, ties to even), and the one that rounds a float to the nearest float16 value,
  // as a float (the CAST to float16). The C defaults are ts_math.h's exact bit-arithmetic conversions.
  std::string half_type = "uint16_t", half_to_float = "ts_half_to_float", float_to_half = "ts_float_to_half";
  std::string round_half = "ts_round_half";
  // GPU targets: the thread's global id and the grid's global size per dimension (x, y, z), and how many
  // workgroups one launch may have per dimension. When set, the outermost global RANGEs become the
  // grid's dimensions (see gpu_launch.h); when empty (C), every RANGE is a plain for loop.
  std::string global_id[3], global_size[3];
  uint32_t max_groups[3] = {65535, 65535, 65535};
  // Workgroup kernels (local loops, ir.h): the workgroup's id and the number of workgroups per dimension,
  // the thread's lane in its workgroup (x), the BARRIER statement and the qualifier of local memory
  // (DEFINE_LOCAL). Empty for C, where a local loop is a plain loop, BARRIER nothing, and local memory an
  // array on the stack.
  std::string group_id[3], num_groups[3], local_id;
  std::string barrier;          // "barrier(CLK_LOCAL_MEM_FENCE);"
  std::string local_qualifier;  // "__local"
};

// An index as (base, constant offset): `base + c` (the Builder adds constant offsets last), or the index itself
// with offset 0. Neighbouring elements of an upcast group share the base (strided store groups, C's transpose
// tiles).
std::pair<ir::ValueId, int64_t> index_base_and_offset(const ir::Kernel& kernel, ir::ValueId index);

class CStyleRenderer : public Renderer {
 public:
  explicit CStyleRenderer(CStyleLanguage lang) : lang_(std::move(lang)) {}
  std::string language() const override { return lang_.name; }
  SourceListing render(const ir::Kernel& kernel) const override;
  // The helper definitions every rendered source starts with (CStyleLanguage::prelude).
  const std::string& prelude() const { return lang_.prelude; }
  // GPU targets: the grid that render() assumes; the device launches exactly this grid.
  gpu::Grid grid(const ir::Kernel& kernel) const { return gpu::plan_grid(kernel, lang_.max_groups); }
  // Whether any value of the kernel is float16 (targets add extensions or headers only for those).
  static bool uses_float16(const ir::Kernel& kernel);

 protected:
  // The kernel's signature and the lines that bind the arguments to named buffers.
  virtual std::string signature(const ir::Kernel& kernel) const = 0;
  // The declaration of the DEFINE_LOCAL at `id` inside the kernel's body, named `name`; "" when the
  // target declares local memory elsewhere (GLSL: `shared` arrays at global scope, in signature()).
  virtual std::string define_local(const ir::Kernel& kernel, ir::ValueId id, const std::string& name) const;
  static std::string local_name(ir::ValueId id) { return "lmem" + std::to_string(id); }
  // `expr` (of type `from`) converted to `to`.
  virtual std::string cast(const std::string& expr, DType from, DType to) const;
  // Reading element `index` of buffer `buf` whose elements are `dtype`, as a value of that dtype.
  virtual std::string load(const std::string& buf, const std::string& index, DType dtype) const;
  // The statement writing `value` to element `index` of buffer `buf`.
  virtual std::string store(const std::string& buf, const std::string& index, const std::string& value,
                            DType dtype) const;
  // The expression of an ALU instruction; `src` are its operands' names, `src_dtype` their dtypes.
  virtual std::string alu(const ir::Inst& in, const std::vector<std::string>& src,
                          const std::vector<DType>& src_dtype) const;
  // The expression of an ALU instruction of `kernel`: alu()'s, unless the target spells it differently in some
  // kernels (C: MAX and WHERE in kernels with and without upcast outputs).
  virtual std::string alu_in(const ir::Kernel& kernel, const ir::Inst& in, const std::vector<std::string>& src,
                             const std::vector<DType>& src_dtype) const {
    (void)kernel;
    return alu(in, src, src_dtype);
  }
  // The expression of a WHERE whose condition is one value loaded from a bool buffer that several WHEREs
  // select on (the lanes of an upcast group): alu_in()'s by default.
  virtual std::string where_on_shared_loaded_condition(const ir::Kernel& kernel, const ir::Inst& in,
                                                       const std::vector<std::string>& src,
                                                       const std::vector<DType>& src_dtype) const {
    return alu_in(kernel, in, src, src_dtype);
  }
  // Whether the stores of an upcast group that land `stride` elements apart (not side by side) are staged
  // in a small array first and written from it by a loop (see render()): C's upcast kernels, for gcc's SLP.
  virtual bool stages_strided_store_groups(const ir::Kernel&) const { return false; }
  // One statement a target writes in place of several instructions (C: the 64 loads and stores of a
  // TRANSPOSE_TILE tile as one ts_transpose_8x8 call). It is written where the last of its `members` was;
  // the members are not written, nor is index arithmetic that only they used; `reads` are the values its
  // text names (written as usual before it). `text` is given the names of the kernel's values. In the
  // listing's line map every member (and that arithmetic) points at the statement. `names` are the names later
  // instructions read members by (C's vector accumulators: acc295 is lane 0 of the vector vacc295, `vacc295[0]`).
  struct FusedStatement {
    std::vector<ir::ValueId> members;
    std::vector<ir::ValueId> reads;
    std::function<std::string(const std::vector<std::string>& name)> text;
    std::vector<std::pair<ir::ValueId, std::string>> names;
  };
  virtual std::vector<FusedStatement> fused_statements(const ir::Kernel&) const { return {}; }
  // Statements a target writes first inside the body of the sequential loop `range` (a `for` loop, not a grid
  // dimension), before the loop's instructions (C: software prefetches of the next trip's short runs); none
  // by default.
  virtual std::vector<std::string> loop_prologue(const ir::Kernel&, ir::ValueId) const { return {}; }
  // Statements a target writes first in the kernel's body, before its instructions (C: the hidden row strides of
  // lane loops); none by default.
  virtual std::vector<std::string> kernel_prologue(const ir::Kernel&) const { return {}; }
  // Lines a target writes right in front of the sequential loop `range` (C: a pragma for gcc's unroller); none
  // by default.
  virtual std::vector<std::string> loop_pragmas(const ir::Kernel&, ir::ValueId) const { return {}; }
  std::string type_name(DType dt) const;    // of a value (float16 values are floats)
  std::string buffer_type(DType dt) const;  // of a buffer element (float16: lang_.half_type)
  std::string literal(double value, DType dt) const;
  CStyleLanguage lang_;
};

}  // namespace ts
