#include "panels/timeline_panel.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QLabel>
#include <QProcess>
#include <QPushButton>
#include <QSplitter>
#include <QVBoxLayout>
#include <QtConcurrent>

#include "core/run_model.h"
#include "panels/roofline_plot.h"
#include "panels/timeline_view.h"

namespace tsui {

TimelinePanel::TimelinePanel(RunModel* model, QWidget* parent)
    : QWidget(parent), model_(model), timeline_(model) {
  view_ = new TimelineView(&timeline_);
  view_->setObjectName("timelineView");
  roofline_ = new RooflinePlot(&timeline_);
  roofline_->setObjectName("roofline");
  summary_ = new QLabel;
  summary_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  peakLabel_ = new QLabel("peak: not measured");
  peakLabel_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  auto* fit = new QPushButton("Fit");
  fit->setToolTip("Show the whole run (F, or a double click on the timeline)");
  measure_ = new QPushButton("Measure Peak");
  measure_->setToolTip("Measure the device's peak GFLOP/s and GB/s (tensorscope-cli calibrate: about a second, "
                       "in its own process; cached per device in the cache directory)");
  connect(fit, &QPushButton::clicked, view_, &TimelineView::fitAll);
  connect(measure_, &QPushButton::clicked, this, [this] { measurePeak(roofline_->peak().has_value()); });

  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(4, 2, 4, 0);
  bar->addWidget(fit);
  bar->addWidget(summary_, 3);
  bar->addWidget(peakLabel_, 2);
  bar->addWidget(measure_);
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(view_);
  split->addWidget(roofline_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  layout->addLayout(bar);
  layout->addWidget(split, 1);

  connect(view_, &TimelineView::kernelClicked, this, &TimelinePanel::kernelClicked);
  connect(roofline_, &RooflinePlot::kernelClicked, this, &TimelinePanel::kernelClicked);
  connect(model_, &RunModel::cleared, this, [this] {
    timeline_.clear();
    view_->fitAll();
    roofline_->modelChanged();
    updateSummary();
  });
  updateSummary();
}

TimelinePanel::~TimelinePanel() {
  if (calibrate_) calibrate_->kill();
}

void TimelinePanel::refresh() {
  if (!isVisible()) {  // behind another tab: place the spans when it is shown (opening a recording stays fast)
    stale_ = true;
    return;
  }
  stale_ = false;
  if (!timeline_.update()) return;
  view_->modelChanged();
  roofline_->modelChanged();
  updateSummary();
  if (device_.isEmpty())
    for (const ts::TraceSpan& s : timeline_.spans())
      if (s.kind == ts::TraceSpan::Launch) {
        device_ = QString::fromStdString(s.lane.substr(0, s.lane.find(' ')));
        loadPeak();
        break;
      }
}

void TimelinePanel::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (stale_) refresh();
}

void TimelinePanel::setCurrentKernel(int kernelId) {
  view_->setCurrentKernel(kernelId);
  roofline_->setCurrentKernel(kernelId);
}

void TimelinePanel::updateSummary() {
  summary_->setText(timeline_.spans().empty()
                        ? QString("No run yet: the timeline shows the script, schedules, compiles and launches of a run.")
                        : QString("%1 launches in %2 · wheel: zoom · drag: pan · click: select")
                              .arg(timeline_.launchCount())
                              .arg(formatDurationUs(timeline_.endUs())));
}

void TimelinePanel::loadPeak() {
  if (device_.isEmpty()) return;
  // The identity asks the device registry (an OpenCL platform may take a moment): off the GUI thread.
  auto* watcher = new QFutureWatcher<std::optional<ts::DevicePeak>>(this);
  connect(watcher, &QFutureWatcher<std::optional<ts::DevicePeak>>::finished, this, [this, watcher] {
    const std::optional<ts::DevicePeak> peak = watcher->result();
    watcher->deleteLater();
    roofline_->setPeak(peak);
    peakLabel_->setText(peak ? QString("peak of %1 here: %2 GFLOP/s, %3 GB/s (measured %4)")
                                   .arg(QString::fromStdString(peak->device))
                                   .arg(peak->gflops, 0, 'f', 1)
                                   .arg(peak->gbps, 0, 'f', 1)
                                   .arg(QDateTime::fromSecsSinceEpoch(peak->measured_at).toString("yyyy-MM-dd"))
                             : QString("peak of %1: not measured on this machine").arg(device_));
    peakLabel_->setToolTip(peak ? QString::fromStdString(peak->identity) : QString());
    measure_->setText(peak ? "Measure Again" : "Measure Peak");
    Q_EMIT peakChanged();
  });
  watcher->setFuture(QtConcurrent::run([device = device_.toStdString()]() -> std::optional<ts::DevicePeak> {
    try {
      return ts::cached_peak(device);
    } catch (const std::exception&) {
      return std::nullopt;  // a device this build does not know (a recording from elsewhere)
    }
  }));
}

void TimelinePanel::measurePeak(bool force) {
  if (device_.isEmpty() || (calibrate_ && calibrate_->state() != QProcess::NotRunning)) return;
  if (!calibrate_) {
    calibrate_ = new QProcess(this);
    calibrate_->setProcessChannelMode(QProcess::MergedChannels);
    connect(calibrate_, &QProcess::finished, this, [this](int code) {
      measure_->setEnabled(true);
      const QString out = QString::fromUtf8(calibrate_->readAll()).trimmed();
      if (code != 0) peakLabel_->setText("calibration failed: " + out.section('\n', 0, 0));
      else loadPeak();
    });
    connect(calibrate_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
      if (e != QProcess::FailedToStart) return;
      measure_->setEnabled(true);
      peakLabel_->setText("calibration failed: cannot start " + calibrate_->program());
    });
  }
  measure_->setEnabled(false);
  peakLabel_->setText(QString("measuring the peak of %1…").arg(device_));
  QStringList args{"calibrate", "--device", device_};
  if (force) args << "--force";
  calibrate_->start(QCoreApplication::applicationDirPath() + "/tensorscope-cli", args);
}

bool TimelinePanel::exportTrace(const QString& path, const QString& script, QString* error) {
  timeline_.update();
  try {
    ts::write_chrome_trace(timeline_.spans(), path.toStdString(), script.toStdString());
  } catch (const std::exception& e) {
    if (error) *error = QString::fromUtf8(e.what());
    return false;
  }
  return true;
}

}  // namespace tsui
