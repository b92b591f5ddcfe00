#include "compare/DiffGate.h"

#include "util/Error.h"
#include "util/Format.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace pipescope::compare {

namespace {

// The largest thresholds taken: beyond them a gate could never fail (or
// always would), and the nanoseconds would not fit.
constexpr double kMaxPercent = 1e6;
constexpr double kMaxSeconds = 1e6;

std::string causeList()
{
    std::string out;
    for (int c = 0; c < kBubbleCauses; ++c)
        out += (c ? ", " : "") + std::string(toString(BubbleCause(c)));
    return out;
}

[[noreturn]] void refuse(std::string_view text, const std::string& why)
{
    throw Error("'" + printable(text, 100) + "' is not a gate condition: " + why + "; " + gateConditionForms());
}

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// "stage", "stage[12]", "stage[2].busy", "stage.forward".
void parseStage(std::string_view whole, std::string_view lhs, GateCondition& c)
{
    std::string_view rest = lhs.substr(5);
    if (!rest.empty() && rest.front() == '[') {
        const size_t close = rest.find(']');
        if (close == std::string_view::npos)
            refuse(whole, "'[' without ']' after stage");
        const std::string_view digits = rest.substr(1, close - 1);
        int n = -1;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
        if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || n < 0 || n > 1'048'575)
            refuse(whole, "the stage in [] must be a whole number from 0 (got '" + printable(digits, 40) + "')");
        c.stage = n;
        rest = rest.substr(close + 1);
    }
    c.metric = GateMetric::StageFb;
    if (rest.empty())
        return;
    if (rest == ".forward")
        c.metric = GateMetric::StageForward;
    else if (rest == ".backward")
        c.metric = GateMetric::StageBackward;
    else if (rest == ".busy")
        c.metric = GateMetric::StageBusy;
    else if (rest == ".fb")
        c.metric = GateMetric::StageFb;
    else
        refuse(whole, "a stage is followed by nothing, .forward, .backward, .fb or .busy (got '" + printable(rest, 40) +
                          "')");
}

void parseMetric(std::string_view whole, std::string_view lhs, GateCondition& c)
{
    if (lhs == "iteration") {
        c.metric = GateMetric::Iteration;
    } else if (lhs.substr(0, 5) == "stage") {
        parseStage(whole, lhs, c);
    } else if (lhs == "bubble") {
        c.metric = GateMetric::Bubble;
    } else if (lhs.substr(0, 7) == "bubble.") {
        const auto cause = bubbleCauseFromString(lhs.substr(7));
        if (!cause)
            refuse(whole, "'" + printable(lhs.substr(7), 40) + "' is not a bubble cause (" + causeList() + ")");
        c.metric = GateMetric::BubbleCause;
        c.cause = *cause;
    } else if (lhs.empty()) {
        refuse(whole, "nothing before the comparison");
    } else {
        refuse(whole, "'" + printable(lhs, 40) + "' is not a metric");
    }
}

// "+3%", "-0.5%", "2ms", "+500us".
void parseThreshold(std::string_view whole, std::string_view rhs, GateCondition& c)
{
    c.thresholdText = std::string(rhs);
    if (rhs.empty())
        refuse(whole, "no threshold after the comparison");
    double sign = 1;
    if (rhs.front() == '+' || rhs.front() == '-') {
        sign = rhs.front() == '-' ? -1 : 1;
        rhs.remove_prefix(1);
    } else {
        c.thresholdText = "+" + c.thresholdText;
    }
    size_t digits = 0;
    bool point = false;
    while (digits < rhs.size() && (std::isdigit(static_cast<unsigned char>(rhs[digits])) || (rhs[digits] == '.' && !point))) {
        point = point || rhs[digits] == '.';
        ++digits;
    }
    const std::string_view number = rhs.substr(0, digits), unit = rhs.substr(digits);
    double value = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (number.empty() || ec != std::errc() || end != number.data() + number.size() || number.front() == '.' ||
        number.back() == '.')
        refuse(whole, "the threshold must be a number with a unit (got '" + printable(c.thresholdText, 40) + "')");
    if (unit.empty())
        refuse(whole, "the threshold " + printable(number, 40) + " needs a unit: % (of the baseline) or ns, us, ms, s");
    if (unit == "%") {
        if (value > kMaxPercent)
            refuse(whole, "the threshold must be at most 1,000,000%");
        c.relative = true;
        c.fraction = sign * value / 100.0;
        return;
    }
    double scale = 0;
    if (unit == "ns")
        scale = 1;
    else if (unit == "us" || unit == "\xC2\xB5s") // µs
        scale = 1e3;
    else if (unit == "ms")
        scale = 1e6;
    else if (unit == "s")
        scale = 1e9;
    else
        refuse(whole, "'" + printable(unit, 40) + "' is not a unit: give % (of the baseline) or ns, us, ms, s");
    if (value > kMaxSeconds * 1e9 / scale)
        refuse(whole, "the threshold must be at most 1,000,000 s");
    c.thresholdNs = static_cast<TimeNs>(std::llround(sign * value * scale));
}

