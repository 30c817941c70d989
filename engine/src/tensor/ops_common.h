// Helpers shared by the op families (ops.cpp and ops_<family>.cpp): broadcasting, dtype promotion,
// PyTorch's float16 rule for composite ops, axis lists, host-built index constants and tinygrad's _pool
// (the windowing behind conv, pooling, unfold and the scans). Internal to the engine.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor_impl.h"

namespace ts::detail {

constexpr double kLog2E = 1.4426950408889634;  // 1 / ln 2
constexpr double kLn2 = 0.6931471805599453;
constexpr double kPi = 3.141592653589793;

// "(2, 3)", "(4,)", "()" — Python's tuple spelling, for error messages.
inline std::string shape_text(const Shape& s) { return "(" + shape_str(s) + (s.size() == 1 ? ",)" : ")"); }

DType promote(DType a, DType b);
// torch.result_type of two tensor operands: promote(a, b), except that a 0-d operand does not promote
// an operand with dims within its category (bool < int < float). With one dtype per category but
// float, that leaves one case: float16 with dims next to a 0-d float32 is float16.
DType result_type(const Tensor& a, const Tensor& b);
// NR of the C device's matmul: the columns of w's packed panels and of an im2col's column panels, two of its
// vector registers of floats (32 on AVX-512, 16 on AVX2; ops.cpp)
int64_t panel_width();
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

// ---- float16: PyTorch's CPU rule for composite ops ------------------------------------------------
// PyTorch computes an op on float16 tensors in float32 and rounds its result to float16 once: its CPU
// kernels load c10::Half, compute in float (at::opmath_type<c10::Half> is float) and store c10::Half;
// reductions and matmul accumulate in float. The lowering (ir/lower.cpp) gives each primitive that rule
// (ADD, MUL, MAX, WHERE, the comparisons, SUM, MAX-reduce, CAST compute in float32 and round once), but
// a composite op is several primitives, and rounding after each would round, e.g., exp(x) =
// exp2(x·log2 e) twice, losing up to |x|·2^-11 of relative accuracy. So a composite op starts with
//
//   if (auto r = float16_rule(&Tensor::exp, *this)) return *r;
//
// When an operand is float16, float16_rule calls the op again with its float16 operands widened to
// float32 (exact) and casts the float32 results to float16 where torch.result_type is float16 (the
// float operands with dims are all float16; 0-d tensors, which python scalars become, do not promote;
// with only 0-d float operands, they decide). The inner call sees float32 tensors only, so nothing it
// calls rounds: the one rounding is the outermost op's. The casts are graph nodes, so the GUI shows
// where float16 rounds. The primitives above already round once, and ops that only move, select or
// compare values (reshape, pad, cat, getitem, neg, sub, minimum, comparisons, ...) are exact in
// float16: they skip the rule, so their float16 graphs have no casts. The unary primitives (exp2, log2,
// sin, sqrt, reciprocal) take it for their backward rules, which compute with the forward's values.
// Gradients: backward() casts each input's gradient to the input's dtype (autograd.cpp), as torch does.

// The float operands of an op, as torch.result_type counts them.
class Float16Operands {
 public:
  void see(const Tensor& t) {
    if (!t.defined() || !is_float(t.dtype())) return;
    const bool half = t.dtype() == DType::Float16;
    any_half_ = any_half_ || half;
    (t.ndim() == 0 ? zero_d_ : dims_)[half] = true;
  }
  void see(const Tensor* t) {
    if (t) see(*t);
  }
  void see(const std::vector<Tensor>& ts) {
    for (const Tensor& t : ts) see(t);
  }
  template <typename T>
  void see(const T&) {}  // axes, sizes, flags: not operands

  bool any_half() const { return any_half_; }
  bool result_is_half() const { return dims_[0] || dims_[1] ? !dims_[0] : !zero_d_[0]; }

 private:
  bool any_half_ = false;
  bool dims_[2] = {false, false}, zero_d_[2] = {false, false};  // [0]: float32 seen, [1]: float16 seen
};

inline Tensor widen(const Tensor& t) { return t.defined() && t.dtype() == DType::Float16 ? t.cast(DType::Float32) : t; }
inline std::vector<Tensor> widen(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(widen(t));
  return out;
}
// An optional operand passed by pointer (a bias, a mask): the widened copy lives until the end of the
// full expression that calls the op.
struct WidenedPointer {
  std::optional<Tensor> t;
  operator const Tensor*() const { return t ? &*t : nullptr; }
};
inline WidenedPointer widen(const Tensor* t) { return t ? WidenedPointer{widen(*t)} : WidenedPointer{}; }
template <typename T>
const T& widen(const T& x) { return x; }

inline Tensor narrow(const Tensor& t) { return t.dtype() == DType::Float32 ? t.cast(DType::Float16) : t; }
inline std::pair<Tensor, Tensor> narrow(const std::pair<Tensor, Tensor>& p) { return {narrow(p.first), narrow(p.second)}; }

// nullopt when no operand is float16 (the op computes as it is); else the op on the widened operands,
// its float results cast to float16 where torch.result_type says so. `op` is called as
// std::invoke(op, operands...): a member function pointer with *this first, or a lambda.
template <typename Op, typename... Operands>
auto float16_rule(Op op, const Operands&... operands) -> std::optional<std::invoke_result_t<Op, const Operands&...>> {
  Float16Operands seen;
  (seen.see(operands), ...);
  if (!seen.any_half()) return std::nullopt;
  auto r = std::invoke(op, widen(operands)...);
  return seen.result_is_half() ? narrow(r) : r;
}

}  // namespace ts::detail
