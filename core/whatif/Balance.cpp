// Auto-balance: the partition that minimises the predicted iteration under a
// memory limit (min-max dynamic programming, refined by replays).
#include "whatif/WhatIf.h"
#include "whatif/detail/Finish.h"

#include "analysis/MeasuredPipeline.h"
#include "util/Error.h"
#include "util/Format.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace pipescope::whatif {

namespace {

using detail::finish;

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

// Prefix sums over the layers: time (F + B), forward alone (for
// recomputation), parameters, trainable parameters, activations.
struct LayerSums {
    std::vector<double> time, forward;
    std::vector<int64_t> params, trainable, activation;
};

LayerSums sumLayers(const CostModel& model)
{
    const int L = model.layerCount();
    LayerSums x;
    x.time.assign(size_t(L) + 1, 0.0);
    x.forward.assign(size_t(L) + 1, 0.0);
    x.params.assign(size_t(L) + 1, 0);
    x.trainable.assign(size_t(L) + 1, 0);
    x.activation.assign(size_t(L) + 1, 0);
    for (int l = 0; l < L; ++l) {
        const LayerCostModel& lc = model.layers[size_t(l)];
        x.time[size_t(l) + 1] = x.time[size_t(l)] + lc.forwardNs + lc.backwardNs;
        x.forward[size_t(l) + 1] = x.forward[size_t(l)] + lc.forwardNs;
        x.params[size_t(l) + 1] = x.params[size_t(l)] + lc.params;
        x.trainable[size_t(l) + 1] = x.trainable[size_t(l)] + lc.trainableParams();
        x.activation[size_t(l) + 1] = x.activation[size_t(l)] + lc.activationBytes;
    }
    return x;
}

// What stage s of S holds with layers [a, b), its extras included.
struct StageHolding {
    int64_t params = 0, trainable = 0, layerActivation = 0, extraActivation = 0;
};

StageHolding holdingOf(const LayerSums& x, const CostModel& model, int s, int S, int a, int b)
{
    StageHolding h{x.params[size_t(b)] - x.params[size_t(a)], x.trainable[size_t(b)] - x.trainable[size_t(a)],
                   x.activation[size_t(b)] - x.activation[size_t(a)], 0};
    if (s == 0) {
        h.params += model.firstStageExtra.params;
        h.trainable += model.firstStageExtra.trainableParams();
        h.extraActivation += model.firstStageExtra.activationBytes;
    }
    if (s == S - 1) {
        h.params += model.lastStageExtra.params;
        h.trainable += model.lastStageExtra.trainableParams();
        h.extraActivation += model.lastStageExtra.activationBytes;
    }
    return h;
}

bool fitsWith(const StageMemoryCheck& mem, int s, const StageHolding& h, Recompute r)
{
    return mem.fits(s, h.params, h.trainable, h.layerActivation, h.extraActivation, r);
}

// A stage's time and memory over a range of layers, for the min-max search.
class StageCosting {
public:
    StageCosting(const CostModel& model, const LayerSums& sums, const StageMemoryCheck& mem, std::vector<double> speed,
                 const std::vector<std::vector<Recompute>>& stageOptions, int S)
        : model_(model), sums_(sums), mem_(mem), speed_(std::move(speed)), stageOptions_(stageOptions), S_(S)
    {
    }

    // The recomputation stage s may run, least time first (none when not given).
    const std::vector<Recompute>& optionsOf(int s) const
    {
        return size_t(s) < stageOptions_.size() && !stageOptions_[size_t(s)].empty() ? stageOptions_[size_t(s)]
                                                                                      : noneOnly_;
    }
    // Stage s's F + B over layers [a, b) with recomputation r, at its rank's pace.
    double timeWith(int s, int a, int b, Recompute r) const
    {
        const LayerCostModel& first = model_.firstStageExtra;
        const LayerCostModel& last = model_.lastStageExtra;
        double x = sums_.time[size_t(b)] - sums_.time[size_t(a)];
        if (r != Recompute::None)
            x += recomputeForwardNs(r, sums_.forward[size_t(b)] - sums_.forward[size_t(a)], model_.memory);
        if (s == 0)
            x += first.forwardNs + first.backwardNs;
        if (s == S_ - 1)
            x += last.forwardNs + last.backwardNs;
        return x / speed_[size_t(s)];
    }
    bool feasibleWith(int s, int a, int b, Recompute r) const
    {
        return fitsWith(mem_, s, holdingOf(sums_, model_, s, S_, a, b), r);
    }
    // The stage's time under the first of its options that fits the memory (infinity: none fits).
    double time(int s, int a, int b) const
    {
        for (Recompute r : optionsOf(s))
            if (feasibleWith(s, a, b, r))
                return timeWith(s, a, b, r);
        return kNoFit;
    }
    bool fits(int s, int a, int b, double T) const
    {
        const double x = time(s, a, b);
        return x != kNoFit && x <= T;
    }

