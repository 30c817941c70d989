// Shape and movement ops built from the movement primitives (RESHAPE, PERMUTE, EXPAND, PAD, SHRINK,
// FLIP): no data is copied until a kernel reads through the view. Semantics: torch, with tinygrad's
// spellings. Errors: bad dims → std::out_of_range (IndexError); bad sizes/amounts → std::invalid_argument
// (ValueError); invalid roll arguments → std::runtime_error (RuntimeError).
#include <numeric>

#include "tensor/ops_common.h"

namespace ts {

using namespace detail;

namespace {
Pairs full_bounds(const Tensor& x) {
  Pairs b;
  for (int64_t s : x.shape()) b.push_back({0, s});
  return b;
}
Tensor shrink_dim(const Tensor& x, int64_t dim, int64_t start, int64_t end) {
  Pairs b = full_bounds(x);
  b[dim] = {start, end};
  return x.shrink(b);
}
}  // namespace

// reflect / replicate / circular as concatenations of flipped, edge-expanded or wrapped slices
// (tinygrad's pad). Negative amounts crop: after padding for reflect and replicate, before wrapping for
// circular (torch.nn.functional.pad's results).
Tensor Tensor::pad(const std::vector<std::pair<int64_t, int64_t>>& padding, const std::string& mode, double value) const {
  if (mode == "constant") return pad(padding, value);
  if (mode != "reflect" && mode != "replicate" && mode != "circular")
    throw std::invalid_argument("pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got '" + mode + "'");
  if (static_cast<int64_t>(padding.size()) != ndim())
    throw std::invalid_argument("pad: " + std::to_string(padding.size()) + " (before, after) pairs for " +
                                std::to_string(ndim()) + " dims of " + shape_text(shape()));
  Tensor x = *this;
  Pairs crop;
  for (int64_t d = 0; d < ndim(); d++) {
    auto [pb, pa] = padding[d];
    int64_t cb = std::max<int64_t>(-pb, 0), ca = std::max<int64_t>(-pa, 0);
    if (mode == "circular" && (cb || ca)) {
      // torch crops first and wraps what is left: pad (3, -1) of [0 1 2 3 4] is [1 2 3 0 1 2 3]
      if (cb + ca > x.shape()[d])
        throw std::invalid_argument("pad: circular padding (" + std::to_string(pb) + ", " + std::to_string(pa) +
                                    ") crops more than the size " + std::to_string(x.shape()[d]) + " of dim " +
                                    std::to_string(d));
      x = shrink_dim(x, d, cb, x.shape()[d] - ca);
      cb = ca = 0;
    }
    int64_t s = x.shape()[d];
    int64_t b = std::max<int64_t>(pb, 0), a = std::max<int64_t>(pa, 0);
    if (mode == "circular" && (b > s || a > s))
      throw std::invalid_argument("pad: circular padding (" + std::to_string(pb) + ", " + std::to_string(pa) +
                                  ") wraps around more than once for dim " + std::to_string(d) + " of size " + std::to_string(s));
    if (mode == "reflect" && (b >= s || a >= s))
      throw std::invalid_argument("pad: reflect padding (" + std::to_string(pb) + ", " + std::to_string(pa) +
                                  ") must be less than the size " + std::to_string(s) + " of dim " + std::to_string(d));
    if (mode == "replicate" && s == 0 && (b || a))
      throw std::invalid_argument("pad: cannot replicate-pad the zero-size dim " + std::to_string(d));
    std::vector<Tensor> parts;
    if (b) {
      if (mode == "reflect") parts.push_back(shrink_dim(x, d, 1, b + 1).flip({d}));
      else if (mode == "replicate") {
        Shape e = x.shape();
        e[d] = b;
        parts.push_back(shrink_dim(x, d, 0, 1).expand(e));
      } else parts.push_back(shrink_dim(x, d, s - b, s));
    }
    parts.push_back(x);
    if (a) {
      if (mode == "reflect") parts.push_back(shrink_dim(x, d, s - 1 - a, s - 1).flip({d}));
      else if (mode == "replicate") {
        Shape e = x.shape();
        e[d] = a;
        parts.push_back(shrink_dim(x, d, s - 1, s).expand(e));
      } else parts.push_back(shrink_dim(x, d, 0, a));
    }
    if (parts.size() > 1) x = cat_all(parts, d);
    crop.push_back({cb, x.shape()[d] - ca});
  }
  return x.shrink(crop);
}

Tensor Tensor::unflatten(int64_t dim, const Shape& sizes) const {
  int64_t d = normalize_axis(dim);
  Shape s(shape().begin(), shape().begin() + d);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < sizes.size(); i++) {
    if (sizes[i] == -1) {
      if (infer >= 0) throw std::runtime_error("unflatten: only one dimension can be inferred (-1) in " + shape_text(sizes));
      infer = static_cast<int64_t>(i);
    } else if (sizes[i] < 0) {
      throw std::runtime_error("unflatten: invalid size " + std::to_string(sizes[i]) + " in " + shape_text(sizes));
    } else {
      known *= sizes[i];
    }
  }
  Shape inner = sizes;
  if (infer >= 0 && known) inner[infer] = shape()[d] / known;
  if (shape_numel(inner) != shape()[d])
    throw std::invalid_argument("unflatten: sizes " + shape_text(sizes) + " do not multiply to the size " +
                                std::to_string(shape()[d]) + " of dim " + std::to_string(dim));
  s.insert(s.end(), inner.begin(), inner.end());
  s.insert(s.end(), shape().begin() + d + 1, shape().end());
  return reshape(s);
}

