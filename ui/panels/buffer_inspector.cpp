#include "panels/buffer_inspector.h"

#include <QAbstractTableModel>
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHelpEvent>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QSpinBox>
#include <QStackedWidget>
#include <QTabWidget>
#include <QTableView>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>

#include "core/graph_spec.h"
#include "widgets/code_view.h"

namespace tsui {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- dtypes ---------------------------------------------------------------------------------

enum class Kind { Float, Double, Int, Bool };  // Float: float32 and narrower, read back exactly as a C float

Kind kindOf(const QString& dtype) {
  if (dtype == "bool") return Kind::Bool;
  if (dtype == "float64" || dtype == "double") return Kind::Double;
  if (dtype.startsWith("float") || dtype == "half" || dtype == "bfloat16") return Kind::Float;
  if (dtype.startsWith("int") || dtype.startsWith("uint")) return Kind::Int;
  return Kind::Double;  // unknown: show every digit
}

// NumPy's name of the dtype (with `import numpy as np`).
QString numpyDtype(const QString& dtype) {
  static const QStringList numpyNames = {"float16", "float32", "float64", "int8",   "int16",  "int32",
                                         "int64",   "uint8",   "uint16",  "uint32", "uint64"};
  if (dtype == "bool") return "bool";
  if (dtype == "half") return "np.float16";
  if (dtype == "float") return "np.float32";
  if (dtype == "int") return "np.int32";
  if (numpyNames.contains(dtype)) return "np." + dtype;
  return "np.float64";  // bfloat16 and unknown dtypes: NumPy has no bfloat16
}

// ---- formatting ---------------------------------------------------------------------------------

// A table cell: %.6g for floats (like NumPy's default print precision), integers and bools exact.
QString cellText(double v, Kind kind) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  switch (kind) {
    case Kind::Bool: return v != 0 ? "True" : "False";
    case Kind::Int: return QString::number(static_cast<qlonglong>(v));
    default: return QString::number(v, 'g', 6);
  }
}

// The shortest text that Python reads back to the same value of the dtype: std::to_chars gives the
// shortest round-trip form (of a float for float32/float16, whose values a float holds exactly).
void appendPython(std::string& out, double v, Kind kind) {
  if (std::isnan(v)) return void(out += "np.nan");
  if (std::isinf(v)) return void(out += v > 0 ? "np.inf" : "-np.inf");
  if (kind == Kind::Bool) return void(out += v != 0 ? "True" : "False");
  char buf[32];
  std::to_chars_result r;
  if (kind == Kind::Int) r = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(v));
  else if (kind == Kind::Float) r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  else r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// np.array([v0, v1, ...], dtype=...).reshape(dims); dims.size() == 0: a 0-d array, 1: no reshape.
QString numpyExpression(const QString& dtype, const std::vector<int64_t>& dims, int64_t n,
                        const std::function<double(int64_t)>& valueAt) {
  const Kind kind = kindOf(dtype);
  std::string out = "np.array(";
  out.reserve(out.size() + n * 12 + 64);
  if (dims.empty()) {
    appendPython(out, valueAt(0), kind);
  } else {
    out += '[';
    for (int64_t i = 0; i < n; ++i) {
      if (i) out += ", ";
      appendPython(out, valueAt(i), kind);
    }
    out += ']';
  }
  out += ", dtype=" + numpyDtype(dtype).toStdString() + ")";
  if (dims.size() >= 2) {
    out += ".reshape(";
    for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
    out += ')';
  }
  return QString::fromStdString(out);
}

int64_t numelOf(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

QString rangeText(int64_t first, int64_t count, int64_t total) {
  return QString("%1–%2 of %3").arg(first).arg(first + count - 1).arg(total);
}

// ---- heat-map colours ---------------------------------------------------------------------------

// Nine samples of matplotlib's viridis, interpolated linearly: dark blue -> green -> yellow, and
// as bright as it is high, so it reads in grey too.
QRgb viridis(double t) {
  static const int stops[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},  {44, 113, 142}, {33, 144, 141},
                                  {39, 173, 129}, {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
  t = std::clamp(t, 0.0, 1.0) * 8;
  const int i = std::min(static_cast<int>(t), 7);
  const double f = t - i;
  auto mix = [&](int c) { return static_cast<int>(std::lround(stops[i][c] + f * (stops[i + 1][c] - stops[i][c]))); };
  return qRgb(mix(0), mix(1), mix(2));
}

QRgb heatMapRgb(double v, double lo, double hi) {
  if (std::isnan(v)) return qRgb(255, 0, 255);
  if (std::isinf(v)) return v > 0 ? qRgb(255, 255, 255) : qRgb(0, 0, 0);
  return viridis(hi > lo ? (v - lo) / (hi - lo) : 0.5);
}

}  // namespace

// ---- statistics ---------------------------------------------------------------------------------

BufferStats computeStats(const std::vector<double>& values) {
  BufferStats s;
  s.numel = static_cast<int64_t>(values.size());
  double sum = 0, lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values) {
    if (std::isnan(v)) {
      ++s.nan;
    } else if (std::isinf(v)) {
      ++(v > 0 ? s.posInf : s.negInf);
    } else {
      ++s.finite;
      s.zeros += v == 0;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
  }
  if (s.finite == 0) {
    s.min = s.max = s.mean = s.std = kNaN;
    return s;
  }
  s.min = lo;
  s.max = hi;
  s.mean = sum / static_cast<double>(s.finite);
  double squares = 0;
  for (double v : values)
    if (std::isfinite(v)) squares += (v - s.mean) * (v - s.mean);
  s.std = std::sqrt(squares / static_cast<double>(s.finite));
  return s;
}

std::vector<int64_t> histogram(const std::vector<double>& values, int bins, double* lo, double* hi) {
  bins = std::max(bins, 1);
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (double v : values)
    if (std::isfinite(v)) first = std::min(first, v), last = std::max(last, v);
  if (first > last) first = 0, last = 1;  // no finite value
  else if (first == last) first -= 0.5, last += 0.5;
  if (lo) *lo = first;
  if (hi) *hi = last;

  // numpy.histogram's fast path for equal bins: guess the bin from the position in the range,
  // then move it by one where rounding put it on the wrong side of an edge of
  // np.linspace(first, last, bins + 1).
  const double step = (last - first) / bins;
  auto edge = [&](int i) { return i == bins ? last : i * step + first; };
  std::vector<int64_t> counts(bins, 0);
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    int i = std::min(static_cast<int>((v - first) / (last - first) * bins), bins - 1);
    if (v < edge(i)) --i;
    else if (i != bins - 1 && v >= edge(i + 1)) ++i;
    ++counts[i];
  }
  return counts;
}

