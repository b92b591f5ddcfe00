#pragma once
// When recording was on. API records are switched on for the whole run
// (CUPTI does not take a per-call selection made later), so the writer keeps
// only those that start inside a window: one check per API record, on the
// writer thread, that takes no lock while a window is open.
#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace pipescope::collect {

class RecordingWindows {
public:
    void open(int64_t start);
    // Closes the open window; returns it, or nothing when none was open.
    std::optional<std::pair<int64_t, int64_t>> close(int64_t end);
    bool contains(int64_t ts) const;
    bool isOpen() const { return openSince_.load(std::memory_order_acquire) != kClosed; }

private:
    static constexpr int64_t kClosed = std::numeric_limits<int64_t>::max();
    std::atomic<int64_t> openSince_{kClosed};
    mutable std::mutex mutex_;
    std::vector<std::pair<int64_t, int64_t>> closed_;
};

} // namespace pipescope::collect
