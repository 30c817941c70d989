#include "panels/timeline_view.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <functional>

#include "core/theme.h"
#include "core/timeline_model.h"

namespace tsui {

namespace {

// A stable colour per kernel name (Perfetto colours slices by name the same way).
QColor spanColour(const std::string& name, bool dark) {
  const size_t h = std::hash<std::string>{}(name);
  return QColor::fromHsv(static_cast<int>(h % 360), dark ? 140 : 110, dark ? 170 : 225);
}

QColor laneColour(ts::TraceSpan::Kind kind, bool dark) {
  switch (kind) {
    case ts::TraceSpan::Script: return dark ? QColor(90, 130, 90) : QColor(150, 200, 150);
    case ts::TraceSpan::Schedule: return dark ? QColor(200, 160, 80) : QColor(200, 130, 30);
    case ts::TraceSpan::Compile: return dark ? QColor(150, 110, 170) : QColor(185, 150, 210);
    case ts::TraceSpan::AutotuneTrial: return dark ? QColor(90, 140, 170) : QColor(120, 170, 210);
    case ts::TraceSpan::Launch: break;
  }
  return dark ? QColor(120, 120, 130) : QColor(140, 140, 150);  // merged launches
}

// 1, 2 or 5 times a power of ten, at least `x`.
double niceStep(double x) {
  const double p = std::pow(10.0, std::floor(std::log10(std::max(x, 1e-9))));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= x) return m * p;
  return 10 * p;
}

// A tick's label: in the unit of the visible times (`magnitudeUs`: the right edge), with as many decimals as
// the step needs, so that neighbouring ticks differ ("1.1350 s", "1.1355 s").
QString tickLabel(double us, double stepUs, double magnitudeUs) {
  if (us == 0) return "0";
  static const struct { double scale; const char* unit; } kUnits[] = {{1e6, "s"}, {1e3, "ms"}, {1, "µs"}, {1e-3, "ns"}};
  for (const auto& u : kUnits)
    if (magnitudeUs >= u.scale || u.scale == 1e-3) {
      const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(stepUs / u.scale) - 1e-9)));
      return QString("%1 %2").arg(us / u.scale, 0, 'f', decimals).arg(u.unit);
    }
  return {};
}

}  // namespace

TimelineView::TimelineView(const TimelineModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setMinimumHeight(kAxisHeight + 4 * kLaneHeight);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setToolTip("Wheel: zoom around the cursor · drag: pan · click a launch: select its kernel · W/S zoom, A/D pan, "
             "F or double click: fit the run");
}

QSize TimelineView::sizeHint() const { return {900, kAxisHeight + 6 * kLaneHeight + 8}; }

double TimelineView::plotWidth() const { return std::max(10, width() - kLabelWidth); }

double TimelineView::xOf(double us) const { return kLabelWidth + (us - t0_) / usPerPx_; }

int TimelineView::laneAt(double y) const {
  if (y < kAxisHeight) return -1;
  const int lane = static_cast<int>((y - kAxisHeight) / kLaneHeight);
  return lane < static_cast<int>(model_->lanes().size()) ? lane : -1;
}

double TimelineView::laneCentreY(int lane) const { return kAxisHeight + (lane + 0.5) * kLaneHeight; }

int TimelineView::spanAt(QPointF pos) const {
  const int lane = laneAt(pos.y());
  if (lane < 0 || pos.x() < kLabelWidth) return -1;
  return model_->spanAt(lane, t0_ + (pos.x() - kLabelWidth) * usPerPx_, 3 * usPerPx_);
}

void TimelineView::fitAll() {
  following_ = true;
  const double end = std::max(model_->endUs(), 1.0);
  t0_ = 0;
  usPerPx_ = end * 1.02 / plotWidth();
  update();
  Q_EMIT viewChanged();
}

void TimelineView::setView(double startUs, double spanUs) {
  following_ = false;
  t0_ = startUs;
  usPerPx_ = std::max(spanUs, 1e-3) / plotWidth();
  clampView();
  update();
  Q_EMIT viewChanged();
}

void TimelineView::clampView() {
  const double end = std::max(model_->endUs(), 1.0);
  usPerPx_ = std::clamp(usPerPx_, 1e-4, end * 4 / plotWidth());  // from 0.1 ns per pixel to the run, 4 times
  const double span = usPerPx_ * plotWidth();
  t0_ = std::clamp(t0_, -span * 0.5, std::max(end - span * 0.5, -span * 0.5));
}

