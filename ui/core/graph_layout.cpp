#include "core/graph_layout.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineF>
#include <QProcess>
#include <QStandardPaths>
#include <mutex>
#include <optional>

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

// The size graphviz gives each node (inches), measuring each distinct label once: one isolated node
// per distinct label laid out in this process. A 10,000-node graph has a few hundred distinct labels.
std::vector<QSizeF> measureNodes(const GraphSpec& spec, QString* error) {
  GraphSpec distinct;  // one node per look: same label, font and margins (a collapsed kernel's differ)
  distinct.fontScale = spec.fontScale;
  distinct.leftToRight = spec.leftToRight;
  QHash<QString, int> lookOf;
  std::vector<int> look(spec.nodes.size());
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const GraphSpecNode& n = spec.nodes[i];
    const QString key = (n.collapsedNodes > 0 ? "box:" : "op:") + n.label;
    auto it = lookOf.find(key);
    if (it == lookOf.end()) {
      GraphSpecNode copy;
      copy.key = QString("m%1").arg(distinct.nodes.size());
      copy.label = n.label;
      copy.collapsedNodes = n.collapsedNodes;
      it = lookOf.insert(key, static_cast<int>(distinct.nodes.size()));
      distinct.nodes.push_back(std::move(copy));
    }
    look[i] = *it;
  }
  std::vector<QSizeF> sizeOfLook(distinct.nodes.size());
  {
    std::lock_guard<std::mutex> lock(graphvizMutex());
    LaidOutGraph lg(toDot(distinct));
    if (!lg.laidOut) {
      *error = lg.error;
      return {};
    }
    for (Agnode_t* n = agfstnode(lg.g); n; n = agnxtnode(lg.g, n))
      sizeOfLook[QString::fromUtf8(agnameof(n)).mid(1).toInt()] = QSizeF(ND_width(n), ND_height(n));
  }
  std::vector<QSizeF> sizes(spec.nodes.size());
  for (size_t i = 0; i < sizes.size(); ++i) sizes[i] = sizeOfLook[look[i]];
  return sizes;
}

QString dotProgram() {
  static const QString path = QStandardPaths::findExecutable("dot");
  return path;
}

// Runs `dot -v -Tjson0` on `dot`, killing it when control.cancelled() says so. dot's log on stderr
// announces its phases (ranking, "Maxrank", mincross, routesplines): they are the progress.
// `seconds` receives how long the program ran.
QByteArray runDot(const QByteArray& dot, const LayoutControl& control, bool* cancelled, QString* error,
                  double* seconds) {
  if (dotProgram().isEmpty()) {
    *error = "graphviz's dot program is not on the PATH (Debian: apt-get install graphviz)";
    return {};
  }
  QProcess process;
  QElapsedTimer clock;
  clock.start();
  process.start(dotProgram(), {"-v", "-Tjson0"});
  if (!process.waitForStarted()) {
    *error = "dot did not start: " + process.errorString();
    return {};
  }
  process.write(dot);
  process.closeWriteChannel();
  LayoutPhase phase = LayoutPhase::Ranking;
  if (control.progress) control.progress(phase);
  QByteArray log, errors;
  auto advance = [&](LayoutPhase next) {
    if (next <= phase) return;
    phase = next;
    if (control.progress) control.progress(phase);
  };
  while (process.state() != QProcess::NotRunning) {
    if (control.cancelled && control.cancelled()) {
      process.kill();
      process.waitForFinished();
      *cancelled = true;
      return {};
    }
    process.waitForFinished(LayoutControl::kPollMs);
    log += process.readAllStandardError();
    for (qsizetype end; (end = log.indexOf('\n')) >= 0; log.remove(0, end + 1)) {
      const QByteArray line = log.left(end);
      if (line.startsWith("Maxrank")) advance(LayoutPhase::Ordering);
      else if (line.startsWith("mincross tensorscope:")) advance(LayoutPhase::Placing);
      else if (line.startsWith("routesplines")) advance(LayoutPhase::Writing);
      else if (line.startsWith("Error") || line.startsWith("Warning")) errors += line + '\n';
    }
  }
  *seconds = clock.nsecsElapsed() / 1e9;
  if (process.exitStatus() != QProcess::NormalExit || process.exitCode() != 0) {
    *error = QString("graphviz layout failed (dot exit status %1): %2")
                 .arg(process.exitCode())
                 .arg(QString::fromUtf8(errors + log).trimmed());
    return {};
  }
  return process.readAllStandardOutput();
}

double number(const QJsonValue& v) { return v.isString() ? v.toString().toDouble() : v.toDouble(); }

QPointF point(QStringView text) {  // "x,y"
  const qsizetype comma = text.indexOf(',');
  return {text.left(comma).toDouble(), text.mid(comma + 1).toDouble()};
}

// graphviz's y grows upwards
struct Flip {
  double top;
  QPointF operator()(QPointF p) const { return {p.x(), top - p.y()}; }
};

QRectF box(const QString& bb, const Flip& flip) {  // "llx,lly,urx,ury"
  const QStringList v = bb.split(',');
  if (v.size() != 4) return {};
  return QRectF(flip({v[0].toDouble(), v[3].toDouble()}), flip({v[2].toDouble(), v[1].toDouble()}));
}

QPolygonF arrowhead(QPointF base, QPointF tip) {
  const QLineF axis(base, tip);
  if (axis.length() < 1e-6) return {};
  const QLineF normal = axis.normalVector();
  const QPointF half = (normal.p2() - normal.p1()) * 0.35;
  return QPolygonF({tip, base + half, base - half, tip});
}

