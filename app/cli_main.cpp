// tensorscope-cli: the headless face of Tensorscope.
//   tensorscope-cli run SCRIPT [--device NAME] [--out DIR] [--svg FILE] [--dot FILE] [--png FILE [--png-scale N]] [--trace FILE]
//                              [--record FILE]   (NAME: see `devices`)
//   tensorscope-cli record SCRIPT -o FILE.tsrec [--device NAME]
//   tensorscope-cli info FILE.tsrec
//   tensorscope-cli export FILE.tsrec [--out DIR] [--svg FILE] [--dot FILE] [--png FILE [--png-scale N]] [--trace FILE]
//   tensorscope-cli devices
//   tensorscope-cli calibrate [--device NAME] [--force]
//   tensorscope-cli runner ...   (the debugger's runner process: runner_command.h)
// Recordings (.tsrec) are described in docs/recording.md.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "tensorscope/calibrate.h"
#include "tensorscope/chrome_trace.h"
#include "graph_svg.h"
#include "run_recorder.h"
#include "runner.h"
#include "runner_command.h"
#include "tensorscope/device.h"
#include "tensorscope/recording.h"
#include "tensorscope/tensor.h"

namespace {

int usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage:\n"
               "  tensorscope-cli run SCRIPT [--device C|INTERP|OPENCL|VULKAN|CUDA] [--out DIR] [--svg FILE]\n"
               "                             [--dot FILE] [--png FILE [--png-scale N]] [--trace FILE]\n"
               "                             [--record FILE.tsrec [--record-buffers[=MB]]] [--break-on-nan]\n"
               "                             [--beam N]\n"
               "      runs a tensor script headless; --out writes kernels.json with every kernel's IR and\n"
               "      source beside it; --svg writes the lazy graph with one cluster per kernel, --dot the\n"
               "      same graph as graphviz DOT text and --png as a PNG image at N times 72 dpi (default 1);\n"
               "      --trace writes the schedules, compiles and launches as Chrome trace JSON (Perfetto);\n"
               "      --record writes the run's events to a recording (docs/recording.md), with each launch's\n"
               "      buffers up to MB in all (default 64) when --record-buffers is given; --break-on-nan stops\n"
               "      at the first kernel that makes a NaN or an infinity, prints it (kernel, element, the\n"
               "      script line of the op) and exits with status 3; --beam N searches each kernel's\n"
               "      optimization plan with a beam of width N (TENSORSCOPE_BEAM; results cached)\n"
               "  tensorscope-cli record SCRIPT -o FILE.tsrec [--device NAME] [--record-buffers[=MB]]\n"
               "      runs a tensor script headless and records it\n"
               "  tensorscope-cli info FILE.tsrec\n"
               "      says what a recording holds: the run, how it ended, counts, the slowest launches\n"
               "  tensorscope-cli export FILE.tsrec [--out DIR] [--svg FILE] [--dot FILE] [--png FILE [--png-scale N]]\n"
               "                                   [--trace FILE]\n"
               "      writes a recording's kernels.json and listings (as run --out), its graph (as run\n"
               "      --svg, --dot, --png) and its trace (as run --trace)\n"
               "  tensorscope-cli devices\n"
               "      lists the devices\n"
               "  tensorscope-cli calibrate [--device NAME] [--force]\n"
               "      the device's peak GFLOP/s and GB/s, the roof of the debugger's roofline plot: measured\n"
               "      once (about a second) and cached per device identity in the cache directory; --force\n"
               "      measures again\n"
               "  tensorscope-cli runner --connect SOCKET --source FILE [...]\n"
               "      the process the debugger runs each script in (not for people)\n");
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
    if (p.vector_bytes)  // the host CPU's vector unit, which the C code's upcasts and register tiles are sized to
      detail += (detail.empty() ? "" : "; ") + std::string("vector registers: ") + std::to_string(p.vector_registers) +
                " x " + std::to_string(p.vector_bytes) + " bytes";
    if (!p.note.empty()) detail += (detail.empty() ? "" : "; ") + p.note;
    if (!detail.empty()) std::printf("%-10s   %s\n", "", detail.c_str());
  }
  return 0;
}

// The recording of one run in this process: the session's events go to an EventStreamer (counted on
// the way) while the script runs.
class Recording : public ts::SessionObserver {
 public:
  // Throws RecordingError when the file cannot be created, std::invalid_argument for an unknown device.
  Recording(const std::string& path, const std::string& script, const std::string& text, const std::string& device)
      : path_(path), script_(script), streamer_(ts::new_run_info(script, text, {script}, device), path, -1) {
    observe_.emplace(this);
  }
  bool wants_nodes() const override { return true; }  // a recording has every node with its line
  void on_event(uint64_t seq, const ts::Event& event) override {
    events_++;
    streamer_.on_event(seq, event);
  }

