// What the graph view draws, before layout: nodes, edges and one cluster per kernel.
//
// A GraphSpec is plain data built on the GUI thread from the RunModel, then handed to the layout
// thread as DOT text. Node keys double as DOT node names, so that the laid-out positions and the
// exported SVG refer to the same nodes.
#pragma once
#include <QByteArray>
#include <QHash>
#include <QString>
#include <vector>

#include "tensorscope/session.h"

namespace tsui {

class RunModel;

struct GraphSpecNode {
  QString key;             // DOT name: "n<uid>", or "n<uid>_k<kernel id>" for a computed node
  ts::GraphNodeInfo info;  // as reported by the schedule that computed it
  int kernelId = -1;       // session-wide id of the kernel computing it; -1: an input buffer
  QString label;           // "ADD\n3x3"
  bool lazy = false;       // not computed yet: a node of the lazy graph no schedule has taken (dashed, grey)
  bool realized = false;   // a lazy node's source that holds a buffer (drawn with a thick border)
};

struct GraphSpecCluster {
  int kernelId = -1;
  QString name;  // kernel name, the cluster's label
};

struct GraphSpec {
  std::vector<GraphSpecNode> nodes;
  std::vector<std::pair<int, int>> edges;  // (src, dst) indices into nodes
  std::vector<GraphSpecCluster> clusters;  // in launch order; only kernels with at least one node
  QString description;                     // what is shown, for the graph panel's header
  int schedule = -1;                       // the one schedule shown; -1: all schedules merged
  bool leftToRight = false;                // rank direction: inputs left (true) or on top (false)
  double fontScale = 1;                    // the labels' size (fontScale()): boxes grow with their text

  int indexOfKey(const QString& key) const { return keyIndex.value(key, -1); }
  QHash<QString, int> keyIndex;
};

// Above this many nodes the merged view of all schedules gives way to one schedule at a time:
// dot's layout time grows much faster than linearly.
constexpr int kUnionNodeLimit = 800;

// Merges schedules [first, last) by node uid. A node computed by a kernel stays one node per
// kernel (recomputation shows as a copy inside each kernel); a uid that later appears as an input
// BUFFER of another schedule is drawn as the op that produced it, so edges run between kernels.
GraphSpec mergeSchedules(const std::vector<ts::ScheduleEvent>& schedules, int first, int last);

// The graph to show: every schedule merged when `unionMode` and the result has at most
// kUnionNodeLimit nodes, otherwise the schedule holding `focusKernelId` (the last one if none).
GraphSpec buildViewGraph(const RunModel& model, bool unionMode, int focusKernelId);

// Adds the lazy graph (RunModel::lazyGraphAt) to `spec`: its pending nodes dashed and grey, and the
// nodes they read, linked to the spec's own nodes where it has them (a buffer a schedule computed).
// Returns how many lazy nodes it added (a pending node the spec already draws is not drawn twice).
int addLazyGraph(GraphSpec& spec, const RunModel& model, const std::vector<uint64_t>& pending,
                  const std::vector<uint64_t>& inputs);

// DOT source of the graph: clusters are subgraphs named "cluster_k<kernel id>".
QByteArray toDot(const GraphSpec& spec);

// "3x3"; "scalar" for a 0-d shape.
QString shapeText(const std::vector<int64_t>& shape);

}  // namespace tsui
