#include "panels/graph_scene_items.h"

#include <QPainter>
#include <algorithm>
#include <QPainterPathStroker>
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

}  // namespace

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
  if (lazy_) fill_ = QColor(0xec, 0xec, 0xec);
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
  // Below ~3-pixel letters text is noise, and shaping it is what makes big graphs slow to pan.
  if (option->levelOfDetailFromTransform(painter->worldTransform()) < 0.35) return;
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

EdgeItem::EdgeItem(const QPainterPath& path, const QPolygonF& arrowhead) : path_(path), arrowhead_(arrowhead) {
  bounds_ = path_.boundingRect().united(arrowhead_.boundingRect()).adjusted(-2, -2, 2, 2);
  setZValue(1);
}

QPainterPath EdgeItem::shape() const {
  QPainterPathStroker stroker;
  stroker.setWidth(4);
  QPainterPath shape = stroker.createStroke(path_);
  shape.addPolygon(arrowhead_);
  return shape;
}

void EdgeItem::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  painter->setRenderHint(QPainter::Antialiasing);
  const QColor colour = sceneColours().edge;
  painter->setPen(QPen(colour, 0.9));
  painter->setBrush(Qt::NoBrush);
  painter->drawPath(path_);
  if (!arrowhead_.isEmpty()) {
    painter->setBrush(colour);
    painter->drawPolygon(arrowhead_);
  }
}

ClusterItem::ClusterItem(int kernelId, const QString& label, const QRectF& rect, const QRectF& labelRect,
                         double fontScale)
    : kernelId_(kernelId), label_(label), rect_(rect), labelRect_(labelRect), fontScale_(fontScale) {
  setZValue(0);
  setToolTip(QString("kernel #%1 %2").arg(kernelId).arg(label));
}

void ClusterItem::setHighlighted(bool on) {
  highlighted_ = on;
  setZValue(on ? 0.5 : 0);  // a highlighted border is not hidden under a neighbour's fill
  update();
}

QRectF ClusterItem::boundingRect() const { return rect_.adjusted(-3, -3, 3, 3); }

void ClusterItem::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  painter->setRenderHint(QPainter::Antialiasing);
  const SceneColours& colours = sceneColours();
  painter->setPen(highlighted_ ? QPen(selectionColor(), 3) : QPen(colours.clusterBorder, 1, Qt::DashLine));
  painter->setBrush(highlighted_ ? colours.highlightedClusterFill : colours.clusterFill);
  painter->drawRoundedRect(rect_, 6, 6);
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
