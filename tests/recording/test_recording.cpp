// Recordings: the event codec, the .tsrec writer and reader, and the connection's frames.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <tuple>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "ir/builder.h"
#include "tensorscope/ir.h"
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

// Bytes as hex (all of them up to 256, then a checksum and the size), so that a NUL or a lost byte shows.
std::string hex_bytes(const std::string& bytes) {
  std::string out;
  char buf[20];
  for (size_t i = 0; i < bytes.size() && i < 256; i++) {
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(bytes[i]));
    out += buf;
  }
  if (bytes.size() > 256) {
    uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, written here so that describe() does not use the codec
    for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ULL;
    std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
    out += std::string("... fnv1a=") + buf;
  }
  return out + " (" + std::to_string(bytes.size()) + " bytes)";
}

std::string describe(const SourceStack& st) {
  std::string out = "user=" + std::to_string(st.user) + " frames=";
  for (const SourceFrame& f : st.frames) out += "['" + f.file + "' " + std::to_string(f.line) + " '" + f.function + "']";
  return out;
}

// Every field of an event as text (independent of the codec), so that EXPECT_EQ shows what differs.
std::string describe(const Event& event) {
  std::ostringstream s;
  if (auto* sc = std::get_if<ScheduleEvent>(&event)) {
    s << "schedule " << sc->schedule_id << " where='" << sc->where.file << "':" << sc->where.line << "\n";
    for (const GraphNodeInfo& n : sc->nodes)
      s << " node " << n.uid << " " << n.op << " " << n.op_class << " " << list(n.shape) << " " << n.dtype << " "
        << list(n.srcs) << " arg='" << n.arg << "' kernel=" << n.kernel << "\n";
    for (const KernelInfo& k : sc->kernels) {
      s << " kernel " << k.id << " " << k.name << " " << k.device << " " << list(k.node_uids) << " " << list(k.ops)
        << " in=" << describe(k.inputs) << " out=" << describe(k.outputs) << " why=";
      for (const std::string& r : k.boundary_reasons) s << "'" << r << "'";
      s << " flops=" << num(k.flops) << " bytes=" << num(k.bytes) << "\n";
    }
    s << " position_uids=" << list(sc->position_uids) << "\n";
    if (sc->structure) s << " structure:\n" << describe(Event(*sc->structure));
  } else if (auto* r = std::get_if<KernelRunEvent>(&event)) {
    s << "launch " << r->kernel_id << " " << r->name << " " << r->device << " hit=" << r->compile_cache_hit
      << " compile=" << num(r->compile_ms) << " time=" << num(r->time_ms) << " replayed=" << r->replayed
      << " replay_of=" << r->replay_of << "\n";
    if (r->code) {
      for (const PassSnapshot& p : r->code->ir) s << " pass " << p.pass << ":\n" << p.ir() << "\n";
      // every language: the other devices' listings rendered from the kernel IR the recording keeps, so
      // that live and decoded agree only when that IR reads back as it was
      for (const std::string& language : r->code->languages()) {
        const SourceListing& src = *r->code->listing(language);
        s << " source " << src.renderer << " " << list(src.ir_op_line) << ":\n" << src.code << "\n";
      }
      const auto kernel = r->code->kernel_ir();
      s << " kernel:\n" << (kernel ? ir::print(*kernel) : std::string("none")) << "\n";
      s << " device_renderer " << r->code->device_renderer << " plan='" << r->code->plan << "' from='"
        << r->code->plan_from << "' applied='" << r->code->applied << "'\n";
    } else {
      s << " no code\n";
    }
    for (const RecordedBuffer& b : r->buffers) {
      s << " buffer " << b.role << " " << b.index << " " << b.dtype << " numel=" << b.numel << " bytes="
        << (b.bytes ? hex_bytes(*b.bytes) : "null") << " note='" << b.note << "'\n";
    }
  } else if (auto* n = std::get_if<NodesEvent>(&event)) {
    s << "nodes first_uid=" << n->first_uid << " count=" << n->size() << " external=" << list(n->external_uids)
      << " freed=" << list(n->freed_uids) << (n->batch ? "" : " no batch") << "\n";
    if (n->batch) {
      const NodeBatch& b = *n->batch;
      const uint64_t positions = b.nodes.size() + n->external_uids.size();
      for (size_t i = 0; i < b.nodes.size(); i++) {
        const GraphNodeInfo& g = b.nodes[i];
        s << " node " << i << " uid=" << n->uid(i) << " position=" << g.uid << " " << g.op << " " << g.op_class << " "
          << list(g.shape) << " " << g.dtype << " srcs=" << list(g.srcs) << " (uids";
        for (uint64_t p : g.srcs) s << " " << (p < positions ? std::to_string(n->uid_at(p)) : "?");
        s << ") arg='" << g.arg << "' kernel=" << g.kernel;
        const int st = i < b.stack.size() ? b.stack[i] : -2;
        s << " stack=" << st;
        if (st >= 0 && static_cast<size_t>(st) < b.stacks.size()) {
          const SourceLocation where = n->where(i);
          s << " " << describe(b.stacks[static_cast<size_t>(st)]) << " where='" << where.file << "':" << where.line;
        }
        s << "\n";
      }
      if (b.stack.size() != b.nodes.size()) s << " " << b.stack.size() << " stack indexes\n";
      for (size_t k = 0; k < b.stacks.size(); k++) s << " stack " << k << " " << describe(b.stacks[k]) << "\n";
    }
  } else if (auto* t = std::get_if<AutotuneTrialEvent>(&event)) {
    s << "trial " << t->kernel_id << " " << t->name << " " << t->ir_hash << " " << t->device << " plan='" << t->plan
      << "' applied='" << t->applied << "' compile=" << num(t->compile_ms) << " time=" << num(t->time_ms) << " "
      << trial_outcome_name(t->outcome) << " reason='" << t->reason << "'\n";
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
  k->plan = "UPCAST_GLOBAL=8,REGISTER_TILE=0";
  k->plan_from = "BEAM search";
  k->applied = "UPCAST_GLOBAL(8) UPCAST_REDUCE(4)";
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
                {{UINT64_MAX, {4, 4}, "float32"}}, {"output feeds a reduce", "input is a realized buffer"}, {}},
               {13, "r_4", "OPENCL:0", {103}, {"SUM"}, {{UINT64_MAX, {4, 4}, "float32"}}, {{103, {1, 0}, "int32"}}, {}, {}}};
  s.kernels[0].flops = 16;
  s.kernels[0].bytes = 128;
  s.kernels[1].flops = 1e300;  // not known: kernels[1].bytes stays -1
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
  r.time_ms = 1e-9 * (id + 1.0);  // id may be INT_MAX: no int overflow
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

// A batch of created nodes as the engine's node log makes one: node i at position i (uid = i, kernel -1),
// positions 5 and 6 are the event's external uids; three stacks (the user's line below tensorscope's
// frames, a user frame with two callers above it, none outside tensorscope) and a node with no stack.
std::shared_ptr<const NodeBatch> sample_batch() {
  auto b = std::make_shared<NodeBatch>();
  b->nodes = {{0, "CONST", "const", {3, 1}, "float32", {}, "1", -1},
              {1, "RESHAPE", "movement", {1, 3, 1}, "float32", {0}, "shape=(1, 3, 1)", -1},
              {2, "MUL", "elementwise", {1, 3, 3}, "float32", {1, 5}, "", -1},
              {3, "SUM", "reduce", {1, 1, 3}, "int32", {2}, "axes=(1,) «ü»", -1},
              {4, "ADD", "elementwise", {1, 1, 3}, "int32", {3, 6, 3}, "", -1}};
  b->stack = {0, 0, 1, -1, 2};
  b->stacks = {{{{"/usr/lib/python3/site-packages/tensorscope/tensor.py", 120, "Tensor.__mul__"},
                 {"/home/ünïcode/tränïng.py", 12, "<module>"}},
                1},
               {{{"/usr/lib/python3/site-packages/tensorscope/nn.py", 40, "Linear.__call__"},
                 {"/home/ünïcode/módel.py", 7, "Módel.step"},
                 {"/home/ünïcode/tränïng.py", 30, "<module>"}},
                1},
               {{{"<string>", 1, "<lambda>"}, {"", 0, ""}}, -1}};
  return b;
}

