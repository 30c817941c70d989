// C: the CPU device. Kernels are rendered to C, compiled by the system C compiler into a shared object
// and loaded with dlopen. Shared objects are cached on disk by a hash of (compiler command, source),
// so a second run of the same script compiles nothing.
//   cache directory: $TENSORSCOPE_CACHE, else $XDG_CACHE_HOME/tensorscope, else ~/.cache/tensorscope
//   compiler: $CC, else cc
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "c/c_renderer.h"
#include "runtime/host_memory.h"
#include "ts_math_source.h"
#include "runtime/thread_pool.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

fs::path cache_dir() {
  if (const char* d = std::getenv("TENSORSCOPE_CACHE"); d && *d) return fs::path(d) / "c";
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "tensorscope" / "c";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "tensorscope" / "c";
  return fs::temp_directory_path() / "tensorscope" / "c";
}

// Keeps <cache>/ts_math.h equal to the engine's (written atomically when missing or different).
void write_math_header(const fs::path& dir) {
  fs::path path = dir / "ts_math.h";
  std::ifstream in(path);
  std::string have((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (have == ts_math_source()) return;
  std::string tmp = path.string() + "." + std::to_string(getpid());
  { std::ofstream(tmp) << ts_math_source(); }
  std::error_code ec;
  fs::rename(tmp, path, ec);
}

using KernelFn = void (*)(void**, int, int);

// Work of a kernel in loop iterations (ALU and memory instructions times the trip counts of their
// loops): below kMinParallelWork, waking threads costs more than it saves.
constexpr double kMinParallelWork = 1 << 16;

struct ThreadPlan {
  int threads = 1;
};

ThreadPlan plan_threads(const ir::Kernel& k) {
  double work = 0, trips = 1;
  std::vector<double> stack;
  int64_t first_global = 0;
  for (const ir::Inst& in : k.insts) {
    if (in.op == ir::Op::Range) {
      double bound = k.insts[in.src[0]].value;
      if (in.arg && stack.empty() && first_global == 0) first_global = static_cast<int64_t>(bound);
      stack.push_back(bound);
      trips *= bound;
    } else if (in.op == ir::Op::EndRange) {
      trips /= stack.back();
      stack.pop_back();
    } else if (in.op != ir::Op::Const && in.op != ir::Op::DefineGlobal) {
      work += trips;
    }
  }
  ThreadPlan p;
  if (work >= kMinParallelWork && first_global > 1)
    p.threads = static_cast<int>(std::min<int64_t>(ThreadPool::get().size(), first_global));
  return p;
}

class CProgram : public Program {
 public:
  CProgram(void* handle, KernelFn fn, ThreadPlan plan) : handle_(handle), fn_(fn), plan_(plan) {}
  ~CProgram() override { dlclose(handle_); }
  double launch(const std::vector<Buffer*>& buffers) override {
    std::vector<void*> ptrs;
    ptrs.reserve(buffers.size());
    for (Buffer* b : buffers) ptrs.push_back(b->handle);
    auto t0 = std::chrono::steady_clock::now();
    if (plan_.threads == 1) {
      fn_(ptrs.data(), 0, 1);
    } else {
      int n = plan_.threads;
      ThreadPool::get().parallel_for(n, [&](int core) { fn_(ptrs.data(), core, n); });
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  void* handle_;
  KernelFn fn_;
  ThreadPlan plan_;
};

class CDevice : public Device {
 public:
  std::string name() const override { return "C"; }
  void* alloc(size_t bytes) override { return host_alloc(bytes); }
  void free(void* h, size_t) override { host_free(h); }
  void copy_in(void* h, const void* host, size_t bytes) override { std::memcpy(h, host, bytes); }
  void copy_out(void* host, const void* h, size_t bytes) override { std::memcpy(host, h, bytes); }
  const Renderer* renderer() const override { return &c_renderer(); }

  CompileResult compile(const ir::Kernel& kernel, const SourceListing* source) override {
    const char* cc_env = std::getenv("CC");
    std::string cc = cc_env && *cc_env ? cc_env : "cc";
    // -ffp-contract=off: no FMA contraction, so results match the interpreter bit for bit
    // -O3 vectorizes (-O2 in gcc 12 does not); 512-bit vectors: AVX-512 runs at full width on this CPU
    std::string flags = "-O3 -march=native -mprefer-vector-width=512 -fPIC -shared -fno-math-errno -ffp-contract=off";
    fs::path dir = cache_dir();
    std::ostringstream hash;
    // generated kernels include ts_math.h from the cache directory; its text is part of the hash
    hash << std::hex << fnv1a(cc + " " + flags + "\n" + ts_math_source() + "\n" + source->code);
    fs::path so = dir / (kernel.name + "_" + hash.str() + ".so");
    CompileResult result;
    if (fs::exists(so)) {
      result.cache_hit = true;
    } else {
      auto t0 = std::chrono::steady_clock::now();
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (ec) throw std::runtime_error("C device: cannot create cache directory " + dir.string() + ": " + ec.message());
      // unique temporaries, then an atomic rename: concurrent runs never see a half-written file
      std::string tmp = (dir / (hash.str() + "." + std::to_string(getpid()))).string();
      { std::ofstream(tmp + ".c") << source->code; }
      write_math_header(dir);
      std::string cmd = cc + " " + flags + " -I" + dir.string() + " -o " + tmp + ".so " + tmp + ".c -lm 2> " + tmp + ".err";
      int rc = std::system(cmd.c_str());
      if (rc != 0) {
        std::ifstream err(tmp + ".err");
        std::string msg((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
        fs::remove(tmp + ".c", ec);
        fs::remove(tmp + ".err", ec);
        throw std::runtime_error("C device: compiling kernel " + kernel.name + " failed (" + cmd + "):\n" + msg);
      }
      fs::rename(tmp + ".so", so, ec);
      fs::remove(tmp + ".c", ec);
      fs::remove(tmp + ".err", ec);
      result.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) throw std::runtime_error(std::string("C device: dlopen failed: ") + dlerror());
    auto fn = reinterpret_cast<KernelFn>(dlsym(handle, kernel.name.c_str()));
    if (!fn) {
      dlclose(handle);
      throw std::runtime_error("C device: symbol " + kernel.name + " missing in " + so.string());
    }
    result.program = std::make_unique<CProgram>(handle, fn, plan_threads(kernel));
    return result;
  }
};

const bool registered = DeviceRegistry::add("C", [] { return std::make_unique<CDevice>(); });

}  // namespace
}  // namespace ts
