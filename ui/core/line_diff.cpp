#include "core/line_diff.h"

#include <QHash>
#include <algorithm>

namespace tsui {
namespace {

struct Point {
  int x, y;
};

// Myers' linear-space refinement, with the boxes and the forward/backward searches written as in
// James Coglan's exposition ("The Myers diff algorithm", 2017). x indexes `a`, y indexes `b`; a line
// is an int (equal lines, equal ints).
class Myers {
 public:
  Myers(const std::vector<int>& a, const std::vector<int>& b) : a_(a), b_(b) {}

  std::vector<DiffLine> run() {
    std::vector<Point> path;
    findPath(0, 0, static_cast<int>(a_.size()), static_cast<int>(b_.size()), path);
    std::vector<DiffLine> script;
    for (size_t i = 0; i + 1 < path.size(); ++i) walk(path[i], path[i + 1], script);
    return script;
  }

 private:
  struct Box {
    int left, top, right, bottom;
    int width() const { return right - left; }
    int height() const { return bottom - top; }
    int size() const { return width() + height(); }
    int delta() const { return width() - height(); }
  };

  // The path's corners from (left, top) to (right, bottom): the ends of each middle snake, found
  // in the box and then in the two boxes before and after it. False for an empty box.
  bool findPath(int left, int top, int right, int bottom, std::vector<Point>& path) {
    const Box box{left, top, right, bottom};
    Point start{}, finish{};
    if (!middleSnake(box, start, finish)) return false;
    std::vector<Point> head, tail;
    if (!findPath(box.left, box.top, start.x, start.y, head)) head = {start};
    if (!findPath(finish.x, finish.y, box.right, box.bottom, tail)) tail = {finish};
    path = std::move(head);
    path.insert(path.end(), tail.begin(), tail.end());
    return true;
  }

  // The middle snake of the box: searching from both corners at once, the first place where a
  // forward D-path and a backward D-path overlap (Myers' lemma 3). False for an empty box.
  bool middleSnake(const Box& box, Point& start, Point& finish) {
    if (box.size() == 0) return false;
    const int max = (box.size() + 1) / 2;
    offset_ = max + 1;
    forward_.assign(2 * offset_ + 1, 0);
    backward_.assign(2 * offset_ + 1, 0);
    vf(1) = box.left;
    vb(1) = box.bottom;
    for (int d = 0; d <= max; ++d) {
      if (forwards(box, d, start, finish) || backwards(box, d, start, finish)) return true;
    }
    return false;  // not reached: a box always has a middle snake
  }

  bool forwards(const Box& box, int d, Point& start, Point& finish) {
    for (int k = d; k >= -d; k -= 2) {
      const int c = k - box.delta();
      int x, px;
      if (k == -d || (k != d && vf(k - 1) < vf(k + 1))) {
        px = x = vf(k + 1);  // down: an added line
      } else {
        px = vf(k - 1);  // right: a removed line
        x = px + 1;
      }
      int y = box.top + (x - box.left) - k;
      const int py = (d == 0 || x != px) ? y : y - 1;
      while (x < box.right && y < box.bottom && a_[x] == b_[y]) ++x, ++y;
      vf(k) = x;
      if (box.delta() % 2 != 0 && c >= -(d - 1) && c <= d - 1 && y >= vb(c)) {
        start = {px, py};
        finish = {x, y};
        return true;
      }
    }
    return false;
  }

  bool backwards(const Box& box, int d, Point& start, Point& finish) {
    for (int c = d; c >= -d; c -= 2) {
      const int k = c + box.delta();
      int y, py;
      if (c == -d || (c != d && vb(c - 1) > vb(c + 1))) {
        py = y = vb(c + 1);
      } else {
        py = vb(c - 1);
        y = py - 1;
      }
      int x = box.left + (y - box.top) + k;
      const int px = (d == 0 || y != py) ? x : x + 1;
      while (x > box.left && y > box.top && a_[x - 1] == b_[y - 1]) --x, --y;
      vb(c) = y;
      if (box.delta() % 2 == 0 && k >= -d && k <= d && x <= vf(k)) {
        start = {x, y};
        finish = {px, py};
        return true;
      }
    }
    return false;
  }