void TimelineView::zoomAt(double x, double factor) {
  following_ = false;
  const double at = t0_ + (x - kLabelWidth) * usPerPx_;
  usPerPx_ /= factor;
  clampView();
  t0_ = at - (x - kLabelWidth) * usPerPx_;
  clampView();
  update();
  Q_EMIT viewChanged();
}

void TimelineView::panPixels(double dx) {
  following_ = false;
  t0_ -= dx * usPerPx_;
  clampView();
  update();
  Q_EMIT viewChanged();
}

void TimelineView::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  if (following_) fitAll();
}

void TimelineView::modelChanged() {
  if (following_) fitAll();
  else update();
}

void TimelineView::setCurrentKernel(int kernelId) {
  currentKernel_ = kernelId;
  const int span = model_->launchSpanOfKernel(kernelId);
  if (span >= 0) {
    const ts::TraceSpan& s = model_->spans()[span];
    const double x0 = xOf(s.start_us), x1 = xOf(s.start_us + s.duration_us);
    if (x1 < kLabelWidth || x0 > width()) {  // outside: centre it, keeping the zoom
      following_ = false;
      t0_ = s.start_us + s.duration_us / 2 - usPerPx_ * plotWidth() / 2;
      clampView();
      Q_EMIT viewChanged();
    }
  }
  update();
}

void TimelineView::paintAxis(QPainter& p) {
  const QPalette& pal = palette();
  p.fillRect(QRectF(0, 0, width(), kAxisHeight), pal.color(QPalette::Button));
  p.setPen(pal.color(QPalette::ButtonText));
  const double step = niceStep(usPerPx_ * 90);  // a label every 90 px or more
  const double first = std::ceil(t0_ / step) * step;
  const double t1 = t0_ + usPerPx_ * plotWidth();
  QColor grid = pal.color(QPalette::Mid);
  grid.setAlpha(90);
  for (double t = first; t <= t1; t += step) {
    const double x = xOf(t);
    p.setPen(pal.color(QPalette::ButtonText));
    p.drawLine(QPointF(x, kAxisHeight - 6), QPointF(x, kAxisHeight));
    p.drawText(QPointF(x + 3, kAxisHeight - 8), tickLabel(t, step, std::max(std::abs(t0_), std::abs(t1))));
    p.setPen(grid);
    p.drawLine(QPointF(x, kAxisHeight), QPointF(x, height()));
  }
}

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const bool dark = isDarkTheme();
  const QPalette& pal = palette();
  p.fillRect(rect(), pal.color(QPalette::Base));
  const auto& lanes = model_->lanes();
  // lane stripes
  for (size_t i = 0; i < lanes.size(); ++i)
    if (i % 2) p.fillRect(QRectF(0, kAxisHeight + i * kLaneHeight, width(), kLaneHeight), pal.color(QPalette::AlternateBase));
  paintAxis(p);
  p.setClipRect(QRectF(kLabelWidth, kAxisHeight, plotWidth(), height() - kAxisHeight));
  const double t1 = t0_ + usPerPx_ * plotWidth();
  const QFontMetrics fm(font());
  QRectF current;
  for (size_t li = 0; li < lanes.size(); ++li) {
    const double y = kAxisHeight + li * kLaneHeight + 2, h = kLaneHeight - 4;
    const QColor merged = laneColour(lanes[li].kind, dark);
    model_->forEachVisible(static_cast<int>(li), t0_, t1, usPerPx_, [&](double s, double e, int span, int count) {
      const ts::TraceSpan& first = model_->spans()[span];
      const double x0 = xOf(s), x1 = std::max(xOf(e), x0 + 1.5);
      const QRectF r(x0, y, x1 - x0, h);
      const QColor c = count > 1 || first.kind != ts::TraceSpan::Launch ? merged : spanColour(first.name, dark);
      p.fillRect(r, c);
      if (count == 1 && r.width() > 28) {
        p.setPen(dark ? QColor(240, 240, 240) : QColor(20, 20, 20));
        const QRectF visible = r.intersected(QRectF(kLabelWidth, y, plotWidth(), h)).adjusted(3, 0, -2, 0);
        p.drawText(visible, Qt::AlignVCenter | Qt::AlignLeft,
                   fm.elidedText(QString::fromStdString(first.name), Qt::ElideRight, static_cast<int>(visible.width())));
      }
    });
  }
  // the current kernel's launch, outlined over whatever merged around it
  if (const int span = model_->launchSpanOfKernel(currentKernel_); span >= 0) {
    const ts::TraceSpan& s = model_->spans()[span];
    for (size_t li = 0; li < lanes.size(); ++li)
      if (lanes[li].name.toStdString() == s.lane) {
        const double x0 = xOf(s.start_us), x1 = std::max(xOf(s.start_us + s.duration_us), x0 + 3);
        current = QRectF(x0 - 1, kAxisHeight + li * kLaneHeight + 1, x1 - x0 + 2, kLaneHeight - 2);
      }
    if (!current.isNull()) {
      p.setPen(QPen(pal.color(QPalette::Highlight), 2));
      p.setBrush(Qt::NoBrush);
      p.drawRect(current);
    }
  }
  p.setClipping(false);
  // lane names over the label column
  p.fillRect(QRectF(0, kAxisHeight, kLabelWidth, height() - kAxisHeight), pal.color(QPalette::Window));
  p.setPen(pal.color(QPalette::WindowText));
  for (size_t li = 0; li < lanes.size(); ++li) {
    const QRectF r(6, kAxisHeight + li * kLaneHeight, kLabelWidth - 10, kLaneHeight);
    QString name = lanes[li].name;
    if (lanes[li].spans.empty() && lanes[li].kind == ts::TraceSpan::AutotuneTrial) name += " (none)";
    p.drawText(r, Qt::AlignVCenter | Qt::AlignLeft, fm.elidedText(name, Qt::ElideRight, static_cast<int>(r.width())));
  }
  p.setPen(pal.color(QPalette::Mid));
  p.drawLine(QPointF(kLabelWidth - 0.5, 0), QPointF(kLabelWidth - 0.5, height()));
}

