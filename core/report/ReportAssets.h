#pragma once
// The report's stylesheet and script, compiled in so that a report needs no
// installed files and loads nothing from anywhere.
namespace pipescope::report {

extern const char* const kReportCss;
extern const char* const kReportJs;

} // namespace pipescope::report