    static constexpr double kNoFit = std::numeric_limits<double>::infinity();

private:
    const CostModel& model_;
    const LayerSums& sums_;
    const StageMemoryCheck& mem_;
    const std::vector<double> speed_; // [stage]: the pace of the rank holding it
    const std::vector<std::vector<Recompute>>& stageOptions_;
    const int S_;
    const std::vector<Recompute> noneOnly_{Recompute::None};
};

constexpr double kInf = std::numeric_limits<double>::infinity();

// Fills `out` with the furthest-reaching partition of L layers under the
// bottleneck T (each stage as many layers as its time and memory allow);
// returns its bottleneck, or infinity.
double greedyPartition(const StageCosting& cost, int S, int L, double T, std::vector<int>& out)
{
    int a = 0;
    double worst = 0.0;
    for (int s = 0; s < S; ++s) {
        out[size_t(s)] = a;
        int b;
        if (s == S - 1) {
            if (!cost.fits(s, a, L, T))
                return kInf;
            b = L;
        } else {
            // Leave at least one layer for each later stage.
            int lo = a + 1, hi = L - (S - 1 - s);
            if (lo > hi || !cost.fits(s, a, lo, T))
                return kInf;
            while (lo < hi) {
                const int mid = lo + (hi - lo + 1) / 2;
                if (cost.fits(s, a, mid, T))
                    lo = mid;
                else
                    hi = mid - 1;
            }
            b = lo;
        }
        worst = std::max(worst, cost.time(s, a, b));
        a = b;
    }
    out[size_t(S)] = L;
    return worst;
}

// Binary search on the bottleneck T from a feasible hiT down: for a given T,
// giving each stage as many layers as its time and memory allow is optimal
// (a stage that fits also fits with fewer layers), so the smallest feasible
// T is found with O(S log L) per probe instead of a table over stages x
// layers. Leaves its partition in firstLayer; returns its bottleneck.
double bisectBottleneck(const StageCosting& cost, int S, int L, double hiT, std::vector<int>& firstLayer)
{
    std::vector<int> trial(size_t(S) + 1, 0);
    double loT = 0.0; // infeasible below or at loT (or loT is 0)
    for (int probe = 0; probe < 200; ++probe) {
        const double mid = loT + (hiT - loT) / 2;
        if (!(mid > loT && mid < hiT))
            break;
        const double got = greedyPartition(cost, S, L, mid, trial);
        if (got == kInf) {
            loT = mid;
        } else {
            hiT = got;
            firstLayer.swap(trial);
        }
    }
    return hiT;
}

} // namespace

std::vector<int> minMaxPartition(const CostModel& model, int S, const std::vector<int>& inFlight,
                                 std::optional<int64_t> memoryLimitPerStage, int microbatches, TimeNs* bottleneck,
                                 const std::vector<int>& rankOfStage,
                                 const std::vector<std::vector<Recompute>>& stageOptions, std::vector<Recompute>* chosen)
{
    const int L = model.layerCount();
    if (S < 1 || L < S)
        return {};
    const LayerSums sums = sumLayers(model);
    StageMemoryCheck mem{model, inFlight, memoryLimitPerStage, model.microbatchScale(microbatches)};
    // A slower stage's layers take longer: reference cost / the speed of the rank holding it.
    std::vector<double> speed(size_t(S), 1.0);
    for (int s = 0; s < S && size_t(s) < rankOfStage.size(); ++s)
        speed[size_t(s)] = model.paceOfRank(rankOfStage[size_t(s)]);
    const StageCosting cost(model, sums, mem, std::move(speed), stageOptions, S);

    std::vector<int> firstLayer(size_t(S) + 1, 0);
    double hiT = greedyPartition(cost, S, L, kInf, firstLayer);
    if (hiT == kInf)
        return {};
    hiT = bisectBottleneck(cost, S, L, hiT, firstLayer);
    if (bottleneck)
        *bottleneck = static_cast<TimeNs>(std::llround(hiT));
    if (chosen) {
        chosen->assign(size_t(S), Recompute::None);
        for (int s = 0; s < S; ++s)
            for (Recompute r : cost.optionsOf(s))
                if (cost.feasibleWith(s, firstLayer[size_t(s)], firstLayer[size_t(s) + 1], r)) {
                    (*chosen)[size_t(s)] = r;
                    break;
                }
    }
    return {firstLayer.begin() + 1, firstLayer.end() - 1};
}

