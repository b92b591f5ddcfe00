#pragma once
// Long work in core (import, store load, analysis, auto-balance, search)
// reports how far it got and stops when asked. The CLI's progress line and
// the app's progress dialog with Cancel are two users of the same hooks.
#include "util/Error.h"

#include <atomic>
#include <functional>
#include <string_view>

namespace pipescope {

// Thrown from a checkpoint once a stop was requested; callers that started
// the work catch it and discard what was half done.
class Cancelled : public Error {
public:
    Cancelled() : Error("cancelled") {}
};

struct WorkControl {
    // phase: what is running ("loading activities"); fraction: 0..1 within it, < 0 when unknown.
    std::function<void(std::string_view phase, double fraction)> onProgress;
    const std::atomic<bool>* stop = nullptr;

    bool stopRequested() const { return stop && stop->load(std::memory_order_relaxed); }
    // Reports progress, then throws Cancelled when a stop was requested.
    void checkpoint(std::string_view phase, double fraction) const
    {
        if (onProgress)
            onProgress(phase, fraction);
        if (stopRequested())
            throw Cancelled();
    }
};

// For optional controls: does nothing when `work` is null.
inline void checkpoint(const WorkControl* work, std::string_view phase, double fraction = -1)
{
    if (work)
        work->checkpoint(phase, fraction);
}

} // namespace pipescope
