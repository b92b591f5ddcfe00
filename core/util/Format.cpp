#include "util/Format.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string_view>
#include <cstdlib>
#include <ctime>

namespace pipescope {

namespace {

// Columns a UTF-8 string takes in a terminal: its code points ("µs" is two).
size_t displayWidth(const std::string& s)
{
    size_t n = 0;
    for (unsigned char c : s)
        n += (c & 0xC0) != 0x80 ? 1 : 0;
    return n;
}

} // namespace

std::string formatDuration(int64_t ns)
{
    char buf[64];
    // |INT64_MIN| does not fit in int64; compare magnitudes unsigned.
    const uint64_t a = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    if (a < 1000)
        std::snprintf(buf, sizeof buf, "%" PRId64 " ns", ns);
    else if (a < 1000000)
        std::snprintf(buf, sizeof buf, "%.3f µs", double(ns) / 1e3);
    else if (a < 1000000000)
        std::snprintf(buf, sizeof buf, "%.3f ms", double(ns) / 1e6);
    else
        std::snprintf(buf, sizeof buf, "%.3f s", double(ns) / 1e9);
    return buf;
}

std::string formatBytes(int64_t bytes)
{
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = double(bytes);
    int u = 0;
    while (std::abs(v) >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    char buf[64];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%" PRId64 " B", bytes);
    else
        std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

std::string formatPercent(double fraction)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f%%", fraction * 100.0);
    return buf;
}

std::string formatSignedPercent(double fraction)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%+.1f%%", fraction * 100.0);
    // What rounds to zero has no sign ("-0.0%" reads as a loss).
    if (std::string_view(buf + 1) == "0.0%")
        return "0.0%";
    return buf;
}

std::string formatCount(int64_t n)
{
    std::string digits = std::to_string(std::llabs(n));
    std::string out;
    int k = 0;
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
        if (k > 0 && k % 3 == 0)
            out.push_back(',');
        out.push_back(*it);
        ++k;
    }
    if (n < 0)
        out.push_back('-');
    std::reverse(out.begin(), out.end());
    return out;
}

std::string formatShift(int64_t ns)
{
    return (ns > 0 ? "+" : "") + formatDuration(ns);
}

