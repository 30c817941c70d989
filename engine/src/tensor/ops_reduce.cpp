// Reductions beyond SUM and MAX: products, moments, arg-extrema, boolean reductions, norms
// (torch semantics, tinygrad's `axis=` spelling). Reduced axes may be negative; out-of-range axes throw
// std::out_of_range; keepdim keeps them as size 1; a full reduction gives a 0-d tensor.
#include <cmath>
#include <limits>
#include <numeric>

#include "tensor/ops_common.h"

namespace ts {

using namespace detail;

namespace {
// Moves `axes` to the end and flattens them into one: (..., prod(axes)).
Tensor gather_axes_last(const Tensor& x, const std::vector<int64_t>& axes) {
  std::vector<int64_t> order;
  Shape kept;
  for (int64_t i = 0; i < x.ndim(); i++)
    if (!std::binary_search(axes.begin(), axes.end(), i)) {
      order.push_back(i);
      kept.push_back(x.shape()[i]);
    }
  int64_t n = 1;
  for (int64_t a : axes) {
    order.push_back(a);
    n *= x.shape()[a];
  }
  kept.push_back(n);
  return x.permute(order).reshape(kept);
}
Shape keepdim_shape(const Shape& s, const std::vector<int64_t>& axes) {
  Shape out = s;
  for (int64_t a : axes) out[a] = 1;
  return out;
}
}  // namespace

// Pairwise-halving product over the flattened reduced axes (no MUL reduce primitive: see prod_last).
Tensor Tensor::prod(const Axes& axes, bool keepdim) const {
  if (auto r = float16_rule(&Tensor::prod, *this, axes, keepdim)) return *r;
  std::vector<int64_t> ax = reduce_axes(*this, axes);
  Tensor x = dtype() == DType::Bool ? cast(DType::Int32) : *this;
  if (ax.empty()) return x;
  Tensor r = prod_last(gather_axes_last(x, ax), false);
  return keepdim ? r.reshape(keepdim_shape(shape(), ax)) : r;
}

Tensor Tensor::var(const Axes& axes, bool keepdim, double correction) const {
  if (auto r = float16_rule(&Tensor::var, *this, axes, keepdim, correction)) return *r;
  return var_mean(axes, keepdim, correction).first;
}
Tensor Tensor::std(const Axes& axes, bool keepdim, double correction) const {
  if (auto r = float16_rule(&Tensor::std, *this, axes, keepdim, correction)) return *r;
  return var(axes, keepdim, correction).sqrt();
}

// Σ(x − mean)² / max(0, N − correction): N − correction <= 0 gives inf or NaN, as torch
std::pair<Tensor, Tensor> Tensor::var_mean(const Axes& axes, bool keepdim, double correction) const {
  if (auto r = float16_rule(&Tensor::var_mean, *this, axes, keepdim, correction)) return *r;
  std::vector<int64_t> ax = reduce_axes(*this, axes);
  Tensor x = as_float(*this);
  int64_t n = 1;
  for (int64_t a : ax) n *= shape()[a];
  Tensor m = x.mean(axes, true);
  Tensor v = x.sub(m).square().sum(axes, keepdim).div(std::max(0.0, static_cast<double>(n) - correction));
  return {v, keepdim ? m : m.reshape(drop_axes(shape(), ax))};
}
std::pair<Tensor, Tensor> Tensor::std_mean(const Axes& axes, bool keepdim, double correction) const {
  if (auto r = float16_rule(&Tensor::std_mean, *this, axes, keepdim, correction)) return *r;
  auto [v, m] = var_mean(axes, keepdim, correction);
  return {v.sqrt(), m};
}

Tensor Tensor::softmin(int64_t axis) const {
  if (auto r = float16_rule(&Tensor::softmin, *this, axis)) return *r;
  return neg().softmax(axis);
}

// First index of the maximum: among positions equal to the max (or NaN, which torch treats as the
// max), take the largest of n − i, i.e. the smallest i. tinygrad's argmax.
Tensor Tensor::argmax(std::optional<int64_t> axis, bool keepdim) const {
  if (auto r = float16_rule(&Tensor::argmax, *this, axis, keepdim)) return *r;
  if (!axis) {
    Tensor r = flatten().argmax(0, false);
    return keepdim ? r.reshape(Shape(ndim(), 1)) : r;
  }
  int64_t a = normalize_axis(*axis);
  if (ndim() == 0) return Tensor::zeros({}, DType::Int32, device());
  int64_t n = shape()[a];
  if (n == 0) throw std::out_of_range("argmax(): cannot reduce over the zero-size dim " + std::to_string(a) + " of " + shape_text(shape()));
  Tensor x = dtype() == DType::Bool ? cast(DType::Int32) : *this;
  Tensor m = x.eq(x.max(std::vector<int64_t>{a}, true));
  if (x.dtype() == DType::Float32) m = m.logical_or(x.isnan());
  Shape rs(ndim(), 1);
  rs[a] = n;
  Tensor rev = iconst(x, static_cast<double>(n)).sub(arange_int(n, device())).reshape(rs);  // n, n−1, ..., 1
  Tensor best = m.where(rev, iconst(x, 0)).max(std::vector<int64_t>{a}, keepdim);
  return iconst(x, static_cast<double>(n)).sub(best);
}
Tensor Tensor::argmin(std::optional<int64_t> axis, bool keepdim) const {
  if (auto r = float16_rule(&Tensor::argmin, *this, axis, keepdim)) return *r;
  Tensor x = dtype() == DType::Bool ? cast(DType::Int32) : *this;
  return x.neg().argmax(axis, keepdim);
}

// Counts instead of MAX so that empty reductions give any = false, all = true.
Tensor Tensor::any(const Axes& axes, bool keepdim) const {
  Tensor nz = dtype() == DType::Bool ? *this : ne(scalar_like(0));
  return nz.sum(axes, keepdim).gt(iconst(*this, 0));
}
Tensor Tensor::all(const Axes& axes, bool keepdim) const {
  Tensor nz = dtype() == DType::Bool ? *this : ne(scalar_like(0));
  return nz.logical_not().sum(axes, keepdim).eq(iconst(*this, 0));
}

// x / max(‖x‖_p, eps) along dim (torch.nn.functional.normalize)
Tensor Tensor::normalize(double p, int64_t dim, double eps) const {
  if (auto r = float16_rule(&Tensor::normalize, *this, p, dim, eps)) return *r;
  Tensor x = as_float(*this);
  std::vector<int64_t> ax{dim};
  Tensor norm;
  if (std::isinf(p)) norm = p > 0 ? x.abs().max(ax, true) : x.abs().min(ax, true);
  else if (p == 2) norm = x.square().sum(ax, true).sqrt();
  else if (p == 1) norm = x.abs().sum(ax, true);
  else norm = x.abs().pow(fconst(x, p)).sum(ax, true).pow(fconst(x, 1.0 / p));
  return x.div(norm.clip(eps, std::nullopt));
}

}  // namespace ts