  // Says how the run ended, closes the file and reports on stderr.
  void finish(const ts::ScriptResult& result) {
    observe_.reset();
    streamer_.finish(ts::how_it_ended(result, script_));
    std::fprintf(stderr, "tensorscope-cli: recorded %zu event(s) to %s\n", events_, path_.c_str());
  }

 private:
  std::string path_, script_;
  ts::EventStreamer streamer_;
  std::optional<ts::ScopedObserver> observe_;
  size_t events_ = 0;
};

// Reads a script for `run` / `record`; prints why not and returns false.
bool read_script(const std::string& script, std::string& text) {
  std::ifstream f(script);
  if (!f) {
    std::fprintf(stderr, "tensorscope-cli: cannot read script '%s': %s\n", script.c_str(), std::strerror(errno));
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  text = ss.str();
  return true;
}

void echo_output(bool is_stderr, std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), is_stderr ? stderr : stdout);
  std::fflush(is_stderr ? stderr : stdout);
}

// The graph files to write: --svg, --dot, --png (--png-scale); an empty path writes nothing.
struct GraphFiles {
  std::string svg, dot, png;
  double png_scale = 1;
  bool any() const { return !svg.empty() || !dot.empty() || !png.empty(); }
  // Reads --svg/--dot/--png/--png-scale at argv[i] (advancing i); false: not one of them.
  bool parse(int argc, char** argv, int& i);
};

// Writes `data` to `path`, making its folder.
void write_file(const std::string& path, const std::string& data) {
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::ofstream f(path, std::ios::binary);
  f << data;
  if (!f) throw std::runtime_error("cannot write " + path);
}

// kernels.json (--out) and the graph (--svg, --dot, --png) from what a RunRecorder kept. Prints what it wrote.
void write_outputs(const ts::RunRecorder& recorder, const std::string& out_dir, const GraphFiles& graph,
                   const std::string& script, const std::string& device) {
  if (!out_dir.empty()) {
    ts::write_manifest(recorder, out_dir, script, device);
    std::fprintf(stderr, "tensorscope-cli: wrote %zu kernel(s) to %s/kernels.json\n", recorder.kernels.size(), out_dir.c_str());
  }
  if (!graph.any()) return;
  const std::string dot = ts::graph_to_dot(recorder.schedules);
  if (!graph.dot.empty()) {
    write_file(graph.dot, dot);
    std::fprintf(stderr, "tensorscope-cli: wrote the graph as DOT to %s\n", graph.dot.c_str());
  }
  if (!graph.svg.empty()) {
    write_file(graph.svg, ts::dot_to_svg(dot));
    std::fprintf(stderr, "tensorscope-cli: wrote the graph to %s\n", graph.svg.c_str());
  }
  if (!graph.png.empty()) {
    write_file(graph.png, ts::dot_to_png(dot, graph.png_scale));
    std::fprintf(stderr, "tensorscope-cli: wrote the graph as PNG (%gx) to %s\n", graph.png_scale, graph.png.c_str());
  }
}

// --trace: the Chrome trace of what a TraceRecorder saw (nothing when `path` is empty). Prints what it wrote.
void write_trace(const ts::TraceRecorder& tracer, const std::string& path, const std::string& script) {
  if (path.empty()) return;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  ts::write_chrome_trace(tracer.spans, path, script);
  std::fprintf(stderr, "tensorscope-cli: wrote %zu trace event(s) to %s\n", tracer.spans.size(), path.c_str());
}

// The value after option argv[i] (advancing i); a missing one exits with status 2.
std::string option_value(int argc, char** argv, int& i, const char* flag) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "tensorscope-cli: %s needs a value\n", flag);
    std::exit(2);
  }
  return argv[++i];
}

bool GraphFiles::parse(int argc, char** argv, int& i) {
  const std::string a = argv[i];
  if (a == "--svg") svg = option_value(argc, argv, i, "--svg");
  else if (a == "--dot") dot = option_value(argc, argv, i, "--dot");
  else if (a == "--png") png = option_value(argc, argv, i, "--png");
  else if (a == "--png-scale") {
    const std::string v = option_value(argc, argv, i, "--png-scale");
    char* end = nullptr;
    png_scale = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || !(png_scale > 0) || png_scale > 16) {
      std::fprintf(stderr, "tensorscope-cli: --png-scale %s: expected a number above 0 and at most 16, e.g. 2\n", v.c_str());
      std::exit(2);
    }
  } else return false;
  return true;
}

