// Host memory for CPU devices (C, INTERP): 64-byte aligned, so AVX-512 loads never split lines.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace ts {

inline void* host_alloc(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}
inline void host_free(void* p) { std::free(p); }

}  // namespace ts
