#pragma once
// How much memory this process may still use, for the checks made before a
// large job is read whole (so that it ends with advice, not the OOM killer).
#include <cstdint>
#include <optional>

namespace pipescope {

// MemAvailable, or less where a cgroup v2 limit (a Slurm job's, a
// container's) leaves less; PIPESCOPE_MEMORY_BUDGET (bytes) overrides both.
// nullopt when neither can be read.
std::optional<int64_t> availableMemory();

} // namespace pipescope
