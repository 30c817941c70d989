// The IR verifier: every invariant of ir.h, checked after lowering and after every pass (in debug
// builds and tests). Each violation names the instruction.
#include <sstream>

#include "tensorscope/ir.h"

namespace ts::ir {

std::vector<std::string> verify(const Kernel& k) {
  std::vector<std::string> errors;
  auto fail = [&](size_t i, const std::string& what) {
    std::ostringstream o;
    o << "%" << i << " (" << op_name(k.insts[i].op) << "): " << what;
    errors.push_back(o.str());
  };
  // scope[i]: the innermost RANGE open when %i was defined; live[i]: still in scope
  std::vector<int> open_ranges;
  std::vector<char> live(k.insts.size(), 0);
  std::vector<std::vector<ValueId>> defined_in(1);
  for (size_t i = 0; i < k.insts.size(); i++) {
    const Inst& in = k.insts[i];
    for (int s = 0; s < in.num_src; s++) {
      ValueId v = in.src[s];
      if (v >= i) {
        fail(i, "operand %" + std::to_string(v) + " is not defined before use");
      } else if (!live[v]) {
        fail(i, "operand %" + std::to_string(v) + " is out of scope (its loop has ended)");
      } else if (k.insts[v].op == Op::Store || k.insts[v].op == Op::EndRange || k.insts[v].op == Op::Assign) {
        fail(i, "operand %" + std::to_string(v) + " defines no value");
      }
    }
    if (!errors.empty() && errors.back().rfind("%" + std::to_string(i) + " ", 0) == 0) continue;
    auto dt = [&](int s) { return k.insts[in.src[s]].dtype; };
    switch (in.op) {
      case Op::DefineGlobal:
        if (in.arg < 0 || in.arg >= static_cast<int64_t>(k.globals.size())) fail(i, "buffer slot out of range");
        else if (k.globals[in.arg].dtype != in.dtype) fail(i, "dtype differs from the global's");
        break;
      case Op::Range:
        if (in.num_src != 1 || dt(0) != DType::Int32 || in.dtype != DType::Int32) fail(i, "RANGE needs one int32 bound");
        open_ranges.push_back(static_cast<int>(i));
        defined_in.emplace_back();
        break;
      case Op::EndRange:
        if (open_ranges.empty() || in.num_src != 1 || in.src[0] != static_cast<ValueId>(open_ranges.back())) {
          fail(i, "END_RANGE does not close the innermost open RANGE");
        } else {
          open_ranges.pop_back();
          for (ValueId v : defined_in.back()) live[v] = 0;
          defined_in.pop_back();
        }
        break;
      case Op::Load:
        if (in.num_src < 2 || k.insts[in.src[0]].op != Op::DefineGlobal) fail(i, "LOAD needs a DEFINE_GLOBAL");
        else if (dt(1) != DType::Int32) fail(i, "LOAD index must be int32");
        else if (in.num_src == 3 && dt(2) != DType::Bool) fail(i, "LOAD gate must be bool");
        else if (in.dtype != k.insts[in.src[0]].dtype) fail(i, "LOAD dtype differs from the buffer's");
        break;
      case Op::Store:
        if (in.num_src < 3 || in.num_src > 4 || k.insts[in.src[0]].op != Op::DefineGlobal) fail(i, "STORE needs a DEFINE_GLOBAL");
        else if (!k.globals[k.insts[in.src[0]].arg].is_output) fail(i, "STORE to an input buffer");
        else if (dt(1) != DType::Int32) fail(i, "STORE index must be int32");
        else if (dt(2) != k.insts[in.src[0]].dtype) fail(i, "STORE value dtype differs from the buffer's");
        else if (in.num_src == 4 && dt(3) != DType::Bool) fail(i, "STORE gate must be bool");
        break;
      case Op::Assign:
        if (in.num_src != 2 || k.insts[in.src[0]].op != Op::DefineAcc) fail(i, "ASSIGN needs a DEFINE_ACC");
        else if (dt(1) != k.insts[in.src[0]].dtype) fail(i, "ASSIGN value dtype differs from the accumulator's");

        break;
      case Op::Where:
        if (dt(0) != DType::Bool) fail(i, "WHERE condition must be bool");
        else if (dt(1) != in.dtype || dt(2) != in.dtype) fail(i, "WHERE branches must have the result dtype");
        break;
      case Op::CmpLt: case Op::CmpEq:
        if (in.dtype != DType::Bool || dt(0) != dt(1)) fail(i, "comparison needs equal operand dtypes and a bool result");
        break;
      case Op::Cast: break;
      case Op::Bitcast:
        if (in.num_src != 1 || !((dt(0) == DType::Float32 && in.dtype == DType::Int32) || (dt(0) == DType::Int32 && in.dtype == DType::Float32)))
          fail(i, "BITCAST goes between float32 and int32");
        break;
      default:
        if (is_alu(in.op)) {
          bool half = in.dtype == DType::Float16;
          for (int s = 0; s < in.num_src; s++) half |= dt(s) == DType::Float16;
          if (half) fail(i, "arithmetic on float16: compute in float32 and CAST the result to float16");
          if (in.num_src != alu_arity(in.op)) fail(i, "wrong number of operands");
          for (int s = 0; s < in.num_src; s++)
            if (dt(s) != in.dtype) fail(i, "operand dtype differs from the result dtype");
          if ((in.op == Op::IDiv || in.op == Op::Mod) && is_float(in.dtype)) fail(i, "IDIV/MOD need integers");
          if ((in.op == Op::Exp2 || in.op == Op::Log2 || in.op == Op::Sin || in.op == Op::Sqrt || in.op == Op::Recip) &&
              in.dtype != DType::Float32)
            fail(i, "transcendental op on a non-float dtype");
        }
    }
    if (in.op != Op::Store && in.op != Op::EndRange && in.op != Op::Assign) {
      live[i] = 1;
      // accumulators outlive their loop: they are defined outside it
      defined_in.back().push_back(static_cast<ValueId>(i));
    }
  }
  if (!open_ranges.empty()) errors.push_back("kernel ends with " + std::to_string(open_ranges.size()) + " open RANGE(s)");
  return errors;
}

}  // namespace ts::ir
