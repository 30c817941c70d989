// Devices and renderers: the boundary between the engine and its backends.
//
// A backend registers a Device (memory, compile, launch) and, for compiled targets, a Renderer
// (IR → source). The engine never includes a backend; it finds devices by name in the DeviceRegistry.
// Device names follow tinygrad: "C" (CPU via the system C compiler), "INTERP" (the IR interpreter);
// "OPENCL:0", "VULKAN:0", "CUDA:0", ... — one per device the OpenCL, Vulkan and CUDA drivers report.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorscope/dtype.h"
#include "tensorscope/ir.h"
#include "tensorscope/session.h"

namespace ts {

class Device;

// Device memory holding `numel` elements of `dtype`. Freed (returned to the device) on destruction.
struct Buffer {
  Device* device = nullptr;
  int device_index = 0;
  DType dtype = DType::Float32;
  int64_t numel = 0;
  void* handle = nullptr;  // host pointer for CPU devices; an opaque handle otherwise
  size_t nbytes() const { return static_cast<size_t>(numel) * dtype_size(dtype); }
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
};

// Turns kernel IR into source text for one target language, with the IR-op → line map.
class Renderer {
 public:
  virtual ~Renderer() = default;
  virtual std::string language() const = 0;  // "C", "OpenCL C", ...
  virtual SourceListing render(const ir::Kernel& kernel) const = 0;
};

// A compiled kernel, ready to launch.
class Program {
 public:
  virtual ~Program() = default;
  // Runs the kernel on `buffers` (in ir::Kernel::globals order) and waits for it to finish, so the output
  // can be copied out right away. Returns the kernel time in ms (device timers where the device has them:
  // OpenCL profiling events, Vulkan timestamp queries, CUDA events).
  virtual double launch(const std::vector<Buffer*>& buffers) = 0;
  // An estimate of launch()'s time in ms from running one part of the kernel once: the first 1/`parts` of
  // its outermost loop's rows, on one thread, scaled up. For the autotune search, which drops a candidate
  // that is far slower than the best without waiting for a whole launch (a launch cannot be interrupted:
  // a naive 2048² matmul runs for seconds). Writes that part of the output. nullopt where the device
  // cannot run a part of a kernel (the default) or the kernel has fewer than `parts` rows to split.
  virtual std::optional<double> estimate_launch_ms(const std::vector<Buffer*>& buffers, int parts) {
    (void)buffers;
    (void)parts;
    return std::nullopt;
  }
};

struct CompileResult {
  std::unique_ptr<Program> program;
  bool cache_hit = false;
  double compile_ms = 0;
};

// A compile stopped because it took longer than compile_time_limit_ms() (the autotune search's
// per-candidate timeout, TENSORSCOPE_BEAM_TIMEOUT_MS).
class CompileTimeoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A time limit for Device::compile calls made on this thread, in ms; 0 (the default) is none. The autotune
// search sets one around each candidate's compile. A backend that compiles in a subprocess (C: the system
// compiler) stops the compiler past it and throws CompileTimeoutError; a compiler that runs in-process
// (PoCL, glslang, NVRTC) cannot be stopped and ignores it: the search drops such a candidate afterwards.
double compile_time_limit_ms();
class ScopedCompileLimit {
 public:
  explicit ScopedCompileLimit(double ms);
  ~ScopedCompileLimit();
  ScopedCompileLimit(const ScopedCompileLimit&) = delete;
  ScopedCompileLimit& operator=(const ScopedCompileLimit&) = delete;