// Values of a recorded buffer: three float32s (1.0, 0.0, max) whose bytes include NULs.
std::shared_ptr<const std::string> sample_bytes() {
  return std::make_shared<const std::string>(std::string("\0\0\x80\x3f" "\0\0\0\0" "\xff\xff\x7f\x7f", 12));
}

// The indexes of every_kind()'s NodesEvents: two of one batch, then one that only frees nodes.
constexpr size_t kNodesA = 14, kNodesB = 15, kNodesFreed = 16;

// One of each kind and variant: schedules (made by hand, empty, two of one structure, with a script line),
// a launch with code, a device copy (no code), a jit replay, a launch with recorded buffers, stdout and
// stderr with non-ASCII text and control characters, nodes (two of one batch, one that only frees), autotune
// trials (every outcome).
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
  ScheduleEvent located = sample_schedule();  // 11
  located.schedule_id = 8;
  located.where = {"/home/ünïcode/tränïng — 日本語 🚀.py", 42};
  ev.push_back(located);
  ScheduleEvent step = structured_schedule(structure, 2);  // 12: the where is the schedule's, not the structure's
  step.where = {"/home/ünïcode/tränïng.py", INT32_MAX};
  ev.push_back(step);
  KernelRunEvent recorded = sample_launch(15, code);  // 13
  recorded.buffers = {{"output", 0, "float32", 3, sample_bytes(), ""},
                      {"input", 1, "float16", 1000000, nullptr, "the 64 MB budget of --record-buffers is used up ✗"}};
  ev.push_back(recorded);
  const auto batch = sample_batch();
  ev.push_back(NodesEvent{1000, {77, UINT64_MAX}, batch, {}});                  // 14
  ev.push_back(NodesEvent{2000, {1004, 1003}, batch, {1000, 1001, 1002, 77}});  // 15: the same batch, a later step
  ev.push_back(NodesEvent{0, {}, std::make_shared<const NodeBatch>(), {1003, 2000, UINT64_MAX}});  // 16: frees only
  for (int o = AutotuneTrialEvent::Timed; o <= AutotuneTrialEvent::CacheHit; o++) {  // 17...: one trial per outcome
    AutotuneTrialEvent t;
    t.kernel_id = o == AutotuneTrialEvent::Timed ? -1 : 12 + o;
    t.name = "r_64_16";
    t.ir_hash = "0123456789abcdef";
    t.device = "C";
    t.plan = o ? "UPCAST_GLOBAL=" + std::to_string(1 << o) : "";  // "" = the default plan
    t.applied = o ? "UPCAST_GLOBAL(" + std::to_string(1 << o) + ")" : "";
    t.compile_ms = 31.25 * o;
    t.time_ms = 1e-3 / (o + 1);
    t.outcome = static_cast<AutotuneTrialEvent::Outcome>(o);
    t.reason = o == AutotuneTrialEvent::FailedCompile ? "C device: «error»: expected ';'\n\tat line 3" : "";
    ev.push_back(t);
  }
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
  std::vector<size_t> blob_bytes;  // the bytes of the new blobs each event brought
  for (size_t i = 0; i < events.size(); i++) {
    std::vector<Blob> blobs;
    encoded.push_back(encoder.encode(i, -5 + static_cast<int64_t>(i), events[i], blobs));
    blob_bytes.push_back(0);
    for (Blob& b : blobs) {
      EXPECT_EQ(b.hash, content_hash(b.data));
      EXPECT_EQ(b.hash.size(), 16u);
      blob_bytes.back() += b.data.size();
      decoder.add_blob(std::move(b));
    }
  }
  const EventKind kinds[] = {EventKind::Schedule, EventKind::Launch, EventKind::Output, EventKind::Nodes,
                             EventKind::Trial};
  static_assert(std::variant_size_v<Event> == sizeof kinds / sizeof kinds[0], "a kind for every alternative");
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
  // a structured schedule keeps its own script line (written beside the structure, not in it)
  EXPECT_EQ(std::get<ScheduleEvent>(decoder.decode(encoded[12])).where.line, INT32_MAX);
  EXPECT_EQ(std::get<ScheduleEvent>(decoder.decode(encoded[12])).structure->where.file, "");
  // recorded bytes come back byte for byte, NULs included; a buffer that was not kept stays null
  const KernelRunEvent recorded = std::get<KernelRunEvent>(decoder.decode(encoded[13]));
  ASSERT_EQ(recorded.buffers.size(), 2u);
  ASSERT_NE(recorded.buffers[0].bytes, nullptr);
  EXPECT_EQ(*recorded.buffers[0].bytes, *sample_bytes());
  EXPECT_EQ(recorded.buffers[1].bytes, nullptr);
  EXPECT_EQ(encoded[4].payload.find("buffers"), std::string::npos) << "no buffers: no field";
  // two NodesEvents of one batch decode to one shared batch, which is stored once: the second event is
  // its uids only (no new blob, a payload of a few dozen bytes)
  ASSERT_TRUE(std::holds_alternative<NodesEvent>(events[kNodesA]));
  ASSERT_TRUE(std::holds_alternative<NodesEvent>(events[kNodesB]));
  ASSERT_TRUE(std::holds_alternative<NodesEvent>(events[kNodesFreed]));
  ASSERT_EQ(std::get<NodesEvent>(events[kNodesA]).batch, std::get<NodesEvent>(events[kNodesB]).batch);
  const Event na = decoder.decode(encoded[kNodesA]), nb = decoder.decode(encoded[kNodesB]);
  ASSERT_NE(std::get<NodesEvent>(na).batch, nullptr);
  EXPECT_EQ(std::get<NodesEvent>(na).batch, std::get<NodesEvent>(nb).batch);
  EXPECT_EQ(std::get<NodesEvent>(na).uid_at(6), UINT64_MAX);
  EXPECT_EQ(std::get<NodesEvent>(nb).uid_at(4), 2004u);
  EXPECT_EQ(std::get<NodesEvent>(nb).where(2).file, "/home/ünïcode/módel.py");
  EXPECT_EQ(std::get<NodesEvent>(nb).where(3).file, "");  // no stack
  EXPECT_EQ(std::get<NodesEvent>(nb).where(4).line, 0);   // a stack without a user frame
  EXPECT_GT(blob_bytes[kNodesA], 0u);
  EXPECT_EQ(blob_bytes[kNodesB], 0u) << "the batch was given again";
  EXPECT_LT(encoded[kNodesB].payload.size() + blob_bytes[kNodesB],
            (encoded[kNodesA].payload.size() + blob_bytes[kNodesA]) / 4)
      << encoded[kNodesB].payload;
  EXPECT_EQ(encoded[kNodesB].payload.find("MUL"), std::string::npos) << encoded[kNodesB].payload;
  // a NodesEvent that only frees nodes: an empty batch of its own, the freed uids
  const NodesEvent freed = std::get<NodesEvent>(decoder.decode(encoded[kNodesFreed]));
  ASSERT_NE(freed.batch, nullptr);
  EXPECT_NE(freed.batch, std::get<NodesEvent>(na).batch);
  EXPECT_EQ(freed.size(), 0u);
  EXPECT_EQ(freed.freed_uids, (std::vector<uint64_t>{1003, 2000, UINT64_MAX}));
  EXPECT_STREQ(event_kind_name(EventKind::Schedule), "schedule");
  EXPECT_STREQ(event_kind_name(EventKind::Launch), "launch");
  EXPECT_STREQ(event_kind_name(EventKind::Output), "output");
  EXPECT_STREQ(event_kind_name(EventKind::Nodes), "nodes");
  EXPECT_STREQ(event_kind_name(EventKind::Trial), "trial");
  for (EventKind k : kinds) EXPECT_EQ(event_kind_from_name(event_kind_name(k)), k);
  for (const char* name : {"", "node", "Nodes", "nodes ", "?", "launch\n"}) {
    try {
      event_kind_from_name(name);
      ADD_FAILURE() << "a kind named '" << name << "'";
    } catch (const RecordingError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
}

// The engine emits a schedule of a cached structure thin (structure, uids and kernel ids only): it encodes
// to the same payload as the full event would, and full_schedule gives that full event.
TEST(Codec, AThinScheduleEncodesAsItsFullInstantiation) {
  const auto structure = sample_structure();
  ScheduleEvent full = structured_schedule(structure, 3);
  full.where = {"/home/ünïcode/tränïng.py", 7};
  ScheduleEvent thin;
  thin.schedule_id = full.schedule_id;
  thin.where = full.where;
  thin.structure = structure;
  thin.position_uids = full.position_uids;
  thin.kernel_ids = {26, 27};  // structured_schedule's ids for step 3
  ASSERT_TRUE(thin.thin());
  ASSERT_FALSE(full.thin());
  EXPECT_EQ(describe(Event(full_schedule(thin))), describe(Event(full)));
  EventEncoder a, b;
  std::vector<Blob> blobs_a, blobs_b;
  EXPECT_EQ(a.encode(1, 5, thin, blobs_a).payload, b.encode(1, 5, full, blobs_b).payload);
  EXPECT_EQ(blobs_a.size(), blobs_b.size());
}

// A decoder that keeps schedules thin (the debugger's) gives a repeated structure's schedules as the structure,
// their uids and kernel ids: the same event once instantiated, one structure shared by all, and the same
// checks on positions and kernel ids as instantiating them makes.
TEST(Codec, ADecoderKeepingSchedulesThinGivesThemThin) {
  const std::vector<Event> events = every_kind();
  EventEncoder encoder;
  EventDecoder whole, thin;
  thin.keep_schedules_thin(true);
  std::vector<EncodedEvent> encoded;
  for (size_t i = 0; i < events.size(); i++) {
    std::vector<Blob> blobs;
    encoded.push_back(encoder.encode(i, static_cast<int64_t>(i), events[i], blobs));
    for (const Blob& b : blobs) {
      whole.add_blob(b);
      thin.add_blob(b);
    }
  }
  int thin_ones = 0;
  std::shared_ptr<const ScheduleEvent> structure;
  for (size_t i = 0; i < events.size(); i++) {
    const Event w = whole.decode(encoded[i]), t = thin.decode(encoded[i]);
    if (const auto* s = std::get_if<ScheduleEvent>(&t); s && s->thin()) {
      thin_ones++;
      EXPECT_TRUE(s->nodes.empty() && s->kernels.empty());
      EXPECT_EQ(describe(Event(full_schedule(*s))), describe(w)) << "event " << i;
      EXPECT_EQ(describe(Event(full_schedule(*s))), describe(events[i])) << "event " << i;
      if (structure) {
        EXPECT_EQ(s->structure, structure) << "one structure, decoded once";
      }
      structure = s->structure;
    } else {
      EXPECT_EQ(describe(t), describe(w)) << "event " << i;  // everything else decodes as before
    }
  }
  EXPECT_EQ(thin_ones, 3);  // every_kind()'s schedules of sample_structure()
  // a thin schedule's positions and kernel ids are checked as instantiating it would check them
  const std::string& good = encoded[3].payload;  // the second schedule of the structure: thin
  const size_t uids = good.find("\"position_uids\":["), ids = good.find("\"kernel_ids\":[");
  ASSERT_NE(uids, std::string::npos) << good;
  ASSERT_NE(ids, std::string::npos) << good;
  std::string too_few = good;  // one position where the structure names four
  too_few.replace(uids, good.find(']', uids) - uids, "\"position_uids\":[1");
  std::string too_many = good;  // three kernel ids for its two kernels
  too_many.insert(ids + 14, "99,");
  for (const auto& [payload, reason] :
       std::vector<std::pair<std::string, std::string>>{{too_few, "out of range"}, {too_many, "kernel ids for"}}) {
    EncodedEvent bad = encoded[3];
    bad.payload = payload;
    for (EventDecoder* d : {&whole, &thin}) {
      try {
        d->decode(bad);
        ADD_FAILURE() << "read " << payload;
      } catch (const RecordingError& e) {
        EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
      }
    }
  }
}

TEST(Codec, NodesWithoutABatchReadBackAsAnEmptyBatch) {
  EventEncoder encoder;
  EventDecoder decoder;
  std::vector<Blob> blobs;
  const EncodedEvent e = encoder.encode(0, 0, NodesEvent{5, {}, nullptr, {1, 2}}, blobs);
  for (Blob& b : blobs) decoder.add_blob(std::move(b));
  const NodesEvent back = std::get<NodesEvent>(decoder.decode(e));
  ASSERT_NE(back.batch, nullptr);
  EXPECT_EQ(back.size(), 0u);
  EXPECT_EQ(back.first_uid, 5u);
  EXPECT_EQ(back.freed_uids, (std::vector<uint64_t>{1, 2}));
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

// JsonWriter copies runs of plain bytes whole and escapes the rest: every kind of byte, at the start,
// in the middle and at the end of a string, reads back as it was (invalid UTF-8 as U+FFFD).
TEST(Codec, EveryByteOfAStringReadsBack) {
  std::string all;  // every control character, the two that JSON escapes, DEL, valid UTF-8 of each length
  for (int c = 0; c < 0x20; c++) all += static_cast<char>(c);
  all += "\"\\\x7f" "é—世𝄞 plain text ";
  // a stray byte, then sequences cut short (2, 3 and 4 bytes long): each byte that is not part of a
  // valid sequence becomes one U+FFFD
  const std::string invalid = "\xff" "\xc3" "\xe4\xb8" "\xf0\x9d\x84";
  std::string invalid_read;
  for (int i = 0; i < 7; i++) invalid_read += "\xef\xbf\xbd";
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"", ""},
           {all, all},
           {all + all + std::string(10000, 'x') + all, all + all + std::string(10000, 'x') + all},
           {invalid + "ok" + invalid, invalid_read + "ok" + invalid_read},
           {"a\\" + std::string(1, '\0') + "b\"", "a\\" + std::string(1, '\0') + "b\""}}) {
    EventEncoder encoder;
    EventDecoder decoder;
    std::vector<Blob> blobs;
    const EncodedEvent e = encoder.encode(0, 0, ScriptOutputEvent{ScriptOutputEvent::Stderr, text}, blobs);
    EXPECT_EQ(std::get<ScriptOutputEvent>(decoder.decode(e)).text, expected) << e.payload;
  }
}

