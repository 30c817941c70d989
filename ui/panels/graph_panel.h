// The graph: every primitive op as a box coloured by op class, edges from inputs to users, and
// each kernel as a cluster around the ops fused into it (Netron's look, graphviz's dot layout).
//
// The panel only draws a finished GraphLayout; it never runs graphviz. While a layout is on its
// way it shows "laying out: ordering… 1.2 s" with a bar of dot's phases and a Cancel button (which
// stops dot), and keeps the previous graph until then.
//
// Graphs of any size: "Whole run" merges every schedule; a large graph shows each kernel as one
// box (GraphSpec::collapsedKernels), expanded by a double-click or its "+" marker and collapsed
// again by a double-click on its frame or its "−" marker (collapseChanged: the owner lays the graph
// out again). A graph of more than kSyncItems items is put into the scene in slices of at most
// kSliceMs on the GUI thread, so the event loop never stalls while 10,000 boxes appear. Zoomed
// out, the items paint without text (graph_scene_items.h: kDetailLod), and a minimap in the
// top-right corner shows the whole graph and the part in view.
#pragma once
#include <QHash>
#include <QSet>
#include <QWidget>
#include <memory>

#include "core/graph_layout.h"

class QCheckBox;
class QGraphicsScene;
class QLabel;
class QMenu;
class QProgressBar;
class QTimer;
class QToolButton;

namespace tsui {

class ElidedLabel;
class ClusterItem;
class EdgeLayerItem;
class Minimap;
class NodeItem;
class ZoomableView;

class GraphPanel : public QWidget {
  Q_OBJECT
 public:
  explicit GraphPanel(QWidget* parent = nullptr);
  ~GraphPanel() override;

  // Replaces the scene; keeps the highlighted kernel/node when they are still there. Up to
  // kSyncItems items at once; a larger graph goes into the scene in slices (isPopulating()).
  void showLayout(const GraphLayout& layout);
  // True while a large layout is still being put into the scene.
  bool isPopulating() const { return populateGeneration_ != 0; }
  void clearGraph(const QString& message);
  void setDescription(const QString& text);
  void setLayoutBusy(bool busy);
  // What the running layout is doing (LayoutScheduler::phaseChanged): the busy text and bar show it.
  void setLayoutPhase(LayoutPhase phase);
  void highlightKernel(int kernelId, bool centre);
  void highlightNode(const QString& key);  // empty: none
  // Marks the nodes with these uids (made by the editor's line); returns how many are drawn.
  int markNodes(const QSet<quint64>& uids);
  int lazyNodeCount() const;
  void fitGraph();
  // Find: the drawn nodes, left to right (top to bottom), and one of them highlighted and centred.
  std::vector<const GraphSpecNode*> drawnNodes() const;
  void revealNode(const QString& key);
  // The theme's background, legend and items (core/theme.h); MainWindow calls it when the theme changes.
  void applyThemeColours();
  // The font zoom (core/theme.h fontScale()): the legend's text and swatches. The labels in the
  // scene follow GraphSpec::fontScale (a new layout).
  void applyFontZoom();
  QWidget* legend() const { return legend_; }

  bool unionMode() const;  // "Whole run": every schedule merged
  // Kernels whose collapsed state differs from the graph's default (applyCollapse's `toggled`).
  const QSet<int>& toggledKernels() const { return toggledKernels_; }
  // Collapses (true) or expands one kernel, or a schedule of the run overview by its
  // scheduleToggleId(); emits collapseChanged. Ids not in the graph are kept.
  void setKernelCollapsed(int kernelId, bool collapsed);
  void setAllKernelsCollapsed(bool collapsed);
  Minimap* minimap() const { return minimap_; }

  static constexpr int kSyncItems = 3000;  // items put into the scene at once
  static constexpr int kSliceMs = 8;       // the GUI thread's longest slice while populating
  bool leftToRight() const;
  int clusterCount() const { return static_cast<int>(clusters_.size()); }
  int nodeCount() const { return static_cast<int>(nodes_.size()); }
  int highlightedKernel() const { return highlightedKernel_; }
  const GraphLayout& layout() const { return layout_; }
  // The kernel drawn at a point of the scene (its cluster, its collapsed box, or a node fused into it); -1.
  int kernelAt(const QPointF& scenePos) const;
  // The context menu of a kernel's box (a right-click shows it): "Autotune" (autotuneRequested).
  QMenu* kernelMenu(int kernelId, QWidget* parent);

 signals:
  void nodeClicked(const tsui::GraphSpecNode& node);
  void kernelClicked(int kernelId);
  void unionModeChanged(bool on);
  void directionChanged(bool leftToRight);
  void cancelLayoutRequested();
  void collapseChanged();  // toggledKernels() changed: the graph needs a new layout
  void autotuneRequested(int kernelId);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void onClicked(const QPointF& scenePos);
  void onDoubleClicked(const QPointF& scenePos);
  void placeOverlays();
  void rebuildLegend();
  void showBusy(bool busy);
  void populate(quint64 generation);  // adds the next slice of items
  void finishPopulating();
  void updateMinimap();

  ZoomableView* view_;
  QGraphicsScene* scene_;
  ElidedLabel* description_;
  QLabel* status_;
  QToolButton* cancel_;
  QCheckBox* union_;
  QToolButton* direction_;
  QWidget* legend_;
  QWidget* busyOverlay_;
  QTimer* busyDelay_;
  QTimer* busyTick_;
  QProgressBar* busyBar_;
  qint64 busySinceMs_ = 0;
  LayoutPhase phase_ = LayoutPhase::Measuring;
  Minimap* minimap_;

  GraphLayout layout_;
  QHash<int, ClusterItem*> clusters_;  // by kernel id
  QHash<QString, NodeItem*> nodes_;    // by GraphSpecNode::key
  QSet<quint64> markedUids_;
  int highlightedKernel_ = -1;
  QString highlightedNode_;
  QSet<int> toggledKernels_;
  int centreKernel_ = -1;            // after the next layout: centre this kernel (it was just toggled)
  quint64 populateGeneration_ = 0;   // the population under way; 0: none
  quint64 populateCounter_ = 0;
  size_t populated_ = 0;             // items of layout_ added so far (clusters, then nodes, then edges)
  std::unique_ptr<EdgeLayerItem> pendingEdges_;  // the edges so far, added to the scene when complete
  bool keepView_ = false;
};

}  // namespace tsui
