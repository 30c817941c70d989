#include "graph/view.h"

#include <sstream>
#include <stdexcept>

namespace ts {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = s[i] == 1 ? 0 : acc;  // size-1 dims get stride 0, so views compare equal (tinygrad does this too)
    acc *= s[i];
  }
  return st;
}

std::string shape_str(const Shape& s, const char* sep) {
  std::ostringstream o;
  for (size_t i = 0; i < s.size(); i++) o << (i ? sep : "") << s[i];
  return o.str();
}

static bool is_contiguous(const View& v) {
  return v.mask.empty() && v.offset == 0 && v.strides == contiguous_strides(v.shape);
}

static View finish(View v) {
  // a mask that covers everything is no mask
  bool full = true;
  for (size_t d = 0; d < v.mask.size(); d++)
    if (v.mask[d].first != 0 || v.mask[d].second != v.shape[d]) full = false;
  if (full) v.mask.clear();
  for (size_t d = 0; d < v.shape.size(); d++)
    if (v.shape[d] == 1) v.strides[d] = 0;
  v.contiguous = is_contiguous(v);
  return v;
}

View View::make(const Shape& shape) {
  View v;
  v.shape = shape;
  v.strides = contiguous_strides(shape);
  v.contiguous = true;
  return v;
}

View View::permute(const std::vector<int64_t>& order) const {
  View v;
  for (int64_t o : order) {
    v.shape.push_back(shape[o]);
    v.strides.push_back(strides[o]);
    if (!mask.empty()) v.mask.push_back(mask[o]);
  }
  v.offset = offset;
  return finish(v);
}

View View::expand(const Shape& new_shape) const {
  View v = *this;
  for (size_t d = 0; d < shape.size(); d++) {
    if (shape[d] == new_shape[d]) continue;
    if (shape[d] != 1) throw std::invalid_argument("View::expand: only size-1 dims can expand");
    v.shape[d] = new_shape[d];
    v.strides[d] = 0;
    if (!v.mask.empty()) v.mask[d] = mask[d].second > mask[d].first ? std::make_pair<int64_t, int64_t>(0, int64_t(new_shape[d])) : std::make_pair<int64_t, int64_t>(0, 0);
  }
  return finish(v);
}

View View::pad(const Pairs& pads) const {
  View v = *this;
  if (v.mask.empty())
    for (int64_t s : shape) v.mask.push_back({0, s});
  for (size_t d = 0; d < shape.size(); d++) {
    auto [b, a] = pads[d];
    v.offset -= b * strides[d];
    v.shape[d] = shape[d] + b + a;
    v.mask[d] = {v.mask[d].first + b, v.mask[d].second + b};
  }
  return finish(v);
}

View View::shrink(const Pairs& bounds) const {
  View v = *this;
  for (size_t d = 0; d < shape.size(); d++) {
    auto [s, e] = bounds[d];
    v.offset += s * strides[d];
    v.shape[d] = e - s;
    if (!v.mask.empty()) {
      int64_t lo = std::max<int64_t>(0, mask[d].first - s), hi = std::min<int64_t>(e - s, mask[d].second - s);
      v.mask[d] = {lo, std::max(lo, hi)};
    }
  }
  return finish(v);
}

View View::flip(const std::vector<bool>& axes) const {
  View v = *this;
  for (size_t d = 0; d < shape.size(); d++) {
    if (!axes[d]) continue;
    v.offset += (shape[d] - 1) * strides[d];
    v.strides[d] = -strides[d];
    if (!v.mask.empty()) v.mask[d] = {shape[d] - mask[d].second, shape[d] - mask[d].first};
  }
  return finish(v);
}

