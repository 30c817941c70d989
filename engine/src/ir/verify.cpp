// The IR verifier: every invariant of ir.h, checked after lowering and after every pass (in debug
// builds and tests). Each violation names the instruction.
#include <map>
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
  // Workgroup rules (ir.h): the open local loop (kNone when none), the kernel's lanes, and for each
  // DEFINE_LOCAL which region (a local loop, or kNone: the uniform code outside them) wrote / read it since
  // the last BARRIER. A region that is not the one that wrote it must not read it, and so on.
  ValueId local_loop = kNone;
  int64_t lanes = 0;
  constexpr ValueId kMany = kNone - 1;  // read by several regions
  struct Access {
    bool written = false, read = false;
    ValueId writer = kNone, reader = kNone;
  };
  std::map<ValueId, Access> local_access;
  for (size_t i = 0; i < k.insts.size(); i++) {
    const Inst& in = k.insts[i];
    for (int s = 0; s < in.num_src; s++) {
      ValueId v = in.src[s];
      if (v >= i) {
        fail(i, "operand %" + std::to_string(v) + " is not defined before use");
      } else if (!live[v]) {
        fail(i, "operand %" + std::to_string(v) + " is out of scope (its loop has ended)");
      } else if (k.insts[v].op == Op::Store || k.insts[v].op == Op::EndRange || k.insts[v].op == Op::Assign ||
                 k.insts[v].op == Op::Barrier) {
        fail(i, "operand %" + std::to_string(v) + " defines no value");
      }
    }
    if (!errors.empty() && errors.back().rfind("%" + std::to_string(i) + " ", 0) == 0) continue;
    auto dt = [&](int s) { return k.insts[in.src[s]].dtype; };
    auto is_buffer = [&](ValueId v) { return k.insts[v].op == Op::DefineGlobal || k.insts[v].op == Op::DefineLocal; };
    switch (in.op) {
      case Op::DefineGlobal:
        if (in.arg < 0 || in.arg >= static_cast<int64_t>(k.globals.size())) fail(i, "buffer slot out of range");
        else if (k.globals[in.arg].dtype != in.dtype) fail(i, "dtype differs from the global's");
        break;
      case Op::Range:
        if (in.num_src != 1 || dt(0) != DType::Int32 || in.dtype != DType::Int32) fail(i, "RANGE needs one int32 bound");
        else if (in.arg != kReduceLoop && in.arg != kGlobalLoop && in.arg != kLocalLoop) fail(i, "unknown RANGE kind");
        else if (local_loop != kNone && in.arg == kLocalLoop) fail(i, "a local loop inside a local loop");
        else if (local_loop != kNone && in.arg == kGlobalLoop) fail(i, "a global loop inside a local loop");
        else if (in.arg == kLocalLoop) {
          const Inst& bound = k.insts[in.src[0]];
          if (bound.op != Op::Const || bound.value < 1 || bound.value > kMaxLanes)
            fail(i, "a local loop needs a constant bound of 1.." + std::to_string(kMaxLanes) + " lanes");
          else if (lanes != 0 && static_cast<int64_t>(bound.value) != lanes)
            fail(i, "local loops of one kernel need the same bound (the workgroup size): " +
                        std::to_string(static_cast<int64_t>(bound.value)) + " after " + std::to_string(lanes));
          else lanes = static_cast<int64_t>(bound.value);
          local_loop = static_cast<ValueId>(i);
        }
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
          if (in.src[0] == local_loop) local_loop = kNone;
        }
        break;
      case Op::DefineLocal:
        if (!open_ranges.empty()) fail(i, "DEFINE_LOCAL inside a loop (local memory is declared at the top level)");
        else if (in.dtype != DType::Float32 && in.dtype != DType::Int32) fail(i, "DEFINE_LOCAL of float32 or int32 only");
        else if (in.arg < 1) fail(i, "DEFINE_LOCAL needs at least one element");
        break;
      case Op::Barrier:
        if (in.num_src != 0) fail(i, "BARRIER takes no operands");
        else if (local_loop != kNone) fail(i, "BARRIER inside a local loop (lanes run one after another there)");
        else for (auto& [mem, state] : local_access) state = {};
        break;
      case Op::Load:
        if (in.num_src < 2 || !is_buffer(in.src[0])) fail(i, "LOAD needs a DEFINE_GLOBAL or DEFINE_LOCAL");
        else if (dt(1) != DType::Int32) fail(i, "LOAD index must be int32");
        else if (in.num_src == 3 && dt(2) != DType::Bool) fail(i, "LOAD gate must be bool");
        else if (in.dtype != k.insts[in.src[0]].dtype) fail(i, "LOAD dtype differs from the buffer's");
        else if (k.insts[in.src[0]].op == Op::DefineLocal) {
          Access& a = local_access[in.src[0]];
          if (a.written && a.writer != local_loop)
            fail(i, "LOAD of local memory written elsewhere (in another local loop) without a BARRIER between");
          a.reader = !a.read || a.reader == local_loop ? local_loop : kMany;
          a.read = true;
        }
        break;
      case Op::Store:
        if (in.num_src < 3 || in.num_src > 4 || !is_buffer(in.src[0])) fail(i, "STORE needs a DEFINE_GLOBAL or DEFINE_LOCAL");
        else if (k.insts[in.src[0]].op == Op::DefineGlobal && !k.globals[k.insts[in.src[0]].arg].is_output)
          fail(i, "STORE to an input buffer");
        else if (dt(1) != DType::Int32) fail(i, "STORE index must be int32");
        else if (dt(2) != k.insts[in.src[0]].dtype) fail(i, "STORE value dtype differs from the buffer's");
        else if (in.num_src == 4 && dt(3) != DType::Bool) fail(i, "STORE gate must be bool");
        else if (k.insts[in.src[0]].op == Op::DefineLocal) {
          Access& a = local_access[in.src[0]];
          if (local_loop == kNone) fail(i, "STORE to local memory outside a local loop");
          else if (a.written && a.writer != local_loop)
            fail(i, "STORE to local memory written in another local loop without a BARRIER between");
          else if (a.read && a.reader != local_loop)
            fail(i, "STORE to local memory read elsewhere without a BARRIER between");
          a.written = true;
          a.writer = local_loop;
        }
        break;
      case Op::Assign:
        if (in.num_src != 2 || k.insts[in.src[0]].op != Op::DefineAcc) fail(i, "ASSIGN needs a DEFINE_ACC");
        else if (dt(1) != k.insts[in.src[0]].dtype) fail(i, "ASSIGN value dtype differs from the accumulator's");
        else if (local_loop != kNone && in.src[0] < local_loop)
          fail(i, "ASSIGN inside a local loop to an accumulator defined outside it (per-lane state crosses "
                  "lanes only through local memory)");
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
    if (in.op != Op::Store && in.op != Op::EndRange && in.op != Op::Assign && in.op != Op::Barrier) {
      live[i] = 1;
      // accumulators outlive their loop: they are defined outside it
      defined_in.back().push_back(static_cast<ValueId>(i));
    }
  }
  if (!open_ranges.empty()) errors.push_back("kernel ends with " + std::to_string(open_ranges.size()) + " open RANGE(s)");
  return errors;
}

}  // namespace ts::ir
