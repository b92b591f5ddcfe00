// Pipeline structure: which stage and data-parallel replica each rank is,
// the F/B/I/W steps on each rank, and the schedule they follow.
#include "analysis/Classify.h"
#include "analysis/detail/Context.h"
#include "util/Error.h"

#include <cctype>
#include <cmath>
#include <deque>
#include <set>
#include <unordered_map>

namespace pipescope::detail {

namespace {

// ---------------------------------------------------------------- stage map

struct Edge {
    int a, b;
};

void assignReplicasByOrder(std::map<int, int>& stageOf, std::map<int, int>& replicaOf)
{
    std::map<int, int> seen;
    for (const auto& [rank, stage] : stageOf)
        if (stage >= 0)
            replicaOf[rank] = seen[stage]++;
}

// Orders a path or cycle of ranks so that stage 0 is the rank that computes first.
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

// ------------------------------------------------------------ step labels

std::optional<int> numberAfter(std::string_view s, std::string_view key)
{
    auto at = s.find(key);
    if (at == std::string_view::npos)
        return std::nullopt;
    at += key.size();
    size_t e = at;
    while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e])))
        ++e;
    if (e == at || e - at > 9)
        return std::nullopt;
    return std::stoi(std::string(s.substr(at, e - at)));
}

} // namespace

std::optional<StepLabel> parseStepLabel(std::string_view raw)
{
    if (raw.size() > 200 || raw.find("::") != std::string_view::npos)
        return std::nullopt;
    std::string s(raw);
    for (auto& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view v(s);
    if (v.substr(0, 10) == "pipescope/")
        v.remove_prefix(10);
    if (v.substr(0, 3) == "pp:")
        v.remove_prefix(3);

    StepLabel l;
    // torch.distributed.pipelining actions: "<stage><F|B|I|W><microbatch>", e.g. "2F0".
    {
        size_t i = 0;
        while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i])))
            ++i;
        if (i > 0 && i + 1 < v.size() && std::string_view("fbiw").find(v[i]) != std::string_view::npos) {
            size_t j = i + 1;
            while (j < v.size() && std::isdigit(static_cast<unsigned char>(v[j])))
                ++j;
            if (j == v.size() && j > i + 1 && i < 6 && j - i < 8) {
                l.stage = std::stoi(std::string(v.substr(0, i)));
                l.kind = v[i] == 'f' ? StepKind::F : v[i] == 'b' ? StepKind::B : v[i] == 'i' ? StepKind::I : StepKind::W;
                l.microbatch = std::stoi(std::string(v.substr(i + 1)));
                l.explicitKind = true;
                return l;
            }
        }
    }
    auto word = [&](std::string_view w) {
        if (v.substr(0, w.size()) != w)
            return false;
        if (v.size() == w.size())
            return true;
        char c = v[w.size()];
        return !std::isalpha(static_cast<unsigned char>(c)) || c == '_';
    };
    if (word("backward_input") || word("backward-input") || word("backward input") || word("backward_i"))
        l.kind = StepKind::I, l.explicitKind = true;
    else if (word("backward_weight") || word("backward-weight") || word("backward weight") || word("backward_w"))
        l.kind = StepKind::W, l.explicitKind = true;
    else if (word("backward"))
        l.kind = StepKind::B;
    else if (word("forward"))
        l.kind = StepKind::F;
    else
        return std::nullopt;
    // "forward_backward_step" and the like are not one step.
    if (v.find("forward", 1) != std::string_view::npos && l.kind != StepKind::F)
        return std::nullopt;
    if (l.kind == StepKind::F && v.find("backward") != std::string_view::npos)
        return std::nullopt;
    if (auto n = numberAfter(v, "mb="))
        l.microbatch = *n;
    else if (auto n2 = numberAfter(v, "microbatch="))
        l.microbatch = *n2;
    else if (auto n3 = numberAfter(v, "microbatch "))
        l.microbatch = *n3;
    else {
        // "Forward 3"
        size_t e = v.size(), b = e;
        while (b > 0 && std::isdigit(static_cast<unsigned char>(v[b - 1])))
            --b;
        if (b < e && b > 0 && v[b - 1] == ' ' && e - b < 9)
            l.microbatch = std::stoi(std::string(v.substr(b)));
    }
    if (auto n = numberAfter(v, "stage="))
        l.stage = *n;
    if (auto n = numberAfter(v, "chunk="))
        l.chunk = *n;
    return l;
}

