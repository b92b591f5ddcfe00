#pragma once
// The Gantt data the report embeds, encoded from the core timeline model
// (timeline/TimelineModel.h) that the desktop app paints: one lane per rank
// with its steps, bubbles, compute and communication rows, times relative to
// the window's start, each row the model's draw list at `foldColumns` columns
// (events narrower than a column folded into counted blocks) and capped.
// The JSON is an export format for the report's script; nothing in the
// process reads it back.
#include "analysis/Analysis.h"
#include "timeline/TimelineModel.h"

#include <nlohmann/json.hpp>

#include <set>

namespace pipescope::whatif {
struct Prediction;
}

namespace pipescope::report {

struct TimelineLimits {
    int foldColumns = 4000;
    int maxItemsPerLane = 5000;
    // Over all lanes and rows: with many ranks each row gets less (never under 200).
    int64_t maxItemsTotal = 400'000;
    // The measured timeline of a pipeline of more ranks than this, with a
    // stage run by several data-parallel replicas, shows each stage by two of
    // them, as the app folds replicas: the one with the most compute in the
    // iteration (its slowest) and the one with the least (its fastest).
    // Negative: every rank.
    int foldReplicasAbove = 16;
};

struct TimelineCounts {
    int64_t blocks = 0;    // drawn
    int64_t folded = 0;    // events that went into folded blocks
    int64_t truncated = 0; // blocks left out by the per-lane cap
    int rowCap = 0;        // the cap that applied to each lane's rows
};

// The report's JSON of a timeline model over [from, to):
//   {start_ns, duration_ns, fold_ns, kinds, causes, comm_kinds, names,
//    lanes: [{rank, stage, replica, truncated,
//             steps:   [[start, duration, kind, microbatch, chunk, count]...],
//             bubbles: [[start, duration, cause, count]...],
//             comm:    [[start, duration, 0 p2p | 1 collective, name, count]...],
//             busy:    [[start, duration, count]...]}]}
// One lane per rank that has events anywhere in the model (of `ranks` when
// given), in the model's order (stage, replica, rank). steps and bubbles are the rank's Steps and
// Bubbles lanes; comm its point-to-point and collective kernels or
// transfers, busy its compute kernels (all its streams together). Each row is
// model.drawList over [from, to) at foldColumns pixels with foldPx 1, so
// fold_ns is ceil(duration / foldColumns): an exact block carries its event's
// fields and count 1; a folded block the dominant code, microbatch -1, chunk
// 0, name -1 and how many events it holds. Times are clipped to the window;
// names (of exact communication blocks) are capped at 2000 distinct.
nlohmann::json encodeTimeline(const timeline::TimelineModel& model, TimeNs from, TimeNs to, const TimelineLimits& limits,
                              TimelineCounts* counts = nullptr, const std::set<int>* ranks = nullptr);

// The measured timeline of the selected iteration: timeline::buildMeasured
// over the activities that overlap it (no CPU lanes), then encodeTimeline
// over the iteration. null when there is no iteration. Replicas folded
// (TimelineLimits::foldReplicasAbove): only the ranks shown are built and
// encoded, each lane says "role" ("slowest" or "fastest" of its stage) and
// "of" (the stage's replicas), and the document says
// "folded": {"ranks": the ranks in the pipeline, "shown": the lanes}.
nlohmann::json measuredTimeline(const Trace& trace, const AnalysisResult& result, const TimelineLimits& limits,
                                TimelineCounts* counts = nullptr);

// The replay of a prediction (timeline::buildPredicted) over [0, iteration).
nlohmann::json predictedTimeline(const whatif::Prediction& prediction, const TimelineLimits& limits);

// The same from a prediction's pipescope.whatif/1 JSON with timelines, for
// callers that kept only the JSON: its actions, bubbles, all-reduce,
// pipeline sync and transfers become the model's lanes, encoded as above.
nlohmann::json predictedTimeline(const nlohmann::json& prediction, const TimelineLimits& limits);

} // namespace pipescope::report
