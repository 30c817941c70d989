// An overview of a whole graph in a corner of its view (Netron's and every map's habit): the
// kernels and nodes as small coloured rectangles, and a frame around the part the view shows.
// Pressing or dragging in it centres the view on that point.
//
// It draws plain rectangles handed to it once per layout (setContent), never by rendering the
// scene, so a 10,000-node graph costs a few milliseconds on the GUI thread; scrolling and zooming
// only repaint the frame over a cached pixmap. It hides itself while the view shows everything.
#pragma once
#include <QPixmap>
#include <QTimer>
#include <QWidget>
#include <vector>

class QGraphicsView;

namespace tsui {

class Minimap : public QWidget {
  Q_OBJECT
 public:
  struct Box {
    QRectF rect;  // scene points
    QColor fill;
    QColor border;  // Qt::transparent: none
  };
  // `view` is the view it follows and moves; the minimap is usually a child of it.
  explicit Minimap(QGraphicsView* view, QWidget* parent = nullptr);

  // What to draw: the scene's rectangle (points) and the boxes inside it, in painting order.
  void setContent(const QRectF& sceneRect, std::vector<Box> boxes);
  void clear();
  // The longest side of the minimap in pixels (the other follows the scene's aspect ratio).
  void setMaxSide(int pixels);
  // The scene rectangle the view shows now (points).
  QRectF visibleSceneRect() const;
  // Shown when there is content and the view does not show all of it; called on scrolls and zooms.
  void updateVisibility();

 signals:
  void moved();  // the user moved the view from the minimap

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;  // the viewport's resizes
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;

 private:
  QTransform sceneToMap() const;
  void centreViewAt(const QPointF& widgetPos);
  void renderCache();

  QGraphicsView* view_;
  QRectF sceneRect_;
  std::vector<Box> boxes_;
  QPixmap cache_;
  QTimer settle_;
  int maxSide_ = 200;
};

}  // namespace tsui
