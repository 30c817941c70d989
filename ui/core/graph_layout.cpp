#include "core/graph_layout.h"

#include <QElapsedTimer>
#include <QLineF>
#include <mutex>

// graphviz's headers define macros (TRUE, boolean, ...) that must not leak into other files.
#include <gvc.h>

namespace tsui {
namespace {

// graphviz keeps global state (error buffers, the parser), so one call at a time, process-wide.
std::mutex& graphvizMutex() {
  static std::mutex m;
  return m;
}

GVC_t* context() {  // call with graphvizMutex held
  static GVC_t* gvc = [] {
    agseterr(AGERR);  // warnings would go to stderr on every layout; errors are read back
    return gvContext();
  }();
  return gvc;
}

QString lastError(const char* what) {
  const char* message = aglasterr();
  return QString("%1: %2").arg(what, message ? QString::fromUtf8(message).trimmed() : "unknown error");
}

// A laid-out graph, freed on scope exit.
struct LaidOutGraph {
  Agraph_t* g = nullptr;
  bool laidOut = false;
  QString error;

  explicit LaidOutGraph(const QByteArray& dot) {
    g = agmemread(dot.constData());
    if (!g) {
      error = lastError("DOT parse error");
      return;
    }
    laidOut = gvLayout(context(), g, "dot") == 0;
    if (!laidOut) error = lastError("graphviz layout failed");
  }
  ~LaidOutGraph() {
    if (laidOut) gvFreeLayout(context(), g);
    if (g) agclose(g);
  }
};

struct Flip {  // graphviz's y grows upwards
  double top;
  QPointF operator()(pointf p) const { return {p.x, top - p.y}; }
  QRectF operator()(boxf b) const { return QRectF((*this)(pointf{b.LL.x, b.UR.y}), (*this)(pointf{b.UR.x, b.LL.y})); }
};

QPolygonF arrowhead(QPointF base, QPointF tip) {
  const QLineF axis(base, tip);
  if (axis.length() < 1e-6) return {};
  const QLineF normal = axis.normalVector();
  const QPointF half = (normal.p2() - normal.p1()) * 0.35;
  return QPolygonF({tip, base + half, base - half, tip});
}

void readClusters(Agraph_t* g, const Flip& flip, std::vector<LaidOutCluster>& out) {
  for (int i = 1; i <= GD_n_cluster(g); ++i) {
    Agraph_t* sg = GD_clust(g)[i];
    LaidOutCluster c;
    const QString name = QString::fromUtf8(agnameof(sg));
    c.kernelId = name.startsWith("cluster_k") ? name.mid(9).toInt() : -1;
    c.rect = flip(GD_bb(sg));
    if (textlabel_t* label = GD_label(sg)) {
      c.label = QString::fromUtf8(label->text);
      const QPointF centre = flip(label->pos);
      c.labelRect =
          QRectF(centre.x() - label->dimen.x / 2, centre.y() - label->dimen.y / 2, label->dimen.x, label->dimen.y);
    }
    out.push_back(c);
    readClusters(sg, flip, out);
  }
}

}  // namespace

GraphLayout layoutGraph(std::shared_ptr<const GraphSpec> spec) {
  GraphLayout result;
  QElapsedTimer clock;
  clock.start();
  result.spec = spec;
  result.dot = toDot(*spec);
  if (spec->nodes.empty()) return result;

  std::lock_guard<std::mutex> lock(graphvizMutex());
  LaidOutGraph lg(result.dot);
  if (!lg.laidOut) {
    result.error = lg.error;
    return result;
  }
  Agraph_t* g = lg.g;
  const Flip flip{GD_bb(g).UR.y};
  result.bounds = flip(GD_bb(g));

  for (Agnode_t* n = agfstnode(g); n; n = agnxtnode(g, n)) {
    const int index = spec->indexOfKey(QString::fromUtf8(agnameof(n)));
    if (index < 0) continue;
    const QPointF centre = flip(ND_coord(n));
    const double w = ND_width(n) * 72.0, h = ND_height(n) * 72.0;
    result.nodes.push_back({index, QRectF(centre.x() - w / 2, centre.y() - h / 2, w, h)});

    for (Agedge_t* e = agfstout(g, n); e; e = agnxtout(g, e)) {
      const splines* spl = ED_spl(e);
      if (!spl || spl->size == 0) continue;
      LaidOutEdge edge;
      edge.src = index;
      edge.dst = spec->indexOfKey(QString::fromUtf8(agnameof(aghead(e))));
      for (int b = 0; b < spl->size; ++b) {
        const bezier& bz = spl->list[b];
        if (bz.size == 0) continue;
        edge.path.moveTo(flip(bz.list[0]));
        for (int j = 1; j + 2 < bz.size; j += 3)
          edge.path.cubicTo(flip(bz.list[j]), flip(bz.list[j + 1]), flip(bz.list[j + 2]));
        if (bz.eflag) edge.arrowhead = arrowhead(flip(bz.list[bz.size - 1]), flip(bz.ep));
      }
      result.edges.push_back(std::move(edge));
    }
  }
  readClusters(g, flip, result.clusters);
  result.seconds = clock.elapsed() / 1000.0;
  return result;
}

namespace {

// Lays out `dot` and renders it with graphviz's `format` renderer; `dpi` > 0 sets the resolution.
QByteArray render(const QByteArray& dot, const char* format, double dpi, QString* error) {
  QByteArray source = dot;  // the resolution as a graph attribute, after the opening brace
  if (dpi > 0) {
    const qsizetype brace = source.indexOf('{');
    if (brace >= 0) source.insert(brace + 1, "\n  graph [dpi=" + QByteArray::number(dpi) + "];");
  }
  std::lock_guard<std::mutex> lock(graphvizMutex());
  LaidOutGraph lg(source);
  if (!lg.laidOut) {
    if (error) *error = lg.error;
    return {};
  }
  char* data = nullptr;
  unsigned int length = 0;
  if (gvRenderData(context(), lg.g, format, &data, &length) != 0 || !data) {
    if (error) *error = lastError(QString("%1 rendering failed").arg(QString(format).toUpper()).toUtf8().constData());
    return {};
  }
  QByteArray out(data, static_cast<qsizetype>(length));
  gvFreeRenderData(data);
  return out;
}

}  // namespace

QByteArray renderSvg(const QByteArray& dot, QString* error) { return render(dot, "svg", 0, error); }

QByteArray renderPng(const QByteArray& dot, double scale, QString* error) {
  if (!(scale > 0) || scale > 16) {
    if (error) *error = "The PNG scale must be above 0 and at most 16.";
    return {};
  }
  return render(dot, "png", 72 * scale, error);
}

}  // namespace tsui
