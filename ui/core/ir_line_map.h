// Links lines of a kernel's IR listing to lines of its generated source (Compiler Explorer style).
//
// The IR printer writes one line per op, possibly after header lines; a line that starts with
// "%<n>" (optionally indented) is IR op n. SourceListing::ir_op_line maps op n to a source line.
#pragma once
#include <QList>
#include <QString>
#include <QStringView>
#include <vector>

namespace tsui {

// The IR op index a listing line shows, or -1 for header/blank lines.
int irOpIndexOfLine(QStringView line);

class IrSourceMap {
 public:
  IrSourceMap() = default;
  // `ir`: the IR listing; `irOpLine`: SourceListing::ir_op_line (1-based source lines, 0: none).
  IrSourceMap(const QString& ir, const std::vector<int>& irOpLine);

  // 0-based source line for a 0-based IR listing line, or -1.
  int sourceLineOf(int irLine) const;
  // 0-based IR listing lines mapped to a 0-based source line.
  QList<int> irLinesOf(int sourceLine) const;
  bool empty() const { return irToSource_.isEmpty(); }

 private:
  QList<int> irToSource_;  // per IR listing line
};

}  // namespace tsui