// ---- slices -------------------------------------------------------------------------------------

Slice2D makeSlice(const std::vector<int64_t>& shape, int rowAxis, int colAxis, std::vector<int64_t> index) {
  const int ndim = static_cast<int>(shape.size());
  Slice2D s;
  s.shape = shape;
  s.rowAxis = rowAxis >= 0 && rowAxis < ndim ? rowAxis : -1;
  s.colAxis = colAxis >= 0 && colAxis < ndim && colAxis != s.rowAxis ? colAxis : -1;
  s.index = std::move(index);
  s.index.resize(ndim, 0);
  int64_t stride = 1;  // row-major: the last axis is contiguous
  for (int a = ndim - 1; a >= 0; --a) {
    if (a == s.rowAxis) {
      s.rows = shape[a], s.rowStride = stride;
    } else if (a == s.colAxis) {
      s.cols = shape[a], s.colStride = stride;
    } else {
      s.index[a] = std::clamp<int64_t>(s.index[a], 0, std::max<int64_t>(shape[a] - 1, 0));
      s.base += s.index[a] * stride;
    }
    stride *= shape[a];
  }
  return s;
}

Slice2D defaultSlice(const std::vector<int64_t>& shape) {
  const int ndim = static_cast<int>(shape.size());
  if (ndim == 1) return makeSlice(shape, 0, -1);
  return makeSlice(shape, ndim - 2, ndim - 1);
}

Slice2D Slice2D::window(int64_t row0, int64_t nrows, int64_t col0, int64_t ncols) const {
  Slice2D w = *this;
  row0 = std::clamp<int64_t>(row0, 0, rows);
  col0 = std::clamp<int64_t>(col0, 0, cols);
  w.rows = std::clamp<int64_t>(nrows, 0, rows - row0);
  w.cols = std::clamp<int64_t>(ncols, 0, cols - col0);
  w.base = offset(row0, col0);
  w.firstRow = firstRow + row0;
  w.firstCol = firstCol + col0;
  return w;
}

QString Slice2D::numpyIndex() const {
  QStringList parts;
  bool whole = true;
  for (int a = 0; a < static_cast<int>(shape.size()); ++a) {
    const bool isRow = a == rowAxis, isCol = a == colAxis;
    if (!isRow && !isCol) {
      parts << QString::number(index[a]);
      whole = false;
      continue;
    }
    const int64_t first = isRow ? firstRow : firstCol, count = isRow ? rows : cols;
    if (first == 0 && count == shape[a]) {
      parts << ":";
    } else {
      parts << QString("%1:%2").arg(first).arg(first + count);
      whole = false;
    }
  }
  const QString transpose = rowAxis > colAxis && colAxis >= 0 ? ".T" : "";
  return (whole ? QString("b") : "b[" + parts.join(", ") + "]") + transpose;
}

QString Slice2D::numpyIndex(int64_t row, int64_t col) const {
  QStringList parts;
  for (int a = 0; a < static_cast<int>(shape.size()); ++a)
    parts << QString::number(a == rowAxis ? firstRow + row : a == colAxis ? firstCol + col : index[a]);
  return shape.empty() ? QString("b[()]") : "b[" + parts.join(", ") + "]";
}

// ---- heat map and NumPy text --------------------------------------------------------------------

QColor heatMapColor(double v, double lo, double hi) { return QColor(heatMapRgb(v, lo, hi)); }

