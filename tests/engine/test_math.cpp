// Accuracy of the vectorizable exp2 / log2 / sin of ts_math.h against libm, over the whole float range,
// and their special values. The bounds here are the ones stated in ts_math.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ir/ts_math.h"

namespace {

// distance in units in the last place between two finite floats of the same sign
int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = INT32_MIN - ia;
  if (ib < 0) ib = INT32_MIN - ib;
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

}  // namespace

// ts_exp2f is within 0.952 ulp of the exact 2^x (all 2^32 floats, checked once); glibc's exp2f is correctly
// rounded, so the two floats are at most 1 ulp apart
TEST(TsMath, Exp2WithinOneUlpEverywhere) {
  int64_t worst = 0;
  for (float x = -152.0f; x < 128.5f; x += 0.0137f) {
    float want = std::exp2f(x), got = ts_exp2f(x);
    if (want < std::numeric_limits<float>::min()) {
      EXPECT_NEAR(got, want, std::numeric_limits<float>::denorm_min()) << x;  // subnormal results
      continue;
    }
    worst = std::max(worst, ulp_distance(got, want));
  }
  for (float x = -0.5f; x <= 0.5f; x += 1.0f / (1 << 20)) worst = std::max(worst, ulp_distance(ts_exp2f(x), std::exp2f(x)));
  EXPECT_LE(worst, 1);
}

TEST(TsMath, Exp2SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ts_exp2f(0.0f), 1.0f);
  EXPECT_EQ(ts_exp2f(10.0f), 1024.0f);
  EXPECT_EQ(ts_exp2f(-inf), 0.0f);
  EXPECT_EQ(ts_exp2f(inf), inf);
  EXPECT_EQ(ts_exp2f(200.0f), inf);
  EXPECT_EQ(ts_exp2f(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(ts_exp2f(std::nanf(""))));
  EXPECT_TRUE(std::isnan(ts_exp2f(-std::nanf(""))));  // a NaN with its sign bit set: the bit clamps must not eat it
  EXPECT_EQ(ts_exp2f(127.0f), 0x1p127f);
  EXPECT_EQ(ts_exp2f(128.0f), inf);
  EXPECT_EQ(ts_exp2f(-126.0f), std::numeric_limits<float>::min());
  EXPECT_EQ(ts_exp2f(-149.0f), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(ts_exp2f(-149.5f), std::numeric_limits<float>::denorm_min());  // 0.71 of it: rounds up
  EXPECT_EQ(ts_exp2f(-150.0f), 0.0f);  // half of it: rounds to even, +0
  EXPECT_EQ(ts_exp2f(-151.5f), 0.0f);
  EXPECT_EQ(ts_exp2f(-1e30f), 0.0f);
  EXPECT_EQ(ts_exp2f(1e30f), inf);
  for (int n = -126; n <= 127; ++n) EXPECT_EQ(ts_exp2f(static_cast<float>(n)), std::ldexp(1.0f, n)) << n;
}

TEST(TsMath, Log2WithinThreeUlpEverywhere) {
  int64_t worst = 0;
  double worst_abs = 0;
  for (float x = 1e-44f; x < 1e-37f; x += 1e-44f * 97) {  // subnormal inputs (additive steps: x * 1.0007 == x there)
    float want = std::log2f(x), got = ts_log2f(x);
    worst = std::max(worst, ulp_distance(got, want));
  }
  for (float x = 1e-37f; x < 3e38f; x *= 1.0007f) {
    float want = std::log2f(x), got = ts_log2f(x);
    if (std::fabs(want) < 1e-3f) worst_abs = std::max(worst_abs, std::fabs(static_cast<double>(got) - want));
    else worst = std::max(worst, ulp_distance(got, want));
  }
  EXPECT_LE(worst, 3);
  EXPECT_LE(worst_abs, 1e-7);
}

TEST(TsMath, Log2SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ts_log2f(1.0f), 0.0f);
  EXPECT_EQ(ts_log2f(8.0f), 3.0f);
  EXPECT_EQ(ts_log2f(0.0f), -inf);
  EXPECT_EQ(ts_log2f(-0.0f), -inf);
  EXPECT_TRUE(std::isnan(ts_log2f(-1.0f)));
  EXPECT_EQ(ts_log2f(inf), inf);
  EXPECT_TRUE(std::isnan(ts_log2f(std::nanf(""))));
}

// sin against double-precision sin rounded to float: 2 ulp up to |x| = 1e12, 3e-7 absolute up to 1e15,
// and bounded beyond. Arguments: a fixed pseudo-random sample per decade (and both signs), plus the
// multiples of π/4 and their neighbours, where the reduction cancels the most.
TEST(TsMath, SinWithinTwoUlpBelow1e12) {
  uint64_t state = 12345;
  auto uniform = [&] {  // in [0, 1), from a 64-bit LCG (Knuth's MMIX constants)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) * 0x1.0p-53;
  };
  int64_t worst = 0;
  double worst_abs = 0;
  for (double decade = 1e-3; decade <= 1e15; decade *= 10)
    for (int i = 0; i < 100000; i++) {
      float x = static_cast<float>((2 * uniform() - 1) * decade);
      double want = std::sin(static_cast<double>(x));
      float got = ts_sinf(x);
      if (decade <= 1e12) worst = std::max(worst, ulp_distance(got, static_cast<float>(want)));
      else worst_abs = std::max(worst_abs, std::fabs(got - want));
    }
  for (int k = -1000; k <= 1000; k++) {
    float x = static_cast<float>(k * 0.78539816339744830962);
    for (float y : {x, std::nextafter(x, 1e30f), std::nextafter(x, -1e30f)})
      worst = std::max(worst, ulp_distance(ts_sinf(y), static_cast<float>(std::sin(static_cast<double>(y)))));
  }
  EXPECT_LE(worst, 2);
  EXPECT_LE(worst_abs, 3e-7);
  for (float x : {1e16f, -3e20f, 3.4e38f}) {
    EXPECT_LE(std::fabs(ts_sinf(x)), 1.0f) << x;
  }
}

TEST(TsMath, SinSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ts_sinf(0.0f), 0.0f);
  EXPECT_FALSE(std::signbit(ts_sinf(0.0f)));
  EXPECT_EQ(ts_sinf(-0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(ts_sinf(-0.0f)));
  EXPECT_EQ(ts_sinf(1e-30f), 1e-30f);  // sin x = x below 2^-12
  EXPECT_EQ(ts_sinf(-1e-40f), -1e-40f);  // subnormal
  EXPECT_TRUE(std::isnan(ts_sinf(inf)));
  EXPECT_TRUE(std::isnan(ts_sinf(-inf)));
  EXPECT_TRUE(std::isnan(ts_sinf(std::nanf(""))));
}
