// A run as a Chrome trace (the Trace Event Format that chrome://tracing and https://ui.perfetto.dev open:
// https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU). Issue 14, item 6.
//
// TraceRecorder is a session observer that puts every schedule, compile and kernel launch on a time axis.
// Events carry durations (KernelRunEvent::time_ms, compile_ms) but no start time: a span ends when its
// event arrives (events are dispatched synchronously, right after the launch) or, read back from a
// recording, at the time the recording gave the event; no span starts before the previous one of its lane
// ended.
#pragma once
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "tensorscope/session.h"

namespace ts {

struct TraceSpan {
  std::string name;   // the kernel's name, "compile r_4_4", "schedule 3"
  std::string lane;   // "C launches", "compiles", "schedules": one trace thread each
  double start_us = 0;
  double duration_us = 0;  // 0: an instant event
  std::map<std::string, std::string> args;  // shown when the span is selected
};

class TraceRecorder : public SessionObserver {
 public:
  TraceRecorder();
  void on_event(uint64_t seq, const Event& event) override;  // the event ends now
  void add(const Event& event, double end_us);  // the event ended `end_us` µs into the run
  std::vector<TraceSpan> spans;  // in arrival order

 private:
  double place(const std::string& lane, double end_us, double duration_us);  // the span's start
  std::chrono::steady_clock::time_point t0_;
  std::map<std::string, double> lane_end_us_;
};

// Writes `spans` as Chrome trace JSON ({"traceEvents": [...]}): complete events ("ph": "X") with "ts"
// and "dur" in microseconds, instants ("ph": "i"), and one thread_name metadata event per lane.
// Throws std::runtime_error naming the file when it cannot be written.
void write_chrome_trace(const std::vector<TraceSpan>& spans, const std::string& path, const std::string& script);

}  // namespace ts
