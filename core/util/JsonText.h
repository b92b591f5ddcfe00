#pragma once
// JSON text for output documents. Trace-derived strings are not always valid
// UTF-8; invalid bytes become U+FFFD instead of aborting the whole output.
#include <nlohmann/json.hpp>
#include <string>

namespace pipescope {

inline std::string jsonText(const nlohmann::json& j, int indent = -1)
{
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace pipescope