QImage heatMapImage(const BufferContents& buffer, const Slice2D& slice, double lo, double hi, int maxSide) {
  if (buffer.values.empty() || slice.rows == 0 || slice.cols == 0) return {};
  const int64_t rows = slice.rows, cols = slice.cols;
  const int height = static_cast<int>(std::min<int64_t>(rows, maxSide));
  const int width = static_cast<int>(std::min<int64_t>(cols, maxSide));
  QImage image(width, height, QImage::Format_RGB32);
  // Pixel (x, y) stands for rows [y*rows/height, (y+1)*rows/height) and the same for columns: one
  // cell each when the slice fits, else a block (blocks differ in size by at most one cell).
  for (int y = 0; y < height; ++y) {
    const int64_t r0 = y * rows / height, r1 = (y + 1) * rows / height;
    auto* line = reinterpret_cast<QRgb*>(image.scanLine(y));
    for (int x = 0; x < width; ++x) {
      const int64_t c0 = x * cols / width, c1 = (x + 1) * cols / width;
      bool nan = false, posInf = false, negInf = false;
      double sum = 0;
      for (int64_t r = r0; r < r1 && !nan; ++r) {
        for (int64_t c = c0; c < c1; ++c) {
          const double v = buffer.values[slice.offset(r, c)];
          if (std::isnan(v)) nan = true;
          else if (std::isinf(v)) (v > 0 ? posInf : negInf) = true;
          else sum += v;
        }
      }
      const double mean = sum / static_cast<double>((r1 - r0) * (c1 - c0));
      const double shown = nan ? kNaN : posInf ? HUGE_VAL : negInf ? -HUGE_VAL : mean;
      line[x] = heatMapRgb(shown, lo, hi);
    }
  }
  return image;
}

QString numpyText(const BufferContents& buffer) {
  if (buffer.values.empty()) return {};
  const std::vector<double>& v = buffer.values;
  return numpyExpression(buffer.dtype, buffer.shape, static_cast<int64_t>(v.size()), [&](int64_t i) { return v[i]; });
}

QString numpyText(const BufferContents& buffer, const Slice2D& slice) {
  if (buffer.values.empty()) return {};
  std::vector<int64_t> dims;
  if (slice.rowAxis >= 0) dims.push_back(slice.rows);
  if (slice.colAxis >= 0) dims.push_back(slice.cols);
  const int64_t cols = slice.cols;
  return numpyExpression(buffer.dtype, dims, slice.rows * cols,
                         [&](int64_t i) { return buffer.values[slice.offset(i / cols, i % cols)]; });
}

// ---- the table ----------------------------------------------------------------------------------

// The cells of one page of a slice, formatted when the view paints them: a page of 1000 x 1000
// cells costs only the ~1000 strings on screen.
class SliceTableModel : public QAbstractTableModel {
 public:
  using QAbstractTableModel::QAbstractTableModel;

  void show(const BufferContents* buffer, const Slice2D& page) {
    beginResetModel();
    buffer_ = buffer && !buffer->values.empty() ? buffer : nullptr;
    page_ = page;
    kind_ = buffer ? kindOf(buffer->dtype) : Kind::Double;
    endResetModel();
  }

  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() || !buffer_ ? 0 : static_cast<int>(page_.rows);
  }
  int columnCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() || !buffer_ ? 0 : static_cast<int>(page_.cols);
  }

  QVariant data(const QModelIndex& index, int role) const override {
    if (!buffer_ || !index.isValid()) return {};
    const double v = buffer_->values[page_.offset(index.row(), index.column())];
    switch (role) {
      case Qt::DisplayRole: return cellText(v, kind_);
      case Qt::TextAlignmentRole: return int(Qt::AlignRight | Qt::AlignVCenter);
      case Qt::BackgroundRole: return std::isfinite(v) ? QVariant() : QColor(255, 200, 200);
      case Qt::ForegroundRole: return std::isfinite(v) ? QVariant() : QColor(160, 0, 0);
      case Qt::ToolTipRole: {  // every digit: %.6g hides the difference between 1 and 1.0000001
        std::string full;
        appendPython(full, v, kind_);
        return page_.numpyIndex(index.row(), index.column()) + " = " + QString::fromStdString(full);
      }
      default: return {};
    }
  }

  // Headers are the NumPy indices along the rows and columns axes ("value" for a missing axis).
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override {
    if (!buffer_ || role != Qt::DisplayRole) return {};
    const bool vertical = orientation == Qt::Vertical;
    if ((vertical ? page_.rowAxis : page_.colAxis) < 0) return QString(vertical ? "" : "value");
    return QString::number((vertical ? page_.firstRow : page_.firstCol) + section);
  }

 private:
  const BufferContents* buffer_ = nullptr;
  Slice2D page_;
  Kind kind_ = Kind::Double;
};

// ---- the heat map and the histogram -------------------------------------------------------------

// The heat-map image scaled to fit (nearest neighbour: one cell stays one sharp square), with the
// colour scale under it.
class HeatMapView : public QWidget {
 public:
  std::function<QString(QPoint)> tip;  // the text for a pixel of the image

  explicit HeatMapView(QWidget* parent) : QWidget(parent) { setMinimumSize(200, 160); }

