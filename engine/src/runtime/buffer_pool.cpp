#include "runtime/buffer_pool.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace ts {
namespace {

struct Pool {
  std::mutex mutex;
  std::map<std::pair<int, size_t>, std::vector<Buffer*>> free;  // (device, bytes) → buffers
  std::map<int, size_t> cached_bytes;                            // per device
  BufferPoolStats stats;
  int64_t live_buffers = 0;  // handed out, not yet given back
  size_t live_bytes = 0;
  size_t peak_live_bytes = 0;
  void add_live(size_t bytes) {
    live_buffers++;
    live_bytes += bytes;
    peak_live_bytes = std::max(peak_live_bytes, live_bytes);
  }
  size_t limit_bytes = [] {
    const char* env = std::getenv("TENSORSCOPE_POOL_MB");
    return static_cast<size_t>(env ? std::atoll(env) : 1024) << 20;
  }();
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: buffers may be released during static destruction
  return *p;
}

size_t pool_bytes(const Buffer& b) { return std::max<size_t>(b.nbytes(), 1); }

void give_back(Buffer* b) {
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    size_t bytes = pool_bytes(*b);
    p.live_buffers--;
    p.live_bytes -= bytes;
    if (p.cached_bytes[b->device_index] + bytes <= p.limit_bytes) {
      p.free[{b->device_index, bytes}].push_back(b);
      p.cached_bytes[b->device_index] += bytes;
      return;
    }
  }
  delete b;  // over the limit: return the memory to the device
}

}  // namespace

std::shared_ptr<Buffer> pooled_buffer(int device_index, DType dtype, int64_t numel, const std::vector<int64_t>* shape) {
  Pool& p = pool();
  size_t bytes = std::max<size_t>(static_cast<size_t>(numel) * dtype_size(dtype), 1);
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    auto it = p.free.find({device_index, bytes});
    if (it != p.free.end() && !it->second.empty()) {
      Buffer* b = it->second.back();
      it->second.pop_back();
      p.cached_bytes[device_index] -= bytes;
      p.stats.hits++;
      p.add_live(bytes);
      b->dtype = dtype;  // same byte size: the memory serves any dtype
      b->numel = numel;
      return std::shared_ptr<Buffer>(b, give_back);
    }
    p.stats.misses++;
  }
  std::shared_ptr<Buffer> fresh = allocate_buffer(device_index, dtype, numel, shape);
  // move ownership from allocate_buffer's shared_ptr to one with the pool's deleter
  auto* b = new Buffer();
  std::swap(b->device, fresh->device);
  std::swap(b->handle, fresh->handle);
  b->device_index = fresh->device_index;
  b->dtype = dtype;
  b->numel = numel;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    p.add_live(pool_bytes(*b));
  }
  return std::shared_ptr<Buffer>(b, give_back);
}

BufferPoolStats buffer_pool_stats() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  BufferPoolStats s = p.stats;
  for (auto& [dev, bytes] : p.cached_bytes) s.cached_bytes += bytes;
  for (auto& [key, buffers] : p.free) s.cached_buffers += static_cast<int64_t>(buffers.size());
  s.live_buffers = p.live_buffers;
  s.live_bytes = p.live_bytes;
  s.peak_live_bytes = p.peak_live_bytes;
  return s;
}

void buffer_pool_reset_peak() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.peak_live_bytes = p.live_bytes;
}

void buffer_pool_clear() {
  Pool& p = pool();
  std::vector<Buffer*> doomed;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    for (auto& [key, list] : p.free) doomed.insert(doomed.end(), list.begin(), list.end());
    p.free.clear();
    p.cached_bytes.clear();
  }
  for (Buffer* b : doomed) delete b;
}

}  // namespace ts
