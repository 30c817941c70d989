// A read-only code listing (IR or generated source): monospace, line numbers, and a "linked lines"
// highlight used to show which lines of the other listing correspond to the hovered one.
#pragma once
#include <Qsci/qsciscintilla.h>

namespace tsui {

class CodeView : public QsciScintilla {
  Q_OBJECT
 public:
  enum class Language { Plain, Cpp };
  explicit CodeView(QWidget* parent = nullptr);

  void setLanguage(Language language);
  void setCode(const QString& code);
  // Highlights 0-based lines (replacing the previous set) and scrolls the first into view.
  void setLinkedLines(const QList<int>& lines);
  // The monospace font every listing of the app uses.
  static QFont codeFont();

 signals:
  void lineHovered(int line);  // 0-based; -1 when the mouse leaves the text
  void lineClicked(int line);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  int lineAt(const QPoint& viewportPos) const;

  int linkMarker_ = -1;
  int hoveredLine_ = -1;
};

}  // namespace tsui
