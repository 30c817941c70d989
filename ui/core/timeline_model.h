// The run on a time axis, for the timeline panel: the RunModel's events placed as spans by
// ts::TraceRecorder (tensorscope/chrome_trace.h, the same placement as `tensorscope-cli --trace` and File ▸
// Export Trace), sorted into lanes: the script (node batches), schedules, compiles, one lane per device's
// launches and the autotune trials.
//
// Spans of one lane never overlap and are sorted by start, so their ends are sorted too: the spans visible
// between two times are found by binary search, and forEachVisible() merges the spans that fall inside one
// pixel, so that painting costs O(pixels × log spans) however many launches the run has.
#pragma once
#include <QString>
#include <functional>
#include <unordered_map>
#include <vector>

#include "tensorscope/chrome_trace.h"

namespace tsui {

class RunModel;

class TimelineModel {
 public:
  explicit TimelineModel(const RunModel* model) : model_(model) { clear(); }

  // Forgets every span (a new run); the next update() reads the RunModel from its first event.
  void clear();
  // Places the RunModel's events that arrived since the last call. True when spans were added.
  bool update();

  struct Lane {
    QString name;                  // "script", "schedules", "compiles", "C launches", "autotune"
    ts::TraceSpan::Kind kind;      // what its spans are
    std::vector<int> spans;        // indices into spans(), by start
    std::vector<double> starts;    // µs, same order
    std::vector<double> ends;      // µs, same order (sorted: spans of a lane never overlap)
  };
  const std::vector<Lane>& lanes() const { return lanes_; }
  const std::vector<ts::TraceSpan>& spans() const { return recorder_.spans; }
  const ts::TraceRecorder& recorder() const { return recorder_; }
  double endUs() const { return endUs_; }  // µs: where the last span ends
  int launchCount() const { return launches_; }

  // The span of `lane` under time `us`, or the nearest one within `toleranceUs`; -1 when none.
  int spanAt(int lane, double us, double toleranceUs) const;
  // The span of a kernel's launch, or -1.
  int launchSpanOfKernel(int kernelId) const;

  // Calls f(startUs, endUs, span, count) for the spans of `lane` that overlap [t0Us, t1Us], in time order.
  // Spans closer together than `mergeUs` (a pixel) come as one run of `count` spans: `span` is the first,
  // and the run covers them all.
  void forEachVisible(int lane, double t0Us, double t1Us, double mergeUs,
                      const std::function<void(double, double, int, int)>& f) const;

  // A span's description for a tooltip: name, duration, and for a launch its FLOPs, bytes and rates.
  QString describe(int span) const;

 private:
  int laneFor(const ts::TraceSpan& span);
  const RunModel* model_;
  ts::TraceRecorder recorder_;
  std::vector<Lane> lanes_;
  std::vector<std::string> laneNames_;  // lanes_[i].name, as the spans spell it
  int lastLane_ = -1;
  size_t processedEvents_ = 0;
  size_t processedSpans_ = 0;
  double endUs_ = 0;
  int launches_ = 0;
  std::unordered_map<int, int> launchOfKernel_;  // kernel id -> its launch's span
};

// "1.23 ms", "45.6 µs", "2.00 s": a duration given in µs.
QString formatDurationUs(double us);
// "1.2 k", "3.4 M", "5.6 G" followed by `unit`.
QString formatQuantity(double value, const QString& unit);

}  // namespace tsui
