// Elementwise math beyond the ALU primitives, as compositions (tinygrad's decompositions; PyTorch
// numerics and gradient conventions). Every op here broadcasts with NumPy rules through the primitives
// it is built from; shape errors are std::invalid_argument naming both shapes.
#include <cmath>
#include <limits>
#include <optional>

#include "tensor/ops_common.h"

namespace ts {

using namespace detail;

namespace {
constexpr double kBig = 8388608.0;  // 2^23: every float32 at or above it is an integer
const double kInf = std::numeric_limits<double>::infinity();

// Integer-valued x (|x| < 2^23) → cast to int32 and back truncates exactly; larger values, inf and
// NaN are already "integers" and pass through.
Tensor trunc_values(const Tensor& x) {
  Tensor t = x.cast(DType::Int32).cast(DType::Float32);
  return x.abs().lt(fconst(x, kBig)).where(t, x);
}
Tensor floor_values(const Tensor& x) {
  Tensor t = trunc_values(x);
  return t.sub(t.gt(x).cast(DType::Float32));
}
}  // namespace

// ---- arithmetic ---------------------------------------------------------------------------------

// torch.div(rounding_mode=...): "trunc" / "floor" round the true quotient; int32 operands use IDIV
// (C truncation) and correct it for floor. Integer division by zero fails at run time.
Tensor Tensor::div(const Tensor& x, const std::string& rounding_mode) const {
  auto div_mode = [](const Tensor& a, const Tensor& b, const std::string& mode) { return a.div(b, mode); };
  if (auto r = float16_rule(div_mode, *this, x, rounding_mode)) return *r;
  if (rounding_mode.empty() || rounding_mode == "true") return div(x);
  if (rounding_mode != "trunc" && rounding_mode != "floor")
    throw std::invalid_argument("div: rounding_mode must be None, 'trunc' or 'floor', got '" + rounding_mode + "'");
  if (dtype() != DType::Float32 && x.dtype() != DType::Float32) {
    auto ab = broadcast_all({cast(DType::Int32), x.cast(DType::Int32)});
    Tensor q = primitive(Op::IDiv, ab, ab[0].shape(), DType::Int32);
    if (rounding_mode == "trunc") return q;
    // C division truncates toward 0; floor differs when the remainder is non-zero and the signs differ
    Tensor r = primitive(Op::Mod, ab, ab[0].shape(), DType::Int32);
    Tensor adjust = r.ne(iconst(r, 0)).logical_and(r.lt(iconst(r, 0)).logical_xor(ab[1].lt(iconst(r, 0))));
    return q.sub(adjust.cast(DType::Int32));
  }
  Tensor q = div(x);
  return rounding_mode == "trunc" ? q.trunc() : q.floor();
}

// a − b·floor(a/b) (Python's %); ints through IDIV/MOD with the sign fixed up.
Tensor Tensor::mod(const Tensor& x) const {
  if (auto r = float16_rule(&Tensor::mod, *this, x)) return *r;
  if (dtype() != DType::Float32 && x.dtype() != DType::Float32) {
    auto ab = broadcast_all({cast(DType::Int32), x.cast(DType::Int32)});
    Tensor r = primitive(Op::Mod, ab, ab[0].shape(), DType::Int32);
    Tensor fix = r.ne(iconst(r, 0)).logical_and(r.lt(iconst(r, 0)).logical_xor(ab[1].lt(iconst(r, 0))));
    return fix.where(r.add(ab[1]), r);
  }
  // operands broadcast once, so that the divisor's gradient is one SUM over the broadcast dims
  auto ab = broadcast_all({as_float(*this), as_float(x)});
  Tensor r = ab[0].fmod(ab[1]);
  // a non-zero remainder whose sign differs from the divisor's moves by one divisor
  Tensor fix = r.ne(fconst(r, 0)).logical_and(r.lt(fconst(r, 0)).logical_xor(ab[1].lt(fconst(r, 0))));
  return fix.where(r.add(ab[1]), r);
}

// a − b·trunc(a/b) (C's fmod). Float: the quotient is rounded, so fix up a remainder that lands outside
// (−|b|, |b|) — exact for the magnitudes tests use, within one ulp of the quotient otherwise.
Tensor Tensor::fmod(const Tensor& x) const {
  if (auto r = float16_rule(&Tensor::fmod, *this, x)) return *r;
  if (dtype() != DType::Float32 && x.dtype() != DType::Float32) {
    auto ab = broadcast_all({cast(DType::Int32), x.cast(DType::Int32)});
    return primitive(Op::Mod, ab, ab[0].shape(), DType::Int32);
  }
  auto ab = broadcast_all({as_float(*this), as_float(x)});
  Tensor a = ab[0], b = ab[1];
  Tensor q = a.div(b).detach();
  Tensor r = a.sub(b.mul(trunc_values(q)));
  // |b| = inf: fmod(a, inf) = a (q = 0 would give 0 · inf); b = 0 gives NaN through the division
  return b.isinf().logical_and(a.isfinite()).where(a, r);
}

namespace {
// The constant exponents PyTorch computes without pow (ATen's pow_tensor_scalar_optimized_kernel): 2 and 3 as
// products, 0.5 as sqrt, -0.5 as 1/sqrt, -1 as 1/x, -2 as 1/(x·x); and 1 as x itself (ATen copies).
bool has_product_form(double e) { return e == 1 || e == 2 || e == 3 || e == 0.5 || e == -0.5 || e == -1 || e == -2; }

// x^e in that form; null for an exponent without one.
std::optional<Tensor> pow_by_products(const Tensor& x, double e) {
  if (e == 1) return x.mul(fconst(x, 1));  // x exactly, as a node of its own
  if (e == 2) return x.mul(x);
  if (e == 3) return x.mul(x).mul(x);
  if (e == 0.5) return x.sqrt();
  if (e == -0.5) return x.sqrt().reciprocal();
  if (e == -1) return x.reciprocal();
  if (e == -2) return x.mul(x).reciprocal();
  return std::nullopt;
}
}  // namespace

// x^y = 2^(y·log2|x|) with torch's sign and zero rules; backward y·x^(y−1) and x^y·ln x (0 where x = 0
// and y >= 0, as torch), so that 0^2 has gradient 0 instead of 0·inf.
Tensor Tensor::pow(const Tensor& x) const {
  if (auto r = float16_rule(&Tensor::pow, *this, x)) return *r;
  // A constant exponent that PyTorch computes without pow (x ** 2 in a squared error) gets its form: exact where
  // exp2(e·log2|x|) rounds twice, and without the special cases of negative bases, infinities and NaNs, which
  // cost an autoencoder's squared-error gradient (64 x 784, with the sigmoid's) 0.14 ms. The gradient is
  // PyTorch's pow_backward, g·(e·x^(e−1)), with x^(e−1) in the same forms where it has one.
  if (const Node& n = node(x); n.op == Op::Const && !x.requires_grad() && n.shape.empty() && is_float(dtype())) {
    const double e = n.value;
    const Tensor base = as_float(*this);
    if (has_product_form(e))
      return with_custom_backward(
          {base}, [&] { return *pow_by_products(base, e); },
          [base, e](const Tensor&, const Tensor& g) {
            std::optional<Tensor> lower = pow_by_products(base, e - 1);
            const Tensor d = lower ? *lower : base.pow(fconst(base, e - 1));
            return std::vector<Tensor>{g.mul(fconst(d, e).mul(d))};
          });
  }
  // broadcast first: the custom backward returns gradients of the broadcast operands
  auto be = broadcast_all({as_float(*this), as_float(x)});
  Tensor base = be[0], e = be[1];
  auto forward = [](const Tensor& b, const Tensor& y) {
    Tensor mag = b.abs().log2().mul(y).exp2();
    Tensor y_int = trunc_values(y).eq(y);
    Tensor y_odd = y_int.logical_and(y.abs().lt(fconst(y, kBig))).logical_and(
        y.fmod(fconst(y, 2)).abs().eq(fconst(y, 1)));
    Tensor neg = b.lt(fconst(b, 0));
    Tensor signed_mag = neg.logical_and(y_odd).where(mag.neg(), mag);
    Tensor nan = fnan(b);
    Tensor r = neg.logical_and(y_int.logical_not()).logical_and(b.isinf().logical_not()).where(nan, signed_mag);
    Tensor one = fconst(y, 1);
    return y.eq(fconst(y, 0)).logical_or(b.eq(one)).where(one, r);  // x^0 = 1 and 1^y = 1, even for NaN
  };
  return with_custom_backward(
      {base, e}, [&] { return forward(base, e); },
      [base, e, forward](const Tensor& out, const Tensor& g) {
        Tensor zero = fconst(g, 0);
        Tensor dx = e.eq(zero).where(zero, e.mul(forward(base, e.sub(fconst(e, 1)))));
        Tensor dy = base.eq(zero).logical_and(e.ge(zero)).where(zero, out.mul(base.log()));
        return std::vector<Tensor>{g.mul(dx), g.mul(dy)};
      });
}

// |a| with b's sign bit; -0.0 is negative because 1/-0.0 = -inf. Gradient sign(a)·sign(b), 0 at a = 0.
Tensor Tensor::copysign(const Tensor& x) const {
  if (auto r = float16_rule(&Tensor::copysign, *this, x)) return *r;
  Tensor b = as_float(x);
  Tensor negative = b.lt(fconst(b, 0)).logical_or(b.reciprocal().lt(fconst(b, 0)));
  Tensor mag = as_float(*this).abs();
  return negative.where(mag.neg(), mag);
}

// m + log(e^(a−m) + e^(b−m)) with m = max(a, b) detached (inf max → 0, as logsumexp).
Tensor Tensor::logaddexp(const Tensor& x) const {
  if (auto r = float16_rule(&Tensor::logaddexp, *this, x)) return *r;
  Tensor a = as_float(*this), b = as_float(x);
  Tensor m = a.maximum(b).detach();
  m = m.isinf().where(fconst(m, 0), m);
  return a.sub(m).exp().add(b.sub(m).exp()).log().add(m);
}

Tensor Tensor::lerp(const Tensor& end, const Tensor& weight) const {
  if (auto r = float16_rule(&Tensor::lerp, *this, end, weight)) return *r;
  Tensor s = as_float(*this);
  return s.add(as_float(weight).mul(as_float(end).sub(s)));
}

// ---- unary math -----------------------------------------------------------------------------------

Tensor Tensor::log10() const {
  if (auto r = float16_rule(&Tensor::log10, *this)) return *r;
  return log2().mul(0.30102999566398120);  // log10 x = log2 x · log10 2
}
Tensor Tensor::rsqrt() const {
  if (auto r = float16_rule(&Tensor::rsqrt, *this)) return *r;
  return sqrt().reciprocal();
}
Tensor Tensor::tan() const {
  if (auto r = float16_rule(&Tensor::tan, *this)) return *r;
  return sin().div(cos());
}
Tensor Tensor::sinh() const {
  if (auto r = float16_rule(&Tensor::sinh, *this)) return *r;
  Tensor e = exp(), ie = neg().exp();
  return e.sub(ie).mul(0.5);
}
Tensor Tensor::cosh() const {
  if (auto r = float16_rule(&Tensor::cosh, *this)) return *r;
  return exp().add(neg().exp()).mul(0.5);
}
// sign(x)·log(|x| + √(x²+1)): odd-symmetric, so large negative x does not cancel
Tensor Tensor::asinh() const {
  if (auto r = float16_rule(&Tensor::asinh, *this)) return *r;
  Tensor a = as_float(*this).abs();
  Tensor r = a.add(a.square().add(1.0).sqrt()).log();
  return lt(scalar_like(0)).where(r.neg(), r);
}
Tensor Tensor::acosh() const {
  if (auto r = float16_rule(&Tensor::acosh, *this)) return *r;
  return add(square().sub(1.0).sqrt()).log();
}
Tensor Tensor::atanh() const {
  if (auto r = float16_rule(&Tensor::atanh, *this)) return *r;
  return scalar_like(1).add(*this).div(scalar_like(1).sub(*this)).log().mul(0.5);
}

Tensor Tensor::asin() const {
  if (auto r = float16_rule(&Tensor::asin, *this)) return *r;
  // Abramowitz & Stegun 4.4.46: asin x = π/2 − √(1−x)·P(x) on [0, 1]; odd extension
  static const double c[] = {-0.0012624911, 0.0066700901, -0.0170881256, 0.0308918810,
                             -0.0501743046, 0.0889789874, -0.2145988016, 1.5707963050};
  Tensor x = as_float(*this);
  return with_custom_backward(
      {x},
      [&] {
        Tensor a = x.abs();
        Tensor p = fconst(x, c[0]);
        for (int i = 1; i < 8; i++) p = p.mul(a).add(c[i]);
        Tensor r = fconst(x, kPi / 2).sub(fconst(x, 1).sub(a).sqrt().mul(p));
        Tensor valid = a.le(fconst(x, 1));
        r = valid.where(r, fnan(x));
        return x.lt(fconst(x, 0)).where(r.neg(), r);
      },
      [x](const Tensor&, const Tensor& g) { return std::vector<Tensor>{g.mul(fconst(x, 1).sub(x.square()).rsqrt())}; });
}
Tensor Tensor::acos() const {
  if (auto r = float16_rule(&Tensor::acos, *this)) return *r;
  Tensor x = as_float(*this);
  return with_custom_backward(
      {x}, [&] { return fconst(x, kPi / 2).sub(x.asin()); },
      [x](const Tensor&, const Tensor& g) { return std::vector<Tensor>{g.mul(fconst(x, 1).sub(x.square()).rsqrt()).neg()}; });
}
// atan x = asin(x/√(1+x²)) for |x| <= 1; sign(x)·π/2 − atan(1/x) beyond, so that x² cannot overflow
Tensor Tensor::atan() const {
  if (auto r = float16_rule(&Tensor::atan, *this)) return *r;
  Tensor x = as_float(*this);
  return with_custom_backward(
      {x},
      [&] {
        Tensor big = x.abs().gt(fconst(x, 1));
        Tensor r = big.where(x.reciprocal(), x);
        Tensor a = r.div(r.square().add(1.0).sqrt()).asin();
        Tensor half_pi = x.lt(fconst(x, 0)).where(fconst(x, -kPi / 2), fconst(x, kPi / 2));
        return big.where(half_pi.sub(a), a);
      },
      [x](const Tensor&, const Tensor& g) { return std::vector<Tensor>{g.div(x.square().add(1.0))}; });
}

Tensor Tensor::sign() const {
  if (auto r = float16_rule(&Tensor::sign, *this)) return *r;
  if (dtype() == DType::Bool) return *this;
  return zero_grad_op(*this, [](const Tensor& x) {
    Tensor one = x.scalar_like(1), zero = x.scalar_like(0);
    return x.gt(zero).where(one, x.lt(zero).where(one.neg(), zero));  // NaN gives 0, as torch 1.13
  });
}

// Abramowitz & Stegun 7.1.26: erf x = 1 − t·P(t)·e^(−x²), t = 1/(1 + 0.3275911|x|); odd extension.
Tensor Tensor::erf() const {
  if (auto r = float16_rule(&Tensor::erf, *this)) return *r;
  Tensor x = as_float(*this);
  return with_custom_backward(
      {x},
      [&] {
        Tensor t = x.abs().mul(0.3275911).add(1.0).reciprocal();
        static const double c[] = {1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592};
        Tensor p = fconst(x, c[0]);
        for (int i = 1; i < 5; i++) p = p.mul(t).add(c[i]);
        Tensor r = fconst(x, 1).sub(t.mul(p).mul(x.square().neg().exp()));
        return x.lt(fconst(x, 0)).where(r.neg(), r);
      },
      [x](const Tensor&, const Tensor& g) {
        return std::vector<Tensor>{g.mul(x.square().neg().exp().mul(1.1283791670955126))};  // 2/√π
      });
}

Tensor Tensor::trunc() const {
  if (auto r = float16_rule(&Tensor::trunc, *this)) return *r;
  if (dtype() != DType::Float32) return *this;
  return zero_grad_op(*this, trunc_values);
}
Tensor Tensor::floor() const {
  if (auto r = float16_rule(&Tensor::floor, *this)) return *r;
  if (dtype() != DType::Float32) return *this;
  return zero_grad_op(*this, floor_values);
}
Tensor Tensor::ceil() const {
  if (auto r = float16_rule(&Tensor::ceil, *this)) return *r;
  if (dtype() != DType::Float32) return *this;
  return zero_grad_op(*this, [](const Tensor& x) {
    Tensor t = trunc_values(x);
    return t.add(t.lt(x).cast(DType::Float32));
  });
}
// Half to even: the fraction beyond the truncation decides; exactly ±0.5 rounds to the even neighbour.
Tensor Tensor::round() const {
  if (auto r = float16_rule(&Tensor::round, *this)) return *r;
  if (dtype() != DType::Float32) return *this;
  return zero_grad_op(*this, [](const Tensor& x) {
    Tensor t = trunc_values(x);
    Tensor frac = x.sub(t).abs();
    Tensor step = x.lt(fconst(x, 0)).where(fconst(x, -1), fconst(x, 1));
    Tensor odd = t.fmod(fconst(x, 2)).ne(fconst(x, 0));
    Tensor up = frac.gt(fconst(x, 0.5)).logical_or(frac.eq(fconst(x, 0.5)).logical_and(odd));
    return up.where(t.add(step), t);
  });
}

// ---- clipping and predicates ------------------------------------------------------------------------

// where(x < lo, lo, x) then where(· > hi, hi, ·): the gradient passes at the boundaries, and lo > hi
// gives hi everywhere, as torch.clamp.
Tensor Tensor::clip(const Tensor* lo, const Tensor* hi) const {
  if (!lo && !hi) throw std::invalid_argument("clip: at least one of min and max must be given");
  auto clip = [](const Tensor& x, const Tensor* l, const Tensor* h) { return x.clip(l, h); };
  if (auto r = float16_rule(clip, *this, lo, hi)) return *r;
  Tensor r = *this;
  if (lo) r = r.lt(*lo).where(*lo, r);
  if (hi) r = r.gt(*hi).where(*hi, r);
  // NaN passes through with a zero gradient (torch's mask lo <= x <= hi is false for NaN)
  return dtype() == DType::Float32 ? isnan().where(detach(), r) : r;
}
Tensor Tensor::clip(std::optional<double> lo, std::optional<double> hi) const {
  Tensor l = lo ? scalar_like(*lo) : Tensor(), h = hi ? scalar_like(*hi) : Tensor();
  return clip(lo ? &l : nullptr, hi ? &h : nullptr);
}

Tensor Tensor::logical_and(const Tensor& x) const {
  Tensor a = dtype() == DType::Bool ? *this : cast(DType::Bool), b = x.dtype() == DType::Bool ? x : x.cast(DType::Bool);
  return a.where(b, bconst(a, false));
}
Tensor Tensor::logical_or(const Tensor& x) const {
  Tensor a = dtype() == DType::Bool ? *this : cast(DType::Bool), b = x.dtype() == DType::Bool ? x : x.cast(DType::Bool);
  return a.where(bconst(a, true), b);
}
Tensor Tensor::logical_xor(const Tensor& x) const {
  Tensor a = dtype() == DType::Bool ? *this : cast(DType::Bool), b = x.dtype() == DType::Bool ? x : x.cast(DType::Bool);
  return a.ne(b);
}
Tensor Tensor::isnan() const { return ne(*this); }
Tensor Tensor::isinf(bool detect_positive, bool detect_negative) const {
  if (auto r = float16_rule(&Tensor::isinf, *this, detect_positive, detect_negative)) return *r;
  if (dtype() != DType::Float32) return Tensor::zeros(shape(), DType::Bool, device());
  Tensor pos = eq(fconst(*this, kInf)), neg = eq(fconst(*this, -kInf));
  if (detect_positive && detect_negative) return pos.logical_or(neg);
  if (detect_positive) return pos;
  if (detect_negative) return neg;
  return Tensor::zeros(shape(), DType::Bool, device());
}
// x − x is 0 exactly for finite x, NaN for ±inf and NaN
Tensor Tensor::isfinite() const {
  if (auto r = float16_rule(&Tensor::isfinite, *this)) return *r;
  if (dtype() != DType::Float32) return Tensor::ones(shape(), DType::Bool, device());
  return sub(*this).eq(scalar_like(0));
}
Tensor Tensor::isclose(const Tensor& x, double rtol, double atol, bool equal_nan) const {
  if (auto r = float16_rule(&Tensor::isclose, *this, x, rtol, atol, equal_nan)) return *r;
  Tensor a = as_float(*this), b = as_float(x);
  Tensor close = a.eq(b).logical_or(a.isfinite().logical_and(b.isfinite()).logical_and(
      a.sub(b).abs().le(b.abs().mul(rtol).add(atol))));
  if (equal_nan) close = close.logical_or(a.isnan().logical_and(b.isnan()));
  return close;
}
Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& value) const {
  if (auto r = float16_rule(&Tensor::masked_fill, *this, mask, value)) return *r;
  Tensor v = value.dtype() == dtype() ? value : value.cast(dtype());
  return mask.where(v, *this);
}

}  // namespace ts
