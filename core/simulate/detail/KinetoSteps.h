#pragma once
// Steps of emitKineto (KinetoEmitter.cpp) worth testing alone
// (tst_trace_events). Internal to simulate/.
#include "model/Types.h"
#include "util/TraceEventWriter.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace pipescope::simulate::detail {

// A communication op's args as PyTorch's record_param_comms writes them, on
// the op and on its NCCL kernel. The views must outlive the write.
struct CommArgs {
    std::string_view collective;           // "Collective name": torch's name ("send", "allreduce", "coalesced")
    std::optional<int64_t> nelems;         // "In msg nelems" and "Out msg nelems", then "dtype": "BFloat16"
    int groupSize = 0;                     // "Group size"
    std::string_view groupName, groupDesc; // "Process Group Name" ("1"), "Process Group Description" ("pp")
    std::string_view groupRanks;           // "Process Group Ranks", a string: "[0, 2]"
    std::string_view peerKey;              // "Dst Rank" or "Src Rank"; empty for a collective
    int peer = 0;
};

// The args' members, in the profiler's order, into the open args object.
void writeCommArgs(TraceEventWriter& w, const CommArgs& c);

// The streams of a rank's NCCL kernels: stream 20, and for a kernel that
// would overlap one still running there (a send and a receive with different
// peers) the first of 21, 22, ... that is free by its start.
class CommStreams {
public:
    int pick(TimeNs start, TimeNs end);

private:
    std::vector<TimeNs> busyUntil_; // per stream from 20: when its last kernel ends
};

} // namespace pipescope::simulate::detail
