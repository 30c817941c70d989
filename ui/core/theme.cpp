#include "core/theme.h"

#include <QApplication>
#include <algorithm>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>

namespace tsui {
namespace {

Theme g_theme = Theme::System;
bool g_highContrast = false;
int g_fontZoom = 0;
bool g_systemSaved = false;
QString g_systemStyle;
QPalette g_systemPalette;

// Fusion's dark palette, the colours of the usual "dark Fusion" (as in Qt Creator's dark theme):
// greys for surfaces, a blue for selection and links, and dimmed text for disabled widgets.
QPalette darkPalette() {
  QPalette p;
  const QColor window(0x2b, 0x2d, 0x31), base(0x1e, 0x1f, 0x22), text(0xdf, 0xe1, 0xe5), dim(0x80, 0x84, 0x8c);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, QColor(0x26, 0x28, 0x2c));
  p.setColor(QPalette::ToolTipBase, QColor(0x3c, 0x3f, 0x44));
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, dim);
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, QColor(0x35, 0x37, 0x3c));
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, Qt::red);
  p.setColor(QPalette::Light, QColor(0x45, 0x48, 0x4e));
  p.setColor(QPalette::Midlight, QColor(0x3a, 0x3d, 0x42));
  p.setColor(QPalette::Mid, QColor(0x25, 0x27, 0x2a));
  p.setColor(QPalette::Dark, QColor(0x1a, 0x1b, 0x1e));
  p.setColor(QPalette::Shadow, Qt::black);
  p.setColor(QPalette::Highlight, QColor(0x2f, 0x65, 0xca));
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, QColor(0x6c, 0xa8, 0xff));
  p.setColor(QPalette::LinkVisited, QColor(0xa7, 0x8b, 0xfa));
  for (QPalette::ColorRole role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, dim);
  p.setColor(QPalette::Disabled, QPalette::Highlight, QColor(0x45, 0x48, 0x4e));
  return p;
}

// Pure black and white with a strong blue (or yellow) selection: WCAG's highest contrast, for a projector.
QPalette highContrastPalette(bool dark) {
  QPalette p = dark ? darkPalette() : QApplication::style()->standardPalette();
  const QColor back = dark ? Qt::black : Qt::white, fore = dark ? Qt::white : Qt::black;
  // Fusion draws check boxes' and frames' outlines a shade darker than the window: over a dark theme the
  // window and buttons keep their dark grey, or the outlines would vanish into black.
  for (QPalette::ColorRole role : {QPalette::Window, QPalette::Base, QPalette::AlternateBase, QPalette::Button,
                                   QPalette::ToolTipBase})
    if (!dark || role == QPalette::Base || role == QPalette::AlternateBase)
      p.setColor(QPalette::Active, role, back), p.setColor(QPalette::Inactive, role, back);
  for (QPalette::ColorRole role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText, QPalette::ToolTipText})
    p.setColor(QPalette::Active, role, fore), p.setColor(QPalette::Inactive, role, fore);
  p.setColor(QPalette::Highlight, dark ? QColor(0xff, 0xd7, 0x00) : QColor(0x00, 0x33, 0xcc));
  p.setColor(QPalette::HighlightedText, dark ? Qt::black : Qt::white);
  p.setColor(QPalette::Link, dark ? QColor(0x80, 0xc0, 0xff) : QColor(0x00, 0x33, 0xcc));
  p.setColor(QPalette::PlaceholderText, dark ? QColor(0xc0, 0xc0, 0xc0) : QColor(0x40, 0x40, 0x40));
  return p;
}

}  // namespace

void setHighContrast(bool on) { g_highContrast = on; }
bool isHighContrast() { return g_highContrast; }

void setFontZoomStep(int step) { g_fontZoom = std::clamp(step, kMinFontZoom, kMaxFontZoom); }
int fontZoomStep() { return g_fontZoom; }
double fontScale() { return 1.0 + 0.1 * g_fontZoom; }

