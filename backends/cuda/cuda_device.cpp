// CUDA:n — NVIDIA GPUs through the CUDA driver API, loaded at run time (dlopen libcuda.so.1) so that the
// build needs no GPU and no driver. Kernels are CUDA C (cuda_renderer) compiled by NVRTC to PTX, which the
// driver turns into machine code for the GPU at hand (cuModuleLoadData).
//
// Without a driver or a GPU there is still one device, CUDA:0, that is compile-only: every kernel still
// gets its CUDA C and PTX (the lesson works everywhere), and the first allocation — the first thing any
// realization does — raises an error that says why it cannot run.
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <type_traits>
#include <vector>
#include <stdexcept>

#include "cuda/cuda_renderer.h"
#include "tensorscope/device.h"
#include "cuda/nvrtc.h"
#include "gpu_launch.h"

namespace ts {
namespace {

// A kernel's parameters take at most 4 KiB (CUDA C++ Programming Guide, "Function Parameters"): this many
// buffer pointers (DeviceProperties::max_kernel_buffers).
constexpr uint32_t kMaxKernelBuffers = 4096 / sizeof(CUdeviceptr);

// The driver entry points we use. Looked up by their exported (versioned) names: cuda.h's macros map
// e.g. cuMemAlloc to cuMemAlloc_v2, which is the symbol the driver exports.
struct Driver {
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*driver_version)(int*) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_name)(char*, int, CUdevice) = nullptr;
  CUresult (*device_memory)(size_t*, CUdevice) = nullptr;
  CUresult (*device_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*copy_htod)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*copy_dtoh)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*module_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                     void**, void**) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned int) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_synchronize)(CUevent) = nullptr;
  CUresult (*event_elapsed)(float*, CUevent, CUevent) = nullptr;
  CUresult (*event_destroy)(CUevent) = nullptr;
  CUresult (*error_name)(CUresult, const char**) = nullptr;
  std::string failure;  // why the driver cannot be used; empty when it can
};

const Driver& driver() {
  static const Driver d = [] {
    Driver drv;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      drv.failure = "no NVIDIA driver (libcuda.so.1 not found)";
      return drv;
    }
    auto sym = [&](auto& fn, const char* name, const char* fallback = nullptr) {
      void* p = dlsym(h, name);
      if (!p && fallback) p = dlsym(h, fallback);
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
      if (!p && drv.failure.empty()) drv.failure = std::string("the NVIDIA driver lacks ") + name;
    };
    sym(drv.init, "cuInit");
    sym(drv.driver_version, "cuDriverGetVersion");
    sym(drv.device_count, "cuDeviceGetCount");
    sym(drv.device_get, "cuDeviceGet");
    sym(drv.device_name, "cuDeviceGetName");
    sym(drv.device_memory, "cuDeviceTotalMem_v2");
    sym(drv.device_attribute, "cuDeviceGetAttribute");
    sym(drv.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    sym(drv.ctx_set_current, "cuCtxSetCurrent");
    sym(drv.mem_alloc, "cuMemAlloc_v2");
    sym(drv.mem_free, "cuMemFree_v2");
    sym(drv.copy_htod, "cuMemcpyHtoD_v2");
    sym(drv.copy_dtoh, "cuMemcpyDtoH_v2");
    sym(drv.module_load_data, "cuModuleLoadData");
    sym(drv.module_unload, "cuModuleUnload");
    sym(drv.module_function, "cuModuleGetFunction");
    sym(drv.launch, "cuLaunchKernel");
    sym(drv.event_create, "cuEventCreate");
    sym(drv.event_record, "cuEventRecord");
    sym(drv.event_synchronize, "cuEventSynchronize");
    sym(drv.event_elapsed, "cuEventElapsedTime_v2", "cuEventElapsedTime");
    sym(drv.event_destroy, "cuEventDestroy_v2");
    sym(drv.error_name, "cuGetErrorName");
    if (drv.failure.empty()) {
      CUresult r = drv.init(0);
      if (r != CUDA_SUCCESS) {
        const char* name = "unknown error";
        drv.error_name(r, &name);
        drv.failure = std::string("cuInit failed: ") + name;
      }
    }
    return drv;
  }();
  return d;
}

// Errors after which the context cannot be used again ("sticky" errors in the CUDA Driver API's
// documentation: the process must be restarted) or the GPU is gone: the device counts as lost.
bool context_lost(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_FAILED: case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION: case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC: case CUDA_ERROR_ECC_UNCORRECTABLE: case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
      return true;
    default:
      return false;
  }
}

