#pragma once
// Steps of computeHtaViews worth testing alone (tst_timeline_steps).
// Internal to core/analysis.
#include "analysis/Analysis.h"

#include <optional>

namespace pipescope::detail {

// One stream's idle time as HTA splits it, fed the stream's work (kernels,
// copies) in start order: the gap before each but the first is host wait
// when it was launched after the previous one ended, else kernel wait when
// shorter than 30 us, else other. A gap is end to start, so work that starts
// before the previous one ended adds a negative gap, as in HTA.
struct HtaStreamGaps {
    bool any = false;   // some work was seen
    TimeNs prevEnd = 0; // the previous one's end
    HtaStreamIdle idle; // the sums; rank and stream are left to the caller

    void add(TimeNs start, TimeNs end, std::optional<TimeNs> launch);
};

} // namespace pipescope::detail
