// BEAM search over a kernel's optimization plan (issue 14; the idea of tinygrad's BEAM=N, codegen/search.py):
// which amounts of the UPCAST actions (ir::OptPlan) make this kernel fastest on this device, found by
// compiling and timing candidates on the kernel's real buffers.
//
//   TENSORSCOPE_BEAM=N   (tensorscope-cli run --beam N) searches every kernel a run compiles, keeping the N
//                        fastest plans of each round; 0 or unset: the heuristics' default plan, no search.
//   <cache>/autotune.db  SQLite: the plan found for (device identity, the lowered kernel's IR), so a second run
//                        pays one lookup per kernel instead of the search.
//
// A round takes each plan of the beam and changes one action: an UPCAST to 0, 2, 4, 8, 16 or 32 or to another
// amount up to 32 that divides one of the kernel's loops of its kind (14 for a row of 28), PADTO to 4, 8 or 16,
// and on C THREADS to 1, 2, … the thread pool's size. Candidates whose generated source and applied
// actions are the same as one already timed (an illegal amount is not applied, so it renders like "off") are
// not compiled again; the applied actions are part of that key because a launch action (THREADS) changes the
// program but not its source. A round's new candidates are compiled TENSORSCOPE_BEAM_JOBS at a time (default
// 2) on devices whose compiler may run on several threads (C), then timed one by one on the otherwise idle
// device: a launch untimed (first touch of the output, thread wake-up), then the median of 3 launches (ms, the
// device's own timer). A candidate whose untimed launch takes over 4x the best so far is dropped, and one whose
// timed launch takes over 2x stops after it (both only for launches over 0.2 ms: a microsecond kernel's first
// launch is slow for other reasons, and timing it fully costs little). The search stops when a round improves the best by less than 1%,
// after 3 rounds, or when TENSORSCOPE_BEAM_SECONDS (default 10 s) per kernel is spent (a batch of candidates
// is not started when the previous batch's time would take the search past it). The winner and the
// default are then timed once more side by side; the default stays unless the winner still beats it by more
// than 1%.
//
// Per-candidate timeout, TENSORSCOPE_BEAM_TIMEOUT_MS (default 2000 ms), bounds two things separately:
//   - the compile: the C compiler (a subprocess) is stopped at the limit; a compiler that runs in-process
//     (PoCL, glslang, NVRTC) cannot be stopped, so such a candidate is dropped after its compile returns;
//   - each launch: a running kernel cannot be interrupted (an in-process C function, a queued GPU kernel),
//     so a candidate is dropped as soon as one of its launches returns later than the limit, and is not
//     launched again. A launch can therefore take longer than the limit, once.
// A candidate past either limit is a trial with outcome timeout. When the default plan itself times out, the
// search stops and the kernel keeps it.
//
// Every candidate is an AutotuneTrialEvent (tensorscope/session.h) with its outcome and reason, emitted before
// the kernel's launch; DEBUG=1 prints one line per kernel searched, DEBUG=2 one per trial.
//
// Narrowing and testing the search:
//   TENSORSCOPE_BEAM_KERNEL=NAME[,NAME...]  search only kernels of these names or lowered-IR hashes
//                                           (AutotuneTrialEvent::ir_hash); the debugger's Autotune on a kernel
//   TENSORSCOPE_BEAM_FRESH=1                do not read plans from the cache (search again; the result is stored)
//   TENSORSCOPE_BEAM_FAIL_COMPILE=1         test hook: every candidate but the default gets a line that its
//                                           compiler rejects (#error), so each is a failed-compile trial
// Every device with a renderer is searched the same way (tested on C). Not yet: the GPU actions (LOCAL,
// GROUP) that need local memory in the IR.
#pragma once
#include <string>
#include <vector>

#include "tensorscope/device.h"
#include "tensorscope/ir.h"

namespace ts {

// TENSORSCOPE_BEAM (read once): the beam width; 0 when unset or not a positive integer.
int beam_width();

struct BeamResult {
  ir::OptPlan plan;  // the plan to run the kernel with (the default plan when nothing beats it)
  std::string from;  // "BEAM search", "autotune cache"; "" when the kernel was not searched
};

// The fastest plan for `lowered` (a kernel straight from lowering, before the passes) on device `device_index`,
// timed on `buffers` (the kernel's buffers in ir::Kernel::globals order; the output's contents are overwritten).
// From the cache when this device searched the same IR before. The default plan, not searched, when the device
// has no renderer (INTERP) or TENSORSCOPE_BEAM_KERNEL leaves the kernel out. `kernel_id` (KernelInfo::id) names
// the kernel in the trial events. Throws DeviceLostError when the device is lost during the search; every other
// failure of a candidate is a trial outcome.
BeamResult beam_search(const ir::Kernel& lowered, int device_index, const std::vector<Buffer*>& buffers,
                       int kernel_id = -1);

}  // namespace ts
