// Exact kernel counts: the fusion rules of schedule.h, checked on the expressions a student meets first.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "tensorscope/tensor.h"

using ts::Tensor;

namespace {

Tensor realized(std::vector<int64_t> shape, float start = 0.5f) {
  std::vector<float> v(ts::Tensor::ones(shape).numel());
  for (size_t i = 0; i < v.size(); i++) v[i] = start + 0.01f * static_cast<float>(i % 97);
  return Tensor::from_data(v.data(), ts::DType::Float32, shape);
}

int64_t kernels_for(const std::function<Tensor()>& build) {
  Tensor t = build();
  ts::reset_kernel_count();
  t.realize();
  return ts::kernel_count();
}

}  // namespace

TEST(KernelCount, ElementwiseChainIsOneKernel) {
  Tensor x = realized({64, 64}), y = realized({64, 64}, 1.5f);
  EXPECT_EQ(kernels_for([&] { return x.add(y).mul(x.sin()); }), 1);  // (x + y) * x.sin()
  EXPECT_EQ(kernels_for([&] { return x.add(1.0).mul(2.0).exp().log().sqrt().neg().relu().sub(y).div(y).maximum(x); }), 1);
}

TEST(KernelCount, BroadcastFuses) {
  Tensor x = realized({64, 64}), b = realized({64});
  EXPECT_EQ(kernels_for([&] { return x.add(b).mul(b); }), 1);
}

TEST(KernelCount, ReduceFusesProducersAndConsumers) {
  Tensor x = realized({64, 64});
  EXPECT_EQ(kernels_for([&] { return x.mul(x).sum(std::vector<int64_t>{1}); }), 1);
  EXPECT_EQ(kernels_for([&] { return x.exp().sum(std::vector<int64_t>{1}).sqrt().mul(3.0); }), 1);
  EXPECT_EQ(kernels_for([&] { return x.sum(); }), 1);
}

TEST(KernelCount, MatmulAndSumIsOneKernel) {
  Tensor x = Tensor::eye(3);
  std::vector<float> yv{2, 0, -2};
  Tensor y = Tensor::from_data(yv.data(), ts::DType::Float32, {1, 3});
  EXPECT_EQ(kernels_for([&] { return y.matmul(x).sum(); }), 1);
  Tensor a = realized({16, 32}), b = realized({32, 8});
  EXPECT_EQ(kernels_for([&] { return a.matmul(b); }), 1);
  EXPECT_EQ(kernels_for([&] { return a.matmul(b).relu(); }), 1);
}

TEST(KernelCount, ExpandedReduceEndsAKernel) {
  Tensor x = realized({32, 32});
  // x - x.mean(axis=0, keepdim=True): the column means are broadcast down the columns, across rows
  EXPECT_EQ(kernels_for([&] { return x.sub(x.mean(std::vector<int64_t>{0}, true)); }), 2);
  // a full reduce broadcast back over everything
  EXPECT_EQ(kernels_for([&] { return x.div(x.sum()); }), 2);
}

TEST(KernelCount, RowReductionsFuseIntoOneKernel) {
  Tensor x = realized({32, 48});
  // x - x.max(axis=1, keepdim=True): the max is broadcast back along its own row
  EXPECT_EQ(kernels_for([&] { return x.sub(x.max(std::vector<int64_t>{1}, true)); }), 1);
  // softmax: max, sum of exp and the division, all per row (tinygrad's default needs 3 kernels)
  EXPECT_EQ(kernels_for([&] { return x.softmax(-1); }), 1);
  EXPECT_EQ(kernels_for([&] { return x.log_softmax(-1); }), 1);
  // layernorm without affine parameters: mean, variance, normalize
  EXPECT_EQ(kernels_for([&] {
              Tensor xc = x.sub(x.mean(std::vector<int64_t>{-1}, true));
              return xc.div(xc.square().mean(std::vector<int64_t>{-1}, true).add(1e-5).sqrt());
            }),
            1);
}

TEST(KernelCount, ContiguousEndsAKernel) {
  Tensor x = realized({8, 8});
  EXPECT_EQ(kernels_for([&] { return x.add(1.0).contiguous().mul(2.0); }), 2);
}

TEST(KernelCount, ContiguousOfARealizedBufferIsTheBufferItself) {
  // torch.Tensor.contiguous returns self when it is contiguous; tinygrad drops a CONTIGUOUS of a buffer
  Tensor x = realized({8, 8});
  EXPECT_EQ(kernels_for([&] { return x.contiguous(); }), 0);
  EXPECT_EQ(kernels_for([&] { return x.contiguous().mul(2.0); }), 1);
  // a view of it is not a buffer of its own shape: copied; clone() always copies (torch.Tensor.clone)
  EXPECT_EQ(kernels_for([&] { return x.permute({1, 0}).contiguous(); }), 1);
  EXPECT_EQ(kernels_for([&] { return x.clone(); }), 1);
}

TEST(KernelCount, ExpensiveSharedValueIsStoredOnce) {
  Tensor x = realized({16, 16});
  // a long chain used twice: storing it beats recomputing 20 ALU ops per element
  EXPECT_EQ(kernels_for([&] {
              Tensor h = x;
              for (int i = 0; i < 20; i++) h = h.mul(1.01).add(0.01);
              return h.add(h.sum(std::vector<int64_t>{1}, true));
            }),
            2);
}

TEST(KernelCount, RealizedTensorIsFree) {
  Tensor x = realized({4, 4});
  EXPECT_EQ(kernels_for([&] { return x; }), 0);
}
