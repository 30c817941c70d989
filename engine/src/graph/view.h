// Views: how a tensor's logical index maps to a position in contiguous memory.
//
// A View is (shape, strides, offset, mask), as in tinygrad's ShapeTracker: element i of the view lives
// at `offset + sum(i[d] * strides[d])` of the underlying contiguous buffer, and is only valid (else 0)
// when `mask[d].first <= i[d] < mask[d].second` for every d. Movement ops never copy data:
//   reshape  — new strides when the reshape can be expressed with strides, otherwise a new View is
//              pushed on the ViewStack (the old one is then read through a flat index);
//   permute  — permutes shape and strides;
//   expand   — broadcasting a size-1 dimension by giving it stride 0;
//   pad      — grows the shape, shifts the offset and adds a validity mask;
//   shrink   — shrinks the shape, moves the offset, clips the mask;
//   flip     — negates a stride, moves the offset to the last element.
// All shapes are in elements; strides and offsets count elements, not bytes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ts {

using Shape = std::vector<int64_t>;
using Pairs = std::vector<std::pair<int64_t, int64_t>>;  // (before, after) or (start, end) per dim

int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s, const char* sep = ", ");

struct View {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  std::vector<std::pair<int64_t, int64_t>> mask;  // empty: every index valid
  bool contiguous = true;                          // shape/strides/offset equal a fresh buffer's

  static View make(const Shape& shape);  // contiguous view of a fresh buffer
  bool has_mask() const { return !mask.empty(); }

  View permute(const std::vector<int64_t>& order) const;
  View expand(const Shape& new_shape) const;  // only size-1 dims (or equal sizes) may change
  View pad(const Pairs& pads) const;
  View shrink(const Pairs& bounds) const;
  View flip(const std::vector<bool>& axes) const;
  // Returns nullopt when the reshape cannot be expressed with strides over this view.
  std::optional<View> reshape(const Shape& new_shape) const;

  // Reference semantics for tests and the interpreter: the buffer position of a logical index, or
  // -1 when the index is masked out.
  int64_t index_of(const std::vector<int64_t>& idx) const;
  std::string str() const;
};

// A stack of views, outermost (the tensor's own shape) last. Index i of the top view gives a flat
// position; that position, unflattened over the shape of the view below, indexes that view; and so on.
struct ViewStack {
  std::vector<View> views;

  static ViewStack make(const Shape& shape) { return ViewStack{{View::make(shape)}}; }
  const Shape& shape() const { return views.back().shape; }
  ViewStack reshape(const Shape& new_shape) const;
  ViewStack permute(const std::vector<int64_t>& order) const;
  ViewStack expand(const Shape& new_shape) const;
  ViewStack pad(const Pairs& pads) const;
  ViewStack shrink(const Pairs& bounds) const;
  ViewStack flip(const std::vector<bool>& axes) const;
  bool has_mask() const;
  int64_t index_of(const std::vector<int64_t>& idx) const;  // -1: masked out
  std::string str() const;
};

}  // namespace ts
