// The session: one ordered stream of events that every stage of the engine reports to.
//
// The GUI, the CLI manifest writer and the DEBUG printer are observers of this stream; none of them
// reaches into engine internals (observer pattern, as in DESIGN.md). With no observer attached,
// emitting an event costs one branch: stages test `Session::get().observed()` before building payloads.
//
// Threading: events are emitted on the thread that runs the engine (the script thread). Observers
// must copy what they need and hand it to their own thread (the GUI posts to its event loop).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <string>
#include <variant>
#include <vector>

namespace ts {

struct Buffer;  // tensorscope/device.h
namespace ir {
struct Kernel;  // tensorscope/ir.h
}

// One node of the lazy graph as it was when a schedule was made. `uid` is unique for the whole
// process lifetime (graph slab ids are reused; uids never are).
struct GraphNodeInfo {
  uint64_t uid = 0;
  std::string op;                 // primitive op: "BUFFER", "CONST", "ADD", "RESHAPE", "SUM", ...
  std::string op_class;           // "load" | "const" | "movement" | "elementwise" | "reduce" | "other"
  std::vector<int64_t> shape;
  std::string dtype;              // "float32", "int32", "bool"
  std::vector<uint64_t> srcs;     // uids of the inputs, in operand order
  std::string arg;                // op argument as text: axes, permutation, pads, constant value
  int kernel = -1;                // index into ScheduleEvent::kernels that computes it; -1: an input buffer
};

struct BufferInfo {
  uint64_t node_uid = 0;          // the graph node the buffer holds
  std::vector<int64_t> shape;
  std::string dtype;
};

// One decision of the kernelizer's cost model (engine/src/schedule/schedule.h, rule 3): a value that
// several ops read, or that a consumer reads through a broadcast, is either stored once (the output of
// a kernel) or recomputed by every kernel that reads it. The numbers are estimates for the whole value.
struct FusionDecision {
  uint64_t node_uid = 0;
  std::string op;                 // the value's op ("SUM", "MUL", ...)
  bool stored = false;            // true: a kernel's output, read from memory; false: recomputed where read
  int64_t evaluations = 1;        // how often each element would be computed if fused: reads × broadcast
  double flops = 0;               // FLOPs to compute the whole value once (its fused subtree)
  double recompute_flops = 0;     // extra FLOPs if fused: (evaluations - 1) × flops
  double store_bytes = 0;         // bytes moved if stored: one write and one read per reader
  std::string reason;             // the rule that decided, in words, with the numbers
};

// One kernel of a schedule: the graph nodes fused into it and why it ends where it ends.
struct KernelInfo {
  int id = -1;                    // session-wide kernel number, in launch order
  std::string name;               // tinygrad style: E_<dims> (elementwise) or r_<dims> (with a reduce)
  std::string device;
  std::vector<uint64_t> node_uids;  // nodes fused into this kernel (topological order, output last)
  std::vector<std::string> ops;     // op of each fused node, same order
  std::vector<BufferInfo> inputs;
  std::vector<BufferInfo> outputs;
  std::vector<std::string> boundary_reasons;  // why the kernel ends (its output is stored) and why each input is a buffer
  // The cost model's decisions about this kernel's output (stored) and about the values it recomputes
  // that other ops read too (recomputed); empty in recordings made before they existed.
  std::vector<FusionDecision> fusion_decisions;
  // The work of one launch, computed at schedule time from the fused nodes' shapes (engine/src/schedule/
  // kernel_cost.h): `flops` = ALU ops × the elements each computes (a reduce: its input's elements; a
  // multiply and the add that sums it count 2, so a matmul is 2·M·N·K FLOPs), `bytes` = the sizes of the
  // buffers it reads and writes (a device copy: its source and destination). -1: not known (recordings
  // made before they existed).
  double flops = -1;  // FLOPs per launch
  double bytes = -1;  // bytes moved per launch
};

// Where the script made a graph node: the innermost Python frame outside the tensorscope package (the
// user's line, also for a node made inside nn.Linear called from it).
struct SourceLocation {
  std::string file;  // "" when unknown (a node made from C++, or nothing was tracking)
  int line = 0;
};

// A realize() call turned a piece of the lazy graph into kernels.
struct ScheduleEvent {
  int schedule_id = 0;
  SourceLocation where;              // the script line whose realize made it ("" file when unknown)
  std::vector<GraphNodeInfo> nodes;  // every node the schedule touches, inputs included
  std::vector<KernelInfo> kernels;   // in launch order
  // The schedule's structure, shared by every schedule of the same graph structure (a training loop's
  // steps): this event with each node uid replaced by a position, and position_uids[p] the uid of the
  // node at position p here. Set by the engine (null in events made by hand); a recording stores the
  // structure once and each schedule as a list of uids. See instantiate_schedule.
  std::shared_ptr<const ScheduleEvent> structure;
  std::vector<uint64_t> position_uids;
  // A schedule that repeats a structure (the engine's schedule cache) is emitted thin: structure,
  // position_uids and kernel_ids (one per kernel of the structure) are set, nodes and kernels are empty,
  // so that a watched training loop does not copy the structure's nodes and kernels (thousands of strings)
  // at every step for observers that only need the uids (the recording); one that needs them calls
  // full_schedule().
  std::vector<int> kernel_ids;
  bool thin() const { return structure && nodes.empty() && kernels.empty() && !kernel_ids.empty(); }
};

// Calls `f` on every field of `event` that holds a node uid (nodes and their sources, kernels' nodes,
// inputs and outputs): how a schedule becomes a structure (uids to positions) and back.
void for_each_uid(ScheduleEvent& event, const std::function<void(uint64_t&)>& f);

// The schedule `structure` with position p replaced by position_uids[p] in every uid field, and the given
// schedule id and kernel ids (one per kernel of the structure). Throws std::invalid_argument when a
// position is out of range or the kernel ids do not match.
ScheduleEvent instantiate_schedule(const std::shared_ptr<const ScheduleEvent>& structure,
                                   std::vector<uint64_t> position_uids, const std::vector<int>& kernel_ids,
                                   int schedule_id);

// `event` with its nodes and kernels: a thin event instantiated from its structure (its `where` kept), any
// other event as it is.
ScheduleEvent full_schedule(const ScheduleEvent& event);

// Calls f(id, kernel) for each kernel of `event` in launch order, without copying: a thin event's kernels are
// its structure's (their node uids are positions into position_uids) with the event's own ids.
void for_each_kernel(const ScheduleEvent& event, const std::function<void(int, const KernelInfo&)>& f);

// The IR of a kernel after one step of its lowering: "lower", then each pass that ran.
//
// A watched run keeps a copy of the kernel after each pass and prints its listing (ir::print) when someone
// first reads it, not on the engine's thread when the pass ran: a recording's encoder prints it on its own
// thread, and a listing nobody reads is never printed. Printing the listings after every pass of every new
// kernel was a fifth of what watching cost the script's thread (README, "What watching costs"). Copies of a
// snapshot share its listing, and so does a pass that changed nothing.
class PassSnapshot {
 public:
  // A listing already printed: the one lowering made (its text keys the engine's cache of kernels seen), a
  // recording's.
  PassSnapshot(std::string pass, std::string listing);
  // The kernel after the pass, printed when first read.
  PassSnapshot(std::string pass, const ir::Kernel& kernel);
  // A pass that changed nothing: the listing of the snapshot before it, shared (not copied, printed once).
  PassSnapshot(std::string pass, const PassSnapshot& unchanged_from);

