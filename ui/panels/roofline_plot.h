// The roofline plot (Williams, Waterman and Patterson, CACM 2009): log-log, arithmetic intensity (FLOP per
// byte moved) across, GFLOP/s up; the device's peak GFLOP/s is the roof and its memory bandwidth (GB/s) the
// slope under it. One dot per distinct kernel (name and work) at its mean rate over its launches; the
// selected kernel's launch is a ring. The distance below the roof is what the kernel leaves on the table.
#pragma once
#include <QWidget>
#include <optional>
#include <vector>

#include "tensorscope/calibrate.h"

namespace tsui {

class TimelineModel;

class RooflinePlot : public QWidget {
  Q_OBJECT
 public:
  explicit RooflinePlot(const TimelineModel* model, QWidget* parent = nullptr);

  // Reads the launches again (call after the model grew).
  void modelChanged();
  // The roof: the device's measured peak; nullopt draws the dots only.
  void setPeak(std::optional<ts::DevicePeak> peak);
  const std::optional<ts::DevicePeak>& peak() const { return peak_; }
  void setCurrentKernel(int kernelId);

  struct Dot {
    QString name;
    double intensity = 0;  // FLOP per byte
    double gflops = 0;     // GFLOP/s: total FLOPs over total time of its launches
    int launches = 0;
    int firstKernel = -1;  // the kernel id a click selects
    double totalUs = 0;
  };
  const std::vector<Dot>& dots() const { return dots_; }
  QPointF position(double intensity, double gflops) const;  // widget coordinates

 signals:
  void kernelClicked(int kernelId);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  bool event(QEvent* event) override;
  QSize sizeHint() const override { return {380, 260}; }

 private:
  int dotAt(QPointF pos) const;
  QRectF plotRect() const;
  const TimelineModel* model_;
  std::optional<ts::DevicePeak> peak_;
  std::vector<Dot> dots_;
  size_t spansRead_ = 0;
  int currentKernel_ = -1;
  double xMin_ = 1e-2, xMax_ = 1e3, yMin_ = 1e-2, yMax_ = 1e3;  // the axes' ranges (decades)
};

}  // namespace tsui
