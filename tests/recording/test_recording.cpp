// Recordings: the event codec, the .tsrec writer and reader, and the connection's frames.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tensorscope/recording.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

// ---- helpers ------------------------------------------------------------------------------------------

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

template <class T>
std::string list(const std::vector<T>& v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); i++) s << (i ? "," : "") << v[i];
  s << "]";
  return s.str();
}

std::string describe(const std::vector<BufferInfo>& buffers) {
  std::string out;
  for (const BufferInfo& b : buffers) out += "{" + std::to_string(b.node_uid) + " " + list(b.shape) + " " + b.dtype + "}";
  return out;
}

// Every field of an event as text (independent of the codec), so that EXPECT_EQ shows what differs.
std::string describe(const Event& event) {
  std::ostringstream s;
  if (auto* sc = std::get_if<ScheduleEvent>(&event)) {
    s << "schedule " << sc->schedule_id << "\n";
    for (const GraphNodeInfo& n : sc->nodes)
      s << " node " << n.uid << " " << n.op << " " << n.op_class << " " << list(n.shape) << " " << n.dtype << " "
        << list(n.srcs) << " arg='" << n.arg << "' kernel=" << n.kernel << "\n";
    for (const KernelInfo& k : sc->kernels) {
      s << " kernel " << k.id << " " << k.name << " " << k.device << " " << list(k.node_uids) << " " << list(k.ops)
        << " in=" << describe(k.inputs) << " out=" << describe(k.outputs) << " why=";
      for (const std::string& r : k.boundary_reasons) s << "'" << r << "'";
      s << "\n";
    }
    s << " position_uids=" << list(sc->position_uids) << "\n";
    if (sc->structure) s << " structure:\n" << describe(Event(*sc->structure));
  } else if (auto* r = std::get_if<KernelRunEvent>(&event)) {
    s << "launch " << r->kernel_id << " " << r->name << " " << r->device << " hit=" << r->compile_cache_hit
      << " compile=" << num(r->compile_ms) << " time=" << num(r->time_ms) << " replayed=" << r->replayed
      << " replay_of=" << r->replay_of << "\n";
    if (r->code) {
      for (const PassSnapshot& p : r->code->ir) s << " pass " << p.pass << ":\n" << p.ir << "\n";
      for (const SourceListing& src : r->code->sources)
        s << " source " << src.renderer << " " << list(src.ir_op_line) << ":\n" << src.code << "\n";
      s << " device_renderer " << r->code->device_renderer << "\n";
    } else {
      s << " no code\n";
    }
  } else {
    const auto& o = std::get<ScriptOutputEvent>(event);
    s << "output " << (o.stream == ScriptOutputEvent::Stderr ? "stderr" : "stdout") << ": " << o.text;
  }
  return s.str();
}

std::string describe(const RunInfo& r) {
  std::ostringstream s;
  s << r.script_path << "|" << r.script_text << "|" << list(r.argv) << "|" << r.device << "|" << r.device_properties << "|"
    << r.version << "|" << r.python_version << "|" << r.start_time_ns << "|" << r.ended << "|" << r.exit_status << "|"
    << r.end_message << "|" << r.end_time_ns;
  return s.str();
}

RunInfo sample_run() {
  RunInfo r;
  r.script_path = "/home/ünïcode/tränïng.py";
  r.script_text = "import tensorscope as ts\nprint('héllo — 世界')\n";
  r.argv = {"tränïng.py", "--epochs", "2", ""};
  r.device = "C";
  r.device_properties = R"({"name":"C","backend":"C","memory_bytes":1073741824,"can_run":true})";
  r.version = "0.1";
  r.python_version = "3.11.2";
  r.start_time_ns = 1700000000123456789;
  return r;
}

RunInfo sample_end() {
  RunInfo e;
  e.ended = "signal";
  e.exit_status = 11;
  e.end_message = "ended by signal 11 (SIGSEGV) after kernel #41 r_64_16";
  e.end_time_ns = 1700000009123456789;
  return e;
}