// `run` and `record`: the script runs in this process; `record` == true is `record` (-o FILE required).
int cmd_run(int argc, char** argv, bool record) {
  std::string script, device, out_dir, trace, record_path;
  GraphFiles graph;
  bool break_on_nan = false;
  double record_buffers_mb = 0;
  for (int i = 0; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&](const char* flag) { return option_value(argc, argv, i, flag); };
    if (a == "--device") device = value("--device");
    else if (!record && a == "--out") out_dir = value("--out");
    else if (!record && a == "--trace") trace = value("--trace");
    else if (!record && graph.parse(argc, argv, i)) continue;
    else if (!record && a == "--record") record_path = value("--record");
    else if (record && (a == "-o" || a == "--output")) record_path = value("-o");
    else if (a == "--break-on-nan") break_on_nan = true;
    else if (a == "--beam") {
      const std::string n = value("--beam");
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 3) {
        std::fprintf(stderr, "tensorscope-cli: --beam %s: expected a beam width, e.g. --beam 2\n", n.c_str());
        std::exit(2);
      }
      setenv("TENSORSCOPE_BEAM", n.c_str(), 1);  // read by the engine at its first kernel (autotune.h)
    }
    else if (a == "--record-buffers" || a.rfind("--record-buffers=", 0) == 0) {
      const std::string mb = a == "--record-buffers" ? "64" : a.substr(17);
      char* end = nullptr;
      const double v = std::strtod(mb.c_str(), &end);
      if (mb.empty() || *end || !(v > 0) || v > 1e6) {
        std::fprintf(stderr, "tensorscope-cli: --record-buffers=%s: expected a size in MB, e.g. --record-buffers=64\n",
                     mb.c_str());
        return 2;
      }
      record_buffers_mb = v;
    }
    else if (a == "-h" || a == "--help") return usage(0);
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "tensorscope-cli: unknown option %s\n", a.c_str());
      return usage(2);
    } else if (script.empty()) script = a;
    else return usage(2);
  }
  if (script.empty()) return usage(2);
  if (record && record_path.empty()) {
    std::fprintf(stderr, "tensorscope-cli: record needs -o FILE.tsrec\n");
    return usage(2);
  }
  std::string text;
  if (!read_script(script, text)) return 2;
  if (!device.empty()) {
    try {
      ts::DeviceRegistry::index(device);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tensorscope-cli: --device: %s\n", e.what());
      return 2;
    }
  }

  // read by the tensorscope module when the script imports it (tensorscope/__init__.py)
  if (break_on_nan) setenv("TENSORSCOPE_BREAK_ON_NAN", "1", 1);
  if (record_buffers_mb > 0) {
    if (record_path.empty()) {
      std::fprintf(stderr, "tensorscope-cli: --record-buffers keeps buffers in a recording: add --record FILE.tsrec\n");
      return 2;
    }
    ts::Session::get().set_record_buffers(static_cast<size_t>(record_buffers_mb * (1 << 20)));
  }
  ts::RunRecorder recorder;
  ts::TraceRecorder tracer;
  std::optional<ts::ScopedObserver> observe, observe_trace;
  if (!out_dir.empty() || graph.any()) observe.emplace(&recorder);  // unobserved, a run costs nothing extra
  if (!trace.empty()) observe_trace.emplace(&tracer);
  // A recorded run takes Python's SIGINT handler, so that Ctrl-C stops the script (KeyboardInterrupt)
  // and the recording still says how the run ended ("stopped").
  ts::ScriptRunner::initialize({ts::ScriptRunner::default_python_path()}, /*signal_handlers=*/!record_path.empty());
  std::unique_ptr<Recording> recording;
  if (!record_path.empty()) {
    try {
      recording = std::make_unique<Recording>(record_path, script, text, device);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tensorscope-cli: %s\n", e.what());
      return 2;
    }
  }
  ts::ScriptResult result = ts::ScriptRunner::run(script, text, device, echo_output);
  observe.reset();
  observe_trace.reset();
  if (recording) recording->finish(result);
  std::string dev_name = device.empty() ? ts::DeviceRegistry::at(ts::DeviceRegistry::default_index()).name() : device;
  try {
    write_outputs(recorder, out_dir, graph, script, dev_name);
    write_trace(tracer, trace, script);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensorscope-cli: %s\n", e.what());
    return 1;
  }
  if (break_on_nan && result.error.find("NonFiniteError: ") != std::string::npos) {
    const std::string what = result.error.substr(result.error.find("NonFiniteError: ") + 16);
    std::fprintf(stderr, "tensorscope-cli: break on NaN/Inf: %s\n", what.c_str());
    return 3;
  }
  return result.ok ? 0 : 1;
}

