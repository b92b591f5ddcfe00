#include "whatif/StageSpeeds.h"

#include "util/Error.h"
#include "util/Format.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

namespace pipescope::whatif {

namespace {

std::string_view trimmed(std::string_view s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
        s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.remove_suffix(1);
    return s;
}

// The whole of `text` as a number, or nothing.
std::optional<double> number(std::string_view text)
{
    text = trimmed(text);
    double x = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
        return std::nullopt;
    return x;
}

std::string numberText(double x)
{
    std::ostringstream o;
    o << x;
    return o.str();
}

void checkSpeed(double x, Setting setting, const std::string& what)
{
    if (!std::isfinite(x) || x <= 0 || x > 1e6)
        throw ValueError(setting, what + " is " + numberText(x) +
                                      "; a relative throughput must be a finite number above 0 and at most 1,000,000 "
                                      "(1 = as fast as the reference, 0.5 = twice as slow)");
}

} // namespace

bool speedsFromTrace(std::string_view text)
{
    text = trimmed(text);
    if (text.size() != 5)
        return false;
    for (size_t i = 0; i < 5; ++i)
        if (std::tolower(static_cast<unsigned char>(text[i])) != "trace"[i])
            return false;
    return true;
}

std::vector<double> parseStageSpeeds(const std::vector<std::string>& items)
{
    std::vector<double> speeds;
    for (size_t r = 0; r < items.size(); ++r) {
        const auto x = number(items[r]);
        if (!x)
            throw ValueError(Setting::StageSpeed, "the speed of stage " + std::to_string(r) + " is '" +
                                                printable(trimmed(items[r]), 40) +
                                                "', not a number; give one relative throughput per pipeline rank "
                                                "(e.g. 1,1,0.8,1) or 'trace' to read them from the trace");
        checkSpeed(*x, Setting::StageSpeed, "the speed of stage " + std::to_string(r));
        speeds.push_back(*x);
    }
    return speeds;
}

std::vector<double> parseStageSpeeds(std::string_view text)
{
    if (trimmed(text).empty())
        return {};
    std::vector<std::string> items;
    size_t from = 0;
    for (;;) {
        const size_t comma = text.find(',', from);
        items.emplace_back(text.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
        if (comma == std::string_view::npos)
            break;
        from = comma + 1;
    }
    return parseStageSpeeds(items);
}

std::vector<double> speedsFromGpuTypes(const std::vector<std::string>& types, const std::vector<std::string>& throughputs)
{
    if (types.empty() != throughputs.empty())
        throw ValueError(types.empty() ? Setting::GpuTypes : Setting::GpuThroughput,
                         "--gpu-types (one GPU type per stage, e.g. A,A,B,B) and --gpu-throughput (each type's relative "
                         "throughput, e.g. A=1,B=0.6) go together");
    std::map<std::string, double> throughput;
    for (const std::string& item : throughputs) {
        const size_t eq = item.find('=');
        if (eq == std::string::npos || eq == 0)
            throw ValueError(Setting::GpuThroughput, "'" + printable(item) + "' is not TYPE=SPEED (e.g. A=1,B=0.6)");
        const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
        const auto x = number(value);
        if (!x)
            throw ValueError(Setting::GpuThroughput, "the throughput of GPU type '" + printable(name) + "' is '" + printable(value) +
                                                   "', not a number");
        checkSpeed(*x, Setting::GpuThroughput, "the throughput of GPU type '" + printable(name) + "'");
        if (!throughput.emplace(name, *x).second)
            throw ValueError(Setting::GpuThroughput, "GPU type '" + printable(name) + "' is given twice");
    }
    std::vector<double> speeds;
    for (const std::string& type : types) {
        const auto it = throughput.find(type);
        if (it == throughput.end())
            throw ValueError(Setting::GpuTypes, "GPU type '" + printable(type) + "' has no throughput in --gpu-throughput");
        speeds.push_back(it->second);
    }
    return speeds;
}

} // namespace pipescope::whatif