// Times are written as the shortest text that reads back as the same double.
TEST(Codec, NumbersReadBackExactly) {
  for (double v : {0.0, -0.0, 1.0, 0.1, 1.0 / 3.0, 12.345678901234567, 1e-300, 5e-324, 9.9e307, -2.5e17,
                   123456789.125}) {
    EventEncoder encoder;
    EventDecoder decoder;
    std::vector<Blob> blobs;
    KernelRunEvent r = sample_launch(1, nullptr);
    r.time_ms = v;
    r.compile_ms = -v;
    const EncodedEvent e = encoder.encode(0, 0, r, blobs);
    const KernelRunEvent back = std::get<KernelRunEvent>(decoder.decode(e));
    EXPECT_EQ(num(back.time_ms), num(v)) << e.payload;
    EXPECT_EQ(num(back.compile_ms), num(-v)) << e.payload;
    EXPECT_NE(e.payload.find("\"time_ms\":"), std::string::npos);
  }
}

// Launches written by EventEncoder are read without a JSON tree; any other spelling of the same payload
// (spaces, escapes, non-ASCII names, another key order) takes the JSON path and reads back the same.
TEST(Codec, APlainLaunchAndAnyOtherSpellingReadTheSame) {
  std::vector<KernelRunEvent> launches;
  for (const char* name : {"E_4_4", "r_\"quoted\"_4", "ünïcode_kernel", ""}) {
    KernelRunEvent r = sample_launch(INT32_MAX, sample_code());
    r.name = name;
    r.replay_of = 3;
    r.replayed = true;
    r.time_ms = -0.0;
    launches.push_back(r);
    r.code = nullptr;
    r.kernel_id = 0;
    r.replay_of = -1;
    r.compile_ms = 1e-300;
    launches.push_back(r);
  }
  for (const KernelRunEvent& launch : launches) {
    EventEncoder encoder;
    EventDecoder decoder;
    std::vector<Blob> blobs;
    const EncodedEvent e = encoder.encode(0, 0, launch, blobs);
    for (Blob& b : blobs) decoder.add_blob(std::move(b));
    EXPECT_EQ(describe(decoder.decode(e)), describe(launch)) << e.payload;
    EncodedEvent spaced = e;  // the same JSON with spaces: read by nlohmann::json
    for (size_t at = spaced.payload.find(','); at != std::string::npos; at = spaced.payload.find(',', at + 2))
      spaced.payload.insert(at + 1, " ");
    EXPECT_EQ(describe(decoder.decode(spaced)), describe(launch)) << spaced.payload;
  }
  // values the plain reader does not take are still checked (by the JSON path)
  EventEncoder encoder;
  EventDecoder decoder;
  std::vector<Blob> blobs;
  const EncodedEvent good = encoder.encode(0, 0, sample_launch(7, nullptr), blobs);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"kernel_id\":7", "\"kernel_id\":-7"}, {"\"kernel_id\":7", "\"kernel_id\":7.5"},
           {"\"kernel_id\":7", "\"kernel_id\":07"}, {"\"kernel_id\":7", "\"kernel_id\":99999999999999999999"},
           {"\"replay_of\":-1", "\"replay_of\":-2"}, {"\"replayed\":false", "\"replayed\":0"},
           {"\"code\":null", "\"code\":1"}, {"\"compile_ms\":", "\"compile_ms\":1e999,\"x\":"}}) {
    EncodedEvent bad = good;
    const size_t at = bad.payload.find(from);
    ASSERT_NE(at, std::string::npos) << from << " in " << good.payload;
    bad.payload.replace(at, from.size(), to);
    try {
      ADD_FAILURE() << "read " << bad.payload << " as " << describe(decoder.decode(bad));
    } catch (const RecordingError& x) {
      EXPECT_NE(std::string(x.what()).find("event 0 (launch)"), std::string::npos) << x.what();
    }
  }
}

