// Graph layout with graphviz `dot`, and SVG and PNG export of the same DOT text.
//
// Both functions are blocking and meant for a worker thread (LayoutScheduler, the export task);
// the GUI thread never runs graphviz. graphviz is not thread-safe, so calls are serialised inside.
// Coordinates are in points (1/72 inch) with y growing downwards, as in a QGraphicsScene.
#pragma once
#include <QByteArray>
#include <QPainterPath>
#include <QPolygonF>
#include <QRectF>
#include <QString>
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
  std::shared_ptr<const GraphSpec> spec;
  QByteArray dot;  // the DOT text that was laid out; the SVG export renders it again
  QRectF bounds;
  std::vector<LaidOutNode> nodes;
  std::vector<LaidOutEdge> edges;
  std::vector<LaidOutCluster> clusters;
  QString error;  // non-empty when graphviz failed
  double seconds = 0;
};

// Runs `dot` on toDot(*spec) and reads back the geometry.
GraphLayout layoutGraph(std::shared_ptr<const GraphSpec> spec);

// Lays out `dot` and renders it as a standalone SVG document. Each kernel becomes a
// <g class="cluster"> group (graphviz does that for subgraphs named cluster_*).
QByteArray renderSvg(const QByteArray& dot, QString* error);
// Lays out `dot` and renders it as a PNG image (graphviz's cairo renderer) at `scale` times 72 dpi.
QByteArray renderPng(const QByteArray& dot, double scale, QString* error);

}  // namespace tsui
