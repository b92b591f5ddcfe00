// Bubbles: every idle interval of a rank's compute timeline inside an
// iteration, cut into parts by cause so that the parts sum exactly to the
// idle time. See docs/analysis.md for the rules.
#include "analysis/detail/Context.h"

#include <cmath>
#include <unordered_map>

namespace pipescope {

bool isFillable(BubbleCause cause)
{
    // Launch gaps are too short to take work, host-bound time has the host
    // too late to launch it, and "other" is not understood well enough to count on.
    return cause == BubbleCause::FillDrain || cause == BubbleCause::WaitNeighbor || cause == BubbleCause::P2pTransfer
           || cause == BubbleCause::DpSync;
}

int fillableBucket(TimeNs length)
{
    int bucket = 0;
    for (TimeNs edge = kFillableBucketBaseNs; length >= edge && bucket < kFillableBuckets - 1; edge *= 2)
        ++bucket;
    return bucket;
}

TimeNs fillableBucketStartNs(int bucket)
{
    return bucket <= 0 ? 0 : kFillableBucketBaseNs << (bucket - 1);
}

} // namespace pipescope

namespace pipescope::detail {

namespace {

// Contiguous fillable idle time of one rank in one iteration, built from the
// bubble parts in time order: touching fillable parts form one interval.
struct FillableRuns {
    FillableBubbles sum;
    TimeNs runStart = 0, runEnd = 0;
    bool open = false;

