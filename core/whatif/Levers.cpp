#include "whatif/Levers.h"

#include <nlohmann/json.hpp>

#include "util/Error.h"
#include "util/Format.h"
#include "whatif/WhatIf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pipescope::whatif {


std::string leversBasisText(const Levers& l)
{
    if (l.baselineNs <= 0 || l.baselineNs == l.measuredNs || l.measuredNs <= 0)
        return "against the measured " + formatDuration(l.measuredNs);
    const double error = static_cast<double>(l.baselineNs - l.measuredNs) / static_cast<double>(l.measuredNs);
    return "against its replay of the measured run, " + formatDuration(l.baselineNs) + " (" + formatSignedPercent(error) +
           " from the measured " + formatDuration(l.measuredNs) + ")";
}

std::string leverText(const Lever& l)
{
    return l.change + ": " + formatDuration(l.predictedNs) + " (" + formatSignedPercent(-l.gain) + ")";
}

Levers rankLevers(const CostModel& model, const AnalysisResult& r)
{
    Levers out;
    const PipelineStructure& p = r.pipeline;
    if (!p.found || !model.measuredIterationNs || *model.measuredIterationNs <= 0 || model.layers.empty())
        return out;
    out.measuredNs = *model.measuredIterationNs;

    // Where the bubbles come from: the schedule's own fill/drain, or waiting on a stage.
    {
        TimeNs window = 0, fill = 0, wait = 0, overhead = 0;
        for (const RankIdle& ri : r.idle)
            if (ri.iteration == r.selectedIteration) {
                window += ri.windowNs;
                fill += ri.byCause[static_cast<size_t>(BubbleCause::FillDrain)];
                wait += ri.byCause[static_cast<size_t>(BubbleCause::WaitNeighbor)];
                overhead += ri.byCause[static_cast<size_t>(BubbleCause::StepOverhead)];
            }
        if (window > 0) {
            const double fillShare = static_cast<double>(fill) / static_cast<double>(window);
            const double waitShare = static_cast<double>(wait) / static_cast<double>(window);
            const double overheadShare = static_cast<double>(overhead) / static_cast<double>(window);
            const double ideal = r.imbalance.idealBubbleFraction;
            char buf[256];
            const std::string shape = scheduleName(p.schedule) + " with p=" + std::to_string(p.pp) +
                                      (p.chunks > 1 ? ", v=" + std::to_string(p.chunks) : std::string()) + ", m=" +
                                      std::to_string(p.microbatches);
            if (overheadShare > std::max(waitShare, fillShare) && overheadShare >= 0.05)
                std::snprintf(buf, sizeof buf,
                              "bubbles are mostly the steps' own overhead (%.0f%% of rank time: steps that began after their input "
                              "had arrived), then waiting on a slower stage (%.0f%%) and the schedule's fill/drain (%.0f%%)",
                              overheadShare * 100.0, waitShare * 100.0, fillShare * 100.0);
            else if (waitShare > fillShare && waitShare >= 0.05)
                std::snprintf(buf, sizeof buf, "bubbles are mostly waiting on a slower stage (%.0f%% of rank time), not the schedule's fill/drain (%.0f%%)",
                              waitShare * 100.0, fillShare * 100.0);
            else if (std::abs(fillShare - ideal) <= 0.03)
                std::snprintf(buf, sizeof buf, "fill/drain (%.0f%% of rank time) is at the ideal for %s (%.0f%%)", fillShare * 100.0,
                              shape.c_str(), ideal * 100.0);
            else
                std::snprintf(buf, sizeof buf, "fill/drain is %.0f%% of rank time, against %.0f%% ideal for %s", fillShare * 100.0,
                              ideal * 100.0, shape.c_str());
            out.bubbles = buf;
        }
    }

    const Scenario base = measuredScenario(model);
    // Gains against the replay of the measured run: the same model on both
    // sides, so its calibration error is not taken for a gain.
    out.baselineNs = out.measuredNs;
    try {
        if (const TimeNs replayed = predict(model, base).iterationNs(); replayed > 0)
            out.baselineNs = replayed;
    } catch (const Error&) {
    }
    const double baseline = static_cast<double>(out.baselineNs);
    auto add = [&](std::string kind, std::string change, TimeNs predicted) {
        if (predicted <= 0)
            return;
        const double gain = (baseline - static_cast<double>(predicted)) / baseline;
        if (gain < 0.005)
            return;
        out.levers.push_back({std::move(kind), std::move(change), predicted, gain});
    };
    // Each scenario on its best partition (the min-max split, refined by a
    // few replays), so that schedules are compared at their best; the text
    // says so, since the gain then includes what rebalancing alone gives.
    auto best = [&](const Scenario& s) -> TimeNs {
        try {
            BalanceOptions bo;
            bo.timeline = false;
            bo.maxRefineRounds = 4;
            return autoBalance(model, s, bo).prediction.iterationNs();
        } catch (const Error&) {
            return 0;
        }
    };
    const bool layersKnown = model.layerSource != LayerSource::Stages;

    // 1. Rebalance the stages (move layers), same schedule.
    if (layersKnown) {
        try {
            BalanceOptions bo;
            bo.timeline = false;
            const BalanceResult b = autoBalance(model, base, bo);
            std::string bounds;
            for (int x : b.prediction.partition.boundaries())
                bounds += (bounds.empty() ? "" : ",") + std::to_string(x);
            add("rebalance", "rebalance the stages (boundaries " + bounds + ")", b.prediction.iterationNs());
        } catch (const Error&) {
        }
    }
    // 2. Twice the microbatches (the same global batch in smaller pieces).
    if (base.microbatches > 0 && base.microbatches * 2 <= 4096) {
        try {
            ScenarioChanges c;
            c.microbatches = base.microbatches * 2;
            const Scenario s = applyChanges(base, c);
            add("microbatches",
                "m=" + std::to_string(*c.microbatches) + " microbatches (same global batch)" +
                    (layersKnown ? ", auto-balanced" : ""),
                layersKnown ? best(s) : predict(model, s).iterationNs());
        } catch (const Error&) {
        }
    }
    // 3. Interleave: two chunks per rank (or one more than now).
    if (layersKnown && (base.schedule == ScheduleKind::OneFOneB || base.schedule == ScheduleKind::Interleaved1F1B ||
                        base.schedule == ScheduleKind::GPipe)) {
        const int v = base.schedule == ScheduleKind::Interleaved1F1B ? base.v + 1 : 2;
        if (model.layerCount() >= base.pp * v) {
            try {
                ScenarioChanges c;
                c.schedule = "interleaved-1f1b";
                c.v = v;
                add("interleave", "interleave v=" + std::to_string(v) + " (interleaved-1f1b), auto-balanced",
                    best(applyChanges(base, c)));
            } catch (const Error&) {
            }
        }
    }
    // 4. A zero-bubble schedule (the backward split into input and weight parts).
    if (layersKnown && base.schedule != ScheduleKind::ZeroBubbleH1 && base.schedule != ScheduleKind::ZeroBubbleH2) {
        try {
            ScenarioChanges c;
            c.schedule = "zb-h1";
            add("schedule", "zero-bubble schedule zb-h1, auto-balanced", best(applyChanges(base, c)));
        } catch (const Error&) {
        }
    }
    // 5. The worst straggler at its peers' speed.
    if (!r.imbalance.stragglers.empty()) {
        try {
            const StragglerFix f = priceStraggler(model, r, r.imbalance.stragglers.front().rank);
            add("straggler", "fix the straggler rank " + std::to_string(f.rank) + " (stage " + std::to_string(f.stage) + ")",
                f.iterationNs);
        } catch (const Error&) {
        }
    }
    // 6. The per-step overhead the replay models (CostModel::stepGapNs) cut
    // to a launch gap: CUDA graphs, fewer host synchronisations per step.
    if (!model.stepGapNs.empty()) {
        try {
            CostModel m = model;
            m.stepGapNs.clear();
            m.localStepGapNs.clear();
            add("overhead", "cut the per-step overhead (the host gap before each step) to a launch gap", predict(m, base).iterationNs());
        } catch (const Error&) {
        }
    }
    // 7. Equal work per replica, where the replicas' work differs with their
    // data: token balancing across data-parallel ranks (as Hydraulis does).
    if (!model.replicaSizes.empty() && r.imbalance.stragglers.empty()) {
        try {
            CostModel m = model;
            m.replicaSizes.clear();
            m.replicaPace.clear();
            add("replicas", "equal work per replica (token balancing across data-parallel ranks)", predict(m, base).iterationNs());
        } catch (const Error&) {
        }
    }
    std::stable_sort(out.levers.begin(), out.levers.end(), [](const Lever& a, const Lever& b) { return a.gain > b.gain; });
    return out;
}

nlohmann::json leversToJson(const Levers& levers)
{
    nlohmann::json lv = nlohmann::json::array();
    for (const Lever& l : levers.levers)
        lv.push_back({{"kind", l.kind}, {"change", l.change}, {"predicted_iteration_ns", l.predictedNs}, {"gain", l.gain}});
    return {{"bubbles", levers.bubbles}, {"measured_iteration_ns", levers.measuredNs}, {"levers", std::move(lv)}};
}

} // namespace pipescope::whatif
