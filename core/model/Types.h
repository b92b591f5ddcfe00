#pragma once
// The vocabulary shared by the store, the importers and the analysis.
// All times are integer nanoseconds on the job's one aligned clock.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pipescope {

using TimeNs = int64_t;
using StringId = int64_t; // row id in the store's `strings` table; 0 = none

enum class ActivityKind : uint8_t { Kernel = 0, Memcpy = 1, Memset = 2, Sync = 3 };

enum class CpuRangeKind : uint8_t {
    Annotation = 0, // user annotations (Kineto user_annotation, record_function)
    Nvtx = 1,       // NVTX push/pop or start/end range
    CpuOp = 2,      // framework operator (Kineto cpu_op)
    Runtime = 3,    // CUDA/HIP runtime API call
    Driver = 4,     // CUDA driver API call
    GpuAnnotation = 5, // annotation drawn on a GPU stream (Kineto gpu_user_annotation)
    Other = 6,
};

// Memcpy direction, CUPTI's numbering (CUpti_ActivityMemcpyKind).
enum class CopyKind : uint8_t { Unknown = 0, HtoD = 1, DtoH = 2, HtoA = 3, AtoH = 4, AtoA = 5, AtoD = 6, DtoA = 7, DtoD = 8, HtoH = 9, PtoP = 10 };

enum class Severity : uint8_t { Info = 0, Warning = 1, Error = 2 };

std::string_view toString(ActivityKind k);
std::string_view toString(CpuRangeKind k);
std::string_view toString(CopyKind k);
std::string_view toString(Severity s);
std::optional<ActivityKind> activityKindFromString(std::string_view s);
std::optional<CpuRangeKind> cpuRangeKindFromString(std::string_view s);

} // namespace pipescope