// What a value of the metric is, after its number: "per microbatch".
const char* unitOf(GateMetric m)
{
    switch (m) {
    case GateMetric::StageFb: return " forward+backward per microbatch";
    case GateMetric::StageForward:
    case GateMetric::StageBackward: return " per microbatch";
    case GateMetric::StageBusy: return " in the iteration";
    case GateMetric::Bubble:
    case GateMetric::BubbleCause: return " per rank";
    case GateMetric::Iteration: break;
    }
    return "";
}

// A percent with one decimal, or more when one would not show that it
// exceeds the threshold (3.04% against 3% would read "+3.0% exceeds +3%").
std::string percentBeyond(double change, double threshold)
{
    char buf[64];
    for (int decimals = 1;; ++decimals) {
        std::snprintf(buf, sizeof buf, "%+.*f%%", decimals, change * 100.0);
        const double shown = std::strtod(buf, nullptr) / 100.0;
        if (decimals >= 4 || shown > threshold || (shown == threshold && change == threshold))
            return buf;
    }
}

// The value a regression names: "iteration", "stage[2]", "stage[2].busy", "bubble.fill_drain".
std::string subjectOf(const GateCondition& c, std::optional<int> stage)
{
    const std::string st = stage ? "stage[" + std::to_string(*stage) + "]" : "";
    switch (c.metric) {
    case GateMetric::Iteration: return "iteration";
    case GateMetric::StageFb: return st;
    case GateMetric::StageForward: return st + ".forward";
    case GateMetric::StageBackward: return st + ".backward";
    case GateMetric::StageBusy: return st + ".busy";
    case GateMetric::Bubble: return "bubble";
    case GateMetric::BubbleCause: return "bubble." + std::string(toString(c.cause));
    }
    return "";
}

// Checks one value pair; adds a regression when B is beyond the threshold.
void check(const GateCondition& c, std::optional<int> stage, TimeNs a, TimeNs b, GateResult& out)
{
    bool beyond = false;
    std::optional<double> change;
    if (a != 0)
        change = static_cast<double>(b - a) / static_cast<double>(a);
    if (c.relative) {
        // From nothing, any growth is beyond a percentage; no change is none.
        const double x = change ? *change : (b > a ? INFINITY : b < a ? -INFINITY : 0.0);
        beyond = c.orEqual ? x >= c.fraction : x > c.fraction;
    } else {
        beyond = c.orEqual ? b - a >= c.thresholdNs : b - a > c.thresholdNs;
    }
    if (!beyond)
        return;
    GateRegression r;
    r.condition = c.text;
    r.metric = c.metric;
    r.stage = stage;
    r.aNs = a;
    r.bNs = b;
    r.change = change;
    r.subject = subjectOf(c, stage);
    std::string amount;
    if (c.relative)
        amount = change ? percentBeyond(*change, c.fraction) : "up from 0";
    else
        amount = formatShift(b - a);
    r.line = r.subject + " " + amount + " (" + formatDuration(a) + " -> " + formatDuration(b) + unitOf(c.metric) + ") " +
             (c.orEqual ? "reaches " : "exceeds ") + c.thresholdText;
    out.regressions.push_back(std::move(r));
}

