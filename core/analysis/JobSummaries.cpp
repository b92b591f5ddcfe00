#include "analysis/JobSummaries.h"

#include "analysis/Analysis.h"
#include "store/Store.h"

#include <algorithm>
#include <map>
#include <set>

namespace pipescope {

namespace {

// Fills the summaries of the ranks an analysis holds.
void fillSummaries(const AnalysisResult& r, std::map<int, JobRankSummary*>& byRank)
{
    for (const RankIdle& idle : r.idle) {
        auto it = byRank.find(idle.rank);
        if (it == byRank.end() || idle.iteration < 0 || static_cast<size_t>(idle.iteration) >= r.iterations.size())
            continue;
        JobRankSummary& s = *it->second;
        if (idle.stage >= 0)
            s.stage = idle.stage;
        JobRankIteration ri;
        ri.label = r.iterations[static_cast<size_t>(idle.iteration)].label;
        if (ri.label.empty())
            ri.label = "iteration " + std::to_string(idle.iteration);
        ri.windowNs = idle.windowNs;
        ri.busyNs = idle.busyNs;
        ri.idleByCause = idle.byCause;
        s.iterations.push_back(std::move(ri));
    }
}

// The groups of ranks the map analyses one at a time: the shard's
// pipelines, then the ranks in none together.
std::vector<std::vector<int>> mapGroups(const std::vector<JobRankSummary>& ranks,
                                        const std::vector<std::vector<int>>& pipelines)
{
    std::set<int> left;
    for (const JobRankSummary& s : ranks)
        left.insert(s.rank);
    std::vector<std::vector<int>> groups;
    for (const auto& p : pipelines) {
        std::vector<int> g;
        for (int r : p)
            if (left.erase(r))
                g.push_back(r);
        if (!g.empty())
            groups.push_back(std::move(g));
    }
    if (!left.empty())
        groups.emplace_back(left.begin(), left.end());
    return groups;
}

} // namespace

void summariseShard(const std::string& path, std::vector<JobRankSummary>& ranks,
                    const std::vector<std::vector<int>>& pipelines)
{
    summariseShardAbove(path, ranks, pipelines, kMapWholeAbove);
}

void summariseShardAbove(const std::string& path, std::vector<JobRankSummary>& ranks,
                         const std::vector<std::vector<int>>& pipelines, int64_t wholeAbove)
{
    std::map<int, JobRankSummary*> byRank;
    for (auto& s : ranks)
        byRank[s.rank] = &s;
    Store store(path);
    AnalyzeOptions ao;
    ao.autogradSequences = [&store](const std::vector<int64_t>& ids) { return store.autogradSequences(ids); };
    int64_t kernels = 0;
    for (const JobRankSummary& s : ranks)
        kernels += s.kernels;
    const std::vector<std::vector<int>> groups = mapGroups(ranks, pipelines);
    if (kernels <= wholeAbove || groups.size() < 2) {
        fillSummaries(analyze(store.load(), ao), byRank);
        return;
    }
    for (const std::vector<int>& g : groups) {
        LoadOptions lo;
        lo.ranks = g;
        fillSummaries(analyze(store.load(lo), ao), byRank);
    }
}

namespace {

template <typename T>
T median(std::vector<T> v)
{
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
}

const JobRankIteration* iterationOf(const JobRankSummary& s, const std::string& label)
{
    for (const auto& it : s.iterations)
        if (it.label == label)
            return &it;
    return nullptr;
}

} // namespace

std::optional<JobOverview> overviewFromIndex(const JobIndex& index, const std::optional<std::string>& label)
{
    std::vector<const JobRankSummary*> staged;
    for (const ShardRecord& r : index.records)
        for (const JobRankSummary& s : r.rankSummaries)
            if (s.stage && !s.iterations.empty())
                staged.push_back(&s);
    if (staged.empty())
        return std::nullopt;
    JobOverview out;
    if (label) {
        out.iteration = *label;
    } else {
        // Labels every staged rank has, in the first rank's order.
        std::vector<std::string> common;
        for (const auto& it : staged.front()->iterations)
            if (std::all_of(staged.begin(), staged.end(), [&](const JobRankSummary* s) { return iterationOf(*s, it.label); }))
                common.push_back(it.label);
        if (common.empty())
            return std::nullopt;
        if (common.size() >= 3)
            common.erase(common.begin());
        std::vector<std::pair<TimeNs, size_t>> windows;
        for (size_t i = 0; i < common.size(); ++i) {
            std::vector<TimeNs> w;
            for (const JobRankSummary* s : staged)
                w.push_back(iterationOf(*s, common[i])->windowNs);
            windows.emplace_back(median(w), i);
        }
        std::sort(windows.begin(), windows.end());
        out.iteration = common[windows[(windows.size() - 1) / 2].second];
    }
    std::map<int, std::vector<std::pair<const JobRankSummary*, const JobRankIteration*>>> byStage;
    for (const JobRankSummary* s : staged)
        if (const JobRankIteration* it = iterationOf(*s, out.iteration))
            byStage[*s->stage].emplace_back(s, it);
    for (const auto& [stage, members] : byStage) {
        StageReplicas st;
        st.stage = stage;
        st.replicas = static_cast<int>(members.size());
        std::vector<TimeNs> windows, busy;
        std::array<std::vector<TimeNs>, kBubbleCauses> causes;
        const std::pair<const JobRankSummary*, const JobRankIteration*>*busiest = &members.front(), *idlest = &members.front();
        for (const auto& m : members) {
            windows.push_back(m.second->windowNs);
            busy.push_back(m.second->busyNs);
            for (size_t c = 0; c < causes.size(); ++c)
                causes[c].push_back(m.second->idleByCause[c]);
            if (m.second->busyNs > busiest->second->busyNs)
                busiest = &m;
            if (m.second->busyNs < idlest->second->busyNs)
                idlest = &m;
        }
        st.windowNs = median(windows);
        st.busyMin = *std::min_element(busy.begin(), busy.end());
        st.busyMax = *std::max_element(busy.begin(), busy.end());
        st.busyMedian = median(busy);
        TimeNs sum = 0;
        for (TimeNs b : busy)
            sum += b;
        st.busyMean = sum / static_cast<TimeNs>(busy.size());
        st.busiestRank = busiest->first->rank;
        st.idlestRank = idlest->first->rank;
        for (size_t c = 0; c < causes.size(); ++c)
            st.idleMedian[c] = median(causes[c]);
        out.ranks += st.replicas;
        out.stages.push_back(st);
    }
    return out;
}

std::optional<BusiestReplica> busiestReplica(const JobIndex& index, const JobOverview& overview)
{
    const StageReplicas* top = nullptr;
    for (const StageReplicas& st : overview.stages)
        if (!top || st.busyMax > top->busyMax)
            top = &st;
    if (!top)
        return std::nullopt;
    BusiestReplica b;
    b.rank = top->busiestRank;
    b.stage = top->stage;
    b.busyNs = top->busyMax;
    if (const std::vector<int>* p = index.pipelineOf(b.rank))
        b.pipeline = *p;
    return b;
}

std::vector<double> replicaPaceFromIndex(const JobIndex& index, const JobOverview& overview,
                                         const std::vector<int>& loadedRanks)
{
    int stages = 0;
    for (const StageReplicas& st : overview.stages)
        stages = std::max(stages, st.stage + 1);
    std::vector<double> pace(static_cast<size_t>(stages), 1.0);
    std::map<int, std::pair<double, int>> loaded; // stage -> (busy sum, ranks)
    const std::set<int> wanted(loadedRanks.begin(), loadedRanks.end());
    for (const ShardRecord& r : index.records)
        for (const JobRankSummary& s : r.rankSummaries)
            if (s.stage && wanted.count(s.rank))
                if (const JobRankIteration* it = iterationOf(s, overview.iteration)) {
                    auto& [sum, n] = loaded[*s.stage];
                    sum += static_cast<double>(it->busyNs);
                    ++n;
                }
    for (const StageReplicas& st : overview.stages) {
        const auto it = loaded.find(st.stage);
        if (st.stage < 0 || st.replicas < 2 || it == loaded.end() || it->second.first <= 0)
            continue;
        pace[static_cast<size_t>(st.stage)] =
            std::max(1.0, static_cast<double>(st.busyMax) / (it->second.first / it->second.second));
    }
    return pace;
}

std::vector<int> representativeRanks(const JobIndex& index)
{
    const auto overview = overviewFromIndex(index);
    if (!overview)
        return {};
    const auto busiest = busiestReplica(index, *overview);
    return busiest ? busiest->pipeline : std::vector<int>{};
}

std::string rankListText(const std::vector<int>& ranks)
{
    std::string out;
    for (int r : ranks)
        out += (out.empty() ? "" : ",") + std::to_string(r);
    return out;
}

std::string rankListShort(const std::vector<int>& ranks)
{
    if (ranks.size() <= 8)
        return rankListText(ranks);
    return std::to_string(ranks.front()) + " to " + std::to_string(ranks.back());
}

} // namespace pipescope
