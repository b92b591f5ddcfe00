// The stage map: which pipeline stage and data-parallel replica each rank is.
// --stage-map wins, then --pp; else the process group that carries the
// point-to-point traffic, else the chains (or rings) its peers form.
#include "analysis/detail/Context.h"
#include "analysis/structure/detail/StructureSteps.h"
#include "util/Error.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace pipescope::detail {

namespace {

// Stage (-1: none) and replica of each rank while they are being found.
struct RankStages {
    std::map<int, int> stageOf, replicaOf;
    bool irregularPeers = false; // peers that form no chain of stages
};

void assignReplicasByOrder(std::map<int, int>& stageOf, std::map<int, int>& replicaOf)
{
    std::map<int, int> seen;
    for (const auto& [rank, stage] : stageOf)
        if (stage >= 0)
            replicaOf[rank] = seen[stage]++;
}

// Every rank of the trace starts without a stage; returns whether any
// point-to-point kernel ran.
bool unmapRanks(const Context& ctx, RankStages& rs)
{
    bool p2pSeen = false;
    for (const auto& rd : ctx.ranks) {
        rs.stageOf[rd.rank] = -1;
        for (uint32_t c : rd.comm)
            p2pSeen = p2pSeen || ctx.classOf(c) == WorkClass::P2p;
    }
    return p2pSeen;
}

// First compute of each rank in the selected iteration (in the whole trace
// when none is selected): it orders chains.
std::map<int, TimeNs> firstComputeOfRanks(const Context& ctx, const AnalysisResult& out)
{
    std::map<int, TimeNs> firstCompute;
    const Iteration* sel = out.selectedIteration >= 0 ? &out.iterations[static_cast<size_t>(out.selectedIteration)] : nullptr;
    for (const auto& rd : ctx.ranks) {
        TimeNs from = std::numeric_limits<TimeNs>::min(), to = std::numeric_limits<TimeNs>::max();
        if (sel)
            for (const auto& rs : sel->ranks)
                if (rs.rank == rd.rank) {
                    from = rs.start;
                    to = rs.end;
                }
        for (uint32_t k : rd.compute)
            if (ctx.act(k).start >= from && ctx.act(k).start <= to) {
                firstCompute[rd.rank] = ctx.act(k).start;
                break;
            }
    }
    return firstCompute;
}

// --stage-map: the user's stages; replicas count up per stage in rank order.
void stagesFromStageMap(Context& ctx, PipelineStructure& ps, int world, RankStages& rs)
{
    ps.stageSource = StageSource::User;
    // A pipeline cannot have more stages than the job has ranks; a larger number is a typo
    // (and would size every per-stage table by it).
    const int ranksInJob = std::max(world, static_cast<int>(ctx.ranks.size()));
    for (const auto& [rank, stage] : ctx.options.stageMap)
        if (stage >= ranksInJob)
            throw Error("--stage-map puts rank " + std::to_string(rank) + " on stage " + std::to_string(stage)
                        + ", but the job has " + std::to_string(ranksInJob) + " ranks; number stages from 0 to "
                        + std::to_string(ranksInJob - 1));
    for (auto& [rank, stage] : rs.stageOf) {
        auto it = ctx.options.stageMap.find(rank);
        if (it != ctx.options.stageMap.end())
            stage = it->second;
        else
            ctx.warn("rank_not_in_stage_map", "rank " + std::to_string(rank) + " is not in --stage-map; it is left out of the pipeline");
    }
    assignReplicasByOrder(rs.stageOf, rs.replicaOf);
}

// --pp N: consecutive blocks of world / N ranks are one stage.
void stagesFromDegree(const Context& ctx, PipelineStructure& ps, int world, RankStages& rs)
{
    int n = *ctx.options.pipelineDegree;
    if (n < 1 || n > world || world % n != 0)
        throw Error("--pp " + std::to_string(n) + " does not divide the job's " + std::to_string(world)
                    + " ranks; give a pipeline degree that divides the world size, or map ranks with --stage-map");
    ps.stageSource = StageSource::User;
    int per = world / n;
    for (auto& [rank, stage] : rs.stageOf) {
        stage = rank / per;
        rs.replicaOf[rank] = rank % per;
    }
}

// Point-to-point edges between ranks and the process groups that carry them,
// from NCCL records.
struct PeerGraph {
    std::map<int, std::set<int>> adj;
    std::set<std::vector<int>> groups;
};

PeerGraph peerGraph(const Context& ctx)
{
    PeerGraph g;
    for (const NcclOp& op : ctx.trace.ncclOps) {
        bool p2p = op.isP2p || isPointToPoint(op.kind);
        if (!p2p)
            continue;
        if (op.peer && *op.peer != op.rank && ctx.rankData(op.rank)) {
            g.adj[op.rank].insert(*op.peer);
            g.adj[*op.peer].insert(op.rank);
        }
        if (op.groupRanks.size() >= 2)
            g.groups.insert(op.groupRanks);
    }
    return g;
}

// The process group carrying point-to-point traffic is the pipeline group, when its
// members only talk to their neighbours in the group's order: rank -> (stage, group
// index); empty when the groups do not show the stages.
std::map<int, std::pair<int, int>> stagesOfGroups(const PeerGraph& g)
{
    const std::map<int, std::set<int>>& adj = g.adj;
    bool byGroups = !g.groups.empty();
    std::map<int, std::pair<int, int>> fromGroups; // rank -> (stage, group index)
    int gi = 0;
    for (const auto& grp : g.groups) {
        for (size_t i = 0; i < grp.size() && byGroups; ++i) {
            auto it = adj.find(grp[i]);
            if (it == adj.end())
                continue;
            for (int peer : it->second) {
                auto pos = std::find(grp.begin(), grp.end(), peer);
                if (pos == grp.end()) {
                    byGroups = false;
                    break;
                }
                auto d = std::abs(static_cast<long>(pos - grp.begin()) - static_cast<long>(i));
                if (d != 1 && d != static_cast<long>(grp.size()) - 1) {
                    byGroups = false;
                    break;
                }
            }
        }
        for (size_t i = 0; i < grp.size() && byGroups; ++i) {
            if (fromGroups.count(grp[i]) && fromGroups[grp[i]].first != static_cast<int>(i))
                byGroups = false;
            fromGroups[grp[i]] = {static_cast<int>(i), gi};
        }
        ++gi;
    }
    if (!byGroups)
        fromGroups.clear();
    return fromGroups;
}

// Stages from the process groups; false when they do not show them.
bool stagesFromGroups(Context& ctx, PipelineStructure& ps, const PeerGraph& g, RankStages& rs)
{
    const std::map<int, std::pair<int, int>> fromGroups = stagesOfGroups(g);
    if (fromGroups.empty())
        return false;
    ps.stageSource = StageSource::ProcessGroup;
    for (auto& [rank, stage] : rs.stageOf) {
        auto it = fromGroups.find(rank);
        if (it != fromGroups.end()) {
            stage = it->second.first;
            rs.replicaOf[rank] = it->second.second;
        }
    }
    // Ring check for interleaving: the first and last member talk.
    for (const auto& grp : g.groups) {
        auto first = g.adj.find(grp.front());
        if (grp.size() > 2 && first != g.adj.end() && first->second.count(grp.back()))
            ctx.ring = true;
    }
    return true;
}

// Stages from the chains the peers form: each connected component is one
// replica's pipeline, in the order orderChain gives it.
void stagesFromChains(Context& ctx, PipelineStructure& ps, PeerGraph& g, const std::map<int, TimeNs>& firstCompute,
                      RankStages& rs)
{
    std::map<int, std::set<int>>& adj = g.adj;
    std::set<int> seen;
    std::vector<std::vector<int>> chains;
    bool valid = true;
    for (const auto& [r, peers] : adj) {
        if (seen.count(r))
            continue;
        std::vector<int> comp;
        std::deque<int> q{r};
        seen.insert(r);
        while (!q.empty()) {
            int x = q.front();
            q.pop_front();
            comp.push_back(x);
            if (adj[x].size() > 2)
                valid = false;
            for (int y : adj[x])
                if (seen.insert(y).second)
                    q.push_back(y);
        }
        std::sort(comp.begin(), comp.end());
        bool cycle = false;
        chains.push_back(orderChain(comp, adj, firstCompute, cycle));
        if (cycle && comp.size() > 2)
            ctx.ring = true;
        if (chains.back().size() != comp.size())
            valid = false;
    }
    // A pipeline's transfers go to the neighbouring stages only; a rank
    // talking to three or more peers is some other exchange (all-to-all
    // written as sends and receives), not proof of stages.
    if (!valid) {
        rs.irregularPeers = true;
        chains.clear();
        ctx.ring = false;
    }
    if (!chains.empty())
        ps.stageSource = StageSource::Peers;
    std::sort(chains.begin(), chains.end());
    for (size_t c = 0; c < chains.size(); ++c)
        for (size_t i = 0; i < chains[c].size(); ++i)
            if (rs.stageOf.count(chains[c][i])) {
                rs.stageOf[chains[c][i]] = static_cast<int>(i);
                rs.replicaOf[chains[c][i]] = static_cast<int>(c);
            }
}

// Without --pp or --stage-map: the process groups, else the peers' chains.
// Bare SendRecv kernels without peer ranks prove nothing: NCCL runs
// all-to-all (embeddings, experts), gather and scatter the same way.
// Only a process group, peers, --pp or --stage-map make a pipeline.
void stagesFromPeers(Context& ctx, PipelineStructure& ps, const std::map<int, TimeNs>& firstCompute, RankStages& rs)
{
    PeerGraph g = peerGraph(ctx);
    if (!stagesFromGroups(ctx, ps, g, rs) && !g.adj.empty())
        stagesFromChains(ctx, ps, g, firstCompute, rs);
}

// Writes the stages and replicas to the ranks and the result; a pipeline
// needs two stages or more.
void publishStages(Context& ctx, PipelineStructure& ps, RankStages& rs)
{
    int pp = 0, dp = 0;
    for (const auto& [rank, stage] : rs.stageOf) {
        pp = std::max(pp, stage + 1);
        if (stage >= 0)
            dp = std::max(dp, rs.replicaOf[rank] + 1);
    }
    for (auto& rd : ctx.ranks) {
        rd.stage = rs.stageOf[rd.rank];
        rd.replica = rd.stage >= 0 ? rs.replicaOf[rd.rank] : 0;
        ps.stageMap.push_back({rd.rank, rd.stage, rd.replica});
    }
    ps.found = pp >= 2;
    ps.pp = std::max(pp, 1);
    ps.dp = std::max(dp, 1);
    ctx.pp = ps.pp;
}

std::string whyNoPipeline(const Context& ctx, const PipelineStructure& ps, bool p2pSeen, bool irregularPeers)
{
    if (ctx.ranks.size() == 1)
        return "a single rank: no pipeline stages to relate";
    if (ps.stageSource == StageSource::None && !p2pSeen)
        return "no point-to-point traffic between ranks";
    if (irregularPeers)
        return "point-to-point peers do not form chains of stages (a rank exchanges with three or more peers, "
               "as all-to-all does); give --pp N or --stage-map to analyse the job as a pipeline";
    if (ps.stageSource == StageSource::None)
        return "point-to-point kernels without peer ranks: nothing shows who sends to whom, and NCCL runs "
               "all-to-all the same way; give --pp N or --stage-map to analyse the job as a pipeline";
    return "all ranks map to a single stage";
}

// Every stage of every replica should be present.
void warnMissingStages(Context& ctx, const PipelineStructure& ps)
{
    std::map<std::pair<int, int>, int> present;
    for (const auto& rd : ctx.ranks)
        if (rd.stage >= 0)
            ++present[{rd.replica, rd.stage}];
    for (int r = 0; r < ps.dp; ++r)
        for (int s = 0; s < ps.pp; ++s)
            if (!present.count({r, s}))
                ctx.warn("missing_stage", "stage " + std::to_string(s) + " of pipeline replica " + std::to_string(r)
                                              + " has no rank in the trace (a rank's file is missing?)");
}

} // namespace