// ---- recordings --------------------------------------------------------------------------------------

// One line: a message from a recording may hold line breaks (an exception's text); `info` keeps one line.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// "2024-05-01T12:34:56.789Z"; "-" for 0.
std::string utc_iso(int64_t ns) {
  if (ns <= 0) return "-";
  const time_t secs = static_cast<time_t>(ns / 1000000000);
  struct tm t {};
  gmtime_r(&secs, &t);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", t.tm_year + 1900, t.tm_mon + 1, t.tm_mday,
                t.tm_hour, t.tm_min, t.tm_sec, static_cast<int>((ns / 1000000) % 1000));
  return buf;
}

// A recording that cannot be read: one line that names the file, exit status 2.
int recording_error(const std::string& path, const std::exception& e) {
  std::string msg = one_line(e.what());
  if (msg.find(path) == std::string::npos) msg = path + ": " + msg;  // RecordingError names it already
  std::fprintf(stderr, "tensorscope-cli: %s\n", msg.c_str());
  return 2;
}

// `info FILE`: the run and its events, in "key: value" lines (the format is in docs/recording.md).
int cmd_info(int argc, char** argv) {
  if (argc != 1 || argv[0][0] == '-') {
    if (argc == 1 && (std::strcmp(argv[0], "-h") == 0 || std::strcmp(argv[0], "--help") == 0)) return usage(0);
    return usage(2);
  }
  const std::string path = argv[0];
  struct Launch {
    int id;
    std::string name, device;
    double ms;
    bool replayed;
    int replay_of;
  };
  std::vector<Launch> launches;
  size_t events = 0, schedules = 0, outputs = 0, replays = 0;
  std::set<int> kernels;
  std::map<std::string, size_t> trials;  // autotune trials by outcome
  double total_ms = 0;
  ts::RunInfo run;
  try {
    ts::RecordingReader reader(path);
    run = reader.run();
    reader.read_events([&](uint64_t, int64_t, const ts::Event& event) {
      events++;
      if (auto* s = std::get_if<ts::ScheduleEvent>(&event)) {
        schedules++;
        for (const ts::KernelInfo& k : s->kernels) kernels.insert(k.id);
      } else if (auto* r = std::get_if<ts::KernelRunEvent>(&event)) {
        launches.push_back({r->kernel_id, r->name, r->device, r->time_ms, r->replayed, r->replay_of});
        total_ms += r->time_ms;
        if (r->replayed) replays++;
      } else if (auto* t = std::get_if<ts::AutotuneTrialEvent>(&event)) {
        trials[ts::trial_outcome_name(t->outcome)]++;
      } else {
        outputs++;
      }
    });
  } catch (const std::exception& e) {
    return recording_error(path, e);
  }
  auto line = [](const char* key, const std::string& value) { std::printf("%-12s %s\n", key, value.c_str()); };
  line("recording:", path);
  line("script:", run.script_path);
  line("device:", run.device);
  line("version:", run.version.empty() ? "-" : run.version);
  line("python:", run.python_version.empty() ? "-" : one_line(run.python_version));
  line("started:", utc_iso(run.start_time_ns));
  if (run.ended.empty()) {
    line("ended:", "cut off (the program died without saying how)");
  } else {
    line("ended:", run.ended);
    if (!run.end_message.empty()) line("message:", one_line(run.end_message));
    if (run.ended == "exit" || run.ended == "error") line("exit status:", std::to_string(run.exit_status));
    if (run.ended == "signal") line("signal:", std::to_string(run.exit_status));
    if (run.end_time_ns >= run.start_time_ns && run.start_time_ns > 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3f s", (run.end_time_ns - run.start_time_ns) / 1e9);
      line("duration:", buf);
    }
  }
  line("events:", std::to_string(events));
  line("schedules:", std::to_string(schedules));
  line("kernels:", std::to_string(kernels.size()));
  line("launches:", std::to_string(launches.size()));
  line("replays:", std::to_string(replays));
  line("outputs:", std::to_string(outputs));
  if (!trials.empty()) {  // a run with TENSORSCOPE_BEAM: "40 (2 kept, 30 timed, 8 duplicate)"
    size_t all = 0;
    std::string by;
    for (const auto& [outcome, n] : trials) {
      all += n;
      by += (by.empty() ? "" : ", ") + std::to_string(n) + " " + outcome;
    }
    line("trials:", std::to_string(all) + " (" + by + ")");
  }
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.3f ms", total_ms);
  line("kernel time:", ms);
  // The ten slowest launches, slowest first (launch order among equals).
  std::stable_sort(launches.begin(), launches.end(), [](const Launch& a, const Launch& b) { return a.ms > b.ms; });
  if (launches.size() > 10) launches.resize(10);
  std::printf("slowest launches:\n");
  if (!launches.empty()) std::printf("  %6s  %-32s %-10s %10s\n", "ID", "NAME", "DEVICE", "MS");
  for (const Launch& l : launches) {
    std::printf("  %6d  %-32s %-10s %10.3f", l.id, l.name.c_str(), l.device.c_str(), l.ms);
    if (l.replayed) std::printf("  (jit replay of %d)", l.replay_of);
    std::printf("\n");
  }
  return 0;
}

