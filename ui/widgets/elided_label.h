// A one-line label for text of any length (a status, an error, a kernel name): it never asks its
// layout for more than a short width, shows as much of the text as fits with "…" at the end, and
// the whole text in its tooltip. A plain QLabel asks for its text's full width, and a window holding
// it grows to that (a 7,000-character error once made the main window 7,212 pixels wide).
#pragma once
#include <QLabel>

namespace tsui {

class ElidedLabel : public QLabel {
  Q_OBJECT
 public:
  explicit ElidedLabel(const QString& text = {}, QWidget* parent = nullptr);

  // Plain text only: the text is shown as typed, never as rich text.
  void setText(const QString& text);
  QString text() const { return full_; }
  void clear() { setText({}); }

  QSize minimumSizeHint() const override;
  QSize sizeHint() const override;

 protected:
  void resizeEvent(QResizeEvent* event) override;
  void changeEvent(QEvent* event) override;

 private:
  void elide();
  QString full_;
};

}  // namespace tsui
