#pragma once
// Discrete-event replay of a schedule: each rank runs its steps in order on
// one compute stream; activations and gradients cross ranks as
// point-to-point transfers (latency + bytes / bandwidth), one at a time per
// link, overlapping compute. As with NCCL, a transfer starts as soon as the
// data is ready and the link is free; the first `eagerBytes` go into the
// receiver's buffer even before it has posted its receive (its previous step
// has ended), the rest (and its latency) only after. The sender computes on.
// At the end of the iteration each rank all-reduces its gradients across
// data-parallel replicas, joins the collective over all pipeline ranks (when
// there is one), then runs the optimizer. Idle compute time is attributed to
// the same bubble causes the analysis uses.
//
// With ReplayCosts::blockingExchanges the ranks exchange as Megatron-LM and
// torch.distributed.pipelining do by default instead (Exchanges.h): in
// batches after their steps, each batch holding the compute stream until
// both ends of every message in it have posted and the bytes have moved.
//
// Replay keeps its scratch buffers between runs: re-running on a schedule of
// the same size allocates nothing, so it can follow a mouse drag.
#include "model/Schedule.h"
#include "model/Exchanges.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace pipescope::whatif {

// The analysis's causes (model/Pipeline.h): a replay names idle time the way a measurement does.
using pipescope::BubbleCause;
inline constexpr int kBubbleCauseCount = kBubbleCauses;
using BubbleTotals = CauseTotals;

// Time of one step of one microbatch on one virtual stage.
struct StageCost {
    TimeNs forward = 0;
    TimeNs backward = 0;       // full backward (B)
    TimeNs backwardInput = 0;  // I
    TimeNs backwardWeight = 0; // W
};

struct ReplayCosts {
    std::vector<StageCost> stages;      // [virtual stage]
    std::vector<int64_t> boundaryBytes; // [s]: bytes between stage s and s + 1, each way, per microbatch
    TimeNs p2pLatencyNs = 0;
    double p2pBytesPerNs = 0.0;         // 0: transfers take only the latency
    int64_t eagerBytes = 0;             // sent before the receiver posts (NCCL's buffer); 0: none
    TimeNs launchGapNs = 0;             // host time between back-to-back steps on a rank
    // [rank][F, B]: the measured host gap before a step of that kind on the
    // rank (CostModel::stepGapNs); 0 or empty: launchGapNs.
    std::vector<std::array<TimeNs, 2>> stepGapNs;
    // [rank][F, B]: the gap before a step whose input the rank made itself,
    // where measured apart (CostModel::localStepGapNs); -1 or empty: stepGapNs.
    std::vector<std::array<TimeNs, 2>> localStepGapNs;
    // The host time a step of this kind waits on rank r after the rank's
    // previous step; `localInput`: its input was made on rank r (or it has none).
    TimeNs gapBefore(int rank, StepKind kind, bool localInput = false) const
    {
        if (localInput && rank >= 0 && static_cast<size_t>(rank) < localStepGapNs.size()) {
            const TimeNs g = localStepGapNs[static_cast<size_t>(rank)][kind == StepKind::F ? 0 : 1];
            if (g >= 0)
                return std::max(g, launchGapNs);
        }
        if (rank >= 0 && static_cast<size_t>(rank) < stepGapNs.size()) {
            const TimeNs g = stepGapNs[static_cast<size_t>(rank)][kind == StepKind::F ? 0 : 1];
            if (g > 0)
                return g;
        }
        return launchGapNs;
    }
    // The largest of them on rank r (idle up to it after a step is host time).
    TimeNs hostGapOf(int rank) const
    {
        if (rank >= 0 && static_cast<size_t>(rank) < stepGapNs.size())
            return std::max({launchGapNs, stepGapNs[static_cast<size_t>(rank)][0], stepGapNs[static_cast<size_t>(rank)][1]});
        return launchGapNs;
    }
    std::vector<TimeNs> allReduceNs;    // [rank] gradient all-reduce at the end (empty: none)
    // Collective over all pipeline ranks after the all-reduce (loss or
    // gradient-norm all-reduce, barrier): starts once every rank has joined.
    TimeNs pipelineSyncNs = 0;
    // [rank] when the rank can begin (post its first receive); empty: all at 0.
    std::vector<TimeNs> rankStartNs;
    std::vector<TimeNs> optimizerNs;    // [rank] optimizer step (empty: none)
    // Exchanges hold the compute stream (Exchanges.h): sends wait for their
    // receivers, and a step starts only once its rank's batch has moved,
    // exchangeGapNs later (the host's synchronize and launch). Off: sends
    // overlap compute and only receives hold a step.
    bool blockingExchanges = false;
    TimeNs exchangeGapNs = 0;
    // Exchanges as Megatron-LM issues them (megatronExchangePlan: for
    // interleaved 1F1B, overlapped in the steady state and blocking in the
    // warm-up and cool-down), replayed in time order. Outranks
    // blockingExchanges.
    bool megatronExchanges = false;
    // Under megatronExchanges: every transfer in flight shares one medium,
    // n at once each moving at 1/n of the speed (GPUs that exchange through
    // host memory or one PCIe switch); off: each direction between two ranks
    // is a link of its own.
    bool sharedLinks = false;
    // Uneven microbatches: each microbatch's own step times,
    // [virtual stage x microbatches + microbatch]; empty: every microbatch
    // costs stages[stage].
    std::vector<StageCost> microbatchCosts;

    TimeNs transferNs(int64_t bytes) const;
    // The part of a transfer that can only follow the receiver's post.
    TimeNs afterPostNs(int64_t bytes) const;
    TimeNs stepNs(int stage, StepKind kind) const;
    // The same for one microbatch of a schedule of `microbatches` (microbatchCosts when set).
    TimeNs stepNs(int stage, StepKind kind, int microbatch, int microbatches) const;
};

