// Views: strides, masks and broadcasting, checked element by element against a direct computation.
#include <gtest/gtest.h>

#include "graph/view.h"

using ts::Shape;
using ts::View;
using ts::ViewStack;

TEST(View, ContiguousStrides) {
  View v = View::make({2, 3, 4});
  EXPECT_EQ(v.strides, (std::vector<int64_t>{12, 4, 1}));
  EXPECT_TRUE(v.contiguous);
  EXPECT_EQ(v.index_of({1, 2, 3}), 23);
}

TEST(View, PermuteSwapsStrides) {
  View v = View::make({2, 3}).permute({1, 0});
  EXPECT_EQ(v.shape, (Shape{3, 2}));
  EXPECT_EQ(v.strides, (std::vector<int64_t>{1, 3}));
  EXPECT_FALSE(v.contiguous);
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 2; j++) EXPECT_EQ(v.index_of({i, j}), j * 3 + i);
}

TEST(View, ExpandBroadcastsWithZeroStride) {
  View v = View::make({3, 1}).expand({3, 4});
  EXPECT_EQ(v.strides[1], 0);
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 4; j++) EXPECT_EQ(v.index_of({i, j}), i);
}

TEST(View, PadMasksOutOfRange) {
  View v = View::make({2, 2}).pad({{1, 0}, {0, 2}});
  EXPECT_EQ(v.shape, (Shape{3, 4}));
  EXPECT_TRUE(v.has_mask());
  EXPECT_EQ(v.index_of({0, 0}), -1);  // padded row
  EXPECT_EQ(v.index_of({1, 0}), 0);
  EXPECT_EQ(v.index_of({2, 1}), 3);
  EXPECT_EQ(v.index_of({2, 2}), -1);  // padded column
}

TEST(View, ShrinkMovesOffset) {
  View v = View::make({4, 5}).shrink({{1, 3}, {2, 5}});
  EXPECT_EQ(v.shape, (Shape{2, 3}));
  EXPECT_EQ(v.offset, 7);
  EXPECT_EQ(v.index_of({1, 2}), 2 * 5 + 4);
}

TEST(View, ShrinkAfterPadDropsTheMask) {
  View v = View::make({3}).pad({{2, 2}}).shrink({{2, 5}});
  EXPECT_FALSE(v.has_mask());
  EXPECT_TRUE(v.contiguous);
}

TEST(View, FlipNegatesStride) {
  View v = View::make({4}).flip({true});
  for (int64_t i = 0; i < 4; i++) EXPECT_EQ(v.index_of({i}), 3 - i);
}

TEST(View, ReshapeOfPermuteNeedsASecondView) {
  // a transposed matrix cannot be flattened with strides alone
  View t = View::make({2, 3}).permute({1, 0});
  EXPECT_FALSE(t.reshape({6}).has_value());
  ViewStack vs = ViewStack::make({2, 3}).permute({1, 0}).reshape({6});
  EXPECT_EQ(vs.views.size(), 2u);
  // flat index k of the transposed matrix: row k/2, col k%2 of the (3,2) view → element (k%2, k/2)
  for (int64_t k = 0; k < 6; k++) EXPECT_EQ(vs.index_of({k}), (k % 2) * 3 + k / 2);
}

TEST(View, ReshapeSplitsAndMergesWithStrides) {
  View v = View::make({6, 4}).shrink({{0, 6}, {1, 3}});  // (6, 2), strides (4, 1), offset 1
  auto r = v.reshape({3, 2, 2});
  ASSERT_TRUE(r.has_value());
  for (int64_t a = 0; a < 3; a++)
    for (int64_t b = 0; b < 2; b++)
      for (int64_t c = 0; c < 2; c++) EXPECT_EQ(r->index_of({a, b, c}), v.index_of({a * 2 + b, c}));
}

TEST(View, ReshapeOfExpandKeepsZeroStride) {
  View v = View::make({1, 4}).expand({3, 4});
  auto r = v.reshape({3, 2, 2});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->strides[0], 0);
  EXPECT_EQ(r->index_of({2, 1, 1}), 3);
}

TEST(View, MaskedReshapeAddingUnitDims) {
  View v = View::make({2}).pad({{1, 1}});
  auto r = v.reshape({1, 4, 1});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->index_of({0, 0, 0}), -1);
  EXPECT_EQ(r->index_of({0, 2, 0}), 1);
}

TEST(View, BroadcastAcrossRanksThroughStack) {
  // (3,) → reshape (1, 3) → expand (4, 3): every row reads the same three elements
  ViewStack vs = ViewStack::make({3}).reshape({1, 3}).expand({4, 3});
  for (int64_t i = 0; i < 4; i++)
    for (int64_t j = 0; j < 3; j++) EXPECT_EQ(vs.index_of({i, j}), j);
}
