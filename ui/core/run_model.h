// What one run of a script produced: its schedules and, per kernel, the launch report.
//
// This is the GUI's copy of the session's event stream (the engine's own data stays on the script
// thread). Panels read it; they never keep engine objects themselves. Kernel ids are session-wide,
// so they keep growing from run to run; the model maps them to rows in launch order.
#pragma once
#include <QHash>
#include <QObject>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "tensorscope/session.h"

namespace tsui {

class RunModel : public QObject {
  Q_OBJECT
 public:
  explicit RunModel(QObject* parent = nullptr) : QObject(parent) {}

  void clear();
  // `timeNs`: when the event happened, in ns since the start of the run (the runner's stream and a
  // recording give it; the timeline places spans by it); -1: not known.
  void addSchedule(ts::ScheduleEvent event, int64_t timeNs = -1);
  void addKernelRun(ts::KernelRunEvent event, int64_t timeNs = -1);
  void addNodes(ts::NodesEvent event, int64_t timeNs = -1);
  void addOutput(ts::ScriptOutputEvent event, int64_t timeNs = -1);
  void addTrial(ts::AutotuneTrialEvent event, int64_t timeNs = -1);

  // Every event in arrival order: what the event browser lists and what "the current event" indexes.
  struct EventRef {
    enum Kind { Nodes, Schedule, Launch, Output, Trial } kind;
    // Nodes: into nodeEvents(); Schedule: a schedule index (schedule()); Launch: the kernel id; Output: into outputs();
    // Trial: into trials()
    int index;
    int64_t timeNs = -1;  // ns since the start of the run; -1: not known
  };
  const std::vector<EventRef>& events() const { return events_; }
  const std::vector<ts::NodesEvent>& nodeEvents() const { return nodeEvents_; }
  const std::vector<ts::ScriptOutputEvent>& outputs() const { return outputs_; }
  // Autotune trials (ts::AutotuneTrialEvent) in arrival order; a kernel's come before its launch.
  const std::vector<ts::AutotuneTrialEvent>& trials() const { return trials_; }
  // Indices into trials() of a kernel's trials, in order (empty when it was not searched).
  std::vector<int> trialsOfKernel(int kernelId) const { return trialsOfKernel_.value(kernelId); }
  // Index into events() of a kernel's launch / of a schedule; -1 when not (yet) there.
  int eventOfLaunch(int kernelId) const { return launchEvent_.value(kernelId, -1); }
  int eventOfSchedule(int scheduleIndex) const;

  // The script whose lines the stacks name (the runner's --path, a recording's script_path).
  void setScriptPath(const QString& path) { scriptPath_ = path; }
  const QString& scriptPath() const { return scriptPath_; }
  // Where the script made a node: the short call stack (nullptr when unknown) and its user line.
  const ts::SourceStack* stackOf(uint64_t uid) const;
  ts::SourceLocation whereMade(uint64_t uid) const;
  // The node as it was created (uid, op, shape, dtype, sources as uids), or nullopt.
  std::optional<ts::GraphNodeInfo> createdNode(uint64_t uid) const;
  // Uids of the nodes made at `line` of the script (scriptPath()), in creation order.
  std::vector<uint64_t> nodesMadeAt(int line) const;
  // Ids of the kernels whose fused nodes include a node made at `line`.
  std::vector<int> kernelsFromLine(int line) const;

  // The lazy graph after events()[0..eventIndex]: nodes created and not freed, that no schedule has
  // computed yet, newest last (at most `limit`); realized nodes they read are in `inputs`.
  struct LazyGraph {
    std::vector<uint64_t> pending;  // unrealized: dashed in the graph
    std::vector<uint64_t> inputs;   // realized (or computed by a schedule) sources of pending nodes
    int total = 0;                  // pending nodes before the limit
  };
  LazyGraph lazyGraphAt(int eventIndex, int limit) const;

