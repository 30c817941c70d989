// Indexing as compositions (tinygrad's approach): basic indexing is SHRINK (+ FLIP for negative steps,
// + PAD/RESHAPE/SHRINK for strides) and RESHAPE; integer-tensor indices, gather and scatter select with
// one-hot masks (index == arange(n)) and WHERE + SUM, so gradients accumulate over repeated indices
// through the SUM. Semantics: NumPy/torch. Out-of-range ints and dims → std::out_of_range (IndexError).
// Index tensors are not range-checked (that would need their values on the host): an out-of-range
// entry selects nothing (0), as in tinygrad.
#include <limits>

#include "tensor/ops_common.h"

namespace ts {

using namespace detail;

namespace {
const double kInf = std::numeric_limits<double>::infinity();

Tensor shrink_dim(const Tensor& x, int64_t dim, int64_t start, int64_t end) {
  Pairs b;
  for (int64_t s : x.shape()) b.push_back({0, s});
  b[dim] = {start, end};
  return x.shrink(b);
}

// An int index into dim `d` of size n, negative counting from the end; std::out_of_range (IndexError) outside.
int64_t int_index(int64_t i, int64_t n, int64_t d) {
  const int64_t at = i < 0 ? i + n : i;
  if (at < 0 || at >= n)
    throw std::out_of_range("index " + std::to_string(i) + " is out of bounds for dimension " + std::to_string(d) +
                            " with size " + std::to_string(n));
  return at;
}

// A bound of a slice with a positive step, as Python's slice.indices() clamps it to [0, n]
int64_t forward_bound(const std::optional<int64_t>& b, int64_t missing, int64_t n) {
  return b ? std::clamp<int64_t>(*b < 0 ? *b + n : *b, 0, n) : missing;
}

// Every `step`-th element of dim from 0: pad to a multiple of step, view as (count, step), keep column 0.
Tensor stride_dim(const Tensor& x, int64_t dim, int64_t step, int64_t count) {
  if (step == 1 || count == 0) return x;
  int64_t len = x.shape()[dim];
  Pairs p(x.ndim(), {0, 0});
  p[dim] = {0, count * step - len};
  Tensor y = x.pad(p);
  Shape s = y.shape();
  s[dim] = step;
  s.insert(s.begin() + dim, count);
  y = y.reshape(s);
  return shrink_dim(y, dim + 1, 0, 1).squeeze(dim + 1);
}

Tensor check_index_tensor(const Tensor& t) {
  if (t.dtype() == DType::Bool)
    throw std::invalid_argument("indexing with a boolean mask is not supported (its result shape depends on the data)");
  if (t.dtype() != DType::Int32)
    throw std::out_of_range("tensors used as indices must be integer tensors, got " + std::string(dtype_name(t.dtype())));
  return t;
}

// idx < 0 counts from the end
Tensor wrap_index(const Tensor& idx, int64_t n) {
  Tensor i = check_index_tensor(idx);
  return i.lt(iconst(i, 0)).where(i.add(iconst(i, static_cast<double>(n))), i);
}
}  // namespace

Tensor Tensor::getitem(const std::vector<Index>& indices) const {
  // expand the Ellipsis into full slices
  int64_t consuming = 0, ellipses = 0;
  bool advanced = false;
  for (const Index& ix : indices) {
    if (ix.kind == Index::Int || ix.kind == Index::Slice || ix.kind == Index::Tensor_) consuming++;
    if (ix.kind == Index::Ellipsis) ellipses++;
    if (ix.kind == Index::Tensor_) advanced = true;
  }
  if (ellipses > 1) throw std::out_of_range("an index can only have a single ellipsis ('...')");
  if (consuming > ndim())
    throw std::out_of_range("too many indices for tensor of dimension " + std::to_string(ndim()) + " (got " +
                            std::to_string(consuming) + ")");
  std::vector<Index> items;
  items.reserve(indices.size() + static_cast<size_t>(ndim() - consuming));
  for (const Index& ix : indices) {
    if (ix.kind == Index::Ellipsis) {
      for (int64_t i = 0; i < ndim() - consuming; i++) items.push_back(Index{Index::Slice, 0, {}, {}, {}, {}});
    } else {
      items.push_back(ix);
    }
  }
  if (!ellipses)
    for (int64_t i = consuming; i < ndim(); i++) items.push_back(Index{Index::Slice, 0, {}, {}, {}, {}});

  // The common case, ints and slices with step 1 (x[:, t], x[:, :H]): one SHRINK over every dim and one
  // RESHAPE (dropping the int dims, inserting the new axes): two nodes whatever the number of dims.
  bool basic = !advanced;
  for (const Index& ix : items) basic = basic && !(ix.kind == Index::Slice && ix.step && *ix.step != 1);
  if (basic) {
    Pairs bounds;
    Shape out;
    bounds.reserve(static_cast<size_t>(ndim()));
    out.reserve(items.size());
    int64_t d = 0;
    for (const Index& ix : items) {
      if (ix.kind == Index::NewAxis) {
        out.push_back(1);
        continue;
      }
      const int64_t n = shape()[d];
      if (ix.kind == Index::Int) {
        const int64_t i = int_index(ix.i, n, d);
        bounds.push_back({i, i + 1});
      } else {  // a slice with step 1
        const int64_t start = forward_bound(ix.start, 0, n), stop = forward_bound(ix.stop, n, n);
        bounds.push_back({start, std::max(start, stop)});
        out.push_back(std::max<int64_t>(stop - start, 0));
      }
      d++;
    }
    return shrink(bounds).reshape(out);
  }

  // basic indexing per dim: ints and slices shrink (ints become 0-d index tensors in advanced mode)
  Tensor x = *this;
  std::vector<Tensor> adv_idx;    // per advanced dim, in dim order
  std::vector<int64_t> adv_dims;
  std::vector<int> slot;          // per item: 0 slice (kept dim), 1 new axis, 2 advanced, 3 dropped int
  int64_t d = 0;
  for (const Index& ix : items) {
    if (ix.kind == Index::NewAxis) {
      slot.push_back(1);
      continue;
    }
    int64_t n = shape()[d];
    if (ix.kind == Index::Int) {
      const int64_t i = int_index(ix.i, n, d);
      if (advanced) {
        adv_idx.push_back(Tensor::scalar(static_cast<double>(i), DType::Int32, device()));
        adv_dims.push_back(d);
        slot.push_back(2);
      } else {
        x = shrink_dim(x, d, i, i + 1);
        slot.push_back(3);
      }
    } else if (ix.kind == Index::Tensor_) {
      adv_idx.push_back(wrap_index(Tensor(ix.tensor), n));
      adv_dims.push_back(d);
      slot.push_back(2);
    } else {  // slice, with Python's slice.indices() clamping
      int64_t step = ix.step.value_or(1);
      if (step == 0) throw std::invalid_argument("slice step cannot be zero");
      int64_t start, stop, count;
      if (step > 0) {
        start = forward_bound(ix.start, 0, n);
        stop = forward_bound(ix.stop, n, n);
        count = stop > start ? (stop - start + step - 1) / step : 0;
        x = shrink_dim(x, d, start, count ? start + (count - 1) * step + 1 : start);
      } else {
        start = ix.start ? (*ix.start < 0 ? *ix.start + n : *ix.start) : n - 1;
        stop = ix.stop ? (*ix.stop < 0 ? *ix.stop + n : *ix.stop) : -1;
        start = std::clamp<int64_t>(start, -1, n - 1);
        stop = std::clamp<int64_t>(stop, -1, n - 1);
        count = start > stop ? (start - stop + (-step) - 1) / (-step) : 0;
        int64_t low = start + (count - 1) * step;
        x = count ? shrink_dim(x, d, low, start + 1).flip({d}) : shrink_dim(x, d, 0, 0);
        step = -step;
      }
      x = stride_dim(x, d, step, count);
      slot.push_back(0);
    }
    d++;
  }

  if (adv_idx.empty()) {  // drop the int dims, insert the new axes
    Shape out;
    int64_t src = 0;
    for (int s : slot) {
      if (s == 1) out.push_back(1);
      else if (s == 0) out.push_back(x.shape()[src++]);
      else src++;
    }
    return x.reshape(out);
  }

  // advanced: move the indexed dims last, then reduce each with its one-hot mask over the broadcast
  // index shape B: (B..., R..., n_1..n_k) → (B..., R...)
  auto idx = broadcast_all(adv_idx);
  Shape B = idx[0].shape();
  std::vector<int64_t> order, rest;
  for (int64_t i = 0; i < x.ndim(); i++)
    if (std::find(adv_dims.begin(), adv_dims.end(), i) == adv_dims.end()) rest.push_back(i);
  order = rest;
  order.insert(order.end(), adv_dims.begin(), adv_dims.end());
  Tensor y = x.permute(order);
  Shape ys(B.size(), 1);
  ys.insert(ys.end(), y.shape().begin(), y.shape().end());
  y = y.reshape(ys);
  size_t k = adv_dims.size(), nb = B.size(), nr = rest.size();
  for (size_t i = 0; i < k; i++) {
    int64_t n = x.shape()[adv_dims[i]];
    Shape ms = B;
    for (size_t j = 0; j < nr; j++) ms.push_back(1);
    ms.push_back(n);
    for (size_t j = i + 1; j < k; j++) ms.push_back(1);
    Tensor mask = one_hot_mask(idx[i], n).reshape(ms);
    y = mask.where(y, y.scalar_like(0).cast(y.dtype())).sum(std::vector<int64_t>{static_cast<int64_t>(nb + nr)});
  }
  if (dtype() == DType::Bool) y = y.cast(DType::Bool);
  // NumPy placement: B goes where the advanced indices are when they are adjacent, else first
  int first = -1, last = -1;
  for (size_t i = 0; i < slot.size(); i++)
    if (slot[i] == 2) {
      if (first < 0) first = static_cast<int>(i);
      last = static_cast<int>(i);
    }
  bool adjacent = true;
  for (int i = first; i <= last; i++) adjacent = adjacent && slot[i] == 2;
  std::vector<int64_t> perm;
  Shape out;
  auto put_b = [&] {
    for (size_t j = 0; j < nb; j++) {
      perm.push_back(static_cast<int64_t>(j));
      out.push_back(B[j]);
    }
  };
  if (!adjacent) put_b();
  int64_t r = 0;
  for (size_t i = 0; i < slot.size(); i++) {
    if (slot[i] == 1) out.push_back(1);
    else if (slot[i] == 0) {
      perm.push_back(static_cast<int64_t>(nb + r));
      out.push_back(y.shape()[nb + r]);
      r++;
    } else if (slot[i] == 2 && adjacent && static_cast<int>(i) == first) put_b();
  }
  return y.permute(perm).reshape(out);
}

// out[..i.., j, ..k..] = x[..i.., index[..i.., j, ..k..], ..k..] (torch.gather): x is shrunk to the
// index's extent, and index == arange(n) along a new last axis selects the source element.
Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  int64_t d = normalize_axis(dim);
  if (index.ndim() != ndim())
    throw std::runtime_error("gather: index " + shape_text(index.shape()) + " must have the same number of dims as the input " +
                             shape_text(shape()));
  for (int64_t i = 0; i < ndim(); i++)
    if (i != d && index.shape()[i] > shape()[i])
      throw std::runtime_error("gather: index " + shape_text(index.shape()) + " is larger than the input " + shape_text(shape()) +
                               " in dim " + std::to_string(i));
  if (ndim() == 0) return *this;
  Pairs b;
  for (int64_t i = 0; i < ndim(); i++) b.push_back({0, i == d ? shape()[i] : index.shape()[i]});
  Tensor x = shrink(b).unsqueeze(-1).transpose(-1, d);  // n moves last, dim d becomes 1
  Tensor mask = one_hot_mask(wrap_index(index, shape()[d]), shape()[d]);
  Tensor r = mask.where(x, x.scalar_like(0).cast(dtype())).sum(std::vector<int64_t>{-1});
  return dtype() == DType::Bool ? r.cast(DType::Bool) : r;
}

