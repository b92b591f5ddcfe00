#pragma once
// The schedule's own share of each rank's idle time, for findBubbles
// (Bubbles.cpp): budgets of fill/drain per gap, when each step's input was
// ready, whether the iteration shows a per-step overhead, and whom each
// rank waited on. Internal to core/analysis.
#include "analysis/Analysis.h"
#include "model/Pipeline.h"

#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pipescope::detail {

// The fill and drain of one rank in one iteration. Where the rank's steps
// could be replayed (ScheduleShare: its measured order, every step of a
// kind at the iteration's median cost, free communication), the idle the
// schedule itself leaves before each step and after the last one is the
// fill/drain budget of the gap there; measured idle beyond it is waiting on
// a slower stage, a transfer or overhead. Otherwise the region rule
// (model/Pipeline.h) decides: gaps before the first backward and after the
// last forward are fill/drain.
struct RankShare {
    FillDrainBounds phases;
    std::vector<TimeNs> starts;  // the rank's measured step starts, in order
    std::vector<TimeNs> ends;    // and their ends
    std::vector<TimeNs> budget;  // [i]: the schedule's idle before step i, while not used
    std::vector<TimeNs> inputReady; // [i]: when step i's producer (the neighbouring stage's step) ended; -1: unknown
    // The iteration shows a per-step overhead: steps whose input was there
    // before their rank was free still began late, by a first quartile
    // that, over a rank's steps, is at least 5% of the iteration (the cost
    // model's rule for modelling it, CostModel::stepGapNs). Only then is a
    // receive's wait past its input's arrival the step's overhead; below it
    // such waits are an exchange's partner or noise.
    bool overheadShown = false;
    std::map<int, TimeNs> waitedOn; // RankIdle::waitedOn
    TimeNs lastEnd = std::numeric_limits<TimeNs>::min();
    TimeNs trailing = 0;         // the schedule's idle after the last step, while not used
    bool known = false;          // budgets from the replay; false: the region rule

    // The step whose first kernel a gap [a, b) ends at: its index, or npos.
    size_t stepAt(TimeNs a, TimeNs b) const
    {
        auto it = std::lower_bound(starts.begin(), starts.end(), a);
        return it != starts.end() && *it <= b ? static_cast<size_t>(it - starts.begin()) : std::string::npos;
    }
};

// Per (iteration, rank) of the pipeline.
std::map<std::pair<int, int>, RankShare> scheduleShares(const PipelineStructure& pipeline, const std::vector<Step>& steps);

} // namespace pipescope::detail
