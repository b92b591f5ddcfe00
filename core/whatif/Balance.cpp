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

} // namespace

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

} // namespace pipescope::whatif
