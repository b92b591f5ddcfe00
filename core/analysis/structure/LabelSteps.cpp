// Step labels from the data flow: which neighbour stage fed each step gives
// its chunk and microbatch where annotations did not, the layout of the
// chunks (a ring for interleaved schedules, a V for ZB-V and DualPipeV), and
// a split backward's input part (I) where names do not tell it from a full B.
#include "analysis/detail/Context.h"
#include "analysis/structure/detail/StructureSteps.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <utility>
#include <vector>

namespace pipescope::detail {

namespace {

bool isBackward(StepKind k) { return k == StepKind::B || k == StepKind::I; }

void sortDrafts(std::vector<Draft>& drafts)
{
    std::stable_sort(drafts.begin(), drafts.end(), [](const Draft& a, const Draft& b) {
        const Step &x = a.step, &y = b.step;
        return x.iteration != y.iteration ? x.iteration < y.iteration : x.rank != y.rank ? x.rank < y.rank : x.start < y.start;
    });
}

// Runs of drafts per (iteration, rank), of drafts in that order.
DraftRuns runsOf(const std::vector<Draft>& drafts)
{
    DraftRuns runs;
    for (size_t i = 0; i < drafts.size();) {
        size_t j = i;
        while (j < drafts.size() && drafts[j].step.iteration == drafts[i].step.iteration && drafts[j].step.rank == drafts[i].step.rank)
            ++j;
        runs.push_back({i, j});
        i = j;
    }
    return runs;
}

// A rank that runs W steps splits its backward: of its plain "backward" steps, as many as
// it has W are the input halves (I), the shortest ones (a full B does both halves' work).
void markInputHalves(std::vector<Draft>& drafts, const DraftRuns& runs)
{
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
}

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

// A rank's point-to-point receives (and ops of unknown direction), in end order.
std::vector<uint32_t> receivesByEnd(const Context& ctx, const RankData& rd)
{
    std::vector<uint32_t> recvByEnd;
    for (uint32_t c : rd.comm)
        if (ctx.classOf(c) == WorkClass::P2p && ctx.direction(c) != P2pDir::Send)
            recvByEnd.push_back(c);
    std::sort(recvByEnd.begin(), recvByEnd.end(), [&](uint32_t x, uint32_t y) { return ctx.act(x).end < ctx.act(y).end; });
    return recvByEnd;
}

// What fed each step (nothing for W steps, which take no input).
std::vector<Feed> feedsOf(const Context& ctx, const AnalysisResult& out, const std::vector<Draft>& drafts, const DraftRuns& runs)
{
    std::vector<Feed> feeds(drafts.size());
    std::map<int, std::vector<uint32_t>> recvsOfRank; // receives (and ops of unknown direction), end order
    for (auto [b, e] : runs) {
        const RankData* rd = ctx.rankData(drafts[b].step.rank);
        if (!rd)
            continue;
        auto [slot, fresh] = recvsOfRank.try_emplace(rd->rank);
        std::vector<uint32_t>& recvByEnd = slot->second;
        if (fresh)
            recvByEnd = receivesByEnd(ctx, *rd);
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
    return feeds;
}

// The layout is a V when stage 0 receives forward inputs from stage 1.
bool looksLikeV(const Context& ctx, const std::vector<Draft>& drafts, const std::vector<Feed>& feeds)
{
    int fwd0 = 0, fromNext0 = 0;
    for (size_t i = 0; i < drafts.size(); ++i) {
        const Step& st = drafts[i].step;
        if (st.stage == 0 && st.kind == StepKind::F) {
            ++fwd0;
            fromNext0 += feeds[i].fromNext && feeds[i].knownRecv;
        }
    }
    return !ctx.ring && ctx.pp >= 2 && fromNext0 > 0 && 4 * fromNext0 >= fwd0;
}

void mergeFeed(Feed& into, const Feed& x)
{
    into.fromPrev = into.fromPrev || x.fromPrev;
    into.fromNext = into.fromNext || x.fromNext;
    into.fromWrap = into.fromWrap || x.fromWrap;
    into.knownRecv = into.knownRecv || (x.knownRecv && x.any());
}

// Around a ring an activation comes from the rank before (stage 0: from
// the last stage) and a gradient from the rank after (the last stage:
// from stage 0). Under blocking exchanges a rank may receive them a step
// early, in the batch after the step before (Megatron's interleaved
// steady state receives the next backward's gradient before the next
// forward): each receive feeds the next step of its kind.
void carryRingFeeds(const std::vector<Draft>& drafts, const DraftRuns& runs, int p, std::vector<Feed>& feeds)
{
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
            if (st.kind == StepKind::F) {
                mergeFeed(a, act);
                act = Feed{};
                mergeFeed(grad, g);
                feeds[i] = a;
            } else if (isBackward(st.kind)) {
                mergeFeed(g, grad);
                grad = Feed{};
                mergeFeed(act, a);
                feeds[i] = g;
            } else {
                mergeFeed(act, a);
                mergeFeed(grad, g);
            }
        }
    }
}

// In a V, chunk 0 runs up the stages, chunk 1 back down: a step's feeder says which.
void chunksFromV(std::vector<Draft>& drafts, const std::vector<Feed>& feeds, int p)
{
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
}

using RankSteps = std::map<std::pair<int, int>, std::vector<size_t>>;          // (iteration, rank) -> drafts
using RingLabels = std::map<std::pair<int, int>, std::vector<std::pair<int, int>>>; // (iteration, replica) -> (chunk, mb)

// The (chunk, microbatch) of each forward (fwd) or backward step of the ring's
// source stage (stage 0 for forwards, p-1 for backwards), in its order, per
// iteration and replica: unfed steps start a chunk's flow, and a step fed
// around the ring continues the oldest flow still waiting there.
RingLabels ringLabelsAtSource(const Context& ctx, const std::vector<Draft>& drafts, const std::vector<Feed>& feeds,
                              const RankSteps& byRank, bool fwd, int p)
{
    const int source = fwd ? 0 : p - 1; // the stage whose unfed steps begin each chunk's flow
    RingLabels labels;
    for (const auto& [key, idx] : byRank) {
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
    return labels;
}

// Every rank's k-th step takes the labels of the source stage's k-th step of
// the same iteration and replica, where it has none; chunk 0 where the
// source has no k-th step.
void copyRingLabels(const Context& ctx, std::vector<Draft>& drafts, const RankSteps& byRank, const RingLabels& labels)
{
    for (const auto& [key, idx] : byRank) {
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

// Around a ring every rank runs its forwards in the order stage 0 does (and its
// backwards in the order stage p-1 does): label those two ranks from what fed
// each step, then copy the k-th step's labels to every rank's k-th step.
void chunksAroundRing(const Context& ctx, std::vector<Draft>& drafts, const std::vector<Feed>& feeds, int p)
{
    RankSteps byRank[2]; // [forward?]
    for (size_t i = 0; i < drafts.size(); ++i) {
        const Step& st = drafts[i].step;
        if (st.kind == StepKind::F)
            byRank[1][{st.iteration, st.rank}].push_back(i);
        else if (isBackward(st.kind))
            byRank[0][{st.iteration, st.rank}].push_back(i);
    }
    for (int fwd = 0; fwd < 2; ++fwd) {
        const RingLabels labels = ringLabelsAtSource(ctx, drafts, feeds, byRank[fwd], fwd == 1, p);
        copyRingLabels(ctx, drafts, byRank[fwd], labels);
    }
}

} // namespace

void assignMicrobatches(std::vector<Draft>& drafts, const DraftRuns& runs)
{
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

void labelSteps(Context& ctx, const AnalysisResult& out, std::vector<Draft>& drafts)
{
    sortDrafts(drafts);
    const DraftRuns runs = runsOf(drafts);
    markInputHalves(drafts, runs);
    std::vector<Feed> feeds = feedsOf(ctx, out, drafts, runs);
    ctx.vShape = looksLikeV(ctx, drafts, feeds);
    const int p = ctx.pp;
    if (!ctx.vShape && ctx.ring && p > 2)
        carryRingFeeds(drafts, runs, p, feeds);

    // Chunks: from the layout, else 0 (W steps take their I's below).
    if (ctx.vShape)
        chunksFromV(drafts, feeds, p);
    else if (ctx.ring)
        chunksAroundRing(ctx, drafts, feeds, p);
    for (auto& d : drafts)
        if (d.step.chunk < 0 && d.step.kind != StepKind::W)
            d.step.chunk = 0;

    assignMicrobatches(drafts, runs);
}

} // namespace pipescope::detail
