// Fuzz test of the recording loader (RecordingReader), built with AddressSanitizer + UBSan.
//
// 1. Writes a small but real recording (schedules, with and without a script line, launches that share
//    KernelCode listings, a jit replay, a launch with recorded buffers, script output with non-ASCII text,
//    NodesEvents that share a node batch, autotune trials) with RecordingWriter + EventEncoder and checks that it reads back
//    equal; also keeps a copy of a recording taken while its writer was still open (database + -wal).
// 2. For N iterations, mutates a copy of the file: bytes (bit flips, interesting values, truncation,
//    deleted / duplicated / inserted ranges, pages copied over pages), or rows through SQLite (garbage in a
//    payload, kind, checksum, blob or run column, user_version 3, a dropped table, a garbled schema, and
//    "consistent" edits that recompute checksums and blob hashes so that the event decoder itself is fed
//    malformed JSON), and loads it: RecordingReader(path) + read_events. Each load must either succeed or
//    throw ts::RecordingError whose message is one non-empty line naming the file. Any other exception is a
//    failure (the input is kept); a crash or a sanitizer report aborts the run. What loads must keep the
//    promises the decoder makes (node sources and stacks in range, recorded bytes of numel × dtype size):
//    every decoded event is walked, through the accessors a viewer uses (NodesEvent::uid_at, where).
// 3. Each iteration also mutates the same recording as a connection's frame stream and decodes it
//    (FrameParser, event/blob frame bodies, run_info_from_json, EventDecoder): RecordingError with one
//    non-empty line, or success.
//
//   fuzz_recording [--iterations N] [--seed S] [--max-seconds T] [--first I] [--keep-dir D] [--verbose]
//
// Iteration i draws from its own generator (seed, i), so `--first i --iterations 1` replays one input.
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if __has_include(<sanitizer/common_interface_defs.h>)
#include <sanitizer/common_interface_defs.h>
#define TS_HAVE_SANITIZER_API 1
#endif

#include "tensorscope/ir.h"
#include "tensorscope/recording.h"

using namespace ts;
using nlohmann::json;

namespace {

// ---- small utilities --------------------------------------------------------------------------------

struct Rng {  // splitmix64: tiny, fast, identical everywhere
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }
  bool one_in(size_t n) { return below(n) == 0; }
  std::string bytes(size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(next());
    return s;
  }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  if (!data.empty() && std::fwrite(data.data(), 1, data.size(), f) != data.size()) {
    std::fclose(f);
    throw std::runtime_error("cannot write " + path);
  }
  std::fclose(f);
}

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

void remove_recording(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((path + suffix).c_str());
}

std::string g_temp_dir;  // removed by die()

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "fuzz_recording: %s\n", message.c_str());
  if (!g_temp_dir.empty()) {
    for (const char* name : {"/seed.tsrec", "/live.tsrec", "/mutated.tsrec"}) remove_recording(g_temp_dir + name);
    ::rmdir(g_temp_dir.c_str());
  }
  std::exit(2);
}

// ---- the sample recording ---------------------------------------------------------------------------

RunInfo sample_run() {
  RunInfo r;
  r.script_path = "/home/ünïcode/tränïng.py";
  r.script_text = "import tensorscope as ts\nx = ts.Tensor.rand(4, 4)\nprint('héllo — 世界', (x + 1).sum())\n";
  r.argv = {"tränïng.py", "--epochs", "2", "--name=日本語"};
  r.device = "C";
  r.device_properties = R"({"name":"C","backend":"C","memory_bytes":1073741824,"can_run":true,"note":"ü"})";
  r.version = "0.1";
  r.python_version = "3.11.2";
  r.start_time_ns = 1700000000123456789;
  return r;
}

RunInfo sample_end() {
  RunInfo e;
  e.ended = "finished";
  e.exit_status = 0;
  e.end_message = "finished after kernel #4 E_4_4 (replayed) — ok";
  e.end_time_ns = 1700000001123456789;
  return e;
}

std::shared_ptr<const KernelCode> code_a() {
  auto k = std::make_shared<KernelCode>();
  const std::string lowered = "0: BUFFER float32 [4,4]\n1: CONST 1.0\n2: ADD %0 %1\n3: STORE %2\n";
  k->ir = {{"lower", lowered}, {"simplify", lowered}, {"vectorize", "0: BUFFER float32x4 [4]\n1: ADD4 %0 1.0\n"}};
  k->sources = {{"C", "void E_4_4(float* out, const float* a) {\n  for (int i = 0; i < 16; i++) out[i] = a[i] + 1.0f;\n}\n", {1, 1, 2, 2}},
                {"OpenCL C", "__kernel void E_4_4(__global float* out, __global const float* a) {\n"
                             "  int i = get_global_id(0);\n  out[i] = a[i] + 1.0f;\n}\n", {0, 2, 3, 3}}};
  k->device_renderer = "C";
  // the kernel IR the other renderers render (docs/recording.md, "kernel"): out[i] = max(a[i], -inf) + 1
  using ir::Inst;
  using ir::Op;
  auto kernel = std::make_shared<ir::Kernel>();
  kernel->name = "E_4_4";
  kernel->globals = {{DType::Float32, 16, true}, {DType::Float32, 16, false}};
  kernel->insts = {Inst{Op::DefineGlobal, DType::Float32, 0, {}, 0, 0},
                   Inst{Op::DefineGlobal, DType::Float32, 0, {}, 1, 0},
                   Inst{Op::Const, DType::Int32, 0, {}, 0, 16},
                   Inst{Op::Range, DType::Int32, 1, {2, ir::kNone, ir::kNone, ir::kNone}, ir::kGlobalLoop, 0},
                   Inst{Op::Load, DType::Float32, 2, {1, 3, ir::kNone, ir::kNone}, 0, 0},
                   Inst{Op::Const, DType::Float32, 0, {}, 0, -std::numeric_limits<double>::infinity()},
                   Inst{Op::Max, DType::Float32, 2, {4, 5, ir::kNone, ir::kNone}, 0, 0},
                   Inst{Op::Const, DType::Float32, 0, {}, 0, 1},
                   Inst{Op::Add, DType::Float32, 2, {6, 7, ir::kNone, ir::kNone}, 0, 0},
                   Inst{Op::Store, DType::Float32, 3, {0, 3, 8, ir::kNone}, 0, 0},
                   Inst{Op::EndRange, DType::Float32, 1, {3, ir::kNone, ir::kNone, ir::kNone}, 0, 0}};
  kernel->opts = {{ir::AppliedOpt::UpcastGlobal, 4}};
  if (auto errors = ir::verify(*kernel); !errors.empty()) die("the seed kernel IR is invalid: " + errors.front());
  k->kernel = kernel;
  return k;
}

std::shared_ptr<const KernelCode> code_b() {
  auto k = std::make_shared<KernelCode>();
  k->ir = {{"lower", "0: BUFFER float32 [4,4]\n1: SUM %0 axis=(0,1)\n2: STORE %1\n"}};
  k->sources = {{"C", "void r_4(float* out, const float* a) {\n  float acc = 0.0f;\n  for (int i = 0; i < 16; i++) acc += a[i];\n  *out = acc;\n}\n", {1, 3, 4}}};
  k->device_renderer = "C";
  return k;
}

ScheduleEvent sample_schedule(int id, int first_kernel, uint64_t first_uid) {
  ScheduleEvent s;
  s.schedule_id = id;
  const uint64_t u = first_uid;
  s.nodes = {{u, "BUFFER", "load", {4, 4}, "float32", {}, "", -1},
             {u + 1, "CONST", "const", {}, "float32", {}, "1.0", 0},
             {u + 2, "ADD", "elementwise", {4, 4}, "float32", {u, u + 1}, "", 0},
             {u + 3, "SUM", "reduce", {1, 1}, "float32", {u + 2}, "axes=(0,1)", 1}};
  KernelInfo e;
  e.id = first_kernel;
  e.name = "E_4_4";
  e.device = "C";
  e.node_uids = {u + 1, u + 2};
  e.ops = {"CONST", "ADD"};
  e.inputs = {{u, {4, 4}, "float32"}};
  e.outputs = {{u + 2, {4, 4}, "float32"}};
  e.boundary_reasons = {"output feeds a reduce", "input is a realized buffer"};
  e.fusion_decisions = {{u + 2, "ADD", true, 2, 16.0, 16.0, 192.0, "value is read 2 times"},
                        {u + 1, "CONST", false, 3, 0.5, 1.0, 48.0, "recomputed by each reader"}};
  e.flops = 16;
  e.bytes = 128;
  KernelInfo r;
  r.id = first_kernel + 1;
  r.name = "r_4";
  r.device = "C";
  r.node_uids = {u + 3};
  r.ops = {"SUM"};
  r.inputs = {{u + 2, {4, 4}, "float32"}};
  r.outputs = {{u + 3, {1, 1}, "float32"}};
  r.boundary_reasons = {"output is realized"};
  s.kernels = {e, r};
  return s;
}

