// The work of one kernel, counted once at schedule time from the graph: what the timeline's rates and the
// roofline plot divide by a launch's time (KernelInfo::flops, KernelInfo::bytes).
//
// FLOPs: every fused ALU node (unary, binary, WHERE, CAST) counts one FLOP per element of its shape, and
// a reduce one per element of its input. A matmul is reshape + expand + MUL + SUM, so it counts
// M·N·K multiplies and M·N·K adds: 2·M·N·K, the field's convention for a fused multiply-add. Movement
// ops, constants and loads are free. The same rule as scripts/bench_training.py's kernel_cost.
// Bytes: the sizes of the buffers the kernel reads and the ones it writes, each once (numel × dtype size),
// which is what it must move at least: a tiled kernel that reads an input twice from memory moves more.
#pragma once
#include "schedule/schedule.h"

namespace ts {

struct KernelCost {
  double flops = 0;  // FLOPs per launch
  double bytes = 0;  // bytes read and written per launch
};

KernelCost kernel_cost(const Graph& g, const ScheduleItem& item);

}  // namespace ts
