// The DEBUG text printer: the text fallback of the GUI, one more observer of the session.
//   DEBUG=1  one line per kernel launch: name, device, time, compile-cache hit
//   DEBUG=2  + each schedule: kernels with their fused ops and boundary reasons
//   DEBUG=3  + the IR of each kernel
//   DEBUG=4  + the generated source of each kernel
//   DEBUG=5  + every graph node of each schedule
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tensorscope/session.h"

namespace ts {
namespace {

class DebugPrinter : public SessionObserver {
 public:
  explicit DebugPrinter(int level) : level_(level) {}
  void on_event(uint64_t, const Event& event) override {
    if (auto* thin = std::get_if<ScheduleEvent>(&event); thin && level_ >= 2) {
      const ScheduleEvent full = full_schedule(*thin);
      const ScheduleEvent* s = &full;
      std::fprintf(stderr, "*** schedule %d: %zu kernel(s)\n", s->schedule_id, s->kernels.size());
      if (level_ >= 5)
        for (const GraphNodeInfo& n : s->nodes) {
          std::string shape, srcs;
          for (int64_t d : n.shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
          for (uint64_t u : n.srcs) srcs += " #" + std::to_string(u);
          std::fprintf(stderr, "  #%-5llu %-10s (%s) %s %s <-%s  [kernel %d]\n", static_cast<unsigned long long>(n.uid),
                       n.op.c_str(), shape.c_str(), n.dtype.c_str(), n.arg.c_str(), srcs.c_str(), n.kernel);
        }
      for (const KernelInfo& k : s->kernels) {
        std::fprintf(stderr, "  kernel %d %s: %zu fused op(s):", k.id, k.name.c_str(), k.ops.size());
        for (auto& op : k.ops) std::fprintf(stderr, " %s", op.c_str());
        std::fprintf(stderr, "\n");
        if (k.flops >= 0)
          std::fprintf(stderr, "    work: %.6g FLOPs, %.6g bytes (%.3g FLOP/byte)\n", k.flops, k.bytes,
                       k.bytes > 0 ? k.flops / k.bytes : 0.0);
        for (auto& r : k.boundary_reasons) std::fprintf(stderr, "    boundary: %s\n", r.c_str());
        for (const FusionDecision& d : k.fusion_decisions)
          std::fprintf(stderr, "    %s %s #%llu: %s\n", d.stored ? "stored" : "recomputed", d.op.c_str(),
                       static_cast<unsigned long long>(d.node_uid), d.reason.c_str());
      }
    } else if (auto* k = std::get_if<KernelRunEvent>(&event)) {
      std::string note = k->replayed ? "  (jit replay of kernel " + std::to_string(k->replay_of) + ")"
                         : k->compile_cache_hit ? "" : "  (compiled)";
      std::fprintf(stderr, "*** %-8s kernel %4d %-24s %10.3f ms%s\n", k->device.c_str(), k->kernel_id, k->name.c_str(),
                   k->time_ms, note.c_str());
      if (!k->code) return;
      if (level_ >= 3 && !k->code->ir.empty()) std::fprintf(stderr, "%s", k->code->ir.back().ir().c_str());
      if (level_ >= 4)
        if (const SourceListing* c = k->code->listing("C")) std::fprintf(stderr, "%s\n", c->code.c_str());
    }
  }

 private:
  int level_;
};

struct Install {
  Install() {
    const char* env = std::getenv("DEBUG");
    int level = env ? std::atoi(env) : 0;
    if (level > 0) {
      static DebugPrinter printer(level);
      Session::get().subscribe(&printer);
    }
  }
} install;

}  // namespace
}  // namespace ts
