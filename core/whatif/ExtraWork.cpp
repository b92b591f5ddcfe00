#include "whatif/ExtraWork.h"

#include "util/Error.h"
#include "util/Format.h"
#include "util/Limits.h"

#include <algorithm>
#include <sstream>

namespace pipescope::whatif {

ExtraWorkPrediction addExtraWork(const Schedule& schedule, const ReplayCosts& costs, const ReplayResult& replay,
                                 TimeNs workNs, TimeNs minPieceNs)
{
    if (workNs < 0 || workNs > kMaxTimeNs)
        throw Error("extra work of " + std::to_string(workNs) + " ns is negative or beyond the nanosecond clock");
    if (minPieceNs < 0 || minPieceNs > kMaxTimeNs)
        throw Error("a minimum piece of " + std::to_string(minPieceNs) + " ns is negative or beyond the nanosecond clock");
    ExtraWorkPrediction out;
    out.workNs = workNs;
    out.minPieceNs = minPieceNs;
    out.baseIterationNs = replay.iterationNs;

    auto costOf = [](const std::vector<TimeNs>& v, size_t r) { return r < v.size() ? v[r] : TimeNs(0); };
    auto add = [](TimeNs a, TimeNs b) {
        if (a > kMaxTimeNs - b)
            throw Error("the iteration with the extra work lies beyond the nanosecond clock (about 146 years)");
        return a + b;
    };
    TimeNs lastJoin = 0;
    for (size_t r = 0; r < replay.ranks.size(); ++r) {
        const RankReplay& rr = replay.ranks[r];
        RankExtraWork rw;
        rw.rank = static_cast<int>(r);
        for (int s = 0; s < schedule.stages && static_cast<size_t>(s) < schedule.rankOfStage.size(); ++s)
            if (schedule.rankOfStage[static_cast<size_t>(s)] == rw.rank)
                rw.stages.push_back(s);
        std::vector<TimedAction> steps = rr.actions;
        std::sort(steps.begin(), steps.end(), [](const TimedAction& a, const TimedAction& b) { return a.start < b.start; });
        TimeNs left = workNs, busyUntil = steps.empty() ? 0 : steps.front().start;
        for (const TimedAction& a : steps) {
            const TimeNs gap = a.start - busyUntil;
            if (gap > 0 && gap >= minPieceNs) {
                rw.fillableNs += gap;
                const TimeNs put = std::min(gap, left);
                rw.hiddenNs += put;
                left -= put;
            }
            busyUntil = std::max(busyUntil, a.end);
        }
        rw.overflowNs = left;
        // The replay's own end of the iteration, each rank's last step moved by its overflow.
        rw.endNs = add(add(rr.computeEnd, rw.overflowNs), costOf(costs.allReduceNs, r));
        lastJoin = std::max(lastJoin, rw.endNs);
        out.ranks.push_back(std::move(rw));
    }
    TimeNs iteration = 0;
    for (size_t r = 0; r < out.ranks.size(); ++r) {
        RankExtraWork& rw = out.ranks[r];
        if (costs.pipelineSyncNs > 0)
            rw.endNs = add(lastJoin, costs.pipelineSyncNs);
        rw.endNs = add(rw.endNs, costOf(costs.optimizerNs, r));
        iteration = std::max(iteration, rw.endNs);
    }
    // A rank that ends its compute early may already have ended before the
    // replayed iteration (the others set its end); extra work never shortens it.
    out.iterationNs = std::max(iteration, replay.iterationNs);
    return out;
}

ExtraWorkPrediction addExtraWork(const Prediction& prediction, TimeNs workNs, TimeNs minPieceNs)
{
    return addExtraWork(prediction.schedule, prediction.costs, prediction.replay, workNs, minPieceNs);
}

std::string extraWorkText(const ExtraWorkPrediction& e)
{
    std::ostringstream o;
    o << "extra work " << formatDuration(e.workNs) << " per stage (pieces of at least " << formatDuration(e.minPieceNs)
      << "): iteration " << formatDuration(e.iterationNs) << " (+" << formatDuration(e.extraNs()) << "); hidden in bubbles:";
    for (size_t i = 0; i < e.ranks.size(); ++i) {
        const RankExtraWork& r = e.ranks[i];
        o << (i ? ", " : " ");
        if (r.stages.size() == 1 && r.stages.front() == r.rank)
            o << "stage " << r.rank;
        else {
            o << "rank " << r.rank << " (stages";
            for (size_t k = 0; k < r.stages.size(); ++k)
                o << (k ? "," : " ") << r.stages[k];
            o << ")";
        }
        o << " " << formatDuration(r.hiddenNs);
    }
    return o.str();
}

nlohmann::json extraWorkToJson(const ExtraWorkPrediction& e)
{
    nlohmann::json ranks = nlohmann::json::array();
    for (const RankExtraWork& r : e.ranks)
        ranks.push_back({{"rank", r.rank},
                         {"stages", r.stages},
                         {"fillable_ns", r.fillableNs},
                         {"hidden_ns", r.hiddenNs},
                         {"overflow_ns", r.overflowNs},
                         {"end_ns", r.endNs}});
    return {{"work_ns", e.workNs},
            {"min_piece_ns", e.minPieceNs},
            {"base_iteration_ns", e.baseIterationNs},
            {"iteration_ns", e.iterationNs},
            {"extra_ns", e.extraNs()},
            {"ranks", std::move(ranks)}};
}

} // namespace pipescope::whatif
