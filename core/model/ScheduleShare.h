#pragma once
// The schedule's own idle time: what each rank of a pipeline idles when its
// steps run in the given order, every step of a kind costs the same and
// communication is free. That idle is the schedule's fill and drain (its
// bubble by construction); measured idle beyond it is waiting on a slower
// stage, a transfer or overhead. The analysis uses it to name the measured
// run's fill/drain (docs/analysis.md, section 4).
#include "model/Schedule.h"

#include <array>
#include <vector>

namespace pipescope {

struct ScheduleShare {
    // [rank][i]: idle before the rank's i-th action; before its first, idle
    // from the start of the iteration (time 0).
    std::vector<std::vector<TimeNs>> idleBefore;
    // [rank]: idle after its last action until the last rank finishes.
    std::vector<TimeNs> idleAfter;
    // False when the order cannot run (an action waits on one that waits on
    // it): no share is known.
    bool complete = false;
};

// `ranks` holds each rank's actions in execution order (stages are virtual
// stages; the ranks of one pipeline). An F of (stage s, microbatch k) needs
// the F of (s - 1, k); a B or I needs the B or I of (s + 1, k); a W follows
// its rank's order only. A producer absent from `ranks` (a stage not
// measured) counts as ready at time 0. `costOfKind` is indexed by StepKind.
ScheduleShare scheduleShare(const std::vector<std::vector<Action>>& ranks, const std::array<TimeNs, 4>& costOfKind);

} // namespace pipescope
