#include "panels/script_editor.h"

#include <Qsci/qscilexerpython.h>
#include <Qsci/qscistyle.h>

#include <QEvent>
#include <QFile>
#include <QSaveFile>

#include "core/theme.h"
#include "widgets/code_view.h"

namespace tsui {

ScriptEditor::ScriptEditor(QWidget* parent) : QsciScintilla(parent) {
  const QFont font = CodeView::codeFont();
  auto* lexer = new QsciLexerPython(this);
  lexer->setDefaultFont(font);
  lexer->setFont(font, -1);
  // Python's lexer flags tab/space mixtures by default; scripts here are lessons, not lint targets.
  lexer->setIndentationWarning(QsciLexerPython::NoWarning);
  setLexer(lexer);
  setUtf8(true);
  setMarginsFont(font);

  setMarginType(0, NumberMargin);
  setMarginLineNumbers(0, true);
  setMarginWidth(0, "00000");
  setMarginType(1, SymbolMargin);
  setMarginWidth(1, 14);

  setIndentationsUseTabs(false);
  setIndentationWidth(4);
  setTabWidth(4);
  setAutoIndent(true);
  setBraceMatching(SloppyBraceMatch);
  setCaretLineVisible(true);
  setEdgeMode(EdgeLine);
  setEdgeColumn(100);

  // margin 1: breakpoints (red dots; a click toggles one), the paused line (a yellow arrow), errors
  setMarginSensitivity(1, true);
  breakpointMarker_ = markerDefine(Circle);
  setMarkerBackgroundColor(QColor(0xe5, 0x39, 0x35), breakpointMarker_);
  setMarkerForegroundColor(QColor(0xb7, 0x1c, 0x1c), breakpointMarker_);
  currentMarker_ = markerDefine(RightArrow);
  setMarkerBackgroundColor(QColor(0xfb, 0xc0, 0x2d), currentMarker_);
  setMarkerForegroundColor(QColor(0x7a, 0x5b, 0x00), currentMarker_);
  currentLineMarker_ = markerDefine(Background);
  connect(this, &QsciScintilla::marginClicked, this, [this](int margin, int line, Qt::KeyboardModifiers) {
    if (margin <= 1) toggleBreakpoint(line + 1);
  });
  connect(this, &QsciScintilla::cursorPositionChanged, this, [this](int line, int) {
    if (line + 1 == lastCursorLine_) return;
    lastCursorLine_ = line + 1;
    Q_EMIT cursorLineChanged(lastCursorLine_);
  });

  errorMarker_ = markerDefine(Rectangle);
  setMarkerBackgroundColor(QColor(0xd3, 0x2f, 0x2f), errorMarker_);
  setMarkerForegroundColor(QColor(0xd3, 0x2f, 0x2f), errorMarker_);
  errorLineMarker_ = markerDefine(Background);
  errorIndicator_ = indicatorDefine(SquiggleIndicator);
  setIndicatorForegroundColor(QColor(0xd3, 0x2f, 0x2f), errorIndicator_);
  setAnnotationDisplay(AnnotationBoxed);
  applyThemeColours();

  // The mark belongs to the text that failed; once the user edits, it would point at the wrong line.
  connect(this, &QsciScintilla::textChanged, this, &ScriptEditor::clearError);
}

bool ScriptEditor::loadFile(const QString& path, QString* error) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    if (error) *error = file.errorString();
    return false;
  }
  setText(QString::fromUtf8(file.readAll()));
  filePath_ = path;
  clearError();
  setModified(false);
  return true;
}

bool ScriptEditor::saveFile(const QString& path, QString* error) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) {
    if (error) *error = file.errorString();
    return false;
  }
  file.write(text().toUtf8());
  if (!file.commit()) {  // the rename happens here; on failure the original is untouched
    if (error) *error = file.errorString();
    return false;
  }
  filePath_ = path;
  setModified(false);
  return true;
}