  void setImage(const QImage& image, double lo, double hi) {
    image_ = image, lo_ = lo, hi_ = hi;
    update();
  }

 protected:
  static constexpr int kLegend = 34;

  QRect imageRect() const {
    const QRect area = rect().adjusted(8, 8, -8, -kLegend - 8);
    if (image_.isNull() || area.isEmpty()) return {};
    QSize size = image_.size().scaled(area.size(), Qt::KeepAspectRatio);
    // a 1 x 10000 slice would be a hairline: give each side at least 24 px
    size = size.expandedTo(QSize(24, 24)).boundedTo(area.size());
    QRect r(QPoint(), size);
    r.moveCenter(area.center());
    return r;
  }

  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    const QRect target = imageRect();
    if (target.isEmpty()) return;
    p.drawImage(target, image_);
    p.setPen(palette().mid().color());
    p.drawRect(target.adjusted(0, 0, -1, -1));

    // The scale: lo .. hi as a gradient, then the colours of NaN and ±Inf.
    const QFontMetrics fm = fontMetrics();
    int x = 8;
    const int y = height() - kLegend;
    const QString loText = QString::number(lo_, 'g', 4), hiText = QString::number(hi_, 'g', 4);
    p.setPen(palette().text().color());
    p.drawText(x, y + 20, loText);
    x += fm.horizontalAdvance(loText) + 6;
    const int barWidth = 160;
    for (int i = 0; i < barWidth; ++i) {
      p.setPen(heatMapColor(lo_ + (hi_ - lo_) * i / (barWidth - 1), lo_, hi_));
      p.drawLine(x + i, y + 8, x + i, y + 24);
    }
    x += barWidth + 6;
    p.setPen(palette().text().color());
    p.drawText(x, y + 20, hiText);
    x += fm.horizontalAdvance(hiText) + 20;
    const std::pair<QString, double> marks[] = {{"NaN", kNaN}, {"+Inf", HUGE_VAL}, {"−Inf", -HUGE_VAL}};
    for (const auto& [name, value] : marks) {
      p.setPen(palette().mid().color());
      p.setBrush(heatMapColor(value, lo_, hi_));
      p.drawRect(x, y + 8, 16, 16);
      p.setPen(palette().text().color());
      p.drawText(x + 22, y + 20, name);
      x += 22 + fm.horizontalAdvance(name) + 14;
    }
  }

  bool event(QEvent* e) override {
    if (e->type() != QEvent::ToolTip) return QWidget::event(e);
    auto* help = static_cast<QHelpEvent*>(e);
    const QRect target = imageRect();
    if (!tip || !target.contains(help->pos())) {
      QToolTip::hideText();
      return true;
    }
    const QPoint pixel((help->pos().x() - target.left()) * image_.width() / target.width(),
                       (help->pos().y() - target.top()) * image_.height() / target.height());
    QToolTip::showText(help->globalPos(), tip(pixel), this);
    return true;
  }

 private:
  QImage image_;
  double lo_ = 0, hi_ = 1;
};

// Bars of the bin counts, the range under them, the largest count beside them.
class HistogramView : public QWidget {
 public:
  explicit HistogramView(QWidget* parent) : QWidget(parent) { setMinimumSize(240, 160); }

  void setHistogram(std::vector<int64_t> counts, double lo, double hi, const QString& caption) {
    counts_ = std::move(counts), lo_ = lo, hi_ = hi, caption_ = caption;
    update();
  }
  const std::vector<int64_t>& counts() const { return counts_; }

 protected:
  QRect plotRect() const { return rect().adjusted(56, 28, -16, -28); }

  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    p.setPen(palette().text().color());
    p.drawText(rect().adjusted(8, 6, -8, 0), Qt::AlignLeft | Qt::AlignTop, caption_);
    const QRect plot = plotRect();
    if (counts_.empty() || plot.isEmpty()) return;
    const int64_t top = std::max<int64_t>(1, *std::max_element(counts_.begin(), counts_.end()));
    const int bins = static_cast<int>(counts_.size());
    for (int i = 0; i < bins; ++i) {
      if (counts_[i] == 0) continue;
      const int x0 = plot.left() + i * plot.width() / bins, x1 = plot.left() + (i + 1) * plot.width() / bins;
      // at least 1 px: a single outlier among millions must still show
      const int h = std::max(1, static_cast<int>(counts_[i] * plot.height() / top));
      p.fillRect(QRect(x0, plot.bottom() - h + 1, std::max(1, x1 - x0 - 1), h), QColor(76, 120, 168));
    }
    p.setPen(palette().mid().color());
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    p.drawLine(plot.bottomLeft(), plot.topLeft());
    p.setPen(palette().text().color());
    const int textY = plot.bottom() + 4, textH = fontMetrics().height();
    p.drawText(QRect(plot.left() - 40, textY, 80, textH), Qt::AlignHCenter, QString::number(lo_, 'g', 4));
    p.drawText(QRect(plot.right() - 40, textY, 80, textH), Qt::AlignHCenter, QString::number(hi_, 'g', 4));
    p.drawText(QRect(plot.center().x() - 40, textY, 80, textH), Qt::AlignHCenter,
               QString::number((lo_ + hi_) / 2, 'g', 4));
    p.drawText(QRect(0, plot.top() - textH / 2, plot.left() - 6, textH), Qt::AlignRight, QString::number(top));
    p.drawText(QRect(0, plot.bottom() - textH / 2, plot.left() - 6, textH), Qt::AlignRight, "0");
  }

  bool event(QEvent* e) override {
    if (e->type() != QEvent::ToolTip) return QWidget::event(e);
    auto* help = static_cast<QHelpEvent*>(e);
    const QRect plot = plotRect();
    if (counts_.empty() || !plot.contains(help->pos())) {
      QToolTip::hideText();
      return true;
    }
    const int bins = static_cast<int>(counts_.size());
    const int i = std::min(bins - 1, (help->pos().x() - plot.left()) * bins / plot.width());
    const double step = (hi_ - lo_) / bins;
    QToolTip::showText(help->globalPos(),
                       QString("[%1, %2%3: %4 values")
                           .arg(lo_ + i * step, 0, 'g', 6)
                           .arg(lo_ + (i + 1) * step, 0, 'g', 6)
                           .arg(i == bins - 1 ? "]" : ")")
                           .arg(counts_[i]),
                       this);
    return true;
  }

 private:
  std::vector<int64_t> counts_;
  double lo_ = 0, hi_ = 1;
  QString caption_;
};

