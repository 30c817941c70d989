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
  // Marks 0-based lines of a diff listing: removed lines red, added lines green (Compiler Explorer's
  // colours), replacing the previous marks.
  void setDiffLines(const QList<int>& removed, const QList<int>& added);
  // Find: every occurrence of `text` (literal, case-insensitive) as a 0-based line and a column in
  // characters, in reading order; at most `limit` of them. Empty `text`: none.
  struct Match {
    int line = -1;
    int column = -1;
  };
  QList<Match> findAll(const QString& text, int limit = 2000) const;
  // The same over any text (a listing not shown: Find over every kernel's IR and source).
  static QList<Match> findIn(const QString& listing, const QString& text, int limit = 2000);
  // Selects `length` characters at (`line`, `column`) and scrolls so that the line sits in the
  // middle of the view (vertically) and the match is visible (horizontally).
  void showMatch(int line, int column, int length);
  // The 0-based line at the middle of the view: where showMatch puts a match.
  int centreLine();
  // The monospace font every listing of the app uses.
  static QFont codeFont();
  // codeFont() at the font zoom (fontScale(), core/theme.h): for widgets that are not listings.
  static QFont zoomedCodeFont();
  // The font zoom on any listing or editor: Scintilla's zoom, points added to every style and margin.
  static void applyFontZoom(QsciScintilla* editor);
  // Paper, text, margins and syntax colours of the current theme (core/theme.h), on any listing or
  // editor; its lexer's own colours are kept hue for hue on a dark background.
  static void applyThemeColours(QsciScintilla* editor);

 signals:
  void lineHovered(int line);  // 0-based; -1 when the mouse leaves the text
  void lineClicked(int line);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;
  void changeEvent(QEvent* event) override;

 private:
  int lineAt(const QPoint& viewportPos) const;

  int linkMarker_ = -1;
  int removedMarker_ = -1, addedMarker_ = -1;
  int hoveredLine_ = -1;
};

}  // namespace tsui