std::shared_ptr<const KernelCode> sample_code(const std::string& tag = "") {
  auto k = std::make_shared<KernelCode>();
  const std::string lowered = "0: BUFFER float32 [4,4]" + tag + "\n1: CONST 1.0\n2: ADD %0 %1\n3: STORE %2\n";
  k->ir = {{"lower", lowered}, {"simplify", lowered}, {"vectorize", "0: BUFFER float32x4 [4]" + tag + "\n1: ADD4 %0 1.0\n"}};
  k->sources = {{"C", "void E_4_4(float* out, const float* a) { /*" + tag + "*/ }\n", {1, 1, 2, 0}},
                {"OpenCL C", "__kernel void E_4_4(__global float* out) { /*" + tag + "*/ }\n", {0, 2, 3, 3}}};
  k->device_renderer = "C";
  return k;
}

ScheduleEvent sample_schedule() {
  ScheduleEvent s;
  s.schedule_id = 7;
  s.nodes = {{100, "BUFFER", "load", {4, 4}, "float32", {}, "", -1},
             {101, "CONST", "const", {}, "float32", {}, "1.0", 0},
             {UINT64_MAX, "ADD", "elementwise", {4, 4}, "float32", {100, 101}, "", 0},
             {103, "SUM", "reduce", {1, 0}, "int32", {UINT64_MAX}, "axes=(0,1) «ü»", 1}};
  s.kernels = {{12, "E_4_4", "C", {101, UINT64_MAX}, {"CONST", "ADD"}, {{100, {4, 4}, "float32"}},
                {{UINT64_MAX, {4, 4}, "float32"}}, {"output feeds a reduce", "input is a realized buffer"}},
               {13, "r_4", "OPENCL:0", {103}, {"SUM"}, {{UINT64_MAX, {4, 4}, "float32"}}, {{103, {1, 0}, "int32"}}, {}}};
  return s;
}

KernelRunEvent sample_launch(int id, std::shared_ptr<const KernelCode> code) {
  KernelRunEvent r;
  r.kernel_id = id;
  r.name = "E_4_4";
  r.device = "C";
  r.code = std::move(code);
  r.compile_cache_hit = id % 2 == 1;
  r.compile_ms = 12.345678901234567;
  r.time_ms = 1e-9 * (id + 1);
  return r;
}

// The structure of a training loop's step (uids are positions), shared by the schedules of every step.
std::shared_ptr<const ScheduleEvent> sample_structure() {
  ScheduleEvent s = sample_schedule();
  s.nodes = {{0, "BUFFER", "load", {4, 4}, "float32", {}, "", -1},
             {1, "CONST", "const", {}, "float32", {}, "1.0", 0},
             {2, "ADD", "elementwise", {4, 4}, "float32", {0, 1}, "", 0},
             {3, "SUM", "reduce", {1, 0}, "int32", {2}, "axes=(0,1) «ü»", 1}};
  s.kernels[0].node_uids = {1, 2};
  s.kernels[0].inputs[0].node_uid = 0;
  s.kernels[0].outputs[0].node_uid = 2;
  s.kernels[1].node_uids = {3};
  s.kernels[1].inputs[0].node_uid = 2;
  s.kernels[1].outputs[0].node_uid = 3;
  return std::make_shared<const ScheduleEvent>(std::move(s));
}

ScheduleEvent structured_schedule(const std::shared_ptr<const ScheduleEvent>& structure, int step) {
  const uint64_t base = 1000 + 10 * static_cast<uint64_t>(step);
  return instantiate_schedule(structure, {base, base + 1, base + 2, UINT64_MAX - step}, {2 * step + 20, 2 * step + 21},
                              step + 100);
}