  std::string pass;

  // The IR listing after the pass (ir::print's text). Thread-safe: the first call prints it.
  const std::string& ir() const;
  // Whether `other` has the same listing: shares it (no printing), else compares the two texts.
  bool same_ir(const PassSnapshot& other) const;

 private:
  struct Listing;
  std::shared_ptr<Listing> listing_;
};

struct SourceListing {
  std::string renderer;          // "C", "OpenCL C", "GLSL", "CUDA C", ...
  std::string code;
  std::vector<int> ir_op_line;   // for each IR op index, the 1-based source line it maps to (0: none)
};

// What a kernel compiled to: its IR after each pass, the source its device compiled, and its source in
// every other renderer on demand. Built once per distinct kernel and shared (immutable) by every launch of
// it, so that watching a training loop copies no listing twice; a recording stores each listing once
// (content-addressed blobs).
//
// The other renderers' listings (OpenCL C, GLSL, SPIR-V, CUDA C, PTX of a kernel the C device ran) are
// rendered from `kernel` when someone asks for one (listing()), not when the kernel runs: rendering and
// recording all of them for every kernel of a watched run cost more than the run (issue 11's 1.2x bar).
// The renderers are deterministic, so the listing is the one the run would have made (by this build).
struct KernelCode {
  KernelCode() = default;
  KernelCode(const KernelCode& other);  // copies the listings, not the cache of rendered ones
  KernelCode& operator=(const KernelCode&) = delete;