KernelRunEvent sample_launch(int id, const std::string& name, std::shared_ptr<const KernelCode> code, bool hit,
                             double compile_ms, double time_ms) {
  KernelRunEvent r;
  r.kernel_id = id;
  r.name = name;
  r.device = "C";
  r.code = std::move(code);
  r.compile_cache_hit = hit;
  r.compile_ms = compile_ms;
  r.time_ms = time_ms;
  return r;
}

// A schedule of a training loop's step: the structure (uids are positions) shared by every step.
ScheduleEvent structured_schedule(const std::shared_ptr<const ScheduleEvent>& structure, int id, int first_kernel,
                                  uint64_t first_uid) {
  std::vector<uint64_t> uids;
  for (uint64_t p = 0; p < structure->nodes.size(); p++) uids.push_back(first_uid + p * 3);
  return instantiate_schedule(structure, uids, {first_kernel, first_kernel + 1}, id);
}

// Nodes the script created, without their uids: positions 0..3 are the batch's nodes, 4 and 5 the
// event's external uids; two stacks and a node without one.
std::shared_ptr<const NodeBatch> sample_batch() {
  auto b = std::make_shared<NodeBatch>();
  b->nodes = {{0, "CONST", "const", {4, 4}, "float32", {}, "1.0", -1},
              {1, "ADD", "elementwise", {4, 4}, "float32", {4, 0}, "", -1},
              {2, "PERMUTE", "movement", {4, 4}, "float32", {1}, "order=(1, 0)", -1},
              {3, "SUM", "reduce", {1, 1}, "float32", {2, 5}, "axes=(0,1) «ü»", -1}};
  b->stack = {0, 0, -1, 1};
  b->stacks = {{{{"/usr/lib/python3/site-packages/tensorscope/tensor.py", 88, "Tensor.__add__"},
                 {"/home/ünïcode/tränïng.py", 2, "<module>"}},
                1},
               {{{"/usr/lib/python3/site-packages/tensorscope/tensor.py", 140, "Tensor.sum"}}, -1}};
  return b;
}

std::vector<Event> sample_events() {
  const auto a = code_a(), b = code_b();
  const auto structure = std::make_shared<const ScheduleEvent>(sample_schedule(0, 0, 0));
  const auto batch = sample_batch();
  std::vector<Event> ev;
  ev.push_back(sample_schedule(0, 0, 100));
  ev.push_back(sample_launch(0, "E_4_4", a, false, 12.5, 0.0123));
  ev.push_back(sample_launch(1, "r_4", b, false, 9.25, 0.5));
  ev.push_back(ScriptOutputEvent{ScriptOutputEvent::Stdout, "loss: 0.25 — époch 1 ✓ 日本語 🚀\n"});
  ev.push_back(structured_schedule(structure, 1, 2, 200));
  ev.push_back(sample_launch(2, "E_4_4", a, true, 0, 0.011));  // the same KernelCode: its blobs are not given again
  ev.push_back(sample_launch(3, "r_4", b, true, 0, 0.25));
  KernelRunEvent replay = sample_launch(4, "E_4_4", nullptr, false, 0, 0.01);
  replay.replayed = true;
  replay.replay_of = 0;
  ev.push_back(replay);
  ev.push_back(ScriptOutputEvent{ScriptOutputEvent::Stderr,
                                 "Traceback (most recent call last):\n  File \"tränïng.py\", line 3\n"
                                 "ValueError: «bad» \t\"quoted\" \\ \x01\n"});
  ScheduleEvent step = structured_schedule(structure, 2, 5, 300);  // the structure is stored once
  step.where = {"/home/ünïcode/tränïng.py", 3};
  ev.push_back(step);
  ev.push_back(NodesEvent{400, {100, 103}, batch, {}});  // 10
  ScheduleEvent located = sample_schedule(3, 7, 400);  // 11
  located.where = {"/home/ünïcode/tränïng — 日本語.py", 2};
  ev.push_back(located);
  KernelRunEvent recorded = sample_launch(7, "E_4_4", a, true, 0, 0.012);  // 12
  const auto bytes = std::make_shared<const std::string>(std::string("\0\0\x80\x3f" "\0\0\0\0" "\xff\xff\x7f\x7f", 12));
  recorded.buffers = {{"output", 0, "float32", 3, bytes, ""},
                      {"input", 0, "float32", 3, std::make_shared<const std::string>(*bytes), ""},  // equal: one blob
                      {"input", 1, "float16", 2, std::make_shared<const std::string>(std::string("\x00\x3c\x00\xc0", 4)), ""},
                      {"input", 2, "bool", 3, nullptr, "the 64 MB budget of --record-buffers is used up"}};
  ev.push_back(recorded);
  ev.push_back(NodesEvent{404, {402, 401}, batch, {400, 401}});  // 13: the batch again (its uids only)
  ev.push_back(NodesEvent{0, {}, std::make_shared<const NodeBatch>(), {402, 403, 103}});  // 14: frees only
  AutotuneTrialEvent trial;  // 15, 16: a BEAM search's trials, one failed with the compiler's message
  trial.kernel_id = 8;
  trial.name = "r_4";
  trial.ir_hash = "00ff00ff00ff00ff";
  trial.device = "C";
  trial.plan = "UPCAST_REDUCE=4";
  trial.applied = "UPCAST_REDUCE(4)";
  trial.compile_ms = 31.5;
  trial.time_ms = 0.0125;
  trial.outcome = AutotuneTrialEvent::Kept;
  trial.reason = "1.20x the default (0.0150 ms)";
  ev.push_back(trial);
  trial.plan = "UPCAST_REDUCE=32";
  trial.outcome = AutotuneTrialEvent::FailedCompile;
  trial.time_ms = 0;
  trial.reason = "C device: compiling kernel r_4 failed: «error» ✗";
  ev.push_back(trial);
  return ev;
}

// ---- equality (the event structs have no operator==) --------------------------------------------------

