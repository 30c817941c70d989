#include "widgets/elided_label.h"

#include <QEvent>
#include <QFontMetrics>

namespace tsui {
namespace {
// The widest the label asks for: enough for a status line, never a window's width.
constexpr int kMaxHintWidth = 480;
}  // namespace

ElidedLabel::ElidedLabel(const QString& text, QWidget* parent) : QLabel(parent) {
  setTextFormat(Qt::PlainText);
  setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  setText(text);
}

void ElidedLabel::setText(const QString& text) {
  // One line: a multi-line message (a traceback) shows its first line here, all of it in the tooltip.
  full_ = text;
  setToolTip(text.size() > 80 || text.contains('\n') ? text.left(4000) : QString());
  elide();
  updateGeometry();
}

QSize ElidedLabel::minimumSizeHint() const { return {0, QLabel::minimumSizeHint().height()}; }

QSize ElidedLabel::sizeHint() const {
  const QFontMetrics metrics(font());
  const int wanted = metrics.horizontalAdvance(full_.section('\n', 0, 0).left(200)) + 2 * margin() + 4;
  return {qMin(wanted, kMaxHintWidth), QLabel::sizeHint().height()};
}

void ElidedLabel::resizeEvent(QResizeEvent* event) {
  QLabel::resizeEvent(event);
  elide();
}

void ElidedLabel::changeEvent(QEvent* event) {
  QLabel::changeEvent(event);
  if (event->type() == QEvent::FontChange) elide();
}

void ElidedLabel::elide() {
  QString line = full_;
  line.replace('\n', ' ');
  const QFontMetrics metrics(font());
  QLabel::setText(metrics.elidedText(line, Qt::ElideRight, qMax(0, width() - 2 * margin())));
}

}  // namespace tsui
