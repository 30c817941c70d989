// Dead-code elimination: keeps the instructions a STORE depends on (plus loop structure and the
// accumulators' updates), drops the rest — e.g. the IDIV that lowering emits for a coordinate that a
// constant mask never reads.
#include "opt/pass_manager.h"

namespace ts {

void dead_code_elimination(ir::Kernel& k) {
  using ir::Op;
  const size_t n = k.insts.size();
  std::vector<char> live(n, 0);
  // roots: stores, loop structure, barriers, accumulator updates; then everything they use (backwards sweep;
  // an ASSIGN keeps its accumulator alive, and the accumulator is live only if something reads it)
  bool changed = true;
  for (size_t i = 0; i < n; i++) {
    Op op = k.insts[i].op;
    if (op == Op::Store || op == Op::Range || op == Op::EndRange || op == Op::Barrier) live[i] = 1;
  }
  while (changed) {
    changed = false;
    for (size_t i = n; i-- > 0;) {
      const ir::Inst& in = k.insts[i];
      if (in.op == Op::Assign && live[in.src[0]] && !live[i]) {
        live[i] = 1;
        changed = true;
      }
      if (!live[i]) continue;
      for (int s = 0; s < in.num_src; s++)
        if (!live[in.src[s]]) {
          live[in.src[s]] = 1;
          changed = true;
        }
    }
  }
  std::vector<ir::ValueId> order;
  for (size_t i = 0; i < n; i++)
    if (live[i]) order.push_back(static_cast<ir::ValueId>(i));
  if (order.size() != n) reorder_instructions(k, order);
}

}  // namespace ts
