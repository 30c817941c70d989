// Accuracy of the vectorizable exp2 / log2 of ts_math.h against libm, over the whole float range,
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

TEST(TsMath, Exp2WithinTwoUlpEverywhere) {
  int64_t worst = 0;
  for (float x = -149.0f; x < 128.0f; x += 0.0137f) {
    float want = std::exp2f(x), got = ts_exp2f(x);
    if (want < std::numeric_limits<float>::min()) {
      EXPECT_NEAR(got, want, 2 * std::numeric_limits<float>::denorm_min()) << x;  // subnormal results
      continue;
    }
    worst = std::max(worst, ulp_distance(got, want));
  }
  EXPECT_LE(worst, 2);
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
