// Bubbles: every idle interval of a rank's compute timeline inside an
// iteration, cut into parts by cause so that the parts sum exactly to the
// idle time. See docs/analysis.md for the rules.
#include "analysis/detail/BubbleSteps.h"
#include "analysis/detail/Context.h"
#include "analysis/detail/ScheduleShares.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>
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

void classifyGap(const Gap& gap, std::span<const GapOp> ops, TimeNs launchGap, TimeNs& fillBudget, std::vector<GapPart>& parts)
{
    auto push = [&](TimeNs s, TimeNs e, BubbleCause c) {
        if (e <= s)
            return;
        if (!parts.empty() && parts.back().end == s && parts.back().cause == c)
            parts.back().end = e;
        else
            parts.push_back({s, e, c});
    };
    auto emit = [&](TimeNs s, TimeNs e, BubbleCause c) {
        if (e <= s)
            return;
        if (fillBudget > 0 && (c == BubbleCause::WaitNeighbor || c == BubbleCause::Other)) {
            const TimeNs fill = std::min(fillBudget, e - s);
            fillBudget -= fill;
            push(s, s + fill, BubbleCause::FillDrain);
            s += fill;
        }
        push(s, e, c);
    };
    const TimeNs a = gap.start, b = gap.end, dep = gap.dependency;
    if (dep > a) {
        // Ops overlapping [a, dep), in start order, explain it piece by piece.
        TimeNs cur = a;
        for (const GapOp& o : ops) {
            if (o.start >= dep)
                break;
            if (o.end <= cur)
                continue;
            TimeNs s = std::max(o.start, cur), e = std::min(o.end, dep);
            if (e <= s)
                continue;
            if (s > cur)
                emit(cur, s, BubbleCause::Other);
            if (o.p2p) {
                TimeNs xferStart = o.end - o.transferNs;
                TimeNs mid = std::clamp(xferStart, s, e);
                emit(s, mid, BubbleCause::WaitNeighbor);
                emit(mid, e, BubbleCause::P2pTransfer);
            } else {
                emit(s, e, o.cause);
            }
            cur = e;
        }
        if (cur < dep)
            emit(cur, dep, BubbleCause::Other);
    }
    TimeNs from = dep;
    if (gap.nextLaunch && *gap.nextLaunch > from) {
        TimeNs h = std::min(*gap.nextLaunch, b);
        emit(from, h, BubbleCause::HostBound);
        from = h;
    }
    if (from < b) {
        const bool shortGap = gap.beforeKernel && b - from <= launchGap;
        if (shortGap) {
            emit(from, b, BubbleCause::LaunchGap);
        } else if (gap.beforeStep && !gap.nextLaunch) {
            if (!gap.transfersRecorded) {
                // Nothing says whether the input was late: the schedule's own idle first.
                const TimeNs fill = std::min(fillBudget, b - from);
                fillBudget -= fill;
                push(from, from + fill, BubbleCause::FillDrain);
                from += fill;
            }
            push(from, b, BubbleCause::StepOverhead);
        } else {
            emit(from, b, gap.afterLastStep && !gap.beforeKernel ? BubbleCause::WaitNeighbor : BubbleCause::Other);
        }
    }
}

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

int64_t bytesOf(const Context& ctx, uint32_t a)
{
    if (const NcclOp* op = ctx.ncclOf(a); op && op->bytes)
        return *op->bytes;
    return ctx.act(a).bytes.value_or(0);
}

// What a point-to-point op needs for its bytes: the best bandwidth seen between the
// same two ranks (the fastest transfer did not wait), else the fastest op of the rank.
struct P2pSpeeds {
    std::map<std::pair<int, int>, double> bestNsPerByte; // (min rank, max rank) -> fastest ns per byte
    std::unordered_map<int, TimeNs> fastest;             // rank -> shortest p2p op

    TimeNs transferNeed(const Context& ctx, uint32_t c, int rank) const
    {
        const Activity& a = ctx.act(c);
        TimeNs d = a.end - a.start;
        auto peer = ctx.peer(c);
        int64_t bytes = bytesOf(ctx, c);
        if (peer && bytes > 0) {
            auto key = std::minmax(rank, *peer);
            auto it = bestNsPerByte.find({key.first, key.second});
            if (it != bestNsPerByte.end())
                return std::min(d, static_cast<TimeNs>(std::llround(static_cast<double>(bytes) * it->second)));
        }
        auto f = fastest.find(rank);
        return f == fastest.end() ? 0 : std::min(d, f->second);
    }
};