namespace {

// What autoBalance's steps share: the schedule balanced for, its stages and
// layers, each stage's microbatches in flight, the memory limit per stage
// (unset: none) and the recomputation each stage may run.
struct BalanceSetup {
    const Schedule& schedule;
    int S = 0, L = 0;
    std::vector<int> inFlight;
    std::optional<int64_t> perStage;
    std::vector<std::vector<Recompute>> stageOptions;
};

// A partition and each stage's recomputation.
struct Balanced {
    std::vector<int> bounds;
    std::vector<Recompute> recompute;
};

// Each stage's recomputation: the scenario's, or the first of the
// choices (least time first) that lets it fit.
std::vector<std::vector<Recompute>> recomputeOptions(const Scenario& sc, const BalanceOptions& options, int S)
{
    const std::vector<Recompute> fixedRecompute = recomputePerStage(sc.recompute, S);
    std::vector<std::vector<Recompute>> stageOptions(static_cast<size_t>(S));
    for (int s = 0; s < S; ++s)
        stageOptions[size_t(s)] =
            options.recomputeChoices.empty() ? std::vector<Recompute>{fixedRecompute[size_t(s)]} : options.recomputeChoices;
    return stageOptions;
}

// The min-max partition within the memory limit; when none fits, the one
// without a limit (and with the recomputation that saves the most), marked
// not feasible. Throws Error when there is no partition at all.
Balanced balanceBottleneck(const CostModel& model, BalanceSetup& setup, const BalanceOptions& options,
                           BalanceResult& result)
{
    const int S = setup.S, L = setup.L;
    const Schedule& schedule = setup.schedule;
    Balanced b;
    std::vector<int>& bounds = b.bounds;
    std::vector<Recompute>& rc = b.recompute;
    bounds = minMaxPartition(model, S, setup.inFlight, setup.perStage, schedule.microbatches, &result.bottleneckNs,
                             schedule.rankOfStage, setup.stageOptions, &rc);
    if (bounds.empty() && S > 1) {
        result.memoryFeasible = false;
        setup.perStage.reset();
        // Nothing fits: the choice that saves the most memory, as close to fitting as it gets.
        if (!options.recomputeChoices.empty()) {
            const Recompute most = *std::max_element(options.recomputeChoices.begin(), options.recomputeChoices.end());
            for (auto& o : setup.stageOptions)
                o = {most};
        }
        bounds = minMaxPartition(model, S, setup.inFlight, setup.perStage, schedule.microbatches, &result.bottleneckNs,
                                 schedule.rankOfStage, setup.stageOptions, &rc);
    }
    if (rc.size() != size_t(S)) {
        rc.assign(size_t(S), Recompute::None);
        for (int s = 0; s < S; ++s)
            rc[size_t(s)] = setup.stageOptions[size_t(s)].front();
    }
    if (bounds.empty() && S > 1)
        throw Error("no partition of " + std::to_string(L) + " layers over " + std::to_string(S) + " stages exists");
    return b;
}

// A candidate partition's replayed iteration time, counting the replays
// (and reporting progress every 16 of them).
struct CandidateTimer {
    const CostModel& model;
    const Scenario& sc;
    const BalanceSetup& setup;
    const WorkControl* work;
    int64_t maxReplays;
    Replay& replay;
    ReplayResult& scratch;
    int& replays;

