/* Vectorizable float32 exp2 and log2 for the C backend (and, compiled from this same file, the IR
 * interpreter, so that the two agree bit for bit).
 *
 * libm's exp2f/log2f are function calls that stop gcc from vectorizing a loop; these are branch-free
 * polynomials that it turns into AVX-512 code. Accuracy (measured against libm in
 * tests/engine/test_math.cpp over the whole float range): ts_exp2f within 2 ulp, ts_log2f within
 * 3 ulp (and 1e-7 absolute where |log2 x| < 1e-3). Special values as IEEE / C: exp2(-inf) = 0, exp2(inf) = inf,
 * exp2(nan) = nan; log2(0) = -inf, log2(x < 0) = nan, log2(inf) = inf, log2(nan) = nan.
 *
 * Method (Cephes-style): exp2 splits x = n + f with n = round(x), f in [-0.5, 0.5], evaluates 2^f by
 * its Taylor series to degree 7 (truncation error < 6e-9) and scales by 2^n in two steps so that
 * results in the subnormal range stay exact. log2 splits x = m · 2^e with m in [sqrt(1/2), sqrt(2)),
 * and uses ln m = 2·atanh(s), s = (m − 1)/(m + 1), |s| < 0.172, to degree 9 (error < 4e-9).
 * This file is C99 and C++: it is pasted into every generated C kernel. */
#ifndef TS_MATH_H
#define TS_MATH_H
#include <stdint.h>
#include <string.h>

static inline float ts_bits_to_float(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
static inline int32_t ts_float_to_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }

static inline float ts_exp2f(float x) {
  float xc = x > 129.0f ? 129.0f : (x < -151.0f ? -151.0f : x);
  xc = x != x ? 0.0f : xc;                                        /* keep NaN out of the int conversion */
  float n = (xc + 12582912.0f) - 12582912.0f;                     /* round to nearest: 1.5 * 2^23 trick */
  float f = (xc - n) * 0.693147180559945309f;                     /* 2^(xc-n) = e^f, |f| <= 0.347 */
  float p = 1.0f + f * (1.0f + f * (0.5f + f * (0.166666667f + f * (0.0416666667f + f * (0.00833333333f +
            f * (0.00138888889f + f * 0.000198412698f))))));
  int32_t ni = (int32_t)n;
  int32_t n1 = ni / 2, n2 = ni - n1;                              /* 2^n as 2^n1 · 2^n2: no overflow of the exponent field */
  float r = p * ts_bits_to_float((n1 + 127) << 23) * ts_bits_to_float((n2 + 127) << 23);
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
  float ln_m = 2.0f * s * (1.0f + s2 * (0.333333333f + s2 * (0.2f + s2 * (0.142857143f + s2 * 0.111111111f))));
  float r = ef + ln_m * 1.44269504088896341f;
  r = x == 0.0f ? -1.0f / 0.0f : r;
  r = x < 0.0f ? 0.0f / 0.0f : r;
  r = x == 1.0f / 0.0f ? x : r;
  return x != x ? x : r;
}

#endif
