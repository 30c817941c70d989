// Simplify: the kernel is rebuilt through the IR builder, so that the builder's rewrites run on what
// the earlier passes produced: constant folding, the algebraic identities of index arithmetic
// (x + 0, x · 1, div/mod of sums of multiples — see Builder::divide_terms) and common-subexpression
// elimination. An UPCAST copies index arithmetic once per copy with one loop index replaced by a
// constant; this pass folds what became constant and merges what became equal, e.g.
//
//   %11 = MOD (512·m + 32·j0 + 5), 32   →   5
//   %12 = IDIV (512·m + 32·j0 + 5), 32  →   16·m + j0
//
// Values that read an accumulator are copied unchanged (no CSE): an accumulator's value changes at
// each ASSIGN, so two equal-looking expressions on it may differ.
#include "ir/builder.h"
#include "opt/pass_manager.h"

namespace ts {

void simplify(ir::Kernel& k) {
  using ir::Op;
  ir::Kernel out{k.name, k.globals, {}, k.opts, k.plan, k.target};
  ir::Builder b(out);
  std::vector<ir::ValueId> remap(k.insts.size(), ir::kNone);
  for (size_t i = 0; i < k.insts.size(); i++) {
    ir::Inst in = k.insts[i];
    for (int s = 0; s < in.num_src; s++) in.src[s] = remap[in.src[s]];
    auto src = [&](int s) { return s < in.num_src ? in.src[s] : ir::kNone; };
    bool reads_acc = false;
    for (int s = 0; s < in.num_src; s++) reads_acc = reads_acc || out.insts[in.src[s]].op == Op::DefineAcc;
    ir::ValueId v = ir::kNone;
    switch (in.op) {
      case Op::DefineGlobal: v = b.global(static_cast<int>(in.arg), in.dtype); break;
      case Op::Const: v = b.constant(in.value, in.dtype); break;
      case Op::DefineAcc: v = b.acc(in.value, in.dtype); break;
      case Op::Range:
        if (!b.is_const(src(0))) v = b.raw(in);
        else if (in.arg == ir::kLocalLoop) v = b.local_range(static_cast<int64_t>(b.const_value(src(0))));
        else v = b.range(static_cast<int64_t>(b.const_value(src(0))), in.arg == ir::kGlobalLoop);
        break;
      case Op::DefineLocal: case Op::Barrier: v = b.raw(in); break;
      case Op::EndRange: b.end_range(src(0)); break;
      case Op::Load: v = b.load(src(0), src(1), src(2)); break;
      case Op::Store: b.store(src(0), src(1), src(2), src(3)); break;
      case Op::Assign: b.assign(src(0), src(1)); break;
      default: v = reads_acc ? b.raw(in) : b.alu(in.op, in.dtype, src(0), src(1), src(2)); break;
    }
    remap[i] = v;
  }
  k.insts = std::move(out.insts);
  dead_code_elimination(k);  // what folding left unused
}

}  // namespace ts
