#pragma once
// What the server says of one event of a remote job (a details response,
// docs/remote.md): its whole name, the NCCL operation it ran and the CPU call
// that launched it, as HTML lines for the Details panel. The server's strings
// are trace text: escaped, never markup.
#include <nlohmann/json.hpp>

#include <QString>

namespace pipescope::gui {

QString serverDetailsHtml(const nlohmann::json& details);

} // namespace pipescope::gui
