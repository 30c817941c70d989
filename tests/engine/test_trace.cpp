// The trace recorder (tensorscope/chrome_trace.h): where the timeline, `--trace` and File ▸ Export Trace put
// each event on the time axis. Spans end when their event does; a lane's spans never overlap; a launch
// carries its kernel's work (a jit replay the captured kernel's); node batches are the script's time between
// events; autotune trials have a lane of their own.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tensorscope/chrome_trace.h"

using namespace ts;

namespace {

ScheduleEvent schedule(int id, int kernel, double flops, double bytes) {
  ScheduleEvent s;
  s.schedule_id = id;
  KernelInfo k;
  k.id = kernel;
  k.name = "r_8_8";
  k.device = "C";
  k.flops = flops;
  k.bytes = bytes;
  s.kernels.push_back(k);
  return s;
}

KernelRunEvent launch(int kernel, double ms, double compile_ms = 0, int replay_of = -1) {
  KernelRunEvent r;
  r.kernel_id = kernel;
  r.name = "r_8_8";
  r.device = "C";
  r.time_ms = ms;
  r.compile_ms = compile_ms;
  r.compile_cache_hit = compile_ms == 0;
  r.replayed = replay_of >= 0;
  r.replay_of = replay_of;
  return r;
}

const TraceSpan* find(const TraceRecorder& t, TraceSpan::Kind kind, int n = 0) {
  for (const TraceSpan& s : t.spans)
    if (s.kind == kind && n-- == 0) return &s;
  return nullptr;
}

}  // namespace

TEST(Trace, SpansEndWithTheirEventsAndNeverOverlapInALane) {
  TraceRecorder t;
  t.add_schedule(schedule(0, 7, 1024, 768), 100);
  t.add_launch(launch(7, 0.05, 2.0), 2200);  // compiled for 2 ms, ran 50 µs, ended at 2200 µs
  const TraceSpan* compile = find(t, TraceSpan::Compile);
  const TraceSpan* run = find(t, TraceSpan::Launch);
  ASSERT_TRUE(compile && run);
  EXPECT_DOUBLE_EQ(run->start_us, 2150);
  EXPECT_DOUBLE_EQ(run->duration_us, 50);
  EXPECT_DOUBLE_EQ(compile->start_us + compile->duration_us, 2150);  // the compile ended when the launch began
  EXPECT_EQ(run->lane, "C launches");
  EXPECT_EQ(run->flops, 1024);
  EXPECT_EQ(run->bytes, 768);
  // an event reported early cannot start before the previous span of its lane ended
  t.add_launch(launch(7, 0.1), 2160);
  const TraceSpan* second = find(t, TraceSpan::Launch, 1);
  EXPECT_DOUBLE_EQ(second->start_us, 2200);
  // a jit replay did the captured launch's work
  t.add_launch(launch(9, 0.01, 0, 7), 3000);
  EXPECT_EQ(find(t, TraceSpan::Launch, 2)->flops, 1024);
  EXPECT_EQ(find(t, TraceSpan::Launch, 2)->args.at("replay_of"), "7");
  // a launch whose schedule was not seen: work not known
  t.add_launch(launch(11, 0.01), 3100);
  EXPECT_EQ(find(t, TraceSpan::Launch, 3)->flops, -1);
}

TEST(Trace, NodeBatchesAreTheScriptsTimeAndTrialsHaveTheirLane) {
  TraceRecorder t;
  t.add_schedule(schedule(0, 1, 1, 1), 500);
  NodesEvent n;
  n.first_uid = 10;
  auto batch = std::make_shared<NodeBatch>();
  batch->nodes.resize(3);
  batch->stack = {-1, -1, -1};
  n.batch = batch;
  t.add_nodes(n, 800);
  const TraceSpan* script = find(t, TraceSpan::Script);
  ASSERT_TRUE(script);
  EXPECT_EQ(script->name, "3 nodes");
  EXPECT_DOUBLE_EQ(script->start_us, 500);  // from the previous event on
  EXPECT_DOUBLE_EQ(script->duration_us, 300);
  AutotuneTrialEvent a;
  a.kernel_id = 1;
  a.name = "r_8_8";
  a.plan = "UPCAST_GLOBAL=4";
  a.compile_ms = 1;
  a.time_ms = 0.5;
  a.outcome = AutotuneTrialEvent::Kept;
  t.add(a, 5000);  // through add(Event): a trial is an event like the others
  const TraceSpan* trial = find(t, TraceSpan::AutotuneTrial);
  ASSERT_TRUE(trial);
  EXPECT_EQ(trial->lane, kAutotuneLane);
  EXPECT_EQ(trial->name, "r_8_8 UPCAST_GLOBAL=4");
  EXPECT_DOUBLE_EQ(trial->start_us, 3500);
  EXPECT_EQ(trial->args.at("outcome"), "kept");
  // a trial compiled beside the previous one (in parallel) and reported right after it: shortened, not pushed
  a.outcome = AutotuneTrialEvent::Timed;
  t.add(a, 5100);
  const TraceSpan& second = t.spans.back();
  EXPECT_EQ(second.kind, TraceSpan::AutotuneTrial);
  EXPECT_DOUBLE_EQ(second.start_us, 5000);
  EXPECT_DOUBLE_EQ(second.duration_us, 100);
  EXPECT_EQ(second.args.at("compile_ms"), std::to_string(1.0));

  // and the file: Chrome trace JSON, one thread per lane, microseconds
  const std::string path = ::testing::TempDir() + "/trace_test.json";
  write_chrome_trace(t.spans, path, "a.py");
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  int threads = 0, spans = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") threads += e["name"] == "thread_name";
    else spans++;
  }
  EXPECT_EQ(threads, 3);  // schedules, script, autotune
  EXPECT_EQ(spans, 4);  // a schedule, a node batch, two trials
}