// `export FILE --out DIR [--svg FILE] [--dot FILE] [--png FILE]`: what `run --out/--svg/--dot/--png`
// writes, from a recording's events.
int cmd_export(int argc, char** argv) {
  std::string path, out_dir, trace;
  GraphFiles graph;
  for (int i = 0; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&](const char* flag) { return option_value(argc, argv, i, flag); };
    if (a == "--out") out_dir = value("--out");
    else if (a == "--trace") trace = value("--trace");
    else if (graph.parse(argc, argv, i)) continue;
    else if (a == "-h" || a == "--help") return usage(0);
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "tensorscope-cli: unknown option %s\n", a.c_str());
      return usage(2);
    } else if (path.empty()) path = a;
    else return usage(2);
  }
  if (path.empty()) return usage(2);
  if (out_dir.empty() && !graph.any() && trace.empty()) {
    std::fprintf(stderr, "tensorscope-cli: export needs --out DIR and/or --svg, --dot, --png or --trace FILE\n");
    return usage(2);
  }
  ts::RunRecorder recorder;
  ts::TraceRecorder tracer;
  ts::RunInfo run;
  try {
    ts::RecordingReader reader(path);
    run = reader.run();
    reader.read_events([&](uint64_t seq, int64_t time_ns, const ts::Event& event) {
      recorder.on_event(seq, event);
      if (!trace.empty()) tracer.add(event, static_cast<double>(time_ns) / 1e3);
    });
  } catch (const std::exception& e) {
    return recording_error(path, e);
  }
  try {
    write_outputs(recorder, out_dir, graph, run.script_path, run.device);
    write_trace(tracer, trace, run.script_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensorscope-cli: %s\n", one_line(e.what()).c_str());
    return 1;
  }
  return 0;
}

// `calibrate [--device NAME] [--force]`: the device's peak, from the cache or measured (tensorscope/calibrate.h).
int cmd_calibrate(int argc, char** argv) {
  std::string device = ts::default_device();
  bool force = false;
  for (int i = 0; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) device = argv[++i];
    else if (a == "--force") force = true;
    else return usage(2);
  }
  try {
    std::optional<ts::DevicePeak> peak = force ? std::nullopt : ts::cached_peak(device);
    const bool cached = peak.has_value();
    if (!peak) peak = ts::calibrate_peak(device);
    std::printf("%s: %.1f GFLOP/s (float32 matmul, N = %lld), %.1f GB/s (elementwise add moving %s); %s %.2f s; %s\n",
                peak->device.c_str(), peak->gflops, static_cast<long long>(peak->matmul_n), peak->gbps,
                bytes_str(static_cast<uint64_t>(peak->copy_bytes)).c_str(), cached ? "cached, measured in" : "measured in",
                peak->seconds, ts::peak_cache_path().c_str());
    std::printf("identity: %s\n", peak->identity.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensorscope-cli: calibrate: %s\n", one_line(e.what()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(2);
  std::string cmd = argv[1];
  if (cmd == "run") return cmd_run(argc - 2, argv + 2, false);
  if (cmd == "record") return cmd_run(argc - 2, argv + 2, true);
  if (cmd == "info") return cmd_info(argc - 2, argv + 2);
  if (cmd == "export") return cmd_export(argc - 2, argv + 2);
  if (cmd == "devices") return cmd_devices();
  if (cmd == "calibrate") return cmd_calibrate(argc - 2, argv + 2);
  if (cmd == "runner") return ts::cmd_runner(argc - 2, argv + 2);
  if (cmd == "-h" || cmd == "--help" || cmd == "help") return usage(0);
  std::fprintf(stderr, "tensorscope-cli: unknown command '%s'\n", cmd.c_str());
  return usage(2);
}
