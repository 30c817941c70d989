// High-level tensor operations as compositions of the primitive ops (tinygrad's decompositions).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "tensor/ops_common.h"
#include "tensorscope/device.h"

namespace ts {

namespace detail {

// bool < int32 < float16 < float32, as torch.promote_types
DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Float32 || b == DType::Float32) return DType::Float32;
  if (a == DType::Float16 || b == DType::Float16) return DType::Float16;
  return DType::Int32;
}

DType result_type(const Tensor& a, const Tensor& b) {
  const bool a0 = a.ndim() == 0, b0 = b.ndim() == 0;
  if (a0 != b0 && is_float(a.dtype()) && is_float(b.dtype())) return a0 ? b.dtype() : a.dtype();
  return promote(a.dtype(), b.dtype());
}

Shape broadcast_shape(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; i++) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument("shapes " + shape_text(a) + " and " + shape_text(b) + " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor broadcast_to(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  // a one-element constant without autograd history broadcasts to a constant of the new shape: what
  // reshape + expand would fold it to (see primitive), without the two intermediate nodes (x + 1.0)
  if (const Node& n = node(t); n.op == Op::Const && !t.requires_grad() && shape.size() >= n.shape.size() && shape_numel(n.shape) == 1)
    return tensor_from_node(Graph::get().add(Op::Const, n.dtype, shape, {}, {}, n.value, n.device));
  Shape padded(shape.size() - t.shape().size(), 1);
  padded.insert(padded.end(), t.shape().begin(), t.shape().end());
  return t.reshape(padded).expand(shape);
}

std::vector<Tensor> broadcast_all(std::vector<Tensor> ts) {
  Shape s = ts[0].shape();
  for (size_t i = 1; i < ts.size(); i++) s = broadcast_shape(s, ts[i].shape());
  for (Tensor& t : ts) t = broadcast_to(t, s);
  return ts;
}

std::vector<int64_t> reduce_axes(const Tensor& t, const Axes& axes) {
  std::vector<int64_t> out;
  if (!axes) {
    for (int64_t i = 0; i < t.ndim(); i++) out.push_back(i);
  } else {
    for (int64_t a : *axes) out.push_back(t.normalize_axis(a));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    if (t.ndim() == 0) out.clear();  // axis 0 / -1 of a 0-d tensor is the tensor itself, as torch
  }
  return out;
}

Shape drop_axes(const Shape& s, const std::vector<int64_t>& axes) {
  Shape out;
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); i++)
    if (!std::binary_search(axes.begin(), axes.end(), i)) out.push_back(s[i]);
  return out;
}

Tensor fnan(const Tensor& like) {
  const double inf = std::numeric_limits<double>::infinity();
  return fconst(like, inf).add(fconst(like, -inf));
}

Tensor arange_int(int64_t n, const std::string& device) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return Tensor::from_data(v.data(), DType::Int32, {n}, device);
}

Tensor move_axis_last(const Tensor& x, int64_t axis) {
  int64_t a = x.normalize_axis(axis);
  if (x.ndim() == 0 || a == x.ndim() - 1) return x;
  std::vector<int64_t> order;
  for (int64_t i = 0; i < x.ndim(); i++)
    if (i != a) order.push_back(i);
  order.push_back(a);
  return x.permute(order);
}

Tensor move_last_to(const Tensor& x, int64_t axis) {
  int64_t a = x.normalize_axis(axis);
  if (x.ndim() == 0 || a == x.ndim() - 1) return x;
  std::vector<int64_t> order;
  for (int64_t i = 0; i < x.ndim() - 1; i++) {
    if (i == a) order.push_back(x.ndim() - 1);
    order.push_back(i);
  }
  return x.permute(order);
}

Tensor one_hot_mask(const Tensor& idx, int64_t n) {
  Tensor i = idx.dtype() == DType::Int32 ? idx : idx.cast(DType::Int32);
  return i.unsqueeze(-1).eq(arange_int(n, idx.device()));
}

Tensor zero_grad_op(const Tensor& x, const std::function<Tensor(const Tensor&)>& f) {
  return with_custom_backward({x}, [&] { return f(x); },
                              [](const Tensor&, const Tensor& g) { return std::vector<Tensor>{Tensor::zeros(g.shape(), DType::Float32, g.device())}; });
}

Tensor pool(const Tensor& x, const std::vector<int64_t>& k, const std::vector<int64_t>& s, const std::vector<int64_t>& d) {
  size_t n = k.size();
  if (static_cast<size_t>(x.ndim()) < n)
    throw std::invalid_argument("pool: cannot pool " + shape_text(x.shape()) + " with a " + std::to_string(n) + "-d kernel");
  size_t lead = x.ndim() - n;
  Shape noop(x.shape().begin(), x.shape().begin() + lead);
  std::vector<int64_t> i_(x.shape().begin() + lead, x.shape().end()), o_(n);
  for (size_t j = 0; j < n; j++) {
    int64_t span = d[j] * (k[j] - 1) + 1;
    if (span > i_[j])
      throw std::invalid_argument("pool: kernel size " + std::to_string(k[j]) + " (dilation " + std::to_string(d[j]) +
                                  ") is larger than the input size " + std::to_string(i_[j]));
    o_[j] = (i_[j] - span + s[j]) / s[j];  // ceil((i − d(k−1)) / s)
  }
  auto keep = [&](Pairs p) {
    Pairs out;
    for (size_t j = 0; j < lead; j++) out.push_back({0, noop[j]});
    out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  auto with_lead = [&](const Shape& tail) {
    Shape out = noop;
    out.insert(out.end(), tail.begin(), tail.end());
    return out;
  };
  // Windows that do not overlap (k <= s, no dilation: max_pool2d(2), avg_pool2d(2)): shrink to o·s,
  // split each dim into (o, s), keep the first k of each s and move the window dims last (tinygrad's
  // fast path). Only movement ops that never repeat an element, so the gradient is a pad and a reshape;
  // the general path's gradient sums over every repeated copy, most of them masked off.
  bool disjoint = true;
  for (size_t j = 0; j < n; j++) disjoint = disjoint && k[j] <= s[j] && d[j] == 1;
  if (disjoint) {
    Pairs b, b2;
    Shape sh;
    std::vector<int64_t> order;
    for (size_t j = 0; j < lead; j++) order.push_back(static_cast<int64_t>(j));
    for (size_t j = 0; j < n; j++) {
      const int64_t whole = std::min(o_[j] * s[j], i_[j]);  // the last window may end before its stride
      b.push_back({0, whole});
    }
    Tensor r = x.shrink(keep(b));
    for (size_t j = 0; j < n; j++) {
      if (o_[j] * s[j] > i_[j]) {  // pad the last window's stride to a whole s (never read: k <= the rest)
        Pairs p(lead + n, {0, 0});
        p[lead + j] = {0, o_[j] * s[j] - i_[j]};
        r = r.pad(p);
      }
      sh.push_back(o_[j]);
      sh.push_back(s[j]);
      b2.push_back({0, o_[j]});
      b2.push_back({0, k[j]});
    }
    r = r.reshape(with_lead(sh)).shrink(keep(b2));
    for (size_t j = 0; j < n; j++) order.push_back(static_cast<int64_t>(lead + 2 * j));
    for (size_t j = 0; j < n; j++) order.push_back(static_cast<int64_t>(lead + 2 * j + 1));
    return r.permute(order);
  }
  // tinygrad's general path: repeat the input so that window starts can be taken by shrink+reshape
  std::vector<int64_t> f_(n), reps(lead, 1);
  for (size_t j = 0; j < n; j++) {
    f_[j] = 1 + (o_[j] * s[j] > i_[j] - d[j] * (k[j] - 1) ? 1 : 0);
    int64_t len = i_[j] * f_[j] + d[j];
    reps.push_back((k[j] * len + i_[j] - 1) / i_[j]);
  }
  Tensor r = x.repeat(reps);
  Pairs b;
  Shape sh;
  for (size_t j = 0; j < n; j++) {
    int64_t len = i_[j] * f_[j] + d[j];
    b.push_back({0, k[j] * len});
    sh.push_back(k[j]);
    sh.push_back(len);
  }
  r = r.shrink(keep(b)).reshape(with_lead(sh));
  b.clear();
  sh.clear();
  for (size_t j = 0; j < n; j++) {
    b.push_back({0, k[j]});
    b.push_back({0, o_[j] * s[j]});
    sh.push_back(k[j]);
    sh.push_back(o_[j]);
    sh.push_back(s[j]);
  }
  r = r.shrink(keep(b)).reshape(with_lead(sh));
  b.clear();
  sh.clear();
  for (size_t j = 0; j < n; j++) {
    b.push_back({0, k[j]});
    b.push_back({0, o_[j]});
    b.push_back({0, 1});
    sh.push_back(k[j]);
    sh.push_back(o_[j]);
  }
  r = r.shrink(keep(b)).reshape(with_lead(sh));
  std::vector<int64_t> order;
  for (size_t j = 0; j < lead; j++) order.push_back(static_cast<int64_t>(j));
  for (size_t j = 0; j < n; j++) order.push_back(static_cast<int64_t>(lead + 2 * j + 1));
  for (size_t j = 0; j < n; j++) order.push_back(static_cast<int64_t>(lead + 2 * j));
  return r.permute(order);
}

Tensor prod_last(const Tensor& x, bool keepdim) {
  Tensor r = x;
  int64_t nd = x.ndim();
  if (r.shape().back() == 0) {
    Shape s = r.shape();
    s.back() = 1;
    r = Tensor::full(s, 1, x.dtype(), x.device());
  }
  while (r.shape().back() > 1) {
    int64_t len = r.shape().back();
    if (len % 2) {
      Pairs p(nd, {0, 0});
      p.back() = {0, 1};
      r = r.pad(p, 1.0);
      len++;
    }
    Pairs lo, hi;
    for (int64_t j = 0; j < nd - 1; j++) {
      lo.push_back({0, r.shape()[j]});
      hi.push_back({0, r.shape()[j]});
    }
    lo.push_back({0, len / 2});
    hi.push_back({len / 2, len});
    r = r.shrink(lo).mul(r.shrink(hi));
  }
  return keepdim ? r : r.squeeze(-1);
}

}  // namespace detail

