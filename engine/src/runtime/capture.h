// What a jit capture records while the captured function runs (the engine side of tinygrad's TinyJit,
// see tensorscope/jit.h): every kernel launch with its buffers, every assign() target (the state the
// function updates), and the things a replay cannot repeat (host reads, random draws).
//
// The jit installs one Capture on the script thread for the duration of one call; realize() and the
// tensor layer report to it. With no capture installed, each hook costs one branch.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensorscope/device.h"

namespace ts {

struct TensorImpl;

// One launch as realize() made it: the compiled program and the buffers it ran on.
struct LaunchRecord {
  std::string name;                              // kernel name (E_4, r_128_10, copy_...)
  int device = 0;                                // registry index of the device that ran it
  int kernel_id = -1;                            // session kernel number (KernelInfo::id)
  bool is_copy = false;                          // a device copy of buffers[1] into buffers[0]
  std::shared_ptr<Program> program;              // null for copies
  std::vector<std::shared_ptr<Buffer>> buffers;  // outputs first, then the inputs (Program::launch order)
  int outputs = 1;                               // how many of `buffers` are outputs (a multi-output kernel: more)
  // (output, input) positions in `buffers` whose output may be written into the input's buffer: the kernel
  // reads each element of that input only before it stores the same element of the output (in_place_pairs,
  // realize.h), so a replay may reuse the input's buffer when nothing else reads it (jit.cpp)
  std::vector<std::pair<int, int>> in_place;
};

// A tensor the function assign()ed to, and the buffer it held before the first assign (a lazy old value
// is realized first, outside the capture): replays read the tensor's current buffer where the capture
// read `before`.
struct AssignRecord {
  std::shared_ptr<TensorImpl> target;
  std::shared_ptr<Buffer> before;
};

struct Capture {
  std::vector<LaunchRecord> launches;
  std::vector<AssignRecord> assigns;
  int host_reads = 0;    // .numpy()/.item() during the capture: values a replay would not read again
  int host_writes = 0;   // Tensor::copy_from_host during the capture (an optimizer's lr set inside the function)
  int random_draws = 0;  // Tensor::rand & co. during the capture: numbers a replay would repeat
};

// The capture installed on this thread, or null.
Capture* active_capture();
void set_active_capture(Capture* capture);

// Hooks for the tensor layer (no-ops without a capture).
void capture_note_assign(const std::shared_ptr<TensorImpl>& target);
void capture_note_host_read();
void capture_note_host_write();
void capture_note_random();

}  // namespace ts
