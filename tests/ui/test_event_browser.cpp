// QtTest of the event browser, offscreen, over a RunModel filled by hand with the events of a
// two-step training loop: the rows grouped by script line in time order, kernel rows and their
// EIDs, clicks, the current-event marker, appending without a reset, the filter, clearing, and
// the time to list 200 schedules x 80 launches.
//
// EVENT_BROWSER_SHOTS=1 also saves the panel as /tmp/event_browser*.png, to look at.
#include <QAbstractItemModel>
#include <QElapsedTimer>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTreeView>
#include <QtTest>
#include <functional>

#include "core/run_model.h"
#include "panels/event_browser.h"

using tsui::EventBrowser;
using tsui::RunModel;

namespace {

const char* kScriptPath = "train.py";
// the script the loop runs; lines are 1-based
const QString kScript =
    "from tensorscope import Tensor\n"                      // 1
    "\n"                                                    // 2
    "w = Tensor.rand(16, 16)\n"                             // 3
    "for step in range(2):\n"                               // 4
    "  # one step\n"                                        // 5
    "  #\n"                                                 // 6
    "  #\n"                                                 // 7
    "  #\n"                                                 // 8
    "  x = Tensor.rand(4, 16)\n"                            // 9
    "  y = (x @ w).relu().realize()\n"                      // 10
    "  #\n"                                                 // 11
    "  loss = y.sum().realize()\n"                          // 12
    "  print('loss', loss.item())\n";                       // 13

// Nodes made at `lines` of the script, one node per entry.
ts::NodesEvent nodes(uint64_t firstUid, const std::vector<int>& lines, std::vector<uint64_t> freed = {}) {
  auto batch = std::make_shared<ts::NodeBatch>();
  for (int line : lines) {
    ts::GraphNodeInfo n;
    n.uid = batch->nodes.size();
    n.op = "ADD";
    n.shape = {4, 16};
    n.dtype = "float32";
    batch->nodes.push_back(n);
    ts::SourceStack stack;
    stack.frames.push_back({kScriptPath, line, "<module>"});
    stack.user = 0;
    batch->stack.push_back(static_cast<int>(batch->stacks.size()));
    batch->stacks.push_back(stack);
  }
  ts::NodesEvent e;
  e.first_uid = firstUid;
  e.batch = batch;
  e.freed_uids = std::move(freed);
  return e;
}

ts::ScheduleEvent schedule(int id, int line, const std::vector<std::pair<int, std::string>>& kernels,
                           std::string file = kScriptPath) {
  ts::ScheduleEvent s;
  s.schedule_id = id;
  s.where = {std::move(file), line};
  for (const auto& [kernelId, name] : kernels) {
    ts::KernelInfo k;
    k.id = kernelId;
    k.name = name;
    k.device = "CPU";
    s.kernels.push_back(k);
  }
  return s;
}

ts::KernelRunEvent launch(int kernelId, const std::string& name, double ms, int replayOf = -1) {
  ts::KernelRunEvent r;
  r.kernel_id = kernelId;
  r.name = name;
  r.device = "CPU";
  r.compile_cache_hit = kernelId > 2;
  r.compile_ms = r.compile_cache_hit ? 0 : 12.5;
  r.time_ms = ms;
  r.replayed = replayOf >= 0;
  r.replay_of = replayOf;
  return r;
}

ts::ScriptOutputEvent output(const std::string& text) { return {ts::ScriptOutputEvent::Stdout, text}; }

// The time of kernel `id` in the fixture: distinct per kernel.
double timeOf(int id) { return 0.001 * (id + 1); }

// Step 0 of the loop: x and y at lines 9-10, realized at line 10 (E_4_16, r_4_16), the sum at 12
// (r_4), the print at 13. Kernels 0, 1, 2.
void step0(RunModel& m) {
  m.addNodes(nodes(100, {9, 10, 10}));
  m.addSchedule(schedule(0, 10, {{0, "E_4_16"}, {1, "r_4_16"}}));
  m.addKernelRun(launch(0, "E_4_16", timeOf(0)));
  m.addKernelRun(launch(1, "r_4_16", timeOf(1)));
  m.addNodes(nodes(103, {12}));
  m.addSchedule(schedule(1, 12, {{2, "r_4"}}));
  m.addKernelRun(launch(2, "r_4", timeOf(2)));
  m.addOutput(output("loss 0.5\n"));
}

// Step 1: the same, but line 10 realizes twice in a row (two schedules, one stretch). Kernels 3..6.
void step1(RunModel& m) {
  m.addNodes(nodes(104, {9, 10}, {100, 101}));
  m.addSchedule(schedule(2, 10, {{3, "E_4_16"}, {4, "r_4_16"}}));
  m.addKernelRun(launch(3, "E_4_16", timeOf(3)));
  m.addKernelRun(launch(4, "r_4_16", timeOf(4)));
  m.addSchedule(schedule(3, 10, {{5, "E_4_16n2"}}));
  m.addKernelRun(launch(5, "E_4_16n2", timeOf(5)));
  m.addNodes(nodes(106, {12}));
  m.addSchedule(schedule(4, 12, {{6, "r_4"}}));
  m.addKernelRun(launch(6, "r_4", timeOf(6)));
  m.addOutput(output("loss 0.25\n"));
}

QString text(const QModelIndex& i) { return i.data().toString(); }
QString column(const QModelIndex& i, int c) { return i.siblingAtColumn(c).data().toString(); }
QStringList childTexts(const QAbstractItemModel* m, const QModelIndex& parent) {
  QStringList t;
  for (int r = 0; r < m->rowCount(parent); ++r) t << text(m->index(r, 0, parent));
  return t;
}

void walk(const QAbstractItemModel* m, const QModelIndex& parent, const std::function<void(const QModelIndex&)>& f) {
  for (int r = 0; r < m->rowCount(parent); ++r) {
    const QModelIndex i = m->index(r, 0, parent);
    f(i);
    walk(m, i, f);
  }
}

QList<QModelIndex> currentRows(const QAbstractItemModel* m) {
  QList<QModelIndex> rows;
  walk(m, {}, [&](const QModelIndex& i) {
    if (i.data(EventBrowser::CurrentRole).toBool()) rows << i;
  });
  return rows;
}

QString kernelText(int id, const char* name) {
  return QString("#%1 %2  %3 ms").arg(id).arg(name).arg(timeOf(id), 0, 'f', 3);
}

void saveShot(QWidget& w, const QString& name) {
  if (qEnvironmentVariableIsEmpty("EVENT_BROWSER_SHOTS")) return;
  QVERIFY(w.grab().save(QString("/tmp/event_browser%1.png").arg(name)));
}

}  // namespace