// ---- the widget ---------------------------------------------------------------------------------

BufferInspector::BufferInspector(QWidget* parent) : QWidget(parent) {
  bufferCombo_ = new QComboBox;
  bufferCombo_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  shapeLabel_ = new QLabel;
  copyButton_ = new QPushButton("Copy as NumPy");
  copyNote_ = new QLabel;
  copyNote_->setStyleSheet("color: #6b7280");
  auto* top = new QHBoxLayout;
  top->addWidget(bufferCombo_);
  top->addWidget(shapeLabel_);
  top->addStretch();
  top->addWidget(copyNote_);
  top->addWidget(copyButton_);

  statsLabel_ = new QLabel;
  statsLabel_->setTextFormat(Qt::RichText);
  statsLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  // rows axis, columns axis, the index of every other axis
  rowAxisCombo_ = new QComboBox;
  colAxisCombo_ = new QComboBox;
  rowAxisCombo_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  rowAxisCombo_->setObjectName("rowsAxis");
  colAxisCombo_->setObjectName("columnsAxis");
  colAxisCombo_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  indexBox_ = new QWidget;
  auto* indexLayout = new QHBoxLayout(indexBox_);
  indexLayout->setContentsMargins(0, 0, 0, 0);
  sliceBar_ = new QWidget;
  auto* sliceLayout = new QHBoxLayout(sliceBar_);
  sliceLayout->setContentsMargins(0, 0, 0, 0);
  sliceLayout->addWidget(new QLabel("rows axis"));
  sliceLayout->addWidget(rowAxisCombo_);
  sliceLayout->addSpacing(8);
  sliceLayout->addWidget(new QLabel("columns axis"));
  sliceLayout->addWidget(colAxisCombo_);
  sliceLayout->addSpacing(8);
  sliceLayout->addWidget(indexBox_);
  sliceLayout->addStretch();

  rowPageSpin_ = new QSpinBox;
  rowPageSpin_->setPrefix("row page ");
  colPageSpin_ = new QSpinBox;
  colPageSpin_->setPrefix("column page ");
  pageLabel_ = new QLabel;
  pageBar_ = new QWidget;
  auto* pageLayout = new QHBoxLayout(pageBar_);
  pageLayout->setContentsMargins(0, 0, 0, 0);
  pageLayout->addWidget(rowPageSpin_);
  pageLayout->addWidget(colPageSpin_);
  pageLayout->addWidget(pageLabel_);
  pageLayout->addStretch();

  model_ = new SliceTableModel(this);
  table_ = new QTableView;
  table_->setModel(model_);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);  // no per-row size hints
  applyFontZoom();

  heatView_ = new HeatMapView(nullptr);
  heatView_->tip = [this](QPoint pixel) { return heatMapTip(pixel); };
  heatNote_ = new QLabel;
  heatNote_->setWordWrap(true);
  heatNote_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // a long note wraps, never widens
  heatNote_->setStyleSheet("color: #6b7280");
  auto* heatTab = new QWidget;
  auto* heatLayout = new QVBoxLayout(heatTab);
  heatLayout->addWidget(heatView_, 1);
  heatLayout->addWidget(heatNote_);
  histView_ = new HistogramView(nullptr);

  tabs_ = new QTabWidget;
  tabs_->addTab(table_, "Table");
  tabs_->addTab(heatTab, "Heat map");
  tabs_->addTab(histView_, "Histogram");
  unavailableLabel_ = new QLabel;
  unavailableLabel_->setAlignment(Qt::AlignCenter);
  unavailableLabel_->setWordWrap(true);
  unavailableLabel_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // the runner's note may be long
  unavailableLabel_->setStyleSheet("color: #6b7280");
  stack_ = new QStackedWidget;
  stack_->addWidget(tabs_);
  stack_->addWidget(unavailableLabel_);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(statsLabel_);
  layout->addWidget(sliceBar_);
  layout->addWidget(pageBar_);
  layout->addWidget(stack_, 1);

  connect(bufferCombo_, &QComboBox::currentIndexChanged, this, [this](int i) {
    if (!syncing_) showBuffer(i);
  });
  // The combo boxes list the axes in order; -1 (the "—" item of a missing axis) stays -1.
  auto axisOf = [](QComboBox* combo) { return combo->currentData().toInt(); };
  connect(rowAxisCombo_, &QComboBox::currentIndexChanged, this, [this, axisOf] {
    if (!syncing_) setSliceAxes(axisOf(rowAxisCombo_), axisOf(colAxisCombo_));
  });
  connect(colAxisCombo_, &QComboBox::currentIndexChanged, this, [this, axisOf] {
    if (!syncing_) setSliceAxes(axisOf(rowAxisCombo_), axisOf(colAxisCombo_));
  });
  // the page spin boxes count from 1 ("row page 2 of 3"), pages from 0
  connect(rowPageSpin_, &QSpinBox::valueChanged, this, [this](int p) {
    if (!syncing_) setPage(p - 1, colPage_);
  });
  connect(colPageSpin_, &QSpinBox::valueChanged, this, [this](int p) {
    if (!syncing_) setPage(rowPage_, p - 1);
  });
  connect(copyButton_, &QPushButton::clicked, this, [this] {
    copyAsNumpy();
    copyNote_->setText("copied " + numpyScope());
  });
  clear();
}