// A cached schedule's and a nodes event's payloads are read without a JSON tree when written as the encoder
// writes them; any other spelling goes through nlohmann::json, and both read the same.
TEST(Codec, PlainSchedulesAndNodesAndAnyOtherSpellingReadTheSame) {
  std::vector<Event> events;
  for (int step = 0; step < 3; step++) {
    ScheduleEvent s = structured_schedule(sample_structure(), step);
    if (step == 1) s.where = {"/home/ünïcode/tränïng.py", 12};  // not plain ASCII: the JSON path
    if (step == 2) s.where = {"train.py", 7};
    events.push_back(ScheduleEvent(s));
  }
  NodesEvent n;
  n.first_uid = 40;
  n.batch = sample_batch();
  n.external_uids = {3, UINT64_MAX / 1024};
  n.freed_uids = {1, 2, 3};
  events.push_back(n);
  n.freed_uids.clear();
  n.first_uid = 0;
  events.push_back(n);
  EventEncoder encoder;
  EventDecoder decoder;
  for (size_t i = 0; i < events.size(); i++) {
    std::vector<Blob> blobs;
    const EncodedEvent e = encoder.encode(i, 0, events[i], blobs);
    for (Blob& b : blobs) decoder.add_blob(std::move(b));
    const std::string plain = describe(decoder.decode(e));
    EncodedEvent spaced = e;  // the same JSON with spaces: read by nlohmann::json
    for (size_t at = spaced.payload.find(','); at != std::string::npos; at = spaced.payload.find(',', at + 2))
      spaced.payload.insert(at + 1, " ");
    EXPECT_EQ(describe(decoder.decode(spaced)), plain) << spaced.payload;
    EXPECT_EQ(plain, describe(events[i])) << e.payload;
  }
  // what the plain readers do not take is still checked (by the JSON path)
  std::vector<Blob> blobs;
  const EncodedEvent schedule = encoder.encode(9, 0, events[2], blobs);
  const EncodedEvent nodes = encoder.encode(10, 0, events[3], blobs);
  for (const auto& [good, from, to] : std::vector<std::tuple<EncodedEvent, std::string, std::string>>{
           {schedule, "\"schedule_id\":102", "\"schedule_id\":-1"}, {schedule, "\"line\":7", "\"line\":-7"},
           {schedule, "\"position_uids\":[", "\"position_uids\":[-1,"}, {schedule, "\"kernel_ids\":[", "\"kernel_ids\":[7.5,"},
           {nodes, "\"count\":5", "\"count\":4"}, {nodes, "\"external_uids\":[3,", "\"external_uids\":["},
           {nodes, "\"freed_uids\":[1", "\"freed_uids\":[-1"}, {nodes, "\"first_uid\":40", "\"first_uid\":1e3"}}) {
    EncodedEvent bad = good;
    const size_t at = bad.payload.find(from);
    ASSERT_NE(at, std::string::npos) << from << " in " << good.payload;
    bad.payload.replace(at, from.size(), to);
    EXPECT_THROW(decoder.decode(bad), RecordingError) << bad.payload;
  }
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
    for (EventKind kind : {EventKind::Schedule, EventKind::Launch, EventKind::Output, EventKind::Nodes, EventKind::Trial}) {
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

// The decoder's message for `e`: one line that names the event, or "" when it decodes.
std::string rejection(EventDecoder& decoder, const EncodedEvent& e) {
  try {
    decoder.decode(e);
  } catch (const RecordingError& x) {
    const std::string m = x.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_EQ(m.rfind("event " + std::to_string(e.seq) + " (" + event_kind_name(e.kind) + "): ", 0), 0u) << m;
    return m.empty() ? "(an empty message)" : m;
  }
  return "";
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "no '" << from << "' in " << s;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(Codec, DecoderRejectsBadNodesWithOneLine) {
  EventEncoder encoder;
  EventDecoder decoder;
  auto encode = [&](uint64_t seq, const Event& event) {
    std::vector<Blob> blobs;
    EncodedEvent e = encoder.encode(seq, 0, event, blobs);
    for (Blob& b : blobs) decoder.add_blob(std::move(b));
    return e;
  };
  auto expect_rejected = [&](const EncodedEvent& e, const std::string& reason) {
    const std::string m = rejection(decoder, e);
    EXPECT_NE(m, "") << "decoded " << e.payload;
    EXPECT_NE(m.find(reason), std::string::npos) << "expected '" << reason << "' in: " << m;
  };
  const auto batch = sample_batch();
  const EncodedEvent good = encode(20, NodesEvent{1000, {77, 78}, batch, {3}});
  ASSERT_EQ(rejection(decoder, good), "");
  {
    EventDecoder without_blobs;
    const std::string m = rejection(without_blobs, good);
    EXPECT_NE(m.find("lacks"), std::string::npos) << m;
  }
  // the count says how many nodes the batch holds
  ASSERT_NE(good.payload.find("\"count\":5,"), std::string::npos) << good.payload;
  for (const char* count : {"\"count\":4,", "\"count\":6,", "\"count\":0,", "\"count\":-5,", "\"count\":\"5\","}) {
    EncodedEvent e = good;
    e.payload = replaced(e.payload, "\"count\":5,", count);
    expect_rejected(e, "count");
  }
  // a source position past the batch's nodes and its external uids: node 4 reads position 6, and this
  // event of the (cached, shared) batch names one external uid only
  expect_rejected(encode(21, NodesEvent{2000, {77}, batch, {}}), "source position 6 is out of range");
  auto too_far = std::make_shared<NodeBatch>(*batch);
  too_far->nodes[1].srcs = {7};  // 5 nodes + 2 external uids: positions 0..6
  expect_rejected(encode(22, NodesEvent{3000, {77, 78}, too_far, {}}), "source position 7 is out of range");
  auto far_far = std::make_shared<NodeBatch>(*batch);
  far_far->nodes[0].srcs = {UINT64_MAX};
  expect_rejected(encode(23, NodesEvent{4000, {77, 78}, far_far, {}}), "out of range");
  // a stack index past the stacks, a user frame past the frames
  auto bad_stack = std::make_shared<NodeBatch>(*batch);
  bad_stack->stack[2] = 3;
  expect_rejected(encode(24, NodesEvent{5000, {77, 78}, bad_stack, {}}), "'stack' is out of range");
  bad_stack = std::make_shared<NodeBatch>(*batch);
  bad_stack->stack[2] = -2;
  expect_rejected(encode(25, NodesEvent{6000, {77, 78}, bad_stack, {}}), "'stack' is out of range");
  auto bad_user = std::make_shared<NodeBatch>(*batch);
  bad_user->stacks[1].user = 3;
  expect_rejected(encode(26, NodesEvent{7000, {77, 78}, bad_user, {}}), "'user' is out of range");
  // frames that are not [file, line, function]: batch blobs written by hand
  for (const char* frame : {R"(["f.py", 1])", R"(["f.py", 1, "g", 2])", R"([1, 1, "g"])", R"(["f.py", 1, null])",
                            R"({"file": "f.py", "line": 1, "function": "g"})", R"("f.py:1")", R"(["f.py", "1", "g"])",
                            R"(["f.py", 1.5, "g"])"}) {
    const std::string blob = std::string(R"({"nodes": [], "stacks": [{"user": 0, "frames": [)") + frame + "]}]}";
    decoder.add_blob({content_hash(blob), blob});
    const EncodedEvent e{27, 0, EventKind::Nodes,
                         R"({"first_uid":1,"count":0,"batch":")" + content_hash(blob) +
                             R"(","external_uids":[],"freed_uids":[]})"};
    expect_rejected(e, "");
  }
  // uids that are not unsigned integers
  const std::pair<const char*, const char*> uids[] = {{"\"first_uid\":1000", "\"first_uid\":-1000"},
                                                      {"\"first_uid\":1000", "\"first_uid\":\"1000\""},
                                                      {"\"external_uids\":[77", "\"external_uids\":[-77"},
                                                      {"\"freed_uids\":[3", "\"freed_uids\":[3.5"}};
  for (const auto& [from, to] : uids) {
    EncodedEvent e = good;
    e.payload = replaced(e.payload, from, to);
    expect_rejected(e, "unsigned");
  }
}

TEST(Codec, DecoderRejectsBadRecordedBuffersWithOneLine) {
  EventEncoder encoder;
  EventDecoder decoder;
  auto encode = [&](uint64_t seq, std::vector<RecordedBuffer> buffers) {
    KernelRunEvent launch = sample_launch(static_cast<int>(seq), nullptr);
    launch.buffers = std::move(buffers);
    std::vector<Blob> blobs;
    EncodedEvent e = encoder.encode(seq, 0, launch, blobs);
    for (Blob& b : blobs) decoder.add_blob(std::move(b));
    return e;
  };
  auto bytes = [](size_t n) { return std::make_shared<const std::string>(std::string(n, '\0')); };
  // the blob holds numel values of the dtype's size: float16 2 bytes, bool 1, float32 and int32 4
  EXPECT_EQ(rejection(decoder, encode(30, {{"output", 0, "float32", 3, bytes(12), ""},
                                           {"input", 0, "float16", 3, bytes(6), ""},
                                           {"input", 1, "bool", 3, bytes(3), ""},
                                           {"input", 2, "int32", 2, bytes(8), ""},
                                           {"input", 3, "float32", 0, bytes(0), ""},
                                           {"input", 4, "float32", INT64_MAX / 4, nullptr, "too big"}})),
            "");
  const struct {
    const char* dtype;
    int64_t numel;
    size_t bytes;
  } wrong[] = {{"float32", 3, 11}, {"float32", 3, 13}, {"float32", 3, 0}, {"float16", 3, 12},
               {"bool", 3, 12},    {"int32", 3, 6},    {"float32", 0, 1}, {"bool", 1, 0}};
  uint64_t seq = 31;
  for (const auto& w : wrong) {
    const EncodedEvent e = encode(seq++, {{"output", 0, w.dtype, w.numel, bytes(w.bytes), ""}});
    const std::string m = rejection(decoder, e);
    EXPECT_NE(m.find("size does not match"), std::string::npos)
        << w.dtype << " numel " << w.numel << " in " << w.bytes << " bytes: '" << m << "'";
  }
  // a role other than output or input
  for (const char* role : {"sideways", "", "Output", "inputs"}) {
    const std::string m = rejection(decoder, encode(seq++, {{role, 0, "float32", 1, bytes(4), ""}}));
    EXPECT_NE(m.find("role"), std::string::npos) << role << ": '" << m << "'";
  }
  // negative numel or index, a blob that is neither a hash nor null, a blob the recording lacks
  const EncodedEvent good = encode(seq++, {{"output", 0, "float32", 1, nullptr, "not kept"}});
  ASSERT_EQ(rejection(decoder, good), "");
  // a multi-output kernel's second output
  ASSERT_EQ(rejection(decoder, encode(seq++, {{"output", 0, "float32", 1, nullptr, "not kept"},
                                              {"output", 1, "float32", 1, nullptr, "not kept"}})), "");
  const std::pair<const char*, const char*> edits[] = {{"\"numel\":1", "\"numel\":-1"},
                                                       {"\"index\":0", "\"index\":-1"},
                                                       {"\"blob\":null", "\"blob\":7"},
                                                       {"\"blob\":null", "\"blob\":\"0123456789abcdef\""},
                                                       {"\"role\":\"output\"", "\"role\":1"},
                                                       {"\"buffers\":[", "\"buffers\":{},\"x\":["},
                                                       {"\"note\":\"not kept\"", "\"note\":null"},
                                                       // numel * 4 would overflow to 0 bytes
                                                       {"\"numel\":1", "\"numel\":4611686018427387904"},
                                                       {"\"dtype\":\"float32\"", "\"dtype\":\"float64\""},
                                                       // outputs are numbered like inputs (a multi-output
                                                       // kernel has several), but not past the id range
                                                       {"\"index\":0", "\"index\":99999999999999"}};
  for (const auto& [from, to] : edits) {
    EncodedEvent e = good;
    e.payload = replaced(e.payload, from, to);
    ASSERT_NE(e.payload, good.payload) << from;
    EXPECT_NE(rejection(decoder, e), "") << e.payload;
  }
}

TEST(Codec, ScheduleWhereIsOptionalAndChecked) {
  EventEncoder encoder;
  EventDecoder decoder;
  ScheduleEvent s = sample_schedule();
  s.where = {"/home/ünïcode/tränïng.py", 9};
  std::vector<Blob> blobs;
  const EncodedEvent e = encoder.encode(40, 0, s, blobs);
  ASSERT_NE(e.payload.find("\"where\":{"), std::string::npos) << e.payload;
  // a recording made before "where" existed lacks it: an unknown line
  EncodedEvent old = e;
  old.payload = replaced(old.payload, R"("where":{"file":"/home/ünïcode/tränïng.py","line":9},)", "");
  const ScheduleEvent back = std::get<ScheduleEvent>(decoder.decode(old));
  EXPECT_EQ(back.where.file, "");
  EXPECT_EQ(back.where.line, 0);
  for (const char* bad : {R"("where":{"file":"a.py","line":-1},)", R"("where":{"file":"a.py"},)",
                          R"("where":{"line":3},)", R"("where":{"file":3,"line":3},)", R"("where":null,)",
                          R"("where":{"file":"a.py","line":2147483648},)", R"("where":"a.py:3",)"}) {
    EncodedEvent x = e;
    x.payload = replaced(x.payload, R"("where":{"file":"/home/ünïcode/tränïng.py","line":9},)", bad);
    EXPECT_NE(rejection(decoder, x), "") << x.payload;
  }
}

TEST(Codec, KernelWorkIsOptional) {
  EventEncoder encoder;
  EventDecoder decoder;
  std::vector<Blob> blobs;
  const EncodedEvent e = encoder.encode(41, 0, sample_schedule(), blobs);
  const ScheduleEvent back = std::get<ScheduleEvent>(decoder.decode(e));
  EXPECT_EQ(back.kernels[0].flops, 16);
  EXPECT_EQ(back.kernels[0].bytes, 128);
  EXPECT_EQ(back.kernels[1].flops, 1e300);
  EXPECT_EQ(back.kernels[1].bytes, -1);
  // a recording made before kernels' work was counted lacks both: not known (-1)
  EncodedEvent old = e;
  old.payload = replaced(old.payload, R"(,"flops":16.0,"bytes":128.0)", "");
  const ScheduleEvent older = std::get<ScheduleEvent>(decoder.decode(old));
  EXPECT_EQ(older.kernels[0].flops, -1);
  EXPECT_EQ(older.kernels[0].bytes, -1);
  EncodedEvent bad = e;
  bad.payload = replaced(bad.payload, R"("flops":16.0)", R"("flops":"16")");
  EXPECT_NE(rejection(decoder, bad), "") << bad.payload;
}

TEST(Codec, KernelPlanIsOptionalAndTrialsAreChecked) {
  EventEncoder encoder;
  EventDecoder decoder;
  std::vector<Blob> blobs;
  const EncodedEvent launch = encoder.encode(5, 0, sample_launch(0, sample_code()), blobs);
  for (Blob& b : blobs) decoder.add_blob(b);
  const KernelRunEvent back = std::get<KernelRunEvent>(decoder.decode(launch));
  EXPECT_EQ(back.code->plan_from, "BEAM search");
  EXPECT_EQ(back.code->applied, "UPCAST_GLOBAL(8) UPCAST_REDUCE(4)");
  // a code blob written before plans were recorded lacks them: empty
  KernelCode old = *sample_code("old");
  old.plan = old.plan_from = old.applied = "";
  std::vector<Blob> old_blobs;
  EventEncoder old_encoder;
  EncodedEvent older = old_encoder.encode(6, 0, sample_launch(1, std::make_shared<const KernelCode>(old)), old_blobs);
  EventDecoder old_decoder;
  for (Blob& b : old_blobs) {
    if (b.data.find("device_renderer") != std::string::npos) {  // the code blob, as an older build wrote it
      b.data = replaced(replaced(replaced(b.data, R"(,"plan":"")", ""), R"(,"plan_from":"")", ""), R"(,"applied":"")", "");
      const std::string hash = content_hash(b.data);
      older.payload = replaced(older.payload, b.hash, hash);
      b.hash = hash;
    }
    old_decoder.add_blob(b);
  }
  const KernelRunEvent o = std::get<KernelRunEvent>(old_decoder.decode(older));
  ASSERT_NE(o.code, nullptr);
  EXPECT_EQ(o.code->plan_from, "");
  // a trial's outcome is one of the words; its numbers are numbers
  AutotuneTrialEvent t;
  t.kernel_id = 3;
  t.outcome = AutotuneTrialEvent::Timeout;
  const EncodedEvent trial = encoder.encode(7, 0, t, blobs);
  EXPECT_EQ(trial.kind, EventKind::Trial);
  EXPECT_NE(trial.payload.find(R"("outcome":"timeout")"), std::string::npos) << trial.payload;
  EXPECT_EQ(std::get<AutotuneTrialEvent>(decoder.decode(trial)).outcome, AutotuneTrialEvent::Timeout);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {R"("outcome":"timeout")", R"("outcome":"slow")"},
           {R"("outcome":"timeout")", R"("outcome":3)"},
           {R"("time_ms":0.0)", R"("time_ms":"0")"},
           {R"("kernel_id":3)", R"("kernel_id":-2)"},
           {R"(,"reason":"")", ""}}) {
    EncodedEvent bad = trial;
    bad.payload = replaced(bad.payload, from, to);
    ASSERT_NE(bad.payload, trial.payload) << from;
    EXPECT_NE(rejection(decoder, bad), "") << bad.payload;
  }
}

