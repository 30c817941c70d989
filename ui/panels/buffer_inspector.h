// The buffer inspector: the values of a kernel's buffers while the run is paused (or in a
// recording). One buffer at a time, picked in a combo box: statistics over the whole buffer, a
// table and a heat map of one 2-D slice, a histogram of the finite values, and "Copy as NumPy".
//
// Sizes: everything is computed on demand or in a pass or two over the values, so a buffer of 1e7
// elements stays responsive: the table formats only the cells it paints, a page at a time; the
// heat map is at most kHeatMapMaxSide pixels a side; the clipboard never gets more than
// kNumpyMaxElements values unless the page shown is bigger.
//
// Indices follow NumPy: 0-based, row-major (C order), a slice is written b[2, :, :].
#pragma once
#include <QColor>
#include <QImage>
#include <QString>
#include <QWidget>
#include <cstdint>
#include <vector>

class QAbstractItemModel;
class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;
class QStackedWidget;
class QTabWidget;
class QTableView;

namespace tsui {

// The values of one buffer of a kernel, read back by the runner while paused (or from a recording).
struct BufferContents {
  QString name;                 // "input 0 · uid 17", "output · uid 23"
  std::vector<int64_t> shape;   // row-major; empty = 0-d (a scalar)
  QString dtype;                // "float32", "float16", "int32", "bool"
  std::vector<double> values;   // numel values, row-major, converted to double; empty when not available
  QString unavailable;          // when values is empty: why ("not computed yet: paused before the launch")
};

// ---- Statistics ---------------------------------------------------------------------------------

// Summary of a buffer. min, max, mean and std are over the finite values only (NaN and ±Inf are
// counted, not averaged: one NaN would otherwise hide everything else); they are NaN when no value
// is finite. std is the population standard deviation, sqrt(mean((x - mean)^2)), as numpy.std
// with its default ddof=0 (PyTorch's torch.std defaults to the sample std, ddof=1: not this).
struct BufferStats {
  int64_t numel = 0;
  int64_t finite = 0;  // values that are neither NaN nor ±Inf
  int64_t nan = 0;
  int64_t posInf = 0;
  int64_t negInf = 0;
  int64_t zeros = 0;  // values == 0 (-0.0 included)
  double min = 0, max = 0, mean = 0, std = 0;
};

// One pass for the counts, min, max and mean, a second for the std (two passes: the one-pass
// E[x²] - E[x]² formula loses every digit when the mean is large next to the spread).
BufferStats computeStats(const std::vector<double>& values);

// Counts of the finite values in `bins` equal-width bins over [min, max] of the finite values, as
// numpy.histogram(x[np.isfinite(x)], bins): bin i is [edge_i, edge_i+1), the last bin also holds
// max; when min == max the range is [min - 0.5, max + 0.5], with no finite value it is [0, 1].
// *lo and *hi (may be null) receive that range. bins >= 1.
std::vector<int64_t> histogram(const std::vector<double>& values, int bins, double* lo, double* hi);

// ---- Slices -------------------------------------------------------------------------------------

// A 2-D view of an N-d row-major buffer, as the table and the heat map show it: table row r,
// column c is values[offset(r, c)]. The rows run along rowAxis, the columns along colAxis, and
// every other axis is held at index[axis]. A 1-D buffer is one column (colAxis = -1); a 0-d
// buffer is one cell (both -1). A page of a slice is again a Slice2D (window()), whose first
// row and column are firstRow/firstCol of the full slice.
struct Slice2D {
  std::vector<int64_t> shape;  // of the buffer
  int rowAxis = -1, colAxis = -1;
  std::vector<int64_t> index;  // one per axis of the buffer; the entries of rowAxis/colAxis are unused
  int64_t rows = 1, cols = 1;
  int64_t firstRow = 0, firstCol = 0;
  int64_t base = 0, rowStride = 0, colStride = 0;  // in elements