BufferInspector::~BufferInspector() = default;

const BufferContents* BufferInspector::buffer() const {
  return current_ >= 0 && current_ < static_cast<int>(buffers_.size()) ? &buffers_[current_] : nullptr;
}

const std::vector<int64_t>& BufferInspector::histogramCounts() const { return histView_->counts(); }
const QAbstractItemModel* BufferInspector::tableModel() const { return model_; }

void BufferInspector::clear() { setBuffers({}); }

void BufferInspector::setBuffers(std::vector<BufferContents> buffers) {
  const bool sameCount = buffers.size() == buffers_.size();
  const std::vector<int64_t> oldShape = buffer() ? buffer()->shape : std::vector<int64_t>{};
  buffers_ = std::move(buffers);
  // values that do not fill the shape (a damaged recording) are shown flat, never read past their end
  for (BufferContents& b : buffers_) {
    int64_t elements = 1;
    for (int64_t d : b.shape) elements = d < 0 ? -1 : elements * d;
    if (!b.values.empty() && elements != static_cast<int64_t>(b.values.size()))
      b.shape = {static_cast<int64_t>(b.values.size())};
  }
  const int next = buffers_.empty() ? -1 : sameCount && current_ >= 0 ? current_ : 0;
  const bool keepSlice = next >= 0 && next == current_ && buffers_[next].shape == oldShape;
  current_ = next;

  syncing_ = true;
  bufferCombo_->clear();
  for (const BufferContents& b : buffers_) bufferCombo_->addItem(b.name);
  syncing_ = false;
  if (!keepSlice) {
    slice_ = buffer() ? defaultSlice(buffer()->shape) : Slice2D();
    rowPage_ = colPage_ = 0;
  }
  showCurrent();
}

void BufferInspector::showBuffer(int i) {
  if (i < 0 || i >= static_cast<int>(buffers_.size())) return;
  current_ = i;
  slice_ = defaultSlice(buffers_[i].shape);
  rowPage_ = colPage_ = 0;
  showCurrent();
}

void BufferInspector::showCurrent() {
  const BufferContents* b = buffer();
  const bool hasValues = b && !b->values.empty();
  syncing_ = true;
  bufferCombo_->setCurrentIndex(current_);
  syncing_ = false;
  copyNote_->clear();
  shapeLabel_->setText(b ? QString("%1 · %2 · %3 elements").arg(b->dtype, shapeText(b->shape)).arg(numelOf(b->shape))
                         : QString());
  statsLabel_->setVisible(hasValues);
  sliceBar_->setVisible(hasValues);
  copyButton_->setEnabled(hasValues);
  stack_->setCurrentWidget(hasValues ? static_cast<QWidget*>(tabs_) : unavailableLabel_);
  if (!hasValues) {
    unavailableLabel_->setText(!b ? "No buffer: pause a run at a kernel to see its buffers."
                               : b->unavailable.isEmpty() ? "The values of this buffer are not available."
                                                          : b->unavailable);
    stats_ = BufferStats();
    pageBar_->hide();
    model_->show(nullptr, {});
    heatMap_ = QImage();
    histView_->setHistogram({}, 0, 1, {});
    return;
  }

  sizeColumns();

  stats_ = computeStats(b->values);
  auto count = [](const char* name, int64_t n) {
    return n ? QString("<span style='color:#b00000'><b>%1 %2</b></span>").arg(name).arg(n)
             : QString("%1 %2").arg(name).arg(n);
  };
  auto num = [](double v) { return QString::number(v, 'g', 6); };
  statsLabel_->setText(
      QString("numel %1 &nbsp;·&nbsp; %2 &nbsp;·&nbsp; %3 &nbsp;·&nbsp; %4 &nbsp;·&nbsp; zeros %5<br>"
              "min %6 &nbsp;·&nbsp; max %7 &nbsp;·&nbsp; mean %8 &nbsp;·&nbsp; std %9 "
              "<span style='color:#6b7280'>&nbsp; over the %10 finite values; std as numpy.std (ddof=0)</span>")
          .arg(stats_.numel)
          .arg(count("NaN", stats_.nan), count("+Inf", stats_.posInf), count("−Inf", stats_.negInf))
          .arg(stats_.zeros)
          .arg(num(stats_.min), num(stats_.max), num(stats_.mean), num(stats_.std))
          .arg(stats_.finite));

  double lo = 0, hi = 1;
  std::vector<int64_t> counts = histogram(b->values, kHistogramBins, &lo, &hi);
  const int64_t skipped = stats_.numel - stats_.finite;
  histView_->setHistogram(std::move(counts), lo, hi,
                          QString("%1 finite values in %2 bins").arg(stats_.finite).arg(kHistogramBins) +
                              (skipped ? QString("; %1 NaN/Inf not counted").arg(skipped) : QString()));
  rebuildAxisControls();
  showSlice();
}

