#include "widgets/zoomable_view.h"

#include <QMouseEvent>
#include <QScrollBar>
#include <QWheelEvent>
#include <cmath>

namespace tsui {

ZoomableView::ZoomableView(QWidget* parent) : QGraphicsView(parent) {
  setDragMode(ScrollHandDrag);
  setTransformationAnchor(AnchorUnderMouse);
  setResizeAnchor(AnchorViewCenter);
  setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
  setViewportUpdateMode(SmartViewportUpdate);
  setBackgroundBrush(Qt::white);
}

void ZoomableView::fitAll(double maxScale, double minScale) {
  // sceneRect(), not itemsBoundingRect(): that one visits every item (tens of ms for 20,000)
  if (!scene() || scene()->sceneRect().isEmpty()) return;
  fitInView(sceneRect(), Qt::KeepAspectRatio);
  const double fitted = transform().m11();
  if (fitted > maxScale) setTransform(QTransform::fromScale(maxScale, maxScale));
  if (fitted < minScale) {
    setTransform(QTransform::fromScale(minScale, minScale));
    horizontalScrollBar()->setValue(horizontalScrollBar()->minimum());
    verticalScrollBar()->setValue(verticalScrollBar()->minimum());
  } else {
    centerOn(sceneRect().center());
  }
  userNavigated_ = false;
}

void ZoomableView::zoomBy(double factor) {
  const double current = transform().m11();
  const double target = std::clamp(current * factor, 0.02, 8.0);
  scale(target / current, target / current);
  userNavigated_ = true;
}

void ZoomableView::wheelEvent(QWheelEvent* event) {
  const double steps = event->angleDelta().y() / 120.0;
  if (steps == 0) return QGraphicsView::wheelEvent(event);
  zoomBy(std::pow(1.2, steps));
  event->accept();
}

void ZoomableView::mousePressEvent(QMouseEvent* event) {
  pressPos_ = event->position().toPoint();
  QGraphicsView::mousePressEvent(event);
}

void ZoomableView::mouseReleaseEvent(QMouseEvent* event) {
  QGraphicsView::mouseReleaseEvent(event);
  if (event->button() != Qt::LeftButton) return;
  const QPoint pos = event->position().toPoint();
  if ((pos - pressPos_).manhattanLength() > 4) {
    userNavigated_ = true;  // that was a pan
    return;
  }
  Q_EMIT clicked(mapToScene(pos));
}

void ZoomableView::mouseDoubleClickEvent(QMouseEvent* event) {
  QGraphicsView::mouseDoubleClickEvent(event);
  if (event->button() == Qt::LeftButton) Q_EMIT doubleClicked(mapToScene(event->position().toPoint()));
}

void ZoomableView::resizeEvent(QResizeEvent* event) {
  QGraphicsView::resizeEvent(event);
  // Until the user takes over, the graph follows the window.
  if (!userNavigated_) fitAll();
}

}  // namespace tsui
