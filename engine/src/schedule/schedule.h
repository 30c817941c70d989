// The kernelizer: cuts the part of the lazy graph a realize() needs into kernels (fusion), in launch
// order, and records why every kernel ends where it ends (the boundary reasons, shown in the GUI).
//
// Fusion rules (tinygrad's, written down):
//  1. Elementwise ops, movement ops and constants fuse into their consumer; movement ops become index
//     arithmetic, broadcasting is a zero stride.
//  2. A reduce fuses its elementwise producers (the loop body) and its consumers, as long as its output
//     is not broadcast to them: a reduce whose output is expanded ends a kernel ("reduce output is
//     expanded"), since fusing it would recompute the whole reduction once per broadcast element —
//     except when the broadcast runs along the trailing dims of rows (x - x.max(-1, keepdim=True)):
//     then the reduce fuses as a second reduction over the same rows, and loop-invariant code motion
//     computes it once per row. Softmax, log_softmax and layernorm are one kernel.
//  3. A node with several consumers (reads counted through movement ops: a reshape read twice reads its
//     source twice) is recomputed by each of them when that is cheap, and stored otherwise. The cost
//     model: recomputing a value read r times costs (r - 1) × its FLOPs more; storing it costs one write
//     and r reads of its bytes; it is stored when the FLOPs exceed kRecomputeFlopsPerByte × the bytes
//     (for float32 read twice: more than 16 ALU ops per element). A value with a reduce whose
//     consumers meet again in one kernel is not stored: in one loop body it is computed once (relu reads
//     x three times), and a row's reduce broadcast along the row is computed once per row (softmax
//     reads exp(x - max) in two loops), and so is a reduce its readers read only as one value per row
//     (logsumexp reads its row max in the loop of the sum of exponentials and again after it, to add it to the
//     sum's log: the kernel computes the max once per row, before the row's loops). But a value holding a
//     reduction per element (a matmul's output) read in two loops of one kernel is stored (the logits of a softmax).
//     An elementwise value with a transcendental op (EXP2, LOG2, SIN, SQRT: tens of instructions each)
//     that a consumer reads through a broadcast of kBroadcastRecomputeLimit or more (a matmul's operand:
//     each element is read once per output column) is stored too: the softmax gradient of a
//     cross-entropy feeds two matmuls in the backward, and was computed 128 times per element. So is
//     any elementwise value of kBroadcastPrologueOps ALU ops or more read through a broadcast of
//     kBroadcastPrologueMinReads or more when the cost model says so (a LayerNorm's output recomputed
//     inside a weight gradient, a convolution's output gradient recomputed once per kernel tap).
//     A value holding a matmul-like reduction (kTiledEpilogueMinReduce terms per element or more, at least
//     kTiledEpilogueMinOutputs elements) that a reduction reads is stored ((a @ b).sum(), lin(x).mean(axis=1)):
//     fused, the outer reduction's loop would compute its dot products one at a time, without the register tile.
//     A reduce read through a PAD that at least doubles it is stored: the gradient of chunk()/split()
//     adds each part's gradient padded to the whole, and fused, every element would run every part's
//     reduction loop with its loads masked off.
//     On the C device an elementwise value that combines two or more tensors of its size and that a contiguous()
//     copies transposed (a BatchNorm's backward copied channels-last for a convolution's weight gradient) is
//     stored from kTransposedCopyMinElements elements on: the copy then moves one tensor in 8x8 tiles.
//     Every such decision, stored or recomputed, is kept with its numbers (ScheduleItem::decisions, shown
//     as "fusion_decisions" in kernels.json and in the GUI's properties).
//  4. A realize()/numpy() target, contiguous() and a realized buffer are always kernel boundaries. A
//     contiguous() of a value that is in memory already, in its own shape (a realized buffer, or a value this
//     schedule stores for another rule), stores nothing: its readers read that buffer, as tinygrad's
//     contiguous() of a realized buffer is the buffer. Stored, it was a copy: a convolution stores its input
//     with x.contiguous(), and MobileNet's BatchNorm + ReLU outputs, stored anyway for their backward, were
//     copied eleven times a step (0.33 ms of its 3.9 ms of kernels).
//  5. A device copy (COPY) is a schedule item of its own; its source is stored on the source device.
//  6. Multi-output kernels (tinygrad's multi-output kernels; what PyTorch's foreach optimizers do by hand):
//     elementwise kernels on one device whose outputs have one loop shape and that read a common buffer, or
//     read at their own index a value another of them stores for realize(), or store at most
//     kMultiOutputSmallElements elements each (these whatever their shapes), are one kernel with several
//     outputs, in one loop over the shared shape: the common buffer is read once, a value read in place is computed once, and one launch
//     does the work of several (up to kMaxMultiOutputBuffers buffers, fewer where the device binds fewer:
//     DeviceProperties::max_kernel_buffers). An optimizer's step() stores a parameter and its state (Adam's
//     m, v and the parameter all read the gradient; the parameter reads m and v) in one kernel. Small kernels
//     of several shapes (the updates of a network's biases, each of its own size) join one group too: the
//     kernel loops over the largest one's axes and each output is stored where its own elements are
//     (Lowerer::run_ragged; split_index_set then gives each range of the loop its outputs, unmasked). On devices
//     without workgroups (C, INTERP) a kernel with a reduce heads such a group too, joined only by kernels
//     that read its output at their own index: SGD's weight gradient with its momentum update stores the new
//     buffer b and, from b still in registers, the parameter p - lr·b (one launch per parameter). No kernel
//     launched between the merged ones may read what the earlier ones store (the merged kernel runs where the
//     last of them ran), and a value stored for contiguous() keeps its kernel boundary. A value that was to be
//     stored only for kernels that all joined the one computing it (fc2's input gradient, read by the GELU
//     backward's two products) is used there and not stored, unless realize() asked for it.
//  7. Launch order (a list schedule over the kernels' data dependences, after the merges of rule 6): of the
//     kernels whose inputs are all stored, the next to launch is the one whose latest input was stored
//     last, so that it reads it from the cache; among those, first one whose outputs no kernel of this
//     schedule reads (an optimizer's update of a parameter); then the order of the topological sort. But the
//     other readers of the buffer the last launched kernel waited for go before the kernels that wait for
//     that one (a layer's bias and weight gradients read its output gradient before the backward moves on to
//     the layer below). A kernel that reads only realized buffers runs when no other is ready, except a
//     small one that two or more kernels wait for (Adam's bias corrections), which runs first; an update that a
//     jit replay may write over its parameter waits for the other kernels that read the old value. The graph's
//     depth-first order launched an optimizer's updates of the last layers after the whole backward pass
//     (their parameters come last in its list), when the activations they read had left the caches:
//     Caffe's LeNet's fc2 weight gradient with its SGD update read its 128 kB input from memory after 5 MB
//     of convolution gradients (0.03-0.04 ms, against 0.01 ms in cache). Now each layer's update runs as
//     backpropagation reaches it, as soon as its output gradient exists.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "tensorscope/session.h"