// `what` is "DEVICE: call"; a lost context throws DeviceLostError for DEVICE.
void check(CUresult r, const std::string& what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = "unknown error";
  driver().error_name(r, &name);
  if (context_lost(r)) {
    const size_t colon = what.find(": ");
    throw DeviceLostError(what.substr(0, colon), std::string(name) + " in " + what.substr(colon == std::string::npos ? 0 : colon + 2));
  }
  throw std::runtime_error(what + " failed: " + name + " (" + std::to_string(static_cast<int>(r)) + ")");
}

class CudaProgram : public Program {
 public:
  CudaProgram(std::string device, CUcontext ctx, CUmodule module, CUfunction fn, gpu::Grid grid, std::string name)
      : device_(std::move(device)), ctx_(ctx), module_(module), fn_(fn), grid_(grid), name_(std::move(name)) {}
  ~CudaProgram() override {
    if (module_) driver().module_unload(module_);
  }

  double launch(const std::vector<Buffer*>& buffers) override {
    const Driver& d = driver();
    check(d.ctx_set_current(ctx_), device_ + ": cuCtxSetCurrent");
    std::vector<CUdeviceptr> ptrs;
    for (Buffer* b : buffers) ptrs.push_back(reinterpret_cast<CUdeviceptr>(b->handle));
    std::vector<void*> args;
    for (CUdeviceptr& p : ptrs) args.push_back(&p);
    CUevent start = nullptr, end = nullptr;
    check(d.event_create(&start, CU_EVENT_DEFAULT), device_ + ": cuEventCreate");
    check(d.event_create(&end, CU_EVENT_DEFAULT), device_ + ": cuEventCreate");
    float ms = 0;
    CUresult r = d.event_record(start, nullptr);
    if (r == CUDA_SUCCESS)
      r = d.launch(fn_, grid_.groups[0], grid_.groups[1], grid_.groups[2], grid_.local[0], grid_.local[1],
                   grid_.local[2], 0, nullptr, args.data(), nullptr);
    if (r == CUDA_SUCCESS) r = d.event_record(end, nullptr);
    if (r == CUDA_SUCCESS) r = d.event_synchronize(end);
    if (r == CUDA_SUCCESS) r = d.event_elapsed(&ms, start, end);
    d.event_destroy(start);
    d.event_destroy(end);
    check(r, device_ + ": running kernel " + name_ + " (" + grid_.str() + ")");
    return ms;
  }

 private:
  std::string device_;
  CUcontext ctx_;
  CUmodule module_;
  CUfunction fn_;
  gpu::Grid grid_;
  std::string name_;
};

// A kernel compiled to PTX on a machine that cannot run it: kept so compile() has something to return.
class CompileOnlyProgram : public Program {
 public:
  explicit CompileOnlyProgram(std::string why) : why_(std::move(why)) {}
  double launch(const std::vector<Buffer*>&) override { throw std::runtime_error(why_); }

 private:
  std::string why_;
};

struct GpuInfo {
  CUdevice device = 0;
  int compute_capability = 75;  // major * 10 + minor
};

class CudaDevice : public Device {
 public:
  // `gpu` null: compile-only, for the reason `why_not`.
  CudaDevice(std::string name, const GpuInfo* gpu, std::string why_not)
      : name_(std::move(name)), why_not_(std::move(why_not)) {
    if (!gpu) return;
    gpu_ = *gpu;
    runnable_ = true;
    check(driver().primary_ctx_retain(&ctx_, gpu_.device), name_ + ": cuDevicePrimaryCtxRetain");
  }

  std::string name() const override { return name_; }
  const Renderer* renderer() const override { return &cuda_renderer(); }

  void* alloc(size_t bytes) override {
    if (!runnable_)
      throw std::runtime_error(name_ + " is compile-only on this machine (" + why_not_ +
                               "): its kernels render to CUDA C and compile to PTX, but cannot run; realize on a "
                               "device that can run instead (tensorscope-cli devices lists them)");
    enter();
    CUdeviceptr p = 0;
    check(driver().mem_alloc(&p, bytes), name_ + ": allocating " + std::to_string(bytes) + " bytes");
    return reinterpret_cast<void*>(p);
  }
  void free(void* handle, size_t) override {
    if (!runnable_) return;
    enter();
    driver().mem_free(reinterpret_cast<CUdeviceptr>(handle));
  }
  void copy_in(void* handle, const void* host, size_t bytes) override {
    enter();
    check(driver().copy_htod(reinterpret_cast<CUdeviceptr>(handle), host, bytes),
          name_ + ": copying " + std::to_string(bytes) + " bytes to the device");
  }
  void copy_out(void* host, const void* handle, size_t bytes) override {
    enter();
    check(driver().copy_dtoh(host, reinterpret_cast<CUdeviceptr>(handle), bytes),
          name_ + ": copying " + std::to_string(bytes) + " bytes from the device");
  }

