#pragma once
// A what-if session: the cost model, the scenario being edited and its
// prediction, kept between edits. Moving a stage boundary only re-costs the
// stages and replays on the same schedule with the same replay buffers; the
// schedule is rebuilt only when the schedule, pp, v or microbatches change.
// This is what the app's editor calls on every drag step.
//
// Not thread-safe: one thread edits a session at a time (the app runs it on
// its what-if worker and hands copies of predictions to the views).
#include "whatif/WhatIf.h"

#include <optional>
#include <vector>

namespace pipescope::whatif {

class Session {
public:
    // Replays the measured configuration; throws Error when it cannot run.
    explicit Session(CostModel model, ReplayOptions options = {});

    const CostModel& model() const { return model_; }
    const Scenario& measuredScenario() const { return measuredScenario_; }
    const Prediction& measured() const { return measured_; }
    const Scenario& scenario() const { return scenario_; }
    const Prediction& prediction() const { return current_; }

    // Each edit returns the new prediction. An edit that cannot run throws
    // Error (or ValueError naming the setting) and leaves the session as it was.
    const Prediction& setBoundaries(const std::vector<int>& boundaries);
    const Prediction& setScenario(const Scenario& scenario);
    const Prediction& apply(const ScenarioChanges& changes); // relative to the current scenario
    const Prediction& setGpuMemory(std::optional<int64_t> bytes);
    // Balances the current scenario's partition and makes it current.
    BalanceResult autoBalance(const BalanceOptions& options = {});

    // How many times a schedule was built (a drag builds none).
    int scheduleBuilds() const { return scheduleBuilds_; }

private:
    void rebuild(const Scenario& scenario);

    CostModel model_;
    ReplayOptions options_;
    Replay replay_;
    Scenario measuredScenario_, scenario_;
    Prediction measured_, current_;
    int scheduleBuilds_ = 0;
};

} // namespace pipescope::whatif
