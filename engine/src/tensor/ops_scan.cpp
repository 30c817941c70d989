// Scans and sorting as compositions of the primitive ops (no sequential primitive), so the graph shows
// how they decompose.
//
// Scans (cumsum, cumprod, logcumsumexp, cummax, cummin) — a blocked multi-level scan, tinygrad's
// _split_cumalu (the two-level scan of Blelloch, "Prefix sums and their applications", 1990, with
// window reductions in place of the up/down sweeps):
//   - n ≤ kDirectScan: pad the axis with n − 1 identity elements on the left and reduce every length-n
//     window of a _pool (tinygrad's _cumalu): PAD → (repeat/shrink/reshape) → SUM|MAX, O(n²) work in one
//     kernel — the cheapest form for short axes.
//   - longer: split the axis into ⌈n/B⌉ blocks of B = ⌈√n⌉, scan inside every block (recursively), scan
//     the block totals (recursively), and combine each block with the total of the blocks before it.
//     The leaves are window scans of at most kDirectScan elements (O(n·kDirectScan) work), each level adds
//     O(n), and there are O(log log n) levels: 3–5 kernels for n = 1e3–1e5, instead of O(n²) work.
//
// Sorting — Batcher's bitonic sorting network (Batcher, "Sorting networks and their applications", 1968),
// in the variant whose comparators all point the same way: pad the axis to a power of two N, then for
// every merge size k = 2, 4, ..., N run log2(k) compare-exchange stages. Each stage is a reshape/flip to
// pair every element with its partner, a comparison, and a WHERE: O(N log² N) work, one kernel per stage
// (log2(N)·(log2(N)+1)/2 kernels, but only 2·log2(N) distinct ones). Values travel with their original
// index, and ties are broken by that index, so the result is stable like torch's stable sort. The
// gradient flows back through the WHEREs: each value's gradient returns to where it came from.
// Short axes (n ≤ kDirectSort = 512) keep the comparison-counting sort: O(n²) work in 1–2 kernels.
#include <cmath>
#include <limits>

#include "tensor/ops_common.h"