bool same(const BufferInfo& a, const BufferInfo& b) {
  return a.node_uid == b.node_uid && a.shape == b.shape && a.dtype == b.dtype;
}
template <class T, class F>
bool same_list(const std::vector<T>& a, const std::vector<T>& b, F eq) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++)
    if (!eq(a[i], b[i])) return false;
  return true;
}
bool same(const KernelCode& a, const KernelCode& b) {
  const auto ka = a.kernel_ir(), kb = b.kernel_ir();
  if (!ka != !kb || (ka && ir::print(*ka) != ir::print(*kb))) return false;
  return a.device_renderer == b.device_renderer &&
         same_list(a.ir, b.ir, [](const PassSnapshot& x, const PassSnapshot& y) { return x.pass == y.pass && x.ir() == y.ir(); }) &&
         same_list(a.sources, b.sources, [](const SourceListing& x, const SourceListing& y) {
           return x.renderer == y.renderer && x.code == y.code && x.ir_op_line == y.ir_op_line;
         });
}
bool same(const GraphNodeInfo& x, const GraphNodeInfo& y) {
  return x.uid == y.uid && x.op == y.op && x.op_class == y.op_class && x.shape == y.shape && x.dtype == y.dtype &&
         x.srcs == y.srcs && x.arg == y.arg && x.kernel == y.kernel;
}
bool same(const RecordedBuffer& x, const RecordedBuffer& y) {
  if (!x.bytes != !y.bytes || (x.bytes && *x.bytes != *y.bytes)) return false;
  return x.role == y.role && x.index == y.index && x.dtype == y.dtype && x.numel == y.numel && x.note == y.note;
}
bool same(const NodeBatch& a, const NodeBatch& b) {
  return same_list(a.nodes, b.nodes, [](const GraphNodeInfo& x, const GraphNodeInfo& y) { return same(x, y); }) &&
         a.stack == b.stack && same_list(a.stacks, b.stacks, [](const SourceStack& x, const SourceStack& y) {
           return x.user == y.user && same_list(x.frames, y.frames, [](const SourceFrame& p, const SourceFrame& q) {
                    return p.file == q.file && p.line == q.line && p.function == q.function;
                  });
         });
}
bool same(const Event& a, const Event& b) {
  if (a.index() != b.index()) return false;
  if (auto* s = std::get_if<ScheduleEvent>(&a)) {
    const auto& t = std::get<ScheduleEvent>(b);
    if (s->position_uids != t.position_uids || !s->structure != !t.structure) return false;
    if (s->structure && !same(Event(*s->structure), Event(*t.structure))) return false;
    return s->schedule_id == t.schedule_id && s->where.file == t.where.file && s->where.line == t.where.line &&
           same_list(s->nodes, t.nodes, [](const GraphNodeInfo& x, const GraphNodeInfo& y) { return same(x, y); }) &&
           same_list(s->kernels, t.kernels, [](const KernelInfo& x, const KernelInfo& y) {
             auto eqb = [](const BufferInfo& p, const BufferInfo& q) { return same(p, q); };
             return x.id == y.id && x.name == y.name && x.device == y.device && x.node_uids == y.node_uids && x.ops == y.ops &&
                    same_list(x.inputs, y.inputs, eqb) && same_list(x.outputs, y.outputs, eqb) &&
                    x.boundary_reasons == y.boundary_reasons && x.flops == y.flops && x.bytes == y.bytes &&
                    same_list(x.fusion_decisions, y.fusion_decisions, [](const FusionDecision& p, const FusionDecision& q) {
                      return p.node_uid == q.node_uid && p.op == q.op && p.stored == q.stored &&
                             p.evaluations == q.evaluations && p.flops == q.flops &&
                             p.recompute_flops == q.recompute_flops && p.store_bytes == q.store_bytes && p.reason == q.reason;
                    });
           });
  }
  if (auto* r = std::get_if<KernelRunEvent>(&a)) {
    const auto& q = std::get<KernelRunEvent>(b);
    if (!r->code != !q.code) return false;
    if (r->code && !same(*r->code, *q.code)) return false;
    return r->kernel_id == q.kernel_id && r->name == q.name && r->device == q.device &&
           r->compile_cache_hit == q.compile_cache_hit && r->compile_ms == q.compile_ms && r->time_ms == q.time_ms &&
           r->replayed == q.replayed && r->replay_of == q.replay_of &&
           same_list(r->buffers, q.buffers, [](const RecordedBuffer& x, const RecordedBuffer& y) { return same(x, y); });
  }
  if (auto* n = std::get_if<NodesEvent>(&a)) {
    const auto& m = std::get<NodesEvent>(b);
    static const NodeBatch kEmpty;  // a null batch is written as an empty one
    return n->first_uid == m.first_uid && n->external_uids == m.external_uids && n->freed_uids == m.freed_uids &&
           same(n->batch ? *n->batch : kEmpty, m.batch ? *m.batch : kEmpty);
  }
  if (auto* o = std::get_if<ScriptOutputEvent>(&a)) {
    const auto& p = std::get<ScriptOutputEvent>(b);
    return o->stream == p.stream && o->text == p.text;
  }
  if (auto* t = std::get_if<AutotuneTrialEvent>(&a)) {
    const auto& u = std::get<AutotuneTrialEvent>(b);
    return t->kernel_id == u.kernel_id && t->name == u.name && t->ir_hash == u.ir_hash && t->device == u.device &&
           t->plan == u.plan && t->applied == u.applied && t->compile_ms == u.compile_ms && t->time_ms == u.time_ms &&
           t->outcome == u.outcome && t->reason == u.reason;
  }
  return false;  // an alternative this function does not know yet
}
bool same_run(const RunInfo& a, const RunInfo& b) {
  return a.script_path == b.script_path && a.script_text == b.script_text && a.argv == b.argv && a.device == b.device &&
         a.device_properties == b.device_properties && a.version == b.version && a.python_version == b.python_version &&
         a.start_time_ns == b.start_time_ns && a.ended == b.ended && a.exit_status == b.exit_status &&
         a.end_message == b.end_message && a.end_time_ns == b.end_time_ns;
}

struct Loaded {
  RunInfo run;
  std::vector<std::pair<uint64_t, int64_t>> order;
  std::vector<Event> events;
};

Loaded load(const std::string& path) {
  RecordingReader reader(path);
  Loaded out;
  out.run = reader.run();
  reader.read_events([&](uint64_t seq, int64_t time_ns, const Event& e) {
    out.order.emplace_back(seq, time_ns);
    out.events.push_back(e);
  });
  return out;
}

// ---- writing the seeds ------------------------------------------------------------------------------

struct Seeds {
  size_t events = 0;                    // how many events the recording holds
  std::string finished;                 // a finished recording (checkpointed, no -wal)
  std::string live_db, live_wal;        // a copy taken while the writer was open (first 4 events committed)
  std::vector<std::pair<std::string, std::string>> blobs;  // (hash, data) as the finished file holds them
  std::string frames;                   // the same run as a connection's frame stream
};

Seeds write_seeds(const std::string& dir) {
  Seeds seeds;
  const std::vector<Event> events = sample_events();
  seeds.events = events.size();
  const std::string path = dir + "/seed.tsrec";
  RunInfo run = sample_run();
  const RunInfo end = sample_end();
  {
    EventEncoder encoder;
    RecordingWriter writer(path, run);
    seeds.frames += frame_bytes('I', run_info_to_json(run));
    for (size_t i = 0; i < events.size(); i++) {
      std::vector<Blob> blobs;
      EncodedEvent e = encoder.encode(i, static_cast<int64_t>(1000 * i + 7), events[i], blobs);
      for (const Blob& b : blobs) seeds.frames += frame_bytes('B', blob_frame_body(b));
      seeds.frames += frame_bytes('E', event_frame_body(e));
      writer.add(std::move(blobs), std::move(e));
      // Wait until the event is committed (a reader sees it): one transaction per event, so that the file
      // and its -wal are the same on every run and a seed replays the same inputs.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (true) {
        try {
          if (RecordingReader(path).event_count() == i + 1) break;
        } catch (const RecordingError&) {
        }
        if (std::chrono::steady_clock::now() > deadline) die("the writer did not commit event " + std::to_string(i) + " within 5 s");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (i == 3) {  // the database and its -wal as a run killed here would leave them
        seeds.live_db = read_bytes(path);
        seeds.live_wal = read_bytes(path + "-wal");
      }
    }
    writer.finish(end);
  }
  RunInfo ended = run;
  ended.ended = end.ended;
  ended.exit_status = end.exit_status;
  ended.end_message = end.end_message;
  ended.end_time_ns = end.end_time_ns;
  seeds.frames += frame_bytes('X', run_info_to_json(ended));
  if (exists(path + "-wal")) die("the finished recording still has a -wal file");

  // (a) it reads back equal
  Loaded back = load(path);
  if (!same_run(back.run, ended)) die("the run did not read back equal");
  if (back.events.size() != events.size()) die("read " + std::to_string(back.events.size()) + " events, wrote " + std::to_string(events.size()));
  for (size_t i = 0; i < events.size(); i++) {
    if (!same(back.events[i], events[i])) die("event " + std::to_string(i) + " did not read back equal");
    if (back.order[i] != std::pair<uint64_t, int64_t>(i, static_cast<int64_t>(1000 * i + 7)))
      die("event " + std::to_string(i) + ": wrong seq or time");
  }
  // launches of one KernelCode share one decoded KernelCode
  if (std::get<KernelRunEvent>(back.events[1]).code != std::get<KernelRunEvent>(back.events[5]).code)
    die("two launches of one kernel did not share their decoded KernelCode");
  // and schedules of one structure share one decoded structure
  if (!std::get<ScheduleEvent>(back.events[4]).structure ||
      std::get<ScheduleEvent>(back.events[4]).structure != std::get<ScheduleEvent>(back.events[9]).structure)
    die("two schedules of one structure did not share their decoded structure");
  // and NodesEvents of one batch share one decoded batch
  if (!std::get<NodesEvent>(back.events[10]).batch ||
      std::get<NodesEvent>(back.events[10]).batch != std::get<NodesEvent>(back.events[13]).batch)
    die("two NodesEvents of one batch did not share their decoded batch");
  ::unlink((path + "-shm").c_str());  // the read-only reader may leave a -shm
  seeds.finished = read_bytes(path);
  if (seeds.finished.size() < 1024 || seeds.finished.size() > 64 * 1024)
    die("unexpected seed size " + std::to_string(seeds.finished.size()));

  // the live copy opens and holds the four committed events, with an empty `ended`
  if (seeds.live_wal.empty()) die("the open recording had no -wal to copy");
  const std::string live = dir + "/live.tsrec";
  write_bytes(live, seeds.live_db);
  write_bytes(live + "-wal", seeds.live_wal);
  Loaded partial = load(live);
  remove_recording(live);
  if (!partial.run.ended.empty() || partial.events.size() != 4) die("the copy of the open recording did not read back");
  for (size_t i = 0; i < 4; i++)
    if (!same(partial.events[i], events[i])) die("the copy of the open recording: event " + std::to_string(i) + " differs");

  // the blobs, for the consistent mutations
  sqlite3* db = nullptr;
  write_bytes(path, seeds.finished);
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) die("cannot open the seed");
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, "SELECT hash, data FROM blobs ORDER BY hash", -1, &s, nullptr);
  while (sqlite3_step(s) == SQLITE_ROW)
    seeds.blobs.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)),
                             std::string(static_cast<const char*>(sqlite3_column_blob(s, 1)), sqlite3_column_bytes(s, 1)));
  sqlite3_finalize(s);
  sqlite3_close(db);
  remove_recording(path);
  // listings shared between passes and launches are stored once: A has 2 distinct IR listings + 2 sources
  // + its kernel IR, B has 1 + 1, plus one code blob each, plus the schedule structure, the node batch and
  // the empty one, and the recorded buffers' 2 distinct byte strings
  if (seeds.blobs.size() != 14) die("expected 14 blobs in the seed, found " + std::to_string(seeds.blobs.size()));
  return seeds;
}

