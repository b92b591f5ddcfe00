#pragma once
// Small builders shared by the what-if tests.
#include "whatif/CostModel.h"
#include "whatif/Replay.h"
#include "whatif/WhatIf.h"
#include "model/Schedule.h"
#include "util/Error.h"

#include <functional>
#include <string>

namespace pipescope::whatif::test {

// Every virtual stage costs the same, no communication, no data parallelism.
inline ReplayCosts uniformCosts(int stages, TimeNs f, TimeNs b, TimeNs i = 0, TimeNs w = 0)
{
    ReplayCosts c;
    c.stages.assign(static_cast<size_t>(stages), StageCost{f, b, i, w});
    c.boundaryBytes.assign(stages > 1 ? static_cast<size_t>(stages - 1) : 0, 0);
    return c;
}

// Four equal layers, F = 1 ms and B = 2 ms per microbatch (I = W = 1 ms at
// the default backward-input share 0.5), nothing else.
inline CostModel fourEqualLayers()
{
    CostModel c;
    c.name = "four";
    for (int l = 0; l < 4; ++l) {
        LayerCostModel lc;
        lc.name = "layer " + std::to_string(l);
        lc.forwardNs = 1e6;
        lc.backwardNs = 2e6;
        c.layers.push_back(lc);
    }
    return c;
}

// A built-in schedule's scenario: kind, pp, microbatches; v 1, no boundaries.
inline Scenario scenarioOf(ScheduleKind kind, int pp, int microbatches)
{
    Scenario s;
    s.schedule = kind;
    s.pp = pp;
    s.microbatches = microbatches;
    return s;
}

// "setting: message" of the ValueError f throws, or "no error".
inline std::string errorOf(const std::function<void()>& f)
{
    try {
        f();
    } catch (const ValueError& e) {
        return std::string(toString(e.setting())) + ": " + e.what();
    }
    return "no error";
}

} // namespace pipescope::whatif::test