  std::vector<PassSnapshot> ir;        // IR after lowering and after every pass
  // The listings made when the kernel was compiled: the device's own (none on INTERP). Recordings made
  // before `kernel` was kept hold every renderer's here.
  std::vector<SourceListing> sources;
  // The kernel the device compiled (its IR after every pass), which the other renderers render: set by the
  // engine. A decoded recording's is read from its blob on first use instead: read it with kernel_ir().
  std::shared_ptr<const ir::Kernel> kernel;
  std::string device_renderer;         // the renderer of the source the device compiled (one of `sources`)
  // The kernel's optimization actions (issue 14): the plan the passes were asked for (ir::OptPlan::str; ""
  // = the heuristics' default), where it came from ("heuristics", "TENSORSCOPE_OPTS", "BEAM search",
  // "autotune cache"), and what the passes applied ("UPCAST_GLOBAL(4) UPCAST_REDUCE(2)"; "" = nothing).
  // Empty in recordings made before they were recorded.
  std::string plan;
  std::string plan_from;
  std::string applied;

  // The languages this kernel has a listing in: every registered renderer's, in the registry's order
  // ("C", "OpenCL C", ...), when `kernel` is kept; then those of `sources` not among them.
  std::vector<std::string> languages() const;
  // The listing in `language` (one of languages()): from `sources`, else rendered from `kernel` on the first
  // call and kept (thread-safe). A renderer that fails gives a listing that says why ("// could not render:
  // ..."). nullptr for a language that is not in languages().
  const SourceListing* listing(const std::string& language) const;

  // `kernel`, else the kernel IR of a recording, read by the reader set_kernel_reader gave on the first call
  // (thread-safe; kept), else null: in recordings made before it was kept, and when the reader fails
  // (kernel_ir_error() says why).
  std::shared_ptr<const ir::Kernel> kernel_ir() const;
  // Whether kernel_ir() has a kernel to give or to read (does not read it).
  bool has_kernel_ir() const;
  // Why kernel_ir() gave null although has_kernel_ir(): the reader's error ("kernel IR: unknown op ..."); "".
  std::string kernel_ir_error() const;
  // A decoded recording's kernel IR, read when someone first needs it (EventDecoder::code): the debugger
  // parsed every kernel's IR as a run streamed in (85 ms of CPU for transformer_tiny.py, beside the runner
  // on the same cores), for the few kernels anyone renders in another language. `read` throws on bad input.
  void set_kernel_reader(std::function<ir::Kernel()> read);