using namespace detail;

namespace {

// Computed in promote(a, b) and cast to torch.result_type: float16 ⊕ 0-d float32 runs in float32 and
// rounds once to float16, with the 0-d operand unrounded.
Tensor binary(Op op, const Tensor& a, const Tensor& b, bool bool_result = false) {
  if (bool_result && (a.requires_grad() || b.requires_grad()))  // a comparison carries no gradient (torch)
    return binary(op, a.requires_grad() ? a.detach() : a, b.requires_grad() ? b.detach() : b, true);
  DType dt = promote(a.dtype(), b.dtype());
  const Tensor operands[2] = {a.cast(dt), b.cast(dt)};
  // operands of one shape (most of a training step's) need no broadcast, nor its temporary lists
  Tensor r = operands[0].shape() == operands[1].shape()
                 ? primitive(op, operands, operands[0].shape(), bool_result ? DType::Bool : dt)
                 : [&] {
                     const std::vector<Tensor> ab = broadcast_all({operands[0], operands[1]});
                     return primitive(op, ab, ab[0].shape(), bool_result ? DType::Bool : dt);
                   }();
  return bool_result ? r : r.cast(result_type(a, b));
}

Tensor unary(Op op, const Tensor& x) {
  Tensor f = is_float(x.dtype()) ? x : x.cast(DType::Float32);
  return primitive(op, f, f.shape(), f.dtype());
}

// The number of chunks a full reduction of `x` over `axes` is split into (1: not split): float32
// tensors of at least 2^20 elements reduced over every axis, into 256 chunks (or the largest power of
// two down to 16 that divides the size). float16 is not split: its partials would round to float16.
constexpr int64_t kStreamingSum = int64_t{1} << 23;  // float32 elements (32 MiB) from which a full sum reads 4 streams
constexpr int64_t kStreams = 4;                      // a power of two

int64_t split_rows(const Tensor& x, const std::vector<int64_t>& axes) {
  if (x.dtype() != DType::Float32 || static_cast<int64_t>(axes.size()) != x.ndim() || x.numel() < (int64_t{1} << 20)) return 1;
  for (int64_t rows = 256; rows >= 16; rows /= 2)
    if (x.numel() % rows == 0) return rows;
  return 1;
}

Tensor reduce(Op op, const Tensor& x, const Axes& axes, bool keepdim) {
  std::vector<int64_t> ax = reduce_axes(x, axes);
  Tensor src = x.dtype() == DType::Bool ? x.cast(DType::Int32) : x;
  Shape kept = src.shape();
  for (int64_t a : ax) kept[a] = 1;
  Tensor r;
  if (ax.empty()) {
    r = src;
  } else if (src.numel() == 0 && op == Op::ReduceSum) {
    // an empty sum is 0 (with a gradient: the input's, zero-size, so that backward reaches it)
    Shape in_shape = src.shape();
    r = with_custom_backward({src}, [&] { return Tensor::zeros(kept, src.dtype(), src.device()); },
                             [in_shape](const Tensor&, const Tensor& g) { return std::vector<Tensor>{g.expand(in_shape)}; });
  } else if (src.numel() == 0 && op == Op::ReduceMax) {
    for (int64_t a : ax)
      if (src.shape()[a] == 0)
        throw std::runtime_error("max(): cannot reduce over a zero-size dimension of " + shape_text(src.shape()));
    r = src.reshape(kept);
  } else if (node(src).op == Op::Const) {
    // a broadcast constant: primitive() folds the reduce to a constant (value * count, or value); the
    // split and streaming forms below would materialize the constant first
    r = primitive(op, src, kept, src.dtype(), ax);
  } else if (op == Op::ReduceSum && src.device() == "C" && split_rows(src, ax) > 1 && src.numel() >= kStreamingSum &&
             src.numel() % (kStreams * 256) == 0) {
    // Streams: a single CPU core reading one array front to back is limited by how many cache misses
    // one hardware prefetch stream keeps in flight, not by the memory. Reading four places at once
    // (four quarters, added elementwise in the partial sums' loop) keeps four streams in flight: a sum
    // of 64 MiB takes 3.0 ms instead of 4.5 on this machine (PyTorch: 4.5; scripts/bench.py). Below
    // 32 MiB the data tends to sit in the cache, where the extra adds cost more than they save.
    const int64_t part = src.numel() / kStreams;
    Tensor flat = src.reshape({src.numel()});
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < kStreams; i++) parts.push_back(flat.shrink({{i * part, (i + 1) * part}}));
    while (parts.size() > 1) {  // a pairwise tree of elementwise adds
      std::vector<Tensor> next;
      for (size_t i = 0; i + 1 < parts.size(); i += 2) next.push_back(parts[i].add(parts[i + 1]));
      parts = std::move(next);
    }
    r = reduce(op, parts[0], std::vector<int64_t>{0}, false).reshape(kept);
  } else if (int64_t rows = split_rows(src, ax); rows > 1) {
    // SPLIT_REDUCEOP (tinygrad's _split_reduceop): a full reduction of a big float32 tensor runs in two
    // kernels — `rows` partial reductions of contiguous chunks (a global loop the CPU's threads share),
    // then one over the partials. A single kernel would have no output loop to parallelize.
    // (contiguous: the partials are stored, or the kernelizer would fuse both reductions back into one)
    Tensor partial = reduce(op, src.reshape({rows, src.numel() / rows}), std::vector<int64_t>{1}, false).contiguous();
    r = reduce(op, partial, std::vector<int64_t>{0}, false).reshape(kept);
  } else {
    r = primitive(op, src, kept, src.dtype(), ax);
  }
  if (keepdim) return r;
  return r.reshape(drop_axes(src.shape(), ax));
}

}  // namespace