  int64_t offset(int64_t row, int64_t col) const { return base + row * rowStride + col * colStride; }
  // Rows [row0, row0 + nrows) and columns [col0, col0 + ncols) of this slice, clamped to it.
  Slice2D window(int64_t row0, int64_t nrows, int64_t col0, int64_t ncols) const;
  // The slice in NumPy's notation, for a buffer named b: "b[:, 3, :]", "b[1000:2000, 3, :]" for a
  // page, with ".T" when the rows axis comes after the columns axis (the table then shows the
  // transpose of what NumPy gives); "b" when the slice is the whole buffer.
  QString numpyIndex() const;
  // NumPy's index of one cell: "b[1000, 3, 7]".
  QString numpyIndex(int64_t row, int64_t col) const;
};

// The slice of a buffer of this shape along rowAxis and colAxis (-1: none; rowAxis != colAxis
// unless both are -1), the other axes held at index (missing entries are 0; each is clamped to
// its axis).
Slice2D makeSlice(const std::vector<int64_t>& shape, int rowAxis, int colAxis, std::vector<int64_t> index = {});
// The slice shown first: the last two axes as rows and columns, every other axis at 0.
Slice2D defaultSlice(const std::vector<int64_t>& shape);

// ---- Heat map and NumPy text --------------------------------------------------------------------

constexpr int kHeatMapMaxSide = 1024;
constexpr int64_t kNumpyMaxElements = 100000;

// One pixel per cell of the slice (row = y, column = x), coloured by a viridis-like map from lo
// (dark blue) to hi (yellow); NaN is magenta, +Inf white, -Inf black. A slice with more than
// maxSide rows or columns is downsampled to at most maxSide a side: each pixel then stands for a
// block of cells and shows NaN if any cell in it is NaN, else ±Inf if any is infinite, else the
// mean of the block — a NaN is never lost by downsampling. QImage::Format_RGB32.
QImage heatMapImage(const BufferContents& buffer, const Slice2D& slice, double lo, double hi,
                    int maxSide = kHeatMapMaxSide);
// The colour of v in the heat map (used by the legend too).
QColor heatMapColor(double v, double lo, double hi);

// A Python expression that rebuilds the buffer with NumPy (with `import numpy as np`):
//   np.array([0.5, np.nan, -np.inf, 1, 2, 3], dtype=np.float32).reshape(2, 3)
// 1-D buffers have no reshape, a 0-d buffer is np.array(2.5, dtype=np.float32). Floats are
// written in the shortest form that reads back to the same value in the buffer's dtype; bools as
// True/False. int32 -> np.int32, float16 -> np.float16, bool -> bool, unknown dtypes -> np.float64.
// Empty when values is empty.
QString numpyText(const BufferContents& buffer);
// The same for a slice (or a page of one) as the table shows it: shape (rows, cols), (rows,) for
// the slice of a 1-D buffer, () for a 0-d one.
QString numpyText(const BufferContents& buffer, const Slice2D& slice);

// ---- The widget ---------------------------------------------------------------------------------

class HeatMapView;
class HistogramView;
class SliceTableModel;

class BufferInspector : public QWidget {
  Q_OBJECT
 public:
  static constexpr int64_t kPageRows = 1000;  // the table shows at most this many rows ...
  static constexpr int64_t kPageCols = 1000;  // ... and columns at a time
  static constexpr int kHistogramBins = 32;

  explicit BufferInspector(QWidget* parent = nullptr);
  ~BufferInspector() override;

  // Shows these buffers (pass them with std::move: the values are not copied again). The buffer
  // shown stays the same index when the count is unchanged (stepping from kernel to kernel), and
  // keeps its slice and page when its shape is unchanged too; otherwise the first buffer is shown.
  void setBuffers(std::vector<BufferContents> buffers);
  void clear();

  // The buffer shown: 0 <= i < buffers().size().
  void showBuffer(int i);
  int currentBuffer() const { return current_; }
  const std::vector<BufferContents>& buffers() const { return buffers_; }

  // The slice shown; what the combo boxes and spin boxes set. Indices out of range are clamped,
  // and choosing the other one's axis swaps rows and columns. A new slice starts at page 0.
  void setSliceAxes(int rowAxis, int colAxis);
  void setSliceIndex(int axis, int64_t index);
  // Page p of the rows holds rows [p * kPageRows, (p + 1) * kPageRows) of the slice; from 0, clamped.
  void setPage(int rowPage, int colPage = 0);
  const Slice2D& slice() const { return slice_; }  // the whole 2-D slice
  const Slice2D& page() const { return page_; }    // the part of it in the table

  // What the panel shows, for tests and for other panels.
  const BufferStats& stats() const { return stats_; }
  const std::vector<int64_t>& histogramCounts() const;
  const QAbstractItemModel* tableModel() const;
  QImage heatMap() const { return heatMap_; }
  QString pageText() const;  // "rows 1000–1999 of 1048576"
  // What "Copy as NumPy" puts on the clipboard: the whole buffer up to kNumpyMaxElements, else the
  // slice, else the page shown; numpyScope() says which ("the whole buffer", "slice b[3, :, :]", ...).
  QString numpyText() const;
  QString numpyScope() const;
  void copyAsNumpy() const;
  // The font zoom (View ▸ Zoom In / Out, core/theme.h fontScale()): the table's monospace font, its
  // rows and columns follow it; the rest of the panel follows the application font.
  void applyFontZoom();
  QFont tableFont() const;

 private:
  void sizeColumns();     // as wide as the widest value of the dtype, in the table's font
  void showCurrent();     // a new buffer: stats, histogram, axis controls, then showSlice()
  void rebuildAxisControls();
  void showSlice();       // a new slice or page: table, heat map, page label
  void syncControls();    // combo boxes and spin boxes <- slice_
  QString heatMapTip(QPoint pixel) const;
  const BufferContents* buffer() const;

  std::vector<BufferContents> buffers_;
  int current_ = -1;
  Slice2D slice_, page_;
  int rowPage_ = 0, colPage_ = 0;
  BufferStats stats_;
  QImage heatMap_;
  bool syncing_ = false;  // set while syncControls() writes the controls, so their signals are ignored

  QComboBox* bufferCombo_;
  QLabel* shapeLabel_;
  QPushButton* copyButton_;
  QLabel* copyNote_;  // what the last copy held
  QLabel* statsLabel_;
  QWidget* sliceBar_;
  QComboBox* rowAxisCombo_;
  QComboBox* colAxisCombo_;
  QWidget* indexBox_;
  std::vector<QSpinBox*> indexSpins_;  // one per axis; hidden for the rows and columns axes
  QWidget* pageBar_;
  QSpinBox* rowPageSpin_;
  QSpinBox* colPageSpin_;
  QLabel* pageLabel_;
  QStackedWidget* stack_;  // the tabs, or the "unavailable" label
  QTabWidget* tabs_;
  QTableView* table_;
  SliceTableModel* model_;
  HeatMapView* heatView_;
  QLabel* heatNote_;
  HistogramView* histView_;
  QLabel* unavailableLabel_;
};

}  // namespace tsui
