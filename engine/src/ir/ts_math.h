/* Vectorizable float32 exp2, log2 and sin for the C backend (and, compiled from this same file, the IR
 * interpreter, so that the two agree bit for bit).
 *
 * libm's exp2f/log2f are function calls that stop gcc from vectorizing a loop; these are branch-free
 * polynomials that it turns into AVX-512 code. Accuracy (measured against libm in
 * tests/engine/test_math.cpp over the whole float range): ts_exp2f within 2 ulp, ts_log2f within
 * 3 ulp (and 1e-7 absolute where |log2 x| < 1e-3). Special values as IEEE / C: exp2(-inf) = 0, exp2(inf) = inf,
 * exp2(nan) = nan; log2(0) = -inf, log2(x < 0) = nan, log2(inf) = inf, log2(nan) = nan.
 *
 * Both evaluate their polynomials by Horner's rule with fmaf (one rounding per step, and half the
 * dependent instructions of separate multiplies and adds); the interpreter's fmaf rounds the same way.
 *
 * Method (Cephes-style): exp2 splits x = n + f with n = round(x), f in [-0.5, 0.5], evaluates 2^f by
 * its Taylor series to degree 7 (truncation error < 6e-9) and scales by 2^n in two steps so that
 * results in the subnormal range stay exact. log2 splits x = m · 2^e with m in [sqrt(1/2), sqrt(2)),
 * and uses ln m = 2·atanh(s), s = (m − 1)/(m + 1), |s| < 0.172, to degree 9 (error < 4e-9).
 * This file is C99 and C++: it is pasted into every generated C kernel. It also holds the float16
 * conversions (below). */
#ifndef TS_MATH_H
#define TS_MATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float ts_bits_to_float(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
static inline int32_t ts_float_to_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }

static inline float ts_exp2f(float x) {
  /* NaN, and x < -151 (whose 2^x rounds to +0), stay out of the arithmetic: NaN out of the int
   * conversion, and an underflowing multiply costs x86 a microcode assist for the whole vector
   * (a softmax with a causal mask feeds exp2(-inf) to a third of its lanes: 3x slower) */
  const int underflow = x < -151.0f;
  float xc = x > 129.0f ? 129.0f : x;
  xc = (x != x || underflow) ? 0.0f : xc;
  float n = (xc + 12582912.0f) - 12582912.0f;                     /* round to nearest: 1.5 * 2^23 trick */
  float f = (xc - n) * 0.693147180559945309f;                     /* 2^(xc-n) = e^f, |f| <= 0.347 */
  /* Horner's rule in fused multiply-adds: 8 dependent FMAs instead of 8 multiplies and 8 adds */
  float p = fmaf(f, 0.000198412698f, 0.00138888889f);
  p = fmaf(f, p, 0.00833333333f);
  p = fmaf(f, p, 0.0416666667f);
  p = fmaf(f, p, 0.166666667f);
  p = fmaf(f, p, 0.5f);
  p = fmaf(f, p, 1.0f);
  p = fmaf(f, p, 1.0f);
  int32_t ni = (int32_t)n;
  int32_t n1 = ni / 2, n2 = ni - n1;                              /* 2^n as 2^n1 · 2^n2: no overflow of the exponent field */
  float r = p * ts_bits_to_float((n1 + 127) << 23) * ts_bits_to_float((n2 + 127) << 23);
  r = underflow ? 0.0f : r;
  return x != x ? x : r;
}

static inline float ts_log2f(float x) {
  int32_t tiny = x < 1.17549435e-38f;                              /* subnormal: scale into the normal range */
  float xs = tiny ? x * 8388608.0f : x;
  int32_t bits = ts_float_to_bits(xs);
  int32_t e = ((bits >> 23) & 0xff) - 127;
  float m = ts_bits_to_float((bits & 0x007fffff) | 0x3f800000);   /* mantissa in [1, 2) */
  int32_t big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  float ef = (float)(e + big - (tiny ? 23 : 0));
  float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  float q = fmaf(s2, 0.111111111f, 0.142857143f);               /* Horner's rule in fused multiply-adds */
  q = fmaf(s2, q, 0.2f);
  q = fmaf(s2, q, 0.333333333f);
  q = fmaf(s2, q, 1.0f);
  float ln_m = 2.0f * s * q;
  float r = ef + ln_m * 1.44269504088896341f;
  r = x == 0.0f ? -1.0f / 0.0f : r;
  r = x < 0.0f ? 0.0f / 0.0f : r;
  r = x == 1.0f / 0.0f ? x : r;
  return x != x ? x : r;
}

/* sin for float32, vectorizable (libm's sinf is a call with branches). Method (fdlibm / Cody–Waite):
 * in double, j = round(x · 2/π) and r = x − j·π/2 with π/2 split in two parts (fdlibm's pio2_1 holds 33
 * bits, so j·pio2_1 is exact for |j| < 2^20); then, in float, sin r or cos r, |r| <= π/4, by Cephes'
 * minimax polynomials (degree 7 and 8), chosen and signed by j mod 4.
 * Accuracy (tests/engine/test_math.cpp, against double-precision sin): within 2 ulp for |x| < 1e12
 * (the reduction is exact for |x| < 1.6e6, and its error stays below float's rounding up to 1e12), within
 * 3e-7 absolute below 1e15. From |x| = 1e15 on (float spacing 1e8: the argument says nothing about its
 * angle) the result is sin 0 or cos 0 of the quadrant, in [-1, 1]. sin(±0) = ±0; sin(±inf) = sin(nan) = nan.
 * Every choice is arithmetic, not `?:`: gcc 12 leaves this loop scalar if it has to if-convert
 * selects between constants and values of mixed float/double widths. */
