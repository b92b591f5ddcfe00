#include "whatif/Session.h"

#include "util/Error.h"

namespace pipescope::whatif {

Session::Session(CostModel model, ReplayOptions options) : model_(std::move(model)), options_(options)
{
    if (model_.layers.empty())
        throw Error("the cost model has no layers");
    measuredScenario_ = whatif::measuredScenario(model_);
    rebuild(measuredScenario_);
    measured_ = current_;
    measured_.label = measuredScenario_.label;
}

void Session::rebuild(const Scenario& scenario)
{
    Prediction next;
    next.label = scenario.label.empty() ? "requested" : scenario.label;
    next.schedule = scheduleFor(model_, scenario);
    next.microbatchOrder = scenario.microbatchOrder;
    next.recompute = scenario.recompute;
    ++scheduleBuilds_;
    next.partition = partitionFor(model_, scenario, next.schedule.stages);
    evaluate(model_, next, options_, replay_);
    current_ = std::move(next);
    scenario_ = scenario;
    scenario_.boundaries = current_.partition.boundaries();
}

const Prediction& Session::setBoundaries(const std::vector<int>& boundaries)
{
    // Validates before touching the current prediction, so a refused drag keeps it.
    Partition partition = partitionFromBoundaries(boundaries, model_.layerCount(), current_.schedule.stages);
    Partition previous = std::move(current_.partition);
    current_.partition = std::move(partition);
    try {
        evaluate(model_, current_, options_, replay_);
    } catch (...) {
        current_.partition = std::move(previous);
        evaluate(model_, current_, options_, replay_);
        throw;
    }
    scenario_.boundaries = boundaries;
    return current_;
}

const Prediction& Session::setScenario(const Scenario& scenario)
{
    rebuild(scenario);
    return current_;
}

const Prediction& Session::apply(const ScenarioChanges& changes)
{
    Scenario next = applyChanges(scenario_, changes);
    next.label = scenario_.label;
    rebuild(next);
    return current_;
}

const Prediction& Session::setGpuMemory(std::optional<int64_t> bytes)
{
    model_.memory.gpuMemoryBytes = bytes;
    evaluate(model_, current_, options_, replay_);
    evaluate(model_, measured_, options_, replay_);
    return current_;
}

BalanceResult Session::autoBalance(const BalanceOptions& options)
{
    BalanceResult b = whatif::autoBalance(model_, scenario_, options);
    current_ = b.prediction;
    scenario_.boundaries = current_.partition.boundaries();
    scenario_.recompute = current_.recompute; // auto-balance may choose it per stage
    return b;
}

} // namespace pipescope::whatif
