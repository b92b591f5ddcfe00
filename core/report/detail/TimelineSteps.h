#pragma once
// Steps of encodeTimeline worth testing alone (tst_timeline_steps). Internal
// to report/.
#include "timeline/TimelineModel.h"

#include <vector>

namespace pipescope::report::detail {

// A rank's report lane: where its rows come from. Steps and bubbles are lanes
// of the model; comm and busy gather the rank's kernel and transfer lanes,
// so they are lanes of a second model holding only the window.
struct RankRows {
    int rank = 0, stage = -1, replica = 0;
    int steps = -1, bubbles = -1; // lanes of the model
    int comm = -1, busy = -1;     // lanes of the gathered model
};

struct GatheredRows {
    std::vector<RankRows> ranks;    // in the model's lane order
    timeline::TimelineModel window; // finalized; its events keep the model's name ids
};

// The ranks in the model's lane order, each with its first Steps and Bubbles
// lane, and the events of its Kernels and Transfers lanes that overlap
// [from, to) gathered into two lanes of `window`: communication (point-to-point
// and collective) and compute, each lane made when the rank's first such
// event is found. CPU lanes are left out.
GatheredRows gatherRankRows(const timeline::TimelineModel& model, TimeNs from, TimeNs to);

} // namespace pipescope::report::detail
