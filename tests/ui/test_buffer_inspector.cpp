// QtTest of the buffer inspector, offscreen: the statistics, the histogram and the slices against
// numbers worked out here by hand, the heat map's colours, and "Copy as NumPy" read back by NumPy
// itself (/usr/bin/python3 with numpy; those tests are skipped where it is missing).
//
// BUFFER_INSPECTOR_SHOTS=1 also saves each tab as /tmp/buffer_inspector_<tab>.png, to look at.
#include <QAbstractItemModel>
#include <QComboBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QProcess>
#include <QSpinBox>
#include <QTabWidget>
#include <QtTest>
#include <cmath>
#include <limits>

#include "panels/buffer_inspector.h"

using tsui::BufferContents;
using tsui::BufferInspector;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const QString kPython = QStringLiteral("/usr/bin/python3");

BufferContents buffer(std::vector<int64_t> shape, std::vector<double> values, QString dtype = "float32") {
  BufferContents b;
  b.name = "output · uid 1";
  b.shape = std::move(shape);
  b.dtype = std::move(dtype);
  b.values = std::move(values);
  return b;
}

// 0, 1, 2, ... n-1: every cell says where it comes from.
std::vector<double> iota(int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
  return v;
}

QString cell(const QAbstractItemModel* m, int row, int col, int role = Qt::DisplayRole) {
  return m->data(m->index(row, col), role).toString();
}
QString rowHeader(const QAbstractItemModel* m, int row) { return m->headerData(row, Qt::Vertical).toString(); }

bool haveNumpy() { return QProcess::execute(kPython, {"-c", "import numpy"}) == 0; }

// Runs a Python script with `input` on its stdin and returns its stdout, one entry a line.
QStringList python(const QString& script, const QByteArray& input) {
  QProcess p;
  p.start(kPython, {"-c", script});
  if (!p.waitForStarted(5000)) return {};
  p.write(input);
  p.closeWriteChannel();
  p.waitForFinished(15000);
  const QByteArray err = p.readAllStandardError();
  if (!err.isEmpty()) qWarning().noquote() << err;
  return QString::fromUtf8(p.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts);
}

