#include "util/Memory.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace pipescope {

namespace {

std::optional<int64_t> readNumber(const std::string& path, const std::string& key = {})
{
    std::ifstream f(path);
    for (std::string line; std::getline(f, line);) {
        if (!key.empty() && line.rfind(key, 0) != 0)
            continue;
        std::istringstream is(key.empty() ? line : line.substr(key.size()));
        int64_t v = 0;
        if (is >> v)
            return v;
        return std::nullopt; // "max": no limit
    }
    return std::nullopt;
}

} // namespace

std::optional<int64_t> availableMemory()
{
    if (const char* budget = std::getenv("PIPESCOPE_MEMORY_BUDGET")) {
        char* end = nullptr;
        const long long v = std::strtoll(budget, &end, 10);
        if (end != budget && *end == '\0' && v > 0)
            return v;
    }
    std::optional<int64_t> available;
    if (auto kb = readNumber("/proc/meminfo", "MemAvailable:"))
        available = *kb * 1024;
    // cgroup v2 (a Slurm job step, a container): its limit less what it
    // uses, not counting the page cache (which the kernel gives back).
    if (auto limit = readNumber("/sys/fs/cgroup/memory.max")) {
        const int64_t current = readNumber("/sys/fs/cgroup/memory.current").value_or(0);
        const int64_t cache = readNumber("/sys/fs/cgroup/memory.stat", "file ").value_or(0);
        const int64_t used = std::max<int64_t>(0, current - cache);
        const int64_t left = std::max<int64_t>(0, *limit - used);
        available = available ? std::min(*available, left) : left;
    }
    return available;
}

} // namespace pipescope