    TimeNs operator()(const std::vector<int>& b, const std::vector<Recompute>& r) const
    {
        ReplayOptions fast;
        fast.timeline = false;
        const Partition part = partitionFromBoundaries(b, setup.L, setup.S);
        ReplayCosts costs = model.replayCosts(part, setup.schedule, sc.microbatchOrder);
        addRecomputeCosts(model, part, setup.schedule, r, costs);
        if ((replays & 15) == 0)
            checkpoint(work, "balancing stages", static_cast<double>(replays) / static_cast<double>(maxReplays));
        replay.run(setup.schedule, costs, scratch, fast);
        ++replays;
        return scratch.iterationNs;
    }
};

// Sets r[s] to the first of stage s's options that fits the memory under
// boundaries b; false when none does.
bool stageFits(const CostModel& model, const LayerSums& sums, const StageMemoryCheck& mem, const BalanceSetup& setup,
               const std::vector<int>& b, int s, std::vector<Recompute>& r)
{
    const int S = setup.S, L = setup.L;
    const int lo = s == 0 ? 0 : b[size_t(s) - 1], hi = s == S - 1 ? L : b[size_t(s)];
    const StageHolding h = holdingOf(sums, model, s, S, lo, hi);
    for (Recompute option : setup.stageOptions[size_t(s)])
        if (fitsWith(mem, s, h, option)) {
            r[size_t(s)] = option;
            return true;
        }
    return false;
}

// Hill-climbs the partition on replayed time: each round moves each
// boundary one layer either way, keeping a move that fits the memory and
// shortens the iteration. The replays are bounded by rounds and by the
// steps they may replay, so thousands of layers or stages cost seconds, not hours.
void refineWithReplays(const CostModel& model, const Scenario& sc, const BalanceSetup& setup,
                       const BalanceOptions& options, Replay& replay, Balanced& best, BalanceResult& result)
{
    const int S = setup.S, L = setup.L;
    const int64_t steps = std::max<int64_t>(1, static_cast<int64_t>(setup.schedule.actionCount()));
    const int64_t candidatesPerRound = 2 * int64_t{S - 1};
    const int64_t maxReplays =
        std::min<int64_t>(int64_t{std::max(0, options.maxRefineRounds)} * candidatesPerRound + 1,
                          std::max<int64_t>(1, options.maxRefineSteps / steps));
    ReplayResult scratch;
    const CandidateTimer timeOf{model, sc, setup, options.work, maxReplays, replay, scratch, result.replays};
    const LayerSums sums = sumLayers(model);
    const StageMemoryCheck mem{model, setup.inFlight, setup.perStage, model.microbatchScale(setup.schedule.microbatches)};
    std::vector<int>& bounds = best.bounds;
    std::vector<Recompute>& rc = best.recompute;
    TimeNs bestNs = timeOf(bounds, rc);
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
                if (cand[i] <= lo || cand[i] >= hi || !stageFits(model, sums, mem, setup, cand, int(i), candRc) ||
                    !stageFits(model, sums, mem, setup, cand, int(i) + 1, candRc))
                    continue;
                const TimeNs t = timeOf(cand, candRc);
                if (t < bestNs) {
                    bestNs = t;
                    bounds.swap(cand);
                    rc.swap(candRc);
                    improved = true;
                }
            }
        if (!improved)
            break;
    }
}

} // namespace

BalanceResult autoBalance(const CostModel& model, const Scenario& sc, const BalanceOptions& options)
{
    if (model.layers.empty())
        throw Error("the cost model has no layers");
    const Schedule schedule = scheduleFor(model, sc);
    const int S = schedule.stages, L = model.layerCount();
    if (L < S)
        throw ValueError(Setting::Pp, std::to_string(L) + " layers cannot fill " + std::to_string(S) +
                                   " stages (pp x v); choose a smaller pipeline degree or v");
    BalanceSetup setup{schedule, S, L, stageInFlight(schedule), std::nullopt, {}};
    const std::optional<int64_t> limit = options.memoryLimitBytes ? options.memoryLimitBytes : model.memory.gpuMemoryBytes;
    const int v = std::max(1, schedule.chunks());
    if (limit)
        setup.perStage = *limit / v;
    setup.stageOptions = recomputeOptions(sc, options, S);

    BalanceResult result;
    Balanced balanced = balanceBottleneck(model, setup, options, result);
    Replay replay;
    if (options.refineWithReplay && S > 1)
        refineWithReplays(model, sc, setup, options, replay, balanced, result);

    ReplayOptions finalOptions;
    finalOptions.timeline = options.timeline;
    Partition partition = partitionFromBoundaries(balanced.bounds, L, S);
    if (options.memoryLimitBytes) {
        // Flag out-of-memory against the limit balanced for.
        CostModel limited = model;
        limited.memory.gpuMemoryBytes = options.memoryLimitBytes;
        result.prediction = finish(limited, sc.label.empty() ? "auto-balance" : sc.label, schedule, std::move(partition),
                                   finalOptions, replay, sc.microbatchOrder, balanced.recompute);
    } else {
        result.prediction = finish(model, sc.label.empty() ? "auto-balance" : sc.label, schedule, std::move(partition),
                                   finalOptions, replay, sc.microbatchOrder, balanced.recompute);
    }
    ++result.replays;
    return result;
}

} // namespace pipescope::whatif
