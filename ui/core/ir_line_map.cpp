#include "core/ir_line_map.h"

namespace tsui {

int irOpIndexOfLine(QStringView line) {
  line = line.trimmed();
  if (line.size() < 2 || line[0] != u'%') return -1;
  qsizetype end = 1;
  while (end < line.size() && line[end].isDigit()) ++end;
  if (end == 1) return -1;
  bool ok = false;
  const int index = line.mid(1, end - 1).toInt(&ok);
  return ok ? index : -1;
}

IrSourceMap::IrSourceMap(const QString& ir, const std::vector<int>& irOpLine) {
  const QStringList lines = ir.split('\n');
  bool any = false;
  for (const QString& line : lines) {
    const int op = irOpIndexOfLine(line);
    int source = -1;
    if (op >= 0 && op < static_cast<int>(irOpLine.size()) && irOpLine[op] > 0) source = irOpLine[op] - 1;
    any = any || source >= 0;
    irToSource_.append(source);
  }
  if (!any) irToSource_.clear();
}

int IrSourceMap::sourceLineOf(int irLine) const {
  return irLine >= 0 && irLine < irToSource_.size() ? irToSource_[irLine] : -1;
}

QList<int> IrSourceMap::irLinesOf(int sourceLine) const {
  QList<int> lines;
  for (int i = 0; i < irToSource_.size(); ++i)
    if (irToSource_[i] == sourceLine && sourceLine >= 0) lines.append(i);
  return lines;
}

}  // namespace tsui