// One of each kind and variant: schedules (made by hand, empty, two of one structure), a launch with
// code, a device copy (no code), a jit replay, stdout and stderr with non-ASCII text and control characters.
std::vector<Event> every_kind() {
  const auto code = sample_code();
  const auto structure = sample_structure();
  std::vector<Event> ev;
  ev.push_back(sample_schedule());
  ev.push_back(ScheduleEvent{});  // empty
  ev.push_back(structured_schedule(structure, 0));
  ev.push_back(structured_schedule(structure, 1));
  ev.push_back(sample_launch(12, code));
  ev.push_back(sample_launch(13, code));
  KernelRunEvent copy = sample_launch(14, nullptr);
  copy.name = "copy";
  copy.device = "OPENCL:0";
  copy.compile_ms = 0;
  copy.time_ms = 0;
  ev.push_back(copy);
  KernelRunEvent replay = sample_launch(INT32_MAX, nullptr);
  replay.replayed = true;
  replay.replay_of = 12;
  ev.push_back(replay);
  ev.push_back(ScriptOutputEvent{ScriptOutputEvent::Stdout, "loss: 0.25 — époch 1 ✓ 日本語 🚀\n"});
  ev.push_back(ScriptOutputEvent{ScriptOutputEvent::Stderr,
                                 "Traceback:\n  File \"tränïng.py\"\n\tValueError: «bad» \"q\" \\ \x01\x1f\x7f\r\n"});
  ev.push_back(ScriptOutputEvent{ScriptOutputEvent::Stdout, ""});
  return ev;
}

// The error of loading `path` (constructor + read_events), or "" when it loads.
std::string load_error(const std::string& path) {
  try {
    RecordingReader reader(path);
    reader.read_events([](uint64_t, int64_t, const Event&) {});
  } catch (const RecordingError& e) {
    return e.what();
  }
  return "";
}

int64_t count(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  int64_t n = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return n;
}

void exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

class Recording : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/test_recording.XXXXXX";
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // Writes `events` (seq = index, time = 1000 * index) and finishes with sample_end().
  void write(const std::string& file, const std::vector<Event>& events, bool finish = true) {
    EventEncoder encoder;
    RecordingWriter writer(file, sample_run());
    for (size_t i = 0; i < events.size(); i++) {
      std::vector<Blob> blobs;
      EncodedEvent e = encoder.encode(i, static_cast<int64_t>(1000 * i), events[i], blobs);
      writer.add(std::move(blobs), std::move(e));
    }
    if (finish) writer.finish(sample_end());
  }

  std::string dir_;
};

// ---- the codec ----------------------------------------------------------------------------------------

TEST(Codec, EveryKindRoundTrips) {
  const std::vector<Event> events = every_kind();
  EventEncoder encoder;
  EventDecoder decoder;
  std::vector<EncodedEvent> encoded;
  for (size_t i = 0; i < events.size(); i++) {
    std::vector<Blob> blobs;
    encoded.push_back(encoder.encode(i, -5 + static_cast<int64_t>(i), events[i], blobs));
    for (Blob& b : blobs) {
      EXPECT_EQ(b.hash, content_hash(b.data));
      EXPECT_EQ(b.hash.size(), 16u);
      decoder.add_blob(std::move(b));
    }
  }
  const EventKind kinds[] = {EventKind::Schedule, EventKind::Launch, EventKind::Output};
  for (size_t i = 0; i < events.size(); i++) {
    EXPECT_EQ(encoded[i].seq, i);
    EXPECT_EQ(encoded[i].time_ns, -5 + static_cast<int64_t>(i));
    EXPECT_EQ(encoded[i].kind, kinds[events[i].index()]) << i;
    EXPECT_EQ(describe(decoder.decode(encoded[i])), describe(events[i])) << "event " << i << ": " << encoded[i].payload;
  }
  // two launches of one KernelCode decode to one shared KernelCode, two schedules of one structure to one structure
  const Event a = decoder.decode(encoded[4]), b = decoder.decode(encoded[5]);
  EXPECT_EQ(std::get<KernelRunEvent>(a).code, std::get<KernelRunEvent>(b).code);
  ASSERT_NE(std::get<KernelRunEvent>(a).code, nullptr);
  const Event s0 = decoder.decode(encoded[2]), s1 = decoder.decode(encoded[3]);
  ASSERT_NE(std::get<ScheduleEvent>(s0).structure, nullptr);
  EXPECT_EQ(std::get<ScheduleEvent>(s0).structure, std::get<ScheduleEvent>(s1).structure);
  // the second schedule of a structure is its uids, not its nodes again
  EXPECT_LT(encoded[3].payload.size(), encoded[0].payload.size() / 2) << encoded[3].payload;
  EXPECT_STREQ(event_kind_name(EventKind::Schedule), "schedule");
  EXPECT_STREQ(event_kind_name(EventKind::Launch), "launch");
  EXPECT_STREQ(event_kind_name(EventKind::Output), "output");
}

