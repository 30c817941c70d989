#include "panels/graph_panel.h"

#include <QCheckBox>
#include <QEvent>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QHBoxLayout>
#include <QDateTime>
#include <QElapsedTimer>
#include <QLabel>
#include <QMenu>
#include <QPainter>
#include <QProgressBar>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>

#include "core/op_palette.h"
#include "core/theme.h"
#include "panels/graph_scene_items.h"
#include "widgets/elided_label.h"
#include "widgets/minimap.h"
#include "widgets/zoomable_view.h"

namespace tsui {
namespace {

QWidget* makeLegend(QWidget* parent) {
  auto* legend = new QFrame(parent);
  legend->setObjectName("legend");
  // at the font zoom (fontScale()) like every panel: its text and its swatches
  legend->setStyleSheet(sceneColours().legendStyle +
                        QString(" QLabel { font-size: %1px; }").arg(qRound(11 * fontScale())));
  auto* layout = new QHBoxLayout(legend);
  layout->setContentsMargins(8, 4, 8, 4);
  layout->setSpacing(qRound(10 * fontScale()));
  const int side = qRound(14 * fontScale());
  auto swatch = [&](const QColor& fill, const QColor& border, Qt::PenStyle style, const QString& text) {
    QPixmap pixmap(side, side);
    pixmap.fill(Qt::transparent);
    QPainter p(&pixmap);
    p.setRenderHint(QPainter::Antialiasing);
    p.setPen(QPen(border, 1, style));
    p.setBrush(fill);
    p.drawRoundedRect(QRectF(0.5, 0.5, side - 1, side - 1), 3, 3);
    p.end();
    auto* icon = new QLabel;
    icon->setPixmap(pixmap);
    auto* row = new QHBoxLayout;
    row->setSpacing(4);
    row->addWidget(icon);
    row->addWidget(new QLabel(text));
    layout->addLayout(row);
  };
  for (const OpClassStyle& s : opClassStyles()) swatch(s.fill, QColor(0x4a, 0x4a, 0x4a), Qt::SolidLine, s.title);
  swatch(sceneColours().clusterFill, sceneColours().clusterBorder, Qt::DashLine, "kernel");
  legend->adjustSize();
  return legend;
}

}  // namespace

GraphPanel::GraphPanel(QWidget* parent)
    : QWidget(parent),
      view_(new ZoomableView),
      scene_(new QGraphicsScene(this)),
      description_(new ElidedLabel),
      status_(new QLabel),
      cancel_(new QToolButton),
      union_(new QCheckBox("Whole run")),
      direction_(new QToolButton) {
  // Items are static once laid out; a linear scan of 20,000 bounding boxes per paint costs less
  // than rebuilding a BSP tree on the GUI thread after every layout.
  scene_->setItemIndexMethod(QGraphicsScene::NoIndex);
  view_->setScene(scene_);
  // Fixed overlays (legend, "laying out…") sit on top of the view; a full repaint on scroll
  // keeps the scene behind them clean.
  view_->setViewportUpdateMode(QGraphicsView::FullViewportUpdate);
  // Every item sets the pen, brush, font and antialiasing it paints with: saving and restoring the
  // painter around each of 20,000 items is the view's largest cost on a big graph.
  view_->setOptimizationFlags(QGraphicsView::DontSavePainterState | QGraphicsView::DontAdjustForAntialiasing);

  description_->setStyleSheet("font-weight: 600;");
  status_->setStyleSheet("color: #b45309;");
  cancel_->setText("Cancel");
  cancel_->setToolTip("Stop this layout (graphviz's dot is stopped; the graph shown stays)");
  cancel_->hide();
  union_->setChecked(true);
  union_->setToolTip(QString("Show the whole run: every schedule merged into one graph (above %1 nodes each kernel "
                             "is one box: double-click it to expand it); unchecked, the selected kernel's schedule")
                         .arg(kCollapseAboveNodes));
  direction_->setText("Left to right");
  direction_->setCheckable(true);
  direction_->setChecked(true);
  direction_->setToolTip("Lay the graph out from left to right (wide windows) instead of top to bottom");
  auto* kernelsMenu = new QMenu(this);
  kernelsMenu->addAction("Collapse All Kernels", this, [this] { setAllKernelsCollapsed(true); });
  kernelsMenu->addAction("Expand All Kernels", this, [this] { setAllKernelsCollapsed(false); });
  auto* kernels = new QToolButton;
  kernels->setText("Kernels");
  kernels->setMenu(kernelsMenu);
  kernels->setPopupMode(QToolButton::InstantPopup);
  kernels->setToolTip("Draw every kernel as one box, or every kernel's nodes (a large graph takes a while to lay out)");
  busyBar_ = new QProgressBar;
  busyBar_->setRange(0, kLayoutPhases);  // dot's phases (LayoutPhase): no finer progress is known
  busyBar_->setFixedWidth(70);
  busyBar_->setMaximumHeight(12);
  busyBar_->setTextVisible(false);
  busyBar_->hide();
  auto* fit = new QToolButton;
  fit->setText("Fit");
  fit->setToolTip("Fit the graph to the view (Ctrl+0)");

  auto* header = new QHBoxLayout;
  header->setContentsMargins(6, 3, 6, 3);
  header->addWidget(description_, 1);
  header->addWidget(busyBar_);
  header->addWidget(status_);
  header->addWidget(cancel_);
  header->addSpacing(12);
  header->addWidget(union_);
  header->addWidget(kernels);
  header->addWidget(direction_);
  header->addWidget(fit);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addLayout(header);
  layout->addWidget(view_, 1);

  legend_ = makeLegend(view_);
  auto* busy = new QLabel("laying out…", view_);
  busy->setStyleSheet(
      "background: rgba(255,247,230,235); color: #92400e; border: 1px solid #f5c27a; "
      "border-radius: 4px; padding: 4px 10px; font-weight: 600;");
  busy->adjustSize();
  busy->hide();
  busyOverlay_ = busy;
  view_->installEventFilter(this);
  busyDelay_ = new QTimer(this);
  busyDelay_->setSingleShot(true);
  busyDelay_->setInterval(250);
  connect(busyDelay_, &QTimer::timeout, this, [this] { showBusy(true); });
  busyTick_ = new QTimer(this);
  busyTick_->setInterval(200);
  connect(busyTick_, &QTimer::timeout, this, [this] {
    status_->setText(QString("laying out: %1… %2 s")
                         .arg(layoutPhaseName(phase_))
                         .arg((QDateTime::currentMSecsSinceEpoch() - busySinceMs_) / 1000.0, 0, 'f', 1));
  });
  minimap_ = new Minimap(view_, view_);
  connect(minimap_, &Minimap::moved, view_, &ZoomableView::markNavigated);

  connect(view_, &ZoomableView::clicked, this, &GraphPanel::onClicked);
  connect(view_, &ZoomableView::doubleClicked, this, &GraphPanel::onDoubleClicked);
  view_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(view_, &QWidget::customContextMenuRequested, this, [this](const QPoint& pos) {
    const int id = kernelAt(view_->mapToScene(pos));
    if (id < 0) return;
    QMenu* menu = kernelMenu(id, this);
    menu->setAttribute(Qt::WA_DeleteOnClose);
    menu->popup(view_->viewport()->mapToGlobal(pos));
  });
  connect(fit, &QToolButton::clicked, this, &GraphPanel::fitGraph);
  connect(cancel_, &QToolButton::clicked, this, &GraphPanel::cancelLayoutRequested);
  connect(union_, &QCheckBox::toggled, this, &GraphPanel::unionModeChanged);
  connect(direction_, &QToolButton::toggled, this, &GraphPanel::directionChanged);
  clearGraph("Run a script (F5) to see its graph.");
  applyThemeColours();
}

GraphPanel::~GraphPanel() = default;

void GraphPanel::applyThemeColours() {
  view_->setBackgroundBrush(sceneColours().background);
  rebuildLegend();
  updateMinimap();
  scene_->update();
}

void GraphPanel::applyFontZoom() { rebuildLegend(); }

void GraphPanel::rebuildLegend() {
  const bool shown = !legend_->isHidden();
  delete legend_;  // its swatches are pixmaps: drawn again in the theme's colours
  legend_ = makeLegend(view_);
  legend_->setVisible(shown);
  placeOverlays();
}

bool GraphPanel::unionMode() const { return union_->isChecked(); }
bool GraphPanel::leftToRight() const { return direction_->isChecked(); }

bool GraphPanel::eventFilter(QObject* watched, QEvent* event) {
  if (watched == view_ && event->type() == QEvent::Resize) placeOverlays();
  return QWidget::eventFilter(watched, event);
}

void GraphPanel::placeOverlays() {
  const QRect area = view_->viewport()->geometry();
  legend_->move(area.left() + 8, area.bottom() - legend_->height() - 8);
  busyOverlay_->move(area.center().x() - busyOverlay_->width() / 2, area.top() + 10);
  minimap_->setMaxSide(std::clamp(std::min(area.width(), area.height()) / 4, 60, 220));
  minimap_->move(area.right() - minimap_->width() - 8, area.top() + 8);
  minimap_->raise();
}

void GraphPanel::clearGraph(const QString& message) {
  populateGeneration_ = 0;
  view_->viewport()->setUpdatesEnabled(true);
  minimap_->clear();
  scene_->clear();
  clusters_.clear();
  nodes_.clear();
  layout_ = {};
  description_->clear();
  legend_->hide();
  auto* text = scene_->addSimpleText(message);
  text->setBrush(QColor(0x9a, 0xa0, 0xa6));
  scene_->setSceneRect(text->boundingRect().adjusted(-20, -20, 20, 20));
  view_->setTransform({});
  view_->centerOn(text);
}

void GraphPanel::setDescription(const QString& text) { description_->setText(text); }

void GraphPanel::setLayoutBusy(bool busy) {
  // Most layouts take a few milliseconds; saying "laying out…" only for the slow ones keeps the
  // header from flickering while a training loop streams schedules.
  if (busy) {
    if (!busyDelay_->isActive() && !busyOverlay_->isVisible()) {
      busySinceMs_ = QDateTime::currentMSecsSinceEpoch();
      setLayoutPhase(LayoutPhase::Measuring);
      busyDelay_->start();
    }
    return;
  }
  busyDelay_->stop();
  showBusy(false);
}

void GraphPanel::setLayoutPhase(LayoutPhase phase) {
  phase_ = phase;
  busyBar_->setValue(static_cast<int>(phase) + 1);
}

void GraphPanel::showBusy(bool busy) {
  status_->setText(busy ? QString("laying out: %1…").arg(layoutPhaseName(phase_)) : QString());
  busyBar_->setVisible(busy);
  if (busy) busyTick_->start();
  else busyTick_->stop();
  cancel_->setVisible(busy);
  busyOverlay_->setVisible(busy);
  placeOverlays();
}

void GraphPanel::showLayout(const GraphLayout& layout) {
  keepView_ = view_->userNavigated() && !layout_.nodes.empty();
  populateGeneration_ = 0;
  scene_->clear();
  clusters_.clear();
  nodes_.clear();
  minimap_->clear();
  layout_ = layout;
  if (!layout.error.isEmpty()) {
    auto* text = scene_->addSimpleText("Layout failed: " + layout.error);
    text->setBrush(QColor(0xc6, 0x28, 0x28));
    scene_->setSceneRect(text->boundingRect().adjusted(-20, -20, 20, 20));
    return;
  }
  legend_->show();
  scene_->setSceneRect(layout.bounds.adjusted(-20, -20, 20, 40));  // room for the legend below
  populated_ = 0;
  pendingEdges_.reset();
  populateGeneration_ = ++populateCounter_;
  const size_t items = layout.clusters.size() + layout.nodes.size() + layout.edges.size();
  if (items <= static_cast<size_t>(kSyncItems)) return populate(populateGeneration_);
  // The view keeps its last picture until the scene is complete: a repaint after every slice would
  // cost more than the slice (each one paints everything added so far).
  view_->viewport()->setUpdatesEnabled(false);
  QTimer::singleShot(1, this, [this, generation = populateGeneration_] { populate(generation); });
}

void GraphPanel::populate(quint64 generation) {
  if (generation != populateGeneration_) return;  // a newer layout replaced this one
  const GraphLayout& layout = layout_;
  // the edges are one item (EdgeLayerItem), filled edge by edge and added last: a QGraphicsItem
  // each would double the items the scene processes and paints
  const size_t clusters = layout.clusters.size(), nodes = layout.nodes.size(), edges = layout.edges.size();
  const size_t total = clusters + nodes + edges;
  if (!pendingEdges_) pendingEdges_ = std::make_unique<EdgeLayerItem>();
  const bool sliced = total > static_cast<size_t>(kSyncItems);
  QElapsedTimer slice;
  slice.start();
  while (populated_ < total) {
    const size_t i = populated_++;
    if (i < clusters) {
      const LaidOutCluster& c = layout.clusters[i];
      auto* item = new ClusterItem(c.kernelId, c.label, c.rect, c.labelRect, layout.spec->fontScale);
      scene_->addItem(item);
      clusters_.insert(c.kernelId, item);
    } else if (i < clusters + nodes) {
      const LaidOutNode& n = layout.nodes[i - clusters];
      const GraphSpecNode& spec = layout.spec->nodes[n.index];
      auto* item = new NodeItem(spec, n.index, n.rect, layout.spec->fontScale);
      scene_->addItem(item);
      nodes_.insert(spec.key, item);
    } else {
      const LaidOutEdge& e = layout.edges[i - clusters - nodes];
      pendingEdges_->add(e.path, e.arrowhead);
    }
    if (i == clusters + nodes / 8 && !keepView_) view_->fitAll();  // the first boxes show where the graph is
    if (sliced && (i & 63) == 0 && slice.elapsed() >= kSliceMs) {
      status_->setText(QString("drawing… %1 %").arg(100 * populated_ / total));
      // a timer, not a posted call: the posted events of this slice (the scene's bookkeeping, the
      // repaint) and the next slice must not run back to back without the event loop in between
      QTimer::singleShot(1, this, [this, generation] { populate(generation); });
      return;
    }
  }
  scene_->addItem(pendingEdges_.release());
  // The highlights and the first paint in a slice of their own, and the minimap in the next (see
  // finishPopulating): back to back with the last slice they stalled the event loop for 30 ms.
  if (sliced)
    return QTimer::singleShot(1, this, [this, generation] {
      if (generation == populateGeneration_) finishPopulating();
    });
  finishPopulating();
}

void GraphPanel::finishPopulating() {
  populateGeneration_ = 0;
  view_->viewport()->setUpdatesEnabled(true);
  if (!busyOverlay_->isVisible()) status_->clear();
  if (!keepView_) view_->fitAll();
  highlightKernel(highlightedKernel_, false);
  highlightNode(highlightedNode_);
  markNodes(markedUids_);
  // A large graph's minimap (a picture of every box: 5-10 ms for 10,000) is drawn after the view's
  // first paint, not before it in the same stall.
  if (layout_.nodes.size() + layout_.edges.size() > static_cast<size_t>(kSyncItems))
    QTimer::singleShot(1, this, [this, shown = populateCounter_] {
      if (shown == populateCounter_) updateMinimap();
    });
  else updateMinimap();
  if (centreKernel_ >= 0) {  // the kernel just expanded or collapsed stays in view
    if (QGraphicsItem* item = clusters_.value(centreKernel_)) view_->centerOn(item);
    else if (QGraphicsItem* box = nodes_.value(QString("k%1").arg(centreKernel_))) view_->centerOn(box);
  }
  centreKernel_ = -1;
  placeOverlays();
}

void GraphPanel::updateMinimap() {
  if (layout_.nodes.empty() || !layout_.spec) return minimap_->clear();
  std::vector<Minimap::Box> boxes;
  boxes.reserve(layout_.clusters.size() + layout_.nodes.size());
  const SceneColours& colours = sceneColours();
  for (const LaidOutCluster& c : layout_.clusters) boxes.push_back({c.rect, colours.clusterFill, colours.clusterBorder});
  for (const LaidOutNode& n : layout_.nodes) {
    const GraphSpecNode& node = layout_.spec->nodes[n.index];
    const QColor fill = node.collapsedNodes > 0 ? colours.clusterBorder
                        : node.lazy            ? QColor(0xc0, 0xc0, 0xc0)
                                               : opClassColor(QString::fromStdString(node.info.op_class)).darker(115);
    boxes.push_back({n.rect, fill, Qt::transparent});
  }
  minimap_->setContent(scene_->sceneRect(), std::move(boxes));
  placeOverlays();
}

void GraphPanel::setKernelCollapsed(int kernelId, bool collapsed) {
  // schedules (negative ids) are collapsed unless expanded; kernels follow the graph's default
  const bool byDefault = kernelId < 0 || (layout_.spec && layout_.spec->collapseByDefault);
  if (collapsed == byDefault) toggledKernels_.remove(kernelId);
  else toggledKernels_.insert(kernelId);
  centreKernel_ = kernelId;
  Q_EMIT collapseChanged();
}

void GraphPanel::setAllKernelsCollapsed(bool collapsed) {
  toggledKernels_.clear();
  const bool byDefault = layout_.spec && layout_.spec->collapseByDefault;
  if (collapsed != byDefault && layout_.spec) {
    for (const GraphSpecCluster& c : layout_.spec->clusters) toggledKernels_.insert(c.kernelId);
    for (int id : layout_.spec->collapsedKernels) toggledKernels_.insert(id);
  }
  Q_EMIT collapseChanged();
}

void GraphPanel::highlightKernel(int kernelId, bool centre) {
  if (ClusterItem* old = clusters_.value(highlightedKernel_)) old->setHighlighted(false);
  if (NodeItem* old = nodes_.value(QString("k%1").arg(highlightedKernel_))) old->setHighlighted(false);
  highlightedKernel_ = kernelId;
  QGraphicsItem* shown = nullptr;
  if (ClusterItem* item = clusters_.value(kernelId)) {
    item->setHighlighted(true);
    shown = item;
  } else if (NodeItem* box = nodes_.value(QString("k%1").arg(kernelId))) {  // a collapsed kernel
    box->setHighlighted(true);
    shown = box;
  }
  if (shown && centre) view_->centerOn(shown);
}

void GraphPanel::highlightNode(const QString& key) {
  if (NodeItem* old = nodes_.value(highlightedNode_)) old->setHighlighted(false);
  highlightedNode_ = key;
  if (NodeItem* item = nodes_.value(key)) item->setHighlighted(true);
}

int GraphPanel::markNodes(const QSet<quint64>& uids) {
  markedUids_ = uids;
  int marked = 0;
  for (NodeItem* item : nodes_) {
    if (!layout_.spec) break;
    const GraphSpecNode& node = layout_.spec->nodes[item->index()];
    bool on = uids.contains(node.info.uid) && node.collapsedNodes == 0;
    for (size_t m = 0; !on && m < node.members.size(); ++m) on = uids.contains(node.members[m].uid);
    item->setMarked(on);
    marked += on;
  }
  return marked;
}

int GraphPanel::lazyNodeCount() const {
  int n = 0;
  for (NodeItem* item : nodes_) n += item->lazy();
  return n;
}

void GraphPanel::fitGraph() { view_->fitAll(); }

std::vector<const GraphSpecNode*> GraphPanel::drawnNodes() const {
  std::vector<std::pair<QPointF, const GraphSpecNode*>> drawn;
  if (!layout_.spec) return {};
  for (const NodeItem* item : nodes_) drawn.emplace_back(item->boundingRect().center(), &layout_.spec->nodes[item->index()]);
  const bool across = leftToRight();
  std::sort(drawn.begin(), drawn.end(), [across](const auto& a, const auto& b) {
    return across ? std::pair(a.first.x(), a.first.y()) < std::pair(b.first.x(), b.first.y())
                  : std::pair(a.first.y(), a.first.x()) < std::pair(b.first.y(), b.first.x());
  });
  std::vector<const GraphSpecNode*> out;
  for (const auto& d : drawn) out.push_back(d.second);
  return out;
}

void GraphPanel::revealNode(const QString& key) {
  highlightNode(key);
  if (NodeItem* item = nodes_.value(key)) {
    if (view_->transform().m11() < 0.6) view_->setTransform(QTransform::fromScale(0.8, 0.8));  // readable
    view_->centerOn(item);
  }
}

void GraphPanel::onClicked(const QPointF& scenePos) {
  // The topmost node wins over the cluster around it; edges are not selectable.
  ClusterItem* cluster = nullptr;
  for (QGraphicsItem* item : scene_->items(scenePos)) {
    if (item->type() == NodeItem::Type) {
      auto* node = static_cast<NodeItem*>(item);
      const GraphSpecNode& spec = layout_.spec->nodes[node->index()];
      if (node->collapsed()) {  // a kernel (or a schedule) as one box: select the kernel; its "+" expands it
        highlightNode({});
        if (node->kernelId() >= 0) Q_EMIT kernelClicked(node->kernelId());
        if (node->markerRect().contains(scenePos)) setKernelCollapsed(node->toggleId(), false);
        return;
      }
      highlightNode(spec.key);
      Q_EMIT nodeClicked(spec);
      return;
    }
    if (!cluster && item->type() == ClusterItem::Type) cluster = static_cast<ClusterItem*>(item);
  }
  highlightNode({});
  if (cluster) Q_EMIT kernelClicked(cluster->kernelId());
  if (cluster && cluster->markerRect().contains(scenePos)) setKernelCollapsed(cluster->kernelId(), true);
}

int GraphPanel::kernelAt(const QPointF& scenePos) const {
  for (QGraphicsItem* item : scene_->items(scenePos)) {
    // a node (an op, or a collapsed kernel's box) names its kernel; an input buffer names none
    if (item->type() == NodeItem::Type && static_cast<NodeItem*>(item)->kernelId() >= 0)
      return static_cast<NodeItem*>(item)->kernelId();
    if (item->type() == ClusterItem::Type) return static_cast<ClusterItem*>(item)->kernelId();
  }
  return -1;
}

QMenu* GraphPanel::kernelMenu(int kernelId, QWidget* parent) {
  auto* menu = new QMenu(parent);
  QString name;
  if (layout_.spec)
    for (const GraphSpecCluster& c : layout_.spec->clusters)
      if (c.kernelId == kernelId) name = c.name;
  QAction* autotune = menu->addAction(QString("Autotune #%1 %2").arg(kernelId).arg(name).trimmed(), this,
                                      [this, kernelId] { Q_EMIT autotuneRequested(kernelId); });
  autotune->setToolTip("Run the script again, searching this kernel's optimization plan (BEAM); the trials show "
                       "in the timeline's autotune lane");
  menu->setToolTipsVisible(true);
  return menu;
}

void GraphPanel::onDoubleClicked(const QPointF& scenePos) {
  // A collapsed kernel expands; a double-click on a cluster's frame (not on a node in it) collapses it.
  for (QGraphicsItem* item : scene_->items(scenePos)) {
    if (item->type() == NodeItem::Type) {
      auto* node = static_cast<NodeItem*>(item);
      if (node->collapsed() && !node->markerRect().contains(scenePos)) setKernelCollapsed(node->toggleId(), false);
      return;
    }
    if (item->type() == ClusterItem::Type) {
      auto* cluster = static_cast<ClusterItem*>(item);
      if (!cluster->markerRect().contains(scenePos)) setKernelCollapsed(cluster->kernelId(), true);
      return;
    }
  }
}

}  // namespace tsui
