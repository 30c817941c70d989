// CapturedJit: record a function's kernel launches once, replay them on new inputs (tinygrad's TinyJit;
// the binding rules are in tensorscope/jit.h).
#include "tensorscope/jit.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <unordered_map>

#include "runtime/buffer_pool.h"
#include "runtime/capture.h"
#include "runtime/realize.h"
#include "tensor/tensor_impl.h"

namespace ts {

// ---- the capture hooks (runtime/capture.h) ------------------------------------------------------------

namespace {
thread_local Capture* g_capture = nullptr;
}

Capture* active_capture() { return g_capture; }
void set_active_capture(Capture* capture) { g_capture = capture; }

void capture_note_assign(const std::shared_ptr<TensorImpl>& target) {
  if (!g_capture) return;
  for (const AssignRecord& a : g_capture->assigns)
    if (a.target == target) return;  // the value before the first assign is the one a replay reads
  // A replay binds the tensor's buffer where the capture read its old value, so the old value must be
  // a buffer. A lazy one (an assign left unrealized by the call before) is realized here, outside
  // the capture: computing it inside would replay that computation from the capture's buffers.
  if (!target->node.node().realized()) {
    Capture* c = g_capture;
    g_capture = nullptr;
    struct Reinstall {
      Capture* c;
      ~Reinstall() { g_capture = c; }
    } reinstall{c};
    realize({target->node.id()});
  }
  g_capture->assigns.push_back({target, target->node.node().buffer});
}
void capture_note_host_read() {
  if (g_capture) g_capture->host_reads++;
}
void capture_note_host_write() {
  if (g_capture) g_capture->host_writes++;
}
void capture_note_random() {
  if (g_capture) g_capture->random_draws++;
}

// ---- the plan -----------------------------------------------------------------------------------------

// Where a replay gets each buffer the captured launches touched.
struct JitSlot {
  enum Kind { Input, State, Fresh, Baked } kind = Baked;
  int index = -1;                 // Input: input number; State: index into CapturedJitPlan::states
  std::shared_ptr<Buffer> baked;  // Baked: the buffer itself
  int device = 0;                 // Fresh: what to allocate
  DType dtype = DType::Float32;
  int64_t numel = 0;
  int last_use = -1;              // Fresh: the last launch that touches it
  bool kept = false;              // Fresh: an output or a state's new value, alive after the replay
};

struct JitLaunch {
  std::string name;
  int device = 0;
  int captured_kernel_id = -1;
  bool is_copy = false;
  std::shared_ptr<Program> program;  // null for copies
  std::vector<int> slots;            // outputs first, then inputs
  int outputs = 1;                   // how many of `slots` are outputs (a multi-output kernel: more)
  // per output: the state whose old value's buffer it may be written into (-1: a fresh buffer), see replay()
  std::vector<int> in_place_state;
};

struct JitInput {
  Shape shape;
  DType dtype;
  int device;
};

struct JitState {
  std::shared_ptr<TensorImpl> target;
  int before_slot = -1;  // the slot its old value binds (-1: no launch read it as a buffer)
  int after_slot = -1;   // the slot holding its new value
  Shape shape;
};

struct JitOutput {
  int slot;
  Shape shape;
};

struct CapturedJitPlan {
  std::vector<JitInput> inputs;
  std::vector<JitSlot> slots;
  std::vector<JitLaunch> launches;
  std::vector<JitState> states;
  std::vector<JitOutput> outputs;
};

namespace {

std::string signature_text(const JitInput& in) {
  return "(" + shape_str(in.shape) + (in.shape.size() == 1 ? ",)" : ")") + " " + dtype_name(in.dtype) + " on " +
         DeviceRegistry::at(in.device).name();
}

JitInput signature_of(const Tensor& t) { return {t.shape(), t.dtype(), node(t).device}; }

const std::shared_ptr<Buffer>& buffer_of(const Tensor& t) {
  const Node& n = node(t);
  if (!n.realized()) throw std::logic_error("jit: tensor is not realized");
  return n.buffer;
}

std::shared_ptr<CapturedJitPlan> build_plan(const std::vector<Tensor>& inputs, Capture& cap, const std::vector<Tensor>& outputs) {
  auto plan = std::make_shared<CapturedJitPlan>();
  std::unordered_map<const Buffer*, int> slot_of;
  auto add_slot = [&](const Buffer* b, JitSlot s) {
    plan->slots.push_back(std::move(s));
    slot_of[b] = static_cast<int>(plan->slots.size()) - 1;
    return static_cast<int>(plan->slots.size()) - 1;
  };
  // a buffer no launch wrote and no rule below names: read as it was at capture
  auto slot_or_baked = [&](const std::shared_ptr<Buffer>& b) {
    auto it = slot_of.find(b.get());
    if (it != slot_of.end()) return it->second;
    JitSlot s;
    s.baked = b;
    return add_slot(b.get(), std::move(s));
  };
  for (size_t i = 0; i < inputs.size(); i++) {
    plan->inputs.push_back(signature_of(inputs[i]));
    JitSlot s;
    s.kind = JitSlot::Input;
    s.index = static_cast<int>(i);
    add_slot(buffer_of(inputs[i]).get(), std::move(s));
  }
  for (const AssignRecord& a : cap.assigns) {
    JitState st;
    st.target = a.target;
    if (a.before) {
      auto it = slot_of.find(a.before.get());
      if (it != slot_of.end()) {
        st.before_slot = it->second;  // an input the function assigns to: bound as the input
      } else {
        JitSlot s;
        s.kind = JitSlot::State;
        s.index = static_cast<int>(plan->states.size());
        st.before_slot = add_slot(a.before.get(), std::move(s));
      }
    }
    plan->states.push_back(std::move(st));
  }
  for (LaunchRecord& l : cap.launches) {
    JitLaunch jl{l.name, l.device, l.kernel_id, l.is_copy, l.program, {}, l.outputs, {}};
    const int index = static_cast<int>(plan->launches.size());
    jl.slots.assign(l.outputs, -1);
    for (size_t b = l.outputs; b < l.buffers.size(); b++) jl.slots.push_back(slot_or_baked(l.buffers[b]));
    for (int o = 0; o < l.outputs; o++) {
      const Buffer* out = l.buffers[o].get();
      if (slot_of.count(out))
        throw std::logic_error("jit: kernel " + l.name + " writes a buffer that existed before it ran");
      JitSlot s;
      s.kind = JitSlot::Fresh;
      s.device = out->device_index;
      s.dtype = out->dtype;
      s.numel = out->numel;
      jl.slots[o] = add_slot(out, std::move(s));
    }
    for (int slot : jl.slots)
      if (plan->slots[slot].kind == JitSlot::Fresh) plan->slots[slot].last_use = index;
    plan->launches.push_back(std::move(jl));
  }
  auto keep = [&](int slot) {
    if (plan->slots[slot].kind == JitSlot::Fresh) plan->slots[slot].kept = true;
    return slot;
  };
  for (const Tensor& t : outputs) plan->outputs.push_back({keep(slot_or_baked(buffer_of(t))), t.shape()});
  for (JitState& st : plan->states) {
    Tensor now(st.target);
    st.after_slot = keep(slot_or_baked(buffer_of(now)));
    st.shape = now.shape();
  }
  // In-place updates: a launch whose output is a state's new value and which reads the state's old value
  // elementwise (LaunchRecord::in_place) may write that output into the old value's buffer, when it is the
  // last launch to read the old value and the old value is no output of the function. replay() also checks
  // that nothing outside holds the old value. An optimizer's update of a weight beyond the L2 then reads and
  // writes each line once instead of reading a fresh buffer's lines for ownership first (an AdamW-like
  // update of 401,408 floats from cold caches: 0.45-0.48 -> 0.23-0.26 ms).
  // TENSORSCOPE_JIT_IN_PLACE=0 at capture turns them off (to compare; results are the same either way)
  const char* in_place_env = std::getenv("TENSORSCOPE_JIT_IN_PLACE");
  const bool in_place = !in_place_env || std::string(in_place_env) != "0";
  std::vector<int> last_reader(plan->slots.size(), -1);  // the last launch that binds each slot
  for (size_t k = 0; k < plan->launches.size(); k++)
    for (int slot : plan->launches[k].slots) last_reader[slot] = static_cast<int>(k);
  std::unordered_map<int, int> state_after;  // a state's new-value slot → the state
  for (size_t s = 0; s < plan->states.size(); s++) state_after[plan->states[s].after_slot] = static_cast<int>(s);
  for (size_t k = 0; k < plan->launches.size(); k++) {
    JitLaunch& jl = plan->launches[k];
    jl.in_place_state.assign(jl.outputs, -1);
    for (const auto& [o, in] : cap.launches[k].in_place) {
      if (!in_place) break;
      auto it = state_after.find(jl.slots[o]);
      if (it == state_after.end()) continue;
      const int old_slot = jl.slots[in];
      if (plan->states[it->second].before_slot != old_slot || plan->slots[old_slot].kind != JitSlot::State) continue;
      bool read_elsewhere = last_reader[old_slot] != static_cast<int>(k) ||
                            std::count(jl.slots.begin(), jl.slots.end(), old_slot) != 1;
      for (const JitOutput& out : plan->outputs) read_elsewhere = read_elsewhere || out.slot == old_slot;
      if (!read_elsewhere) jl.in_place_state[o] = it->second;
    }
  }
  return plan;
}

}  // namespace

CapturedJit CapturedJit::capture(const std::vector<Tensor>& inputs, const std::function<std::vector<Tensor>()>& fn,
                                 std::vector<Tensor>* outputs) {
  if (active_capture()) throw std::runtime_error("jit: a capture is already running (a jitted function called another one)");
  Tensor::realize_all(inputs);
  for (size_t i = 0; i < inputs.size(); i++)
    for (size_t j = 0; j < i; j++)
      if (buffer_of(inputs[i]) == buffer_of(inputs[j]))
        throw std::invalid_argument("jit: inputs " + std::to_string(j) + " and " + std::to_string(i) +
                                    " are the same buffer; pass each tensor once");
  Capture cap;
  struct Uninstall {
    ~Uninstall() { set_active_capture(nullptr); }
  } uninstall;
  set_active_capture(&cap);
  std::vector<Tensor> outs = fn();
  // the outputs and the state the function assigned are realized inside the capture, as part of it
  std::vector<Tensor> finals = outs;
  for (const AssignRecord& a : cap.assigns) finals.push_back(Tensor(a.target));
  Tensor::realize_all(finals);
  set_active_capture(nullptr);

  if (cap.host_reads)
    throw std::runtime_error("jit: the function read " + std::to_string(cap.host_reads) +
                             " tensor value(s) on the host (.numpy(), .item(), .tolist()) while being captured; a replay "
                             "does not run python code, so it could not repeat the read: return the tensor and read it "
                             "outside the jitted function");
  if (cap.host_writes)
    throw std::runtime_error("jit: the function wrote " + std::to_string(cap.host_writes) +
                             " value(s) from the host into tensors (an optimizer's lr set inside it) while being "
                             "captured; a replay does not run python code, so it could not repeat the write: set it "
                             "outside the jitted function, between calls");
  if (cap.random_draws)
    throw std::runtime_error("jit: the function drew random numbers (Tensor.rand/randn/uniform, dropout) while being "
                             "captured; a replay would repeat the same numbers every call: draw them outside and pass "
                             "them as inputs, or turn dropout off (Tensor.training = False)");
  CapturedJit jit;
  jit.plan_ = build_plan(inputs, cap, outs);
  if (outputs) *outputs = std::move(outs);
  return jit;
}

std::vector<Tensor> CapturedJit::replay(const std::vector<Tensor>& inputs) const {
  const CapturedJitPlan& plan = *plan_;
  if (inputs.size() != plan.inputs.size())
    throw std::invalid_argument("jit: the function was captured with " + std::to_string(plan.inputs.size()) +
                                " tensor input(s), got " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); i++) {
    JitInput now = signature_of(inputs[i]);
    const JitInput& want = plan.inputs[i];
    if (now.shape != want.shape || now.dtype != want.dtype || now.device != want.device)
      throw std::invalid_argument("jit: input " + std::to_string(i) + " is " + signature_text(now) + " but the function was captured with " +
                                  signature_text(want) + "; a captured function replays fixed shapes: use another jit for other shapes");
  }
  Tensor::realize_all(inputs);
  for (const JitState& st : plan.states) Tensor(st.target).realize();  // an assign made outside since the last call