int64_t Tensor::normalize_axis(int64_t axis) const {
  int64_t n = std::max<int64_t>(ndim(), 1);
  if (axis < -n || axis >= n)
    throw std::out_of_range("dimension out of range (expected to be in range of [" + std::to_string(-n) + ", " +
                            std::to_string(n - 1) + "], but got " + std::to_string(axis) + ")");
  return axis < 0 ? axis + n : axis;
}

// ---- elementwise ------------------------------------------------------------------------------

Tensor Tensor::add(const Tensor& x) const { return binary(Op::Add, *this, x); }
Tensor Tensor::mul(const Tensor& x) const { return binary(Op::Mul, *this, x); }
Tensor Tensor::sub(const Tensor& x) const { return add(x.neg()); }
Tensor Tensor::div(const Tensor& x) const {
  if (auto r = float16_rule([](const Tensor& a, const Tensor& b) { return a.div(b); }, *this, x)) return *r;
  // true division, as torch: integers divide as floats
  Tensor a = dtype() == DType::Float32 ? *this : cast(DType::Float32);
  return a.mul(x.reciprocal());
}
Tensor Tensor::maximum(const Tensor& x) const { return binary(Op::Max, *this, x); }
Tensor Tensor::minimum(const Tensor& x) const {
  // −max(−a, −b) in the operands' common dtype: −bool is logical_not, so a bool operand beside an int32 one
  // must be widened first (found by scripts/fuzz_ops.py: int32.minimum(bool) gave −1 for min(1, false))
  DType dt = promote(dtype(), x.dtype());
  if (dtype() != dt || x.dtype() != dt) return cast(dt).minimum(x.cast(dt)).cast(result_type(*this, x));
  return neg().maximum(x.neg()).neg();
}
Tensor Tensor::neg() const {
  if (dtype() == DType::Bool) return logical_not();
  // constant folding: −c is the constant −c (keeps graphs small, and the C renderer would print −(−1) as "--1")
  if (node(*this).op == Op::Const && !requires_grad())
    return Tensor::full(shape(), -node(*this).value, dtype(), device());
  return primitive(Op::Neg, *this, shape(), dtype());
}
// The unary primitives round once, but their backward rules compute with float16 values (2^x·ln 2):
// through float16_rule the gradient is computed in float32 too, as torch's Half backward kernels do.
Tensor Tensor::exp2() const {
  if (auto r = float16_rule(&Tensor::exp2, *this)) return *r;
  return unary(Op::Exp2, *this);
}
Tensor Tensor::log2() const {
  if (auto r = float16_rule(&Tensor::log2, *this)) return *r;
  return unary(Op::Log2, *this);
}
Tensor Tensor::exp() const {
  if (auto r = float16_rule(&Tensor::exp, *this)) return *r;
  return mul(kLog2E).exp2();  // e^x = 2^(x / ln 2)
}
Tensor Tensor::log() const {
  if (auto r = float16_rule(&Tensor::log, *this)) return *r;
  return log2().mul(kLn2);  // ln x = log2(x) · ln 2
}
Tensor Tensor::sin() const {
  if (auto r = float16_rule(&Tensor::sin, *this)) return *r;
  return unary(Op::Sin, *this);
}
Tensor Tensor::cos() const {
  if (auto r = float16_rule(&Tensor::cos, *this)) return *r;
  return scalar_like(M_PI / 2).sub(*this).sin();  // cos x = sin(π/2 − x)
}
Tensor Tensor::sqrt() const {
  if (auto r = float16_rule(&Tensor::sqrt, *this)) return *r;
  return unary(Op::Sqrt, *this);
}
Tensor Tensor::reciprocal() const {
  if (auto r = float16_rule(&Tensor::reciprocal, *this)) return *r;
  return unary(Op::Recip, *this);
}
// relu'(0) = 0 (the zero branch); NaN passes through (x != x selects x), as torch.
// The backward is PyTorch's threshold_backward: it reads relu's output (grad where out > 0, or out is
// NaN), not its input. The output is what the forward stores; the input, in x @ W.T + b then relu, is
// a matmul fused into relu's kernel, and a backward reading it would compute that matmul again.
Tensor Tensor::relu() const {
  if (auto r = float16_rule(&Tensor::relu, *this)) return *r;
  Tensor x = *this;
  return with_custom_backward(
      {x},
      [&] {
        Tensor zero = x.scalar_like(0);
        return x.gt(zero).where(x, x.ne(x).where(x, zero));
      },
      [](const Tensor& out, const Tensor& g) {
        return std::vector<Tensor>{out.le(out.scalar_like(0)).where(g.scalar_like(0), g)};
      });
}
Tensor Tensor::sigmoid() const {
  if (auto r = float16_rule(&Tensor::sigmoid, *this)) return *r;
  // forward 1 / (1 + e^-x) saturates cleanly to 0 or 1; the backward σ(1 − σ) avoids the 0·inf of the
  // chain rule through exp in the tails (PyTorch's sigmoid_backward)
  // e^-x as 2^(x · −log2 e): the same float32 values as neg().exp(), one node fewer
  Tensor x = *this;
  return with_custom_backward({x}, [&] { return x.mul(-kLog2E).exp2().add(1.0).reciprocal(); },
                              [](const Tensor& s, const Tensor& g) { return std::vector<Tensor>{g.mul(s).mul(s.scalar_like(1).sub(s))}; });
}
Tensor Tensor::tanh() const {
  if (auto r = float16_rule(&Tensor::tanh, *this)) return *r;
  // forward 2σ(2x) − 1; the backward g·(1 − tanh²) from the output (PyTorch's tanh_backward): three nodes,
  // where the chain rule through the forward's ops built seven
  Tensor x = *this;
  return with_custom_backward({x}, [&] { return x.mul(2.0).sigmoid().mul(2.0).sub(1.0); },
                              [](const Tensor& y, const Tensor& g) { return std::vector<Tensor>{g.mul(y.scalar_like(1).sub(y.mul(y)))}; });
}
Tensor Tensor::abs() const {
  if (auto r = float16_rule(&Tensor::abs, *this)) return *r;
  return relu().add(neg().relu());
}
Tensor Tensor::square() const {
  if (auto r = float16_rule(&Tensor::square, *this)) return *r;
  return mul(*this);
}
Tensor Tensor::lt(const Tensor& x) const { return binary(Op::CmpLt, *this, x, true); }
Tensor Tensor::gt(const Tensor& x) const { return binary(Op::CmpLt, x, *this, true); }
Tensor Tensor::eq(const Tensor& x) const { return binary(Op::CmpEq, *this, x, true); }
Tensor Tensor::ne(const Tensor& x) const { return eq(x).logical_not(); }
// not "!(a > b)": comparisons with NaN are false, as in IEEE and torch
Tensor Tensor::le(const Tensor& x) const { return lt(x).logical_or(eq(x)); }
Tensor Tensor::ge(const Tensor& x) const { return gt(x).logical_or(eq(x)); }
Tensor Tensor::logical_not() const {
  Tensor b = dtype() == DType::Bool ? *this : cast(DType::Bool);
  return binary(Op::CmpEq, b, Tensor::scalar(0, DType::Bool, device()), true);
}
Tensor Tensor::where(const Tensor& a, const Tensor& b) const {
  Tensor cond = dtype() == DType::Bool ? *this : cast(DType::Bool);
  DType dt = promote(a.dtype(), b.dtype());  // as binary: selects in promote(a, b), cast to torch.result_type
  auto all = broadcast_all({cond, a.cast(dt), b.cast(dt)});
  return primitive(Op::Where, all, all[0].shape(), dt).cast(result_type(a, b));
}
Tensor Tensor::cast(DType dt) const {
  if (dt == dtype()) return *this;
  // int32 and bool values carry no gradient (torch: the cast's output does not require grad); without the
  // detach the gradient flowed back through .int() (found by scripts/fuzz_ops.py)
  if (!is_float(dt) && requires_grad()) return detach().cast(dt);
  require_dtype(node(*this).device, dt);
  return primitive(Op::Cast, *this, shape(), dt);
}

