#pragma once
// A diff that gates CI: conditions such as "iteration>+3%", "stage[2]>+5%",
// "stage>+5%" (any stage) or "bubble.fill_drain>+2ms", parsed from text and
// evaluated over a DiffResult (A the baseline, B the new run). Pure
// functions; `pipescope diff --fail-if` prints what they return
// (docs/diff.md, "Gating CI on a diff").
#include "compare/Diff.h"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope::compare {

// What a condition measures, in each run's compared iteration.
enum class GateMetric : uint8_t {
    Iteration,      // "iteration": the iteration's length
    StageFb,        // "stage", "stage[N]": forward + backward kernel time per microbatch
    StageForward,   // "stage[N].forward"
    StageBackward,  // "stage[N].backward"
    StageBusy,      // "stage[N].busy": compute busy time in the iteration
    Bubble,         // "bubble": idle time, all causes, mean per pipeline rank
    BubbleCause,    // "bubble.CAUSE": idle time of one cause, mean per pipeline rank
};

struct GateCondition {
    std::string text;                 // as written, spaces removed: "stage[2]>+5%"
    GateMetric metric = GateMetric::Iteration;
    std::optional<int> stage;         // stage metrics: unset means every stage
    BubbleCause cause = BubbleCause::Other; // GateMetric::BubbleCause only
    bool orEqual = false;             // ">=" rather than ">"
    bool relative = false;            // threshold is a fraction of A's value (3% = 0.03)
    double fraction = 0;              // relative thresholds
    TimeNs thresholdNs = 0;           // absolute thresholds
    std::string thresholdText;        // "+3%", "+2ms", as written, with its sign
};

// The accepted forms, for messages: "METRIC>THRESHOLD, e.g. iteration>+3%, ...".
std::string gateConditionForms();

// One condition. Throws Error saying why `text` is not one, naming it and the
// accepted forms.
GateCondition parseGateCondition(std::string_view text);
// A comma-separated list of conditions (several --fail-if values each go
// through this); empty items are refused.
std::vector<GateCondition> parseGateConditions(std::string_view list);

// A condition B broke: A's value, B's, and the change beyond its threshold.
struct GateRegression {
    std::string condition;        // GateCondition::text
    std::string subject;          // "iteration", "stage[2]", "stage[2].busy", "bubble.fill_drain", "bubble"
    GateMetric metric = GateMetric::Iteration;
    std::optional<int> stage;
    TimeNs aNs = 0, bNs = 0;
    std::optional<double> change; // (b - a) / a; unset when a is 0
    std::string line;             // "iteration +4.2% (12.310 ms -> 12.830 ms) exceeds +3%"
};

struct GateResult {
    std::vector<std::string> conditions; // as given
    std::vector<GateRegression> regressions;
    // Why the runs cannot be gated, when they cannot: one sentence; then
    // regressions hold what could be checked nonetheless.
    std::string refusal;
    bool passed() const { return refusal.empty() && regressions.empty(); }
};

// What the gate needs of each run beyond the diff: whether its compared
// iteration is the whole trace (nothing marked or repeated iterations), whose
// length is the profiler's window, not the job's.
struct GateRuns {
    bool aWholeTrace = false, bWholeTrace = false;
};
GateRuns gateRuns(const AnalysisResult& a, const AnalysisResult& b);

// Every condition against the diff. The runs must both have a compared
// iteration, marked in the trace or found by its period (not the whole
// trace), and the same pipeline (a pipeline in both or in neither, and as
// many stages); a condition needs its values in both runs (a stage that
// exists, a time the traces show): otherwise `refusal` says why.
GateResult evaluateGate(const DiffResult& diff, const std::vector<GateCondition>& conditions,
                        const GateRuns& runs = {});

// {"conditions": [...], "passed": bool, "refusal": null | "...",
//  "regressions": [{"condition", "subject", "stage", "a_ns", "b_ns", "delta_ns", "change", "line"}]}
nlohmann::json gateToJson(const GateResult& gate);

} // namespace pipescope::compare
