// The peak calibration (tensorscope/calibrate.h): matmuls and an elementwise add through the engine, timed by
// the device's own launch timing and counted by the kernels' KernelInfo::flops / bytes, as the timeline does.
#include "tensorscope/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/cache_file.h"
#include "tensorscope/device.h"
#include "tensorscope/session.h"
#include "tensorscope/tensor.h"

namespace ts {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

fs::path cache_root() {
  if (const char* d = std::getenv("TENSORSCOPE_CACHE"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "tensorscope";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "tensorscope";
  return fs::temp_directory_path() / "tensorscope";
}

json read_cache() {
  std::ifstream f(peak_cache_path());
  json j = json::parse(f, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("peaks") && j["peaks"].is_object() ? j : json{{"peaks", json::object()}};
}

// Records, per realize, the launch that did the most work: its FLOPs, bytes and time.
struct BestLaunch : SessionObserver {
  std::map<int, std::pair<double, double>> work;  // kernel id -> (FLOPs, bytes)
  double flops = 0, bytes = 0, ms = 0;
  bool by_flops = true;
  void on_event(uint64_t, const Event& e) override {
    if (auto* s = std::get_if<ScheduleEvent>(&e))
      for_each_kernel(*s, [&](int id, const KernelInfo& k) { work[id] = {k.flops, k.bytes}; });
    else if (auto* r = std::get_if<KernelRunEvent>(&e)) {
      auto it = work.find(r->kernel_id);
      if (it == work.end() || r->time_ms <= 0) return;
      if ((by_flops ? it->second.first > flops : it->second.second > bytes)) {
        flops = it->second.first, bytes = it->second.second, ms = r->time_ms;
      }
    }
  }
  void reset() { flops = bytes = ms = 0; }  // keeps by_flops
};

// A float32 buffer of `shape` holding values in [0, 1), copied in from the host: no kernel to compile per size
// (Tensor::rand took seconds for the bandwidth test's 64 MiB buffers). The values do not matter for timing as
// long as they are normal numbers.
Tensor test_data(const Shape& shape, const std::string& device) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) host[static_cast<size_t>(i)] = static_cast<float>(i % 1021) / 1021.0f + 0.5f;
  return Tensor::from_data(host.data(), DType::Float32, shape, device);
}

}  // namespace

std::string peak_cache_path() { return (cache_root() / "peaks.json").string(); }

std::string device_identity(const std::string& device) {
  const DeviceProperties p = DeviceRegistry::properties(DeviceRegistry::index(device));
  const char* threads = std::getenv("TENSORSCOPE_THREADS");
  return p.name + " | " + p.backend + " | " + p.description + " | " + p.vendor + " | " + p.driver + " | " + cpu_model() +
         " | threads " + (threads && *threads ? threads : std::to_string(std::thread::hardware_concurrency()));
}

std::optional<DevicePeak> cached_peak(const std::string& device) {
  const std::string id = device_identity(device);
  const json j = read_cache();
  auto it = j["peaks"].find(id);
  if (it == j["peaks"].end() || !it->is_object()) return std::nullopt;
  const json& e = *it;
  DevicePeak p;
  p.device = device;
  p.identity = id;
  p.gflops = e.value("gflops", 0.0);
  p.gbps = e.value("gbps", 0.0);
  p.matmul_n = e.value("matmul_n", int64_t{0});
  p.copy_bytes = e.value("copy_bytes", int64_t{0});
  p.seconds = e.value("seconds", 0.0);
  p.measured_at = e.value("measured_at", int64_t{0});
  if (p.gflops <= 0 || p.gbps <= 0) return std::nullopt;
  return p;
}

DevicePeak calibrate_peak(const std::string& device, double budget_s) {
  const int index = DeviceRegistry::index(device);
  const DeviceProperties props = DeviceRegistry::properties(index);
  if (!props.can_run) throw std::runtime_error("device " + props.name + " cannot run kernels here: " + props.note);
  DevicePeak peak;
  peak.device = props.name;
  peak.identity = device_identity(device);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  BestLaunch best;
  ScopedObserver observe(&best);
  // The budget counts the timed launches only: a size's first launch (its compile, the first touch of its
  // output) and making the data are not counted, so a cold compile cache does not cut the measurement short.
  double measured = 0;
  auto timed = [&](const Tensor& t) {
    best.reset();
    const auto start = std::chrono::steady_clock::now();
    Tensor(t).realize();
    measured += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // Compute: matmuls of growing N, three timed launches each, until one launch takes 20 ms or half the
  // budget is spent.
  best.by_flops = true;
  constexpr double kMinPeakMs = 0.1;
  bool long_peak = false;  // peak.gflops comes from a launch of at least kMinPeakMs
  for (int64_t n = 64; n <= 2048 && measured < budget_s / 2; n *= 2) {
    Tensor a = test_data({n, n}, device), b = test_data({n, n}, device);
    a.matmul(b).realize();  // warm-up
    double slowest = 0;
    for (int rep = 0; rep < 3 && measured < budget_s / 2; rep++) {
      timed(a.matmul(b));
      if (best.ms <= 0) continue;
      slowest = std::max(slowest, best.ms);
      // A launch of a few µs is timed too coarsely to be a peak: such rates count only when nothing longer ran.
      const double rate = best.flops / best.ms / 1e6;
      const bool long_enough = best.ms >= kMinPeakMs;
      if (long_enough && (!long_peak || rate > peak.gflops)) peak.gflops = rate, peak.matmul_n = n, long_peak = true;
      if (!long_peak && rate > peak.gflops) peak.gflops = rate, peak.matmul_n = n;
    }
    if (slowest > 20) break;
  }
  // Memory: an elementwise add (two reads, one write) over growing buffers, up to 64 MiB each (past the
  // last-level cache), four timed launches each, until one launch takes 15 ms or the budget is spent. The
  // peak is the best launch at the largest size measured: a smaller buffer may sit in a cache.
  best.by_flops = false;
  for (int64_t m = int64_t{1} << 18; m <= (int64_t{1} << 24) && measured < budget_s; m *= 4) {
    Tensor x = test_data({m}, device), y = test_data({m}, device);
    x.add(y).realize();  // warm-up
    double slowest = 0, rate_here = 0;
    for (int rep = 0; rep < 4 && measured < budget_s; rep++) {
      timed(x.add(y));
      if (best.ms <= 0) continue;
      slowest = std::max(slowest, best.ms);
      rate_here = std::max(rate_here, best.bytes / best.ms / 1e6);
    }
    if (rate_here > 0) peak.gbps = rate_here, peak.copy_bytes = 3 * 4 * m;
    if (slowest > 15) break;
  }
  peak.seconds = elapsed();
  peak.measured_at = static_cast<int64_t>(std::time(nullptr));
  if (peak.gflops <= 0 || peak.gbps <= 0) throw std::runtime_error("calibration of " + props.name + " timed no launch");
  json j = read_cache();
  j["peaks"][peak.identity] = {{"device", peak.device}, {"gflops", peak.gflops}, {"gbps", peak.gbps},
                               {"matmul_n", peak.matmul_n}, {"copy_bytes", peak.copy_bytes},
                               {"seconds", peak.seconds}, {"measured_at", peak.measured_at}};
  std::error_code ec;
  fs::create_directories(cache_root(), ec);
  if (!write_file_atomic(peak_cache_path(), j.dump(1) + "\n"))
    throw std::runtime_error("cannot write the peak cache " + peak_cache_path());
  return peak;
}

}  // namespace ts
