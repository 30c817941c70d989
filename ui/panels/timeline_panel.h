// The Timeline dock: the run on a time axis (TimelineView: lanes for the script, schedules, compiles, each
// device's launches and the autotune trials) beside the roofline plot of its kernels (RooflinePlot) against
// the device's peak. The peak is read from the calibration cache (tensorscope/calibrate.h); Measure Peak
// runs `tensorscope-cli calibrate` in its own process (the debugger runs no kernels) and reads it again.
#pragma once
#include <QWidget>
#include <memory>

#include "core/timeline_model.h"

class QLabel;
class QProcess;
class QPushButton;

namespace tsui {

class RooflinePlot;
class RunModel;
class TimelineView;

class TimelinePanel : public QWidget {
  Q_OBJECT
 public:
  explicit TimelinePanel(RunModel* model, QWidget* parent = nullptr);
  ~TimelinePanel() override;

  // Reads the events the RunModel got since the last call (MainWindow calls it after each batch); while the
  // dock is hidden (behind another tab), when it is shown.
  void refresh();
  void setCurrentKernel(int kernelId);
  // Writes the run as Chrome trace JSON (as `tensorscope-cli export --trace` does from its recording).
  bool exportTrace(const QString& path, const QString& script, QString* error);

  const TimelineModel& timeline() const { return timeline_; }
  TimelineView* view() const { return view_; }
  RooflinePlot* roofline() const { return roofline_; }
  // The device whose peak the roofline shows (the first launch's), "" before any launch.
  const QString& device() const { return device_; }
  // Runs `tensorscope-cli calibrate --device DEVICE` (--force: measure again) and shows the result.
  void measurePeak(bool force);

 signals:
  void kernelClicked(int kernelId);
  void peakChanged();

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  void loadPeak();
  void updateSummary();
  RunModel* model_;
  TimelineModel timeline_;
  TimelineView* view_;
  RooflinePlot* roofline_;
  QLabel* summary_;
  QLabel* peakLabel_;
  QPushButton* measure_;
  QProcess* calibrate_ = nullptr;
  QString device_;
  bool stale_ = false;  // events arrived while hidden
};

}  // namespace tsui
