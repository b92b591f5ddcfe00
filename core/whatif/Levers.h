#pragma once
// The changes that would help a measured pipeline most, each priced by the
// what-if engine (docs/whatif.md, "Levers"): rebalancing the stages, more
// microbatches, interleaving, fixing a straggler, a zero-bubble schedule,
// cutting the per-step overhead, equal work per data-parallel replica.
// `analyze`, the report and the app's Summary show the same list, best first.
#include "analysis/Analysis.h"
#include "whatif/CostModel.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace pipescope::whatif {

struct Lever {
    std::string kind;   // rebalance, microbatches, interleave, straggler, schedule, overhead, replicas
    std::string change; // what to do, in words ("interleave v=2 (interleaved-1f1b)")
    TimeNs predictedNs = 0;
    // (baseline - predicted) / baseline, the baseline being the replay of the
    // measured run (Levers::baselineNs): 0.10 is 10 % faster. Against the
    // replay, the model's own error is not counted as a gain.
    double gain = 0;
};

struct Levers {
    // Where the bubbles come from, in one sentence ("fill/drain is at the
    // 1F1B ideal for m=8"); empty without a pipeline.
    std::string bubbles;
    TimeNs measuredNs = 0;
    // The replay of the measured configuration, which gains are counted
    // against (measuredNs when it cannot be replayed).
    TimeNs baselineNs = 0;
    std::vector<Lever> levers; // gain above half a percent, best first
};

// What the gains are counted against, said once: "against the what-if
// engine's replay of the measured run, 1.329 s (+2.5% from the measured
// 1.297 s)", or "against the measured 1.297 s".
std::string leversBasisText(const Levers& levers);

// Throws nothing: a lever the model cannot price is left out.
Levers rankLevers(const CostModel& model, const AnalysisResult& analysis);

// The `levers` object of `analyze --json` (and of `pipescope serve`'s analysis):
// {bubbles, measured_iteration_ns, levers: [{kind, change, predicted_iteration_ns, gain}]}.
nlohmann::json leversToJson(const Levers& levers);

// "interleave v=2 (interleaved-1f1b): 118.2 ms (-10.0%)"
std::string leverText(const Lever& lever);

} // namespace pipescope::whatif