 private:
  struct Rendered {
    std::mutex mutex;
    std::map<std::string, std::unique_ptr<const SourceListing>> by_language;  // stable addresses
    std::function<ir::Kernel()> read_kernel;      // set_kernel_reader's; cleared once it ran
    std::shared_ptr<const ir::Kernel> read_kernel_result;
    std::string read_kernel_error;
  };
  std::shared_ptr<Rendered> rendered_ = std::make_shared<Rendered>();
};

// The values of one buffer of a launch, kept when buffers are recorded (Session::set_record_buffers).
struct RecordedBuffer {
  std::string role;     // "output" or "input"
  int index = 0;        // the output's or the input's number (KernelInfo::outputs / KernelInfo::inputs order)
  std::string dtype;    // "float32", "float16", "int32", "bool"
  int64_t numel = 0;
  std::shared_ptr<const std::string> bytes;  // numel values in host byte order; null when not kept
  std::string note;     // when bytes is null: why ("the 64 MB budget of --record-buffers is used up")
};

// A kernel was compiled (or taken from the cache) and launched.
struct KernelRunEvent {
  int kernel_id = -1;            // KernelInfo::id
  std::string name;
  std::string device;
  std::shared_ptr<const KernelCode> code;  // null for device copies and jit replays
  bool compile_cache_hit = false;
  double compile_ms = 0;         // 0 when cached
  double time_ms = 0;            // kernel execution time on the device
  // A launch replayed by a jit (tensorscope/jit.h): no schedule, lowering or compile happened; the IR
  // and the sources are those of the captured launch `replay_of` (a kernel_id), and `code` is null.
  bool replayed = false;
  int replay_of = -1;
  // After the launch: its outputs, then its inputs, when buffers are recorded; empty otherwise.
  std::vector<RecordedBuffer> buffers;
};

// One candidate of an autotune search (engine/src/runtime/autotune.h: the BEAM search over a kernel's
// OptPlan). The search emits one per candidate it considers, in order, before the kernel's KernelRunEvent;
// a kernel whose plan came from the autotune cache gets one, CacheHit. The timeline draws them on its
// autotune lane (TraceRecorder::add_autotune_trial).
struct AutotuneTrialEvent {
  enum Outcome : uint8_t {
    Timed,          // compiled and timed (median of its launches): it competed for the beam
    Kept,           // the plan the kernel keeps: the search's winner, timed again beside the default
    DroppedSlow,    // stopped early: slower than the best so far by the search's margins (reason says which)
    Duplicate,      // renders to the same source as a candidate already timed: not compiled again
    FailedCompile,  // the passes rejected the plan, or the device's compiler failed (reason: its message)
    FailedRun,      // the launch threw (reason: the device's message)
    Timeout,        // its compile or a launch took longer than TENSORSCOPE_BEAM_TIMEOUT_MS
    CacheHit,       // no search: the plan comes from <cache>/autotune.db (time_ms: what that search measured)
  };
  int kernel_id = -1;        // the kernel being tuned (KernelInfo::id)
  std::string name;          // its name
  std::string ir_hash;       // 16 hex digits: FNV-1a of the lowered kernel's IR (ir::print), the search's key
  std::string device;
  std::string plan;          // the candidate's plan (ir::OptPlan::str): "UPCAST_GLOBAL=8,REGISTER_TILE=0"; "" = the default
  std::string applied;       // what the passes applied for it (Kernel::opts): "UPCAST_GLOBAL(8)"; "" = nothing
  double compile_ms = 0;     // compiling the candidate (0: not compiled, or the device's compile cache had it)
  double time_ms = 0;        // the median of its timed launches (ms, the device's timer); 0 when not timed
  Outcome outcome = Timed;
  std::string reason;        // why, in words: "over 2x the best (0.12 ms)", the compiler's first error line
};
// "timed", "kept", "dropped-slow", "duplicate", "failed-compile", "failed-run", "timeout", "cache-hit"
const char* trial_outcome_name(AutotuneTrialEvent::Outcome outcome);
// The outcome named by trial_outcome_name's text; false for another text.
bool trial_outcome_from_name(const std::string& name, AutotuneTrialEvent::Outcome& outcome);

// Text the script wrote (stdout/stderr), or a script error with its traceback.
struct ScriptOutputEvent {
  enum Stream { Stdout, Stderr } stream = Stdout;
  std::string text;
};

// One frame of a Python call stack.
struct SourceFrame {
  std::string file;
  int line = 0;           // 1-based
  std::string function;   // the code object's qualified name: "Linear.__call__", "<module>"
};

// The short call stack where a node was made, innermost frame first: the tensorscope frames down to
// the user's line, and up to two user frames above it (who called the function that made the node).
struct SourceStack {
  std::vector<SourceFrame> frames;
  int user = -1;  // index of the innermost frame outside the tensorscope package: the user's line; -1: none
  SourceLocation where() const {
    return user < 0 ? SourceLocation{} : SourceLocation{frames[user].file, frames[user].line};
  }
};

// A batch of created nodes without their uids: what a training loop repeats step after step, so a
// recording stores it once (like ScheduleEvent::structure). Node i of the batch is at position i; a
// source position p < nodes.size() is a node of the batch, p >= nodes.size() the earlier node
// NodesEvent::external_uids[p - nodes.size()]. GraphNodeInfo::uid is the position, kernel is -1.
struct NodeBatch {
  std::vector<GraphNodeInfo> nodes;   // srcs hold positions
  std::vector<int> stack;             // per node: index into stacks; -1 when unknown
  std::vector<SourceStack> stacks;
};

// Graph nodes the script created (the lazy graph as it grows), with the script line of each, and the
// nodes freed since the previous NodesEvent (dropped before they were ever realized, or sources a
// realize no longer needs). The session emits one before any other event when nodes are pending, and
// when the debugger's gate pauses, so every event sees the graph it was made from.
struct NodesEvent {
  uint64_t first_uid = 0;                  // the batch's node i has uid first_uid + i (uids are consecutive)
  std::vector<uint64_t> external_uids;     // uids of earlier nodes the batch's nodes read
  std::shared_ptr<const NodeBatch> batch;  // shared by every repeat of the same structure
  std::vector<uint64_t> freed_uids;

