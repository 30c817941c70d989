// The script editor: Python highlighting, line numbers, the mark of a script error, line breakpoints
// (F9 or a click in the gutter: a red dot) and the line a paused run waits at (a yellow arrow).
//
// Saving never damages the user's file: the text goes to a temporary file next to it, which then
// replaces the original in one rename (QSaveFile). A failed save leaves the original untouched.
#pragma once
#include <Qsci/qsciscintilla.h>

namespace tsui {

class ScriptEditor : public QsciScintilla {
  Q_OBJECT
 public:
  explicit ScriptEditor(QWidget* parent = nullptr);

  bool loadFile(const QString& path, QString* error);
  bool saveFile(const QString& path, QString* error);
  QString filePath() const { return filePath_; }
  void setFilePath(const QString& path) { filePath_ = path; }

  // Marks a 1-based script line as the place an error was raised, with the message under it.
  void markError(int line, const QString& message);
  void clearError();

  // Line breakpoints, 1-based. Their markers move with the text as it is edited.
  void toggleBreakpoint(int line);
  void setBreakpoints(const QList<int>& lines);
  QList<int> breakpointLines() const;
  // The line a paused run waits at (0: none).
  void markCurrentLine(int line);
  int currentLine() const { return currentLine_; }
  // The 1-based line the cursor is on.
  int cursorLine() const;
  // Puts the cursor on `line`, selects it and scrolls it into view (a graph node's script line).
  void showLine(int line);

  // The theme's colours (core/theme.h); MainWindow calls it when the theme changes.
  void applyThemeColours();

 signals:
  void breakpointsChanged();
  void cursorLineChanged(int line);  // 1-based

 protected:
  void changeEvent(QEvent* event) override;

 private:
  int currentLine_ = 0;
  int breakpointMarker_ = -1;
  int currentMarker_ = -1;
  int currentLineMarker_ = -1;
  int lastCursorLine_ = 0;
  QString filePath_;
  int errorMarker_ = -1;
  int errorLineMarker_ = -1;
  int errorIndicator_ = -1;
};

}  // namespace tsui