P2pSpeeds observeP2pSpeeds(const Context& ctx)
{
    P2pSpeeds out;
    for (const auto& rd : ctx.ranks)
        for (uint32_t c : rd.comm) {
            if (ctx.classOf(c) != WorkClass::P2p)
                continue;
            const Activity& a = ctx.act(c);
            TimeNs d = a.end - a.start;
            auto [f, inserted] = out.fastest.try_emplace(rd.rank, d);
            if (!inserted)
                f->second = std::min(f->second, d);
            auto peer = ctx.peer(c);
            int64_t bytes = bytesOf(ctx, c);
            if (peer && bytes > 0) {
                auto key = std::minmax(rd.rank, *peer);
                double nsPerByte = static_cast<double>(d) / static_cast<double>(bytes);
                auto [b, ins] = out.bestNsPerByte.try_emplace({key.first, key.second}, nsPerByte);
                if (!ins)
                    b->second = std::min(b->second, nsPerByte);
            }
        }
    return out;
}

// A collective is data-parallel sync only when it runs over replicas of
// one stage: one over ranks of several stages (a loss or gradient-norm
// all-reduce at the end of the iteration) holds each rank until the last
// stage has drained, and a collective of unknown members on a job without
// replicas cannot be one either (docs/analysis.md, section 4).
class CollectiveCauses {
public:
    CollectiveCauses(const Context& ctx, const PipelineStructure& pipeline) : ctx_(ctx), pipeline_(pipeline) {}

    BubbleCause causeOf(uint32_t c)
    {
        if (isAllToAll(ctx_, c))
            return BubbleCause::AllToAll;
        auto [it, inserted] = wide_.try_emplace(c, false);
        if (inserted)
            it->second = pipelineWide(c);
        return it->second ? BubbleCause::FillDrain : BubbleCause::DpSync;
    }

private:
    bool pipelineWide(uint32_t c) const
    {
        if (!pipeline_.found)
            return false;
        const NcclOp* op = ctx_.ncclOf(c);
        const std::vector<int>* members = op && !op->groupRanks.empty() ? &op->groupRanks : nullptr;
        if (op && !members && !op->groupName.empty())
            for (const ProcessGroup& g : ctx_.trace.processGroups)
                if (g.rank == op->rank && g.name == op->groupName && !g.ranks.empty()) {
                    members = &g.ranks;
                    break;
                }
        if (!members)
            return pipeline_.dp <= 1;
        int stage = -1;
        for (int g : *members) {
            const RankData* m = ctx_.rankData(g);
            if (!m || m->stage < 0)
                continue;
            if (stage >= 0 && m->stage != stage)
                return true;
            stage = m->stage;
        }
        return false;
    }

    const Context& ctx_;
    const PipelineStructure& pipeline_;
    std::unordered_map<uint32_t, bool> wide_;
};

constexpr TimeNs kDependencySlackNs = 20'000;

// A rank's communication ops, for finding what each idle gap waited on.
// Gaps are explained in time order, so the communication ops that overlap a
// gap are kept in a sweep: ops join when they start before the gap's
// dependency and leave once they end. Walking back over every op within the
// longest op's duration instead is quadratic when one op spans the iteration.
class CommSweep {
public:
    CommSweep(const Context& ctx, const RankData& rd) : ctx_(ctx), byStart_(rd.comm), byEnd_(rd.comm)
    {
        std::sort(byEnd_.begin(), byEnd_.end(), [&](uint32_t x, uint32_t y) { return ctx_.act(x).end < ctx_.act(y).end; });
        for (uint32_t c : rd.comm)
            maxDuration_ = std::max(maxDuration_, ctx_.act(c).end - ctx_.act(c).start);
    }

