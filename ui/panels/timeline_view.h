// The timeline: the run on a real time axis, Perfetto/Tracy style. One row per lane of the TimelineModel
// (script, schedules, compiles, each device's launches, autotune trials), painted with QPainter from the
// spans in the visible interval only; spans thinner than a pixel merge into one bar, so a run of 100,000
// launches repaints in a few milliseconds at any zoom.
//
// Mouse: the wheel zooms around the cursor, a drag pans, hovering shows a span's name, duration and (for a
// launch) FLOPs, bytes, GFLOP/s and GB/s; a click on a launch, compile or trial emits kernelClicked. Keys:
// W/S zoom in/out, A/D pan, F (or a double click) fits the whole run.
#pragma once
#include <QWidget>

namespace tsui {

class TimelineModel;

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineView(const TimelineModel* model, QWidget* parent = nullptr);

  // The model's spans changed: repaint, and keep the whole run in view while following it (the view
  // follows until the user zooms or pans).
  void modelChanged();
  void fitAll();
  // The visible interval, in µs since the start of the run.
  double viewStartUs() const { return t0_; }
  double viewSpanUs() const { return usPerPx_ * plotWidth(); }
  void setView(double startUs, double spanUs);
  // Zoom by `factor` (> 1: in) around the point `x` pixels from the widget's left edge.
  void zoomAt(double x, double factor);
  void panPixels(double dx);
  // Highlights a kernel's launch and brings it into view when it is outside.
  void setCurrentKernel(int kernelId);
  int currentKernel() const { return currentKernel_; }

  // Where things are drawn (for tests and the tooltip): the x of a time, the lane at a y, a lane's centre.
  double xOf(double us) const;
  int laneAt(double y) const;
  double laneCentreY(int lane) const;
  int spanAt(QPointF pos) const;  // the span under a point, or -1

  static constexpr int kLabelWidth = 120;  // px: the lane names
  static constexpr int kAxisHeight = 22;   // px: the time axis
  static constexpr int kLaneHeight = 22;   // px

 signals:
  void kernelClicked(int kernelId);
  void viewChanged();

 protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  bool event(QEvent* event) override;  // tooltips
  void resizeEvent(QResizeEvent* event) override;
  QSize sizeHint() const override;

 private:
  double plotWidth() const;
  void clampView();
  void paintAxis(class QPainter& p);
  const TimelineModel* model_;
  double t0_ = 0;         // µs at the plot's left edge
  double usPerPx_ = 1;    // µs per pixel
  bool following_ = true;  // fit the whole run as it grows, until the user zooms or pans
  int currentKernel_ = -1;
  bool dragging_ = false;
  QPoint pressPos_, lastPos_;
};

}  // namespace tsui
