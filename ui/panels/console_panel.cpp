#include "panels/console_panel.h"

#include <QScrollBar>
#include <QTextCharFormat>

#include "widgets/code_view.h"

namespace tsui {

ConsolePanel::ConsolePanel(QWidget* parent) : QPlainTextEdit(parent) {
  setReadOnly(true);
  setFont(CodeView::codeFont());
  setLineWrapMode(QPlainTextEdit::WidgetWidth);
  // A script printing in a loop must not eat the machine's memory through the console.
  setMaximumBlockCount(50000);
  setPlaceholderText("Script output appears here. Run a script with F5.");
}

void ConsolePanel::append(const QString& text, Stream stream) {
  QTextCharFormat format;
  switch (stream) {
    case Stream::Stdout:
      format.setForeground(palette().text());
      break;
    case Stream::Stderr:
      format.setForeground(QColor(0xc6, 0x28, 0x28));
      stderrText_ += text;
      break;
    case Stream::Info:
      format.setForeground(QColor(0x6b, 0x72, 0x80));
      format.setFontItalic(true);
      break;
  }
  QScrollBar* bar = verticalScrollBar();
  const bool atBottom = bar->value() >= bar->maximum() - 2;  // keep the user's place if they scrolled up
  QTextCursor cursor(document());
  cursor.movePosition(QTextCursor::End);
  QString chunk = text;
  // Info lines are whole lines of their own, whatever the script left unterminated.
  if (stream == Stream::Info) {
    if (!document()->isEmpty() && !toPlainText().endsWith('\n')) chunk.prepend('\n');
    if (!chunk.endsWith('\n')) chunk.append('\n');
  }
  cursor.insertText(chunk, format);
  if (atBottom) bar->setValue(bar->maximum());
}

void ConsolePanel::clearConsole() {
  clear();
  stderrText_.clear();
}

}  // namespace tsui
