// tensorscope-cli: the headless face of Tensorscope.
//   tensorscope-cli run SCRIPT [--device NAME] [--out DIR] [--svg FILE]   (NAME: see `devices`)
//   tensorscope-cli devices
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "graph_svg.h"
#include "run_recorder.h"
#include "runner.h"
#include "tensorscope/device.h"

namespace {

int usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage:\n"
               "  tensorscope-cli run SCRIPT [--device C|INTERP|OPENCL|VULKAN|CUDA] [--out DIR] [--svg FILE]\n"
               "      runs a tensor script headless; --out writes kernels.json with every kernel's IR and\n"
               "      source beside it; --svg writes the lazy graph with one cluster per kernel\n"
               "  tensorscope-cli devices\n"
               "      lists the devices\n");
  return code;
}

// "7.2 GiB", "64 KiB"; "-" when the driver did not say.
std::string bytes_str(uint64_t b) {
  if (b == 0) return "-";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, u++;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 || v >= 100 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// The device registry as a table: what each device is, its limits, and whether it can run kernels or
// only compile them (CUDA without a GPU); a second line gives the driver and any note.
int cmd_devices() {
  std::printf("%-10s %-12s %-14s %10s %8s %10s %8s  %s\n", "DEVICE", "STATUS", "VENDOR", "MEMORY", "WG SIZE",
              "LOCAL MEM", "SUBGROUP", "NAME");
  for (const ts::DeviceProperties& p : ts::DeviceRegistry::list()) {
    std::string wg = p.max_workgroup_size ? std::to_string(p.max_workgroup_size) : "-";
    std::string sub = p.subgroup_size ? std::to_string(p.subgroup_size) : "-";
    std::printf("%-10s %-12s %-14s %10s %8s %10s %8s  %s\n", p.name.c_str(), p.can_run ? "run" : "compile-only",
                p.vendor.substr(0, 14).c_str(), bytes_str(p.memory_bytes).c_str(), wg.c_str(),
                bytes_str(p.local_memory_bytes).c_str(), sub.c_str(), p.description.c_str());
    std::string detail = p.driver;
    if (!p.note.empty()) detail += (detail.empty() ? "" : "; ") + p.note;
    if (!detail.empty()) std::printf("%-10s   %s\n", "", detail.c_str());
  }
  return 0;
}

int cmd_run(int argc, char** argv) {
  std::string script, device, out_dir, svg;
  for (int i = 0; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tensorscope-cli: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--device") device = value("--device");
    else if (a == "--out") out_dir = value("--out");
    else if (a == "--svg") svg = value("--svg");
    else if (a == "-h" || a == "--help") return usage(0);
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "tensorscope-cli: unknown option %s\n", a.c_str());
      return usage(2);
    } else if (script.empty()) script = a;
    else return usage(2);
  }
  if (script.empty()) return usage(2);
  std::ifstream f(script);
  if (!f) {
    std::fprintf(stderr, "tensorscope-cli: cannot read script '%s': %s\n", script.c_str(), std::strerror(errno));
    return 2;
  }
  std::stringstream text;
  text << f.rdbuf();
  if (!device.empty()) {
    try {
      ts::DeviceRegistry::index(device);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tensorscope-cli: --device: %s\n", e.what());
      return 2;
    }
  }

  ts::RunRecorder recorder;
  ts::ScopedObserver observe(&recorder);
  ts::ScriptRunner::initialize({ts::ScriptRunner::default_python_path()});
  ts::ScriptResult result = ts::ScriptRunner::run(script, text.str(), device, [](bool is_stderr, std::string_view s) {
    std::fwrite(s.data(), 1, s.size(), is_stderr ? stderr : stdout);
    std::fflush(is_stderr ? stderr : stdout);
  });
  std::string dev_name = device.empty() ? ts::DeviceRegistry::at(ts::DeviceRegistry::default_index()).name() : device;
  try {
    if (!out_dir.empty()) {
      ts::write_manifest(recorder, out_dir, script, dev_name);
      std::fprintf(stderr, "tensorscope-cli: wrote %zu kernel(s) to %s/kernels.json\n", recorder.kernels.size(), out_dir.c_str());
    }
    if (!svg.empty()) {
      auto parent = std::filesystem::path(svg).parent_path();
      if (!parent.empty()) std::filesystem::create_directories(parent);
      std::ofstream(svg) << ts::dot_to_svg(ts::graph_to_dot(recorder.schedules));
      std::fprintf(stderr, "tensorscope-cli: wrote the graph to %s\n", svg.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensorscope-cli: %s\n", e.what());
    return 1;
  }
  return result.ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(2);
  std::string cmd = argv[1];
  if (cmd == "run") return cmd_run(argc - 2, argv + 2);
  if (cmd == "devices") return cmd_devices();
  if (cmd == "-h" || cmd == "--help" || cmd == "help") return usage(0);
  std::fprintf(stderr, "tensorscope-cli: unknown command '%s'\n", cmd.c_str());
  return usage(2);
}
