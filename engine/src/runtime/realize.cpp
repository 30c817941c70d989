#include "runtime/realize.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "ir/lower.h"
#include "runtime/autotune.h"
#include "ir/ts_math.h"
#include "opt/pass_manager.h"
#include "runtime/buffer_pool.h"
#include "runtime/capture.h"
#include "schedule/kernel_cost.h"
#include "schedule/schedule.h"
#include "tensorscope/session.h"

namespace ts {
namespace {

GraphNodeInfo node_info(const Graph& g, NodeId id) {
  const Node& n = g[id];
  GraphNodeInfo info;
  info.uid = n.uid;
  info.op = op_name(n.op);
  info.op_class = op_class_name(op_class(n.op));
  info.shape = n.shape;
  info.dtype = dtype_name(n.dtype);
  info.arg = node_arg_str(n);
  if (!n.realized())
    for (int i = 0; i < n.num_src; i++) info.srcs.push_back(g[n.src[i]].uid);
  return info;
}

BufferInfo buffer_info(const Graph& g, NodeId id) {
  return BufferInfo{g[id].uid, g[id].shape, dtype_name(g[id].dtype)};
}

// Compiled programs by device and source text: a second launch of the same kernel compiles nothing.
std::unordered_map<std::string, std::shared_ptr<Program>>& program_cache() {
  static std::unordered_map<std::string, std::shared_ptr<Program>> cache;
  return cache;
}

// What the watched path built for a kernel (its IR after every pass, the source its device compiled, its
// actions), by what determines it: the device, the plan asked for, where that plan came from and the
// lowered kernel's listing. The passes and renderers are deterministic, so a kernel lowered again in a
// later schedule (each step of a training loop whose schedule the structural cache does not hold) shares
// the KernelCode built the first time (and the listings it rendered since) instead of printing its IR
// after every pass again. Emptied when it holds kMaxCodes.
constexpr size_t kMaxCodes = 4096;
std::unordered_map<std::string, std::shared_ptr<const KernelCode>>& code_cache() {
  static std::unordered_map<std::string, std::shared_ptr<const KernelCode>> cache;
  return cache;
}

// ---- the structural key ----------------------------------------------------------------------------
//
// The part of the graph a realize() needs, written as a list of words: the nodes in post-order (sources
// before consumers, the order the kernelizer uses), each as its op, dtype, device, shape, argument,
// constant value and the positions of its sources in that order; realized nodes as dtype, device and
// shape only (which buffer they hold does not change the kernels). Then the positions of the targets.
// Equal keys give equal schedules, with node i of one graph playing the part of node i of the other.
struct StructuralKey {
  std::vector<NodeId> order;    // nodes in post-order; a cached schedule names nodes by index here
  std::vector<uint64_t> words;
  uint64_t hash = 0;
};

uint64_t mix(uint64_t h, uint64_t w) {
  // splitmix64's finalizer over (h + w): every input bit affects every output bit
  uint64_t z = h + 0x9e3779b97f4a7c15ULL + w;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void structural_key(const Graph& g, const std::vector<NodeId>& targets, StructuralKey& key) {
  // position of each node in `order` (+1; 0: not visited), in scratch arrays indexed by node id and
  // cleared after use, so a walk costs O(nodes reached) whatever the size of the slab
  static std::vector<uint32_t> pos;
  if (pos.size() < g.slab_size()) pos.resize(g.slab_size() + 1024, 0);
  key.order.clear();
  key.words.clear();
  std::vector<std::pair<NodeId, int>> stack;
  auto visit = [&](NodeId id) {
    if (pos[id]) return;
    pos[id] = UINT32_MAX;  // on the stack
    stack.push_back({id, 0});
  };
  for (NodeId t : targets) {
    visit(t);
    while (!stack.empty()) {
      auto& [id, i] = stack.back();
      const Node& n = g[id];
      if (!n.realized() && i < n.num_src) {
        visit(n.src[i++]);
        continue;
      }
      NodeId done = id;
      stack.pop_back();
      pos[done] = static_cast<uint32_t>(key.order.size()) + 1;
      key.order.push_back(done);
      std::vector<uint64_t>& w = key.words;
      const uint64_t realized = n.realized() ? 1 : 0;
      w.push_back(static_cast<uint64_t>(n.op) | static_cast<uint64_t>(n.dtype) << 8 | realized << 16 |
                  static_cast<uint64_t>(n.num_src) << 24 | static_cast<uint64_t>(static_cast<uint32_t>(n.device)) << 32);
      w.push_back(n.shape.size());
      for (int64_t d : n.shape) w.push_back(static_cast<uint64_t>(d));
      if (realized) continue;
      for (int s = 0; s < n.num_src; s++) w.push_back(pos[n.src[s]] - 1);
      w.push_back(n.arg.size());
      for (int64_t a : n.arg) w.push_back(static_cast<uint64_t>(a));
      uint64_t bits;
      std::memcpy(&bits, &n.value, sizeof bits);
      w.push_back(bits);
    }
  }
  key.words.push_back(UINT64_MAX);  // targets follow
  for (NodeId t : targets) key.words.push_back(pos[t] - 1);
  for (NodeId id : key.order) pos[id] = 0;
  // four independent chains over every fourth word, then combined: mix's multiplies overlap instead of
  // waiting on each other (a GRU step's key is 30,000 words)
  uint64_t lane[4] = {key.words.size(), 1, 2, 3};
  const size_t n = key.words.size();
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int l = 0; l < 4; l++) lane[l] = mix(lane[l], key.words[i + l]);
  for (; i < n; i++) lane[0] = mix(lane[0], key.words[i]);
  key.hash = mix(mix(lane[0], lane[1]), mix(lane[2], lane[3]));
}

// ---- buffers released during a schedule --------------------------------------------------------------
//
// A node a kernel stores is read by later kernels of the schedule and, unless something outside the
// schedule holds it, by nothing after it. Its buffer goes back to the pool after the last kernel that reads
// it, and the next output of that size gets it from the pool while its lines are still in the caches
// (tinygrad's memory planner and this engine's jit replay, jit.cpp, do the same). Held to the end of the
// schedule instead, the buffers of bench_training.py's d128 transformer step took 38 MB, more than this
// machine's 32 MB L3; released here (with backward() freeing the history's saved values) 22 MB, and the
// step ran 4% faster.
//
// What outlives the schedule: the targets, a node referenced from outside the schedule's subgraph (a Tensor,
// a lazy node this realize does not compute), and the sources of such a node while it stays lazy (a node a
// kernel stores drops its sources when it becomes a buffer). A node wrongly taken for dead would only stay
// lazy and be computed again if read later: it is never given a buffer it does not own.
struct ReleasePlan {
  std::vector<char> outlives;                // by position in StructuralKey::order
  std::vector<std::vector<uint32_t>> after;  // after[k]: stored positions whose last reader is kernel k
};

// stores[k], reads[k]: the key positions kernel k stores and those it reads.
ReleasePlan release_plan(const Graph& g, const StructuralKey& key, const std::vector<NodeId>& targets,
                         const std::vector<std::vector<uint32_t>>& stores, const std::vector<std::vector<uint32_t>>& reads) {
  const size_t n = key.order.size();
  // position + 1 of each node of the subgraph, in a scratch array indexed by node id, cleared after use
  static std::vector<uint32_t> pos;
  if (pos.size() < g.slab_size()) pos.resize(g.slab_size() + 1024, 0);
  for (uint32_t i = 0; i < n; i++) pos[key.order[i]] = i + 1;
  std::vector<uint32_t> internal(n, 0);  // references from nodes of the subgraph (one per source slot)
  for (NodeId id : key.order) {
    const Node& node = g[id];
    if (!node.realized())
      for (int s = 0; s < node.num_src; s++) internal[pos[node.src[s]] - 1]++;
  }
  std::vector<char> stored(n, 0);
  for (const std::vector<uint32_t>& outputs : stores)
    for (uint32_t o : outputs) stored[o] = 1;
  ReleasePlan plan;
  plan.outlives.assign(n, 0);
  for (uint32_t i = 0; i < n; i++) plan.outlives[i] = g[key.order[i]].refcount > internal[i];
  for (NodeId t : targets) plan.outlives[pos[t] - 1] = 1;
  for (size_t i = n; i-- > 0;) {  // consumers before their sources (post-order backwards)
    const Node& node = g[key.order[i]];
    if (!plan.outlives[i] || stored[i] || node.realized()) continue;
    for (int s = 0; s < node.num_src; s++) plan.outlives[pos[node.src[s]] - 1] = 1;  // it stays lazy
  }
  for (NodeId id : key.order) pos[id] = 0;
  std::vector<size_t> last(n, 0);  // the last kernel that stores or reads each position
  for (size_t k = 0; k < stores.size(); k++) {
    for (uint32_t o : stores[k]) last[o] = k;
    for (uint32_t in : reads[k]) last[in] = k;
  }
  plan.after.resize(stores.size());
  for (uint32_t i = 0; i < n; i++)
    if (stored[i] && !plan.outlives[i]) plan.after[last[i]].push_back(i);
  return plan;
}

// One step of a cached schedule: a kernel (or device copy) and where its buffers come from.
struct CachedKernel {
  std::string name;
  int device = 0;
  bool is_copy = false;
  struct Output {
    uint32_t index = 0;               // into StructuralKey::order
    DType dtype = DType::Float32;
  };
  std::vector<Output> outputs;        // the nodes it stores (several: a multi-output kernel), in launch order
  int64_t numel = 0;                  // of the first output (a multi-output kernel of several shapes: 0 only when all are)
  std::vector<uint32_t> inputs;       // indices into StructuralKey::order, in launch order
  std::shared_ptr<Program> program;   // null for copies and zero-size outputs
  std::shared_ptr<const KernelCode> code;  // what observers are shown; null for copies, or if unobserved
  std::vector<std::pair<int, int>> in_place;  // in_place_pairs of its final IR (jit replays)
};

struct CachedSchedule {
  std::vector<uint64_t> words;
  std::vector<CachedKernel> kernels;
  // kernels[k]'s stored and read key positions, as release_plan takes them (made once, with the entry)
  std::vector<std::vector<uint32_t>> stores, reads;
  // The ScheduleEvent of the realize() that made this entry, with every node uid replaced by the node's
  // position in StructuralKey::order (ScheduleEvent::structure): a later realize of the same structure
  // emits it with its own uids, without scheduling, lowering or rendering anything. Null when the entry
  // was made unobserved.
  std::shared_ptr<const ScheduleEvent> event;
};

struct ScheduleCache {
  std::unordered_map<uint64_t, CachedSchedule> entries;
  size_t words = 0;  // total key size; the cache is emptied beyond kMaxWords (graphs that never repeat)
  static constexpr size_t kMaxWords = size_t{8} << 20;  // 64 MiB of keys
};

ScheduleCache& schedule_cache() {
  static ScheduleCache cache;
  return cache;
}

// Makes every node a schedule stored into a Buffer leaf holding its buffer. Each is held by a reference
// until all have their buffers: realizing one drops its sources, and a stored node that only it read (an
// intermediate the kernelizer stored for it) would be freed before getting its own buffer, which then
// stayed in the freed slot.
void set_stored_realized(Graph& g, const std::vector<std::pair<NodeId, std::shared_ptr<Buffer>>>& stored) {
  std::vector<NodeRef> held;
  held.reserve(stored.size());
  for (const auto& [id, buffer] : stored) held.emplace_back(id);
  for (const auto& [id, buffer] : stored) g.set_realized(id, buffer);
}

// device → host → device; synchronous, so the source is complete before the copy reads it. Returns ms.
double copy_buffer(Buffer& src, Buffer& dst) {
  auto t0 = std::chrono::steady_clock::now();
  if (dst.nbytes()) {
    std::vector<uint8_t> host(dst.nbytes());
    read_buffer(src, host.data());
    write_buffer(dst, host.data());
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double launch_program(Program& program, const std::vector<std::shared_ptr<Buffer>>& buffers) {
  std::vector<Buffer*> raw;
  raw.reserve(buffers.size());
  for (auto& b : buffers) raw.push_back(b.get());
  double ms = launch_on_device(program, raw);
  GlobalCounters::kernel_count++;
  GlobalCounters::time_ms += ms;
  return ms;
}

void record_launch(const CachedKernel& k, int kernel_id, const std::vector<std::shared_ptr<Buffer>>& buffers) {
  if (Capture* c = active_capture())
    c->launches.push_back({k.name, k.device, kernel_id, k.is_copy, k.program, buffers, static_cast<int>(k.outputs.size()),
                           k.in_place});
}

// Break on NaN/Inf (Session::break_on_nan): reads a kernel's output back and raises NonFiniteError at its
// first NaN or infinity, naming the kernel, the element (flat index and coordinates) and the script line
// that made the output node.
void check_finite(const Buffer& out, const Node& node, int kernel_id, const std::string& kernel) {
  if (out.dtype != DType::Float32 && out.dtype != DType::Float16) return;
  std::vector<uint8_t> host(out.nbytes());
  read_buffer(out, host.data());
  for (int64_t i = 0; i < out.numel; i++) {
    float v;
    if (out.dtype == DType::Float32) {
      std::memcpy(&v, host.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, host.data() + 2 * i, 2);
      v = ts_half_to_float(h);
    }
    if (std::isfinite(v)) continue;
    std::string index;
    for (int64_t rest = i, d = static_cast<int64_t>(node.shape.size()) - 1; d >= 0; d--) {
      index = std::to_string(rest % node.shape[d]) + (index.empty() ? "" : ", ") + index;
      rest /= node.shape[d];
    }
    const SourceLocation where = Session::get().source_of_stack(node.stack);
    const std::string what = "kernel #" + std::to_string(kernel_id) + " " + kernel + " produced " +
                             (std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf") + " at output element " +
                             std::to_string(i) + " of " + std::to_string(out.numel) + " (index (" + index +
                             (node.shape.size() == 1 ? ",))" : "))") + ", computing " + op_name(node.op) + " #" +
                             std::to_string(node.uid) +
                             (where.file.empty() ? "" : " made at " + where.file + ":" + std::to_string(where.line));
    Session::get().gate(GateStop::NonFinite, kernel_id, kernel, what);  // a debugger pauses here first
    throw NonFiniteError(what);
  }
}

// The uid of each node of the key, by position.
std::vector<uint64_t> position_uids(const Graph& g, const StructuralKey& key) {
  std::vector<uint64_t> uids;
  uids.reserve(key.order.size());
  for (NodeId id : key.order) uids.push_back(g[id].uid);
  return uids;
}

// The same event with uids replaced by key positions, to be cached; null if a node is not in the key.
std::shared_ptr<const ScheduleEvent> cacheable_event(const ScheduleEvent& ev,
                                                    const std::unordered_map<uint64_t, uint32_t>& position_of_uid) {
  auto cached = std::make_shared<ScheduleEvent>(ev);
  bool complete = true;
  for_each_uid(*cached, [&](uint64_t& u) {
    auto it = position_of_uid.find(u);
    if (it == position_of_uid.end()) complete = false;
    else u = it->second;
  });
  return complete ? cached : nullptr;
}

// The fast path: the kernels of an earlier realize() with the same structure, on this graph's buffers.
// Session::set_record_buffers: the launch's outputs and inputs read back for its KernelRunEvent, while
// the budget lasts.
std::vector<RecordedBuffer> recorded_buffers(const std::vector<std::shared_ptr<Buffer>>& bufs, size_t outputs) {
  Session& session = Session::get();
  std::vector<RecordedBuffer> out;
  for (size_t i = 0; i < bufs.size(); i++) {
    const Buffer& b = *bufs[i];
    RecordedBuffer r;
    r.role = i < outputs ? "output" : "input";
    r.index = static_cast<int>(i < outputs ? i : i - outputs);
    r.dtype = dtype_name(b.dtype);
    r.numel = b.numel;
    if (session.take_record_buffers(b.nbytes())) {
      auto bytes = std::make_shared<std::string>(b.nbytes(), '\0');
      read_buffer(b, bytes->data());
      r.bytes = std::move(bytes);
    } else {
      char budget[32];
      std::snprintf(budget, sizeof budget, "%.3g", static_cast<double>(session.record_buffers_budget()) / (1 << 20));
      r.note = std::string("not recorded: the ") + budget + " MB budget of --record-buffers is used up";
    }
    out.push_back(std::move(r));
  }
  return out;
}

// The script line that called realize (a schedule's ScheduleEvent::where), when lines are tracked.
SourceLocation realize_line() {
  Session& session = Session::get();
  return session.tracking_sources() ? session.source_of_stack(session.locate_stack()) : SourceLocation{};
}

// Observers get the cached schedule event and each kernel's cached code: nothing is built twice.
void run_cached(Graph& g, const StructuralKey& key, const std::vector<NodeId>& targets, const CachedSchedule& sched,
                bool observed) {
  GlobalCounters::schedule_cache_hits++;
  Session& session = Session::get();
  std::vector<int> kernel_ids(sched.kernels.size());
  for (int& id : kernel_ids) id = session.next_kernel_id();
  if (observed) {  // thin: the structure and this realize's uids and ids (ScheduleEvent::thin)
    ScheduleEvent ev;
    ev.schedule_id = session.next_schedule_id();
    ev.where = realize_line();
    ev.structure = sched.event;
    ev.position_uids = position_uids(g, key);
    ev.kernel_ids = kernel_ids;
    session.emit(std::move(ev));
  }
  // by order index: the buffer a kernel stored that node in (null: none, or released)
  std::vector<std::shared_ptr<Buffer>> produced(key.order.size());
  auto buffer_of = [&](uint32_t index) -> const std::shared_ptr<Buffer>& {
    const Node& n = g[key.order[index]];
    if (n.realized()) return n.buffer;
    if (!produced[index]) throw std::logic_error("run_cached: a kernel reads a node no earlier kernel stored");
    return produced[index];
  };
  const ReleasePlan release = release_plan(g, key, targets, sched.stores, sched.reads);
  for (size_t k = 0; k < sched.kernels.size(); k++) {
    const CachedKernel& ck = sched.kernels[k];
    const int kernel_id = kernel_ids[k];
    const int outputs = static_cast<int>(ck.outputs.size());
    std::vector<std::shared_ptr<Buffer>> bufs;
    bufs.reserve(ck.outputs.size() + ck.inputs.size());
    for (const CachedKernel::Output& o : ck.outputs) {
      // each its own size: the outputs of a multi-output kernel of several shapes differ (schedule.h, rule 6)
      const Shape& shape = g[key.order[o.index]].shape;
      bufs.push_back(pooled_buffer(ck.device, o.dtype, shape_numel(shape), &shape));
      produced[o.index] = bufs.back();
    }
    if (!ck.is_copy && ck.numel == 0) continue;  // (its release waits for the end: a byte or two)
    for (uint32_t in : ck.inputs) bufs.push_back(buffer_of(in));
    session.gate(GateStop::BeforeLaunch, kernel_id, ck.name, {}, &bufs, outputs);
    const double ms = ck.is_copy ? copy_buffer(*bufs[1], *bufs[0]) : launch_program(*ck.program, bufs);
    record_launch(ck, kernel_id, bufs);
    if (observed) {
      KernelRunEvent ev;
      ev.kernel_id = kernel_id;
      ev.name = ck.name;
      ev.device = DeviceRegistry::at(ck.device).name();
      ev.code = ck.code;
      ev.compile_cache_hit = true;
      ev.time_ms = ms;
      if (session.recording_buffers()) ev.buffers = recorded_buffers(bufs, ck.outputs.size());
      session.emit(std::move(ev));
    }
    if (session.break_on_nan())
      for (int o = 0; o < outputs; o++) check_finite(*bufs[o], g[key.order[ck.outputs[o].index]], kernel_id, ck.name);
    session.gate(GateStop::AfterLaunch, kernel_id, ck.name, {}, &bufs, outputs);
    for (uint32_t index : release.after[k]) produced[index].reset();  // back to the pool when `bufs` goes
  }
  std::vector<std::pair<NodeId, std::shared_ptr<Buffer>>> stored;
  for (uint32_t index = 0; index < produced.size(); index++)
    if (produced[index]) stored.push_back({key.order[index], std::move(produced[index])});
  set_stored_realized(g, stored);
  session.gate(GateStop::AfterSchedule);
}

}  // namespace

int64_t GlobalCounters::kernel_count = 0;
double GlobalCounters::time_ms = 0;
int64_t GlobalCounters::schedule_count = 0;
int64_t GlobalCounters::schedule_cache_hits = 0;
int64_t GlobalCounters::replayed_kernels = 0;
int64_t GlobalCounters::in_place_outputs = 0;

std::vector<std::pair<int, int>> in_place_pairs(const ir::Kernel& k) {
  const std::vector<ir::Inst>& insts = k.insts;
  std::map<ir::ValueId, int> slot_of;  // DEFINE_GLOBAL → its slot
  for (size_t i = 0; i < insts.size(); i++)
    if (insts[i].op == ir::Op::DefineGlobal) slot_of[static_cast<ir::ValueId>(i)] = static_cast<int>(insts[i].arg);
  // for each instruction, the RANGE whose body it is in (kNone at the top level)
  std::vector<ir::ValueId> body(insts.size(), ir::kNone);
  std::vector<ir::ValueId> open;
  for (size_t i = 0; i < insts.size(); i++) {
    if (insts[i].op == ir::Op::EndRange && !open.empty()) open.pop_back();
    body[i] = open.empty() ? ir::kNone : open.back();
    if (insts[i].op == ir::Op::Range) open.push_back(static_cast<ir::ValueId>(i));
  }
  auto global_slot = [&](ir::ValueId buffer) {
    auto it = slot_of.find(buffer);
    return it == slot_of.end() ? -1 : it->second;
  };
  std::vector<std::pair<int, int>> pairs;
  for (size_t o = 0; o < k.globals.size(); o++) {
    if (!k.globals[o].is_output) continue;
    for (size_t in = 0; in < k.globals.size(); in++) {
      const ir::GlobalArg &a = k.globals[o], &b = k.globals[in];
      if (b.is_output || a.dtype != b.dtype || a.numel != b.numel) continue;
      bool ok = true, read = false;
      for (size_t i = 0; i < insts.size() && ok; i++) {
        const ir::Inst& ld = insts[i];
        if (ld.op != ir::Op::Load || global_slot(ld.src[0]) != static_cast<int>(in)) continue;
        read = true;
        bool stored_after = false;  // an unmasked store of the output at this index, later in this loop body
        for (size_t j = i + 1; j < insts.size() && !stored_after; j++) {
          if (insts[j].op == ir::Op::EndRange && insts[j].src[0] == body[i]) break;  // the end of the body
          stored_after = body[j] == body[i] && insts[j].op == ir::Op::Store && insts[j].num_src == 3 &&
                         global_slot(insts[j].src[0]) == static_cast<int>(o) && insts[j].src[1] == ld.src[1];
        }
        ok = ld.num_src == 2 && stored_after;
      }
      if (ok && read) pairs.push_back({static_cast<int>(o), static_cast<int>(in)});
    }
  }
  return pairs;
}

void GlobalCounters::reset() {
  kernel_count = 0;
  time_ms = 0;
  schedule_count = 0;
  schedule_cache_hits = 0;
  replayed_kernels = 0;
  in_place_outputs = 0;
}

void clear_schedule_cache() {
  schedule_cache().entries.clear();
  schedule_cache().words = 0;
}

// What the passes may use of the device: workgroups and local memory (the GPU-only actions LOCAL, GROUP),
// its vector width and registers.
static void set_target(ir::Kernel& kernel, int dev_index) {
  const DeviceProperties props = DeviceRegistry::properties(dev_index);
  kernel.target.max_workgroup_size = static_cast<uint32_t>(std::min<uint64_t>(props.max_workgroup_size, UINT32_MAX));
  kernel.target.local_memory_bytes = props.local_memory_bytes;
  kernel.target.subgroup_size = props.subgroup_size;
  if (props.vector_bytes) kernel.target.vector_bytes = props.vector_bytes;
  if (props.vector_registers) kernel.target.vector_registers = props.vector_registers;
}

// The program cache's key: the device, the applied actions (a launch action, THREADS, changes the program,
// not its source) and the source (the IR on INTERP).
static std::string program_cache_key(int dev_index, const ir::Kernel& kernel, const SourceListing* source) {
  return std::to_string(dev_index) + "\n" + ir::applied_str(kernel) + "\n" + (source ? source->code : ir::print(kernel));
}

// When a schedule's kernel `first` is the first that needs compiling: it and the kernels after it lowered,
// optimized and rendered ahead, and those not in the program cache handed to their device's precompile()
// together (the C device compiles them in one compiler run instead of one run each; Device::precompile). The
// loop in realize() then lowers each again, as always, and its compile() finds it compiled; a schedule whose
// programs are all cached never comes here. Only when nothing watches (realize() checks): with an observer or
// a debugger's gate, the stops before each kernel's lowering and compile come in order, one kernel at a time;
// under BEAM the search chooses each kernel's plan.
static void precompile_schedule(const Graph& g, const Schedule& sched, size_t first) {
  std::map<int, std::pair<std::vector<ir::Kernel>, std::vector<SourceListing>>> by_device;
  for (size_t k = first; k < sched.items.size(); k++) {
    const ScheduleItem& item = sched.items[k];
    const Node& out = g[item.outputs[0]];
    const Renderer* renderer = DeviceRegistry::at(out.device).renderer();
    if (item.is_copy || shape_numel(out.shape) == 0 || !renderer) continue;
    if (std::any_of(item.inputs.begin(), item.inputs.end(), [&](NodeId in) { return g[in].device != out.device; }))
      continue;  // the loop raises that error
    try {
      ir::Kernel kernel = lower(item);
      set_target(kernel, out.device);
      if (!ir::verify(kernel).empty()) continue;  // the loop raises that error
      run_passes(kernel, nullptr, -1, /*gated=*/false);
      DeviceRegistry::at(out.device).plan_launch(kernel);
      SourceListing source = renderer->render(kernel);
      if (program_cache().count(program_cache_key(out.device, kernel, &source))) continue;
      auto& [kernels, sources] = by_device[out.device];
      kernels.push_back(std::move(kernel));
      sources.push_back(std::move(source));
    } catch (const std::exception&) {
      // the loop raises it when it reaches this kernel, after the kernels before it have run, as without this step
    }
  }
  for (auto& [dev_index, batch] : by_device)
    if (batch.first.size() >= 2) DeviceRegistry::at(dev_index).precompile(batch.first, batch.second);
}

void realize(const std::vector<NodeId>& targets) {
  Graph& g = Graph::get();
  std::vector<NodeId> todo;
  for (NodeId t : targets)
    if (!g[t].realized()) todo.push_back(t);
  if (todo.empty()) return;
  Session& session = Session::get();
  session.gate(GateStop::BeforeSchedule);
  const bool observed = session.observed();

  // A structure seen before runs its cached kernels. With an observer, the entry must also hold the
  // events (an entry made unobserved has none: the schedule is made again and the entry completed).
  static StructuralKey key;
  ScheduleCache& cache = schedule_cache();
  structural_key(g, todo, key);
  auto hit = cache.entries.find(key.hash);
  if (hit != cache.entries.end() && hit->second.words == key.words && (!observed || hit->second.event)) {
    run_cached(g, key, todo, hit->second, observed);
    return;
  }

  Schedule sched = create_schedule(todo);
  GlobalCounters::schedule_count++;

  // What the schedule cache keeps of this schedule: each kernel with its nodes named by key position.
  std::unordered_map<NodeId, uint32_t> key_index;
  for (uint32_t i = 0; i < key.order.size(); i++) key_index[key.order[i]] = i;
  CachedSchedule cached;

  std::vector<int> kernel_ids;
  for (size_t i = 0; i < sched.items.size(); i++) kernel_ids.push_back(session.next_kernel_id());
  if (observed) {
    ScheduleEvent ev;
    ev.schedule_id = session.next_schedule_id();
    ev.where = realize_line();
    std::map<NodeId, int> kernel_of;
    for (size_t k = 0; k < sched.items.size(); k++)
      for (NodeId f : sched.items[k].fused)
        if (!kernel_of.count(f)) kernel_of[f] = static_cast<int>(k);
    for (NodeId id : sched.nodes) {
      ev.nodes.push_back(node_info(g, id));
      auto it = kernel_of.find(id);
      ev.nodes.back().kernel = it == kernel_of.end() ? -1 : it->second;
    }
    for (size_t k = 0; k < sched.items.size(); k++) {
      const ScheduleItem& item = sched.items[k];
      KernelInfo ki;
      ki.id = kernel_ids[k];
      ki.name = item.name;
      ki.device = DeviceRegistry::at(g[item.outputs[0]].device).name();
      for (NodeId f : item.fused) {
        ki.node_uids.push_back(g[f].uid);
        ki.ops.push_back(op_name(g[f].op));
      }
      for (NodeId in : item.inputs) ki.inputs.push_back(buffer_info(g, in));
      for (NodeId o : item.outputs) ki.outputs.push_back(buffer_info(g, o));
      ki.boundary_reasons = item.reasons;
      ki.fusion_decisions = item.decisions;
      const KernelCost cost = kernel_cost(g, item);
      ki.flops = cost.flops;
      ki.bytes = cost.bytes;
      ev.kernels.push_back(std::move(ki));
    }
    std::unordered_map<uint64_t, uint32_t> position_of_uid;
    for (uint32_t i = 0; i < key.order.size(); i++) position_of_uid[g[key.order[i]].uid] = i;
    cached.event = cacheable_event(ev, position_of_uid);
    if (cached.event) {
      ev.structure = cached.event;
      ev.position_uids = position_uids(g, key);
    }
    session.emit(std::move(ev));
  }

  // Buffers of the stored nodes, attached to the graph when the whole schedule has run; those nothing
  // reads after the schedule go back to the pool after their last reader (release_plan).
  std::map<NodeId, std::shared_ptr<Buffer>> out_buffers;
  std::vector<std::vector<uint32_t>> stores, reads;
  for (const ScheduleItem& item : sched.items) {
    stores.emplace_back();
    reads.emplace_back();
    for (NodeId o : item.outputs) stores.back().push_back(key_index.at(o));
    for (NodeId in : item.inputs) reads.back().push_back(key_index.at(in));
  }
  const ReleasePlan release = release_plan(g, key, todo, stores, reads);
  auto release_after = [&](size_t k) {
    for (uint32_t index : release.after[k]) out_buffers.erase(key.order[index]);
  };
  auto buffer_of = [&](NodeId id) -> std::shared_ptr<Buffer> {
    if (g[id].realized()) return g[id].buffer;
    return out_buffers.at(id);
  };
  // precompile_schedule's batch, made at the first kernel that needs compiling, when nothing watches
  bool precompile = !observed && !session.gated() && beam_width() == 0;
  for (size_t k = 0; k < sched.items.size(); k++) {
    const ScheduleItem& item = sched.items[k];
    const Node& out = g[item.outputs[0]];
    const int outputs = static_cast<int>(item.outputs.size());
    int dev_index = out.device;
    CachedKernel ck;
    ck.name = item.name;
    ck.device = dev_index;
    ck.is_copy = item.is_copy;
    ck.numel = shape_numel(out.shape);
    for (size_t o = 0; o < item.outputs.size(); o++) ck.outputs.push_back({stores[k][o], g[item.outputs[o]].dtype});
    ck.inputs = reads[k];
    if (item.is_copy) {
      auto src = buffer_of(item.inputs[0]);
      auto dst = pooled_buffer(dev_index, out.dtype, ck.numel, &out.shape);
      const std::vector<std::shared_ptr<Buffer>> bufs{dst, src};
      session.gate(GateStop::BeforeLaunch, kernel_ids[k], item.name, {}, &bufs);
      double ms = copy_buffer(*src, *dst);
      out_buffers[item.outputs[0]] = dst;
      record_launch(ck, kernel_ids[k], bufs);
      if (observed) {
        KernelRunEvent ev;
        ev.kernel_id = kernel_ids[k];
        ev.name = item.name;
        ev.device = DeviceRegistry::at(dev_index).name();
        ev.compile_cache_hit = true;
        ev.time_ms = ms;
        if (session.recording_buffers()) ev.buffers = recorded_buffers(bufs, 1);
        session.emit(std::move(ev));
      }
      cached.kernels.push_back(std::move(ck));
      session.gate(GateStop::AfterLaunch, kernel_ids[k], item.name, {}, &bufs);
      release_after(k);
      continue;
    }
    for (NodeId in : item.inputs)
      if (g[in].device != dev_index)
        throw std::runtime_error("kernel " + item.name + " reads a buffer on " + DeviceRegistry::at(g[in].device).name() +
                                 " but runs on " + DeviceRegistry::at(dev_index).name() + ": use .to(device) first");
    Device& dev = DeviceRegistry::at(dev_index);
    std::vector<std::shared_ptr<Buffer>> bufs;  // the launch's buffers: outputs, then inputs
    for (NodeId o : item.outputs) {
      bufs.push_back(pooled_buffer(dev_index, g[o].dtype, shape_numel(g[o].shape), &g[o].shape));
      out_buffers[o] = bufs.back();
    }
    if (ck.numel == 0) {  // nothing to compute for a zero-size output
      cached.kernels.push_back(std::move(ck));
      continue;
    }
    for (NodeId in : item.inputs) bufs.push_back(buffer_of(in));

    session.gate(GateStop::BeforeLower, kernel_ids[k], item.name);
    ir::Kernel kernel = lower(item);
    set_target(kernel, dev_index);
    // always on: a few µs per kernel, and an invalid kernel would otherwise fail in a compiler
    if (auto errors = ir::verify(kernel); !errors.empty())
      throw std::logic_error("IR verifier failed for kernel " + kernel.name + " after lowering: " + errors.front());
    std::string plan_from;  // where the plan came from, for KernelCode
    if (beam_width() > 0 && kernel.plan.automatic()) {  // TENSORSCOPE_BEAM: search this kernel's plan (autotune.h)
      std::vector<Buffer*> raw;
      for (const auto& b : bufs) raw.push_back(b.get());
      BeamResult found = beam_search(kernel, dev_index, raw, kernel_ids[k]);
      kernel.plan = found.plan;
      plan_from = found.from;
    }
    const bool default_plan = kernel.plan.automatic();
    std::vector<PassSnapshot> snapshots;
    std::string code_key;                    // the code_cache key, when observed
    std::shared_ptr<const KernelCode> known;  // what an earlier lowering of the same kernel built
    if (observed) {
      snapshots.push_back({"lower", ir::print(kernel)});
      code_key = std::to_string(dev_index) + "\n" + kernel.plan.str() + "\n" + plan_from + "\n" + snapshots[0].ir();
      if (auto hit = code_cache().find(code_key); hit != code_cache().end()) known = hit->second;
    }
    run_passes(kernel, observed && !known ? &snapshots : nullptr, kernel_ids[k]);
    // run_passes gives a default plan the one of TENSORSCOPE_OPTS, when that is set
    if (plan_from.empty()) plan_from = default_plan && !kernel.plan.automatic() ? "TENSORSCOPE_OPTS" : "heuristics";
    // the device's launch actions (THREADS on C) join the applied ones; the listing after them is one more step
    const size_t pass_opts = kernel.opts.size();
    dev.plan_launch(kernel);
    ck.in_place = in_place_pairs(kernel);
    if (observed && !known && kernel.opts.size() != pass_opts) snapshots.emplace_back("plan_launch", kernel);
    const Renderer* renderer = dev.renderer();
    SourceListing source;
    if (renderer) {
      session.gate(GateStop::BeforeRender, kernel_ids[k], kernel.name, renderer->language());
      source = renderer->render(kernel);
    }
    // the applied actions too: a launch action (THREADS) changes the program, not its source
    const std::string program_key = program_cache_key(dev_index, kernel, renderer ? &source : nullptr);
    auto& programs = program_cache();
    bool cache_hit = true;
    double compile_ms = 0;
    auto it = programs.find(program_key);
    if (it == programs.end()) {
      if (precompile) {
        precompile = false;
        precompile_schedule(g, sched, k);
      }
      session.gate(GateStop::BeforeCompile, kernel_ids[k], kernel.name);
      CompileResult cr = dev.compile(kernel, renderer ? &source : nullptr);
      cache_hit = cr.cache_hit;
      compile_ms = cr.compile_ms;
      it = programs.emplace(program_key, std::shared_ptr<Program>(std::move(cr.program))).first;
    }
    ck.program = it->second;
    session.gate(GateStop::BeforeLaunch, kernel_ids[k], kernel.name, {}, &bufs, outputs);
    double ms = launch_program(*ck.program, bufs);
    record_launch(ck, kernel_ids[k], bufs);

    if (observed && !known) {
      auto code = std::make_shared<KernelCode>();
      code->ir = std::move(snapshots);
      // the source the device compiled; the other renderers' views of the kernel are rendered from it
      // when someone looks at them (KernelCode::listing)
      if (renderer) {
        code->device_renderer = source.renderer;
        code->sources.push_back(source);
      }
      code->kernel = std::make_shared<const ir::Kernel>(kernel);
      code->plan = kernel.plan.str();
      code->plan_from = plan_from;
      code->applied = ir::applied_str(kernel);
      if (code_cache().size() >= kMaxCodes) code_cache().clear();
      known = code_cache().emplace(code_key, std::move(code)).first->second;
    }
    if (observed) {
      ck.code = known;
      KernelRunEvent ev;
      ev.kernel_id = kernel_ids[k];
      ev.name = kernel.name;
      ev.device = dev.name();
      ev.code = known;
      ev.compile_cache_hit = cache_hit;
      ev.compile_ms = compile_ms;
      ev.time_ms = ms;
      if (session.recording_buffers()) ev.buffers = recorded_buffers(bufs, item.outputs.size());
      session.emit(std::move(ev));
    }
    cached.kernels.push_back(std::move(ck));
    if (session.break_on_nan())
      for (int o = 0; o < outputs; o++) check_finite(*bufs[o], g[item.outputs[o]], kernel_ids[k], kernel.name);
    session.gate(GateStop::AfterLaunch, kernel_ids[k], kernel.name, {}, &bufs, outputs);
    release_after(k);
  }
  set_stored_realized(g, std::vector<std::pair<NodeId, std::shared_ptr<Buffer>>>(out_buffers.begin(), out_buffers.end()));

  if (cache.words + key.words.size() > ScheduleCache::kMaxWords) clear_schedule_cache();
  cache.words += key.words.size();
  cached.words = key.words;
  cached.stores = std::move(stores);  // one kernel a schedule item, in the same order
  cached.reads = std::move(reads);
  auto [slot, inserted] = cache.entries.try_emplace(key.hash);
  if (!inserted) cache.words -= slot->second.words.size();  // a collision or an unobserved entry: replaced
  slot->second = std::move(cached);
  session.gate(GateStop::AfterSchedule);
}

}  // namespace ts
