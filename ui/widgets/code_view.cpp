#include "widgets/code_view.h"

#include <Qsci/qscilexercpp.h>

#include "core/theme.h"

#include <QFontDatabase>
#include <QMouseEvent>
#include <Qsci/qscilexer.h>

namespace tsui {

QFont CodeView::codeFont() {
  QFont font = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  font.setPointSize(9);
  return font;
}

QFont CodeView::zoomedCodeFont() {
  QFont font = codeFont();
  font.setPointSizeF(font.pointSizeF() * fontScale());
  return font;
}

void CodeView::applyFontZoom(QsciScintilla* editor) {
  const double points = codeFont().pointSizeF();
  editor->zoomTo(qRound(points * fontScale() - points));
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
  linkMarker_ = markerDefine(Background);
  removedMarker_ = markerDefine(Background);
  addedMarker_ = markerDefine(Background);
  applyThemeColours(this);
  applyFontZoom(this);
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
  applyThemeColours(this);
}

void CodeView::applyThemeColours(QsciScintilla* editor) {
  const CodeColours& c = codeColours();
  const bool dark = isDarkTheme();
  editor->setMarginsBackgroundColor(c.margin);
  editor->setMarginsForegroundColor(c.marginText);
  editor->setCaretForegroundColor(c.text);
  editor->setPaper(c.paper);
  editor->setColor(c.text);
  if (QsciLexer* lexer = editor->lexer()) {
    lexer->setDefaultPaper(c.paper);
    lexer->setDefaultColor(c.text);
    for (int style = 0; style < 128; ++style) {
      if (lexer->description(style).isEmpty()) continue;
      lexer->setPaper(c.paper, style);
      QColor colour = lexer->defaultColor(style);
      // Dark: the lexer's hue, light enough to read; its greys and black become the theme's text.
      if (dark) colour = colour.hslSaturation() < 40 ? c.text : QColor::fromHsl(colour.hslHue(), qMin(colour.hslSaturation(), 170), 175);
      lexer->setColor(colour, style);
    }
  }
  if (auto* view = qobject_cast<CodeView*>(editor)) {
    editor->setMarkerBackgroundColor(c.linked, view->linkMarker_);
    editor->setMarkerBackgroundColor(dark ? QColor(0x5a, 0x22, 0x22) : QColor(0xff, 0xd7, 0xd5), view->removedMarker_);
    editor->setMarkerBackgroundColor(dark ? QColor(0x1f, 0x4a, 0x2a) : QColor(0xcc, 0xff, 0xd8), view->addedMarker_);
  }
}

void CodeView::changeEvent(QEvent* event) {
  QsciScintilla::changeEvent(event);
  if (event->type() == QEvent::PaletteChange) applyThemeColours(this);
}

void CodeView::setDiffLines(const QList<int>& removed, const QList<int>& added) {
  markerDeleteAll(removedMarker_);
  markerDeleteAll(addedMarker_);
  for (int line : removed) markerAdd(line, removedMarker_);
  for (int line : added) markerAdd(line, addedMarker_);
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

QList<CodeView::Match> CodeView::findAll(const QString& needle, int limit) const {
  return findIn(text(), needle, limit);
}

QList<CodeView::Match> CodeView::findIn(const QString& listing, const QString& needle, int limit) {
  QList<Match> out;
  if (needle.isEmpty() || !listing.contains(needle, Qt::CaseInsensitive)) return out;
  const QStringList lines = listing.split('\n');
  for (int line = 0; line < lines.size() && out.size() < limit; ++line)
    for (qsizetype at = lines[line].indexOf(needle, 0, Qt::CaseInsensitive); at >= 0 && out.size() < limit;
         at = lines[line].indexOf(needle, at + needle.size(), Qt::CaseInsensitive))
      out.append({line, static_cast<int>(at)});
  return out;
}

void CodeView::showMatch(int line, int column, int length) {
  setSelection(line, column, line, column + length);  // scrolls the caret (the match's end) into view
  const int visible = static_cast<int>(SendScintilla(SCI_VISIBLEFROMDOCLINE, line));
  const int onScreen = static_cast<int>(SendScintilla(SCI_LINESONSCREEN));
  setFirstVisibleLine(std::max(0, visible - onScreen / 2));
}

int CodeView::centreLine() {
  const int first = firstVisibleLine();
  const int onScreen = static_cast<int>(SendScintilla(SCI_LINESONSCREEN));
  return static_cast<int>(SendScintilla(SCI_DOCLINEFROMVISIBLE, first + onScreen / 2));
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
