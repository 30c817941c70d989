// float16 conversions (ts_math.h) and float16 kernels, against an independent reference: the compiler's
// _Float16 conversions (gcc/clang on x86-64 round to nearest even in hardware, F16C / AVX512-FP16).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ir/ts_math.h"
#include "tensorscope/tensor.h"

namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float reference_to_float(uint16_t h) {
  _Float16 x;
  std::memcpy(&x, &h, 2);
  return static_cast<float>(x);
}
uint16_t reference_to_half(float f) {
  _Float16 x = static_cast<_Float16>(f);
  uint16_t h;
  std::memcpy(&h, &x, 2);
  return h;
}

// Every float that decides a rounding: each float16 value, the midpoints to its neighbours (the ties),
// one float either side of each of those, plus a sweep over the whole float range (every 65521st pattern).
std::vector<float> rounding_cases() {
  std::vector<float> out;
  for (uint32_t h = 0; h < 0x7c00; h++) {
    float lo = reference_to_float(static_cast<uint16_t>(h)), hi = reference_to_float(static_cast<uint16_t>(h + 1));
    float mid = 0.5f * (lo + hi);  // exact: float has 13 more mantissa bits than float16
    for (float f : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      out.push_back(f);
      out.push_back(-f);
    }
  }
  for (uint64_t u = 0; u < (1ull << 32); u += 65521) out.push_back(bits_float(static_cast<uint32_t>(u)));
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e30f, INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f}) out.push_back(f);
  return out;
}

}  // namespace

TEST(Half, ToFloatIsExactForEveryPattern) {
  for (uint32_t h = 0; h < 65536; h++) {
    float want = reference_to_float(static_cast<uint16_t>(h)), got = ts_half_to_float(static_cast<uint16_t>(h));
    ASSERT_EQ(float_bits(got), float_bits(want)) << "float16 pattern 0x" << std::hex << h;
  }
}

TEST(Half, ToHalfRoundsToNearestEven) {
  for (float f : rounding_cases())
    ASSERT_EQ(ts_float_to_half(f), reference_to_half(f)) << "float " << std::hexfloat << f << " (0x" << std::hex
                                                         << float_bits(f) << ")";
}

TEST(Half, RoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 65536; h++) {
    uint16_t back = ts_float_to_half(ts_half_to_float(static_cast<uint16_t>(h)));
    bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    // a signalling NaN comes back quiet, as hardware conversions make it
    ASSERT_EQ(back, nan ? (h | 0x200) : h) << "float16 pattern 0x" << std::hex << h;
  }
}

TEST(Half, SpecialValues) {
  EXPECT_EQ(ts_float_to_half(65520.0f), 0x7c00);            // halfway to 2^16 rounds (to even) to inf
  EXPECT_EQ(ts_float_to_half(65519.996f), 0x7bff);          // just below: the largest finite, 65504
  EXPECT_EQ(ts_float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(ts_float_to_half(bits_float(0x33000000)), 0);   // 2^-25: the tie between 0 and 2^-24 goes to 0
  EXPECT_EQ(ts_float_to_half(bits_float(0x33000001)), 1);   // just above the tie: the smallest subnormal
  EXPECT_EQ(ts_float_to_half(1.0f + 0x1p-11f), 0x3c00);     // tie between 1 and 1 + 2^-10: even (1)
  EXPECT_EQ(ts_float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02); // tie between 1 + 2^-10 and 1 + 2^-9: even (up)
  EXPECT_TRUE(std::isnan(ts_half_to_float(ts_float_to_half(NAN))));
  EXPECT_EQ(ts_round_half(0.1f), 0.0999755859375f);
}

// The interpreter (the reference for every backend) and the C kernels load, cast and store float16 with
// these conversions: every float16 pattern through a float16 → float32 kernel, and the rounding cases
// through a float32 → float16 one, on each device.
class HalfKernels : public ::testing::TestWithParam<const char*> {};

TEST_P(HalfKernels, CastEveryPatternToFloat32) {
  std::vector<uint16_t> in(65536);
  for (uint32_t h = 0; h < 65536; h++) in[h] = static_cast<uint16_t>(h);
  ts::Tensor t = ts::Tensor::from_data(in.data(), ts::DType::Float16, {65536}, GetParam()).cast(ts::DType::Float32);
  std::vector<float> out(65536);
  t.copy_to_host(out.data());
  for (uint32_t h = 0; h < 65536; h++)
    ASSERT_EQ(float_bits(out[h]), float_bits(reference_to_float(static_cast<uint16_t>(h)))) << "0x" << std::hex << h;
}

TEST_P(HalfKernels, CastFloat32RoundsToNearestEven) {
  std::vector<float> in = rounding_cases();
  int64_t n = static_cast<int64_t>(in.size());
  ts::Tensor t = ts::Tensor::from_data(in.data(), ts::DType::Float32, {n}, GetParam()).cast(ts::DType::Float16);
  std::vector<uint16_t> out(in.size());
  t.copy_to_host(out.data());
  for (size_t i = 0; i < in.size(); i++) {
    uint16_t want = reference_to_half(in[i]);
    if (std::isnan(in[i])) ASSERT_EQ(out[i] & 0x7e00, 0x7e00) << "NaN must stay NaN";
    else ASSERT_EQ(out[i], want) << "float " << std::hexfloat << in[i];
  }
}

// float16 + float16: computed in float32, rounded once (ties included: 2048 + 1 is a tie, rounds to even)
TEST_P(HalfKernels, AddRoundsTheFloat32Sum) {
  std::vector<uint16_t> a = {0x6800, 0x6800, 0x3c00, 0x7bff, 0x0001, 0x8000};  // 2048, 2048, 1, 65504, 2^-24, -0
  std::vector<uint16_t> b = {0x3c00, 0x4000, 0x1400, 0x5000, 0x0001, 0x8000};  // 1, 2, 2^-10, 32, 2^-24, -0
  ts::Tensor x = ts::Tensor::from_data(a.data(), ts::DType::Float16, {6}, GetParam());
  ts::Tensor y = ts::Tensor::from_data(b.data(), ts::DType::Float16, {6}, GetParam());
  ts::Tensor s = x.add(y);
  ASSERT_EQ(s.dtype(), ts::DType::Float16);
  std::vector<uint16_t> out(6);
  s.copy_to_host(out.data());
  for (size_t i = 0; i < a.size(); i++)
    EXPECT_EQ(out[i], reference_to_half(reference_to_float(a[i]) + reference_to_float(b[i]))) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Devices, HalfKernels, ::testing::Values("INTERP", "C"));