    // The communication the kernel after gap [a, b) waited for: the end of
    // the latest op ending in (a, b + kDependencySlackNs] (one ending after
    // b must have run in the gap, and be late by at most a hundredth of its
    // length), at most b; a when none does. The slack takes a receive whose end was recorded a
    // few microseconds after the step it fed began (timer tables keep
    // seconds as 32-bit floats) as the step's dependency.
    TimeNs dependencyOf(TimeNs a, TimeNs b) const
    {
        auto e = std::upper_bound(byEnd_.begin(), byEnd_.end(), b + kDependencySlackNs,
                                  [&](TimeNs v, uint32_t c) { return v < ctx_.act(c).end; });
        while (e != byEnd_.begin()) {
            const Activity& g = ctx_.act(*--e);
            if (g.end <= a)
                break;
            // One ending after b: a long wait whose end was recorded a
            // little late (within a hundredth of its length), running in the gap.
            if (g.end <= b || (g.start < b && g.end - b <= (g.end - g.start) / 100))
                return std::min(g.end, b);
        }
        return a;
    }

    // The ops overlapping [a, dep), in start order; the list may hold ops
    // starting at or after dep further on.
    const std::vector<uint32_t>& overlapping(TimeNs a, TimeNs dep)
    {
        if (a < sweepAt_) {
            // Out of order (not expected): restart the sweep where the old walk would have.
            active_.clear();
            nextOp_ = static_cast<size_t>(std::lower_bound(byStart_.begin(), byStart_.end(), a - maxDuration_,
                                                           [&](uint32_t c, TimeNs v) { return ctx_.act(c).start < v; })
                                          - byStart_.begin());
        }
        sweepAt_ = a;
        std::erase_if(active_, [&](uint32_t c) { return ctx_.act(c).end <= a; });
        for (; nextOp_ < byStart_.size() && ctx_.act(byStart_[nextOp_]).start < dep; ++nextOp_)
            if (ctx_.act(byStart_[nextOp_]).end > a)
                active_.push_back(byStart_[nextOp_]);
        return active_;
    }

private:
    const Context& ctx_;
    std::vector<uint32_t> byStart_; // the rank's comm ops, start order
    std::vector<uint32_t> byEnd_;   // same, end order
    TimeNs maxDuration_ = 0;
    std::vector<uint32_t> active_;  // in start order
    size_t nextOp_ = 0;
    TimeNs sweepAt_ = std::numeric_limits<TimeNs>::min();
};

// The idle time of one rank in one iteration as its parts are found: summed
// by cause, gathered into fillable runs and, where the iteration's bubbles
// are wanted, appended to them (a part touching the last bubble of the same
// rank, iteration and cause extends it).
struct IdleParts {
    RankIdle idle;
    FillableRuns runs;
    std::vector<Bubble>* bubbles = nullptr; // null: the iteration's bubbles are not kept

    void add(const GapPart& p)
    {
        idle.byCause[static_cast<size_t>(p.cause)] += p.end - p.start;
        runs.add(p.start, p.end, p.cause);
        if (!bubbles)
            return;
        if (!bubbles->empty() && bubbles->back().rank == idle.rank && bubbles->back().iteration == idle.iteration
            && bubbles->back().end == p.start && bubbles->back().cause == p.cause) {
            bubbles->back().end = p.end;
            return;
        }
        bubbles->push_back({idle.iteration, idle.rank, p.start, p.end, p.cause});
    }

    // Cannot be needed with consistent inputs; keeps the totals exact regardless.
    void balance()
    {
        TimeNs sum = 0;
        for (TimeNs v : idle.byCause)
            sum += v;
        if (sum != idle.idleNs)
            idle.byCause[static_cast<size_t>(BubbleCause::Other)] += idle.idleNs - sum;
    }
};

// Explains the idle time of one rank, iteration after iteration.
class RankGaps {
public:
    RankGaps(const Context& ctx, const RankData& rd, const P2pSpeeds& speeds, CollectiveCauses& collectives, bool inPipeline)
        : ctx_(ctx), rd_(rd), speeds_(speeds), collectives_(collectives), sweep_(ctx, rd), inPipeline_(inPipeline)
    {
        for (uint32_t c : rd.comm)
            hasP2p_ = hasP2p_ || ctx.classOf(c) == WorkClass::P2p;
    }

    bool inPipeline() const { return inPipeline_; }