// ---- reductions ---------------------------------------------------------------------------------

Tensor Tensor::sum(const Axes& axes, bool keepdim) const { return reduce(Op::ReduceSum, *this, axes, keepdim); }
Tensor Tensor::max(const Axes& axes, bool keepdim) const { return reduce(Op::ReduceMax, *this, axes, keepdim); }
Tensor Tensor::min(const Axes& axes, bool keepdim) const { return neg().max(axes, keepdim).neg(); }
Tensor Tensor::mean(const Axes& axes, bool keepdim) const {
  if (auto r = float16_rule(&Tensor::mean, *this, axes, keepdim)) return *r;
  Tensor s = (dtype() == DType::Float32 ? *this : cast(DType::Float32)).sum(axes, keepdim);
  int64_t count = s.numel() ? numel() / s.numel() : 0;
  return count ? s.mul(1.0 / static_cast<double>(count)) : s.mul(fnan(s));
}
Tensor Tensor::softmax(int64_t axis) const {
  if (auto r = float16_rule(&Tensor::softmax, *this, axis)) return *r;
  // a zero-size axis: nothing to normalize, the result is empty like the input (the max would reject the axis)
  if (ndim() > 0 && shape()[normalize_axis(axis)] == 0) return mul(1.0);
  // subtracting the (detached) max keeps exp from overflowing; it cancels in the quotient
  Tensor m = sub(max(std::vector<int64_t>{axis}, true).detach());
  Tensor e = m.exp();
  return e.div(e.sum(std::vector<int64_t>{axis}, true));
}
Tensor Tensor::log_softmax(int64_t axis) const {
  if (auto r = float16_rule(&Tensor::log_softmax, *this, axis)) return *r;
  if (ndim() > 0 && shape()[normalize_axis(axis)] == 0) return mul(1.0);  // empty, as softmax
  Tensor m = sub(max(std::vector<int64_t>{axis}, true).detach());
  return m.sub(m.exp().sum(std::vector<int64_t>{axis}, true).log());
}
Tensor Tensor::logsumexp(const Axes& axes, bool keepdim) const {
  if (auto r = float16_rule(&Tensor::logsumexp, *this, axes, keepdim)) return *r;
  // an infinite max is replaced by 0 so that x − m stays defined (all −inf gives −inf, any +inf gives +inf)
  std::vector<int64_t> ax = reduce_axes(*this, axes);
  for (int64_t a : ax)
    if (shape()[a] == 0) {  // an empty sum of exponentials: log 0 = −inf
      Shape s = keepdim ? shape() : drop_axes(shape(), ax);
      if (keepdim) for (int64_t b : ax) s[b] = 1;
      Shape in = shape();
      return with_custom_backward(
          {*this}, [&] { return Tensor::full(s, -std::numeric_limits<double>::infinity(), DType::Float32, device()); },
          [in](const Tensor&, const Tensor& g) { return std::vector<Tensor>{Tensor::zeros(in, DType::Float32, g.device())}; });
    }
  // the max clamped to ±FLT_MAX: an infinite max would make x − m NaN; with the clamp, all −inf gives −inf
  // and any +inf gives +inf
  const double big = std::numeric_limits<float>::max();
  Tensor m = max(axes, true).detach().maximum(scalar_like(-big)).minimum(scalar_like(big));
  // the shift added back after the SUM reads m through fresh (no-op) movement nodes: works around a lowering
  // bug (ir/lower.cpp) that reuses a load first made inside the reduce loop after that loop
  Tensor r = sub(m).exp().sum(axes, true).log().add(m.unsqueeze(0).squeeze(0));
  if (keepdim) return r;
  return r.reshape(drop_axes(shape(), ax));
}

// ---- movement -----------------------------------------------------------------------------------

Tensor Tensor::reshape(const Shape& new_shape) const {
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < new_shape.size(); i++) {
    if (new_shape[i] == -1) {
      // torch and tinygrad: RuntimeError ("only one dimension can be inferred")
      if (infer >= 0) throw std::runtime_error("reshape: only one dimension can be inferred (-1) in " + shape_text(new_shape));
      infer = static_cast<int64_t>(i);
    } else if (new_shape[i] < 0) {
      throw std::runtime_error("reshape: invalid dimension " + std::to_string(new_shape[i]) + " in " + shape_text(new_shape));
    } else {
      known *= new_shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel() % known != 0)
      throw std::invalid_argument("reshape: cannot reshape " + shape_text(shape()) + " to " + shape_text(new_shape));
    Shape s = new_shape;
    s[infer] = numel() / known;
    return reshape(s);
  }
  if (shape_numel(new_shape) != numel())
    throw std::invalid_argument("reshape: cannot reshape " + shape_text(shape()) + " (" + std::to_string(numel()) +
                                " elements) to " + shape_text(new_shape));
  if (new_shape == shape()) return *this;
  return primitive(Op::Reshape, *this, new_shape, dtype(), new_shape);
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  if (static_cast<int64_t>(order.size()) != ndim())
    throw std::runtime_error("permute: order " + shape_text(order) + " does not match the " + std::to_string(ndim()) + " dims of " + shape_text(shape()));
  std::vector<int64_t> o(order.size());
  SmallVector<bool, 8> seen(order.size(), false);
  bool identity = true;
  for (size_t i = 0; i < order.size(); i++) {
    o[i] = normalize_axis(order[i]);
    if (seen[o[i]]) throw std::runtime_error("permute: " + shape_text(order) + " is not a permutation");
    seen[o[i]] = true;
    identity = identity && o[i] == static_cast<int64_t>(i);
  }
  if (identity) return *this;
  Shape s(o.size());
  for (size_t i = 0; i < o.size(); i++) s[i] = shape()[o[i]];
  return primitive(Op::Permute, *this, s, dtype(), o);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  std::vector<int64_t> order(ndim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[normalize_axis(dim0)], order[normalize_axis(dim1)]);
  return permute(order);
}

Tensor Tensor::expand(const Shape& new_shape) const {
  if (new_shape.size() < shape().size())
    throw std::invalid_argument("expand: cannot expand " + shape_text(shape()) + " to fewer dims " + shape_text(new_shape));
  size_t lead = new_shape.size() - shape().size();
  Shape padded;
  padded.reserve(new_shape.size());
  padded.resize(lead, 1);
  padded.insert(padded.end(), shape().begin(), shape().end());
  Shape s = new_shape;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == -1) s[i] = padded[i];
    if (padded[i] != s[i] && padded[i] != 1)
      throw std::invalid_argument("expand: cannot expand " + shape_text(shape()) + " to " + shape_text(new_shape) +
                                  " (dim " + std::to_string(i) + " is " + std::to_string(padded[i]) + ", not 1)");
  }
  Tensor t = lead ? reshape(padded) : *this;
  if (s == t.shape()) return t;
  return primitive(Op::Expand, t, s, dtype(), s);
}