  std::vector<std::shared_ptr<Buffer>> bound(plan.slots.size());
  for (size_t s = 0; s < plan.slots.size(); s++) {
    const JitSlot& slot = plan.slots[s];
    if (slot.kind == JitSlot::Input) bound[s] = buffer_of(inputs[slot.index]);
    if (slot.kind == JitSlot::State) bound[s] = buffer_of(Tensor(plan.states[slot.index].target));
    if (slot.kind == JitSlot::Baked) bound[s] = slot.baked;
  }
  Session& session = Session::get();
  const bool observed = session.observed();
  std::vector<Buffer*> raw;
  for (size_t k = 0; k < plan.launches.size(); k++) {
    const JitLaunch& l = plan.launches[k];
    for (int o = 0; o < l.outputs; o++) {
      const JitSlot& out = plan.slots[l.slots[o]];
      // In place (see build_plan) when the state's tensor is the only holder of its old value: its node is
      // referenced by that tensor alone (no detach() or view of it kept) and its buffer by that node and
      // this replay alone. Otherwise a fresh buffer, as every output.
      if (const int s = l.in_place_state[o]; s >= 0) {
        const JitState& st = plan.states[s];
        const std::shared_ptr<Buffer>& old = bound[st.before_slot];
        const Node& old_node = st.target->node.node();
        if (old_node.refcount == 1 && old_node.buffer == old && old.use_count() == 2) {
          bound[l.slots[o]] = old;
          GlobalCounters::in_place_outputs++;
          continue;
        }
      }
      bound[l.slots[o]] = pooled_buffer(out.device, out.dtype, out.numel);
    }
    raw.clear();
    for (int s : l.slots) raw.push_back(bound[s].get());
    double ms;
    if (l.is_copy) {
      auto t0 = std::chrono::steady_clock::now();
      if (raw[0]->nbytes()) {
        std::vector<uint8_t> host(raw[0]->nbytes());
        read_buffer(*raw[1], host.data());
        write_buffer(*raw[0], host.data());
      }
      ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    } else {
      ms = launch_on_device(*l.program, raw);
      GlobalCounters::kernel_count++;
      GlobalCounters::replayed_kernels++;
      GlobalCounters::time_ms += ms;
    }
    const int kernel_id = session.next_kernel_id();
    if (observed) {
      KernelRunEvent ev;
      ev.kernel_id = kernel_id;
      ev.name = l.name;
      ev.device = DeviceRegistry::at(l.device).name();
      ev.compile_cache_hit = true;
      ev.time_ms = ms;
      ev.replayed = true;
      ev.replay_of = l.captured_kernel_id;
      session.emit(ev);
    }
    // temporaries go back to the pool after their last use, for the next launches to reuse
    for (int s : l.slots)
      if (plan.slots[s].kind == JitSlot::Fresh && plan.slots[s].last_use == static_cast<int>(k) && !plan.slots[s].kept)
        bound[s].reset();
  }

