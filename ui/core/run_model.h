// What one run of a script produced: its schedules and, per kernel, the launch report.
//
// This is the GUI's copy of the session's event stream (the engine's own data stays on the script
// thread). Panels read it; they never keep engine objects themselves. Kernel ids are session-wide,
// so they keep growing from run to run; the model maps them to rows in launch order.
#pragma once
#include <QHash>
#include <QObject>
#include <optional>
#include <vector>

#include "tensorscope/session.h"

namespace tsui {

class RunModel : public QObject {
  Q_OBJECT
 public:
  explicit RunModel(QObject* parent = nullptr) : QObject(parent) {}

  void clear();
  void addSchedule(ts::ScheduleEvent event);
  void addKernelRun(ts::KernelRunEvent event);

  const std::vector<ts::ScheduleEvent>& schedules() const { return schedules_; }
  // Kernel ids in launch order.
  const std::vector<int>& kernelIds() const { return kernelOrder_; }
  const ts::KernelInfo* kernel(int kernelId) const;
  const ts::KernelRunEvent* kernelRun(int kernelId) const;
  // Index into schedules() of the schedule that holds the kernel, or -1.
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
  std::vector<ts::ScheduleEvent> schedules_;
  std::vector<int> kernelOrder_;
  QHash<int, KernelRef> kernels_;
  QHash<int, ts::KernelRunEvent> runs_;
  QHash<quint64, KernelRef> nodes_;  // uid -> (schedule, index into ScheduleEvent::nodes)
  int totalNodes_ = 0;
};

}  // namespace tsui