// PAD fills with zeros; another value is selected with WHERE on a padded all-true mask (a multiply
// would turn 0·inf into NaN). Negative amounts crop, as a SHRINK after the pad.
Tensor Tensor::pad(const std::vector<std::pair<int64_t, int64_t>>& padding, double value) const {
  if (static_cast<int64_t>(padding.size()) != ndim())
    throw std::invalid_argument("pad: " + std::to_string(padding.size()) + " (before, after) pairs for " +
                                std::to_string(ndim()) + " dims of " + shape_text(shape()));
  std::vector<int64_t> arg;
  Shape s;
  Pairs crop;
  arg.reserve(2 * padding.size());
  s.reserve(padding.size());
  crop.reserve(padding.size());
  bool any = false, any_crop = false;
  for (size_t i = 0; i < padding.size(); i++) {
    auto [b, a] = padding[i];
    int64_t pb = std::max<int64_t>(b, 0), pa = std::max<int64_t>(a, 0);
    arg.push_back(pb);
    arg.push_back(pa);
    s.push_back(shape()[i] + pb + pa);
    any = any || pb || pa;
    int64_t cb = std::max<int64_t>(-b, 0), ca = std::max<int64_t>(-a, 0);
    if (cb + ca > shape()[i])
      throw std::invalid_argument("pad: padding (" + std::to_string(b) + ", " + std::to_string(a) + ") crops more than the size " +
                                  std::to_string(shape()[i]) + " of dim " + std::to_string(i));
    crop.push_back({cb, s.back() - ca});
    any_crop = any_crop || cb || ca;
  }
  Tensor out = *this;
  if (any && numel() == 0) {
    // padding nothing is a constant (also sidesteps the view index math dividing by the zero-size dim)
    Shape in = shape();
    out = with_custom_backward({*this}, [&] { return Tensor::full(s, value, dtype(), device()); },
                               [in](const Tensor&, const Tensor& g) { return std::vector<Tensor>{Tensor::zeros(in, DType::Float32, g.device())}; });
  } else if (any) {
    out = primitive(Op::Pad, *this, s, dtype(), arg);
    if (value != 0) {
      Pairs grow;
      for (size_t i = 0; i < padding.size(); i++) grow.push_back({arg[2 * i], arg[2 * i + 1]});
      Tensor inside = Tensor::full(shape(), 1, DType::Bool, device()).pad(grow);
      out = inside.where(out, Tensor::scalar(value, dtype(), device()));
    }
  }
  return any_crop ? out.shrink(crop) : out;
}

Tensor Tensor::shrink(const std::vector<std::pair<int64_t, int64_t>>& bounds) const {
  if (static_cast<int64_t>(bounds.size()) != ndim())
    throw std::invalid_argument("shrink: " + std::to_string(bounds.size()) + " (start, end) pairs for " + std::to_string(ndim()) + " dims");
  std::vector<int64_t> arg;
  Shape s;
  arg.reserve(2 * bounds.size());
  s.reserve(bounds.size());
  bool any = false;
  for (size_t i = 0; i < bounds.size(); i++) {
    auto [b, e] = bounds[i];
    if (b < 0 || e > shape()[i] || b > e)
      throw std::invalid_argument("shrink: bounds (" + std::to_string(b) + ", " + std::to_string(e) + ") invalid for dim " +
                                  std::to_string(i) + " of size " + std::to_string(shape()[i]));
    arg.push_back(b);
    arg.push_back(e);
    s.push_back(e - b);
    any = any || b != 0 || e != shape()[i];
  }
  if (!any) return *this;
  return primitive(Op::Shrink, *this, s, dtype(), arg);
}

Tensor Tensor::flip(const std::vector<int64_t>& axes) const {
  std::vector<int64_t> flags(ndim(), 0);
  for (int64_t a : axes) {
    int64_t n = normalize_axis(a);
    if (flags[n]) throw std::runtime_error("flip: dim " + std::to_string(a) + " appears more than once");
    flags[n] = 1;
  }
  if (std::none_of(flags.begin(), flags.end(), [](int64_t f) { return f; })) return *this;
  return primitive(Op::Flip, *this, shape(), dtype(), flags);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (ndim() == 0) return reshape({1});
  int64_t s = normalize_axis(start_dim), e = normalize_axis(end_dim);
  Shape out(shape().begin(), shape().begin() + s);
  int64_t mid = 1;
  for (int64_t i = s; i <= e; i++) mid *= shape()[i];
  out.push_back(mid);
  out.insert(out.end(), shape().begin() + e + 1, shape().end());
  return reshape(out);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  int64_t n = ndim() + 1;
  if (dim < -n || dim >= n) throw std::out_of_range("unsqueeze: dim " + std::to_string(dim) + " out of range for " + std::to_string(ndim()) + " dims");
  if (dim < 0) dim += n;
  Shape s = shape();
  s.insert(s.begin() + dim, 1);
  return reshape(s);
}

Tensor Tensor::squeeze(std::optional<int64_t> dim) const {
  Shape s;
  if (!dim) {
    for (int64_t d : shape())
      if (d != 1) s.push_back(d);
  } else {
    int64_t a = normalize_axis(*dim);
    s = shape();
    if (!s.empty() && s[a] == 1) s.erase(s.begin() + a);
  }
  return reshape(s);
}

namespace {
// Copies of views of realized buffers made by contiguous() since the last realize, by view_key (tinygrad
// shares them by hash-consing its graph). A weight that several matmuls read through the same view is copied
// once: an RNN's recurrent weight, read transposed once a step (h @ W.T), was copied into the register tile's
// layout once a step, the same copy 20 times a step (a GRU: 20 x 0.02 ms and 19 launches).
struct ViewCopy {
  std::vector<int64_t> key;
  NodeRef copy;
};
std::vector<ViewCopy>& view_copies() {
  static std::vector<ViewCopy> copies;
  return copies;
}

// A chain of movement ops down to a realized buffer, as the buffer node's id, then each op with its argument and
// shape, from the top; empty when the chain reaches anything else (a computed value: copies of those are not
// shared, their sources could be anything).
std::vector<int64_t> view_key(const Graph& g, NodeId id) {
  std::vector<int64_t> key;
  while (!g[id].realized()) {
    const Node& n = g[id];
    if (!is_movement(n.op) || n.num_src != 1) return {};
    key.push_back(static_cast<int64_t>(n.op));
    key.push_back(static_cast<int64_t>(n.arg.size()));
    key.insert(key.end(), n.arg.begin(), n.arg.end());
    key.push_back(static_cast<int64_t>(n.shape.size()));
    key.insert(key.end(), n.shape.begin(), n.shape.end());
    id = n.src[0];
  }
  key.push_back(static_cast<int64_t>(id));  // the node stays alive (the copy holds its chain) until forgotten
  return key;
}
}  // namespace

void forget_view_copies() { view_copies().clear(); }

Tensor Tensor::contiguous() const {
  const Node& n = node(*this);  // a realized node is a BUFFER holding exactly its own shape (Graph::set_realized)
  if (n.realized() && n.buffer->numel == numel()) return *this;
  // a view of a realized buffer copied before since the last realize: that copy (without autograd history, so
  // only where none is recorded)
  if (grad_enabled() && requires_grad()) return clone();
  std::vector<int64_t> key = view_key(Graph::get(), node_of(*this));
  if (key.empty()) return clone();
  // a copy realized since (by a realize that did not go through realize_all) holds the buffer's value of then
  std::vector<ViewCopy>& copies = view_copies();
  copies.erase(std::remove_if(copies.begin(), copies.end(), [](const ViewCopy& c) { return c.copy.node().realized(); }),
               copies.end());
  for (const ViewCopy& c : copies)
    if (c.key == key) return tensor_from_node(c.copy.id());
  Tensor copy = clone();
  copies.push_back({std::move(key), NodeRef(node_of(copy))});
  return copy;
}
Tensor Tensor::clone() const { return primitive(Op::Contiguous, *this, shape(), dtype()); }

