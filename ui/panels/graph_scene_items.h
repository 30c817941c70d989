// The items of the graph scene: a node box (or a collapsed kernel's box), all the edges, and a kernel
// cluster. They only paint; the graph panel decides what is selected, highlighted or expanded.
//
// Level of detail: below kDetailLod (QStyleOptionGraphicsItem::levelOfDetailFromTransform, about
// the view's scale: 0.35 = a 10-pixel label drawn 3.5 pixels high) text is not drawn, boxes are
// plain rectangles without antialiasing and edges straight lines without arrowheads: a zoomed-out
// 10,000-node graph then paints in milliseconds instead of shaping 20,000 unreadable labels.
#pragma once
#include <QFont>
#include <QGraphicsItem>
#include <QPainterPath>
#include <QPolygonF>
#include <vector>

namespace tsui {

struct GraphSpecNode;

constexpr double kDetailLod = 0.35;

// The "+" / "−" square in a collapsed kernel's or a cluster's top-right corner, in scene points.
QRectF expandMarkerRect(const QRectF& box);

class NodeItem : public QGraphicsItem {
 public:
  enum { Type = UserType + 1 };
  // `fontScale`: the labels' size, as the layout sized the box for it (GraphSpec::fontScale).
  NodeItem(const GraphSpecNode& node, int index, const QRectF& rect, double fontScale = 1);

  int type() const override { return Type; }
  int index() const { return index_; }  // into GraphSpec::nodes
  int kernelId() const { return kernelId_; }
  void setHighlighted(bool on);
  // Marked as made by the script line under the editor's cursor ("what did line 13 become?").
  void setMarked(bool on);
  bool lazy() const { return lazy_; }
  // A collapsed kernel (GraphSpecNode::collapsedNodes > 0): clicking its "+" marker expands it.
  bool collapsed() const { return collapsed_ > 0; }
  // What expanding it toggles: the kernel id, or scheduleToggleId() of a collapsed schedule.
  int toggleId() const { return toggleId_; }
  QRectF markerRect() const { return expandMarkerRect(rect_); }
  QFont labelFont() const;  // the op's font; the shape's is a pixel smaller

  QRectF boundingRect() const override;
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;

 protected:
  void hoverEnterEvent(QGraphicsSceneHoverEvent* event) override;
  void hoverLeaveEvent(QGraphicsSceneHoverEvent* event) override;

 private:
  QRectF rect_;
  QColor fill_;
  QString op_, shape_;
  int index_, kernelId_, collapsed_ = 0, toggleId_ = -1;
  double fontScale_;
  bool highlighted_ = false, hovered_ = false, marked_ = false, lazy_ = false, realized_ = false;
};

// Every edge of the graph in one item: the scene handles one item instead of thousands, and zoomed
// out the edges are drawn as one batch of straight lines. Edges are not selectable: clicks and
// drags pass through it.
class EdgeLayerItem : public QGraphicsItem {
 public:
  EdgeLayerItem();
  void add(const QPainterPath& path, const QPolygonF& arrowhead);  // call before adding it to a scene
  int edgeCount() const { return static_cast<int>(edges_.size()); }
  QRectF boundingRect() const override { return bounds_; }
  QPainterPath shape() const override { return {}; }  // never under the mouse
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;

 private:
  struct Edge {
    QPainterPath path;
    QPolygonF arrowhead;
    QRectF bounds;
    QLineF chord;  // start to end: the zoomed-out edge
  };
  std::vector<Edge> edges_;
  QRectF bounds_;
};

class ClusterItem : public QGraphicsItem {
 public:
  enum { Type = UserType + 2 };
  ClusterItem(int kernelId, const QString& label, const QRectF& rect, const QRectF& labelRect, double fontScale = 1);

  int type() const override { return Type; }
  int kernelId() const { return kernelId_; }
  void setHighlighted(bool on);
  // The "−" marker: clicking it collapses the kernel into one box.
  QRectF markerRect() const { return expandMarkerRect(rect_); }

  QRectF boundingRect() const override;
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;

 private:
  int kernelId_;
  QString label_;
  QRectF rect_, labelRect_;
  double fontScale_;
  bool highlighted_ = false;
};

}  // namespace tsui
