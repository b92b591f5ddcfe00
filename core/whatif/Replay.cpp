#include "whatif/Replay.h"
#include "model/ScheduleShare.h"
#include "whatif/detail/ReplaySteps.h"

#include "util/Error.h"
#include "util/Limits.h"

#include <string>

#include <algorithm>
#include <cmath>

namespace pipescope::whatif {

namespace {

// Times beyond the clock's range are refused by name; wrapped, they would look like a deadlock.
[[noreturn]] void tooLong(const std::string& what)
{
    throw Error("replay: " + what + " lies beyond the nanosecond clock (about 146 years); the costs are too large");
}

TimeNs transferTime(TimeNs latency, double bytes, double bytesPerNs)
{
    const double ns = static_cast<double>(latency) + bytes / bytesPerNs;
    if (!(ns <= static_cast<double>(kMaxTimeNs)))
        tooLong("a transfer of " + std::to_string(static_cast<int64_t>(bytes)) + " bytes");
    return latency + static_cast<TimeNs>(std::llround(bytes / bytesPerNs));
}

// a + b where both are at most kMaxTimeNs (so the sum cannot wrap), checked against the clock.
TimeNs later(TimeNs a, TimeNs b, const char* what, int rank)
{
    const TimeNs t = a + b;
    if (t > kMaxTimeNs)
        tooLong(std::string(what) + " of rank " + std::to_string(rank));
    return t;
}

} // namespace

TimeNs ReplayCosts::transferNs(int64_t bytes) const
{
    if (p2pBytesPerNs <= 0.0 || !std::isfinite(p2pBytesPerNs))
        return p2pLatencyNs;
    return transferTime(p2pLatencyNs, static_cast<double>(bytes), p2pBytesPerNs);
}

TimeNs ReplayCosts::afterPostNs(int64_t bytes) const
{
    if (eagerBytes > 0 && bytes <= eagerBytes)
        return 0;
    if (p2pBytesPerNs <= 0.0 || !std::isfinite(p2pBytesPerNs))
        return p2pLatencyNs;
    return transferTime(p2pLatencyNs, static_cast<double>(bytes) - static_cast<double>(eagerBytes), p2pBytesPerNs);
}

namespace {
TimeNs costOf(const StageCost& c, StepKind kind)
{
    switch (kind) {
    case StepKind::F: return c.forward;
    case StepKind::B: return c.backward;
    case StepKind::I: return c.backwardInput;
    case StepKind::W: return c.backwardWeight;
    }
    return 0;
}
} // namespace

TimeNs ReplayCosts::stepNs(int stage, StepKind kind) const
{
    return costOf(stages[static_cast<size_t>(stage)], kind);
}

TimeNs ReplayCosts::stepNs(int stage, StepKind kind, int microbatch, int microbatches) const
{
    if (microbatchCosts.empty())
        return stepNs(stage, kind);
    return costOf(microbatchCosts[static_cast<size_t>(stage) * static_cast<size_t>(microbatches) + static_cast<size_t>(microbatch)],
                  kind);
}

void Replay::reset(const Schedule& s, const ReplayCosts& costs, ReplayResult& out, const ReplayOptions& options)
{
    const int P = s.pp, S = s.stages, M = s.microbatches;
    const size_t SM = static_cast<size_t>(S) * static_cast<size_t>(M);
    arriveF_.assign(SM, -1);
    arriveG_.assign(SM, -1);
    rankFree_.assign(static_cast<size_t>(P), 0);
    for (size_t r = 0; r < rankFree_.size() && r < costs.rankStartNs.size(); ++r)
        rankFree_[r] = std::max<TimeNs>(0, costs.rankStartNs[r]);
    linkFree_.assign(static_cast<size_t>(P) * static_cast<size_t>(P), 0);
    next_.assign(static_cast<size_t>(P), 0);
    inStack_.assign(static_cast<size_t>(P), 1);
    stack_.clear();
    for (int r = P - 1; r >= 0; --r)
        stack_.push_back(r);

    out.ranks.resize(static_cast<size_t>(P));
    out.transfers.clear();
    if (options.timeline)
        out.transfers.reserve(s.actionCount()); // at most one per step
    for (int r = 0; r < P; ++r) {
        RankReplay& rr = out.ranks[static_cast<size_t>(r)];
        rr.actions.clear();
        rr.actions.reserve(s.ranks[static_cast<size_t>(r)].size());
        rr.bubbles.clear();
        rr.bubbleNs.fill(0);
    }
    // Per boundary, so the loop does no floating point.
    boundaryNs_.assign(S > 1 ? static_cast<size_t>(S - 1) : 0, costs.transferNs(0));
    boundaryAfterPostNs_.assign(boundaryNs_.size(), costs.afterPostNs(0));
    for (size_t b = 0; b < boundaryNs_.size() && b < costs.boundaryBytes.size(); ++b) {
        boundaryNs_[b] = costs.transferNs(costs.boundaryBytes[b]);
        boundaryAfterPostNs_[b] = costs.afterPostNs(costs.boundaryBytes[b]);
    }
}

const ExchangePlan& Replay::planFor(const Schedule& s, bool megatron)
{
    auto same = [&] {
        if (!planValid_ || planMegatron_ != megatron || planKind_ != s.kind || planStages_ != s.stages || planRankOfStage_ != s.rankOfStage ||
            planRanks_.size() != s.ranks.size())
            return false;
        for (size_t r = 0; r < s.ranks.size(); ++r) {
            const auto& a = planRanks_[r];
            const auto& b = s.ranks[r];
            if (a.size() != b.size())
                return false;
            for (size_t j = 0; j < a.size(); ++j)
                if (a[j].kind != b[j].kind || a[j].stage != b[j].stage || a[j].microbatch != b[j].microbatch)
                    return false;
        }
        return true;
    };
    if (!same()) {
        plan_ = megatron ? megatronExchangePlan(s) : exchangePlan(s);
        planMegatron_ = megatron;
        planKind_ = s.kind;
        planStages_ = s.stages;
        planRankOfStage_ = s.rankOfStage;
        planRanks_ = s.ranks;
        planValid_ = true;
    }
    return plan_;
}


namespace {

// A message's two ranks and the boundary it crosses.
struct Ends {
    int src, dst, boundary;
    bool gradient;
};

Ends endsOf(const Schedule& s, int m)
{
    const MessageEnds e = messageEnds(s, m);
    return Ends{e.fromRank, e.toRank, e.boundary, e.gradient};
}

} // namespace

void Replay::wake(int rank)
{
    if (!inStack_[static_cast<size_t>(rank)]) {
        inStack_[static_cast<size_t>(rank)] = 1;
        stack_.push_back(rank);
    }
}

// Moves message m once what it needs is known: the sender's post, and
// the receiver's too unless it fits the receiver's buffer.
void Replay::settleMessage(const Schedule& s, const ReplayCosts& costs, int m, int rank)
{
    const int P = s.pp;
    const size_t k = static_cast<size_t>(m);
    const TimeNs sPost = sendPost_[k], rPost = recvPost_[k];
    if (sPost < 0)
        return;
    const Ends e = endsOf(s, m);
    const TimeNs full = boundaryNs_[static_cast<size_t>(e.boundary)];
    const TimeNs afterPost = boundaryAfterPostNs_[static_cast<size_t>(e.boundary)];
    const int64_t bytes = static_cast<size_t>(e.boundary) < costs.boundaryBytes.size()
                              ? costs.boundaryBytes[static_cast<size_t>(e.boundary)]
                              : 0;
    // Beyond the receiver's buffer a message waits for its receive.
    const bool rendezvous = !(costs.eagerBytes > 0 && bytes <= costs.eagerBytes);
    if (moved_[k] < 0) {
        if (rendezvous && rPost < 0)
            return;
        TimeNs& link = linkFree_[static_cast<size_t>(e.src) * static_cast<size_t>(P) + static_cast<size_t>(e.dst)];
        TimeNs tStart = std::max(sPost, link);
        TimeNs tEnd = later(tStart, full, "a transfer", rank);
        if (rendezvous && later(rPost, afterPost, "a transfer", rank) > tEnd) {
            tEnd = rPost + afterPost;
            tStart = tEnd - full; // it moved once the receiver was there
        }
        link = std::max(tStart, tEnd - costs.p2pLatencyNs);
        moved_[k] = tStart;
        sendDone_[k] = tEnd;
    }
    if (recvDone_[k] < 0 && rPost >= 0)
        recvDone_[k] = std::max(sendDone_[k], rPost);
}

// Posts rank r's batch once (waking the peers it waits for), then settles
// its messages; false while one of them waits for a peer. Done, the batch
// holds the rank until the last of its ends.
bool Replay::runBatch(const Schedule& s, const ReplayCosts& costs, const ExchangeGroup& grp, int r)
{
    TimeNs& free = rankFree_[static_cast<size_t>(r)];
    if (!posted_[static_cast<size_t>(r)]) {
        posted_[static_cast<size_t>(r)] = 1;
        for (const ExchangeOp& op : grp.ops) {
            (op.send ? sendPost_ : recvPost_)[static_cast<size_t>(op.message)] = free;
            const Ends e = endsOf(s, op.message);
            wake(op.send ? e.dst : e.src);
        }
    }
    TimeNs end = free;
    bool done = true;
    for (const ExchangeOp& op : grp.ops) {
        settleMessage(s, costs, op.message, r);
        const TimeNs t = (op.send ? sendDone_ : recvDone_)[static_cast<size_t>(op.message)];
        if (t < 0)
            done = false;
        else
            end = std::max(end, t);
    }
    if (!done)
        return false;
    free = end;
    posted_[static_cast<size_t>(r)] = 0;
    afterBatch_[static_cast<size_t>(r)] = 1;
    return true;
}

// Rank r's batches and steps in order, until it waits for a peer or is done.
bool Replay::runBlockingRank(const Schedule& s, const ReplayCosts& costs, const ExchangePlan& plan, ReplayResult& out,
                             int r)
{
    const int S = s.stages, M = s.microbatches;
    const auto& list = s.ranks[static_cast<size_t>(r)];
    const auto& groups = plan.ranks[static_cast<size_t>(r)];
    size_t& n = next_[static_cast<size_t>(r)];
    size_t& g = nextGroup_[static_cast<size_t>(r)];
    RankReplay& rr = out.ranks[static_cast<size_t>(r)];
    TimeNs& free = rankFree_[static_cast<size_t>(r)];
    for (;;) {
        if (g < groups.size() && groups[g].afterStep < static_cast<int>(n)) {
            if (!runBatch(s, costs, groups[g], r))
                break; // woken when the peers post
            ++g;
            continue;
        }
        if (n >= list.size())
            break;
        const Action& a = list[n];
        const size_t key = static_cast<size_t>(a.stage) * static_cast<size_t>(M) + static_cast<size_t>(a.microbatch);
        // Input from another rank came with a batch; from this rank, its producer ran before.
        TimeNs ready = 0;
        if (a.kind == StepKind::F && a.stage > 0) {
            if (s.rankOfStage[static_cast<size_t>(a.stage - 1)] == r)
                ready = arriveF_[key - static_cast<size_t>(M)];
            else
                ready = recvDone_[static_cast<size_t>(((a.stage - 1) * M + a.microbatch) * 2)];
        } else if ((a.kind == StepKind::B || a.kind == StepKind::I) && a.stage < S - 1) {
            if (s.rankOfStage[static_cast<size_t>(a.stage + 1)] == r)
                ready = arriveG_[key + static_cast<size_t>(M)];
            else
                ready = recvDone_[static_cast<size_t>((a.stage * M + a.microbatch) * 2 + 1)];
        }
        if (ready < 0)
            return false; // nothing will bring it: the plan does not fit the order
        const TimeNs hold = afterBatch_[static_cast<size_t>(r)] ? costs.exchangeGapNs
                            : n > 0                          ? costs.gapBefore(r, a.kind, s.inputOnRank(a, r))
                                                             : 0;
        const TimeNs start = std::max(later(free, hold, "a step", r), ready);
        const TimeNs end = later(start, costs.stepNs(a.stage, a.kind, a.microbatch, M), "a step", r);
        rr.actions.push_back(TimedAction{a.kind, a.stage, s.chunkOfStage[static_cast<size_t>(a.stage)], a.microbatch,
                                         start, end});
        free = end;
        afterBatch_[static_cast<size_t>(r)] = 0;
        ++n;
        if (a.kind == StepKind::F)
            arriveF_[key] = end;
        else if (a.kind == StepKind::B || a.kind == StepKind::I)
            arriveG_[key] = end;
    }
    return true;
}

void Replay::recordPlannedTransfers(const Schedule& s, const ReplayCosts& costs, size_t messages, ReplayResult& out) const
{
    for (size_t k = 0; k < messages; ++k) {
        if (moved_[k] < 0)
            continue;
        const MessageEnds e = messageEnds(s, static_cast<int>(k));
        const int64_t bytes = static_cast<size_t>(e.boundary) < costs.boundaryBytes.size()
                                  ? costs.boundaryBytes[static_cast<size_t>(e.boundary)]
                                  : 0;
        out.transfers.push_back(TimedTransfer{e.fromRank, e.toRank, e.fromStage, e.toStage, e.microbatch, e.gradient,
                                              bytes, moved_[k], sendDone_[k], sendPost_[k], recvPost_[k]});
    }
    std::sort(out.transfers.begin(), out.transfers.end(),
              [](const TimedTransfer& a, const TimedTransfer& b) { return a.start < b.start; });
}

bool Replay::runBlocking(const Schedule& s, const ReplayCosts& costs, const ExchangePlan& plan, ReplayResult& out,
                         const ReplayOptions& options)
{
    const int P = s.pp;
    const size_t messages = static_cast<size_t>(std::max(0, plan.messages));
    sendPost_.assign(messages, -1);
    recvPost_.assign(messages, -1);
    moved_.assign(messages, -1);
    sendDone_.assign(messages, -1);
    recvDone_.assign(messages, -1);
    nextGroup_.assign(static_cast<size_t>(P), 0);
    posted_.assign(static_cast<size_t>(P), 0);
    afterBatch_.assign(static_cast<size_t>(P), 0);

    while (!stack_.empty()) {
        const int r = stack_.back();
        stack_.pop_back();
        inStack_[static_cast<size_t>(r)] = 0;
        if (!runBlockingRank(s, costs, plan, out, r))
            return false;
    }
    for (int r = 0; r < P; ++r)
        if (next_[static_cast<size_t>(r)] < s.ranks[static_cast<size_t>(r)].size() ||
            nextGroup_[static_cast<size_t>(r)] < plan.ranks[static_cast<size_t>(r)].size())
            return false;
    if (options.timeline)
        recordPlannedTransfers(s, costs, messages, out);
    return true;
}

namespace {

// Every cost within the clock, so that one addition of two never wraps.
void checkCost(TimeNs t, const char* what)
{
    if (t < 0 || t > kMaxTimeNs)
        throw Error(std::string("replay: ") + what + " (" + std::to_string(t) +
                    " ns) is negative or beyond the nanosecond clock (about 146 years); check the costs");
}

void checkStage(const StageCost& c)
{
    checkCost(c.forward, "a forward step");
    checkCost(c.backward, "a backward step");
    checkCost(c.backwardInput, "an input-gradient step");
    checkCost(c.backwardWeight, "a weight-gradient step");
}

// The costs describe the schedule's stages (and microbatches), each within the clock.
void checkCosts(const Schedule& s, const ReplayCosts& costs)
{
    const int S = s.stages, M = s.microbatches;
    if (static_cast<int>(costs.stages.size()) != S)
        throw Error("replay: the cost model has " + std::to_string(costs.stages.size()) + " stages, the schedule " +
                    std::to_string(S));
    if (!costs.microbatchCosts.empty() &&
        costs.microbatchCosts.size() != static_cast<size_t>(S) * static_cast<size_t>(M))
        throw Error("replay: the cost model has per-microbatch costs for " + std::to_string(costs.microbatchCosts.size()) +
                    " steps, the schedule " + std::to_string(S) + " stages x " + std::to_string(M) + " microbatches");
    for (const StageCost& c : costs.stages)
        checkStage(c);
    for (const StageCost& c : costs.microbatchCosts)
        checkStage(c);
    checkCost(costs.p2pLatencyNs, "the transfer latency");
    checkCost(costs.launchGapNs, "the launch gap");
    for (const auto& g : costs.stepGapNs)
        for (TimeNs x : g)
            checkCost(x, "a step's host gap");
    for (const auto& g : costs.localStepGapNs)
        for (TimeNs x : g)
            if (x != -1)
                checkCost(x, "a step's host gap");
    checkCost(costs.exchangeGapNs, "the exchange gap");
    checkCost(costs.pipelineSyncNs, "the pipeline-wide collective");
    for (TimeNs t : costs.allReduceNs)
        checkCost(t, "a gradient all-reduce");
    for (TimeNs t : costs.optimizerNs)
        checkCost(t, "an optimizer step");
    for (TimeNs t : costs.rankStartNs)
        checkCost(std::max<TimeNs>(0, t), "a rank's start");
}

// A rank that has steps left waits for something that never comes.
void throwIfDeadlocked(const Schedule& s, const std::vector<size_t>& next)
{
    for (int r = 0; r < s.pp; ++r) {
        const auto& list = s.ranks[static_cast<size_t>(r)];
        const size_t n = next[static_cast<size_t>(r)];
        if (n < list.size())
            throw Error("replay: the schedule deadlocks at rank " + std::to_string(r) + ", step " +
                        std::to_string(n + 1) + " (" + actionLabel(list[n]) + "); validate it first");
    }
}

// Iteration end: every rank's all-reduce, the pipeline-wide collective
// (once the last rank has joined) and the optimizer done. Returns when the
// last rank is done.
TimeNs endIteration(const ReplayCosts& costs, ReplayResult& out, int P)
{
    TimeNs iteration = 0, lastJoin = 0;
    for (int r = 0; r < P; ++r) {
        RankReplay& rr = out.ranks[static_cast<size_t>(r)];
        rr.computeEnd = rr.actions.empty() ? 0 : rr.actions.back().end;
        rr.allReduceStart = rr.computeEnd;
        rr.allReduceEnd = later(rr.allReduceStart, static_cast<size_t>(r) < costs.allReduceNs.size() ? costs.allReduceNs[static_cast<size_t>(r)] : 0, "the all-reduce", r);
        lastJoin = std::max(lastJoin, rr.allReduceEnd);
    }
    for (int r = 0; r < P; ++r) {
        RankReplay& rr = out.ranks[static_cast<size_t>(r)];
        rr.syncStart = rr.allReduceEnd;
        rr.syncEnd = costs.pipelineSyncNs > 0 ? later(lastJoin, costs.pipelineSyncNs, "the pipeline-wide collective", r) : rr.allReduceEnd;
        rr.optimizerStart = rr.syncEnd;
        rr.optimizerEnd = later(rr.optimizerStart, static_cast<size_t>(r) < costs.optimizerNs.size() ? costs.optimizerNs[static_cast<size_t>(r)] : 0, "the optimizer step", r);
        iteration = std::max(iteration, rr.optimizerEnd);
    }
    return iteration;
}

} // namespace

namespace {

// The replayed order with every step of a kind at the replay's median
// cost for it and free communication: the schedule's own idle.
ScheduleShare scheduleShareOf(const ReplayResult& out)
{
    // Past this many steps a replay keeps to its memory budget per step
    // (kReplayBytesPerStep): the region rule names fill and drain instead.
    constexpr size_t kMaxShareSteps = 1'000'000;
    size_t steps = 0;
    for (const RankReplay& rr : out.ranks)
        steps += rr.actions.size();
    if (steps > kMaxShareSteps)
        return {};
    std::vector<std::vector<Action>> order(out.ranks.size());
    std::array<std::vector<TimeNs>, 4> lengths;
    for (size_t r = 0; r < out.ranks.size(); ++r)
        for (const TimedAction& a : out.ranks[r].actions) {
            order[r].push_back({a.kind, a.stage, a.microbatch});
            lengths[static_cast<size_t>(a.kind) & 3].push_back(a.end - a.start);
        }
    std::array<TimeNs, 4> cost{};
    for (size_t k = 0; k < 4; ++k)
        if (!lengths[k].empty()) {
            auto mid = lengths[k].begin() + static_cast<std::ptrdiff_t>(lengths[k].size() / 2);
            std::nth_element(lengths[k].begin(), mid, lengths[k].end());
            cost[k] = *mid;
        }
    return scheduleShare(order, cost);
}

} // namespace

namespace detail {

// The analysis's launch-gap threshold (AnalysisOptions::launchGapNs).
constexpr TimeNs kLaunchGapNs = 30'000;

// Gaps before a rank's first step that is not a forward, or after its
// last forward, are the pipeline filling and draining; gaps in between
// are waits on a neighbour (imbalance or transfers). Up to one launch gap
// of each is host time.
void classifyIdle(RankReplay& rr, TimeNs hostGap, TimeNs iterationEnd, bool timeline, const std::vector<TimeNs>* fillBudget)
{
    auto addBubble = [&rr, timeline](TimeNs b, TimeNs e, BubbleCause c) {
        if (e <= b)
            return;
        rr.bubbleNs[static_cast<size_t>(c)] += e - b;
        if (timeline)
            rr.bubbles.push_back(Bubble{b, e, c});
    };
    const auto& acts = rr.actions;
    // Fill and drain by the analysis's rule (model/Pipeline.h).
    FillDrainBounds phases;
    for (const TimedAction& a : acts)
        phases.add(a.kind == StepKind::F, a.start, a.end);
    TimeNs busy = 0;
    TimeNs cursor = 0;
    for (size_t j = 0; j < acts.size(); ++j) {
        const TimedAction& a = acts[j];
        if (a.start > cursor) {
            const bool budgeted = fillBudget && j < fillBudget->size();
            TimeNs from = cursor;
            if (j > 0) {
                const TimeNs host = std::min(a.start - cursor, hostGap);
                // A host gap longer than a launch is the step's own overhead (the analysis's step_overhead).
                addBubble(cursor, cursor + host, host > kLaunchGapNs ? BubbleCause::StepOverhead : BubbleCause::LaunchGap);
                from = cursor + host;
            }
            if (budgeted) {
                const TimeNs fill = std::min(a.start - from, (*fillBudget)[j]);
                addBubble(from, from + fill, BubbleCause::FillDrain);
                addBubble(from + fill, a.start, BubbleCause::WaitNeighbor);
            } else {
                addBubble(from, a.start,
                          j == 0 || phases.inFillOrDrain(from, a.start) ? BubbleCause::FillDrain : BubbleCause::WaitNeighbor);
            }
        }
        busy += a.end - a.start;
        cursor = a.end;
    }
    addBubble(rr.allReduceStart, rr.allReduceEnd, BubbleCause::DpSync);
    // Waiting in a collective over the pipeline's ranks for the others to
    // finish their cool-down is pipeline drain, as the analysis names it.
    addBubble(rr.syncStart, rr.syncEnd, BubbleCause::FillDrain);
    busy += rr.optimizerEnd - rr.optimizerStart;
    if (fillBudget && fillBudget->size() > acts.size()) {
        // The schedule's own drain after the rank's last step (less what the
        // pipeline-wide collective took); beyond it, the stages still running.
        const TimeNs drain = std::clamp<TimeNs>(fillBudget->back() - (rr.syncEnd - rr.syncStart), 0, std::max<TimeNs>(0, iterationEnd - rr.optimizerEnd));
        addBubble(rr.optimizerEnd, rr.optimizerEnd + drain, BubbleCause::FillDrain);
        addBubble(rr.optimizerEnd + drain, iterationEnd, BubbleCause::WaitNeighbor);
    } else {
        addBubble(rr.optimizerEnd, iterationEnd, BubbleCause::FillDrain);
    }
    rr.busyNs = busy;
}

} // namespace detail

bool Replay::runPlannedExchanges(const Schedule& s, const ReplayCosts& costs, ReplayResult& out,
                                 const ReplayOptions& options)
{
    const int P = s.pp;
    bool blocked = false;
    if (costs.megatronExchanges && P > 1) {
        blocked = runTimed(s, costs, planFor(s, true), out, options);
        if (!blocked)
            reset(s, costs, out, options);
    }
    if (!blocked && costs.blockingExchanges && P > 1) {
        // Megatron's batches, else one batch per step, else (a custom order
        // no batching fits) sends that overlap compute.
        blocked = runBlocking(s, costs, planFor(s), out, options);
        if (!blocked) {
            reset(s, costs, out, options);
            Schedule generic = s;
            generic.kind = ScheduleKind::Custom;
            blocked = runBlocking(s, costs, exchangePlan(generic), out, options);
        }
        if (!blocked)
            reset(s, costs, out, options);
    }
    return blocked;
}

void Replay::runOverlapped(const Schedule& s, const ReplayCosts& costs, ReplayResult& out, const ReplayOptions& options)
{
    const int P = s.pp, S = s.stages, M = s.microbatches;
    while (!stack_.empty()) {
        const int r = stack_.back();
        stack_.pop_back();
        inStack_[static_cast<size_t>(r)] = 0;
        const auto& list = s.ranks[static_cast<size_t>(r)];
        size_t& n = next_[static_cast<size_t>(r)];
        RankReplay& rr = out.ranks[static_cast<size_t>(r)];
        TimeNs& free = rankFree_[static_cast<size_t>(r)];
        while (n < list.size()) {
            const Action& a = list[n];
            const size_t key = static_cast<size_t>(a.stage) * static_cast<size_t>(M) + static_cast<size_t>(a.microbatch);
            // Input from a neighbour stage: its producer's end time, then the
            // transfer, which starts once the data is ready and the link is
            // free; what does not fit the receiver's buffer follows its post
            // (this rank's previous step ended).
            TimeNs ready = 0;
            int srcStage = -1;
            if (a.kind == StepKind::F) {
                if (a.stage > 0) {
                    if ((ready = arriveF_[key - static_cast<size_t>(M)]) < 0)
                        break;
                    srcStage = a.stage - 1;
                }
            } else if (a.kind != StepKind::W) {
                if (a.stage < S - 1) {
                    if ((ready = arriveG_[key + static_cast<size_t>(M)]) < 0)
                        break;
                    srcStage = a.stage + 1;
                }
            }
            if (srcStage >= 0) {
                const int src = s.rankOfStage[static_cast<size_t>(srcStage)];
                if (src != r) {
                    const int boundary = std::min(a.stage, srcStage);
                    TimeNs& link = linkFree_[static_cast<size_t>(src) * static_cast<size_t>(P) + static_cast<size_t>(r)];
                    const TimeNs full = boundaryNs_[static_cast<size_t>(boundary)];
                    const TimeNs afterPost = boundaryAfterPostNs_[static_cast<size_t>(boundary)];
                    TimeNs tStart = std::max(ready, link);
                    const TimeNs tEnd = std::max(later(tStart, full, "a transfer", r), later(free, afterPost, "a transfer", r));
                    if (afterPost > 0 && tEnd > tStart + full)
                        tStart = tEnd - full; // it moved once the receiver was there
                    // Messages pipeline on a link: the next one's bytes may
                    // leave while this one's latency runs.
                    link = std::max(tStart, tEnd - costs.p2pLatencyNs);
                    if (options.timeline) {
                        const int64_t bytes = static_cast<size_t>(boundary) < costs.boundaryBytes.size()
                                                  ? costs.boundaryBytes[static_cast<size_t>(boundary)]
                                                  : 0;
                        out.transfers.push_back(TimedTransfer{src, r, srcStage, a.stage, a.microbatch,
                                                              a.kind != StepKind::F, bytes, tStart, tEnd, ready, free});
                    }
                    ready = tEnd;
                }
            }
            const TimeNs start =
                std::max(n > 0 ? later(free, costs.gapBefore(r, a.kind, s.inputOnRank(a, r)), "a step", r) : free, ready);
            const TimeNs end = later(start, costs.stepNs(a.stage, a.kind, a.microbatch, M), "a step", r);
            rr.actions.push_back(TimedAction{a.kind, a.stage, s.chunkOfStage[static_cast<size_t>(a.stage)], a.microbatch,
                                             start, end});
            free = end;
            ++n;

            // Output for a neighbour stage: record when it is ready and wake its rank.
            if (a.kind == StepKind::F && a.stage < S - 1) {
                arriveF_[key] = end;
                const int dst = s.rankOfStage[static_cast<size_t>(a.stage + 1)];
                if (dst != r)
                    wake(dst);
            } else if ((a.kind == StepKind::B || a.kind == StepKind::I) && a.stage > 0) {
                arriveG_[key] = end;
                const int dst = s.rankOfStage[static_cast<size_t>(a.stage - 1)];
                if (dst != r)
                    wake(dst);
            }
        }
    }
}

void Replay::run(const Schedule& s, const ReplayCosts& costs, ReplayResult& out, const ReplayOptions& options)
{
    const int P = s.pp;
    checkCosts(s, costs);
    reset(s, costs, out, options);
    const bool blocked = runPlannedExchanges(s, costs, out, options);
    out.blockingExchanges = blocked;
    if (!blocked)
        runOverlapped(s, costs, out, options);
    throwIfDeadlocked(s, next_);

    const TimeNs iteration = endIteration(costs, out, P);
    out.iterationNs = iteration;
    out.bubbleNs.fill(0);

    // Idle time by cause, per rank and summed; fill/drain is the schedule's
    // own share, as the analysis names it.
    ScheduleShare share = scheduleShareOf(out);
    TimeNs idleTotal = 0;
    for (int r = 0; r < P; ++r) {
        RankReplay& rr = out.ranks[static_cast<size_t>(r)];
        const TimeNs hostGap = blocked ? std::max(costs.hostGapOf(r), costs.exchangeGapNs) : costs.hostGapOf(r);
        std::vector<TimeNs>* budget = nullptr;
        if (share.complete && static_cast<size_t>(r) < share.idleBefore.size()) {
            budget = &share.idleBefore[size_t(r)];
            budget->push_back(share.idleAfter[size_t(r)]);
        }
        detail::classifyIdle(rr, hostGap, iteration, options.timeline, budget);
        for (int c = 0; c < kBubbleCauseCount; ++c) {
            out.bubbleNs[static_cast<size_t>(c)] += rr.bubbleNs[static_cast<size_t>(c)];
            idleTotal += rr.bubbleNs[static_cast<size_t>(c)];
        }
    }
    out.bubbleFraction = iteration > 0 && P > 0
                             ? static_cast<double>(idleTotal) / (static_cast<double>(iteration) * P)
                             : 0.0;
}

} // namespace pipescope::whatif