// ---- linear algebra and nn ------------------------------------------------------------------------

// Panel packing for the CPU (the "packing" step of Goto & van de Geijn, "Anatomy of High-Performance
// Matrix Multiplication", 2008, that every BLAS does). In a row-major w (K, N), the NR columns one
// register tile reads are K rows apart: for N = 1024 every row of the panel is 4 KiB from the next,
// so they all land in the same L1 cache set and evict each other. Copying w once into panels
// (N/NR, K, NR) puts each panel's K·NR floats one after another. It costs one extra kernel that reads
// and writes w once (O(K·N)) for a matmul that reads it M times, so it is only done when M is large enough to
// amortize it and w large enough to conflict: from 1 MiB with AVX-512 (measured on Zen 4), from 64 KiB with
// AVX2, whose tiles of 16 columns make a panel of K lines (Zen 3, 1 thread: (512, 128) @ (128, 512), whose
// panel rows are 2 KiB apart and fall into 2 of L1's 64 sets: 0.86 -> 0.73 ms a call, the copies included;
// (1024, 1024) @ (1024, 1024): 76-79 GFLOP/s in panels of 32 with 8 x 8 tiles, 95 in panels of 16 with 6 x 16).
// GPUs have no use for it.
constexpr int64_t kPanelWidth = 32;  // NR at most: the width upcast_global unrolls, two AVX-512 vectors
constexpr int64_t kPanelRows = 8;    // MR of AVX-512's tile (register_tile), the rows x is packed in there
constexpr int64_t kPaddedWidth = 16; // a padded copy of w has a multiple of this many columns (one AVX-512 vector)
// the smallest w width and product that copies_transposed_x copies a transposed x for (below, the copy's launch
// costs about what it saves)
constexpr int64_t kTransposedXMinColumns = 64;
constexpr int64_t kTransposedXMinMacs = int64_t{1} << 21;

// NR for the C device: two of its vector registers of floats, at most kPanelWidth (16 with AVX2)
int64_t detail::panel_width() {
  static const int64_t width = [] {
    const DeviceProperties p = DeviceRegistry::properties(DeviceRegistry::index("C"));
    return std::min<int64_t>(kPanelWidth, 2 * std::max<int64_t>(4, p.vector_bytes / 4));
  }();
  return width;
}
// The smallest w (bytes) matmul packs into panels (see above)
static int64_t panel_min_bytes() { return panel_width() == kPanelWidth ? int64_t{1} << 20 : int64_t{64} << 10; }

// The width a padded copy of w (K, N) gets, when 16 does not divide N: N rounded up to one vector (16), or,
// from 64 columns on and for K below kWidePanelMaxK, to two (32), so that upcast_global takes 32 outputs per
// trip. Measured with 1 thread (2026-11-27, M = 64 or 100, N = 100 to 1000): for K of 300 and 400 the
// 32-wide tiles ran 26-37% faster than the 16-wide ones in spite of their extra columns ((100, 300) @ 300 →
// 320: 164 us against 260 for 304), for K of 512 to 2048 they ran 5-38% slower ((100, 784) @ 784 → 300: 427
// us padded to 320, 408 to 304; (64, 1000) @ 1000 → 1000: 1777 us against 1291).
constexpr int64_t kWidePanelMaxK = 512;
int64_t padded_width(int64_t n, int64_t k) {
  if (n % kPaddedWidth == 0) return n;  // whole vectors already: no copy
  const int64_t multiple = n >= 64 && k < kWidePanelMaxK ? panel_width() : kPaddedWidth;
  return (n + multiple - 1) / multiple * multiple;
}

// the weight size from which a Linear's weight gradient is stored by its matmul (see weight_gradient)
constexpr int64_t kWeightGradStoreMinBytes = int64_t{1} << 20;

Tensor weight_gradient(const Tensor& a, const Tensor& b, bool stored_transposed) {
  const int64_t k = a.shape()[1], n = b.shape()[1];
  Tensor dw;
  if (stored_transposed) {
    dw = b.transpose(0, 1).matmul(a);
    // Fused into the optimizer's update (one multi-output kernel), the update's loads and stores of W
    // and its state follow the register tile: 32-column strips, each row in a page of its own, which
    // no prefetcher follows. From cache that costs nothing; a weight beyond a core's L2 share is read
    // from memory (after a convolution's megabytes of im2col) and the kernel waits on it (Caffe's
    // LeNet's (500, 800) with SGD's momentum: 1.9 ms, 27 GFLOP/s). Stored by the matmul instead, the
    // update streams it: 1.9 ms -> 0.56 + 0.41 ms in the step.
    if (k * n * 4 >= kWeightGradStoreMinBytes) dw = dw.contiguous();
    dw = dw.transpose(0, 1);
  } else {
    dw = a.transpose(0, 1).matmul(b);
  }
  note_matmul_gradient(dw, a, b, stored_transposed);
  return dw;
}

