// Reverse-mode autograd over the primitive ops. Each rule builds the input gradients from the output
// gradient with the same primitives, so gradients are lazy graphs, fused and realized like any other.
// Conventions at kinks follow PyTorch: ties in max share the gradient equally; relu (a WHERE) gives 0 at 0.
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "tensor/tensor_impl.h"
#include "tensorscope/device.h"

namespace ts {

namespace {
Tensor saved(const Function& fn, size_t i) { return tensor_from_node(fn.saved[i].id()); }

// The weight gradients noted by note_matmul_gradient while a backward() runs, by the node of the gradient
struct MatmulGradient {
  Tensor a, b;  // dw = aᵀ @ b
  bool stored_transposed = false;
  Tensor dw;    // the gradient itself, held: its node's id is not given to another node while the backward runs
};
thread_local std::map<NodeId, MatmulGradient>* matmul_gradients = nullptr;
// The most matmul gradients sum_gradients gathers into one matmul (split_index_set's kMaxRanges)
constexpr size_t kMaxGatheredParts = 32;
// The most other gradients it adds in one kernel when there are more than kMaxGatheredParts: a part computed in
// the kernel (a GRU step's gate gradients, three slices of their own) makes split_index_set's copies larger,
// and at 32 of them they exceeded its limit (kMaxUnrolledInsts): unsplit, 7.3 ms for a (32, 60, 300) sum
constexpr size_t kMaxSummedParts = 16;
// ... for tensors of more elements than this (the kernelizer's small-kernel size, schedule.h)
constexpr int64_t kGroupedSumMinElements = 4096;

MatmulGradient* matmul_gradient(const Tensor& dw) {
  if (!matmul_gradients) return nullptr;
  auto it = matmul_gradients->find(node_of(dw));
  return it == matmul_gradients->end() ? nullptr : &it->second;
}

// The sum of the gradients `parts` that reach one tensor, in the order they arrived. Those that are
// matmuls aᵢᵀ @ bᵢ of one shape (note_matmul_gradient), two or more, are summed as one matmul over their
// rows concatenated, (a₀; a₁; ...)ᵀ @ (b₀; b₁; ...): the gradient of a weight that T matmuls of m rows read
// (an RNN's recurrent weight, once per time step) is one matmul of T·m rows, which gets the register tile,
// where T reductions of m terms each, added up, were fused into one kernel of T reduce blocks that the
// register tile does not take (a GRU's recurrent weight, 20 steps of 32 rows: 2.4 ms at 16 GFLOP/s). PyTorch
// adds T separate GEMMs' results; the values agree to rounding (the terms are added in another order).
Tensor sum_gradients(std::span<const Tensor> parts) {
  if (parts.size() == 1) return parts[0];  // most tensors: one gradient, nothing to sum
  std::vector<const MatmulGradient*> matmuls;  // the parts that join the first matmul part's gather, in order
  std::vector<bool> gathered(parts.size(), false);
  for (size_t i = 0; i < parts.size(); i++) {
    const MatmulGradient* m = matmul_gradient(parts[i]);
    if (!m) continue;
    const MatmulGradient* first = matmuls.empty() ? m : matmuls[0];
    if (m->stored_transposed == first->stored_transposed && m->a.shape()[1] == first->a.shape()[1] &&
        m->b.shape()[1] == first->b.shape()[1] && m->a.dtype() == first->a.dtype() &&
        m->b.dtype() == first->b.dtype() && m->a.device() == first->a.device()) {
      matmuls.push_back(m);
      gathered[i] = true;
    }
  }
  if (matmuls.size() < 2) gathered.assign(parts.size(), false);  // one alone is added with the others
  Tensor sum;
  if (matmuls.size() > 1) {
    const bool transposed = matmuls[0]->stored_transposed;
    // at most kMaxGatheredParts a matmul: the copies that gather more would not be split into a loop a part
    // (split_index_set's limit) and each element would read every part through masks, T² work (a GRU over 60
    // steps: 18 ms a copy). The groups' products are stored (contiguous()) and added.
    const size_t groups = (matmuls.size() + kMaxGatheredParts - 1) / kMaxGatheredParts;
    for (size_t from = 0; from < matmuls.size(); from += kMaxGatheredParts) {
      const size_t to = std::min(matmuls.size(), from + kMaxGatheredParts);
      std::vector<Tensor> as, bs;
      bool same_rows = true;
      for (size_t j = from; j < to; j++) {
        as.push_back(matmuls[j]->a);
        bs.push_back(matmuls[j]->b);
        same_rows = same_rows && as.back().shape()[0] == as[0].shape()[0];
      }
      // Gathered into one buffer first (contiguous()): read through the concatenation, the matmul's packing of
      // its operand into panels chose the part by a division of its row index, which split_index_set cannot
      // split, and every element read all T parts through masks (a GRU's 20 steps: 1.3 ms to pack (640, 100)).
      // The rows in any order, the same in a and b: each row's parts side by side, (m, T, k), when they have m
      // rows each, so that the copy's loop over the parts lies inside the loop over the rows and is split into
      // one loop a part; concatenated (T·m, k), the part would be chosen by the outermost loop, which the C
      // device's threads divide and which is not split (a (640, 300) copy: 1.4 ms).
      auto gather = [&](const std::vector<Tensor>& ts) {
        if (!same_rows) return Tensor::cat_all(ts, 0).contiguous();
        const Shape rows = {ts[0].shape()[0] * static_cast<int64_t>(ts.size()), ts[0].shape()[1]};
        return Tensor::stack(ts, 1).contiguous().reshape(rows);
      };
      Tensor product = to - from == 1 ? matmuls[from]->dw : weight_gradient(gather(as), gather(bs), transposed);
      if (groups > 1) product = product.contiguous();
      sum = sum.defined() ? sum.add(product) : product;
    }
    if (groups > 1) sum = sum.contiguous();
  }
  // The others added in order. More than kMaxGatheredParts of them (of a tensor larger than
  // kGroupedSumMinElements: a scalar read 100 times adds its parts in one small kernel, whatever its masks) in
  // groups of kMaxSummedParts, each group's sum stored: the gradient of a sequence's input projection read a
  // slice a step (x[:, t]) is the sum of T padded slices, and one kernel summing them reads every part through
  // masks at every element (split_index_set gives each part a loop of its own up to 32 parts), T² work (a GRU
  // over 60 steps: 18 ms). The total is stored too: added in the prologue of the matmul that reads it (the
  // input projection's weight gradient), the groups' sum was computed once per column of its tile (12 ms).
  std::vector<Tensor> rest;
  rest.reserve(parts.size());
  for (size_t i = 0; i < parts.size(); i++)
    if (!gathered[i]) rest.push_back(parts[i]);
  const bool grouped = rest.size() > kMaxGatheredParts && rest[0].numel() > kGroupedSumMinElements;
  const size_t per_group = grouped ? kMaxSummedParts : rest.size();
  for (size_t from = 0; from < rest.size(); from += per_group) {
    Tensor group = rest[from];
    for (size_t i = from + 1; i < std::min(rest.size(), from + per_group); i++) group = group.add(rest[i]);
    if (grouped) group = group.contiguous();
    sum = sum.defined() ? sum.add(group) : group;
  }
  return grouped ? sum.contiguous() : sum;
}
}  // namespace

void note_matmul_gradient(const Tensor& dw, const Tensor& a, const Tensor& b, bool stored_transposed) {
  if (matmul_gradients) (*matmul_gradients)[node_of(dw)] = {a, b, stored_transposed, dw};
}

Tensor with_custom_backward(const std::vector<Tensor>& inputs, const std::function<Tensor()>& forward,
                            std::function<std::vector<Tensor>(const Tensor&, const Tensor&)> backward) {
  bool was = grad_enabled();
  set_grad_enabled(false);
  Tensor out;
  try {
    out = forward();
  } catch (...) {
    set_grad_enabled(was);
    throw;
  }
  set_grad_enabled(was);
  bool needs = false;
  for (const Tensor& t : inputs) needs = needs || t.requires_grad();
  if (!was || !needs) return out;
  out = tensor_from_node(node_of(out));  // a fresh handle: the forward's own history is not kept
  auto fn = std::allocate_shared<Function>(RecyclingAllocator<Function>());
  fn->op = Op::Contiguous;  // unused: `custom` decides
  for (const Tensor& t : inputs) fn->parents.push_back(t.impl());
  NodeRef out_node(node_of(out));
  fn->custom = [out_node, backward = std::move(backward)](const Tensor& g) { return backward(tensor_from_node(out_node.id()), g); };
  out.impl()->ctx = std::move(fn);
  out.impl()->requires_grad = true;
  return out;
}

InputGrads backward_rule(const Function& fn, const Tensor& g) {
  if (fn.custom) {
    const std::vector<Tensor> grads = fn.custom(g);
    return InputGrads(grads.begin(), grads.end());
  }
  const double ln2 = std::log(2.0);
  // the saved input and output, as tensors where a rule reads them (most rules do not: add, reshape, ...)
  auto saved_input = [&] { return saved(fn, 0); };
  auto saved_output = [&] { return saved(fn, fn.saved.size() - 1); };
  switch (fn.op) {
    case Op::Neg: return {g.neg()};
    case Op::Exp2: return {g.mul(saved_output()).mul(ln2)};  // d/dx 2^x = 2^x ln 2
    case Op::Log2: return {g.div(saved_input().mul(ln2))};    // d/dx log2 x = 1 / (x ln 2)
    case Op::Sin: return {g.mul(saved_input().cos())};
    case Op::Sqrt: return {g.div(saved_output().mul(2.0))};
    case Op::Recip: {
      Tensor out = saved_output();
      return {g.mul(out).mul(out).neg()};
    }
    case Op::Cast: return {g.cast(fn.saved[0].node().dtype)};
    case Op::Contiguous: return {g};
    case Op::Copy: return {g.to(DeviceRegistry::at(static_cast<int>(fn.arg.at(0))).name())};
    case Op::Add: return {g, g};
    case Op::Mul: {
      Tensor x = saved_input(), y = saved(fn, 1);
      return {g.mul(y), g.mul(x)};
    }
    case Op::Max: {  // ties share the gradient equally, as torch.maximum
      Tensor x = saved_input(), y = saved(fn, 1);
      Tensor half_tie = x.eq(y).cast(DType::Float32).mul(0.5);
      return {g.mul(y.lt(x).cast(DType::Float32).add(half_tie)), g.mul(x.lt(y).cast(DType::Float32).add(half_tie))};
    }
    case Op::Where: {
      Tensor x = saved_input(), zero = g.scalar_like(0);
      return {Tensor(), x.where(g, zero), x.where(zero, g)};
    }
    case Op::CmpLt: case Op::CmpEq: case Op::IDiv: case Op::Mod: return {Tensor(), Tensor()};
    case Op::ReduceSum: return {g.expand(fn.in_shape)};
    case Op::ReduceMax: {  // the gradient is split equally among the maxima
      Tensor mask = saved_input().eq(saved_output().expand(fn.in_shape)).cast(DType::Float32);
      Tensor count = mask.sum(fn.arg, true);
      return {mask.div(count.expand(fn.in_shape)).mul(g.expand(fn.in_shape))};
    }
    case Op::Reshape: return {g.reshape(fn.in_shape)};
    case Op::Permute: {
      std::vector<int64_t> inverse(fn.arg.size());
      for (size_t i = 0; i < fn.arg.size(); i++) inverse[fn.arg[i]] = static_cast<int64_t>(i);
      Tensor dx = g.permute(inverse);
      // the transpose of a noted weight gradient aᵀ @ b is bᵀ @ a (nn.Linear's W.T passes its gradient to W)
      if (const MatmulGradient* m = fn.arg.size() == 2 ? matmul_gradient(g) : nullptr)
        note_matmul_gradient(dx, m->b, m->a, !m->stored_transposed);
      return {dx};
    }
    case Op::Expand: {  // broadcast dims sum their gradients
      std::vector<int64_t> axes;
      for (size_t i = 0; i < fn.in_shape.size(); i++)
        if (fn.in_shape[i] != g.shape()[i]) axes.push_back(static_cast<int64_t>(i));
      return {axes.empty() ? g : g.sum(axes, true)};
    }
    case Op::Pad: {
      std::vector<std::pair<int64_t, int64_t>> bounds;
      bounds.reserve(fn.in_shape.size());
      for (size_t i = 0; i < fn.in_shape.size(); i++) bounds.push_back({fn.arg[2 * i], fn.arg[2 * i] + fn.in_shape[i]});
      return {g.shrink(bounds)};
    }
    case Op::Shrink: {
      std::vector<std::pair<int64_t, int64_t>> pads;
      pads.reserve(fn.in_shape.size());
      for (size_t i = 0; i < fn.in_shape.size(); i++) pads.push_back({fn.arg[2 * i], fn.in_shape[i] - fn.arg[2 * i + 1]});
      return {g.pad(pads)};
    }
    case Op::Flip: {
      std::vector<int64_t> axes;
      for (size_t i = 0; i < fn.arg.size(); i++)
        if (fn.arg[i]) axes.push_back(static_cast<int64_t>(i));
      return {g.flip(axes)};
    }
    default: throw std::logic_error(std::string("no backward rule for ") + op_name(fn.op));
  }
}

void Tensor::backward(const Tensor* gradient, bool retain_graph) {
  if (!requires_grad()) throw std::runtime_error("backward(): the tensor does not require grad and has no grad_fn");
  Tensor seed;
  if (gradient) {
    if (gradient->shape() != shape())
      throw std::invalid_argument("backward(): gradient shape (" + shape_str(gradient->shape()) +
                                  ") does not match the tensor's (" + shape_str(shape()) + ")");
    seed = *gradient;
  } else {
    if (numel() != 1)
      throw std::runtime_error("backward(): grad can be implicitly created only for a 1-element tensor, got shape (" +
                               shape_str(shape()) + ")");
    seed = Tensor::ones(shape(), dtype(), device());
  }
  // The forward is realized with the next realize, not now (tinygrad's backward realizes nothing either):
  // the optimizer's step() then schedules the forward, the backward and the update together, and a value
  // both passes read (a LayerNorm's statistics, a softmax's row max) is computed once and stored for both
  // instead of being recomputed by the backward's schedule from what the forward's happened to store.
  // PyTorch's `loss.backward(); opt.step(); loss.item()` reads the loss from that schedule.
  realize_with_next();

  // reverse topological order of the autograd history. Each tensor reached is marked in its backward_slot
  // (kOnPath while the walk is below it, then its position in `order`), so that the walk and the gradients
  // below need no hash container keyed by tensor (a step's history has thousands). The marks are cleared
  // before the history is freed (which can destroy the tensors only it holds), and on exceptions.
  constexpr int32_t kOnPath = -2;
  std::vector<TensorImpl*> order, marked;
  struct ClearMarks {
    std::vector<TensorImpl*>& marked;
    void operator()() {
      for (TensorImpl* t : marked) t->backward_slot = -1;
      marked.clear();
    }
    ~ClearMarks() { (*this)(); }
  } clear_marks{marked};
  if (impl_->backward_slot != -1) throw std::logic_error("backward(): called from inside another backward()");
  std::vector<std::pair<TensorImpl*, size_t>> stack{{impl_.get(), 0}};
  impl_->backward_slot = kOnPath;
  marked.push_back(impl_.get());
  while (!stack.empty()) {
    auto& [t, i] = stack.back();
    if (t->ctx && t->ctx->freed)  // PyTorch's error, and its advice
      throw std::runtime_error(
          "backward(): trying to backward through the graph a second time: the first backward() freed the values "
          "its steps saved (PyTorch's rule). Pass retain_graph=True to the first backward() to keep them.");
    if (t->ctx && i < t->ctx->parents.size()) {
      TensorImpl* p = t->ctx->parents[i++].get();
      if (p->requires_grad && p->backward_slot == -1) {
        p->backward_slot = kOnPath;
        marked.push_back(p);
        stack.push_back({p, 0});
      }
      continue;
    }
    t->backward_slot = static_cast<int32_t>(order.size());
    order.push_back(t);
    stack.pop_back();
  }

  bool was_enabled = grad_enabled();
  set_grad_enabled(false);
  // each tensor's gradients as they arrive (by backward_slot), summed (sum_gradients) when the walk reaches it
  std::vector<SmallVector<Tensor, 2>> grads(order.size());
  grads[impl_->backward_slot].push_back(seed.detach());
  std::map<NodeId, MatmulGradient> noted;  // note_matmul_gradient's, for this backward
  struct Noting {
    explicit Noting(std::map<NodeId, MatmulGradient>* m) { matmul_gradients = m; }
    ~Noting() { matmul_gradients = nullptr; }
  } noting(&noted);
  try {
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      TensorImpl* t = *it;
      SmallVector<Tensor, 2>& parts = grads[t->backward_slot];
      if (parts.empty()) continue;
      const Tensor g = sum_gradients(std::span<const Tensor>(parts.data(), parts.size()));
      SmallVector<Tensor, 2>().swap(parts);  // the parts' nodes are released as soon as their sum exists
      if (!t->ctx) {  // a leaf: accumulate into .grad
        Tensor acc = t->grad ? Tensor(t->grad).add(g) : g;
        t->grad = acc.impl();
        continue;
      }
      const InputGrads in_grads = backward_rule(*t->ctx, g);
      for (size_t i = 0; i < t->ctx->parents.size(); i++) {
        TensorImpl* p = t->ctx->parents[i].get();
        if (!p->requires_grad || !in_grads[i].defined()) continue;
        // a float input's gradient has its dtype, as torch's autograd casts it (validate_outputs): the
        // MAX rules build float32 masks, so a float16 input's gradient is rounded here, once
        Tensor gi = in_grads[i];
        const DType want = p->node.node().dtype;
        if (is_float(want) && gi.dtype() != want) gi = gi.cast(want);
        grads[p->backward_slot].push_back(gi);
      }
    }
  } catch (...) {
    set_grad_enabled(was_enabled);
    throw;
  }
  set_grad_enabled(was_enabled);
  // now, while every marked tensor is alive: freeing the history below can destroy the tensors it alone holds
  clear_marks();
  // the gradients stay lazy (tinygrad, API.md): they are realized when read, or by an optimizer step
  if (retain_graph) return;
  for (TensorImpl* t : order) {
    if (!t->ctx) continue;
    t->ctx->parents.clear();
    t->ctx->saved.clear();
    t->ctx->custom = nullptr;
    t->ctx->freed = true;
  }
}

}  // namespace ts
