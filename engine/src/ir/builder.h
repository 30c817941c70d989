// IRBuilder: appends instructions to a kernel with constant folding, algebraic identities on integer
// index arithmetic, and common-subexpression elimination scoped to the enclosing loop (a value
// computed inside a loop is not reused after the loop ends).
#pragma once
#include <cstdint>
#include <map>
#include <tuple>

#include "tensorscope/ir.h"

namespace ts::ir {

class Builder {
 public:
  explicit Builder(Kernel& k) : k_(k) {}

  ValueId global(int slot, DType dt);
  ValueId cint(int64_t v) { return constant(static_cast<double>(v), DType::Int32); }
  ValueId cbool(bool v) { return constant(v ? 1 : 0, DType::Bool); }
  ValueId constant(double v, DType dt);
  ValueId range(int64_t bound, bool global = false);
  ValueId local_range(int64_t lanes);                  // a RANGE over the lanes of a workgroup (kLocalLoop)
  ValueId define_local(DType dt, int64_t elements);    // workgroup-shared memory (at the top level)
  void barrier();
  void end_range(ValueId range);
  ValueId acc(double init, DType dt);
  void assign(ValueId acc, ValueId value);
  ValueId load(ValueId buf, ValueId idx, ValueId gate = kNone);
  // `gate`: a bool; the store happens only where it is true (a constant true gate is dropped, a false one
  // drops the store).
  void store(ValueId buf, ValueId idx, ValueId value, ValueId gate = kNone);
  ValueId alu(Op op, DType dt, ValueId a, ValueId b = kNone, ValueId c = kNone);
  ValueId cast(ValueId a, DType dt);

  // integer index helpers
  ValueId add(ValueId a, ValueId b) { return alu(Op::Add, dtype(a), a, b); }
  ValueId mul(ValueId a, ValueId b) { return alu(Op::Mul, dtype(a), a, b); }
  ValueId land(ValueId a, ValueId b);  // logical and; kNone means "true"

  DType dtype(ValueId v) const { return k_.insts[v].dtype; }
  bool is_const(ValueId v) const { return k_.insts[v].op == Op::Const; }
  double const_value(ValueId v) const { return k_.insts[v].value; }
  // Appends `in` as it is: no folding, no CSE (for instructions a pass copies unchanged).
  ValueId raw(const Inst& in) { return push(in, false); }

  // Known value range of an int32 value [lo, hi] (from constants and loop bounds), for folding % and /.
  std::pair<int64_t, int64_t> bounds(ValueId v) const;

 private:
  ValueId push(const Inst& in, bool cse);
  // x / d and x % d for a constant d > 0 through sums and products whose terms are multiples of d
  // (tinygrad's symbolic rules); kNone when no rule applies.
  ValueId divide_terms(Op op, ValueId x, int64_t d);
  // The terms of the sum(s) rooted at `roots` (a chain of ADDs flattened); stops after limit + 1 terms.
  std::vector<ValueId> sum_terms(std::vector<ValueId> roots, size_t limit = SIZE_MAX) const;
  // p·k for a pair (p / e)·(k·e) and (p % e)·k among the terms of a + b; kNone when there is none.
  ValueId recombine_div_mod(ValueId a, ValueId b);
  // The largest constant known to divide v (1 when nothing is known).
  int64_t const_factor(ValueId v) const;
  // True when the float value v can never be -0.0: a constant other than -0, or a sum with such a term (a sum
  // is -0 only when both terms are), looked through up to `depth` sums.
  bool never_negative_zero(ValueId v, int depth = 8) const;
  Kernel& k_;
  // the value enters the key as its bit pattern: NaN != NaN would break the map's ordering
  using Key = std::tuple<int, int, ValueId, ValueId, ValueId, ValueId, int64_t, uint64_t>;
  std::map<Key, ValueId> cse_;
  std::map<ValueId, std::pair<int64_t, int64_t>> bounds_;
};

}  // namespace ts::ir