TEST(Codec, ListingsAreGivenOnce) {
  EventEncoder encoder;
  const auto code = sample_code();
  std::vector<Blob> blobs;
  encoder.encode(0, 0, sample_launch(0, code), blobs);
  // "lower" and "simplify" hold one listing: 2 IR listings + 2 sources + the code blob
  EXPECT_EQ(blobs.size(), 5u);
  blobs.clear();
  encoder.encode(1, 0, sample_launch(1, code), blobs);
  EXPECT_TRUE(blobs.empty());
  encoder.encode(2, 0, sample_launch(2, sample_code()), blobs);  // another KernelCode with the same listings
  EXPECT_TRUE(blobs.empty());
  encoder.encode(3, 0, sample_launch(3, sample_code("x")), blobs);
  EXPECT_EQ(blobs.size(), 5u);
}

TEST(Codec, TextThatIsNotUtf8ReadsBackWithReplacementCharacters) {
  EventEncoder encoder;
  EventDecoder decoder;
  std::vector<Blob> blobs;
  const EncodedEvent e = encoder.encode(0, 0, ScriptOutputEvent{ScriptOutputEvent::Stdout, "a\xff" "b\xc3"}, blobs);
  const Event back = decoder.decode(e);
  EXPECT_EQ(std::get<ScriptOutputEvent>(back).text, "a\xef\xbf\xbd" "b\xef\xbf\xbd");
}

