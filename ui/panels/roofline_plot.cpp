#include "panels/roofline_plot.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <cmath>
#include <map>

#include "core/theme.h"
#include "core/timeline_model.h"

namespace tsui {

namespace {
constexpr double kMargin = 8;
constexpr double kLeft = 46, kBottom = 30;  // px for the axes' labels

QString decade(double v) {
  if (v >= 1 && v < 1e4) return QString::number(v, 'g', 4);
  return QString("1e%1").arg(static_cast<int>(std::lround(std::log10(v))));
}
}  // namespace

RooflinePlot::RooflinePlot(const TimelineModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  setMouseTracking(true);
  setMinimumSize(240, 180);
}

void RooflinePlot::setPeak(std::optional<ts::DevicePeak> peak) {
  peak_ = std::move(peak);
  modelChanged();
}

void RooflinePlot::setCurrentKernel(int kernelId) {
  currentKernel_ = kernelId;
  update();
}

void RooflinePlot::modelChanged() {
  const auto& spans = model_->spans();
  if (spans.size() < spansRead_) dots_.clear(), spansRead_ = 0;
  // one dot per distinct kernel: same name and same work
  std::map<std::pair<QString, double>, size_t> index;
  for (size_t i = 0; i < dots_.size(); ++i) index[{dots_[i].name, dots_[i].intensity}] = i;
  for (; spansRead_ < spans.size(); ++spansRead_) {
    const ts::TraceSpan& s = spans[spansRead_];
    if (s.kind != ts::TraceSpan::Launch || s.flops <= 0 || s.bytes <= 0 || s.duration_us <= 0) continue;
    const QString name = QString::fromStdString(s.name);
    const double intensity = s.flops / s.bytes;
    auto [it, fresh] = index.emplace(std::pair{name, intensity}, dots_.size());
    if (fresh) dots_.push_back({name, intensity, 0, 0, s.kernel_id, 0});
    Dot& d = dots_[it->second];
    // the mean rate: total FLOPs over total time
    const double flops = d.gflops * d.totalUs * 1e3 + s.flops;
    d.totalUs += s.duration_us;
    d.launches++;
    d.gflops = flops / d.totalUs / 1e3;
  }
  // axes: whole decades around the dots and the roof
  double x0 = 1e-1, x1 = 1e2, y0 = 1e-1, y1 = 1e2;
  for (const Dot& d : dots_) {
    x0 = std::min(x0, d.intensity), x1 = std::max(x1, d.intensity);
    y0 = std::min(y0, d.gflops), y1 = std::max(y1, d.gflops);
  }
  if (peak_) {
    y1 = std::max(y1, peak_->gflops);
    x1 = std::max(x1, peak_->gflops / peak_->gbps * 4);
  }
  xMin_ = std::pow(10, std::floor(std::log10(x0))), xMax_ = std::pow(10, std::ceil(std::log10(x1 * 1.01)));
  yMin_ = std::pow(10, std::floor(std::log10(std::max(y0, 1e-6)))), yMax_ = std::pow(10, std::ceil(std::log10(y1 * 1.01)));
  update();
}

QRectF RooflinePlot::plotRect() const {
  return QRectF(kLeft, kMargin, width() - kLeft - kMargin, height() - kMargin - kBottom);
}

QPointF RooflinePlot::position(double intensity, double gflops) const {
  const QRectF r = plotRect();
  const double fx = (std::log10(intensity) - std::log10(xMin_)) / (std::log10(xMax_) - std::log10(xMin_));
  const double fy = (std::log10(gflops) - std::log10(yMin_)) / (std::log10(yMax_) - std::log10(yMin_));
  return {r.left() + fx * r.width(), r.bottom() - fy * r.height()};
}

void RooflinePlot::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QPalette& pal = palette();
  const bool dark = isDarkTheme();
  p.fillRect(rect(), pal.color(QPalette::Base));
  const QRectF r = plotRect();
  QColor grid = pal.color(QPalette::Mid);
  grid.setAlpha(80);
  const QFontMetrics fm(font());
  // decades
  for (double x = xMin_; x <= xMax_ * 1.001; x *= 10) {
    const double px = position(x, yMin_).x();
    p.setPen(grid);
    p.drawLine(QPointF(px, r.top()), QPointF(px, r.bottom()));
    p.setPen(pal.color(QPalette::Text));
    const QString t = decade(x);
    p.drawText(QPointF(px - fm.horizontalAdvance(t) / 2.0, r.bottom() + fm.ascent() + 2), t);
  }
  for (double y = yMin_; y <= yMax_ * 1.001; y *= 10) {
    const double py = position(xMin_, y).y();
    p.setPen(grid);
    p.drawLine(QPointF(r.left(), py), QPointF(r.right(), py));
    p.setPen(pal.color(QPalette::Text));
    const QString t = decade(y);
    p.drawText(QPointF(r.left() - fm.horizontalAdvance(t) - 4, py + fm.ascent() / 2.0 - 1), t);
  }
  p.setPen(pal.color(QPalette::Text));
  p.drawRect(r);
  p.drawText(QRectF(r.left(), height() - fm.height() - 1, r.width(), fm.height()), Qt::AlignCenter,
             "FLOP per byte moved");
  p.save();
  p.translate(fm.height() * 0.2, r.center().y());
  p.rotate(-90);
  p.drawText(QRectF(-r.height() / 2, 0, r.height(), fm.height()), Qt::AlignCenter, "GFLOP/s");
  p.restore();
  p.setClipRect(r);
  // the roof: bandwidth × intensity up to the ridge point, then the peak
  if (peak_) {
    const double ridge = peak_->gflops / peak_->gbps;
    QPainterPath roof;
    roof.moveTo(position(xMin_, peak_->gbps * xMin_));
    roof.lineTo(position(ridge, peak_->gflops));
    roof.lineTo(position(xMax_, peak_->gflops));
    p.setPen(QPen(dark ? QColor(240, 150, 80) : QColor(200, 80, 20), 2));
    p.drawPath(roof);
    p.drawText(position(ridge, peak_->gflops) + QPointF(6, -4), QString("%1 GFLOP/s").arg(peak_->gflops, 0, 'f', 0));
    const QPointF slope = position(xMin_ * 3, peak_->gbps * xMin_ * 3);
    p.drawText(slope + QPointF(4, -6), QString("%1 GB/s").arg(peak_->gbps, 0, 'f', 1));
  }
  // the kernels
  const QColor dot = dark ? QColor(120, 180, 240) : QColor(30, 100, 190);
  p.setPen(Qt::NoPen);
  p.setBrush(dot);
  for (const Dot& d : dots_) p.drawEllipse(position(d.intensity, d.gflops), 3.0, 3.0);
  // the selected kernel's own launch
  if (const int span = model_->launchSpanOfKernel(currentKernel_); span >= 0) {
    const ts::TraceSpan& s = model_->spans()[span];
    if (s.flops > 0 && s.bytes > 0 && s.duration_us > 0) {
      const QPointF c = position(s.flops / s.bytes, s.flops / s.duration_us / 1e3);
      p.setBrush(Qt::NoBrush);
      p.setPen(QPen(pal.color(QPalette::Highlight), 2.5));
      p.drawEllipse(c, 7.0, 7.0);
      p.setPen(pal.color(QPalette::Text));
      p.drawText(c + QPointF(10, 4), QString::fromStdString(s.name));
    }
  }
  p.setClipping(false);
  if (!peak_) {
    p.setPen(pal.color(QPalette::PlaceholderText));
    p.drawText(r.adjusted(6, 4, -6, -4), Qt::AlignTop | Qt::AlignRight | Qt::TextWordWrap,
               "no roof: the device's peak is not measured on this machine (Measure Peak)");
  }
}

