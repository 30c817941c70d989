// Colours of the graph, one per op class, shared by the scene, the legend and the SVG export so
// that all three agree. Pastel fills keep the black labels readable; the hue tells the class.
#pragma once
#include <QColor>
#include <QString>
#include <vector>

namespace tsui {

struct OpClassStyle {
  QString opClass;  // as in ts::GraphNodeInfo::op_class
  QString title;    // shown in the legend
  QColor fill;
};

// In legend order: load, const, movement, elementwise, reduce, other.
const std::vector<OpClassStyle>& opClassStyles();
// Fill colour of an op class; unknown classes get the "other" colour.
QColor opClassColor(const QString& opClass);

// Cluster (kernel) colours.
inline QColor kernelBorderColor() { return QColor(0x7a, 0x86, 0x94); }
inline QColor kernelFillColor() { return QColor(0xf6, 0xf8, 0xfa); }
inline QColor selectionColor() { return QColor(0xe8, 0x59, 0x0c); }

// The graph view's own colours in the current theme (core/theme.h). Node fills stay the pastel op
// colours in both themes (their black labels read on them); what sits on the background changes.
// The SVG export keeps the light colours above: it is a document, not a view.
struct SceneColours {
  QColor background, edge, nodeBorder, clusterFill, clusterBorder, clusterText, highlightedClusterFill;
  QString legendStyle;  // the legend overlay's style sheet (its colours; the font size is the panel's)
};
const SceneColours& sceneColours();

}  // namespace tsui
