#include "widgets/minimap.h"

#include <QGraphicsView>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollBar>

#include "core/op_palette.h"

namespace tsui {

Minimap::Minimap(QGraphicsView* view, QWidget* parent) : QWidget(parent), view_(view) {
  setObjectName("minimap");
  setCursor(Qt::PointingHandCursor);
  setToolTip("Overview of the whole graph: click or drag to move the view");
  // The view settles its offsets after the scroll bars signal (a scene smaller than the view is
  // centred without them): look once the events of this change are done.
  settle_.setSingleShot(true);
  settle_.setInterval(0);
  connect(&settle_, &QTimer::timeout, this, [this] {
    updateVisibility();
    update();
  });
  auto follow = [this] { settle_.start(); };
  connect(view_->horizontalScrollBar(), &QScrollBar::valueChanged, this, follow);
  connect(view_->verticalScrollBar(), &QScrollBar::valueChanged, this, follow);
  connect(view_->horizontalScrollBar(), &QScrollBar::rangeChanged, this, follow);
  connect(view_->verticalScrollBar(), &QScrollBar::rangeChanged, this, follow);
  // scroll bars that appear or vanish resize the viewport after their range changed
  view_->viewport()->installEventFilter(this);
  hide();
}

bool Minimap::eventFilter(QObject* watched, QEvent* event) {
  if (watched == view_->viewport() && event->type() == QEvent::Resize) settle_.start();
  return QWidget::eventFilter(watched, event);
}

void Minimap::setMaxSide(int pixels) {
  maxSide_ = std::max(40, pixels);
  setContent(sceneRect_, std::move(boxes_));
}

void Minimap::setContent(const QRectF& sceneRect, std::vector<Box> boxes) {
  sceneRect_ = sceneRect;
  boxes_ = std::move(boxes);
  if (sceneRect_.isEmpty()) return clear();
  const double aspect = sceneRect_.width() / sceneRect_.height();
  const QSize size = aspect >= 1 ? QSize(maxSide_, std::max(24, qRound(maxSide_ / aspect)))
                                 : QSize(std::max(24, qRound(maxSide_ * aspect)), maxSide_);
  resize(size);
  renderCache();
  updateVisibility();
  update();
}

void Minimap::clear() {
  sceneRect_ = {};
  boxes_.clear();
  cache_ = {};
  hide();
}

QTransform Minimap::sceneToMap() const {
  if (sceneRect_.isEmpty()) return {};
  const double sx = (width() - 2) / sceneRect_.width(), sy = (height() - 2) / sceneRect_.height();
  return QTransform::fromTranslate(-sceneRect_.left(), -sceneRect_.top()) * QTransform::fromScale(sx, sy) *
         QTransform::fromTranslate(1, 1);
}

void Minimap::renderCache() {
  const qreal dpr = devicePixelRatioF();
  cache_ = QPixmap(size() * dpr);
  cache_.setDevicePixelRatio(dpr);
  cache_.fill(sceneColours().background);
  QPainter p(&cache_);
  // At this scale a box is a pixel or two: whole-pixel rectangles without a transform take the
  // raster engine's fast path (10,000 boxes in a few milliseconds).
  const QTransform map = sceneToMap();
  for (const Box& b : boxes_) {
    const QRect r = map.mapRect(b.rect).toAlignedRect();
    p.fillRect(r, b.fill);
    if (b.border.alpha() > 0 && r.width() > 2 && r.height() > 2) {
      p.setPen(b.border);
      p.setBrush(Qt::NoBrush);
      p.drawRect(r.adjusted(0, 0, -1, -1));
    }
  }
}

QRectF Minimap::visibleSceneRect() const { return view_->mapToScene(view_->viewport()->rect()).boundingRect(); }

void Minimap::updateVisibility() {
  const double slack = 4 / std::max(1e-6, view_->transform().m11());  // 4 pixels: fitInView's rounding
  const bool needed = !sceneRect_.isEmpty() && !visibleSceneRect().adjusted(-slack, -slack, slack, slack).contains(sceneRect_);
  if (needed != isVisible()) setVisible(needed);
}

void Minimap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.drawPixmap(0, 0, cache_);
  p.setPen(QPen(sceneColours().clusterBorder, 1));
  p.setBrush(Qt::NoBrush);
  p.drawRect(rect().adjusted(0, 0, -1, -1));
  // the part the view shows: a translucent frame in the selection colour
  const QRectF shown = sceneToMap().mapRect(visibleSceneRect()).intersected(QRectF(rect()).adjusted(0, 0, -1, -1));
  QColor fill = selectionColor();
  fill.setAlpha(40);
  p.setPen(QPen(selectionColor(), 1.5));
  p.setBrush(fill);
  p.drawRect(shown);
}

void Minimap::centreViewAt(const QPointF& widgetPos) {
  view_->centerOn(sceneToMap().inverted().map(widgetPos));
  Q_EMIT moved();
}

void Minimap::mousePressEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton) centreViewAt(event->position());
  event->accept();  // not a click on the graph behind it
}

void Minimap::mouseMoveEvent(QMouseEvent* event) {
  if (event->buttons() & Qt::LeftButton) centreViewAt(event->position());
  event->accept();
}

void Minimap::mouseReleaseEvent(QMouseEvent* event) { event->accept(); }

}  // namespace tsui
