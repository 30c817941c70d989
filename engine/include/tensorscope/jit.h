// Capture and replay of a function's kernel launches: the engine side of `@tensorscope.jit`, with the
// semantics of tinygrad's TinyJit (tinygrad/engine/jit.py).
//
// CapturedJit::capture() runs a function once while recording every kernel it launches, with the
// buffers each launch read and wrote. replay() then runs exactly those kernels again on new inputs,
// without building the graph, scheduling, lowering or compiling: the function itself is not called.
//
// What a replay binds, for each buffer the captured launches touched:
//  - an input's buffer (the `inputs` of the capture, realized first) → the same input of the replay;
//  - the buffer a tensor held before the function assign()ed to it (parameters, optimizer state,
//    BatchNorm statistics) → that tensor's buffer at replay time; after the replay the tensor holds the
//    value the replayed kernels computed for it, as it would after a normal call;
//  - a buffer written by a captured launch → a fresh buffer (from the pool) in every replay, so the
//    outputs of one replay are never overwritten by the next; except a state's new value computed
//    elementwise from its old one, written into the old value's buffer when nothing else holds that value
//    (in_place_output_count below);
//  - any other buffer (tensors the function reads but does not assign, constants built inside it) →
//    the very buffer the capture saw: its value is baked into the capture.
//
// Limits (as tinygrad's): shapes, dtypes and devices of the inputs are fixed at capture (a replay with
// others throws std::invalid_argument); python control flow and constants inside the function are
// frozen; tensors the function reads but does not assign are bound by buffer, so replacing such a
// tensor outside the function (e.g. loading a state dict into it) is not seen by replays; attributes
// set inside the function (a parameter's .grad) keep their captured value. Host reads inside the
// function (.numpy(), .item()) and random draws (rand, randn, dropout) cannot be replayed: capture()
// throws std::runtime_error when the function did either.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensorscope/tensor.h"

namespace ts {

struct CapturedJitPlan;

class CapturedJit {
 public:
  // Realizes `inputs`, runs `fn` while recording its launches, then realizes `fn`'s outputs and every
  // tensor it assign()ed to (still recording) and builds the replay plan. The outputs of this call
  // are stored in `*outputs`. Throws what `fn` throws, std::invalid_argument when an input is given
  // twice, std::runtime_error for a host read or a random draw inside `fn`, or when a capture is
  // already running on this thread.
  static CapturedJit capture(const std::vector<Tensor>& inputs, const std::function<std::vector<Tensor>()>& fn,
                             std::vector<Tensor>* outputs);

  // Runs the captured kernels on `inputs` (same count, shapes, dtypes and devices as at capture, else
  // std::invalid_argument naming the first difference), updates the assigned tensors and returns
  // fresh output tensors (realized). Each replayed launch is a KernelRunEvent with `replayed` set.
  std::vector<Tensor> replay(const std::vector<Tensor>& inputs) const;

  int64_t launch_count() const;          // launches one replay makes: kernels and device copies
  int64_t input_count() const;           // inputs a replay binds
  int64_t state_count() const;           // tensors a replay updates (assign targets)
  int64_t fresh_buffer_count() const;    // buffers a replay allocates (from the pool)
  int64_t baked_buffer_count() const;    // buffers bound as captured (read, never written)
  // outputs a replay may write into the buffer of the state value they replace (an optimizer's update,
  // elementwise): it does when nothing else holds that old value (GlobalCounters::in_place_outputs counts them)
  int64_t in_place_output_count() const;
  // "(2, 3) float32 on C" for each input, in order (for error messages).
  std::vector<std::string> input_signature() const;

 private:
  std::shared_ptr<const CapturedJitPlan> plan_;
};

}  // namespace ts
