#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "tensorscope/ir.h"

namespace ts::ir {

const char* op_name(Op op) {
  static const char* names[] = {"DEFINE_GLOBAL", "DEFINE_ACC", "CONST", "RANGE", "END_RANGE", "LOAD", "STORE",
                                "ASSIGN", "DEFINE_LOCAL", "BARRIER", "NEG", "EXP2", "LOG2", "SIN", "SQRT", "RECIP", "CAST", "BITCAST", "ADD", "MUL",
                                "MAX", "CMPLT", "CMPEQ", "IDIV", "MOD", "AND", "WHERE", "MULACC"};
  return names[static_cast<int>(op)];
}

OptPlan OptPlan::parse(const std::string& text) {
  OptPlan plan;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    int kind = -1;
    for (int k = 0; k < kKinds; k++)
      if (key == opt_name(static_cast<AppliedOpt::Kind>(k))) kind = k;
    int amount = 0;
    bool number = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos && value.size() < 6;
    if (number) amount = std::stoi(value);
    const bool one_ok = kind == AppliedOpt::Threads || kind == AppliedOpt::Local;
    if (kind < 0 || (!number && value != "auto") || (amount == 1 && !one_ok)) {
      std::string kinds;
      for (int k = 0; k < kKinds; k++) kinds += std::string(k ? ", " : "") + opt_name(static_cast<AppliedOpt::Kind>(k));
      throw std::invalid_argument("optimization plan: '" + item + "' is not KIND=AMOUNT with KIND one of " + kinds +
                                  " and AMOUNT 0 (off), auto, or a factor of at least 2 (THREADS and LOCAL: 1 too)");
    }
    plan.amount[kind] = number ? amount : kAuto;
  }
  return plan;
}

std::string OptPlan::str() const {
  std::string out;
  for (int k = 0; k < kKinds; k++)
    if (amount[k] != kAuto)
      out += (out.empty() ? "" : ",") + std::string(opt_name(static_cast<AppliedOpt::Kind>(k))) + "=" +
             std::to_string(amount[k]);
  return out;
}

const char* opt_name(AppliedOpt::Kind kind) {
  switch (kind) {
    case AppliedOpt::UpcastGlobal: return "UPCAST_GLOBAL";
    case AppliedOpt::RegisterTile: return "REGISTER_TILE";
    case AppliedOpt::UpcastReduce: return "UPCAST_REDUCE";
    case AppliedOpt::Local: return "LOCAL";
    case AppliedOpt::Group: return "GROUP";
    case AppliedOpt::Threads: return "THREADS";
    case AppliedOpt::Padto: return "PADTO";
    case AppliedOpt::GroupTop: return "GROUPTOP";
    case AppliedOpt::Tile: return "TILE";
    case AppliedOpt::TransposeTile: return "TRANSPOSE_TILE";
    case AppliedOpt::Lanes: return "LANES";
  }
  return "?";
}

int64_t local_loop_lanes(const Kernel& k) {
  for (const Inst& in : k.insts)
    if (in.op == Op::Range && in.arg == kLocalLoop) return static_cast<int64_t>(k.insts[in.src[0]].value);
  return 0;
}

bool is_alu(Op op) { return op >= Op::Neg; }

int alu_arity(Op op) {
  if (op >= Op::Neg && op <= Op::Bitcast) return 1;
  if (op == Op::Where || op == Op::MulAcc) return 3;
  if (op >= Op::Add) return 2;
  return 0;
}

// A constant as the listing shows it: ints in full, floats with 9 significant digits (%g: ostream's default
// form at precision 9, which this replaced).
static void append_const(std::string& out, double v, DType dt) {
  if (dt == DType::Bool) {
    out += v != 0 ? "true" : "false";
    return;
  }
  char buf[40];
  int n = 0;
  if (dt == DType::Int32) n = std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else if (std::isinf(v)) n = std::snprintf(buf, sizeof buf, "%s", v > 0 ? "inf" : "-inf");
  else if (std::isnan(v)) n = std::snprintf(buf, sizeof buf, "nan");
  else n = std::snprintf(buf, sizeof buf, "%.9g", v);
  out.append(buf, static_cast<size_t>(n));
}

static void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

std::string applied_str(const Kernel& k) {
  std::string out;
  for (const AppliedOpt& opt : k.opts)
    out += (out.empty() ? "" : " ") + std::string(opt_name(opt.kind)) + "(" + std::to_string(opt.amount) + ")";
  return out;
}

std::string print(const Kernel& k) {
  // Appends to one string (an ostringstream was most of the cost of watching a run: the listing after
  // every pass of every new kernel is printed).
  std::string o;
  o.reserve(64 + 40 * k.insts.size());
  o += "kernel " + k.name + "(";
  for (size_t i = 0; i < k.globals.size(); i++) {
    o += i ? ", " : "";
    o += k.globals[i].is_output ? "out " : "in ";
    o += dtype_name(k.globals[i].dtype);
    o += "[";
    append_int(o, k.globals[i].numel);
    o += "]";
  }
  o += ")";
  if (!k.opts.empty()) o += "   ; opts: " + applied_str(k);
  if (!k.plan.automatic()) o += "   ; plan: " + k.plan.str();
  o += "\n";
  int depth = 0;
  for (size_t i = 0; i < k.insts.size(); i++) {
    const Inst& in = k.insts[i];
    if (in.op == Op::EndRange) depth--;
    o.append(static_cast<size_t>(std::max(0, 2 * (depth + 1))), ' ');
    bool defines = in.op != Op::Store && in.op != Op::EndRange && in.op != Op::Assign && in.op != Op::Barrier;
    if (defines) {
      o += "%";
      append_int(o, static_cast<int64_t>(i));
      o += " = ";
    }
    o += op_name(in.op);
    if (defines) {
      o += ".";
      o += dtype_name(in.dtype);
    }
    for (int s = 0; s < in.num_src; s++) {
      o += s ? ", %" : " %";
      append_int(o, in.src[s]);
    }
    if (in.op == Op::Const || in.op == Op::DefineAcc) {
      o += " ";
      append_const(o, in.value, in.dtype);
    }
    if (in.op == Op::DefineGlobal) {
      o += " slot ";
      append_int(o, in.arg);
    }
    if (in.op == Op::DefineLocal) {
      o += " [";
      append_int(o, in.arg);
      o += "]";
    }
    if (in.op == Op::Range) o += in.arg == kGlobalLoop ? "   ; global" : in.arg == kLocalLoop ? "   ; local" : "   ; reduce";
    if (in.op == Op::EndRange) {
      o += "   ; %";
      append_int(o, static_cast<int64_t>(i));
    }
    o += "\n";
    if (in.op == Op::Range) depth++;
  }
  return o;
}

}  // namespace ts::ir