namespace ts {

using namespace detail;

namespace {
const double kInf = std::numeric_limits<double>::infinity();
constexpr double kInt32Lowest = -2147483648.0;
constexpr double kInt32Highest = 2147483647.0;
// Up to this length a scan is one O(n²) window reduction; above it, blocked (see the top of the file).
constexpr int64_t kDirectScan = 64;
// Up to this length sort counts comparisons (O(n²), 1–2 kernels) instead of running the bitonic network
// (log2(N)(log2(N)+1)/2 kernels: 45 for n = 512, ~20 of them distinct programs to compile). Measured on
// the C device: counting is faster up to n = 512 even for 256 rows (72 ms vs 95 ms; 0.6 ms vs 11 ms for
// one row), the network from n = 1024 on (213 ms vs 316 ms for 256 rows).
constexpr int64_t kDirectSort = 512;

Tensor pad_last(const Tensor& x, int64_t before, int64_t after, double fill) {
  Pairs p(x.ndim(), {0, 0});
  p.back() = {before, after};
  return x.pad(p, fill);
}
Tensor shrink_last(const Tensor& x, int64_t begin, int64_t end) {
  Pairs b;
  for (int64_t d : x.shape()) b.push_back({0, d});
  b.back() = {begin, end};
  return x.shrink(b);
}
Shape with_last(Shape s, std::initializer_list<int64_t> last) {
  s.pop_back();
  s.insert(s.end(), last);
  return s;
}

// (..., n) → (..., n, n): window i holds [fill×(n−1−i), x_0..x_i] (the identity `fill` in the padding).
Tensor windows(const Tensor& x_last, double fill) {
  int64_t n = x_last.shape().back();
  return pool(pad_last(x_last, n - 1, 0, fill), {n}, {1}, {1});
}

// j[i][w] = i − (n−1) + w: the source position of window element w of window i (int32, (n, n)).
Tensor window_positions(int64_t n, const std::string& device) {
  std::vector<int32_t> v(n * n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t w = 0; w < n; w++) v[i * n + w] = static_cast<int32_t>(i - (n - 1) + w);
  return Tensor::from_data(v.data(), DType::Int32, {n, n}, device);
}

// Splits the last axis of x (..., n) into blocks (..., nb, B), B = ⌈√n⌉, padding the end with `fill`.
Tensor to_blocks(const Tensor& x, double fill) {
  int64_t n = x.shape().back();
  int64_t b = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  int64_t nb = (n + b - 1) / b;
  return pad_last(x, 0, nb * b - n, fill).reshape(with_last(x.shape(), {nb, b}));
}
// (..., nb, B) → (..., n): the inverse of to_blocks.
Tensor from_blocks(const Tensor& xb, int64_t n) {
  Shape s(xb.shape().begin(), xb.shape().end() - 1);
  s.back() = xb.shape()[xb.ndim() - 2] * xb.shape().back();
  return shrink_last(xb.reshape(s), 0, n);
}
// The last element of every block: (..., nb, B) → (..., nb).
Tensor block_last(const Tensor& xb) {
  int64_t b = xb.shape().back();
  return shrink_last(xb, b - 1, b).squeeze(-1);
}
// Inclusive → exclusive along the last axis: shift right by one, `fill` in front.
Tensor shift_right(const Tensor& x, double fill) {
  return pad_last(shrink_last(x, 0, x.shape().back() - 1), 1, 0, fill);
}

// An associative operator with its identity: how it reduces a last axis and how it combines two values.
struct ScanOp {
  double identity;
  std::function<Tensor(const Tensor&)> reduce_last;            // (..., k) → (...)
  std::function<Tensor(const Tensor&, const Tensor&)> combine;  // a ⊕ b, elementwise (a comes first)
};

// Inclusive scan of the last axis (see the top of the file).
Tensor scan_last(const Tensor& x, const ScanOp& op) {
  int64_t n = x.shape().back();
  if (n <= kDirectScan) return op.reduce_last(windows(x, op.identity));  // O(n²)
  Tensor inner = scan_last(to_blocks(x, op.identity), op);               // (..., nb, B): within blocks
  Tensor before = shift_right(scan_last(block_last(inner), op), op.identity);  // total of earlier blocks
  return from_blocks(op.combine(before.unsqueeze(-1), inner), n);
}

// Running maximum of the last axis with torch's index: the last position holding the maximum so far (a
// NaN is the maximum from where it appears). `pos` (int32, x's shape) is each element's position along
// the original axis; returns (values, positions). The values are picked (one-hot, then WHEREs), never
// reduced with MAX, so the gradient goes to that one position, as in torch.
std::pair<Tensor, Tensor> cummax_last(const Tensor& x, const Tensor& pos, double lowest) {
  int64_t n = x.shape().back();
  bool is_float = x.dtype() == DType::Float32;
  if (n <= kDirectScan) {  // O(n²): the latest position in each window holding its max
    Tensor w = windows(x.detach(), lowest);
    Tensor hit = w.eq(w.max(std::vector<int64_t>{-1}, true));
    if (is_float) hit = hit.logical_or(w.isnan());
    Tensor slot = hit.where(window_positions(n, x.device()), iconst(x, -1)).max(std::vector<int64_t>{-1});
    Tensor pick = one_hot_mask(slot, n);  // (..., n, n): window i takes element slot[i]
    return {pick.where(x.unsqueeze(-2), x.scalar_like(0)).sum(std::vector<int64_t>{-1}),
            pick.where(pos.unsqueeze(-2), iconst(x, 0)).sum(std::vector<int64_t>{-1})};
  }
  auto [iv, ip] = cummax_last(to_blocks(x, lowest), to_blocks(pos, -1), lowest);  // within blocks
  auto [tv, tp] = cummax_last(block_last(iv), block_last(ip), lowest);             // over block totals
  Tensor bv = shift_right(tv, lowest).unsqueeze(-1), bp = shift_right(tp, -1).unsqueeze(-1);
  // The block's own running max wins ties (it is later) and a NaN; an earlier NaN wins otherwise.
  Tensor ivd = iv.detach(), bvd = bv.detach();
  Tensor own = ivd.ge(bvd);
  if (is_float) own = ivd.isnan().logical_or(bvd.isnan().logical_not().logical_and(own));
  return {from_blocks(own.where(iv, bv), n), from_blocks(own.where(ip, bp), n)};
}

template <typename F>
Tensor scan(const Tensor& self, int64_t axis, F&& body) {
  int64_t a = self.normalize_axis(axis);
  if (self.ndim() == 0 || self.shape()[a] == 0) return self;
  return move_last_to(body(move_axis_last(self, a)), a);
}
}  // namespace

Tensor Tensor::cumsum(int64_t axis) const {
  if (auto r = float16_rule(&Tensor::cumsum, *this, axis)) return *r;
  ScanOp op{0, [](const Tensor& w) { return w.sum(std::vector<int64_t>{-1}); },
            [](const Tensor& a, const Tensor& b) { return a.add(b); }};
  return scan(*this, axis, [&](const Tensor& x) { return scan_last(x, op); });
}
Tensor Tensor::cumprod(int64_t axis) const {
  if (auto r = float16_rule(&Tensor::cumprod, *this, axis)) return *r;
  ScanOp op{1, [](const Tensor& w) { return prod_last(w, false); }, [](const Tensor& a, const Tensor& b) { return a.mul(b); }};
  return scan(*this, axis, [&](const Tensor& x) { return scan_last(x, op); });
}
// Stable: every window has its own max inside logsumexp, and blocks combine through logaddexp (which
// shifts by the larger operand), so no exponential over- or underflows.
Tensor Tensor::logcumsumexp(int64_t axis) const {
  if (auto r = float16_rule(&Tensor::logcumsumexp, *this, axis)) return *r;
  ScanOp op{-kInf, [](const Tensor& w) { return w.logsumexp(std::vector<int64_t>{-1}); },
            [](const Tensor& a, const Tensor& b) { return a.logaddexp(b); }};
  return scan(as_float(*this), axis, [&](const Tensor& x) { return scan_last(x, op); });
}

std::pair<Tensor, Tensor> Tensor::cummax(int64_t axis) const {
  if (auto r = float16_rule(&Tensor::cummax, *this, axis)) return *r;
  int64_t a = normalize_axis(axis);
  if (ndim() == 0) return {*this, Tensor::zeros({}, DType::Int32, device())};
  if (shape()[a] == 0) return {*this, Tensor::zeros(shape(), DType::Int32, device())};
  if (dtype() == DType::Bool) {
    auto [v, i] = cast(DType::Int32).cummax(axis);
    return {v.cast(DType::Bool), i};
  }
  Tensor x = move_axis_last(*this, a);
  int64_t n = x.shape().back();
  Tensor pos = arange_int(n, device()).expand(x.shape());
  auto [values, idx] = cummax_last(x, pos, dtype() == DType::Float32 ? -kInf : kInt32Lowest);
  return {move_last_to(values, a), move_last_to(idx, a)};
}
std::pair<Tensor, Tensor> Tensor::cummin(int64_t axis) const {
  if (auto r = float16_rule(&Tensor::cummin, *this, axis)) return *r;
  auto [v, i] = (dtype() == DType::Bool ? cast(DType::Int32) : *this).neg().cummax(axis);
  return {v.neg(), i};
}

namespace {
// Does (av, ai) go before (bv, bi)? By value (NaN is the largest value, as torch), then by the original
// index: a strict total order, so the network's result is the stable order.
Tensor goes_before(const Tensor& av, const Tensor& ai, const Tensor& bv, const Tensor& bi, bool descending) {
  Tensor first = descending ? av.gt(bv) : av.lt(bv);
  Tensor same = av.eq(bv);
  if (av.dtype() == DType::Float32) {
    Tensor an = av.isnan(), bn = bv.isnan();
    first = first.logical_or(descending ? an.logical_and(bn.logical_not()) : bn.logical_and(an.logical_not()));
    same = same.logical_or(an.logical_and(bn));
  }
  return first.logical_or(same.logical_and(ai.lt(bi)));
}

// One compare-exchange stage of the network on K (R, 2, N) — channel 0 the values, channel 1 the original
// indices. Elements pair up inside blocks of 2h: element i of the lower half with element i of the upper
// half (`mirror` false), or with element h−1−i of the upper half (`mirror` true: the block reversed; the
// first stage of every merge). The lower element keeps whichever goes first. O(N), one kernel.
//
// The exchange is a permutation that is its own inverse (partners swap with each other or not at all), so
// its gradient is the same exchange applied to the incoming gradient: one kernel per stage backwards too.
// (Left to the chain rule, WHERE's two gradients would meet again only after the flip/reshape, and the
// scheduler would fuse the whole backward network into one exponentially large expression.)
Tensor compare_exchange(const Tensor& k, int64_t h, bool mirror, bool descending) {
  int64_t r = k.shape()[0], n = k.shape()[2], m = n / (2 * h);
  auto partner = [=](const Tensor& t5) { return mirror ? t5.flip({3, 4}) : t5.flip({3}); };  // in each element's place
  Tensor k5 = k.detach().reshape({r, 2, m, 2, h}), p5 = partner(k5);
  auto channel = [&](const Tensor& t, int64_t c) { return t.shrink({{0, r}, {c, c + 1}, {0, m}, {0, 2}, {0, h}}); };
  Tensor partner_first = goes_before(channel(p5, 0), channel(p5, 1), channel(k5, 0), channel(k5, 1), descending);
  Tensor lower = arange_int(2, k.device()).eq(iconst(k, 0)).reshape({1, 1, 1, 2, 1});
  // the lower element takes its partner when the partner goes first; the upper one when it goes after
  Tensor take = partner_first.eq(lower);  // (R, 1, m, 2, h), the same for both channels
  auto exchange = [=](const Tensor& t) {
    Tensor t5 = t.reshape({r, 2, m, 2, h});
    return take.where(partner(t5), t5).reshape({r, 2, n}).contiguous();
  };
  return with_custom_backward({k}, [&] { return exchange(k); },
                              [exchange](const Tensor&, const Tensor& g) { return std::vector<Tensor>{exchange(g)}; });
}

// Stable sort of the last axis of x (..., n) with the bitonic network (see the top of the file).
std::pair<Tensor, Tensor> bitonic_sort_last(const Tensor& x, bool descending) {
  int64_t n = x.shape().back(), r = x.numel() / n, big = 1;
  while (big < n) big *= 2;
  bool is_float = x.dtype() == DType::Float32;
  if (is_float && big > (int64_t{1} << 24))
    throw std::invalid_argument("sort: a dimension of size " + std::to_string(n) + " is too long (indices travel as float32)");
  Tensor v = (is_float ? x : x.cast(DType::Int32)).reshape({r, n});
  // The padding sorts after every element: the last value in this order (ties go by index, and the
  // padding's indices are the largest). NaN is built as a WHERE (see fnan), not as the pad value.
  double last = descending ? (is_float ? -kInf : kInt32Lowest) : (is_float ? 0.0 : kInt32Highest);
  v = pad_last(v, 0, big - n, last);
  Tensor index = arange_int(big, x.device());
  if (is_float && !descending) v = index.ge(iconst(x, static_cast<double>(n))).where(fnan(x), v);
  Tensor k = Tensor::stack({v, (is_float ? index.cast(DType::Float32) : index).expand({r, big})}, 1);  // (R, 2, N)
  for (int64_t size = 2; size <= big; size *= 2)
    for (int64_t h = size / 2; h >= 1; h /= 2) k = compare_exchange(k, h, h == size / 2, descending);
  Shape out = x.shape();
  Tensor values = k.shrink({{0, r}, {0, 1}, {0, n}}).reshape(out);
  Tensor indices = k.shrink({{0, r}, {1, 2}, {0, n}}).reshape(out).cast(DType::Int32);
  if (x.dtype() != values.dtype()) values = values.cast(x.dtype());
  return {values, indices};
}

// Stable sort of the last axis by comparison counting: each element's rank is the number of elements
// that go before it; values are placed with one-hot masks. O(n²) work in 1–2 kernels (short axes).
std::pair<Tensor, Tensor> counting_sort_last(const Tensor& x, bool descending) {
  int64_t n = x.shape().back();
  Tensor xd = x.detach();
  Tensor xi = xd.unsqueeze(-1), xj = xd.unsqueeze(-2);  // element i along rows, j along columns
  Tensor pos = arange_int(n, x.device());
  Tensor rank = goes_before(xj, pos.unsqueeze(0), xi, pos.unsqueeze(1), descending).sum(std::vector<int64_t>{-1});
  Tensor place = one_hot_mask(rank, n);  // [i][r]: element i lands at r
  Tensor values = place.where(x.unsqueeze(-1), x.scalar_like(0)).sum(std::vector<int64_t>{-2});
  Tensor indices = place.where(pos.reshape({n, 1}), iconst(x, 0)).sum(std::vector<int64_t>{-2});
  if (x.dtype() == DType::Bool) values = values.cast(DType::Bool);
  return {values, indices};
}
}  // namespace

std::pair<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const {
  if (auto r = float16_rule(&Tensor::sort, *this, dim, descending)) return *r;
  int64_t a = normalize_axis(dim);
  if (ndim() == 0) return {*this, Tensor::zeros({}, DType::Int32, device())};
  Tensor x = move_axis_last(*this, a);
  int64_t n = x.shape().back();
  if (n == 0) return {*this, Tensor::zeros(shape(), DType::Int32, device())};
  auto [values, indices] = n <= kDirectSort || numel() == 0 ? counting_sort_last(x, descending) : bitonic_sort_last(x, descending);
  return {move_last_to(values, a), move_last_to(indices, a)};
}
Tensor Tensor::argsort(int64_t dim, bool descending) const { return sort(dim, descending).second; }

// The first k of a full sort: O(n log² n); sorted=false is allowed to return them sorted (torch's contract).
std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  if (auto r = float16_rule(&Tensor::topk, *this, k, dim, largest, sorted)) return *r;
  (void)sorted;
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
