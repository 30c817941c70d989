// The one serializer of the session's events: JSON payloads (docs/recording.md), listings as
// content-addressed blobs. Writing is a hand-written JSON writer (events are written on the script's
// thread, so this is on the observed run's hot path); reading uses nlohmann::json and checks every
// field, because a recording may come from anywhere.
#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "record/json_writer.h"
#include "tensorscope/dtype.h"
#include "tensorscope/ir.h"
#include "tensorscope/recording.h"

namespace ts {

const char* event_kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::Schedule: return "schedule";
    case EventKind::Launch: return "launch";
    case EventKind::Output: return "output";
    case EventKind::Nodes: return "nodes";
    case EventKind::Trial: return "trial";
  }
  return "?";
}

EventKind event_kind_from_name(const std::string& name) {
  for (EventKind k : {EventKind::Schedule, EventKind::Launch, EventKind::Output, EventKind::Nodes, EventKind::Trial})
    if (name == event_kind_name(k)) return k;
  throw RecordingError("unknown event kind '" + name.substr(0, 40) + "'");
}

std::string content_hash(std::string_view data) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, 64 bit
  for (unsigned char c : data) h = (h ^ c) * 0x100000001b3ULL;
  std::string hex(16, '0');
  for (int i = 15; i >= 0; i--, h >>= 4) hex[i] = "0123456789abcdef"[h & 15];
  return hex;
}

// ---- encoding -----------------------------------------------------------------------------------------

std::string EventEncoder::listing_blob(const std::string& listing, std::vector<Blob>& new_blobs) {
  auto known = listing_hash_.find(listing);
  if (known != listing_hash_.end()) return known->second;
  std::string hash = blob(listing, new_blobs);
  listing_hash_.emplace(listing, hash);
  return hash;
}

std::string EventEncoder::blob(std::string_view data, std::vector<Blob>& new_blobs) {
  std::string hash = content_hash(data);
  if (given_.insert(hash).second) new_blobs.push_back({hash, std::string(data)});
  return hash;
}