    void add(TimeNs s, TimeNs e, BubbleCause c)
    {
        if (!isFillable(c)) {
            close();
            return;
        }
        if (open && runEnd == s) {
            runEnd = e;
            return;
        }
        close();
        runStart = s;
        runEnd = e;
        open = true;
    }
    void close()
    {
        if (!open)
            return;
        open = false;
        const TimeNs len = runEnd - runStart;
        ++sum.count;
        sum.totalNs += len;
        sum.longestNs = std::max(sum.longestNs, len);
        ++sum.histogram[static_cast<size_t>(fillableBucket(len))];
    }
};

struct CommIndex {
    std::vector<uint32_t> byStart; // rank's comm ops, start order
    std::vector<uint32_t> byEnd;   // same, end order
    TimeNs maxDuration = 0;
};

} // namespace

void findBubbles(Context& ctx, AnalysisResult& out, const std::vector<Step>& steps, std::vector<Bubble>& bubbles)
{
    const Trace& t = ctx.trace;
    const bool pipeline = out.pipeline.found;
    const TimeNs launchGap = ctx.options.launchGapNs;

    // What a point-to-point op needs for its bytes: the best bandwidth seen between the
    // same two ranks (the fastest transfer did not wait), else the fastest op of the rank.
    std::map<std::pair<int, int>, double> bestNsPerByte; // (min rank, max rank) -> fastest ns per byte
    std::unordered_map<int, TimeNs> fastest;      // rank -> shortest p2p op
    auto bytesOf = [&](uint32_t a) -> int64_t {
        if (const NcclOp* op = ctx.ncclOf(a); op && op->bytes)
            return *op->bytes;
        return ctx.act(a).bytes.value_or(0);
    };
    for (const auto& rd : ctx.ranks)
        for (uint32_t c : rd.comm) {
            if (ctx.classOf(c) != WorkClass::P2p)
                continue;
            const Activity& a = ctx.act(c);
            TimeNs d = a.end - a.start;
            auto [f, inserted] = fastest.try_emplace(rd.rank, d);
            if (!inserted)
                f->second = std::min(f->second, d);
            auto peer = ctx.peer(c);
            int64_t bytes = bytesOf(c);
            if (peer && bytes > 0) {
                auto key = std::minmax(rd.rank, *peer);
                double nsPerByte = static_cast<double>(d) / static_cast<double>(bytes);
                auto [b, ins] = bestNsPerByte.try_emplace({key.first, key.second}, nsPerByte);
                if (!ins)
                    b->second = std::min(b->second, nsPerByte);
            }
        }
    auto transferNeed = [&](uint32_t c, int rank) -> TimeNs {
        const Activity& a = ctx.act(c);
        TimeNs d = a.end - a.start;
        auto peer = ctx.peer(c);
        int64_t bytes = bytesOf(c);
        if (peer && bytes > 0) {
            auto key = std::minmax(rank, *peer);
            auto it = bestNsPerByte.find({key.first, key.second});
            if (it != bestNsPerByte.end())
                return std::min(d, static_cast<TimeNs>(std::llround(static_cast<double>(bytes) * it->second)));
        }
        auto f = fastest.find(rank);
        return f == fastest.end() ? 0 : std::min(d, f->second);
    };

    // A collective is data-parallel sync only when it runs over replicas of
    // one stage: one over ranks of several stages (a loss or gradient-norm
    // all-reduce at the end of the iteration) holds each rank until the last
    // stage has drained, and a collective of unknown members on a job without
    // replicas cannot be one either (docs/analysis.md, section 4).
    auto pipelineWide = [&](uint32_t c) {
        if (!pipeline)
            return false;
        const NcclOp* op = ctx.ncclOf(c);
        const std::vector<int>* members = op && !op->groupRanks.empty() ? &op->groupRanks : nullptr;
        if (op && !members && !op->groupName.empty())
            for (const ProcessGroup& g : t.processGroups)
                if (g.rank == op->rank && g.name == op->groupName && !g.ranks.empty()) {
                    members = &g.ranks;
                    break;
                }
        if (!members)
            return out.pipeline.dp <= 1;
        int stage = -1;
        for (int g : *members) {
            const RankData* m = ctx.rankData(g);
            if (!m || m->stage < 0)
                continue;
            if (stage >= 0 && m->stage != stage)
                return true;
            stage = m->stage;
        }
        return false;
    };
    std::unordered_map<uint32_t, bool> wideCache;
    auto causeOfCollective = [&](uint32_t c) {
        auto [it, inserted] = wideCache.try_emplace(c, false);
        if (inserted)
            it->second = pipelineWide(c);
        return it->second ? BubbleCause::FillDrain : BubbleCause::DpSync;
    };

    // Steps per (iteration, rank): where the rank's fill ends and its drain
    // begins, by the rule the replay uses too (model/Pipeline.h).
    std::map<std::pair<int, int>, FillDrainBounds> phases;
    for (const Step& s : steps)
        phases[{s.iteration, s.rank}].add(s.kind == StepKind::F, s.start, s.end);

    // (iteration, stage) -> the replica with the least fillable time so far.
    std::map<std::pair<int, int>, FillableBubbles> fillable;

    for (const auto& rd : ctx.ranks) {
        CommIndex ci;
        ci.byStart = rd.comm;
        ci.byEnd = rd.comm;
        std::sort(ci.byEnd.begin(), ci.byEnd.end(), [&](uint32_t x, uint32_t y) { return ctx.act(x).end < ctx.act(y).end; });
        for (uint32_t c : rd.comm)
            ci.maxDuration = std::max(ci.maxDuration, ctx.act(c).end - ctx.act(c).start);
        // Gaps are explained in time order, so the communication ops that
        // overlap a gap are kept in a sweep: ops join when they start before
        // the gap's dependency and leave once they end. Walking back over every
        // op within the longest op's duration instead is quadratic when one op
        // spans the iteration.
        std::vector<uint32_t> active; // in start order
        size_t nextOp = 0;
        TimeNs sweepAt = std::numeric_limits<TimeNs>::min();

        for (const Iteration& it : out.iterations) {
            bool present = false;
            for (const auto& rs : it.ranks)
                present = present || rs.rank == rd.rank;
            if (!present)
                continue;
            const TimeNs ws = it.start, we = it.end;
            RankIdle ri;
            ri.iteration = it.index;
            ri.rank = rd.rank;
            ri.stage = rd.stage;
            ri.windowNs = we - ws;
            ri.busyNs = busyWithin(rd.busy, ws, we);
            ri.idleNs = ri.windowNs - ri.busyNs;

            FillDrainBounds ph;
            bool inPipeline = pipeline && rd.stage >= 0;
            if (inPipeline) {
                auto pit = phases.find({it.index, rd.rank});
                if (pit != phases.end())
                    ph = pit->second;
            }
            const bool wantBubbles = ctx.options.allIterations || it.index == out.selectedIteration;
            FillableRuns runs;

            auto emit = [&](TimeNs s, TimeNs e, BubbleCause c, bool fillRegion) {
                if (e <= s)
                    return;
                if (fillRegion && (c == BubbleCause::WaitNeighbor || c == BubbleCause::Other))
                    c = BubbleCause::FillDrain;
                ri.byCause[static_cast<size_t>(c)] += e - s;
                runs.add(s, e, c);
                if (!wantBubbles)
                    return;
                if (!bubbles.empty() && bubbles.back().rank == rd.rank && bubbles.back().iteration == it.index
                    && bubbles.back().end == s && bubbles.back().cause == c) {
                    bubbles.back().end = e;
                    return;
                }
                bubbles.push_back({it.index, rd.rank, s, e, c});
            };

            // One idle gap [a, b) before compute kernel `next` (none for the trailing gap).
            auto explain = [&](TimeNs a, TimeNs b, const Activity* next) {
                bool fillRegion = inPipeline && ph.inFillOrDrain(a, b);
                // The communication the next kernel waited for: the latest op ending in (a, b].
                TimeNs dep = a;
                auto e1 = std::upper_bound(ci.byEnd.begin(), ci.byEnd.end(), b,
                                           [&](TimeNs v, uint32_t c) { return v < ctx.act(c).end; });
                if (e1 != ci.byEnd.begin()) {
                    const Activity& g = ctx.act(*std::prev(e1));
                    if (g.end > a)
                        dep = g.end;
                }
                if (dep > a) {
                    // Ops overlapping [a, dep), in start order, explain it piece by piece.
                    if (a < sweepAt) {
                        // Out of order (not expected): restart the sweep where the old walk would have.
                        active.clear();
                        nextOp = static_cast<size_t>(
                            std::lower_bound(ci.byStart.begin(), ci.byStart.end(), a - ci.maxDuration,
                                             [&](uint32_t c, TimeNs v) { return ctx.act(c).start < v; })
                            - ci.byStart.begin());
                    }
                    sweepAt = a;
                    std::erase_if(active, [&](uint32_t c) { return ctx.act(c).end <= a; });
                    for (; nextOp < ci.byStart.size() && ctx.act(ci.byStart[nextOp]).start < dep; ++nextOp)
                        if (ctx.act(ci.byStart[nextOp]).end > a)
                            active.push_back(ci.byStart[nextOp]);
                    TimeNs cur = a;
                    for (auto p = active.begin(); p != active.end(); ++p) {
                        if (ctx.act(*p).start >= dep)
                            break;
                        const Activity& o = ctx.act(*p);
                        if (o.end <= cur)
                            continue;
                        TimeNs s = std::max(o.start, cur), e = std::min(o.end, dep);
                        if (e <= s)
                            continue;
                        if (s > cur)
                            emit(cur, s, BubbleCause::Other, fillRegion);
                        if (ctx.classOf(*p) == WorkClass::P2p) {
                            TimeNs xferStart = o.end - transferNeed(*p, rd.rank);
                            TimeNs mid = std::clamp(xferStart, s, e);
                            emit(s, mid, BubbleCause::WaitNeighbor, fillRegion);
                            emit(mid, e, BubbleCause::P2pTransfer, fillRegion);
                        } else {
                            emit(s, e, inPipeline ? causeOfCollective(*p) : BubbleCause::DpSync, fillRegion);
                        }
                        cur = e;
                    }
                    if (cur < dep)
                        emit(cur, dep, BubbleCause::Other, fillRegion);
                }
                TimeNs from = dep;
                if (next && next->launchStart && *next->launchStart > from) {
                    TimeNs h = std::min(*next->launchStart, b);
                    emit(from, h, BubbleCause::HostBound, fillRegion);
                    from = h;
                }
                if (from < b) {
                    bool shortGap = next && b - from <= launchGap;
                    emit(from, b, shortGap ? BubbleCause::LaunchGap : BubbleCause::Other, fillRegion);
                }
            };

            // The gaps of the compute-busy union inside the window are the idle intervals.
            auto nextKernelAt = [&](TimeNs when) -> const Activity* {
                auto k = std::lower_bound(rd.compute.begin(), rd.compute.end(), when,
                                          [&](uint32_t x, TimeNs v) { return ctx.act(x).start < v; });
                return k == rd.compute.end() ? nullptr : &ctx.act(*k);
            };
            auto bi = std::lower_bound(rd.busy.begin(), rd.busy.end(), ws,
                                       [](const Interval& i, TimeNs v) { return i.end <= v; });
            TimeNs covered = ws;
            for (; bi != rd.busy.end() && bi->start < we; ++bi) {
                if (bi->start > covered)
                    explain(covered, bi->start, nextKernelAt(bi->start));
                covered = std::max(covered, std::min(bi->end, we));
            }
            if (covered < we)
                explain(covered, we, nullptr);

            TimeNs sum = 0;
            for (TimeNs v : ri.byCause)
                sum += v;
            if (sum != ri.idleNs) {
                // Cannot happen with consistent inputs; keep the totals exact regardless.
                ri.byCause[static_cast<size_t>(BubbleCause::Other)] += ri.idleNs - sum;
            }
            out.idle.push_back(ri);

            if (inPipeline) {
                runs.close();
                runs.sum.iteration = it.index;
                runs.sum.stage = rd.stage;
                runs.sum.rank = rd.rank;
                auto [f, inserted] = fillable.try_emplace({it.index, rd.stage}, runs.sum);
                if (!inserted && runs.sum.totalNs < f->second.totalNs)
                    f->second = runs.sum;
            }

            if (it.index == out.selectedIteration) {
                for (uint32_t c : rd.comm) {
                    if (ctx.classOf(c) != WorkClass::P2p)
                        continue;
                    const Activity& a = ctx.act(c);
                    if (a.start < ws || a.start >= we)
                        continue;
                    if (const auto ops = ctx.opsOf(c); ops.size() > 1) {
                        // A coalesced batch: one transfer per receive in it.
                        for (const NcclOp& op : ops)
                            if (op.kind == Collective::Recv && op.peer)
                                out.transfers.push_back({*op.peer, rd.rank, op.bytes.value_or(0), transferNeed(c, rd.rank)});
                        continue;
                    }
                    auto peer = ctx.peer(c);
                    if (!peer || ctx.direction(c) == P2pDir::Send)
                        continue;
                    out.transfers.push_back({*peer, rd.rank, bytesOf(c), transferNeed(c, rd.rank)});
                }
            }
        }
    }
    for (auto& [key, f] : fillable)
        out.fillableBubbles.push_back(f);
}

} // namespace pipescope::detail
