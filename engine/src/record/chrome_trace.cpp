#include "tensorscope/chrome_trace.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace ts {

TraceRecorder::TraceRecorder() : t0_(std::chrono::steady_clock::now()) {}

double TraceRecorder::place(const std::string& lane, double end_us, double duration_us) {
  double& lane_end = lane_end_us_[lane];
  const double start = std::max(end_us - duration_us, lane_end);
  lane_end = start + duration_us;
  last_end_us_ = std::max(last_end_us_, lane_end);
  return start;
}

void TraceRecorder::on_event(uint64_t, const Event& event) {
  add(event, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count());
}

void TraceRecorder::add(const Event& event, double t) {
  if (auto* s = std::get_if<ScheduleEvent>(&event)) add_schedule(*s, t);
  else if (auto* r = std::get_if<KernelRunEvent>(&event)) add_launch(*r, t);
  else if (auto* n = std::get_if<NodesEvent>(&event)) add_nodes(*n, t);
  else if (auto* a = std::get_if<AutotuneTrialEvent>(&event)) add_autotune_trial(*a, t);
}

void TraceRecorder::add_schedule(const ScheduleEvent& s, double t) {
  TraceSpan span{TraceSpan::Schedule, "schedule " + std::to_string(s.schedule_id), kSchedulesLane,
                 place(kSchedulesLane, t, 0), 0, -1, -1, -1, {}};
  size_t kernels = 0;
  for_each_kernel(s, [&](int id, const KernelInfo& k) {
    work_[id] = {k.flops, k.bytes};
    kernels++;
  });
  span.args["kernels"] = std::to_string(kernels);
  if (!s.where.file.empty()) span.args["line"] = s.where.file + ":" + std::to_string(s.where.line);
  spans.push_back(std::move(span));
}

void TraceRecorder::add_launch(const KernelRunEvent& r, double t) {
  const double run_us = r.time_ms * 1e3, compile_us = r.compile_cache_hit ? 0 : r.compile_ms * 1e3;
  if (compile_us > 0) {  // the compile ended before the launch began
    TraceSpan c{TraceSpan::Compile, "compile " + r.name, kCompilesLane, place(kCompilesLane, t - run_us, compile_us),
                compile_us, r.kernel_id, -1, -1, {}};
    c.args["device"] = r.device;
    spans.push_back(std::move(c));
  }
  const std::string lane = device_lane(r.device);
  TraceSpan launch{TraceSpan::Launch, r.name, lane, place(lane, t, run_us), run_us, r.kernel_id, -1, -1, {}};
  auto work = work_.find(r.replayed ? r.replay_of : r.kernel_id);  // a replay did the captured launch's work
  if (work != work_.end()) {
    launch.flops = work->second.first;
    launch.bytes = work->second.second;
    if (r.replayed) work_[r.kernel_id] = work->second;
  }
  if (r.replayed) launch.args["replay_of"] = std::to_string(r.replay_of);
  spans.push_back(std::move(launch));
}

void TraceRecorder::add_nodes(const NodesEvent& n, double t) {
  if (n.size() == 0) {
    last_end_us_ = std::max(last_end_us_, t);
    return;
  }
  // The script made these nodes between the previous event and this one.
  const double from = std::min(last_end_us_, t);
  TraceSpan span{TraceSpan::Script, std::to_string(n.size()) + (n.size() == 1 ? " node" : " nodes"), kScriptLane,
                 place(kScriptLane, t, t - from), t - from, -1, -1, -1, {}};
  int first = 0, last = 0;
  for (size_t i = 0; i < n.size(); i++)
    if (const int line = n.where(i).line; line > 0) {
      first = first ? std::min(first, line) : line;
      last = std::max(last, line);
    }
  if (first) span.args["lines"] = first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
  spans.push_back(std::move(span));
}

void TraceRecorder::add_autotune_trial(const AutotuneTrialEvent& a, double t) {
  // The span is the candidate's compile and one median launch, ending when its event came. The search
  // compiles candidates in parallel and reports them one after another, so a compile may overlap the
  // previous trial's: the span then starts where the previous one ended and is shortened, never pushed
  // later (pushed, the lane would drift past the kernel's launch). The args keep the full times.
  double& lane_end = lane_end_us_[kAutotuneLane];
  const double start = std::max(t - (a.compile_ms + a.time_ms) * 1e3, lane_end), end = std::max(t, start);
  lane_end = end;
  last_end_us_ = std::max(last_end_us_, end);
  TraceSpan span{TraceSpan::AutotuneTrial, a.name + " " + (a.plan.empty() ? "default" : a.plan), kAutotuneLane, start,
                 end - start, a.kernel_id, -1, -1, {}};
  span.args["device"] = a.device;
  span.args["plan"] = a.plan.empty() ? "(default)" : a.plan;
  if (!a.applied.empty()) span.args["applied"] = a.applied;
  span.args["outcome"] = trial_outcome_name(a.outcome);
  if (!a.reason.empty()) span.args["reason"] = a.reason;
  span.args["time_ms"] = std::to_string(a.time_ms);
  span.args["compile_ms"] = std::to_string(a.compile_ms);
  span.args["ir_hash"] = a.ir_hash;
  spans.push_back(std::move(span));
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
    json args = s.args;
    if (s.kernel_id >= 0) args["kernel"] = std::to_string(s.kernel_id);
    if (s.kind == TraceSpan::Launch) {
      args["time_ms"] = std::to_string(s.duration_us / 1e3);
      if (s.flops >= 0) args["flops"] = s.flops;
      if (s.bytes >= 0) args["bytes"] = s.bytes;
      if (s.duration_us > 0 && s.flops >= 0) args["GFLOP/s"] = s.flops / s.duration_us / 1e3;
      if (s.duration_us > 0 && s.bytes >= 0) args["GB/s"] = s.bytes / s.duration_us / 1e3;
    }
    json e = {{"name", s.name}, {"cat", s.lane}, {"pid", kPid}, {"tid", it->second}, {"ts", s.start_us}, {"args", args}};
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
