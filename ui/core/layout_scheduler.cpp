#include "core/layout_scheduler.h"

#include <QMetaObject>
#include <QtConcurrent/QtConcurrentRun>

namespace tsui {

LayoutScheduler::LayoutScheduler(QObject* parent) : QObject(parent) {
  pool_.setMaxThreadCount(1);
  pool_.setObjectName("layout");
  throttle_.setSingleShot(true);
  throttle_.setInterval(kThrottleMs);
  connect(&throttle_, &QTimer::timeout, this, [this] {
    if (!pending_) return;  // nothing asked for since the last start: the interval just ends
    startJob();
    throttle_.start();
  });
}

LayoutScheduler::~LayoutScheduler() {
  ++generation_;  // queued jobs skip graphviz, a running one kills its dot
  pool_.waitForDone();
}

QByteArray LayoutScheduler::shapeOf(const GraphSpec& spec) {
  QHash<int, int> clusterIndex;
  for (int i = 0; i < static_cast<int>(spec.clusters.size()); ++i) clusterIndex.insert(spec.clusters[i].kernelId, i);
  QByteArray shape = spec.leftToRight ? "LR\n" : "TB\n";
  for (const GraphSpecCluster& c : spec.clusters) shape += c.name.toUtf8() + '\n';
  for (const GraphSpecNode& n : spec.nodes)
    shape += n.label.toUtf8() + '\x1f' + QByteArray::number(clusterIndex.value(n.kernelId, -1)) + '\n';
  for (const auto& [a, b] : spec.edges) shape += QByteArray::number(a) + ' ' + QByteArray::number(b) + '\n';
  return shape;
}

void LayoutScheduler::request(GraphSpec spec) {
  if (last_.spec && shapeOf(spec) == lastShape_) {
    throttle_.stop();  // whatever was pending is older than this graph
    pending_.reset();
    ++generation_;
    awaited_ = 0;
    auto newSpec = std::make_shared<const GraphSpec>(std::move(spec));
    GraphLayout layout = last_;
    QHash<int, int> oldCluster;
    for (int i = 0; i < static_cast<int>(last_.spec->clusters.size()); ++i)
      oldCluster.insert(last_.spec->clusters[i].kernelId, i);
    for (LaidOutCluster& c : layout.clusters) {
      const GraphSpecCluster& now = newSpec->clusters[oldCluster.value(c.kernelId)];
      c.kernelId = now.kernelId;
      c.label = now.name;
    }
    layout.spec = newSpec;
    layout.seconds = layout.dotSeconds = 0;  // relabelled, not laid out again
    last_ = layout;
    setBusy(false);
    Q_EMIT laidOut(layout);
    return;
  }
  pending_ = std::make_shared<const GraphSpec>(std::move(spec));
  ++generation_;
  setBusy(true);
  // Leading and trailing edge: a request after a quiet interval starts at once (the run's last graph is
  // laid out as soon as it is asked for: 60 ms of a batch screenshot were spent waiting here); one inside
  // the interval waits for its end, and only the newest of those is laid out.
  if (!throttle_.isActive()) {
    startJob();
    throttle_.start();
  }
}

void LayoutScheduler::cancel() {
  throttle_.stop();
  pending_.reset();
  ++generation_;
  awaited_ = 0;
  setBusy(false);
}

void LayoutScheduler::startJob() {
  if (!pending_) return;
  const quint64 generation = generation_;
  awaited_ = generation;
  std::shared_ptr<const GraphSpec> spec = std::move(pending_);
  (void)QtConcurrent::run(&pool_, [this, spec, generation] {
    if (generation != generation_) return;  // a newer graph arrived while this one waited
    LayoutControl control;
    control.cancelled = [this, generation] { return generation != generation_; };
    control.progress = [this, generation](LayoutPhase phase) {
      QMetaObject::invokeMethod(
          this, [this, generation, phase] { reportPhase(generation, phase); }, Qt::QueuedConnection);
    };
    GraphLayout layout = layoutGraph(spec, control);
    QByteArray shape = shapeOf(*spec);  // here, not on the GUI thread: a few ms for 10,000 nodes
    QMetaObject::invokeMethod(
        this, [this, generation, layout, shape] { deliver(generation, layout, shape); }, Qt::QueuedConnection);
  });
}

void LayoutScheduler::reportPhase(quint64 generation, LayoutPhase phase) {
  if (generation == generation_) Q_EMIT phaseChanged(phase);
}

void LayoutScheduler::deliver(quint64 generation, const GraphLayout& layout, const QByteArray& shape) {
  if (generation == awaited_) awaited_ = 0;
  if (layout.cancelled) Q_EMIT layoutStopped();
  // Only the newest request is shown: an older graph would flash before the newer one replaces it.
  if (generation != generation_) return setBusy(isBusy());
  if (layout.error.isEmpty()) {
    last_ = layout;
    lastShape_ = shape;
  }
  Q_EMIT laidOut(layout);
  setBusy(isBusy());
}

void LayoutScheduler::setBusy(bool busy) {
  if (busy == busy_) return;
  busy_ = busy;
  Q_EMIT busyChanged(busy);
}

}  // namespace tsui
