// Constant hoisting: constants and buffer definitions move to the top of the kernel, so loop bodies
// show only the work done per iteration (and the listing reads like the C a person would write).
#include "opt/pass_manager.h"

namespace ts {

void hoist_constants(ir::Kernel& k) {
  std::vector<ir::ValueId> order;
  for (size_t i = 0; i < k.insts.size(); i++)
    if (k.insts[i].op == ir::Op::DefineGlobal) order.push_back(static_cast<ir::ValueId>(i));
  for (size_t i = 0; i < k.insts.size(); i++)
    if (k.insts[i].op == ir::Op::Const) order.push_back(static_cast<ir::ValueId>(i));
  for (size_t i = 0; i < k.insts.size(); i++)
    if (k.insts[i].op != ir::Op::Const && k.insts[i].op != ir::Op::DefineGlobal) order.push_back(static_cast<ir::ValueId>(i));
  reorder_instructions(k, order);
}

}  // namespace ts
