// BEAM search over a kernel's optimization plan (issue 14; the idea of tinygrad's BEAM=N, codegen/search.py):
// which amounts of the UPCAST actions (ir::OptPlan) make this kernel fastest on this device, found by
// compiling and timing candidates on the kernel's real buffers.
//
//   TENSORSCOPE_BEAM=N   (tensorscope-cli run --beam N) searches every kernel a run compiles, keeping the N
//                        fastest plans of each round; 0 or unset: the heuristics' default plan, no search.
//   <cache>/autotune.db  SQLite: the plan found for (device identity, the lowered kernel's IR), so a second run
//                        pays one lookup per kernel instead of the search.
//
// A round takes each plan of the beam and changes one action to 0, 2, 4, 8, 16 or 32; candidates whose
// generated source is the same as one already timed (an illegal amount is not applied, so it renders like
// "off") are not compiled again. Each is launched once untimed (first touch of the output, thread wake-up),
// then timed as the median of 3 launches (ms, the device's own timer); a candidate whose untimed launch takes
// over 4x the best so far is dropped, and one whose timed launch takes over 2x stops after it. A candidate that fails
// to compile or to run is skipped (its reason printed at DEBUG=2). DEBUG=1 prints one line per kernel searched. The search stops when a round improves
// the best by less than 1%, after 3 rounds, or when TENSORSCOPE_BEAM_SECONDS (default 10 s) per kernel is spent.
// The winner and the default are then timed once more side by side; the default stays unless the winner
// still beats it by more than 1%.
// Every device with a renderer is searched the same way (tested on C). Not yet: trial events in the recording,
// compiling candidates in parallel, the GPU actions (LOCAL, GROUP) that need local memory in the IR.
#pragma once
#include <vector>

#include "tensorscope/device.h"
#include "tensorscope/ir.h"

namespace ts {

// TENSORSCOPE_BEAM (read once): the beam width; 0 when unset or not a positive integer.
int beam_width();

// The fastest plan for `lowered` (a kernel straight from lowering, before the passes) on device `device_index`,
// timed on `buffers` (the kernel's buffers in ir::Kernel::globals order; the output's contents are overwritten).
// From the cache when this device searched the same IR before. The default plan when the device has no
// renderer (INTERP) or cannot be timed, or when nothing beats the default.
ir::OptPlan beam_search(const ir::Kernel& lowered, int device_index, const std::vector<Buffer*>& buffers);

}  // namespace ts
