#include "cuda/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <cctype>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "cuda/cuda_renderer.h"
#include "gpu_cache.h"

namespace ts {

namespace {

// The NVRTC entry points we use, looked up by name in the dlopened library.
struct Nvrtc {
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcCreateProgram) create = nullptr;
  decltype(&::nvrtcCompileProgram) compile = nullptr;
  decltype(&::nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&::nvrtcGetProgramLog) log = nullptr;
  decltype(&::nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&::nvrtcGetPTX) ptx = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy = nullptr;
  decltype(&::nvrtcGetErrorString) error_string = nullptr;
  std::string failure;  // why loading failed; empty when loaded
};

const Nvrtc& nvrtc() {
  static const Nvrtc lib = [] {
    Nvrtc n;
    // the soname first (a CUDA install on the loader path), then the library CMake found at build time
    const char* candidates[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
#ifdef TENSORSCOPE_NVRTC_LIBRARY
                                TENSORSCOPE_NVRTC_LIBRARY
#endif
    };
    void* h = nullptr;
    for (const char* c : candidates)
      if ((h = dlopen(c, RTLD_NOW | RTLD_LOCAL))) break;
    if (!h) {
      n.failure = "NVRTC (libnvrtc.so) not found: install the CUDA toolkit or add its lib directory to LD_LIBRARY_PATH";
      return n;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && n.failure.empty()) n.failure = std::string("NVRTC lacks ") + name;
    };
    sym(n.version, "nvrtcVersion");
    sym(n.create, "nvrtcCreateProgram");
    sym(n.compile, "nvrtcCompileProgram");
    sym(n.log_size, "nvrtcGetProgramLogSize");
    sym(n.log, "nvrtcGetProgramLog");
    sym(n.ptx_size, "nvrtcGetPTXSize");
    sym(n.ptx, "nvrtcGetPTX");
    sym(n.destroy, "nvrtcDestroyProgram");
    sym(n.error_string, "nvrtcGetErrorString");
    return n;
  }();
  return lib;
}

}  // namespace

std::string nvrtc_version() {
  const Nvrtc& n = nvrtc();
  if (!n.failure.empty()) return n.failure;
  int major = 0, minor = 0;
  n.version(&major, &minor);
  return "NVRTC " + std::to_string(major) + "." + std::to_string(minor);
}

std::string compile_cuda_to_ptx(const std::string& source, const std::string& what, int arch, bool line_info) {
  const Nvrtc& n = nvrtc();
  if (!n.failure.empty()) throw std::runtime_error("CUDA C → PTX: " + what + ": " + n.failure);
  nvrtcProgram prog = nullptr;
  nvrtcResult r = n.create(&prog, source.c_str(), "kernel.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) throw std::runtime_error("CUDA C → PTX: " + what + ": " + n.error_string(r));
  std::string arch_flag = "--gpu-architecture=compute_" + std::to_string(arch);
  std::vector<const char*> options = {arch_flag.c_str(), "--fmad=false"};  // no FMA: results match the interpreter
  if (line_info) options.push_back("--generate-line-info");
  r = n.compile(prog, static_cast<int>(options.size()), options.data());
  size_t size = 0;
  n.log_size(prog, &size);
  std::string log(size, '\0');
  if (size) n.log(prog, log.data());
  if (r != NVRTC_SUCCESS) {
    n.destroy(&prog);
    throw std::runtime_error("CUDA C → PTX: " + what + " does not compile (" + n.error_string(r) + "):\n" + log +
                             "\nsource:\n" + source);
  }
  n.ptx_size(prog, &size);
  std::string ptx(size, '\0');
  n.ptx(prog, ptx.data());
  n.destroy(&prog);
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

SourceListing PTXRenderer::render(const ir::Kernel& kernel) const {
  SourceListing cuda = cuda_renderer().render(kernel);
  SourceListing out;
  out.renderer = language();
  out.ir_op_line.assign(kernel.insts.size(), 0);
  try {
    // NVRTC takes ~50 ms a kernel, and every observed kernel is shown in PTX: keep the listings on disk
    static const gpu::ProgramCache listings("ptx");
    const std::string path = listings.path(kernel.name, "sm_75 line-info\n" + nvrtc_version() + "\n" + cuda.code);
    if (auto hit = listings.read(path)) {
      out.code = std::move(*hit);
    } else {
      out.code = compile_cuda_to_ptx(cuda.code, "kernel " + kernel.name, 75, /*line_info=*/true);
      listings.write(path, out.code);
    }
  } catch (const std::exception& e) {
    out.code = std::string("// ") + e.what() + "\n";
    return out;
  }
  // `.loc <file> <line> <column>` says which CUDA C line the PTX lines after it come from
  std::istringstream lines(out.code);
  std::vector<int> cuda_line_of;  // per PTX line (0-based)
  int current = 0;
  for (std::string l; std::getline(lines, l);) {
    size_t p = l.find_first_not_of(" \t");
    bool is_loc = p != std::string::npos && l.compare(p, 4, ".loc") == 0 && p + 4 < l.size() &&
                  std::isspace(static_cast<unsigned char>(l[p + 4]));
    if (is_loc) {
      std::istringstream f(l.substr(p + 5));
      int file = 0, line = 0;
      if (f >> file >> line) current = line;
      cuda_line_of.push_back(0);  // the directive itself maps to nothing
    } else {
      cuda_line_of.push_back(current);
    }
  }
  // the first PTX line of each CUDA C line (one pass: big kernels have tens of thousands of PTX lines)
  std::unordered_map<int, int> first_ptx_line;
  for (size_t i = 0; i < cuda_line_of.size(); i++) first_ptx_line.emplace(cuda_line_of[i], static_cast<int>(i + 1));
  for (size_t op = 0; op < kernel.insts.size(); op++) {
    int want = cuda.ir_op_line[op];
    if (want == 0) continue;
    if (auto it = first_ptx_line.find(want); it != first_ptx_line.end()) out.ir_op_line[op] = it->second;
  }
  return out;
}

static const PTXRenderer ptx_renderer;
static const bool registered = DeviceRegistry::add_renderer(&ptx_renderer);

}  // namespace ts
