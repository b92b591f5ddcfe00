#pragma once
// The steps of CostModel::fromMeasured that read one quantity off a measured
// pipeline, each testable alone (tst_whatif_model).
#include "analysis/MeasuredPipeline.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace pipescope::whatif {

// A point-to-point link: a transfer of b bytes takes latencyNs + b / bytesPerNs.
struct P2pLink {
    TimeNs latencyNs = 0;
    double bytesPerNs = 0; // 0: transfers take only the latency
    int64_t bytes = 0;     // a message's size (the median measured)
};

// Fits latency + bytes / bandwidth to the transfers' kernel times (one
// message size: all of it bandwidth), then raises the latency to what the
// messages took to land where their receiver was already waiting: a
// rendezvous send (one that held its stream for at least half the
// receiver's wait) ends when its bytes landed, an eager one does not, and a
// send of exactly 1 ns is only implied. Starts from `link` (what is not
// measured stays).
P2pLink fitP2pLink(const std::vector<MeasuredTransfer>& transfers, const std::vector<MeasuredMessage>& messages,
                   P2pLink link);

// The host's launch gap: the smallest gap between two consecutive steps of a
// rank, the smallest over ranks; with blocking exchanges, gaps that hold an
// exchange do not count. nullopt without two consecutive steps.
std::optional<TimeNs> smallestStepGap(const MeasuredPipeline& measured);

} // namespace pipescope::whatif