// Each piece is padded to the full size along dim and the pieces are summed (tinygrad's cat): the
// graph shows PAD + ADD, and the gradient of each piece is a SHRINK.
Tensor Tensor::cat_all(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw std::invalid_argument("cat: expected at least one tensor");
  const Tensor& first = tensors[0];
  if (first.ndim() == 0) throw std::out_of_range("cat: zero-dimensional tensors cannot be concatenated");
  int64_t d = first.normalize_axis(dim);
  DType dt = first.dtype();
  int64_t total = 0;
  for (const Tensor& t : tensors) {
    if (t.ndim() != first.ndim())
      throw std::invalid_argument("cat: tensors must have the same number of dims, got " + shape_text(first.shape()) +
                                  " and " + shape_text(t.shape()));
    for (int64_t i = 0; i < first.ndim(); i++)
      if (i != d && t.shape()[i] != first.shape()[i])
        throw std::invalid_argument("cat: sizes of tensors must match except in dim " + std::to_string(d) + ", got " +
                                    shape_text(first.shape()) + " and " + shape_text(t.shape()));
    total += t.shape()[d];
    dt = promote(dt, t.dtype());
  }
  if (tensors.size() == 1) return first;
  DType acc = dt == DType::Bool ? DType::Int32 : dt;
  Tensor out;
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    Pairs p(t.ndim(), {0, 0});
    p[d] = {offset, total - offset - t.shape()[d]};
    offset += t.shape()[d];
    Tensor piece = (t.dtype() == acc ? t : t.cast(acc)).pad(p);
    out = out.defined() ? out.add(piece) : piece;
  }
  return dt == acc ? out : out.cast(dt);
}
Tensor Tensor::cat(const std::vector<Tensor>& others, int64_t dim) const {
  std::vector<Tensor> all{*this};
  all.insert(all.end(), others.begin(), others.end());
  return cat_all(all, dim);
}
Tensor Tensor::stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw std::invalid_argument("stack: expected at least one tensor");
  for (const Tensor& t : tensors)
    if (t.shape() != tensors[0].shape())
      throw std::invalid_argument("stack: expects each tensor to be equal size, got " + shape_text(tensors[0].shape()) +
                                  " and " + shape_text(t.shape()));
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(dim));
  return cat_all(parts, dim);
}

// (s) → reshape (1, s) → expand (r, s) → reshape (r·s), for every dim (tinygrad's repeat).
Tensor Tensor::repeat(const Shape& repeats) const {
  if (static_cast<int64_t>(repeats.size()) < ndim())
    throw std::runtime_error("repeat: the number of repeats " + shape_text(repeats) + " cannot be smaller than the number of dims of " +
                             shape_text(shape()));
  for (int64_t r : repeats)
    if (r < 0) throw std::invalid_argument("repeat: repeats must be non-negative, got " + shape_text(repeats));
  Shape base(repeats.size() - ndim(), 1);
  base.insert(base.end(), shape().begin(), shape().end());
  Shape unsq, exp, fin;
  for (size_t i = 0; i < base.size(); i++) {
    unsq.push_back(1);
    unsq.push_back(base[i]);
    exp.push_back(repeats[i]);
    exp.push_back(base[i]);
    fin.push_back(repeats[i] * base[i]);
  }
  return reshape(unsq).expand(exp).reshape(fin);
}

Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  if (repeats < 0) throw std::invalid_argument("repeat_interleave: repeats must be non-negative, got " + std::to_string(repeats));
  Tensor x = dim ? *this : flatten();
  int64_t d = x.normalize_axis(dim.value_or(0));
  Shape e = x.shape();
  e.insert(e.begin() + d + 1, repeats);
  return x.unsqueeze(d + 1).expand(e).flatten(d, d + 1);
}

