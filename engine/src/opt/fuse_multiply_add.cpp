// Fused multiply-add in accumulations (tinygrad's MULACC): an accumulator update
//
//   acc = acc + a * b          →          acc = MULACC(a, b, acc)        (one FMA instruction)
//
// A multiply followed by an add is two instructions and two roundings; an FMA is one instruction with
// one rounding, and this CPU does two of them per cycle on 16 floats each. The C compiler could fuse
// them itself (-ffp-contract=fast), but then generated C and the IR interpreter would round
// differently; with the fusion written in the IR every device and the interpreter compute the same
// value (the interpreter uses std::fma). Only float32 accumulator updates whose product has no other
// use are fused: that is every matmul and convolution, and elementwise code keeps PyTorch's rounding.
//
// Not fused: the accumulators that upcast_reduce split into partial sums (read after the loop by an
// ADD of two accumulators). gcc 12 vectorizes such a group as one SLP reduction of 16 lanes only when
// each update is a PLUS; an fmaf call is not a reduction operation to it, and the group stays scalar
// (x @ W.T with K = 64: 0.39 ms scalar, 0.03 ms vectorized as MUL+ADD).
#include "opt/pass_manager.h"

namespace ts {

void fuse_multiply_add(ir::Kernel& k) {
  using ir::Op;
  std::vector<int> uses(k.insts.size(), 0);
  for (const ir::Inst& in : k.insts)
    for (int s = 0; s < in.num_src; s++) uses[in.src[s]]++;
  std::vector<bool> split(k.insts.size(), false);  // accumulators combined with another after their loop
  for (const ir::Inst& in : k.insts)
    if (in.op == Op::Add && k.insts[in.src[0]].op == Op::DefineAcc && k.insts[in.src[1]].op == Op::DefineAcc)
      split[in.src[0]] = split[in.src[1]] = true;
  bool changed = false;
  for (ir::Inst& assign : k.insts) {
    if (assign.op != Op::Assign || assign.dtype != DType::Float32 || split[assign.src[0]]) continue;
    ir::Inst& add = k.insts[assign.src[1]];
    if (add.op != Op::Add || uses[assign.src[1]] != 1) continue;
    for (int side = 0; side < 2; side++) {
      const ir::ValueId acc = add.src[side], product = add.src[1 - side];
      const ir::Inst& mul = k.insts[product];
      if (acc != assign.src[0] || mul.op != Op::Mul || uses[product] != 1) continue;
      add = ir::Inst{Op::MulAcc, DType::Float32, 3, {mul.src[0], mul.src[1], acc}, 0, 0};
      changed = true;
      break;
    }
  }
  if (changed) dead_code_elimination(k);  // the MULs are unused now
}

}  // namespace ts
