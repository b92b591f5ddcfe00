#pragma once
// The report's stylesheet and script, compiled in so that a report needs no
// installed files and loads nothing from anywhere. The stylesheet's colours
// come from timeline/Palette.h, as the app's do.
#include <string>

namespace pipescope::report {

const std::string& reportCss();
extern const char* const kReportJs;

} // namespace pipescope::report