    // The rank's idle time in the iteration's window, by cause: the gaps of
    // its compute-busy union inside the window are the idle intervals.
    IdleParts explainWindow(const Iteration& it, RankShare& share, std::vector<Bubble>* bubbles)
    {
        const TimeNs ws = it.start, we = it.end;
        IdleParts parts;
        parts.bubbles = bubbles;
        RankIdle& ri = parts.idle;
        ri.iteration = it.index;
        ri.rank = rd_.rank;
        ri.stage = rd_.stage;
        ri.windowNs = we - ws;
        ri.busyNs = busyWithin(rd_.busy, ws, we);
        ri.idleNs = ri.windowNs - ri.busyNs;

        auto bi = std::lower_bound(rd_.busy.begin(), rd_.busy.end(), ws, [](const Interval& i, TimeNs v) { return i.end <= v; });
        TimeNs covered = ws;
        for (; bi != rd_.busy.end() && bi->start < we; ++bi) {
            if (bi->start > covered)
                explainGap(parts, share, covered, bi->start, nextKernelAt(bi->start));
            covered = std::max(covered, std::min(bi->end, we));
        }
        if (covered < we)
            explainGap(parts, share, covered, we, nullptr);
        parts.balance();
        return parts;
    }

private:
    // One idle gap [a, b) before compute kernel `next` (none for the trailing gap).
    void explainGap(IdleParts& parts, RankShare& share, TimeNs a, TimeNs b, const Activity* next)
    {
        Gap gap;
        gap.start = a;
        gap.end = b;
        gap.transfersRecorded = hasP2p_;
        TimeNs budget = 0;
        TimeNs* left = nullptr; // where the budget's unused part goes back
        if (inPipeline_) {
            const size_t step = share.stepAt(a, b);
            gap.beforeStep = next && step != std::string::npos;
            gap.afterLastStep = !share.starts.empty() && a >= share.lastEnd;
            if (!share.known) {
                budget = share.phases.inFillOrDrain(a, b) ? std::numeric_limits<TimeNs>::max() / 4 : 0;
            } else if (gap.afterLastStep) {
                left = &share.trailing;
            } else if (gap.beforeStep && step < share.budget.size()) {
                left = &share.budget[step];
            }
            if (left)
                budget = *left;
        }
        gap.dependency = sweep_.dependencyOf(a, b);
        gap.beforeKernel = next != nullptr;
        if (next)
            gap.nextLaunch = next->launchStart;
        ops_.clear();
        if (gap.dependency > a)
            for (uint32_t c : sweep_.overlapping(a, gap.dependency)) {
                if (ctx_.act(c).start >= gap.dependency)
                    break;
                ops_.push_back(gapOp(c));
            }
        // Step timings without kernel launches (imported timers): a receive
        // there spans the rank's wait as the timer or importer saw it, so
        // past the moment the producing step ended and its bytes could have
        // landed, the step was held by its own overhead, not its input.
        if (inPipeline_ && share.overheadShown && gap.beforeStep && !gap.nextLaunch && gap.dependency > a) {
            const size_t step = share.stepAt(a, b);
            if (step < share.inputReady.size() && share.inputReady[step] >= 0) {
                TimeNs transfer = 0;
                for (const GapOp& op : ops_)
                    transfer = std::max(transfer, op.p2p ? op.transferNs : 0);
                const TimeNs ready = std::max(a, share.inputReady[step] + transfer);
                if (ready < gap.dependency) {
                    gap.dependency = ready;
                    std::erase_if(ops_, [&](const GapOp& op) { return op.start >= ready; });
                }
            }
        }
        parts_.clear();
        classifyGap(gap, ops_, ctx_.options.launchGapNs, budget, parts_);
        if (left)
            *left = budget;
        for (const GapPart& p : parts_)
            parts.add(p);
    }

    GapOp gapOp(uint32_t c)
    {
        const Activity& a = ctx_.act(c);
        GapOp op;
        op.start = a.start;
        op.end = a.end;
        op.p2p = ctx_.classOf(c) == WorkClass::P2p;
        if (op.p2p)
            op.transferNs = speeds_.transferNeed(ctx_, c, rd_.rank);
        else
            op.cause = inPipeline_ ? collectives_.causeOf(c) : isAllToAll(ctx_, c) ? BubbleCause::AllToAll : BubbleCause::DpSync;
        return op;
    }