std::string formatEpochTime(int64_t ns)
{
    constexpr int64_t kYear2000 = 946'684'800'000'000'000, kYear2200 = 7'258'118'400'000'000'000;
    char buf[64];
    if (ns < kYear2000 || ns >= kYear2200) {
        std::snprintf(buf, sizeof buf, "%" PRId64 " ns", ns);
        return buf;
    }
    const std::time_t seconds = static_cast<std::time_t>(ns / 1'000'000'000);
    std::tm tm{};
    gmtime_r(&seconds, &tm);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", &tm);
    std::snprintf(buf, sizeof buf, "%s.%09" PRId64 " UTC", date, ns % 1'000'000'000);
    return buf;
}

TextTable::TextTable(std::vector<std::string> header)
{
    for (auto& h : header) {
        bool right = !h.empty() && h[0] == '>';
        right_.push_back(right);
        header_.push_back(right ? h.substr(1) : h);
    }
}

void TextTable::add(std::vector<std::string> row)
{
    row.resize(header_.size());
    // Cells quote trace names and paths: control and bidirectional
    // characters are shown as codes, never sent to the terminal.
    for (std::string& cell : row) {
        bool plain = true;
        for (size_t i = 0; i < cell.size() && plain; ++i) {
            const auto c = static_cast<unsigned char>(cell[i]);
            plain = c >= 0x20 && c != 0x7f && c != 0xc2 && bidiControlAt(cell, i) == 0;
        }
        if (!plain)
            cell = printable(cell, cell.size());
    }
    rows_.push_back(std::move(row));
}

std::string RowLimit::more(const std::string& what, const std::string& how) const
{
    if (!cut())
        return "";
    return "  ... and " + formatCount(static_cast<int64_t>(rows_ - shown_)) + " more " + what + " (" + how + ")\n";
}

std::string rankRuns(std::vector<int> ranks, size_t maxRuns)
{
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    std::string out;
    size_t runs = 0;
    for (size_t i = 0; i < ranks.size();) {
        size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
            ++j;
        if (runs++ == maxRuns) {
            out += ", ... (" + std::to_string(ranks.size()) + " ranks)";
            break;
        }
        out += (out.empty() ? "" : ",") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
        i = j + 1;
    }
    return out;
}

std::string TextTable::render(const std::string& indent) const
{
    std::vector<size_t> width(header_.size(), 0);
    for (size_t c = 0; c < header_.size(); ++c) {
        width[c] = displayWidth(header_[c]);
        for (const auto& r : rows_)
            width[c] = std::max(width[c], displayWidth(r[c]));
    }
    std::string out;
    auto line = [&](const std::vector<std::string>& cells) {
        std::string l = indent;
        for (size_t c = 0; c < cells.size(); ++c) {
            std::string pad(width[c] - displayWidth(cells[c]), ' ');
            l += right_[c] ? pad + cells[c] : cells[c] + (c + 1 < cells.size() ? pad : "");
            if (c + 1 < cells.size())
                l += "  ";
        }
        while (!l.empty() && l.back() == ' ')
            l.pop_back();
        out += l + "\n";
    };
    line(header_);
    for (const auto& r : rows_)
        line(r);
    return out;
}

int bidiControlAt(std::string_view t, size_t i)
{
    auto at = [&](size_t k) { return k < t.size() ? static_cast<unsigned char>(t[k]) : 0u; };
    if (at(i) == 0xd8 && at(i + 1) == 0x9c)
        return 2; // U+061C
    if (at(i) != 0xe2)
        return 0;
    const unsigned b1 = at(i + 1), b2 = at(i + 2);
    if (b1 == 0x80 && (b2 == 0x8e || b2 == 0x8f || (b2 >= 0xaa && b2 <= 0xae)))
        return 3; // U+200E, U+200F, U+202A..U+202E
    if (b1 == 0x81 && b2 >= 0xa6 && b2 <= 0xa9)
        return 3; // U+2066..U+2069
    return 0;
}

namespace {
unsigned codePointAt(std::string_view t, size_t i, size_t len)
{
    auto b = [&](size_t k) { return static_cast<unsigned>(static_cast<unsigned char>(t[i + k])); };
    return len == 2 ? ((b(0) & 0x1f) << 6) | (b(1) & 0x3f) : ((b(0) & 0x0f) << 12) | ((b(1) & 0x3f) << 6) | (b(2) & 0x3f);
}
} // namespace

std::string printable(std::string_view text, size_t maxBytes)
{
    static const char* hex = "0123456789abcdef";
    std::string out;
    out.reserve(std::min(text.size(), maxBytes) + 8);
    for (size_t i = 0; i < text.size(); ++i) {
        if (i >= maxBytes) {
            out += "...";
            break;
        }
        auto c = static_cast<unsigned char>(text[i]);
        // C1 controls (U+0080..U+009F) are escapes to some terminals too.
        const bool c1 = c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                        static_cast<unsigned char>(text[i + 1]) <= 0x9f;
        // Bidirectional controls (U+061C, U+200E-F, U+202A-E, U+2066-9) reorder
        // what follows on the screen: a name could hide or fake text after it.
        if (const int bidi = bidiControlAt(text, i); bidi > 0) {
            const unsigned cp = codePointAt(text, i, static_cast<size_t>(bidi));
            char buf[16];
            std::snprintf(buf, sizeof buf, "\\u%04x", cp);
            out += buf;
            i += static_cast<size_t>(bidi) - 1;
            continue;
        }
        if (c < 0x20 || c == 0x7f || c1) {
            if (c1)
                c = static_cast<unsigned char>(text[++i]);
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

} // namespace pipescope
