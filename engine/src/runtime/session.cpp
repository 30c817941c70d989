#include "tensorscope/session.h"

#include "tensorscope/ir.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace ts {

Session& Session::get() {
  static Session session;
  static const bool configured = [] {
    if (const char* mb = std::getenv("TENSORSCOPE_RECORD_BUFFERS"); mb && std::atof(mb) > 0)
      session.set_record_buffers(static_cast<size_t>(std::atof(mb) * (1 << 20)));
    return true;
  }();
  (void)configured;
  return session;
}

void Session::subscribe(SessionObserver* observer) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(observers_.begin(), observers_.end(), observer) == observers_.end()) observers_.push_back(observer);
  }
  update_tracking();
}

void Session::unsubscribe(SessionObserver* observer) {
  flush_nodes();  // what it watched so far, before it goes
  {
    std::lock_guard<std::mutex> lock(mutex_);
    observers_.erase(std::remove(observers_.begin(), observers_.end(), observer), observers_.end());
  }
  update_tracking();
}

void Session::update_tracking() {
  std::lock_guard<std::mutex> lock(mutex_);
  log_nodes_ = locator_ && std::any_of(observers_.begin(), observers_.end(), [](auto* o) { return o->wants_nodes(); });
  track_sources_ = locator_ && (log_nodes_ || break_on_nan_);
}

void Session::emit(const Event& event) {
  if (log_nodes_) flush_nodes();  // the nodes an event was made from come before it
  dispatch(event);
}

void Session::dispatch(const Event& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t seq = seq_++;
  for (SessionObserver* o : observers_) o->on_event(seq, event);
}

void Session::flush_nodes() {
  if (!take_nodes_) return;
  for (NodesEvent& ev : take_nodes_()) dispatch(std::move(ev));  // moved into the Event, not copied
}

int Session::add_stack(SourceStack stack) {
  stacks_.push_back(std::move(stack));
  return static_cast<int>(stacks_.size()) - 1;
}

const SourceStack& Session::stack(int id) const {
  static const SourceStack none;
  return id < 0 || id >= static_cast<int>(stacks_.size()) ? none : stacks_[id];
}

const char* gate_stage_name(GateStop::Stage stage) {
  switch (stage) {
    case GateStop::BeforeSchedule: return "before schedule";
    case GateStop::BeforeLower: return "before lowering";
    case GateStop::AfterPass: return "after pass";
    case GateStop::BeforeRender: return "before render";
    case GateStop::BeforeCompile: return "before compile";
    case GateStop::BeforeLaunch: return "before launch";
    case GateStop::AfterLaunch: return "after launch";
    case GateStop::AfterSchedule: return "after schedule";
    case GateStop::NonFinite: return "non-finite output";
  }
  return "?";
}

namespace {

// Every uid field of a schedule, for for_each_uid and instantiate_schedule (inlined there: it runs for
// each realize a watched training loop makes).
template <class F>
void visit_uids(ScheduleEvent& ev, F&& f) {
  for (GraphNodeInfo& n : ev.nodes) {
    f(n.uid);
    for (uint64_t& s : n.srcs) f(s);
  }
  for (KernelInfo& k : ev.kernels) {
    for (uint64_t& u : k.node_uids) f(u);
    for (BufferInfo& b : k.inputs) f(b.node_uid);
    for (BufferInfo& b : k.outputs) f(b.node_uid);
    for (FusionDecision& d : k.fusion_decisions) f(d.node_uid);
  }
}

}  // namespace

void for_each_uid(ScheduleEvent& ev, const std::function<void(uint64_t&)>& f) { visit_uids(ev, f); }

ScheduleEvent instantiate_schedule(const std::shared_ptr<const ScheduleEvent>& structure,
                                   std::vector<uint64_t> position_uids, const std::vector<int>& kernel_ids,
                                   int schedule_id) {
  if (kernel_ids.size() != structure->kernels.size())
    throw std::invalid_argument("schedule: " + std::to_string(kernel_ids.size()) + " kernel ids for " +
                                std::to_string(structure->kernels.size()) + " kernels");
  ScheduleEvent ev = *structure;
  visit_uids(ev, [&](uint64_t& u) {
    if (u >= position_uids.size()) throw std::invalid_argument("schedule: node position " + std::to_string(u) + " out of range");
    u = position_uids[u];
  });
  ev.schedule_id = schedule_id;
  for (size_t k = 0; k < ev.kernels.size(); k++) ev.kernels[k].id = kernel_ids[k];
  ev.structure = structure;
  ev.position_uids = std::move(position_uids);
  return ev;
}

