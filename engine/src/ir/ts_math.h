/* Vectorizable float32 exp2, log2 and sin for the C backend (and, compiled from this same file, the IR
 * interpreter, so that the two agree bit for bit).
 *
 * libm's exp2f/log2f are function calls that stop gcc from vectorizing a loop; these are branch-free
 * polynomials that it turns into AVX-512 code. Accuracy (measured against libm in
 * tests/engine/test_math.cpp over the whole float range): ts_exp2f within 1 ulp of the exact value
 * (0.952 at worst over all 2^32 floats, subnormal results included), ts_log2f within
 * 3 ulp (and 1e-7 absolute where |log2 x| < 1e-3). Special values as IEEE / C: exp2(-inf) = 0, exp2(inf) = inf,
 * exp2(nan) = nan; log2(0) = -inf, log2(x < 0) = nan, log2(inf) = inf, log2(nan) = nan.
 *
 * Both evaluate their polynomials by Horner's rule with fmaf (one rounding per step, and half the
 * dependent instructions of separate multiplies and adds); the interpreter's fmaf rounds the same way.
 *
 * Method (Cephes-style): exp2 splits x = n + t with n = round(x), t in [-0.5, 0.5], evaluates 2^t by
 * its minimax polynomial of degree 6 and scales by 2^n in two steps so that results in the subnormal
 * range are rounded once. Its clamps are integer min on the float's bits and its 2^n1 an integer add
 * to the exponent: 28 AVX2 instructions a vector instead of 39 (a float compare and select cost gcc's
 * vectorizer up to four instructions a bound), 28 -> 18 us for 49,152 floats on a Zen 3.
 * log2 splits x = m · 2^e with m in [sqrt(1/2), sqrt(2)), and uses ln m = 2·atanh(s),
 * s = (m − 1)/(m + 1), |s| < 0.172, to degree 9 (error < 4e-9).
 * This file is C99 and C++: it is pasted into every generated C kernel. It also holds the float16
 * conversions (below). */
#ifndef TS_MATH_H
#define TS_MATH_H
#include <stdint.h>
#ifdef __cplusplus
#include <math.h>
#include <string.h>
#else
/* In C, that is in a generated kernel: the few libm functions that this file and the kernels call, declared
 * instead of <math.h> and <string.h> included. Parsing those two headers was an eighth of the compile time of
 * a small kernel (gcc 12 -O3, 134 -> 117 ms), and gcc compiles these calls to instructions (vfmadd, vsqrtps,
 * vroundps, bit masks) either way; one that stays a call binds to libm, which every kernel links. */
#include <stddef.h>
float fmaf(float, float, float);
double fma(double, double, double);
float sqrtf(float);
float rintf(float);
float copysignf(float, float);
double fabs(double);
void* memcpy(void*, const void*, size_t);
#endif

static inline float ts_bits_to_float(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
static inline int32_t ts_float_to_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }

static inline float ts_exp2f(float x) {
  /* Clamp x to [-152, 129] on its bits, with integer min (one instruction each, where float compares
   * and selects cost gcc two to four): as unsigned, every float below -152 (and -inf, and a NaN with
   * its sign bit) is above -152's bits; as signed, every positive float above 129 (and +inf, and a
   * positive NaN) is above 129's. NaN lanes get their x back at the end. */
  uint32_t xb = (uint32_t)ts_float_to_bits(x);
  xb = xb < 0xC3180000u ? xb : 0xC3180000u;                       /* -152.0f */
  int32_t xs = (int32_t)xb;
  xs = xs < 0x43010000 ? xs : 0x43010000;                         /* 129.0f */
  float xc = ts_bits_to_float(xs);
  float n = rintf(xc);                                            /* round to nearest (even): one vroundps */
  float t = xc - n;                                               /* exact, in [-0.5, 0.5] */
  /* 2^t by its minimax polynomial of degree 6 (relative error 2.0e-9; scripts/fit_exp2_polynomial.py),
   * Horner's rule in fused multiply-adds */
  float p = fmaf(t, 0.000153533620f, 0.00133988750f);
  p = fmaf(t, p, 0.00961843692f);
  p = fmaf(t, p, 0.0555033237f);
  p = fmaf(t, p, 0.240226477f);
  p = fmaf(t, p, 0.693147182f);
  p = fmaf(t, p, 1.0f);
  /* times 2^n as 2^n1 · 2^n2 (n1 = floor(n/2)): p · 2^n1 by adding n1 to p's exponent field (p is in
   * [0.70, 1.42] and n1 >= -76, so it stays a normal float), then one multiply by 2^n2 that overflows
   * to inf above 128 and rounds once into the subnormal range. Below -151, 2^x rounds to +0: the
   * multiply is by +0 there, not an underflowing one (x86 takes a microcode assist for a whole vector
   * with an underflowing lane: a causal softmax feeds exp2(-inf) to a third of its lanes). */
  int32_t ni = (int32_t)n;
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float scaled = ts_bits_to_float((int32_t)((uint32_t)ts_float_to_bits(p) + ((uint32_t)n1 << 23)));
  uint32_t two_n2 = ni < -151 ? 0u : (uint32_t)(n2 + 127) << 23;
  float r = scaled * ts_bits_to_float((int32_t)two_n2);
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
