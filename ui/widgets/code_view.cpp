#include "widgets/code_view.h"

#include <Qsci/qscilexercpp.h>

#include <QFontDatabase>
#include <QMouseEvent>

namespace tsui {

QFont CodeView::codeFont() {
  QFont font = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  font.setPointSize(9);
  return font;
}

CodeView::CodeView(QWidget* parent) : QsciScintilla(parent) {
  setReadOnly(true);
  setUtf8(true);
  setFont(codeFont());
  setMarginsFont(codeFont());
  setMarginType(0, NumberMargin);
  setMarginLineNumbers(0, true);
  setMarginWidth(0, "0000");
  setMarginWidth(1, 0);
  setWrapMode(WrapNone);
  setCaretLineVisible(false);
  setMarginsBackgroundColor(QColor(0xf3, 0xf4, 0xf6));
  setMarginsForegroundColor(QColor(0x9a, 0xa0, 0xa6));
  linkMarker_ = markerDefine(Background);
  setMarkerBackgroundColor(QColor(0xff, 0xf1, 0xb8), linkMarker_);
  // Hover needs the position of the mouse without a button pressed.
  viewport()->setMouseTracking(true);
  viewport()->installEventFilter(this);
}

void CodeView::setLanguage(Language language) {
  if (language == Language::Cpp) {
    auto* lexer = new QsciLexerCPP(this);
    lexer->setDefaultFont(codeFont());
    lexer->setFont(codeFont(), -1);  // every style: the lexer's own fonts are proportional
    setLexer(lexer);
  } else {
    setLexer(nullptr);
    setFont(codeFont());
  }
}

void CodeView::setCode(const QString& code) {
  setReadOnly(false);
  setText(code);
  setReadOnly(true);
  setMarginWidth(0, QString(QString::number(lines()).size() + 1, '0'));
  hoveredLine_ = -1;
}

void CodeView::setLinkedLines(const QList<int>& lines) {
  markerDeleteAll(linkMarker_);
  for (int line : lines) markerAdd(line, linkMarker_);
  if (!lines.isEmpty()) ensureLineVisible(lines.first());
}

int CodeView::lineAt(const QPoint& pos) const {
  auto* self = const_cast<CodeView*>(this);  // SendScintilla is not const
  const long position = self->SendScintilla(SCI_POSITIONFROMPOINTCLOSE, pos.x(), pos.y());
  if (position < 0) {
    // Past the end of a line: still that line, as long as the point is inside the text's height.
    const long nearest = self->SendScintilla(SCI_POSITIONFROMPOINT, pos.x(), pos.y());
    const int line = static_cast<int>(self->SendScintilla(SCI_LINEFROMPOSITION, nearest));
    const int top = static_cast<int>(self->SendScintilla(SCI_POINTYFROMPOSITION, 0, nearest));
    const int height = static_cast<int>(self->SendScintilla(SCI_TEXTHEIGHT, line));
    return pos.y() >= top && pos.y() < top + height ? line : -1;
  }
  return static_cast<int>(self->SendScintilla(SCI_LINEFROMPOSITION, position));
}

bool CodeView::eventFilter(QObject* watched, QEvent* event) {
  if (watched == viewport()) {
    if (event->type() == QEvent::MouseMove) {
      const int line = lineAt(static_cast<QMouseEvent*>(event)->position().toPoint());
      if (line != hoveredLine_) Q_EMIT lineHovered(hoveredLine_ = line);
    } else if (event->type() == QEvent::Leave) {
      if (hoveredLine_ != -1) Q_EMIT lineHovered(hoveredLine_ = -1);
    } else if (event->type() == QEvent::MouseButtonRelease) {
      const int line = lineAt(static_cast<QMouseEvent*>(event)->position().toPoint());
      if (line >= 0) Q_EMIT lineClicked(line);
    }
  }
  return QsciScintilla::eventFilter(watched, event);
}

}  // namespace tsui
