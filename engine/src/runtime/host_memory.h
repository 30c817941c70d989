// Host memory for CPU devices (C, INTERP): 64-byte aligned so AVX-512 loads never split cache lines;
// buffers of 2 MiB and more are 2 MiB aligned and advised as transparent huge pages, which cuts the
// first-touch page-fault cost of big outputs.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace ts {

inline void* host_alloc(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  size_t align = bytes >= kHuge ? kHuge : 64;
  size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw std::bad_alloc();
  if (align == kHuge) madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}
inline void host_free(void* p) { std::free(p); }

}  // namespace ts
