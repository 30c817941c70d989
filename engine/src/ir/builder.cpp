#include <algorithm>
#include "ir/builder.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "ir/ts_math.h"

namespace ts::ir {

ValueId Builder::push(const Inst& in, bool cse) {
  uint64_t value_bits;
  std::memcpy(&value_bits, &in.value, sizeof value_bits);
  Key key{static_cast<int>(in.op), static_cast<int>(in.dtype), in.src[0], in.src[1], in.src[2], in.src[3], in.arg, value_bits};
  if (cse) {
    auto it = cse_.find(key);
    if (it != cse_.end()) return it->second;
  }
  ValueId id = static_cast<ValueId>(k_.insts.size());
  k_.insts.push_back(in);
  if (cse) cse_[key] = id;
  return id;
}

ValueId Builder::global(int slot, DType dt) {
  Inst in;
  in.op = Op::DefineGlobal;
  in.dtype = dt;
  in.arg = slot;
  return push(in, true);
}

ValueId Builder::constant(double v, DType dt) {
  Inst in;
  in.op = Op::Const;
  in.dtype = dt;
  if (dt == DType::Float32) v = static_cast<float>(v);
  else if (dt == DType::Float16) v = ts_round_half(static_cast<float>(v));
  else if (dt == DType::Int32) v = static_cast<double>(static_cast<int32_t>(v));
  else v = v != 0;
  in.value = v;
  ValueId id = push(in, true);
  if (!is_float(dt)) bounds_[id] = {static_cast<int64_t>(v), static_cast<int64_t>(v)};
  return id;
}

ValueId Builder::range(int64_t bound, bool global) {
  Inst in;
  in.op = Op::Range;
  in.arg = global ? 1 : 0;
  in.dtype = DType::Int32;
  in.num_src = 1;
  in.src[0] = cint(bound);
  ValueId id = push(in, false);
  bounds_[id] = {0, bound - 1};
  return id;
}

ValueId Builder::local_range(int64_t lanes) {
  ValueId id = range(lanes, false);
  k_.insts[id].arg = kLocalLoop;
  return id;
}

ValueId Builder::define_local(DType dt, int64_t elements) {
  Inst in;
  in.op = Op::DefineLocal;
  in.dtype = dt;
  in.arg = elements;
  return push(in, false);
}

void Builder::barrier() {
  Inst in;
  in.op = Op::Barrier;
  push(in, false);
}

void Builder::end_range(ValueId r) {
  Inst in;
  in.op = Op::EndRange;
  in.num_src = 1;
  in.src[0] = r;
  push(in, false);
  // values computed inside the loop are gone after it
  for (auto it = cse_.begin(); it != cse_.end();) it = it->second > r ? cse_.erase(it) : std::next(it);
}

ValueId Builder::acc(double init, DType dt) {
  Inst in;
  in.op = Op::DefineAcc;
  in.dtype = dt;
  in.value = init;
  return push(in, false);
}

void Builder::assign(ValueId a, ValueId value) {
  Inst in;
  in.op = Op::Assign;
  in.dtype = dtype(a);
  in.num_src = 2;
  in.src[0] = a;
  in.src[1] = value;
  push(in, false);
}

ValueId Builder::load(ValueId buf, ValueId idx, ValueId gate) {
  Inst in;
  in.op = Op::Load;
  in.dtype = dtype(buf);
  if (gate != kNone && is_const(gate)) {
    if (const_value(gate) == 0) return constant(0, in.dtype);
    gate = kNone;
  }
  in.num_src = gate == kNone ? 2 : 3;
  in.src[0] = buf;
  in.src[1] = idx;
  in.src[2] = gate;
  // local memory changes between a BARRIER and the next: two loads of one address are not one value
  return push(in, k_.insts[buf].op != Op::DefineLocal);
}

void Builder::store(ValueId buf, ValueId idx, ValueId value, ValueId gate) {
  if (gate != kNone && is_const(gate)) {
    if (const_value(gate) == 0) return;  // never stored
    gate = kNone;
  }
  Inst in;
  in.op = Op::Store;
  in.dtype = dtype(value);
  in.num_src = gate == kNone ? 3 : 4;
  in.src[0] = buf;
  in.src[1] = idx;
  in.src[2] = value;
  in.src[3] = gate;
  push(in, false);
}

bool Builder::never_negative_zero(ValueId v, int depth) const {
  const Inst& in = k_.insts[v];
  if (in.op == Op::Const) return !(in.value == 0.0 && std::signbit(in.value));
  if (in.op != Op::Add || in.dtype != DType::Float32 || depth == 0) return false;
  return never_negative_zero(in.src[0], depth - 1) || never_negative_zero(in.src[1], depth - 1);
}

std::pair<int64_t, int64_t> Builder::bounds(ValueId v) const {
  auto it = bounds_.find(v);
  if (it != bounds_.end()) return it->second;
  return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
}

ValueId Builder::land(ValueId a, ValueId b) {
  if (a == kNone) return b;
  if (b == kNone) return a;
  return alu(Op::And, DType::Bool, a, b);
}

ValueId Builder::cast(ValueId a, DType dt) {
  if (dtype(a) == dt) return a;
  if (is_const(a)) {
    double v = const_value(a);
    if (dt == DType::Int32) v = std::trunc(v);
    return constant(v, dt);
  }
  return alu(Op::Cast, dt, a);
}

ValueId Builder::alu(Op op, DType dt, ValueId a, ValueId b, ValueId c) {
  const bool integer = !is_float(dt);
  // constant folding of integer / bool arithmetic (float folding is left to the device, so that the
  // interpreter and the compiled code round identically)
  if (integer && is_const(a) && (b == kNone || is_const(b)) && (c == kNone || is_const(c)) && op != Op::Cast) {
    int64_t x = static_cast<int64_t>(const_value(a)), y = b == kNone ? 0 : static_cast<int64_t>(const_value(b));
    switch (op) {
      case Op::Add: return constant(static_cast<double>(x + y), dt);
      case Op::Mul: return constant(static_cast<double>(x * y), dt);
      case Op::Neg: return constant(static_cast<double>(-x), dt);
      case Op::Max: return constant(static_cast<double>(std::max(x, y)), dt);
      case Op::IDiv: if (y != 0) return constant(static_cast<double>(x / y), dt); break;
      case Op::Mod: if (y != 0) return constant(static_cast<double>(x % y), dt); break;
      case Op::And: return cbool(x && y);
      case Op::Where: return const_value(a) != 0 ? b : c;
      default: break;
    }
  }
  // negating a float constant is exact: fold it (also keeps "--1.0f" out of C sources)
  if (op == Op::Neg && dt == DType::Float32 && is_const(a)) return constant(-const_value(a), dt);
  // -(-x) == x exactly, for every type (a sign flip; two's complement wraps back). Not for an accumulator:
  // its value where the outer NEG reads it may differ from where the inner one did.
  if (op == Op::Neg && k_.insts[a].op == Op::Neg && k_.insts[k_.insts[a].src[0]].op != Op::DefineAcc) return k_.insts[a].src[0];
  // x * 1 == x exactly in IEEE arithmetic (x + 0 is not: -0 + 0 = +0)
  if (op == Op::Mul && dt == DType::Float32 && b != kNone && is_const(b) && const_value(b) == 1.0) return a;
  if (op == Op::Mul && dt == DType::Float32 && is_const(a) && const_value(a) == 1.0) return b;
  // x + 0 == x for every x but -0 (-0 + 0 = +0), and a sum is -0 only when both its terms are: so x + 0 folds
  // when x is a sum with a term that is never -0 (a col2im's sum of 25 shifted slices, most of them the
  // padding's +0 in each range split_index_set makes: 100 dependent adds of +0 per element, 0.9 ms).
  if (op == Op::Add && dt == DType::Float32 && b != kNone) {
    auto positive_zero = [&](ValueId v) { return is_const(v) && const_value(v) == 0.0 && !std::signbit(const_value(v)); };
    if (positive_zero(b) && never_negative_zero(a)) return a;
    if (positive_zero(a) && never_negative_zero(b)) return b;
  }
  if (op == Op::Where && is_const(a)) return const_value(a) != 0 ? b : c;
  if (op == Op::Where && b == c) return b;
  if (integer) {
    auto is = [&](ValueId v, int64_t x) { return v != kNone && is_const(v) && const_value(v) == static_cast<double>(x); };
    if (op == Op::Add && is(b, 0)) return a;
    if (op == Op::Add && is(a, 0)) return b;
    if (op == Op::Add && dt == DType::Int32)
      if (ValueId v = recombine_div_mod(a, b); v != kNone) return v;
    // A constant offset is added last: (x + c) + y = (x + y) + c, (x + c1) + c2 = x + (c1 + c2). The
    // lanes of an UPCAST then share one base (x + y) and differ by a constant, which C compilers fold into
    // the address and their vectorizers see as neighbouring elements; with (x + c) + y each lane's x + c
    // was a loop-invariant value of its own (32 registers for a 32-wide tile, its loads not recognized as
    // contiguous: a 1024² matmul ran at half speed).
    auto const_offset = [&](ValueId v, ValueId& x, ValueId& c) {
      const Inst& in = k_.insts[v];
      if (in.op != Op::Add || is_const(in.src[0]) == is_const(in.src[1])) return false;
      const bool first = is_const(in.src[0]);  // c + x or x + c
      x = in.src[first ? 1 : 0], c = in.src[first ? 0 : 1];
      return true;
    };
    ValueId x, cst;
    if (op == Op::Add && dt == DType::Int32 && is_const(a) && !is_const(b)) return add(b, a);  // x + c
    if (op == Op::Add && dt == DType::Int32 && const_offset(a, x, cst)) {
      if (is_const(b)) return add(x, cint(static_cast<int64_t>(const_value(cst) + const_value(b))));
      return add(add(x, b), cst);
    }
    if (op == Op::Add && dt == DType::Int32 && !is_const(a) && const_offset(b, x, cst)) return add(add(a, x), cst);
    if (op == Op::Mul && (is(b, 1))) return a;
    if (op == Op::Mul && (is(a, 1))) return b;
    if (op == Op::Mul && (is(a, 0) || is(b, 0))) return cint(0);
    // (a + b) · c = a·c + b·c: index arithmetic stays a flat sum of products, which divide_terms needs
    if (op == Op::Mul && dt == DType::Int32 && b != kNone && is_const(b) && k_.insts[a].op == Op::Add)
      return add(mul(k_.insts[a].src[0], b), mul(k_.insts[a].src[1], b));
    if (op == Op::IDiv && is(b, 1)) return a;
    if (op == Op::Mod && is(b, 1)) return cint(0);
    if (op == Op::And && is(a, 1)) return b;
    if (op == Op::And && is(b, 1)) return a;
    if (op == Op::And && (is(a, 0) || is(b, 0))) return cbool(false);
    if ((op == Op::IDiv || op == Op::Mod) && b != kNone && is_const(b) && const_value(b) > 0) {
      auto [lo, hi] = bounds(a);
      int64_t d = static_cast<int64_t>(const_value(b));
      if (lo >= 0 && hi < d) return op == Op::IDiv ? cint(0) : a;
      if (op == Op::IDiv && lo >= 0 && lo / d == hi / d) return cint(lo / d);  // one quotient in the whole range
      if (ValueId v = divide_terms(op, a, d); v != kNone) return v;
    }
  }
  if (op == Op::Max && dt == DType::Int32) {  // one side is known to be the larger
    auto [alo, ahi] = bounds(a);
    auto [blo, bhi] = bounds(b);
    if (alo >= bhi) return a;
    if (blo >= ahi) return b;
  }
  if (op == Op::CmpLt && dtype(a) == DType::Int32) {
    auto [alo, ahi] = bounds(a);
    auto [blo, bhi] = bounds(b);
    if (ahi < blo) return cbool(true);
    if (alo >= bhi) return cbool(false);
  }
  Inst in;
  in.op = op;
  in.dtype = dt;
  in.src[0] = a;
  in.src[1] = b;
  in.src[2] = c;
  in.num_src = static_cast<uint8_t>(c != kNone ? 3 : b != kNone ? 2 : 1);
  ValueId id = push(in, true);
  if (dt == DType::Int32 && !bounds_.count(id)) {
    auto [alo, ahi] = bounds(a);
    constexpr int64_t big = std::numeric_limits<int32_t>::max();
    if (op == Op::Add) {
      auto [blo, bhi] = bounds(b);
      if (std::abs(alo) < big && std::abs(ahi) < big && std::abs(blo) < big && std::abs(bhi) < big) bounds_[id] = {alo + blo, ahi + bhi};
    } else if (op == Op::Mul && is_const(b) && const_value(b) >= 0 && std::abs(alo) < big && std::abs(ahi) < big) {
      int64_t m = static_cast<int64_t>(const_value(b));
      bounds_[id] = {alo * m, ahi * m};
    } else if (op == Op::Max && std::abs(alo) < big && std::abs(ahi) < big) {
      auto [blo, bhi] = bounds(b);
      if (std::abs(blo) < big && std::abs(bhi) < big) bounds_[id] = {std::max(alo, blo), std::max(ahi, bhi)};
    } else if (op == Op::Neg && std::abs(alo) < big && std::abs(ahi) < big) {
      bounds_[id] = {-ahi, -alo};
    } else if (op == Op::Mod && is_const(b) && const_value(b) > 0 && alo >= 0) {
      bounds_[id] = {0, static_cast<int64_t>(const_value(b)) - 1};
    } else if (op == Op::IDiv && is_const(b) && const_value(b) > 0 && alo >= 0 && ahi < big) {
      int64_t d = static_cast<int64_t>(const_value(b));
      bounds_[id] = {alo / d, ahi / d};
    }
  }
  return id;
}

}  // namespace ts::ir