namespace {
struct Scattered {
  Tensor mask;  // (I..., n): index[q] == p along a new last axis
  Tensor src;   // src shrunk to I, unsqueezed to (I..., 1)
};
Scattered scatter_mask(const Tensor& self, int64_t d, const Tensor& index, const Tensor& src) {
  if (index.ndim() != self.ndim())
    throw std::runtime_error("scatter: index " + shape_text(index.shape()) + " must have the same number of dims as self " +
                             shape_text(self.shape()));
  for (int64_t i = 0; i < self.ndim(); i++)
    if ((i != d && index.shape()[i] > self.shape()[i]) || (src.ndim() == self.ndim() && index.shape()[i] > src.shape()[i]))
      throw std::runtime_error("scatter: index " + shape_text(index.shape()) + " is larger than self " + shape_text(self.shape()) +
                               " or src " + shape_text(src.shape()) + " in dim " + std::to_string(i));
  Tensor s = src;
  if (s.ndim() == 0) s = s.expand(index.shape());
  else if (s.ndim() != self.ndim())
    throw std::runtime_error("scatter: src " + shape_text(src.shape()) + " must have the same number of dims as self " +
                             shape_text(self.shape()));
  else {
    Pairs b;
    for (int64_t i = 0; i < s.ndim(); i++) b.push_back({0, index.shape()[i]});
    s = s.shrink(b);
  }
  if (s.dtype() != self.dtype()) s = s.cast(self.dtype());
  return {one_hot_mask(wrap_index(index, self.shape()[d]), self.shape()[d]), s.unsqueeze(-1)};
}
// (I with dim d → 1, ..., n last) → self's shape: n back to d, zero/false padding beyond I's extent.
Tensor to_self(const Tensor& r, int64_t d, const Tensor& self) {
  Tensor t = r.transpose(-1, d).squeeze(-1);
  Pairs p;
  for (int64_t i = 0; i < self.ndim(); i++) p.push_back({0, self.shape()[i] - t.shape()[i]});
  return t.pad(p);
}
}  // namespace

