#include "panels/StepPivot.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace pipescope::gui {

TimeNs nearestRank(const std::vector<TimeNs>& sorted, double p)
{
    if (sorted.empty())
        return 0;
    const auto n = static_cast<double>(sorted.size());
    const auto rank = static_cast<size_t>(std::max(1.0, std::ceil(p * n - 1e-9)));
    return sorted[std::min(rank, sorted.size()) - 1];
}

bool inArea(const Step& step, const StepArea& area)
{
    return step.end > area.from && step.start < area.to && std::binary_search(area.ranks.begin(), area.ranks.end(), step.rank);
}

std::vector<PivotRow> pivotSteps(const AnalysisResult& result, PivotBy by, const StepArea* area)
{
    // (stage, kind, microbatch or iteration or -1) -> step durations
    std::map<std::tuple<int, int, int>, std::vector<TimeNs>> groups;
    for (const Step& s : result.steps) {
        if (area && !inArea(s, *area))
            continue;
        const int third = by == PivotBy::StageKindMicrobatch ? s.microbatch
                          : by == PivotBy::StageKindIteration  ? s.iteration
                                                               : -1;
        groups[{s.stage, static_cast<int>(s.kind), third}].push_back(s.end - s.start);
    }
    std::vector<PivotRow> rows;
    rows.reserve(groups.size());
    for (auto& [key, durations] : groups) {
        std::sort(durations.begin(), durations.end());
        PivotRow r;
        r.stage = std::get<0>(key);
        r.kind = static_cast<StepKind>(std::get<1>(key));
        (by == PivotBy::StageKindMicrobatch ? r.microbatch : r.iteration) = std::get<2>(key);
        r.count = static_cast<int64_t>(durations.size());
        for (TimeNs d : durations)
            r.totalNs += d;
        r.meanNs = (r.totalNs + r.count / 2) / r.count;
        r.p50Ns = nearestRank(durations, 0.50);
        r.p95Ns = nearestRank(durations, 0.95);
        rows.push_back(r);
    }
    return rows;
}

} // namespace pipescope::gui
