// Scans and sorting as compositions. A scan along an axis of size n pads that axis with n − 1
// identity elements on the left and reduces every length-n window of a _pool (tinygrad's _cumalu): the
// graph shows PAD → (repeat/shrink/reshape) → SUM|MAX, O(n²) work but no sequential primitive.
// Sorting counts, for each element, how many elements go before it (comparisons + SUM), then places
// values with one-hot masks: stable, O(n²), differentiable through the placement.
#include <limits>

#include "tensor/ops_common.h"

namespace ts {

using namespace detail;

namespace {
const double kInf = std::numeric_limits<double>::infinity();

// (..., n) → (..., n, n): window i holds [pad×(n−1−i), x_0..x_i] (identity `fill` in the padding).
Tensor windows(const Tensor& x_last, double fill) {
  int64_t n = x_last.shape().back();
  Pairs p(x_last.ndim(), {0, 0});
  p.back() = {n - 1, 0};
  return pool(x_last.pad(p, fill), {n}, {1}, {1});
}

// j[i][w] = i − (n−1) + w: the source position of window element w of window i (int32, (n, n)).
Tensor window_positions(int64_t n, const std::string& device) {
  std::vector<int32_t> v(n * n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t w = 0; w < n; w++) v[i * n + w] = static_cast<int32_t>(i - (n - 1) + w);
  return Tensor::from_data(v.data(), DType::Int32, {n, n}, device);
}

template <typename F>
Tensor scan(const Tensor& self, int64_t axis, F&& body) {
  int64_t a = self.normalize_axis(axis);
  if (self.ndim() == 0 || self.shape()[a] == 0) return self;
  return move_last_to(body(move_axis_last(self, a)), a);
}
}  // namespace

Tensor Tensor::cumsum(int64_t axis) const {
  return scan(*this, axis, [](const Tensor& x) { return windows(x, 0).sum(std::vector<int64_t>{-1}); });
}
Tensor Tensor::cumprod(int64_t axis) const {
  return scan(*this, axis, [](const Tensor& x) { return prod_last(windows(x, 1), false); });
}
// Stable: each window has its own max inside logsumexp.
Tensor Tensor::logcumsumexp(int64_t axis) const {
  return scan(as_float(*this), axis, [](const Tensor& x) { return windows(x, -kInf).logsumexp(std::vector<int64_t>{-1}); });
}

// The index is the last position holding the running max (torch's cummax); the values are taken at
// that index through a one-hot mask, so the gradient goes to that one position, as in torch.
std::pair<Tensor, Tensor> Tensor::cummax(int64_t axis) const {
  int64_t a = normalize_axis(axis);
  if (ndim() == 0) return {*this, Tensor::zeros({}, DType::Int32, device())};
  if (shape()[a] == 0) return {*this, Tensor::zeros(shape(), DType::Int32, device())};
  Tensor x = move_axis_last(*this, a);
  int64_t n = x.shape().back();
  double lowest = dtype() == DType::Float32 ? -kInf : -2147483648.0;
  Tensor w = windows(x.detach(), lowest);
  Tensor hit = w.eq(w.max(std::vector<int64_t>{-1}, true));
  if (dtype() == DType::Float32) hit = hit.logical_or(w.isnan());  // NaN is the running max from where it appears
  Tensor idx = hit.where(window_positions(n, device()), iconst(x, -1)).max(std::vector<int64_t>{-1});
  Tensor values = one_hot_mask(idx, n).where(x.unsqueeze(-2), x.scalar_like(0)).sum(std::vector<int64_t>{-1});
  return {move_last_to(values, a), move_last_to(idx, a)};
}
std::pair<Tensor, Tensor> Tensor::cummin(int64_t axis) const {
  auto [v, i] = (dtype() == DType::Bool ? cast(DType::Int32) : *this).neg().cummax(axis);
  return {v.neg(), i};
}

std::pair<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const {
  int64_t a = normalize_axis(dim);
  if (ndim() == 0) return {*this, Tensor::zeros({}, DType::Int32, device())};
  Tensor x = move_axis_last(*this, a);
  int64_t n = x.shape().back();
  if (n == 0) return {*this, Tensor::zeros(shape(), DType::Int32, device())};
  Tensor xd = x.detach();
  Tensor xi = xd.unsqueeze(-1), xj = xd.unsqueeze(-2);  // element i along rows, j along columns
  // before[i][j]: element j goes before element i (NaN is the largest value, as torch)
  Tensor before = descending ? xj.gt(xi) : xj.lt(xi);
  Tensor same = xj.eq(xi);
  if (dtype() == DType::Float32) {
    Tensor ni = xi.isnan(), nj = xj.isnan();
    before = before.logical_or(descending ? nj.logical_and(ni.logical_not()) : ni.logical_and(nj.logical_not()));
    same = same.logical_or(ni.logical_and(nj));
  }
  Tensor pos = arange_int(n, device());
  Tensor earlier = pos.unsqueeze(0).lt(pos.unsqueeze(1));  // [i][j]: j < i (stability)
  Tensor rank = before.logical_or(same.logical_and(earlier)).sum(std::vector<int64_t>{-1});  // (..., n)
  Tensor place = one_hot_mask(rank, n);  // [i][r]: element i lands at r
  Tensor values = place.where(x.unsqueeze(-1), x.scalar_like(0)).sum(std::vector<int64_t>{-2});
  Tensor indices = place.where(pos.reshape({n, 1}), iconst(x, 0)).sum(std::vector<int64_t>{-2});
  if (dtype() == DType::Bool) values = values.cast(DType::Bool);
  return {move_last_to(values, a), move_last_to(indices, a)};
}
Tensor Tensor::argsort(int64_t dim, bool descending) const { return sort(dim, descending).second; }

std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  (void)sorted;  // the composition always returns the k values in sorted order
  int64_t a = normalize_axis(dim);
  int64_t n = ndim() == 0 ? 1 : shape()[a];
  if (k < 0 || k > n)
    throw std::invalid_argument("topk: k (" + std::to_string(k) + ") is out of range for dimension " + std::to_string(a) +
                                " of size " + std::to_string(n) + " in " + shape_text(shape()));
  auto [v, i] = sort(a, largest);
  if (ndim() == 0) return {v, i};
  Pairs b;
  for (int64_t d = 0; d < ndim(); d++) b.push_back({0, d == a ? k : shape()[d]});
  return {v.shrink(b), i.shrink(b)};
}

}  // namespace ts