 private:
  double previous_;
};

class Device {
 public:
  virtual ~Device() = default;
  // Whether compile() may be called from several threads at once (the autotune search compiles its
  // candidates in parallel on such devices). Only what a backend has checked says true.
  virtual bool concurrent_compiles() const { return false; }
  virtual std::string name() const = 0;
  // Memory. alloc throws std::runtime_error when the device cannot run (a compile-only device, e.g. CUDA
  // without a GPU): realizing anything there needs a buffer, so this is where the user hears why.
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* handle, size_t bytes) = 0;
  virtual void copy_in(void* handle, const void* host, size_t bytes) = 0;   // host → device
  virtual void copy_out(void* host, const void* handle, size_t bytes) = 0;  // device → host
  // The renderer whose source this device compiles; nullptr for INTERP.
  virtual const Renderer* renderer() const = 0;
  // The actions this device takes when it launches `kernel` rather than in its source, decided from
  // kernel.plan and appended to kernel.opts: THREADS on C (how many threads run the outermost global loop;
  // the source is the same for every count). Called after the passes and before rendering and compile(), so
  // the kernel's IR header, kernels.json and the properties panel list what the device does, and the caches
  // that key programs by their source (the engine's program cache, the autotuner's dedup) key them by the
  // applied actions too. Devices without such actions ignore the plan's (the default does nothing).
  virtual void plan_launch(ir::Kernel& kernel) const { (void)kernel; }
  // Compiles `source` (rendered by renderer()) or, for INTERP, keeps the IR. Throws std::runtime_error
  // with the compiler's message on failure. Launch actions are those plan_launch recorded in kernel.opts (or,
  // when it was not called, the ones it would record).
  virtual CompileResult compile(const ir::Kernel& kernel, const SourceListing* source) = 0;
  // Prepares the compile() calls a schedule is about to make, all at once: `kernels` after plan_launch and
  // their `sources` (rendered by renderer(), same length). The C device compiles those its cache lacks in one
  // compiler run, so that compile() then loads them from the cache. Raises nothing: what fails here is left to
  // compile(), which reports it. The default does nothing.
  virtual void precompile(const std::vector<ir::Kernel>& kernels, const std::vector<SourceListing>& sources) {
    (void)kernels;
    (void)sources;
  }
};

// What a device is and what it can do, as the driver reports it (for `tensorscope-cli devices`, the GUI's
// device picker and the tests). Sizes are in bytes; 0 means "not reported".
struct DeviceProperties {
  std::string name;                 // registry name: "C", "INTERP", "OPENCL:0", "VULKAN:0", "CUDA:0"
  std::string backend;              // "C", "INTERP", "OPENCL", "VULKAN", "CUDA"
  std::string description;          // the driver's device name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string vendor;               // e.g. "Mesa", "NVIDIA Corporation"
  std::string driver;               // driver / platform version text
  uint64_t memory_bytes = 0;        // global (device) memory
  uint64_t max_workgroup_size = 0;  // threads per workgroup (OpenCL work-group, CUDA block)
  uint64_t local_memory_bytes = 0;  // shared / local memory per workgroup
  uint32_t subgroup_size = 0;       // SIMD width: warp, wavefront, subgroup
  // The most buffers one kernel may take (Vulkan: maxPerStageDescriptorStorageBuffers; OpenCL: the kernel
  // argument bytes over a pointer's; CUDA: the 4 KiB of kernel parameters over a pointer's); 0: no limit
  // (C, INTERP). The kernelizer's multi-output kernels grow no larger (schedule.h, rule 6).
  uint32_t max_kernel_buffers = 0;
  bool can_run = true;              // false: compile-only (renders and compiles kernels, cannot launch them)
  bool float16 = true;              // float16 buffers and kernels (2-byte storage, float32 arithmetic)
  // C and INTERP: the host CPU's vector registers (bytes each, and how many), which the passes size upcasts
  // and register tiles to (ir::Target); 0 elsewhere (the passes' defaults). TENSORSCOPE_VECTOR_BYTES=16, 32
  // or 64 (set before the first device is used) overrides the detection, to see another CPU's kernels here.
  uint32_t vector_bytes = 0;
  uint32_t vector_registers = 0;
  std::string note;                 // why it is compile-only, or anything else the user should know
};

// A device that stopped working in the middle of a run: a GPU reset or removed, a driver that crashed
// (VK_ERROR_DEVICE_LOST, CL_DEVICE_NOT_AVAILABLE, a sticky CUDA error such as CUDA_ERROR_ILLEGAL_ADDRESS).
// A backend throws it from alloc, copy_in/copy_out or launch; the engine then marks the device lost
// (DeviceRegistry::mark_lost) and from then on every allocation, copy and launch there throws
// DeviceLostError at once with the first reason, while the other devices keep working. The device's buffers
// are gone: tensors realized there cannot be read back. Python sees a RuntimeError. what() reads
// "device VULKAN:0 was lost (VK_ERROR_DEVICE_LOST in vkWaitForFences after kernel r_4_4): its buffers are
// gone; tensors realized on it cannot be read. Run on another device (e.g. TENSORSCOPE_DEVICE=C)".
class DeviceLostError : public std::runtime_error {
 public:
  // `device`: its registry name ("VULKAN:0"); `reason`: what the driver said, where.
  DeviceLostError(const std::string& device, const std::string& reason);
  const std::string& device() const { return device_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string device_, reason_;
};

class DeviceRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Device>()>;
  struct Offer {
    DeviceProperties properties;
    Factory factory;
  };
  // Enumerates the devices of one backend (e.g. every OpenCL device behind the ICD loader). Called at most
  // once, on the first registry query that needs that backend, so that loading the library stays fast.
  using Provider = std::function<std::vector<Offer>()>;

