#pragma once
// Steps of verdict() (Verdict.cpp), testable alone (tst_analysis_steps).
// Internal to core/analysis.
#include "analysis/Verdict.h"

#include <array>
#include <map>
#include <string>

namespace pipescope::detail {

// Idle time of the selected iteration, summed over its ranks.
struct IdleTotals {
    int ranks = 0;
    TimeNs windowNs = 0, idleNs = 0;
    std::array<TimeNs, kBubbleCauses> byCause{};
    std::map<int, std::array<TimeNs, kBubbleCauses>> perRank;
};

// What the decision looks at: the critical path when there is one, else GPU
// time (busy as compute, idle by cause) summed over ranks.
struct VerdictBasis {
    std::string name; // "the critical path" | "GPU time"
    TimeNs totalNs = 0;
    std::array<TimeNs, kPathLimiters> byLimiter{};
    std::array<int, kPathLimiters> topRank{};
};

// The critical path's breakdown when it has any time (pb.totalNs > 0), else
// the idle totals: compute is the busy time, each cause's idle time goes to
// its limiter, and each limiter but compute names the rank with most of it.
VerdictBasis verdictBasis(const PathBreakdown& pb, const IdleTotals& idle);

// What the decision reads, measured on the selected iteration.
struct VerdictSignals {
    double computeShare = 0;  // compute's share of the basis
    double busiestShare = 0;  // the busiest rank's busy share of its window
    bool pipeline = false;    // a pipeline was found
    bool bottleneck = false;  // the imbalance names a bottleneck stage
    size_t stages = 0;        // stages in the imbalance
    double maxOverMean = 1.0; // the busiest stage's busy time over the mean
    double idleFraction = 0;  // idle over window time, summed over ranks
    bool fillDrainLeads = false; // fill/drain is the largest idle cause (and not zero)
    std::array<TimeNs, kPathLimiters> byLimiter{}; // the basis
};

struct VerdictDecision {
    VerdictKind kind = VerdictKind::None;
    // What limits the job when compute does not pace it: the largest
    // non-compute part of the basis, ties to the earlier limiter.
    PathLimiter limiter = PathLimiter::P2p;
};

// The thresholds of docs/analysis.md, section 9. Compute paces the job when
// its share of the basis or the busiest rank's busy share reaches
// kVerdictComputeShare; it is then a stage imbalance (a bottleneck among two
// or more stages, kVerdictImbalance over the mean), pipeline bubbles (idle
// at least kVerdictBubbleIdle, fill/drain leading) or compute-bound.
// Otherwise the limiter names it: fill/drain on a pipeline is pipeline
// bubbles, point-to-point communication-bound, collectives dp-sync, host
// host-bound, copies copy-bound, anything else idle.
VerdictDecision decideVerdict(const VerdictSignals& s);

} // namespace pipescope::detail
