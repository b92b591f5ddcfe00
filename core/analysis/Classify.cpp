#include "analysis/Classify.h"

#include "analysis/CommRules.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace pipescope {

namespace {

bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

bool iequalsPrefix(std::string_view s, std::string_view p)
{
    if (s.size() < p.size())
        return false;
    for (size_t i = 0; i < p.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(s[i])) != std::tolower(static_cast<unsigned char>(p[i])))
            return false;
    return true;
}

size_t ifind(std::string_view s, std::string_view p)
{
    if (p.size() > s.size())
        return std::string_view::npos;
    for (size_t i = 0; i + p.size() <= s.size(); ++i)
        if (iequalsPrefix(s.substr(i), p))
            return i;
    return std::string_view::npos;
}

} // namespace

HtaKernelKind htaKernelKind(std::string_view n)
{
    if (startsWith(n, "nccl") || startsWith(n, "hip") || startsWith(n, "hccl") || contains(n, "ncclKernel"))
        return HtaKernelKind::Communication;
    if (startsWith(n, "Memcpy") || startsWith(n, "hipMemcpy") || startsWith(n, "Memset") || startsWith(n, "hipMemset")
        || startsWith(n, "dma"))
        return HtaKernelKind::Memory;
    bool launch = false;
    if (startsWith(n, "cuda")) {
        launch = contains(n.substr(4), "LaunchKernel");
    }
    bool notCompute = startsWith(n, "nccl") || contains(n, "Memcpy") || contains(n, "Memset") || contains(n, "dma")
                      || contains(n, "Sync") || startsWith(n, "Stream Wait Event") || launch
                      || startsWith(n, "runFunction") || startsWith(n, "hip") || startsWith(n, "job_exe")
                      || startsWith(n, "packet") || startsWith(n, "pe_exe") || startsWith(n, "cpum_exe_subgraph")
                      || startsWith(n, "hccl") || startsWith(n, "collective_subgraph_execution");
    return notCompute ? HtaKernelKind::Other : HtaKernelKind::Computation;
}

bool isOptimizerKernel(std::string_view name)
{
    const std::string_view head = name.substr(0, 256);
    for (std::string_view w : {"multi_tensor_apply", "adam", "sgd", "optimizer", "adagrad", "rmsprop"})
        if (ifind(head, w) != std::string_view::npos)
            return true;
    // LAMB, but not the {lambda()#2} every elementwise kernel of PyTorch carries.
    for (size_t from = 0; from < head.size();) {
        const size_t at = ifind(head.substr(from), "lamb");
        if (at == std::string_view::npos)
            break;
        const size_t next = from + at + 4;
        if (!iequalsPrefix(head.substr(next), "da"))
            return true;
        from = next;
    }
    return false;
}

WorkClass classify(ActivityKind kind, std::string_view name, const NcclOp* nccl, const CommRules* rules)
{
    switch (kind) {
    case ActivityKind::Memcpy:
        return WorkClass::Memcpy;
    case ActivityKind::Memset:
        return WorkClass::Memset;
    case ActivityKind::Sync:
        return WorkClass::Sync;
    case ActivityKind::Kernel:
        break;
    }
    if (rules)
        if (auto m = rules->matchUser(name))
            return m->cls;
    if (nccl) {
        if (nccl->isP2p || isPointToPoint(nccl->kind))
            return WorkClass::P2p;
        return WorkClass::Collective;
    }
    if (const std::optional<Collective> op = collectiveFromKernelName(name))
        return isPointToPoint(*op) ? WorkClass::P2p : WorkClass::Collective;
    if (auto m = (rules ? *rules : CommRules::builtIn()).match(name))
        return m->cls;
    return WorkClass::Compute;
}

} // namespace pipescope
