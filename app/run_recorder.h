// RunRecorder: a session observer that keeps what a script run produced — the schedules (graph
// nodes and kernels) and each kernel's IR and sources — for the CLI's manifest and the graph SVG.
// It is fed live (`tensorscope-cli run`) or from a recording's events (`tensorscope-cli export`).
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
  // A ScheduleEvent adds its kernels; a KernelRunEvent fills in the run of its kernel. A jit replay
  // (no schedule) adds a kernel of its own: the captured kernel's description (nodes, buffers, boundary
  // reasons, schedule) under the replay's id when the captured launch was seen, else just its name.
  void on_event(uint64_t seq, const Event& event) override;

  std::vector<ScheduleEvent> schedules;
  std::vector<RecordedKernel> kernels;  // launch order
  std::map<int, size_t> kernel_index;   // kernel id → index in kernels
  std::map<int, std::vector<AutotuneTrialEvent>> trials;  // kernel id → its autotune trials, in order
};

// Writes kernels.json and, beside it, every kernel's IR snapshots and sources into `dir`.
// The schema is documented in the README ("kernels.json"). Each distinct listing is written once: a
// kernel whose IR listing or source is identical to one already written names the existing file (a
// training loop of 1000 steps writes the files of one step). A replayed launch (KernelRunEvent::replayed,
// no code of its own) lists the IR and sources of the captured launch it replays, when that is known,
// and carries "replay_of": the captured launch's id.
void write_manifest(const RunRecorder& rec, const std::string& dir, const std::string& script, const std::string& device);

}  // namespace ts
