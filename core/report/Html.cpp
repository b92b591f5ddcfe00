#include "report/Html.h"

#include "util/Format.h"
#include "util/JsonText.h"

namespace pipescope::report {

std::string htmlEscape(std::string_view text)
{
    std::string out;
    out.reserve(text.size() + text.size() / 8);
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        // A bidirectional control would reorder the page's text after it: shown as its code.
        if (const int bidi = bidiControlAt(text, i); bidi > 0) {
            out += printable(text.substr(i, static_cast<size_t>(bidi)));
            i += static_cast<size_t>(bidi) - 1;
            continue;
        }
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        case '\0': out += "\xEF\xBF\xBD"; break; // a NUL is a parse error in HTML
        default: out += c;
        }
    }
    return out;
}

std::string scriptJson(const nlohmann::json& value)
{
    const std::string text = jsonText(value);
    std::string out;
    out.reserve(text.size() + 64);
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        // Outside strings JSON has none of these characters, so replacing them
        // everywhere only ever rewrites string contents.
        if (c == '<')
            out += "\\u003c";
        else if (c == '>')
            out += "\\u003e";
        else if (c == '&')
            out += "\\u0026";
        else if (const int bidi = bidiControlAt(text, i); bidi > 0) {
            // Shown as its code once parsed ("\\u202e" is the text \u202e), never obeyed.
            out += "\\" + printable(std::string_view(text).substr(i, static_cast<size_t>(bidi)));
            i += static_cast<size_t>(bidi) - 1;
        } else if (c == '\xE2' && i + 2 < text.size() && text[i + 1] == '\x80' && (text[i + 2] == '\xA8' || text[i + 2] == '\xA9')) {
            out += text[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
            i += 2;
        } else
            out += c;
    }
    return out;
}

} // namespace pipescope::report
