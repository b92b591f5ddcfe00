#pragma once
// core/timeline/Palette.h's colours as Qt colours, for every view that paints them.
#include "timeline/Palette.h"

#include <QColor>

#include <string_view>

namespace pipescope::gui {

inline QColor toQColor(timeline::Rgb c, int alpha = 255) { return QColor(c.r, c.g, c.b, alpha); }
inline QColor toQColor(std::string_view hex, int alpha = 255) { return toQColor(timeline::rgbFromHex(hex), alpha); }

} // namespace pipescope::gui
