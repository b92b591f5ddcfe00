// The critical path of one iteration across ranks: walk back from the work
// that ends last, each time to what it waited for: the previous work on its
// stream, work on another stream of its rank that ended just before it, the
// peer's matching send for a receive, or the last participant to arrive at a
// collective.
#include "analysis/detail/Context.h"

#include <unordered_map>
#include <unordered_set>

namespace pipescope::detail {

namespace {

// The path's nodes: the work of every rank inside the window, by local index.
struct PathNodes {
    std::vector<uint32_t> acts;                     // local index -> activity
    std::vector<int> prevSame;                      // local index of the previous node on the same stream
    std::unordered_map<int, std::vector<int>> byEnd; // rank -> local indices sorted by end
};

PathNodes collectNodes(const Context& ctx, TimeNs ws, TimeNs we)
{
    PathNodes n;
    for (const auto& rd : ctx.ranks) {
        std::unordered_map<int64_t, int> lastOnStream;
        auto& ends = n.byEnd[rd.rank];
        for (uint32_t a : rd.acts) {
            const Activity& act = ctx.act(a);
            if (act.end <= ws || act.start >= we || ctx.classOf(a) == WorkClass::Sync)
                continue;
            int li = static_cast<int>(n.acts.size());
            n.acts.push_back(a);
            auto [ls, inserted] = lastOnStream.try_emplace(act.streamId, li);
            n.prevSame.push_back(inserted ? -1 : ls->second);
            ls->second = li;
            ends.push_back(li);
        }
        std::sort(ends.begin(), ends.end(), [&](int x, int y) { return ctx.act(n.acts[static_cast<size_t>(x)]).end < ctx.act(n.acts[static_cast<size_t>(y)]).end; });
    }
    return n;
}

// Which node across ranks each point-to-point op and collective pairs with.
// A receive on q from r pairs with the send from r to q of the same rank
// among that pair's sends, as NCCL delivers them in order; ops of unknown
// direction (a SendRecv kernel carrying both) pair by their rank among all
// ops between the two. A collective is the k-th op of its group on each rank.
struct PeerSlots {
    std::map<std::tuple<int, int, int>, int> p2pSlot;  // (rank, peer, k) -> node, undirected ops
    std::map<std::tuple<int, int, int>, int> sendSlot; // (sender, receiver, k) -> the k-th send
    std::map<std::tuple<int, int, int>, int> recvSlot; // (sender, receiver, k) -> the k-th receive
    std::vector<int> p2pK;                             // node -> its k, -1 for none
    std::map<std::pair<std::string, int>, std::vector<int>> collSlot; // (group, k) -> nodes
    std::vector<std::pair<std::string, int>> collKey;                 // node -> (group, k)
};

PeerSlots matchPeers(const Context& ctx, const PathNodes& nodes)
{
    PeerSlots ps;
    ps.p2pK.assign(nodes.acts.size(), -1);
    ps.collKey.resize(nodes.acts.size());
    std::map<std::pair<int, int>, int> pairCount;
    std::map<std::pair<int, int>, int> sendCount, recvCount; // (sender, receiver)
    std::map<std::pair<int, std::string>, int> groupCount;
    for (size_t li = 0; li < nodes.acts.size(); ++li) {
        uint32_t a = nodes.acts[li];
        int rank = ctx.act(a).rank;
        if (ctx.classOf(a) == WorkClass::P2p) {
            if (auto peer = ctx.peer(a)) {
                const P2pDir dir = ctx.direction(a);
                if (dir == P2pDir::Send) {
                    const int k = sendCount[{rank, *peer}]++;
                    ps.sendSlot[{rank, *peer, k}] = static_cast<int>(li);
                    ps.p2pK[li] = k;
                } else if (dir == P2pDir::Recv) {
                    const int k = recvCount[{*peer, rank}]++;
                    ps.recvSlot[{*peer, rank, k}] = static_cast<int>(li);
                    ps.p2pK[li] = k;
                } else {
                    int k = pairCount[{rank, *peer}]++;
                    ps.p2pSlot[{rank, *peer, k}] = static_cast<int>(li);
                    ps.p2pK[li] = k;
                }
            }
        } else if (ctx.classOf(a) == WorkClass::Collective) {
            std::string key;
            if (const NcclOp* op = ctx.ncclOf(a))
                key = op->groupName.empty() ? std::string(toString(op->kind)) : op->groupName + "/" + std::string(toString(op->kind));
            else
                key = ctx.trace.str(ctx.act(a).name);
            int k = groupCount[{rank, key}]++;
            ps.collKey[li] = {key, k};
            ps.collSlot[{key, k}].push_back(static_cast<int>(li));
        }
    }
    return ps;
}

PathKind stepPathKind(StepKind k)
{
    switch (k) {
    case StepKind::F: return PathKind::F;
    case StepKind::B: return PathKind::B;
    case StepKind::I: return PathKind::I;
    case StepKind::W: return PathKind::W;
    }
    return PathKind::Compute;
}

// What a node on the path did, in the path's words: the step kind (F, B, I,
// W) for compute inside a step of its rank, else its work class.
class NodeKinds {
public:
    NodeKinds(const Context& ctx, const std::vector<Step>& steps) : ctx_(ctx)
    {
        for (const Step& s : steps)
            stepsOf_[s.rank].push_back(&s);
    }
    PathKind operator()(uint32_t a) const
    {
        switch (ctx_.classOf(a)) {
        case WorkClass::Compute: {
            auto sit = stepsOf_.find(ctx_.act(a).rank);
            if (sit != stepsOf_.end()) {
                const auto& v = sit->second;
                auto p = std::upper_bound(v.begin(), v.end(), ctx_.act(a).start, [](TimeNs t, const Step* s) { return t < s->start; });
                if (p != v.begin() && ctx_.act(a).start < (*std::prev(p))->end + 1)
                    return stepPathKind((*std::prev(p))->kind);
            }
            return PathKind::Compute;
        }
        case WorkClass::P2p: return PathKind::P2p;
        case WorkClass::Collective: return PathKind::Collective;
        case WorkClass::Memcpy: return PathKind::Memcpy;
        case WorkClass::Memset: return PathKind::Memset;
        default: return PathKind::Other;
        }
    }

private:
    const Context& ctx_;
    std::unordered_map<int, std::vector<const Step*>> stepsOf_;
};

// The path's segments, latest first, clipped to the window; a segment that
// continues the last one (same rank and kind, ending where it starts)
// extends it.
class ReversePath {
public:
    ReversePath(Context& ctx, TimeNs ws, TimeNs we) : ctx_(ctx), ws_(ws), we_(we) {}
    void add(int rank, PathKind kind, TimeNs s, TimeNs e)
    {
        s = std::max(s, ws_);
        e = std::min(e, we_);
        if (e <= s)
            return;
        if (!rev.empty() && rev.back().rank == rank && rev.back().kind == kind && rev.back().start == e) {
            rev.back().start = s;
            return;
        }
        const RankData* rd = ctx_.rankData(rank);
        rev.push_back({rank, rd ? rd->stage : -1, kind, s, e});
    }
    std::vector<PathSegment> rev;

private:
    Context& ctx_;
    TimeNs ws_, we_;
};

// The node that ends last: where the walk back starts.
int lastToEnd(const Context& ctx, const PathNodes& nodes)
{
    int cur = 0;
    for (size_t li = 0; li < nodes.acts.size(); ++li)
        if (ctx.act(nodes.acts[li]).end > ctx.act(nodes.acts[static_cast<size_t>(cur)]).end)
            cur = static_cast<int>(li);
    return cur;
}

// A receive (or collective) that waited for a peer starting after it and
// before T: the peer's node and start (the latest such participant of a
// collective); -1 and the node's own start when it waited for none.
std::pair<int, TimeNs> waitedFor(const Context& ctx, const PathNodes& nodes, PeerSlots& slots, int cur, TimeNs T)
{
    auto A = [&](int li) -> const Activity& { return ctx.act(nodes.acts[static_cast<size_t>(li)]); };
    const Activity& n = A(cur);
    int via = -1;
    TimeNs viaStart = n.start;
    size_t lc = static_cast<size_t>(cur);
    if (slots.p2pK[lc] >= 0) {
        auto peer = ctx.peer(nodes.acts[lc]);
        // A receive's send is keyed (peer, rank, k), a send's receive (rank, peer, k).
        const P2pDir dir = ctx.direction(nodes.acts[lc]);
        const auto& byKey = dir == P2pDir::Recv ? slots.sendSlot : dir == P2pDir::Send ? slots.recvSlot : slots.p2pSlot;
        const auto key = dir == P2pDir::Send ? std::make_tuple(n.rank, *peer, slots.p2pK[lc])
                                             : std::make_tuple(*peer, n.rank, slots.p2pK[lc]);
        auto m = byKey.find(key);
        if (m != byKey.end() && A(m->second).start > viaStart && A(m->second).start < T) {
            via = m->second;
            viaStart = A(via).start;
        }
    } else if (ctx.classOf(nodes.acts[lc]) == WorkClass::Collective) {
        for (int o : slots.collSlot[slots.collKey[lc]])
            if (A(o).rank != n.rank && A(o).start > viaStart && A(o).start < T) {
                via = o;
                viaStart = A(o).start;
            }
    }
    return {via, viaStart};
}

// What `cur` waited for on its rank at T: the previous work on its stream, or
// work on another stream of the rank that ended last before T (whichever
// ended later); -1 for none.
int predecessor(const Context& ctx, PathNodes& nodes, int cur, TimeNs T)
{
    auto A = [&](int li) -> const Activity& { return ctx.act(nodes.acts[static_cast<size_t>(li)]); };
    int pred = nodes.prevSame[static_cast<size_t>(cur)];
    const auto& ends = nodes.byEnd[A(cur).rank];
    auto e = std::upper_bound(ends.begin(), ends.end(), T, [&](TimeNs v, int li) { return v < A(li).end; });
    for (int back = 0; e != ends.begin() && back < 16; ++back) {
        --e;
        if (*e == cur)
            continue;
        if (pred < 0 || A(*e).end > A(pred).end)
            pred = *e;
        break;
    }
    return pred;
}

} // namespace

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

