// Realization: schedule → lower → (passes) → render → compile → launch, reporting every step to the
// Session.
//
// The schedule cache: a realize() whose lazy graph has the same structure as an earlier one (same ops,
// shapes, dtypes, devices, constants and wiring; other buffers of the same shapes) runs the kernels the
// earlier one compiled, and skips the kernelizer, lowering, the passes, rendering and the compile-cache
// lookup. A training loop rebuilds the same graph every step, so from the second step on a realize costs
// a walk over the graph plus the launches. The structure is compared exactly (a hash finds the entry,
// the full key confirms it). With a session observer attached the cache is bypassed, so the GUI and the
// DEBUG printer always get the full schedule, IR and source events.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "tensorscope/ir.h"

namespace ts {

// Computes `targets` (and what they need) on their device; afterwards each is a Buffer leaf.
// Throws std::runtime_error when a kernel fails to compile or the inputs live on different devices.
void realize(const std::vector<NodeId>& targets);

// The (output, input) pairs of launch-buffer positions (a kernel's DEFINE_GLOBAL slots: outputs first, then
// inputs) where the output may be written into the input's buffer: same dtype and size, and every load of
// the input reads, unmasked, an element the kernel then stores to the output at the same index (the same
// index value, later in the same loop body) — an elementwise update such as an optimizer's. Each output
// element is stored once, so no element is read after its store. Used by jit replays (jit.cpp).
std::vector<std::pair<int, int>> in_place_pairs(const ir::Kernel& kernel);

// Drops every cached schedule (the compiled programs stay in the program cache).
void clear_schedule_cache();

// Counters in the spirit of tinygrad's GlobalCounters. Defined in realize.cpp (not inline: the Python
// module is a separate shared object and must see the library's copies).
struct GlobalCounters {
  static int64_t kernel_count;         // kernels launched (device copies not counted)
  static double time_ms;               // kernel time, ms
  static int64_t schedule_count;       // schedules made by the kernelizer (cache misses)
  static int64_t schedule_cache_hits;  // realize() calls served by the schedule cache
  static int64_t replayed_kernels;     // kernels launched by jit replays (also in kernel_count)
  static int64_t in_place_outputs;     // outputs jit replays wrote into the buffer of the value they replace
  static void reset();
};

}  // namespace ts