  // From one corner of the path to the next: a diagonal (same lines), at most one step right
  // (removed) or down (added), another diagonal.
  void walk(Point from, Point to, std::vector<DiffLine>& script) const {
    auto diagonal = [&] {
      while (from.x < to.x && from.y < to.y && a_[from.x] == b_[from.y])
        script.push_back({DiffLine::Same, from.x++, from.y++});
    };
    diagonal();
    const int dx = to.x - from.x, dy = to.y - from.y;
    if (dx > dy) script.push_back({DiffLine::Removed, from.x++, -1});
    else if (dy > dx) script.push_back({DiffLine::Added, -1, from.y++});
    diagonal();
  }

  int& vf(int k) { return forward_[k + offset_]; }
  int& vb(int c) { return backward_[c + offset_]; }

  const std::vector<int>& a_;
  const std::vector<int>& b_;
  std::vector<int> forward_, backward_;
  int offset_ = 0;
};

}  // namespace

QStringList listingLines(const QString& text) {
  QStringList lines = text.split('\n');
  if (!lines.isEmpty() && lines.back().isEmpty()) lines.removeLast();
  return lines;
}

std::vector<DiffLine> diffLines(const QStringList& before, const QStringList& after) {
  // Lines as ints: one id per distinct text.
  QHash<QString, int> ids;
  auto encode = [&](const QStringList& lines) {
    std::vector<int> out;
    out.reserve(lines.size());
    for (const QString& l : lines) {
      auto id = ids.constFind(l);
      if (id == ids.constEnd()) id = ids.insert(l, static_cast<int>(ids.size()));
      out.push_back(*id);
    }
    return out;
  };
  const std::vector<int> a = encode(before), b = encode(after);
  std::vector<DiffLine> script = Myers(a, b).run();
  // Within each change, removed lines first (stable: each side keeps its order).
  for (auto it = script.begin(); it != script.end();) {
    auto end = std::find_if(it, script.end(), [](const DiffLine& l) { return l.kind == DiffLine::Same; });
    std::stable_partition(it, end, [](const DiffLine& l) { return l.kind == DiffLine::Removed; });
    it = end == script.end() ? end : end + 1;
  }
  return script;
}

UnifiedDiff unifiedDiff(const QString& before, const QString& after) {
  const QStringList a = listingLines(before), b = listingLines(after);
  UnifiedDiff diff;
  QStringList out;
  for (const DiffLine& l : diffLines(a, b)) {
    switch (l.kind) {
      case DiffLine::Same: out << "  " + a[l.oldLine]; break;
      case DiffLine::Removed: diff.removed << static_cast<int>(out.size()); out << "- " + a[l.oldLine]; break;
      case DiffLine::Added: diff.added << static_cast<int>(out.size()); out << "+ " + b[l.newLine]; break;
    }
  }
  diff.text = out.join('\n');
  return diff;
}

SideBySideDiff sideBySideDiff(const QString& before, const QString& after) {
  const QStringList a = listingLines(before), b = listingLines(after);
  const std::vector<DiffLine> script = diffLines(a, b);
  SideBySideDiff diff;
  QStringList left, right;
  for (size_t i = 0; i < script.size();) {
    if (script[i].kind == DiffLine::Same) {
      left << a[script[i].oldLine];
      right << b[script[i].newLine];
      ++i;
      continue;
    }
    // a change: its removed lines (first, see diffLines) on the left, its added ones on the right
    QStringList removed, added;
    for (; i < script.size() && script[i].kind != DiffLine::Same; ++i)
      (script[i].kind == DiffLine::Removed ? removed : added) << (script[i].kind == DiffLine::Removed ? a[script[i].oldLine] : b[script[i].newLine]);
    for (int r = 0; r < std::max(removed.size(), added.size()); ++r) {
      if (r < removed.size()) {
        diff.removed << static_cast<int>(left.size());
        left << removed[r];
      } else {
        diff.leftPadding << static_cast<int>(left.size());
        left << QString();
      }
      if (r < added.size()) {
        diff.added << static_cast<int>(right.size());
        right << added[r];
      } else {
        diff.rightPadding << static_cast<int>(right.size());
        right << QString();
      }
    }
  }
  diff.left = left.join('\n');
  diff.right = right.join('\n');
  return diff;
}

}  // namespace tsui