    PathNodes nodes = collectNodes(ctx, ws, we);
    if (nodes.acts.empty())
        return;
    auto A = [&](int li) -> const Activity& { return ctx.act(nodes.acts[static_cast<size_t>(li)]); };
    PeerSlots slots = matchPeers(ctx, nodes);
    const NodeKinds kindOf(ctx, steps);
    ReversePath path(ctx, ws, we);

    // Walk back from the work that ends last.
    int cur = lastToEnd(ctx, nodes);
    TimeNs T = std::min(A(cur).end, we);
    if (T < we)
        path.add(A(cur).rank, PathKind::Idle, T, we);
    std::unordered_set<int> visited;
    bool atStart = false; // arrived at cur's start through a peer: only its predecessors remain
    while (cur >= 0 && T > ws && visited.insert(cur * 2 + (atStart ? 1 : 0)).second) {
        const Activity& n = A(cur);
        if (!atStart) {
            // A receive (or collective) that waited for a later peer: the path goes through the peer.
            const auto [via, viaStart] = waitedFor(ctx, nodes, slots, cur, T);
            if (via >= 0) {
                path.add(n.rank, kindOf(nodes.acts[static_cast<size_t>(cur)]), viaStart, T);
                T = viaStart;
                cur = via;
                atStart = true;
                continue;
            }
            path.add(n.rank, kindOf(nodes.acts[static_cast<size_t>(cur)]), n.start, T);
            T = std::min(T, n.start);
        }
        atStart = false;
        const int pred = predecessor(ctx, nodes, cur, T);
        if (pred < 0 || A(pred).end <= ws) {
            path.add(n.rank, PathKind::Idle, ws, T);
            T = ws;
            break;
        }
        TimeNs pe = std::min(A(pred).end, T);
        path.add(n.rank, PathKind::Idle, pe, T);
        T = pe;
        cur = pred;
    }
    if (T > ws)
        path.add(path.rev.empty() ? A(cur).rank : path.rev.back().rank, PathKind::Idle, ws, T);

    cp.segments.assign(path.rev.rbegin(), path.rev.rend());
    for (const auto& s : cp.segments) {
        cp.byStage[s.stage] += s.end - s.start;
        cp.byKind[std::string(toString(s.kind))] += s.end - s.start;
    }
}

} // namespace pipescope::detail
