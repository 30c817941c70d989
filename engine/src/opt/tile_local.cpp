// TILE (GPU): a matmul computed in T×T output tiles, one workgroup of T·T threads each, with T×T tiles of
// both operands staged in local memory — the classic shared-memory tiled matmul (CUDA C Programming Guide,
// "Shared Memory"; Kirk & Hwu, ch. 5). Every element of A and B is then read from global memory N/T and
// M/T times instead of N and M times; the inner products read local memory.
//
//   for i in 0..M: for j in 0..N:            DEFINE_LOCAL As[T*T], Bs[T*T], Cs[T*T]
//     acc = 0                                for ti in 0..M/T: for tj in 0..N/T:       (one workgroup each)
//     for k in 0..K:                           for l in lanes: Cs[l] = 0
//       acc += a(i, k) * b(k, j)               for kt in 0..K/T:                        (sequential)
//     out(i, j) = f(acc)                         for l in lanes: (li, lj) = (l / T, l % T)
//                                                  As[l] = a(ti*T+li, kt*T+lj); Bs[l] = b(kt*T+li, tj*T+lj)
//                                                BARRIER
//                                                for l in lanes: s = sum_kk As[li*T+kk] * Bs[kk*T+lj]
//                                                                Cs[l] += s
//                                              BARRIER
//                                              for l in lanes: out(ti*T+li, tj*T+lj) = f(Cs[l])
//
// (each lane keeps its running sum in Cs[l]: per-lane state crosses the barriers only through local memory,
// ir.h; the GPU renderers add the barrier that ends each trip of the kt loop). a and b are whatever the
// kernel computes from its loads (a fused elementwise op on an operand is computed once per tile element),
// f is the kernel's epilogue (bias, relu, ...). Sums are reassociated per tile, identically everywhere.
//
// Legal on a kernel that is exactly two nested global loops i, j (constant bounds M, N) around one sum
// `acc = acc + a * b` over a reduce loop k (constant K), with a independent of j and b independent of i, and
// an epilogue without loops; M, N and K multiples of T; on a device with workgroups of T·T threads and
// 3·T·T·4 bytes of local memory. The pass runs before the UPCAST passes; upcast_global and register_tile
// then find no reduce block directly in a global loop (the tiled loops are local loops) and leave the kernel
// alone: the tile replaces the register tile. upcast_reduce may still unroll each lane's inner product.
// Off unless the plan asks (TILE=8 or 16); the BEAM search tries both on devices with local memory.
#include <functional>
#include <map>
#include <optional>

#include "opt/pass_manager.h"

