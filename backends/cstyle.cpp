#include "cstyle.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace ts {

std::string CStyleRenderer::type_name(DType dt) const {
  switch (dt) {
    case DType::Float32: return lang_.float_type;
    case DType::Int32: return lang_.int_type;
    case DType::Bool: return lang_.bool_type;
  }
  return "?";
}

static std::string literal(double v, DType dt) {
  if (dt == DType::Bool) return v != 0 ? "1" : "0";
  if (dt == DType::Int32) {
    int64_t i = static_cast<int64_t>(v);
    return i == INT32_MIN ? "(-2147483647-1)" : std::to_string(i);
  }
  if (std::isnan(v)) return "(0.0f/0.0f)";
  if (std::isinf(v)) return v > 0 ? "(1.0f/0.0f)" : "(-1.0f/0.0f)";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<float>(v));  // shortest text that round-trips a float
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

SourceListing CStyleRenderer::render(const ir::Kernel& k) const {
  using ir::Op;
  SourceListing out;
  out.renderer = lang_.name;
  out.ir_op_line.assign(k.insts.size(), 0);
  std::ostringstream o;
  int line = 1;
  auto emit = [&](const std::string& text, int depth, int op) {
    o << std::string(2 * depth, ' ') << text << "\n";
    if (op >= 0) out.ir_op_line[op] = line;
    line++;
  };
  for (char c : lang_.prelude) if (c == '\n') line++;
  o << lang_.prelude;
  std::string sig = signature(k);
  for (char c : sig) if (c == '\n') line++;
  o << sig;
  int depth = 1;
  std::vector<std::string> name(k.insts.size());
  for (size_t i = 0; i < k.insts.size(); i++) {
    const ir::Inst& in = k.insts[i];
    auto src = [&](int s) { return name[in.src[s]]; };
    std::string t = type_name(in.dtype);
    std::string v = "v" + std::to_string(i);
    int op = static_cast<int>(i);
    switch (in.op) {
      case Op::DefineGlobal: name[i] = "data" + std::to_string(in.arg); out.ir_op_line[i] = 0; break;
      case Op::Const: name[i] = literal(in.value, in.dtype); break;
      case Op::DefineAcc:
        name[i] = "acc" + std::to_string(i);
        emit(t + " " + name[i] + " = " + literal(in.value, in.dtype) + ";", depth, op);
        break;
      case Op::Range:
        name[i] = "ridx" + std::to_string(i);
        emit("for (int " + name[i] + " = 0; " + name[i] + " < " + src(0) + "; " + name[i] + "++) {", depth, op);
        depth++;
        break;
      case Op::EndRange: depth--; emit("}", depth, op); break;
      case Op::Load: {
        std::string ld = src(0) + "[" + src(1) + "]";
        if (in.num_src == 3) ld = "(" + src(2) + " ? " + src(0) + "[" + src(1) + "] : " + literal(0, in.dtype) + ")";
        name[i] = v;
        emit(t + " " + v + " = " + ld + ";", depth, op);
        break;
      }
      case Op::Store: emit(src(0) + "[" + src(1) + "] = " + src(2) + ";", depth, op); break;
      case Op::Assign: emit(src(0) + " = " + src(1) + ";", depth, op); break;
      default: {
        std::string e;
        bool f = in.dtype == DType::Float32;
        switch (in.op) {
          case Op::Neg: e = "(-" + src(0) + ")"; break;
          case Op::Exp2: e = lang_.exp2 + "(" + src(0) + ")"; break;
          case Op::Log2: e = lang_.log2 + "(" + src(0) + ")"; break;
          case Op::Sin: e = lang_.sin + "(" + src(0) + ")"; break;
          case Op::Sqrt: e = lang_.sqrt + "(" + src(0) + ")"; break;
          case Op::Recip: e = "(1.0f/" + src(0) + ")"; break;
          case Op::Cast:
            e = in.dtype == DType::Bool ? "(" + src(0) + " != 0)" : "((" + t + ")" + src(0) + ")";
            break;
          case Op::Add: e = "(" + src(0) + " + " + src(1) + ")"; break;
          case Op::Mul: e = "(" + src(0) + " * " + src(1) + ")"; break;
          case Op::Max: e = f ? lang_.max + "(" + src(0) + ", " + src(1) + ")"
                              : "(" + src(0) + " > " + src(1) + " ? " + src(0) + " : " + src(1) + ")"; break;
          case Op::CmpLt: e = "(" + src(0) + " < " + src(1) + ")"; break;
          case Op::CmpEq: e = "(" + src(0) + " == " + src(1) + ")"; break;
          case Op::IDiv: e = "(" + src(0) + " / " + src(1) + ")"; break;
          case Op::Mod: e = "(" + src(0) + " % " + src(1) + ")"; break;
          case Op::And: e = "(" + src(0) + " && " + src(1) + ")"; break;
          case Op::Where: e = "(" + src(0) + " ? " + src(1) + " : " + src(2) + ")"; break;
          default: e = "/* ? */"; break;
        }
        name[i] = v;
        emit(t + " " + v + " = " + e + ";", depth, op);
      }
    }
  }
  emit("}", 0, -1);
  out.code = o.str();
  return out;
}

}  // namespace ts
