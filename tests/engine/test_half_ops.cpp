// PyTorch's float16 rule in the C++ API (tensor/ops_common.h): a composite op on float16 tensors returns
// float16, computed in float32 and rounded once. The reference is the same op run by the engine in float32
// on the (exactly) widened inputs, rounded with ts_round_half; each case also checks that its inputs
// would show a rounding in between (the composite's primitives rounded one by one give other bits).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "ir/ts_math.h"
#include "tensor/tensor_impl.h"
#include "tensorscope/tensor.h"

namespace {

using ts::DType;
using ts::Tensor;

// Uniform values in [lo, hi), rounded to float16, as a float16 tensor.
Tensor half_tensor(const ts::Shape& shape, float lo, float hi, const std::string& device, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<uint16_t> v(ts::shape_numel(shape));
  for (uint16_t& h : v) h = ts_float_to_half(dist(rng));
  return Tensor::from_data(v.data(), DType::Float16, shape, device);
}

std::vector<float> values(const Tensor& t) {
  std::vector<float> out(t.numel());
  if (t.dtype() == DType::Float32) {
    t.copy_to_host(out.data());
  } else {
    std::vector<uint16_t> h(t.numel());
    t.copy_to_host(h.data());
    for (size_t i = 0; i < h.size(); i++) out[i] = ts_half_to_float(h[i]);
  }
  return out;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

// op on the float16 inputs is float16 and equals op on the widened inputs, rounded to float16, bit for bit
void expect_rounded_once(const std::vector<Tensor>& inputs, const Op& op) {
  Tensor got = op(inputs);
  ASSERT_EQ(got.dtype(), DType::Float16);
  std::vector<Tensor> wide;
  for (const Tensor& t : inputs) wide.push_back(t.cast(DType::Float32));
  Tensor want = op(wide);
  ASSERT_EQ(want.dtype(), DType::Float32);
  ASSERT_EQ(got.shape(), want.shape());
  std::vector<float> g = values(got), w = values(want);
  for (size_t i = 0; i < g.size(); i++)
    ASSERT_TRUE(same_bits(g[i], ts_round_half(w[i]))) << "element " << i << ": " << g[i] << ", float32 op rounded: "
                                                      << ts_round_half(w[i]) << " (unrounded " << w[i] << ")";
}

// The composite's primitives rounded one by one (`steps` on float16 tensors, each step a primitive that
// rounds its result) differ from the one rounding somewhere: the inputs can tell the two apart.
void expect_stepwise_differs(const std::vector<Tensor>& inputs, const Op& op, const Op& steps) {
  std::vector<float> once = values(op(inputs)), stepwise = values(steps(inputs));
  ASSERT_EQ(once.size(), stepwise.size());
  bool differs = false;
  for (size_t i = 0; i < once.size(); i++) differs = differs || !same_bits(once[i], stepwise[i]);
  EXPECT_TRUE(differs) << "these inputs cannot tell one rounding from several";
}

class HalfOps : public ::testing::TestWithParam<const char*> {
 protected:
  std::string dev() const { return GetParam(); }
};

TEST_P(HalfOps, Exp) {
  std::vector<Tensor> x{half_tensor({64}, -6, 6, dev(), 1)};
  Op op = [](const std::vector<Tensor>& a) { return a[0].exp(); };
  expect_rounded_once(x, op);
  // exp(x) = exp2(x·log2 e): rounding x·log2 e to float16 first loses up to |x|·2^-11
  Op steps = [](const std::vector<Tensor>& a) { return a[0].mul(a[0].scalar_like(1.4426950408889634)).exp2(); };
  expect_stepwise_differs(x, op, steps);
}

TEST_P(HalfOps, Sigmoid) {
  std::vector<Tensor> x{half_tensor({64}, -8, 8, dev(), 2)};
  Op op = [](const std::vector<Tensor>& a) { return a[0].sigmoid(); };
  expect_rounded_once(x, op);
  Op steps = [](const std::vector<Tensor>& a) { return a[0].neg().exp().add(1.0).reciprocal(); };
  expect_stepwise_differs(x, op, steps);
}

TEST_P(HalfOps, Div) {
  std::vector<Tensor> ab{half_tensor({64}, -2, 2, dev(), 3), half_tensor({64}, 0.5f, 3, dev(), 4)};
  Op op = [](const std::vector<Tensor>& a) { return a[0].div(a[1]); };
  expect_rounded_once(ab, op);
  Op steps = [](const std::vector<Tensor>& a) { return a[0].mul(a[1].reciprocal()); };  // div = a · (1/b)
  expect_stepwise_differs(ab, op, steps);
  // a python-style scalar next to a float16 tensor is float16 (rounded: torch 1.13) and does not promote
  Tensor s = ab[0].div(7.0);
  EXPECT_EQ(s.dtype(), DType::Float16);
}

TEST_P(HalfOps, Softmax) {
  std::vector<Tensor> x{half_tensor({4, 33}, -8, 8, dev(), 5)};
  Op op = [](const std::vector<Tensor>& a) { return a[0].softmax(-1); };
  expect_rounded_once(x, op);
  Op steps = [](const std::vector<Tensor>& a) {
    Tensor e = a[0].sub(a[0].max(std::vector<int64_t>{-1}, true)).exp();
    return e.mul(e.sum(std::vector<int64_t>{-1}, true).reciprocal());
  };
  expect_stepwise_differs(x, op, steps);
}

TEST_P(HalfOps, Layernorm) {
  std::vector<Tensor> x{half_tensor({4, 33}, -3, 3, dev(), 6)};
  expect_rounded_once(x, [](const std::vector<Tensor>& a) { return a[0].layernorm(-1); });
}

TEST_P(HalfOps, Matmul) {
  std::vector<Tensor> ab{half_tensor({8, 16}, -2, 2, dev(), 7), half_tensor({16, 12}, -2, 2, dev(), 8)};
  Op op = [](const std::vector<Tensor>& a) { return a[0].matmul(a[1]); };
  expect_rounded_once(ab, op);
  // rounding each product to float16 before the (float32) sum
  Op steps = [](const std::vector<Tensor>& a) {
    return a[0].reshape({8, 1, 16}).mul(a[1].transpose(0, 1).reshape({1, 12, 16})).sum(std::vector<int64_t>{-1});
  };
  expect_stepwise_differs(ab, op, steps);
}

TEST_P(HalfOps, Mean) {
  std::vector<Tensor> x{half_tensor({6, 50}, -2, 2, dev(), 9)};
  Op op = [](const std::vector<Tensor>& a) { return a[0].mean(std::vector<int64_t>{1}); };
  expect_rounded_once(x, op);
  Op steps = [](const std::vector<Tensor>& a) { return a[0].sum(std::vector<int64_t>{1}).mul(1.0 / 50); };
  expect_stepwise_differs(x, op, steps);
}

TEST_P(HalfOps, CrossEntropyLoss) {
  std::vector<int32_t> labels = {3, 0, 9, 1, 4};
  Tensor y = Tensor::from_data(labels.data(), DType::Int32, {5}, dev());
  std::vector<Tensor> x{half_tensor({5, 10}, -4, 4, dev(), 10)};
  expect_rounded_once(x, [&](const std::vector<Tensor>& a) { return a[0].cross_entropy(y); });
  expect_rounded_once(x, [&](const std::vector<Tensor>& a) { return a[0].cross_entropy(y, "none"); });
}

TEST_P(HalfOps, PromotionAsTorchResultType) {
  Tensor h = half_tensor({5}, -2, 2, dev(), 11);
  std::vector<float> fv = {0.1f, -0.3f, 1e-4f, 7.0f, 0.7f};
  Tensor f = Tensor::from_data(fv.data(), DType::Float32, {5}, dev());
  // float16 ⊕ float32, both with dims: float32, computed on the widened float16 values
  for (const Tensor& r : {h.add(f), f.mul(h), h.div(f), h.matmul(f)}) EXPECT_EQ(r.dtype(), DType::Float32);
  std::vector<float> sum = values(h.add(f)), hv = values(h);
  for (size_t i = 0; i < 5; i++) EXPECT_TRUE(same_bits(sum[i], hv[i] + fv[i])) << "element " << i;
  // a 0-d float32 does not promote a float16 with dims; a 0-d float16 does not demote a float32
  Tensor f0 = Tensor::scalar(0.1, DType::Float32, dev()), h0 = Tensor::scalar(0.5, DType::Float16, dev());
  EXPECT_EQ(h.add(f0).dtype(), DType::Float16);
  EXPECT_EQ(h.exp().mul(f0).dtype(), DType::Float16);
  EXPECT_EQ(h.lerp(h, f0).dtype(), DType::Float16);
  EXPECT_EQ(f.add(h0).dtype(), DType::Float32);
  EXPECT_EQ(f.div(h0).dtype(), DType::Float32);
  EXPECT_EQ(h0.exp().dtype(), DType::Float16);
  // h + f0 adds the unrounded 0.1 in float32 and rounds once
  std::vector<float> s0 = values(h.add(f0));
  for (size_t i = 0; i < 5; i++) EXPECT_TRUE(same_bits(s0[i], ts_round_half(hv[i] + 0.1f))) << "element " << i;
  // integer results stay integer
  EXPECT_EQ(h.argmax().dtype(), DType::Int32);
  EXPECT_EQ(h.lt(f).dtype(), DType::Bool);
}

// Primitives that round once in lowering, and movement ops, stay float16 graph nodes: no widening casts.
TEST_P(HalfOps, PrimitivesAndMovementStayFloat16) {
  Tensor a = half_tensor({4, 6}, -2, 2, dev(), 12), b = half_tensor({4, 6}, -2, 2, dev(), 13);
  EXPECT_EQ(ts::node(a.add(b)).op, ts::Op::Add);
  EXPECT_EQ(ts::node(a.mul(b)).op, ts::Op::Mul);
  EXPECT_EQ(ts::node(a.maximum(b)).op, ts::Op::Max);
  EXPECT_EQ(ts::node(a.sum(std::vector<int64_t>{1}, true)).op, ts::Op::ReduceSum);
  EXPECT_EQ(ts::node(a.permute({1, 0})).op, ts::Op::Permute);
  EXPECT_EQ(ts::node(a.pad({{1, 0}, {0, 2}})).op, ts::Op::Pad);
  EXPECT_EQ(Tensor::cat_all({a, b}, 1).dtype(), DType::Float16);
  EXPECT_EQ(ts::node(a.exp()).op, ts::Op::Cast);  // a composite: computed in float32, rounded by a CAST
}

// Gradients of float16 inputs are float16: the float32 gradient of the widened op, rounded once.
TEST_P(HalfOps, GradientsAreFloat16) {
  for (int which = 0; which < 2; which++) {
    Tensor a = half_tensor({3, 7}, -3, 3, dev(), 14), b = half_tensor({3, 7}, -3, 3, dev(), 15);
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    auto f = [which](const Tensor& x, const Tensor& y) { return which == 0 ? x.exp().mul(y) : x.maximum(y).softmax(-1); };
    Tensor out = f(a, b).sum();
    out.backward();
    ASSERT_EQ(a.grad().dtype(), DType::Float16);
    ASSERT_EQ(b.grad().dtype(), DType::Float16);
    Tensor a32 = a.detach().cast(DType::Float32), b32 = b.detach().cast(DType::Float32);
    a32.set_requires_grad(true);
    b32.set_requires_grad(true);
    f(a32, b32).sum().backward();
    for (auto [g16, g32] : {std::pair{a.grad(), a32.grad()}, std::pair{b.grad(), b32.grad()}}) {
      std::vector<float> g = values(g16), w = values(g32);
      // one float16 ulp: the float16 graph rounds the forward value it multiplies by (exp(a) in
      // exp(a)·b) where the float32 graph does not
      for (size_t i = 0; i < g.size(); i++)
        EXPECT_NEAR(g[i], w[i], std::abs(w[i]) * 1e-3 + 1e-6) << "case " << which << ", element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, HalfOps, ::testing::Values("INTERP", "C"));

}  // namespace