void applyTheme(Theme theme) {
  if (theme == Theme::System && !g_systemSaved && !g_highContrast) return;  // the platform's, untouched so far
  if (!g_systemSaved) {  // what the platform gave, before any theme changed it
    g_systemStyle = QApplication::style()->name();
    g_systemPalette = QApplication::palette();
    g_systemSaved = true;
  }
  g_theme = theme;
  if (g_highContrast) {  // over the theme's darkness: a dark system theme stays dark
    const bool dark = theme == Theme::Dark || (theme == Theme::System && g_systemPalette.color(QPalette::Window).lightness() < 128);
    QApplication::setStyle(QStyleFactory::create("Fusion"));
    QApplication::setPalette(highContrastPalette(dark));
    return;
  }
  if (theme == Theme::System) {
    QApplication::setStyle(QStyleFactory::create(g_systemStyle));
    QApplication::setPalette(g_systemPalette);
    return;
  }
  QApplication::setStyle(QStyleFactory::create("Fusion"));
  QApplication::setPalette(theme == Theme::Dark ? darkPalette() : QApplication::style()->standardPalette());
}

Theme currentTheme() { return g_theme; }

QString themeName(Theme theme) {
  switch (theme) {
    case Theme::Light: return "light";
    case Theme::Dark: return "dark";
    case Theme::System: break;
  }
  return "system";
}

Theme themeFromName(const QString& name) {
  if (name == "light") return Theme::Light;
  if (name == "dark") return Theme::Dark;
  return Theme::System;
}

bool isDarkTheme() { return QApplication::palette().color(QPalette::Window).lightness() < 128; }

const CodeColours& codeColours() {
  // Light: the GitHub-like colours the listings always had. Dark: the same hues, lighter, on the
  // palette's base (close to VS Code's Dark+).
  static const CodeColours light{QColor(0xff, 0xff, 0xff), QColor(0x1f, 0x23, 0x28), QColor(0xf3, 0xf4, 0xf6),
                                 QColor(0x9a, 0xa0, 0xa6), QColor(0xf5, 0xf8, 0xff), QColor(0xff, 0xf1, 0xb8),
                                 QColor(0x00, 0x7f, 0x00), QColor(0x00, 0x00, 0x7f), QColor(0x00, 0x7f, 0x7f),
                                 QColor(0x7f, 0x00, 0x7f), QColor(0x7f, 0x7f, 0x00), QColor(0x00, 0x00, 0x00)};
  static const CodeColours dark{QColor(0x1e, 0x1f, 0x22), QColor(0xd4, 0xd4, 0xd4), QColor(0x26, 0x28, 0x2c),
                                QColor(0x85, 0x8b, 0x94), QColor(0x2a, 0x2d, 0x35), QColor(0x4d, 0x44, 0x1c),
                                QColor(0x6a, 0x99, 0x55), QColor(0x56, 0x9c, 0xd6), QColor(0xb5, 0xce, 0xa8),
                                QColor(0xce, 0x91, 0x78), QColor(0xc5, 0x86, 0xc0), QColor(0xd4, 0xd4, 0xd4)};
  // High contrast: the same hues, darker on pure white or lighter on pure black; plain text pure.
  static const CodeColours lightContrast{Qt::white, Qt::black, QColor(0xe8, 0xe8, 0xe8), Qt::black,
                                         QColor(0xe8, 0xf0, 0xff), QColor(0xff, 0xe0, 0x66), QColor(0x00, 0x5a, 0x00),
                                         QColor(0x00, 0x00, 0xa0), QColor(0x00, 0x55, 0x55), QColor(0x80, 0x00, 0x50),
                                         QColor(0x55, 0x40, 0x00), Qt::black};
  static const CodeColours darkContrast{Qt::black, Qt::white, QColor(0x20, 0x20, 0x20), Qt::white,
                                        QColor(0x20, 0x20, 0x40), QColor(0x66, 0x55, 0x00), QColor(0x80, 0xff, 0x80),
                                        QColor(0x80, 0xc0, 0xff), QColor(0xc0, 0xff, 0xc0), QColor(0xff, 0xb0, 0x80),
                                        QColor(0xff, 0x99, 0xff), Qt::white};
  if (g_highContrast) return isDarkTheme() ? darkContrast : lightContrast;
  return isDarkTheme() ? dark : light;
}

}  // namespace tsui
