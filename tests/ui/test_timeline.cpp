// QtTest of the Timeline dock (issue 14, items 5 and 6), offscreen:
//  - a real run of quickstart.py on C: the timeline shows every launch of the run in the device's lane,
//    hovering a launch describes it (name, duration, FLOPs, bytes, GFLOP/s, GB/s), clicking one makes its
//    kernel the current one in every panel, and the roofline has a dot per kernel;
//  - File ▸ Export Trace writes Chrome trace JSON (checked against the format's rules) equal to what
//    `tensorscope-cli export --trace` writes from the run's recording;
//  - Measure Peak runs `tensorscope-cli calibrate` and draws the roof it cached;
//  - Autotune from a kernel's context menu (kernel list, graph) and Run ▸ Autotune Whole Run: the script runs
//    again with the BEAM search, and its trials fill the autotune lane, the event browser and the properties;
//  - a synthetic run of 100,000 launches: every view while zooming (the wheel) and panning (a drag)
//    repaints in at most 50 ms (the fastest of three repaints: the machine is shared).
//
// TS_GUI_SHOTS=1 saves the dock after the click and the 100,000-launch timeline to the temp dir.
#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMenu>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QWheelEvent>
#include <QtTest>
#include <algorithm>
#include <set>

#include "core/run_model.h"
#include "core/timeline_model.h"
#include "main_window.h"
#include "panels/event_browser.h"
#include "panels/graph_panel.h"
#include "panels/kernel_list_panel.h"
#include "panels/properties_panel.h"
#include "panels/roofline_plot.h"
#include "panels/timeline_panel.h"
#include "panels/timeline_view.h"

namespace {

constexpr int kRunTimeoutMs = 120000;
const QString kQuickstart = QStringLiteral(TS_SOURCE_DIR "/samples/quickstart.py");

int laneNamed(const tsui::TimelineModel& t, const QString& name) {
  for (size_t i = 0; i < t.lanes().size(); ++i)
    if (t.lanes()[i].name == name) return static_cast<int>(i);
  return -1;
}

QJsonObject readJson(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QJsonDocument::fromJson(f.readAll()).object();
}

// The Trace Event Format's rules (as tests/e2e/test_trace.py checks them); returns {lane: events}.
QMap<QString, QJsonArray> validateChromeTrace(const QJsonObject& trace, QString* problem) {
  QMap<QString, QJsonArray> lanes;
  QMap<int, QString> names;
  if (!trace.value("traceEvents").isArray()) {
    *problem = "no traceEvents array";
    return {};
  }
  for (const QJsonValue& v : trace.value("traceEvents").toArray()) {
    const QJsonObject e = v.toObject();
    const QString ph = e.value("ph").toString();
    if (!e.value("name").isString() || !(ph == "X" || ph == "i" || ph == "M") || !e.value("pid").isDouble()) {
      *problem = "bad event " + QJsonDocument(e).toJson(QJsonDocument::Compact);
      return {};
    }
    if (ph == "M") {
      if (e.value("name").toString() == "thread_name") names[e.value("tid").toInt()] = e.value("args")["name"].toString();
      continue;
    }
    if (!e.value("ts").isDouble() || e.value("ts").toDouble() < 0 || (ph == "X" && !(e.value("dur").toDouble() > 0)) ||
        !names.contains(e.value("tid").toInt())) {
      *problem = "bad span " + QJsonDocument(e).toJson(QJsonDocument::Compact);
      return {};
    }
    lanes[names[e.value("tid").toInt()]].append(e);
  }
  for (auto it = lanes.begin(); it != lanes.end(); ++it)
    for (qsizetype i = 1; i < it->size(); ++i) {
      const QJsonObject a = (*it)[i - 1].toObject(), b = (*it)[i].toObject();
      if (b["ts"].toDouble() < a["ts"].toDouble() + a["dur"].toDouble() - 1e-3) {
        *problem = "spans of lane " + it.key() + " overlap";
        return {};
      }
    }
  return lanes;
}

ts::ScheduleEvent syntheticSchedule(int id, int firstKernel, int kernels) {
  ts::ScheduleEvent s;
  s.schedule_id = id;
  for (int k = 0; k < kernels; ++k) {
    ts::KernelInfo info;
    info.id = firstKernel + k;
    info.name = k % 3 == 0 ? "r_64_64_64" : k % 3 == 1 ? "E_4096" : "r_128_512_784";
    info.device = "C";
    info.flops = k % 3 == 0 ? 2.0 * 64 * 64 * 64 : k % 3 == 1 ? 4096 : 2.0 * 128 * 512 * 784;
    info.bytes = k % 3 == 0 ? 3 * 4 * 4096 : k % 3 == 1 ? 3 * 4 * 4096 : 4.0 * (128 * 784 + 784 * 512 + 128 * 512);
    s.kernels.push_back(info);
  }
  return s;
}

}  // namespace

class TimelineTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);  // settings of the test, not the user's
  }

  void runShowsLaunchesAndAClickSelectsTheKernel() {
    tsui::MainWindow window;
    window.resize(1600, 1000);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    auto* dock = window.findChild<QDockWidget*>("timeline");
    QVERIFY(dock);
    dock->show();
    dock->raise();
    QVERIFY(window.openScript(kQuickstart));
    window.setDevice("C");
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY(window.lastRunOk());

    tsui::TimelinePanel* panel = window.timeline();
    const tsui::TimelineModel& t = panel->timeline();
    const tsui::RunModel* model = window.findChild<tsui::RunModel*>();
    QVERIFY(model);
    int launches = 0;
    for (const auto& e : model->events()) launches += e.kind == tsui::RunModel::EventRef::Launch;
    QVERIFY(launches > 0);
    QCOMPARE(t.launchCount(), launches);
    const int lane = laneNamed(t, "C launches");
    QVERIFY(lane >= 0);
    QCOMPARE(static_cast<int>(t.lanes()[lane].spans.size()), launches);
    QVERIFY(laneNamed(t, "script") >= 0 && laneNamed(t, "schedules") >= 0 && laneNamed(t, "compiles") >= 0 &&
            laneNamed(t, "autotune") >= 0);
    QVERIFY(!t.lanes()[laneNamed(t, "schedules")].spans.empty());
    QVERIFY(!t.lanes()[laneNamed(t, "script")].spans.empty());  // the runner streams node batches

    // The first launch: zoom so that it is a third of the view, then click its middle.
    const ts::TraceSpan& first = t.spans()[t.lanes()[lane].spans.front()];
    QVERIFY(first.kernel_id >= 0 && first.duration_us > 0);
    QVERIFY2(first.flops >= 0 && first.bytes > 0, "the engine counted the kernel's work");
    tsui::TimelineView* view = panel->view();
    QVERIFY(view->width() > 300);
    view->setView(first.start_us - first.duration_us, 3 * first.duration_us);
    const QPoint at(static_cast<int>(view->xOf(first.start_us + first.duration_us / 2)),
                    static_cast<int>(view->laneCentreY(lane)));
    QCOMPARE(view->spanAt(at), t.lanes()[lane].spans.front());
    const QString tip = t.describe(view->spanAt(at));
    QVERIFY2(tip.contains(QString::fromStdString(first.name)) && tip.contains("GFLOP/s") && tip.contains("GB/s") &&
                 tip.contains("FLOP"),
             qPrintable(tip));
    QVERIFY(window.selectedKernel() != first.kernel_id);  // the run ends with its last kernel selected
    QTest::mouseClick(view, Qt::LeftButton, {}, at);
    QCOMPARE(window.selectedKernel(), first.kernel_id);
    QCOMPARE(window.currentEvent(), model->eventOfLaunch(first.kernel_id));
    QCOMPARE(view->currentKernel(), first.kernel_id);
    // ... and selecting a kernel elsewhere moves the timeline's highlight
    const int last = model->kernelIds().back();
    window.setCurrentEvent(model->eventOfLaunch(last));
    QCOMPARE(view->currentKernel(), last);
    QVERIFY(!panel->roofline()->dots().empty());
    if (qEnvironmentVariableIsSet("TS_GUI_SHOTS")) {
      view->fitAll();
      dock->grab().save(QDir::temp().filePath("timeline_dock.png"));
    }

    // File ▸ Export Trace: valid Chrome trace JSON, equal to `tensorscope-cli export --trace` of the recording.
    QTemporaryDir dir;
    const QString gui = dir.filePath("gui.json"), rec = dir.filePath("run.tsrec"), cli = dir.filePath("cli.json");
    QString error;
    QVERIFY2(window.exportTrace(gui, &error), qPrintable(error));
    QString problem;
    const QJsonObject trace = readJson(gui);
    const QMap<QString, QJsonArray> lanes = validateChromeTrace(trace, &problem);
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
    QCOMPARE(lanes.value("C launches").size(), launches);
    for (const QJsonValue& v : lanes.value("C launches")) QVERIFY(v.toObject()["args"].toObject().contains("GFLOP/s"));
    QVERIFY(window.saveRecording(rec, &error));
    QProcess p;
    p.start(QCoreApplication::applicationDirPath() + "/tensorscope-cli", {"export", rec, "--trace", cli});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 0);
    QCOMPARE(trace, readJson(cli));
  }

  // Autotune (issue 14): the kernel list's context menu re-runs the script in the runner with the BEAM search on
  // that kernel; its trials stream into the timeline's autotune lane, the event browser and the properties
  // panel. Run ▸ Autotune Whole Run then searches every kernel, the one searched before coming from the cache;
  // the graph's kernel box has the same Autotune.
  void autotuneFromTheKernelMenuShowsTheTrialsInTheAutotuneLane() {
    QTemporaryDir dir;
    qputenv("TENSORSCOPE_CACHE", dir.filePath("cache").toUtf8());  // the runner's: a cache of the test's own
    const QString script = dir.filePath("tiny.py");
    QFile f(script);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("import numpy as np\nfrom tensorscope import Tensor\n"
            "a = Tensor(np.arange(48 * 40, dtype=np.float32).reshape(48, 40) / 100)\n"
            "b = Tensor(np.ones((40, 32), dtype=np.float32))\n"
            "print((a @ b).relu().numpy().sum(), (a * 2).exp().sum(axis=1).numpy()[0])\n");
    f.close();
    tsui::MainWindow window;
    window.resize(1600, 1000);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QVERIFY(window.openScript(script));
    window.setDevice("C");
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY(window.lastRunOk());
    const tsui::RunModel* model = window.findChild<tsui::RunModel*>();
    const tsui::TimelineModel& t = window.timeline()->timeline();
    const int lane = laneNamed(t, "autotune");
    QVERIFY(lane >= 0);
    QVERIFY(t.lanes()[lane].spans.empty());  // a plain run searches nothing
    QVERIFY(model->trials().empty());
    QCOMPARE(static_cast<int>(model->kernelIds().size()), 2);

    // the matmul's row: right-click ▸ Autotune
    auto* kernels = window.findChild<tsui::KernelListPanel*>();
    QVERIFY(kernels);
    const int matmul = model->kernelIds().front();
    const std::string name = model->kernel(matmul)->name;
    QMenu* menu = kernels->kernelMenu(matmul, &window);
    QCOMPARE(menu->actions().size(), 1);
    QVERIFY(menu->actions()[0]->text().startsWith("Autotune"));
    menu->actions()[0]->trigger();
    QVERIFY(window.isRunning());
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY(window.lastRunOk());
    QVERIFY(model->trials().size() >= 3);
    int kept = 0;
    for (const ts::AutotuneTrialEvent& a : model->trials()) {
      QCOMPARE(a.name, name);  // only that kernel was searched
      kept += a.outcome == ts::AutotuneTrialEvent::Kept;
    }
    QCOMPARE(kept, 1);
    QCOMPARE(t.lanes()[lane].spans.size(), model->trials().size());
    const ts::TraceSpan& span = t.spans()[t.lanes()[lane].spans.front()];
    QCOMPARE(span.kind, ts::TraceSpan::AutotuneTrial);
    QVERIFY2(t.describe(t.lanes()[lane].spans.front()).contains("outcome: timed"), qPrintable(t.describe(0)));
    // the event browser lists each trial under its search; the properties panel says where the plan came from
    int firstTrial = -1;
    for (int e = 0; e < static_cast<int>(model->events().size()) && firstTrial < 0; ++e)
      if (model->events()[e].kind == tsui::RunModel::EventRef::Trial) firstTrial = e;
    QVERIFY2(window.eventBrowser()->rowText(firstTrial).startsWith("default · timed"),
             qPrintable(window.eventBrowser()->rowText(firstTrial)));
    window.setCurrentEvent(firstTrial);
    const int searched = window.selectedKernel();
    QCOMPARE(QString::fromStdString(model->kernel(searched)->name), QString::fromStdString(name));
    auto* properties = window.findChild<tsui::PropertiesPanel*>();
    QVERIFY(properties);
    QVERIFY2(properties->toPlainText().contains("BEAM search") && properties->toPlainText().contains("1 kept"),
             qPrintable(properties->toPlainText()));

    // Run ▸ Autotune Whole Run: both kernels; the matmul's plan is the one just found (the cache)
    window.autotuneRun();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY(window.lastRunOk());
    std::set<std::string> names;
    bool cacheHit = false;
    for (const ts::AutotuneTrialEvent& a : model->trials()) {
      names.insert(a.name);
      cacheHit = cacheHit || (a.name == name && a.outcome == ts::AutotuneTrialEvent::CacheHit);
    }
    QCOMPARE(static_cast<int>(names.size()), 2);
    QVERIFY(cacheHit);
    QCOMPARE(t.lanes()[lane].spans.size(), model->trials().size());

    // the graph's kernel box: the same Autotune
    tsui::GraphPanel* graph = window.graphPanel();
    QMenu* boxMenu = graph->kernelMenu(model->kernelIds().front(), &window);
    QVERIFY(boxMenu->actions()[0]->text().startsWith("Autotune"));
    QSignalSpy requested(graph, &tsui::GraphPanel::autotuneRequested);
    boxMenu->actions()[0]->trigger();
    QCOMPARE(requested.count(), 1);
    QCOMPARE(requested.first().first().toInt(), model->kernelIds().front());
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY(!model->trials().empty() && model->trials().front().outcome != ts::AutotuneTrialEvent::CacheHit);
    qunsetenv("TENSORSCOPE_CACHE");
  }

  void exportTraceWithoutARunSaysSo() {
    tsui::MainWindow window;
    QString error;
    QVERIFY(!window.exportTrace(QDir::temp().filePath("never.json"), &error));
    QVERIFY(error.contains("no run"));
  }

  // Measure Peak: the panel runs `tensorscope-cli calibrate` for the run's device (in its own process) and
  // draws the roof it cached. A cache directory of its own: the first calibration there compiles its kernels.
  void measurePeakCachesTheRoofAndDrawsIt() {
    QTemporaryDir cache;
    qputenv("TENSORSCOPE_CACHE", cache.path().toUtf8());
    tsui::RunModel model;
    model.addSchedule(syntheticSchedule(0, 0, 1), 1000);
    ts::KernelRunEvent r;
    r.kernel_id = 0;
    r.name = "r_64_64_64";
    r.device = "C";
    r.time_ms = 0.01;
    model.addKernelRun(r, 20000);
    tsui::TimelinePanel panel(&model);
    QSignalSpy peaks(&panel, &tsui::TimelinePanel::peakChanged);
    panel.show();
    panel.refresh();
    QCOMPARE(panel.device(), QString("C"));
    QTRY_VERIFY_WITH_TIMEOUT(peaks.count() == 1, 10000);  // read from the (empty) cache
    QVERIFY(!panel.roofline()->peak().has_value());
    panel.measurePeak(false);
    QTRY_VERIFY_WITH_TIMEOUT(peaks.count() == 2, 240000);
    qunsetenv("TENSORSCOPE_CACHE");
    QVERIFY(panel.roofline()->peak().has_value());
    const ts::DevicePeak& peak = *panel.roofline()->peak();
    qInfo("calibrated C: %.1f GFLOP/s, %.1f GB/s in %.2f s (compiles included)", peak.gflops, peak.gbps, peak.seconds);
    QVERIFY(peak.gflops > 0.1 && peak.gbps > 0.1);
    QVERIFY(QFile::exists(cache.filePath("peaks.json")));
  }

  void hundredThousandLaunchesRepaintWithin50ms() {
    tsui::RunModel model;
    constexpr int kLaunches = 100000, kPerSchedule = 1000;
    QElapsedTimer clock;
    clock.start();
    int64_t t = 0;
    for (int s = 0; s < kLaunches / kPerSchedule; ++s) {
      model.addSchedule(syntheticSchedule(s, s * kPerSchedule, kPerSchedule), t);
      for (int k = 0; k < kPerSchedule; ++k) {
        ts::KernelRunEvent r;
        r.kernel_id = s * kPerSchedule + k;
        r.name = model.kernel(r.kernel_id)->name;
        r.device = "C";
        r.compile_cache_hit = true;
        r.time_ms = 0.002 + 0.3 * ((r.kernel_id * 7919) % 1000) / 1000.0;  // 2 µs to 0.3 ms
        t += static_cast<int64_t>(r.time_ms * 1e6) + 1500;                // 1.5 µs between launches
        model.addKernelRun(std::move(r), t);
      }
    }
    const double fillMs = clock.elapsed();
    tsui::TimelinePanel panel(&model);
    panel.resize(1500, 320);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    clock.restart();
    panel.refresh();
    const double placeMs = clock.elapsed();
    QCOMPARE(panel.timeline().launchCount(), kLaunches);
    tsui::TimelineView* view = panel.view();
    view->fitAll();

    // Each view is repainted three times and keeps its fastest: the machine this runs on is shared (two
    // cores, builds beside it), and a repaint preempted by another process says nothing about the timeline.
    std::vector<double> times, first;
    auto paint = [&] {
      double best = 1e9;
      for (int i = 0; i < 3; ++i) {
        QElapsedTimer c;
        c.start();
        view->repaint();
        const double ms = c.nsecsElapsed() / 1e6;
        if (i == 0) first.push_back(ms);
        best = std::min(best, ms);
      }
      times.push_back(best);
    };
    paint();  // the whole run: every pixel merges ~60 launches
    const QPointF centre(view->width() * 0.6, view->laneCentreY(3));
    for (int i = 0; i < 40; ++i) {  // wheel in, a notch at a time, down to single launches
      QWheelEvent wheel(centre, view->mapToGlobal(centre), {}, QPoint(0, 120), Qt::NoButton, {}, Qt::NoScrollPhase, false);
      QApplication::sendEvent(view, &wheel);
      paint();
    }
    QVERIFY2(view->viewSpanUs() < panel.timeline().endUs() / 1000, "zoomed in to a few launches");
    for (int i = 0; i < 30; ++i) {  // drag to pan
      const QPoint from(700, 100), to(500, 100);
      QTest::mousePress(view, Qt::LeftButton, {}, from);
      QMouseEvent move(QEvent::MouseMove, to, view->mapToGlobal(to), Qt::NoButton, Qt::LeftButton, {});
      QApplication::sendEvent(view, &move);
      QTest::mouseRelease(view, Qt::LeftButton, {}, to);
      paint();
    }
    for (int i = 0; i < 40; ++i) {  // and back out
      QWheelEvent wheel(centre, view->mapToGlobal(centre), {}, QPoint(0, -120), Qt::NoButton, {}, Qt::NoScrollPhase, false);
      QApplication::sendEvent(view, &wheel);
      paint();
    }
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2], worst = sorted.back();
    std::sort(first.begin(), first.end());
    qInfo("100,000 launches: filled the RunModel in %.0f ms, placed them in %.0f ms; %zu views while zooming and "
          "panning, fastest of 3 repaints each: median %.2f ms, worst %.2f ms (single repaints: median %.2f ms, "
          "worst %.2f ms)",
          fillMs, placeMs, times.size(), median, worst, first[first.size() / 2], first.back());
    QVERIFY2(worst <= 50, qPrintable(QString("a repaint took %1 ms").arg(worst)));
    if (qEnvironmentVariableIsSet("TS_GUI_SHOTS")) panel.grab().save(QDir::temp().filePath("timeline_100k.png"));

    // The roofline: three distinct kernels, whatever the number of launches.
    QCOMPARE(static_cast<int>(panel.roofline()->dots().size()), 3);
  }
};

QTEST_MAIN(TimelineTest)
#include "test_timeline.moc"
