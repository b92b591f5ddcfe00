#pragma once
// Making untrusted text safe in the report: trace-derived strings (kernel
// and annotation names, file paths, host names) go through htmlEscape() in
// markup, and embedded data goes through scriptJson(), so nothing in a trace
// can close a tag, open a script or break out of the data block.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace pipescope::report {

// Escapes & < > " ' for element text and quoted attribute values.
std::string htmlEscape(std::string_view text);

// JSON text that is safe inside <script type="application/json">: "<", ">"
// and "&" become \u003c, \u003e, \u0026 (so neither "</script>" nor "<!--"
// can appear), U+2028 and U+2029 become escapes, and invalid UTF-8 becomes
// U+FFFD. JSON.parse and any JSON reader give back the original strings.
std::string scriptJson(const nlohmann::json& value);

} // namespace pipescope::report
