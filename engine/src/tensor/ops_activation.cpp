// Activation functions as compositions (definitions and gradient conventions of torch.nn.functional;
// names and defaults of tinygrad). Piecewise ones select with WHERE, so the gradient at a kink is the
// one PyTorch picks, and the branch not taken never leaks NaN into the gradient (its input is clamped).
#include <cmath>

#include "tensor/ops_common.h"

namespace ts {

using namespace detail;

// torch.hardtanh: the gradient is 0 at and beyond the bounds
Tensor Tensor::hardtanh(double min_val, double max_val) const {
  if (auto r = float16_rule(&Tensor::hardtanh, *this, min_val, max_val)) return *r;
  Tensor lo = scalar_like(min_val), hi = scalar_like(max_val);
  return le(lo).where(lo, ge(hi).where(hi, *this));
}
Tensor Tensor::relu6() const { return hardtanh(0, 6); }

// −softplus(−x)
Tensor Tensor::logsigmoid() const {
  if (auto r = float16_rule(&Tensor::logsigmoid, *this)) return *r;
  return neg().softplus().neg();
}

// relu6(x + 3) / 6
Tensor Tensor::hardsigmoid() const {
  if (auto r = float16_rule(&Tensor::hardsigmoid, *this)) return *r;
  return add(3.0).hardtanh(0, 6).div(6.0);
}
Tensor Tensor::hardswish() const {
  if (auto r = float16_rule(&Tensor::hardswish, *this)) return *r;
  return mul(hardsigmoid());
}
Tensor Tensor::silu() const {
  if (auto r = float16_rule(&Tensor::silu, *this)) return *r;
  return mul(sigmoid());
}
Tensor Tensor::mish() const {
  if (auto r = float16_rule(&Tensor::mish, *this)) return *r;
  return mul(softplus().tanh());
}
Tensor Tensor::softsign() const {
  if (auto r = float16_rule(&Tensor::softsign, *this)) return *r;
  return div(abs().add(1.0));
}
Tensor Tensor::quick_gelu() const {
  if (auto r = float16_rule(&Tensor::quick_gelu, *this)) return *r;
  return mul(mul(1.702).sigmoid());
}

// torch: the negative slope applies at x <= 0 (gradient at 0 is the slope)
Tensor Tensor::leaky_relu(double neg_slope) const {
  if (auto r = float16_rule(&Tensor::leaky_relu, *this, neg_slope)) return *r;
  return gt(scalar_like(0)).where(*this, mul(neg_slope));
}

// alpha·(e^x − 1) for x <= 0; the exponent's input is clamped to <= 0 so the unused branch stays finite
Tensor Tensor::elu(double alpha) const {
  if (auto r = float16_rule(&Tensor::elu, *this, alpha)) return *r;
  Tensor pos = gt(scalar_like(0));
  Tensor xn = pos.where(scalar_like(0), *this);
  return pos.where(*this, xn.exp().sub(1.0).mul(alpha));
}
// max(0, x) + min(0, alpha·(e^(x/alpha) − 1))
Tensor Tensor::celu(double alpha) const {
  if (auto r = float16_rule(&Tensor::celu, *this, alpha)) return *r;
  Tensor pos = gt(scalar_like(0));
  Tensor xn = pos.where(scalar_like(0), *this);
  return pos.where(*this, xn.div(alpha).exp().sub(1.0).mul(alpha));
}
Tensor Tensor::selu() const {
  if (auto r = float16_rule(&Tensor::selu, *this)) return *r;
  constexpr double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
  return elu(alpha).mul(scale);
}

// "tanh": 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (tinygrad's default); "none": 0.5·x·(1 + erf(x/√2)).
Tensor Tensor::gelu(const std::string& approximate) const {
  if (auto r = float16_rule(&Tensor::gelu, *this, approximate)) return *r;
  if (approximate == "tanh")
    return mul(0.5).mul(add(mul(square()).mul(0.044715)).mul(0.7978845608028654).tanh().add(1.0));
  if (approximate == "none") return mul(0.5).mul(mul(0.7071067811865476).erf().add(1.0));
  throw std::invalid_argument("gelu: approximate must be 'tanh' or 'none', got '" + approximate + "'");
}

// (max(βx, 0) + log(1 + e^(−|βx|))) / β: no overflow for large |x|; the backward is σ(βx) (torch's
// softplus_backward), which is also right at x = 0 where the composition's relu/abs kinks are not.
Tensor Tensor::softplus(double beta) const {
  if (auto r = float16_rule(&Tensor::softplus, *this, beta)) return *r;
  Tensor x = as_float(*this);
  return with_custom_backward(
      {x},
      [&] {
        Tensor bx = x.mul(beta);
        return bx.relu().add(bx.abs().neg().exp().add(1.0).log()).div(beta);
      },
      [x, beta](const Tensor&, const Tensor& g) { return std::vector<Tensor>{g.mul(x.mul(beta).sigmoid())}; });
}

}  // namespace ts
