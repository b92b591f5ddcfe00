#include "analysis/JobPart.h"

#include "analysis/Analysis.h"
#include "store/Store.h"
#include "util/Memory.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace pipescope {

int64_t activitiesOf(Store& store, const std::vector<int>& ranks)
{
    int64_t n = 0;
    for (const GpuSummary& g : store.summary().gpuSummaries)
        if (ranks.empty() || std::binary_search(ranks.begin(), ranks.end(), g.rank))
            n += g.kernels + g.memcpys + g.memsets + g.syncs;
    return n;
}

bool fitsInMemory(int64_t activities, const ReadLimits& limits)
{
    const int64_t needed = activities * limits.bytesPerActivity;
    if (limits.budgetBytes >= 0 && needed > limits.budgetBytes)
        return false;
    const auto available = availableMemory();
    return !available || needed <= *available;
}

ReadPlan planRead(Store& store, const std::vector<int>& asked, const ReadLimits& limits)
{
    // The store's summary once: each rank's GPU activities.
    std::map<int, int64_t> perRank;
    ReadPlan plan;
    for (const GpuSummary& g : store.summary().gpuSummaries) {
        perRank[g.rank] += g.kernels + g.memcpys + g.memsets + g.syncs;
        ++plan.gpus;
    }
    for (const auto& [rank, n] : perRank) {
        plan.jobRankList.push_back(rank);
        plan.jobActivities += n;
    }
    plan.jobRanks = static_cast<int>(plan.jobRankList.size());
    auto read = [&](std::vector<int> ranks) {
        std::sort(ranks.begin(), ranks.end());
        ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
        plan.ranks = std::move(ranks);
        plan.activities = 0;
        plan.ranksHeld = 0;
        for (int r : plan.ranks)
            if (const auto it = perRank.find(r); it != perRank.end()) {
                plan.activities += it->second;
                ++plan.ranksHeld;
            }
    };
    plan.activities = plan.jobActivities;
    plan.ranksHeld = plan.jobRanks;
    if (!asked.empty()) {
        read(asked);
        return plan;
    }
    const JobIndex* index = store.jobIndex();
    if (!index)
        return plan;
    if ((limits.wholeJobAbove < 0 || plan.jobActivities <= limits.wholeJobAbove) && fitsInMemory(plan.jobActivities, limits))
        return plan;
    std::vector<int> ranks = representativeRanks(*index);
    if (ranks.empty())
        return plan;
    read(std::move(ranks));
    plan.chosen = true;
    return plan;
}

int JobPart::replicas() const
{
    int n = 0;
    if (overview)
        for (const StageReplicas& st : overview->stages)
            n = std::max(n, st.replicas);
    return n;
}

JobPart describePart(Store& store, const ReadPlan& plan)
{
    JobPart part;
    part.jobRanks = plan.jobRanks;
    part.loadedRanks = plan.ranks;
    part.chosen = plan.chosen;
    part.jobActivities = plan.jobActivities;
    if (plan.ranksHeld == plan.jobRanks)
        part.loadedRanks.clear(); // every rank
    const JobIndex* index = store.jobIndex();
    if (!index)
        return part;
    part.overview = overviewFromIndex(*index);
    if (part.overview)
        part.busiest = busiestReplica(*index, *part.overview);
    for (const ShardRecord& r : index->records)
        for (const JobRankSummary& s : r.rankSummaries)
            if (s.stage)
                part.stageRanks[*s.stage].push_back(s.rank);
    for (auto& [stage, members] : part.stageRanks)
        std::sort(members.begin(), members.end());
    if (!part.partial())
        return part;
    if (part.overview)
        part.replicaPace = replicaPaceFromIndex(*index, *part.overview, part.loadedRanks);
    // Ranks that are not whole pipelines cannot show their stages by their
    // transfers: the index, whose map step saw whole pipelines, says them.
    const std::vector<int>& ranks = part.loadedRanks;
    std::set<int> covered;
    for (const std::vector<int>& p : index->pipelines)
        if (std::all_of(p.begin(), p.end(), [&](int r) { return std::binary_search(ranks.begin(), ranks.end(), r); }))
            covered.insert(p.begin(), p.end());
    if (covered.size() == ranks.size())
        return part;
    for (const auto& [stage, members] : part.stageRanks)
        for (int r : members)
            if (std::binary_search(ranks.begin(), ranks.end(), r))
                part.stageMapFromIndex[r] = stage;
    return part;
}

std::vector<IndexStraggler> indexStragglers(const JobOverview& overview)
{
    std::vector<IndexStraggler> out;
    for (const StageReplicas& st : overview.stages) {
        if (st.replicas < 2 || st.busyMedian <= 0)
            continue;
        const double relative = static_cast<double>(st.busyMax) / static_cast<double>(st.busyMedian);
        if (relative < kStragglerRatio)
            continue;
        out.push_back({st.stage, st.busiestRank, st.busyMax, st.busyMedian, relative});
    }
    std::stable_sort(out.begin(), out.end(), [](const IndexStraggler& a, const IndexStraggler& b) {
        return a.busyNs - a.medianNs > b.busyNs - b.medianNs;
    });
    return out;
}

std::string stragglerThresholdText()
{
    return std::to_string(static_cast<int>(std::lround((kStragglerRatio - 1.0) * 100.0))) + "%";
}

std::string describeRanksRead(const JobPart& part)
{
    if (!part.partial())
        return {};
    std::string text = std::to_string(part.loadedRanks.size()) + " of " + std::to_string(part.jobRanks) + " ranks (" +
                       rankListShort(part.loadedRanks) + ")";
    if (part.chosen && part.busiest)
        text += ", the pipeline of the busiest replica (rank " + std::to_string(part.busiest->rank) + ", stage " +
                std::to_string(part.busiest->stage) + ")";
    return text;
}

} // namespace pipescope
