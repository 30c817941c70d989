// The buffer pool: freed device buffers are kept by (device, size) and handed out again, because a
// fresh allocation is expensive — on the CPU every first-touched 4 KiB page costs ~1.5 µs, so a fresh
// 64 MB output costs ~28 ms against ~1.5 ms for a reused one (measured on this machine).
//
// Buffers come back to the pool when the last shared_ptr to them goes away (a custom deleter), that
// is, as soon as no tensor and no pending kernel needs them. The pool keeps at most
// TENSORSCOPE_POOL_MB (default 1024) MiB per device; beyond that, buffers are really freed.
#pragma once
#include <memory>

#include "tensorscope/device.h"

namespace ts {

// A buffer of `numel` elements of `dtype` on device `device_index`: reused from the pool when one of
// the same byte size is free, newly allocated otherwise.
std::shared_ptr<Buffer> pooled_buffer(int device_index, DType dtype, int64_t numel,
                                      const std::vector<int64_t>* shape = nullptr);

struct BufferPoolStats {
  int64_t hits = 0, misses = 0;  // reuses, fresh allocations
  size_t cached_bytes = 0;       // bytes held free in the pool, all devices
  int64_t cached_buffers = 0;    // buffers held free in the pool, all devices
  int64_t live_buffers = 0;      // buffers handed out by the pool and not yet given back (in use)
  size_t live_bytes = 0;         // their bytes
  size_t peak_live_bytes = 0;    // the most live_bytes has been since buffer_pool_reset_peak (torch.cuda's
                                 // max_memory_allocated): what a schedule needs at once
};
BufferPoolStats buffer_pool_stats();
// Starts peak_live_bytes again from the bytes live now (torch.cuda.reset_peak_memory_stats).
void buffer_pool_reset_peak();
// Frees every cached buffer (tests; before measuring memory).
void buffer_pool_clear();

}  // namespace ts
