#include "whatif/MicrobatchSizes.h"

#include "util/Error.h"
#include "util/Format.h"
#include "util/InputFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

namespace pipescope::whatif {

std::string_view toString(MicrobatchOrder order)
{
    switch (order) {
    case MicrobatchOrder::Given: return "given";
    case MicrobatchOrder::Equal: return "equal";
    case MicrobatchOrder::LongestFirst: return "longest-first";
    case MicrobatchOrder::ShortestFirst: return "shortest-first";
    case MicrobatchOrder::LongShort: return "long-short";
    }
    return "given";
}

std::optional<MicrobatchOrder> microbatchOrderFromString(std::string_view name)
{
    for (MicrobatchOrder o : allMicrobatchOrders())
        if (toString(o) == name)
            return o;
    if (name == "measured" || name == "as-measured")
        return MicrobatchOrder::Given;
    return std::nullopt;
}

const std::vector<MicrobatchOrder>& allMicrobatchOrders()
{
    static const std::vector<MicrobatchOrder> all{MicrobatchOrder::Given, MicrobatchOrder::Equal,
                                                  MicrobatchOrder::LongestFirst, MicrobatchOrder::ShortestFirst,
                                                  MicrobatchOrder::LongShort};
    return all;
}

std::vector<double> MicrobatchSizes::size() const
{
    const int M = count();
    std::vector<double> out(static_cast<size_t>(M), 0.0);
    if (M == 0)
        return out;
    for (const auto* rowsOf : {&forward, &backward})
        for (const std::vector<double>& row : *rowsOf)
            for (int m = 0; m < M && m < static_cast<int>(row.size()); ++m)
                out[size_t(m)] += row[size_t(m)];
    const double mean = std::accumulate(out.begin(), out.end(), 0.0) / M;
    if (mean > 0)
        for (double& x : out)
            x /= mean;
    return out;
}

double MicrobatchSizes::spread() const
{
    const std::vector<double> s = size();
    if (s.size() < 2)
        return 0.0;
    double var = 0;
    for (double x : s)
        var += (x - 1.0) * (x - 1.0);
    return std::sqrt(var / static_cast<double>(s.size()));
}

std::vector<int> microbatchPermutation(const std::vector<double>& size, MicrobatchOrder order)
{
    std::vector<int> perm(size.size());
    std::iota(perm.begin(), perm.end(), 0);
    auto longestFirst = [&] {
        // Ties keep their given order, so the permutation is deterministic.
        std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return size[size_t(a)] > size[size_t(b)]; });
    };
    switch (order) {
    case MicrobatchOrder::Given:
    case MicrobatchOrder::Equal:
        break;
    case MicrobatchOrder::LongestFirst:
        longestFirst();
        break;
    case MicrobatchOrder::ShortestFirst:
        std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return size[size_t(a)] < size[size_t(b)]; });
        break;
    case MicrobatchOrder::LongShort: {
        // Longest, shortest, second longest, second shortest, ...: a long
        // microbatch is followed by a short one, so a neighbour that waited
        // on it catches up.
        longestFirst();
        std::vector<int> out;
        out.reserve(perm.size());
        size_t lo = 0, hi = perm.size();
        while (lo < hi) {
            out.push_back(perm[lo++]);
            if (lo < hi)
                out.push_back(perm[--hi]);
        }
        perm = std::move(out);
        break;
    }
    }
    return perm;
}

namespace {

[[noreturn]] void badSpec(const std::string& spec, const std::string& why)
{
    throw ValueError(Setting::MicrobatchSizes, "'" + printable(spec, 80) + "': " + why +
                                             "; give lognormal:SIGMA, uniform:LO,HI or one size per microbatch (1,0.5,2,...)");
}

std::vector<double> parseNumbers(const std::string& text, const std::string& spec)
{
    std::vector<double> out;
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, ',')) {
        size_t used = 0;
        double x = 0;
        try {
            x = std::stod(item, &used);
        } catch (const std::exception&) {
            badSpec(spec, "'" + printable(item, 40) + "' is not a number");
        }
        if (used != item.size() && item.find_first_not_of(" \t", used) != std::string::npos)
            badSpec(spec, "'" + printable(item, 40) + "' is not a number");
        out.push_back(x);
    }
    return out;
}

std::vector<double> normalised(std::vector<double> v)
{
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(std::max<size_t>(1, v.size()));
    if (mean > 0)
        for (double& x : v)
            x /= mean;
    return v;
}

} // namespace