// torch.scatter: self[..., index[q], ...] = src[q]; with duplicate indices the sources are summed
// (torch leaves the winner unspecified).
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  int64_t d = normalize_axis(dim);
  if (ndim() == 0) return src.reshape({}).cast(dtype());
  auto [mask, s] = scatter_mask(*this, d, index, src);
  std::vector<int64_t> ax{d};
  Tensor hit = to_self(mask.any(ax, true), d, *this);
  Tensor val = to_self(mask.where(s, s.scalar_like(0).cast(s.dtype())).sum(ax, true), d, *this);
  if (dtype() == DType::Bool) val = val.cast(DType::Bool);
  return hit.where(val, *this);
}

Tensor Tensor::scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                              bool include_self) const {
  if (auto r = float16_rule(&Tensor::scatter_reduce, *this, dim, index, src, reduce, include_self)) return *r;
  if (reduce != "sum" && reduce != "prod" && reduce != "mean" && reduce != "amax" && reduce != "amin")
    throw std::invalid_argument("scatter_reduce: reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got '" + reduce + "'");
  int64_t d = normalize_axis(dim);
  auto [mask, s] = scatter_mask(*this, d, index, src);
  std::vector<int64_t> ax{d};
  Tensor hit = to_self(mask.any(ax, true), d, *this);
  Tensor zero = s.scalar_like(0).cast(s.dtype());
  Tensor self_w = include_self ? *this : Tensor::zeros(shape(), dtype(), device());
  Tensor out;
  if (reduce == "sum") {
    out = self_w.add(to_self(mask.where(s, zero).sum(ax, true), d, *this));
  } else if (reduce == "mean") {
    Tensor total = self_w.add(to_self(mask.where(s, zero).sum(ax, true), d, *this));
    Tensor count = to_self(mask.sum(ax, true), d, *this).add(iconst(*this, include_self ? 1 : 0));
    count = count.maximum(iconst(count, 1));
    out = dtype() == DType::Float32 ? total.div(count) : total.div(count, "floor");
  } else if (reduce == "prod") {
    Tensor one = s.scalar_like(1).cast(s.dtype());
    Tensor p = mask.where(s, one);
    Tensor prod = prod_last(move_axis_last(p, d), true);  // (..., n, 1) with d moved last
    Tensor agg = to_self(move_last_to(prod, d), d, *this);
    out = include_self ? mul(agg) : agg;
  } else {  // amax / amin: the gradient is shared evenly among every contributor equal to the result
    bool mx = reduce == "amax";
    double fill = dtype() == DType::Float32 ? (mx ? -kInf : kInf) : (mx ? -2147483648.0 : 2147483647.0);
    Tensor cand = mask.where(s, s.scalar_like(fill).cast(s.dtype()));
    Tensor best = to_self(mx ? cand.max(ax, true) : cand.min(ax, true), d, *this);
    if (include_self) best = mx ? best.maximum(*this) : best.minimum(*this);
    best = best.detach();
    Tensor best_i = best.unsqueeze(-1).transpose(d, -1);  // back to the (I with d → 1, n) layout of the mask
    Pairs b;
    for (int64_t i = 0; i < ndim(); i++) b.push_back({0, i == d ? 1 : index.shape()[i]});
    b.push_back({0, shape()[d]});
    best_i = best_i.shrink(b);
    Tensor eq_src = mask.logical_and(s.eq(best_i));
    Tensor num = to_self(eq_src.where(s, zero).sum(ax, true), d, *this);
    Tensor cnt = to_self(eq_src.sum(ax, true), d, *this);
    if (include_self) {
      Tensor eq_self = eq(best);
      num = num.add(eq_self.where(*this, zero));
      cnt = cnt.add(eq_self.cast(DType::Int32));
    }
    // a count of 0 (not scattered to) would make the unused branch's gradient 0·inf
    out = dtype() == DType::Float32 ? num.div(cnt.maximum(iconst(cnt, 1))) : best;
  }
  return hit.where(out, *this);
}

Tensor Tensor::one_hot(int64_t num_classes) const {
  if (is_float(dtype()))
    throw std::invalid_argument(std::string("one_hot: expected an integer tensor of class indices, got ") + dtype_name(dtype()));
  int64_t n = num_classes;
  if (n < 0) n = static_cast<int64_t>(max().item()) + 1;  // torch's -1: infer from the data (realizes)
  return one_hot_mask(cast(DType::Int32), n).cast(DType::Int32);
}

}  // namespace ts