TEST(Codec, DecoderRejectsBadInputWithOneLine) {
  EventEncoder encoder;
  std::vector<Blob> blobs;
  const EncodedEvent launch = encoder.encode(3, 0, sample_launch(0, sample_code()), blobs);
  {
    EventDecoder decoder;  // the blobs are missing
    try {
      decoder.decode(launch);
      FAIL() << "decoded a launch whose blobs are missing";
    } catch (const RecordingError& e) {
      EXPECT_NE(std::string(e.what()).find("event 3 (launch)"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("lacks"), std::string::npos) << e.what();
    }
  }
  EventDecoder decoder;
  Blob bad = blobs[0];
  bad.data += " ";
  EXPECT_THROW(decoder.add_blob(bad), RecordingError);
  for (Blob& b : blobs) decoder.add_blob(b);
  EXPECT_NO_THROW(decoder.decode(launch));
  const std::string payloads[] = {"", "{", "[]", "null", R"({"kernel_id":"0"})", R"({"stream":"stdin","text":""})",
                                  R"({"stream":"stdout","text":1})"};
  for (const std::string& p : payloads)
    for (EventKind kind : {EventKind::Schedule, EventKind::Launch, EventKind::Output}) {
      EncodedEvent e{9, 0, kind, p};
      try {
        decoder.decode(e);
        ADD_FAILURE() << "decoded " << p;
      } catch (const RecordingError& x) {
        const std::string m = x.what();
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
        EXPECT_EQ(m.rfind("event 9 (", 0), 0u) << m;
      }
    }
}

TEST(Codec, RunInfoJsonRoundTrips) {
  RunInfo r = sample_run();
  const RunInfo end = sample_end();
  r.ended = end.ended;
  r.exit_status = end.exit_status;
  r.end_message = end.end_message;
  r.end_time_ns = end.end_time_ns;
  const RunInfo back = run_info_from_json(run_info_to_json(r));
  // device_properties is re-serialized: compare it as JSON
  EXPECT_EQ(run_info_from_json(run_info_to_json(back)).device_properties, back.device_properties);
  RunInfo same = back;
  same.device_properties = r.device_properties;
  EXPECT_EQ(describe(same), describe(r));
  EXPECT_THROW(run_info_from_json("{}"), RecordingError);
  EXPECT_THROW(run_info_from_json("not json"), RecordingError);
}

// ---- the file -----------------------------------------------------------------------------------------

TEST_F(Recording, EveryKindRoundTripsThroughTheFile) {
  const std::vector<Event> events = every_kind();
  const std::string file = path("run.tsrec");
  write(file, events);
  EXPECT_FALSE(fs::exists(file + "-wal")) << "a finished recording is one file";
  RecordingReader reader(file);
  RunInfo expected = sample_run();
  const RunInfo end = sample_end();
  expected.ended = end.ended;
  expected.exit_status = end.exit_status;
  expected.end_message = end.end_message;
  expected.end_time_ns = end.end_time_ns;
  EXPECT_EQ(describe(reader.run()), describe(expected));
  EXPECT_EQ(reader.event_count(), events.size());
  size_t i = 0;
  std::shared_ptr<const KernelCode> first_code;
  reader.read_events([&](uint64_t seq, int64_t time_ns, const Event& e) {
    ASSERT_LT(i, events.size());
    EXPECT_EQ(seq, i);
    EXPECT_EQ(time_ns, static_cast<int64_t>(1000 * i));
    EXPECT_EQ(describe(e), describe(events[i])) << "event " << i;
    if (auto* r = std::get_if<KernelRunEvent>(&e); r && r->code) {
      if (!first_code) first_code = r->code;
      EXPECT_EQ(r->code, first_code) << "launches of one kernel share their code";
    }
    i++;
  });
  EXPECT_EQ(i, events.size());
}

TEST_F(Recording, UnfinishedWriterLeavesAnEmptyEnded) {
  const std::string file = path("cut.tsrec");
  write(file, every_kind(), /*finish=*/false);  // the destructor finishes as "cut off"
  RecordingReader reader(file);
  EXPECT_EQ(reader.run().ended, "");
  EXPECT_EQ(reader.event_count(), every_kind().size());
}

TEST_F(Recording, AListingRepeatedByAThousandLaunchesIsStoredOnce) {
  const auto code = sample_code();
  const auto structure = sample_structure();
  std::vector<Event> events;
  for (int i = 0; i < 1000; i++) {  // half share one KernelCode, half are equal copies
    if (i % 10 == 0) events.push_back(structured_schedule(structure, i / 10));
    events.push_back(sample_launch(i, i % 2 ? code : std::make_shared<KernelCode>(*code)));
  }
  const std::string file = path("loop.tsrec");
  write(file, events);
  EXPECT_EQ(count(file, "SELECT count(*) FROM events"), 1100);
  EXPECT_EQ(count(file, "SELECT count(*) FROM events WHERE kind = 'launch'"), 1000);
  // 2 IR listings, 2 sources, 1 code blob, 1 schedule structure
  EXPECT_EQ(count(file, "SELECT count(*) FROM blobs"), 6);
  EXPECT_EQ(count(file, "SELECT count(*) FROM blobs WHERE CAST(data AS TEXT) = '" + code->ir[0].ir + "'"), 1);
  RecordingReader reader(file);
  size_t n = 0;
  reader.read_events([&](uint64_t, int64_t, const Event& e) {
    EXPECT_EQ(describe(e), describe(events[n]));
    n++;
  });
  EXPECT_EQ(n, events.size());
  EXPECT_LT(fs::file_size(file), 400u * 1024) << "1000 launches should not copy the listing";
}

TEST_F(Recording, AnotherReaderSeesEventsWhileTheWriterIsOpen) {
  const std::string file = path("live.tsrec");
  EventEncoder encoder;
  RecordingWriter writer(file, sample_run());
  auto seen_within = [&](size_t events) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
      try {
        if (RecordingReader(file).event_count() >= events) break;
      } catch (const RecordingError&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  auto add = [&](uint64_t seq, const Event& event) {
    std::vector<Blob> blobs;
    EncodedEvent e = encoder.encode(seq, static_cast<int64_t>(seq), event, blobs);
    writer.add(std::move(blobs), std::move(e));
  };
  add(0, ScriptOutputEvent{ScriptOutputEvent::Stdout, "one\n"});
  const double output_ms = seen_within(1);
  add(1, sample_schedule());
  const double schedule_ms = seen_within(2);
  std::printf("a reader saw an output event after %.1f ms and a schedule after %.1f ms\n", output_ms, schedule_ms);
  // committed every 100 ms (a schedule at once); generous bounds for a loaded 2-core machine
  EXPECT_LT(output_ms, 1000);
  EXPECT_LT(schedule_ms, 1000);
  RecordingReader reader(file);  // the writer is still open
  EXPECT_EQ(reader.run().ended, "");
  std::vector<std::string> seen;
  reader.read_events([&](uint64_t, int64_t, const Event& e) { seen.push_back(describe(e)); });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], describe(ScriptOutputEvent{ScriptOutputEvent::Stdout, "one\n"}));
  EXPECT_EQ(seen[1], describe(sample_schedule()));
  writer.finish(sample_end());
  EXPECT_EQ(RecordingReader(file).run().ended, "signal");
}