  size_t size() const { return batch ? batch->nodes.size() : 0; }
  uint64_t uid(size_t i) const { return first_uid + i; }
  // The uid a source position of the batch names.
  uint64_t uid_at(uint64_t position) const {
    return position < size() ? first_uid + position : external_uids.at(position - size());
  }
  // The user's line that made node i ("" file when unknown).
  SourceLocation where(size_t i) const {
    const int s = batch->stack[i];
    return s < 0 ? SourceLocation{} : batch->stacks[s].where();
  }
};

using Event = std::variant<ScheduleEvent, KernelRunEvent, ScriptOutputEvent, NodesEvent, AutotuneTrialEvent>;

// Raised by a launch whose output holds a NaN or an infinity while Session::break_on_nan() is on
// (Python: tensorscope.NonFiniteError, a FloatingPointError). The message names the kernel, the first
// such output element and the script line that made the kernel's output node.
class NonFiniteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The gate: where the engine can pause between stages when a debugger asks (issue 12). The engine calls
// the installed GateHandler at each stop, on the engine's thread; the handler returns when the run may
// go on (it may block: the debugger's runner waits there for step/continue). No handler: one branch.
// Stages in the order a kernel meets them; a schedule the schedule cache has seen skips lowering, the
// passes and the compile, and a program in the compile cache skips the compile.
struct GateStop {
  enum Stage { BeforeSchedule, BeforeLower, AfterPass, BeforeRender, BeforeCompile, BeforeLaunch, AfterLaunch,
               AfterSchedule, NonFinite };
  Stage stage = BeforeSchedule;
  int kernel_id = -1;  // from BeforeLower to AfterLaunch: the kernel (KernelInfo::id)
  std::string kernel;  // its name
  std::string detail;  // AfterPass: the pass's name; BeforeRender: the language; NonFinite: what break on NaN/Inf found
  // BeforeLaunch, AfterLaunch: the launch's buffers, its outputs first (KernelInfo::outputs order), then the
  // inputs in KernelInfo::inputs order (a device copy: destination, source). Valid during the call only;
  // null at other stops.
  const std::vector<std::shared_ptr<Buffer>>* buffers = nullptr;
  int outputs = 1;  // how many of `buffers` are outputs (more than one: a multi-output kernel)
};
// "before schedule", "before lowering", "after pass", "before render", "before compile", "before launch", "after launch",
// "after schedule"; "non-finite output": break on NaN/Inf found one (after the launch's event, before
// NonFiniteError is raised), where a debugger always pauses.
const char* gate_stage_name(GateStop::Stage stage);

class GateHandler {
 public:
  virtual ~GateHandler() = default;
  virtual void at_gate(const GateStop& stop) = 0;
};

class SessionObserver {
 public:
  virtual ~SessionObserver() = default;
  // `seq` numbers events from 0 in emission order.
  virtual void on_event(uint64_t seq, const Event& event) = 0;
  // Whether this observer wants NodesEvents (every node the script creates, with its script line).
  // They cost the run about a microsecond per node, so observers that do not show the lazy graph
  // (the DEBUG printer, the CLI's manifest) leave them off.
  virtual bool wants_nodes() const { return false; }
};

class Session {
 public:
  static Session& get();
  // True when at least one observer is attached; stages skip building events otherwise.
  bool observed() const { return !observers_.empty(); }
  void subscribe(SessionObserver* observer);
  void unsubscribe(SessionObserver* observer);
  void emit(const Event& event);
  int next_schedule_id() { return schedule_counter_++; }
  int next_kernel_id() { return kernel_counter_++; }

