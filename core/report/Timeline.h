#pragma once
// The Gantt data the report embeds: one lane per rank with its steps,
// bubbles, compute and communication blocks, times relative to the window's
// start, sub-pixel runs folded into counted blocks and each row capped.
#include "analysis/Analysis.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pipescope::report {

// One block on a timeline row. `code` is a StepKind, a BubbleCause, or 0/1
// for point-to-point/collective; `count` > 1 for a folded run.
struct Block {
    TimeNs start = 0;
    TimeNs end = 0;
    int code = 0;
    int microbatch = -1;
    int chunk = 0;
    int name = -1; // index into the names table
    int count = 1;
};

// Folds runs of blocks narrower than `quantum` separated by gaps narrower
// than `quantum` into one block; a folded block keeps the code of its longest
// member and drops microbatch and name. Input sorted by start.
std::vector<Block> foldBlocks(const std::vector<Block>& blocks, TimeNs quantum);

struct TimelineLimits {
    int foldColumns = 4000;
    int maxItemsPerLane = 5000;
    // Over all lanes and rows: with many ranks each row gets less (never under 200).
    int64_t maxItemsTotal = 400'000;
};

struct TimelineCounts {
    int64_t blocks = 0;    // drawn
    int64_t folded = 0;    // source items that went into folded blocks
    int64_t truncated = 0; // blocks left out by the per-lane cap
    int rowCap = 0;        // the cap that applied to each lane's rows
};

// The measured timeline of the selected iteration.
nlohmann::json measuredTimeline(const Trace& trace, const AnalysisResult& result, const TimelineLimits& limits,
                                TimelineCounts* counts = nullptr);

// A replayed timeline from a what-if prediction's JSON (pipescope.whatif/1
// with timelines), for the predicted-schedule Gantt.
nlohmann::json predictedTimeline(const nlohmann::json& prediction, const TimelineLimits& limits);

} // namespace pipescope::report
