// Loop-invariant code motion: an instruction inside a loop whose value does not change from one
// iteration to the next moves in front of the loop, and so runs once instead of once per iteration.
//
// Besides single instructions (loads and ALU ops on values from outside the loop), whole reduce blocks
// move: an accumulator with its loop (DEFINE_ACC, RANGE … ASSIGN … END_RANGE) that reads nothing that
// varies in the outer loop. This is what makes the kernelizer's "reduce over the same rows" fusion
// cheap: in a fused softmax, the row's max and sum are computed once per row, before the loop that
// writes the row, instead of once per element.
//
// Loads are pure here (a kernel never writes its inputs), so moving them is safe.
#include <set>

#include "opt/pass_manager.h"

namespace ts {
namespace {

using ir::Op;
using ir::ValueId;

// One loop: moves its invariant instructions and blocks in front of it. Returns true if it moved any.
bool hoist_from(ir::Kernel& k, size_t start) {
  size_t end = end_of_range(k.insts, start);
  // a loop that may not run at all keeps its body: hoisting could execute a load it never would
  const ir::Inst& bound = k.insts[k.insts[start].src[0]];
  if (bound.op != Op::Const || bound.value <= 0) return false;
  std::set<ValueId> variant{static_cast<ValueId>(start)};
  // accumulators defined outside the loop and updated inside it change from one iteration to the next
  for (size_t i = start + 1; i < end; i++)
    if (k.insts[i].op == Op::Assign && k.insts[i].src[0] < start) variant.insert(k.insts[i].src[0]);
  std::vector<ValueId> hoisted, kept;
  auto reads_variant = [&](size_t from, size_t to) {  // any operand of [from, to] defined variant
    for (size_t i = from; i <= to; i++)
      for (int s = 0; s < k.insts[i].num_src; s++)
        if (variant.count(k.insts[i].src[s])) return true;
    return false;
  };
  auto mark_variant = [&](size_t from, size_t to) {
    for (size_t i = from; i <= to; i++) variant.insert(static_cast<ValueId>(i));
  };
  size_t i = start + 1;
  while (i < end) {
    const ir::Inst& in = k.insts[i];
    if (in.op == Op::DefineAcc && i + 1 < end && k.insts[i + 1].op == Op::Range) {
      // an accumulator and the loop that fills it: one unit
      size_t block_end = end_of_range(k.insts, i + 1);
      bool moves = !reads_variant(i, block_end);
      for (size_t j = i; j <= block_end; j++) (moves ? hoisted : kept).push_back(static_cast<ValueId>(j));
      if (!moves) mark_variant(i, block_end);
      i = block_end + 1;
    } else if (in.op == Op::Range) {
      size_t block_end = end_of_range(k.insts, i);  // a nested loop of another kind stays (its own pass handles it)
      for (size_t j = i; j <= block_end; j++) kept.push_back(static_cast<ValueId>(j));
      mark_variant(i, block_end);
      i = block_end + 1;
    } else {
      bool pure = in.op == Op::Load || in.op == Op::Const || ir::is_alu(in.op);
      bool moves = pure && !reads_variant(i, i);
      (moves ? hoisted : kept).push_back(static_cast<ValueId>(i));
      if (!moves) mark_variant(i, i);
      i++;
    }
  }
  if (hoisted.empty()) return false;
  std::vector<ValueId> order;
  for (size_t j = 0; j < start; j++) order.push_back(static_cast<ValueId>(j));
  order.insert(order.end(), hoisted.begin(), hoisted.end());
  order.push_back(static_cast<ValueId>(start));
  order.insert(order.end(), kept.begin(), kept.end());
  for (size_t j = end; j < k.insts.size(); j++) order.push_back(static_cast<ValueId>(j));
  reorder_instructions(k, order);
  return true;
}

}  // namespace

void loop_invariant_code_motion(ir::Kernel& k) {
  // innermost loops first; a hoisted instruction may become invariant in the next loop out, so repeat
  // until nothing moves (at most the loop depth times)
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = k.insts.size(); r-- > 0;) {
      if (k.insts[r].op != Op::Range) continue;
      if (hoist_from(k, r)) {
        moved = true;
        break;  // indices changed: rescan
      }
    }
  }
}

}  // namespace ts