namespace {

// A float in the kernel IR: a JSON number, or "inf", "-inf", "nan" (JSON has none of them; a max-reduce
// starts from -inf).
void write_float(JsonWriter& w, double v) {
  if (v != v) w.value("nan");
  else if (v > 1e308 || v < -1e308) w.value(v > 0 ? "inf" : "-inf");
  else w.value(v);
}

// The kernel as the device compiled it (docs/recording.md, "kernel"): what the other renderers render.
std::string kernel_json(const ir::Kernel& k) {
  JsonWriter w;
  w.begin_object();
  w.key("name").value(k.name);
  w.key("globals").begin_array();
  for (const ir::GlobalArg& g : k.globals) {
    w.begin_array().value(dtype_name(g.dtype)).value(g.numel).value(g.is_output).end_array();
  }
  w.end_array();
  // one array per instruction: [op, dtype, arg, value, sources...]
  w.key("insts").begin_array();
  for (const ir::Inst& in : k.insts) {
    w.begin_array().value(ir::op_name(in.op)).value(dtype_name(in.dtype)).value(in.arg);
    write_float(w, in.value);
    for (int s = 0; s < in.num_src; s++) w.value(static_cast<int64_t>(in.src[s]));
    w.end_array();
  }
  w.end_array();
  w.key("opts").begin_array();
  for (const ir::AppliedOpt& o : k.opts) w.begin_array().value(ir::opt_name(o.kind)).value(o.amount).end_array();
  w.end_array();
  w.key("plan").value(k.plan.str());
  w.key("max_workgroup_size").value(static_cast<int64_t>(k.target.max_workgroup_size));
  w.key("local_memory_bytes").value(static_cast<uint64_t>(k.target.local_memory_bytes));
  w.key("subgroup_size").value(static_cast<int64_t>(k.target.subgroup_size));
  w.key("vector_bytes").value(static_cast<int64_t>(k.target.vector_bytes));
  w.key("vector_registers").value(static_cast<int64_t>(k.target.vector_registers));
  w.end_object();
  return w.take();
}

void write_shape(JsonWriter& w, const std::vector<int64_t>& shape) {
  w.begin_array();
  for (int64_t d : shape) w.value(d);
  w.end_array();
}

void write_buffers(JsonWriter& w, const std::vector<BufferInfo>& buffers) {
  w.begin_array();
  for (const BufferInfo& b : buffers) {
    w.begin_object();
    w.key("node").value(b.node_uid);
    w.key("shape");
    write_shape(w, b.shape);
    w.key("dtype").value(b.dtype);
    w.end_object();
  }
  w.end_array();
}

// The fields a schedule's node and a node batch's node share: op, op_class, shape, dtype, srcs, arg.
void write_node_fields(JsonWriter& w, const GraphNodeInfo& n) {
  w.key("op").value(n.op);
  w.key("op_class").value(n.op_class);
  w.key("shape");
  write_shape(w, n.shape);
  w.key("dtype").value(n.dtype);
  w.key("srcs").begin_array();
  for (uint64_t u : n.srcs) w.value(u);
  w.end_array();
  w.key("arg").value(n.arg);
}

void write_where(JsonWriter& w, const SourceLocation& where) {
  w.key("where").begin_object();
  w.key("file").value(where.file);
  w.key("line").value(where.line);
  w.end_object();
}

void write_schedule(JsonWriter& w, const ScheduleEvent& s, bool with_where) {
  w.begin_object();
  w.key("schedule_id").value(s.schedule_id);
  if (with_where) write_where(w, s.where);
  w.key("nodes").begin_array();
  for (const GraphNodeInfo& n : s.nodes) {
    w.begin_object();
    w.key("uid").value(n.uid);
    write_node_fields(w, n);
    w.key("kernel").value(n.kernel);
    w.end_object();
  }
  w.end_array();
  w.key("kernels").begin_array();
  for (const KernelInfo& k : s.kernels) {
    w.begin_object();
    w.key("id").value(k.id);
    w.key("name").value(k.name);
    w.key("device").value(k.device);
    w.key("nodes").begin_array();
    for (uint64_t u : k.node_uids) w.value(u);
    w.end_array();
    w.key("ops").begin_array();
    for (const std::string& op : k.ops) w.value(op);
    w.end_array();
    w.key("inputs");
    write_buffers(w, k.inputs);
    w.key("outputs");
    write_buffers(w, k.outputs);
    w.key("boundary_reasons").begin_array();
    for (const std::string& r : k.boundary_reasons) w.value(r);
    w.end_array();
    w.key("fusion_decisions").begin_array();
    for (const FusionDecision& d : k.fusion_decisions) {
      w.begin_object();
      w.key("node").value(d.node_uid);
      w.key("op").value(d.op);
      w.key("stored").value(d.stored);
      w.key("evaluations").value(d.evaluations);
      w.key("flops").value(d.flops);
      w.key("recompute_flops").value(d.recompute_flops);
      w.key("store_bytes").value(d.store_bytes);
      w.key("reason").value(d.reason);
      w.end_object();
    }
    w.end_array();
    w.key("flops").value(k.flops);
    w.key("bytes").value(k.bytes);
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

void write_node_batch(JsonWriter& w, const NodeBatch& b) {
  w.begin_object();
  w.key("nodes").begin_array();
  for (size_t i = 0; i < b.nodes.size(); i++) {
    const GraphNodeInfo& n = b.nodes[i];
    w.begin_object();
    write_node_fields(w, n);
    w.key("stack").value(b.stack[i]);
    w.end_object();
  }
  w.end_array();
  w.key("stacks").begin_array();
  for (const SourceStack& st : b.stacks) {
    w.begin_object();
    w.key("user").value(st.user);
    w.key("frames").begin_array();
    for (const SourceFrame& f : st.frames) {
      w.begin_array();
      w.value(f.file);
      w.value(f.line);
      w.value(f.function);
      w.end_array();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

}  // namespace

EncodedEvent EventEncoder::encode(uint64_t seq, int64_t time_ns, const Event& event, std::vector<Blob>& new_blobs) {
  EncodedEvent out;
  out.seq = seq;
  out.time_ns = time_ns;
  JsonWriter w;
  if (auto* s = std::get_if<ScheduleEvent>(&event)) {
    out.kind = EventKind::Schedule;
    if (!s->structure) {
      write_schedule(w, *s, true);
    } else {
      // a training loop repeats one structure: store it once, and each schedule as its uids
      auto known = structure_hash_.find(s->structure.get());
      if (known == structure_hash_.end()) {
        JsonWriter structure;
        write_schedule(structure, *s->structure, false);
        known = structure_hash_.emplace(s->structure.get(), std::make_pair(s->structure, blob(structure.take(), new_blobs)))
                    .first;
      }
      w.begin_object();
      w.key("schedule_id").value(s->schedule_id);
      write_where(w, s->where);
      w.key("structure").value(known->second.second);
      w.key("position_uids").begin_array();
      for (uint64_t u : s->position_uids) w.value(u);
      w.end_array();
      w.key("kernel_ids").begin_array();
      if (s->thin())
        for (int id : s->kernel_ids) w.value(id);
      else
        for (const KernelInfo& k : s->kernels) w.value(k.id);
      w.end_array();
      w.end_object();
    }
  } else if (auto* r = std::get_if<KernelRunEvent>(&event)) {
    out.kind = EventKind::Launch;
    std::string code;
    if (r->code) {
      auto known = code_hash_.find(r->code.get());
      if (known != code_hash_.end()) {
        code = known->second.second;
      } else {
        // The code blob names one blob per listing: passes that changed nothing share one.
        JsonWriter c;
        c.begin_object();
        c.key("ir").begin_array();
        std::string listing;  // the blob of the snapshot before: a pass that changed nothing repeats its text
        for (size_t i = 0; i < r->code->ir.size(); i++) {
          const PassSnapshot& p = r->code->ir[i];
          if (i == 0 || !p.same_ir(r->code->ir[i - 1])) listing = listing_blob(p.ir(), new_blobs);
          c.begin_object();
          c.key("pass").value(p.pass);
          c.key("ir").value(listing);
          c.end_object();
        }
        c.end_array();
        c.key("sources").begin_array();
        for (const SourceListing& src : r->code->sources) {
          c.begin_object();
          c.key("renderer").value(src.renderer);
          c.key("code").value(listing_blob(src.code, new_blobs));
          c.key("ir_op_line").begin_array();
          for (int line : src.ir_op_line) c.value(line);
          c.end_array();
          c.end_object();
        }
        c.end_array();
        c.key("device_renderer").value(r->code->device_renderer);
        if (auto kernel = r->code->kernel_ir()) c.key("kernel").value(blob(kernel_json(*kernel), new_blobs));
        c.key("plan").value(r->code->plan);
        c.key("plan_from").value(r->code->plan_from);
        c.key("applied").value(r->code->applied);
        c.end_object();
        code = blob(c.take(), new_blobs);
        code_hash_.emplace(r->code.get(), std::make_pair(r->code, code));
      }
    }
    w.begin_object();
    w.key("kernel_id").value(r->kernel_id);
    w.key("name").value(r->name);
    w.key("device").value(r->device);
    w.key("code");
    if (code.empty()) w.null();
    else w.value(code);
    w.key("compile_cache_hit").value(r->compile_cache_hit);
    w.key("compile_ms").value(r->compile_ms);
    w.key("time_ms").value(r->time_ms);
    w.key("replayed").value(r->replayed);
    w.key("replay_of").value(r->replay_of);
    if (!r->buffers.empty()) {  // --record-buffers: each buffer's bytes are a blob (equal buffers: one blob)
      w.key("buffers").begin_array();
      for (const RecordedBuffer& b : r->buffers) {
        w.begin_object();
        w.key("role").value(b.role);
        w.key("index").value(b.index);
        w.key("dtype").value(b.dtype);
        w.key("numel").value(b.numel);
        w.key("blob");
        if (b.bytes) w.value(blob(*b.bytes, new_blobs));
        else w.null();
        w.key("note").value(b.note);
        w.end_object();
      }
      w.end_array();
    }
    w.end_object();
  } else if (auto* n = std::get_if<NodesEvent>(&event)) {
    // the batch's structure once per distinct batch; each event is its first uid and external uids
    out.kind = EventKind::Nodes;
    static const NodeBatch kEmpty;
    const NodeBatch& batch = n->batch ? *n->batch : kEmpty;
    // keyed by the batch object: bounded, since the engine rebuilds its batches after clearing its own
    // table (a forgotten batch is encoded again; blob() still gives its blob once)
    if (batch_hash_.size() > 8192) batch_hash_.clear();
    auto known = batch_hash_.find(n->batch.get());
    if (known == batch_hash_.end()) {
      JsonWriter b;
      write_node_batch(b, batch);
      known = batch_hash_.emplace(n->batch.get(), std::make_pair(n->batch, blob(b.take(), new_blobs))).first;
    }
    w.begin_object();
    w.key("first_uid").value(n->first_uid);
    w.key("count").value(static_cast<uint64_t>(batch.nodes.size()));
    w.key("batch").value(known->second.second);
    w.key("external_uids").begin_array();
    for (uint64_t u : n->external_uids) w.value(u);
    w.end_array();
    w.key("freed_uids").begin_array();
    for (uint64_t u : n->freed_uids) w.value(u);
    w.end_array();
    w.end_object();
  } else if (auto* o = std::get_if<ScriptOutputEvent>(&event)) {
    out.kind = EventKind::Output;
    w.begin_object();
    w.key("stream").value(o->stream == ScriptOutputEvent::Stderr ? "stderr" : "stdout");
    w.key("text").value(o->text);
    w.end_object();
  } else if (auto* t = std::get_if<AutotuneTrialEvent>(&event)) {
    out.kind = EventKind::Trial;
    w.begin_object();
    w.key("kernel_id").value(t->kernel_id);
    w.key("name").value(t->name);
    w.key("ir_hash").value(t->ir_hash);
    w.key("device").value(t->device);
    w.key("plan").value(t->plan);
    w.key("applied").value(t->applied);
    w.key("compile_ms").value(t->compile_ms);
    w.key("time_ms").value(t->time_ms);
    w.key("outcome").value(trial_outcome_name(t->outcome));
    w.key("reason").value(t->reason);
    w.end_object();
  }
  out.payload = w.take();
  return out;
}

// ---- decoding -----------------------------------------------------------------------------------------

namespace {

using nlohmann::json;

// Typed field access that names what is wrong.
const json& field(const json& obj, const char* name) {
  if (!obj.is_object()) throw RecordingError(std::string("expected an object holding '") + name + "'");
  auto it = obj.find(name);
  if (it == obj.end()) throw RecordingError(std::string("missing field '") + name + "'");
  return *it;
}
std::string str(const json& obj, const char* name) {
  const json& v = field(obj, name);
  if (!v.is_string()) throw RecordingError(std::string("field '") + name + "' is not a string");
  return v.get<std::string>();
}
int64_t integer(const json& v, const char* name) {
  if (!v.is_number_integer()) throw RecordingError(std::string("field '") + name + "' is not an integer");
  return v.get<int64_t>();
}
int64_t integer(const json& obj, const char* name, int64_t lo, int64_t hi) {
  int64_t x = integer(field(obj, name), name);
  if (x < lo || x > hi) throw RecordingError(std::string("field '") + name + "' is out of range");
  return x;
}
uint64_t uid(const json& v) {
  if (!v.is_number_unsigned()) throw RecordingError("a node uid is not an unsigned integer");
  return v.get<uint64_t>();
}
double number(const json& obj, const char* name) {
  const json& v = field(obj, name);
  if (!v.is_number()) throw RecordingError(std::string("field '") + name + "' is not a number");
  return v.get<double>();
}
bool boolean(const json& obj, const char* name) {
  const json& v = field(obj, name);
  if (!v.is_boolean()) throw RecordingError(std::string("field '") + name + "' is not a boolean");
  return v.get<bool>();
}
const json& array(const json& obj, const char* name) {
  const json& v = field(obj, name);
  if (!v.is_array()) throw RecordingError(std::string("field '") + name + "' is not an array");
  return v;
}
std::vector<int64_t> shape(const json& obj, const char* name) {
  std::vector<int64_t> out;
  for (const json& d : array(obj, name)) {
    int64_t x = integer(d, name);
    if (x < 0) throw RecordingError(std::string("field '") + name + "' has a negative size");
    out.push_back(x);
  }
  return out;
}
std::vector<std::string> strings(const json& obj, const char* name) {
  std::vector<std::string> out;
  for (const json& s : array(obj, name)) {
    if (!s.is_string()) throw RecordingError(std::string("field '") + name + "' holds a non-string");
    out.push_back(s.get<std::string>());
  }
  return out;
}
std::vector<BufferInfo> buffers(const json& obj, const char* name) {
  std::vector<BufferInfo> out;
  for (const json& b : array(obj, name)) out.push_back({uid(field(b, "node")), shape(b, "shape"), str(b, "dtype")});
  return out;
}

constexpr int64_t kMaxId = INT32_MAX;

// The fields write_node_fields writes.
void read_node_fields(const json& n, GraphNodeInfo& info) {
  info.op = str(n, "op");
  info.op_class = str(n, "op_class");
  info.shape = shape(n, "shape");
  info.dtype = str(n, "dtype");
  for (const json& u : array(n, "srcs")) info.srcs.push_back(uid(u));
  info.arg = str(n, "arg");
}

// "where" is optional: recordings made before it existed lack it.
SourceLocation read_where(const json& j) {
  if (!j.contains("where")) return {};
  const json& w = field(j, "where");
  return {str(w, "file"), static_cast<int>(integer(w, "line", 0, kMaxId))};
}

ScheduleEvent read_schedule(const json& j) {
  ScheduleEvent s;
  s.schedule_id = static_cast<int>(integer(j, "schedule_id", 0, kMaxId));
  s.where = read_where(j);
  for (const json& n : array(j, "nodes")) {
    GraphNodeInfo info;
    info.uid = uid(field(n, "uid"));
    read_node_fields(n, info);
    info.kernel = static_cast<int>(integer(n, "kernel", -1, kMaxId));
    s.nodes.push_back(std::move(info));
  }
  for (const json& k : array(j, "kernels")) {
    KernelInfo info;
    info.id = static_cast<int>(integer(k, "id", 0, kMaxId));
    info.name = str(k, "name");
    info.device = str(k, "device");
    for (const json& u : array(k, "nodes")) info.node_uids.push_back(uid(u));
    info.ops = strings(k, "ops");
    if (info.ops.size() != info.node_uids.size()) throw RecordingError("a kernel's 'ops' and 'nodes' differ in length");
    info.inputs = buffers(k, "inputs");
    info.outputs = buffers(k, "outputs");
    info.boundary_reasons = strings(k, "boundary_reasons");
    // optional: recordings made before the cost model's decisions were recorded lack them
    if (k.contains("fusion_decisions"))
      for (const json& d : array(k, "fusion_decisions"))
        info.fusion_decisions.push_back({uid(field(d, "node")), str(d, "op"), boolean(d, "stored"),
                                         integer(d, "evaluations", 0, INT64_MAX), number(d, "flops"),
                                         number(d, "recompute_flops"), number(d, "store_bytes"), str(d, "reason")});
    // optional: recordings made before kernels' FLOPs and bytes were counted lack them (-1: not known)
    if (k.contains("flops")) info.flops = number(k, "flops");
    if (k.contains("bytes")) info.bytes = number(k, "bytes");
    s.kernels.push_back(std::move(info));
  }
  for (const GraphNodeInfo& n : s.nodes)
    if (n.kernel >= static_cast<int>(s.kernels.size())) throw RecordingError("a node names a kernel the schedule lacks");
  return s;
}

NodeBatch read_node_batch(const json& j) {
  NodeBatch b;
  const json& stacks = array(j, "stacks");
  for (const json& st : stacks) {
    SourceStack stack;
    for (const json& f : array(st, "frames")) {
      if (!f.is_array() || f.size() != 3 || !f[0].is_string() || !f[2].is_string())
        throw RecordingError("a stack frame is not [file, line, function]");
      const int64_t line = integer(f[1], "line");
      if (line < 0 || line > kMaxId) throw RecordingError("a stack frame's line is out of range");
      stack.frames.push_back({f[0].get<std::string>(), static_cast<int>(line), f[2].get<std::string>()});
    }
    stack.user = static_cast<int>(integer(st, "user", -1, static_cast<int64_t>(stack.frames.size()) - 1));
    b.stacks.push_back(std::move(stack));
  }
  for (const json& n : array(j, "nodes")) {
    GraphNodeInfo info;
    info.uid = b.nodes.size();
    read_node_fields(n, info);
    b.stack.push_back(static_cast<int>(integer(n, "stack", -1, static_cast<int64_t>(b.stacks.size()) - 1)));
    b.nodes.push_back(std::move(info));
  }
  return b;
}

// Reads the payloads a run has most of, written exactly as EventEncoder writes them: their keys in its
// order, no spaces, strings of plain ASCII without escapes. Launches (without recorded buffers): building a
// JSON tree for each cost the debugger most of its time in a run of many small kernels. A cached schedule
// and a nodes event: their lists of a few thousand uids were a JSON value each, most of the debugger's
// decoding of a training loop. Each read returns false for anything else (another order, an escape,
// "buffers", a payload from elsewhere), which the JSON path then reads and checks; what these accept, that
// path would read the same.
class PlainPayload {
 public:
  explicit PlainPayload(std::string_view p) : p_(p) {}
  // {"schedule_id":N,"where":{"file":"...","line":N},"structure":"<hash>","position_uids":[...],"kernel_ids":[...]}
  bool read_schedule(int& schedule_id, SourceLocation& where, std::string& structure, std::vector<uint64_t>& uids,
                     std::vector<int>& kernel_ids) {
    int64_t v;
    if (!(literal("{\"schedule_id\":") && integer(v) && v >= 0 && v <= kMaxId)) return false;
    schedule_id = static_cast<int>(v);
    if (literal(",\"where\":{\"file\":")) {
      if (!(string(where.file) && literal(",\"line\":") && integer(v) && v >= 0 && v <= kMaxId && literal("}"))) return false;
      where.line = static_cast<int>(v);
    }
    if (!(literal(",\"structure\":") && string(structure) && literal(",\"position_uids\":") && uid_list(uids) &&
          literal(",\"kernel_ids\":[")))
      return false;
    if (!literal("]")) {
      do {
        if (!(integer(v) && v >= 0 && v <= kMaxId)) return false;
        kernel_ids.push_back(static_cast<int>(v));
      } while (literal(","));
      if (!literal("]")) return false;
    }
    return literal("}") && at_ == p_.size();
  }
  // {"first_uid":N,"count":N,"batch":"<hash>","external_uids":[...],"freed_uids":[...]}
  bool read_nodes(NodesEvent& n, int64_t& count, std::string& batch) {
    int64_t v;
    if (!(literal("{\"first_uid\":") && integer(v) && v >= 0)) return false;
    n.first_uid = static_cast<uint64_t>(v);
    if (!(literal(",\"count\":") && integer(count) && count >= 0 && literal(",\"batch\":") && string(batch) &&
          literal(",\"external_uids\":") && uid_list(n.external_uids) && literal(",\"freed_uids\":") &&
          uid_list(n.freed_uids) && literal("}")))
      return false;
    return at_ == p_.size();
  }
  bool read(KernelRunEvent& r, std::string& code_hash) {
    int64_t v;
    bool null_code = false;
    if (!(literal("{\"kernel_id\":") && integer(v) && v >= 0 && v <= kMaxId)) return false;
    r.kernel_id = static_cast<int>(v);
    if (!(literal(",\"name\":") && string(r.name) && literal(",\"device\":") && string(r.device) &&
          literal(",\"code\":")))
      return false;
    if (literal("null")) null_code = true;
    else if (!string(code_hash)) return false;
    if (!(literal(",\"compile_cache_hit\":") && boolean(r.compile_cache_hit) && literal(",\"compile_ms\":") &&
          number(r.compile_ms) && literal(",\"time_ms\":") && number(r.time_ms) && literal(",\"replayed\":") &&
          boolean(r.replayed) && literal(",\"replay_of\":") && integer(v) && v >= -1 && v <= kMaxId && literal("}")))
      return false;
    r.replay_of = static_cast<int>(v);
    if (null_code) code_hash.clear();
    return at_ == p_.size();
  }

 private:
  bool literal(std::string_view text) {
    if (p_.substr(at_, text.size()) != text) return false;
    at_ += text.size();
    return true;
  }
  bool string(std::string& out) {
    if (!literal("\"")) return false;
    const size_t start = at_;
    while (at_ < p_.size() && p_[at_] != '"') {
      const unsigned char c = static_cast<unsigned char>(p_[at_]);
      if (c < 0x20 || c >= 0x80 || c == '\\') return false;  // escapes and UTF-8: the JSON path checks them
      at_++;
    }
    if (at_ == p_.size()) return false;
    out.assign(p_.data() + start, at_ - start);
    at_++;
    return true;
  }
  // [u, u, ...] of unsigned integers of at most 18 digits (a larger one goes the JSON way)
  bool uid_list(std::vector<uint64_t>& out) {
    if (!literal("[")) return false;
    if (literal("]")) return true;
    int64_t v;
    do {
      if (!integer(v) || v < 0) return false;
      out.push_back(static_cast<uint64_t>(v));
    } while (literal(","));
    return literal("]");
  }
  bool boolean(bool& out) {
    if (literal("true")) return out = true, true;
    if (literal("false")) return out = false, true;
    return false;
  }
  // JSON's integer grammar, at most 18 digits (no overflow; longer ones go the JSON way)
  bool integer(int64_t& out) {
    const bool negative = literal("-");
    const size_t start = at_;
    int64_t v = 0;
    while (at_ < p_.size() && p_[at_] >= '0' && p_[at_] <= '9' && at_ - start < 18) v = v * 10 + (p_[at_++] - '0');
    const size_t digits = at_ - start;
    if (digits == 0 || (digits > 1 && p_[start] == '0') || (at_ < p_.size() && p_[at_] >= '0' && p_[at_] <= '9'))
      return false;
    if (at_ < p_.size() && (p_[at_] == '.' || p_[at_] == 'e' || p_[at_] == 'E')) return false;  // a float
    out = negative ? -v : v;
    return true;
  }
  // JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, read by from_chars (correctly
  // rounded, as the JSON path's strtod); a value out of double's range goes the JSON way
  bool number(double& out) {
    const size_t start = at_;
    auto digits = [&] {
      const size_t from = at_;
      while (at_ < p_.size() && p_[at_] >= '0' && p_[at_] <= '9') at_++;
      return at_ - from;
    };
    literal("-");
    const size_t int_start = at_;
    const size_t n = digits();
    if (n == 0 || (n > 1 && p_[int_start] == '0')) return false;
    if (literal(".") && digits() == 0) return false;
    if (literal("e") || literal("E")) {
      if (!literal("+")) literal("-");
      if (digits() == 0) return false;
    }
    const auto [end, ec] = std::from_chars(p_.data() + start, p_.data() + at_, out);
    return ec == std::errc() && end == p_.data() + at_;
  }

  std::string_view p_;
  size_t at_ = 0;
};

// The kernel IR of a code blob (kernel_json), checked as the passes' output is (ir::verify), so that a
// renderer is never handed an instruction that names a value that does not exist.
ir::Kernel read_kernel(const json& j) {
  static const std::unordered_map<std::string, ir::Op> ops = [] {
    std::unordered_map<std::string, ir::Op> m;
    for (int o = 0; o <= static_cast<int>(ir::Op::MulAcc); o++)  // MULACC: the last Op (tensorscope/ir.h)
      m[ir::op_name(static_cast<ir::Op>(o))] = static_cast<ir::Op>(o);
    return m;
  }();
  auto dtype = [](const json& v) {
    if (!v.is_string()) throw RecordingError("kernel IR: a dtype is not a string");
    try {
      return dtype_from_name(v.get<std::string>());
    } catch (const std::invalid_argument& e) {
      throw RecordingError(std::string("kernel IR: ") + e.what());
    }
  };
  ir::Kernel k;
  k.name = str(j, "name");
  for (const json& g : array(j, "globals")) {
    if (!g.is_array() || g.size() != 3 || !g[2].is_boolean()) throw RecordingError("kernel IR: a global is not [dtype, numel, output]");
    const int64_t numel = integer(g[1], "numel");
    if (numel < 0) throw RecordingError("kernel IR: a global of negative size");
    k.globals.push_back({dtype(g[0]), numel, g[2].get<bool>()});
  }
  for (const json& in : array(j, "insts")) {
    if (!in.is_array() || in.size() < 4 || in.size() > 8 || !in[0].is_string())
      throw RecordingError("kernel IR: instruction " + std::to_string(k.insts.size()) + " is not [op, dtype, arg, value, sources...]");
    auto op = ops.find(in[0].get<std::string>());
    if (op == ops.end()) throw RecordingError("kernel IR: unknown op '" + in[0].get<std::string>().substr(0, 40) + "'");
    ir::Inst x;
    x.op = op->second;
    x.dtype = dtype(in[1]);
    x.arg = integer(in[2], "arg");
    if (in[3].is_number()) x.value = in[3].get<double>();
    else if (in[3] == "inf" || in[3] == "-inf") x.value = (in[3] == "inf" ? 1 : -1) * std::numeric_limits<double>::infinity();
    else if (in[3] == "nan") x.value = std::numeric_limits<double>::quiet_NaN();
    else throw RecordingError("kernel IR: a value is not a number");
    x.num_src = static_cast<uint8_t>(in.size() - 4);
    for (size_t s = 4; s < in.size(); s++) {
      const int64_t src = integer(in[s], "source");
      if (src < 0 || src >= static_cast<int64_t>(k.insts.size()))
        throw RecordingError("kernel IR: instruction " + std::to_string(k.insts.size()) + " reads a value defined after it");
      x.src[s - 4] = static_cast<ir::ValueId>(src);
    }
    k.insts.push_back(x);
  }
  for (const json& o : array(j, "opts")) {
    if (!o.is_array() || o.size() != 2 || !o[0].is_string()) throw RecordingError("kernel IR: an applied opt is not [kind, amount]");
    int kind = -1;
    for (int i = 0; i < ir::OptPlan::kKinds; i++)
      if (o[0].get<std::string>() == ir::opt_name(static_cast<ir::AppliedOpt::Kind>(i))) kind = i;
    if (kind < 0) throw RecordingError("kernel IR: unknown applied opt '" + o[0].get<std::string>().substr(0, 40) + "'");
    k.opts.push_back({static_cast<ir::AppliedOpt::Kind>(kind), static_cast<int>(integer(o[1], "amount"))});
  }
  try {
    k.plan = ir::OptPlan::parse(str(j, "plan"));
  } catch (const std::invalid_argument& e) {
    throw RecordingError(std::string("kernel IR: ") + e.what());
  }
  k.target.max_workgroup_size = static_cast<uint32_t>(integer(j, "max_workgroup_size", 0, UINT32_MAX));
  k.target.local_memory_bytes = static_cast<uint64_t>(integer(j, "local_memory_bytes", 0, INT64_MAX));
  // recordings made before the field existed have none: 0, as for a device that reports no subgroups
  if (j.contains("subgroup_size")) k.target.subgroup_size = static_cast<uint32_t>(integer(j, "subgroup_size", 0, 1024));
  // and before these: made on the machine the defaults describe (AVX-512)
  if (j.contains("vector_bytes")) k.target.vector_bytes = static_cast<uint32_t>(integer(j, "vector_bytes", 4, 1024));
  if (j.contains("vector_registers")) k.target.vector_registers = static_cast<uint32_t>(integer(j, "vector_registers", 1, 1024));
  if (auto errors = ir::verify(k); !errors.empty()) throw RecordingError("kernel IR of " + k.name.substr(0, 60) + ": " + errors.front());
  return k;
}

}  // namespace

std::shared_ptr<const KernelCode> EventDecoder::code(const std::string& hash) {
  auto known = code_.find(hash);
  if (known != code_.end()) return known->second;
  const json c = json::parse(blob(hash));
  auto k = std::make_shared<KernelCode>();
  for (const json& p : array(c, "ir")) {
    const std::string listing = str(p, "ir");
    auto shared = listings_.find(listing);
    if (shared == listings_.end()) shared = listings_.emplace(listing, PassSnapshot({}, blob(listing))).first;
    k->ir.emplace_back(str(p, "pass"), shared->second);
  }
  for (const json& src : array(c, "sources")) {
    SourceListing l{str(src, "renderer"), blob(str(src, "code")), {}};
    for (const json& line : array(src, "ir_op_line")) l.ir_op_line.push_back(static_cast<int>(integer(line, "ir_op_line")));
    k->sources.push_back(std::move(l));
  }
  k->device_renderer = str(c, "device_renderer");
  // optional: recordings made before it was kept hold every renderer's listing in "sources" instead
  // read when first needed (KernelCode::kernel_ir): the debugger renders few kernels in another language
  if (c.contains("kernel")) k->set_kernel_reader([text = blob(str(c, "kernel"))] { return read_kernel(json::parse(text)); });
  // optional: recordings made before the plans were recorded lack them
  if (c.contains("plan")) k->plan = str(c, "plan");
  if (c.contains("plan_from")) k->plan_from = str(c, "plan_from");
  if (c.contains("applied")) k->applied = str(c, "applied");
  return code_.emplace(hash, std::move(k)).first->second;
}

void EventDecoder::add_blob(Blob b, bool verify) {
  if (verify && content_hash(b.data) != b.hash) throw RecordingError("blob " + b.hash + " does not match its content hash");
  blobs_.emplace(std::move(b.hash), std::move(b.data));
}

const std::string& EventDecoder::blob(const std::string& hash) const {
  auto it = blobs_.find(hash);
  if (it == blobs_.end()) throw RecordingError("names blob '" + hash + "', which the recording lacks");
  return it->second;
}

ScheduleEvent EventDecoder::thin_schedule(const std::string& structure, std::vector<uint64_t> position_uids,
                                          const std::vector<int>& kernel_ids, int schedule_id, SourceLocation where) {
  auto known = structures_.find(structure);
  if (known == structures_.end()) {
    ScheduleEvent read = read_schedule(json::parse(blob(structure)));
    uint64_t positions = 0;
    for_each_uid(read, [&](uint64_t& p) { positions = std::max(positions, p + 1); });
    known = structures_.emplace(structure, Structure{std::make_shared<const ScheduleEvent>(std::move(read)), positions}).first;
  }
  const Structure& st = known->second;
  if (keep_thin_ && !st.event->kernels.empty()) {  // (a structure without kernels would not read as thin)
    if (kernel_ids.size() != st.event->kernels.size())
      throw RecordingError("schedule: " + std::to_string(kernel_ids.size()) + " kernel ids for " +
                           std::to_string(st.event->kernels.size()) + " kernels");
    if (position_uids.size() < st.positions)
      throw RecordingError("schedule: node position " + std::to_string(st.positions - 1) + " out of range");
    ScheduleEvent s;
    s.schedule_id = schedule_id;
    s.where = std::move(where);
    s.structure = st.event;
    s.position_uids = std::move(position_uids);
    s.kernel_ids = kernel_ids;
    return s;
  }
  try {
    ScheduleEvent s = instantiate_schedule(st.event, std::move(position_uids), kernel_ids, schedule_id);
    s.where = std::move(where);
    return s;
  } catch (const std::invalid_argument& x) {
    throw RecordingError(x.what());
  }
}

NodesEvent EventDecoder::nodes(NodesEvent n, int64_t count, const std::string& batch) {
  auto known = batches_.find(batch);
  if (known == batches_.end())
    known = batches_.emplace(batch, std::make_shared<const NodeBatch>(read_node_batch(json::parse(blob(batch))))).first;
  n.batch = known->second;
  if (static_cast<uint64_t>(count) != n.batch->nodes.size())
    throw RecordingError("field 'count' differs from its batch's node count");
  // every source position must name a node of the batch or an external uid
  const uint64_t positions = n.batch->nodes.size() + n.external_uids.size();
  for (const GraphNodeInfo& node : n.batch->nodes)
    for (uint64_t p : node.srcs)
      if (p >= positions) throw RecordingError("a node's source position " + std::to_string(p) + " is out of range");
  return n;
}

Event EventDecoder::decode(const EncodedEvent& e) {
  try {
    if (e.kind == EventKind::Launch) {
      KernelRunEvent r;
      std::string hash;
      if (PlainPayload(e.payload).read(r, hash)) {
        if (!hash.empty()) r.code = code(hash);
        return r;
      }
    }
    if (e.kind == EventKind::Schedule) {
      int schedule_id = 0;
      SourceLocation where;
      std::string hash;
      std::vector<uint64_t> uids;
      std::vector<int> kernel_ids;
      if (PlainPayload(e.payload).read_schedule(schedule_id, where, hash, uids, kernel_ids))
        return thin_schedule(hash, std::move(uids), kernel_ids, schedule_id, std::move(where));
    }
    if (e.kind == EventKind::Nodes) {
      NodesEvent n;
      int64_t count = 0;
      std::string hash;
      if (PlainPayload(e.payload).read_nodes(n, count, hash)) return nodes(std::move(n), count, hash);
    }
    json j = json::parse(e.payload);
    switch (e.kind) {
      case EventKind::Schedule: {
        if (!j.is_object() || !j.contains("structure")) return read_schedule(j);
        const std::string hash = str(j, "structure");
        std::vector<uint64_t> uids;
        for (const json& u : array(j, "position_uids")) uids.push_back(uid(u));
        std::vector<int> kernel_ids;
        for (const json& k : array(j, "kernel_ids")) {
          const int64_t id = integer(k, "kernel_ids");
          if (id < 0 || id > kMaxId) throw RecordingError("field 'kernel_ids' is out of range");
          kernel_ids.push_back(static_cast<int>(id));
        }
        const int schedule_id = static_cast<int>(integer(j, "schedule_id", 0, kMaxId));
        return thin_schedule(hash, std::move(uids), kernel_ids, schedule_id, read_where(j));
      }
      case EventKind::Launch: {
        KernelRunEvent r;
        r.kernel_id = static_cast<int>(integer(j, "kernel_id", 0, kMaxId));
        r.name = str(j, "name");
        r.device = str(j, "device");
        const json& code_field = field(j, "code");
        if (code_field.is_string()) {
          r.code = code(code_field.get<std::string>());
        } else if (!code_field.is_null()) {
          throw RecordingError("field 'code' is neither a blob hash nor null");
        }
        r.compile_cache_hit = boolean(j, "compile_cache_hit");
        r.compile_ms = number(j, "compile_ms");
        r.time_ms = number(j, "time_ms");
        r.replayed = boolean(j, "replayed");
        r.replay_of = static_cast<int>(integer(j, "replay_of", -1, kMaxId));
        if (j.contains("buffers")) {
          for (const json& b : array(j, "buffers")) {
            RecordedBuffer rb;
            rb.role = str(b, "role");
            if (rb.role != "output" && rb.role != "input") throw RecordingError("a buffer's role is neither output nor input");
            rb.index = static_cast<int>(integer(b, "index", 0, kMaxId));
            rb.dtype = str(b, "dtype");
            const int64_t item = rb.dtype == "float32" || rb.dtype == "int32" ? 4
                                 : rb.dtype == "float16"                      ? 2
                                 : rb.dtype == "bool"                         ? 1
                                                                              : 0;
            if (!item) throw RecordingError("a recorded buffer's dtype '" + rb.dtype.substr(0, 20) + "' is unknown");
            rb.numel = integer(b, "numel", 0, INT64_MAX / 4);  // so numel * item cannot overflow
            const json& data = field(b, "blob");
            if (data.is_string()) {
              auto bytes = std::make_shared<const std::string>(blob(data.get<std::string>()));
              if (static_cast<int64_t>(bytes->size()) != rb.numel * item)
                throw RecordingError("a recorded buffer's size does not match its dtype and numel");
              rb.bytes = std::move(bytes);
            } else if (!data.is_null()) {
              throw RecordingError("field 'blob' is neither a blob hash nor null");
            }
            rb.note = str(b, "note");
            r.buffers.push_back(std::move(rb));
          }
        }
        return r;
      }
      case EventKind::Nodes: {
        NodesEvent n;
        const std::string hash = str(j, "batch");
        n.first_uid = uid(field(j, "first_uid"));
        const int64_t count = integer(j, "count", 0, INT64_MAX);
        for (const json& u : array(j, "external_uids")) n.external_uids.push_back(uid(u));
        for (const json& u : array(j, "freed_uids")) n.freed_uids.push_back(uid(u));
        return nodes(std::move(n), count, hash);
      }
      case EventKind::Trial: {
        AutotuneTrialEvent t;
        t.kernel_id = static_cast<int>(integer(j, "kernel_id", -1, kMaxId));
        t.name = str(j, "name");
        t.ir_hash = str(j, "ir_hash");
        t.device = str(j, "device");
        t.plan = str(j, "plan");
        t.applied = str(j, "applied");
        t.compile_ms = number(j, "compile_ms");
        t.time_ms = number(j, "time_ms");
        const std::string outcome = str(j, "outcome");
        if (!trial_outcome_from_name(outcome, t.outcome))
          throw RecordingError("field 'outcome' is not a trial outcome ('" + outcome.substr(0, 20) + "')");
        t.reason = str(j, "reason");
        return t;
      }
      case EventKind::Output: {
        ScriptOutputEvent o;
        const std::string stream = str(j, "stream");
        if (stream != "stdout" && stream != "stderr") throw RecordingError("field 'stream' is neither stdout nor stderr");
        o.stream = stream == "stderr" ? ScriptOutputEvent::Stderr : ScriptOutputEvent::Stdout;
        o.text = str(j, "text");
        return o;
      }
    }
    throw RecordingError("unknown kind " + std::to_string(static_cast<int>(e.kind)));
  } catch (const json::exception& x) {
    throw RecordingError("event " + std::to_string(e.seq) + " (" + event_kind_name(e.kind) + "): bad JSON: " + x.what());
  } catch (const RecordingError& x) {
    throw RecordingError("event " + std::to_string(e.seq) + " (" + event_kind_name(e.kind) + "): " + x.what());
  }
}

// ---- the run ------------------------------------------------------------------------------------------

std::string run_info_to_json(const RunInfo& r) {
  JsonWriter w;
  w.begin_object();
  w.key("script_path").value(r.script_path);
  w.key("script_text").value(r.script_text);
  w.key("argv").begin_array();
  for (const std::string& a : r.argv) w.value(a);
  w.end_array();
  w.key("device").value(r.device);
  w.key("device_properties").raw(r.device_properties.empty() ? "{}" : r.device_properties);
  w.key("version").value(r.version);
  w.key("python_version").value(r.python_version);
  w.key("start_time_ns").value(r.start_time_ns);
  w.key("ended").value(r.ended);
  w.key("exit_status").value(r.exit_status);
  w.key("end_message").value(r.end_message);
  w.key("end_time_ns").value(r.end_time_ns);
  w.end_object();
  return w.take();
}

RunInfo run_info_from_json(std::string_view text) {
  try {
    const json j = json::parse(text);
    RunInfo r;
    r.script_path = str(j, "script_path");
    r.script_text = str(j, "script_text");
    r.argv = strings(j, "argv");
    r.device = str(j, "device");
    const json& props = field(j, "device_properties");
    if (!props.is_object()) throw RecordingError("field 'device_properties' is not an object");
    r.device_properties = props.dump();
    r.version = str(j, "version");
    r.python_version = str(j, "python_version");
    r.start_time_ns = integer(field(j, "start_time_ns"), "start_time_ns");
    r.ended = str(j, "ended");
    r.exit_status = static_cast<int>(integer(j, "exit_status", INT32_MIN, INT32_MAX));
    r.end_message = str(j, "end_message");
    r.end_time_ns = integer(field(j, "end_time_ns"), "end_time_ns");
    return r;
  } catch (const json::exception& x) {
    throw RecordingError(std::string("run: bad JSON: ") + x.what());
  } catch (const RecordingError& x) {
    throw RecordingError(std::string("run: ") + x.what());
  }
}

// ---- frames -------------------------------------------------------------------------------------------

namespace {
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; i++) out.push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t get_u64(std::string_view in, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}
}  // namespace

std::string frame_bytes(char type, std::string_view body) {
  std::string out;
  const uint32_t n = static_cast<uint32_t>(body.size() + 1);
  out.reserve(4 + n);
  for (int i = 0; i < 4; i++) out.push_back(static_cast<char>(n >> (8 * i)));
  out.push_back(type);
  out.append(body);
  return out;
}

std::string event_frame_body(const EncodedEvent& e) {
  std::string out;
  out.reserve(17 + e.payload.size());
  put_u64(out, e.seq);
  put_u64(out, static_cast<uint64_t>(e.time_ns));
  out.push_back(static_cast<char>(e.kind));
  out.append(e.payload);
  return out;
}

EncodedEvent event_from_frame_body(std::string_view body) {
  if (body.size() < 17) throw RecordingError("connection: an event frame shorter than its header");
  EncodedEvent e;
  e.seq = get_u64(body, 0);
  e.time_ns = static_cast<int64_t>(get_u64(body, 8));
  const int kind = static_cast<unsigned char>(body[16]);
  if (kind < 1 || kind > 5) throw RecordingError("connection: an event of unknown kind " + std::to_string(kind));
  e.kind = static_cast<EventKind>(kind);
  e.payload = std::string(body.substr(17));
  return e;
}

std::string blob_frame_body(const Blob& b) { return b.hash + b.data; }

Blob blob_from_frame_body(std::string_view body) {
  if (body.size() < 16) throw RecordingError("connection: a blob frame shorter than its hash");
  return {std::string(body.substr(0, 16)), std::string(body.substr(16))};
}

void FrameParser::feed(std::string_view bytes) {
  if (offset_ > 0 && offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  }
  buffer_.append(bytes);
}

bool FrameParser::next(Frame& frame) {
  if (buffer_.size() - offset_ < 4) return false;
  uint32_t n = 0;
  for (int i = 0; i < 4; i++) n |= static_cast<uint32_t>(static_cast<unsigned char>(buffer_[offset_ + i])) << (8 * i);
  if (n == 0 || n > kMaxFrame) throw RecordingError("connection: a frame of " + std::to_string(n) + " bytes");
  if (buffer_.size() - offset_ - 4 < n) return false;
  frame.type = buffer_[offset_ + 4];
  frame.body.assign(buffer_, offset_ + 5, n - 1);
  offset_ += 4 + n;
  if (offset_ > (1u << 20) && offset_ * 2 > buffer_.size()) {  // keep the buffer from growing forever
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  return true;
}

}  // namespace ts
