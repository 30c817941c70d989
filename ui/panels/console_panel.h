// The console: what the script printed (stdout black, stderr and tracebacks red) and one grey
// line per run saying what ran and how it ended. Cleared on each run.
#pragma once
#include <QPlainTextEdit>

namespace tsui {

class ConsolePanel : public QPlainTextEdit {
  Q_OBJECT
 public:
  enum class Stream { Stdout, Stderr, Info };
  explicit ConsolePanel(QWidget* parent = nullptr);

  void append(const QString& text, Stream stream);
  // Text written to stderr since the last clear(), to tell whether a traceback was already shown.
  const QString& stderrText() const { return stderrText_; }
  void clearConsole();

 private:
  QString stderrText_;
};

}  // namespace tsui
