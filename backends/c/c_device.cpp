// C: the CPU device. Kernels are rendered to C, compiled by the system C compiler into a shared object
// and loaded with dlopen. Shared objects are cached on disk by a hash of (compiler command, what
// -march=native means on this CPU, source), so a second run of the same script compiles nothing.
//   cache directory: $TENSORSCOPE_CACHE, else $XDG_CACHE_HOME/tensorscope, else ~/.cache/tensorscope
//   compiler: $TENSORSCOPE_CC, else $CC, else cc (a command: "ccache gcc" works)
// The cache is shared safely: files appear by rename (never half written), an entry that cannot be
// loaded (truncated, damaged) is compiled again with one warning on stderr, a cache directory carried
// to a different CPU misses instead of loading instructions that CPU lacks, and a cache directory that cannot
// be written (read-only, a path through a file) is replaced, with one warning, by a private directory under
// /tmp for the rest of the process.
#include <dlfcn.h>
#include <elf.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "c/c_renderer.h"
#include "opt/pass_manager.h"
#include "runtime/cache_file.h"
#include "runtime/host_memory.h"
#include "ts_math_source.h"
#include "runtime/thread_pool.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

// The compiler command and the variable it came from (for error messages).
std::pair<std::string, std::string> compiler() {
  if (const char* cc = std::getenv("TENSORSCOPE_CC"); cc && *cc) return {cc, "$TENSORSCOPE_CC"};
  if (const char* cc = std::getenv("CC"); cc && *cc) return {cc, "$CC"};
  return {"cc", "the default"};
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command; returns (exit status, stdout and stderr together).
std::pair<int, std::string> run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// What the compiler makes of -march=native on this CPU: `cc -march=native -### -E -` prints the command
// line of the compiler proper with the CPU's name and every -m feature flag (gcc and clang both), plus the
// compiler's version. It is part of the cache key, so a cache directory carried to a CPU of another model
// (AMD Zen 5 and Intel Sapphire Rapids both run this project) misses instead of dying of SIGILL. Asked
// once per process and compiler. Throws std::runtime_error naming the compiler when it cannot be run.
const std::string& native_target(const std::string& cc, const std::string& origin) {
  static std::mutex mu;
  static std::map<std::string, std::string> known;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(cc); it != known.end()) return it->second;
  auto [status, out] = run_command(cc + " -march=native -### -E - < /dev/null");
  if (status == 126 || status == 127)
    throw std::runtime_error("C device: cannot run the C compiler '" + cc + "' (" + origin + "): " + out +
                             "install gcc or clang, or set TENSORSCOPE_CC (or CC) to a C compiler command");
  return known.emplace(cc, out).first->second;
}

fs::path cache_dir() {
  if (const char* d = std::getenv("TENSORSCOPE_CACHE"); d && *d) return fs::path(d) / "c";
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "tensorscope" / "c";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "tensorscope" / "c";
  return fs::temp_directory_path() / "tensorscope" / "c";
}

// cache_dir(), created, when it can be written; otherwise (once per process and directory, with one warning
// on stderr) a private directory under the system's temporary directory, removed by nobody but the OS: a
// user whose home is read-only still runs, only without a cache across runs.
fs::path writable_cache_dir() {
  static std::mutex mutex;
  static std::map<fs::path, fs::path> usable;  // requested → the directory used
  const fs::path want = cache_dir();
  std::lock_guard lock(mutex);
  if (auto it = usable.find(want); it != usable.end()) return it->second;
  std::error_code ec;
  fs::create_directories(want, ec);
  std::string why = ec ? ec.message() : "";
  const fs::path probe = want / ("probe" + unique_suffix());
  if (why.empty() && !write_file_atomic(probe, "")) why = "a file cannot be created in it";
  if (why.empty()) {
    fs::remove(probe, ec);
    return usable[want] = want;
  }
  std::string tmpl = (fs::temp_directory_path() / "tensorscope-cache-XXXXXX").string();
  if (!mkdtemp(tmpl.data()))
    throw std::runtime_error("C device: the kernel cache directory " + want.string() + " cannot be used (" + why +
                             ") and no temporary directory can be made either: set TENSORSCOPE_CACHE to a writable "
                             "directory");
  const fs::path fallback = fs::path(tmpl) / "c";
  fs::create_directories(fallback, ec);
  std::fprintf(stderr,
               "tensorscope: warning: the kernel cache directory %s cannot be used (%s); compiling into %s for this "
               "run only. Set TENSORSCOPE_CACHE to a writable directory to keep compiled kernels.\n",
               want.c_str(), why.c_str(), fallback.c_str());
  return usable[want] = fallback;
}

