#pragma once
// What the names of per-rank trace files say, whatever wrote them: the rank
// ("rank-3", as launchers and torch.profiler's worker names put it) and the
// host and process (torch.profiler.tensorboard_trace_handler's default).
// Pure functions, tested on their own.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pipescope {

// A rank number in a file name: "rank-3", "rank_3", "rank3", "RANK-3" (the last
// one wins when several appear); nullopt when there is none.
std::optional<int> rankFromFileName(std::string_view path);

// Host and process from the name torch.profiler.tensorboard_trace_handler
// gives its files by default: "<hostname>_<pid>.<milliseconds>.pt.trace.json[.gz]".
// Nothing when the name has another shape, or when its first part names a
// rank rather than a host (a worker_name like "rank3").
struct HostAndPid {
    std::string host;
    int64_t pid = 0;
};
std::optional<HostAndPid> hostFromFileName(std::string_view path);

} // namespace pipescope
