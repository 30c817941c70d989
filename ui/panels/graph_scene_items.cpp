#include "panels/graph_scene_items.h"

#include <QPainter>
#include <algorithm>
#include <QStyleOptionGraphicsItem>

#include "core/graph_spec.h"
#include "core/op_palette.h"
#include "core/theme.h"

namespace tsui {
namespace {

// Scene units are points; fonts are sized in pixels so that text scales with the zoom exactly
// like the boxes graphviz sized for it.
QFont sceneFont(double pixelSize, bool bold = false, bool monospace = false) {
  QFont font(monospace ? "DejaVu Sans Mono" : "Helvetica");
  font.setStyleHint(monospace ? QFont::Monospace : QFont::SansSerif);
  font.setPixelSize(std::max(1, qRound(pixelSize)));
  font.setBold(bold);
  return font;
}

void drawMarker(QPainter* painter, const QRectF& box, bool plus, const QColor& colour) {
  const QRectF r = expandMarkerRect(box);
  painter->setPen(QPen(colour, 1));
  painter->setBrush(Qt::white);
  painter->drawRect(r);
  const QPointF c = r.center();
  const double arm = r.width() * 0.3;
  painter->drawLine(QPointF(c.x() - arm, c.y()), QPointF(c.x() + arm, c.y()));
  if (plus) painter->drawLine(QPointF(c.x(), c.y() - arm), QPointF(c.x(), c.y() + arm));
}

}  // namespace

QRectF expandMarkerRect(const QRectF& box) {
  const double side = std::clamp(box.height() * 0.4, 8.0, 12.0);
  return QRectF(box.right() - side - 3, box.top() + 3, side, side);
}

NodeItem::NodeItem(const GraphSpecNode& node, int index, const QRectF& rect, double fontScale)
    : rect_(rect),
      fill_(opClassColor(QString::fromStdString(node.info.op_class))),
      op_(QString::fromStdString(node.info.op)),
      shape_(shapeText(node.info.shape)),
      index_(index),
      kernelId_(node.kernelId),
      fontScale_(fontScale),
      lazy_(node.lazy),
      realized_(node.realized) {
  collapsed_ = node.collapsedNodes;
  toggleId_ = node.scheduleBox >= 0 ? scheduleToggleId(node.scheduleBox) : node.kernelId;
  if (lazy_) fill_ = QColor(0xec, 0xec, 0xec);
  if (collapsed_ > 0) {
    fill_ = sceneColours().clusterFill;
    shape_ = QString("%L1 node%2").arg(collapsed_).arg(collapsed_ == 1 ? "" : "s");
    if (node.scheduleBox >= 0) {  // a schedule: "12 kernels · 1,234 nodes" under its name
      shape_ = node.label.section('\n', 1);
      setToolTip(QString("<b>%1</b><br>%2<br><i>double-click or click + to expand</i>").arg(op_, shape_));
    } else setToolTip(QString("<b>kernel #%1 %2</b><br>%3 fused into one kernel<br><i>double-click or click + to expand</i>")
                   .arg(kernelId_)
                   .arg(op_.toHtmlEscaped(), shape_));
    setAcceptHoverEvents(true);
    setZValue(2);
    return;
  }
  setAcceptHoverEvents(true);
  setZValue(2);
  QString tip = QString("<b>%1</b> %2 %3").arg(op_, shape_, QString::fromStdString(node.info.dtype));
  if (!node.info.arg.empty()) tip += "<br>arg: " + QString::fromStdString(node.info.arg).toHtmlEscaped();
  tip += QString("<br>uid %%1").arg(node.info.uid);
  if (lazy_) tip += "<br><i>lazy: not computed yet</i>";
  if (realized_) tip += "<br><i>realized: holds a buffer</i>";
  setToolTip(tip);
}

void NodeItem::setMarked(bool on) {
  marked_ = on;
  update();
}

void NodeItem::setHighlighted(bool on) {
  highlighted_ = on;
  update();
}

QRectF NodeItem::boundingRect() const { return rect_.adjusted(-3, -3, 3, 3); }

void NodeItem::paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget*) {
  const bool detail = option->levelOfDetailFromTransform(painter->worldTransform()) >= kDetailLod;
  if (!detail) {  // zoomed out: a plain rectangle, no text, no antialiasing
    painter->setRenderHint(QPainter::Antialiasing, false);
    painter->setPen(highlighted_ || marked_ ? QPen(highlighted_ ? selectionColor() : QColor(0xff, 0x9f, 0x1c), 0)
                                            : QPen(sceneColours().nodeBorder, 0));
    painter->setBrush(fill_);
    painter->drawRect(rect_);
    return;
  }
  painter->setRenderHint(QPainter::Antialiasing);
  if (marked_) {  // made by the editor's line: an orange halo under the box
    painter->setPen(Qt::NoPen);
    painter->setBrush(QColor(0xff, 0x9f, 0x1c, 150));
    painter->drawRoundedRect(rect_.adjusted(-3, -3, 3, 3), 6, 6);
  }
  const QColor border = highlighted_ ? selectionColor() : lazy_ ? QColor(0x8a, 0x8a, 0x8a) : sceneColours().nodeBorder;
  QPen pen(border, highlighted_ ? 2.5 : realized_ ? 2.2 : (hovered_ ? 1.6 : 0.8));
  if (lazy_ && !highlighted_) pen.setStyle(Qt::DashLine);
  painter->setPen(pen);
  painter->setBrush(hovered_ ? fill_.lighter(108) : fill_);
  painter->drawRoundedRect(rect_, 4, 4);
  if (collapsed_ > 0) {  // a kernel: its name (an identifier: monospace, as in the list) over its size
    const SceneColours& colours = sceneColours();
    drawMarker(painter, rect_, true, colours.clusterBorder);
    const QRectF top(rect_.left(), rect_.top() + 1, rect_.width(), rect_.height() / 2);
    const QRectF bottom(rect_.left(), rect_.center().y() - 1, rect_.width(), rect_.height() / 2);
    painter->setPen(colours.clusterText);
    painter->setFont(labelFont());
    painter->drawText(top, Qt::AlignHCenter | Qt::AlignBottom | Qt::TextDontClip, op_);
    painter->setFont(sceneFont(9 * fontScale_));
    painter->drawText(bottom, Qt::AlignHCenter | Qt::AlignTop | Qt::TextDontClip, shape_);
    return;
  }
  painter->setPen(Qt::black);
  const QRectF top(rect_.left(), rect_.top() + 1, rect_.width(), rect_.height() / 2);
  const QRectF bottom(rect_.left(), rect_.center().y() - 1, rect_.width(), rect_.height() / 2);
  painter->setFont(labelFont());
  painter->drawText(top, Qt::AlignHCenter | Qt::AlignBottom | Qt::TextDontClip, op_);
  painter->setFont(sceneFont(9 * fontScale_));
  painter->setPen(QColor(0x33, 0x33, 0x33));
  painter->drawText(bottom, Qt::AlignHCenter | Qt::AlignTop | Qt::TextDontClip, shape_);
}

