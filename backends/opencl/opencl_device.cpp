// OPENCL:n — every device behind the OpenCL ICD loader (PoCL on this CPU; any GPU driver elsewhere).
//
// The four pieces of a device runtime, as in tinygrad: allocator (cl_mem buffers), compiler
// (clBuildProgram of the OpenCL C source), program (a cl_kernel launched over an NDRange) and the device
// (context + one in-order command queue with profiling on, so each launch's kernel time comes from the
// event's START/END timestamps). Every call waits for completion: a launch's output can be copied out
// right away, and buffers are freed only when no command still uses them.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <chrono>
#include <optional>
#include <stdexcept>

#include "gpu_cache.h"
#include "gpu_launch.h"
#include "opencl/opencl_renderer.h"
#include "tensorscope/device.h"

namespace ts {
namespace {

const char* cl_error_name(cl_int e) {
  switch (e) {
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_COMPILER_NOT_AVAILABLE: return "CL_COMPILER_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_PLATFORM: return "CL_INVALID_PLATFORM";
    case CL_INVALID_DEVICE: return "CL_INVALID_DEVICE";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_KERNEL_NAME: return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_GLOBAL_WORK_SIZE: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL driver installed: try pocl-opencl-icd)";
    default: return "OpenCL error";
  }
}

void check(cl_int err, const std::string& what) {
  if (err != CL_SUCCESS)
    throw std::runtime_error(what + " failed: " + cl_error_name(err) + " (" + std::to_string(err) + ")");
}

std::string device_string(cl_device_id dev, cl_device_info param) {
  size_t n = 0;
  if (clGetDeviceInfo(dev, param, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  clGetDeviceInfo(dev, param, n, s.data(), nullptr);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

template <typename T>
T device_value(cl_device_id dev, cl_device_info param) {
  T v{};
  if (clGetDeviceInfo(dev, param, sizeof v, &v, nullptr) != CL_SUCCESS) return T{};
  return v;
}

class OpenCLProgram : public Program {
 public:
  OpenCLProgram(std::string device, cl_command_queue queue, cl_program program, cl_kernel kernel, gpu::Grid grid,
                std::string name)
      : device_(std::move(device)), queue_(queue), program_(program), kernel_(kernel), grid_(grid), name_(std::move(name)) {}
  ~OpenCLProgram() override {
    clReleaseKernel(kernel_);
    clReleaseProgram(program_);
  }

  double launch(const std::vector<Buffer*>& buffers) override {
    for (size_t i = 0; i < buffers.size(); i++) {
      cl_mem mem = static_cast<cl_mem>(buffers[i]->handle);
      check(clSetKernelArg(kernel_, static_cast<cl_uint>(i), sizeof mem, &mem),
            "OpenCL: setting argument " + std::to_string(i) + " of kernel " + name_);
    }
    size_t global[3], local[3];
    for (int d = 0; d < 3; d++) global[d] = grid_.global(d), local[d] = grid_.local[d];
    cl_event done = nullptr;
    check(clEnqueueNDRangeKernel(queue_, kernel_, grid_.dims, nullptr, global, local, 0, nullptr, &done),
          "OpenCL: launching kernel " + name_ + " (" + grid_.str() + ")");
    cl_int err = clWaitForEvents(1, &done);
    cl_ulong start = 0, end = 0;
    clGetEventProfilingInfo(done, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
    clGetEventProfilingInfo(done, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
    clReleaseEvent(done);
    if (err == CL_DEVICE_NOT_AVAILABLE) throw DeviceLostError(device_, "CL_DEVICE_NOT_AVAILABLE after kernel " + name_);
    check(err, "OpenCL: running kernel " + name_);
    return static_cast<double>(end - start) * 1e-6;  // ns → ms
  }

 private:
  std::string device_;
  cl_command_queue queue_;
  cl_program program_;
  cl_kernel kernel_;
  gpu::Grid grid_;
  std::string name_;
};

class OpenCLDevice : public Device {
 public:
  OpenCLDevice(std::string name, cl_device_id device) : name_(std::move(name)), device_(device) {
    cl_int err = CL_SUCCESS;
    context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
    check(err, name_ + ": clCreateContext");
    queue_ = clCreateCommandQueue(context_, device_, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) clReleaseContext(context_);
    check(err, name_ + ": clCreateCommandQueue");
    identity_ = device_string(device_, CL_DEVICE_NAME) + "\n" + device_string(device_, CL_DEVICE_VERSION) + "\n" +
                device_string(device_, CL_DRIVER_VERSION);
  }
  ~OpenCLDevice() override {
    clReleaseCommandQueue(queue_);
    clReleaseContext(context_);
  }

  std::string name() const override { return name_; }
  const Renderer* renderer() const override { return &opencl_renderer(); }

  void* alloc(size_t bytes) override {
    cl_int err = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &err);
    check(err, name_ + ": allocating " + std::to_string(bytes) + " bytes");
    return mem;
  }
  void free(void* handle, size_t) override { clReleaseMemObject(static_cast<cl_mem>(handle)); }
  void copy_in(void* handle, const void* host, size_t bytes) override {
    check(clEnqueueWriteBuffer(queue_, static_cast<cl_mem>(handle), CL_TRUE, 0, bytes, host, 0, nullptr, nullptr),
          name_ + ": copying " + std::to_string(bytes) + " bytes to the device");
  }
  void copy_out(void* host, const void* handle, size_t bytes) override {
    cl_mem mem = static_cast<cl_mem>(const_cast<void*>(handle));
    check(clEnqueueReadBuffer(queue_, mem, CL_TRUE, 0, bytes, host, 0, nullptr, nullptr),
          name_ + ": copying " + std::to_string(bytes) + " bytes from the device");
  }

  // Builds the program, from the binary in the on-disk cache when this device built the same source
  // before: PoCL preprocesses the source even on its own cache hits (~0.1 s), a binary loads in ~ms.
  CompileResult compile(const ir::Kernel& kernel, const SourceListing* source) override {
    auto t0 = std::chrono::steady_clock::now();
    CompileResult r;
    std::string file = cache_.path(kernel.name, identity_ + "\n" + kBuildOptions + "\n" + source->code);
    cl_program program = nullptr;
    if (std::optional<std::string> binary = cache_.read(file)) {
      program = build_from_binary(*binary);  // null when the driver no longer accepts it
      r.cache_hit = program != nullptr;
    }
    if (!program) {
      program = build_from_source(kernel, source->code);
      if (std::optional<std::string> binary = program_binary(program)) cache_.write(file, *binary);
    }
    cl_int err = CL_SUCCESS;
    cl_kernel k = clCreateKernel(program, kernel.name.c_str(), &err);
    if (err != CL_SUCCESS) clReleaseProgram(program);
    check(err, name_ + ": clCreateKernel(" + kernel.name + ")");
    // the kernel may allow fewer threads per workgroup than the device (registers, local memory)
    gpu::Grid grid = opencl_renderer().grid(kernel);
    size_t kernel_max = 0;
    clGetKernelWorkGroupInfo(k, device_, CL_KERNEL_WORK_GROUP_SIZE, sizeof kernel_max, &kernel_max, nullptr);
    size_t threads = size_t{grid.local[0]} * grid.local[1] * grid.local[2];
    if (kernel_max && threads > kernel_max) {
      clReleaseKernel(k);
      clReleaseProgram(program);
      throw std::runtime_error(name_ + ": kernel " + kernel.name + " needs workgroups of " + std::to_string(threads) +
                               " threads; this device allows " + std::to_string(kernel_max));
    }
    r.program = std::make_unique<OpenCLProgram>(name_, queue_, program, k, grid, kernel.name);
    r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

 private:
  static constexpr const char* kBuildOptions = "-cl-std=CL1.2";

  cl_program build_from_source(const ir::Kernel& kernel, const std::string& code) {
    const char* text = code.c_str();
    cl_int err = CL_SUCCESS;
    cl_program program = clCreateProgramWithSource(context_, 1, &text, nullptr, &err);
    check(err, name_ + ": clCreateProgramWithSource");
    err = clBuildProgram(program, 1, &device_, kBuildOptions, nullptr, nullptr);
    if (err != CL_SUCCESS) {
      std::string log = build_log(program);
      clReleaseProgram(program);
      throw std::runtime_error(name_ + ": building kernel " + kernel.name + " failed (" + cl_error_name(err) +
                               "):\n" + log + "\nsource:\n" + code);
    }
    return program;
  }

  cl_program build_from_binary(const std::string& binary) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(binary.data());
    size_t size = binary.size();
    cl_int status = CL_SUCCESS, err = CL_SUCCESS;
    cl_program program = clCreateProgramWithBinary(context_, 1, &device_, &size, &bytes, &status, &err);
    if (err != CL_SUCCESS || status != CL_SUCCESS) return nullptr;
    if (clBuildProgram(program, 1, &device_, kBuildOptions, nullptr, nullptr) != CL_SUCCESS) {
      clReleaseProgram(program);
      return nullptr;
    }
    return program;
  }

  std::optional<std::string> program_binary(cl_program program) const {
    size_t size = 0;
    if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS || size == 0)
      return std::nullopt;
    std::string binary(size, '\0');
    unsigned char* ptr = reinterpret_cast<unsigned char*>(binary.data());
    if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS) return std::nullopt;
    return binary;
  }

  std::string build_log(cl_program program) const {
    size_t n = 0;
    clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    return log;
  }

  std::string name_;
  cl_device_id device_;
  std::string identity_;  // what decides a binary: device, its OpenCL version, the driver's version
  gpu::ProgramCache cache_{"opencl"};
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
};

// Vendor extensions that report the SIMD width (OpenCL 1.2 itself has no query for it).
constexpr cl_device_info kWarpSizeNV = 0x4003;         // cl_nv_device_attribute_query
constexpr cl_device_info kWavefrontWidthAMD = 0x4043;  // cl_amd_device_attribute_query

std::vector<DeviceRegistry::Offer> enumerate_opencl() {
  cl_uint num_platforms = 0;
  cl_int err = clGetPlatformIDs(0, nullptr, &num_platforms);
  if (err != CL_SUCCESS || num_platforms == 0)
    throw std::runtime_error(std::string("no OpenCL platform found (") + cl_error_name(err) +
                             "): install an OpenCL driver, e.g. pocl-opencl-icd");
  std::vector<cl_platform_id> platforms(num_platforms);
  clGetPlatformIDs(num_platforms, platforms.data(), nullptr);
  std::vector<DeviceRegistry::Offer> offers;
  for (cl_platform_id platform : platforms) {
    cl_uint n = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) continue;
    std::vector<cl_device_id> devices(n);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, devices.data(), nullptr);
    for (cl_device_id dev : devices) {
      DeviceProperties p;
      p.name = "OPENCL:" + std::to_string(offers.size());
      p.backend = "OPENCL";
      p.description = device_string(dev, CL_DEVICE_NAME);
      p.vendor = device_string(dev, CL_DEVICE_VENDOR);
      p.driver = device_string(dev, CL_DEVICE_VERSION) + ", driver " + device_string(dev, CL_DRIVER_VERSION);
      p.memory_bytes = device_value<cl_ulong>(dev, CL_DEVICE_GLOBAL_MEM_SIZE);
      p.max_workgroup_size = device_value<size_t>(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      p.local_memory_bytes = device_value<cl_ulong>(dev, CL_DEVICE_LOCAL_MEM_SIZE);
      p.max_kernel_buffers = static_cast<uint32_t>(device_value<size_t>(dev, CL_DEVICE_MAX_PARAMETER_SIZE) / sizeof(cl_mem));
      std::string ext = device_string(dev, CL_DEVICE_EXTENSIONS);
      if (ext.find("cl_nv_device_attribute_query") != std::string::npos)
        p.subgroup_size = device_value<cl_uint>(dev, kWarpSizeNV);
      else if (ext.find("cl_amd_device_attribute_query") != std::string::npos)
        p.subgroup_size = device_value<cl_uint>(dev, kWavefrontWidthAMD);
      if (!device_value<cl_bool>(dev, CL_DEVICE_COMPILER_AVAILABLE)) {
        p.can_run = false;
        p.note = "the driver has no OpenCL C compiler";
      }
      std::string name = p.name;
      offers.push_back({p, [name, dev] { return std::make_unique<OpenCLDevice>(name, dev); }});
    }
  }
  return offers;
}

const bool registered = DeviceRegistry::add_provider("OPENCL", enumerate_opencl);

}  // namespace
}  // namespace ts
