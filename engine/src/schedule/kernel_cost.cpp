#include "schedule/kernel_cost.h"

#include "graph/view.h"
#include "tensorscope/dtype.h"

namespace ts {

KernelCost kernel_cost(const Graph& g, const ScheduleItem& item) {
  KernelCost cost;
  auto size = [&](NodeId id) { return static_cast<double>(shape_numel(g[id].shape)) * dtype_size(g[id].dtype); };
  for (NodeId in : item.inputs) cost.bytes += size(in);
  for (NodeId out : item.outputs) cost.bytes += size(out);
  if (item.is_copy) return cost;
  for (NodeId f : item.fused) {
    const Node& n = g[f];
    if (is_alu(n.op)) cost.flops += static_cast<double>(shape_numel(n.shape));
    else if (is_reduce(n.op)) cost.flops += static_cast<double>(shape_numel(g[n.src[0]].shape));
  }
  return cost;
}

}  // namespace ts
