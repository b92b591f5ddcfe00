#pragma once
// The one clock of a capture: CLOCK_REALTIME in nanoseconds. CUPTI is told to
// use it too (cuptiActivityRegisterTimestampCallback), so CPU ranges, GPU
// activities and NCCL events of all processes on a host share it, and hosts
// are as close as their NTP synchronisation.
#include <cstdint>
#include <ctime>

namespace pipescope::collect {

inline int64_t nowNs()
{
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

} // namespace pipescope::collect