// Stride-only reshape, after NumPy's _attempt_nocopy_reshape: groups of old dims that multiply to
// groups of new dims must be laid out contiguously relative to each other.
std::optional<View> View::reshape(const Shape& new_shape) const {
  if (shape == new_shape) return *this;
  if (shape_numel(new_shape) == 0 || is_contiguous(*this)) {
    View v = View::make(new_shape);
    v.offset = offset;
    if (shape_numel(new_shape) == 0) v.offset = 0;
    return finish(v);
  }
  std::vector<int64_t> od, os;  // old dims without 1s
  std::vector<std::pair<int64_t, int64_t>> om;
  for (size_t d = 0; d < shape.size(); d++)
    if (shape[d] != 1) {
      od.push_back(shape[d]);
      os.push_back(strides[d]);
      if (!mask.empty()) om.push_back(mask[d]);
    } else if (!mask.empty() && mask[d].first == mask[d].second) {
      return std::nullopt;  // an empty size-1 mask cannot be carried over
    }
  if (!mask.empty()) {
    // with a mask, only reshapes that add or remove size-1 dims keep the mask meaningful
    std::vector<int64_t> nd;
    for (int64_t s : new_shape)
      if (s != 1) nd.push_back(s);
    if (nd != od) return std::nullopt;
    View v;
    v.shape = new_shape;
    v.offset = offset;
    size_t k = 0;
    for (int64_t s : new_shape) {
      if (s == 1) {
        v.strides.push_back(0);
        v.mask.push_back({0, 1});
      } else {
        v.strides.push_back(os[k]);
        v.mask.push_back(om[k]);
        k++;
      }
    }
    return finish(v);
  }
  std::vector<int64_t> ns(new_shape.size(), 0);
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < new_shape.size() && oi < od.size()) {
    if (new_shape[ni] == 1) {  // size-1 new dims take any stride
      ni = nj++;
      continue;
    }
    int64_t np = new_shape[ni], op = od[oi];
    while (np != op) {
      if (np < op) {
        if (nj >= new_shape.size()) return std::nullopt;
        np *= new_shape[nj++];
      } else {
        if (oj >= od.size()) return std::nullopt;
        op *= od[oj++];
      }
    }
    for (size_t ok = oi; ok + 1 < oj; ok++)
      if (os[ok] != od[ok + 1] * os[ok + 1]) return std::nullopt;
    ns[nj - 1] = os[oj - 1];
    for (size_t nk = nj - 1; nk > ni; nk--) ns[nk - 1] = ns[nk] * new_shape[nk];
    ni = nj++;
    oi = oj++;
  }
  View v;
  v.shape = new_shape;
  v.strides = ns;
  v.offset = offset;
  return finish(v);
}

int64_t View::index_of(const std::vector<int64_t>& idx) const {
  int64_t pos = offset;
  for (size_t d = 0; d < shape.size(); d++) {
    if (!mask.empty() && (idx[d] < mask[d].first || idx[d] >= mask[d].second)) return -1;
    pos += idx[d] * strides[d];
  }
  return pos;
}

std::string View::str() const {
  std::ostringstream o;
  o << "View(shape=(" << shape_str(shape) << "), strides=(" << shape_str(strides) << "), offset=" << offset;
  if (!mask.empty()) {
    o << ", mask=(";
    for (size_t d = 0; d < mask.size(); d++) o << (d ? ", " : "") << "(" << mask[d].first << "," << mask[d].second << ")";
    o << ")";
  }
  o << ")";
  return o.str();
}

ViewStack ViewStack::reshape(const Shape& new_shape) const {
  if (shape_numel(new_shape) != shape_numel(shape()))
    throw std::invalid_argument("reshape: cannot reshape (" + shape_str(shape()) + ") to (" + shape_str(new_shape) + ")");
  ViewStack r = *this;
  if (auto v = views.back().reshape(new_shape)) {
    r.views.back() = *v;
  } else {
    r.views.push_back(View::make(new_shape));
  }
  return r;
}

#define TS_VIEWSTACK_FORWARD(NAME, ARG)        \
  ViewStack ViewStack::NAME(ARG a) const {     \
    ViewStack r = *this;                       \
    r.views.back() = views.back().NAME(a);     \
    return r;                                  \
  }
TS_VIEWSTACK_FORWARD(permute, const std::vector<int64_t>&)
TS_VIEWSTACK_FORWARD(expand, const Shape&)
TS_VIEWSTACK_FORWARD(pad, const Pairs&)
TS_VIEWSTACK_FORWARD(shrink, const Pairs&)
TS_VIEWSTACK_FORWARD(flip, const std::vector<bool>&)
#undef TS_VIEWSTACK_FORWARD

bool ViewStack::has_mask() const {
  for (auto& v : views)
    if (v.has_mask()) return true;
  return false;
}

int64_t ViewStack::index_of(const std::vector<int64_t>& idx) const {
  std::vector<int64_t> cur = idx;
  for (size_t k = views.size(); k-- > 0;) {
    int64_t pos = views[k].index_of(cur);
    if (pos < 0) return -1;
    if (k == 0) return pos;
    const Shape& below = views[k - 1].shape;  // unflatten over the shape of the view below
    cur.assign(below.size(), 0);
    for (size_t d = below.size(); d-- > 0;) {
      cur[d] = pos % below[d];
      pos /= below[d];
    }
  }
  return -1;
}

std::string ViewStack::str() const {
  std::string s;
  for (auto& v : views) s += (s.empty() ? "" : " -> ") + v.str();
  return s;
}

}  // namespace ts
