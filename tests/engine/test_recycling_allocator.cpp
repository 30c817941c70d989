// RecyclingAllocator (tensor/recycling_allocator.h): freed blocks of a size are handed out again on the same
// thread; tensors, whose handles and autograd records come from it, stay valid across threads, also after
// the thread that made them has exited and returned its free blocks.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "tensor/recycling_allocator.h"
#include "tensorscope/tensor.h"

using ts::RecyclingAllocator;
using ts::Tensor;

namespace {

struct Payload {
  double values[5] = {1, 2, 3, 4, 5};
};

TEST(RecyclingAllocator, ReusesAFreedBlockOfTheSameSize) {
  RecyclingAllocator<Payload> alloc;
  Payload* a = alloc.allocate(1);
  alloc.deallocate(a, 1);
  Payload* b = alloc.allocate(1);
  // the last block freed is the first given out again (without AddressSanitizer, which must see every free)
  if (RecyclingAllocator<Payload>::kRecycle) {
    EXPECT_EQ(a, b);
  }
  Payload* c = alloc.allocate(1);
  EXPECT_NE(b, c);
  alloc.deallocate(b, 1);
  alloc.deallocate(c, 1);
  // arrays are never recycled
  Payload* many = alloc.allocate(3);
  alloc.deallocate(many, 3);
}

TEST(RecyclingAllocator, SharedObjectsLiveAndDieAcrossThreads) {
  std::vector<std::shared_ptr<Payload>> made;
  std::thread maker([&] {
    for (int i = 0; i < 100; i++) made.push_back(std::allocate_shared<Payload>(RecyclingAllocator<Payload>()));
    made.resize(50);  // half freed on this thread, into its list, which the thread's exit returns
  });
  maker.join();
  ASSERT_EQ(made.size(), 50u);
  for (const auto& p : made) EXPECT_EQ(p->values[4], 5.0);
  std::thread freer([&] { made.clear(); });  // blocks of another thread freed here
  freer.join();
  auto again = std::allocate_shared<Payload>(RecyclingAllocator<Payload>());
  EXPECT_EQ(again->values[0], 1.0);
}

// A tensor with autograd history made on a thread that then exits: its handle and Function blocks stay its
// own, the backward on the main thread reads them, and they are freed there.
TEST(RecyclingAllocator, TensorsMadeOnAnExitedThread) {
  Tensor x, y;
  std::thread maker([&] {
    x = Tensor::full({4}, 3.0);
    x.set_requires_grad(true);
    for (int i = 0; i < 20; i++) Tensor::full({4}, 1.0).add(x);  // made and freed on this thread
    y = x.mul(x).sum();
  });
  maker.join();
  EXPECT_DOUBLE_EQ(y.item(), 36.0);
  y.backward();
  const Tensor g = x.grad();
  ASSERT_TRUE(g.defined());
  EXPECT_DOUBLE_EQ(g.sum().item(), 24.0);  // d(sum x²)/dx = 2x = 6, four of them
}

}  // namespace