// The target of the kernel IR a launch event carries, decoded with `blobs`.
ir::Target decoded_target(const std::vector<Blob>& blobs, const EncodedEvent& launch) {
  EventDecoder decoder;
  for (const Blob& b : blobs) decoder.add_blob(b);
  const KernelRunEvent back = std::get<KernelRunEvent>(decoder.decode(launch));
  EXPECT_NE(back.code, nullptr);
  const auto kernel = back.code ? back.code->kernel_ir() : nullptr;
  EXPECT_NE(kernel, nullptr);
  return kernel ? kernel->target : ir::Target{};
}

// A copy of 4 floats as kernel IR: out[i] = x[i].
std::shared_ptr<ir::Kernel> copy_kernel_e4() {
  auto kernel = std::make_shared<ir::Kernel>();
  kernel->name = "E_4";
  kernel->globals = {{DType::Float32, 4, true}, {DType::Float32, 4, false}};
  ir::Builder b(*kernel);
  const ir::ValueId out = b.global(0, DType::Float32), x = b.global(1, DType::Float32), i = b.range(4, true);
  b.store(out, i, b.load(x, i));
  b.end_range(i);
  return kernel;
}

// The kernel IR a launch keeps carries the device's abilities the passes used (ir::Target); a blob written
// before subgroup_size existed reads as 0 (no subgroups: the default plan's GPU rules stay off).
TEST(Codec, KernelTargetRoundTripsAndAnOlderBlobReadsNoSubgroups) {
  auto kernel = copy_kernel_e4();
  kernel->target = {1024, 49152, 32};
  auto code = std::make_shared<KernelCode>(*sample_code("target"));
  code->kernel = kernel;
  EventEncoder encoder;
  std::vector<Blob> blobs;
  EncodedEvent launch = encoder.encode(1, 0, sample_launch(0, code), blobs);
  const ir::Target back = decoded_target(blobs, launch);
  EXPECT_EQ(back.max_workgroup_size, 1024u);
  EXPECT_EQ(back.local_memory_bytes, 49152u);
  EXPECT_EQ(back.subgroup_size, 32u);
  // the kernel blob as an older build wrote it: its new hash goes into the code blob, whose new hash goes
  // into the launch
  Blob* kernel_blob = nullptr;
  Blob* code_blob = nullptr;
  for (Blob& b : blobs) {
    if (b.data.find(R"("subgroup_size")") != std::string::npos) kernel_blob = &b;
    if (b.data.find("device_renderer") != std::string::npos) code_blob = &b;
  }
  ASSERT_TRUE(kernel_blob && code_blob);
  kernel_blob->data = replaced(kernel_blob->data, R"(,"subgroup_size":32)", "");
  const std::string kernel_hash = content_hash(kernel_blob->data);
  code_blob->data = replaced(code_blob->data, kernel_blob->hash, kernel_hash);
  kernel_blob->hash = kernel_hash;
  const std::string code_hash = content_hash(code_blob->data);
  launch.payload = replaced(launch.payload, code_blob->hash, code_hash);
  code_blob->hash = code_hash;
  const ir::Target old = decoded_target(blobs, launch);
  EXPECT_EQ(old.max_workgroup_size, 1024u);
  EXPECT_EQ(old.subgroup_size, 0u);
}