class TestEventBrowser : public QObject {
  Q_OBJECT

  RunModel model_;

  void fill(EventBrowser& b) {
    model_.clear();
    model_.setScriptPath(kScriptPath);
    b.setModel(&model_);
    b.setScriptText(kScript);
    step0(model_);
    step1(model_);
    b.refresh();
  }

 private slots:
  void groupsConsecutiveSchedulesByLineInTimeOrder() {
    EventBrowser b;
    fill(b);
    const QAbstractItemModel* m = b.eventModel();
    // line 10 of step 1 is a stretch of its own: stretches are never merged across time
    QCOMPARE(childTexts(m, {}), (QStringList{"line 10: y = (x @ w).relu().realize()", "line 12: loss = y.sum().realize()",
                                             "line 10: y = (x @ w).relu().realize()", "line 12: loss = y.sum().realize()"}));
    QCOMPARE(childTexts(m, m->index(0, 0)), (QStringList{"nodes made: 3", "schedule 1 · 2 kernels"}));
    QCOMPARE(childTexts(m, m->index(1, 0)), (QStringList{"nodes made: 1", "schedule 2 · 1 kernel", "output: loss 0.5"}));
    // two schedules in a row from line 10: one stretch
    QCOMPARE(childTexts(m, m->index(2, 0)),
             (QStringList{"nodes made: 2 · freed 2", "schedule 3 · 2 kernels", "schedule 4 · 1 kernel"}));
    QCOMPARE(childTexts(m, m->index(3, 0)), (QStringList{"nodes made: 1", "schedule 5 · 1 kernel", "output: loss 0.25"}));

    // every event has exactly one row, and reading the tree top to bottom gives events() in order
    QList<int> eids;
    walk(m, {}, [&](const QModelIndex& i) {
      if (i.parent().isValid()) eids << column(i, 1).toInt();
    });
    QCOMPARE(eids.size(), static_cast<int>(model_.events().size()));
    for (int e = 0; e < eids.size(); ++e) QCOMPARE(eids[e], e);
    // a line row's EID is its first event's; its time the sum of its launches
    QCOMPARE(column(m->index(2, 0), 1), QString::number(model_.eventOfSchedule(2) - 1));
    QCOMPARE(column(m->index(2, 0), 2), QString::number(timeOf(3) + timeOf(4) + timeOf(5), 'f', 3));
    QCOMPARE(column(m->index(1, 0, m->index(2, 0)), 2), QString::number(timeOf(3) + timeOf(4), 'f', 3));
  }