void BufferInspector::rebuildAxisControls() {
  const std::vector<int64_t>& shape = buffer()->shape;
  syncing_ = true;
  // A 1-D buffer has no columns axis ("—"), a 0-d buffer no rows axis either.
  const bool choice = shape.size() >= 2;
  for (QComboBox* combo : {rowAxisCombo_, colAxisCombo_}) {
    combo->clear();
    if (choice || (combo == rowAxisCombo_ && shape.size() == 1))
      for (int a = 0; a < static_cast<int>(shape.size()); ++a)
        combo->addItem(QString("%1 (size %2)").arg(a).arg(shape[a]), a);
    else
      combo->addItem("—", -1);
    combo->setEnabled(choice);
  }

  for (QSpinBox* spin : indexSpins_) delete spin;
  indexSpins_.clear();
  for (int a = 0; a < static_cast<int>(shape.size()); ++a) {
    auto* spin = new QSpinBox;
    spin->setPrefix(QString("axis %1 = ").arg(a));
    spin->setObjectName(QString("index%1").arg(a));
    spin->setRange(0, static_cast<int>(std::max<int64_t>(shape[a] - 1, 0)));
    spin->setToolTip(QString("the index along axis %1 (size %2) of the slice shown").arg(a).arg(shape[a]));
    indexBox_->layout()->addWidget(spin);
    connect(spin, &QSpinBox::valueChanged, this, [this, a](int i) {
      if (!syncing_) setSliceIndex(a, i);
    });
    indexSpins_.push_back(spin);
  }
  syncing_ = false;
}

void BufferInspector::setSliceAxes(int rowAxis, int colAxis) {
  if (!buffer()) return;
  if (rowAxis == colAxis && rowAxis >= 0) {  // picked the other one's axis: swap them
    if (rowAxis == slice_.colAxis) colAxis = slice_.rowAxis;
    else rowAxis = slice_.colAxis;
  }
  slice_ = makeSlice(buffer()->shape, rowAxis, colAxis, slice_.index);
  rowPage_ = colPage_ = 0;
  showSlice();
}

void BufferInspector::setSliceIndex(int axis, int64_t index) {
  if (!buffer() || axis < 0 || axis >= static_cast<int>(slice_.index.size())) return;
  std::vector<int64_t> indices = slice_.index;
  indices[axis] = index;
  slice_ = makeSlice(buffer()->shape, slice_.rowAxis, slice_.colAxis, std::move(indices));
  showSlice();
}

void BufferInspector::setPage(int rowPage, int colPage) {
  rowPage_ = rowPage, colPage_ = colPage;
  showSlice();
}

void BufferInspector::showSlice() {
  const BufferContents* b = buffer();
  if (!b || b->values.empty()) return;
  const int rowPages = static_cast<int>((slice_.rows + kPageRows - 1) / kPageRows);
  const int colPages = static_cast<int>((slice_.cols + kPageCols - 1) / kPageCols);
  rowPage_ = std::clamp(rowPage_, 0, std::max(rowPages - 1, 0));
  colPage_ = std::clamp(colPage_, 0, std::max(colPages - 1, 0));
  page_ = slice_.window(rowPage_ * kPageRows, kPageRows, colPage_ * kPageCols, kPageCols);
  model_->show(b, page_);

  heatMap_ = heatMapImage(*b, slice_, stats_.min, stats_.max);
  heatView_->setImage(heatMap_, stats_.min, stats_.max);
  QString note = QString("%1, %2 × %3").arg(slice_.numpyIndex()).arg(slice_.rows).arg(slice_.cols);
  if (heatMap_.width() < slice_.cols || heatMap_.height() < slice_.rows)
    note += QString(", downsampled to %1 × %2 pixels: each pixel is the mean of a block of cells, NaN if any "
                    "cell in it is NaN, ±Inf if any is infinite")
                .arg(heatMap_.height())
                .arg(heatMap_.width());
  heatNote_->setText(note + ". Colours span the finite range of the whole buffer.");
  copyButton_->setToolTip("Puts on the clipboard a NumPy expression of " + numpyScope());
  syncControls();
}

