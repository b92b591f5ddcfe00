#pragma once
// Blocking point-to-point exchanges, the way Megatron-LM and
// torch.distributed.pipelining run them by default: after a step, a rank
// posts its sends and the receives for what comes next as one batch
// (batch_isend_irecv), and its compute stream waits until every message of
// the batch has moved. A message moves once both ends have posted, so a
// rank that finished early waits for its neighbour even to hand over an
// output. ExchangePlan says which batches each rank posts, and when; the
// what-if replay follows it when ReplayCosts::blockingExchanges is set
// (docs/whatif.md, "Exchanges"), and the analysis reads unannotated steps
// against it (docs/analysis.md).
#include "model/Schedule.h"

#include <vector>

namespace pipescope {

// One message between neighbouring virtual stages on different ranks: the
// activation stage -> stage + 1 or the gradient stage + 1 -> stage of one
// microbatch. Its id is ((boundary * microbatches) + microbatch) * 2 + (gradient ? 1 : 0).
struct ExchangeOp {
    int message = 0;
    bool send = false; // this rank's end: the send (true) or the receive
    // The step before which the rank's compute stream waits for this end to
    // complete; -1: the one after its batch (a blocking batch). Overlapped
    // exchanges wait later: a receive before the step that needs it, a send
    // before the step after the rank's next send.
    int waitBefore = -1;
};

struct ExchangeGroup {
    int afterStep = -1; // index into the rank's steps it follows; -1: before the first
    std::vector<ExchangeOp> ops;
};

struct ExchangePlan {
    // [rank]: its batches in program order (several may follow one step).
    std::vector<std::vector<ExchangeGroup>> ranks;
    int messages = 0; // ids run 0 .. messages - 1
};

// Megatron-LM's batches for 1F1B (receive before a warm-up forward and send
// after it; in the steady state the send of a forward's output goes with the
// receive of the next backward's gradient and the other way round) and for
// interleaved 1F1B (in the steady state one batch after each forward-backward
// pair: both outputs, the next forward's input and the next backward's
// gradient). Other schedules, and lists that do not follow Megatron's
// warm-up / steady / cool-down shape, get one batch after each step: its
// output and the next step's input, as torch.distributed.pipelining posts them.
ExchangePlan exchangePlan(const Schedule& schedule);

// Megatron-LM's exchanges as it runs them by default: for 1F1B the blocking
// batches above; for interleaved 1F1B with overlap_p2p_comm (its default
// there), blocking send_forward_recv_forward in the warm-up and
// send_backward_recv_backward in the cool-down, and in the steady state
// sends and receives posted after each step and waited for only where
// schedules.py waits: a receive before the step that needs it, a send after
// the rank's next send of the same direction. Other schedules get
// exchangePlan's batches.
ExchangePlan megatronExchangePlan(const Schedule& schedule);

// The step before which `op`, posted in `group`, is waited for.
inline int waitStep(const ExchangeGroup& group, const ExchangeOp& op)
{
    return op.waitBefore >= 0 ? op.waitBefore : group.afterStep + 1;
}

// Who sends message `message` of `schedule` to whom.
struct MessageEnds {
    int fromRank = 0, toRank = 0;
    int fromStage = 0, toStage = 0; // virtual stages
    int boundary = 0;               // the lower of the two
    int microbatch = 0;
    bool gradient = false;
};
MessageEnds messageEnds(const Schedule& schedule, int message);

} // namespace pipescope
