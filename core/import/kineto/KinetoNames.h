#pragma once
// What Kineto's names and argument strings mean: element sizes of PyTorch
// dtypes, memcpy directions. Pure functions, so they are tested on their own.
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

// Ranks and hosts in file names: import/common/FileNames.h.

} // namespace pipescope::kineto
