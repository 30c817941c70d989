#include "gpu_launch.h"

#include <algorithm>

namespace ts::gpu {

namespace {

// Outermost first: each next range must be the first RANGE after the previous one and inside it.
std::vector<ir::ValueId> nested_global_ranges(const ir::Kernel& k) {
  std::vector<ir::ValueId> chain;
  for (size_t i = 0; i < k.insts.size() && chain.size() < 3; i++) {
    const ir::Inst& in = k.insts[i];
    if (in.op == ir::Op::EndRange && !chain.empty() && in.src[0] == chain.back()) break;  // left the innermost
    if (in.op != ir::Op::Range) continue;
    if (in.arg != 1) break;  // a sequential loop: everything inside stays within one thread
    chain.push_back(static_cast<ir::ValueId>(i));
  }
  return chain;
}

uint32_t next_pow2(uint64_t n) {
  uint32_t p = 1;
  while (p < n && p < (1u << 30)) p <<= 1;
  return p;
}

}  // namespace

Grid plan_grid(const ir::Kernel& k, const uint32_t max_groups[3]) {
  Grid g;
  g.ranges = nested_global_ranges(k);
  std::reverse(g.ranges.begin(), g.ranges.end());  // the innermost range is x
  g.dims = std::max<uint32_t>(1, static_cast<uint32_t>(g.ranges.size()));
  g.lanes = static_cast<uint32_t>(ir::local_loop_lanes(k));
  g.local[0] = std::max<uint32_t>(g.lanes, 1);
  uint32_t room = kWorkgroupSize;  // threads left to place in the workgroup
  for (const ir::AppliedOpt& opt : k.opts)
    if (opt.kind == ir::AppliedOpt::Local) room = static_cast<uint32_t>(opt.amount);
  for (size_t d = 0; d < g.ranges.size(); d++) {
    const ir::Inst& bound = k.insts[k.insts[g.ranges[d]].src[0]];
    // a bound that is not a constant (none today) gets a generous grid and the loop form
    bool known = bound.op == ir::Op::Const;
    uint64_t n = known ? static_cast<uint64_t>(std::max(0.0, bound.value)) : 65536;
    if (g.lanes > 0) {  // one workgroup per iteration
      g.strided[d] = !known || n > max_groups[d];
      g.groups[d] = static_cast<uint32_t>(std::clamp<uint64_t>(n, 1, max_groups[d]));
      continue;
    }
    g.local[d] = std::min(room, next_pow2(std::max<uint64_t>(n, 1)));
    room /= g.local[d];
    uint64_t groups = std::max<uint64_t>(1, (n + g.local[d] - 1) / g.local[d]);
    g.strided[d] = !known || groups > max_groups[d];
    g.groups[d] = static_cast<uint32_t>(std::min<uint64_t>(groups, max_groups[d]));
  }
  return g;
}

int Grid::dim_of(ir::ValueId range) const {
  auto it = std::find(ranges.begin(), ranges.end(), range);
  return it == ranges.end() ? -1 : static_cast<int>(it - ranges.begin());
}

std::string Grid::str() const {
  auto xyz = [](const uint32_t* v) {
    return std::to_string(v[0]) + "x" + std::to_string(v[1]) + "x" + std::to_string(v[2]);
  };
  return "groups " + xyz(groups) + " of " + xyz(local);
}

}  // namespace ts::gpu