// ---- mutations ----------------------------------------------------------------------------------------

const std::vector<std::string>& interesting_strings() {
  static const std::vector<std::string> v = {
      "", "\n", "line one\nline two", "\r\n", std::string("nul\0byte", 8), "\xff\xfe\xfd", "\xc3", "\xed\xa0\x80",
      "schedule", "launch", "output", "stdout", "stderr", "finished", "{}", "[]", "null", "true", "0", "-1",
      "{\"a\":", "[1,2,", "\"unterminated", "1e999", "-0", "18446744073709551616", "9223372036854775808",
      "\"\\ud800\"", "\"\\u0000\"", "{\"ir\":[],\"sources\":[],\"device_renderer\":\"C\"}", "0123456789abcdef",
      "ffffffffffffffff", "DEADBEEFdeadbeef", "'; DROP TABLE events; --", "é日本🚀", "\t\x01\x1f\x7f",
  };
  return v;
}

// Mutates `data` in place with one byte-level operator. `page` biases offsets towards SQLite page headers.
std::string mutate_bytes_once(Rng& rng, std::string& data, size_t page) {
  auto offset = [&](size_t size) -> size_t {
    if (size == 0) return 0;
    switch (rng.below(4)) {
      case 0: return rng.below(std::min<size_t>(size, 100));  // the database header
      case 1: {                                                // a page's header
        if (page == 0) return rng.below(size);
        const size_t pages = (size + page - 1) / page;
        const size_t p = rng.below(pages);
        return std::min(size - 1, p * page + (p == 0 ? 100 : 0) + rng.below(12));
      }
      default: return rng.below(size);
    }
  };
  char what[96];
  switch (rng.below(11)) {
    case 0: {  // flip bits
      if (data.empty()) break;
      const int n = 1 + static_cast<int>(rng.below(8));
      const size_t at = offset(data.size());
      for (int i = 0; i < n; i++) data[std::min(data.size() - 1, at + rng.below(16))] ^= static_cast<char>(1u << rng.below(8));
      std::snprintf(what, sizeof what, "flip %d bits near %zu", n, at);
      return what;
    }
    case 1: {  // random bytes
      if (data.empty()) break;
      const size_t at = offset(data.size());
      const size_t n = std::min(data.size() - at, 1 + rng.below(rng.one_in(4) ? 64 : 4));
      for (size_t i = 0; i < n; i++) data[at + i] = static_cast<char>(rng.next());
      std::snprintf(what, sizeof what, "overwrite %zu random bytes at %zu", n, at);
      return what;
    }
    case 2:
    case 3: {  // an interesting value, 1/2/4/8 bytes, either byte order
      if (data.empty()) break;
      static const uint64_t values[] = {0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff, 0x10000, 0x7fffffff,
                                        0x80000000, 0xffffffff, 0x7fffffffffffffffULL, 0x8000000000000000ULL,
                                        ~0ULL, 512, 1024, 4096, 65536, 0x0d0a};
      const uint64_t v = values[rng.below(sizeof values / sizeof values[0])];
      const size_t width = size_t{1} << rng.below(4);
      const bool big = rng.below(2);
      const size_t at = offset(data.size());
      for (size_t i = 0; i < width && at + i < data.size(); i++)
        data[at + i] = static_cast<char>(v >> (8 * (big ? width - 1 - i : i)));
      std::snprintf(what, sizeof what, "write 0x%" PRIx64 " (%zu bytes, %s) at %zu", v, width, big ? "BE" : "LE", at);
      return what;
    }
    case 4: {  // truncate
      size_t n;
      switch (rng.below(4)) {
        case 0: n = rng.below(std::min<size_t>(data.size() + 1, 101)); break;
        case 1: n = page ? (rng.below(data.size() / page + 1)) * page : rng.below(data.size() + 1); break;
        default: n = rng.below(data.size() + 1);
      }
      data.resize(std::min(n, data.size()));
      std::snprintf(what, sizeof what, "truncate to %zu", data.size());
      return what;
    }
    case 5: {  // delete a range
      if (data.empty()) break;
      const size_t at = offset(data.size());
      const size_t n = std::min(data.size() - at, 1 + rng.below(rng.one_in(3) ? data.size() : 32));
      data.erase(at, n);
      std::snprintf(what, sizeof what, "delete %zu bytes at %zu", n, at);
      return what;
    }
    case 6: {  // duplicate a range
      if (data.empty()) break;
      const size_t from = rng.below(data.size());
      const size_t n = std::min(data.size() - from, 1 + rng.below(rng.one_in(3) ? 4096 : 64));
      const size_t to = offset(data.size());
      const std::string piece = data.substr(from, n);
      data.insert(to, piece);
      std::snprintf(what, sizeof what, "duplicate %zu bytes from %zu at %zu", n, from, to);
      return what;
    }
    case 7: {  // insert random or interesting bytes
      const size_t at = rng.below(data.size() + 1);
      const std::string piece = rng.below(2) ? rng.bytes(1 + rng.below(32)) : interesting_strings()[rng.below(interesting_strings().size())];
      data.insert(at, piece);
      std::snprintf(what, sizeof what, "insert %zu bytes at %zu", piece.size(), at);
      return what;
    }
    case 8: {  // copy a page over another (or a range over a range)
      if (page == 0 || data.size() < 2 * page) break;
      const size_t pages = data.size() / page;
      const size_t from = rng.below(pages), to = rng.below(pages);
      std::copy_n(data.begin() + from * page, page, data.begin() + to * page);
      std::snprintf(what, sizeof what, "copy page %zu over page %zu", from + 1, to + 1);
      return what;
    }
    case 9: {  // zero or 0xff a range
      if (data.empty()) break;
      const size_t at = offset(data.size());
      const size_t n = std::min(data.size() - at, 1 + rng.below(256));
      const char fill = rng.below(2) ? '\0' : '\xff';
      std::fill_n(data.begin() + at, n, fill);
      std::snprintf(what, sizeof what, "fill %zu bytes at %zu with 0x%02x", n, at, static_cast<unsigned char>(fill));
      return what;
    }
    default: {  // replace one printable token with another (hits payload text, kind names, column names)
      static const char* tokens[] = {"schedule", "launch", "output", "kernel", "nodes", "trial", "code", "ir", "events",
                                     "blobs", "run", "payload", "checksum", "true", "null", "\"", "{", "[", ":"};
      const std::string from = tokens[rng.below(sizeof tokens / sizeof tokens[0])];
      const std::string to = tokens[rng.below(sizeof tokens / sizeof tokens[0])];
      const size_t at = data.find(from, rng.below(data.size() + 1));
      if (at == std::string::npos || from.size() != to.size()) break;
      data.replace(at, from.size(), to);
      std::snprintf(what, sizeof what, "replace '%s' by '%s' at %zu", from.c_str(), to.c_str(), at);
      return what;
    }
  }
  data.push_back(static_cast<char>(rng.next()));  // the chosen operator had nothing to act on
  return "append a byte";
}

