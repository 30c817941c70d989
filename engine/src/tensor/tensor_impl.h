// Tensor internals: the handle's state and the primitive-op layer that autograd records.
//
// Autograd follows (pre-2024) tinygrad's design: every primitive op that has an input requiring grad
// records a Function (the op, its parents, what the backward rule needs), and backward() walks these
// Functions in reverse topological order. Gradients are built from the same primitives, so they are
// lazy graphs too. Because autograd history is kept apart from the lazy graph, a realized node can
// drop its sources without losing the history.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "graph/graph.h"
#include "tensor/recycling_allocator.h"
#include "tensorscope/tensor.h"

namespace ts {

// A training step records a Function for most of its nodes (thousands a step), so the short lists live inside
// the Function (Boost's small_vector: no allocation of their own up to the inline capacity).
template <typename T, size_t N>
using SmallVector = boost::container::small_vector<T, N>;

struct Function {
  Op op;
  SmallVector<std::shared_ptr<TensorImpl>, 3> parents;  // the op's tensor inputs, in operand order
  SmallVector<NodeRef, 4> saved;                        // values the backward rule needs (inputs, then the output)
  std::vector<int64_t> arg;                             // the op's argument (axes, order, pads, ...)
  Shape in_shape;                                       // shape of the first input (movement and reduce ops)
  // For a composite op with its own backward (see with_custom_backward): input grads from out grad.
  std::function<std::vector<Tensor>(const Tensor&)> custom;
  // Set by a backward() without retain_graph, which cleared parents, saved and custom (PyTorch frees its
  // graph the same way): a later backward() through this Function throws instead of reading them.
  bool freed = false;
};

struct TensorImpl {
  NodeRef node;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<Function> ctx;  // null for leaves
  // Scratch for Tensor::backward while it runs: this tensor's position in its walk of the history (-1
  // outside a backward). Flat arrays indexed by it replace hash containers keyed by the tensor.
  int32_t backward_slot = -1;
};

// A tensor wrapping an existing node, with no autograd history.
Tensor tensor_from_node(NodeId id);
NodeId node_of(const Tensor& t);
const Node& node(const Tensor& t);

// The primitive layer: creates the node, folds movement ops on constants, and records autograd.
// `srcs`: 1 to 3 operands (std::invalid_argument otherwise); `device` (a registry index) overrides the
// sources' device: only Copy uses it.
Tensor primitive(Op op, std::span<const Tensor> srcs, const Shape& shape, DType dtype,
                 const std::vector<int64_t>& arg = {}, int device = -1);
inline Tensor primitive(Op op, const Tensor& src, const Shape& shape, DType dtype, const std::vector<int64_t>& arg = {},
                        int device = -1) {
  return primitive(op, std::span<const Tensor>(&src, 1), shape, dtype, arg, device);
}

// Runs `forward` (a composition of primitives) without recording autograd, then records one Function
// whose backward is `backward(out_grad) -> grads of inputs`. Used where the chain rule through the
// composition is numerically unstable (sigmoid: 0·inf in the saturated tail), as PyTorch's fused ops do.
Tensor with_custom_backward(const std::vector<Tensor>& inputs, const std::function<Tensor()>& forward,
                            std::function<std::vector<Tensor>(const Tensor& out, const Tensor& out_grad)> backward);

// A weight gradient that is a matmul, noted by matmul's backward while backward() runs (no-op otherwise):
// dw = aᵀ @ b with a (m, k), b (m, n) and dw (k, n); `stored_transposed` when it is computed as (bᵀ @ a)ᵀ
// (stored in the layout of the weight it is the gradient of, see Tensor::matmul). backward() sums the
// gradients of a tensor read by several matmuls (an RNN's recurrent weight, once per time step) as one
// matmul over the concatenated rows of their a and b (autograd.cpp, sum_gradients).
void note_matmul_gradient(const Tensor& dw, const Tensor& a, const Tensor& b, bool stored_transposed);
// aᵀ @ b for a (m, k), b (m, n): a weight's gradient (k, n), noted as above; computed as (bᵀ @ a)ᵀ when
// `stored_transposed`, and then stored (n, k) when it is large (ops.cpp, kWeightGradStoreMinBytes).
Tensor weight_gradient(const Tensor& a, const Tensor& b, bool stored_transposed);

// contiguous() shares the copies of a view of a realized buffer made since the last realize (ops.cpp); a
// realize forgets them (the buffer may change after it: an optimizer's update, copy_from_host).
void forget_view_copies();

// Gradients of the primitive op recorded in `fn` given the output's gradient; one entry per parent
// (undefined where the parent needs none). Defined in autograd.cpp.
using InputGrads = SmallVector<Tensor, 3>;
InputGrads backward_rule(const Function& fn, const Tensor& out_grad);

}  // namespace ts