void BufferInspector::syncControls() {
  syncing_ = true;
  rowAxisCombo_->setCurrentIndex(rowAxisCombo_->findData(slice_.rowAxis));
  colAxisCombo_->setCurrentIndex(colAxisCombo_->findData(slice_.colAxis));
  for (int a = 0; a < static_cast<int>(indexSpins_.size()); ++a) {
    indexSpins_[a]->setValue(static_cast<int>(slice_.index[a]));
    indexSpins_[a]->setVisible(a != slice_.rowAxis && a != slice_.colAxis);
  }
  const int rowPages = static_cast<int>((slice_.rows + kPageRows - 1) / kPageRows);
  const int colPages = static_cast<int>((slice_.cols + kPageCols - 1) / kPageCols);
  rowPageSpin_->setRange(1, std::max(rowPages, 1));
  rowPageSpin_->setSuffix(QString(" of %1").arg(rowPages));
  rowPageSpin_->setValue(rowPage_ + 1);
  rowPageSpin_->setVisible(rowPages > 1);
  colPageSpin_->setRange(1, std::max(colPages, 1));
  colPageSpin_->setSuffix(QString(" of %1").arg(colPages));
  colPageSpin_->setValue(colPage_ + 1);
  colPageSpin_->setVisible(colPages > 1);
  pageLabel_->setText(pageText());
  pageBar_->setVisible(rowPages > 1 || colPages > 1);
  syncing_ = false;
}

QString BufferInspector::pageText() const {
  if (!buffer() || buffer()->values.empty()) return {};
  QStringList parts;
  if (page_.rows < slice_.rows) parts << "rows " + rangeText(page_.firstRow, page_.rows, slice_.rows);
  if (page_.cols < slice_.cols) parts << "columns " + rangeText(page_.firstCol, page_.cols, slice_.cols);
  return parts.join(" · ");
}

QString BufferInspector::heatMapTip(QPoint pixel) const {
  const BufferContents* b = buffer();
  if (!b || b->values.empty() || heatMap_.isNull()) return {};
  const int64_t h = heatMap_.height(), w = heatMap_.width();
  const int64_t r0 = pixel.y() * slice_.rows / h, r1 = (pixel.y() + 1) * slice_.rows / h;
  const int64_t c0 = pixel.x() * slice_.cols / w, c1 = (pixel.x() + 1) * slice_.cols / w;
  if (r1 - r0 == 1 && c1 - c0 == 1) {
    std::string full;
    appendPython(full, b->values[slice_.offset(r0, c0)], kindOf(b->dtype));
    return slice_.numpyIndex(r0, c0) + " = " + QString::fromStdString(full);
  }
  return QString("rows %1–%2, columns %3–%4 (one pixel)").arg(r0).arg(r1 - 1).arg(c0).arg(c1 - 1);
}

void BufferInspector::applyFontZoom() {
  table_->setFont(CodeView::zoomedCodeFont());
  table_->verticalHeader()->setDefaultSectionSize(QFontMetrics(table_->font()).height() + 4);
  sizeColumns();
}

QFont BufferInspector::tableFont() const { return table_->font(); }

void BufferInspector::sizeColumns() {
  // Columns as wide as the widest text of the dtype: resizing to contents would format every cell.
  const BufferContents* b = buffer();
  const Kind kind = b ? kindOf(b->dtype) : Kind::Float;
  const char* widest = kind == Kind::Bool ? "False" : kind == Kind::Int ? "-2147483648" : "-1.23457e-05";
  table_->horizontalHeader()->setDefaultSectionSize(QFontMetrics(table_->font()).horizontalAdvance(widest) + 12);
}

QString BufferInspector::numpyText() const {
  const BufferContents* b = buffer();
  if (!b || b->values.empty()) return {};
  if (stats_.numel <= kNumpyMaxElements) return tsui::numpyText(*b);
  return tsui::numpyText(*b, slice_.rows * slice_.cols <= kNumpyMaxElements ? slice_ : page_);
}

QString BufferInspector::numpyScope() const {
  const BufferContents* b = buffer();
  if (!b || b->values.empty()) return {};
  if (stats_.numel <= kNumpyMaxElements) return QString("the whole buffer (%1)").arg(shapeText(b->shape));
  const bool slice = slice_.rows * slice_.cols <= kNumpyMaxElements;
  const Slice2D& s = slice ? slice_ : page_;
  return QString("%1 %2 only (%3 × %4): the buffer has %5 elements, more than %6")
      .arg(slice ? "the slice" : "the page shown,")
      .arg(s.numpyIndex())
      .arg(s.rows)
      .arg(s.cols)
      .arg(stats_.numel)
      .arg(kNumpyMaxElements);
}

void BufferInspector::copyAsNumpy() const { QApplication::clipboard()->setText(numpyText()); }

}  // namespace tsui
