// A line diff: the shortest edit script turning one listing into another (the fewest lines removed
// and added, i.e. the longest common subsequence kept), by Myers' algorithm in linear space:
// E. W. Myers, "An O(ND) Difference Algorithm and Its Variations", Algorithmica 1 (1986) 251-266,
// section 4b (the "middle snake", divide and conquer). O((N+M)·D) time, O(N+M) memory, where D is
// the number of lines removed plus added. The same algorithm as GNU diff and git's default.
//
// The kernel details panel shows each pass's IR as a diff of its input and output (Compiler
// Explorer's optimization-pipeline view).
#pragma once
#include <QList>
#include <QString>
#include <QStringList>
#include <vector>

namespace tsui {

struct DiffLine {
  enum Kind { Same, Removed, Added };
  Kind kind;
  int oldLine;  // 0-based line of `before`; -1 for an added line
  int newLine;  // 0-based line of `after`; -1 for a removed line
};

// The edit script, in order: Same lines in both, Removed from `before`, Added from `after`. Within a
// change, the removed lines come before the added ones (as diff -u prints them).
std::vector<DiffLine> diffLines(const QStringList& before, const QStringList& after);

// A whole-file unified diff (every line as context): "  same", "- removed", "+ added", one per line,
// and which 0-based lines of that text are removed and added (to colour them).
struct UnifiedDiff {
  QString text;
  QList<int> removed, added;
  bool changed() const { return !removed.isEmpty() || !added.isEmpty(); }
};
UnifiedDiff unifiedDiff(const QString& before, const QString& after);

// The same diff side by side: `before` on the left, `after` on the right, a change's removed lines
// beside its added ones, the shorter side padded with empty lines so that both have as many lines
// and unchanged lines face each other. `padding` lists the 0-based padding lines of each side.
struct SideBySideDiff {
  QString left, right;
  QList<int> removed, added;             // lines of `left` / of `right`
  QList<int> leftPadding, rightPadding;  // empty lines that stand for nothing
};
SideBySideDiff sideBySideDiff(const QString& before, const QString& after);

// A listing's lines: split at '\n', without the empty line after a final newline.
QStringList listingLines(const QString& text);

}  // namespace tsui
