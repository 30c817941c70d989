#include "core/graph_spec.h"

#include <cstdlib>
#include <limits>

#include <QSet>
#include <algorithm>
#include <functional>

#include "core/op_palette.h"
#include "core/run_model.h"

namespace tsui {

QString shapeText(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  QStringList dims;
  for (int64_t d : shape) dims << QString::number(d);
  return dims.join("x");
}

namespace {

using ScheduleAt = std::function<const ts::ScheduleEvent&(int)>;

GraphSpec mergeScheduleRange(const ScheduleAt& schedules, int first, int last) {
  GraphSpec spec;
  QHash<quint64, QString> producedBy;  // uid -> key of the latest computed version
  QSet<QPair<int, int>> edgeSet;
  for (int s = first; s < last; ++s) {
    const ts::ScheduleEvent& schedule = schedules(s);
    const int kernelCount = static_cast<int>(schedule.kernels.size());
    QHash<quint64, QString> keyOfUid;  // this schedule's nodes

    for (const ts::GraphNodeInfo& n : schedule.nodes) {
      const bool computed = n.kernel >= 0 && n.kernel < kernelCount;
      const int kernelId = computed ? schedule.kernels[n.kernel].id : -1;
      QString key;
      if (computed) {
        key = QString("n%1_k%2").arg(n.uid).arg(kernelId);
        producedBy.insert(n.uid, key);
      } else {
        key = producedBy.value(n.uid, QString("n%1").arg(n.uid));
      }
      keyOfUid.insert(n.uid, key);
      if (spec.keyIndex.contains(key)) continue;
      spec.keyIndex.insert(key, static_cast<int>(spec.nodes.size()));
      spec.nodes.push_back({key, n, kernelId, QString::fromStdString(n.op) + "\n" + shapeText(n.shape), false, false, 0, {}, -1});
    }

    for (const ts::GraphNodeInfo& n : schedule.nodes) {
      const int dst = spec.indexOfKey(keyOfUid.value(n.uid));
      for (uint64_t srcUid : n.srcs) {
        QString srcKey = keyOfUid.value(srcUid, producedBy.value(srcUid));
        const int src = spec.indexOfKey(srcKey);
        if (src < 0 || src == dst || edgeSet.contains({src, dst})) continue;
        edgeSet.insert({src, dst});
        spec.edges.emplace_back(src, dst);
      }
    }
  }

  // A kernel gets a cluster only if it has a node to draw: graphviz drops empty clusters, and
  // the exported SVG must have exactly one cluster group per kernel shown.
  QSet<int> kernelsWithNodes;
  for (const GraphSpecNode& n : spec.nodes)
    if (n.kernelId >= 0) kernelsWithNodes.insert(n.kernelId);
  QSet<int> seen;
  for (int s = first; s < last; ++s)
    for (const ts::KernelInfo& k : schedules(s).kernels)
      if (kernelsWithNodes.contains(k.id) && !seen.contains(k.id)) {
        seen.insert(k.id);
        spec.clusters.push_back({k.id, QString::fromStdString(k.name)});
      }
  return spec;
}

// The model's schedules, each instantiated when first drawn (RunModel::schedule).
ScheduleAt schedulesOf(const RunModel& model) {
  return [&model](int i) -> const ts::ScheduleEvent& { return model.schedule(i); };
}

}  // namespace

GraphSpec mergeSchedules(const std::vector<ts::ScheduleEvent>& schedules, int first, int last) {
  return mergeScheduleRange([&schedules](int i) -> const ts::ScheduleEvent& { return schedules[i]; }, first, last);
}

GraphSpec buildViewGraph(const RunModel& model, bool wholeRun, int focusKernelId, const QSet<int>& toggled) {
  const ScheduleAt schedules = schedulesOf(model);
  const int count = model.scheduleCount();
  if (count == 0) return {};
  if (wholeRun && model.totalNodeCount() > kWholeRunNodeLimit) {
    return runOverview(model, toggled);
  } else if (wholeRun) {
    GraphSpec merged = mergeScheduleRange(schedules, 0, count);
    int boxes = static_cast<int>(merged.clusters.size());
    for (const GraphSpecNode& n : merged.nodes) boxes += n.kernelId < 0;
    if (boxes <= kWholeRunBoxLimit || static_cast<int>(merged.nodes.size()) <= kCollapseAboveNodes) {
      merged.description = count == 1 ? QString("1 schedule") : QString("whole run: %1 schedules").arg(count);
      merged.description += QString(" · %L1 nodes · %L2 kernels").arg(merged.nodes.size()).arg(merged.clusters.size());
      return merged;
    }
    return runOverview(model, toggled);
  }
  int s = model.scheduleOfKernel(focusKernelId);
  if (s < 0) s = count - 1;
  GraphSpec one = mergeScheduleRange(schedules, s, s + 1);
  one.schedule = s;
  one.description = QString("schedule %1 of %2 · %L3 nodes · %L4 kernels")
                        .arg(s + 1)
                        .arg(count)
                        .arg(one.nodes.size())
                        .arg(one.clusters.size());
  return one;
}

GraphSpec runOverview(const RunModel& model, const QSet<int>& expanded) {
  const ScheduleAt schedules = schedulesOf(model);
  const int count = model.scheduleCount();
  GraphSpec spec;
  // (uid, schedule) of every computed node, sorted: the schedule before `t` that computed a uid is a
  // binary search (a hash of 250,000 uids costs twice the time, on the GUI thread)
  std::vector<std::pair<uint64_t, int>> computed;
  computed.reserve(model.totalNodeCount());
  for (int s = 0; s < count; ++s) {  // (thin schedules stay thin: a training loop's steps are only counted)
    const int kernelCount = static_cast<int>(model.kernelIdsOf(s).size());
    model.forEachNodeOf(s, [&](uint64_t uid, const ts::GraphNodeInfo& n) {
      if (n.kernel >= 0 && n.kernel < kernelCount) computed.emplace_back(uid, s);
    });
  }
  std::sort(computed.begin(), computed.end());
  auto computedBefore = [&computed](uint64_t uid, int t) {  // the latest schedule < t computing uid; -1: none
    auto it = std::lower_bound(computed.begin(), computed.end(), std::pair<uint64_t, int>(uid, t));
    return it != computed.begin() && (--it)->first == uid ? it->second : -1;
  };
  QHash<quint64, int> computedNode;  // uid -> its node in `spec`, when that schedule is expanded
  QSet<qint64> edgeSet;
  auto addEdge = [&](int a, int b) {
    if (a < 0 || b < 0 || a == b || edgeSet.contains((qint64(a) << 32) | b)) return;
    edgeSet.insert((qint64(a) << 32) | b);
    spec.edges.emplace_back(a, b);
  };
  std::vector<int> boxOf(count, -1);
  int kernels = 0, shownSchedules = 0;
  for (int s = 0; s < count; ++s) kernels += static_cast<int>(model.kernelIdsOf(s).size());
  // only the last kOverviewMaxSchedules schedules get a box; the ones before are one box together
  const int first = std::max(0, count - kOverviewMaxSchedules);
  if (first > 0) {
    GraphSpecNode earlier;
    earlier.key = "s_earlier";
    earlier.collapsedNodes = 0;
    for (int s = 0; s < first; ++s) earlier.collapsedNodes += model.nodeCountOf(s);
    earlier.info.op = QString("schedules 1–%1").arg(first).toStdString();
    earlier.info.op_class = "kernel";
    earlier.label = QString("schedules 1–%L1\nnot shown: the overview draws the last %L2").arg(first).arg(kOverviewMaxSchedules);
    const int index = static_cast<int>(spec.nodes.size());
    std::fill(boxOf.begin(), boxOf.begin() + first, index);
    spec.keyIndex.insert(earlier.key, index);
    spec.nodes.push_back(std::move(earlier));
  }
  for (int s = first; s < count; ++s) {
    const int kernelCount = static_cast<int>(model.kernelIdsOf(s).size());
    if (expanded.contains(scheduleToggleId(s))) {
      const ts::ScheduleEvent& schedule = schedules(s);
      ++shownSchedules;
      GraphSpec one = mergeScheduleRange(schedules, s, s + 1);
      std::vector<int> at(one.nodes.size());  // one's node -> spec's (an input two schedules read is one node)
      for (size_t i = 0; i < one.nodes.size(); ++i) {
        GraphSpecNode& n = one.nodes[i];
        if (const int existing = spec.indexOfKey(n.key); existing >= 0) {
          at[i] = existing;
          continue;
        }
        const int index = at[i] = static_cast<int>(spec.nodes.size());
        // an input buffer an earlier schedule computed: fed by that schedule's box or node
        if (const int producer = n.kernelId < 0 ? computedBefore(n.info.uid, s) : -1; producer >= 0) {
          const int from = computedNode.value(n.info.uid, boxOf[producer]);
          addEdge(from, index);
        }
        spec.keyIndex.insert(n.key, index);
        spec.nodes.push_back(std::move(n));
      }
      for (auto [a, b] : one.edges) addEdge(at[a], at[b]);
      for (GraphSpecCluster& c : one.clusters) spec.clusters.push_back(std::move(c));
      for (const ts::GraphNodeInfo& n : schedule.nodes)
        if (n.kernel >= 0 && n.kernel < kernelCount) {
          computedNode.insert(n.uid, spec.indexOfKey(QString("n%1_k%2").arg(n.uid).arg(schedule.kernels[n.kernel].id)));
        }
      continue;
    }
    GraphSpecNode box;
    box.key = QString("s%1").arg(s);
    box.scheduleBox = s;
    box.collapsedNodes = model.nodeCountOf(s);
    box.info.op = QString("schedule %1").arg(s + 1).toStdString();
    box.info.op_class = "kernel";
    box.label = QString("schedule %1\n%L2 kernel%3 · %L4 nodes")
                    .arg(s + 1)
                    .arg(kernelCount)
                    .arg(kernelCount == 1 ? "" : "s")
                    .arg(box.collapsedNodes);
    const int index = static_cast<int>(spec.nodes.size());
    boxOf[s] = index;
    spec.keyIndex.insert(box.key, index);
    spec.nodes.push_back(std::move(box));
    model.forEachNodeOf(s, [&](uint64_t uid, const ts::GraphNodeInfo& n) {
      const bool isComputed = n.kernel >= 0 && n.kernel < kernelCount;
      if (const int producer = isComputed ? -1 : computedBefore(uid, s); producer >= 0)
        addEdge(computedNode.value(uid, boxOf[producer]), index);
    });
    if (!computedNode.isEmpty())  // an expanded schedule's node recomputed here: this box feeds its readers
      model.forEachNodeOf(s, [&](uint64_t uid, const ts::GraphNodeInfo& n) {
        if (n.kernel >= 0 && n.kernel < kernelCount) computedNode.remove(uid);
      });
  }
  spec.description = QString("whole run: %L1 schedules · %L2 nodes · %L3 kernels — one box per schedule "
                             "(double-click one to expand it)")
                         .arg(count)
                         .arg(model.totalNodeCount())
                         .arg(kernels);
  if (first > 0) spec.description += QString(" · the last %L1 shown").arg(count - first);
  if (shownSchedules > 0) spec.description += QString(" · %1 expanded").arg(shownSchedules);
  return spec;
}

int applyCollapse(GraphSpec& spec, const QSet<int>& toggled) {
  const int total = static_cast<int>(spec.nodes.size());
  const bool byDefault = total > kCollapseAboveNodes;
  QSet<int> collapsed;
  for (const GraphSpecCluster& c : spec.clusters)
    if (byDefault != toggled.contains(c.kernelId)) collapsed.insert(c.kernelId);
  spec.collapseByDefault = byDefault;
  spec.fullNodeCount = total;
  spec.collapsedKernels.clear();
  if (collapsed.isEmpty()) return 0;

  GraphSpec out;
  out.description = spec.description;
  out.schedule = spec.schedule;
  out.leftToRight = spec.leftToRight;
  out.fontScale = spec.fontScale;
  out.fullNodeCount = total;
  out.collapseByDefault = byDefault;
  QHash<int, QString> names;
  QHash<int, int> sizes;
  for (const GraphSpecCluster& c : spec.clusters) names.insert(c.kernelId, c.name);
  for (const GraphSpecNode& n : spec.nodes) sizes[n.kernelId] += 1;

  std::vector<int> newIndex(spec.nodes.size(), -1);
  QHash<int, int> boxOfKernel;
  for (int i = 0; i < total; ++i) {
    GraphSpecNode& n = spec.nodes[i];
    if (!collapsed.contains(n.kernelId)) {
      newIndex[i] = static_cast<int>(out.nodes.size());
      out.keyIndex.insert(n.key, newIndex[i]);
      out.nodes.push_back(std::move(n));
      continue;
    }
    auto box = boxOfKernel.find(n.kernelId);
    if (box == boxOfKernel.end()) {
      GraphSpecNode b;
      b.key = QString("k%1").arg(n.kernelId);
      b.kernelId = n.kernelId;
      b.collapsedNodes = sizes.value(n.kernelId);
      b.info.op = names.value(n.kernelId).toStdString();
      b.info.op_class = "kernel";
      b.info.dtype = n.info.dtype;
      b.info.shape = n.info.shape;
      b.label = QString("%1\n%L2 node%3").arg(names.value(n.kernelId)).arg(b.collapsedNodes).arg(b.collapsedNodes == 1 ? "" : "s");
      box = boxOfKernel.insert(n.kernelId, static_cast<int>(out.nodes.size()));
      out.keyIndex.insert(b.key, *box);
      out.nodes.push_back(std::move(b));
    }
    GraphSpecNode& b = out.nodes[*box];
    b.members.push_back(std::move(n.info));
    b.info.shape = n.info.shape;  // the kernel's last node: usually what it stores
    newIndex[i] = *box;
  }
  QSet<qint64> seen;
  for (auto [src, dst] : spec.edges) {
    const int a = newIndex[src], b = newIndex[dst];
    if (a < 0 || b < 0 || a == b || seen.contains((qint64(a) << 32) | b)) continue;
    seen.insert((qint64(a) << 32) | b);
    out.edges.emplace_back(a, b);
  }
  for (const GraphSpecCluster& c : spec.clusters)
    if (collapsed.contains(c.kernelId)) out.collapsedKernels.push_back(c.kernelId);
    else out.clusters.push_back(c);
  const int n = static_cast<int>(out.collapsedKernels.size());
  out.description += QString(" · %L1 kernel%2 collapsed (double-click one to expand)").arg(n).arg(n == 1 ? "" : "s");
  spec = std::move(out);
  return n;
}

int addLazyGraph(GraphSpec& spec, const RunModel& model, const std::vector<uint64_t>& pending,
                 const std::vector<uint64_t>& inputs) {
  int added = 0;
  QHash<quint64, int> indexOfUid;  // the spec's latest node of each uid
  for (int i = 0; i < static_cast<int>(spec.nodes.size()); ++i) indexOfUid.insert(spec.nodes[i].info.uid, i);
  auto add = [&](uint64_t uid, bool lazy) {
    if (indexOfUid.contains(uid)) return;
    added += lazy;
    std::optional<ts::GraphNodeInfo> info = model.createdNode(uid);
    if (!info) return;
    GraphSpecNode n;
    n.key = QString("n%1").arg(uid);
    n.info = *info;
    n.lazy = lazy;
    n.realized = !lazy && (info->op == "BUFFER" || model.node(uid));
    n.label = QString::fromStdString(info->op) + "\n" + shapeText(info->shape);
    const int index = static_cast<int>(spec.nodes.size());
    spec.keyIndex.insert(n.key, index);
    indexOfUid.insert(uid, index);
    spec.nodes.push_back(std::move(n));
  };
  for (uint64_t uid : inputs) add(uid, false);
  for (uint64_t uid : pending) add(uid, true);
  for (uint64_t uid : pending) {
    const int dst = indexOfUid.value(uid, -1);
    if (dst < 0) continue;
    for (uint64_t src : spec.nodes[dst].info.srcs) {
      const int from = indexOfUid.value(src, -1);
      if (from >= 0 && from != dst) spec.edges.emplace_back(from, dst);
    }
  }
  return added;
}

namespace {

QByteArray quoted(const QString& text) {
  QString out = text;
  out.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
  return "\"" + out.toUtf8() + "\"";
}

QByteArray nodeStatement(const GraphSpecNode& n) {
  QString tooltip = QString::fromStdString(n.info.op);
  if (!n.info.arg.empty()) tooltip += " " + QString::fromStdString(n.info.arg);
  tooltip += QString(" %1 %2").arg(shapeText(n.info.shape), QString::fromStdString(n.info.dtype));
  // a lazy node (not computed yet) is dashed and grey; a realized buffer it reads has a thick border
  const QByteArray look = n.lazy ? QByteArray(", style=\"rounded,filled,dashed\", color=\"#8a8a8a\"")
                          : n.realized ? QByteArray(", penwidth=2.2")
                                       : QByteArray();
  if (n.collapsedNodes > 0) {  // a collapsed kernel: one box in the kernels' colours
    return quoted(n.key) + " [label=" + quoted(n.label) + ", fillcolor=\"" + kernelFillColor().name().toLatin1() +
           "\", color=\"" + kernelBorderColor().name().toLatin1() + "\", penwidth=1.4, fontname=\"Helvetica-Bold\", margin=\"0.24,0.05\", tooltip=" +
           quoted(n.scheduleBox >= 0 ? QString(n.label).replace('\n', ": ")
                                     : QString("kernel #%1 %2: %L3 nodes").arg(n.kernelId).arg(QString::fromStdString(n.info.op)).arg(n.collapsedNodes)) +
           ", id=" + quoted(n.key) + "];\n";
  }
  const QColor fill = n.lazy ? QColor(0xec, 0xec, 0xec) : opClassColor(QString::fromStdString(n.info.op_class));
  return quoted(n.key) + " [label=" + quoted(n.label) + ", fillcolor=\"" + fill.name().toLatin1() + "\"" +
         look + ", tooltip=" + quoted(tooltip) + ", id=" + quoted(n.key) + "];\n";
}

// `statement(i)` writes node i; the graph attributes, clusters and edges are shared by the exported
// DOT and the layout's sized DOT, so that both lay out the same. The sized DOT (`sized`) leaves out
// what only the drawing uses (colours, styles, ids, the nodes' fonts): dot echoes every attribute in
// its JSON, 6.4 MB for 10,000 nodes with them, 4.2 MB without.
QByteArray writeDot(const GraphSpec& spec, bool sized, const std::function<QByteArray(int)>& statement) {
  QByteArray dot = "digraph tensorscope {\n";
  const QByteArray fontSize = QByteArray::number(10 * spec.fontScale, 'g', 4);
  dot += QByteArray("  graph [rankdir=") + (spec.leftToRight ? "LR" : "TB") +
         ", nodesep=0.2, ranksep=0.3, fontname=\"Helvetica\", fontsize=" + fontSize + "];\n";
  if (sized) {
    dot += "  node [shape=box, label=\"\", fixedsize=true];\n  edge [arrowsize=0.6];\n";
  } else {
    dot += "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=" + fontSize +
           ", margin=\"0.10,0.04\", height=" + QByteArray::number(0.32 * spec.fontScale, 'g', 4) +
           ", penwidth=0.8, color=\"#4a4a4a\"];\n";
    dot += "  edge [arrowsize=0.6, penwidth=0.9, color=\"#606060\"];\n";
  }
  // Measured: dot's network simplex dominates beyond ~1500 nodes; capping it keeps 10k nodes at
  // seconds instead of minutes, with slightly less straight edges.
  const int placed = layoutNodes(spec);
  if (placed > kCappedSimplexAbove) dot += "  graph [nslimit=0.02, mclimit=0.5];\n";
  // A graph this large is read zoomed out, where edges are drawn as chords anyway (kDetailLod): dot
  // draws them as straight lines (splines=line: no spline routing, a quarter of the output) and
  // spends less on crossings (mclimit 0.2). 10,000 nodes: dot's CPU time 1.43 -> 1.23 s, crossings
  // 5,872 -> 5,950. LeNet's head over 30 steps (644 boxes, 48,000 placed): over 2 minutes with splines
  // (the simplex, then 6-9 s of routing 23,858 boxes), 1.1 s with both caps. Below it, edges keep their splines.
  if (placed > kStraightEdgesAbove) dot += "  graph [splines=line, mclimit=0.2];\n";

  QHash<int, QList<int>> members;  // kernel id -> node indices
  for (int i = 0; i < static_cast<int>(spec.nodes.size()); ++i) members[spec.nodes[i].kernelId].append(i);

  for (const GraphSpecCluster& c : spec.clusters) {
    dot += QString("  subgraph cluster_k%1 {\n").arg(c.kernelId).toUtf8();
    dot += "    label=" + quoted(c.name) + "; labeljust=l;";
    if (!sized)
      dot += " style=\"rounded,filled\"; fillcolor=\"" + kernelFillColor().name().toLatin1() + "\"; color=\"" +
             kernelBorderColor().name().toLatin1() + "\"; id=" + quoted(QString("cluster_k%1").arg(c.kernelId)) + ";";
    dot += "\n";
    for (int i : members.value(c.kernelId)) dot += "    " + statement(i);
    dot += "  }\n";
  }
  QSet<int> clustered;
  for (const GraphSpecCluster& c : spec.clusters) clustered.insert(c.kernelId);
  for (int i = 0; i < static_cast<int>(spec.nodes.size()); ++i)
    if (!clustered.contains(spec.nodes[i].kernelId)) dot += "  " + statement(i);
  for (auto [src, dst] : spec.edges)
    dot += "  " + quoted(spec.nodes[src].key) + " -> " + quoted(spec.nodes[dst].key) + ";\n";
  dot += "}\n";
  return dot;
}

}  // namespace

int layoutNodes(const GraphSpec& spec) {
  const int n = static_cast<int>(spec.nodes.size());
  std::vector<int> waiting(n, 0), rank(n, 0);
  std::vector<std::vector<int>> out(n);
  for (auto [src, dst] : spec.edges) {
    out[src].push_back(dst);
    waiting[dst]++;
  }
  std::vector<int> ready;  // Kahn's order: a node's rank is final once every edge into it was seen
  for (int i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.push_back(i);
  while (!ready.empty()) {
    const int u = ready.back();
    ready.pop_back();
    for (int v : out[u]) {
      rank[v] = std::max(rank[v], rank[u] + 1);
      if (--waiting[v] == 0) ready.push_back(v);
    }
  }
  int64_t placed = n;
  for (auto [src, dst] : spec.edges) placed += std::max(0, std::abs(rank[dst] - rank[src]) - 1);
  return static_cast<int>(std::min<int64_t>(placed, std::numeric_limits<int>::max()));
}

QByteArray toDot(const GraphSpec& spec) {
  return writeDot(spec, false, [&spec](int i) { return nodeStatement(spec.nodes[i]); });
}

QByteArray toSizedDot(const GraphSpec& spec, const std::vector<QSizeF>& nodeSizes) {
  // 'g' with 9 digits: graphviz keeps the size it gets (fixedsize), so the boxes are the measured ones
  return writeDot(spec, true, [&](int i) {
    return quoted(spec.nodes[i].key) + " [width=" +
           QByteArray::number(nodeSizes[i].width(), 'g', 9) + ", height=" +
           QByteArray::number(nodeSizes[i].height(), 'g', 9) + "];\n";
  });
}

}  // namespace tsui