namespace {

// True when matmul(x, w) on `device` packs w into panels (N/NR, K, NR) first: device "C", w (K, N)
// with N a multiple of NR (panel_width) and at least panel_min_bytes, x with at least 64 rows, its batch
// dims folded in (a transformer's (B, T, D) @ (D, N) reads w's panels B·T times).
bool packs_panels(const Shape& x, const Shape& w, const std::string& device) {
  if (device != "C" || w.size() != 2 || x.size() < 2) return false;
  const int64_t k = w[0], n = w[1];
  int64_t m = 1;
  for (size_t d = 0; d + 1 < x.size(); d++) m *= x[d];
  return n % panel_width() == 0 && k * n * 4 >= panel_min_bytes() && m >= 64;
}

// True when t is a transpose of its last two axes (t.transpose(-1, -2) of a tensor that is not itself one: a
// transpose of a transpose, the backward's g @ wᵀ for w = W.T, reads W as it is stored)
bool is_transpose(const Tensor& t) {
  if (t.ndim() < 2) return false;
  const Node& n = node(t);
  const size_t nd = static_cast<size_t>(t.ndim());
  std::vector<int64_t> swap(nd);  // the identity on the batch axes, the last two swapped
  for (size_t d = 0; d < nd; d++) swap[d] = static_cast<int64_t>(d);
  std::swap(swap[nd - 1], swap[nd - 2]);
  const Graph& g = Graph::get();
  return n.op == Op::Permute && n.arg == swap && !(g[n.src[0]].op == Op::Permute && g[n.src[0]].arg == swap);
}

// x @ Wᵀ, as nn.Linear computes it: W (N, K) is read through a transposed view, so every output
// is a dot product of two K-contiguous rows. Such a kernel can only split its sum over K
// (upcast_reduce), and a dot product per output is bound by the latency of its final horizontal add
// (128×64 @ 64×128: 0.16 ms). Copying W once into a contiguous (K, N) costs one small kernel
// (K·N floats) and lets register_tile compute 8×32 outputs per step from the same loads (0.02 ms),
// the layout change a BLAS makes when it packs a transposed operand. Done on the C device when w is
// a transpose, N is at least 16 (9 for a head, below) and x has at least 16 rows; larger w go through
// packs_panels.
// A batched w (..., K, N) that is a transpose of its last two axes (attention's q @ kᵀ) is copied too
// when N is at least 8: the dot products of its small matrices (12×12 outputs over K = 8 per head in
// samples/transformer_tiny.py) are not vectorized by the C compiler at all (0.043 ms), the copied
// layout gives each output row one contiguous load of N values per step of K.
// A 2-D w of 9 to 15 columns (a classifier head: 10 digits, an 11-token vocabulary) is copied too, padded to
// 16 (Tensor::matmul): one unmasked vector of outputs per row and a register tile, where each output was a dot
// product of K (measured alone, 1 thread, Zen 4, the copy included: (64, 84) @ 84 -> 10: 4.1 -> 2.0 us, (128,
// 256) -> 10: 14.0 -> 10.4, (384, 32) -> 11: 10.6 -> 4.0, (512, 128) -> 11: 40.5 -> 19.1).
constexpr int64_t kShortHeadMin = 9;
bool copies_transposed_w(const Shape& x, const Tensor& w) {
  if (w.device() != "C" || w.ndim() < 2 || x.size() < 2) return false;
  const size_t nd = static_cast<size_t>(w.ndim());
  const bool transposed = is_transpose(w);
  int64_t rows = 1;  // x's rows with its batch dims folded in: (B, T, K) @ (K, N) is a (B·T, K) @ (K, N)
  for (size_t d = 0; d + 1 < x.size(); d++) rows *= x[d];
  return transposed && w.shape()[nd - 1] >= (nd == 2 ? kShortHeadMin : 8) && rows >= 16;
}

// True when matmul(x, w) on the C device copies a 2-D x (M, K) that is a transpose (a weight gradient's gᵀ)
// contiguous before the register-tiled product: M a multiple of 512 (the lines a tile reads in K steps, M·4
// bytes apart, then fall into 2 of L1's 64 sets, or 1), w (K, N) at least kTransposedXMinColumns wide, at least
// kTransposedXMinMacs multiply-adds. Measured alone, from the caches (Zen 3, 1 thread, the copy included): gᵀ
// (120, 64) @ (64, 400) 78 -> 77 GFLOP/s, (300, 100) @ (100, 784) 94 -> 93; (128, 512) @ (512, 512) 82 -> 90,
// (256, 128) @ (128, 512) 87 -> 91, (512, 128) @ (128, 784) 81 -> 96 (on a Xeon with AVX-512, in the MLP's
// step: 54-57 GFLOP/s uncopied). Rows that spread over 4 sets or more (M = 128, 256, 384) gain a few percent
// alone, and in a training step lose more than that to the copy itself: the gradient is fresh in the caches
// but the copy's output buffer is not, and it costs 3 to 5 times what it costs alone. The sixtieth session's
// Zen 4 (1 thread, medians over 10 steps, in the step): d128's qkv weight gradient gᵀ (384, 512) @ (512, 128)
// 0.49 ms + 0.10-0.17 ms for the copy, against 0.48-0.55 ms uncopied; its attention projection's (128, 512)
// @ (512, 128) 0.18 + 0.02-0.09 against 0.18-0.19; the MLP's (256, 128) @ (128, 512) 0.31 + 0.05 against 0.31.
bool copies_transposed_x(const Tensor& x, const Tensor& w) {
  if (x.device() != "C" || x.ndim() != 2 || w.ndim() != 2 || !is_transpose(x)) return false;
  const int64_t m = x.shape()[0], k = x.shape()[1], n = w.shape()[1];
  return m % 512 == 0 && n >= kTransposedXMinColumns && m * k * n >= kTransposedXMinMacs;
}

// True when matmul(x, w) on the C device copies a w (K, N) that is not a transpose padded to whole vectors
// (padded_width; see Tensor::matmul): N over 16 and no multiple of it, x with at least 16 rows, and at least
// kPadMinMacs multiply-adds. Below that the masked tile (PADTO) costs less than two more launches, the copy
// and the crop (LeNet's 64 × 84 × 120 gradients: 20 → 26 kernels a step for 0.02 ms less kernel time).
constexpr int64_t kPadMinMacs = int64_t{1} << 21;
bool pads_width(const Shape& x, const Tensor& w) {
  if (w.device() != "C" || w.ndim() != 2 || x.size() < 2) return false;
  const int64_t k = w.shape()[0], n = w.shape()[1];
  int64_t rows = 1;  // x's rows with its batch dims folded in
  for (size_t d = 0; d + 1 < x.size(); d++) rows *= x[d];
  return n > kPaddedWidth && padded_width(n, k) != n && rows >= 16 && rows * k * n >= kPadMinMacs;
}

// True when matmul(x, w) on the C device copies w contiguous first: a view of w whose neighbours are apart
// along both of its last two axes (a column slice with a step, w[:, ::2]). The register tile reads N
// neighbouring elements of w per step of K, the dot form K neighbours per output; neither is contiguous
// there, and the kernel stays scalar (256² @ w[:, ::2]: 6.8 ms; copied first, 0.17 ms in all). A transpose
// (stride 1 along K) is copies_transposed_w's case, a broadcast (stride 0) is read once per value anyway.
bool strided_in_both_axes(const Tensor& w) {
  if (w.device() != "C" || w.ndim() < 2) return false;
  const Graph& g = Graph::get();
  std::vector<NodeId> chain;
  NodeId base = w.impl()->node.id();
  while (!g[base].realized() && is_movement(g[base].op)) {
    chain.push_back(base);
    base = g[base].src[0];
  }
  if (chain.empty()) return false;
  // the distance in memory from element 0 to its neighbour along an axis (a slice with a step is a pad, a
  // reshape and a shrink: two views, whose composition index_of evaluates); none when either is masked
  const ViewStack vs = compose_views(g, chain, g[base].shape);
  const size_t nd = vs.shape().size();
  std::vector<int64_t> idx(nd, 0);
  const int64_t origin = vs.index_of(idx);
  auto apart = [&](size_t axis) {
    if (vs.shape()[axis] < 2 || origin < 0) return false;
    idx.assign(nd, 0);
    idx[axis] = 1;
    const int64_t next = vs.index_of(idx);
    return next >= 0 && std::abs(next - origin) > 1;  // not neighbours, and not a broadcast (0)
  };
  return apart(nd - 1) && apart(nd - 2);
}

// Shapes whose backward is written as two matmuls (Tensor::matmul): x (..., M, K) @ w (K, N), or x and w
// with the same batch dims (no broadcasting, whose gradient would also need a sum over the broadcast
// dims). Other shapes (1-D operands, broadcast batches) take the chain rule through the primitives.
bool has_matmul_backward(const Shape& x, const Shape& w) {
  if (x.size() < 2 || w.size() < 2) return false;
  if (w.size() == 2) return true;
  return x.size() == w.size() && std::equal(x.begin(), x.end() - 2, w.begin());
}

}  // namespace

