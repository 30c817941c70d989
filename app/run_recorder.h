// RunRecorder: a session observer that keeps what a script run produced — the schedules (graph
// nodes and kernels) and each kernel's IR and sources — for the CLI's manifest and the graph SVG.
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tensorscope/session.h"

namespace ts {

struct RecordedKernel {
  KernelInfo info;
  int schedule_id = 0;
  KernelRunEvent run;   // empty name when the kernel never ran (zero-size output)
};

class RunRecorder : public SessionObserver {
 public:
  void on_event(uint64_t seq, const Event& event) override;

  std::vector<ScheduleEvent> schedules;
  std::vector<RecordedKernel> kernels;  // launch order
  std::map<int, size_t> kernel_index;   // kernel id → index in kernels
};

// Writes kernels.json and, beside it, every kernel's IR snapshots and sources into `dir`.
// The schema is documented in the README ("kernels.json").
void write_manifest(const RunRecorder& rec, const std::string& dir, const std::string& script, const std::string& device);

}  // namespace ts