QFont NodeItem::labelFont() const { return sceneFont(10 * fontScale_, true); }

void NodeItem::hoverEnterEvent(QGraphicsSceneHoverEvent*) {
  hovered_ = true;
  update();
}

void NodeItem::hoverLeaveEvent(QGraphicsSceneHoverEvent*) {
  hovered_ = false;
  update();
}

EdgeLayerItem::EdgeLayerItem() {
  setZValue(1);
  setAcceptedMouseButtons(Qt::NoButton);
  setFlag(ItemUsesExtendedStyleOption);  // option->exposedRect: only the edges in view are drawn
}

void EdgeLayerItem::add(const QPainterPath& path, const QPolygonF& arrowhead) {
  Edge e{path, arrowhead, path.boundingRect().united(arrowhead.boundingRect()).adjusted(-2, -2, 2, 2), {}};
  if (path.elementCount() > 0) e.chord = QLineF(QPointF(path.elementAt(0)), path.currentPosition());
  bounds_ = bounds_.united(e.bounds);
  edges_.push_back(std::move(e));
}

void EdgeLayerItem::paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget*) {
  const QColor colour = sceneColours().edge;
  const QRectF exposed = option->exposedRect;
  if (option->levelOfDetailFromTransform(painter->worldTransform()) < kDetailLod) {  // zoomed out: straight lines
    std::vector<QLineF> lines;
    lines.reserve(edges_.size());
    for (const Edge& e : edges_)
      if (e.bounds.intersects(exposed)) lines.push_back(e.chord);
    painter->setRenderHint(QPainter::Antialiasing, false);
    painter->setPen(QPen(colour, 0));
    painter->drawLines(lines.data(), static_cast<int>(lines.size()));
    return;
  }
  painter->setRenderHint(QPainter::Antialiasing);
  for (const Edge& e : edges_) {
    if (!e.bounds.intersects(exposed)) continue;
    painter->setPen(QPen(colour, 0.9));
    painter->setBrush(Qt::NoBrush);
    painter->drawPath(e.path);
    if (!e.arrowhead.isEmpty()) {
      painter->setBrush(colour);
      painter->drawPolygon(e.arrowhead);
    }
  }
}