static inline float ts_sinf(float x) {
  double xd = (double)x;
  const double round_big = 6755399441055744.0;                     /* 1.5 · 2^52: adding it rounds to an integer */
  double j = (xd * 0.63661977236758134308 + round_big) - round_big;
  double r = fma(-j, 1.57079632673412561417e+00, xd);              /* pio2_1: the first 33 bits of π/2 */
  r = fma(-j, 6.07710050650619224932e-11, r);                      /* pio2_1t: π/2 − pio2_1 */
  r = r * (double)(fabs(xd) < 1e15);                               /* huge x: r = 0 (inf, nan: r stays nan) */
  /* sin r and cos r in float (16 lanes a vector, twice the doubles), Cephes' minimax polynomials */
  float rf = (float)r, z = rf * rf;
  float ps = fmaf(z, -1.9515295891e-4f, 8.3321608736e-3f);
  ps = fmaf(z, ps, -1.6666654611e-1f);
  float sin_r = copysignf(fmaf(rf * z, ps, rf), rf);               /* sin r has r's sign: sin(-0) = -0 */
  float pc = fmaf(z, 2.443315711809948e-5f, -1.388731625493765e-3f);
  pc = fmaf(z, pc, 4.166664568298827e-2f);
  float cos_r = fmaf(z * z, pc, fmaf(z, -0.5f, 1.0f));
  double m = j - 4.0 * ((j * 0.25 + round_big) - round_big);       /* j mod 4 as -2, -1, 0, 1 or 2 */
  float even = (float)((m != 1.0) & (m != -1.0));                   /* quadrants 0 and 2: sin r, else cos r */
  float sign = 1.0f - 2.0f * (float)((m == 2.0) | (m == -2.0) | (m == -1.0));  /* quadrants 2 and 3: negated */
  /* -(cos_r · (even − 1)) is -0, not +0, when even = 1, so that -0 + sin(-0) keeps its sign */
  return sign * (even * sin_r - cos_r * (even - 1.0f));
}

/* float16 (IEEE binary16) <-> float32, for buffers that hold float16 as 16-bit patterns.
 *
 * Why bit arithmetic and not _Float16 or F16C intrinsics: gcc 12 does not vectorize _Float16 <-> float
 * conversions (each element becomes a scalar vcvtsh2ss), and _cvtsh_ss/_cvtss_sh are scalar builtins
 * too, while these integer/float formulas become AVX-512 (or SSE/AVX2) code in the kernel's loop; they
 * are also plain C99 that every compiler (gcc, clang, tcc) and every CPU accepts. Both are exact:
 * tests/engine/test_half.cpp compares them with the compiler's _Float16 conversions over all 65536
 * float16 and all 2^32 float32 bit patterns. Selections are written as masks, not branches, so that
 * gcc keeps the loops vectorizable (it does not if-convert a float op it would have to speculate). */
static inline float ts_half_to_float(uint16_t h) {
  int32_t mag = h & 0x7fff;
  int32_t sign = (h & 0x8000) << 16;
  int32_t normal = (mag << 13) + 0x38000000;                       /* rebias the exponent: 15 -> 127 */
  normal += (mag >= 0x7c00) * 0x38000000;                          /* inf / NaN: exponent all ones */
  normal |= (mag > 0x7c00) << 22;                                  /* NaN: quiet, as hardware conversions do */
  int32_t sub = ts_float_to_bits((float)mag * 5.9604644775390625e-08f);  /* subnormal, zero: mantissa * 2^-24, exact */
  int32_t is_sub = -(int32_t)(mag < 0x0400);
  return ts_bits_to_float((sub & is_sub) | (normal & ~is_sub) | sign);
}

/* Round to nearest, ties to even; overflow gives inf, NaN stays NaN (quiet, top payload bits kept). */
static inline uint16_t ts_float_to_half(float f) {
  uint32_t u = (uint32_t)ts_float_to_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  /* normal range: rebias the exponent, then drop 13 mantissa bits rounding to nearest even (a carry out
     of the mantissa correctly moves up the exponent) */
  uint32_t t = a - 0x38000000u;
  uint32_t normal = (t + 0x0fffu + ((t >> 13) & 1u)) >> 13;
  /* below 2^-14: |f| + 0.5 rounds |f| to a multiple of 2^-24 (the spacing of floats in [0.5, 1)), ties to
     even, and the sum's low bits count those multiples: the subnormal's mantissa (0x400: the smallest normal) */
  uint32_t sub = (uint32_t)ts_float_to_bits(ts_bits_to_float((int32_t)a) + 0.5f) - 0x3f000000u;
  uint32_t h = a < 0x38800000u ? sub : normal;
  h = a >= 0x477ff000u ? 0x7c00u : h;                              /* |f| >= 65520 (halfway to 2^16) -> inf */
  h = a > 0x7f800000u ? (0x7e00u | ((a >> 13) & 0x3ffu)) : h;      /* NaN */
  return (uint16_t)(h | sign);
}

/* f rounded to the nearest float16, as a float: how kernels round a float16 op's float32 result. */
static inline float ts_round_half(float f) { return ts_half_to_float(ts_float_to_half(f)); }

#endif
