#pragma once
// Appearance: a light or dark theme (or the system's), the text size and the
// timeline's row density, kept between sessions (QSettings "appearance/...").
// The views paint with the application palette, so a theme change is a
// palette change they follow; the trace colours (core/timeline/Palette.h)
// stay the same in both themes, as in Perfetto and Nsight Systems.
#include <QColor>
#include <QPalette>

namespace pipescope::gui {

enum class ThemeChoice { System, Light, Dark };
enum class RowDensity { Compact, Normal, Comfortable };

struct Appearance {
    ThemeChoice theme = ThemeChoice::System;
    int fontPoint = 0; // 0: the system's size
    RowDensity density = RowDensity::Normal;
};

// What the user chose last time (defaults where nothing was saved).
Appearance savedAppearance();
void saveAppearance(const Appearance& a);

// Applies the theme and text size to the running application: Dark and
// Light use the Fusion style with pipescope's palettes; System restores the
// palette and style the application started with.
void applyAppearance(const Appearance& a);

// Whether a palette is dark (its window colour is).
bool isDark(const QPalette& palette);

// A timeline row's height in pixels for a density: 15, 18 or 22.
int rowHeight(RowDensity density);

// The colours views paint besides the trace's, for the palette they paint with.
struct ViewColors {
    QColor text;         // labels, axis
    QColor header;       // group header rows
    QColor separator;    // the line under pinned tracks
    QColor hoverOutline; // the box around the hovered event
    QColor labelBox;     // behind labels drawn over events
};
ViewColors viewColors(const QPalette& palette);

// "system", "light", "dark" and back; unknown text gives System.
const char* toString(ThemeChoice t);
ThemeChoice themeFromString(const QString& s);

} // namespace pipescope::gui
