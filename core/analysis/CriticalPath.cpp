// The critical path of one iteration across ranks: walk back from the work
// that ends last, each time to what it waited for: the previous work on its
// stream, work on another stream of its rank that ended just before it, the
// peer's matching send for a receive, or the last participant to arrive at a
// collective.
#include "analysis/detail/Context.h"

#include <unordered_map>
#include <unordered_set>

namespace pipescope::detail {

void traceCriticalPath(Context& ctx, AnalysisResult& out, const std::vector<Step>& steps)
{
    CriticalPath& cp = out.criticalPath;
    if (out.selectedIteration < 0)
        return;
    const Iteration& it = out.iterations[static_cast<size_t>(out.selectedIteration)];
    cp.iteration = it.index;
    cp.start = it.start;
    cp.end = it.end;
    const TimeNs ws = it.start, we = it.end;

    // Nodes: the work of every rank inside the window.
    std::vector<uint32_t> nodes;
    std::vector<int> prevSame;                 // local index of the previous node on the same stream
    std::unordered_map<int, std::vector<int>> byEnd; // rank -> local indices sorted by end
    for (const auto& rd : ctx.ranks) {
        std::unordered_map<int64_t, int> lastOnStream;
        auto& ends = byEnd[rd.rank];
        for (uint32_t a : rd.acts) {
            const Activity& act = ctx.act(a);
            if (act.end <= ws || act.start >= we || ctx.classOf(a) == WorkClass::Sync)
                continue;
            int li = static_cast<int>(nodes.size());
            nodes.push_back(a);
            auto [ls, inserted] = lastOnStream.try_emplace(act.streamId, li);
            prevSame.push_back(inserted ? -1 : ls->second);
            ls->second = li;
            ends.push_back(li);
        }
        std::sort(ends.begin(), ends.end(), [&](int x, int y) { return ctx.act(nodes[static_cast<size_t>(x)]).end < ctx.act(nodes[static_cast<size_t>(y)]).end; });
    }
    if (nodes.empty())
        return;
    auto A = [&](int li) -> const Activity& { return ctx.act(nodes[static_cast<size_t>(li)]); };

    // Matching point-to-point ops between ranks. A receive on q from r pairs
    // with the send from r to q of the same rank among that pair's sends, as
    // NCCL delivers them in order; ops of unknown direction (a SendRecv
    // kernel carrying both) pair by their rank among all ops between the two.
    std::map<std::tuple<int, int, int>, int> p2pSlot; // (rank, peer, k) -> node, undirected ops
    std::map<std::tuple<int, int, int>, int> sendSlot; // (sender, receiver, k) -> the k-th send
    std::map<std::tuple<int, int, int>, int> recvSlot; // (sender, receiver, k) -> the k-th receive
    std::vector<int> p2pK(nodes.size(), -1);
    // Collectives: the k-th op of a group on each rank.
    std::map<std::pair<std::string, int>, std::vector<int>> collSlot;
    std::vector<std::pair<std::string, int>> collKey(nodes.size());
    {
        std::map<std::pair<int, int>, int> pairCount;
        std::map<std::pair<int, int>, int> sendCount, recvCount; // (sender, receiver)
        std::map<std::pair<int, std::string>, int> groupCount;
        for (size_t li = 0; li < nodes.size(); ++li) {
            uint32_t a = nodes[li];
            int rank = ctx.act(a).rank;
            if (ctx.classOf(a) == WorkClass::P2p) {
                if (auto peer = ctx.peer(a)) {
                    const P2pDir dir = ctx.direction(a);
                    if (dir == P2pDir::Send) {
                        const int k = sendCount[{rank, *peer}]++;
                        sendSlot[{rank, *peer, k}] = static_cast<int>(li);
                        p2pK[li] = k;
                    } else if (dir == P2pDir::Recv) {
                        const int k = recvCount[{*peer, rank}]++;
                        recvSlot[{*peer, rank, k}] = static_cast<int>(li);
                        p2pK[li] = k;
                    } else {
                        int k = pairCount[{rank, *peer}]++;
                        p2pSlot[{rank, *peer, k}] = static_cast<int>(li);
                        p2pK[li] = k;
                    }
                }
            } else if (ctx.classOf(a) == WorkClass::Collective) {
                std::string key;
                if (const NcclOp* op = ctx.ncclOf(a))
                    key = op->groupName.empty() ? std::string(toString(op->kind)) : op->groupName + "/" + std::string(toString(op->kind));
                else
                    key = ctx.trace.str(ctx.act(a).name);
                int k = groupCount[{rank, key}]++;
                collKey[li] = {key, k};
                collSlot[{key, k}].push_back(static_cast<int>(li));
            }
        }
    }

    // Steps per rank for labelling compute on the path.
    std::unordered_map<int, std::vector<const Step*>> stepsOf;
    for (const Step& s : steps)
        stepsOf[s.rank].push_back(&s);
    auto kindOf = [&](int li) -> std::string {
        uint32_t a = nodes[static_cast<size_t>(li)];
        switch (ctx.classOf(a)) {
        case WorkClass::Compute: {
            auto sit = stepsOf.find(ctx.act(a).rank);
            if (sit != stepsOf.end()) {
                const auto& v = sit->second;
                auto p = std::upper_bound(v.begin(), v.end(), ctx.act(a).start, [](TimeNs t, const Step* s) { return t < s->start; });
                if (p != v.begin() && ctx.act(a).start < (*std::prev(p))->end + 1)
                    return std::string(1, toChar((*std::prev(p))->kind));
            }
            return "compute";
        }
        case WorkClass::P2p: return "p2p";
        case WorkClass::Collective: return "collective";
        case WorkClass::Memcpy: return "memcpy";
        case WorkClass::Memset: return "memset";
        default: return "other";
        }
    };
    auto stageOf = [&](int rank) {
        const RankData* rd = ctx.rankData(rank);
        return rd ? rd->stage : -1;
    };

    std::vector<PathSegment> rev;
    auto add = [&](int rank, std::string kind, TimeNs s, TimeNs e) {
        s = std::max(s, ws);
        e = std::min(e, we);
        if (e <= s)
            return;
        if (!rev.empty() && rev.back().rank == rank && rev.back().kind == kind && rev.back().start == e) {
            rev.back().start = s;
            return;
        }
        rev.push_back({rank, stageOf(rank), std::move(kind), s, e});
    };

    // Start at the work that ends last.
    int cur = 0;
    for (size_t li = 0; li < nodes.size(); ++li)
        if (A(static_cast<int>(li)).end > A(cur).end)
            cur = static_cast<int>(li);
    TimeNs T = std::min(A(cur).end, we);
    if (T < we)
        add(A(cur).rank, "idle", T, we);
    std::unordered_set<int> visited;
    bool atStart = false; // arrived at cur's start through a peer: only its predecessors remain
    while (cur >= 0 && T > ws && visited.insert(cur * 2 + (atStart ? 1 : 0)).second) {
        const Activity& n = A(cur);
        if (!atStart) {
            // A receive (or collective) that waited for a later peer: the path goes through the peer.
            int via = -1;
            TimeNs viaStart = n.start;
            size_t lc = static_cast<size_t>(cur);
            if (p2pK[lc] >= 0) {
                auto peer = ctx.peer(nodes[lc]);
                // A receive's send is keyed (peer, rank, k), a send's receive (rank, peer, k).
                const P2pDir dir = ctx.direction(nodes[lc]);
                const auto& slots = dir == P2pDir::Recv ? sendSlot : dir == P2pDir::Send ? recvSlot : p2pSlot;
                const auto key = dir == P2pDir::Send ? std::make_tuple(n.rank, *peer, p2pK[lc])
                                                     : std::make_tuple(*peer, n.rank, p2pK[lc]);
                auto m = slots.find(key);
                if (m != slots.end() && A(m->second).start > viaStart && A(m->second).start < T) {
                    via = m->second;
                    viaStart = A(via).start;
                }
            } else if (ctx.classOf(nodes[lc]) == WorkClass::Collective) {
                for (int o : collSlot[collKey[lc]])
                    if (A(o).rank != n.rank && A(o).start > viaStart && A(o).start < T) {
                        via = o;
                        viaStart = A(o).start;
                    }
            }
            if (via >= 0) {
                add(n.rank, kindOf(cur), viaStart, T);
                T = viaStart;
                cur = via;
                atStart = true;
                continue;
            }
            add(n.rank, kindOf(cur), n.start, T);
            T = std::min(T, n.start);
        }
        atStart = false;
        // Predecessor: previous work on the stream, or work on another stream of the rank that ended last.
        int pred = prevSame[static_cast<size_t>(cur)];
        const auto& ends = byEnd[n.rank];
        auto e = std::upper_bound(ends.begin(), ends.end(), T, [&](TimeNs v, int li) { return v < A(li).end; });
        for (int back = 0; e != ends.begin() && back < 16; ++back) {
            --e;
            if (*e == cur)
                continue;
            if (pred < 0 || A(*e).end > A(pred).end)
                pred = *e;
            break;
        }
        if (pred < 0 || A(pred).end <= ws) {
            add(n.rank, "idle", ws, T);
            T = ws;
            break;
        }
        TimeNs pe = std::min(A(pred).end, T);
        add(n.rank, "idle", pe, T);
        T = pe;
        cur = pred;
    }
    if (T > ws)
        add(rev.empty() ? A(cur).rank : rev.back().rank, "idle", ws, T);

    cp.segments.assign(rev.rbegin(), rev.rend());
    for (const auto& s : cp.segments) {
        cp.byStage[s.stage] += s.end - s.start;
        cp.byKind[s.kind] += s.end - s.start;
    }
}

} // namespace pipescope::detail