void TimelineView::wheelEvent(QWheelEvent* event) {
  const QPoint delta = event->angleDelta();
  if (std::abs(delta.x()) > std::abs(delta.y())) {  // a horizontal wheel or touchpad swipe pans
    panPixels(delta.x() / 2.0);
  } else if (delta.y() != 0) {
    zoomAt(std::max<double>(event->position().x(), kLabelWidth), std::pow(1.0015, delta.y()));  // a notch: ×1.2
  }
  event->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton) return QWidget::mousePressEvent(event);
  pressPos_ = lastPos_ = event->pos();
  dragging_ = false;
  setFocus();
}

void TimelineView::mouseMoveEvent(QMouseEvent* event) {
  if (event->buttons() & Qt::LeftButton) {
    if (!dragging_ && (event->pos() - pressPos_).manhattanLength() >= 4) {
      dragging_ = true;
      setCursor(Qt::ClosedHandCursor);
    }
    if (dragging_) {
      panPixels(event->pos().x() - lastPos_.x());
      lastPos_ = event->pos();
    }
  }
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton) return QWidget::mouseReleaseEvent(event);
  if (dragging_) {
    dragging_ = false;
    unsetCursor();
    return;
  }
  const int span = spanAt(event->position());
  if (span < 0) return;
  const ts::TraceSpan& s = model_->spans()[span];
  if (s.kernel_id >= 0) {
    setCurrentKernel(s.kernel_id);
    Q_EMIT kernelClicked(s.kernel_id);
  }
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent*) { fitAll(); }

void TimelineView::keyPressEvent(QKeyEvent* event) {
  const double centre = kLabelWidth + plotWidth() / 2;
  switch (event->key()) {
    case Qt::Key_W: zoomAt(centre, 1.5); break;
    case Qt::Key_S: zoomAt(centre, 1 / 1.5); break;
    case Qt::Key_A: panPixels(plotWidth() / 5); break;
    case Qt::Key_D: panPixels(-plotWidth() / 5); break;
    case Qt::Key_F: fitAll(); break;
    default: QWidget::keyPressEvent(event);
  }
}

bool TimelineView::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const int span = spanAt(help->pos());
    if (span >= 0) QToolTip::showText(help->globalPos(), model_->describe(span), this);
    else if (help->pos().y() < kAxisHeight || help->pos().x() < kLabelWidth) QToolTip::showText(help->globalPos(), toolTip(), this);
    else QToolTip::hideText();
    return true;
  }
  return QWidget::event(event);
}

}  // namespace tsui
