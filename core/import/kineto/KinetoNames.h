#pragma once
// What Kineto's names and argument strings mean: NCCL collective kinds,
// element sizes of PyTorch dtypes, memcpy directions, rank numbers in file
// names. Pure functions, so they are tested on their own.
#include "model/Types.h"

#include <optional>
#include <string>
#include <string_view>

namespace pipescope::kineto {

// PyTorch's profiler names a module's forward call "nn.Module: <Class>_<n>"
// (n counts the instances of the class) in a python_function event.
inline constexpr std::string_view kModulePrefix = "nn.Module: ";

// True for kernels that NCCL (or RCCL, which keeps NCCL's names) launches.
bool isNcclKernel(std::string_view kernelName);

// The collective a kernel name tells ("ncclKernel_AllReduce_RING_LL_Sum_float(...)"
// -> "AllReduce", "ncclDevKernel_SendRecv(...)" -> "SendRecv"); empty when the
// name does not say (e.g. NCCL >= 2.19's "ncclDevKernel_Generic").
std::string ncclKindFromKernelName(std::string_view kernelName);

// Normalises a `Collective name` argument or an "nccl:all_reduce" style op name
// ("allreduce", "_allgather_base", "reduce_scatter_tensor_coalesced", ...) to
// pipescope's kinds: AllReduce, AllGather, ReduceScatter, Broadcast, Reduce,
// AllToAll, Send, Recv, SendRecv, Barrier, Gather, Scatter. Unknown names are
// returned as written; empty input gives an empty result.
std::string normaliseCollective(std::string_view name);

// A normalised collective kind (AllReduce, AllToAll, Gather, ...): not Send, Recv or SendRecv.
bool isCollective(std::string_view kind);
bool isPointToPoint(std::string_view kind);

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
