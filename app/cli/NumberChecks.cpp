#include "NumberChecks.h"

#include "util/Format.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace pipescope::cli {

namespace {

// "100,000" in a sentence, "100000" in --help's short form.
std::string numberText(double v, bool grouped = true)
{
    if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 1e15)
        return grouped ? formatCount(static_cast<int64_t>(v)) : std::to_string(static_cast<int64_t>(v));
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.10g", v);
    return buf;
}

// "from 1 to 4,096", "at least 0", "at most 64" or "" (no bounds).
std::string boundsText(std::optional<double> min, std::optional<double> max, const std::string& unit)
{
    const std::string u = unit.empty() ? "" : " " + unit;
    if (min && max)
        return "from " + numberText(*min) + " to " + numberText(*max) + u;
    if (min)
        return "at least " + numberText(*min) + u;
    if (max)
        return "at most " + numberText(*max) + u;
    return {};
}

// CLI11 shows this after the option's type in --help: "INT:1..4096", "FLOAT:>=0".
std::string shortBounds(std::optional<double> min, std::optional<double> max)
{
    if (min && max)
        return numberText(*min, false) + ".." + numberText(*max, false);
    if (min)
        return ">=" + numberText(*min, false);
    if (max)
        return "<=" + numberText(*max, false);
    return {};
}

std::string got(const std::string& value, bool numeric)
{
    return numeric ? " (got " + printable(value, 40) + ")" : " (got '" + printable(value, 40) + "')";
}

} // namespace

CLI::Validator wholeNumber(std::optional<int64_t> min, std::optional<int64_t> max)
{
    std::optional<double> lo, hi;
    if (min)
        lo = static_cast<double>(*min);
    if (max)
        hi = static_cast<double>(*max);
    const std::string bounds = boundsText(lo, hi, {});
    const std::string want = "must be a whole number" + (bounds.empty() ? "" : (lo && hi ? " " : ", ") + bounds);
    auto check = [min, max, want](const std::string& text) -> std::string {
        int64_t v = 0;
        const char* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ptr != end || ec == std::errc::invalid_argument)
            return want + got(text, false);
        if (ec == std::errc::result_out_of_range || (min && v < *min) || (max && v > *max))
            return want + got(text, true);
        return {};
    };
    return CLI::Validator(check, shortBounds(lo, hi));
}

CLI::Validator number(std::optional<double> min, std::optional<double> max, std::string unit)
{
    const std::string bounds = boundsText(min, max, unit);
    const std::string want = "must be a number" + (bounds.empty() ? "" : (min && max ? " " : ", ") + bounds);
    auto check = [min, max, want](const std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size())
            return want + got(text, false);
        const bool bounded = min || max;
        if (bounded && (!std::isfinite(v) || (min && v < *min) || (max && v > *max)))
            return want + got(text, true);
        return {};
    };
    return CLI::Validator(check, shortBounds(min, max));
}

CLI::Validator numberOrWord(const std::string& word)
{
    auto check = [word](const std::string& text) -> std::string {
        if (text == word)
            return {};
        char* end = nullptr;
        (void)std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size())
            return "must be a number or '" + word + "'" + got(text, false);
        return {};
    };
    return CLI::Validator(check, "NUMBER|" + word);
}

} // namespace pipescope::cli
