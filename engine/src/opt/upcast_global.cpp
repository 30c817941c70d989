// UPCAST of the innermost global loop around a reduction (tinygrad's UPCAST on an output axis):
// U neighbouring outputs are computed together, so one pass of the reduce loop feeds U accumulators
// from U contiguous elements.
//
//   for j in 0..N:                          for j0 in 0..N/16:
//     acc = 0                                 acc0 = … = acc15 = 0
//     for k in 0..K:                  →       for k in 0..K:
//       acc += x[i,k] * w[k,j]                  a = x[i,k]                         (loaded once)
//     out[i,j] = acc                            acc0 += a * w[k,16j0+0] … acc15 += a * w[k,16j0+15]
//                                             out[i,16j0+0] = acc0 … out[i,16j0+15] = acc15
//
// For a matmul this turns a loop that reads w down a column (one cache line per element) into one that
// reads 16 contiguous floats (one AVX-512 vector) per step of k, with 16 independent accumulators:
// register tiling along one axis. It applies when the body has simple reduce blocks and some load in
// them moves by exactly one element when j does (otherwise the U copies would not be contiguous).
#include <map>

#include "opt/pass_manager.h"

namespace ts {
namespace {

using ir::Inst;
using ir::Op;
using ir::ValueId;

constexpr int kMaxUpcast = 16;
constexpr size_t kMaxUnrolledInsts = 4000;  // keeps generated sources (and compile times) reasonable

// Value of an int32 index expression with loop `var` = `at` and every other loop index 0.
int64_t eval_index(const std::vector<Inst>& insts, ValueId v, ValueId var, int64_t at, int depth = 0) {
  const Inst& in = insts[v];
  if (v == var) return at;
  if (depth > 64) return 0;
  auto s = [&](int i) { return eval_index(insts, in.src[i], var, at, depth + 1); };
  switch (in.op) {
    case Op::Const: return static_cast<int64_t>(in.value);
    case Op::Add: return s(0) + s(1);
    case Op::Mul: return s(0) * s(1);
    case Op::Neg: return -s(0);
    case Op::IDiv: { int64_t d = s(1); return d ? s(0) / d : 0; }
    case Op::Mod: { int64_t d = s(1); return d ? s(0) % d : 0; }
    default: return 0;  // other loops, loads: taken as 0
  }
}

}  // namespace

void upcast_global(ir::Kernel& k) {
  const std::vector<Inst>& old = k.insts;
  // the innermost global loop: the last global RANGE
  size_t g = old.size();
  for (size_t i = 0; i < old.size(); i++)
    if (old[i].op == Op::Range && old[i].arg == 1) g = i;
  if (g == old.size() || old[old[g].src[0]].op != Op::Const) return;
  const size_t g_end = end_of_range(old, g);
  const int64_t n = static_cast<int64_t>(old[old[g].src[0]].value);
  // the body: plain instructions and simple reduce blocks (DEFINE_ACC, RANGE, body, its ASSIGN, END)
  bool has_block = false, contiguous = false;
  for (size_t i = g + 1; i < g_end; i++) {
    if (old[i].op == Op::DefineAcc) {
      if (i + 1 >= g_end || old[i + 1].op != Op::Range) return;
      size_t e = end_of_range(old, i + 1);
      for (size_t b = i + 2; b < e; b++) {
        if (old[b].op == Op::Range || old[b].op == Op::DefineAcc) return;
        if (old[b].op == Op::Assign && (old[b].src[0] != i || b != e - 1)) return;
        if (old[b].op == Op::Load &&
            eval_index(old, old[b].src[1], static_cast<ValueId>(g), 1) - eval_index(old, old[b].src[1], static_cast<ValueId>(g), 0) == 1)
          contiguous = true;
      }
      has_block = true;
      i = e;
    } else if (old[i].op == Op::Range || old[i].op == Op::Assign) {
      return;
    }
  }
  if (!has_block || !contiguous) return;
  int u_count = 1;
  for (int u = kMaxUpcast; u >= 4; u /= 2)
    if (n % u == 0 && (g_end - g) * u <= kMaxUnrolledInsts) {
      u_count = u;
      break;
    }
  if (u_count == 1) return;

  std::vector<Inst> out;
  std::vector<ValueId> remap(old.size(), ir::kNone);
  std::map<ValueId, std::vector<ValueId>> copies;  // body value → its U copies
  auto emit = [&](Inst in) {
    out.push_back(in);
    return static_cast<ValueId>(out.size() - 1);
  };
  auto constant = [&](double v) { return emit(Inst{Op::Const, DType::Int32, 0, {ir::kNone, ir::kNone, ir::kNone}, 0, v}); };
  auto plain = [&](size_t i) {  // an instruction outside the rewritten loop
    Inst in = old[i];
    for (int s = 0; s < in.num_src; s++) in.src[s] = remap[in.src[s]];
    remap[i] = emit(in);
  };
  std::vector<ValueId> idx(u_count);
  auto clone = [&](size_t b, int u) {
    Inst in = old[b];
    for (int s = 0; s < in.num_src; s++) {
      ValueId v = in.src[s];
      if (v == g) in.src[s] = idx[u];
      else if (copies.count(v)) in.src[s] = copies[v][u];
      else in.src[s] = remap[v];
    }
    return emit(in);
  };
  auto clone_all = [&](size_t b) {  // U copies side by side: isomorphic statements for the vectorizer
    std::vector<ValueId> ids(u_count);
    for (int u = 0; u < u_count; u++) ids[u] = clone(b, u);
    copies[static_cast<ValueId>(b)] = ids;
  };

  for (size_t i = 0; i < g; i++) plain(i);
  Inst range = old[g];
  range.src[0] = constant(static_cast<double>(n / u_count));
  ValueId g2 = emit(range);
  remap[g] = g2;
  ValueId scaled = emit(Inst{Op::Mul, DType::Int32, 2, {g2, constant(u_count), ir::kNone}, 0, 0});
  for (int u = 0; u < u_count; u++) idx[u] = emit(Inst{Op::Add, DType::Int32, 2, {scaled, constant(u), ir::kNone}, 0, 0});
  for (size_t i = g + 1; i < g_end; i++) {
    if (old[i].op == Op::DefineAcc) {
      size_t r = i + 1, e = end_of_range(old, r);
      clone_all(i);                         // U accumulators
      Inst inner = old[r];                  // one shared reduce loop
      inner.src[0] = remap[inner.src[0]] != ir::kNone ? remap[inner.src[0]] : inner.src[0];
      ValueId r2 = emit(inner);
      copies[static_cast<ValueId>(r)] = std::vector<ValueId>(u_count, r2);
      for (size_t b = r + 1; b < e; b++) clone_all(b);
      emit(Inst{Op::EndRange, DType::Float32, 1, {r2, ir::kNone, ir::kNone}, 0, 0});
      i = e;
    } else {
      clone_all(i);
    }
  }
  emit(Inst{Op::EndRange, DType::Float32, 1, {g2, ir::kNone, ir::kNone}, 0, 0});
  for (size_t i = g_end + 1; i < old.size(); i++) plain(i);
  k.insts = std::move(out);
}

}  // namespace ts