// A roll by s is cat(x[n−s:], x[:n−s]) along the dim.
Tensor Tensor::roll(const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) const {
  if (dims.empty()) {
    if (shifts.size() != 1)
      throw std::runtime_error("roll: with dims=None, shifts must be a single value, got " + std::to_string(shifts.size()));
    return flatten().roll(shifts, {0}).reshape(shape());
  }
  if (shifts.size() != dims.size())
    throw std::runtime_error("roll: shifts and dims must have the same length, got " + std::to_string(shifts.size()) +
                             " and " + std::to_string(dims.size()));
  Tensor x = *this;
  for (size_t i = 0; i < dims.size(); i++) {
    int64_t d = normalize_axis(dims[i]);
    int64_t n = ndim() == 0 ? 1 : shape()[d];
    if (ndim() == 0 || n == 0) continue;
    int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    x = cat_all({shrink_dim(x, d, n - s, n), shrink_dim(x, d, 0, n - s)}, d);
  }
  return x;
}

std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int64_t dim) const {
  int64_t d = normalize_axis(dim);
  int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  if (total != shape()[d])
    throw std::invalid_argument("split: sizes " + shape_text(sizes) + " sum to " + std::to_string(total) + ", but dim " +
                                std::to_string(d) + " of " + shape_text(shape()) + " has size " + std::to_string(shape()[d]));
  std::vector<Tensor> out;
  int64_t off = 0;
  for (int64_t s : sizes) {
    out.push_back(shrink_dim(*this, d, off, off + s));
    off += s;
  }
  return out;
}
std::vector<Tensor> Tensor::split(int64_t size, int64_t dim) const {
  int64_t d = normalize_axis(dim);
  if (size <= 0) throw std::invalid_argument("split: split_size must be positive, got " + std::to_string(size));
  std::vector<int64_t> sizes;
  for (int64_t off = 0; off < shape()[d]; off += size) sizes.push_back(std::min(size, shape()[d] - off));
  if (sizes.empty()) sizes.push_back(0);
  return split(sizes, d);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const {
  if (chunks <= 0) throw std::invalid_argument("chunk: chunks must be positive, got " + std::to_string(chunks));
  int64_t d = normalize_axis(dim);
  int64_t n = shape()[d];
  return split(std::max<int64_t>(1, (n + chunks - 1) / chunks), d);
}

// Masks from index comparisons over the last two dims: row i keeps column j when j − i >= diagonal (triu).
Tensor Tensor::triu(int64_t diagonal) const {
  if (ndim() < 2) throw std::invalid_argument("triu: input must have at least 2 dims, got " + shape_text(shape()));
  int64_t n = shape()[ndim() - 2], m = shape()[ndim() - 1];
  Tensor rows = arange_int(n, device()).reshape({n, 1}), cols = arange_int(m, device()).reshape({1, m});
  Tensor keep = cols.sub(rows).ge(iconst(rows, static_cast<double>(diagonal)));
  return keep.where(*this, scalar_like(0).cast(dtype()));
}
Tensor Tensor::tril(int64_t diagonal) const {
  if (ndim() < 2) throw std::invalid_argument("tril: input must have at least 2 dims, got " + shape_text(shape()));
  int64_t n = shape()[ndim() - 2], m = shape()[ndim() - 1];
  Tensor rows = arange_int(n, device()).reshape({n, 1}), cols = arange_int(m, device()).reshape({1, m});
  Tensor keep = cols.sub(rows).le(iconst(rows, static_cast<double>(diagonal)));
  return keep.where(*this, scalar_like(0).cast(dtype()));
}

// 1-D: (n) → (n, 1) → pad to (n, n+1) → flatten → first n·n → (n, n) (tinygrad's diag); 2-D: diagonal().
Tensor Tensor::diag() const {
  if (ndim() == 2) return diagonal();
  if (ndim() != 1) throw std::invalid_argument("diag: expected a 1-D or 2-D tensor, got " + shape_text(shape()));
  int64_t n = shape()[0];
  if (n == 0) return reshape({0, 0});
  return unsqueeze(-1).pad({{0, 0}, {0, n}}).flatten().shrink({{0, n * n}}).reshape({n, n});
}

// The diagonal of the (dim1, dim2) planes, appended as the last dim: square the plane, flatten it,
// pad by k and view it as (k, k+1): column 0 is the diagonal.
Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  int64_t d1 = normalize_axis(dim1), d2 = normalize_axis(dim2);
  if (d1 == d2) throw std::runtime_error("diagonal: dim1 and dim2 cannot be identical, got " + std::to_string(dim1) + " and " + std::to_string(dim2));
  std::vector<int64_t> order;
  for (int64_t i = 0; i < ndim(); i++)
    if (i != d1 && i != d2) order.push_back(i);
  order.push_back(d1);
  order.push_back(d2);
  Tensor x = permute(order);
  int64_t n = x.shape()[ndim() - 2], m = x.shape()[ndim() - 1];
  int64_t r0 = offset < 0 ? -offset : 0, c0 = offset > 0 ? offset : 0;
  int64_t k = std::max<int64_t>(0, std::min(n - r0, m - c0));
  Pairs b = full_bounds(x);
  b[ndim() - 2] = {std::min(r0, n), std::min(r0, n) + k};
  b[ndim() - 1] = {std::min(c0, m), std::min(c0, m) + k};
  x = x.shrink(b);
  Shape lead(x.shape().begin(), x.shape().end() - 2);
  if (k == 0) {
    Shape s = lead;
    s.push_back(0);
    return x.reshape(s);
  }
  Shape flat = lead;
  flat.push_back(k * k);
  Tensor f = x.reshape(flat);
  Pairs p(f.ndim(), {0, 0});
  p.back() = {0, k};
  Shape sq = lead;
  sq.push_back(k);
  sq.push_back(k + 1);
  Tensor g = f.pad(p).reshape(sq);
  Pairs c = full_bounds(g);
  c.back() = {0, 1};
  return g.shrink(c).squeeze(-1);
}