namespace ts {

// A byte stored and read back is worth this many FLOPs of recomputation: with it, a float32 value read
// twice is stored when it holds more than 16 ALU ops per element ((2 - 1) × 16 = 4/3 × 4 bytes × 3).
constexpr double kRecomputeFlopsPerByte = 4.0 / 3.0;
constexpr int kBroadcastRecomputeLimit = 8;  // reads per element above which an EXP2/LOG2/SIN/SQRT value is stored
// An elementwise value of at least kBroadcastPrologueOps ALU ops that a consumer reads through a broadcast is
// stored when the cost model says recomputing costs more (a matmul operand's prologue: x̂·γ + β read once per
// output column; a convolution's output gradient read once per kernel tap)
constexpr int kBroadcastPrologueOps = 4;
// ... and read through a broadcast of at least this many (a 3x3 kernel's taps: 9). Below, the extra kernel's
// launch costs more than it saves: a bitonic sort's stages read their predecessor through a broadcast of 2,
// and storing each would double the launches of a sort.
constexpr int kBroadcastPrologueMinReads = 8;
// On the C device, a matmul-like reduction (at least kTiledEpilogueMinReduce terms per output, at least
// kTiledEpilogueMinOutputs outputs: it gets the register tile) whose elementwise epilogue has an EXP2, LOG2
// or SIN (a Linear followed by GELU) is stored, and the epilogue runs in its own kernel: in the tiled kernel
// the epilogue is straight-line code per accumulator that the compiler leaves scalar (fc1 + GELU of
// transformer_tiny: 0.25 ms fused, 0.04 + 0.04 ms apart).
constexpr int kTiledEpilogueMinReduce = 16;
constexpr int kTiledEpilogueMinOutputs = 1024;
// On the C device, an elementwise value of at least this many elements that combines two or more tensors of its
// size (a BatchNorm's backward: the output gradient and the input) and that a contiguous() copies transposed
// (NCHW -> NHWC, for a convolution's weight gradient) is stored first, so that the copy moves one tensor in 8x8
// tiles: fused, it read every input across its rows, element by element (MobileNet's 32 x 64 x 8 x 8: 0.38 ->
// 0.22 ms with the other reader of the value, 0.23 -> 0.18 ms without; 32 x 128 x 4 x 4: 0.19 -> 0.12 ms; 64 x 8 x
// 8 x 8, 32768 elements, 0.046 -> 0.053 ms: below this, the extra launch costs more).
constexpr int64_t kTransposedCopyMinElements = 65536;

// Kernels of one shape of at most this many elements merge even without a buffer in common (SGD's updates
// of a network's biases and BatchNorm parameters): on the C device a launch costs about 0.2 µs in a jitted
// replay and about 3 µs of host time per kernel in an eager step (graph, cached schedule, launch: a chain of 50
// tiny kernels, 1 thread, measured 2026-11-27), the time of moving a few thousand floats.
constexpr int64_t kMultiOutputSmallElements = 4096;
// ...except a transposing copy of at least this many elements (a classifier head's Wᵀ, (10, 84) -> (84, 16)):
// in the loop of another shape its indices come from divisions of the flat index and stay scalar, which costs
// about what a launch saves from here on (LeNet-5's pair: 7 µs merged, about 1 µs apart); apart, it gets
// TRANSPOSE_TILE. Smaller ones (a (3, 5) bias's transpose) still merge.
constexpr int64_t kMultiOutputOwnLoopTransposeElements = 1024;
// A multi-output kernel takes at most this many buffers, or fewer where the device binds fewer
// (DeviceProperties::max_kernel_buffers): one kernel storing 1000 small tensors compiled for 5.6 s, while
// groups of this size share one compiled program.
constexpr uint32_t kMaxMultiOutputBuffers = 32;
// A kernel looks for a multi-output group to join among the most recent this many groups of its device and
// loop shape: a schedule of thousands of kernels of one shape is grouped in linear time.
constexpr size_t kMultiOutputLookBack = 32;

struct ScheduleItem {
  std::string name;                  // E_4_4 (elementwise) or r_4_4 (with a reduce), after tinygrad
  std::vector<NodeId> outputs;       // the nodes whose values the kernel stores (several: a multi-output kernel, of one
                                     // shape, or small ones of several: rule 6)
  std::vector<NodeId> inputs;        // buffer-like nodes it reads (realized, or stored by an earlier kernel)
  std::vector<NodeId> fused;         // nodes computed inside the kernel, topological, output last
  std::vector<std::string> reasons;  // boundary reasons
  // the cost model's decisions: about the output (stored) and about fused values others read too
  std::vector<FusionDecision> decisions;  // node_uid holds the node's uid
  bool is_copy = false;              // a device-to-device copy of inputs[0], no kernel code
};

struct Schedule {
  std::vector<ScheduleItem> items;   // launch order
  std::vector<NodeId> nodes;         // every node the schedule touches (topological), inputs included
};

// `targets` must be on one device. Nodes already realized produce no kernel.
Schedule create_schedule(const std::vector<NodeId>& targets);

// The node whose shape the kernel of `item` loops over to store its output `out`: `out` without the reshapes
// on top that are not inputs (a reshape keeps the row-major order, so the flat positions are the same).
NodeId loop_root(const Graph& g, const ScheduleItem& item, NodeId out);
// The shapes the outputs of `item` are computed in (their loop roots): one for a kernel of one loop shape, several
// for a multi-output kernel of small kernels of several shapes (rule 6), which loops over the largest one's elements.
std::set<Shape> loop_shapes(const Graph& g, const ScheduleItem& item);

}  // namespace ts
