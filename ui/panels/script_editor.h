// The script editor: Python highlighting, line numbers, and the mark of a script error.
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

 private:
  QString filePath_;
  int errorMarker_ = -1;
  int errorLineMarker_ = -1;
  int errorIndicator_ = -1;
};

}  // namespace tsui
