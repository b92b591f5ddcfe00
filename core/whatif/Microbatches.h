#pragma once
// What uneven microbatches cost (docs/whatif.md, Uneven microbatches): the
// scenario replayed with each microbatch's own costs, with every microbatch
// equal (the same total work spread evenly) and with equal microbatches on
// equal stages, so that each rank's idle time splits into what the
// microbatches' spread causes, what the stages' imbalance causes and what
// the schedule leaves anyway; and the orders the microbatches could run in.
#include "whatif/WhatIf.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pipescope::whatif {

// A rank's waiting between its first and last step (idle after its last
// step only follows the iteration's end, the same shift on every rank),
// split by replay: idleNs = spreadNs + imbalanceNs + scheduleNs.
struct MicrobatchRankIdle {
    int rank = 0;
    TimeNs idleNs = 0;      // with the microbatches as given
    TimeNs spreadNs = 0;    // waits(given) - waits(equal microbatches)
    TimeNs imbalanceNs = 0; // waits(equal microbatches) - waits(equal microbatches on equal stages); negative on a slow stage
    TimeNs scheduleNs = 0;  // waits with equal microbatches on equal stages: the schedule's and transfers' own
};

struct MicrobatchOrderRow {
    MicrobatchOrder order = MicrobatchOrder::Given;
    TimeNs iterationNs = 0;
    TimeNs gainNs = 0; // given - this order (positive: faster)
};

struct MicrobatchStudy {
    bool applies = false;  // the model has sizes for the scenario's microbatch count
    SizeSource source = SizeSource::Trace;
    int microbatches = 0;
    std::vector<double> size;      // each microbatch's relative size (mean 1), in the given order
    double spread = 0;             // coefficient of variation of size
    double minSize = 1, p50Size = 1, p95Size = 1, maxSize = 1;
    TimeNs givenNs = 0;      // iteration as given
    TimeNs equalNs = 0;      // every microbatch the mean
    TimeNs balancedNs = 0;   // ... and every stage the mean stage
    TimeNs spreadCostNs = 0;    // givenNs - equalNs
    TimeNs imbalanceCostNs = 0; // equalNs - balancedNs
    std::vector<MicrobatchRankIdle> ranks;
    std::vector<MicrobatchOrderRow> orders; // given, longest-first, shortest-first, long-short, then equal
    MicrobatchOrder bestOrder = MicrobatchOrder::Given; // fastest reordering (equal is not one)
    TimeNs bestGainNs = 0;
};

// Replays the scenario six ways. applies is false (and nothing is replayed)
// when the model has no microbatch sizes for its count. Throws Error when
// the scenario cannot run.
MicrobatchStudy studyMicrobatches(const CostModel& model, const Scenario& scenario);

// A few lines for the terminal; empty when the study does not apply.
std::string microbatchStudyText(const MicrobatchStudy& study);
// The JSON "microbatches" object (docs/whatif.md).
nlohmann::json microbatchStudyToJson(const MicrobatchStudy& study);

} // namespace pipescope::whatif