int RooflinePlot::dotAt(QPointF pos) const {
  int best = -1;
  double bestDistance = 6 * 6;
  for (size_t i = 0; i < dots_.size(); ++i) {
    const QPointF d = position(dots_[i].intensity, dots_[i].gflops) - pos;
    if (const double dd = QPointF::dotProduct(d, d); dd <= bestDistance) best = static_cast<int>(i), bestDistance = dd;
  }
  return best;
}

void RooflinePlot::mouseReleaseEvent(QMouseEvent* event) {
  if (const int d = dotAt(event->position()); d >= 0) Q_EMIT kernelClicked(dots_[d].firstKernel);
}

bool RooflinePlot::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    if (const int i = dotAt(help->pos()); i >= 0) {
      const Dot& d = dots_[i];
      QString text = QString("<b>%1</b><br>%2 launch(es), %3 in all<br>%4 FLOP/byte, %5 GFLOP/s")
                         .arg(d.name.toHtmlEscaped())
                         .arg(d.launches)
                         .arg(formatDurationUs(d.totalUs))
                         .arg(d.intensity, 0, 'g', 3)
                         .arg(d.gflops, 0, 'g', 3);
      if (peak_) {
        const double roof = std::min(peak_->gflops, peak_->gbps * d.intensity);
        text += QString("<br>%1% of the roof here (%2 GFLOP/s: %3 bound)")
                    .arg(100 * d.gflops / roof, 0, 'f', 1)
                    .arg(roof, 0, 'f', 1)
                    .arg(peak_->gbps * d.intensity < peak_->gflops ? "memory" : "compute");
      }
      QToolTip::showText(help->globalPos(), text, this);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(event);
}

}  // namespace tsui
