// A QGraphicsView that zooms with the wheel (around the cursor), pans by dragging, fits the
// scene on request, and reports plain clicks (a press and release without a drag in between) and
// double-clicks.
#pragma once
#include <QGraphicsView>

namespace tsui {

class ZoomableView : public QGraphicsView {
  Q_OBJECT
 public:
  explicit ZoomableView(QWidget* parent = nullptr);

  // Fits the whole scene, never magnifying beyond `maxScale` (a 3-node graph should not fill a
  // 4K screen with 80-pixel letters) nor shrinking below `minScale` (a 2000-node chain fitted
  // into a window is a hairline); a scene that does not fit is shown from its top-left corner,
  // where the graph's inputs are.
  void fitAll(double maxScale = 1.5, double minScale = 0.3);
  void zoomBy(double factor);
  // True once the user zoomed or panned since the last fitAll().
  bool userNavigated() const { return userNavigated_; }
  // Another widget moved the view (the minimap): a resize no longer fits the scene.
  void markNavigated() { userNavigated_ = true; }

 signals:
  void clicked(const QPointF& scenePos);
  void doubleClicked(const QPointF& scenePos);  // left button; `clicked` came first

 protected:
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  QPoint pressPos_;
  bool userNavigated_ = false;
};

}  // namespace tsui