TEST_F(Recording, AWriterKilledMidRunLeavesTheCommittedEvents) {
  const std::string file = path("killed.tsrec");
  const auto code = sample_code();
  auto event = [&](size_t i) -> Event {
    if (i == 0) return sample_schedule();
    if (i % 3 == 0) return ScriptOutputEvent{ScriptOutputEvent::Stdout, "step " + std::to_string(i) + " ✓\n"};
    return sample_launch(static_cast<int>(i), code);
  };
  constexpr size_t kCommitted = 20;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the "program": writes, says when 20 events are committed, and goes on until killed
    close(ready[0]);
    try {
      EventEncoder encoder;
      RecordingWriter writer(file, sample_run());
      size_t i = 0;
      for (; i < kCommitted; i++) {
        std::vector<Blob> blobs;
        EncodedEvent e = encoder.encode(i, static_cast<int64_t>(i), event(i), blobs);
        writer.add(std::move(blobs), std::move(e));
      }
      const auto t0 = std::chrono::steady_clock::now();
      while (RecordingReader(file).event_count() < kCommitted) {
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) _exit(3);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (::write(ready[1], "r", 1) != 1) _exit(4);
      for (;; i++) {
        std::vector<Blob> blobs;
        EncodedEvent e = encoder.encode(i, static_cast<int64_t>(i), event(i), blobs);
        writer.add(std::move(blobs), std::move(e));
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    } catch (...) {
      _exit(5);
    }
  }
  close(ready[1]);
  pollfd p{ready[0], POLLIN, 0};
  const int polled = poll(&p, 1, 15000);
  char c = 0;
  const bool got_ready = polled == 1 && read(ready[0], &c, 1) == 1;
  close(ready[0]);
  if (got_ready) std::this_thread::sleep_for(std::chrono::milliseconds(150));  // mid-run: more events, commits
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(got_ready) << "the child never committed its first events (exit status " << status << ")";
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;

  RecordingReader reader(file);
  EXPECT_EQ(reader.run().ended, "") << "cut off by SIGKILL";
  EXPECT_EQ(describe(reader.run()), describe(sample_run()));
  EXPECT_GE(reader.event_count(), kCommitted);
  uint64_t next = 0;
  reader.read_events([&](uint64_t seq, int64_t time_ns, const Event& e) {
    EXPECT_EQ(seq, next);
    EXPECT_EQ(time_ns, static_cast<int64_t>(seq));
    EXPECT_EQ(describe(e), describe(event(seq)));
    next++;
  });
  EXPECT_GE(next, kCommitted);
  std::printf("the killed writer left %" PRIu64 " events\n", next);
}

