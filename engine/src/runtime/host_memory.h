// Host memory for CPU devices (C, INTERP): 64-byte aligned so AVX-512 loads never split cache lines;
// buffers of 2 MiB and more are 2 MiB aligned and advised as transparent huge pages, which cuts the
// first-touch page-fault cost of big outputs. Every buffer has kVectorGuardBytes more than asked for after its
// end, which no value is ever stored to: the C renderer loads a partial vector (6 lanes of a row of 14 in a
// vector of 8) with one plain load where its real lanes are all read, and the lanes past them (computed, never
// stored; fewer than half the vector's) may then read up to 7 floats past the buffer's last element
// (CRenderer::vector_accumulators).
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace ts {

constexpr size_t kVectorGuardBytes = 64;

inline void* host_alloc(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  // the guard after the end, the whole rounded to cache lines (not to the huge alignment: a buffer of exactly
  // 2 MiB would take 4); posix_memalign takes any multiple of sizeof(void*) as the size
  const size_t rounded = (bytes + kVectorGuardBytes + 63) / 64 * 64;
  void* p = nullptr;
  if (posix_memalign(&p, align, rounded) != 0 || !p) throw std::bad_alloc();
  if (align == kHuge) madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}
inline void host_free(void* p) { std::free(p); }

}  // namespace ts