// Keeps <cache>/ts_math.h equal to the engine's (written atomically when missing or different).
void write_math_header(const fs::path& dir) {
  fs::path path = dir / "ts_math.h";
  std::ifstream in(path);
  std::string have((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (have == ts_math_source()) return;
  write_file_atomic(path, ts_math_source());
}


using KernelFn = void (*)(void**, int, int);

// THREADS: how many threads of the ThreadPool run the kernel's outermost global loop, each a contiguous block
// of its iterations (the C renderer's TS_LO/TS_HI: the source is the same for every count, so the count is a
// launch action, which plan_launch records in the kernel's applied opts).
//
// The plan's amount n asks for min(n, pool size, the loop's trip count); 0 and 1 are one thread. The default
// (kAuto) is the heuristic below. The split loop is the kernel's first RANGE, when it is global (the one the
// renderer splits); a kernel without one runs on one thread.
//
// The heuristic: the work of a kernel in loop iterations (loop_work, opt/pass_manager.h); below
// kMinParallelWork, waking threads costs more than it saves. 8M is about 0.1 ms of one
// core: a sleeping worker takes tens of µs to wake on a 2-core VM, and at 64k (the former limit) the
// samples' 20 µs kernels went to two threads: cnn_digits took 1.83 s with 2 threads against 0.59 s with
// one (now 0.56-0.59 s either way), the MLP 64-128-10 step 0.44 ms against 0.25 ms; the large kernels
// of scripts/bench.py (matmul 1024/2048, softmax 4096², 16M elementwise) still use every thread.

// The trip count of the kernel's outermost loop when that loop is global (the rows TS_LO/TS_HI split among
// threads), else 0. Also 0 when another loop follows it at the top level (a transposing copy's last rows, which
// transpose_tile copies element by element after its tiles): every thread would run that loop whole.
int64_t split_rows(const ir::Kernel& k) {
  for (size_t i = 0; i < k.insts.size(); i++) {
    const ir::Inst& in = k.insts[i];
    if (in.op != ir::Op::Range) continue;
    if (in.arg != ir::kGlobalLoop || k.insts[in.src[0]].op != ir::Op::Const) return 0;
    for (size_t j = end_of_range(k.insts, i) + 1; j < k.insts.size(); j++)
      if (k.insts[j].op == ir::Op::Range) return 0;
    return static_cast<int64_t>(k.insts[in.src[0]].value);
  }
  return 0;
}

int plan_threads(const ir::Kernel& k) {
  const int64_t split_trips = split_rows(k);
  if (split_trips <= 1) return 1;
  const int64_t most = std::min<int64_t>(ThreadPool::get().size(), split_trips);
  const int planned = k.plan.get(ir::AppliedOpt::Threads);
  if (planned != ir::OptPlan::kAuto) return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(planned, most)));
  return loop_work(k) >= kMinParallelWork ? static_cast<int>(most) : 1;
}

// The thread count plan_launch recorded in the kernel's applied opts; the plan's when it did not run.
int applied_threads(const ir::Kernel& k) {
  for (const ir::AppliedOpt& opt : k.opts)
    if (opt.kind == ir::AppliedOpt::Threads) return opt.amount;
  return plan_threads(k);
}

