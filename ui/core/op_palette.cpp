#include "core/op_palette.h"

namespace tsui {

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