// A recording's kernel IR is read when first needed (the debugger renders few kernels in another
// language): a damaged one does not stop the run from loading; the kernel's other listings say why.
TEST(Codec, ADamagedKernelIrIsReportedWhenARendererNeedsIt) {
  auto kernel = copy_kernel_e4();
  auto code = std::make_shared<KernelCode>(*sample_code("lazy"));
  code->kernel = kernel;
  EventEncoder encoder;
  std::vector<Blob> blobs;
  const EncodedEvent launch = encoder.encode(1, 0, sample_launch(0, code), blobs);
  EventDecoder decoder;
  bool damaged = false;
  for (Blob& b : blobs) {
    if (b.data.find(R"("insts")") != std::string::npos) {  // the kernel IR blob: an unknown op in it
      b.data = replaced(b.data, R"(["DEFINE_GLOBAL")", R"(["NO_SUCH_OP")");
      damaged = true;
    }
    decoder.add_blob(b, /*verify=*/false);
  }
  ASSERT_TRUE(damaged);
  const KernelRunEvent back = std::get<KernelRunEvent>(decoder.decode(launch));
  ASSERT_TRUE(back.code);
  EXPECT_FALSE(back.code->kernel) << "read when first needed";
  EXPECT_TRUE(back.code->has_kernel_ir());
  // every registered renderer's language is offered before the IR is read (a build with the C renderer
  // alone, as the sanitizer build, offers only the listings the run kept)
  const std::vector<std::string> languages = back.code->languages();
  EXPECT_EQ(back.code->kernel_ir(), nullptr);
  EXPECT_NE(back.code->kernel_ir_error().find("unknown op 'NO_SUCH_OP'"), std::string::npos) << back.code->kernel_ir_error();
  int rendered = 0;
  for (const std::string& language : languages) {
    const SourceListing* listing = back.code->listing(language);
    ASSERT_NE(listing, nullptr) << language;
    bool kept = false;  // the listings the run kept (the device's) are there as they were
    for (const SourceListing& src : back.code->sources) kept = kept || src.renderer == language;
    if (kept) continue;
    rendered++;
    EXPECT_NE(listing->code.find("could not render: the recording's kernel IR is damaged"), std::string::npos)
        << language << ": " << listing->code;
  }
  EXPECT_EQ(languages.size(), back.code->sources.size() + static_cast<size_t>(rendered));
}