    const Activity* nextKernelAt(TimeNs when) const
    {
        auto k = std::lower_bound(rd_.compute.begin(), rd_.compute.end(), when,
                                  [&](uint32_t x, TimeNs v) { return ctx_.act(x).start < v; });
        return k == rd_.compute.end() ? nullptr : &ctx_.act(*k);
    }

    const Context& ctx_;
    const RankData& rd_;
    const P2pSpeeds& speeds_;
    CollectiveCauses& collectives_;
    CommSweep sweep_;
    const bool inPipeline_;
    bool hasP2p_ = false;
    std::vector<GapOp> ops_;     // the gap being explained, reused
    std::vector<GapPart> parts_; // same
};

bool takesPart(const Iteration& it, int rank)
{
    bool present = false;
    for (const auto& rs : it.ranks)
        present = present || rs.rank == rank;
    return present;
}

// Keeps, per (iteration, stage), the replica with the least fillable time.
void keepLeastFillable(std::map<std::pair<int, int>, FillableBubbles>& fillable, IdleParts& parts)
{
    FillableRuns& runs = parts.runs;
    runs.close();
    runs.sum.iteration = parts.idle.iteration;
    runs.sum.stage = parts.idle.stage;
    runs.sum.rank = parts.idle.rank;
    auto [f, inserted] = fillable.try_emplace({parts.idle.iteration, parts.idle.stage}, runs.sum);
    if (!inserted && runs.sum.totalNs < f->second.totalNs)
        f->second = runs.sum;
}

// The point-to-point transfers the rank received in the iteration, with what their bytes needed.
void recordTransfers(const Context& ctx, const RankData& rd, const Iteration& it, const P2pSpeeds& speeds,
                     std::vector<MeasuredTransfer>& transfers)
{
    for (uint32_t c : rd.comm) {
        if (ctx.classOf(c) != WorkClass::P2p)
            continue;
        const Activity& a = ctx.act(c);
        if (a.start < it.start || a.start >= it.end)
            continue;
        if (const auto ops = ctx.opsOf(c); ops.size() > 1) {
            // A coalesced batch: one transfer per receive in it.
            for (const NcclOp& op : ops)
                if (op.kind == Collective::Recv && op.peer)
                    transfers.push_back({*op.peer, rd.rank, op.bytes.value_or(0), speeds.transferNeed(ctx, c, rd.rank)});
            continue;
        }
        auto peer = ctx.peer(c);
        if (!peer || ctx.direction(c) == P2pDir::Send)
            continue;
        transfers.push_back({*peer, rd.rank, bytesOf(ctx, c), speeds.transferNeed(ctx, c, rd.rank)});
    }
}

} // namespace

void findBubbles(Context& ctx, AnalysisResult& out, const std::vector<Step>& steps, std::vector<Bubble>& bubbles)
{
    const P2pSpeeds speeds = observeP2pSpeeds(ctx);
    CollectiveCauses collectives(ctx, out.pipeline);
    auto shares = scheduleShares(out.pipeline, steps);
    // (iteration, stage) -> the replica with the least fillable time so far.
    std::map<std::pair<int, int>, FillableBubbles> fillable;

    for (const auto& rd : ctx.ranks) {
        RankGaps gaps(ctx, rd, speeds, collectives, out.pipeline.found && rd.stage >= 0);
        for (const Iteration& it : out.iterations) {
            if (!takesPart(it, rd.rank))
                continue;
            RankShare none;
            RankShare* share = &none;
            if (gaps.inPipeline())
                if (auto sit = shares.find({it.index, rd.rank}); sit != shares.end())
                    share = &sit->second;
            const bool wantBubbles = ctx.options.allIterations || it.index == out.selectedIteration;
            IdleParts parts = gaps.explainWindow(it, *share, wantBubbles ? &bubbles : nullptr);
            parts.idle.waitedOn.assign(share->waitedOn.begin(), share->waitedOn.end());
            out.idle.push_back(parts.idle);
            if (gaps.inPipeline())
                keepLeastFillable(fillable, parts);
            if (it.index == out.selectedIteration)
                recordTransfers(ctx, rd, it, speeds, out.transfers);
        }
    }
    for (auto& [key, f] : fillable)
        out.fillableBubbles.push_back(f);
}

} // namespace pipescope::detail
