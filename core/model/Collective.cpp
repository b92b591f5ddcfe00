#include "model/Collective.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

namespace pipescope {

namespace {

char asciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
bool isAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool startsWithNoCase(std::string_view s, std::string_view p)
{
    if (s.size() < p.size())
        return false;
    for (size_t i = 0; i < p.size(); ++i)
        if (asciiLower(s[i]) != asciiLower(p[i]))
            return false;
    return true;
}

// `needle` in lower case. ASCII only: kernel names are ASCII, and a locale
// lookup per byte showed in profiles (every kernel name is searched).
size_t findNoCase(std::string_view hay, std::string_view needle)
{
    if (needle.size() > hay.size())
        return std::string_view::npos;
    for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
        size_t k = 0;
        while (k < needle.size() && asciiLower(hay[i + k]) == needle[k])
            ++k;
        if (k == needle.size())
            return i;
    }
    return std::string_view::npos;
}

struct Spelling {
    Collective kind;
    std::string_view store; // the store's spelling, and NCCL's in kernel names
    std::string_view torch; // PyTorch's `Collective name`
};

// Indexed by the enum's value.
constexpr std::array<Spelling, 15> kSpellings{{
    {Collective::Unknown, "Unknown", "unknown"},
    {Collective::AllReduce, "AllReduce", "allreduce"},
    {Collective::AllGather, "AllGather", "allgather"},
    {Collective::ReduceScatter, "ReduceScatter", "reduce_scatter"},
    {Collective::AllToAll, "AllToAll", "all_to_all"},
    {Collective::Broadcast, "Broadcast", "broadcast"},
    {Collective::Reduce, "Reduce", "reduce"},
    {Collective::Gather, "Gather", "gather"},
    {Collective::Scatter, "Scatter", "scatter"},
    {Collective::Barrier, "Barrier", "barrier"},
    {Collective::Send, "Send", "send"},
    {Collective::Recv, "Recv", "recv"},
    {Collective::SendRecv, "SendRecv", "sendrecv"},
    {Collective::Coalesced, "Coalesced", "coalesced"},
    {Collective::Generic, "Generic", "generic"},
}};

// Operations as they start a kernel name's operation part, longest first so
// "ReduceScatter" wins over "Reduce" and "SendRecv" over "Send".
constexpr std::array<Collective, 12> kKernelOps = {
    Collective::ReduceScatter, Collective::AllReduce, Collective::AllGather, Collective::AllToAll,
    Collective::Broadcast,     Collective::SendRecv,  Collective::Generic,   Collective::Reduce,
    Collective::Send,          Collective::Recv,      Collective::Gather,    Collective::Scatter,
};

Collective kernelOpAt(std::string_view rest)
{
    for (Collective op : kKernelOps)
        if (startsWithNoCase(rest, toString(op)))
            return op;
    return Collective::Unknown;
}

} // namespace

std::string_view toString(Collective c)
{
    const auto i = static_cast<size_t>(c);
    return i < kSpellings.size() ? kSpellings[i].store : std::string_view("Unknown");
}

Collective collectiveFromKind(std::string_view kind)
{
    for (const Spelling& s : kSpellings)
        if (kind.size() == s.store.size() && startsWithNoCase(kind, s.store))
            return s.kind;
    return Collective::Unknown;
}

Collective collectiveFromCallName(std::string_view name)
{
    // Letters only, lower case: "all_reduce", "AllReduce" and
    // "_allreduce_base" all read "allreduce...".
    std::string key;
    key.reserve(name.size());
    for (char c : name)
        if (isAsciiAlpha(c))
            key.push_back(asciiLower(c));
    if (key.rfind("nccl", 0) == 0)
        key.erase(0, 4);
    // Longer names that contain shorter ones come first; "coalesced" last, so
    // "reduce_scatter_tensor_coalesced" is a reduce-scatter.
    static constexpr std::array<std::pair<std::string_view, Collective>, 13> kNames{{
        {"allreduce", Collective::AllReduce},
        {"allgather", Collective::AllGather},
        {"reducescatter", Collective::ReduceScatter},
        {"alltoall", Collective::AllToAll},
        {"broadcast", Collective::Broadcast},
        {"sendrecv", Collective::SendRecv},
        {"barrier", Collective::Barrier},
        {"gather", Collective::Gather},
        {"scatter", Collective::Scatter},
        {"reduce", Collective::Reduce},
        {"send", Collective::Send},
        {"recv", Collective::Recv},
        {"coalesced", Collective::Coalesced},
    }};
    if (key.empty())
        return Collective::Unknown;
    for (const auto& [needle, kind] : kNames)
        if (key.find(needle) != std::string::npos)
            return kind;
    return Collective::Unknown;
}

bool isNcclKernelName(std::string_view name)
{
    // Every kernel name is tested, and demangled names run to hundreds of
    // bytes: four bytes are compared at once. Setting bit 5 of each byte
    // lowers 'N', 'C' and 'L', and only those letters and their lower case
    // become "nccl", so the test is exactly findNoCase(name, "nccl").
    constexpr uint32_t kCaseBits = 0x20202020u;
    uint32_t want = 0;
    std::memcpy(&want, "nccl", 4);
    const char* p = name.data();
    for (size_t i = 0; i + 4 <= name.size(); ++i) {
        uint32_t word = 0;
        std::memcpy(&word, p + i, 4);
        if ((word | kCaseBits) == want)
            return true;
    }
    return false;
}

std::optional<Collective> collectiveFromKernelName(std::string_view name)
{
    // Demangled names may carry "void " or a namespace before the kernel.
    for (std::string_view marker : {"ncclDevKernel_", "ncclKernel_", "ncclDevKernelDebug_", "ncclKernelDebug_"}) {
        const size_t at = name.find(marker);
        if (at != std::string_view::npos)
            return kernelOpAt(name.substr(at + marker.size()));
    }
    // NCCL before 2.6 and RCCL: nccl<Op>...Kernel..., e.g.
    // ncclAllReduceRingLLKernel_sum_f32, ncclSendRecvKernel_copy_i8.
    const size_t at = findNoCase(name, "nccl");
    if (at == std::string_view::npos || findNoCase(name, "kernel") == std::string_view::npos)
        return std::nullopt;
    return kernelOpAt(name.substr(at + 4));
}

bool isPointToPoint(Collective c)
{
    return c == Collective::Send || c == Collective::Recv || c == Collective::SendRecv;
}

bool isGroupCollective(Collective c)
{
    return c >= Collective::AllReduce && c <= Collective::Barrier;
}

std::string ncclKernelName(Collective c, std::string_view variant)
{
    std::string name = "ncclDevKernel_";
    name += toString(c);
    if (!variant.empty()) {
        name += '_';
        name += variant;
    }
    name += "(ncclDevKernelArgsStorage<4096ul>)";
    return name;
}

std::string_view torchCollectiveName(Collective c)
{
    const auto i = static_cast<size_t>(c);
    return i < kSpellings.size() ? kSpellings[i].torch : std::string_view("unknown");
}

} // namespace pipescope
