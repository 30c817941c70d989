// The optimizers' updates of every parameter, built in one call (as PyTorch's `_foreach_` optimizers and
// tinygrad's optimizer step): the same lazy ops, in the same order, as the formulas in
// engine/python/tensorscope/nn/optim.py, which calls these. Nothing is computed here: each parameter and each
// state tensor gets assign()ed its new (lazy) value, and the caller realizes them together (Optimizer.step).
// Built one Python call per op, the graph of an Adam step over six tensors cost ~0.2 ms of host time, about as
// much as its kernels for a small model (an MLP 784-300-100-10 step: 1.9 ms).
//
// Shapes: params[i], grads[i] and every state tensor [i] have the same shape and dtype (float32 or float16);
// b1_t, b2_t and lr are 0-d float32 on the parameters' device. The learning rate is a tensor, not a constant
// baked into the kernels: a learning-rate schedule writes each new value into it in place
// (Tensor::copy_from_host), and the step keeps its kernels (as a constant, every new value compiled the
// update kernels again: an AdamW step of a 784-128-10 MLP took 156 ms under a cosine schedule, against
// 1-2 ms; tinygrad keeps lr as a Tensor too). Next to a float16 parameter it is cast to float16. The other
// scalars follow the engine's rule for a python float next to a float tensor (Tensor::const_like:
// float16-rounded next to float16, as torch 1.13). std::invalid_argument when the list lengths differ or lr
// is not 0-d (and from the ops, when shapes do not match).
#pragma once
#include <vector>

#include "tensorscope/tensor.h"

namespace ts::optim {

// SGD with momentum, Nesterov momentum and weight decay (torch.optim.SGD with dampening 0, tinygrad's SGD):
// per parameter p with gradient g,
//   g = g + weight_decay · p              (when weight_decay != 0)
//   b = momentum · b + g                  (when momentum != 0; b starts at 0)
//   g = g + momentum · b if nesterov else b
//   p = p - lr · g
// momentum_buffers: one per parameter when momentum != 0, else empty.
void sgd_update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& momentum_buffers, const Tensor& lr, double momentum,
                double weight_decay, bool nesterov);

// LAMB (You et al., 2019, https://arxiv.org/abs/1904.00962) and, with adam = true, Adam / AdamW (Kingma & Ba,
// 2015; Loshchilov & Hutter, 2019: torch.optim.Adam / AdamW's numerics), as tinygrad's LAMB:
//   b1_t = b1_t · b1, b2_t = b2_t · b2     (the powers b^t, kept on the device: a replayed jit step stays right)
//   m = b1 · m + (1 - b1) · g
//   v = b2 · v + (1 - b2) · g · g
//   u = (m / (1 - b1_t)) / (sqrt(v / (1 - b2_t)) + eps) + weight_decay · p
//   r = ||p|| / ||u||                      (LAMB's trust ratio; 1 for Adam, or when either norm is 0)
//   p = p - lr · r · u
void lamb_update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                 const std::vector<Tensor>& v, const Tensor& b1_t, const Tensor& b2_t, const Tensor& lr, double b1,
                 double b2, double eps, double weight_decay, bool adam);

}  // namespace ts::optim