  void kernelRowsTextsAndEids() {
    EventBrowser b;
    fill(b);
    const QAbstractItemModel* m = b.eventModel();
    int kernels = 0;
    for (int g = 0; g < m->rowCount(); ++g)
      for (int r = 0; r < m->rowCount(m->index(g, 0)); ++r) {
        const QModelIndex item = m->index(r, 0, m->index(g, 0));
        for (int k = 0; k < m->rowCount(item); ++k) {
          const QModelIndex row = m->index(k, 0, item);
          const int id = text(row).mid(1).section(' ', 0, 0).toInt();
          const ts::KernelInfo* info = model_.kernel(id);
          QVERIFY(info);
          QCOMPARE(text(row), kernelText(id, info->name.c_str()));
          QCOMPARE(column(row, 1), QString::number(model_.eventOfLaunch(id)));
          QCOMPARE(column(row, 2), QString::number(timeOf(id), 'f', 3));
          QCOMPARE(row.data(EventBrowser::EventRole).toInt(), model_.eventOfLaunch(id));
          QCOMPARE(b.rowText(model_.eventOfLaunch(id)), text(row));
          ++kernels;
        }
      }
    QCOMPARE(kernels, 7);
    QCOMPARE(b.rowText(model_.eventOfSchedule(4)), QString("schedule 5 · 1 kernel"));
    QCOMPARE(b.rowText(0), QString("nodes made: 3"));
    QCOMPARE(b.rowText(static_cast<int>(model_.events().size())), QString());
  }

  void clickingARowEmitsItsEvent() {
    EventBrowser b;
    fill(b);
    b.resize(520, 480);
    b.show();
    QVERIFY(QTest::qWaitForWindowExposed(&b));
    b.view()->expandAll();
    QSignalSpy selected(&b, &EventBrowser::eventSelected);

    const int launch4 = model_.eventOfLaunch(4);
    QModelIndex row = b.viewIndexOfEvent(launch4);
    QVERIFY(row.isValid());
    QTest::mouseClick(b.view()->viewport(), Qt::LeftButton, {}, b.view()->visualRect(row).center());
    QCOMPARE(selected.count(), 1);
    QCOMPARE(selected.takeFirst().at(0).toInt(), launch4);

    // a line row selects its first event: the nodes event before schedule 3
    const QModelIndex line = b.view()->model()->index(2, 0);
    QTest::mouseClick(b.view()->viewport(), Qt::LeftButton, {}, b.view()->visualRect(line).center());
    QCOMPARE(selected.count(), 1);
    QCOMPARE(selected.takeFirst().at(0).toInt(), model_.eventOfSchedule(2) - 1);

    // the keys walk the events too
    QTest::keyClick(b.view(), Qt::Key_Down);
    QCOMPARE(selected.count(), 1);
    QCOMPARE(selected.takeFirst().at(0).toInt(), model_.eventOfSchedule(2) - 1);  // the nodes row itself
    QTest::keyClick(b.view(), Qt::Key_Down);
    QCOMPARE(selected.takeFirst().at(0).toInt(), model_.eventOfSchedule(2));
  }