class CProgram : public Program {
 public:
  CProgram(void* handle, KernelFn fn, int threads, int64_t rows)
      : handle_(handle), fn_(fn), threads_(threads), rows_(rows) {}
  ~CProgram() override { dlclose(handle_); }
  double launch(const std::vector<Buffer*>& buffers) override {
    std::vector<void*> ptrs = handles(buffers);
    auto t0 = std::chrono::steady_clock::now();
    if (threads_ == 1) {
      fn_(ptrs.data(), 0, 1);
    } else {
      const int n = threads_;
      ThreadPool::get().parallel_for(n, [&](int core) { fn_(ptrs.data(), core, n); });
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  // The THREADS split run as one thread of `parts`: thread 0 runs rows [0, rows/parts) of the outermost loop.
  std::optional<double> estimate_launch_ms(const std::vector<Buffer*>& buffers, int parts) override {
    if (parts < 2 || rows_ < parts) return std::nullopt;
    std::vector<void*> ptrs = handles(buffers);
    const auto t0 = std::chrono::steady_clock::now();
    fn_(ptrs.data(), 0, parts);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const int64_t ran = rows_ / parts;  // TS_HI(rows) for thread 0 of `parts`
    return ms * static_cast<double>(rows_) / static_cast<double>(ran) / threads_;
  }

 private:
  static std::vector<void*> handles(const std::vector<Buffer*>& buffers) {  // the kernel's bufs argument
    std::vector<void*> ptrs;
    ptrs.reserve(buffers.size());
    for (Buffer* b : buffers) ptrs.push_back(b->handle);
    return ptrs;
  }
  void* handle_;
  KernelFn fn_;
  int threads_;   // THREADS
  int64_t rows_;  // split_rows of the kernel: 0 when its outermost loop is not split
};

class CDevice : public Device {
 public:
  std::string name() const override { return "C"; }
  void* alloc(size_t bytes) override { return host_alloc(bytes); }
  void free(void* h, size_t) override { host_free(h); }
  void copy_in(void* h, const void* host, size_t bytes) override { std::memcpy(h, host, bytes); }
  void copy_out(void* host, const void* h, size_t bytes) override { std::memcpy(host, h, bytes); }
  const Renderer* renderer() const override { return &c_renderer(); }
  // THREADS: recorded when the loop is split (one thread is no action), e.g. "THREADS(2)".
  void plan_launch(ir::Kernel& kernel) const override {
    for (const ir::AppliedOpt& opt : kernel.opts)
      if (opt.kind == ir::AppliedOpt::Threads) return;  // planned already
    if (const int n = plan_threads(kernel); n > 1) kernel.opts.push_back({ir::AppliedOpt::Threads, n});
  }
  // compile() shares only the cache directory (found under a mutex; entries written to unique
  // temporaries and renamed into place) and runs the compiler as a subprocess.
  bool concurrent_compiles() const override { return true; }

  CompileResult compile(const ir::Kernel& kernel, const SourceListing* source) override {
    auto [cc, origin] = compiler();
    fs::path dir = writable_cache_dir();
    const std::string stem = cache_stem(cc, origin, kernel, *source);
    fs::path so = dir / (stem + ".so");
    CompileResult result;
    std::string why;
    if (fs::exists(so)) {
      if (load(so, kernel, result, why)) {
        result.cache_hit = true;
        return result;
      }
      // a truncated or damaged entry (a full disk, a killed copy): compile it again
      std::fprintf(stderr, "tensorscope: warning: C kernel cache entry %s cannot be loaded (%s); compiling it again\n",
                   so.c_str(), why.c_str());
      std::error_code ec;
      fs::remove(so, ec);
    }
    auto t0 = std::chrono::steady_clock::now();
    std::error_code ec;
    // unique temporaries, then an atomic rename: concurrent runs never see a half-written file
    const std::string tmp = (dir / stem).string() + unique_suffix();
    if (!write_file_atomic(tmp + ".c", source->code))
      throw std::runtime_error("C device: cannot write " + tmp + ".c in the cache directory " + dir.string());
    write_math_header(dir);
    const std::string cmd = compile_command(cc, dir, tmp);
    // Under a time limit (the autotune search's), coreutils' timeout stops the compiler and its children
    // (it signals its whole process group): TERM at the limit, KILL a second later.
    const double limit_ms = compile_time_limit_ms();
    const std::string timed = limit_ms > 0 ? "timeout -k 1 " + std::to_string(limit_ms / 1e3) + " " : "";
    auto [status, msg] = run_command(timed + cmd);
    if (!timed.empty() && (status == 124 || status == 137)) {
      fs::remove(tmp + ".c", ec);
      fs::remove(tmp + ".so", ec);
      throw CompileTimeoutError("C device: compiling kernel " + kernel.name + " took over " +
                                std::to_string(static_cast<int64_t>(limit_ms)) + " ms: the compiler was stopped");
    }
    if (status != 0) {
      // keep the source next to the cache entry it would have been, for the user to read or compile
      fs::path kept = dir / (stem + ".failed.c");
      fs::rename(tmp + ".c", kept, ec);
      if (ec) kept = tmp + ".c";
      fs::remove(tmp + ".so", ec);
      if (status == 126 || status == 127)
        throw std::runtime_error("C device: cannot run the C compiler '" + cc + "' (" + origin + "): " + msg);
      throw std::runtime_error("C device: compiling kernel " + kernel.name + " with '" + cc + "' (" + origin +
                               ") failed (exit status " + std::to_string(status) + "); source file: " + kept.string() +
                               "\ncommand: " + cmd + "\ncompiler output:\n" + msg);
    }
    fs::rename(tmp + ".so", so, ec);
    if (ec) fs::remove(tmp + ".so", ec);  // load() below says why
    fs::remove(tmp + ".c", ec);
    result.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!load(so, kernel, result, why)) throw std::runtime_error("C device: cannot load " + so.string() + ": " + why);
    return result;
  }

  // Compiles the kernels that are not in the cache yet as one translation unit: the prelude once, then each
  // kernel's code after it, in one compiler run whose shared object becomes every one of their cache entries
  // (hard links to one file; dlopen of any of them maps it once). A compiler run costs ~100 ms before any
  // kernel code (starting cc1, parsing the prelude, assembling, linking): the first Adam step of a 784-120-84-10
  // MLP (24 kernels, a cold cache) took 6.2-7.2 s this way and 11.3-12.5 s one kernel a run. Kernels whose name another one of the unit already has (the exported
  // symbol), or whose source does not start with the prelude, are left to compile(); so is everything when
  // the unit fails to compile, and compile() then reports which kernel fails and why.
  void precompile(const std::vector<ir::Kernel>& kernels, const std::vector<SourceListing>& sources) override {
    auto [cc, origin] = compiler();
    fs::path dir;
    try {
      dir = writable_cache_dir();
    } catch (const std::exception&) {
      return;  // compile() says why
    }
    const std::string& prelude = c_renderer().prelude();
    std::string unit = prelude;
    std::vector<fs::path> entries;
    std::set<std::string> names;
    for (size_t i = 0; i < kernels.size() && i < sources.size(); i++) {
      const std::string& code = sources[i].code;
      if (code.compare(0, prelude.size(), prelude) != 0 || names.count(kernels[i].name)) continue;
      const fs::path so = dir / (cache_stem(cc, origin, kernels[i], sources[i]) + ".so");
      if (fs::exists(so)) continue;
      names.insert(kernels[i].name);
      unit.append(code, prelude.size(), std::string::npos);
      entries.push_back(so);
    }
    if (entries.size() < 2) return;
    const std::string tmp = (dir / "unit").string() + unique_suffix();
    std::error_code ec;
    if (!write_file_atomic(tmp + ".c", unit)) return;
    write_math_header(dir);
    const bool built = run_command(compile_command(cc, dir, tmp)).first == 0;
    fs::remove(tmp + ".c", ec);
    if (built)
      for (const fs::path& so : entries) {
        fs::create_hard_link(tmp + ".so", so, ec);  // appears whole; an entry another process made stays
        if (ec && !fs::exists(so)) {               // a file system without hard links: a copy, renamed
          const std::string copy = so.string() + unique_suffix();
          if (fs::copy_file(tmp + ".so", copy, ec)) fs::rename(copy, so, ec);
          if (ec) fs::remove(copy, ec);
        }
      }
    fs::remove(tmp + ".so", ec);
  }

 private:
  // -ffp-contract=off: no FMA contraction, so results match the interpreter bit for bit
  // -O3 vectorizes (-O2 in gcc 12 does not); 512-bit vectors: AVX-512 runs at full width on this CPU
  // -fno-trapping-math: a float select (x > 129 ? 129 : x, or relu's backward) may run in every lane with a
  // blend: without AVX-512's masks gcc otherwise keeps such a loop scalar, since a compare in a lane the
  // branch skipped could raise an FP exception flag (nothing reads the flags; values are the same). AVX2's
  // GELU, E_16_32_512 (ts_exp2f, three selects): 1.7 -> 0.31 ms on Zen 3
  // -fno-loop-interchange: the passes choose the loop order (reorder_global_loops, the upcasts); gcc's
  // interchange turned the MLP's packing copy E_16_784_32 (contiguous stores) into one storing 128 bytes
  // apart once its buffers were restrict parameters: 0.067 -> 0.26 ms
  // -nostdlib (with -lm below): the shared object is linked without the C start files, libgcc and libc's
  // linker script, which a kernel does not use: a libm function it calls still records libm as needed, and
  // a call gcc emits (memset, memcpy) binds at dlopen to the process's libc. With ts_math.h's declarations
  // instead of <math.h> (ts_math.h), 40 kernels of the Python suite compile in 133 ms each instead of 160.
  static constexpr const char* kFlags =
      "-O3 -march=native -mprefer-vector-width=512 -fno-loop-interchange -fPIC -shared -nostdlib -fno-math-errno "
      "-fno-trapping-math -ffp-contract=off";

  // The cache entry's file name without ".so": the kernel's name and a hash of what the compiler makes of the
  // source (the compiler command, its flags and target, ts_math.h's text: kernels include it from the cache
  // directory, and the source).
  static std::string cache_stem(const std::string& cc, const std::string& origin, const ir::Kernel& kernel,
                                const SourceListing& source) {
    std::ostringstream hash;
    hash << std::hex
         << fnv1a(cc + " " + kFlags + "\n" + native_target(cc, origin) + "\n" + ts_math_source() + "\n" + source.code);
    return file_stem(kernel.name) + "_" + hash.str();
  }
  // The command that compiles `tmp`.c into `tmp`.so (ts_math.h from the cache directory `dir`).
  static std::string compile_command(const std::string& cc, const fs::path& dir, const std::string& tmp) {
    return cc + " " + kFlags + " -I" + shell_quote(dir.string()) + " -o " + shell_quote(tmp + ".so") + " " +
           shell_quote(tmp + ".c") + " -lm";
  }

  // Whether the shared object's ELF headers fit in the file. A truncated file still dlopens (its segments
  // are mapped past the end of the file) and the first touch of the missing pages is a SIGBUS, so check first.
  static bool elf_whole(const fs::path& so, std::string& why) {
    std::ifstream in(so, std::ios::binary);
    Elf64_Ehdr eh{};
    std::error_code ec;
    const uint64_t size = fs::file_size(so, ec);
    if (ec || !in.read(reinterpret_cast<char*>(&eh), sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64) {
      why = "not a 64-bit ELF file";
      return false;
    }
    uint64_t end = std::max<uint64_t>(eh.e_phoff + uint64_t{eh.e_phnum} * eh.e_phentsize,
                                      eh.e_shoff + uint64_t{eh.e_shnum} * eh.e_shentsize);
    for (int i = 0; i < eh.e_phnum && end <= size; i++) {
      Elf64_Phdr ph{};
      in.seekg(static_cast<std::streamoff>(eh.e_phoff + uint64_t(i) * eh.e_phentsize));
      if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) break;
      end = std::max<uint64_t>(end, ph.p_offset + ph.p_filesz);
    }
    if (end > size) {
      why = "truncated: " + std::to_string(size) + " of " + std::to_string(end) + " bytes";
      return false;
    }
    return true;
  }

  // dlopen + dlsym; false with the reason when the shared object cannot be used.
  static bool load(const fs::path& so, const ir::Kernel& kernel, CompileResult& result, std::string& why) {
    if (!elf_whole(so, why)) return false;
    void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = dlerror();
      why = e ? e : "dlopen failed";
      return false;
    }
    auto fn = reinterpret_cast<KernelFn>(dlsym(handle, kernel.name.c_str()));
    if (!fn) {
      dlclose(handle);
      why = "symbol " + kernel.name + " missing";
      return false;
    }
    result.program = std::make_unique<CProgram>(handle, fn, applied_threads(kernel), split_rows(kernel));
    return true;
  }
};

const bool registered = DeviceRegistry::add("C", [] { return std::make_unique<CDevice>(); });

}  // namespace
}  // namespace ts
