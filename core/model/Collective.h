#pragma once
// NCCL's operations, and every way a trace names them: the kind a store
// records ("AllReduce"), the names PyTorch gives its calls ("all_reduce",
// "_allgather_base", "nccl:all_to_all") and the names NCCL and RCCL give
// their kernels ("ncclDevKernel_SendRecv(...)", "ncclAllReduceRingLLKernel").
// The one place that knows them: importers, the analysis and the emitter all
// ask here.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pipescope {

enum class Collective : uint8_t {
    Unknown = 0,   // an operation whose name says nothing known
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
    Gather,
    Scatter,
    Barrier,
    Send,
    Recv,
    SendRecv,      // one kernel running sends and receives (NCCL's point-to-point and all-to-all kernel)
    Coalesced,     // PyTorch's coalesced batch: the operations are the calls before it
    Generic,       // NCCL >= 2.19's ncclDevKernel_Generic: the kernel does not say
};

// The store's spelling: "AllReduce", "SendRecv", ... ("Unknown" for Unknown).
std::string_view toString(Collective c);

// A kind as the store and toString spell it, any letter case; Unknown for
// anything else.
Collective collectiveFromKind(std::string_view kind);

// The kind a call's name names: PyTorch's `Collective name` argument
// ("allreduce", "_allgather_base", "reduce_scatter_tensor_coalesced"), an op
// name after its "nccl:" or "c10d::" prefix, or NCCL's own spelling. Compared
// on letters alone, any case. Unknown when no kind is named.
Collective collectiveFromCallName(std::string_view name);

// True for kernels NCCL (or RCCL, which keeps NCCL's names) launches: the
// name holds "nccl" in any case.
bool isNcclKernelName(std::string_view kernelName);

// The operation a NCCL or RCCL kernel's name runs: ncclKernel_<Op>...,
// ncclDevKernel_<Op>... (also their Debug_ variants; "void " or a namespace
// may come first) and the older nccl<Op>...Kernel... names. Generic for
// ncclDevKernel_Generic, Unknown for a NCCL kernel whose operation cannot be
// read, nothing when the name is not a NCCL kernel's.
std::optional<Collective> collectiveFromKernelName(std::string_view kernelName);

// Send, Recv and SendRecv.
bool isPointToPoint(Collective c);
// An operation over a whole group: AllReduce through Barrier.
bool isGroupCollective(Collective c);

// A kernel name as NCCL >= 2.12 writes it, for traces pipescope writes
// itself: "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", or
// with a reduction, element type and algorithm,
// "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)".
std::string ncclKernelName(Collective c, std::string_view variant = {});

// The `Collective name` PyTorch records for a call: "allreduce", "send",
// "coalesced", ...
std::string_view torchCollectiveName(Collective c);

} // namespace pipescope