std::string mutate_bytes(Rng& rng, std::string& data, size_t page) {
  std::string what;
  const size_t n = rng.one_in(2) ? 1 : 2 + rng.below(rng.one_in(4) ? 8 : 3);
  for (size_t i = 0; i < n; i++) what += (i ? "; " : "") + mutate_bytes_once(rng, data, page);
  return what;
}

size_t page_size(const std::string& db) {
  if (db.size() < 100) return 4096;
  const size_t p = (static_cast<unsigned char>(db[16]) << 8) | static_cast<unsigned char>(db[17]);
  return p == 1 ? 65536 : (p >= 512 ? p : 4096);
}

// A JSON value to put in place of another: wrong types, boundary numbers, strings that look like hashes.
json random_json(Rng& rng, const Seeds& seeds) {
  switch (rng.below(22)) {
    case 0: return nullptr;
    case 1: return true;
    case 2: return 0;
    case 3: return -1;
    case 4: return INT32_MAX;
    case 5: return static_cast<int64_t>(INT32_MAX) + 1;
    case 6: return INT64_MIN;
    case 7: return UINT64_MAX;
    case 8: return 1.5;
    case 9: return -0.0;
    case 10: return 1e300;
    case 11: return "";
    case 12: return rng.below(2) ? "stdout" : "stderr";
    case 13: return "line\nbreak\t\x01";
    case 14: return seeds.blobs[rng.below(seeds.blobs.size())].first;  // a real blob (of the wrong kind, maybe)
    case 15: {
      std::string h = content_hash(rng.bytes(8));
      if (rng.below(2)) h += "\n";
      return h;
    }
    case 16: return json::array();
    case 17: return json::object();
    case 18: return json::array({1, 2, 3});
    case 19: return json{{"pass", "x"}, {"ir", seeds.blobs[rng.below(seeds.blobs.size())].first}};
    case 20: return "@@DEEP@@";
    default: return "@@NUMBER@@";
  }
}

void collect(json& j, std::vector<json*>& out) {
  out.push_back(&j);
  if (j.is_object() || j.is_array())
    for (auto& v : j) collect(v, out);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

// Mutates a JSON text (an event payload or a code blob): one structural edit, or a byte-level one.
std::string mutate_json(Rng& rng, const std::string& text, const Seeds& seeds, std::string& what) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || rng.one_in(4)) {
    std::string t = text;
    what += "bytes: " + mutate_bytes(rng, t, 0);
    return t;
  }
  std::vector<json*> nodes;
  collect(j, nodes);
  json& n = *nodes[rng.below(nodes.size())];
  switch (rng.below(5)) {
    case 0:
      if (n.is_object() && !n.empty()) {
        auto it = n.begin();
        std::advance(it, rng.below(n.size()));
        what += "drop key '" + it.key() + "'";
        n.erase(it);
        break;
      }
      [[fallthrough]];
    case 1:
      if (n.is_array()) {
        if (!n.empty() && rng.below(2)) {
          n.erase(n.begin() + static_cast<std::ptrdiff_t>(rng.below(n.size())));
          what += "drop an array element";
        } else {
          n.push_back(random_json(rng, seeds));
          what += "append an array element";
        }
        break;
      }
      [[fallthrough]];
    case 2:
      if (n.is_object()) {
        static const char* keys[] = {"code", "ir", "sources", "kernel", "nodes", "uid", "stream", "text", "extra",
                                     "structure", "position_uids", "kernel_ids", "where", "line", "batch", "count",
                                     "first_uid", "external_uids", "freed_uids", "srcs", "stack", "stacks", "frames",
                                     "user", "buffers", "role", "numel", "dtype", "blob"};
        const char* key = keys[rng.below(sizeof keys / sizeof keys[0])];
        n[key] = random_json(rng, seeds);
        what += std::string("set key '") + key + "'";
        break;
      }
      [[fallthrough]];
    default:
      n = random_json(rng, seeds);
      what += "replace a value by " + n.dump(-1, ' ', true, json::error_handler_t::replace).substr(0, 40);
  }
  std::string out = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (out.find("@@DEEP@@") != std::string::npos) {
    const size_t depth = rng.one_in(8) ? 100000 : 1 + rng.below(2000);
    const char* open = rng.below(2) ? "[" : "{\"a\":";
    std::string deep;
    for (size_t i = 0; i < depth; i++) deep += open;
    deep += "1";
    for (size_t i = 0; i < depth; i++) deep += open[0] == '[' ? ']' : '}';
    out = replace_all(out, "\"@@DEEP@@\"", deep);
    what += " (nested " + std::to_string(depth) + " deep)";
  }
  if (out.find("@@NUMBER@@") != std::string::npos) {
    static const char* numbers[] = {"1e999", "-1e999", "123456789012345678901234567890", "-9223372036854775809",
                                    "18446744073709551616", "0.000000000000000000000000001e-400", "-0", "2147483648"};
    out = replace_all(out, "\"@@NUMBER@@\"", numbers[rng.below(sizeof numbers / sizeof numbers[0])]);
  }
  return out;
}

// ---- SQL-level mutations ----------------------------------------------------------------------------

struct Sql {
  sqlite3* db = nullptr;
  explicit Sql(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      sqlite3_close(db);
      db = nullptr;
      return;
    }
    sqlite3_exec(db, "PRAGMA synchronous=OFF", nullptr, nullptr, nullptr);
  }
  ~Sql() { sqlite3_close(db); }
  bool exec(const std::string& sql) { return db && sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK; }
  std::vector<std::vector<std::string>> query(const std::string& sql) {
    std::vector<std::vector<std::string>> rows;
    sqlite3_stmt* s = nullptr;
    if (!db || sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) return rows;
    while (sqlite3_step(s) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int i = 0; i < sqlite3_column_count(s); i++) {
        const void* b = sqlite3_column_blob(s, i);
        row.emplace_back(b ? std::string(static_cast<const char*>(b), sqlite3_column_bytes(s, i)) : std::string());
      }
      rows.push_back(std::move(row));
    }
    sqlite3_finalize(s);
    return rows;
  }
  // Runs `sql` with `?` bound to each of `values` (text).
  bool run(const std::string& sql, const std::vector<std::string>& values) {
    sqlite3_stmt* s = nullptr;
    if (!db || sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) return false;
    for (size_t i = 0; i < values.size(); i++)
      sqlite3_bind_text(s, static_cast<int>(i + 1), values[i].data(), static_cast<int>(values[i].size()), SQLITE_TRANSIENT);
    const int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    return rc == SQLITE_DONE;
  }
};

