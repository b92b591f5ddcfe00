#include "model/Types.h"

#include <array>

namespace pipescope {

namespace {
constexpr std::array<std::string_view, 4> kActivity = {"kernel", "memcpy", "memset", "sync"};
constexpr std::array<std::string_view, 7> kCpu = {"annotation", "nvtx", "cpu_op", "runtime", "driver", "gpu_annotation", "other"};
constexpr std::array<std::string_view, 11> kCopy = {"unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
constexpr std::array<std::string_view, 3> kSeverity = {"info", "warning", "error"};
} // namespace

std::string_view toString(ActivityKind k) { return kActivity.at(static_cast<size_t>(k)); }
std::string_view toString(CpuRangeKind k) { return kCpu.at(static_cast<size_t>(k)); }
std::string_view toString(CopyKind k) { return kCopy.at(static_cast<size_t>(k)); }
std::string_view toString(Severity s) { return kSeverity.at(static_cast<size_t>(s)); }

std::optional<ActivityKind> activityKindFromString(std::string_view s)
{
    for (size_t i = 0; i < kActivity.size(); ++i)
        if (kActivity[i] == s)
            return static_cast<ActivityKind>(i);
    return std::nullopt;
}

std::optional<CpuRangeKind> cpuRangeKindFromString(std::string_view s)
{
    for (size_t i = 0; i < kCpu.size(); ++i)
        if (kCpu[i] == s)
            return static_cast<CpuRangeKind>(i);
    return std::nullopt;
}

} // namespace pipescope
