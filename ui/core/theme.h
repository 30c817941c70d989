// Light and dark themes. System (the default) keeps the style and palette the platform gave the
// application; Light and Dark use Qt's Fusion style with a light or a dark palette. Panels that paint
// their own colours (the graph, the code views, the legend) ask isDarkTheme() when they paint and
// repaint on QEvent::PaletteChange, so a switch takes effect at once.
#pragma once
#include <QColor>
#include <QString>

namespace tsui {

enum class Theme { System, Light, Dark };

// Applies `theme` to the whole application. Needs a QApplication.
void applyTheme(Theme theme);
Theme currentTheme();
QString themeName(Theme theme);            // "system", "light", "dark" (the settings' spelling)
Theme themeFromName(const QString& name);  // unknown names: System
// Whether the application's palette is dark (its window colour's lightness below half), whichever
// theme made it: a dark system theme counts.
bool isDarkTheme();

// Presentation (View ▸ Presentation): a high-contrast palette on top of the theme (black on white, or
// white on black for Dark), taken by the next applyTheme(). Listings turn pure black or white too.
void setHighContrast(bool on);
bool isHighContrast();

// The font zoom of every panel (View ▸ Zoom In / Zoom Out, Ctrl+= / Ctrl+-): steps of 10 %, from -3 to
// +12; fontScale() is the factor (1.0 at step 0). CodeView::codeFont() and the graph's labels follow it;
// MainWindow::setFontZoom applies it to the application font and the listings.
constexpr int kMinFontZoom = -3, kMaxFontZoom = 12;
void setFontZoomStep(int step);
int fontZoomStep();
double fontScale();

// Colours of listings (IR, source, the script) that read well on the theme's background.
struct CodeColours {
  QColor paper, text, margin, marginText, caretLine, linked, comment, keyword, number, string, preprocessor, op;
};
const CodeColours& codeColours();

}  // namespace tsui