// An edge's "pos": splines separated by ';', each "[s,x,y] [e,x,y] p0 p1 p2 p3 ..." (a B-spline
// of 3n+1 points; e: where the arrowhead's tip is). Read in one pass over the text, without a list
// of tokens per edge: a 10,000-edge layout spent 0.1 s splitting them.
void readSpline(QStringView pos, const Flip& flip, LaidOutEdge& edge) {
  std::vector<QPointF> points;
  std::optional<QPointF> end;
  auto finishSpline = [&] {
    if (points.empty()) return;
    edge.path.moveTo(points[0]);
    for (size_t j = 1; j + 2 < points.size(); j += 3) edge.path.cubicTo(points[j], points[j + 1], points[j + 2]);
    if (end) edge.arrowhead = arrowhead(points.back(), *end);
    points.clear();
    end.reset();
  };
  qsizetype i = 0;
  const qsizetype n = pos.size();
  while (i < n) {
    const QChar c = pos[i];
    if (c == u' ') {
      ++i;
    } else if (c == u';') {
      finishSpline();
      ++i;
    } else {
      qsizetype stop = i;
      while (stop < n && pos[stop] != u' ' && pos[stop] != u';') ++stop;
      const QStringView token = pos.sliced(i, stop - i);
      if (token.startsWith(u"e,")) end = flip(point(token.sliced(2)));
      else if (!token.startsWith(u"s,")) points.push_back(flip(point(token)));
      i = stop;
    }
  }
  finishSpline();
}

// dot's JSON output (-Tjson0): "objects" holds the clusters, then the nodes; "edges" name their
// ends by the objects' _gvid.
void readJson(const QByteArray& json, GraphLayout& result) {
  QJsonParseError parseError;
  const QJsonDocument doc = QJsonDocument::fromJson(json, &parseError);
  if (doc.isNull()) {
    result.error = "dot's output could not be read: " + parseError.errorString();
    return;
  }
  const QJsonObject root = doc.object();
  const QStringList bb = root.value("bb").toString().split(',');
  const Flip flip{bb.size() == 4 ? bb[3].toDouble() : 0};
  result.bounds = box(root.value("bb").toString(), flip);
  const GraphSpec& spec = *result.spec;
  const QJsonArray objects = root.value("objects").toArray();
  std::vector<int> nodeOfObject(objects.size(), -1);
  for (qsizetype i = 0; i < objects.size(); ++i) {
    const QJsonObject o = objects[i].toObject();
    const QString name = o.value("name").toString();
    if (o.contains("bb")) {  // a cluster
      LaidOutCluster c;
      c.kernelId = name.startsWith("cluster_k") ? name.mid(9).toInt() : -1;
      c.label = o.value("label").toString();
      c.rect = box(o.value("bb").toString(), flip);
      if (o.contains("lp")) {
        const QPointF centre = flip(point(o.value("lp").toString()));
        const QSizeF size(number(o.value("lwidth")) * 72, number(o.value("lheight")) * 72);
        c.labelRect = QRectF(centre - QPointF(size.width() / 2, size.height() / 2), size);
      }
      result.clusters.push_back(c);
      continue;
    }
    const int index = spec.indexOfKey(name);
    if (index < 0) continue;
    nodeOfObject[o.value("_gvid").toInt(int(i))] = index;
    const QPointF centre = flip(point(o.value("pos").toString()));
    const double w = number(o.value("width")) * 72, h = number(o.value("height")) * 72;
    result.nodes.push_back({index, QRectF(centre.x() - w / 2, centre.y() - h / 2, w, h)});
  }
  const QJsonArray edges = root.value("edges").toArray();
  result.edges.reserve(edges.size());
  for (const QJsonValue& value : edges) {
    const QJsonObject e = value.toObject();
    const int tail = e.value("tail").toInt(-1), head = e.value("head").toInt(-1);
    if (tail < 0 || head < 0 || tail >= objects.size() || head >= objects.size()) continue;
    LaidOutEdge edge;
    edge.src = nodeOfObject[tail];
    edge.dst = nodeOfObject[head];
    readSpline(e.value("pos").toString(), flip, edge);
    if (!edge.path.isEmpty()) result.edges.push_back(std::move(edge));
  }
}

}  // namespace

const char* layoutPhaseName(LayoutPhase phase) {
  switch (phase) {
    case LayoutPhase::Measuring: return "measuring labels";
    case LayoutPhase::Ranking: return "ranking";
    case LayoutPhase::Ordering: return "ordering";
    case LayoutPhase::Placing: return "placing";
    case LayoutPhase::Writing: return "writing";
    case LayoutPhase::Reading: return "reading";
  }
  return "";
}

GraphLayout layoutGraph(std::shared_ptr<const GraphSpec> spec, const LayoutControl& control) {
  GraphLayout result;
  QElapsedTimer clock;
  clock.start();
  result.spec = spec;
  if (spec->nodes.empty()) return result;
  if (control.progress) control.progress(LayoutPhase::Measuring);
  const std::vector<QSizeF> sizes = measureNodes(*spec, &result.error);
  if (!result.error.isEmpty()) return result;
  const QByteArray json = runDot(toSizedDot(*spec, sizes), control, &result.cancelled, &result.error,
                                &result.dotSeconds);
  if (result.cancelled) result.error = "cancelled";
  if (!result.error.isEmpty()) return result;
  if (control.progress) control.progress(LayoutPhase::Reading);
  readJson(json, result);
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
