// The graph: every primitive op as a box coloured by op class, edges from inputs to users, and
// each kernel as a cluster around the ops fused into it (Netron's look, graphviz's dot layout).
//
// The panel only draws a finished GraphLayout; it never runs graphviz. While a layout is on its
// way it shows "laying out…" with a Cancel button, and keeps the previous graph until then.
#pragma once
#include <QHash>
#include <QSet>
#include <QWidget>

#include "core/graph_layout.h"

class QCheckBox;
class QGraphicsScene;
class QLabel;
class QTimer;
class QToolButton;

namespace tsui {

class ElidedLabel;
class ClusterItem;
class NodeItem;
class ZoomableView;

class GraphPanel : public QWidget {
  Q_OBJECT
 public:
  explicit GraphPanel(QWidget* parent = nullptr);

  // Replaces the scene; keeps the highlighted kernel/node when they are still there.
  void showLayout(const GraphLayout& layout);
  void clearGraph(const QString& message);
  void setDescription(const QString& text);
  void setLayoutBusy(bool busy);
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

  bool unionMode() const;
  bool leftToRight() const;
  int clusterCount() const { return static_cast<int>(clusters_.size()); }
  int nodeCount() const { return static_cast<int>(nodes_.size()); }
  int highlightedKernel() const { return highlightedKernel_; }
  const GraphLayout& layout() const { return layout_; }

 signals:
  void nodeClicked(const tsui::GraphSpecNode& node);
  void kernelClicked(int kernelId);
  void unionModeChanged(bool on);
  void directionChanged(bool leftToRight);
  void cancelLayoutRequested();

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void onClicked(const QPointF& scenePos);
  void placeOverlays();
  void showBusy(bool busy);

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

  GraphLayout layout_;
  QHash<int, ClusterItem*> clusters_;  // by kernel id
  QHash<QString, NodeItem*> nodes_;    // by GraphSpecNode::key
  QSet<quint64> markedUids_;
  int highlightedKernel_ = -1;
  QString highlightedNode_;
};

}  // namespace tsui
