// The straggler what-if: a slow replica at its peers' speed.
#include "whatif/WhatIf.h"

#include "analysis/MeasuredPipeline.h"
#include "util/Error.h"
#include "util/Format.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace pipescope::whatif {

StragglerFix priceStraggler(const CostModel& model, const AnalysisResult& analysis, int rank)
{
    const std::vector<RankSpeed>& speeds = analysis.imbalance.rankSpeed;
    const auto it = std::find_if(speeds.begin(), speeds.end(), [&](const RankSpeed& r) { return r.rank == rank; });
    if (it == speeds.end())
        throw ValueError(Setting::FixStraggler, "rank " + std::to_string(rank) + " ran no pipeline steps in the analysed iteration");
    if (!it->relative || it->peerMedianNs <= 0)
        throw ValueError(Setting::FixStraggler, "rank " + std::to_string(rank) +
                                              " has no data-parallel peers to compare with (dp " +
                                              std::to_string(model.dataParallel) + "), so it has no peers' speed to run at");
    const int p = std::max(1, model.measuredPp);
    if (it->stage < 0 || it->stage >= p)
        throw ValueError(Setting::FixStraggler, "rank " + std::to_string(rank) + " is on stage " + std::to_string(it->stage) +
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
        means.replicaSizes.clear();
        fix.baseIterationNs = predict(means, base, fast).iterationNs();
    }
    if (!model.replicaSizes.empty() && fix.replica >= 0 && static_cast<size_t>(fix.replica) < model.replicaSizes.size()) {
        // Each replica replays with its own work: the straggler's steps on
        // its stage run at its peers' median pace instead.
        fix.slowestReplicaNs = predict(model, base, fast).iterationNs();
        CostModel m = model;
        MicrobatchSizes& own = m.replicaSizes[size_t(fix.replica)];
        const double toPeers = fix.computeNs > 0 ? static_cast<double>(fix.peerMedianNs) / static_cast<double>(fix.computeNs) : 1.0;
        const ScheduleKind placement = model.measuredSchedule.value_or(ScheduleKind::OneFOneB);
        for (int c = 0; c < std::max(1, model.measuredV); ++c) {
            const int vs = virtualStage(placement, p, fix.stage, c);
            if (vs < 0 || vs >= own.rows())
                continue;
            for (double& x : own.forward[size_t(vs)])
                x *= toPeers;
            for (double& x : own.backward[size_t(vs)])
                x *= toPeers;
        }
        fix.fixedNs = predict(m, base, fast).iterationNs();
        fix.gainNs = std::max<TimeNs>(0, fix.slowestReplicaNs - fix.fixedNs);
        fix.iterationNs = fix.fixedNs;
        return fix;
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

} // namespace pipescope::whatif