bool sameValue(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

class TestBufferInspector : public QObject {
  Q_OBJECT

 private slots:
  void statsCountAndSkipNonFinite() {
    const std::vector<double> v = {1, -2, 0, 0, kNaN, kInf, -kInf, 4.5, kNaN, -0.0};
    const tsui::BufferStats s = tsui::computeStats(v);
    QCOMPARE(s.numel, 10);
    QCOMPARE(s.nan, 2);
    QCOMPARE(s.posInf, 1);
    QCOMPARE(s.negInf, 1);
    QCOMPARE(s.zeros, 3);  // -0.0 == 0
    QCOMPARE(s.finite, 6);
    // the finite values 1, -2, 0, 0, 4.5, -0: sum 3.5, mean 3.5/6; population variance
    // = (sum of squares 1 + 4 + 20.25 = 25.25) / 6 - mean^2
    const double mean = 3.5 / 6;
    QCOMPARE(s.min, -2.0);
    QCOMPARE(s.max, 4.5);
    QVERIFY(std::abs(s.mean - mean) < 1e-15);
    QVERIFY(std::abs(s.std - std::sqrt(25.25 / 6 - mean * mean)) < 1e-14);
  }

  void statsNeedTwoPassesAndFiniteValues() {
    // 1e9 + {0, 1, 2}: std sqrt(2/3); E[x²] - E[x]² in doubles would give 0 or garbage here
    const tsui::BufferStats s = tsui::computeStats({1e9, 1e9 + 1, 1e9 + 2});
    QVERIFY(std::abs(s.std - std::sqrt(2.0 / 3)) < 1e-9);
    QCOMPARE(s.mean, 1e9 + 1);
    const tsui::BufferStats none = tsui::computeStats({kNaN, kInf});
    QCOMPARE(none.finite, 0);
    QVERIFY(std::isnan(none.min) && std::isnan(none.max) && std::isnan(none.mean) && std::isnan(none.std));
  }

  void histogramCountsByHand() {
    // 0..9 in 5 bins over [0, 9]: edges 0, 1.8, 3.6, 5.4, 7.2, 9; NaN and Inf are not counted;
    // 9 (the max) goes into the last bin
    std::vector<double> v = iota(10);
    v.push_back(kNaN);
    v.push_back(kInf);
    double lo = -1, hi = -1;
    QCOMPARE(tsui::histogram(v, 5, &lo, &hi), (std::vector<int64_t>{2, 2, 2, 2, 2}));
    QCOMPARE(lo, 0.0);
    QCOMPARE(hi, 9.0);
    // one value repeated: the range is [3 - 0.5, 3 + 0.5], 3 is on the edge between bins 1 and 2
    QCOMPARE(tsui::histogram({3, 3, 3}, 4, &lo, &hi), (std::vector<int64_t>{0, 0, 3, 0}));
    QCOMPARE(lo, 2.5);
    QCOMPARE(hi, 3.5);
    // nothing finite: [0, 1], all bins empty
    QCOMPARE(tsui::histogram({kNaN}, 2, &lo, &hi), (std::vector<int64_t>{0, 0}));
    QCOMPARE(hi, 1.0);
  }

  void histogramMatchesNumpy() {
    if (!haveNumpy()) QSKIP("no /usr/bin/python3 with numpy");
    // multiples of 0.1 put many values right on bin edges, where rounding decides
    std::vector<double> v;
    for (int i = 0; i < 1000; ++i) v.push_back(i * 0.1 - 17.3);
    for (int i = 0; i < 200; ++i) v.push_back(std::sin(i) * 40);
    v.push_back(kNaN);
    QByteArray input;
    for (double x : v) input += QByteArray::number(x, 'g', 17) + "\n";
    const QStringList out = python(
        "import sys, numpy as np\n"
        "x = np.array([float(l) for l in sys.stdin])\n"
        "counts, edges = np.histogram(x[np.isfinite(x)], 32)\n"
        "print(' '.join(map(str, counts)))\n"
        "print(repr(float(edges[0])), repr(float(edges[-1])))\n",
        input);
    QCOMPARE(out.size(), 2);
    double lo = 0, hi = 0;
    const std::vector<int64_t> counts = tsui::histogram(v, 32, &lo, &hi);
    QStringList ours;
    for (int64_t c : counts) ours << QString::number(c);
    QCOMPARE(ours.join(' '), out[0]);
    const QStringList range = out[1].split(' ');
    QCOMPARE(lo, std::strtod(range[0].toUtf8().constData(), nullptr));
    QCOMPARE(hi, std::strtod(range[1].toUtf8().constData(), nullptr));
  }

  void slicesA3dBufferByAnyTwoAxes() {
    BufferInspector w;
    w.setBuffers({buffer({3, 4, 5}, iota(60))});  // element [i, j, k] = 20 i + 5 j + k
    const QAbstractItemModel* m = w.tableModel();
    // the default: the last two axes, axis 0 at 0
    QCOMPARE(w.slice().rowAxis, 1);
    QCOMPARE(w.slice().colAxis, 2);
    QCOMPARE(m->rowCount(), 4);
    QCOMPARE(m->columnCount(), 5);
    QCOMPARE(cell(m, 3, 4), "19");

    // rows along axis 0, columns along axis 2, axis 1 held at 2: cell (i, k) = b[i, 2, k]; set
    // through the combo box and the spin box, as a user would
    auto* rowsAxis = w.findChild<QComboBox*>("rowsAxis");
    QVERIFY(rowsAxis);
    rowsAxis->setCurrentIndex(rowsAxis->findData(0));
    QCOMPARE(w.slice().rowAxis, 0);
    QCOMPARE(w.slice().colAxis, 2);
    auto* index1 = w.findChild<QSpinBox*>("index1");
    QVERIFY(index1 && !index1->isHidden() && w.findChild<QSpinBox*>("index0")->isHidden());
    index1->setValue(2);
    QCOMPARE(w.slice().numpyIndex(), "b[:, 2, :]");
    QCOMPARE(m->rowCount(), 3);
    QCOMPARE(m->columnCount(), 5);
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 5; ++k) QCOMPARE(cell(m, i, k), QString::number(20 * i + 5 * 2 + k));
    QCOMPARE(cell(m, 1, 3, Qt::ToolTipRole), "b[1, 2, 3] = 33");

    // picking the columns' axis for the rows swaps them: the transpose
    w.setSliceAxes(2, 2);
    QCOMPARE(w.slice().rowAxis, 2);
    QCOMPARE(w.slice().colAxis, 0);
    QCOMPARE(w.slice().numpyIndex(), "b[:, 2, :].T");
    QCOMPARE(m->rowCount(), 5);
    QCOMPARE(cell(m, 4, 1), QString::number(20 * 1 + 10 + 4));

    // an index out of range is clamped to the axis
    w.setSliceIndex(1, 99);
    QCOMPARE(w.slice().index[1], 3);

    // 1-D: one column; 0-d: one cell
    w.setBuffers({buffer({4}, {5, 6, 7, 8}, "int32")});
    QCOMPARE(m->rowCount(), 4);
    QCOMPARE(m->columnCount(), 1);
    QCOMPARE(cell(m, 2, 0), "7");
    w.setBuffers({buffer({}, {2.5})});
    QCOMPARE(m->rowCount(), 1);
    QCOMPARE(m->columnCount(), 1);
    QCOMPARE(cell(m, 0, 0), "2.5");
  }

  void cellsFormatByDtypeAndFlagNonFinite() {
    BufferInspector w;
    w.setBuffers({buffer({2, 2}, {1.0 / 3, kNaN, -kInf, 1e-7})});
    const QAbstractItemModel* m = w.tableModel();
    QCOMPARE(cell(m, 0, 0), "0.333333");  // %.6g
    QCOMPARE(cell(m, 0, 1), "nan");
    QCOMPARE(cell(m, 1, 0), "-inf");
    QCOMPARE(cell(m, 1, 1), "1e-07");
    const QColor red = m->data(m->index(0, 1), Qt::BackgroundRole).value<QColor>();
    QVERIFY(red.isValid() && red.red() > 200 && red.green() < 230 && red.blue() < 230);
    QVERIFY(!m->data(m->index(0, 0), Qt::BackgroundRole).isValid());
    QVERIFY(m->data(m->index(1, 0), Qt::BackgroundRole).isValid());

    w.setBuffers({buffer({3}, {1, 0, 1}, "bool")});
    QCOMPARE(cell(m, 0, 0), "True");
    QCOMPARE(cell(m, 1, 0), "False");
  }

  void pagesOfALongSlice() {
    BufferInspector w;
    w.setBuffers({buffer({2500, 3}, iota(7500))});
    const QAbstractItemModel* m = w.tableModel();
    QCOMPARE(m->rowCount(), 1000);
    QCOMPARE(w.pageText(), "rows 0–999 of 2500");
    w.setPage(1);
    QCOMPARE(m->rowCount(), 1000);
    QCOMPARE(rowHeader(m, 0), "1000");
    QCOMPARE(rowHeader(m, 999), "1999");
    QCOMPARE(cell(m, 0, 2), QString::number(1000 * 3 + 2));
    QCOMPARE(w.pageText(), "rows 1000–1999 of 2500");
    QCOMPARE(w.page().numpyIndex(), "b[1000:2000, :]");
    w.setPage(2);
    QCOMPARE(m->rowCount(), 500);
    QCOMPARE(rowHeader(m, 499), "2499");
    QCOMPARE(w.pageText(), "rows 2000–2499 of 2500");
    w.setPage(7);  // past the end: the last page
    QCOMPARE(rowHeader(m, 0), "2000");

    // wide slices page their columns too
    w.setBuffers({buffer({2, 1500}, iota(3000))});
    w.setPage(0, 1);
    QCOMPARE(m->columnCount(), 500);
    QCOMPARE(m->headerData(0, Qt::Horizontal).toString(), "1000");
    QCOMPARE(cell(m, 1, 0), QString::number(1500 + 1000));
    QCOMPARE(w.pageText(), "columns 1000–1499 of 1500");
  }

  void heatMapColours() {
    // lo = 0 is viridis' dark blue, hi = 1 its yellow; NaN magenta, +Inf white, -Inf black
    const BufferContents b = buffer({2, 3}, {0, kNaN, 1, kInf, -kInf, 0.5});
    const QImage img = tsui::heatMapImage(b, tsui::defaultSlice(b.shape), 0, 1);
    QCOMPARE(img.size(), QSize(3, 2));  // columns x rows
    QCOMPARE(img.pixelColor(0, 0), QColor(68, 1, 84));
    QCOMPARE(img.pixelColor(1, 0), QColor(255, 0, 255));
    QCOMPARE(img.pixelColor(2, 0), QColor(253, 231, 37));
    QCOMPARE(img.pixelColor(0, 1), QColor(255, 255, 255));
    QCOMPARE(img.pixelColor(1, 1), QColor(0, 0, 0));

    // the widget's image is the current slice, in the whole buffer's range
    BufferInspector w;
    w.setBuffers({buffer({2, 2, 2}, {0, 1, 2, 3, 4, 5, kNaN, 7})});
    w.setSliceIndex(0, 1);
    QCOMPARE(w.heatMap().size(), QSize(2, 2));
    QCOMPARE(w.heatMap().pixelColor(0, 1), QColor(255, 0, 255));
    QCOMPARE(w.heatMap().pixelColor(1, 1), QColor(253, 231, 37));  // 7, the max
  }

  void heatMapDownsamplingKeepsANaN() {
    // 2048 x 2048 -> 1024 x 1024: pixel (x, y) is cells [2y, 2y + 2) x [2x, 2x + 2)
    std::vector<double> v(2048 * 2048, 1.0);
    v[1001 * 2048 + 1500] = kNaN;
    const BufferContents b = buffer({2048, 2048}, std::move(v));
    const QImage img = tsui::heatMapImage(b, tsui::defaultSlice(b.shape), 0, 2);
    QCOMPARE(img.size(), QSize(1024, 1024));
    QCOMPARE(img.pixelColor(750, 500), QColor(255, 0, 255));
    int magenta = 0;
    for (int y = 0; y < img.height(); ++y)
      for (int x = 0; x < img.width(); ++x) magenta += img.pixel(x, y) == qRgb(255, 0, 255);
    QCOMPARE(magenta, 1);
  }

  void numpyTextRoundTripsThroughNumpy() {
    if (!haveNumpy()) QSKIP("no /usr/bin/python3 with numpy");
    const std::vector<BufferContents> cases = {
        buffer({2, 3}, {0.1, kNaN, -kInf, kInf, 1e-8, 3.4028234663852886e38}),
        buffer({4}, {-1, 0, 2147483647, -2147483648}, "int32"),
        buffer({2, 2}, {1, 0, 0, 1}, "bool"),
        buffer({}, {2.5}),
        buffer({3}, {0.5, -2.25, 6.103515625e-05}, "float16"),
        buffer({2, 1, 2}, {1.0 / 3, 2.0 / 3, -0.0, 1e300}, "float64"),
    };
    QCOMPARE(tsui::numpyText(cases[0]),
             "np.array([0.1, np.nan, -np.inf, np.inf, 1e-08, 3.4028235e+38], dtype=np.float32).reshape(2, 3)");
    QCOMPARE(tsui::numpyText(cases[3]), "np.array(2.5, dtype=np.float32)");

    // the slice of a big buffer: b[1, :, :] of a 3 x 200 x 300 buffer (180,000 elements)
    BufferInspector w;
    w.setBuffers({buffer({3, 200, 300}, iota(180000))});
    w.setSliceIndex(0, 1);
    QVERIFY(w.numpyScope().contains("the slice b[1, :, :] only"));

    QByteArray input;
    for (const BufferContents& b : cases) input += tsui::numpyText(b).toUtf8() + "\n";
    input += w.numpyText().toUtf8() + "\n";
    // each line: dtype | shape | the values as Python floats
    const QStringList out = python(
        "import sys, numpy as np\n"
        "for line in sys.stdin:\n"
        "    a = eval(line)\n"
        "    values = ','.join(repr(float(x)) for x in a.reshape(-1))\n"
        "    print(f\"{a.dtype}|{','.join(map(str, a.shape))}|{values}\")\n",
        input);
    QCOMPARE(out.size(), int(cases.size()) + 1);

    const QStringList dtypes = {"float32", "int32", "bool", "float32", "float16", "float64", "float32"};
    const QStringList shapes = {"2,3", "4", "2,2", "", "3", "2,1,2", "200,300"};
    for (int i = 0; i < out.size(); ++i) {
      const QStringList parts = out[i].split('|');
      QCOMPARE(parts.size(), 3);
      QCOMPARE(parts[0], dtypes[i]);
      QCOMPARE(parts[1], shapes[i]);
      const QStringList got = parts[2].split(',');
      std::vector<double> want;
      if (i < int(cases.size())) {
        want = cases[i].values;
        if (dtypes[i] == "float32")
          for (double& x : want) x = static_cast<float>(x);  // what the buffer held
      } else {
        for (int k = 0; k < 200 * 300; ++k) want.push_back(60000 + k);
      }
      QCOMPARE(got.size(), int(want.size()));
      for (int k = 0; k < got.size(); ++k) {
        const double x = std::strtod(got[k].toUtf8().constData(), nullptr);
        if (!sameValue(x, want[k]))
          QFAIL(qPrintable(QString("line %1 value %2: %3 != %4").arg(i).arg(k).arg(x).arg(want[k])));
      }
    }
  }

  void hugeSliceCopiesThePageShown() {
    BufferInspector w;
    w.setBuffers({buffer({1, 2000, 2000}, std::vector<double>(4000000, 1.0))});
    w.setPage(1, 0);
    QVERIFY(w.numpyScope().startsWith("the page shown, b[0, 1000:2000, 0:1000] only"));
    QVERIFY(w.numpyText().endsWith(".reshape(1000, 1000)"));
  }

  void unavailableValuesShowWhy() {
    BufferInspector w;
    BufferContents b = buffer({4, 4}, {});
    b.unavailable = "not computed yet: paused before the launch";
    w.setBuffers({b});
    w.show();
    bool shown = false;
    for (QLabel* l : w.findChildren<QLabel*>()) shown |= l->isVisible() && l->text() == b.unavailable;
    QVERIFY(shown);
    QCOMPARE(w.tableModel()->rowCount(), 0);
    QVERIFY(w.heatMap().isNull());
    QVERIFY(w.numpyText().isEmpty());
  }

  void keepsTheBufferAndSliceWhenSteppingKernels() {
    BufferInspector w;
    w.setBuffers({buffer({2}, {1, 2}), buffer({3, 4, 5}, iota(60)), buffer({1}, {0})});
    w.showBuffer(1);
    w.setSliceIndex(0, 2);
    // the next kernel: three buffers again, the same shape at index 1
    w.setBuffers({buffer({2}, {1, 2}), buffer({3, 4, 5}, iota(60)), buffer({1}, {0})});
    QCOMPARE(w.currentBuffer(), 1);
    QCOMPARE(w.slice().index[0], 2);
    QCOMPARE(cell(w.tableModel(), 0, 0), "40");
    // a different count starts over at the first buffer
    w.setBuffers({buffer({2}, {1, 2}), buffer({3, 4, 5}, iota(60))});
    QCOMPARE(w.currentBuffer(), 0);
    w.clear();
    QCOMPARE(w.currentBuffer(), -1);
    QCOMPARE(w.tableModel()->rowCount(), 0);
  }

  void tenMillionElementsStayResponsive() {
    std::vector<double> v(10000000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.001 * static_cast<double>(i));
    v[1234567] = kNaN;
    BufferInspector w;
    w.resize(900, 600);
    w.show();
    QElapsedTimer timer;
    timer.start();
    w.setBuffers({buffer({10000000}, std::move(v))});
    w.setPage(5000);
    QCoreApplication::processEvents();
    const qint64 ms = timer.elapsed();
    qInfo() << "1e7 elements: stats, histogram, heat map, a page:" << ms << "ms";
    QVERIFY2(ms < 5000, qPrintable(QString("%1 ms").arg(ms)));
    QCOMPARE(w.stats().nan, 1);
    QCOMPARE(w.tableModel()->rowCount(), 1000);
    QCOMPARE(w.pageText(), "rows 5000000–5000999 of 10000000");
    QVERIFY(w.heatMap().height() <= tsui::kHeatMapMaxSide);
    QVERIFY(w.numpyScope().contains("page shown"));
  }

  void screenshots() {
    if (qEnvironmentVariableIsEmpty("BUFFER_INSPECTOR_SHOTS")) QSKIP("set BUFFER_INSPECTOR_SHOTS=1 to save PNGs");
    std::vector<double> v(4 * 48 * 64);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.1 * (i % 64)) * std::cos(0.13 * (i / 64 % 48)) * 3;
    v[5 * 64 + 7] = kNaN;
    v[20 * 64 + 30] = kInf;
    v[0] = 0;
    BufferInspector w;
    w.resize(900, 560);
    BufferContents later = buffer({8}, {});
    later.name = "input 1 · uid 9";
    later.unavailable = "not computed yet: paused before the launch";
    std::vector<double> ints(2500);
    for (int i = 0; i < 2500; ++i) ints[i] = i * 7 % 1000;
    w.setBuffers({buffer({4, 48, 64}, v), later, buffer({2500}, ints, "int32")});
    w.show();
    auto* tabs = w.findChild<QTabWidget*>();
    const char* names[] = {"table", "heatmap", "histogram"};
    for (int i = 0; i < 3; ++i) {
      tabs->setCurrentIndex(i);
      QCoreApplication::processEvents();
      QVERIFY(w.grab().save(QString("/tmp/buffer_inspector_%1.png").arg(names[i])));
    }
    w.showBuffer(1);
    QCoreApplication::processEvents();
    QVERIFY(w.grab().save("/tmp/buffer_inspector_unavailable.png"));
    w.showBuffer(2);
    w.setPage(1);
    tabs->setCurrentIndex(0);
    QCoreApplication::processEvents();
    QVERIFY(w.grab().save("/tmp/buffer_inspector_paged.png"));
    tabs->setCurrentIndex(1);
    QCoreApplication::processEvents();
    QVERIFY(w.grab().save("/tmp/buffer_inspector_paged_heatmap.png"));
  }
};

QTEST_MAIN(TestBufferInspector)
#include "test_buffer_inspector.moc"
