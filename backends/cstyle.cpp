#include "cstyle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>
#include <sstream>

namespace ts {

std::string CStyleRenderer::type_name(DType dt) const {
  switch (dt) {
    case DType::Float32: return lang_.float_type;
    case DType::Int32: return lang_.int_type;
    case DType::Bool: return lang_.bool_type;
    case DType::Float16: return lang_.float_type;
  }
  return "?";
}

std::string CStyleRenderer::buffer_type(DType dt) const { return dt == DType::Float16 ? lang_.half_type : type_name(dt); }

bool CStyleRenderer::uses_float16(const ir::Kernel& k) {
  for (const ir::Inst& in : k.insts)
    if (in.dtype == DType::Float16) return true;
  return false;
}

std::string CStyleRenderer::literal(double v, DType dt) const {
  if (dt == DType::Bool) return v != 0 ? lang_.true_literal : lang_.false_literal;
  if (dt == DType::Int32) {
    int64_t i = static_cast<int64_t>(v);
    return i == INT32_MIN ? "(-2147483647-1)" : std::to_string(i);
  }
  if (std::isnan(v)) return lang_.nan;
  if (std::isinf(v)) return v > 0 ? lang_.infinity : lang_.neg_infinity;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<float>(v));  // shortest text that round-trips a float
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

std::string CStyleRenderer::cast(const std::string& x, DType from, DType to) const {
  if (to == DType::Float16) return lang_.round_half + "(" + (is_float(from) ? x : cast(x, from, DType::Float32)) + ")";
  if (from == DType::Float16) return to == DType::Float32 ? x : cast(x, DType::Float32, to);  // the float holds the value
  // a bool goes to float through int: gcc's SLP packs no conversion from a 1-bit type (a max-pool
  // gradient's (float)(x == max) kept its upcast group scalar: 28 -> 14 us measured)
  if (from == DType::Bool && is_float(to)) return "((" + type_name(to) + ")(" + lang_.int_type + ")" + x + ")";
  return to == DType::Bool ? "(" + x + " != 0)" : "((" + type_name(to) + ")" + x + ")";
}

std::string CStyleRenderer::load(const std::string& buf, const std::string& index, DType dt) const {
  if (dt == DType::Float16) return lang_.half_to_float + "(" + buf + "[" + index + "])";
  return buf + "[" + index + "]";
}

std::string CStyleRenderer::store(const std::string& buf, const std::string& index, const std::string& value,
                                  DType dt) const {
  if (dt == DType::Float16) return buf + "[" + index + "] = " + lang_.float_to_half + "(" + value + ");";
  return buf + "[" + index + "] = " + value + ";";
}

std::string CStyleRenderer::alu(const ir::Inst& in, const std::vector<std::string>& s,
                                const std::vector<DType>& sdt) const {
  using ir::Op;
  bool f = in.dtype == DType::Float32;
  switch (in.op) {
    case Op::Neg: return "(-" + s[0] + ")";
    case Op::Exp2: return lang_.exp2 + "(" + s[0] + ")";
    case Op::Log2: return lang_.log2 + "(" + s[0] + ")";
    case Op::Sin: return lang_.sin + "(" + s[0] + ")";
    case Op::Sqrt: return lang_.sqrt + "(" + s[0] + ")";
    case Op::Recip: return "(1.0f/" + s[0] + ")";
    case Op::Cast: return cast(s[0], sdt[0], in.dtype);
    case Op::Bitcast: return (in.dtype == DType::Int32 ? lang_.float_as_int : lang_.int_as_float) + "(" + s[0] + ")";
    case Op::Add: return "(" + s[0] + " + " + s[1] + ")";
    case Op::Mul: return "(" + s[0] + " * " + s[1] + ")";
    case Op::Max: return f ? lang_.max + "(" + s[0] + ", " + s[1] + ")"
                           : "(" + s[0] + " > " + s[1] + " ? " + s[0] + " : " + s[1] + ")";
    case Op::CmpLt: return "(" + s[0] + " < " + s[1] + ")";
    case Op::CmpEq: return "(" + s[0] + " == " + s[1] + ")";
    case Op::IDiv: return "(" + s[0] + " / " + s[1] + ")";
    case Op::Mod: return "(" + s[0] + " % " + s[1] + ")";
    case Op::And: return "(" + s[0] + " && " + s[1] + ")";
    case Op::Where: return "(" + s[0] + " ? " + s[1] + " : " + s[2] + ")";
    case Op::MulAcc: return f ? lang_.fma + "(" + s[0] + ", " + s[1] + ", " + s[2] + ")"
                              : "(" + s[0] + " * " + s[1] + " + " + s[2] + ")";
    default: return "/* ? */";
  }
}

std::string CStyleRenderer::define_local(const ir::Kernel& k, ir::ValueId id, const std::string& name) const {
  const ir::Inst& in = k.insts[id];
  std::string q = lang_.local_qualifier.empty() ? "" : lang_.local_qualifier + " ";
  return q + type_name(in.dtype) + " " + name + "[" + std::to_string(in.arg) + "];";
}

// Whether the global loop at `range` can be split among the lanes of a workgroup: its body has no local
// loop, no BARRIER and no access to local memory, so each lane can take every lanes-th iteration alone.
static bool lane_splittable(const ir::Kernel& k, size_t range) {
  int depth = 0;
  for (size_t i = range; i < k.insts.size(); i++) {
    const ir::Inst& in = k.insts[i];
    if (in.op == ir::Op::Barrier || (in.op == ir::Op::Range && in.arg == ir::kLocalLoop)) return false;
    if ((in.op == ir::Op::Load || in.op == ir::Op::Store) && k.insts[in.src[0]].op == ir::Op::DefineLocal) return false;
    if (in.op == ir::Op::Range) depth++;
    if (in.op == ir::Op::EndRange && --depth == 0) return true;
  }
  return true;
}

// Whether the loop at `range` has a local loop inside.
static bool holds_local_loop(const ir::Kernel& k, size_t range) {
  int depth = 0;
  for (size_t i = range; i < k.insts.size(); i++) {
    const ir::Inst& in = k.insts[i];
    if (in.op == ir::Op::Range && in.arg == ir::kLocalLoop && i != range) return true;
    if (in.op == ir::Op::Range) depth++;
    if (in.op == ir::Op::EndRange && --depth == 0) return false;
  }
  return false;
}

// A run of stores of an upcast group to one buffer at base + 0, base + s, base + 2s, ... (s > 1): a
// max-pool over an NHWC input writes its 16 channels' lanes 4 elements apart into the NCHW output.
struct StridedStoreGroup {
  size_t first = 0, count = 0;  // the STOREs at first .. first + count - 1
  ir::ValueId base = ir::kNone;  // lane l stores at base + offset + stride · l
  int64_t offset = 0, stride = 0;
};

std::pair<ir::ValueId, int64_t> index_base_and_offset(const ir::Kernel& k, ir::ValueId index) {
  const ir::Inst& in = k.insts[index];
  if (in.op == ir::Op::Add && k.insts[in.src[1]].op == ir::Op::Const)
    return {in.src[0], static_cast<int64_t>(k.insts[in.src[1]].value)};
  return {index, 0};
}

static std::vector<StridedStoreGroup> strided_store_groups(const ir::Kernel& k) {
  using ir::Op;
  auto split_index = [&](ir::ValueId idx) { return index_base_and_offset(k, idx); };
  auto plain_store = [&](size_t i) {
    return k.insts[i].op == Op::Store && k.insts[i].num_src == 3 && k.insts[k.insts[i].src[0]].op == Op::DefineGlobal;
  };
  std::vector<StridedStoreGroup> groups;
  for (size_t i = 0; i < k.insts.size(); i++) {
    if (!plain_store(i)) continue;
    // the first lane at any constant offset: a register tile's row r stores its lanes from base + r on
    auto [base, c0] = split_index(k.insts[i].src[1]);
    if (i + 1 >= k.insts.size() || !plain_store(i + 1) || k.insts[i + 1].src[0] != k.insts[i].src[0]) continue;
    auto [base1, c1] = split_index(k.insts[i + 1].src[1]);
    const int64_t stride = c1 - c0;
    if (base1 != base || stride <= 1) continue;
    size_t n = 2;
    while (i + n < k.insts.size() && plain_store(i + n) && k.insts[i + n].src[0] == k.insts[i].src[0] &&
           split_index(k.insts[i + n].src[1]) == std::make_pair(base, c0 + stride * static_cast<int64_t>(n)))
      n++;
    if (n >= 4) groups.push_back({i, n, base, c0, stride});
    i += n - 1;
  }
  return groups;
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
  const bool gpu = !lang_.global_id[0].empty();
  const gpu::Grid grid = gpu ? this->grid(k) : gpu::Grid{};
  // A workgroup kernel (local loops; ir.h) on a GPU: grid dimensions are workgroup ids, a local loop is the
  // thread's lane, the code outside local loops runs in every lane alike and stores from lane 0 only,
  // except inside global loops split among the lanes (each lane then stores its own iterations).
  const bool workgroup = gpu && grid.lanes > 0;
  const std::string lanes = std::to_string(grid.lanes);
  ir::ValueId local_loop = ir::kNone, split_loop = ir::kNone;
  // the launch is part of the source: the same code launched with another workgroup size (LOCAL) is another
  // program for the caches keyed by source (the compile cache, the autotuner's duplicates)
  if (gpu) emit("/* launch: " + grid.str() + (workgroup ? ", " + lanes + " lanes per workgroup (local loops)" : "") + " */",
                depth, -1);
  for (const std::string& text : kernel_prologue(k)) emit(text, depth, -1);
  std::vector<std::string> name(k.insts.size());
  // Strided store groups, staged: gcc's SLP vectorizer packs an upcast group only from stores side by side,
  // and it takes apart a staging array that is indexed by constants alone (scalar replacement). Written as
  //   float ts_lanes[16]; ts_lanes[0] = acc0; ... ts_lanes[15] = acc15;   (one vector store)
  //   for (l = 0; l < 16; l++) data0[base + 4 * l] = ts_lanes[l];        (kept a loop: GCC unroll 1)
  // the group's arithmetic is vectorized (a max-pool over NHWC lanes: 25 -> 9 us measured on this machine).
  std::vector<const StridedStoreGroup*> store_group(k.insts.size(), nullptr);
  std::vector<StridedStoreGroup> store_groups;
  if (stages_strided_store_groups(k)) store_groups = strided_store_groups(k);
  for (const StridedStoreGroup& sg : store_groups)
    for (size_t j = 0; j < sg.count; j++) store_group[sg.first + j] = &sg;
  // WHEREs per condition value: a bool loaded once and selected on by several (the lanes of an upcast group)
  std::vector<int> where_uses(k.insts.size(), 0);
  for (const ir::Inst& in : k.insts)
    if (in.op == Op::Where) where_uses[in.src[0]]++;
  // ...unless the lanes load a bool each, side by side (base + 0, base + 1, ...: a one-hot read along its
  // rows, onehot(positions)ᵀ @ grad), and the several WHEREs are the register tile's rows: then the bools are
  // a grouped load and the mask form vectorizes (the wide transformer's position-embedding gradient
  // r_128_32_32: 85 us with selects, 12 us masked). Told apart by counting: more bools side by side than
  // WHEREs on each (32 lanes, 8 rows) is that case; an embedding's gradient tiled over its 11 rows loads 11
  // neighbouring bools that 32 lanes each select on, and stays a select (35 us; 62 masked).
  std::vector<bool> loaded_by_lanes(k.insts.size(), false);
  {
    auto base_offset = [&](ir::ValueId index) -> std::pair<ir::ValueId, int64_t> {
      const ir::Inst& x = k.insts[index];
      if (x.op == Op::Add && k.insts[x.src[1]].op == Op::Const) return {x.src[0], static_cast<int64_t>(k.insts[x.src[1]].value)};
      if (x.op == Op::Add && k.insts[x.src[0]].op == Op::Const) return {x.src[1], static_cast<int64_t>(k.insts[x.src[0]].value)};
      return {index, 0};
    };
    std::map<std::tuple<ir::ValueId, ir::ValueId, int64_t>, size_t> loads;  // (buffer, base, offset) -> load
    std::map<std::pair<ir::ValueId, ir::ValueId>, int> group;                // (buffer, base) -> loads
    for (size_t i = 0; i < k.insts.size(); i++)
      if (k.insts[i].op == Op::Load && k.insts[i].dtype == DType::Bool && where_uses[i] > 1) {
        const auto [base, offset] = base_offset(k.insts[i].src[1]);
        loads[{k.insts[i].src[0], base, offset}] = i;
        group[{k.insts[i].src[0], base}]++;
      }
    for (const auto& [key, i] : loads) {
      const auto [buffer, base, offset] = key;
      const bool beside = loads.count({buffer, base, offset - 1}) || loads.count({buffer, base, offset + 1});
      loaded_by_lanes[i] = beside && group[{buffer, base}] > where_uses[i];
    }
  }
  // Fused statements (fused_statements): the statement each instruction is written by (-1: its own), and the
  // member at whose place each is written
  const std::vector<FusedStatement> fused = fused_statements(k);
  std::vector<int> fused_in(k.insts.size(), -1);
  std::vector<size_t> fused_at(fused.size(), 0);
  {
    std::vector<bool> read(k.insts.size(), false);
    for (size_t f = 0; f < fused.size(); f++) {
      for (ir::ValueId m : fused[f].members) {
        fused_in[m] = static_cast<int>(f);
        fused_at[f] = std::max<size_t>(fused_at[f], m);
      }
      for (ir::ValueId r : fused[f].reads) read[r] = true;
    }
    // arithmetic whose every user is written by fused statements, and that none of them reads, is not
    // written either; the line map points it at the last of those statements (users come later: one
    // backward walk sees a chain whole)
    std::vector<int> users_in(k.insts.size(), -2);  // -2: no user yet; -1: a user written on its own
    for (size_t i = fused.empty() ? 0 : k.insts.size(); i-- > 0;) {
      const ir::Inst& in = k.insts[i];
      if (fused_in[i] < 0 && is_alu(in.op) && !read[i] && users_in[i] >= 0) fused_in[i] = users_in[i];
      for (int s = 0; s < in.num_src; s++) {
        int& u = users_in[in.src[s]];
        u = fused_in[i] < 0 || u == -1 ? -1 : u == -2 ? fused_in[i] : u;
      }
    }
  }
  for (size_t i = 0; i < k.insts.size(); i++) {
    const ir::Inst& in = k.insts[i];
    if (fused_in[i] >= 0) {
      if (i == fused_at[fused_in[i]]) {
        emit(fused[fused_in[i]].text(name), depth, static_cast<int>(i));
        for (const auto& [member, member_name] : fused[fused_in[i]].names) name[member] = member_name;
      }
      continue;
    }
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
      case Op::DefineLocal: {
        name[i] = local_name(static_cast<ir::ValueId>(i));
        std::string decl = define_local(k, static_cast<ir::ValueId>(i), name[i]);
        if (!decl.empty()) emit(decl, depth, op);
        break;
      }
      case Op::Barrier:
        emit(lang_.barrier.empty() ? "/* BARRIER: the lanes of a local loop ran one after another */" : lang_.barrier,
             depth, op);
        break;
      case Op::Range: {
        name[i] = "ridx" + std::to_string(i);
        const std::string& r = name[i];
        int dim = gpu ? grid.dim_of(static_cast<ir::ValueId>(i)) : -1;
        // a grid dimension: a thread's global id, or in a workgroup kernel its workgroup's id
        const std::string& id = workgroup ? lang_.group_id[dim < 0 ? 0 : dim] : lang_.global_id[dim < 0 ? 0 : dim];
        const std::string& size = workgroup ? lang_.num_groups[dim < 0 ? 0 : dim] : lang_.global_size[dim < 0 ? 0 : dim];
        if (workgroup && in.arg == ir::kLocalLoop) {  // the lanes: one per thread of the workgroup
          local_loop = static_cast<ir::ValueId>(i);
          emit("{  /* local loop: lane " + r + " of " + src(0) + " is this thread */", depth, op);
          emit("int " + r + " = " + lang_.local_id + ";", depth + 1, -1);
        } else if (dim >= 0 && grid.strided[dim]) {  // more iterations than threads: each takes every n-th
          emit("for (int " + r + " = " + id + "; " + r + " < " + src(0) + "; " + r + " += " + size + ") {", depth, op);
        } else if (dim >= 0) {  // one iteration per thread; the last workgroup may stick out
          emit("int " + r + " = " + id + ";", depth, op);
          emit("if (" + r + " < " + src(0) + ") {", depth, -1);
        } else if (workgroup && in.arg == ir::kGlobalLoop && local_loop == ir::kNone && split_loop == ir::kNone &&
                   lane_splittable(k, i)) {  // independent iterations: the lanes share them out
          split_loop = static_cast<ir::ValueId>(i);
          emit("for (int " + r + " = " + lang_.local_id + "; " + r + " < " + src(0) + "; " + r + " += " + lanes +
                   ") {  /* split among the lanes */", depth, op);
        } else {
          for (const std::string& line : loop_pragmas(k, static_cast<ir::ValueId>(i))) emit(line, depth, -1);
          emit("for (int " + r + " = 0; " + r + " < " + src(0) + "; " + r + "++) {", depth, op);
          for (const std::string& line : loop_prologue(k, static_cast<ir::ValueId>(i))) emit(line, depth + 1, -1);
        }
        depth++;
        break;
      }
      case Op::EndRange: {
        const ir::ValueId r = in.src[0];
        const int dim = gpu ? grid.dim_of(r) : -1;
        // a loop around local loops (a workgroup taking several outputs in turn, a sequential loop over
        // tiles): no lane may write local memory for the next trip while another still reads it for this one
        const bool is_loop = dim < 0 || grid.strided[dim];
        if (workgroup && is_loop && k.insts[r].arg != ir::kLocalLoop && holds_local_loop(k, r))
          emit(lang_.barrier, depth, -1);
        if (r == local_loop) local_loop = ir::kNone;
        if (r == split_loop) split_loop = ir::kNone;
        depth--;
        emit("}", depth, op);
        break;
      }
      case Op::Load: {
        DType bt = k.insts[in.src[0]].dtype;
        std::string ld = load(src(0), src(1), bt);
        if (in.num_src == 3) ld = "(" + src(2) + " ? " + ld + " : " + literal(0, in.dtype) + ")";
        name[i] = v;
        emit(t + " " + v + " = " + ld + ";", depth, op);
        break;
      }
      case Op::Store: {
        if (const StridedStoreGroup* sg = store_group[i]) {
          const std::string lanes_array = "ts_lanes" + std::to_string(sg->first), count = std::to_string(sg->count);
          const size_t lane = i - sg->first;
          if (lane == 0) emit(type_name(k.insts[in.src[2]].dtype) + " " + lanes_array + "[" + count + "];", depth, -1);
          emit(lanes_array + "[" + std::to_string(lane) + "] = " + src(2) + ";", depth, op);
          if (lane + 1 == sg->count)
            emit("_Pragma(\"GCC unroll 1\") for (int ts_l = 0; ts_l < " + count + "; ts_l++) " +
                     store(src(0),
                           "(" + name[sg->base] + (sg->offset ? " + " + std::to_string(sg->offset) : "") + " + " +
                               std::to_string(sg->stride) + " * ts_l)",
                           lanes_array + "[ts_l]", k.insts[in.src[0]].dtype),
                 depth, -1);
          break;
        }
        std::string st = store(src(0), src(1), src(2), k.insts[in.src[0]].dtype);
        if (in.num_src == 4) st = "if (" + src(3) + ") " + st;  // a gated store (PADTO)
        // uniform code in a workgroup kernel: every lane holds the same value; one of them writes it
        const bool uniform = workgroup && local_loop == ir::kNone && split_loop == ir::kNone;
        if (uniform && k.insts[in.src[0]].op == Op::DefineGlobal) st = "if (" + lang_.local_id + " == 0) " + st;
        emit(st, depth, op);
        break;
      }
      case Op::Assign: emit(src(0) + " = " + src(1) + ";", depth, op); break;
      default: {
        std::vector<std::string> s;
        std::vector<DType> sdt;
        for (int j = 0; j < in.num_src; j++) {
          s.push_back(src(j));
          sdt.push_back(k.insts[in.src[j]].dtype);
        }
        name[i] = v;
        const bool shared = in.op == Op::Where && k.insts[in.src[0]].op == Op::Load && where_uses[in.src[0]] > 1 &&
                            !loaded_by_lanes[in.src[0]];
        emit(t + " " + v + " = " + (shared ? where_on_shared_loaded_condition(k, in, s, sdt) : alu_in(k, in, s, sdt)) + ";",
             depth, op);
      }
    }
  }
  emit("}", 0, -1);
  for (size_t i = 0; i < k.insts.size(); i++)
    if (fused_in[i] >= 0) out.ir_op_line[i] = out.ir_op_line[fused_at[fused_in[i]]];
  out.code = o.str();
  return out;
}

}  // namespace ts
