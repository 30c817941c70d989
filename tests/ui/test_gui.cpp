// QtTest of the debugger, offscreen. The first tests check the non-widget logic on synthetic
// events; the last ones drive the real window through real runs of samples/quickstart.py.
#include <QComboBox>
#include <QCryptographicHash>
#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QElapsedTimer>
#include <QProcess>
#include <QFile>
#include <QSettings>
#include <QTemporaryDir>
#include <QXmlStreamReader>
#include <QtTest>

#include "core/graph_layout.h"
#include "core/graph_spec.h"
#include "core/ir_line_map.h"
#include "core/layout_scheduler.h"
#include "core/run_model.h"
#include "main_window.h"
#include "panels/graph_panel.h"
#include "panels/buffer_inspector.h"
#include "panels/event_browser.h"
#include "panels/graph_scene_items.h"
#include "panels/kernel_details_panel.h"
#include "panels/kernel_list_panel.h"
#include "panels/properties_panel.h"
#include "panels/script_editor.h"
#include "widgets/code_view.h"
#include "widgets/zoomable_view.h"

namespace {

constexpr int kRunTimeoutMs = 120000;
const QString kQuickstart = QStringLiteral(TS_SOURCE_DIR "/samples/quickstart.py");

// Issue 12's script: lines 2-4 build a lazy graph, line 5 realizes part of it, line 6 builds more.
const QString kLazyScript = QStringLiteral(
    "from tensorscope import Tensor\n"       // 1
    "a = Tensor([[1.0, 2.0], [3.0, 4.0]])\n"  // 2
    "b = a * 2 + 1\n"                          // 3
    "c = b.sum(axis=1)\n"                      // 4
    "print('c', c.numpy())\n"                  // 5
    "d = (a @ a).relu()\n"                     // 6
    "print('d', d.numpy())\n");                // 7

// Shows `window`, runs kLazyScript with a breakpoint on line 6 and waits until the script pauses there.
void runPausedOnLine6(tsui::MainWindow& window) {
  window.show();
  window.editor()->setText(kLazyScript);
  window.editor()->toggleBreakpoint(6);
  window.runScript();
  QTRY_VERIFY_WITH_TIMEOUT(window.isPaused() || !window.isRunning(), kRunTimeoutMs);
  QVERIFY(window.isPaused());
}

ts::GraphNodeInfo node(uint64_t uid, const std::string& op, const std::string& cls, int kernel,
                       std::vector<uint64_t> srcs = {}) {
  ts::GraphNodeInfo n;
  n.uid = uid;
  n.op = op;
  n.op_class = cls;
  n.shape = {3, 3};
  n.dtype = "float32";
  n.srcs = std::move(srcs);
  n.kernel = kernel;
  return n;
}

ts::KernelInfo kernel(int id, const std::string& name) {
  ts::KernelInfo k;
  k.id = id;
  k.name = name;
  return k;
}

// Schedule 0: buffers 1, 2 -> kernel 7 computes 3 = 1 + 2 and 4 = 3 * 3.
// Schedule 1: 4 is now an input BUFFER; kernel 8 computes 5 = sum(4).
std::vector<ts::ScheduleEvent> twoSchedules() {
  ts::ScheduleEvent a;
  a.schedule_id = 0;
  a.nodes = {node(1, "BUFFER", "load", -1), node(2, "BUFFER", "load", -1), node(3, "ADD", "elementwise", 0, {1, 2}),
             node(4, "MUL", "elementwise", 0, {3, 3})};
  a.kernels = {kernel(7, "E_3_3")};
  ts::ScheduleEvent b;
  b.schedule_id = 1;
  b.nodes = {node(4, "BUFFER", "load", -1), node(5, "SUM", "reduce", 0, {4})};
  b.kernels = {kernel(8, "r_3_3")};
  return {a, b};
}

// How many of the model's schedules arrived thin (a repeated structure, its uids and kernel ids).
int thinSchedules(const tsui::RunModel& m) {
  int thin = 0;
  for (int i = 0; i < m.scheduleCount(); ++i) thin += m.scheduleAsArrived(i).thin();
  return thin;
}

// Everything the model holds, as text: two models are equal when their texts are.
QString modelText(const tsui::RunModel& m) {
  QStringList out;
  auto uids = [](const std::vector<uint64_t>& v) {
    QStringList l;
    for (uint64_t u : v) l << QString::number(u);
    return l.join(',');
  };
  for (int i = 0; i < m.scheduleCount(); ++i) {
    const ts::ScheduleEvent& s = m.schedule(i);
    out << QString("schedule %1").arg(s.schedule_id);
    for (const ts::GraphNodeInfo& n : s.nodes) {
      QStringList shape;
      for (int64_t d : n.shape) shape << QString::number(d);
      out << QString("  %1 %2 %3 %4 %5 [%6] <- %7 k%8")
                 .arg(n.uid)
                 .arg(QString::fromStdString(n.op), QString::fromStdString(n.op_class), QString::fromStdString(n.dtype),
                      QString::fromStdString(n.arg), shape.join('x'), uids(n.srcs))
                 .arg(n.kernel);
    }
  }
  QHash<const ts::KernelCode*, QByteArray> code_digest;
  QSet<QByteArray> written;
  for (int id : m.kernelIds()) {
    const ts::KernelInfo* k = m.kernel(id);
    if (k) {
      out << QString("kernel %1 %2 on %3: %4").arg(id).arg(QString::fromStdString(k->name),
                                                          QString::fromStdString(k->device), uids(k->node_uids));
      for (const std::string& r : k->boundary_reasons) out << "  " + QString::fromStdString(r);
    }
    if (const ts::KernelRunEvent* r = m.kernelRun(id)) {
      out << QString("run %1 %2 %3 ms, compile %4 ms, cached %5, replay of %6")
                 .arg(r->kernel_id)
                 .arg(QString::fromStdString(r->name))
                 .arg(r->time_ms, 0, 'g', 17)
                 .arg(r->compile_ms, 0, 'g', 17)
                 .arg(r->compile_cache_hit)
                 .arg(r->replayed ? r->replay_of : -1);
      if (r->code) {
        // Each distinct listing is written once and named by its digest after that: a training loop's
        // 20,000 launches share a few hundred KernelCode objects, and writing every launch's listings out
        // in full made this text (twice, live and recorded) about 20 GB.
        QByteArray& digest = code_digest[r->code.get()];
        if (digest.isEmpty()) {
          QStringList listing;
          for (const ts::PassSnapshot& p : r->code->ir) listing << QString::fromStdString(p.pass + "\n" + p.ir());
          // every language, the other devices' ones rendered from the kernel's IR (the recording's copy of it)
          for (const std::string& language : r->code->languages())
            listing << QString::fromStdString(language + "\n" + r->code->listing(language)->code);
          const QString text = listing.join('\n');
          digest = QCryptographicHash::hash(text.toUtf8(), QCryptographicHash::Sha1).toHex();
          if (!written.contains(digest)) {
            written.insert(digest);
            out << text;
          }
        }
        out << "code " + QString::fromLatin1(digest);
      }
    }
  }
  return out.join('\n');
}

int svgClusterCount(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return -1;
  QXmlStreamReader xml(&file);
  int clusters = 0;
  while (!xml.atEnd()) {
    if (xml.readNext() == QXmlStreamReader::StartElement && xml.name() == u"g" &&
        xml.attributes().value("class") == u"cluster")
      ++clusters;
  }
  return xml.hasError() ? -1 : clusters;
}

}  // namespace

