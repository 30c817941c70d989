// Helpers shared by the op families (ops.cpp and ops_<family>.cpp): broadcasting, dtype promotion,
// axis lists, host-built index constants and tinygrad's _pool (the windowing behind conv, pooling,
// unfold and the scans). Internal to the engine.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/tensor_impl.h"

namespace ts::detail {

constexpr double kLog2E = 1.4426950408889634;  // 1 / ln 2
constexpr double kLn2 = 0.6931471805599453;
constexpr double kPi = 3.141592653589793;

// "(2, 3)", "(4,)", "()" — Python's tuple spelling, for error messages.
inline std::string shape_text(const Shape& s) { return "(" + shape_str(s) + (s.size() == 1 ? ",)" : ")"); }

DType promote(DType a, DType b);
// NumPy broadcasting of two shapes; throws std::invalid_argument naming both shapes.
Shape broadcast_shape(const Shape& a, const Shape& b);
Tensor broadcast_to(const Tensor& t, const Shape& shape);
std::vector<Tensor> broadcast_all(std::vector<Tensor> ts);
// Sorted, unique, normalized axes (nullopt: every axis).
std::vector<int64_t> reduce_axes(const Tensor& t, const Axes& axes);
// The shape without the given (sorted) axes: what keepdim=false leaves.
Shape drop_axes(const Shape& s, const std::vector<int64_t>& axes);

inline Tensor as_float(const Tensor& t) { return t.dtype() == DType::Float32 ? t : t.cast(DType::Float32); }
inline Tensor fconst(const Tensor& like, double v) { return Tensor::scalar(v, DType::Float32, like.device()); }
inline Tensor iconst(const Tensor& like, double v) { return Tensor::scalar(v, DType::Int32, like.device()); }
inline Tensor bconst(const Tensor& like, bool v) { return Tensor::scalar(v ? 1 : 0, DType::Bool, like.device()); }
// NaN computed as inf + (−inf) rather than a NaN constant: the kernel builder's constant CSE keys on
// the value, and NaN breaks its ordering (a NaN constant can come back as another constant).
Tensor fnan(const Tensor& like);

// 0, 1, ..., n-1 as an int32 tensor of shape (n,) (host-built: an index constant, not a computation).
Tensor arange_int(int64_t n, const std::string& device);
// `x` with `axis` moved to the last position / moved back from it.
Tensor move_axis_last(const Tensor& x, int64_t axis);
Tensor move_last_to(const Tensor& x, int64_t axis);
// idx (int, any shape) → bool (..., n): idx[...] == arange(n) (tinygrad's _one_hot_along_dim, last dim).
Tensor one_hot_mask(const Tensor& idx, int64_t n);
// Zero-gradient passthrough: the forward value of `f` (computed without history), with a zero
// gradient to `x` — for piecewise-constant ops (floor, sign, ...), whose PyTorch gradient is 0.
Tensor zero_grad_op(const Tensor& x, const std::function<Tensor(const Tensor&)>& f);

// tinygrad's _pool: sliding windows over the last k dims of x with kernel k, stride s, dilation d
// (all of length k), built from movement ops only (repeat/shrink/reshape/permute). Returns
// (..., o_1..o_k, k_1..k_k) with o_i = ceil((i - d(k-1)) / s).
Tensor pool(const Tensor& x, const std::vector<int64_t>& k, const std::vector<int64_t>& s, const std::vector<int64_t>& d);

// Product over one axis by pairwise halving (x[:h] * x[h:], padding odd lengths with 1): exact, and
// its chain-rule gradient is right even with zeros (a log/exp product would not be).
Tensor prod_last(const Tensor& x, bool keepdim);

}  // namespace ts::detail