// A decoded recording keeps one copy of each listing: the passes that name one blob (a pass that changed
// nothing, the same listing in two kernels' code) share its text, as the engine's snapshots do.
TEST(Codec, DecodedPassesThatNameOneListingShareItsText) {
  EventEncoder encoder;
  std::vector<Blob> blobs;
  const EncodedEvent a = encoder.encode(1, 0, sample_launch(0, sample_code()), blobs);
  auto other = std::make_shared<KernelCode>(*sample_code());
  other->plan = "UPCAST_GLOBAL=4";  // another code blob whose passes name the same listings
  const EncodedEvent b = encoder.encode(2, 0, sample_launch(1, other), blobs);
  EventDecoder decoder;
  for (Blob& blob : blobs) decoder.add_blob(blob, /*verify=*/true);
  const KernelRunEvent first = std::get<KernelRunEvent>(decoder.decode(a));
  const KernelRunEvent second = std::get<KernelRunEvent>(decoder.decode(b));
  ASSERT_TRUE(first.code && second.code);
  ASSERT_NE(first.code, second.code);
  ASSERT_EQ(first.code->ir.size(), 3u);
  EXPECT_EQ(first.code->ir[0].ir(), sample_code()->ir[0].ir());
  EXPECT_EQ(&first.code->ir[1].ir(), &first.code->ir[0].ir());   // "simplify" changed nothing
  EXPECT_NE(&first.code->ir[2].ir(), &first.code->ir[1].ir());
  EXPECT_EQ(first.code->ir[2].ir(), sample_code()->ir[2].ir());
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(&second.code->ir[i].ir(), &first.code->ir[i].ir()) << i;
    EXPECT_EQ(second.code->ir[i].pass, first.code->ir[i].pass);
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
  std::vector<std::shared_ptr<const NodeBatch>> batches;
  reader.read_events([&](uint64_t seq, int64_t time_ns, const Event& e) {
    ASSERT_LT(i, events.size());
    EXPECT_EQ(seq, i);
    EXPECT_EQ(time_ns, static_cast<int64_t>(1000 * i));
    EXPECT_EQ(describe(e), describe(events[i])) << "event " << i;
    if (auto* r = std::get_if<KernelRunEvent>(&e); r && r->code) {
      if (!first_code) first_code = r->code;
      EXPECT_EQ(r->code, first_code) << "launches of one kernel share their code";
    }
    if (auto* n = std::get_if<NodesEvent>(&e)) batches.push_back(n->batch);
    i++;
  });
  EXPECT_EQ(i, events.size());
  // the two NodesEvents of one batch share it; the one that only frees has an empty batch of its own
  ASSERT_EQ(batches.size(), 3u);
  ASSERT_NE(batches[0], nullptr);
  EXPECT_EQ(batches[0], batches[1]);
  EXPECT_NE(batches[2], batches[0]);
  EXPECT_EQ(count(file, "SELECT count(*) FROM events WHERE kind = 'nodes'"), 3);
  EXPECT_EQ(count(file, "SELECT count(*) FROM events WHERE kind = 'launch' AND json_array_length(payload, '$.buffers') = 2"), 1);
  EXPECT_EQ(count(file, "SELECT count(*) FROM events WHERE kind = 'schedule' AND json_extract(payload, '$.where.line') = 42"), 1);
}