ClusterItem::ClusterItem(int kernelId, const QString& label, const QRectF& rect, const QRectF& labelRect,
                         double fontScale)
    : kernelId_(kernelId), label_(label), rect_(rect), labelRect_(labelRect), fontScale_(fontScale) {
  setZValue(0);
  setToolTip(QString("kernel #%1 %2<br><i>double-click the frame or click − to collapse it into one box</i>")
                 .arg(kernelId)
                 .arg(label.toHtmlEscaped()));
}

void ClusterItem::setHighlighted(bool on) {
  highlighted_ = on;
  setZValue(on ? 0.5 : 0);  // a highlighted border is not hidden under a neighbour's fill
  update();
}

QRectF ClusterItem::boundingRect() const { return rect_.adjusted(-3, -3, 3, 3); }

void ClusterItem::paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget*) {
  const SceneColours& colours = sceneColours();
  const QBrush fill = highlighted_ ? colours.highlightedClusterFill : colours.clusterFill;
  if (option->levelOfDetailFromTransform(painter->worldTransform()) < kDetailLod) {  // zoomed out: no label
    painter->setRenderHint(QPainter::Antialiasing, false);
    painter->setPen(highlighted_ ? QPen(selectionColor(), 0) : QPen(colours.clusterBorder, 0));
    painter->setBrush(fill);
    painter->drawRect(rect_);
    return;
  }
  painter->setRenderHint(QPainter::Antialiasing);
  painter->setPen(highlighted_ ? QPen(selectionColor(), 3) : QPen(colours.clusterBorder, 1, Qt::DashLine));
  painter->setBrush(fill);
  painter->drawRoundedRect(rect_, 6, 6);
  drawMarker(painter, rect_, false, colours.clusterBorder);
  painter->setFont(sceneFont(10 * fontScale_, true, true));  // kernel names are identifiers: monospace, as in the list
  painter->setPen(highlighted_ ? (isDarkTheme() ? selectionColor().lighter(130) : selectionColor().darker(130))
                               : colours.clusterText);
  // dot reserved room for the label at the top; draw it left-aligned there (labeljust=l). Its box
  // is as tall as dot's font, so descenders (the '_' of kernel names) must not be clipped.
  const QRectF labelBox = labelRect_.isEmpty()
                              ? QRectF(rect_.left() + 6, rect_.top() + 2, rect_.width() - 12, 14 * fontScale_)
                              : QRectF(rect_.left() + 6, labelRect_.top(), rect_.width() - 12, labelRect_.height());
  painter->drawText(labelBox, Qt::AlignLeft | Qt::AlignVCenter | Qt::TextDontClip, label_);
}

}  // namespace tsui
