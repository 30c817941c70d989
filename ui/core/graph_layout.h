// Graph layout with graphviz `dot`, and SVG and PNG export of the same DOT text.
//
// All functions are blocking and meant for a worker thread (LayoutScheduler, the export task); the
// GUI thread never runs graphviz. A layout runs the `dot` program as a child process, so that a
// layout nobody wants any more is stopped by killing it (graphviz itself cannot be interrupted);
// the export renders in this process, and graphviz is not thread-safe, so those calls are
// serialised inside. Coordinates are in points (1/72 inch) with y growing downwards, as in a
// QGraphicsScene.
#pragma once
#include <QByteArray>
#include <QPainterPath>
#include <QPolygonF>
#include <QRectF>
#include <QString>
#include <functional>
#include <memory>
#include <vector>

#include "core/graph_spec.h"

namespace tsui {

struct LaidOutNode {
  int index = -1;  // into GraphSpec::nodes
  QRectF rect;
};

struct LaidOutEdge {
  int src = -1, dst = -1;  // indices into GraphSpec::nodes
  QPainterPath path;       // the spline, ending where the arrowhead starts
  QPolygonF arrowhead;     // empty when graphviz drew none
};

struct LaidOutCluster {
  int kernelId = -1;
  QString label;
  QRectF rect;
  QRectF labelRect;  // where dot reserved room for the label
};

struct GraphLayout {
  // What was laid out; toDot(*spec) is the graph as DOT text with its labels (the export renders it
  // again). Not kept here: building it took 0.1 s of a 10,000-node layout that nobody exported.
  std::shared_ptr<const GraphSpec> spec;
  QRectF bounds;
  std::vector<LaidOutNode> nodes;
  std::vector<LaidOutEdge> edges;
  std::vector<LaidOutCluster> clusters;
  QString error;  // non-empty when graphviz failed (or was stopped: `cancelled`)
  bool cancelled = false;
  double seconds = 0;     // the whole layout: labels measured, `dot` run, its output read
  double dotSeconds = 0;  // of `seconds`: the `dot` program's own run, start to exit (wall clock)
};

// What a running layout is doing: measuring the labels, dot's phases as its log (`dot -v`) announces
// them (ranks; the order within ranks, for fewer crossings; positions and edges; its output), then
// reading dot's output.
enum class LayoutPhase { Measuring, Ranking, Ordering, Placing, Writing, Reading };
constexpr int kLayoutPhases = 6;
const char* layoutPhaseName(LayoutPhase phase);  // "measuring labels", "ranking", "ordering", ...

struct LayoutControl {
  // Asked every kPollMs while dot runs: true kills it, and layoutGraph returns with `cancelled`.
  std::function<bool()> cancelled;
  // Called (on the calling thread) when a new phase starts.
  std::function<void(LayoutPhase)> progress;
  static constexpr int kPollMs = 20;
};

// Lays out toDot(*spec) with `dot` and reads back the geometry. The labels are measured once per
// distinct label in this process; `dot` then lays out boxes of those sizes (toSizedDot): the same
// positions, without measuring 10,000 labels with pango again (70 µs each).
GraphLayout layoutGraph(std::shared_ptr<const GraphSpec> spec, const LayoutControl& control = {});

// Lays out `dot` and renders it as a standalone SVG document. Each kernel becomes a
// <g class="cluster"> group (graphviz does that for subgraphs named cluster_*).
QByteArray renderSvg(const QByteArray& dot, QString* error);
// Lays out `dot` and renders it as a PNG image (graphviz's cairo renderer) at `scale` times 72 dpi.
QByteArray renderPng(const QByteArray& dot, double scale, QString* error);

}  // namespace tsui
