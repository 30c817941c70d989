#include "core/timeline_model.h"

#include <algorithm>

#include "core/run_model.h"

namespace tsui {

void TimelineModel::clear() {
  recorder_ = ts::TraceRecorder();
  lanes_.clear();
  // The fixed lanes, in the order they are drawn; devices' launch lanes go before the autotune lane.
  for (auto [name, kind] : {std::pair{ts::kScriptLane, ts::TraceSpan::Script}, {ts::kSchedulesLane, ts::TraceSpan::Schedule},
                            {ts::kCompilesLane, ts::TraceSpan::Compile}, {ts::kAutotuneLane, ts::TraceSpan::AutotuneTrial}})
    lanes_.push_back({QString::fromUtf8(name), kind, {}, {}, {}});
  laneNames_.clear();
  for (const Lane& lane : lanes_) laneNames_.push_back(lane.name.toStdString());
  lastLane_ = -1;
  processedEvents_ = processedSpans_ = 0;
  endUs_ = 0;
  launches_ = 0;
  launchOfKernel_.clear();
}

int TimelineModel::laneFor(const ts::TraceSpan& span) {
  if (lastLane_ >= 0 && laneNames_[lastLane_] == span.lane) return lastLane_;  // launches come in runs
  auto it = std::find(laneNames_.begin(), laneNames_.end(), span.lane);
  if (it == laneNames_.end()) {
    // a device's launches: a new lane before the autotune lane (the last)
    lanes_.insert(lanes_.end() - 1, Lane{QString::fromStdString(span.lane), span.kind, {}, {}, {}});
    it = laneNames_.insert(laneNames_.end() - 1, span.lane);
  }
  return lastLane_ = static_cast<int>(it - laneNames_.begin());
}

bool TimelineModel::update() {
  const auto& events = model_->events();
  if (events.size() < processedEvents_) clear();  // the model was cleared behind our back
  // about one span per event; geometric growth, so that a live run's small batches do not copy every span
  if (const size_t need = recorder_.spans.size() + (events.size() - processedEvents_); need > recorder_.spans.capacity())
    recorder_.spans.reserve(std::max(need, 2 * recorder_.spans.capacity()));
  for (; processedEvents_ < events.size(); ++processedEvents_) {
    const RunModel::EventRef& e = events[processedEvents_];
    // Without a time (events added by hand), an event ends as soon as it can after the ones before it.
    const double known = e.timeNs >= 0 ? static_cast<double>(e.timeNs) / 1e3 : -1;
    const double after = recorder_.last_end_us();
    switch (e.kind) {
      case RunModel::EventRef::Nodes:
        recorder_.add_nodes(model_->nodeEvents()[e.index], known >= 0 ? known : after);
        break;
      case RunModel::EventRef::Schedule:
        recorder_.add_schedule(model_->scheduleAsArrived(e.index), known >= 0 ? known : after);
        break;
      case RunModel::EventRef::Launch:
        if (const ts::KernelRunEvent* run = model_->kernelRun(e.index))
          recorder_.add_launch(*run, known >= 0 ? known
                                                : after + run->time_ms * 1e3 + (run->compile_cache_hit ? 0 : run->compile_ms * 1e3));
        break;
      case RunModel::EventRef::Trial: {
        const ts::AutotuneTrialEvent& trial = model_->trials()[e.index];
        recorder_.add_autotune_trial(trial, known >= 0 ? known : after + (trial.compile_ms + trial.time_ms) * 1e3);
        break;
      }
      case RunModel::EventRef::Output: break;
    }
  }
  const auto& spans = recorder_.spans;
  const bool added = processedSpans_ < spans.size();
  for (; processedSpans_ < spans.size(); ++processedSpans_) {
    const ts::TraceSpan& s = spans[processedSpans_];
    Lane& lane = lanes_[laneFor(s)];
    const int index = static_cast<int>(processedSpans_);
    lane.spans.push_back(index);
    lane.starts.push_back(s.start_us);
    lane.ends.push_back(s.start_us + s.duration_us);
    endUs_ = std::max(endUs_, s.start_us + s.duration_us);
    if (s.kind == ts::TraceSpan::Launch) {
      launches_++;
      launchOfKernel_[s.kernel_id] = index;
    }
  }
  return added;
}

int TimelineModel::spanAt(int laneIndex, double us, double toleranceUs) const {
  if (laneIndex < 0 || laneIndex >= static_cast<int>(lanes_.size())) return -1;
  const Lane& lane = lanes_[laneIndex];
  // the first span that ends at or after us - tolerance; then the nearest of it and its neighbour
  auto it = std::lower_bound(lane.ends.begin(), lane.ends.end(), us - toleranceUs);
  int best = -1;
  double bestDistance = toleranceUs;
  for (size_t i = static_cast<size_t>(it - lane.ends.begin()); i < lane.ends.size() && lane.starts[i] <= us + toleranceUs; ++i) {
    const double distance = us < lane.starts[i] ? lane.starts[i] - us : us > lane.ends[i] ? us - lane.ends[i] : 0;
    if (distance <= bestDistance) {
      if (distance == 0) return lane.spans[i];
      best = lane.spans[i];
      bestDistance = distance;
    }
  }
  return best;
}

int TimelineModel::launchSpanOfKernel(int kernelId) const {
  auto it = launchOfKernel_.find(kernelId);
  return it == launchOfKernel_.end() ? -1 : it->second;
}

void TimelineModel::forEachVisible(int laneIndex, double t0, double t1, double mergeUs,
                                   const std::function<void(double, double, int, int)>& f) const {
  const Lane& lane = lanes_[laneIndex];
  const auto& starts = lane.starts;
  const auto& ends = lane.ends;
  const size_t n = ends.size();
  size_t i = static_cast<size_t>(std::lower_bound(ends.begin(), ends.end(), t0) - ends.begin());
  while (i < n && starts[i] <= t1) {
    const double start = starts[i];
    double end = ends[i];
    size_t j = i + 1;
    if (end - start < mergeUs) {  // a thin span: a run of the thin spans that follow within a pixel
      while (j < n && starts[j] <= end + mergeUs) {
        // every span that ends within a pixel of the run's end joins it at once (binary search: a run
        // over 100,000 launches costs a few steps per pixel, not one per launch)
        const auto from = ends.begin() + static_cast<std::ptrdiff_t>(j);
        const size_t k = static_cast<size_t>(std::upper_bound(from, ends.end(), end + mergeUs) - ends.begin());
        if (k > j) {
          end = ends[k - 1];
          j = k;
        } else if (ends[j] - starts[j] < mergeUs) {
          end = ends[j++];
        } else {
          break;  // a wide span: drawn on its own
        }
      }
    }
    f(start, end, lane.spans[i], static_cast<int>(j - i));
    i = j;
  }
}

QString formatDurationUs(double us) {
  if (us == 0) return "0";
  if (us >= 1e6) return QString("%1 s").arg(us / 1e6, 0, 'f', 2);
  if (us >= 1e3) return QString("%1 ms").arg(us / 1e3, 0, 'f', us >= 1e5 ? 0 : 2);
  if (us >= 1) return QString("%1 µs").arg(us, 0, 'f', us >= 100 ? 0 : 1);
  return QString("%1 ns").arg(us * 1e3, 0, 'f', 0);
}

QString formatQuantity(double value, const QString& unit) {
  static const char* const prefixes[] = {"", " k", " M", " G", " T", " P"};
  int p = 0;
  while (value >= 1000 && p < 5) value /= 1000, ++p;
  return QString("%1%2%3").arg(value, 0, 'f', value >= 100 || p == 0 ? 0 : 1).arg(prefixes[p]).arg(p ? unit : " " + unit);
}

QString TimelineModel::describe(int index) const {
  if (index < 0 || index >= static_cast<int>(spans().size())) return {};
  const ts::TraceSpan& s = spans()[index];
  QStringList lines;
  lines << QString("<b>%1</b>").arg(QString::fromStdString(s.name).toHtmlEscaped());
  if (s.kernel_id >= 0) lines << QString("kernel #%1").arg(s.kernel_id);
  auto at = [](double us) { return QString("%1 ms").arg(us / 1e3, 0, 'f', 3); };  // to the µs
  lines << (s.duration_us > 0 ? QString("%1, from %2 to %3")
                                    .arg(formatDurationUs(s.duration_us), at(s.start_us), at(s.start_us + s.duration_us))
                              : QString("at %1").arg(at(s.start_us)));
  if (s.kind == ts::TraceSpan::Launch) {
    if (s.flops >= 0 && s.bytes >= 0) {
      lines << QString("%1, %2 moved (%3 FLOP/byte)")
                   .arg(formatQuantity(s.flops, "FLOP"), formatQuantity(s.bytes, "B"))
                   .arg(s.bytes > 0 ? s.flops / s.bytes : 0.0, 0, 'g', 3);
      if (s.duration_us > 0)
        lines << QString("%1 GFLOP/s, %2 GB/s")
                     .arg(s.flops / s.duration_us / 1e3, 0, 'f', 2)
                     .arg(s.bytes / s.duration_us / 1e3, 0, 'f', 2);
    } else {
      lines << "FLOPs and bytes: not known (a recording made before they were counted)";
    }
  }
  for (const auto& [key, value] : s.args)
    lines << QString("%1: %2").arg(QString::fromStdString(key), QString::fromStdString(value).toHtmlEscaped());
  return lines.join("<br>");
}

}  // namespace tsui