  void setCurrentEventMarksOneRowWithoutEmitting() {
    EventBrowser b;
    fill(b);
    b.resize(520, 480);
    b.show();
    QVERIFY(QTest::qWaitForWindowExposed(&b));
    QSignalSpy selected(&b, &EventBrowser::eventSelected);
    const QAbstractItemModel* m = b.eventModel();
    QVERIFY(currentRows(m).isEmpty());

    const int launch5 = model_.eventOfLaunch(5);
    b.setCurrentEvent(launch5);
    QCOMPARE(b.currentEvent(), launch5);
    QList<QModelIndex> rows = currentRows(m);
    QCOMPARE(rows.size(), 1);
    QCOMPARE(text(rows[0]), kernelText(5, "E_4_16n2"));
    QVERIFY(rows[0].data(Qt::FontRole).value<QFont>().bold());
    QVERIFY(!rows[0].data(Qt::DecorationRole).value<QIcon>().isNull());
    // expanded to it, selected, on screen
    const QModelIndex row = b.viewIndexOfEvent(launch5);
    QVERIFY(b.view()->isExpanded(row.parent()) && b.view()->isExpanded(row.parent().parent()));
    QCOMPARE(b.view()->currentIndex(), row);
    QVERIFY(b.view()->viewport()->rect().intersects(b.view()->visualRect(row)));
    saveShot(b, "");

    // moving it leaves exactly one row marked: the schedule's
    b.setCurrentEvent(model_.eventOfSchedule(1));
    rows = currentRows(m);
    QCOMPARE(rows.size(), 1);
    QCOMPARE(text(rows[0]), QString("schedule 2 · 1 kernel"));
    QVERIFY(!m->index(0, 0).data(Qt::FontRole).value<QFont>().bold());
    b.setCurrentEvent(-1);
    QVERIFY(currentRows(m).isEmpty());
    QCOMPARE(selected.count(), 0);
  }

