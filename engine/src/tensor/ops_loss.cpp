// Losses as compositions (torch.nn.functional semantics; tinygrad's spellings: the loss is a method of
// the prediction). reduction: "mean" | "sum" | "none"; anything else throws std::invalid_argument
// (ValueError). Class labels are integer tensors, turned into one-hot masks (index == arange(C)).
#include <memory>

#include "tensor/ops_common.h"

namespace ts {

using namespace detail;

namespace {
void check_reduction(const std::string& reduction) {
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    throw std::invalid_argument("reduction must be 'mean', 'sum' or 'none', got '" + reduction + "'");
}
Tensor reduce_loss(const Tensor& loss, const std::string& reduction) {
  if (reduction == "none") return loss;
  return reduction == "sum" ? loss.sum() : loss.mean();
}
void check_same_shape(const Tensor& x, const Tensor& y, const char* what) {
  if (x.shape() != y.shape())
    throw std::invalid_argument(std::string(what) + ": target " + shape_text(y.shape()) + " must have the shape of the input " +
                                shape_text(x.shape()));
}
// one-hot of integer labels y (shape of x without the class axis) with the class axis at `axis`
Tensor labels_one_hot(const Tensor& x, const Tensor& y, int64_t axis, const char* what) {
  Shape expect = x.shape();
  expect.erase(expect.begin() + axis);
  if (y.shape() != expect)
    throw std::invalid_argument(std::string(what) + ": labels of shape " + shape_text(y.shape()) + " do not match the input " +
                                shape_text(x.shape()) + " (expected " + shape_text(expect) + ")");
  if (y.dtype() == DType::Float32) throw std::invalid_argument(std::string(what) + ": class labels must be an integer tensor");
  return move_last_to(one_hot_mask(y, x.shape()[axis]), axis);
}
}  // namespace

// −(y·log x + (1 − y)·log(1 − x)), each log clamped at −100 as torch
Tensor Tensor::binary_crossentropy(const Tensor& y, const std::string& reduction) const {
  if (auto r = float16_rule(&Tensor::binary_crossentropy, *this, y, reduction)) return *r;
  check_reduction(reduction);
  check_same_shape(*this, y, "binary_crossentropy");
  Tensor lo = fconst(*this, -100);
  Tensor lx = log().clip(&lo, nullptr), l1x = scalar_like(1).sub(*this).log().clip(&lo, nullptr);
  Tensor yf = as_float(y);
  return reduce_loss(yf.mul(lx).add(fconst(yf, 1).sub(yf).mul(l1x)).neg(), reduction);
}

// pos_weight·y·softplus(−x) + (1 − y)·softplus(x) = −(pw·y·logσ(x) + (1 − y)·logσ(−x)): stable for any x
Tensor Tensor::binary_crossentropy_logits(const Tensor& y, const std::string& reduction, const Tensor* pos_weight) const {
  if (auto r = float16_rule(&Tensor::binary_crossentropy_logits, *this, y, reduction, pos_weight)) return *r;
  check_reduction(reduction);
  check_same_shape(*this, y, "binary_crossentropy_logits");
  Tensor yf = as_float(y);
  Tensor pos = yf.mul(neg().softplus());
  if (pos_weight) pos = pos.mul(*pos_weight);
  return reduce_loss(pos.add(fconst(yf, 1).sub(yf).mul(softplus())), reduction);
}

// −Σ_c log_softmax(x)_c · ((1 − ls)·y_c + ls/C) over the class axis (1, or 0 for 1-D input)
Tensor Tensor::cross_entropy(const Tensor& y, const std::string& reduction, double label_smoothing) const {
  if (auto r = float16_rule(&Tensor::cross_entropy, *this, y, reduction, label_smoothing)) return *r;
  check_reduction(reduction);
  if (label_smoothing < 0 || label_smoothing > 1)
    throw std::invalid_argument("cross_entropy: label_smoothing must be in [0, 1], got " + std::to_string(label_smoothing));
  if (ndim() < 1) throw std::invalid_argument("cross_entropy: the input needs a class axis, got a 0-d tensor");
  int64_t axis = ndim() == 1 ? 0 : 1;
  int64_t C = shape()[axis];
  Tensor target = y.dtype() == DType::Float32 ? y : labels_one_hot(*this, y, axis, "cross_entropy").cast(DType::Float32);
  if (y.dtype() == DType::Float32) check_same_shape(*this, y, "cross_entropy");
  if (label_smoothing > 0) target = target.mul(1 - label_smoothing).add(label_smoothing / static_cast<double>(C));
  Tensor loss = log_softmax(axis).mul(target).sum(std::vector<int64_t>{axis}).neg();
  return reduce_loss(loss, reduction);
}

// tinygrad's sparse_categorical_crossentropy: class axis last; ignore_index = −1 ignores nothing;
// "mean" averages over the labels that are not ignored. Its gradient is written out, as PyTorch's
// log_softmax_backward ∘ nll_loss_backward computes it, rather than taken through the log-softmax's chain rule:
//   ∂loss_i/∂x_ij = m_i · (p_ij − (1 − ε)·[j = y_i] − ε/C),   p = softmax(x) = exp(x − lse),
// lse_i = logsumexp(x_i) = max_i + log Σ_j exp(x_ij − max_i), m the mask, times the output's gradient (per row for
// "none"; divided by Σm for "mean"): one elementwise kernel that reads the logits and the rows' lse the forward
// stored, where the chain rule had a reduce per row (Σ_j of the one-hot's gradient) in front of the exponentials.
// The log-probabilities are x − lse (PyTorch's log_softmax computes x − max − log Σ exp(x − max)): the forward
// stores one value per row, its max and sum of exponentials one kernel, which the loss and the gradient read.
// (Stored as x − max and Σ exp(x − max), it was four kernels: x − max, the sums, the loss, the gradient.)
Tensor Tensor::sparse_categorical_crossentropy(const Tensor& y, const std::string& reduction, int64_t ignore_index,
                                               double label_smoothing) const {
  if (auto r = float16_rule(&Tensor::sparse_categorical_crossentropy, *this, y, reduction, ignore_index, label_smoothing))
    return *r;
  check_reduction(reduction);
  if (ndim() < 1) throw std::invalid_argument("sparse_categorical_crossentropy: logits need a class axis (last)");
  const Tensor y_one_hot = labels_one_hot(*this, y, ndim() - 1, "sparse_categorical_crossentropy");
  const Tensor labels = y.cast(DType::Int32);
  const Tensor mask = ignore_index != -1 ? labels.ne(iconst(labels, static_cast<double>(ignore_index))).cast(DType::Float32)
                                         : Tensor::ones(y.shape(), DType::Float32, device());
  const std::vector<int64_t> last{-1};
  const double eps = label_smoothing;
  // what the backward reads again: the logits and their logsumexp per row
  struct Saved {
    Tensor x, lse;
  };
  auto saved = std::make_shared<Saved>();
  const Tensor x = *this;
  return with_custom_backward(
      {x},
      [&] {
        Tensor log_probs;
        if (x.shape().back() > 0) {
          saved->x = x.detach();
          const Tensor m = x.max(last, true);
          saved->lse = x.sub(m).exp().sum(last, true).log().add(m);
          log_probs = x.sub(saved->lse);
        } else {  // no classes: an empty log_softmax, and an empty gradient
          log_probs = saved->x = x.log_softmax(-1);
          saved->lse = fconst(log_probs, 0);
        }
        Tensor picked = y_one_hot.where(log_probs, fconst(log_probs, 0)).sum(last).mul(mask);
        Tensor loss = picked.mul(1 - eps);
        if (eps > 0) loss = loss.add(log_probs.mean(last).mul(mask).mul(eps));
        if (reduction == "none") return loss.neg();
        if (reduction == "sum") return loss.sum().neg();
        return loss.sum().div(mask.sum()).neg();
      },
      [saved, y_one_hot, mask, eps, reduction](const Tensor&, const Tensor& g) {
        const Tensor probs = saved->x.sub(saved->lse).exp();
        const double classes = static_cast<double>(probs.shape().back());
        const Tensor target = y_one_hot.where(fconst(probs, 1 - eps + eps / classes), fconst(probs, eps / classes));
        Tensor scale = g.mul(mask);  // "none": one gradient per row; "sum": one for all
        if (reduction == "mean") scale = scale.div(mask.sum());
        return std::vector<Tensor>{probs.sub(target).mul(scale.unsqueeze(-1))};
      });
}

// −w[y]·x[y] along the class axis 1 (0 for 1-D input); ignored labels weigh 0; "mean" divides by Σ w[y]
Tensor Tensor::nll_loss(const Tensor& y, const Tensor* weight, std::optional<int64_t> ignore_index, const std::string& reduction) const {
  if (auto r = float16_rule(&Tensor::nll_loss, *this, y, weight, ignore_index, reduction)) return *r;
  check_reduction(reduction);
  if (ndim() < 1) throw std::invalid_argument("nll_loss: the input needs a class axis, got a 0-d tensor");
  int64_t axis = ndim() == 1 ? 0 : 1;
  int64_t C = shape()[axis];
  Tensor mask = labels_one_hot(*this, y, axis, "nll_loss");
  std::vector<int64_t> ax{axis};
  Tensor picked = mask.where(*this, scalar_like(0)).sum(ax);
  Tensor w;
  if (weight) {
    if (weight->shape() != Shape{C})
      throw std::invalid_argument("nll_loss: weight " + shape_text(weight->shape()) + " must have one entry per class (" +
                                  std::to_string(C) + ")");
    Shape ws(ndim(), 1);
    ws[axis] = C;
    w = mask.where(weight->reshape(ws), fconst(*this, 0)).sum(ax);
  } else {
    w = Tensor::ones(y.shape(), DType::Float32, device());
  }
  if (ignore_index) w = y.cast(DType::Int32).ne(iconst(y, static_cast<double>(*ignore_index))).where(w, fconst(w, 0));
  Tensor loss = picked.mul(w).neg();
  if (reduction == "none") return loss;
  if (reduction == "sum") return loss.sum();
  return loss.sum().div(w.sum());
}

}  // namespace ts