TEST_F(Recording, BadFilesAreRejectedWithAMessageNamingTheFile) {
  const std::string good = path("good.tsrec");
  write(good, every_kind());
  ASSERT_EQ(load_error(good), "");
  const std::string bytes = read_bytes(good);
  ASSERT_GT(bytes.size(), 4096u);

  auto expect_rejected = [](const std::string& file, const std::string& reason) {
    const std::string m = load_error(file);
    EXPECT_NE(m, "") << file << " loaded";
    EXPECT_EQ(m.rfind(file + ": ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_NE(m.find(reason), std::string::npos) << "expected '" << reason << "' in: " << m;
  };

  const std::string empty = path("empty.tsrec");
  write_bytes(empty, "");
  expect_rejected(empty, "empty");

  const std::string half = path("half.tsrec");
  write_bytes(half, bytes.substr(0, bytes.size() / 2));
  expect_rejected(half, "");
  const std::string header = path("header.tsrec");
  write_bytes(header, bytes.substr(0, 50));
  expect_rejected(header, "");
  const std::string one_page = path("one-page.tsrec");
  write_bytes(one_page, bytes.substr(0, 4096));
  expect_rejected(one_page, "");

  const std::string text = path("text.tsrec");
  std::string lines;
  for (int i = 0; i < 100; i++) lines += "this is not a recording\n";
  write_bytes(text, lines);
  expect_rejected(text, "not a Tensorscope recording");

  const std::string other = path("other.sqlite");
  exec(other, "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes(text) VALUES ('hi')");
  expect_rejected(other, "not a Tensorscope recording");

  const std::string newer = path("newer.tsrec");
  write_bytes(newer, bytes);
  exec(newer, "PRAGMA user_version = 2");
  expect_rejected(newer, "newer");

  // a flipped byte in an event's payload: the reader opens it, read_events finds the checksum wrong
  const std::string flipped = path("flipped.tsrec");
  std::string damaged = bytes;
  const size_t at = damaged.find("époch 1");
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(damaged.find("époch 1", at + 1), std::string::npos);
  damaged[at + 7] ^= 0x01;  // "époch 1" -> "époch 0" ("é" is two bytes)
  write_bytes(flipped, damaged);
  EXPECT_NO_THROW(RecordingReader{flipped});
  expect_rejected(flipped, "checksum");

  // a blob whose data does not match its hash
  const std::string blob = path("blob.tsrec");
  damaged = bytes;
  const size_t listing = damaged.find("ADD4 %0 1.0");
  ASSERT_NE(listing, std::string::npos);
  damaged[listing + 3] = '5';
  write_bytes(blob, damaged);
  expect_rejected(blob, "hash");
  const std::string blob_sql = path("blob-sql.tsrec");
  write_bytes(blob_sql, bytes);
  exec(blob_sql, "UPDATE blobs SET data = CAST('something else' AS BLOB) WHERE rowid = 1");
  expect_rejected(blob_sql, "hash");

  expect_rejected(path("missing.tsrec"), "cannot open");
  expect_rejected(dir_, "directory");
}

// ---- the connection -----------------------------------------------------------------------------------

TEST(Frames, ParserTakesBytesOneAtATime) {
  const std::vector<Event> events = every_kind();
  EventEncoder encoder;
  std::vector<Frame> sent;
  sent.push_back({'I', run_info_to_json(sample_run())});
  for (size_t i = 0; i < events.size(); i++) {
    std::vector<Blob> blobs;
    const EncodedEvent e = encoder.encode(i, static_cast<int64_t>(i) - 3, events[i], blobs);
    for (const Blob& b : blobs) sent.push_back({'B', blob_frame_body(b)});
    sent.push_back({'E', event_frame_body(e)});
  }
  sent.push_back({'C', R"({"command":"stop"})"});
  sent.push_back({'X', run_info_to_json(sample_end())});
  std::string stream;
  for (const Frame& f : sent) stream += frame_bytes(f.type, f.body);

  FrameParser parser;
  std::vector<Frame> got;
  Frame frame;
  for (char c : stream) {
    parser.feed(std::string_view(&c, 1));
    while (parser.next(frame)) got.push_back(frame);
  }
  EXPECT_FALSE(parser.next(frame));
  ASSERT_EQ(got.size(), sent.size());
  EventDecoder decoder;
  size_t event = 0;
  for (size_t i = 0; i < sent.size(); i++) {
    EXPECT_EQ(got[i].type, sent[i].type) << i;
    EXPECT_EQ(got[i].body, sent[i].body) << i;
    if (got[i].type == 'B') decoder.add_blob(blob_from_frame_body(got[i].body));
    if (got[i].type == 'E') {
      const EncodedEvent e = event_from_frame_body(got[i].body);
      EXPECT_EQ(e.seq, event);
      EXPECT_EQ(e.time_ns, static_cast<int64_t>(event) - 3);
      EXPECT_EQ(describe(decoder.decode(e)), describe(events[event]));
      event++;
    }
  }
  EXPECT_EQ(event, events.size());
  EXPECT_EQ(run_info_from_json(got.back().body).end_message, sample_end().end_message);
}

TEST(Frames, ParserKeepsUpWithALongStreamInPieces) {
  // more than the 1 MiB after which the parser drops what it has consumed
  std::string stream;
  std::vector<std::string> bodies;
  for (int i = 0; i < 3000; i++) {
    bodies.push_back(std::string(static_cast<size_t>(700 + i % 611), static_cast<char>('a' + i % 26)));
    stream += frame_bytes('B', bodies.back());
  }
  FrameParser parser;
  Frame frame;
  size_t n = 0, at = 0, piece = 1;
  while (at < stream.size()) {
    const size_t len = std::min(stream.size() - at, piece);
    parser.feed(std::string_view(stream).substr(at, len));
    at += len;
    piece = piece * 7 % 5003 + 1;
    while (parser.next(frame)) {
      ASSERT_LT(n, bodies.size());
      ASSERT_EQ(frame.body, bodies[n]) << n;
      n++;
    }
  }
  EXPECT_EQ(n, bodies.size());
}

TEST(Frames, ParserRejectsAnOversizedOrEmptyLength) {
  auto header = [](uint32_t n) {
    std::string h;
    for (int i = 0; i < 4; i++) h.push_back(static_cast<char>(n >> (8 * i)));
    return h + "E";
  };
  for (uint32_t n : {FrameParser::kMaxFrame + 1, 0xffffffffu, 0u}) {
    FrameParser parser;
    parser.feed(header(n));
    Frame frame;
    try {
      parser.next(frame);
      ADD_FAILURE() << "accepted a frame of " << n << " bytes";
    } catch (const RecordingError& e) {
      EXPECT_NE(std::string(e.what()).find("connection"), std::string::npos) << e.what();
    }
  }
  FrameParser parser;  // the largest allowed frame just waits for its bytes
  parser.feed(header(FrameParser::kMaxFrame));
  Frame frame;
  EXPECT_FALSE(parser.next(frame));
}

TEST(Frames, BodiesRoundTripAndShortOnesAreRejected) {
  const EncodedEvent e{UINT64_MAX, INT64_MIN, EventKind::Launch, "{}"};
  const EncodedEvent back = event_from_frame_body(event_frame_body(e));
  EXPECT_EQ(back.seq, e.seq);
  EXPECT_EQ(back.time_ns, e.time_ns);
  EXPECT_EQ(back.kind, e.kind);
  EXPECT_EQ(back.payload, e.payload);
  const Blob b{content_hash("data"), "data"};
  EXPECT_EQ(blob_from_frame_body(blob_frame_body(b)).data, "data");
  EXPECT_EQ(blob_from_frame_body(blob_frame_body(b)).hash, b.hash);
  EXPECT_THROW(event_from_frame_body(std::string(16, '\0')), RecordingError);
  std::string unknown = event_frame_body(e);
  unknown[16] = 9;
  EXPECT_THROW(event_from_frame_body(unknown), RecordingError);
  EXPECT_THROW(blob_from_frame_body("0123456789abcde"), RecordingError);
  EXPECT_EQ(content_hash(""), "cbf29ce484222325");  // FNV-1a offset basis
}

}  // namespace
}  // namespace ts