  void refreshAppendsWithoutReset() {
    EventBrowser b;
    model_.clear();
    model_.setScriptPath(kScriptPath);
    b.setModel(&model_);
    b.setScriptText(kScript);
    step0(model_);
    b.refresh();
    b.view()->expand(b.view()->model()->index(0, 0));
    const QAbstractItemModel* m = b.eventModel();
    QSignalSpy resets(m, &QAbstractItemModel::modelReset);
    QSignalSpy inserted(m, &QAbstractItemModel::rowsInserted);
    QSignalSpy changed(m, &QAbstractItemModel::dataChanged);

    // nothing new: nothing happens
    b.refresh();
    QCOMPARE(inserted.count() + changed.count(), 0);

    // a schedule before its launches: rows say so, then fill in as the launches come
    model_.addNodes(nodes(104, {9, 10}));
    model_.addSchedule(schedule(2, 10, {{3, "E_4_16"}, {4, "r_4_16"}}));
    b.refresh();
    QVERIFY(inserted.count() > 0);
    const QModelIndex sched = m->index(1, 0, m->index(2, 0));
    QCOMPARE(text(sched), QString("schedule 3 · 2 kernels"));
    QCOMPARE(text(m->index(0, 0, sched)), QString("#3 E_4_16  (not launched yet)"));
    QCOMPARE(column(m->index(0, 0, sched), 1), QString());
    QCOMPARE(m->index(0, 0, sched).data(EventBrowser::EventRole).toInt(), model_.eventOfSchedule(2));
    model_.addKernelRun(launch(3, "E_4_16", timeOf(3)));  // scheduleAdded/kernelRunAdded refresh by themselves
    QCOMPARE(text(m->index(0, 0, sched)), kernelText(3, "E_4_16"));
    QVERIFY(changed.count() > 0);
    QCOMPARE(text(m->index(1, 0, sched)), QString("#4 r_4_16  (not launched yet)"));

    // the output of a print: appended by refresh(), which the window calls after each batch
    const int before = inserted.count();
    model_.addOutput(output("hello\nworld\n"));
    QCOMPARE(m->rowCount(m->index(2, 0)), 2);
    b.refresh();
    QCOMPARE(inserted.count(), before + 1);
    QCOMPARE(text(m->index(2, 0, m->index(2, 0))), QString("output: hello …"));
    QCOMPARE(m->index(2, 0, m->index(2, 0)).data(Qt::ToolTipRole).toString(), QString("hello\nworld\n"));

    // launches no schedule announced (a jit's replays): one run of them under the open line
    model_.addKernelRun(launch(50, "r_4_16", 0.5, 4));
    model_.addKernelRun(launch(51, "r_4", 0.25, 6));
    const QModelIndex run = m->index(3, 0, m->index(2, 0));
    QCOMPARE(text(run), QString("jit replay · 2 launches"));
    QCOMPARE(childTexts(m, run), (QStringList{"#50 r_4_16  0.500 ms · replay of #4", "#51 r_4  0.250 ms · replay of #6"}));
    QCOMPARE(b.rowText(model_.eventOfLaunch(51)), QString("#51 r_4  0.250 ms · replay of #6"));

    QCOMPARE(resets.count(), 0);
    QVERIFY(b.view()->isExpanded(b.view()->model()->index(0, 0)));  // the user's expansion survived
  }

  void unknownAndOtherFileLines() {
    EventBrowser b;
    model_.clear();
    model_.setScriptPath(kScriptPath);
    b.setModel(&model_);
    b.setScriptText(kScript);
    model_.addOutput(output("starting\n"));  // before any line: the unknown line
    model_.addSchedule(schedule(0, 0, {{0, "E_4"}}, ""));
    model_.addSchedule(schedule(1, 7, {{1, "E_4"}}, "/home/me/layers.py"));
    model_.addSchedule(schedule(2, 99, {{2, "E_4"}}));  // past the end of the text
    b.refresh();
    QCOMPARE(childTexts(b.eventModel(), {}), (QStringList{"(unknown line)", "layers.py:7", "line 99"}));
    QCOMPARE(childTexts(b.eventModel(), b.eventModel()->index(0, 0)),
             (QStringList{"output: starting", "schedule 1 · 1 kernel"}));
  }

  void filterHidesWhatDoesNotMatch() {
    EventBrowser b;
    fill(b);
    QSignalSpy selected(&b, &EventBrowser::eventSelected);
    b.setCurrentEvent(model_.eventOfLaunch(0));
    // the view shows the tree itself, or a filter proxy over it while a filter is typed: ask it each time
    const auto v = [&] { return b.view()->model(); };

    b.filterEdit()->setText("R_4_16");  // case does not matter
    // the two line-10 stretches hold the matches; only the kernel rows that match are left
    QCOMPARE(v()->rowCount(), 2);
    QStringList kernels;
    walk(v(), {}, [&](const QModelIndex& i) {
      if (i.parent().parent().isValid()) kernels << text(i);
    });
    QCOMPARE(kernels, (QStringList{kernelText(1, "r_4_16"), kernelText(4, "r_4_16")}));
    QVERIFY(!b.viewIndexOfEvent(model_.eventOfLaunch(0)).isValid());
    QVERIFY(b.viewIndexOfEvent(model_.eventOfLaunch(4)).isValid());

    // a line keeps everything under it
    b.filterEdit()->setText("line 12");
    QCOMPARE(v()->rowCount(), 2);
    QCOMPARE(childTexts(v(), v()->index(1, 0)), (QStringList{"nodes made: 1", "schedule 5 · 1 kernel", "output: loss 0.25"}));
    QCOMPARE(v()->rowCount(v()->index(1, 0, v()->index(1, 0))), 1);

    b.filterEdit()->setText("no such kernel");
    QCOMPARE(v()->rowCount(), 0);
    b.filterEdit()->clear();
    QCOMPARE(v()->rowCount(), 4);
    QCOMPARE(selected.count(), 0);  // filtering moves the view's current row, not the current event
  }