namespace ts {
namespace {

using ir::Inst;
using ir::Op;
using ir::ValueId;

struct Matmul {
  size_t i, j, k, k_end, j_end, i_end;  // the loops and their END_RANGEs
  ValueId acc, a, b;                     // the accumulator and the two factors of its update
  size_t assign;                         // the ASSIGN
};

std::optional<Matmul> find_matmul(const std::vector<Inst>& insts) {
  Matmul m{};
  std::vector<size_t> ranges;
  for (size_t x = 0; x < insts.size(); x++)
    if (insts[x].op == Op::Range) ranges.push_back(x);
  if (ranges.size() != 3) return std::nullopt;
  m.i = ranges[0], m.j = ranges[1], m.k = ranges[2];
  if (insts[m.i].arg != ir::kGlobalLoop || insts[m.j].arg != ir::kGlobalLoop || insts[m.k].arg != ir::kReduceLoop)
    return std::nullopt;
  for (size_t r : ranges)
    if (insts[insts[r].src[0]].op != Op::Const) return std::nullopt;
  m.i_end = end_of_range(insts, m.i), m.j_end = end_of_range(insts, m.j), m.k_end = end_of_range(insts, m.k);
  // perfectly nested: j inside i, k inside j, nothing after j in i's body, the kernel ends with i
  if (!(m.j < m.k && m.k_end < m.j_end && m.j_end + 1 == m.i_end && m.i_end + 1 == insts.size())) return std::nullopt;
  // the k loop's body: one ASSIGN, acc = acc + a * b (ADD or MULACC), of a float32 accumulator
  int assigns = 0;
  for (size_t x = m.k + 1; x < m.k_end; x++)
    if (insts[x].op == Op::Assign) assigns++, m.assign = x;
  if (assigns != 1) return std::nullopt;
  for (size_t x = m.j + 1; x < insts.size(); x++)
    if ((x < m.k || x > m.k_end) && (insts[x].op == Op::Assign || insts[x].op == Op::DefineAcc) &&
        !(insts[x].op == Op::DefineAcc && x == insts[m.assign].src[0]))
      return std::nullopt;  // no other accumulator
  m.acc = insts[m.assign].src[0];
  const Inst& acc = insts[m.acc];
  const Inst& add = insts[insts[m.assign].src[1]];
  if (acc.dtype != DType::Float32 || acc.value != 0 || m.acc < m.j || m.acc > m.k) return std::nullopt;
  if (add.op != Op::Add || (add.src[0] == m.acc) == (add.src[1] == m.acc)) return std::nullopt;
  const Inst& mul = insts[add.src[0] == m.acc ? add.src[1] : add.src[0]];
  if (mul.op != Op::Mul || mul.dtype != DType::Float32) return std::nullopt;
  // which factor is A's (no j) and which B's (no i)
  std::vector<int8_t> on_i(insts.size(), -1), on_j(insts.size(), -1), on_acc(insts.size(), -1);
  auto dep = [&](ValueId v, ValueId var, std::vector<int8_t>& memo) { return depends_on(insts, v, var, memo); };
  ValueId x = mul.src[0], y = mul.src[1];
  if (dep(x, static_cast<ValueId>(m.j), on_j) || dep(y, static_cast<ValueId>(m.i), on_i)) std::swap(x, y);
  if (dep(x, static_cast<ValueId>(m.j), on_j) || dep(y, static_cast<ValueId>(m.i), on_i)) return std::nullopt;
  if (dep(x, m.acc, on_acc) || dep(y, m.acc, on_acc)) return std::nullopt;
  m.a = x, m.b = y;
  // the epilogue: plain instructions (no loop, no barrier, no local memory)
  for (size_t e = m.k_end + 1; e < m.j_end; e++)
    if (insts[e].op == Op::Range || insts[e].op == Op::Barrier || insts[e].op == Op::DefineLocal) return std::nullopt;
  return m;
}

}  // namespace

void tile_local(ir::Kernel& k) {
  const int T = k.plan.get(ir::AppliedOpt::Tile);
  if (T <= 0) return;  // off unless asked for (kAuto is off too: see the header)
  const ir::Target& t = k.target;
  if (T < 2 || T > 32 || (T & (T - 1)) != 0 || !t.workgroups() || static_cast<uint64_t>(T) * T > t.max_workgroup_size ||
      3ull * T * T * 4 > t.local_memory_bytes || ir::local_loop_lanes(k) > 0)
    return;
  const std::vector<Inst> old = k.insts;
  const std::optional<Matmul> found = find_matmul(old);
  if (!found) return;
  const Matmul& m = *found;
  auto bound = [&](size_t r) { return static_cast<int64_t>(old[old[r].src[0]].value); };
  const int64_t M = bound(m.i), N = bound(m.j), K = bound(m.k);
  if (M % T || N % T || K % T) return;

  std::vector<Inst> out;
  auto emit = [&](Op op, DType dt, std::initializer_list<ValueId> src, int64_t arg = 0, double value = 0) {
    out.push_back(make_inst(op, dt, src, arg, value));
    return static_cast<ValueId>(out.size() - 1);
  };
  const DType I = DType::Int32, F = DType::Float32;
  auto cint = [&](int64_t v) { return emit(Op::Const, I, {}, 0, static_cast<double>(v)); };
  auto add = [&](ValueId a, ValueId b) { return emit(Op::Add, I, {a, b}); };
  auto mul = [&](ValueId a, ValueId b) { return emit(Op::Mul, I, {a, b}); };
  // everything before the i loop (buffers, constants) stays, at the top
  std::vector<ValueId> top(old.size(), ir::kNone);
  for (size_t x = 0; x < m.i; x++) {
    Inst in = old[x];
    for (int s = 0; s < in.num_src; s++) in.src[s] = top[in.src[s]];
    out.push_back(in);
    top[x] = static_cast<ValueId>(out.size() - 1);
  }
  const ValueId t_c = cint(T), zero = emit(Op::Const, F, {}, 0, 0.0);
  const ValueId As = emit(Op::DefineLocal, F, {}, T * T), Bs = emit(Op::DefineLocal, F, {}, T * T),
                Cs = emit(Op::DefineLocal, F, {}, T * T);
  // An old value inside the loops, computed again inside one local loop with the loop indices `at` (old
  // RANGE or accumulator → new value); `memo` holds what this local loop has computed already.
  std::function<ValueId(ValueId, std::map<ValueId, ValueId>&)> clone = [&](ValueId v, std::map<ValueId, ValueId>& memo) {
    if (v < m.i) return top[v];
    if (auto it = memo.find(v); it != memo.end()) return it->second;
    Inst in = old[v];
    for (int s = 0; s < in.num_src; s++) in.src[s] = clone(in.src[s], memo);
    out.push_back(in);
    return memo[v] = static_cast<ValueId>(out.size() - 1);
  };
  auto lane_loop = [&](ValueId& li, ValueId& lj) {
    const ValueId l = emit(Op::Range, I, {cint(T * T)}, ir::kLocalLoop);
    li = emit(Op::IDiv, I, {l, t_c});
    lj = emit(Op::Mod, I, {l, t_c});
    return l;
  };
  const ValueId ti = emit(Op::Range, I, {cint(M / T)}, ir::kGlobalLoop);
  const ValueId tj = emit(Op::Range, I, {cint(N / T)}, ir::kGlobalLoop);
  ValueId li, lj;
  {  // Cs = 0
    const ValueId l = lane_loop(li, lj);
    emit(Op::Store, F, {Cs, l, zero});
    emit(Op::EndRange, I, {l});
  }
  const ValueId kt = emit(Op::Range, I, {cint(K / T)}, ir::kReduceLoop);
  {  // the tiles of A and B
    const ValueId l = lane_loop(li, lj);
    std::map<ValueId, ValueId> a_at{{static_cast<ValueId>(m.i), add(mul(ti, t_c), li)},
                                    {static_cast<ValueId>(m.k), add(mul(kt, t_c), lj)}};
    emit(Op::Store, F, {As, l, clone(m.a, a_at)});
    std::map<ValueId, ValueId> b_at{{static_cast<ValueId>(m.k), add(mul(kt, t_c), li)},
                                    {static_cast<ValueId>(m.j), add(mul(tj, t_c), lj)}};
    emit(Op::Store, F, {Bs, l, clone(m.b, b_at)});
    emit(Op::EndRange, I, {l});
  }
  emit(Op::Barrier, I, {});
  {  // each lane's inner product over the tile, added to its running sum
    const ValueId l = lane_loop(li, lj);
    const ValueId s = emit(Op::DefineAcc, F, {}, 0, 0.0);
    const ValueId kk = emit(Op::Range, I, {t_c}, ir::kReduceLoop);
    const ValueId av = emit(Op::Load, F, {As, add(mul(li, t_c), kk)});
    const ValueId bv = emit(Op::Load, F, {Bs, add(mul(kk, t_c), lj)});
    emit(Op::Assign, F, {s, emit(Op::Add, F, {s, emit(Op::Mul, F, {av, bv})})});
    emit(Op::EndRange, I, {kk});
    emit(Op::Store, F, {Cs, l, emit(Op::Add, F, {emit(Op::Load, F, {Cs, l}), s})});
    emit(Op::EndRange, I, {l});
  }
  emit(Op::EndRange, I, {kt});
  emit(Op::Barrier, I, {});
  {  // the epilogue, one output per lane
    const ValueId l = lane_loop(li, lj);
    std::map<ValueId, ValueId> at{{static_cast<ValueId>(m.i), add(mul(ti, t_c), li)},
                                  {static_cast<ValueId>(m.j), add(mul(tj, t_c), lj)},
                                  {m.acc, emit(Op::Load, F, {Cs, l})}};
    for (size_t e = m.k_end + 1; e < m.j_end; e++) {
      if (old[e].op == Op::Store) {
        Inst st = old[e];
        for (int s = 0; s < st.num_src; s++) st.src[s] = clone(st.src[s], at);
        out.push_back(st);
      } else {
        clone(static_cast<ValueId>(e), at);
      }
    }
    emit(Op::EndRange, I, {l});
  }
  emit(Op::EndRange, I, {tj});
  emit(Op::EndRange, I, {ti});
  k.insts = std::move(out);
  k.opts.push_back({ir::AppliedOpt::Tile, T});
}

}  // namespace ts