namespace {

bool backwardHint(std::string_view name)
{
    std::string s(name.substr(0, 256));
    for (auto& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (std::string_view h : {"backward", "bwd", "dgrad", "wgrad", "_grad", "grad_"})
        if (s.find(h) != std::string::npos)
            return true;
    return false;
}

// ------------------------------------------------------------ inference

enum class Evidence : uint8_t { None, F, B };

struct Segment {
    int rank = 0;
    int iteration = 0;
    std::vector<uint32_t> kernels;
    Evidence before = Evidence::None, after = Evidence::None;
    bool beforeCertain = false, afterCertain = false;
    // Resolved: one or two kinds, and where the second begins (index into kernels).
    StepKind first = StepKind::F, second = StepKind::B;
    size_t splitAt = 0; // 0: not split
    bool guessed = false;
};

TimeNs unionOf(const Context& ctx, const std::vector<uint32_t>& ks, size_t from, size_t to)
{
    std::vector<Interval> u;
    std::vector<uint32_t> sorted(ks.begin() + static_cast<long>(from), ks.begin() + static_cast<long>(to));
    for (uint32_t k : sorted)
        unionAppend(u, ctx.act(k).start, ctx.act(k).end);
    return totalLength(u);
}

// A step whose chunk or microbatch may still be unknown (-1).
struct Draft {
    Step step;
    bool plainBackward = false; // a "backward" that did not say whether it is a full B or only I
};

// Where a step's input came from: the point-to-point receives that ended
// between the rank's previous step and this one.
struct Feed {
    bool fromPrev = false, fromNext = false; // neighbour stages s-1, s+1
    bool fromWrap = false;                   // stage p-1 into stage 0 or stage 0 into p-1 (a ring)
    bool knownRecv = false;                  // some feeding op is known to be a receive
    bool any() const { return fromPrev || fromNext || fromWrap; }
};

Feed feedOf(const Context& ctx, const RankData& rd, const std::vector<uint32_t>& recvByEnd, TimeNs after, TimeNs before)
{
    Feed f;
    auto it = std::upper_bound(recvByEnd.begin(), recvByEnd.end(), after,
                               [&](TimeNs v, uint32_t c) { return v < ctx.act(c).end; });
    auto from = [&](std::optional<int> peer, bool knownRecv) {
        const RankData* pr = peer ? ctx.rankData(*peer) : nullptr;
        if (!pr || pr->stage < 0 || pr->replica != rd.replica)
            return;
        int d = pr->stage - rd.stage;
        bool wrap = ctx.ring && ctx.pp > 2 && ((rd.stage == 0 && pr->stage == ctx.pp - 1) || (rd.stage == ctx.pp - 1 && pr->stage == 0));
        if (wrap)
            f.fromWrap = true;
        else if (d == -1)
            f.fromPrev = true;
        else if (d == 1)
            f.fromNext = true;
        else
            return;
        f.knownRecv = f.knownRecv || knownRecv;
    };
    for (; it != recvByEnd.end() && ctx.act(*it).end <= before; ++it) {
        // A coalesced batch: only its receives fed anything.
        if (const auto ops = ctx.opsOf(*it); ops.size() > 1) {
            for (const NcclOp& op : ops)
                if (op.kind == Collective::Recv)
                    from(op.peer, true);
            continue;
        }
        from(ctx.peer(*it), ctx.direction(*it) == P2pDir::Recv);
    }
    return f;
}

// Gives every step its chunk and microbatch where annotations did not, from
// the data flow between stages: which neighbour fed each step. Also tells a
// split backward's input part (I) from a full backward (B) where names do
// not, and finds the chunk layout (a ring for interleaved schedules, a V for
// ZB-V and DualPipeV).
void labelSteps(Context& ctx, const AnalysisResult& out, std::vector<Draft>& drafts)
{
    std::stable_sort(drafts.begin(), drafts.end(), [](const Draft& a, const Draft& b) {
        const Step &x = a.step, &y = b.step;
        return x.iteration != y.iteration ? x.iteration < y.iteration : x.rank != y.rank ? x.rank < y.rank : x.start < y.start;
    });
    // Runs of drafts per (iteration, rank).
    std::vector<std::pair<size_t, size_t>> runs;
    for (size_t i = 0; i < drafts.size();) {
        size_t j = i;
        while (j < drafts.size() && drafts[j].step.iteration == drafts[i].step.iteration && drafts[j].step.rank == drafts[i].step.rank)
            ++j;
        runs.push_back({i, j});
        i = j;
    }

    // A rank that runs W steps splits its backward: of its plain "backward" steps, as many as
    // it has W are the input halves (I), the shortest ones (a full B does both halves' work).
    for (auto [b, e] : runs) {
        size_t nW = 0;
        std::vector<size_t> plain;
        for (size_t i = b; i < e; ++i) {
            nW += drafts[i].step.kind == StepKind::W;
            if (drafts[i].plainBackward)
                plain.push_back(i);
        }
        if (nW == 0 || plain.empty())
            continue;
        std::stable_sort(plain.begin(), plain.end(), [&](size_t x, size_t y) { return drafts[x].step.computeNs < drafts[y].step.computeNs; });
        for (size_t k = 0; k < plain.size() && k < nW; ++k)
            drafts[plain[k]].step.kind = StepKind::I;
    }

    // What fed each step.
    std::vector<Feed> feeds(drafts.size());
    std::map<int, std::vector<uint32_t>> recvsOfRank; // receives (and ops of unknown direction), end order
    for (auto [b, e] : runs) {
        const RankData* rd = ctx.rankData(drafts[b].step.rank);
        if (!rd)
            continue;
        auto [slot, fresh] = recvsOfRank.try_emplace(rd->rank);
        std::vector<uint32_t>& recvByEnd = slot->second;
        if (fresh) {
            for (uint32_t c : rd->comm)
                if (ctx.classOf(c) == WorkClass::P2p && ctx.direction(c) != P2pDir::Send)
                    recvByEnd.push_back(c);
            std::sort(recvByEnd.begin(), recvByEnd.end(), [&](uint32_t x, uint32_t y) { return ctx.act(x).end < ctx.act(y).end; });
        }
        // Receives of the first step ended inside the iteration, not in the one before.
        TimeNs prevEnd = std::numeric_limits<TimeNs>::min();
        const int iteration = drafts[b].step.iteration;
        if (iteration >= 0 && static_cast<size_t>(iteration) < out.iterations.size())
            for (const RankSpan& rs : out.iterations[static_cast<size_t>(iteration)].ranks)
                if (rs.rank == rd->rank)
                    prevEnd = rs.start - 1;
        for (size_t i = b; i < e; ++i) {
            const Step& st = drafts[i].step;
            if (st.kind != StepKind::W)
                feeds[i] = feedOf(ctx, *rd, recvByEnd, prevEnd, st.start);
            prevEnd = std::max(prevEnd, st.end);
        }
    }

    // The layout: a V when stage 0 receives forward inputs from stage 1.
    {
        int fwd0 = 0, fromNext0 = 0;
        for (size_t i = 0; i < drafts.size(); ++i) {
            const Step& st = drafts[i].step;
            if (st.stage == 0 && st.kind == StepKind::F) {
                ++fwd0;
                fromNext0 += feeds[i].fromNext && feeds[i].knownRecv;
            }
        }
        ctx.vShape = !ctx.ring && ctx.pp >= 2 && fromNext0 > 0 && 4 * fromNext0 >= fwd0;
    }
    const int p = ctx.pp;
    auto isBackward = [](StepKind k) { return k == StepKind::B || k == StepKind::I; };

    // Around a ring an activation comes from the rank before (stage 0: from
    // the last stage) and a gradient from the rank after (the last stage:
    // from stage 0). Under blocking exchanges a rank may receive them a step
    // early, in the batch after the step before (Megatron's interleaved
    // steady state receives the next backward's gradient before the next
    // forward): each receive feeds the next step of its kind.
    if (!ctx.vShape && ctx.ring && p > 2) {
        for (auto [b, e] : runs) {
            const int stage = drafts[b].step.stage;
            Feed act, grad;
            for (size_t i = b; i < e; ++i) {
                const Step& st = drafts[i].step;
                const Feed f = feeds[i];
                Feed a, g;
                a.fromPrev = f.fromPrev;
                a.fromWrap = f.fromWrap && stage == 0;
                g.fromNext = f.fromNext;
                g.fromWrap = f.fromWrap && stage == p - 1;
                a.knownRecv = g.knownRecv = f.knownRecv;
                auto merge = [](Feed& into, const Feed& x) {
                    into.fromPrev = into.fromPrev || x.fromPrev;
                    into.fromNext = into.fromNext || x.fromNext;
                    into.fromWrap = into.fromWrap || x.fromWrap;
                    into.knownRecv = into.knownRecv || (x.knownRecv && x.any());
                };
                if (st.kind == StepKind::F) {
                    merge(a, act);
                    act = Feed{};
                    merge(grad, g);
                    feeds[i] = a;
                } else if (isBackward(st.kind)) {
                    merge(g, grad);
                    grad = Feed{};
                    merge(act, a);
                    feeds[i] = g;
                } else {
                    merge(act, a);
                    merge(grad, g);
                }
            }
        }
    }

    // Chunks.
    if (ctx.vShape) {
        // Chunk 0 runs up the stages, chunk 1 back down: a step's feeder says which.
        for (size_t i = 0; i < drafts.size(); ++i) {
            Step& st = drafts[i].step;
            if (st.chunk >= 0 || st.kind == StepKind::W)
                continue;
            const Feed& f = feeds[i];
            bool fwd = st.kind == StepKind::F;
            if (st.stage == 0)
                st.chunk = fwd ? (f.fromNext ? 1 : 0) : (f.fromNext ? 0 : 1);
            else if (st.stage == p - 1)
                st.chunk = fwd ? (f.fromPrev ? 0 : 1) : (f.fromPrev ? 1 : 0);
            else
                st.chunk = fwd ? (f.fromNext ? 1 : 0) : (f.fromPrev ? 1 : 0);
        }
    } else if (ctx.ring) {
        // Around a ring every rank runs its forwards in the order stage 0 does (and its
        // backwards in the order stage p-1 does): label those two ranks from what fed
        // each step, then copy the k-th step's labels to every rank's k-th step.
        std::map<std::pair<int, int>, std::vector<size_t>> byRank[2]; // [forward?][(iteration, rank)] -> drafts
        for (size_t i = 0; i < drafts.size(); ++i) {
            const Step& st = drafts[i].step;
            if (st.kind == StepKind::F)
                byRank[1][{st.iteration, st.rank}].push_back(i);
            else if (isBackward(st.kind))
                byRank[0][{st.iteration, st.rank}].push_back(i);
        }
        for (int fwd = 0; fwd < 2; ++fwd) {
            const int source = fwd ? 0 : p - 1; // the stage whose unfed steps begin each chunk's flow
            std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> labels; // (iteration, replica) -> (chunk, mb)
            for (const auto& [key, idx] : byRank[fwd]) {
                const RankData* rd = ctx.rankData(key.second);
                if (!rd || rd->stage != source)
                    continue;
                auto& seq = labels[{key.first, rd->replica}];
                // Unfed steps start a chunk's flow (chunk 0 forwards, last-chunk backwards): m of
                // them, and v = steps / m.
                int unfed = 0;
                for (size_t i : idx)
                    unfed += !feeds[i].fromWrap;
                const int n = static_cast<int>(idx.size());
                const int v = unfed > 0 && n % unfed == 0 ? n / unfed : 1;
                std::deque<size_t> pending; // positions whose output wraps around to the next chunk
                int fresh = 0;
                for (size_t i : idx) {
                    const Step& st = drafts[i].step;
                    int chunk, mb;
                    if (st.chunk >= 0 && st.microbatch >= 0) {
                        chunk = st.chunk;
                        mb = st.microbatch;
                    } else if (feeds[i].fromWrap && !pending.empty()) {
                        auto src = seq[pending.front()];
                        pending.pop_front();
                        chunk = fwd ? src.first + 1 : src.first - 1;
                        mb = src.second;
                    } else {
                        chunk = fwd ? 0 : v - 1;
                        mb = fresh++;
                    }
                    seq.push_back({chunk, mb});
                    if (fwd ? chunk < v - 1 : chunk > 0)
                        pending.push_back(seq.size() - 1);
                }
            }
            for (const auto& [key, idx] : byRank[fwd]) {
                const RankData* rd = ctx.rankData(key.second);
                if (!rd)
                    continue;
                auto it = labels.find({key.first, rd->replica});
                for (size_t k = 0; k < idx.size(); ++k) {
                    Step& st = drafts[idx[k]].step;
                    if (it == labels.end() || k >= it->second.size()) {
                        if (st.chunk < 0)
                            st.chunk = 0;
                        continue;
                    }
                    if (st.chunk < 0)
                        st.chunk = it->second[k].first;
                    if (st.microbatch < 0)
                        st.microbatch = it->second[k].second;
                }
            }
        }
    }
    for (auto& d : drafts)
        if (d.step.chunk < 0 && d.step.kind != StepKind::W)
            d.step.chunk = 0;

    // Microbatches still unknown count up per chunk (B and I together); a W belongs to
    // the earliest I of the rank that has no W yet.
    for (auto [b, e] : runs) {
        std::map<std::pair<int, int>, int> next; // (forward?, chunk) -> next microbatch
        std::deque<size_t> open;                 // I steps waiting for their W
        for (size_t i = b; i < e; ++i) {
            Step& st = drafts[i].step;
            if (st.kind == StepKind::W) {
                if (!open.empty()) {
                    const Step& src = drafts[open.front()].step;
                    open.pop_front();
                    if (st.chunk < 0)
                        st.chunk = src.chunk;
                    if (st.microbatch < 0)
                        st.microbatch = src.microbatch;
                }
                if (st.chunk < 0)
                    st.chunk = 0;
                if (st.microbatch < 0)
                    st.microbatch = next[{2, st.chunk}]++;
                continue;
            }
            int& n = next[{st.kind == StepKind::F ? 1 : 0, st.chunk}];
            if (st.microbatch < 0)
                st.microbatch = n;
            n = st.microbatch + 1;
            if (st.kind == StepKind::I)
                open.push_back(i);
        }
    }
}

} // namespace

void mapStages(Context& ctx, AnalysisResult& out)
{
    PipelineStructure& ps = out.pipeline;
    const Trace& t = ctx.trace;
    std::map<int, int> stageOf, replicaOf;
    bool p2pSeen = false;
    bool irregularPeers = false; // peers that form no chain of stages
    for (const auto& rd : ctx.ranks) {
        stageOf[rd.rank] = -1;
        for (uint32_t c : rd.comm)
            p2pSeen = p2pSeen || ctx.classOf(c) == WorkClass::P2p;
    }
    int world = out.worldSize.value_or(ctx.ranks.back().rank + 1);

    // First compute of each rank in the selected iteration orders chains.
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

    if (!ctx.options.stageMap.empty()) {
        ps.stageSource = "user";
        // A pipeline cannot have more stages than the job has ranks; a larger number is a typo
        // (and would size every per-stage table by it).
        const int ranksInJob = std::max(world, static_cast<int>(ctx.ranks.size()));
        for (const auto& [rank, stage] : ctx.options.stageMap)
            if (stage >= ranksInJob)
                throw Error("--stage-map puts rank " + std::to_string(rank) + " on stage " + std::to_string(stage)
                            + ", but the job has " + std::to_string(ranksInJob) + " ranks; number stages from 0 to "
                            + std::to_string(ranksInJob - 1));
        for (auto& [rank, stage] : stageOf) {
            auto it = ctx.options.stageMap.find(rank);
            if (it != ctx.options.stageMap.end())
                stage = it->second;
            else
                ctx.warn("rank_not_in_stage_map", "rank " + std::to_string(rank) + " is not in --stage-map; it is left out of the pipeline");
        }
        assignReplicasByOrder(stageOf, replicaOf);
    } else if (ctx.options.pipelineDegree) {
        int n = *ctx.options.pipelineDegree;
        if (n < 1 || n > world || world % n != 0)
            throw Error("--pp " + std::to_string(n) + " does not divide the job's " + std::to_string(world)
                        + " ranks; give a pipeline degree that divides the world size, or map ranks with --stage-map");
        ps.stageSource = "user";
        int per = world / n;
        for (auto& [rank, stage] : stageOf) {
            stage = rank / per;
            replicaOf[rank] = rank % per;
        }
    } else {
        // Point-to-point edges between ranks, from NCCL records.
        std::map<int, std::set<int>> adj;
        std::set<std::vector<int>> groups;
        for (const NcclOp& op : t.ncclOps) {
            bool p2p = op.isP2p || isPointToPoint(op.kind);
            if (!p2p)
                continue;
            if (op.peer && *op.peer != op.rank && ctx.rankData(op.rank)) {
                adj[op.rank].insert(*op.peer);
                adj[*op.peer].insert(op.rank);
            }
            if (op.groupRanks.size() >= 2)
                groups.insert(op.groupRanks);
        }
        // The process group carrying point-to-point traffic is the pipeline group, when its
        // members only talk to their neighbours in the group's order.
        bool byGroups = !groups.empty();
        std::map<int, std::pair<int, int>> fromGroups; // rank -> (stage, group index)
        int gi = 0;
        for (const auto& g : groups) {
            for (size_t i = 0; i < g.size() && byGroups; ++i) {
                auto it = adj.find(g[i]);
                if (it == adj.end())
                    continue;
                for (int peer : it->second) {
                    auto pos = std::find(g.begin(), g.end(), peer);
                    if (pos == g.end()) {
                        byGroups = false;
                        break;
                    }
                    auto d = std::abs(static_cast<long>(pos - g.begin()) - static_cast<long>(i));
                    if (d != 1 && d != static_cast<long>(g.size()) - 1) {
                        byGroups = false;
                        break;
                    }
                }
            }
            for (size_t i = 0; i < g.size() && byGroups; ++i) {
                if (fromGroups.count(g[i]) && fromGroups[g[i]].first != static_cast<int>(i))
                    byGroups = false;
                fromGroups[g[i]] = {static_cast<int>(i), gi};
            }
            ++gi;
        }
        if (byGroups && !fromGroups.empty()) {
            ps.stageSource = "process_group";
            for (auto& [rank, stage] : stageOf) {
                auto it = fromGroups.find(rank);
                if (it != fromGroups.end()) {
                    stage = it->second.first;
                    replicaOf[rank] = it->second.second;
                }
            }
            // Ring check for interleaving: the first and last member talk.
            for (const auto& g : groups)
                if (g.size() > 2 && adj.count(g.front()) && adj[g.front()].count(g.back()))
                    ctx.ring = true;
        } else if (!adj.empty()) {
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
                irregularPeers = true;
                chains.clear();
                ctx.ring = false;
            }
            if (!chains.empty())
                ps.stageSource = "peers";
            std::sort(chains.begin(), chains.end());
            for (size_t c = 0; c < chains.size(); ++c)
                for (size_t i = 0; i < chains[c].size(); ++i)
                    if (stageOf.count(chains[c][i])) {
                        stageOf[chains[c][i]] = static_cast<int>(i);
                        replicaOf[chains[c][i]] = static_cast<int>(c);
                    }
        }
        // Bare SendRecv kernels without peer ranks prove nothing: NCCL runs
        // all-to-all (embeddings, experts), gather and scatter the same way.
        // Only a process group, peers, --pp or --stage-map make a pipeline.
    }