std::vector<int> orderChain(const std::vector<int>& comp, const std::map<int, std::set<int>>& adj,
                            const std::map<int, TimeNs>& firstCompute, bool& cycle)
{
    auto first = [&](int r) {
        auto it = firstCompute.find(r);
        return it == firstCompute.end() ? std::numeric_limits<TimeNs>::max() : it->second;
    };
    std::vector<int> ends;
    for (int r : comp)
        if (adj.at(r).size() <= 1)
            ends.push_back(r);
    cycle = ends.empty();
    int start;
    if (!cycle) {
        start = ends.front();
        for (int r : ends)
            if (first(r) < first(start) || (first(r) == first(start) && r < start))
                start = r;
    } else {
        start = comp.front();
        for (int r : comp)
            if (first(r) < first(start) || (first(r) == first(start) && r < start))
                start = r;
    }
    std::vector<int> order{start};
    int prev = -1, cur = start;
    while (true) {
        int next = -1;
        for (int n : adj.at(cur)) {
            if (n == prev || std::find(order.begin(), order.end(), n) != order.end())
                continue;
            if (next < 0 || first(n) < first(next) || (first(n) == first(next) && n < next))
                next = n;
        }
        if (next < 0)
            break;
        order.push_back(next);
        prev = cur;
        cur = next;
    }
    return order;
}

void mapStages(Context& ctx, AnalysisResult& out)
{
    PipelineStructure& ps = out.pipeline;
    RankStages rs;
    const bool p2pSeen = unmapRanks(ctx, rs);
    const int world = out.worldSize.value_or(ctx.ranks.back().rank + 1);
    const std::map<int, TimeNs> firstCompute = firstComputeOfRanks(ctx, out);

    if (!ctx.options.stageMap.empty())
        stagesFromStageMap(ctx, ps, world, rs);
    else if (ctx.options.pipelineDegree)
        stagesFromDegree(ctx, ps, world, rs);
    else
        stagesFromPeers(ctx, ps, firstCompute, rs);

    publishStages(ctx, ps, rs);
    if (!ps.found) {
        ps.reason = whyNoPipeline(ctx, ps, p2pSeen, rs.irregularPeers);
        return;
    }
    ps.reason = "stages from " + std::string(toString(ps.stageSource));
    warnMissingStages(ctx, ps);
}

} // namespace pipescope::detail