std::vector<double> microbatchSizesFromSpec(const std::string& spec, int count, uint64_t seed)
{
    if (count < 1)
        badSpec(spec, "there are no microbatches");
    const size_t colon = spec.find(':');
    const std::string kind = colon == std::string::npos ? "" : spec.substr(0, colon);
    const std::string args = colon == std::string::npos ? spec : spec.substr(colon + 1);
    std::vector<double> sizes;
    std::mt19937_64 rng(seed);
    if (kind == "lognormal") {
        const std::vector<double> a = parseNumbers(args, spec);
        if (a.size() != 1 || !std::isfinite(a[0]) || a[0] < 0 || a[0] > 3)
            badSpec(spec, "the log-normal sigma must be one number from 0 to 3");
        std::lognormal_distribution<double> d(0.0, a[0]);
        for (int m = 0; m < count; ++m)
            sizes.push_back(d(rng));
    } else if (kind == "uniform") {
        const std::vector<double> a = parseNumbers(args, spec);
        if (a.size() != 2 || !std::isfinite(a[0]) || !std::isfinite(a[1]) || a[0] <= 0 || a[1] < a[0])
            badSpec(spec, "uniform takes two sizes LO,HI with 0 < LO <= HI");
        std::uniform_real_distribution<double> d(a[0], a[1]);
        for (int m = 0; m < count; ++m)
            sizes.push_back(d(rng));
    } else if (kind.empty()) {
        sizes = parseNumbers(args, spec);
        if (static_cast<int>(sizes.size()) != count)
            badSpec(spec, std::to_string(sizes.size()) + " sizes given for " + std::to_string(count) + " microbatches");
        for (double x : sizes)
            if (!std::isfinite(x) || x <= 0 || x > 1e6)
                badSpec(spec, "every size must be a number above 0 (and at most a million)");
    } else {
        badSpec(spec, "unknown distribution '" + printable(kind, 40) + "'");
    }
    return normalised(std::move(sizes));
}

std::string_view toString(SizeSource s)
{
    switch (s) {
    case SizeSource::Tokens: return "tokens";
    case SizeSource::Simulated: return "simulated";
    case SizeSource::Trace: break;
    }
    return "trace";
}

MicrobatchSizes uniformRows(std::vector<double> sizes, SizeSource source)
{
    MicrobatchSizes s;
    s.source = source;
    sizes = normalised(std::move(sizes));
    s.forward.push_back(sizes);
    s.backward.push_back(std::move(sizes));
    return s;
}

MicrobatchTokens loadMicrobatchTokens(const std::string& path)
{
    const std::string text = InputFile::readAll(path);
    MicrobatchTokens out;
    auto fail = [&](const std::string& why) -> void {
        throw Error(path + ": " + why +
                    "; a tokens file lists each microbatch's token count (numbers separated by commas, spaces or "
                    "lines) or is JSON {\"tokens\": [...]} (docs/whatif.md, Uneven microbatches)");
    };
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{') {
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(text);
        } catch (const nlohmann::json::exception& e) {
            fail(std::string("not valid JSON (") + e.what() + ")");
        }
        if (!j.contains("tokens") || !j["tokens"].is_array())
            fail("the JSON object has no \"tokens\" array");
        for (const auto& t : j["tokens"]) {
            if (!t.is_number())
                fail("a token count is not a number");
            out.tokens.push_back(t.get<double>());
        }
        auto perToken = [&](const char* key, std::optional<double>& into) {
            if (!j.contains(key))
                return;
            if (!j[key].is_number() || !std::isfinite(j[key].get<double>()) || j[key].get<double>() < 0)
                fail(std::string("\"") + key + "\" must be a number of at least 0 (ns per token per layer)");
            into = j[key].get<double>();
        };
        perToken("forward_ns_per_token", out.forwardNsPerToken);
        perToken("backward_ns_per_token", out.backwardNsPerToken);
    } else {
        std::istringstream in(text);
        std::string line;
        int lineNo = 0;
        while (std::getline(in, line)) {
            ++lineNo;
            if (const size_t hash = line.find('#'); hash != std::string::npos)
                line.resize(hash);
            std::replace(line.begin(), line.end(), ',', ' ');
            std::istringstream words(line);
            std::string w;
            while (words >> w) {
                size_t used = 0;
                double x = 0;
                try {
                    x = std::stod(w, &used);
                } catch (const std::exception&) {
                    used = 0;
                }
                if (used != w.size())
                    fail("line " + std::to_string(lineNo) + ": '" + printable(w, 40) + "' is not a number");
                out.tokens.push_back(x);
            }
        }
    }
    if (out.tokens.empty())
        fail("it lists no token counts");
    if (out.tokens.size() > 1'000'000)
        fail("it lists more than a million microbatches");
    for (double t : out.tokens)
        if (!std::isfinite(t) || t <= 0 || t > 1e12)
            fail("every token count must be a number above 0 (and at most 10^12)");
    return out;
}

MicrobatchSizes resampledSizes(const MicrobatchSizes& sizes, int count)
{
    const int n = sizes.count();
    if (n == count || n <= 0 || count <= 0)
        return sizes;
    auto resample = [&](const std::vector<double>& row) {
        std::vector<double> out(static_cast<size_t>(count), 0.0);
        const double step = static_cast<double>(n) / static_cast<double>(count);
        for (int j = 0; j < count; ++j) {
            const double from = j * step, to = (j + 1) * step;
            double sum = 0, covered = 0;
            for (int k = static_cast<int>(std::floor(from)); k < n && k < to; ++k) {
                const double overlap = std::min(to, k + 1.0) - std::max(from, static_cast<double>(k));
                if (overlap <= 0)
                    continue;
                sum += row[size_t(k)] * overlap;
                covered += overlap;
            }
            out[size_t(j)] = covered > 0 ? sum / covered : 1.0;
        }
        return out;
    };
    MicrobatchSizes out;
    out.source = sizes.source;
    for (const auto& row : sizes.forward)
        out.forward.push_back(resample(row));
    for (const auto& row : sizes.backward)
        out.backward.push_back(resample(row));
    return out;
}

} // namespace pipescope::whatif
