#pragma once
// Steps of reading capture files that carry a rule of their own: the facts
// the merge reads from each file before importing any, the ranks it gives
// the files, and which NCCL kernel an NCCL operation ran as.
// Internal to import/capture/ (ImportCapture.cpp); declared here for tests.
#include "model/Types.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pipescope::capture::detail {

// One row of a capture file's nccl_comms: a communicator this process joined.
struct CommFacts {
    uint64_t hash = 0;
    std::string name;
    int nranks = 0;
    int rank = 0; // rank in the communicator
    std::optional<int> nnodes;
};

// What a capture file says about itself (meta, communicators, row counts).
struct FileFacts {
    std::string path;
    std::optional<int> rank, worldSize;
    std::string host, bootId, command, rankVar;
    std::optional<int64_t> pid;
    TimeNs startNs = 0, endNs = 0;
    std::vector<CommFacts> comms;
    int64_t gpuActivities = 0, ncclOps = 0;
};

// The global rank of each file (nullopt: left out). A file that names a rank
// keeps it; among claimants of one rank the file with the most records wins
// (ties: the earlier file). A second claimant and files without a rank get
// the next free ranks above the largest taken, in order of their start time.
// A file that recorded nothing and cannot keep a rank is left out. Each
// decision worth telling the user adds a line to `warnings`.
std::vector<std::optional<int>> assignRanks(const std::vector<FileFacts>& facts, std::vector<std::string>& warnings);

// An NCCL kernel as the GPU activities recorded it (activityId: its store row).
struct NcclKernel {
    int64_t activityId = 0;
    TimeNs start = 0, end = 0;
    int64_t streamId = 0;
};

// The runtime call that launched an NCCL kernel: call = (start, end) of the call.
struct NcclLaunch {
    std::pair<TimeNs, TimeNs> call;
    NcclKernel kernel;
};

// The kernel of the NCCL operation NCCL's profiler recorded over
// [enqueueStart, enqueueEnd] on the host: the one whose launch call is nearest
// to it (0 when they overlap). Only the launches either side of enqueueStart
// are looked at; on a tie the earlier one wins. `launches` must be sorted by
// call. nullptr when there are no launches.
const NcclKernel* nearestNcclLaunch(const std::vector<NcclLaunch>& launches, TimeNs enqueueStart, TimeNs enqueueEnd);

} // namespace pipescope::capture::detail