  // Called by backends from static initializers. add() registers one device (properties default to the
  // host CPU's); add_provider() registers a backend whose devices are enumerated lazily.
  static bool add(const std::string& name, Factory factory);
  static bool add_provider(const std::string& backend, Provider provider);
  // Index of a device by name: case-insensitive; "C:0" == "C", and a backend name alone means its first
  // device ("opencl" == "OPENCL:0"). The device object is created on first use.
  // Throws std::invalid_argument listing the known devices when the name is unknown.
  static int index(const std::string& name);
  static Device& at(int index);
  // Every device, in a stable order: C, INTERP, then each backend's devices in registration order.
  static std::vector<std::string> names();
  // Properties of a device, without creating it; list() gives every device's, in names() order.
  static DeviceProperties properties(int index);
  static std::vector<DeviceProperties> list();
  // Default device: TENSORSCOPE_DEVICE from the environment, else "C".
  static int default_index();
  static void set_default(const std::string& name);
  // Every renderer any backend offers (to show a kernel in every language, whatever device ran it).
  static std::vector<const Renderer*> renderers();
  static bool add_renderer(const Renderer* renderer);
  // A lost device (DeviceLostError): mark_lost keeps the first reason; lost_reason is "" while it works;
  // require_not_lost throws DeviceLostError with that reason once it is lost.
  static void mark_lost(int index, const std::string& reason);
  static std::string lost_reason(int index);
  static void require_not_lost(int index);
};

// Runs `work` (an allocation, copy or launch on device `device_index`) and returns what it returns.
// Throws DeviceLostError without running it when the device was lost before, and marks the device lost
// when `work` throws DeviceLostError. Every engine call into a device goes through it.
template <class Work>
decltype(auto) on_device(int device_index, Work&& work) {
  DeviceRegistry::require_not_lost(device_index);
  try {
    return work();
  } catch (const DeviceLostError& e) {
    DeviceRegistry::mark_lost(device_index, e.reason());
    throw;
  }
}

// The engine's calls into a device, each through on_device: a whole buffer (nbytes() bytes) to or from
// host memory, and a launch on the device of buffers[0] (the output; returns the kernel time in ms).
void read_buffer(const Buffer& buffer, void* host);
void write_buffer(Buffer& buffer, const void* host);
double launch_on_device(Program& program, const std::vector<Buffer*>& buffers);

// Throws std::runtime_error ("float16 is not supported on device VULKAN:0 ...") when the device cannot
// hold `dtype` (DeviceProperties::float16); graph construction and allocation call it.
void require_dtype(int device_index, DType dtype);
// A buffer that cannot be allocated: more bytes than the device has (checked before asking, against
// DeviceProperties::memory_bytes: physical memory for C and INTERP), or the device's allocator failed
// (std::bad_alloc). what() names shape, dtype, bytes and device, e.g. "Tensor of shape (1048576, 1048576)
// float32 needs 4.0 TiB; device C has 23.4 GiB". A std::bad_alloc, so Python sees MemoryError.
class OutOfMemoryError : public std::bad_alloc {
 public:
  explicit OutOfMemoryError(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// "512 B", "3.0 KiB", "4.0 TiB": a byte count for messages (binary units).
std::string format_bytes(double bytes);

// Throws as require_dtype, OutOfMemoryError, or std::runtime_error from the device (e.g. a compile-only
// one). `shape` (optional, numel elements) is only used to name the tensor in OutOfMemoryError.
std::shared_ptr<Buffer> allocate_buffer(int device_index, DType dtype, int64_t numel,
                                        const std::vector<int64_t>* shape = nullptr);

}  // namespace ts
