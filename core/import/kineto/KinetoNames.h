#pragma once
// What Kineto's names and argument strings mean: element sizes of PyTorch
// dtypes, memcpy directions, rank numbers in file names. Pure functions, so they are tested on their own.
#include "model/Types.h"

#include <optional>
#include <string>
#include <string_view>

namespace pipescope::kineto {

// PyTorch's profiler names a module's forward call "nn.Module: <Class>_<n>"
// (n counts the instances of the class) in a python_function event.
inline constexpr std::string_view kModulePrefix = "nn.Module: ";

// NCCL operation names: model/Collective.h.

// Bytes per element of a PyTorch dtype as Kineto writes it ("Float", "BFloat16",
// "c10::Half", "Long", ...); nullopt when unknown.
std::optional<int> dtypeSize(std::string_view dtype);

// Direction of a copy from Kineto's memcpy name ("Memcpy HtoD (Pageable -> Device)")
// or a bare direction ("HtoD", as ROCm traces put in args.kind).
CopyKind copyKindFromName(std::string_view name);

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

} // namespace pipescope::kineto