// The theme's colours (core/theme.h): the listing's, and the line marks on a light or a dark paper.
void ScriptEditor::applyThemeColours() {
  CodeView::applyThemeColours(this);
  const bool dark = isDarkTheme();
  setCaretLineBackgroundColor(codeColours().caretLine);
  setEdgeColor(dark ? QColor(0x3a, 0x3d, 0x42) : QColor(0xe5, 0xe7, 0xeb));
  setMarkerBackgroundColor(dark ? QColor(0x4d, 0x44, 0x1c) : QColor(0xff, 0xf4, 0xc2), currentLineMarker_);
  setMarkerBackgroundColor(dark ? QColor(0x4a, 0x23, 0x23) : QColor(0xfd, 0xe2, 0xe2), errorLineMarker_);
}

void ScriptEditor::changeEvent(QEvent* event) {
  QsciScintilla::changeEvent(event);
  if (event->type() == QEvent::PaletteChange) applyThemeColours();
}

void ScriptEditor::markError(int line, const QString& message) {
  clearError();
  if (line < 1 || line > lines()) return;
  const int l = line - 1;
  markerAdd(l, errorMarker_);
  markerAdd(l, errorLineMarker_);
  const QString lineText = text(l);
  int start = 0;
  while (start < lineText.size() && lineText[start].isSpace()) ++start;
  const int end = start + static_cast<int>(lineText.trimmed().size());
  fillIndicatorRange(l, start, l, end, errorIndicator_);
  static const QsciStyle style(-1, "error annotation", QColor(0xb7, 0x1c, 0x1c), QColor(0xff, 0xf5, 0xf5),
                               CodeView::codeFont());
  annotate(l, message, style);
  ensureLineVisible(l);
}

void ScriptEditor::clearError() {
  markerDeleteAll(errorMarker_);
  markerDeleteAll(errorLineMarker_);
  clearIndicatorRange(0, 0, qMax(0, lines() - 1), qMax(0, lineLength(qMax(0, lines() - 1))), errorIndicator_);
  clearAnnotations();
}

void ScriptEditor::toggleBreakpoint(int line) {
  if (line < 1 || line > lines()) return;
  if (markersAtLine(line - 1) & (1u << breakpointMarker_)) markerDelete(line - 1, breakpointMarker_);
  else markerAdd(line - 1, breakpointMarker_);
  Q_EMIT breakpointsChanged();
}

void ScriptEditor::setBreakpoints(const QList<int>& lineNumbers) {
  markerDeleteAll(breakpointMarker_);
  for (int line : lineNumbers)
    if (line >= 1 && line <= lines()) markerAdd(line - 1, breakpointMarker_);
  Q_EMIT breakpointsChanged();
}

QList<int> ScriptEditor::breakpointLines() const {
  QList<int> result;
  for (int l = markerFindNext(0, 1u << breakpointMarker_); l >= 0; l = markerFindNext(l + 1, 1u << breakpointMarker_))
    result << l + 1;
  return result;
}

void ScriptEditor::markCurrentLine(int line) {
  markerDeleteAll(currentMarker_);
  markerDeleteAll(currentLineMarker_);
  currentLine_ = line >= 1 && line <= lines() ? line : 0;
  if (!currentLine_) return;
  markerAdd(line - 1, currentMarker_);
  markerAdd(line - 1, currentLineMarker_);
  ensureLineVisible(line - 1);
}

int ScriptEditor::cursorLine() const {
  int line = 0, index = 0;
  getCursorPosition(&line, &index);
  return line + 1;
}

void ScriptEditor::showLine(int line) {
  if (line < 1 || line > lines()) return;
  lastCursorLine_ = line;  // showing a line is not the user moving the cursor: no cursorLineChanged
  const int length = static_cast<int>(text(line - 1).trimmed().isEmpty() ? 0 : text(line - 1).size());
  setSelection(line - 1, 0, line - 1, length - (text(line - 1).endsWith('\n') ? 1 : 0));
  ensureLineVisible(line - 1);
}

}  // namespace tsui
