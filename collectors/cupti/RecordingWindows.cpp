#include "RecordingWindows.h"

namespace pipescope::collect {

void RecordingWindows::open(int64_t start)
{
    std::lock_guard lock(mutex_);
    if (openSince_.load(std::memory_order_relaxed) == kClosed)
        openSince_.store(start, std::memory_order_release);
}

std::optional<std::pair<int64_t, int64_t>> RecordingWindows::close(int64_t end)
{
    std::lock_guard lock(mutex_);
    int64_t start = openSince_.load(std::memory_order_relaxed);
    if (start == kClosed)
        return std::nullopt;
    // The span is listed before the open mark goes, so contains() never
    // misses a time that was inside.
    closed_.emplace_back(start, end);
    openSince_.store(kClosed, std::memory_order_release);
    return closed_.back();
}

bool RecordingWindows::contains(int64_t ts) const
{
    if (ts >= openSince_.load(std::memory_order_acquire))
        return true;
    std::lock_guard lock(mutex_);
    for (auto& [s, e] : closed_)
        if (ts >= s && ts <= e)
            return true;
    return false;
}

} // namespace pipescope::collect