// Binds a garbage value of a random SQLite type to parameter 1 of `sql` and runs it.
std::string set_garbage(Rng& rng, Sql& sql, const std::string& statement) {
  sqlite3_stmt* s = nullptr;
  if (!sql.db || sqlite3_prepare_v2(sql.db, statement.c_str(), -1, &s, nullptr) != SQLITE_OK) return "(no statement)";
  std::string what;
  switch (rng.below(7)) {
    case 0:
    case 1: {
      const std::string v = rng.bytes(rng.below(rng.one_in(4) ? 600 : 40));
      sqlite3_bind_text(s, 1, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
      what = "random text of " + std::to_string(v.size()) + " bytes";
      break;
    }
    case 2: {
      const std::string v = rng.bytes(rng.below(64));
      sqlite3_bind_blob(s, 1, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
      what = "a random blob of " + std::to_string(v.size()) + " bytes";
      break;
    }
    case 3: {
      const std::string& v = interesting_strings()[rng.below(interesting_strings().size())];
      sqlite3_bind_text(s, 1, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
      what = "the text " + json(v).dump(-1, ' ', true, json::error_handler_t::replace);
      break;
    }
    case 4: {
      static const int64_t values[] = {0, -1, 1, 2, INT32_MAX, static_cast<int64_t>(INT32_MAX) + 1, INT64_MIN, INT64_MAX};
      const int64_t v = values[rng.below(sizeof values / sizeof values[0])];
      sqlite3_bind_int64(s, 1, v);
      what = "the integer " + std::to_string(v);
      break;
    }
    case 5: {
      const double v = rng.below(2) ? 1e308 : -0.5;
      sqlite3_bind_double(s, 1, v);
      what = "the real " + std::to_string(v);
      break;
    }
    default: {
      const std::string v(100000 + rng.below(100000), "ax{\n"[rng.below(4)]);
      sqlite3_bind_text(s, 1, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
      what = "a text of " + std::to_string(v.size()) + " bytes";
    }
  }
  const int rc = sqlite3_step(s);
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) what += " (refused: " + std::string(sqlite3_errstr(rc)) + ")";
  return what;
}

// The tables as rows, edited in memory and written back with fresh checksums: feeds the decoder payloads
// and blobs that pass the checksum and hash checks.
struct Model {
  std::vector<std::pair<std::string, std::string>> blobs;  // hash, data
  struct Row {
    int64_t seq;
    std::string kind;
    int64_t time_ns;
    std::string payload;
  };
  std::vector<Row> events;

  void read(Sql& sql) {
    for (auto& r : sql.query("SELECT hash, data FROM blobs")) blobs.emplace_back(r[0], r[1]);
    for (auto& r : sql.query("SELECT seq, kind, time_ns, payload FROM events ORDER BY seq"))
      events.push_back({std::stoll(r[0]), r[1], std::stoll(r[2]), r[3]});
  }
  bool write(Sql& sql) const {
    bool ok = sql.exec("BEGIN") && sql.exec("DELETE FROM blobs") && sql.exec("DELETE FROM events");
    for (const auto& [hash, data] : blobs) ok = ok && sql.run("INSERT OR REPLACE INTO blobs VALUES (?, CAST(? AS BLOB))", {hash, data});
    for (const Row& e : events)
      ok = ok && sql.run("INSERT OR REPLACE INTO events VALUES (" + std::to_string(e.seq) + ", ?, " +
                             std::to_string(e.time_ns) + ", ?, ?)",
                         {e.kind, e.payload, content_hash(e.payload)});
    return sql.exec("COMMIT") && ok;
  }
  // Gives blob `i` new data: a new hash, and every reference to the old hash (in events and other blobs,
  // which get new hashes in turn) follows.
  void rewrite_blob(size_t i, std::string data, int depth = 0) {
    const std::string old_hash = blobs[i].first;
    const std::string new_hash = content_hash(data);
    blobs[i] = {new_hash, std::move(data)};
    if (depth > 2 || old_hash == new_hash) return;
    for (Row& e : events) e.payload = replace_all(e.payload, old_hash, new_hash);
    for (size_t k = 0; k < blobs.size(); k++)
      if (k != i && blobs[k].second.find(old_hash) != std::string::npos)
        rewrite_blob(k, replace_all(blobs[k].second, old_hash, new_hash), depth + 1);
  }
};

std::string mutate_consistently(Rng& rng, Sql& sql, const Seeds& seeds) {
  Model m;
  m.read(sql);
  if (m.events.empty() || m.blobs.empty()) return "(nothing to edit)";
  std::string what;
  const size_t n = rng.one_in(3) ? 2 : 1;
  for (size_t step = 0; step < n; step++) {
    if (step) what += "; ";
    switch (rng.below(8)) {
      case 0:
      case 1:
      case 2: {  // a payload
        Model::Row& e = m.events[rng.below(m.events.size())];
        what += "payload of event " + std::to_string(e.seq) + ": ";
        e.payload = mutate_json(rng, e.payload, seeds, what);
        break;
      }
      case 3: {  // a code blob (JSON) or a listing, with its hash and the references to it following
        const size_t i = rng.below(m.blobs.size());
        std::string data = m.blobs[i].second;
        what += "blob " + m.blobs[i].first + ": ";
        if (!data.empty() && data[0] == '{') data = mutate_json(rng, data, seeds, what);
        else what += mutate_bytes(rng, data, 0);
        m.rewrite_blob(i, std::move(data));
        break;
      }
      case 4: {  // lose a blob
        const size_t i = rng.below(m.blobs.size());
        what += "drop blob " + m.blobs[i].first;
        m.blobs.erase(m.blobs.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
      case 5: {  // another kind (valid or not)
        static const char* kinds[] = {"schedule", "launch", "output", "nodes", "trial", "Launch", "", "launch\n", "Nodes"};
        Model::Row& e = m.events[rng.below(m.events.size())];
        e.kind = kinds[rng.below(sizeof kinds / sizeof kinds[0])];
        what += "event " + std::to_string(e.seq) + " becomes kind '" + e.kind + "'";
        break;
      }
      case 6: {  // seq and time
        Model::Row& e = m.events[rng.below(m.events.size())];
        static const int64_t values[] = {-1, INT64_MIN, INT64_MAX, 1000000, 3};
        e.seq = values[rng.below(sizeof values / sizeof values[0])];
        e.time_ns = values[rng.below(sizeof values / sizeof values[0])];
        what += "event seq/time to " + std::to_string(e.seq) + "/" + std::to_string(e.time_ns);
        break;
      }
      default: {  // a payload of one event under another's kind, or an event duplicated
        Model::Row e = m.events[rng.below(m.events.size())];
        e.seq = m.events.back().seq + 1 + static_cast<int64_t>(rng.below(3));
        if (rng.below(2)) e.payload = m.events[rng.below(m.events.size())].payload;
        what += "add event " + std::to_string(e.seq) + " (" + e.kind + ")";
        m.events.push_back(std::move(e));
      }
    }
  }
  if (!m.write(sql)) what += " (not all rows written)";
  return what;
}

std::string mutate_sql(Rng& rng, const std::string& path, const Seeds& seeds) {
  Sql sql(path);
  if (!sql.db) return "(cannot open)";
  static const char* event_columns[] = {"seq", "kind", "time_ns", "payload", "checksum"};
  static const char* run_columns[] = {"script_path", "script_text", "argv", "device", "device_properties", "version",
                                      "python_version", "start_time_ns", "ended", "exit_status", "end_message",
                                      "end_time_ns"};
  static const char* tables[] = {"run", "events", "blobs"};
  const char* table = tables[rng.below(3)];
  switch (rng.below(22)) {  // 13..21: consistent edits, which get past the checksums to the decoder
    case 0:
    case 1:
    case 2: {
      const char* column = event_columns[rng.below(5)];
      const int64_t seq = static_cast<int64_t>(rng.below(seeds.events + 1));
      return std::string("events.") + column + " of seq " + std::to_string(seq) + " := " +
             set_garbage(rng, sql, std::string("UPDATE events SET ") + column + " = ? WHERE seq = " + std::to_string(seq));
    }
    case 3:
    case 4: {
      const char* column = rng.below(3) ? "data" : "hash";
      const size_t row = 1 + rng.below(seeds.blobs.size());
      return std::string("blobs.") + column + " of row " + std::to_string(row) + " := " +
             set_garbage(rng, sql, std::string("UPDATE blobs SET ") + column + " = ? WHERE rowid = " + std::to_string(row));
    }
    case 5:
    case 6: {
      const char* column = run_columns[rng.below(12)];
      return std::string("run.") + column + " := " + set_garbage(rng, sql, std::string("UPDATE run SET ") + column + " = ?");
    }
    case 7: {
      static const int64_t versions[] = {1, 0, -1, 3, 1000000, INT32_MIN};  // 1 reads (an older format); the rest do not
      const int64_t v = rng.below(2) ? 3 : versions[rng.below(6)];
      sql.exec("PRAGMA user_version = " + std::to_string(v));
      return "user_version := " + std::to_string(v);
    }
    case 8: {
      const int64_t v = rng.below(2) ? 0 : static_cast<int32_t>(rng.next());
      sql.exec("PRAGMA application_id = " + std::to_string(v));
      return "application_id := " + std::to_string(v);
    }
    case 9:
      sql.exec(std::string("DROP TABLE ") + table);
      return std::string("drop table ") + table;
    case 10: {
      std::string where = rng.below(2) ? "" : " WHERE rowid % 2 = " + std::to_string(rng.below(2));
      sql.exec(std::string("DELETE FROM ") + table + where);
      if (rng.below(2)) sql.exec("INSERT INTO run SELECT * FROM run");  // two runs
      return std::string("delete from ") + table + where;
    }
    case 11: {
      static const char* edits[] = {"ALTER TABLE events RENAME COLUMN payload TO p", "ALTER TABLE run RENAME TO run2",
                                    "ALTER TABLE blobs ADD COLUMN extra TEXT", "ALTER TABLE run DROP COLUMN argv",
                                    "CREATE TABLE x(a); PRAGMA user_version = 1",
                                    "DROP TABLE events; CREATE TABLE events(seq, kind, time_ns, payload, checksum); "
                                    "INSERT INTO events VALUES ('a', NULL, 'b', x'00ff', NULL)",
                                    "DROP TABLE blobs; CREATE VIEW blobs AS SELECT 1 AS hash, 2 AS data",
                                    "DROP TABLE run; CREATE TABLE run(x)"};
      const char* edit = edits[rng.below(sizeof edits / sizeof edits[0])];
      sql.exec(edit);
      return edit;
    }
    case 12: {  // garble the schema itself
      sql.exec("PRAGMA writable_schema = ON");
      const std::string what =
          std::string("schema of ") + table + " := " +
          set_garbage(rng, sql, std::string("UPDATE sqlite_schema SET sql = ? WHERE name = '") + table + "'");
      sql.exec("PRAGMA writable_schema = OFF");
      return what;
    }
    default:
      return "consistent: " + mutate_consistently(rng, sql, seeds);
  }
}

// ---- checking one load ------------------------------------------------------------------------------

enum class Outcome { Loaded, Rejected, Failed };

struct Check {
  Outcome outcome;
  std::string message;  // the error message, or why it failed
};

// A decoded event that breaks a promise of the decoder (what a viewer relies on without checking).
struct BrokenPromise : std::logic_error {
  using std::logic_error::logic_error;
};

// Reads every part of a decoded event the way a viewer would (so that the sanitizers see any bad
// access) and checks what the decoder promises; returns a number that depends on what it read.
size_t touch(const Event& e) {
  size_t touched = 0;
  if (auto* r = std::get_if<KernelRunEvent>(&e)) {
    touched += r->name.size();
    if (r->code) {
      for (const auto& p : r->code->ir) touched += p.ir().size();
      for (const auto& s : r->code->sources) touched += s.code.size() + s.ir_op_line.size();
      // what a renderer reads: a kernel IR that reads back (when first needed) passes ir::verify; one that
      // does not gives null and says why
      if (auto kernel = r->code->kernel_ir()) {
        if (auto errors = ir::verify(*kernel); !errors.empty()) throw BrokenPromise("a kernel IR that fails ir::verify: " + errors.front());
        touched += ir::print(*kernel).size();
      } else if (r->code->has_kernel_ir() && r->code->kernel_ir_error().empty()) {
        throw BrokenPromise("a kernel IR that reads as nothing without saying why");
      }
    }
    for (const RecordedBuffer& b : r->buffers) {
      if (b.role != "output" && b.role != "input") throw BrokenPromise("a recorded buffer of role '" + b.role + "'");
      if (b.numel < 0 || b.index < 0) throw BrokenPromise("a recorded buffer with a negative numel or index");
      touched += b.note.size();
      if (!b.bytes) continue;
      const uint64_t item = b.dtype == "float16" ? 2 : b.dtype == "bool" ? 1 : 4;
      if (static_cast<uint64_t>(b.numel) > b.bytes->size() || b.bytes->size() != static_cast<uint64_t>(b.numel) * item)
        throw BrokenPromise("a recorded " + b.dtype + " buffer of " + std::to_string(b.numel) + " values in " +
                            std::to_string(b.bytes->size()) + " bytes");
      for (unsigned char c : *b.bytes) touched += c;
    }
  } else if (auto* s = std::get_if<ScheduleEvent>(&e)) {
    touched += s->nodes.size() + s->kernels.size() + s->where.file.size() + static_cast<size_t>(s->where.line);
  } else if (auto* n = std::get_if<NodesEvent>(&e)) {
    if (!n->batch) throw BrokenPromise("a NodesEvent without a batch");
    const NodeBatch& b = *n->batch;
    if (b.stack.size() != b.nodes.size()) throw BrokenPromise("a node batch whose stack indexes do not match its nodes");
    for (const SourceStack& st : b.stacks)
      if (st.user < -1 || st.user >= static_cast<int>(st.frames.size())) throw BrokenPromise("a stack's user frame out of range");
    const uint64_t positions = b.nodes.size() + n->external_uids.size();
    for (size_t i = 0; i < n->size(); i++) {
      const GraphNodeInfo& g = b.nodes[i];
      if (g.uid != i) throw BrokenPromise("a batch node whose uid is not its position");
      for (uint64_t p : g.srcs) {
        if (p >= positions) throw BrokenPromise("a source position " + std::to_string(p) + " out of range");
        touched += static_cast<size_t>(n->uid_at(p));
      }
      if (b.stack[i] < -1 || b.stack[i] >= static_cast<int>(b.stacks.size())) throw BrokenPromise("a stack index out of range");
      const SourceLocation where = n->where(i);
      touched += static_cast<size_t>(n->uid(i)) + g.op.size() + g.shape.size() + where.file.size() + static_cast<size_t>(where.line);
    }
    for (uint64_t u : n->freed_uids) touched += static_cast<size_t>(u);
  } else if (auto* o = std::get_if<ScriptOutputEvent>(&e)) {
    touched += o->text.size();
  } else if (auto* t = std::get_if<AutotuneTrialEvent>(&e)) {
    if (t->kernel_id < -1) throw BrokenPromise("a trial of kernel " + std::to_string(t->kernel_id));
    touched += t->name.size() + t->plan.size() + t->reason.size() + std::strlen(trial_outcome_name(t->outcome));
  } else {
    throw BrokenPromise("an event of an alternative the fuzzer does not know");
  }
  return touched;
}

// RecordingReader + read_events: loads, or RecordingError with one non-empty line naming `path`.
Check check_file(const std::string& path) {
  try {
    RecordingReader reader(path);
    size_t touched = reader.run().script_text.size() + reader.run().argv.size() + reader.event_count();
    reader.read_events([&](uint64_t, int64_t, const Event& e) { touched += touch(e); });
    return {Outcome::Loaded, std::to_string(touched)};
  } catch (const RecordingError& e) {
    const std::string m = e.what();
    if (m.empty()) return {Outcome::Failed, "RecordingError with an empty message"};
    if (m.find_first_of("\n\r") != std::string::npos) return {Outcome::Failed, "RecordingError of more than one line: " + m};
    if (m.find(path) == std::string::npos) return {Outcome::Failed, "RecordingError that does not name the file: " + m};
    return {Outcome::Rejected, m};
  } catch (const BrokenPromise& e) {
    return {Outcome::Failed, std::string("decoded an event that breaks a promise of the decoder: ") + e.what()};
  } catch (const std::exception& e) {
    return {Outcome::Failed, std::string("an exception other than RecordingError (") + typeid(e).name() + "): " + e.what()};
  } catch (...) {
    return {Outcome::Failed, "an exception that is not a std::exception"};
  }
}

// The frame stream: FrameParser (fed in random pieces), frame bodies, run info, EventDecoder.
Check check_frames(Rng& rng, const std::string& stream) {
  try {
    FrameParser parser;
    EventDecoder decoder;
    Frame frame;
    size_t frames = 0;
    for (size_t at = 0; at < stream.size();) {
      const size_t n = std::min(stream.size() - at, rng.one_in(4) ? 1 : 1 + rng.below(512));
      parser.feed(std::string_view(stream).substr(at, n));
      at += n;
      while (parser.next(frame)) {
        frames++;
        switch (frame.type) {
          case 'I':
          case 'X': run_info_from_json(frame.body); break;
          case 'B': decoder.add_blob(blob_from_frame_body(frame.body)); break;
          case 'E': touch(decoder.decode(event_from_frame_body(frame.body))); break;
          default: throw RecordingError("connection: a frame of unknown type");  // as the debugger does
        }
      }
    }
    return {Outcome::Loaded, std::to_string(frames)};
  } catch (const RecordingError& e) {
    const std::string m = e.what();
    if (m.empty()) return {Outcome::Failed, "RecordingError with an empty message"};
    if (m.find_first_of("\n\r") != std::string::npos) return {Outcome::Failed, "RecordingError of more than one line: " + m};
    return {Outcome::Rejected, m};
  } catch (const BrokenPromise& e) {
    return {Outcome::Failed, std::string("decoded an event that breaks a promise of the decoder: ") + e.what()};
  } catch (const std::exception& e) {
    return {Outcome::Failed, std::string("an exception other than RecordingError (") + typeid(e).name() + "): " + e.what()};
  } catch (...) {
    return {Outcome::Failed, "an exception that is not a std::exception"};
  }
}

// A rejection's reason without the path and the numbers, to count how many different ways inputs fail.
std::string reason_class(const std::string& message, const std::string& path) {
  std::string m = message;
  if (m.compare(0, path.size(), path) == 0) m = m.substr(path.size());
  std::string out;
  for (char c : m) {
    if (c >= '0' && c <= '9') {
      if (out.empty() || out.back() != '#') out += '#';
    } else {
      out += c;
    }
    if (out.size() >= 64) break;
  }
  return out;
}

// Printed by the sanitizers' death callback: which input crashed.
std::string g_crash_note;
void on_death() {
  if (!g_crash_note.empty()) std::fprintf(stderr, "\nfuzz_recording: DIED on %s\n", g_crash_note.c_str());
}

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c >= 0x7f) {  // ASCII only: the messages may hold any bytes the file held
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t iterations = 10000, seed = 20240521, first = 0;
  double max_seconds = 120;
  std::string keep_dir = "fuzz_recording-failures";
  bool verbose = false;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    try {
      if (a == "--iterations") iterations = std::stoull(value());
      else if (a == "--seed") seed = std::stoull(value(), nullptr, 0);
      else if (a == "--max-seconds") max_seconds = std::stod(value());
      else if (a == "--first") first = std::stoull(value());
      else if (a == "--keep-dir") keep_dir = value();
      else if (a == "--verbose" || a == "-v") verbose = true;
      else if (a == "--help" || a == "-h") {
        std::printf("usage: fuzz_recording [--iterations N] [--seed S] [--max-seconds T] [--first I] [--keep-dir D] [--verbose]\n");
        return 0;
      } else die("unknown argument " + a);
    } catch (const std::logic_error&) {
      die("bad value for " + a);
    }
  }
#ifdef TS_HAVE_SANITIZER_API
  __sanitizer_set_death_callback(on_death);
#endif
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/fuzz_recording.XXXXXX";
  if (!mkdtemp(templ.data())) die("cannot create a temporary directory: " + std::string(std::strerror(errno)));
  const std::string dir = templ;
  g_temp_dir = dir;

  const auto start = std::chrono::steady_clock::now();
  Seeds seeds;
  try {
    seeds = write_seeds(dir);
  } catch (const std::exception& e) {
    die(std::string("writing the sample recording failed: ") + e.what());
  }
  const size_t page = page_size(seeds.finished);
  {  // the frame stream reads back too
    Rng rng(seed);
    const Check c = check_frames(rng, seeds.frames);
    if (c.outcome != Outcome::Loaded) die("the unmutated frame stream did not decode: " + c.message);
  }
  std::printf("fuzz_recording: seed %" PRIu64 ", sample recording of %zu bytes (%zu-byte pages), live copy %zu + %zu bytes (-wal), "
              "frame stream %zu bytes\n",
              seed, seeds.finished.size(), page, seeds.live_db.size(), seeds.live_wal.size(), seeds.frames.size());
  std::fflush(stdout);

  const std::string path = dir + "/mutated.tsrec";
  uint64_t ran = 0, loaded = 0, rejected = 0, failures = 0, frames_loaded = 0, frames_rejected = 0, frame_failures = 0;
  uint64_t by_kind[3] = {0, 0, 0};
  std::map<std::string, uint64_t> reasons;
  double slowest = 0;
  uint64_t slowest_iteration = 0;
  bool out_of_time = false;
  for (uint64_t it = first; it < first + iterations; it++) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > max_seconds) {
      out_of_time = true;
      break;
    }
    Rng rng(seed ^ (0x632be59bd9b4e019ULL * (it + 1)));
    rng.next();
    std::string what;
    remove_recording(path);
    const size_t kind = rng.below(20) < 11 ? 0 : (rng.below(20) < 4 ? 1 : 2);  // bytes, bytes of a live copy, SQL
    try {
      if (kind == 0) {
        std::string data = seeds.finished;
        what = "bytes: " + mutate_bytes(rng, data, page);
        write_bytes(path, data);
      } else if (kind == 1) {
        std::string db = seeds.live_db, wal = seeds.live_wal;
        const size_t target = rng.below(3);  // the database, the -wal, or both
        if (target != 1) what += "live db: " + mutate_bytes(rng, db, page);
        if (target != 0) what += std::string(what.empty() ? "" : "; ") + "live -wal: " + mutate_bytes(rng, wal, page + 24);
        write_bytes(path, db);
        write_bytes(path + "-wal", wal);
      } else {
        write_bytes(path, seeds.finished);
        what = "sql: " + mutate_sql(rng, path, seeds);
      }
    } catch (const std::exception& e) {
      die("iteration " + std::to_string(it) + ": could not write the mutated file: " + e.what());
    }
    by_kind[kind]++;
    g_crash_note = "iteration " + std::to_string(it) + " (--seed " + std::to_string(seed) + " --first " + std::to_string(it) +
                   " --iterations 1 replays it), input " + path + ": " + printable(what);

    const auto t0 = std::chrono::steady_clock::now();
    const Check c = check_file(path);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (took > slowest) {
      slowest = took;
      slowest_iteration = it;
    }
    ran++;
    if (verbose)
      std::printf("%" PRIu64 ": %s -> %s %s\n", it, printable(what).c_str(),
                  c.outcome == Outcome::Loaded ? "loaded" : c.outcome == Outcome::Rejected ? "rejected:" : "FAILED:",
                  c.outcome == Outcome::Loaded ? "" : printable(c.message).c_str());
    if (c.outcome == Outcome::Loaded) {
      loaded++;
    } else if (c.outcome == Outcome::Rejected) {
      rejected++;
      reasons[reason_class(c.message, path)]++;
    } else {
      failures++;
      ::mkdir(keep_dir.c_str(), 0755);
      const std::string kept = keep_dir + "/iteration-" + std::to_string(it) + ".tsrec";
      remove_recording(kept);
      // the input as it was written (re-created: the load may have changed the -wal/-shm)
      std::rename(path.c_str(), kept.c_str());
      if (exists(path + "-wal")) std::rename((path + "-wal").c_str(), (kept + "-wal").c_str());
      if (failures <= 20)
        std::printf("FAILURE at iteration %" PRIu64 " (%s): %s\n  input kept as %s\n", it, printable(what).c_str(),
                    printable(c.message).c_str(), kept.c_str());
    }

    // the same run as a frame stream
    std::string stream = seeds.frames;
    const std::string frame_what = mutate_bytes(rng, stream, 0);
    g_crash_note = "iteration " + std::to_string(it) + " (frame stream): " + frame_what;
    const Check f = check_frames(rng, stream);
    if (f.outcome == Outcome::Loaded) frames_loaded++;
    else if (f.outcome == Outcome::Rejected) frames_rejected++;
    else {
      frame_failures++;
      if (frame_failures <= 20)
        std::printf("FRAME FAILURE at iteration %" PRIu64 " (%s): %s\n", it, printable(frame_what).c_str(),
                    printable(f.message).c_str());
    }
    g_crash_note.clear();
  }
  remove_recording(path);
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("fuzz_recording: %zu different rejection reasons; the most frequent:\n", reasons.size());
  std::vector<std::pair<uint64_t, std::string>> top;
  for (const auto& [r, n] : reasons) top.emplace_back(n, r);
  std::sort(top.rbegin(), top.rend());
  for (size_t i = 0; i < top.size() && i < (verbose ? top.size() : 12); i++)
    std::printf("  %6" PRIu64 "  %s\n", top[i].first, printable(top[i].second).c_str());
  std::printf("fuzz_recording: inputs: %" PRIu64 " byte-mutated files, %" PRIu64 " byte-mutated live copies (db + -wal), %" PRIu64
              " SQL-mutated files; slowest load %.1f ms (iteration %" PRIu64 ")\n",
              by_kind[0], by_kind[1], by_kind[2], slowest * 1000, slowest_iteration);
  std::printf("fuzz_recording: frame streams: %" PRIu64 " mutated, %" PRIu64 " decoded, %" PRIu64 " rejected with a message, %" PRIu64
              " failures\n",
              ran, frames_loaded, frames_rejected, frame_failures);
  if (out_of_time)
    std::printf("fuzz_recording: stopped after %.0f s (--max-seconds): %" PRIu64 " of %" PRIu64 " iterations ran\n", max_seconds, ran,
                iterations);
  std::printf("fuzz_recording: %" PRIu64 " mutated recordings, %" PRIu64 " loaded, %" PRIu64 " rejected with a message, %" PRIu64
              " failures (%.1f s, seed %" PRIu64 ")\n",
              ran, loaded, rejected, failures, total, seed);
  if (failures) std::printf("fuzz_recording: the failing inputs are in %s\n", keep_dir.c_str());
  std::fflush(stdout);
  for (const char* name : {"/seed.tsrec", "/live.tsrec", "/mutated.tsrec"}) remove_recording(dir + name);
  if (::rmdir(dir.c_str()) != 0) std::printf("fuzz_recording: could not remove %s: %s\n", dir.c_str(), std::strerror(errno));
  return failures || frame_failures ? 1 : 0;
}
