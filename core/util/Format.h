#pragma once
// Human-readable numbers and aligned text tables for the CLI's default output.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope {

// "1.234 ms", "850 ns", "12.5 s": three significant decimals in the best unit.
std::string formatDuration(int64_t ns);
// "1.5 GiB", "512 B".
std::string formatBytes(int64_t bytes);
// "12.34%".
std::string formatPercent(double fraction);
// A change as a signed percent with one decimal: 0.012 -> "+1.2%", -0.1 -> "-10.0%".
std::string formatSignedPercent(double fraction);
// "1,234,567".
std::string formatCount(int64_t n);
// "+1.234 ms", "-5.000 us", "0 ns": a shift applied to a clock, signed.
std::string formatShift(int64_t ns);
// A time base or other absolute time in Unix-epoch ns, exactly:
// "2023-10-04 04:13:59.587175550 UTC". A value before 2000 or after 2200 is
// not a calendar time (a monotonic clock's reading, a garbled field) and
// would read as a wrong date, so it is shown as "533338240 ns".
std::string formatEpochTime(int64_t ns);

// Text from an input, safe to quote in a message: control characters
// (terminal escapes included) become \xNN and text beyond maxBytes becomes "...".
std::string printable(std::string_view text, size_t maxBytes = 200);
// The length in bytes of the Unicode bidirectional control (U+061C, U+200E,
// U+200F, U+202A..U+202E, U+2066..U+2069) that starts at text[i], or 0.
// printable() and the report's HTML show them as \uXXXX: they reorder what
// follows on a screen, so a trace's name could hide the text after it.
int bidiControlAt(std::string_view text, size_t i);

// A text table of a thousand ranks would bury what the command prints
// around it: a table of more than kRowsWhole rows shows its first
// kRowsShown and says how many it left out (the command's --json, or
// info --all, has them all).
inline constexpr size_t kRowsWhole = 40;
inline constexpr size_t kRowsShown = 16;
class RowLimit {
public:
    RowLimit(size_t rows, bool all = false) : rows_(rows), shown_(all || rows <= kRowsWhole ? rows : kRowsShown) {}
    bool show(size_t row) const { return row < shown_; }
    bool cut() const { return shown_ < rows_; }
    // "  ... and 1,008 more ranks (how)\n", or "" when every row is shown.
    std::string more(const std::string& what, const std::string& how) const;

private:
    size_t rows_, shown_;
};

// Ranks as runs, the syntax --ranks reads: "0-255", "0-3,8,12-15"; past
// maxRuns runs, "0,4,8,12, ... (256 ranks)".
std::string rankRuns(std::vector<int> ranks, size_t maxRuns = 8);

class TextTable {
public:
    explicit TextTable(std::vector<std::string> header);
    // Columns whose header starts with '>' (stripped) are right-aligned; numbers usually are.
    void add(std::vector<std::string> row);
    std::string render(const std::string& indent = "  ") const;
    bool empty() const { return rows_.empty(); }

private:
    std::vector<std::string> header_;
    std::vector<bool> right_;
    std::vector<std::vector<std::string>> rows_;
};

} // namespace pipescope
