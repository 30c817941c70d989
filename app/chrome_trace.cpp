#include "chrome_trace.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace ts {

TraceRecorder::TraceRecorder() : t0_(std::chrono::steady_clock::now()) {}


double TraceRecorder::place(const std::string& lane, double end_us, double duration_us) {
  double& lane_end = lane_end_us_[lane];
  const double start = std::max(end_us - duration_us, lane_end);
  lane_end = start + duration_us;
  return start;
}

void TraceRecorder::on_event(uint64_t, const Event& event) {
  add(event, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count());
}

void TraceRecorder::add(const Event& event, double t) {
  if (auto* s = std::get_if<ScheduleEvent>(&event)) {
    TraceSpan span{"schedule " + std::to_string(s->schedule_id), "schedules", place("schedules", t, 0), 0, {}};
    span.args["kernels"] = std::to_string(s->kernels.size());
    if (!s->where.file.empty()) span.args["line"] = s->where.file + ":" + std::to_string(s->where.line);
    spans.push_back(std::move(span));
  } else if (auto* r = std::get_if<KernelRunEvent>(&event)) {
    const double run_us = r->time_ms * 1e3, compile_us = r->compile_cache_hit ? 0 : r->compile_ms * 1e3;
    if (compile_us > 0) {  // the compile ended before the launch began
      TraceSpan c{"compile " + r->name, "compiles", place("compiles", t - run_us, compile_us), compile_us, {}};
      c.args["kernel"] = std::to_string(r->kernel_id);
      c.args["device"] = r->device;
      spans.push_back(std::move(c));
    }
    const std::string lane = r->device + " launches";
    TraceSpan launch{r->name, lane, place(lane, t, run_us), run_us, {}};
    launch.args["kernel"] = std::to_string(r->kernel_id);
    launch.args["time_ms"] = std::to_string(r->time_ms);
    if (r->replayed) launch.args["replay_of"] = std::to_string(r->replay_of);
    spans.push_back(std::move(launch));
  }
}

void write_chrome_trace(const std::vector<TraceSpan>& spans, const std::string& path, const std::string& script) {
  using nlohmann::json;
  constexpr int kPid = 1;
  json events = json::array();
  std::map<std::string, int> tid;  // lane → trace thread, numbered in order of first appearance
  for (const TraceSpan& s : spans) {
    auto [it, fresh] = tid.emplace(s.lane, static_cast<int>(tid.size()) + 1);
    if (fresh)
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", kPid}, {"tid", it->second},
                        {"args", {{"name", s.lane}}}});
    json e = {{"name", s.name}, {"cat", s.lane}, {"pid", kPid}, {"tid", it->second}, {"ts", s.start_us}, {"args", s.args}};
    if (s.duration_us > 0) {
      e["ph"] = "X";
      e["dur"] = s.duration_us;
    } else {
      e["ph"] = "i";
      e["s"] = "t";  // an instant on its thread
    }
    events.push_back(std::move(e));
  }
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", kPid}, {"args", {{"name", "tensorscope: " + script}}}});
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write the trace to " + path);
  f << json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump() << "\n";
  if (!f) throw std::runtime_error("cannot write the trace to " + path);
}

}  // namespace ts