TEST_F(Recording, ANodeBatchRepeatedByAThousandStepsIsStoredOnce) {
  const auto batch = sample_batch();
  std::vector<Event> events;
  for (uint64_t step = 0; step < 1000; step++) {
    std::vector<uint64_t> freed;
    if (step) freed = {1000 + 5 * (step - 1), 1000 + 5 * (step - 1) + 3};
    events.push_back(NodesEvent{1000 + 5 * step, {step, step + 1}, batch, freed});
  }
  const std::string file = path("nodes.tsrec");
  write(file, events);
  EXPECT_EQ(count(file, "SELECT count(*) FROM events WHERE kind = 'nodes'"), 1000);
  EXPECT_EQ(count(file, "SELECT count(*) FROM blobs"), 1);
  RecordingReader reader(file);
  size_t n = 0;
  std::shared_ptr<const NodeBatch> first;
  reader.read_events([&](uint64_t, int64_t, const Event& e) {
    EXPECT_EQ(describe(e), describe(events[n]));
    const auto& nodes = std::get<NodesEvent>(e);
    if (!first) first = nodes.batch;
    EXPECT_EQ(nodes.batch, first);
    n++;
  });
  EXPECT_EQ(n, events.size());
  EXPECT_LT(fs::file_size(file), 200u * 1024) << "1000 steps should not copy the batch";
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
  EXPECT_EQ(count(file, "SELECT count(*) FROM blobs WHERE CAST(data AS TEXT) = '" + code->ir[0].ir() + "'"), 1);
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
  exec(newer, "PRAGMA user_version = 3");
  expect_rejected(newer, "newer");

  // version 1, the format before autotune trials, still reads (its events are a subset of version 2's)
  const std::string v1 = path("v1.tsrec");
  write_bytes(v1, bytes);
  exec(v1, "PRAGMA user_version = 1");
  EXPECT_EQ(load_error(v1), "");

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
  unknown[16] = 6;
  EXPECT_THROW(event_from_frame_body(unknown), RecordingError);
  unknown[16] = 5;
  EXPECT_EQ(event_from_frame_body(unknown).kind, EventKind::Trial);
  unknown[16] = 0;
  EXPECT_THROW(event_from_frame_body(unknown), RecordingError);
  unknown[16] = 4;
  EXPECT_EQ(event_from_frame_body(unknown).kind, EventKind::Nodes);
  EXPECT_THROW(blob_from_frame_body("0123456789abcde"), RecordingError);
  EXPECT_EQ(content_hash(""), "cbf29ce484222325");  // FNV-1a offset basis
}

// ---- the streamer's connection ------------------------------------------------------------------------

// Reads one end of a socket pair until it closes, counting the reads (each send() of the other end is at
// least one read, unless the reader was slower than the sender).
struct SocketReader {
  int fd;
  std::string bytes;
  size_t reads = 0;
  std::thread thread{[this] {
    char buf[1 << 16];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) {
        bytes.append(buf, static_cast<size_t>(n));
        reads++;
      }
    }
  }};
  explicit SocketReader(int f) : fd(f) {}
  void join() { thread.join(); }
  std::vector<Frame> frames() const {
    FrameParser parser;
    parser.feed(bytes);
    std::vector<Frame> out;
    Frame f;
    while (parser.next(f)) out.push_back(f);
    return out;
  }
};

// Every event reaches the debugger, in order, but in batches: a loop of tiny realizes (a schedule and a
// launch each) does not cost a send() per event.
TEST(Streamer, FramesArriveInOrderInBatches) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  SocketReader reader(fds[1]);
  constexpr int kRealizes = 3000;
  const auto code = sample_code();
  const auto t0 = std::chrono::steady_clock::now();
  {
    EventStreamer streamer(sample_run(), "", fds[0]);
    uint64_t seq = 0;
    for (int i = 0; i < kRealizes; i++) {
      ScheduleEvent s;
      s.schedule_id = i;
      s.kernels.push_back(KernelInfo{});
      s.kernels.back().id = i;
      streamer.on_event(seq++, s);
      streamer.on_event(seq++, sample_launch(i, code));
    }
    streamer.finish(sample_end());
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ::shutdown(fds[0], SHUT_WR);
  reader.join();
  close(fds[0]);
  close(fds[1]);
  const std::vector<Frame> frames = reader.frames();
  ASSERT_GE(frames.size(), 2u + 2 * kRealizes);
  EXPECT_EQ(frames.front().type, 'I');
  EXPECT_EQ(frames.back().type, 'X');
  uint64_t next = 0;
  for (const Frame& f : frames) {
    if (f.type != 'E') continue;
    EXPECT_EQ(event_from_frame_body(f.body).seq, next++);
  }
  EXPECT_EQ(next, 2u * kRealizes);
  // a send at most every 1 ms at a launch and every 2 ms from the flusher, plus the first and last
  // and one per 256 KiB queued (each read in pieces of at most 64 KiB)
  std::printf("%d events (%zu bytes) in %.1f ms: %zu reads\n", 2 * kRealizes, reader.bytes.size(), ms, reader.reads);
  EXPECT_LE(static_cast<double>(reader.reads), 1.5 * ms + 10 + static_cast<double>(reader.bytes.size()) / 65536);
}

// Frames queued with no launch after them (a schedule whose kernel runs long, a launch sent less than
// 1 ms after the send before it) still arrive while the script is quiet, and flush() sends them at once
// (before the gate's pause frame).
TEST(Streamer, QueuedFramesArriveWhenTheScriptGoesQuiet) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  auto readable_within = [&](int ms) {
    pollfd p{fds[1], POLLIN, 0};
    return poll(&p, 1, ms) == 1;
  };
  auto drain = [&] {
    char buf[1 << 16];
    std::string out;
    while (readable_within(0)) {
      const ssize_t n = ::read(fds[1], buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  };
  EventStreamer streamer(sample_run(), "", fds[0]);
  ASSERT_TRUE(readable_within(2000));  // the run's 'I' frame
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  drain();
  streamer.on_event(0, sample_schedule());  // two kernels, 12 and 13; the first runs long
  ASSERT_TRUE(readable_within(2000)) << "the flusher sends within 2 ms";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  streamer.on_event(1, sample_launch(12, sample_code()));
  // encoded on the streamer's thread within its batch delay (0.5 ms), then sent at once: nothing was sent
  // for 1 ms (the flusher would take up to 2 ms; a loaded machine may take longer for either)
  FrameParser parser;
  Frame f;
  std::vector<uint64_t> seqs;
  for (int waited_ms = 0; seqs.size() < 2 && waited_ms < 2000; waited_ms++) {
    readable_within(1);
    parser.feed(drain());
    while (parser.next(f))
      if (f.type == 'E') seqs.push_back(event_from_frame_body(f.body).seq);
  }
  EXPECT_EQ(seqs, (std::vector<uint64_t>{0, 1})) << "a launch is sent when nothing was sent for 1 ms";
  streamer.on_event(2, sample_schedule());  // queued: no launch after it yet
  streamer.flush();
  EXPECT_TRUE(readable_within(0)) << "flush() sends before it returns";
  streamer.finish(sample_end());
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace ts
