// Code sinking (LLVM's Sink pass does the same across basic blocks): an instruction in front of a
// loop whose value is used only after the loop moves behind it, so it is not live during the loop.
//
// Lowering writes an elementwise epilogue's operands in the order of the expression, so in a matmul
// fused with an update (SGD momentum: buf = 0.9·buf + gᵀ @ x) the loads of buf come before the reduce
// loop:
//
//   b = buf[i, j] · 0.9                       acc = 0
//   acc = 0                             →     for k: acc += g[k, i] · x[k, j]
//   for k: acc += g[k, i] · x[k, j]           b = buf[i, j] · 0.9
//   out[i, j] = b + acc                       out[i, j] = b + acc
//
// After UPCAST_GLOBAL and REGISTER_TILE one output is a tile of 4 × 32 (128 accumulators, 8 vector
// registers), and the 128 values of b held across the loop took 8 more: gcc split the tile into
// vectors of 16, 8 and single lanes and spilled to the stack inside the loop (LeNet's 84 × 120 weight
// gradient with its momentum update 24 us, the matmul alone 17). Sunk, b is loaded after the loop,
// where only the tile's accumulators are live.
//
// Moves loads and ALU instructions, never constants (hoist_constants keeps those at the top), and only
// past loops that store nothing, and no load past a store (it could read the stored value). Kernels for
// devices with workgroups are left alone: their loops may hold barriers, and a GPU's registers are
// allocated per kernel anyway.
#include <vector>

#include "opt/pass_manager.h"

namespace ts {
namespace {

using ir::Op;
using ir::ValueId;

// The loop at `range`: sinks what in front of it, in the same block, is used only behind it. Returns
// how many instructions moved.
size_t sink_past(ir::Kernel& k, size_t range, const std::vector<std::vector<ValueId>>& users) {
  const std::vector<ir::Inst>& insts = k.insts;
  const size_t end = end_of_range(insts, range);
  if (end >= insts.size()) return 0;
  for (size_t i = range + 1; i < end; i++)
    if (insts[i].op == Op::Store || insts[i].op == Op::Barrier) return 0;
  // the block the loop is in starts after the RANGE that encloses it (or at the kernel's top)
  size_t block_begin = 0;
  for (size_t i = range; i-- > 0;)
    if (insts[i].op == Op::Range && end_of_range(insts, i) > end) {
      block_begin = i + 1;
      break;
    }
  // walk back over the block (nested loops are skipped whole): users come after their operands, so
  // when an instruction is reached, whether each of its users moves is known. A load in front of a store
  // (in the block or in a nested loop) stays in front of it: it could read what the store writes.
  std::vector<bool> sinks(insts.size(), false);
  bool any = false, store_behind = false;
  for (size_t i = range; i-- > block_begin;) {
    if (insts[i].op == Op::EndRange) {  // a whole nested loop stays
      const size_t begin = insts[i].src[0];
      for (size_t j = begin; j < i && !store_behind; j++)
        store_behind = insts[j].op == Op::Store || insts[j].op == Op::Barrier;
      i = begin;
      continue;
    }
    if (insts[i].op == Op::Store || insts[i].op == Op::Barrier) store_behind = true;
    const bool movable = (insts[i].op == Op::Load && !store_behind) || ir::is_alu(insts[i].op);
    if (!movable) continue;
    bool used_only_behind = !users[i].empty();
    for (ValueId u : users[i]) used_only_behind = used_only_behind && (u > end || sinks[u]);
    sinks[i] = used_only_behind;
    any = any || used_only_behind;
  }
  if (!any) return 0;
  std::vector<ValueId> order, sunk;
  for (size_t i = 0; i <= end; i++) (sinks[i] ? sunk : order).push_back(static_cast<ValueId>(i));
  order.insert(order.end(), sunk.begin(), sunk.end());
  for (size_t i = end + 1; i < insts.size(); i++) order.push_back(static_cast<ValueId>(i));
  reorder_instructions(k, order);
  return sunk.size();
}

}  // namespace

void sink_after_loops(ir::Kernel& k) {
  if (k.target.workgroups()) return;
  // each loop once, first to last (the outer ones first: what sinks past an outer loop is not in front
  // of its inner ones)
  std::vector<std::vector<ValueId>> users;
  auto find_users = [&] {
    users.assign(k.insts.size(), {});
    for (size_t i = 0; i < k.insts.size(); i++)
      for (int s = 0; s < k.insts[i].num_src; s++) users[k.insts[i].src[s]].push_back(static_cast<ValueId>(i));
  };
  find_users();
  for (size_t r = 0; r < k.insts.size(); r++) {
    if (k.insts[r].op != Op::Range) continue;
    if (const size_t moved = sink_past(k, r, users); moved > 0) {
      r -= moved;  // what moved was in front of the RANGE, which is now that much earlier
      find_users();  // and every value after it has a new number
    }
  }
}

}  // namespace ts