  Graph& g = Graph::get();
  for (const JitState& st : plan.states) {
    st.target->node = NodeRef(g.add_buffer(bound[st.after_slot], st.shape));
    st.target->ctx = nullptr;
  }
  std::vector<Tensor> outs;
  outs.reserve(plan.outputs.size());
  for (const JitOutput& o : plan.outputs) outs.push_back(tensor_from_node(g.add_buffer(bound[o.slot], o.shape)));
  return outs;
}

int64_t CapturedJit::launch_count() const { return static_cast<int64_t>(plan_->launches.size()); }
int64_t CapturedJit::input_count() const { return static_cast<int64_t>(plan_->inputs.size()); }
int64_t CapturedJit::state_count() const { return static_cast<int64_t>(plan_->states.size()); }

int64_t CapturedJit::fresh_buffer_count() const {
  int64_t n = 0;
  for (const JitSlot& s : plan_->slots) n += s.kind == JitSlot::Fresh;
  return n;
}

int64_t CapturedJit::in_place_output_count() const {
  int64_t n = 0;
  for (const JitLaunch& l : plan_->launches)
    for (int s : l.in_place_state) n += s >= 0;
  return n;
}

int64_t CapturedJit::baked_buffer_count() const {
  int64_t n = 0;
  for (const JitSlot& s : plan_->slots) n += s.kind == JitSlot::Baked;
  return n;
}

std::vector<std::string> CapturedJit::input_signature() const {
  std::vector<std::string> out;
  for (const JitInput& in : plan_->inputs) out.push_back(signature_text(in));
  return out;
}

}  // namespace ts