std::optional<std::pair<TimeNs, TimeNs>> both(const Both<TimeNs>& v)
{
    if (v.a && v.b)
        return std::pair{*v.a, *v.b};
    return std::nullopt;
}

std::optional<std::pair<TimeNs, TimeNs>> stageValue(const StageDiff& s, GateMetric m)
{
    switch (m) {
    case GateMetric::StageForward: return both(s.forwardNs);
    case GateMetric::StageBackward: return both(s.backwardNs);
    case GateMetric::StageBusy: return both(s.busyNs);
    default: return both(s.fbNs);
    }
}

const char* stageWhat(GateMetric m)
{
    switch (m) {
    case GateMetric::StageForward: return "forward time per microbatch";
    case GateMetric::StageBackward: return "backward time per microbatch";
    case GateMetric::StageBusy: return "busy time";
    default: return "forward and backward time per microbatch";
    }
}

// Evaluates one condition; returns why it cannot be, or "".
std::string evaluate(const DiffResult& d, const GateCondition& c, GateResult& out)
{
    switch (c.metric) {
    case GateMetric::Iteration:
        check(c, std::nullopt, *d.iterationNs.a, *d.iterationNs.b, out);
        return "";
    case GateMetric::Bubble:
    case GateMetric::BubbleCause: {
        TimeNs a = 0, b = 0;
        for (int k = 0; k < kBubbleCauses; ++k) {
            if (c.metric == GateMetric::BubbleCause && k != static_cast<int>(c.cause))
                continue;
            const Both<TimeNs>& v = d.idleByCause[static_cast<size_t>(k)];
            if (!v.a || !v.b)
                return c.text + ": " + (v.a ? "B" : "A") + " has no idle time measured in its iteration";
            a += *v.a;
            b += *v.b;
        }
        check(c, std::nullopt, a, b, out);
        return "";
    }
    default: break;
    }
    bool found = false;
    for (const StageDiff& s : d.stages) {
        if (s.stage < 0 || (c.stage && s.stage != *c.stage))
            continue;
        found = true;
        const auto v = stageValue(s, c.metric);
        if (!v) {
            const Both<TimeNs>& raw = c.metric == GateMetric::StageForward    ? s.forwardNs
                                      : c.metric == GateMetric::StageBackward ? s.backwardNs
                                      : c.metric == GateMetric::StageBusy     ? s.busyNs
                                                                              : s.fbNs;
            return c.text + ": " + (raw.a ? "B" : "A") + "'s traces do not show stage " + std::to_string(s.stage) + "'s " +
                   stageWhat(c.metric);
        }
        check(c, s.stage, v->first, v->second, out);
    }
    if (!found)
        return c.text + ": " +
               (c.stage ? "there is no stage " + std::to_string(*c.stage) + " (the runs have " +
                              std::to_string(d.a.pp) + " stages, 0 to " + std::to_string(d.a.pp - 1) + ")"
                        : std::string("the runs have no stages"));
    return "";
}

// Why the two runs cannot be gated at all, or "".
std::string notComparable(const DiffResult& d, const GateRuns& runs)
{
    if (!d.iterationNs.a || !d.iterationNs.b)
        return std::string(!d.iterationNs.a ? "A (" + printable(d.aName) + ")" : "B (" + printable(d.bName) + ")") +
               " has no iteration to compare; profile at least one whole iteration";
    if (runs.aWholeTrace || runs.bWholeTrace)
        return std::string(runs.aWholeTrace ? "A (" + printable(d.aName) + ")" : "B (" + printable(d.bName) + ")") +
               " shows no iterations (no ProfilerStep#N or step ranges, no repeating kernels), so its whole trace "
               "would be compared; profile with iteration markers, or name them with --iteration-range";
    if (d.a.pipeline != d.b.pipeline)
        return std::string(d.a.pipeline ? "A" : "B") + " has a pipeline of " +
               std::to_string(d.a.pipeline ? d.a.pp : d.b.pp) + " stages and " + (d.a.pipeline ? "B" : "A") +
               " none; a baseline gates runs of the same pipeline (save a new one for this job)";
    if (d.a.pipeline && d.a.pp != d.b.pp)
        return "A has " + std::to_string(d.a.pp) + " stages and B " + std::to_string(d.b.pp) +
               "; a baseline gates runs of the same pipeline (save a new one for this job)";
    return "";
}

} // namespace