  void clearedEmptiesIt() {
    EventBrowser b;
    fill(b);
    b.setCurrentEvent(model_.eventOfLaunch(2));
    QSignalSpy selected(&b, &EventBrowser::eventSelected);
    model_.clear();
    QCOMPARE(b.eventModel()->rowCount(), 0);
    QCOMPARE(b.view()->model()->rowCount(), 0);
    QCOMPARE(b.currentEvent(), -1);
    QCOMPARE(b.rowText(0), QString());
    // and the next run fills it again
    step0(model_);
    b.refresh();
    QCOMPARE(b.eventModel()->rowCount(), 2);
    QCOMPARE(selected.count(), 0);
  }

  void twoHundredSchedulesOfEightyLaunchesListFast() {
    EventBrowser b;
    b.resize(520, 600);
    b.show();
    QVERIFY(QTest::qWaitForWindowExposed(&b));
    model_.clear();
    model_.setScriptPath(kScriptPath);
    b.setModel(&model_);
    b.setScriptText(kScript);
    QSignalSpy resets(b.eventModel(), &QAbstractItemModel::modelReset);
    QElapsedTimer timer;
    timer.start();
    int id = 0;
    for (int s = 0; s < 200; ++s) {
      model_.addNodes(nodes(uint64_t(s) * 100, {9, 10}));
      std::vector<std::pair<int, std::string>> kernels;
      for (int k = 0; k < 80; ++k) kernels.push_back({id + k, k % 2 ? "r_64_16" : "E_64_16"});
      model_.addSchedule(schedule(s, s % 2 ? 12 : 10, kernels));
      for (const auto& [kid, name] : kernels) model_.addKernelRun(launch(kid, name, 0.01));
      id += 80;
      b.refresh();  // one batch per schedule, as the window does
      if (s == 100) b.setCurrentEvent(model_.eventOfLaunch(id - 1));
    }
    QCoreApplication::processEvents();  // paint
    const qint64 ms = timer.elapsed();
    qInfo("200 schedules x 80 launches listed in %lld ms", ms);
    QCOMPARE(b.eventModel()->rowCount(), 200);
    QCOMPARE(b.rowText(model_.eventOfLaunch(15999)), QString("#15999 r_64_16  0.010 ms"));
    QCOMPARE(resets.count(), 0);
    QVERIFY2(ms < 1000, qPrintable(QString("took %1 ms").arg(ms)));
    b.setCurrentEvent(model_.eventOfLaunch(12001));
    // a jump centres the row (its schedule and line above it), at once
    const QRect rect = b.view()->visualRect(b.viewIndexOfEvent(model_.eventOfLaunch(12001)));
    const int height = b.view()->viewport()->height();
    QVERIFY2(rect.top() > height / 3 && rect.bottom() < height * 2 / 3,
             qPrintable(QString("row at y %1").arg(rect.top())));
    QCoreApplication::processEvents();
    saveShot(b, "_large");
    b.filterEdit()->setText("line 12");
    saveShot(b, "_filtered");
  }
};

QTEST_MAIN(TestEventBrowser)
#include "test_event_browser.moc"
