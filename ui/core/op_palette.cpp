#include "core/op_palette.h"

#include "core/theme.h"

namespace tsui {

const SceneColours& sceneColours() {
  static const QString legend =
      "#legend { background: %1; border: 1px solid %2; border-radius: 4px; } QLabel { color: %3; }";
  static const SceneColours light{Qt::white, QColor(0x60, 0x60, 0x60), QColor(0x4a, 0x4a, 0x4a), kernelFillColor(),
                                  kernelBorderColor(), QColor(0x44, 0x50, 0x5c), QColor(0xff, 0xf4, 0xec),
                                  legend.arg("rgba(255,255,255,225)", "#d0d4d9", "#333")};
  static const SceneColours dark{QColor(0x1e, 0x1f, 0x22), QColor(0xa8, 0xae, 0xb6), QColor(0x18, 0x18, 0x18),
                                 QColor(0x2a, 0x2d, 0x33), QColor(0x6b, 0x76, 0x83), QColor(0xc9, 0xd1, 0xd9),
                                 QColor(0x45, 0x30, 0x22), legend.arg("rgba(43,45,49,230)", "#4a4e55", "#dfe1e5")};
  return isDarkTheme() ? dark : light;
}


const std::vector<OpClassStyle>& opClassStyles() {
  static const std::vector<OpClassStyle> styles = {
      {"load", "load (buffer)", QColor(0x9e, 0xca, 0xe1)}, {"const", "const", QColor(0xd9, 0xd9, 0xd9)},
      {"movement", "movement", QColor(0xb8, 0xe0, 0xb0)},  {"elementwise", "elementwise", QColor(0xfd, 0xd0, 0xa2)},
      {"reduce", "reduce", QColor(0xf4, 0xa6, 0xa6)},      {"other", "other", QColor(0xd4, 0xc8, 0xf0)},
  };
  return styles;
}

QColor opClassColor(const QString& opClass) {
  for (const OpClassStyle& s : opClassStyles())
    if (s.opClass == opClass) return s.fill;
  return opClassStyles().back().fill;
}

}  // namespace tsui
