// Search over configurations (pp, v, microbatches, schedule, recomputation)
// and the Pareto front of time against memory.
#include "whatif/WhatIf.h"

#include "analysis/MeasuredPipeline.h"
#include "util/Error.h"
#include "util/Format.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace pipescope::whatif {

std::vector<SearchRow> searchConfigurations(const CostModel& model, const Scenario& base, const SearchSpace& space,
                                            const BalanceOptions& options)
{
    const std::vector<ScheduleKind> schedules = space.schedules.empty() ? builtinScheduleKinds() : space.schedules;
    const std::optional<TimeNs> baseline = measuredReplayNs(model); // speed-ups against it, not the measured run
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
        throw ValueError(Setting::Microbatches, "the search would replay about " + formatCount(baseSteps) + " steps over " +
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
        b.prediction.baselineNs = baseline;
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

} // namespace pipescope::whatif
