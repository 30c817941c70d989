// What the graph view draws, before layout: nodes, edges and one cluster per kernel.
//
// A GraphSpec is plain data built on the GUI thread from the RunModel, then handed to the layout
// thread as DOT text. Node keys double as DOT node names, so that the laid-out positions and the
// exported SVG refer to the same nodes.
#pragma once
#include <QByteArray>
#include <QHash>
#include <QSet>
#include <QSizeF>
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
  // > 0: a collapsed kernel, one box (key "k<kernel id>") standing for this many fused nodes;
  // `label` is "<kernel name>\n<n> nodes" and `members` the nodes inside it (for Find and the marks).
  int collapsedNodes = 0;
  std::vector<ts::GraphNodeInfo> members;
  int scheduleBox = -1;  // >= 0: a collapsed schedule (key "s<index>"), kernelId -1, in the run overview
};

// The id a collapsed schedule has in applyCollapse's and the panel's `toggled` set (kernel ids are >= 0).
inline int scheduleToggleId(int schedule) { return -1 - schedule; }

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
  int fullNodeCount = 0;                   // nodes before collapsing kernels (applyCollapse); 0: not collapsed
  bool collapseByDefault = false;          // the graph is large: kernels are boxes unless the user expands them
  std::vector<int> collapsedKernels;       // kernel ids drawn as one box, in launch order

  int indexOfKey(const QString& key) const { return keyIndex.value(key, -1); }
  QHash<QString, int> keyIndex;
};

// Above this many nodes a graph shows each kernel as one box by default (applyCollapse): dot's
// layout time grows much faster than linearly, and a few hundred boxes are what a person can read.
constexpr int kCollapseAboveNodes = 400;
// The whole run is merged only up to this many nodes in all schedules together (the merge runs on
// the GUI thread, about 2 µs a node); beyond, the whole run is shown as its overview (runOverview).
constexpr int kWholeRunNodeLimit = 20000;
// Above this many boxes after collapsing (kernels and input buffers), the whole run gives way to the
// run overview as well: dot takes about 2 s for 1,500 boxes and minutes for 4,000 (a newer layout
// stops it, but until then the graph shown is the old one).
constexpr int kWholeRunBoxLimit = 1500;
// The run overview itself draws at most this many schedule boxes, the last ones; the schedules before
// them are one box ("schedules 1–N, not shown") that feeds what they computed. A recording of 50,000
// realizes (one box each) kept dot busy for minutes and the window with it.
constexpr int kOverviewMaxSchedules = 500;

// Above this many nodes *as dot places them* (layoutNodes) toDot caps dot's network simplex; above
// kStraightEdgesAbove it also asks for straight edges and a shorter crossing minimisation (graph_spec.cpp
// says what each saves); smaller graphs keep their splines.
constexpr int kCappedSimplexAbove = 1500;
constexpr int kStraightEdgesAbove = 5000;

// The nodes dot places for `spec`: its own, and one "virtual" node on each rank an edge crosses (an edge
// from rank r to rank r + k adds k - 1). Ranks are longest-path layers here, at least as far apart as dot's.
// A training run's whole graph has a few hundred boxes, but each parameter's edge from one step to the next
// crosses hundreds of ranks: LeNet's head over 30 steps is 644 boxes and 48,000 nodes for dot.
int layoutNodes(const GraphSpec& spec);

// Merges schedules [first, last) by node uid. A node computed by a kernel stays one node per
// kernel (recomputation shows as a copy inside each kernel); a uid that later appears as an input
// BUFFER of another schedule is drawn as the op that produced it, so edges run between kernels.
GraphSpec mergeSchedules(const std::vector<ts::ScheduleEvent>& schedules, int first, int last);

// The graph to show: the whole run when `wholeRun` (every schedule merged; above kWholeRunNodeLimit
// nodes the run overview), otherwise the schedule holding `focusKernelId` (the last one if none).
// `toggled` names the schedules expanded in the overview (scheduleToggleId). Kernels are not
// collapsed yet: see applyCollapse.
GraphSpec buildViewGraph(const RunModel& model, bool wholeRun, int focusKernelId, const QSet<int>& toggled = {});

// A run too large to merge (a training loop: thousands of kernels): one box per schedule ("schedule
// 12", its kernels and nodes), an edge where a schedule reads a buffer an earlier one computed. A
// schedule whose scheduleToggleId is in `expanded` is drawn with its nodes and kernels instead, its
// input buffers fed by the boxes (or nodes) of the schedules that computed them. Costs one hash
// insert per computed node of the run (a few ms for 200,000 nodes).
GraphSpec runOverview(const RunModel& model, const QSet<int>& expanded);

// Collapses kernels into one box each: by default every kernel when the graph has more than
// kCollapseAboveNodes nodes, none otherwise; a kernel id in `toggled` is the other way round (the
// user expanded or collapsed it). Edges into and out of a collapsed kernel become edges of its box,
// duplicates merged. Sets fullNodeCount, collapseByDefault and collapsedKernels, and appends what
// was collapsed to the description. Returns how many kernels were collapsed.
int applyCollapse(GraphSpec& spec, const QSet<int>& toggled);

// Adds the lazy graph (RunModel::lazyGraphAt) to `spec`: its pending nodes dashed and grey, and the
// nodes they read, linked to the spec's own nodes where it has them (a buffer a schedule computed).
// Returns how many lazy nodes it added (a pending node the spec already draws is not drawn twice).
int addLazyGraph(GraphSpec& spec, const RunModel& model, const std::vector<uint64_t>& pending,
                  const std::vector<uint64_t>& inputs);

// DOT source of the graph: clusters are subgraphs named "cluster_k<kernel id>".
QByteArray toDot(const GraphSpec& spec);
// The same graph for layout only: node i is an unlabelled box of exactly nodeSizes[i] (inches, as
// graphviz measured its label: graph_layout.cpp), so that `dot` does not measure 10,000 labels again.
// Positions come out as toDot(spec)'s would; the text cannot be rendered (export uses toDot).
QByteArray toSizedDot(const GraphSpec& spec, const std::vector<QSizeF>& nodeSizes);

// "3x3"; "scalar" for a 0-d shape.
QString shapeText(const std::vector<int64_t>& shape);

}  // namespace tsui
