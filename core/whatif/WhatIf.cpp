#include "whatif/WhatIf.h"

#include "analysis/MeasuredPipeline.h"
#include "util/Error.h"
#include "util/Format.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace pipescope::whatif {

std::optional<double> Prediction::speedup() const
{
    if (!measuredIterationNs || replay.iterationNs <= 0)
        return std::nullopt;
    return static_cast<double>(*measuredIterationNs) / static_cast<double>(replay.iterationNs);
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
    s.schedule = scheduleKindFromString(model.measuredSchedule).value_or(ScheduleKind::OneFOneB);
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
            throw ValueError("schedule", "unknown schedule '" + *c.schedule + "'; choose one of " + names +
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
            throw ValueError("pp", "the pipeline degree must be between 1 and 4096 (got " + std::to_string(*c.pp) + ")");
        s.pp = *c.pp;
    }
    if (c.v) {
        if (*c.v < 1 || *c.v > 64)
            throw ValueError("v", "the chunks per rank (v) must be between 1 and 64 (got " + std::to_string(*c.v) + ")");
        s.v = *c.v;
    }
    if (c.microbatches) {
        if (*c.microbatches < 1 || *c.microbatches > 100000)
            throw ValueError("microbatches", "the number of microbatches must be between 1 and 100000 (got " +
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
    p.costs = model.replayCosts(p.partition, schedule, p.microbatchOrder);
    p.unevenMicrobatches = !p.costs.microbatchCosts.empty();
    // Activation recomputation: the forward again inside each backward.
    p.recompute = recomputePerStage(p.recompute, schedule.stages);
    if (!anyRecompute(p.recompute))
        p.recompute.clear();
    addRecomputeCosts(model, p.partition, schedule, p.recompute, p.costs);
    replay.run(schedule, p.costs, p.replay, options);
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
        throw ValueError("microbatches",
                         "the schedule would run " + formatCount(steps) + " steps (" + std::to_string(sc.pp * sc.v) +
                             " stages x " + std::to_string(sc.microbatches) + " microbatches x " +
                             std::to_string(splitsBackward(sc.schedule) ? 3 : 2) + "), about " +
                             formatBytes(steps * kReplayBytesPerStep) + " to replay; pipescope replays at most " +
                             formatCount(kMaxReplaySteps) + " steps, so choose fewer microbatches, stages or chunks");
    if (sc.custom)
        return *sc.custom;
    return makeSchedule(sc.schedule, sc.pp, sc.v, sc.microbatches);
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

namespace {

Prediction finish(const CostModel& model, std::string label, Schedule schedule, Partition partition,
                  const ReplayOptions& options, Replay& replay, MicrobatchOrder order,
                  std::vector<Recompute> recompute = {})
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
std::vector<int> stageInFlight(const Schedule& schedule)
{
    ReplayCosts unit;
    unit.stages.assign(size_t(schedule.stages), StageCost{1, 2, 1, 1});
    ReplayOptions o;
    o.timeline = false;
    const ReplayResult r = Replay().run(schedule, unit, o);
    const std::vector<int> perRank = peakInFlight(r);
    const int v = std::max(1, schedule.chunks());
    std::vector<int> out(size_t(schedule.stages));
    for (int s = 0; s < schedule.stages; ++s)
        out[size_t(s)] = (perRank[size_t(schedule.rankOfStage[size_t(s)])] + v - 1) / v;
    return out;
}

struct StageMemoryCheck {
    const CostModel& model;
    std::vector<int> inFlight;
    std::optional<int64_t> limit; // per stage
    double scale;

    bool fits(int s, int64_t params, int64_t trainable, int64_t activation) const
    {
        if (!limit)
            return true;
        const double act = static_cast<double>(activation) * scale * inFlight[size_t(s)];
        return static_cast<double>(staticMemoryBytes(params, trainable, model.memory)) + act <= static_cast<double>(*limit);
    }
    // With recomputation r: layerAct of the stage's layers, extraAct of its extras.
    bool fits(int s, int64_t params, int64_t trainable, int64_t layerAct, int64_t extraAct, Recompute r) const
    {
        if (!limit)
            return true;
        if (r == Recompute::None)
            return fits(s, params, trainable, layerAct + extraAct);
        const StageActivation a = stageActivation(r, static_cast<double>(layerAct), static_cast<double>(extraAct),
                                                  static_cast<double>(model.p2pBytes), model.memory);
        const double act = a.storedBytes * scale * inFlight[size_t(s)] + a.recomputeBytes * scale;
        return static_cast<double>(staticMemoryBytes(params, trainable, model.memory)) + act <= static_cast<double>(*limit);
    }
};

} // namespace

Prediction predict(const CostModel& model, const Scenario& sc, const ReplayOptions& options)
{
    if (model.layers.empty())
        throw Error("the cost model has no layers");
    Schedule schedule = scheduleFor(sc);
    Partition partition = partitionFor(model, sc, schedule.stages);
    Replay replay;
    std::string label = sc.label.empty() ? "requested" : sc.label;
    Prediction p = finish(model, std::move(label), std::move(schedule), std::move(partition), options, replay,
                          sc.microbatchOrder, sc.recompute);
    return p;
}

std::vector<int> minMaxPartition(const CostModel& model, int S, const std::vector<int>& inFlight,
                                 std::optional<int64_t> memoryLimitPerStage, int microbatches, TimeNs* bottleneck,
                                 const std::vector<int>& rankOfStage,
                                 const std::vector<std::vector<Recompute>>& stageOptions, std::vector<Recompute>* chosen)
{
    const int L = model.layerCount();
    if (S < 1 || L < S)
        return {};
    // Prefix sums over layers: time (F + B), parameters, activations.
    std::vector<double> t(size_t(L) + 1, 0.0);
    std::vector<int64_t> prm(size_t(L) + 1, 0), trn(size_t(L) + 1, 0), act(size_t(L) + 1, 0);
    std::vector<double> fwd(size_t(L) + 1, 0.0); // forward only, for recomputation
    for (int l = 0; l < L; ++l) {
        const LayerCostModel& lc = model.layers[size_t(l)];
        t[size_t(l) + 1] = t[size_t(l)] + lc.forwardNs + lc.backwardNs;
        fwd[size_t(l) + 1] = fwd[size_t(l)] + lc.forwardNs;
        prm[size_t(l) + 1] = prm[size_t(l)] + lc.params;
        trn[size_t(l) + 1] = trn[size_t(l)] + lc.trainableParams();
        act[size_t(l) + 1] = act[size_t(l)] + lc.activationBytes;
    }
    const LayerCostModel& first = model.firstStageExtra;
    const LayerCostModel& last = model.lastStageExtra;
    StageMemoryCheck mem{model, inFlight, memoryLimitPerStage, model.microbatchScale(microbatches)};
    // A slower stage's layers take longer: reference cost / the speed of the rank holding it.
    std::vector<double> speed(size_t(S), 1.0);
    for (int s = 0; s < S && size_t(s) < rankOfStage.size(); ++s)
        speed[size_t(s)] = model.paceOfRank(rankOfStage[size_t(s)]);
    const std::vector<Recompute> noneOnly{Recompute::None};
    auto optionsOf = [&](int s) -> const std::vector<Recompute>& {
        return size_t(s) < stageOptions.size() && !stageOptions[size_t(s)].empty() ? stageOptions[size_t(s)] : noneOnly;
    };
    auto stageTimeWith = [&](int s, int a, int b, Recompute r) {
        double x = t[size_t(b)] - t[size_t(a)];
        if (r != Recompute::None)
            x += recomputeForwardNs(r, fwd[size_t(b)] - fwd[size_t(a)], model.memory);
        if (s == 0)
            x += first.forwardNs + first.backwardNs;
        if (s == S - 1)
            x += last.forwardNs + last.backwardNs;
        return x / speed[size_t(s)];
    };
    auto feasibleWith = [&](int s, int a, int b, Recompute r) {
        int64_t p = prm[size_t(b)] - prm[size_t(a)], tr = trn[size_t(b)] - trn[size_t(a)], ac = act[size_t(b)] - act[size_t(a)];
        int64_t ex = 0;
        if (s == 0) {
            p += first.params;
            tr += first.trainableParams();
            ex += first.activationBytes;
        }
        if (s == S - 1) {
            p += last.params;
            tr += last.trainableParams();
            ex += last.activationBytes;
        }
        return mem.fits(s, p, tr, ac, ex, r);
    };
    // The stage's time under the first of its options that fits the memory (infinity: none fits).
    constexpr double kNoFit = std::numeric_limits<double>::infinity();
    auto stageTime = [&](int s, int a, int b) {
        for (Recompute r : optionsOf(s))
            if (feasibleWith(s, a, b, r))
                return stageTimeWith(s, a, b, r);
        return kNoFit;
    };
    // Binary search on the bottleneck T: for a given T, giving each stage as
    // many layers as its time and memory allow is optimal (a stage that fits
    // also fits with fewer layers), so the smallest feasible T is found with
    // O(S log L) per probe instead of a table over stages x layers.
    std::vector<int> firstLayer(size_t(S) + 1, 0), trial(size_t(S) + 1, 0);
    auto fitsStage = [&](int s, int a, int b, double T) {
        const double x = stageTime(s, a, b);
        return x != kNoFit && x <= T;
    };
    // Fills `out` with the furthest-reaching partition under T; returns its bottleneck, or infinity.
    constexpr double kInf = std::numeric_limits<double>::infinity();
    auto greedy = [&](double T, std::vector<int>& out) {
        int a = 0;
        double worst = 0.0;
        for (int s = 0; s < S; ++s) {
            out[size_t(s)] = a;
            int b;
            if (s == S - 1) {
                if (!fitsStage(s, a, L, T))
                    return kInf;
                b = L;
            } else {
                // Leave at least one layer for each later stage.
                int lo = a + 1, hi = L - (S - 1 - s);
                if (lo > hi || !fitsStage(s, a, lo, T))
                    return kInf;
                while (lo < hi) {
                    const int mid = lo + (hi - lo + 1) / 2;
                    if (fitsStage(s, a, mid, T))
                        lo = mid;
                    else
                        hi = mid - 1;
                }
                b = lo;
            }
            worst = std::max(worst, stageTime(s, a, b));
            a = b;
        }
        out[size_t(S)] = L;
        return worst;
    };
    double hiT = greedy(kInf, firstLayer);
    if (hiT == kInf)
        return {};
    double loT = 0.0; // infeasible below or at loT (or loT is 0)
    for (int probe = 0; probe < 200; ++probe) {
        const double mid = loT + (hiT - loT) / 2;
        if (!(mid > loT && mid < hiT))
            break;
        const double got = greedy(mid, trial);
        if (got == kInf) {
            loT = mid;
        } else {
            hiT = got;
            firstLayer.swap(trial);
        }
    }
    if (bottleneck)
        *bottleneck = static_cast<TimeNs>(std::llround(hiT));
    if (chosen) {
        chosen->assign(size_t(S), Recompute::None);
        for (int s = 0; s < S; ++s)
            for (Recompute r : optionsOf(s))
                if (feasibleWith(s, firstLayer[size_t(s)], firstLayer[size_t(s) + 1], r)) {
                    (*chosen)[size_t(s)] = r;
                    break;
                }
    }
    return {firstLayer.begin() + 1, firstLayer.end() - 1};
}

BalanceResult autoBalance(const CostModel& model, const Scenario& sc, const BalanceOptions& options)
{
    if (model.layers.empty())
        throw Error("the cost model has no layers");
    const Schedule schedule = scheduleFor(sc);
    const int S = schedule.stages, L = model.layerCount();
    if (L < S)
        throw ValueError("pp", std::to_string(L) + " layers cannot fill " + std::to_string(S) +
                                   " stages (pp x v); choose a smaller pipeline degree or v");
    const std::vector<int> inFlight = stageInFlight(schedule);
    const std::optional<int64_t> limit = options.memoryLimitBytes ? options.memoryLimitBytes : model.memory.gpuMemoryBytes;
    const int v = std::max(1, schedule.chunks());
    std::optional<int64_t> perStage;
    if (limit)
        perStage = *limit / v;

    // Each stage's recomputation: the scenario's, or the first of the
    // choices (least time first) that lets it fit.
    const std::vector<Recompute> fixedRecompute = recomputePerStage(sc.recompute, S);
    std::vector<std::vector<Recompute>> stageOptions(static_cast<size_t>(S));
    for (int s = 0; s < S; ++s)
        stageOptions[size_t(s)] =
            options.recomputeChoices.empty() ? std::vector<Recompute>{fixedRecompute[size_t(s)]} : options.recomputeChoices;
    std::vector<Recompute> rc;

    BalanceResult result;
    std::vector<int> bounds = minMaxPartition(model, S, inFlight, perStage, schedule.microbatches, &result.bottleneckNs,
                                              schedule.rankOfStage, stageOptions, &rc);
    if (bounds.empty() && S > 1) {
        result.memoryFeasible = false;
        perStage.reset();
        // Nothing fits: the choice that saves the most memory, as close to fitting as it gets.
        if (!options.recomputeChoices.empty()) {
            const Recompute most = *std::max_element(options.recomputeChoices.begin(), options.recomputeChoices.end());
            for (auto& o : stageOptions)
                o = {most};
        }
        bounds = minMaxPartition(model, S, inFlight, perStage, schedule.microbatches, &result.bottleneckNs,
                                 schedule.rankOfStage, stageOptions, &rc);
    }
    if (rc.size() != size_t(S)) {
        rc.assign(size_t(S), Recompute::None);
        for (int s = 0; s < S; ++s)
            rc[size_t(s)] = stageOptions[size_t(s)].front();
    }
    if (bounds.empty() && S > 1)
        throw Error("no partition of " + std::to_string(L) + " layers over " + std::to_string(S) + " stages exists");

    Replay replay;
    ReplayOptions fast;
    fast.timeline = false;
    ReplayResult scratch;
    // The refinement replays the whole schedule per candidate: bounded by
    // rounds and by the steps it may replay, so thousands of layers or stages
    // cost seconds, not hours.
    const int64_t steps = std::max<int64_t>(1, static_cast<int64_t>(schedule.actionCount()));
    const int64_t candidatesPerRound = 2 * int64_t{S - 1};
    const int64_t maxReplays =
        std::min<int64_t>(int64_t{std::max(0, options.maxRefineRounds)} * candidatesPerRound + 1,
                          std::max<int64_t>(1, options.maxRefineSteps / steps));
    auto timeOf = [&](const std::vector<int>& b, const std::vector<Recompute>& r) {
        const Partition part = partitionFromBoundaries(b, L, S);
        ReplayCosts costs = model.replayCosts(part, schedule, sc.microbatchOrder);
        addRecomputeCosts(model, part, schedule, r, costs);
        if ((result.replays & 15) == 0)
            checkpoint(options.work, "balancing stages", static_cast<double>(result.replays) / static_cast<double>(maxReplays));
        replay.run(schedule, costs, scratch, fast);
        ++result.replays;
        return scratch.iterationNs;
    };
    if (options.refineWithReplay && S > 1) {
        // Prefix sums for the memory check of a moved boundary.
        std::vector<int64_t> prm(size_t(L) + 1, 0), trn(size_t(L) + 1, 0), act(size_t(L) + 1, 0);
        for (int l = 0; l < L; ++l) {
            prm[size_t(l) + 1] = prm[size_t(l)] + model.layers[size_t(l)].params;
            trn[size_t(l) + 1] = trn[size_t(l)] + model.layers[size_t(l)].trainableParams();
            act[size_t(l) + 1] = act[size_t(l)] + model.layers[size_t(l)].activationBytes;
        }
        StageMemoryCheck mem{model, inFlight, perStage, model.microbatchScale(schedule.microbatches)};
        // Sets r[s] to the first of the stage's options that fits; false when none does.
        auto stageFits = [&](const std::vector<int>& b, int s, std::vector<Recompute>& r) {
            const int lo = s == 0 ? 0 : b[size_t(s) - 1], hi = s == S - 1 ? L : b[size_t(s)];
            int64_t p = prm[size_t(hi)] - prm[size_t(lo)], a = act[size_t(hi)] - act[size_t(lo)];
            int64_t tr = trn[size_t(hi)] - trn[size_t(lo)], ex = 0;
            if (s == 0) {
                p += model.firstStageExtra.params;
                tr += model.firstStageExtra.trainableParams();
                ex += model.firstStageExtra.activationBytes;
            }
            if (s == S - 1) {
                p += model.lastStageExtra.params;
                tr += model.lastStageExtra.trainableParams();
                ex += model.lastStageExtra.activationBytes;
            }
            for (Recompute option : stageOptions[size_t(s)])
                if (mem.fits(s, p, tr, a, ex, option)) {
                    r[size_t(s)] = option;
                    return true;
                }
            return false;
        };
        TimeNs best = timeOf(bounds, rc);
        std::vector<int> cand;
        std::vector<Recompute> candRc;
        for (int round = 0; round < options.maxRefineRounds && result.replays < maxReplays; ++round) {
            bool improved = false;
            for (size_t i = 0; i < bounds.size() && result.replays < maxReplays; ++i)
                for (int d : {-1, +1}) {
                    if (result.replays >= maxReplays)
                        break;
                    cand = bounds;
                    candRc = rc;
                    cand[i] += d;
                    const int lo = i == 0 ? 0 : cand[i - 1], hi = i + 1 == cand.size() ? L : cand[i + 1];
                    // Moving boundary i changes only stages i and i + 1.
                    if (cand[i] <= lo || cand[i] >= hi || !stageFits(cand, int(i), candRc) ||
                        !stageFits(cand, int(i) + 1, candRc))
                        continue;
                    const TimeNs t = timeOf(cand, candRc);
                    if (t < best) {
                        best = t;
                        bounds.swap(cand);
                        rc.swap(candRc);
                        improved = true;
                    }
                }
            if (!improved)
                break;
        }
    }
    ReplayOptions finalOptions;
    finalOptions.timeline = options.timeline;
    if (options.memoryLimitBytes) {
        // Flag out-of-memory against the limit balanced for.
        CostModel limited = model;
        limited.memory.gpuMemoryBytes = options.memoryLimitBytes;
        result.prediction = finish(limited, sc.label.empty() ? "auto-balance" : sc.label, schedule,
                                   partitionFromBoundaries(bounds, L, S), finalOptions, replay, sc.microbatchOrder, rc);
    } else {
        result.prediction = finish(model, sc.label.empty() ? "auto-balance" : sc.label, schedule,
                                   partitionFromBoundaries(bounds, L, S), finalOptions, replay, sc.microbatchOrder, rc);
    }
    ++result.replays;
    return result;
}

std::vector<SearchRow> searchConfigurations(const CostModel& model, const Scenario& base, const SearchSpace& space,
                                            const BalanceOptions& options)
{
    const std::vector<ScheduleKind> schedules = space.schedules.empty() ? builtinScheduleKinds() : space.schedules;
    const std::vector<int> vs = space.vs.empty() ? std::vector<int>{1, 2, 3, 4} : space.vs;
    std::vector<int> ms = space.microbatches;
    if (ms.empty()) {
        std::set<int> set;
        for (int k : {base.microbatches / 2, base.microbatches, base.microbatches * 2, base.microbatches * 4})
            if (k >= 1)
                set.insert(k);
        ms.assign(set.begin(), set.end());
    }
    const int pp = space.pp > 0 ? space.pp : base.pp;
    // The combinations worth trying, and the work they take: each costs a
    // few replays of its schedule before any refinement. Estimated before
    // starting, so that a search too big is refused at once.
    // Recomputation: each uniform setting asked for (default: the base
    // scenario's), plus auto-balance's per-stage choice when asked.
    struct RecomputeOption {
        std::vector<Recompute> setting;
        bool perStage = false;
    };
    std::vector<RecomputeOption> recomputeOptions;
    if (space.recompute.empty() && !space.recomputePerStage)
        recomputeOptions.push_back({base.recompute, false});
    for (Recompute r : space.recompute)
        recomputeOptions.push_back({{r}, false});
    if (space.recomputePerStage)
        recomputeOptions.push_back({{}, true});
    const bool labelRecompute = !space.recompute.empty() || space.recomputePerStage || anyRecompute(base.recompute);
    std::vector<Scenario> todo;
    std::vector<bool> todoPerStage;
    int64_t baseSteps = 0;
    for (ScheduleKind kind : schedules)
        for (int v : vs)
            for (int m : ms)
                for (const RecomputeOption& ro : recomputeOptions) {
                    Scenario sc;
                    sc.schedule = kind;
                    sc.pp = pp;
                    sc.v = v;
                    sc.microbatches = m;
                    sc.label = std::string(toString(kind)) + " v" + std::to_string(v) + " m" + std::to_string(m);
                    sc.microbatchOrder = base.microbatchOrder;
                    sc.recompute = ro.setting;
                    if (labelRecompute)
                        sc.label += " recompute " + (ro.perStage ? std::string("per stage") : recomputeText(ro.setting));
                    // A per-stage list fits only the stage count it was written for.
                    if (sc.recompute.size() > 1 && sc.recompute.size() != size_t(pp) * size_t(v))
                        continue;
                    if (pp * v > model.layerCount() || scenarioSteps(sc) > kMaxReplaySteps)
                        continue;
                    try {
                        (void)makeSchedule(kind, pp, v, m);
                    } catch (const Error&) {
                        continue; // not a combination this schedule accepts
                    }
                    baseSteps += 3 * scenarioSteps(sc); // in-flight count, first and final replay
                    todo.push_back(std::move(sc));
                    todoPerStage.push_back(ro.perStage);
                }
    if (baseSteps > kMaxSearchSteps)
        throw ValueError("microbatches", "the search would replay about " + formatCount(baseSteps) + " steps over " +
                                             std::to_string(todo.size()) + " configurations; pipescope searches at most " +
                                             formatCount(kMaxSearchSteps) +
                                             " steps, so choose fewer microbatches or a smaller pipeline");
    const int64_t refineEach =
        todo.empty() ? 0 : std::min(options.maxRefineSteps, (kMaxSearchSteps - baseSteps) / static_cast<int64_t>(todo.size()));
    std::vector<SearchRow> rows;
    const double total = static_cast<double>(std::max<size_t>(1, todo.size()));
    int tried = 0;
    // Each configuration's balancing reports as a share of the whole search.
    WorkControl inner;
    if (options.work) {
        inner.stop = options.work->stop;
        if (options.work->onProgress)
            inner.onProgress = [&](std::string_view, double f) {
                options.work->onProgress("searching configurations", (tried - 1 + std::clamp(f, 0.0, 1.0)) / total);
            };
    }
    for (size_t k = 0; k < todo.size(); ++k) {
        const Scenario& sc = todo[k];
        checkpoint(options.work, "searching configurations", tried++ / total);
        BalanceOptions o = options;
        o.recomputeChoices.clear(); // each row's own recomputation, or the per-stage choice
        if (todoPerStage[k])
            o.recomputeChoices = {Recompute::None, Recompute::Selective, Recompute::Full};
        o.maxRefineRounds = std::min(o.maxRefineRounds, 4);
        o.maxRefineSteps = refineEach;
        o.timeline = false;
        o.work = options.work ? &inner : nullptr;
        BalanceResult b = autoBalance(model, sc, o);
        SearchRow row;
        row.scenario = sc;
        row.boundaries = b.prediction.partition.boundaries();
        row.iterationNs = b.prediction.iterationNs();
        row.bubbleFraction = b.prediction.replay.bubbleFraction;
        row.peakBytes = b.prediction.peakBytes();
        row.outOfMemory = b.prediction.outOfMemory();
        row.speedup = b.prediction.speedup();
        row.scenario.recompute = b.prediction.recompute;
        row.recomputeChosen = todoPerStage[k];
        rows.push_back(std::move(row));
    }
    std::stable_sort(rows.begin(), rows.end(), [](const SearchRow& a, const SearchRow& b) {
        if (a.outOfMemory != b.outOfMemory)
            return !a.outOfMemory;
        return a.iterationNs < b.iterationNs;
    });
    for (size_t i : paretoFront(rows))
        rows[i].pareto = true;
    return rows;
}

std::vector<size_t> paretoFront(const std::vector<SearchRow>& rows)
{
    // By time, then memory: a row is on the front when every faster row
    // needs more memory and no row as fast needs less.
    std::vector<size_t> order(rows.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (rows[a].iterationNs != rows[b].iterationNs)
            return rows[a].iterationNs < rows[b].iterationNs;
        return rows[a].peakBytes < rows[b].peakBytes;
    });
    std::vector<size_t> front;
    int64_t fasterBest = std::numeric_limits<int64_t>::max(); // least memory of the strictly faster rows
    for (size_t g = 0; g < order.size();) {
        size_t e = g;
        while (e < order.size() && rows[order[e]].iterationNs == rows[order[g]].iterationNs)
            ++e;
        const int64_t least = rows[order[g]].peakBytes; // the group's least memory
        if (least < fasterBest)
            for (size_t k = g; k < e && rows[order[k]].peakBytes == least; ++k)
                front.push_back(order[k]);
        fasterBest = std::min(fasterBest, least);
        g = e;
    }
    std::sort(front.begin(), front.end());
    return front;
}

StragglerFix priceStraggler(const CostModel& model, const AnalysisResult& analysis, int rank)
{
    const std::vector<RankSpeed>& speeds = analysis.imbalance.rankSpeed;
    const auto it = std::find_if(speeds.begin(), speeds.end(), [&](const RankSpeed& r) { return r.rank == rank; });
    if (it == speeds.end())
        throw ValueError("fix-straggler", "rank " + std::to_string(rank) + " ran no pipeline steps in the analysed iteration");
    if (!it->relative || it->peerMedianNs <= 0)
        throw ValueError("fix-straggler", "rank " + std::to_string(rank) +
                                              " has no data-parallel peers to compare with (dp " +
                                              std::to_string(model.dataParallel) + "), so it has no peers' speed to run at");
    const int p = std::max(1, model.measuredPp);
    if (it->stage < 0 || it->stage >= p)
        throw ValueError("fix-straggler", "rank " + std::to_string(rank) + " is on stage " + std::to_string(it->stage) +
                                              ", outside the measured pipeline's " + std::to_string(p) + " stages");
    StragglerFix fix;
    fix.rank = rank;
    fix.stage = it->stage;
    fix.replica = it->replica;
    fix.relative = *it->relative;
    fix.computeNs = it->computeNs;
    fix.peerMedianNs = it->peerMedianNs;

    // Per stage: its replicas' compute, and the slowest over their mean (the
    // cost model's steps are means over the replicas).
    std::vector<std::vector<double>> compute(static_cast<size_t>(p));
    for (const RankSpeed& r : speeds)
        if (r.stage >= 0 && r.stage < p && r.computeNs > 0)
            compute[size_t(r.stage)].push_back(static_cast<double>(r.computeNs));
    auto slowdown = [&](int stage, bool fixed) {
        std::vector<double> c = compute[size_t(stage)];
        if (c.empty())
            return 1.0;
        double sum = 0, worst = 0;
        for (double x : c)
            sum += x;
        if (fixed && stage == fix.stage) {
            // R's compute replaced by its peers' median.
            for (double& x : c)
                if (x == static_cast<double>(fix.computeNs)) {
                    x = static_cast<double>(fix.peerMedianNs);
                    break;
                }
        }
        for (double x : c)
            worst = std::max(worst, x);
        const double mean = sum / static_cast<double>(c.size());
        return mean > 0 ? worst / mean : 1.0;
    };
    const Scenario base = measuredScenario(model);
    ReplayOptions fast;
    fast.timeline = false;
    {
        CostModel means = model;
        means.replicaPace.clear();
        fix.baseIterationNs = predict(means, base, fast).iterationNs();
    }
    auto replayWith = [&](bool fixed) {
        CostModel m = model;
        m.replicaPace.clear(); // the slowdowns below stand for it
        m.stageSpeed.resize(size_t(p), 1.0); // the speeds as declared (costs stay as calibrated)
        for (int s = 0; s < p; ++s)
            m.stageSpeed[size_t(s)] /= slowdown(s, fixed);
        return predict(m, base, fast).iterationNs();
    };
    fix.slowestReplicaNs = replayWith(false);
    fix.fixedNs = replayWith(true);
    fix.gainNs = std::max<TimeNs>(0, fix.slowestReplicaNs - fix.fixedNs);
    fix.iterationNs = fix.fixedNs;
    return fix;
}

void chooseExchanges(CostModel& model, bool keepCurrent)
{
    if (!model.measuredIterationNs)
        return;
    const Scenario base = measuredScenario(model);
    if (base.schedule != ScheduleKind::OneFOneB && base.schedule != ScheduleKind::Interleaved1F1B)
        return;
    auto errorOf = [&](const CostModel& m) {
        try {
            const TimeNs t = predict(m, base, ReplayOptions{false}).iterationNs();
            return std::abs(static_cast<double>(t - *model.measuredIterationNs));
        } catch (const Error&) {
            return std::numeric_limits<double>::infinity();
        }
    };
    std::vector<CostModel> candidates;
    if (keepCurrent)
        candidates.push_back(model); // as the trace showed
    for (bool shared : {false, true}) {
        CostModel m = model;
        m.megatronExchanges = true;
        m.sharedLinks = shared;
        candidates.push_back(std::move(m));
    }
    // The trace's own exchanges stay unless Megatron's explain the run
    // clearly better (by more than 1% of the iteration): for 1F1B both post
    // the same batches, and a what-if to interleaved should not switch to
    // overlapped exchanges on a rounding difference.
    const double margin = keepCurrent ? 0.01 * static_cast<double>(*model.measuredIterationNs) : 0.0;
    size_t best = 0;
    double bestError = errorOf(candidates[0]);
    for (size_t i = 1; i < candidates.size(); ++i)
        if (const double e = errorOf(candidates[i]); e + (best == 0 ? margin : 0.0) < bestError) {
            best = i;
            bestError = e;
        }
    model = std::move(candidates[best]);
}

CostModel calibrate(const Trace& trace, const AnalysisResult& analysis, const CalibrateOptions& options)
{
    const MeasuredPipeline measured = measurePipeline(trace, analysis);
    CostModel model = CostModel::fromMeasured(measured, options.model, options.measured);
    if (options.gpuMemoryBytes)
        model.memory.gpuMemoryBytes = options.gpuMemoryBytes;
    // dp > 1: each stage runs at its slowest replica's pace (docs/whatif.md,
    // "Data-parallel replicas").
    if (analysis.pipeline.dp > 1 && model.measuredPp > 0) {
        std::vector<std::vector<double>> compute(static_cast<size_t>(model.measuredPp));
        for (const RankSpeed& r : analysis.imbalance.rankSpeed)
            if (r.stage >= 0 && r.stage < model.measuredPp && r.computeNs > 0)
                compute[size_t(r.stage)].push_back(static_cast<double>(r.computeNs));
        model.replicaPace.assign(static_cast<size_t>(model.measuredPp), 1.0);
        for (size_t s = 0; s < compute.size(); ++s) {
            if (compute[s].size() < 2)
                continue;
            double sum = 0, worst = 0;
            for (double x : compute[s]) {
                sum += x;
                worst = std::max(worst, x);
            }
            model.replicaPace[s] = worst / (sum / static_cast<double>(compute[s].size()));
        }
    }
    // The trace allows blocking exchanges (no send overlapped compute): keep
    // them only when they reproduce the measured iteration at least as well
    // as sends that overlap compute (docs/whatif.md, "Exchanges").
    if (model.blockingExchanges && model.measuredIterationNs) {
        auto errorWith = [&](bool blocking) {
            CostModel m = model;
            m.blockingExchanges = blocking;
            const TimeNs t = predict(m, measuredScenario(m), ReplayOptions{false}).iterationNs();
            return std::abs(static_cast<double>(t - *model.measuredIterationNs));
        };
        try {
            model.blockingExchanges = errorWith(true) <= errorWith(false);
        } catch (const Error&) {
            model.blockingExchanges = false;
        }
    }
    chooseExchanges(model, true);
    return model;
}

} // namespace pipescope::whatif