Tensor Tensor::matmul(const Tensor& w) const {
  // float16: the products and their sum in float32 (a float16 product is exact there), one rounding
  if (auto r = float16_rule(&Tensor::matmul, *this, w)) return *r;
  int64_t n1 = ndim(), n2 = w.ndim();
  if (n1 == 0 || n2 == 0)
    throw std::runtime_error("matmul: both arguments need at least 1 dimension, got " + shape_text(shape()) + " and " + shape_text(w.shape()));
  int64_t k_w = w.shape()[std::max<int64_t>(n2 - 2, 0)];
  if (shape().back() != k_w)
    throw std::runtime_error("matmul: shapes " + shape_text(shape()) + " and " + shape_text(w.shape()) +
                             " cannot be multiplied (" + std::to_string(shape().back()) + " != " + std::to_string(k_w) + ")");
  if (grad_enabled() && (requires_grad() || w.requires_grad()) && has_matmul_backward(shape(), w.shape())) {
    // PyTorch's matmul backward: the gradients are matmuls again (dx = g @ wᵀ, dw = xᵀ @ g), so they go
    // through this function and get the same layouts (packed panels, transposed copies) and the same
    // register-tiled kernels as the forward. The chain rule through reshape/expand/mul/sum would give
    // the same values as reductions over the batch axis in whatever layout the forward left behind
    // (the weight gradient of x @ w with x packed into panels ran at 2.6 GFLOP/s).
    const Tensor x = *this;
    return with_custom_backward({x, w}, [&] { return x.matmul(w); }, [x, w](const Tensor&, const Tensor& g) {
      const int64_t k = x.shape().back(), n = w.shape().back();
      int64_t m = 1;  // the rows of x with its batch dims folded in (not -1: a size-0 k leaves it ambiguous)
      for (size_t d = 0; d + 1 < x.shape().size(); d++) m *= x.shape()[d];
      Tensor dx = g.matmul(w.transpose(-1, -2));
      // w = W.T (nn.Linear): the gradient is computed as (gᵀ @ x)ᵀ, so that it is stored in W's own layout
      const Tensor dw = w.ndim() != 2 ? x.transpose(-1, -2).matmul(g)
                                      : weight_gradient(x.reshape({m, k}), g.reshape({m, n}), node(w).op == Op::Permute);
      return std::vector<Tensor>{dx, dw};
    });
  }
  if (n1 >= 2 && n2 == 2 && packs_panels(shape(), w.shape(), device())) return matmul_packed(w);
  // x @ (w copied with zero columns up to padded_width, contiguous), its extra columns cropped
  auto matmul_padded = [&](const Tensor& w2d) {
    const int64_t n = w2d.shape()[1];
    Pairs keep;
    for (int64_t d = 0; d < n1 - 1; d++) keep.push_back({0, shape()[static_cast<size_t>(d)]});
    keep.push_back({0, n});
    const Tensor padded = w2d.pad({{0, 0}, {0, padded_width(n, w2d.shape()[0]) - n}});
    // A padded w that is packed into panels is packed straight from the padded view: one copy (pad,
    // transpose and panels in one kernel) instead of the padded copy and then the panels (Caffe's LeNet's
    // (500, 800) weight: 0.43 + 0.17 ms in the step as two copies)
    const Tensor product = packs_panels(shape(), padded.shape(), device()) ? matmul_packed(padded) : matmul(padded.contiguous());
    return product.contiguous().shrink(keep);  // stored whole-width: fused, the crop would narrow the loop again
  };
  if (n1 >= 2 && n2 >= 2 && copies_transposed_w(shape(), w)) {
    // A width that 16 does not divide (LeNet's 120 and 84) is copied padded with zero columns to the next
    // multiple of 16, as a BLAS pads its packed panels to the register tile's width: the matmul then runs
    // unmasked and its extra columns are cropped. PADTO would mask them instead, and with the Linear's
    // bias added in the same kernel gcc vectorized the masked tile lane by lane: (64, 400) @ 120 + b took
    // 264 us masked, 60 us padded (+ 2 us for the bias in a kernel of its own).
    const int64_t n = w.shape().back();
    if (n2 == 2 && padded_width(n, w.shape()[0]) != n) return matmul_padded(w);  // 9 to 15 columns too: to 16
    return matmul(w.contiguous());
  }
  if (n1 >= 2 && n2 == 2 && pads_width(shape(), w)) {
    // The same padding for a w that is not a transpose (a layer's input in its weight gradient, a 300-wide
    // activation; a convolution's weight in its col2im input gradient): copied once, padded with zero
    // columns, the matmul unmasked, its extra columns cropped. A convolution's weight gradient into 50
    // channels (Caffe's LeNet: (500, 4096) @ (4096, 50)) ran masked at 24 GFLOP/s (conv_weight_grad now
    // computes that one the other way round, with the taps as the vector axis).
    return matmul_padded(w);
  }
  if (n1 >= 2 && n2 >= 2 && strided_in_both_axes(w)) return matmul(w.contiguous());
  // A transposed x read in place by the register tile has the rows of its MR neighbours K·4 bytes apart in
  // memory, as matmul_packed describes; on a w that is not packed (AVX-512's panels of 32 do not divide 784
  // columns: the MLP's first weight gradient, (512, 128) @ (128, 784)) it is copied contiguous first too (on a
  // Xeon with AVX-512, 1 thread: that kernel 54-57 GFLOP/s in the MLP's step; the jitted step 1.25 -> 1.55x
  // PyTorch's).
  if (n1 == 2 && n2 == 2 && copies_transposed_x(*this, w)) return contiguous().matmul(w);
  // tinygrad's dot: x (..., n, 1, k) * wᵀ (..., 1, m, k) broadcast, then sum over k
  int64_t ones = std::min<int64_t>({n1 - 1, n2 - 1, 1});
  Shape xs(shape().begin(), shape().end() - 1);
  for (int64_t i = 0; i < ones; i++) xs.push_back(1);
  xs.push_back(shape().back());
  Shape ws(w.shape().begin(), w.shape().end() - std::min<int64_t>(n2, 2));
  for (int64_t i = 0; i < ones; i++) ws.push_back(1);
  ws.insert(ws.end(), w.shape().end() - std::min<int64_t>(n2, 2), w.shape().end());
  Tensor wt = w.reshape(ws).transpose(-1, -std::min<int64_t>(n2, 2));
  return reshape(xs).mul(wt).sum(std::vector<int64_t>{-1});
}


Tensor Tensor::matmul_packed(const Tensor& w) const {
  const int64_t k = w.shape()[0], n = w.shape()[1];
  // w (K, N) → panels (N/NR, K, NR), realized contiguously: the one extra kernel
  const int64_t nr = panel_width();
  Tensor panels = w.reshape({k, n / nr, nr}).permute({1, 0, 2}).contiguous();
  // A 2-D x (M, K) is packed too, into panels of MR rows (M/MR, K, MR), and read back through a view
  // as (M, K): the MR rows one register tile reads then sit next to each other instead of K apart. Only
  // for AVX-512's tile of 8 rows: AVX2's of 6 (rows padded to a multiple of 6, register_tile) reads x as it is.
  // Elsewhere an x that is a transpose (a weight gradient's gᵀ, whose register tile reads MR neighbours of one
  // row of g per step of K, rows M·4 bytes apart) is copied contiguous first where copies_transposed_x says so:
  // with M = 512 every step of K reads a line 2 KiB from the last one, and those fall into 2 of L1's 64 sets
  // (Zen 3, 1 thread, a hand-written 6 x 16 kernel on panels of 16: (512, 128) @ (128, 784) 84 -> 99 GFLOP/s,
  // (512, 512) @ (512, 128) 79 -> 100; the copy of a 512 x 128 gᵀ takes 0.02 ms).
  Tensor x = *this;
  if (ndim() == 2 && nr == kPanelWidth && shape()[0] % kPanelRows == 0) {
    const int64_t m = shape()[0], kx = shape()[1];
    x = reshape({m / kPanelRows, kPanelRows, kx}).permute({0, 2, 1}).contiguous().permute({0, 2, 1}).reshape({m, kx});
  } else if (copies_transposed_x(*this, w)) {
    x = contiguous();
  }
  // x (..., M, K) → (..., M, 1, 1, K); panels → (N/NR, NR, K); product (..., M, N/NR, NR, K), summed over K
  Shape xs = shape();
  xs.insert(xs.end() - 1, {1, 1});
  Tensor prod = x.reshape(xs).mul(panels.permute({0, 2, 1}));
  Shape out = shape();
  out.back() = n;
  return prod.sum(std::vector<int64_t>{-1}).reshape(out);
}

Tensor Tensor::linear(const Tensor& weight, const Tensor* bias) const {
  if (auto r = float16_rule(&Tensor::linear, *this, weight, bias)) return *r;
  Tensor y = matmul(weight);
  return bias ? y.add(*bias) : y;
}

}  // namespace ts
