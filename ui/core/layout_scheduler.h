// Runs graph layouts on the layout thread; only the newest request's result is delivered.
//
// Schedules arrive in bursts while a script runs. Requests are throttled (one layout starts at most
// every kThrottleMs: a request after a quiet interval starts at once, the newest of those made within the
// interval when it ends) and each job carries a generation number: a queued job that is already stale
// skips graphviz entirely, a running one is stopped (layoutGraph kills its `dot` process within
// LayoutControl::kPollMs of a newer request, cancel() or the scheduler's destruction), and a result
// that is stale all the same is dropped. While a job runs, phaseChanged says what dot is doing.
//
// A training loop schedules the same graph every step with new uids and kernel ids: a request whose
// graph has the shape of the last laid-out one (same labels, clusters and edges) reuses that layout's
// geometry at once, with the new nodes and kernels, and graphviz does not run (it would take the CPU
// from the script being watched).
#pragma once
#include <QObject>
#include <QThreadPool>
#include <QTimer>
#include <atomic>
#include <memory>

#include "core/graph_layout.h"

namespace tsui {

class LayoutScheduler : public QObject {
  Q_OBJECT
 public:
  explicit LayoutScheduler(QObject* parent = nullptr);
  ~LayoutScheduler() override;  // waits for a running layout: the job posts back to this object

  void request(GraphSpec spec);
  void cancel();
  // True from a request until its result is delivered (or cancelled).
  bool isBusy() const { return pending_ != nullptr || awaited_ != 0; }
  // True while a request waits for the throttle interval to end (its layout has not started).
  bool isWaiting() const { return pending_ != nullptr; }

  static constexpr int kThrottleMs = 60;

 signals:
  void busyChanged(bool busy);
  void phaseChanged(tsui::LayoutPhase phase);  // of the layout now running (GraphPanel shows it)
  void laidOut(const tsui::GraphLayout& layout);
  void layoutStopped();  // a running layout was superseded or cancelled, and its dot process killed

 private:
  void startJob();
  void deliver(quint64 generation, const GraphLayout& layout, const QByteArray& shape);
  void reportPhase(quint64 generation, LayoutPhase phase);
  void setBusy(bool busy);
  static QByteArray shapeOf(const GraphSpec& spec);

  QThreadPool pool_;  // one thread: the layout thread
  GraphLayout last_;    // the last layout delivered without error
  QByteArray lastShape_;
  QTimer throttle_;
  std::shared_ptr<const GraphSpec> pending_;
  std::atomic<quint64> generation_{0};
  quint64 awaited_ = 0;  // generation whose result is wanted; 0: none
  bool busy_ = false;
};

}  // namespace tsui
