// Predictions: a scenario from the measured run and changes to it, replayed.
#include "whatif/WhatIf.h"
#include "whatif/detail/Finish.h"

#include "analysis/MeasuredPipeline.h"
#include "util/Error.h"
#include "util/Format.h"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <limits>
#include <set>

namespace pipescope::whatif {

std::optional<double> Prediction::speedup() const
{
    if (replay.iterationNs <= 0)
        return std::nullopt;
    if (baselineNs && *baselineNs > 0)
        return static_cast<double>(*baselineNs) / static_cast<double>(replay.iterationNs);
    if (!measuredIterationNs)
        return std::nullopt;
    return static_cast<double>(*measuredIterationNs) / static_cast<double>(replay.iterationNs);
}

std::optional<TimeNs> measuredReplayNs(const CostModel& model)
{
    if (!model.measuredIterationNs)
        return std::nullopt;
    try {
        const Prediction p = predict(model, measuredScenario(model), ReplayOptions{false});
        if (p.measuredConfiguration && p.iterationNs() > 0)
            return p.iterationNs();
    } catch (const Error&) {
    }
    return std::nullopt;
}

std::optional<double> Prediction::calibrationError() const
{
    if (!measuredConfiguration || !measuredIterationNs || *measuredIterationNs <= 0)
        return std::nullopt;
    return static_cast<double>(replay.iterationNs - *measuredIterationNs) / static_cast<double>(*measuredIterationNs);
}

bool Prediction::outOfMemory() const
{
    return std::any_of(memory.begin(), memory.end(), [](const RankMemory& m) { return m.outOfMemory; });
}

int64_t Prediction::peakBytes() const
{
    int64_t peak = 0;
    for (const RankMemory& m : memory)
        peak = std::max(peak, m.peakBytes);
    return peak;
}

Scenario measuredScenario(const CostModel& model)
{
    Scenario s;
    s.label = "measured configuration";
    s.schedule = model.measuredSchedule.value_or(ScheduleKind::OneFOneB);
    if (s.schedule == ScheduleKind::Custom)
        s.schedule = ScheduleKind::OneFOneB;
    s.pp = std::max(1, model.measuredPp);
    s.v = std::max(1, model.measuredV);
    if (isVShaped(s.schedule))
        s.v = 2;
    else if (s.v > 1 && (s.schedule == ScheduleKind::OneFOneB || s.schedule == ScheduleKind::GPipe))
        s.schedule = ScheduleKind::Interleaved1F1B;
    else if (s.v == 1 && s.schedule == ScheduleKind::Interleaved1F1B)
        s.schedule = ScheduleKind::OneFOneB;
    s.microbatches = std::max(1, model.measuredMicrobatches);
    if (model.measuredPartition)
        s.boundaries = model.measuredPartition->boundaries();
    return s;
}

Scenario applyChanges(Scenario s, const ScenarioChanges& c)
{
    const int oldStages = s.pp * s.v;
    if (c.schedule) {
        const auto kind = scheduleKindFromString(*c.schedule);
        if (!kind || *kind == ScheduleKind::Custom) {
            std::string names;
            for (ScheduleKind k : builtinScheduleKinds())
                names += (names.empty() ? "" : ", ") + std::string(toString(k));
            throw ValueError(Setting::Schedule, "unknown schedule '" + *c.schedule + "'; choose one of " + names +
                                             ", or a schedule CSV file");
        }
        s.schedule = *kind;
        if (!c.v) {
            if (isVShaped(*kind))
                s.v = 2;
            else if ((*kind == ScheduleKind::Interleaved1F1B || *kind == ScheduleKind::LoopedBFS) && s.v < 2)
                s.v = 2;
            else if (*kind == ScheduleKind::GPipe || *kind == ScheduleKind::OneFOneB || *kind == ScheduleKind::ZeroBubbleH2)
                s.v = 1;
        }
    }
    if (c.pp) {
        if (*c.pp < 1 || *c.pp > 4096)
            throw ValueError(Setting::Pp, "the pipeline degree must be between 1 and 4096 (got " + std::to_string(*c.pp) + ")");
        s.pp = *c.pp;
    }
    if (c.v) {
        if (*c.v < 1 || *c.v > 64)
            throw ValueError(Setting::V, "the chunks per rank (v) must be between 1 and 64 (got " + std::to_string(*c.v) + ")");
        s.v = *c.v;
    }
    if (c.microbatches) {
        if (*c.microbatches < 1 || *c.microbatches > 100000)
            throw ValueError(Setting::Microbatches, "the number of microbatches must be between 1 and 100000 (got " +
                                                 std::to_string(*c.microbatches) + ")");
        s.microbatches = *c.microbatches;
    }
    if (s.pp * s.v != oldStages)
        s.boundaries.reset();
    if (c.boundaries)
        s.boundaries = *c.boundaries;
    if (c.microbatchOrder)
        s.microbatchOrder = *c.microbatchOrder;
    if (c.recompute)
        s.recompute = *c.recompute;
    if (c.scheduleCsv) {
        s.custom = loadScheduleCsv(*c.scheduleCsv);
        s.schedule = ScheduleKind::Custom;
        const int stages = s.custom->stages;
        if (stages != s.pp * s.v && !c.boundaries)
            s.boundaries.reset();
        s.pp = s.custom->pp;
        s.v = std::max(1, s.custom->chunks());
        s.microbatches = s.custom->microbatches;
    }
    return s;
}

// Data-parallel replicas with work of their own (CostModel::replicaSizes):
// each replica's pipeline replayed with its own microbatches; the iteration
// is the slowest's, since every replica waits for it at the gradient sync.
// Its costs and replay stand for the job. Past kMaxReplicaReplays replicas,
// those with the most work are replayed.
void replaySlowestReplica(const CostModel& model, Prediction& p, const ReplayOptions& options, Replay& replay)
{
    constexpr size_t kMaxReplicaReplays = 64;
    const size_t R = model.replicaSizes.size();
    std::vector<size_t> order(R);
    std::iota(order.begin(), order.end(), size_t{0});
    if (R > kMaxReplicaReplays) {
        std::vector<double> work(R, 0.0);
        for (size_t r = 0; r < R; ++r)
            for (double x : model.replicaSizes[r].size())
                work[r] += x;
        std::partial_sort(order.begin(), order.begin() + kMaxReplicaReplays, order.end(),
                          [&](size_t a, size_t b) { return work[a] > work[b]; });
        order.resize(kMaxReplicaReplays);
    }
    CostModel one = model;
    one.replicaPace.clear(); // each replica's sizes hold its pace
    one.replicaSizes.clear();
    ReplayResult result;
    bool first = true;
    for (size_t r : order) {
        one.microbatchSizes = resampledSizes(model.replicaSizes[r], p.schedule.microbatches);
        ReplayCosts costs = one.replayCosts(p.partition, p.schedule, p.microbatchOrder);
        addRecomputeCosts(one, p.partition, p.schedule, p.recompute, costs);
        replay.run(p.schedule, costs, result, options);
        if (first || result.iterationNs > p.replay.iterationNs) {
            p.costs = std::move(costs);
            std::swap(p.replay, result);
            p.slowestReplica = static_cast<int>(r);
            first = false;
        }
    }
}

void evaluate(const CostModel& model, Prediction& p, const ReplayOptions& options, Replay& replay)
{
    const Schedule& schedule = p.schedule;
    // The measured run replayed (same schedule, shape and partition, the model
    // as calibrated): whichever way the prediction was made (predict, the
    // app's session, a drag back to the measured boundaries).
    {
        const Scenario m = measuredScenario(model);
        p.measuredConfiguration =
            model.measuredIterationNs.has_value() && schedule.kind == m.schedule && schedule.pp == m.pp &&
            schedule.chunks() == m.v && schedule.microbatches == m.microbatches && !anyRecompute(p.recompute) &&
            p.microbatchOrder == MicrobatchOrder::Given && model.stageSpeed.empty() && model.frozenLayers.empty() &&
            [&] {
                if (model.measuredPartition)
                    return p.partition.boundaries() == model.measuredPartition->boundaries();
                try {
                    return p.partition.boundaries() == partitionFor(model, m, schedule.stages).boundaries();
                } catch (const Error&) {
                    return false;
                }
            }();
    }
    // Activation recomputation: the forward again inside each backward.
    p.recompute = recomputePerStage(p.recompute, schedule.stages);
    if (!anyRecompute(p.recompute))
        p.recompute.clear();
    if (model.perReplicaFor(schedule.pp, schedule.microbatches, p.microbatchOrder)) {
        replaySlowestReplica(model, p, options, replay);
    } else {
        p.costs = model.replayCosts(p.partition, schedule, p.microbatchOrder);
        addRecomputeCosts(model, p.partition, schedule, p.recompute, p.costs);
        replay.run(schedule, p.costs, p.replay, options);
    }
    p.unevenMicrobatches = !p.costs.microbatchCosts.empty();
    std::vector<int64_t> rankParams(static_cast<size_t>(schedule.pp), 0), rankTrainable = rankParams;
    const std::vector<int64_t> params = model.stageParams(p.partition);
    const std::vector<int64_t> trainable = model.stageTrainableParams(p.partition);
    for (int s = 0; s < schedule.stages; ++s) {
        rankParams[size_t(schedule.rankOfStage[size_t(s)])] += params[size_t(s)];
        rankTrainable[size_t(schedule.rankOfStage[size_t(s)])] += trainable[size_t(s)];
    }
    if (p.recompute.empty()) {
        p.memory = memoryOverTime(p.replay, rankParams, model.stageActivationBytes(p.partition, schedule.microbatches),
                                  model.memory, options.timeline, rankTrainable);
    } else {
        const ActivationBytes act = stageActivationBytes(model, p.partition, schedule.microbatches, p.recompute);
        p.memory = memoryOverTime(p.replay, rankParams, act.stored, model.memory, options.timeline, rankTrainable,
                                  act.recompute);
    }
    p.dataParallel = model.dataParallel;
    p.gpuMemoryBytes = model.memory.gpuMemoryBytes;
    p.measuredIterationNs = model.measuredIterationNs;
    p.measuredPeakBytes.clear();
    if (schedule.pp == model.measuredPp)
        p.measuredPeakBytes = model.measuredPeakBytes;
}

int64_t scenarioSteps(const Scenario& sc)
{
    if (sc.custom)
        return static_cast<int64_t>(sc.custom->actionCount());
    const int64_t perMicrobatch = splitsBackward(sc.schedule) ? 3 : 2;
    return int64_t{std::max(1, sc.pp)} * std::max(1, sc.v) * std::max(1, sc.microbatches) * perMicrobatch;
}

void checkTimelineSize(const Scenario& sc, bool document, int64_t emittedCopies)
{
    const int64_t steps = scenarioSteps(sc);
    if (document && steps > kMaxTimelineSteps)
        throw Error("the timeline would hold " + formatCount(steps) + " steps, about " +
                    formatBytes(steps * kTimelineBytesPerStep) + " of JSON in memory; pipescope writes timelines of at most " +
                    formatCount(kMaxTimelineSteps) + " steps, so ask for the summary only or choose fewer microbatches");
    if (emittedCopies > 0 && steps * emittedCopies > kMaxEmittedSteps)
        throw Error("the simulated traces would hold " + formatCount(steps) + " steps x " + std::to_string(emittedCopies) +
                    " (iterations x data-parallel replicas), about " + formatBytes(steps * emittedCopies * kEmittedBytesPerStep) +
                    "; pipescope emits at most " + formatCount(kMaxEmittedSteps) +
                    " steps in all, so choose fewer microbatches, iterations or replicas");
}

Schedule scheduleFor(const Scenario& sc)
{
    const int64_t steps = scenarioSteps(sc);
    if (steps > kMaxReplaySteps)
        throw ValueError(Setting::Microbatches,
                         "the schedule would run " + formatCount(steps) + " steps (" + std::to_string(sc.pp * sc.v) +
                             " stages x " + std::to_string(sc.microbatches) + " microbatches x " +
                             std::to_string(splitsBackward(sc.schedule) ? 3 : 2) + "), about " +
                             formatBytes(steps * kReplayBytesPerStep) + " to replay; pipescope replays at most " +
                             formatCount(kMaxReplaySteps) + " steps, so choose fewer microbatches, stages or chunks");
    if (sc.custom)
        return *sc.custom;
    return makeSchedule(sc.schedule, sc.pp, sc.v, sc.microbatches);
}

Schedule scheduleFor(const CostModel& model, const Scenario& sc)
{
    Schedule schedule = scheduleFor(sc);
    const auto& order = model.measuredOrder;
    if (!sc.custom && order && order->kind == schedule.kind && order->pp == schedule.pp &&
        order->stages == schedule.stages && order->microbatches == schedule.microbatches &&
        order->rankOfStage == schedule.rankOfStage)
        return *order;
    return schedule;
}

Partition partitionFor(const CostModel& model, const Scenario& sc, int stages)
{
    const int L = model.layerCount();
    if (sc.boundaries)
        return partitionFromBoundaries(*sc.boundaries, L, stages);
    if (model.measuredPartition && model.measuredPartition->stages() == stages)
        return *model.measuredPartition;
    return evenPartition(L, stages);
}

Prediction detail::finish(const CostModel& model, std::string label, Schedule schedule, Partition partition,
                          const ReplayOptions& options, Replay& replay, MicrobatchOrder order,
                          std::vector<Recompute> recompute)
{
    Prediction p;
    p.label = std::move(label);
    p.microbatchOrder = order;
    p.recompute = std::move(recompute);
    p.schedule = std::move(schedule);
    p.partition = std::move(partition);
    evaluate(model, p, options, replay);
    return p;
}

// Microbatches each stage stores at once under a schedule, whatever the costs.

Prediction predict(const CostModel& model, const Scenario& sc, const ReplayOptions& options)
{
    if (model.layers.empty())
        throw Error("the cost model has no layers");
    Schedule schedule = scheduleFor(model, sc);
    Partition partition = partitionFor(model, sc, schedule.stages);
    Replay replay;
    std::string label = sc.label.empty() ? "requested" : sc.label;
    Prediction p = detail::finish(model, std::move(label), std::move(schedule), std::move(partition), options, replay,
                          sc.microbatchOrder, sc.recompute);
    return p;
}

} // namespace pipescope::whatif