std::string gateConditionForms()
{
    return "write METRIC>THRESHOLD (or >=), e.g. iteration>+3%, stage[2]>+5%, stage>+5% (any stage), "
           "bubble.fill_drain>+2ms; METRIC: iteration, stage or stage[N] (forward+backward per microbatch; "
           ".forward, .backward or .busy after it), bubble or bubble.CAUSE (" +
           causeList() + "); THRESHOLD: a number with % (of the baseline) or ns, us, ms, s";
}

GateCondition parseGateCondition(std::string_view text)
{
    std::string compact;
    for (char ch : text)
        if (!isSpace(ch))
            compact.push_back(ch);
    if (compact.empty())
        throw Error("an empty gate condition; " + gateConditionForms());
    GateCondition c;
    c.text = compact;
    const std::string_view s = compact;
    const size_t op = s.find_first_of("<>=");
    if (op == std::string_view::npos)
        refuse(text, "no comparison (>)");
    if (s[op] != '>')
        refuse(text, "the comparison must be > or >= (a gate fails when B's value grows beyond the threshold; "
                     "a negative threshold asks for an improvement)");
    c.orEqual = op + 1 < s.size() && s[op + 1] == '=';
    const std::string_view rhs = s.substr(op + (c.orEqual ? 2 : 1));
    if (rhs.find_first_of("<>=") != std::string_view::npos)
        refuse(text, "more than one comparison");
    parseMetric(text, s.substr(0, op), c);
    parseThreshold(text, rhs, c);
    return c;
}

std::vector<GateCondition> parseGateConditions(std::string_view list)
{
    std::vector<GateCondition> out;
    size_t start = 0;
    while (true) {
        const size_t comma = list.find(',', start);
        const std::string_view item = list.substr(start, comma == std::string_view::npos ? list.npos : comma - start);
        out.push_back(parseGateCondition(item));
        if (comma == std::string_view::npos)
            break;
        start = comma + 1;
    }
    return out;
}

GateRuns gateRuns(const AnalysisResult& a, const AnalysisResult& b)
{
    const auto whole = [](const AnalysisResult& r) {
        for (const Iteration& it : r.iterations)
            if (it.index == r.selectedIteration)
                return it.source == IterationSource::WholeTrace;
        return false;
    };
    return {whole(a), whole(b)};
}

GateResult evaluateGate(const DiffResult& diff, const std::vector<GateCondition>& conditions, const GateRuns& runs)
{
    GateResult out;
    for (const GateCondition& c : conditions)
        out.conditions.push_back(c.text);
    if (conditions.empty())
        return out;
    out.refusal = notComparable(diff, runs);
    if (!out.refusal.empty())
        return out;
    for (const GateCondition& c : conditions)
        if (std::string why = evaluate(diff, c, out); !why.empty() && out.refusal.empty())
            out.refusal = why;
    return out;
}

nlohmann::json gateToJson(const GateResult& gate)
{
    using nlohmann::json;
    json regressions = json::array();
    for (const GateRegression& r : gate.regressions)
        regressions.push_back({{"condition", r.condition},
                               {"subject", r.subject},
                               {"stage", r.stage ? json(*r.stage) : json(nullptr)},
                               {"a_ns", r.aNs},
                               {"b_ns", r.bNs},
                               {"delta_ns", r.bNs - r.aNs},
                               {"change", r.change ? json(*r.change) : json(nullptr)},
                               {"line", r.line}});
    return {{"conditions", gate.conditions},
            {"passed", gate.passed()},
            {"refusal", gate.refusal.empty() ? json(nullptr) : json(gate.refusal)},
            {"regressions", regressions}};
}

} // namespace pipescope::compare