  // The schedules in arrival order. A schedule that repeats an earlier one's structure (a training loop's
  // steps) arrives thin (ts::ScheduleEvent::thin: the shared structure and its own uids); schedule(i)
  // gives it with its nodes and kernels, instantiated the first time it is asked for and then kept, so
  // that only the schedules someone looks at are ever copied out of their structure.
  int scheduleCount() const { return static_cast<int>(schedules_.size()); }
  const ts::ScheduleEvent& schedule(int index) const;
  // Whether schedule(index) holds a copy made from its structure (it arrived thin and was asked for).
  bool instantiated(int index) const { return instantiated_[index] != nullptr; }
  // The schedule as it arrived (thin or whole: for ts::for_each_kernel), its kernel ids in launch order and
  // the script line whose realize made it, none of which instantiates it.
  const ts::ScheduleEvent& scheduleAsArrived(int index) const { return schedules_[index]; }
  const std::vector<int>& kernelIdsOf(int index) const { return scheduleKernelIds_[index]; }
  const ts::SourceLocation& scheduleWhere(int index) const { return schedules_[index].where; }
  // Calls f(uid, node) for each node of schedule `index`, without instantiating it: `node` is the
  // schedule's own description, or its structure's for a thin schedule (whose uid fields are positions:
  // use `uid`; op, shape and kernel are as they are).
  template <class F>
  void forEachNodeOf(int index, F&& f) const {
    const ts::ScheduleEvent& s = schedules_[index];
    if (!s.thin()) {
      for (const ts::GraphNodeInfo& n : s.nodes) f(n.uid, n);
      return;
    }
    for (const ts::GraphNodeInfo& n : s.structure->nodes)
      if (n.uid < s.position_uids.size()) f(s.position_uids[n.uid], n);
  }
  int nodeCountOf(int index) const {
    const ts::ScheduleEvent& s = schedules_[index];
    return static_cast<int>(s.thin() ? s.structure->nodes.size() : s.nodes.size());
  }
  // Kernel ids in launch order.
  const std::vector<int>& kernelIds() const { return kernelOrder_; }
  const ts::KernelInfo* kernel(int kernelId) const;
  const ts::KernelRunEvent* kernelRun(int kernelId) const;
  // Index (schedule()) of the schedule that holds the kernel, or -1.
  int scheduleOfKernel(int kernelId) const;
  // Sum of the node counts of all schedules (an upper bound of the merged graph's size).
  int totalNodeCount() const { return totalNodes_; }
  // The most recent description of a graph node, or nullptr.
  const ts::GraphNodeInfo* node(uint64_t uid) const;

 signals:
  void cleared();
  void scheduleAdded(int scheduleIndex);
  void kernelRunAdded(int kernelId);

 private:
  struct KernelRef {
    int schedule = -1;
    int index = -1;  // into ScheduleEvent::kernels
  };
  // The lazy graph as the events so far leave it: pending uid -> creation order (index into order).
  struct LazyState {
    QHash<quint64, int> pending;
    std::vector<uint64_t> order;  // creation order; uids no longer pending are skipped
    void apply(const RunModel& model, const EventRef& event);
  };
  LazyState lazyNow_;  // after the last event: kept up to date, so the live graph costs no replay
  struct CreatedRef {
    int event = -1;     // into nodeEvents_
    int position = -1;  // in its batch
  };
  // Where node `uid` was made, or event -1. A batch's uids are consecutive, so created_ maps each batch's
  // first uid to its event (a map insert per batch: a hash insert per node cost 30 ms of the GUI's CPU
  // while transformer_tiny.py ran, beside the runner).
  CreatedRef createdRef(uint64_t uid) const;
  std::vector<EventRef> events_;
  std::vector<ts::NodesEvent> nodeEvents_;
  std::vector<ts::ScriptOutputEvent> outputs_;
  std::vector<ts::AutotuneTrialEvent> trials_;
  QHash<int, std::vector<int>> trialsOfKernel_;
  std::map<uint64_t, int> created_;  // first uid of a batch -> its index into nodeEvents_
  QHash<int, int> launchEvent_;  // kernel id -> index into events_
  QString scriptPath_;
  // Calls f(k, uid) for each node kernel k (its index in `schedule`) computes, kernel by kernel, thin or not.
  template <class F>
  static void forEachComputedUid(const ts::ScheduleEvent& schedule, F&& f);
  std::vector<ts::ScheduleEvent> schedules_;                  // as they arrived: thin or whole
  mutable std::vector<std::unique_ptr<const ts::ScheduleEvent>> instantiated_;  // of thin ones, when asked for
  std::vector<std::vector<int>> scheduleKernelIds_;
  std::vector<int> kernelOrder_;
  QHash<int, KernelRef> kernels_;
  QHash<int, ts::KernelRunEvent> runs_;
  // uid -> (schedule, index into ScheduleEvent::nodes), indexed when node() is first asked after new schedules
  // arrived (indexNodes): a hash insert per node of every schedule cost the GUI 20 ms of CPU while
  // transformer_tiny.py ran beside it, for a lookup the lazy graph makes only for the inputs it shows.
  mutable QHash<quint64, KernelRef> nodes_;
  mutable int nodesIndexed_ = 0;  // schedules_[0, nodesIndexed_) are in nodes_
  void indexNodes() const;
  int totalNodes_ = 0;
};

}  // namespace tsui
