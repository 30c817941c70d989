// INTERP: runs kernel IR with the reference interpreter. Slow, simple, and the oracle for every
// compiled backend.
#include <chrono>

#include "runtime/host_memory.h"
#include "tensorscope/device.h"

namespace ts {
namespace {

class InterpProgram : public Program {
 public:
  explicit InterpProgram(ir::Kernel k) : kernel_(std::move(k)) {}
  double launch(const std::vector<Buffer*>& buffers) override {
    std::vector<void*> ptrs;
    for (Buffer* b : buffers) ptrs.push_back(b->handle);
    auto t0 = std::chrono::steady_clock::now();
    ir::interpret(kernel_, ptrs);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  ir::Kernel kernel_;
};

class InterpDevice : public Device {
 public:
  std::string name() const override { return "INTERP"; }
  void* alloc(size_t bytes) override { return host_alloc(bytes); }
  void free(void* h, size_t) override { host_free(h); }
  void copy_in(void* h, const void* host, size_t bytes) override { std::memcpy(h, host, bytes); }
  void copy_out(void* host, const void* h, size_t bytes) override { std::memcpy(host, h, bytes); }
  const Renderer* renderer() const override { return nullptr; }
  CompileResult compile(const ir::Kernel& kernel, const SourceListing*) override {
    CompileResult r;
    r.program = std::make_unique<InterpProgram>(kernel);
    r.cache_hit = true;  // nothing to compile
    return r;
  }
};

const bool registered = DeviceRegistry::add("INTERP", [] { return std::make_unique<InterpDevice>(); });

}  // namespace
}  // namespace ts
