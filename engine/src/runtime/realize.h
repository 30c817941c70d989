// Realization: schedule → lower → (passes) → render → compile → launch, reporting every step to the
// Session.
#pragma once
#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace ts {

// Computes `targets` (and what they need) on their device; afterwards each is a Buffer leaf.
// Throws std::runtime_error when a kernel fails to compile or the inputs live on different devices.
void realize(const std::vector<NodeId>& targets);

// Counters in the spirit of tinygrad's GlobalCounters.
struct GlobalCounters {
  static inline int64_t kernel_count = 0;  // kernels launched
  static inline double time_ms = 0;        // kernel time, ms
  static void reset() {
    kernel_count = 0;
    time_ms = 0;
  }
};

}  // namespace ts
