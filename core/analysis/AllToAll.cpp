// Expert-parallel exchanges (docs/analysis.md, "Mixture-of-experts
// all-to-all"): per rank the all-to-all kernels of the selected iteration,
// their time, how much of it the critical path runs through, and the spread
// across ranks.
#include "analysis/Analysis.h"
#include "analysis/CommRules.h"
#include "analysis/detail/Context.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace pipescope::detail {

namespace {

bool namesAllToAll(std::string_view name)
{
    // "ncclDevKernel_AllToAll...", "all_to_all", "alltoallv": letters only, case-insensitive.
    std::string key;
    for (char c : name.substr(0, 256))
        if (std::isalpha(static_cast<unsigned char>(c)))
            key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return key.find("alltoall") != std::string::npos;
}

} // namespace

bool isAllToAll(const Context& ctx, uint32_t activity)
{
    const Activity& act = ctx.act(activity);
    if (const NcclOp* op = ctx.ncclOf(activity))
        return op->kind == Collective::AllToAll;
    if (namesAllToAll(ctx.trace.str(act.name)))
        return true;
    // DeepEP's dispatch and combine, or a user's rule, say all-to-all.
    const CommRules& rules = ctx.options.commRules ? *ctx.options.commRules : CommRules::builtIn();
    auto m = rules.match(ctx.trace.str(act.name));
    return m && m->op == "AllToAll";
}

void measureAllToAll(Context& ctx, AnalysisResult& out)
{
    out.allToAll = {};
    if (out.selectedIteration < 0 || static_cast<size_t>(out.selectedIteration) >= out.iterations.size())
        return;
    const Iteration& it = out.iterations[static_cast<size_t>(out.selectedIteration)];
    AllToAll& a2a = out.allToAll;
    for (const RankData& rd : ctx.ranks) {
        TimeNs from = it.start, to = it.end;
        for (const RankSpan& span : it.ranks)
            if (span.rank == rd.rank) {
                from = span.start;
                to = span.end;
            }
        if (to <= from)
            continue;
        AllToAllRank r;
        r.rank = rd.rank;
        r.stage = rd.stage;
        r.replica = rd.replica;
        r.windowNs = to - from;
        std::vector<Interval> busy;
        for (uint32_t ai : rd.comm) {
            const Activity& act = ctx.act(ai);
            if (act.start >= to)
                break;
            if (act.end <= from || act.start < from)
                continue;
            if (!isAllToAll(ctx, ai))
                continue;
            const NcclOp* op = ctx.ncclOf(ai);
            ++r.count;
            if (op && op->bytes)
                r.bytes += *op->bytes;
            unionAppend(busy, act.start, std::min(act.end, to));
        }
        if (r.count == 0)
            continue;
        r.kernelNs = totalLength(busy);
        // The critical path of the iteration through this rank's all-to-all.
        std::vector<Interval> path;
        for (const PathSegment& seg : out.criticalPath.segments)
            if (seg.rank == rd.rank && seg.kind == PathKind::Collective)
                unionAppend(path, seg.start, seg.end);
        r.criticalNs = intersectionLength(busy, path);
        a2a.ranks.push_back(r);
    }
    if (a2a.ranks.empty())
        return;
    std::vector<TimeNs> k;
    std::map<int, AllToAllStage> stages;
    std::map<int, TimeNs> windows;
    for (const AllToAllRank& r : a2a.ranks) {
        k.push_back(r.kernelNs);
        a2a.criticalNs += r.criticalNs;
        AllToAllStage& s = stages[r.stage];
        s.stage = r.stage;
        ++s.ranks;
        s.meanKernelNs += r.kernelNs; // a sum until divided below
        windows[r.stage] += r.windowNs;
    }
    for (auto& [stage, s] : stages) {
        s.share = windows[stage] > 0 ? static_cast<double>(s.meanKernelNs) / static_cast<double>(windows[stage]) : 0.0;
        s.meanKernelNs /= s.ranks;
        a2a.stages.push_back(s);
    }
    std::sort(k.begin(), k.end());
    a2a.minNs = k.front();
    a2a.maxNs = k.back();
    // The median of an even count is the mean of the middle two, rounded down.
    a2a.medianNs = k.size() % 2 ? k[k.size() / 2] : (k[k.size() / 2 - 1] + k[k.size() / 2]) / 2;
    const TimeNs pathNs = out.criticalPath.end - out.criticalPath.start;
    a2a.criticalShare = pathNs > 0 ? static_cast<double>(a2a.criticalNs) / static_cast<double>(pathNs) : 0.0;
}

} // namespace pipescope::detail
