#pragma once
// Small builders shared by the what-if tests.
#include "whatif/Replay.h"
#include "model/Schedule.h"

namespace pipescope::whatif::test {

// Every virtual stage costs the same, no communication, no data parallelism.
inline ReplayCosts uniformCosts(int stages, TimeNs f, TimeNs b, TimeNs i = 0, TimeNs w = 0)
{
    ReplayCosts c;
    c.stages.assign(static_cast<size_t>(stages), StageCost{f, b, i, w});
    c.boundaryBytes.assign(stages > 1 ? static_cast<size_t>(stages - 1) : 0, 0);
    return c;
}

} // namespace pipescope::whatif::test