    int pp = 0, dp = 0;
    for (const auto& [rank, stage] : stageOf) {
        pp = std::max(pp, stage + 1);
        if (stage >= 0)
            dp = std::max(dp, replicaOf[rank] + 1);
    }
    for (auto& rd : ctx.ranks) {
        rd.stage = stageOf[rd.rank];
        rd.replica = rd.stage >= 0 ? replicaOf[rd.rank] : 0;
        ps.stageMap.push_back({rd.rank, rd.stage, rd.replica});
    }
    ps.found = pp >= 2;
    ps.pp = std::max(pp, 1);
    ps.dp = std::max(dp, 1);
    ctx.pp = ps.pp;
    if (!ps.found) {
        if (ctx.ranks.size() == 1)
            ps.reason = "a single rank: no pipeline stages to relate";
        else if (ps.stageSource.empty() && !p2pSeen)
            ps.reason = "no point-to-point traffic between ranks";
        else if (irregularPeers)
            ps.reason = "point-to-point peers do not form chains of stages (a rank exchanges with three or more peers, "
                        "as all-to-all does); give --pp N or --stage-map to analyse the job as a pipeline";
        else if (ps.stageSource.empty())
            ps.reason = "point-to-point kernels without peer ranks: nothing shows who sends to whom, and NCCL runs "
                        "all-to-all the same way; give --pp N or --stage-map to analyse the job as a pipeline";
        else
            ps.reason = "all ranks map to a single stage";
        ps.stageSource = ps.stageSource.empty() ? "none" : ps.stageSource;
        return;
    }
    ps.reason = "stages from " + ps.stageSource;
    // Every stage of every replica should be present.
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

void buildSteps(Context& ctx, AnalysisResult& out, std::vector<Step>& steps)
{
    PipelineStructure& ps = out.pipeline;
    if (!ps.found) {
        ps.labelsFrom = "none";
        return;
    }
    const Trace& t = ctx.trace;

    // Annotation labels, per rank, sorted by start.
    struct Labelled {
        TimeNs start, end;
        StepLabel label;
    };
    std::unordered_map<StringId, std::optional<StepLabel>> labelCache;
    std::vector<std::vector<Labelled>> labelled(ctx.ranks.size());
    for (const CpuRange& r : t.cpuRanges) {
        if (r.kind != CpuRangeKind::Annotation && r.kind != CpuRangeKind::Nvtx && r.kind != CpuRangeKind::Other)
            continue;
        const RankData* rd = ctx.rankData(r.rank);
        if (!rd || rd->stage < 0)
            continue;
        auto [it, inserted] = labelCache.try_emplace(r.name);
        if (inserted)
            it->second = parseStepLabel(t.str(r.name));
        if (it->second)
            labelled[static_cast<size_t>(rd - ctx.ranks.data())].push_back({r.start, r.end, *it->second});
    }

    auto stageRel = [&](const RankData& rd, std::optional<int> peer, bool& wrap) -> int {
        wrap = false;
        if (!peer)
            return 0;
        const RankData* pr = ctx.rankData(*peer);
        if (!pr || pr->stage < 0)
            return 0;
        int d = pr->stage - rd.stage;
        if (d == -1 || d == 1)
            return d;
        if (ctx.ring && rd.stage == 0 && pr->stage == ctx.pp - 1) {
            wrap = true;
            return -1;
        }
        if (ctx.ring && rd.stage == ctx.pp - 1 && pr->stage == 0) {
            wrap = true;
            return 1;
        }
        return 0;
    };

    std::vector<Segment> segments;
    std::vector<Draft> drafts;
    std::unordered_map<StringId, bool> optimizerName;
    bool anyAnnotated = false, anyInferred = false;
    for (size_t slot = 0; slot < ctx.ranks.size(); ++slot) {
        const RankData& rd = ctx.ranks[slot];
        if (rd.stage < 0)
            continue;
        auto& labels = labelled[slot];
        std::sort(labels.begin(), labels.end(), [](const Labelled& a, const Labelled& b) { return a.start < b.start; });

        for (const Iteration& it : out.iterations) {
            const RankSpan* span = nullptr;
            for (const auto& rs : it.ranks)
                if (rs.rank == rd.rank)
                    span = &rs;
            if (!span)
                continue;
            auto lo = std::lower_bound(rd.compute.begin(), rd.compute.end(), span->start,
                                       [&](uint32_t k, TimeNs v) { return ctx.act(k).start < v; });
            auto hi = std::upper_bound(lo, rd.compute.end(), span->end,
                                       [&](TimeNs v, uint32_t k) { return v < ctx.act(k).start; });
            if (lo == hi)
                continue;

            if (!labels.empty()) {
                // Steps from annotations: kernels launched inside a labelled range.
                anyAnnotated = true;
                std::map<size_t, std::vector<uint32_t>> byLabel;
                for (auto k = lo; k != hi; ++k) {
                    const Activity& a = ctx.act(*k);
                    TimeNs when = a.launchStart.value_or(a.start);
                    auto p = std::upper_bound(labels.begin(), labels.end(), when,
                                              [](TimeNs v, const Labelled& l) { return v < l.start; });
                    // Innermost enclosing label: scan back a few for nesting.
                    for (int back = 0; back < 8 && p != labels.begin(); ++back) {
                        --p;
                        if (when < p->end) {
                            byLabel[static_cast<size_t>(p - labels.begin())].push_back(*k);
                            break;
                        }
                    }
                }
                for (auto& [li, ks] : byLabel) {
                    const StepLabel& l = labels[li].label;
                    Step s;
                    s.iteration = it.index;
                    s.rank = rd.rank;
                    s.stage = rd.stage;
                    s.chunk = l.chunk;           // -1 until labelled from the data flow
                    s.kind = l.kind;
                    s.microbatch = l.microbatch; // same
                    s.start = ctx.act(ks.front()).start;
                    s.end = s.start;
                    std::vector<Interval> u;
                    for (uint32_t k : ks) {
                        s.end = std::max(s.end, ctx.act(k).end);
                        unionAppend(u, ctx.act(k).start, ctx.act(k).end);
                    }
                    s.computeNs = totalLength(u);
                    s.annotated = true;
                    drafts.push_back({s, l.kind == StepKind::B && !l.explicitKind});
                }
                continue;
            }

            // Inference: cut the compute at point-to-point operations.
            anyInferred = true;
            std::vector<uint32_t> p2p;
            {
                // Comm ops are in start order; the ones of this iteration start inside its span
                // (an op still running from before is found by looking back a little).
                auto c0 = std::lower_bound(rd.comm.begin(), rd.comm.end(), span->start,
                                           [&](uint32_t c, TimeNs v) { return ctx.act(c).start < v; });
                for (int back = 0; back < 4 && c0 != rd.comm.begin(); ++back)
                    --c0;
                for (; c0 != rd.comm.end() && ctx.act(*c0).start <= span->end; ++c0) {
                    const Activity& a = ctx.act(*c0);
                    if (ctx.classOf(*c0) == WorkClass::P2p && a.end >= span->start)
                        p2p.push_back(*c0);
                }
            }
            auto evidenceOf = [&](uint32_t c, bool forAfterSide, Segment& seg, std::optional<TimeNs> nextStart = std::nullopt) {
                P2pDir dir = ctx.direction(c);
                bool wrap = false;
                int rel = stageRel(rd, ctx.peer(c), wrap);
                if (rel == 0)
                    return;
                if (forAfterSide) {
                    if (dir == P2pDir::Recv)
                        return;
                    seg.after = rel > 0 ? Evidence::F : Evidence::B;
                    seg.afterCertain = seg.afterCertain || dir == P2pDir::Send;
                } else {
                    if (dir == P2pDir::Send)
                        return;
                    // An op of unknown direction still running when the step began was not its
                    // input (a send of the previous step's output overlapping this one).
                    if (dir == P2pDir::Unknown && nextStart && ctx.act(c).end > *nextStart)
                        return;
                    seg.before = rel < 0 ? Evidence::F : Evidence::B;
                    seg.beforeCertain = seg.beforeCertain || dir == P2pDir::Recv;
                }
            };

            Segment cur;
            cur.rank = rd.rank;
            cur.iteration = it.index;
            TimeNs prevEnd = std::numeric_limits<TimeNs>::min();
            auto startNext = [&] {
                segments.push_back(std::move(cur));
                cur = Segment{};
                cur.rank = rd.rank;
                cur.iteration = it.index;
            };

            // Where a transfer sits among the compute kernels: by the CPU's
            // launch order when the trace links every launch (a send queued
            // behind a long receive on a busy NCCL stream starts late on the
            // GPU, but was issued right after its step), else by GPU time.
            bool byLaunch = !p2p.empty();
            for (auto k = lo; k != hi && byLaunch; ++k) {
                const Activity& a = ctx.act(*k);
                byLaunch = a.launchStart.has_value() &&
                           (k == lo || *a.launchStart >= *ctx.act(*(k - 1)).launchStart);
            }
            for (uint32_t c : p2p)
                byLaunch = byLaunch && ctx.act(c).launchStart.has_value();

            if (byLaunch) {
                std::vector<uint32_t> byLaunchOrder = p2p;
                std::sort(byLaunchOrder.begin(), byLaunchOrder.end(), [&](uint32_t x, uint32_t y) {
                    return *ctx.act(x).launchStart < *ctx.act(y).launchStart;
                });
                size_t next = 0; // first op not yet placed
                auto launchedBefore = [&](TimeNs when, std::vector<uint32_t>& into) {
                    into.clear();
                    for (; next < byLaunchOrder.size() && *ctx.act(byLaunchOrder[next]).launchStart < when; ++next)
                        into.push_back(byLaunchOrder[next]);
                };
                std::vector<uint32_t> ops;
                // Ops issued before the first kernel are its inputs.
                launchedBefore(*ctx.act(*lo).launchStart, ops);
                for (uint32_t c : ops)
                    evidenceOf(c, false, cur, ctx.act(*lo).start);
                for (auto k = lo; k != hi; ++k) {
                    const Activity& a = ctx.act(*k);
                    auto [opt, fresh] = optimizerName.try_emplace(a.name, false);
                    if (fresh)
                        opt->second = isOptimizerKernel(t.str(a.name));
                    launchedBefore(*a.launchStart, ops);
                    if (opt->second) {
                        // The optimizer is not part of any step; what was issued
                        // before it is the segment's output.
                        if (!cur.kernels.empty()) {
                            for (uint32_t c : ops)
                                evidenceOf(c, true, cur);
                            startNext();
                        }
                        continue;
                    }
                    if (!cur.kernels.empty() && !ops.empty()) {
                        for (uint32_t c : ops)
                            evidenceOf(c, true, cur);
                        startNext();
                        for (uint32_t c : ops)
                            evidenceOf(c, false, cur, a.start);
                    }
                    cur.kernels.push_back(*k);
                }
                // Ops issued after the last kernel (its outputs).
                launchedBefore(std::numeric_limits<TimeNs>::max(), ops);
                for (uint32_t c : ops)
                    evidenceOf(c, true, cur);
                if (!cur.kernels.empty())
                    segments.push_back(std::move(cur));
                continue;
            }

            // p2p ops that end (or start) before the first kernel are its inputs.
            TimeNs firstStart = ctx.act(*lo).start;
            for (uint32_t c : p2p)
                if (ctx.act(c).start <= firstStart)
                    evidenceOf(c, false, cur, firstStart);
            std::vector<uint32_t> byStart = p2p, byEnd = p2p;
            std::sort(byEnd.begin(), byEnd.end(), [&](uint32_t x, uint32_t y) { return ctx.act(x).end < ctx.act(y).end; });
            std::vector<uint32_t> cutOps;
            for (auto k = lo; k != hi; ++k) {
                const Activity& a = ctx.act(*k);
                auto [opt, fresh] = optimizerName.try_emplace(a.name, false);
                if (fresh)
                    opt->second = isOptimizerKernel(t.str(a.name));
                if (opt->second) {
                    // The optimizer is not part of any step.
                    if (!cur.kernels.empty()) {
                        // Sends posted between the segment's end and the
                        // optimizer are the segment's outputs (the last
                        // backward's gradient goes out as the optimizer starts).
                        for (uint32_t c : p2p)
                            if (ctx.act(c).start >= prevEnd && ctx.act(c).start <= a.start &&
                                ctx.direction(c) != P2pDir::Recv)
                                evidenceOf(c, true, cur);
                        segments.push_back(std::move(cur));
                        cur = Segment{};
                        cur.rank = rd.rank;
                        cur.iteration = it.index;
                    }
                    continue;
                }
                if (!cur.kernels.empty() && prevEnd <= a.start) {
                    // Ops that start or end in the gap between the segment and this kernel.
                    cutOps.clear();
                    auto s0 = std::lower_bound(byStart.begin(), byStart.end(), prevEnd,
                                               [&](uint32_t c, TimeNs v) { return ctx.act(c).start < v; });
                    for (; s0 != byStart.end() && ctx.act(*s0).start <= a.start; ++s0)
                        if (ctx.direction(*s0) != P2pDir::Recv)
                            cutOps.push_back(*s0);
                    auto e0 = std::lower_bound(byEnd.begin(), byEnd.end(), prevEnd,
                                               [&](uint32_t c, TimeNs v) { return ctx.act(c).end < v; });
                    for (; e0 != byEnd.end() && ctx.act(*e0).end <= a.start; ++e0)
                        if (ctx.direction(*e0) != P2pDir::Send)
                            cutOps.push_back(*e0);
                    if (!cutOps.empty()) {
                        for (uint32_t c : cutOps)
                            evidenceOf(c, true, cur);
                        segments.push_back(std::move(cur));
                        cur = Segment{};
                        cur.rank = rd.rank;
                        cur.iteration = it.index;
                        for (uint32_t c : cutOps)
                            evidenceOf(c, false, cur, a.start);
                    }
                }
                cur.kernels.push_back(*k);
                prevEnd = cur.kernels.size() == 1 ? a.end : std::max(prevEnd, a.end);
            }
            // Ops after the last kernel (its outputs).
            for (uint32_t c : p2p)
                if (ctx.act(c).start >= prevEnd)
                    evidenceOf(c, true, cur);
            if (!cur.kernels.empty())
                segments.push_back(std::move(cur));
        }
    }

    // Typical F and B compute from segments whose kind is clear, to tell a merged
    // F+B (or B+F) from a single step and to find where to split it.
    double sumF = 0, sumB = 0;
    int nF = 0, nB = 0;
    std::vector<TimeNs> segCompute(segments.size());
    for (size_t i = 0; i < segments.size(); ++i) {
        const Segment& s = segments[i];
        segCompute[i] = unionOf(ctx, s.kernels, 0, s.kernels.size());
        Evidence e = s.before != Evidence::None ? s.before : s.after;
        bool single = s.before == Evidence::None || s.after == Evidence::None || s.before == s.after;
        if (!single || e == Evidence::None)
            continue;
        (e == Evidence::F ? sumF : sumB) += static_cast<double>(segCompute[i]);
        ++(e == Evidence::F ? nF : nB);
    }
    const double meanF = nF ? sumF / nF : 0, meanB = nB ? sumB / nB : 0;
    double fShare = (sumF > 0 && sumB > 0) ? meanF / (meanF + meanB) : 1.0 / 3.0;

    // A segment between ops whose direction is unknown may be one step or two:
    // its compute decides when typical step times are known, else the rank's
    // F and B counts are balanced.
    struct Tally {
        int f = 0, b = 0, ambFB = 0, ambBF = 0;
    };
    std::map<std::pair<int, int>, Tally> tally;
    enum Kind { SingleF, SingleB, SplitFB, SplitBF, AmbFB, AmbBF, Unknown };
    std::vector<Kind> kinds(segments.size());
    for (size_t i = 0; i < segments.size(); ++i) {
        const Segment& s = segments[i];
        Tally& tl = tally[{s.rank, s.iteration}];
        Kind k;
        if (s.before == Evidence::None && s.after == Evidence::None)
            k = Unknown;
        else if (s.before == Evidence::None || s.after == Evidence::None || s.before == s.after)
            k = (s.before != Evidence::None ? s.before : s.after) == Evidence::F ? SingleF : SingleB;
        else if (s.before == Evidence::F)
            k = (s.afterCertain || s.beforeCertain) ? SplitFB : AmbFB;
        else
            k = (s.afterCertain || s.beforeCertain) ? SplitBF : AmbBF;
        if (s.kernels.size() < 2 && (k == SplitFB || k == AmbFB))
            k = SingleF;
        if (s.kernels.size() < 2 && (k == SplitBF || k == AmbBF))
            k = SingleB;
        if ((k == AmbFB || k == AmbBF) && meanF > 0 && meanB > 0) {
            auto c = static_cast<double>(segCompute[i]);
            double one = k == AmbFB ? meanF : meanB;
            bool two = std::abs(c - (meanF + meanB)) < std::abs(c - one);
            k = k == AmbFB ? (two ? SplitFB : SingleF) : (two ? SplitBF : SingleB);
        }
        kinds[i] = k;
        switch (k) {
        case SingleF: ++tl.f; break;
        case SingleB: ++tl.b; break;
        case SplitFB:
        case SplitBF: ++tl.f; ++tl.b; break;
        case AmbFB: ++tl.ambFB; break;
        case AmbBF: ++tl.ambBF; break;
        case Unknown: break;
        }
    }
    std::map<std::pair<int, int>, std::pair<bool, bool>> splitAmb;
    for (const auto& [key, tl] : tally) {
        int best = -1;
        std::pair<bool, bool> choice{false, false};
        for (int a = 0; a < 2; ++a)
            for (int b = 0; b < 2; ++b) {
                int f = tl.f + tl.ambFB + (b ? tl.ambBF : 0);
                int bb = tl.b + tl.ambBF + (a ? tl.ambFB : 0);
                int diff = std::abs(f - bb);
                if (best < 0 || diff < best) {
                    best = diff;
                    choice = {a == 1, b == 1};
                }
            }
        splitAmb[key] = choice;
    }

    auto splitPoint = [&](const Segment& s, double share, bool backwardFirst) -> size_t {
        // Backward-looking kernel names mark the backward's extent, when names say so: F then B
        // splits at the first of them, B then F after the last (a backward also runs
        // un-hinted kernels such as GEMMs, a forward none of the hinted ones).
        const size_t n = s.kernels.size();
        if (!backwardFirst) {
            for (size_t i = 0; i < n; ++i)
                if (backwardHint(t.str(ctx.act(s.kernels[i]).name))) {
                    if (i >= 1)
                        return i;
                    break;
                }
        } else {
            for (size_t i = n; i > 0; --i)
                if (backwardHint(t.str(ctx.act(s.kernels[i - 1]).name))) {
                    if (i < n)
                        return i;
                    break;
                }
        }
        TimeNs total = unionOf(ctx, s.kernels, 0, s.kernels.size());
        double target = share * static_cast<double>(total);
        size_t best = 1;
        double bestDiff = -1;
        TimeNs acc = 0;
        for (size_t i = 1; i < s.kernels.size(); ++i) {
            acc += ctx.act(s.kernels[i - 1]).end - ctx.act(s.kernels[i - 1]).start;
            double d = std::abs(static_cast<double>(acc) - target);
            if (bestDiff < 0 || d < bestDiff) {
                bestDiff = d;
                best = i;
            }
        }
        return best;
    };

    bool anyGuessed = false;
    std::set<int> evidenced;
    for (size_t i = 0; i < segments.size(); ++i)
        if (kinds[i] != Unknown)
            evidenced.insert(segments[i].rank);
    for (size_t i = 0; i < segments.size(); ++i) {
        Segment& s = segments[i];
        Kind k = kinds[i];
        auto choice = splitAmb[{s.rank, s.iteration}];
        if (k == AmbFB)
            k = choice.first ? SplitFB : SingleF;
        if (k == AmbBF)
            k = choice.second ? SplitBF : SingleB;
        if (k == Unknown && evidenced.count(s.rank))
            continue; // compute outside the steps (loss, optimizer, ...) on a rank whose steps are known
        if (k == Unknown) {
            // No neighbour evidence at all: kernel names decide, else call it forward.
            size_t hinted = 0;
            for (uint32_t kk : s.kernels)
                hinted += backwardHint(t.str(ctx.act(kk).name)) ? 1 : 0;
            k = hinted * 2 > s.kernels.size() ? SingleB : SingleF;
            anyGuessed = true;
        }
        auto emit = [&](StepKind kind, size_t from, size_t to) {
            if (from >= to)
                return;
            Step st;
            st.iteration = s.iteration;
            st.rank = s.rank;
            st.stage = ctx.rankData(s.rank)->stage;
            st.kind = kind;
            st.start = ctx.act(s.kernels[from]).start;
            st.end = st.start;
            for (size_t q = from; q < to; ++q)
                st.end = std::max(st.end, ctx.act(s.kernels[q]).end);
            st.computeNs = unionOf(ctx, s.kernels, from, to);
            st.chunk = -1;
            st.microbatch = -1;
            drafts.push_back({st, kind == StepKind::B});
        };
        switch (k) {
        case SingleF: emit(StepKind::F, 0, s.kernels.size()); break;
        case SingleB: emit(StepKind::B, 0, s.kernels.size()); break;
        case SplitFB: {
            size_t at = splitPoint(s, fShare, false);
            emit(StepKind::F, 0, at);
            emit(StepKind::B, at, s.kernels.size());
            break;
        }
        case SplitBF: {
            size_t at = splitPoint(s, 1.0 - fShare, true);
            emit(StepKind::B, 0, at);
            emit(StepKind::F, at, s.kernels.size());
            break;
        }
        default: break;
        }
    }

    labelSteps(ctx, out, drafts);
    for (auto& d : drafts)
        steps.push_back(d.step);
    std::stable_sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
        return a.iteration != b.iteration ? a.iteration < b.iteration : a.rank != b.rank ? a.rank < b.rank : a.start < b.start;
    });

    ps.labelsFrom = anyAnnotated && anyInferred ? "annotations+inferred" : anyAnnotated ? "annotations" : "inferred";
    if (anyGuessed)
        ctx.warn("step_kinds_guessed", "some steps have no neighbour traffic around them, so forward/backward was "
                                       "guessed from kernel names; annotate steps (NVTX) for exact labels");
    // Chunks and microbatches of the selected iteration.
    int chunks = 1, m = 0;
    std::map<std::pair<int, int>, int> fwdPerRankChunk;
    for (const auto& st : steps) {
        if (st.iteration != out.selectedIteration)
            continue;
        chunks = std::max(chunks, st.chunk + 1);
        if (st.kind == StepKind::F)
            m = std::max(m, ++fwdPerRankChunk[{st.rank, st.chunk}]);
    }
    ps.chunks = chunks;
    ps.microbatches = m;
}