  // Script lines of graph nodes. The Python module installs a locator: it walks the Python stack and
  // returns the id of that short call stack in the session's stack table (interning it with
  // add_stack the first time), or -1. While tracking is on, Graph::add asks it for every node it makes
  // and keeps the id in the node. Tracking is on while an observer wants NodesEvents or break on NaN/Inf
  // is on; off, it costs Graph::add one branch.
  using StackLocator = int (*)();
  void set_stack_locator(StackLocator locator) {
    locator_ = locator;
    update_tracking();
  }
  bool tracking_sources() const { return track_sources_; }
  bool logging_nodes() const { return log_nodes_; }
  int locate_stack() const { return locator_ ? locator_() : -1; }
  int add_stack(SourceStack stack);
  // A stack of the table; an empty one for -1 or an unknown id.
  const SourceStack& stack(int id) const;
  SourceLocation source_of_stack(int id) const { return stack(id).where(); }

  // Emits the nodes created (and freed) since the last NodesEvent, if any (emit() does it first).
  void flush_nodes();
  // Where the pending NodesEvents come from: the graph's node log registers itself when the graph is
  // made (so a program without a graph, such as a recording reader, needs none).
  using PendingNodes = std::vector<NodesEvent> (*)();
  void set_pending_nodes(PendingNodes take) { take_nodes_ = take; }

  // Break on NaN/Inf: after every launch the floating-point outputs are read back and checked, and the
  // first NaN or infinity raises NonFiniteError (tensorscope-cli run --break-on-nan,
  // TENSORSCOPE_BREAK_ON_NAN=1). Turning it on also tracks sources, for the message's script line.
  void set_break_on_nan(bool on) {
    break_on_nan_ = on;
    update_tracking();
  }
  bool break_on_nan() const { return break_on_nan_; }

  // Buffer recording (tensorscope-cli run/record --record-buffers[=MB], TENSORSCOPE_RECORD_BUFFERS=MB):
  // each launch's event carries the values of its outputs and inputs (KernelRunEvent::buffers), until
  // `budget_bytes` have been read in all; later launches say the budget is used up. 0: off (the
  // default, unless TENSORSCOPE_RECORD_BUFFERS is set). Costs a device read-back per launch while on.
  void set_record_buffers(size_t budget_bytes) {
    record_buffers_budget_ = record_buffers_left_ = budget_bytes;
  }
  bool recording_buffers() const { return record_buffers_budget_ > 0; }
  size_t record_buffers_budget() const { return record_buffers_budget_; }
  // Takes `bytes` from what is left of the budget; false (taking nothing) when they do not fit.
  bool take_record_buffers(size_t bytes) {
    if (bytes > record_buffers_left_) return false;
    record_buffers_left_ -= bytes;
    return true;
  }

  void set_gate(GateHandler* gate) { gate_ = gate; }
  bool gated() const { return gate_ != nullptr; }
  // Calls the gate handler, if any, at a stop.
  void gate(GateStop::Stage stage, int kernel_id = -1, const std::string& kernel = {}, const std::string& detail = {},
            const std::vector<std::shared_ptr<Buffer>>* buffers = nullptr, int outputs = 1) {
    if (gate_) gate_->at_gate({stage, kernel_id, kernel, detail, buffers, outputs});
  }

 private:
  std::mutex mutex_;
  std::vector<SessionObserver*> observers_;
  uint64_t seq_ = 0;
  int schedule_counter_ = 0;
  int kernel_counter_ = 0;
  void update_tracking();
  void dispatch(const Event& event);  // to every observer, under mutex_

  StackLocator locator_ = nullptr;
  PendingNodes take_nodes_ = nullptr;
  bool track_sources_ = false;
  bool log_nodes_ = false;
  bool break_on_nan_ = false;
  GateHandler* gate_ = nullptr;
  std::vector<SourceStack> stacks_;
  size_t record_buffers_budget_ = 0, record_buffers_left_ = 0;
};

// RAII subscription.
class ScopedObserver {
 public:
  explicit ScopedObserver(SessionObserver* o) : o_(o) { Session::get().subscribe(o_); }
  ~ScopedObserver() { Session::get().unsubscribe(o_); }
  ScopedObserver(const ScopedObserver&) = delete;
  ScopedObserver& operator=(const ScopedObserver&) = delete;

 private:
  SessionObserver* o_;
};

}  // namespace ts
