// A run on a time axis: the spans of the timeline panel and of a Chrome trace (the Trace Event Format that
// chrome://tracing and https://ui.perfetto.dev open:
// https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU). Issue 14, items 5 and 6.
//
// TraceRecorder puts every node batch, schedule, compile, kernel launch and autotune trial on a time axis. Events carry
// durations (KernelRunEvent::time_ms, compile_ms) but no start time: a span ends when its event arrives
// (events are dispatched synchronously, right after the launch) or, read back from a recording or a
// runner's stream, at the time the stream gave the event; no span starts before the previous one of its
// lane ended. `tensorscope-cli run|export --trace`, the debugger's timeline and its File ▸ Export Trace all
// place spans here, so they agree.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensorscope/session.h"

namespace ts {

struct TraceSpan {
  // Script: the Python time that made a batch of graph nodes (from the previous event to the NodesEvent);
  // AutotuneTrial: one candidate of an autotune search (AutotuneTrialEvent), its outcome in args["outcome"].
  enum Kind : uint8_t { Script, Schedule, Compile, Launch, AutotuneTrial };
  Kind kind = Launch;
  std::string name;        // the kernel's name, "compile r_4_4", "schedule 3", "12 nodes"
  std::string lane;        // "script", "schedules", "compiles", "C launches", "autotune": one trace thread each
  double start_us = 0;     // µs since the start of the run
  double duration_us = 0;  // µs; 0: an instant event
  int kernel_id = -1;      // Compile, Launch, AutotuneTrial: KernelInfo::id (a replay: its own id)
  double flops = -1;       // Launch: the kernel's FLOPs per launch (KernelInfo::flops); -1: not known
  double bytes = -1;       // Launch: bytes it moves per launch (KernelInfo::bytes); -1: not known
  std::map<std::string, std::string> args;  // more, shown when the span is selected ("line", "replay_of")
};

// Lane names (a device's launches: device_lane(device)).
inline const char* const kScriptLane = "script";
inline const char* const kSchedulesLane = "schedules";
inline const char* const kCompilesLane = "compiles";
inline const char* const kAutotuneLane = "autotune";
inline std::string device_lane(const std::string& device) { return device + " launches"; }

class TraceRecorder : public SessionObserver {
 public:
  TraceRecorder();
  void on_event(uint64_t seq, const Event& event) override;  // the event ends now
  void add(const Event& event, double end_us);  // the event ended `end_us` µs into the run
  void add_schedule(const ScheduleEvent& event, double end_us);
  void add_launch(const KernelRunEvent& event, double end_us);
  void add_nodes(const NodesEvent& event, double end_us);
  // A trial of the autotune search, on the autotune lane: its compile and its median run as one span that
  // ends at `end_us`, shortened (not moved) where it would overlap the previous trial (parallel compiles).
  void add_autotune_trial(const AutotuneTrialEvent& event, double end_us);
  double last_end_us() const { return last_end_us_; }  // µs: the latest time an event ended
  std::vector<TraceSpan> spans;  // in arrival order

 private:
  double place(const std::string& lane, double end_us, double duration_us);  // the span's start
  std::chrono::steady_clock::time_point t0_;
  std::map<std::string, double> lane_end_us_;
  double last_end_us_ = 0;
  std::unordered_map<int, std::pair<double, double>> work_;  // kernel id -> (FLOPs, bytes) from its schedule
};

// Writes `spans` as Chrome trace JSON ({"traceEvents": [...]}): complete events ("ph": "X") with "ts"
// and "dur" in microseconds, instants ("ph": "i"), and one thread_name metadata event per lane. A launch's
// args hold its kernel id, time_ms and, when known, its FLOPs, bytes, GFLOP/s and GB/s.
// Throws std::runtime_error naming the file when it cannot be written.
void write_chrome_trace(const std::vector<TraceSpan>& spans, const std::string& path, const std::string& script);

}  // namespace ts