struct TimedAction {
    StepKind kind = StepKind::F;
    int stage = 0;
    int chunk = 0;
    int microbatch = 0;
    TimeNs start = 0;
    TimeNs end = 0;
};

struct TimedTransfer {
    int srcRank = 0;
    int dstRank = 0;
    int srcStage = 0;
    int dstStage = 0;
    int microbatch = 0;
    bool backward = false; // gradient (true) or activation (false)
    int64_t bytes = 0;
    TimeNs start = 0;
    TimeNs end = 0;
    // When each end posted: the sender (its data ready, or its batch under
    // blocking exchanges) and the receiver (its previous step ended, or its batch).
    TimeNs sendPost = 0;
    TimeNs recvPost = 0;
};

struct Bubble {
    TimeNs start = 0;
    TimeNs end = 0;
    BubbleCause cause = BubbleCause::Other;
};

struct RankReplay {
    std::vector<TimedAction> actions; // in execution order
    std::vector<Bubble> bubbles;      // filled when ReplayOptions::timeline
    TimeNs computeEnd = 0;            // end of the last step
    TimeNs allReduceStart = 0, allReduceEnd = 0;
    TimeNs syncStart = 0, syncEnd = 0; // pipeline-wide collective (joined .. left)
    TimeNs optimizerStart = 0, optimizerEnd = 0;
    TimeNs busyNs = 0;                // steps + optimizer
    BubbleTotals bubbleNs{};
};

struct ReplayResult {
    std::vector<RankReplay> ranks;
    std::vector<TimedTransfer> transfers; // filled when ReplayOptions::timeline
    TimeNs iterationNs = 0;
    // Ran with blocking exchanges' batches (ReplayCosts::blockingExchanges and
    // a plan that fits the order; otherwise sends overlapped compute).
    bool blockingExchanges = false;
    BubbleTotals bubbleNs{};              // summed over ranks
    double bubbleFraction = 0.0;          // idle / (ranks x iteration)
};

struct ReplayOptions {
    bool timeline = true; // record bubbles and transfers; off for searches
};

class Replay {
public:
    // Throws Error when the costs do not fit the schedule or the schedule deadlocks.
    void run(const Schedule& schedule, const ReplayCosts& costs, ReplayResult& out,
             const ReplayOptions& options = {});
    ReplayResult run(const Schedule& schedule, const ReplayCosts& costs, const ReplayOptions& options = {})
    {
        ReplayResult r;
        run(schedule, costs, r, options);
        return r;
    }

private:
    void reset(const Schedule& schedule, const ReplayCosts& costs, ReplayResult& out, const ReplayOptions& options);
    // Steps and transfers under the exchange plan the costs ask for
    // (megatronExchanges, then blockingExchanges): true when one ran to the
    // end; false when none is asked for or none fits, the scratch reset then.
    bool runPlannedExchanges(const Schedule& schedule, const ReplayCosts& costs, ReplayResult& out,
                             const ReplayOptions& options);
    // Steps and transfers with sends that overlap compute, each rank running
    // until an input is missing and woken when its producer has run.
    void runOverlapped(const Schedule& schedule, const ReplayCosts& costs, ReplayResult& out,
                       const ReplayOptions& options);
    // Steps and transfers under blocking exchanges; false when the plan deadlocks.
    bool runBlocking(const Schedule& schedule, const ReplayCosts& costs, const ExchangePlan& plan, ReplayResult& out,
                     const ReplayOptions& options);
    // runBlocking's steps: one rank until it waits (false when an input can
    // never come), one batch of it (false while a peer has yet to post), one
    // message once its posts are known.
    bool runBlockingRank(const Schedule& schedule, const ReplayCosts& costs, const ExchangePlan& plan,
                         ReplayResult& out, int rank);
    bool runBatch(const Schedule& schedule, const ReplayCosts& costs, const ExchangeGroup& group, int rank);
    void settleMessage(const Schedule& schedule, const ReplayCosts& costs, int message, int rank);
    // Puts a rank on the stack of ranks to run, once.
    void wake(int rank);
    // Steps and transfers in time order under a plan's posts and waits
    // (TimedExchanges.cpp); false when the plan deadlocks.
    bool runTimed(const Schedule& schedule, const ReplayCosts& costs, const ExchangePlan& plan, ReplayResult& out,
                  const ReplayOptions& options);
    // The timeline's transfers of a planned run (the messages that moved), by start.
    void recordPlannedTransfers(const Schedule& schedule, const ReplayCosts& costs, size_t messages,
                                ReplayResult& out) const;
    const ExchangePlan& planFor(const Schedule& schedule, bool megatron = false);

    // The exchange plan of the last schedule run with blocking exchanges.
    ExchangePlan plan_;
    ScheduleKind planKind_ = ScheduleKind::Custom;
    int planStages_ = 0;
    std::vector<int> planRankOfStage_;
    std::vector<std::vector<Action>> planRanks_;
    bool planValid_ = false;
    bool planMegatron_ = false;
    std::vector<TimeNs> sendPost_, recvPost_, moved_, sendDone_, recvDone_;
    std::vector<size_t> nextGroup_;
    std::vector<char> posted_, afterBatch_;
    std::vector<TimeNs> arriveF_, arriveG_, rankFree_, linkFree_, boundaryNs_, boundaryAfterPostNs_;
    std::vector<size_t> next_;
    std::vector<int> stack_;
    std::vector<char> inStack_;
};

} // namespace pipescope::whatif