void inferSchedule(Context& ctx, AnalysisResult& out, const std::vector<Step>& steps)
{
    PipelineStructure& ps = out.pipeline;
    if (ctx.scheduleMatched)
        return; // read against the schedules' transfers already (ScheduleMatch.cpp)
    if (!ps.found || steps.empty()) {
        ps.schedule = "unknown";
        ps.scheduleConfidence = 0;
        ps.scheduleEvidence = ps.found ? "no steps in the selected iteration" : "no pipeline";
        return;
    }
    const int p = ps.pp, m = ps.microbatches, v = ps.chunks;
    std::map<int, std::vector<const Step*>> byRank;
    bool split = false, fullBackward = false;
    for (const auto& s : steps) {
        byRank[s.rank].push_back(&s);
        split = split || s.kind == StepKind::I || s.kind == StepKind::W;
        fullBackward = fullBackward || s.kind == StepKind::B;
    }
    // Per stage: forwards before the first backward (B or I), compared with what each schedule runs.
    int stages = 0, gpipe = 0, onef1b = 0, interleaved = 0, looped = 0, zbh1 = 0, zbh2 = 0, twoChunks = 0;
    double onef1bPartial = 0;
    for (auto& [rank, seq] : byRank) {
        const RankData* rd = ctx.rankData(rank);
        if (!rd || rd->stage < 0)
            continue;
        ++stages;
        const int s = rd->stage;
        int fBeforeB = 0, nF = 0, lastChunk = 0;
        bool seenB = false, allFFirst = true, chunkMajor = true;
        std::set<int> chunks;
        for (const Step* st : seq) {
            chunks.insert(st->chunk);
            if (st->kind == StepKind::F) {
                ++nF;
                if (!seenB)
                    ++fBeforeB;
                else
                    allFFirst = false;
                chunkMajor = chunkMajor && st->chunk >= lastChunk;
                lastChunk = st->chunk;
            } else if (st->kind != StepKind::W) {
                seenB = true;
            }
        }
        twoChunks += chunks.size() == 2;
        gpipe += allFFirst;
        looped += allFFirst && chunkMajor;
        const int one = std::min(nF, p - s);
        if (fBeforeB == one)
            ++onef1b;
        else if (std::abs(fBeforeB - one) == 1)
            onef1bPartial += 0.5;
        // Megatron's interleaved warm-up: 2(p-s-1) + (v-1)p + 1 forwards.
        interleaved += fBeforeB == std::min(nF, 2 * (p - s - 1) + (v - 1) * p + 1);
        zbh1 += fBeforeB == one;
        zbh2 += fBeforeB == std::min(nF, 2 * (p - s) - 1);
    }
    const bool annotated = ps.labelsFrom == "annotations";
    double base = annotated ? 1.0 : 0.85;
    if (m < 2)
        base *= 0.5;
    auto share = [&](double n) { return stages ? n / stages : 0.0; };
    auto of = [&](int n) { return std::to_string(n) + " of " + std::to_string(stages) + " pipeline ranks"; };
    std::string name = "unknown", evidence;
    double score = 0;
    std::string alike; // a schedule that orders this iteration's steps the same way
    if (split && ctx.vShape) {
        name = fullBackward ? "dualpipev" : "zb-v";
        score = share(twoChunks);
        evidence = "chunks placed in a V (stage 0 also runs the last virtual stage), backward split into I and W"
                   + std::string(fullBackward ? ", with full backwards overlapped in the middle" : "")
                   + "; " + of(twoChunks) + " run two chunks";
    } else if (split && v > 1) {
        name = "zb-h1";
        score = 0.8;
        evidence = std::to_string(v) + " looped chunks per rank with the backward split into I and W (interleaved zero bubble)";
    } else if (split) {
        if (zbh2 > zbh1) {
            name = "zb-h2";
            score = share(zbh2);
            evidence = "backward split into I and W; " + of(zbh2) + " run min(m, 2(p-stage)-1) forwards before their first I";
        } else {
            name = "zb-h1";
            score = share(zbh1);
            evidence = "backward split into I and W; " + of(zbh1) + " run min(m, p-stage) forwards before their first I";
            if (zbh1 == zbh2)
                alike = "zb-h2";
        }
    } else if (ctx.vShape) {
        evidence = "chunks placed in a V but the backward is not split; no known schedule orders steps so";
    } else if (v > 1) {
        if (looped > interleaved) {
            name = "looped-bfs";
            score = share(looped);
            evidence = std::to_string(v) + " chunks per rank; " + of(looped) + " run every forward, chunk by chunk, before any backward";
        } else {
            name = "interleaved-1f1b";
            score = share(interleaved);
            evidence = std::to_string(v) + " chunks per rank; " + of(interleaved)
                       + " run Megatron's 2(p-stage-1)+(v-1)p+1 warm-up forwards before their first backward";
            if (interleaved == looped)
                alike = "looped-bfs";
        }
    } else {
        double g = share(gpipe), o = share(onef1b + onef1bPartial);
        if (g >= o && g > 0) {
            name = "gpipe";
            score = g;
            evidence = of(gpipe) + " run all forwards before any backward";
            if (g == o)
                alike = "1f1b";
        } else if (o > 0) {
            name = "1f1b";
            score = o;
            evidence = of(onef1b) + " run min(m, p-stage) forwards before their first backward, then alternate";
        }
    }
    if (name == "unknown") {
        if (evidence.empty())
            evidence = "the order of forward and backward steps matches no known schedule";
    } else {
        if (!alike.empty()) {
            base *= 0.5;
            evidence += "; " + alike + " orders the steps of " + std::to_string(m) + " microbatches on " + std::to_string(p)
                        + " stages the same way, so the two cannot be told apart";
        }
        if (!annotated)
            evidence += std::string("; steps ") + (ps.labelsFrom == "inferred" ? "" : "partly ")
                        + "inferred from kernel order and point-to-point peers, not annotated";
    }
    ps.schedule = name;
    ps.scheduleKind = name == "unknown" ? std::nullopt : scheduleKindFromString(name);
    ps.scheduleConfidence = name == "unknown" ? 0.0 : std::round(std::clamp(score * base, 0.0, 1.0) * 100) / 100;
    ps.scheduleEvidence = evidence;
}

} // namespace pipescope::detail