  CompileResult compile(const ir::Kernel& kernel, const SourceListing* source) override {
    auto t0 = std::chrono::steady_clock::now();
    // PTX for the GPU's own architecture where there is one; compute_75 (the oldest NVRTC 13 accepts)
    // otherwise, which every newer GPU's driver can still load
    int arch = runnable_ ? std::max(75, gpu_.compute_capability) : 75;
    std::string ptx = compile_cuda_to_ptx(source->code, name_ + " kernel " + kernel.name, arch);
    CompileResult r;
    if (!runnable_) {
      r.program = std::make_unique<CompileOnlyProgram>(name_ + " is compile-only: " + why_not_);
    } else {
      enter();
      CUmodule module = nullptr;
      CUfunction fn = nullptr;
      check(driver().module_load_data(&module, ptx.c_str()), name_ + ": loading the PTX of kernel " + kernel.name);
      CUresult got = driver().module_function(&fn, module, kernel.name.c_str());
      if (got != CUDA_SUCCESS) driver().module_unload(module);
      check(got, name_ + ": finding kernel " + kernel.name + " in its module");
      r.program = std::make_unique<CudaProgram>(name_, ctx_, module, fn, cuda_renderer().grid(kernel), kernel.name);
    }
    r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

 private:
  // The driver's current context is per thread: make ours current on whichever thread calls.
  void enter() {
    if (!runnable_) throw std::runtime_error(name_ + " is compile-only: " + why_not_);
    check(driver().ctx_set_current(ctx_), name_ + ": cuCtxSetCurrent");
  }

  std::string name_;
  std::string why_not_;
  bool runnable_ = false;
  GpuInfo gpu_;
  CUcontext ctx_ = nullptr;
};

std::vector<DeviceRegistry::Offer> enumerate_cuda() {
  const Driver& d = driver();
  std::vector<DeviceRegistry::Offer> offers;
  std::string why_not = d.failure;
  int count = 0;
  if (why_not.empty()) {
    CUresult r = d.device_count(&count);
    if (r != CUDA_SUCCESS || count == 0) why_not = "the NVIDIA driver reports no GPU";
  }
  if (!why_not.empty()) {
    DeviceProperties p;
    p.name = "CUDA:0";
    p.backend = "CUDA";
    p.description = "no GPU: compiles to PTX only";
    p.vendor = "NVIDIA";
    p.driver = nvrtc_version();
    p.can_run = false;
    p.max_kernel_buffers = kMaxKernelBuffers;
    p.note = why_not;
    offers.push_back({p, [why_not] { return std::make_unique<CudaDevice>("CUDA:0", nullptr, why_not); }});
    return offers;
  }
  int version = 0;
  d.driver_version(&version);
  for (int i = 0; i < count; i++) {
    GpuInfo gpu;
    if (d.device_get(&gpu.device, i) != CUDA_SUCCESS) continue;
    auto attr = [&](CUdevice_attribute a) {
      int v = 0;
      d.device_attribute(&v, a, gpu.device);
      return v;
    };
    gpu.compute_capability = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) * 10 +
                             attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    char name[256] = {0};
    d.device_name(name, sizeof name, gpu.device);
    size_t memory = 0;
    d.device_memory(&memory, gpu.device);
    DeviceProperties p;
    p.name = "CUDA:" + std::to_string(offers.size());
    p.backend = "CUDA";
    p.description = name;
    p.vendor = "NVIDIA";
    p.driver = "CUDA driver " + std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10) + ", sm_" +
               std::to_string(gpu.compute_capability) + ", " + nvrtc_version();
    p.memory_bytes = memory;
    p.max_workgroup_size = static_cast<uint64_t>(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
    p.local_memory_bytes = static_cast<uint64_t>(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
    p.max_kernel_buffers = kMaxKernelBuffers;
    p.subgroup_size = static_cast<uint32_t>(attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE));
    if (gpu.compute_capability < 75) {
      p.can_run = false;
      p.note = "sm_" + std::to_string(gpu.compute_capability) + " is older than NVRTC's oldest target (sm_75)";
    }
    std::string dev_name = p.name;
    bool runnable = p.can_run;
    std::string note = p.note;
    offers.push_back({p, [dev_name, gpu, runnable, note] {
                        return std::make_unique<CudaDevice>(dev_name, runnable ? &gpu : nullptr, note);
                      }});
  }
  return offers;
}

const bool registered = DeviceRegistry::add_provider("CUDA", enumerate_cuda);

}  // namespace
}  // namespace ts