namespace ts::ir {

int64_t Builder::const_factor(ValueId v) const {
  const Inst& in = k_.insts[v];
  if (in.op == Op::Const) return std::abs(static_cast<int64_t>(in.value));
  if (in.op == Op::Mul) return const_factor(in.src[0]) * const_factor(in.src[1]);
  if (in.op == Op::Add) return std::gcd(const_factor(in.src[0]), const_factor(in.src[1]));
  return 1;
}

// (p / e)·(k·e) + (p % e)·k = p·k (the quotient and remainder of p put back together): what an index
// split by a view into blocks and read back whole becomes, e.g. (y / 2)·16 + (y % 2)·8 = 8·y. Looks for
// such a pair among the terms of a + b; kNone when there is none.
std::vector<ValueId> Builder::sum_terms(std::vector<ValueId> todo, size_t limit) const {
  std::vector<ValueId> terms;
  while (!todo.empty() && terms.size() <= limit) {
    const ValueId t = todo.back();
    todo.pop_back();
    if (k_.insts[t].op == Op::Add) {
      todo.push_back(k_.insts[t].src[0]);
      todo.push_back(k_.insts[t].src[1]);
    } else {
      terms.push_back(t);
    }
  }
  return terms;
}

ValueId Builder::recombine_div_mod(ValueId a, ValueId b) {
  // index sums are short; do not walk a long one at every add
  const std::vector<ValueId> terms = sum_terms({a, b}, 16);
  if (terms.size() > 16) return kNone;
  // a term as (inner op, p, e, k): k·(p op e), op IDIV or MOD with constants e, k > 0
  auto split = [&](ValueId t, Op& op, ValueId& p, int64_t& e, int64_t& k) {
    ValueId inner = t;
    k = 1;
    if (k_.insts[t].op == Op::Mul && is_const(k_.insts[t].src[1])) {
      inner = k_.insts[t].src[0];
      k = static_cast<int64_t>(const_value(k_.insts[t].src[1]));
    }
    const Inst& in = k_.insts[inner];
    if ((in.op != Op::IDiv && in.op != Op::Mod) || !is_const(in.src[1]) || k <= 0) return false;
    op = in.op;
    p = in.src[0];
    e = static_cast<int64_t>(const_value(in.src[1]));
    return e > 0 && bounds(p).first >= 0;
  };
  for (size_t i = 0; i < terms.size(); i++) {
    Op op_i;
    ValueId p_i;
    int64_t e_i, k_i;
    if (!split(terms[i], op_i, p_i, e_i, k_i) || op_i != Op::Mod) continue;
    for (size_t j = 0; j < terms.size(); j++) {
      Op op_j;
      ValueId p_j;
      int64_t e_j, k_j;
      if (j == i || !split(terms[j], op_j, p_j, e_j, k_j) || op_j != Op::IDiv || p_j != p_i || e_j != e_i ||
          k_j != k_i * e_i)
        continue;
      // the sum again, its terms in the order they were defined (outer loops' first), the order the
      // lowering adds them in: the partial sums are then the ones already computed (CSE finds them)
      std::vector<ValueId> rest{mul(p_i, cint(k_i))};
      for (size_t t = 0; t < terms.size(); t++)
        if (t != i && t != j) rest.push_back(terms[t]);
      std::sort(rest.begin(), rest.end());
      ValueId out = rest[0];
      for (size_t t = 1; t < rest.size(); t++) out = add(out, rest[t]);
      return out;
    }
  }
  return kNone;
}

// Division by a constant d > 0 of a sum of non-negative terms (tinygrad's symbolic rules): the terms
// that d divides leave the remainder alone, so with M = those terms and R = the rest,
//   (M + R) % d = R % d          (M + R) / d = M / d + R / d
// and for a product, (p · c) / d = p · (c/d) when d | c, or p / (d/c) when c | d. R % d and R / d
// then fold to R and 0 when R is known to lie in [0, d). This turns the div/mod of an unflattened
// index back into plain loop indices after an UPCAST, e.g. with j < 16:
//   (512·m + 32·j + 5) % 32 = 5        (512·m + 32·j + 5) / 32 = 16·m + j
ValueId Builder::divide_terms(Op op, ValueId x, int64_t d) {
  std::vector<ValueId> terms = sum_terms({x}), multiples, rest;
  // A negative constant c next to a term t ≥ −c (an index clamped into a padding's range, then shifted
  // back to 0: max(i, 64) − 64) is taken with that term, t + c, whose range starts at 0 again.
  for (size_t ci = 0; ci < terms.size(); ci++) {
    if (!is_const(terms[ci]) || const_value(terms[ci]) >= 0 || bounds(x).first < 0) continue;
    const int64_t c = static_cast<int64_t>(const_value(terms[ci]));
    for (size_t ti = 0; ti < terms.size(); ti++) {
      if (ti == ci || is_const(terms[ti]) || bounds(terms[ti]).first + c < 0) continue;
      Inst in;  // t + c as it is (add() would move the constant out again)
      in.op = Op::Add;
      in.dtype = DType::Int32;
      in.src[0] = terms[ti];
      in.src[1] = terms[ci];
      in.num_src = 2;
      const ValueId joined = push(in, true);
      auto [lo, hi] = bounds(terms[ti]);
      bounds_[joined] = {lo + c, hi + c};
      terms[ti] = joined;
      terms.erase(terms.begin() + static_cast<std::ptrdiff_t>(ci));
      break;
    }
    break;
  }
  // One term that is not a product (x itself, or t + c just joined): no sum to split; the product rule below
  // is the only one for a single term (and this keeps x / d from dividing x again).
  if (terms.size() == 1 && k_.insts[terms[0]].op != Op::Mul) return kNone;
  // Every term non-negative; or a negative constant that d divides, in a sum known to be non-negative (an
  // index shifted back by a padding, x − 64 with x ≥ 64): it then goes with the multiples, and the rules
  // below hold as they are (C's / and % truncate toward zero, which is the floor for non-negative values).
  for (ValueId t : terms)
    if (bounds(t).first < 0 &&
        !(is_const(t) && static_cast<int64_t>(const_value(t)) % d == 0 && bounds(x).first >= 0))
      return kNone;
  // p·f with f > d and d not dividing f is p·(f − f % d) + p·(f % d): a multiple of d, and a term that
  // may fall below a step ((7·ky + oy) % 6 = (ky + oy) % 6: a window view's index into a padded row)
  if (terms.size() > 1) {
    std::vector<ValueId> split;
    for (ValueId t : terms) {
      const Inst& in = k_.insts[t];
      if (in.op == Op::Mul && is_const(in.src[1]) && const_value(in.src[1]) > static_cast<double>(d) &&
          static_cast<int64_t>(const_value(in.src[1])) % d != 0) {
        const int64_t f = static_cast<int64_t>(const_value(in.src[1]));
        split.push_back(mul(in.src[0], cint(f - f % d)));
        split.push_back(mul(in.src[0], cint(f % d)));
      } else {
        split.push_back(t);
      }
    }
    terms = std::move(split);
  }
  for (ValueId t : terms) (const_factor(t) % d == 0 ? multiples : rest).push_back(t);
  if (terms.size() == 1 && k_.insts[x].op == Op::Mul) {  // a single product
    const Inst in = k_.insts[x];
    for (int side = 0; side < 2; side++) {
      if (!is_const(in.src[side])) continue;
      const int64_t c = static_cast<int64_t>(const_value(in.src[side]));
      const ValueId p = in.src[1 - side];
      if (c <= 0 || bounds(p).first < 0) continue;
      if (c % d == 0) return op == Op::Mod ? cint(0) : mul(p, cint(c / d));
      if (d % c == 0)
        return op == Op::Mod ? mul(alu(Op::Mod, DType::Int32, p, cint(d / c)), cint(c)) : alu(Op::IDiv, DType::Int32, p, cint(d / c));
    }
    return kNone;
  }
  auto sum = [&](const std::vector<ValueId>& vs) {
    ValueId acc = cint(0);
    for (ValueId v : vs) acc = add(acc, v);
    return acc;
  };
  // Terms below a step of the others: with B the terms that a divisor c of d divides (B = c·P) and
  // S the rest, known to lie in [0, c), S never carries B past a multiple of d = c·e:
  //   (B + S) / d = B / d        (B + S) % d = B % d + S
  // A window view reads (8·y + x) / 16 with x < 8: it is y / 2 (an 8x8 image read as 2x2 blocks).
  for (int64_t c = d / 2; c >= 2; c--) {
    if (d % c) continue;
    std::vector<ValueId> big, small;
    int64_t small_hi = 0;
    for (ValueId t : terms) {
      if (const_factor(t) % c == 0) {
        big.push_back(t);
      } else {
        small.push_back(t);
        small_hi += bounds(t).second;
      }
    }
    if (big.empty() || small.empty() || small_hi >= c) continue;
    const ValueId b = alu(op, DType::Int32, sum(big), cint(d));
    return op == Op::IDiv ? b : add(b, sum(small));
  }
  if (multiples.empty()) return kNone;
  const ValueId r = sum(rest);
  if (op == Op::Mod) return alu(Op::Mod, DType::Int32, r, cint(d));
  std::vector<ValueId> quotients;
  for (ValueId m : multiples) quotients.push_back(alu(Op::IDiv, DType::Int32, m, cint(d)));
  return add(sum(quotients), alu(Op::IDiv, DType::Int32, r, cint(d)));
}

}  // namespace ts::ir