class GuiTest : public QObject {
  Q_OBJECT
  QTemporaryDir settingsDir_;

 private slots:
  void initTestCase() {
    // the debugger runs scripts in `tensorscope-cli runner`, next to this executable
    QVERIFY2(QFile::exists(QCoreApplication::applicationDirPath() + "/tensorscope-cli"), "tensorscope-cli not built");
    QSettings::setDefaultFormat(QSettings::IniFormat);  // recent files go to a temporary settings file
    QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settingsDir_.path());
  }

  void mergeKeepsTheOpOfARealizedBuffer() {
    const auto schedules = twoSchedules();
    const tsui::GraphSpec spec = tsui::mergeSchedules(schedules, 0, 2);
    QCOMPARE(spec.nodes.size(), size_t(5));  // 1, 2, 3, 4 (as MUL, not BUFFER), 5
    const int mul = spec.indexOfKey("n4_k7");
    QVERIFY(mul >= 0);
    QCOMPARE(QString::fromStdString(spec.nodes[mul].info.op), QString("MUL"));
    QCOMPARE(spec.indexOfKey("n4"), -1);
    // The SUM of schedule 1 reads the MUL of schedule 0: the edge crosses the kernels.
    const int sum = spec.indexOfKey("n5_k8");
    QVERIFY(std::find(spec.edges.begin(), spec.edges.end(), std::pair{mul, sum}) != spec.edges.end());
    QCOMPARE(spec.clusters.size(), size_t(2));
    QCOMPARE(spec.nodes[mul].label, QString("MUL\n3x3"));
  }

  void layoutAndSvgHaveOneClusterPerKernel() {
    const auto schedules = twoSchedules();
    auto spec = std::make_shared<const tsui::GraphSpec>(tsui::mergeSchedules(schedules, 0, 2));
    const tsui::GraphLayout layout = tsui::layoutGraph(spec);
    QVERIFY2(layout.error.isEmpty(), qPrintable(layout.error));
    QCOMPARE(layout.nodes.size(), size_t(5));
    QCOMPARE(layout.clusters.size(), size_t(2));
    QCOMPARE(layout.edges.size(), spec->edges.size());
    for (const auto& n : layout.nodes) QVERIFY(layout.bounds.contains(n.rect.center()));
    QString error;
    const QByteArray svg = tsui::renderSvg(tsui::toDot(*layout.spec), &error);
    QVERIFY2(!svg.isEmpty(), qPrintable(error));
    QCOMPARE(svg.count("class=\"cluster\""), 2);
    QVERIFY(svg.contains("cluster_k7"));
  }

  // A training loop's schedules arrive thin (one structure, each step's uids and kernel ids). The model
  // keeps them thin and instantiates the ones it is asked for: everything it answers is what a model of the
  // same schedules whole answers, and building the whole-run overview instantiates none of them.
  void aModelOfThinSchedulesAnswersAsOneOfWholeOnes() {
    // the structure: positions 0, 1 buffers (0 is the previous step's output), 2 = 0 + 1, 3 = 2 * 2
    ts::ScheduleEvent st;
    st.nodes = {node(0, "BUFFER", "load", -1), node(1, "BUFFER", "load", -1), node(2, "ADD", "elementwise", 0, {0, 1}),
                node(3, "MUL", "elementwise", 0, {2, 2})};
    st.kernels = {kernel(0, "E_3_3")};
    st.kernels[0].node_uids = {2, 3};
    st.kernels[0].inputs = {{0, {3, 3}, "float32"}, {1, {3, 3}, "float32"}};
    st.kernels[0].outputs = {{3, {3, 3}, "float32"}};
    const auto structure = std::make_shared<const ts::ScheduleEvent>(st);
    auto batch = std::make_shared<ts::NodeBatch>();  // each step makes its ADD and MUL nodes
    batch->nodes = {node(0, "ADD", "elementwise", -1), node(1, "MUL", "elementwise", -1)};
    batch->stack = {0, 0};
    batch->stacks = {{{{"train.py", 5, "<module>"}}, 0}};
    tsui::RunModel thinModel, wholeModel;
    for (tsui::RunModel* m : {&thinModel, &wholeModel}) m->setScriptPath("train.py");
    constexpr int kSteps = 6;
    for (int t = 0; t < kSteps; ++t) {
      const uint64_t base = 100 + 10 * static_cast<uint64_t>(t);
      ts::ScheduleEvent thin;
      thin.schedule_id = t;
      thin.where = {"train.py", 10 + t};
      thin.structure = structure;
      thin.position_uids = {t == 0 ? 1 : base - 10 + 3, 2, base + 2, base + 3};
      thin.kernel_ids = {50 + t};
      QVERIFY(thin.thin());
      const ts::NodesEvent made{base + 2, {}, batch, {}};
      for (tsui::RunModel* m : {&thinModel, &wholeModel}) m->addNodes(made, 1000 * t);
      thinModel.addSchedule(thin, 1000 * t + 1);
      wholeModel.addSchedule(ts::full_schedule(thin), 1000 * t + 1);
      QVERIFY(!wholeModel.scheduleAsArrived(t).thin());
    }
    // the overview of the run and the lazy graph leave every schedule thin
    const tsui::GraphSpec overview = tsui::runOverview(thinModel, {});
    const tsui::RunModel::LazyGraph lazy = thinModel.lazyGraphAt(static_cast<int>(thinModel.events().size()) - 2, 100);
    for (int t = 0; t < kSteps; ++t) QVERIFY(!thinModel.instantiated(t));
    QCOMPARE(thinModel.kernelIdsOf(3), std::vector<int>{53});
    QCOMPARE(thinModel.nodeCountOf(3), 4);
    QCOMPARE(thinModel.scheduleWhere(3).line, 13);
    auto specText = [](const tsui::GraphSpec& g) {
      QStringList out{g.description};
      for (const tsui::GraphSpecNode& n : g.nodes) out << n.key + " " + n.label + " " + QString::number(n.kernelId);
      for (const auto& [a, b] : g.edges) out << QString("%1->%2").arg(a).arg(b);
      for (const tsui::GraphSpecCluster& c : g.clusters) out << QString("c%1 ").arg(c.kernelId) + c.name;
      return out.join('\n');
    };
    QCOMPARE(specText(overview), specText(tsui::runOverview(wholeModel, {})));
    QVERIFY(overview.nodes.size() >= size_t(kSteps));
    QCOMPARE(lazy.pending, (std::vector<uint64_t>{152, 153}));  // the last step's nodes before its schedule
    QCOMPARE(lazy.pending, wholeModel.lazyGraphAt(static_cast<int>(wholeModel.events().size()) - 2, 100).pending);
    QVERIFY(thinModel.lazyGraphAt(static_cast<int>(thinModel.events().size()) - 1, 100).pending.empty());
    // what asks for a schedule's nodes or kernels gets them with this step's uids and ids
    const ts::KernelInfo* k = thinModel.kernel(53);
    QVERIFY(k);
    QCOMPARE(k->node_uids, (std::vector<uint64_t>{132, 133}));
    QCOMPARE(k->outputs.at(0).node_uid, uint64_t(133));
    QCOMPARE(thinModel.node(133)->op, std::string("MUL"));
    QCOMPARE(thinModel.node(133)->srcs, (std::vector<uint64_t>{132, 132}));
    QCOMPARE(thinModel.scheduleOfKernel(53), 3);
    for (int t = 0; t < kSteps; ++t) QCOMPARE(thinModel.instantiated(t), t == 3);  // only the one asked for
    QCOMPARE(modelText(thinModel), modelText(wholeModel));
    QCOMPARE(thinModel.kernelsFromLine(5), (std::vector<int>{50, 51, 52, 53, 54, 55}));
    QCOMPARE(thinModel.kernelsFromLine(5), wholeModel.kernelsFromLine(5));
    QCOMPARE(specText(tsui::buildViewGraph(thinModel, false, 52)), specText(tsui::buildViewGraph(wholeModel, false, 52)));
    QCOMPARE(specText(tsui::buildViewGraph(thinModel, true, -1)), specText(tsui::buildViewGraph(wholeModel, true, -1)));
    QCOMPARE(specText(tsui::runOverview(thinModel, {tsui::scheduleToggleId(4)})),
             specText(tsui::runOverview(wholeModel, {tsui::scheduleToggleId(4)})));
  }

  void staleLayoutIsDropped() {
    tsui::LayoutScheduler scheduler;
    std::vector<size_t> delivered;  // node counts of the layouts delivered
    connect(&scheduler, &tsui::LayoutScheduler::laidOut, this,
            [&](const tsui::GraphLayout& layout) { delivered.push_back(layout.nodes.size()); });
    const auto schedules = twoSchedules();
    scheduler.request(tsui::mergeSchedules(schedules, 0, 1));
    scheduler.request(tsui::mergeSchedules(schedules, 0, 2));  // newer: replaces the first
    QVERIFY(scheduler.isBusy());
    QTRY_VERIFY_WITH_TIMEOUT(!scheduler.isBusy(), 20000);
    QCOMPARE(delivered, std::vector<size_t>{5});
  }

  // The throttle's leading edge: after a quiet interval a request's layout starts at once (a run's last
  // graph is not kept waiting), one made within the interval waits for its end and is laid out then.
  void aRequestAfterAQuietIntervalStartsAtOnce() {
    tsui::LayoutScheduler scheduler;
    std::vector<size_t> delivered;
    connect(&scheduler, &tsui::LayoutScheduler::laidOut, this,
            [&](const tsui::GraphLayout& layout) { delivered.push_back(layout.nodes.size()); });
    const auto schedules = twoSchedules();
    scheduler.request(tsui::mergeSchedules(schedules, 0, 1));
    QVERIFY(scheduler.isBusy());
    QVERIFY(!scheduler.isWaiting());  // started without waiting for the interval
    QTRY_VERIFY_WITH_TIMEOUT(!scheduler.isBusy(), 20000);
    QTest::qWait(2 * tsui::LayoutScheduler::kThrottleMs);  // quiet again
    scheduler.request(tsui::mergeSchedules(schedules, 0, 2));
    QVERIFY(!scheduler.isWaiting());
    tsui::GraphSpec last = tsui::mergeSchedules(schedules, 1, 2);
    const size_t lastNodes = last.nodes.size();
    QVERIFY(lastNodes != delivered.front());
    scheduler.request(std::move(last));  // within the interval: waits, and replaces the one running
    QVERIFY(scheduler.isWaiting());
    QTRY_VERIFY_WITH_TIMEOUT(!scheduler.isBusy(), 20000);
    QCOMPARE(delivered.size(), size_t(2));
    QCOMPARE(delivered.back(), lastNodes);
  }

  void irLinesMapToSourceLines() {
    QCOMPARE(tsui::irOpIndexOfLine(u"  %12 = ADD %3, %4"), 12);
    QCOMPARE(tsui::irOpIndexOfLine(u"%0 DEFINE_GLOBAL"), 0);
    QCOMPARE(tsui::irOpIndexOfLine(u"kernel E_3_3"), -1);
    QCOMPARE(tsui::irOpIndexOfLine(u"  % not an op"), -1);
    const tsui::IrSourceMap map("kernel E_3\n%0 a\n  %1 b\n%2 c", {3, 0, 5});
    QCOMPARE(map.sourceLineOf(0), -1);
    QCOMPARE(map.sourceLineOf(1), 2);
    QCOMPARE(map.sourceLineOf(2), -1);
    QCOMPARE(map.sourceLineOf(3), 4);
    QCOMPARE(map.irLinesOf(4), QList<int>{3});
  }

  void sourceViewShowsTheDevicesSourceUntilTheUserPicksOne() {
    tsui::KernelDetailsPanel panel;
    auto* combo = panel.findChild<QComboBox*>("renderer");
    auto* source = panel.findChild<tsui::CodeView*>("source");
    QVERIFY(combo && source);
    ts::KernelRunEvent run;
    run.name = "E_4";
    run.device = "OPENCL:0";
    auto code = std::make_shared<ts::KernelCode>();
    code->ir = {{"lower", "kernel E_4\n"}};
    code->sources = {{"C", "void E_4_c(void) {}\n", {}}, {"OpenCL C", "__kernel void E_4_cl(void) {}\n", {}}};
    code->device_renderer = "OpenCL C";
    run.code = code;
    panel.showKernel(1, "E_4", &run);
    QCOMPARE(combo->currentText(), QString("OpenCL C"));  // what the OpenCL device compiled, not the C listing
    QVERIFY(source->text().contains("E_4_cl"));
    run.device = "C";
    auto onC = std::make_shared<ts::KernelCode>(*code);
    onC->device_renderer = "C";
    run.code = onC;
    panel.showKernel(2, "E_4", &run);
    QCOMPARE(combo->currentText(), QString("C"));
    combo->setCurrentIndex(1);  // the user picks OpenCL C: it stays picked for the next kernels
    panel.showKernel(3, "E_4", &run);
    QCOMPARE(combo->currentText(), QString("OpenCL C"));
    QVERIFY(source->text().contains("E_4_cl"));
  }

  void saveReplacesTheFileWholesale() {
    QTemporaryDir dir;
    const QString path = dir.filePath("script.py");
    tsui::ScriptEditor editor;
    editor.setText("print(1)\n");
    QString error;
    QVERIFY2(editor.saveFile(path, &error), qPrintable(error));
    editor.setText("print(2)\n");
    QVERIFY(editor.saveFile(path, &error));
    QFile file(path);
    QVERIFY(file.open(QIODevice::ReadOnly));
    QCOMPARE(file.readAll(), QByteArray("print(2)\n"));
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files), QStringList{"script.py"});  // no temp file left
  }

  void quickstartRunShowsKernelsGraphAndSvg() {
    tsui::MainWindow window;
    window.show();
    QVERIFY(window.openScript(kQuickstart));
    QVERIFY(window.windowTitle().contains("quickstart.py"));
    window.setDevice("C");
    window.runScript();
    QVERIFY(window.isRunning());
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY2(window.lastRunOk(), qPrintable(window.consoleText()));
    QVERIFY2(window.consoleText().contains("[[ 2.  2.  2.]"), qPrintable(window.consoleText()));
    QVERIFY(window.kernelCount() >= 1);
    QVERIFY(window.clusterCount() >= 1);

    QTemporaryDir dir;
    const QString svg = dir.filePath("graph.svg");
    QString error;
    QVERIFY2(window.exportSvg(svg, &error), qPrintable(error));
    QCOMPARE(svgClusterCount(svg), window.kernelCount());
    QCOMPARE(window.clusterCount(), window.kernelCount());

    // Linking: a click on a fused node selects its kernel everywhere...
    auto* graph = window.findChild<tsui::GraphPanel*>();
    auto* view = graph->findChild<tsui::ZoomableView*>();
    QVERIFY(graph && view);
    tsui::NodeItem* target = nullptr;
    for (QGraphicsItem* item : view->scene()->items()) {
      if (item->type() != tsui::NodeItem::Type) continue;
      auto* n = static_cast<tsui::NodeItem*>(item);
      if (n->kernelId() >= 0 && n->kernelId() != window.selectedKernel()) target = n;
    }
    QVERIFY(target);
    view->centerOn(target);
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, view->mapFromScene(target->boundingRect().center()));
    QCOMPARE(window.selectedKernel(), target->kernelId());
    QCOMPARE(graph->highlightedKernel(), target->kernelId());
    // ... and picking a kernel in the list highlights its cluster.
    auto* list = window.findChild<tsui::KernelListPanel*>();
    list->selectRow(0);
    const int first = list->kernelAt(0);
    QCOMPARE(window.selectedKernel(), first);
    QCOMPARE(graph->highlightedKernel(), first);

    // Clicking an IR op highlights the source line rendered from it.
    auto* ir = window.findChild<tsui::CodeView*>("ir");
    auto* source = window.findChild<tsui::CodeView*>("source");
    QVERIFY(ir && source && ir->lines() > 1 && source->lines() > 1);
    int opLine = -1;
    for (int l = 0; l < ir->lines() && opLine < 0; ++l)
      if (tsui::irOpIndexOfLine(ir->text(l)) > 0 && ir->text(l).contains("= MUL")) opLine = l;  // not inlined
    QVERIFY2(opLine >= 0, qPrintable(ir->text()));
    const int y = static_cast<int>(
        ir->SendScintilla(QsciScintillaBase::SCI_POINTYFROMPOSITION, 0, ir->positionFromLineIndex(opLine, 0)));
    QTest::mouseClick(ir->viewport(), Qt::LeftButton, {}, QPoint(60, y + 3));
    int linked = 0;
    for (int l = 0; l < source->lines(); ++l) linked += source->markersAtLine(l) != 0;
    QCOMPARE(linked, 1);

    // The source combo offers every renderer's language, though the run rendered only the C device's;
    // picking another renders it from the kernel's IR (KernelCode::listing), with its line map.
    auto* combo = window.findChild<QComboBox*>("renderer");
    QVERIFY(combo);
    QCOMPARE(combo->currentText(), QString("C"));
    QStringList languages;
    for (int i = 0; i < combo->count(); ++i) languages << combo->itemText(i);
    for (const char* language : {"C", "OpenCL C", "GLSL", "CUDA C"}) QVERIFY2(languages.contains(language), qPrintable(languages.join(", ")));
    combo->setCurrentIndex(languages.indexOf("OpenCL C"));
    QVERIFY2(source->text().contains("__kernel"), qPrintable(source->text()));
    // some IR op links to a line of the OpenCL listing (an op inlined into an expression has none)
    linked = 0;
    for (int l = 0; l < ir->lines() && linked == 0; ++l) {
      if (tsui::irOpIndexOfLine(ir->text(l)) <= 0) continue;
      ir->ensureLineVisible(l);
      const int lineY = static_cast<int>(
          ir->SendScintilla(QsciScintillaBase::SCI_POINTYFROMPOSITION, 0, ir->positionFromLineIndex(l, 0)));
      QTest::mouseClick(ir->viewport(), Qt::LeftButton, {}, QPoint(60, lineY + 3));
      for (int s = 0; s < source->lines(); ++s) linked += source->markersAtLine(s) != 0;
    }
    QVERIFY(linked >= 1);
    combo->setCurrentIndex(languages.indexOf("C"));  // the next tests start from the device's language
  }

  void brokenScriptShowsTheErrorAndTheAppKeepsWorking() {
    QTemporaryDir dir;
    const QString path = dir.filePath("broken.py");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("from tensorscope import Tensor\nx = Tensor([1.0, 2.0])\nraise ValueError(\"boom\")\n");
    file.close();

    tsui::MainWindow window;
    window.show();
    QVERIFY(window.openScript(path));
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY(!window.lastRunOk());
    QVERIFY2(window.consoleText().contains("ValueError: boom"), qPrintable(window.consoleText()));
    QVERIFY(window.editor()->markersAtLine(2) != 0);  // line 3, 0-based in QScintilla

    QVERIFY(window.openScript(kQuickstart));
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY2(window.lastRunOk(), qPrintable(window.consoleText()));
    QVERIFY(window.consoleText().contains("[[ 2.  2.  2.]"));
    QVERIFY(!window.consoleText().contains("boom"));  // cleared on run
    QVERIFY(window.kernelCount() >= 1);
  }

  void stopInterruptsARunningScript() {
    QTemporaryDir dir;
    const QString path = dir.filePath("forever.py");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("import time\nprint('started')\nwhile True:\n    time.sleep(0.01)\n");
    file.close();

    tsui::MainWindow window;
    window.show();
    QVERIFY(window.openScript(path));
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(window.consoleText().contains("started"), 20000);
    QVERIFY(window.isRunning());
    window.stopScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), 10000);
    QVERIFY2(window.consoleText().contains("stopped"), qPrintable(window.consoleText()));
  }

  // ---- the runner process: whatever the script does, the window survives ---------------------------

  // Runs `code` (after a realize, so that a kernel ran first) and returns the status bar's text.
  QString runUntilTheRunnerEnds(tsui::MainWindow& window, const QString& code, int memoryLimitMb = 0) {
    window.editor()->setText("from tensorscope import Tensor\n(Tensor([1.0, 2.0]) + 1).numpy()\n" + code);
    window.runner()->setMemoryLimitMb(memoryLimitMb);
    window.runScript();
    [&] { QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), kRunTimeoutMs); }();
    return window.statusText();
  }

  void crashesEndTheRunnerNotTheWindow_data() {
    QTest::addColumn<QString>("code");
    QTest::addColumn<int>("memoryLimitMb");
    QTest::addColumn<QString>("said");
    QTest::newRow("abort") << "import os\nos.abort()\n" << 0 << "signal 6 (SIGABRT) after kernel #";
    QTest::newRow("segfault") << "import ctypes\nctypes.string_at(0)\n" << 0 << "signal 11 (SIGSEGV) after kernel #";
    QTest::newRow("os._exit(3)") << "import os\nos._exit(3)\n" << 0 << "exit status 3 after kernel #";
    QTest::newRow("memory") << "x = [bytearray(1 << 20) for _ in range(100000)]\n" << 1024 << "MemoryError";
  }
  void crashesEndTheRunnerNotTheWindow() {
    QFETCH(QString, code);
    QFETCH(int, memoryLimitMb);
    QFETCH(QString, said);
    tsui::MainWindow window;
    window.show();
    const QString status = runUntilTheRunnerEnds(window, code, memoryLimitMb);
    QVERIFY2(status.contains(said), qPrintable(status + "\n" + window.consoleText()));
    QVERIFY(!window.lastRunOk());
    QVERIFY(window.consoleText().contains(said));
    QCOMPARE(window.kernelCount(), 1);  // the events received before the end stay
    QVERIFY(window.editor()->text().contains(code));  // the editor and its unsaved text too
    QVERIFY(window.editor()->isModified());
    // ... and Run works again
    window.runner()->setMemoryLimitMb(0);
    QVERIFY(window.openScript(kQuickstart));
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY2(window.lastRunOk(), qPrintable(window.consoleText()));
  }

  // Launches are sent to the debugger in batches; a runner that dies sends its queued batch first, so
  // a burst of realizes right before the death all arrive (CI once lost the last launch to os._exit).
  void aDeathSendsEveryLaunchBeforeIt_data() {
    QTest::addColumn<QString>("death");
    QTest::addColumn<QString>("said");
    QTest::newRow("os._exit(3)") << "import os\nos._exit(3)\n" << "exit status 3 after kernel #";
    QTest::newRow("abort") << "import os\nos.abort()\n" << "signal 6 (SIGABRT) after kernel #";
    QTest::newRow("segfault") << "import ctypes\nctypes.string_at(0)\n" << "signal 11 (SIGSEGV) after kernel #";
  }
  void aDeathSendsEveryLaunchBeforeIt() {
    QFETCH(QString, death);
    QFETCH(QString, said);
    tsui::MainWindow window;
    window.show();
    window.editor()->setText(
        "from tensorscope import Tensor\n"
        "x = Tensor([1.0, 2.0])\n"
        "for i in range(40):\n"
        "    x = (x + 1).realize()\n" +
        death);
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), kRunTimeoutMs);
    QCOMPARE(window.kernelCount(), 40);
    const int lastKernel = window.model().kernelIds().back();
    QVERIFY(window.model().eventOfLaunch(lastKernel) >= 0);  // every launch arrived, the last one too
    const QString last = said + QString::number(lastKernel) + " ";
    QVERIFY2(window.statusText().contains(last), qPrintable(window.statusText() + "\nexpected: " + last));
  }

  void stopKillsAScriptStuckInNativeCode() {
    tsui::MainWindow window;
    window.show();
    window.editor()->setText("import ctypes\nprint('started', flush=True)\nctypes.CDLL(None).sleep(60)\n");
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(window.consoleText().contains("started"), 20000);
    QElapsedTimer clock;
    clock.start();
    window.stopScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), 10000);
    QVERIFY(clock.elapsed() < 5000);  // KeyboardInterrupt cannot reach C code: killed after 2 s
    QVERIFY2(window.statusText().contains("Stopped"), qPrintable(window.statusText()));
    QVERIFY2(window.consoleText().contains("killed 2 s after Stop"), qPrintable(window.consoleText()));
  }

  // F10 through samples/quickstart.py pauses before every launch, in the order the CLI launches them
  // (kernels.json), with the paused kernel current in every panel; then the run finishes.
  void f10StepsThroughEveryLaunchInOrder() {
    QTemporaryDir dir;
    QProcess cli;
    cli.start(QCoreApplication::applicationDirPath() + "/tensorscope-cli", {"run", kQuickstart, "--out", dir.path()});
    QVERIFY(cli.waitForFinished(kRunTimeoutMs));
    QCOMPARE(cli.exitCode(), 0);
    QFile manifest(dir.filePath("kernels.json"));
    QVERIFY(manifest.open(QIODevice::ReadOnly));
    QStringList expected;
    for (const QJsonValue k : QJsonDocument::fromJson(manifest.readAll()).object().value("kernels").toArray())
      expected << QString("#%1 %2").arg(k.toObject().value("id").toInt()).arg(k.toObject().value("name").toString());
    QVERIFY(!expected.isEmpty());

    tsui::MainWindow window;
    window.show();
    window.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&window));
    QVERIFY(window.openScript(kQuickstart));
    QStringList stepped;
    QTest::keyClick(&window, Qt::Key_F10);  // not running: starts paused before the first launch
    for (int guard = 0; guard < 100; ++guard) {
      QTRY_VERIFY_WITH_TIMEOUT(window.isPaused() || !window.isRunning(), kRunTimeoutMs);
      if (!window.isRunning()) break;
      const auto& at = window.runner()->pausePoint();
      QCOMPARE(at.stage, QString("before launch"));
      stepped << QString("#%1 %2").arg(at.kernelId).arg(at.kernel);
      QCOMPARE(window.selectedKernel(), at.kernelId);  // every panel follows the paused kernel
      QVERIFY2(window.statusText().startsWith("Paused before launch of kernel #"), qPrintable(window.statusText()));
      QTest::keyClick(&window, Qt::Key_F10);
    }
    QCOMPARE(stepped, expected);
    QVERIFY(window.lastRunOk());
    QVERIFY(window.consoleText().contains("[[ 2.  2.  2.]"));
  }

  // F11 stops at every stage of a new kernel: schedule, lowering, each pass, compile, launch; Shift+F11
  // runs to the end of the schedule; Stop while paused ends the run and leaves the debugger usable.
  void f11StopsAtEveryStageAndStopWhilePausedEnds() {
    tsui::MainWindow window;
    window.show();
    QVERIFY(window.openScript(kQuickstart));
    QStringList stages;
    window.stepIntoNextStage();  // not running: starts paused at the first stop
    for (int i = 0; i < 27; ++i) {
      QTRY_VERIFY_WITH_TIMEOUT(window.isPaused() || !window.isRunning(), kRunTimeoutMs);
      const auto& at = window.runner()->pausePoint();
      stages << (at.detail.isEmpty() ? at.stage : at.stage + " " + at.detail);
      window.stepIntoNextStage();
    }
    QCOMPARE(stages, (QStringList{"before schedule", "before lowering", "after pass hoist_constants",
                                  "after pass dead_code_elimination", "after pass reorder_global_loops",
                                  "after pass loop_invariant_code_motion", "after pass tile_local",
                                  "after pass transpose_tile", "after pass columns_as_lanes", "after pass padto",
                                  "after pass upcast_global", "after pass register_tile", "after pass split_index_set",
                                  "after pass simplify", "after pass delinearize_reduce", "after pass rows_as_lanes",
                                  "after pass group_reduce", "after pass upcast_reduce", "after pass max_reduce_as_int",
                                  "after pass coalesce_short_rows", "after pass fuse_multiply_add", "after pass sink_after_loops",
                                  "after pass local_size", "before render C",
                                  "before compile", "before launch", "after launch"}));
    QTRY_VERIFY_WITH_TIMEOUT(window.isPaused(), kRunTimeoutMs);
    window.runner()->stepToScheduleEnd();
    QTRY_VERIFY_WITH_TIMEOUT(window.isPaused(), kRunTimeoutMs);
    QCOMPARE(window.runner()->pausePoint().stage, QString("after schedule"));
    window.stopScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), 10000);
    QVERIFY2(window.statusText().contains("Stopped"), qPrintable(window.statusText()));
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY(window.lastRunOk());
  }

  // Break on NaN/Inf: the run pauses at the kernel that stored the first non-finite value, which is the
  // current one; F5 then ends the run with the error, and the editor marks the line that made the op
  // (not the line that realized it).
  void breakOnNanStopsAtTheKernelAndMarksTheLineOfTheOp() {
    tsui::MainWindow window;
    window.show();
    window.setBreakOnNan(true);
    window.editor()->setText("from tensorscope import Tensor\nx = Tensor([1.0, 2.0, 3.0])\nprint((x * 2).numpy())\n"
                             "y = (x - x).log()\nprint(y.numpy())\nprint('not reached')\n");
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(window.isPaused() || !window.isRunning(), kRunTimeoutMs);
    QVERIFY(window.isPaused());
    QCOMPARE(window.runner()->pausePoint().stage, QString("non-finite output"));
    QVERIFY2(window.statusText().contains("produced -inf at output element 0 of 3"), qPrintable(window.statusText()));
    QCOMPARE(window.selectedKernel(), window.runner()->pausePoint().kernelId);
    window.continueOrRun();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), kRunTimeoutMs);
    QVERIFY(!window.lastRunOk());
    const QString status = window.statusText();
    QVERIFY2(status.contains("NaN/Inf: kernel #") && status.contains("produced -inf at output element 0 of 3"),
             qPrintable(status));
    QVERIFY2(status.contains("(line 4)"), qPrintable(status));
    QVERIFY(window.editor()->markersAtLine(3) != 0);  // line 4, 0-based in QScintilla
    QVERIFY(window.consoleText().contains("[2. 4. 6.]"));
    QVERIFY(!window.consoleText().contains("not reached"));
    QCOMPARE(window.kernelCount(), 2);
    QCOMPARE(window.selectedKernel(), window.model().kernelIds().back());
    QVERIFY(status.contains(QString("kernel #%1 ").arg(window.selectedKernel())));
  }

  // The recording of a live run holds what the window showed: opening it gives the same model.
  void aRecordingOpensAsTheLiveRunShowedIt() {
    QTemporaryDir dir;
    const QString saved = dir.filePath("quickstart.tsrec");
    int liveKernels = 0;
    QString liveConsole;
    {
      tsui::MainWindow window;
      window.show();
      QVERIFY(window.openScript(kQuickstart));
      window.runScript();
      QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
      liveKernels = window.kernelCount();
      QString error;
      QVERIFY2(window.saveRecording(saved, &error), qPrintable(error));
    }
    tsui::MainWindow window;
    window.show();
    QString error;
    QVERIFY2(window.openRecording(saved, &error), qPrintable(error));
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QCOMPARE(window.kernelCount(), liveKernels);
    QCOMPARE(window.clusterCount(), liveKernels);
    QVERIFY(window.lastRunOk());
    QVERIFY(window.consoleText().contains("[[ 2.  2.  2.]"));
    QVERIFY(window.editor()->text().contains("y.matmul(x)"));
    QVERIFY(window.windowTitle().contains("quickstart.tsrec"));

    // A bad file: a one-line error, the window keeps what it shows.
    const QString bad = dir.filePath("bad.tsrec");
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("not a recording at all, just some text\n");
    f.close();
    QVERIFY(!window.openRecording(bad, &error));
    QVERIFY2(error.contains(bad) && !error.contains('\n'), qPrintable(error));
    QCOMPARE(window.kernelCount(), liveKernels);
  }

  // For every sample: the model built live equals the model built from its recording.
  void everySamplesRecordingEqualsItsLiveRun_data() {
    QTest::addColumn<QString>("sample");
    for (const QString& name : QDir(TS_SOURCE_DIR "/samples").entryList({"*.py"}, QDir::Files, QDir::Name))
      QTest::newRow(qPrintable(name)) << QString(TS_SOURCE_DIR "/samples/" + name);
  }
  void everySamplesRecordingEqualsItsLiveRun() {
    QFETCH(QString, sample);
    QTemporaryDir dir;
    const QString saved = dir.filePath("run.tsrec");
    QString live;
    int thinLive = 0;  // schedules that arrived thin
    {
      tsui::MainWindow window;
      window.show();
      QVERIFY(window.openScript(sample));
      window.runScript();
      QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), kRunTimeoutMs);
      QVERIFY2(window.lastRunOk(), qPrintable(window.consoleText().right(2000)));
      thinLive = thinSchedules(window.model());
      live = modelText(window.model());
      QString error;
      QVERIFY2(window.saveRecording(saved, &error), qPrintable(error));
    }
    tsui::MainWindow window;
    QString error;
    QVERIFY2(window.openRecording(saved, &error), qPrintable(error));
    // a training loop's repeated schedules arrive thin, from the recording as from the runner (the model
    // instantiates the ones it shows)
    const int thinRecorded = thinSchedules(window.model());
    const QString recorded = modelText(window.model());
    QVERIFY(live.size() > 100);
    QCOMPARE(recorded.size(), live.size());
    QVERIFY(recorded == live);
    QCOMPARE(thinRecorded, thinLive);
    if (sample.endsWith("_digits.py") || sample.endsWith("transformer_tiny.py"))  // training loops
      QVERIFY2(thinLive > window.model().scheduleCount() / 2, qPrintable(QString("%1 thin of %2").arg(thinLive).arg(window.model().scheduleCount())));
  }

  // A program SIGKILLed while it records leaves a recording with what it did before the kill.
  void aRecordingOfAKilledProgramOpens() {
    QTemporaryDir dir;
    const QString rec = dir.filePath("killed.tsrec");
    QProcess python;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("TENSORSCOPE_RECORD", rec);
    env.insert("PYTHONPATH", QCoreApplication::applicationDirPath() + "/../python");
    python.setProcessEnvironment(env);
    const QString marker = dir.filePath("realized");
    python.start("/usr/bin/python3", {"-c", "import sys, time\nfrom tensorscope import Tensor\n"
                                            "for i in range(3): (Tensor([1.0, 2.0]) * (i + 2)).numpy()\n"
                                            "open(sys.argv[1], 'w').close()\ntime.sleep(60)\n", marker});
    QVERIFY(python.waitForStarted());
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(marker) || python.state() != QProcess::Running, 60000);
    QVERIFY2(python.state() == QProcess::Running, python.readAllStandardError().constData());
    QTest::qWait(300);  // more than the 100 ms commit interval
    python.kill();  // SIGKILL
    QVERIFY(python.waitForFinished());
    tsui::MainWindow window;
    window.show();
    QString error;
    QVERIFY2(window.openRecording(rec, &error), qPrintable(error));
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QCOMPARE(window.kernelCount(), 3);
    QVERIFY2(window.consoleText().contains("cut off"), qPrintable(window.consoleText()));
  }

  // A line breakpoint pauses with the lazy graph holding exactly the nodes made above that line, each
  // with its line; the graph shows them dashed; clicking a node selects its line in the editor, and the
  // cursor on a line marks the nodes it made ("what did line 3 become?").
  void lineBreakpointShowsTheLazyGraphOfTheLinesAbove() {
    QTemporaryDir dir;
    const QString path = dir.filePath("lazy.py");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(kLazyScript.toUtf8());
    f.close();
    tsui::MainWindow window;
    window.show();
    QVERIFY(window.openScript(path));
    window.editor()->toggleBreakpoint(5);
    QCOMPARE(window.editor()->breakpointLines(), QList<int>{5});
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(window.isPaused() || !window.isRunning(), kRunTimeoutMs);
    QVERIFY(window.isPaused());
    QCOMPARE(window.runner()->pausePoint().stage, QString("line"));
    QCOMPARE(window.runner()->pausePoint().line, 5);
    QCOMPARE(window.editor()->currentLine(), 5);
    QCOMPARE(window.kernelCount(), 0);  // nothing realized yet
    const tsui::RunModel& model = window.model();
    const auto lazy = model.lazyGraphAt(static_cast<int>(model.events().size()) - 1, 1000);
    QVERIFY(!lazy.pending.empty());
    QSet<int> lines;
    for (uint64_t uid : lazy.pending) lines.insert(model.whereMade(uid).line);
    QCOMPARE(lines, (QSet<int>{2, 3, 4}));  // every node so far, from lines 2-4 only
    QStringList opsOfLine3;
    for (uint64_t uid : model.nodesMadeAt(3)) opsOfLine3 << QString::fromStdString(model.createdNode(uid)->op);
    QVERIFY2(opsOfLine3.contains("MUL") && opsOfLine3.contains("ADD"), qPrintable(opsOfLine3.join(",")));
    QTRY_VERIFY_WITH_TIMEOUT(!window.isLayoutPending(), kRunTimeoutMs);
    QCOMPARE(window.graphPanel()->lazyNodeCount(), static_cast<int>(lazy.pending.size()));

    if (qEnvironmentVariableIsSet("TS_GUI_SHOTS")) {  // for people to look at (docs/debugger-paused.png)
      window.resize(1600, 1000);
      QTest::qWait(300);
      window.grab().save(QDir::temp().filePath("tensorscope_paused_at_line.png"));
    }
    // clicking the SUM node selects line 4
    const tsui::GraphLayout& layout = window.graphPanel()->layout();
    QVERIFY(layout.spec);
    const tsui::GraphSpecNode* sum = nullptr;
    for (const auto& n : layout.spec->nodes)
      if (n.info.op == "SUM") sum = &n;
    QVERIFY(sum);
    QVERIFY(sum->lazy);
    QCOMPARE(QString::fromStdString(model.whereMade(sum->info.uid).file), model.scriptPath());
    QCOMPARE(model.whereMade(sum->info.uid).line, 4);
    Q_EMIT window.graphPanel()->nodeClicked(*sum);
    int lineFrom = 0, indexFrom = 0, lineTo = 0, indexTo = 0;
    window.editor()->getSelection(&lineFrom, &indexFrom, &lineTo, &indexTo);
    QCOMPARE(lineFrom + 1, 4);
    // the properties say where it was made: the line, and the short call stack down from Tensor.sum
    const QString properties = window.findChild<tsui::PropertiesPanel*>()->toPlainText();
    QVERIFY2(properties.contains("made at") && properties.contains("line 4") && properties.contains("lazy.py:4") &&
                 properties.contains("Tensor.sum"),
             qPrintable(properties));
    // the cursor on line 3 names what it made
    window.editor()->setCursorPosition(2, 0);  // QScintilla says the cursor moved from its event loop
    QTRY_VERIFY2_WITH_TIMEOUT(
        window.lineInfoText().startsWith(QString("line 3 made %1 nodes").arg(model.nodesMadeAt(3).size())),
        qPrintable(window.lineInfoText()), 5000);
    QVERIFY2(window.lineInfoText().contains("no kernel yet"), qPrintable(window.lineInfoText()));

    window.continueOrRun();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), kRunTimeoutMs);
    QVERIFY(window.lastRunOk());
    // after the run, line 3's nodes fell into c's kernel (fused into it)
    window.editor()->setCursorPosition(3, 0);
    QTRY_VERIFY_WITH_TIMEOUT(window.lineInfoText().startsWith("line 4"), 5000);
    window.editor()->setCursorPosition(2, 0);
    QTRY_VERIFY2_WITH_TIMEOUT(window.lineInfoText().contains(" → #"), qPrintable(window.lineInfoText()), 5000);
    // ... and its kernel's row is marked in the kernel list, the others are not
    auto* list = window.findChild<tsui::KernelListPanel*>();
    QVERIFY(list);
    const std::vector<int> fromLine3 = model.kernelsFromLine(3);
    QCOMPARE(fromLine3.size(), size_t{1});
    int marked = 0;
    for (int row = 0; row < list->kernelCount(); ++row) {
      const bool on = list->model()->index(row, 0).data(Qt::BackgroundRole).isValid();
      marked += on;
      if (on) QCOMPARE(list->kernelAt(row), fromLine3[0]);
    }
    QCOMPARE(marked, 1);
  }

  // The pause console evaluates in the paused frame; what it realizes shows up as kernels. A script that
  // crashes while paused (here from the console) leaves the debugger usable.
  void pauseConsoleEvaluatesAndTheDebuggerSurvivesACrashWhilePaused() {
    tsui::MainWindow window;
    runPausedOnLine6(window);
    if (QTest::currentTestFailed()) return;
    QCOMPARE(window.runner()->pausePoint().line, 6);
    const int kernelsBefore = window.kernelCount();
    window.evaluate("(b * 10).numpy()");
    QTRY_VERIFY_WITH_TIMEOUT(window.consoleText().contains("[[30., 50.],"), kRunTimeoutMs);
    QTRY_VERIFY_WITH_TIMEOUT(window.kernelCount() > kernelsBefore, kRunTimeoutMs);
    QVERIFY(window.consoleText().contains("the console ran kernel #"));
    window.evaluate("print('shape', c.shape)");
    QTRY_VERIFY_WITH_TIMEOUT(window.consoleText().contains("shape (2,)"), kRunTimeoutMs);
    QVERIFY(window.isPaused());
    window.evaluate("import os; os._exit(3)");  // the script dies while paused
    QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), kRunTimeoutMs);
    QVERIFY2(window.statusText().contains("exit status 3"), qPrintable(window.statusText()));
    QVERIFY(window.editor()->text().contains("d = (a @ a).relu()"));  // the user's text is kept
    window.editor()->setBreakpoints({});
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QVERIFY(window.lastRunOk());
    QVERIFY(window.consoleText().contains("d [[ 7. 10.]"));
  }

  // An evaluation and F5 right after it: the evaluation runs, then the script goes on. The runner sends
  // the pause again after the evaluation; when that crosses F5 on the connection it is no pause (the
  // runner numbers its pauses), so the window never shows the script paused again.
  void anEvaluationThenContinueRunsToTheEnd() {
    tsui::MainWindow window;
    runPausedOnLine6(window);
    if (QTest::currentTestFailed()) return;
    QSignalSpy pauses(window.runner(), &tsui::RunnerProcess::paused);
    window.evaluate("print('evaluated', b.shape)");
    window.continueOrRun();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), kRunTimeoutMs);
    QVERIFY(window.lastRunOk());
    QCOMPARE(pauses.count(), 0);
    QVERIFY(window.consoleText().contains("evaluated (2, 2)"));
    QVERIFY(window.consoleText().contains("d [[ 7. 10.]"));
  }

  // A script paused on its last line that goes on ends normally: the marker and the console's input go.
  void aScriptThatEndsWhilePausedLeavesTheDebuggerUsable() {
    tsui::MainWindow window;
    window.show();
    window.editor()->setText(kLazyScript);
    window.editor()->toggleBreakpoint(7);
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(window.isPaused() || !window.isRunning(), kRunTimeoutMs);
    QCOMPARE(window.runner()->pausePoint().line, 7);
    QCOMPARE(window.editor()->currentLine(), 7);
    window.continueOrRun();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), kRunTimeoutMs);
    QVERIFY(window.lastRunOk());
    QCOMPARE(window.editor()->currentLine(), 0);
    QVERIFY(window.consoleText().contains("d [[ 7. 10.]"));
    // Ctrl+F10 on line 6 of a script that is not running: runs to it, then F5 stops at the breakpoint on 7
    window.editor()->setCursorPosition(5, 0);
    window.runToCursor();
    QTRY_VERIFY_WITH_TIMEOUT(window.isPaused() || !window.isRunning(), kRunTimeoutMs);
    QCOMPARE(window.runner()->pausePoint().line, 6);
    window.continueOrRun();
    QTRY_VERIFY_WITH_TIMEOUT(window.isPaused() || !window.isRunning(), kRunTimeoutMs);
    QCOMPARE(window.runner()->pausePoint().line, 7);
    window.continueOrRun();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), kRunTimeoutMs);
    QVERIFY(window.lastRunOk());
  }

  // A breakpoint on an op pauses before the launch of the first kernel that fuses it; the buffer
  // inspector then shows its inputs (the output is not computed yet), and F11 after the launch its output.
  void opBreakpointPausesAndTheBufferInspectorShowsTheLaunch() {
    tsui::MainWindow window;
    window.show();
    window.editor()->setText(kLazyScript);
    window.setKernelBreakpoints({}, {"SUM"}, {});
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(window.isPaused() || !window.isRunning(), kRunTimeoutMs);
    QVERIFY(window.isPaused());
    QCOMPARE(window.runner()->pausePoint().stage, QString("before launch"));
    QCOMPARE(window.runner()->pausePoint().detail, QString("breakpoint on op SUM"));
    tsui::BufferInspector* inspector = window.bufferInspector();
    QTRY_VERIFY_WITH_TIMEOUT(inspector->buffers().size() == 2, 10000);  // c's output and a
    QVERIFY2(inspector->buffers()[0].name.contains("output"), qPrintable(inspector->buffers()[0].name));
    QVERIFY(inspector->buffers()[0].values.empty());
    QVERIFY2(inspector->buffers()[0].unavailable.contains("not computed yet"), qPrintable(inspector->buffers()[0].unavailable));
    QCOMPARE(inspector->buffers()[1].values, (std::vector<double>{1, 2, 3, 4}));
    QCOMPARE(inspector->buffers()[1].shape, (std::vector<int64_t>{2, 2}));
    window.stepIntoNextStage();  // after the launch
    QTRY_VERIFY_WITH_TIMEOUT(window.isPaused() && window.runner()->pausePoint().stage == "after launch", kRunTimeoutMs);
    QTRY_VERIFY_WITH_TIMEOUT(!inspector->buffers().empty() && !inspector->buffers()[0].values.empty(), 10000);
    QCOMPARE(inspector->buffers()[0].values, (std::vector<double>{8, 16}));  // (a*2+1).sum(1), as NumPy says
    if (qEnvironmentVariableIsSet("TS_GUI_SHOTS")) {
      window.resize(1600, 1000);
      QTest::qWait(300);
      window.grab().save(QDir::temp().filePath("tensorscope_paused_after_launch.png"));
    }
    window.setKernelBreakpoints({}, {}, {});
    window.continueOrRun();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), kRunTimeoutMs);
    QVERIFY(window.lastRunOk());
  }

  // A multi-output kernel (fusion rule 6: b and c read a, one shape, one loop): paused after its launch, the
  // inspector shows each output, numbered, with its values, then the input.
  void theBufferInspectorShowsEveryOutputOfAMultiOutputKernel() {
    tsui::MainWindow window;
    window.show();
    window.editor()->setText(QStringLiteral("from tensorscope import Tensor\n"
                                            "a = Tensor([1.0, 2.0, 3.0]).realize()\n"
                                            "b, c = a + 1, a * 2\n"
                                            "Tensor.realize(b, c)\n"
                                            "print('b', b.numpy(), 'c', c.numpy())\n"));
    window.setKernelBreakpoints({}, {"MUL"}, {});
    window.runScript();
    QTRY_VERIFY_WITH_TIMEOUT(window.isPaused() || !window.isRunning(), kRunTimeoutMs);
    QVERIFY(window.isPaused());
    QCOMPARE(window.runner()->pausePoint().stage, QString("before launch"));
    window.stepIntoNextStage();  // after the launch
    QTRY_VERIFY_WITH_TIMEOUT(window.isPaused() && window.runner()->pausePoint().stage == "after launch", kRunTimeoutMs);
    tsui::BufferInspector* inspector = window.bufferInspector();
    QTRY_VERIFY_WITH_TIMEOUT(inspector->buffers().size() == 3 && !inspector->buffers()[1].values.empty(), 10000);
    const auto& buffers = inspector->buffers();
    QVERIFY2(buffers[0].name.contains("output 0"), qPrintable(buffers[0].name));
    QVERIFY2(buffers[1].name.contains("output 1"), qPrintable(buffers[1].name));
    QVERIFY2(buffers[2].name.contains("input 0"), qPrintable(buffers[2].name));
    QCOMPARE(buffers[0].values, (std::vector<double>{2, 3, 4}));  // a + 1
    QCOMPARE(buffers[1].values, (std::vector<double>{2, 4, 6}));  // a * 2
    QCOMPARE(buffers[2].values, (std::vector<double>{1, 2, 3}));
    QCOMPARE(buffers[1].shape, (std::vector<int64_t>{3}));
    window.continueOrRun();
    QTRY_VERIFY_WITH_TIMEOUT(!window.isRunning(), kRunTimeoutMs);
    QVERIFY(window.lastRunOk());
    QVERIFY2(window.consoleText().contains("b [2. 3. 4.] c [2. 4. 6.]"), qPrintable(window.consoleText()));
  }

  // In a recording, F10 and Step Back move the current event from launch to launch, and every panel
  // (kernel list, IR and source, event browser, graph, the buffers recorded with Record Buffers) follows
  // it backwards as well as forwards.
  void steppingBackwardsInARecordingRestoresThePanels() {
    QTemporaryDir dir;
    const QString saved = dir.filePath("quickstart.tsrec");
    {
      tsui::MainWindow window;
      window.show();
      window.setRecordBuffers(true);
      QVERIFY(window.openScript(kQuickstart));
      window.runScript();
      QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
      QString error;
      QVERIFY2(window.saveRecording(saved, &error), qPrintable(error));
    }
    tsui::MainWindow window;
    window.show();
    QString error;
    QVERIFY2(window.openRecording(saved, &error), qPrintable(error));
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    const std::vector<int> ids = window.model().kernelIds();
    QCOMPARE(ids.size(), size_t{3});
    window.setCurrentEvent(0);
    QList<int> forward, events;
    for (size_t i = 0; i < ids.size(); ++i) {
      window.stepToNextLaunch();  // F10 in a recording: the next launch
      forward << window.selectedKernel();
      events << window.currentEvent();
      QCOMPARE(window.eventBrowser()->currentEvent(), window.currentEvent());
      QCOMPARE(window.model().eventOfLaunch(window.selectedKernel()), window.currentEvent());
    }
    QCOMPARE(forward, (QList<int>{ids[0], ids[1], ids[2]}));
    window.stepRecording(-1);
    QCOMPARE(window.selectedKernel(), ids[1]);
    QCOMPARE(window.currentEvent(), events[1]);
    QTRY_VERIFY_WITH_TIMEOUT(!window.isBusy(), kRunTimeoutMs);
    QCOMPARE(window.graphPanel()->highlightedKernel(), ids[1]);
    window.stepRecording(-1);
    QCOMPARE(window.selectedKernel(), ids[0]);
    QCOMPARE(window.eventBrowser()->currentEvent(), events[0]);
    // the first kernel sums y @ x: its input is y = [[2, 0, -2]] and its output the sum, 0
    const auto& buffers = window.bufferInspector()->buffers();
    QCOMPARE(buffers.size(), size_t{2});
    QCOMPARE(buffers[0].values, (std::vector<double>{0}));
    QCOMPARE(buffers[1].values, (std::vector<double>{2, 0, -2}));
  }
};

QTEST_MAIN(GuiTest)
#include "test_gui.moc"
