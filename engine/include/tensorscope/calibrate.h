// A device's peak: the roof of the roofline plot (Williams, Waterman and Patterson, "Roofline: an insightful
// visual performance model for multicore architectures", CACM 2009). Measured once by a short calibration
// through the engine itself (the same kernels, launch timing and FLOP/byte counts as a script's), and cached
// per device identity in the cache directory, so that the debugger, which runs no user code, only reads it.
//
//   tensorscope-cli calibrate [--device NAME] [--force]   measures (about a second) and caches
//   <cache>/peaks.json                                     $TENSORSCOPE_CACHE, else $XDG_CACHE_HOME/tensorscope,
//                                                          else ~/.cache/tensorscope
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace ts {

struct DevicePeak {
  std::string device;      // registry name: "C", "INTERP", "OPENCL:0"
  std::string identity;    // what the peak depends on: backend, driver, CPU model, threads (device_identity)
  double gflops = 0;       // GFLOP/s: the best launch of float32 matmuls (2·N³ FLOPs each), N up to 2048
  double gbps = 0;         // GB/s: the best launch of a float32 elementwise add over large buffers (reads + write)
  int64_t matmul_n = 0;    // N of the matmul that gave `gflops`
  int64_t copy_bytes = 0;  // bytes one launch of the bandwidth kernel moved
  double seconds = 0;      // how long the calibration took, compiles and making the data included
  int64_t measured_at = 0; // seconds since the Unix epoch
};

// The text a peak is cached under: the device's backend, description, vendor and driver, the host CPU's
// model name and the number of threads kernels run on (TENSORSCOPE_THREADS). Throws std::invalid_argument
// for an unknown device.
std::string device_identity(const std::string& device);

// The cached peak of `device` on this machine (this identity), or nullopt when it was never measured.
std::optional<DevicePeak> cached_peak(const std::string& device);

// Measures `device`'s peak (`budget_s` of timed launches, about a second: N and the buffer size grow until a
// launch takes long enough or the budget is spent; compiles and warm-up launches come on top), writes it to the cache and returns it. Runs kernels: call it in a process that
// may (the CLI), not in the debugger. Throws std::runtime_error when the device cannot run kernels.
DevicePeak calibrate_peak(const std::string& device, double budget_s = 1.0);

// <cache>/peaks.json.
std::string peak_cache_path();

}  // namespace ts
