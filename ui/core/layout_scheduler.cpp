#include "core/layout_scheduler.h"

#include <QMetaObject>
#include <QtConcurrent/QtConcurrentRun>

namespace tsui {

LayoutScheduler::LayoutScheduler(QObject* parent) : QObject(parent) {
  pool_.setMaxThreadCount(1);
  pool_.setObjectName("layout");
  throttle_.setSingleShot(true);
  throttle_.setInterval(kThrottleMs);
  connect(&throttle_, &QTimer::timeout, this, &LayoutScheduler::startJob);
}

LayoutScheduler::~LayoutScheduler() {
  ++generation_;  // queued jobs skip graphviz
  pool_.waitForDone();
}

void LayoutScheduler::request(GraphSpec spec) {
  pending_ = std::make_shared<const GraphSpec>(std::move(spec));
  ++generation_;
  if (!throttle_.isActive()) throttle_.start();
  setBusy(true);
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
    GraphLayout layout = layoutGraph(spec);
    QMetaObject::invokeMethod(
        this, [this, generation, layout] { deliver(generation, layout); }, Qt::QueuedConnection);
  });
}

void LayoutScheduler::deliver(quint64 generation, const GraphLayout& layout) {
  if (generation == awaited_) awaited_ = 0;
  // Only the newest request is shown: an older graph would flash before the newer one replaces it.
  if (generation == generation_) Q_EMIT laidOut(layout);
  setBusy(isBusy());
}

void LayoutScheduler::setBusy(bool busy) {
  if (busy == busy_) return;
  busy_ = busy;
  Q_EMIT busyChanged(busy);
}

}  // namespace tsui