ScheduleEvent full_schedule(const ScheduleEvent& event) {
  if (!event.thin()) return event;
  ScheduleEvent full = instantiate_schedule(event.structure, event.position_uids, event.kernel_ids, event.schedule_id);
  full.where = event.where;
  return full;
}

void for_each_kernel(const ScheduleEvent& event, const std::function<void(int, const KernelInfo&)>& f) {
  if (event.thin())
    for (size_t i = 0; i < event.kernel_ids.size(); i++) f(event.kernel_ids[i], event.structure->kernels[i]);
  else
    for (const KernelInfo& k : event.kernels) f(k.id, k);
}

const char* trial_outcome_name(AutotuneTrialEvent::Outcome outcome) {
  switch (outcome) {
    case AutotuneTrialEvent::Timed: return "timed";
    case AutotuneTrialEvent::Kept: return "kept";
    case AutotuneTrialEvent::DroppedSlow: return "dropped-slow";
    case AutotuneTrialEvent::Duplicate: return "duplicate";
    case AutotuneTrialEvent::FailedCompile: return "failed-compile";
    case AutotuneTrialEvent::FailedRun: return "failed-run";
    case AutotuneTrialEvent::Timeout: return "timeout";
    case AutotuneTrialEvent::CacheHit: return "cache-hit";
  }
  return "?";
}

bool trial_outcome_from_name(const std::string& name, AutotuneTrialEvent::Outcome& outcome) {
  for (int o = AutotuneTrialEvent::Timed; o <= AutotuneTrialEvent::CacheHit; o++)
    if (name == trial_outcome_name(static_cast<AutotuneTrialEvent::Outcome>(o))) {
      outcome = static_cast<AutotuneTrialEvent::Outcome>(o);
      return true;
    }
  return false;
}

// ---- PassSnapshot: a listing printed when first read ----------------------------------------------------

struct PassSnapshot::Listing {
  std::once_flag printed;
  std::unique_ptr<const ir::Kernel> kernel;  // until printed
  std::string text;
};

PassSnapshot::PassSnapshot(std::string pass, std::string listing)
    : pass(std::move(pass)), listing_(std::make_shared<Listing>()) {
  listing_->text = std::move(listing);
  std::call_once(listing_->printed, [] {});  // printed already: ir() does not print it again
}

PassSnapshot::PassSnapshot(std::string pass, const ir::Kernel& kernel)
    : pass(std::move(pass)), listing_(std::make_shared<Listing>()) {
  listing_->kernel = std::make_unique<const ir::Kernel>(kernel);
}

PassSnapshot::PassSnapshot(std::string pass, const PassSnapshot& unchanged_from)
    : pass(std::move(pass)), listing_(unchanged_from.listing_) {}

const std::string& PassSnapshot::ir() const {
  Listing& l = *listing_;
  std::call_once(l.printed, [&l] {
    l.text = ir::print(*l.kernel);
    l.kernel.reset();
  });
  return l.text;
}

bool PassSnapshot::same_ir(const PassSnapshot& other) const {
  return listing_ == other.listing_ || ir() == other.ir();
}

// KernelCode's kernel IR read from a recording when first needed (here, not in kernel_code.cpp, which renders:
// the recording tools link the codec without the renderers).
void KernelCode::set_kernel_reader(std::function<ir::Kernel()> read) {
  std::lock_guard<std::mutex> lock(rendered_->mutex);
  rendered_->read_kernel = std::move(read);
  rendered_->read_kernel_result.reset();
  rendered_->read_kernel_error.clear();
}

std::shared_ptr<const ir::Kernel> KernelCode::kernel_ir() const {
  if (kernel) return kernel;
  std::lock_guard<std::mutex> lock(rendered_->mutex);
  if (rendered_->read_kernel) {
    try {
      rendered_->read_kernel_result = std::make_shared<const ir::Kernel>(rendered_->read_kernel());
    } catch (const std::exception& e) {
      rendered_->read_kernel_error = e.what();
    }
    rendered_->read_kernel = nullptr;
  }
  return rendered_->read_kernel_result;
}

bool KernelCode::has_kernel_ir() const {
  if (kernel) return true;
  std::lock_guard<std::mutex> lock(rendered_->mutex);
  return rendered_->read_kernel || rendered_->read_kernel_result || !rendered_->read_kernel_error.empty();
}

std::string KernelCode::kernel_ir_error() const {
  std::lock_guard<std::mutex> lock(rendered_->mutex);
  return rendered_->read_kernel_error;
}

}  // namespace ts