// torch.Tensor.unfold: a 1-d _pool along dim with stride `step`.
Tensor Tensor::unfold(int64_t dim, int64_t size, int64_t step) const {
  if (ndim() == 0) {
    if (size > 1) throw std::invalid_argument("unfold: size " + std::to_string(size) + " exceeds the size 1 of a 0-d tensor");
    return reshape({size});
  }
  int64_t d = normalize_axis(dim);
  if (step <= 0) throw std::invalid_argument("unfold: step must be positive, got " + std::to_string(step));
  if (size < 0 || size > shape()[d])
    throw std::invalid_argument("unfold: size " + std::to_string(size) + " exceeds the size " + std::to_string(shape()[d]) +
                                " of dim " + std::to_string(d));
  if (size == 0) {
    Shape s = shape();
    s[d] = shape()[d] / step + 1;
    s.push_back(0);
    // empty windows: a zero-size view of self (not a fresh constant), so backward still reaches self
    std::vector<std::pair<int64_t, int64_t>> none;
    for (int64_t i = 0; i < ndim(); i++) none.push_back({0, i == d ? 0 : shape()[i]});
    return shrink(none).reshape(s);
  }
  Tensor w = pool(move_axis_last(*this, d), {size}, {step}, {1});  // (others..., o, size)
  // the window axis goes back to d, the window contents stay last
  int64_t nd = ndim();
  std::vector<int64_t> order;
  for (int64_t p = 0; p < nd; p++) order.push_back(p < d ? p : p == d ? nd - 1 : p - 1);
  order.push_back(nd);
  return w.permute(order);
}

std::vector<Tensor> Tensor::meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing) {
  if (indexing != "ij" && indexing != "xy")
    throw std::invalid_argument("meshgrid: indexing must be 'ij' or 'xy', got '" + indexing + "'");
  std::vector<Tensor> ts;
  for (const Tensor& t : tensors) ts.push_back(t.ndim() == 0 ? t.reshape({1}) : t);
  for (const Tensor& t : ts)
    if (t.ndim() != 1) throw std::invalid_argument("meshgrid: expects 0-d or 1-d tensors, got " + shape_text(t.shape()));
  bool xy = indexing == "xy" && ts.size() >= 2;
  Shape full;
  for (const Tensor& t : ts) full.push_back(t.shape()[0]);
  if (xy) std::swap(full[0], full[1]);
  std::vector<Tensor> out;
  for (size_t i = 0; i < ts.size(); i++) {
    size_t pos = xy && i < 2 ? 1 - i : i;
    Shape s(ts.size(), 1);
    s[pos] = ts[i].shape()[0];
    out.push_back(ts[i].reshape(s).expand(full));
  }
  return out;
}

}  // namespace ts
