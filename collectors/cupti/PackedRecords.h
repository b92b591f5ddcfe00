#pragma once
// Synthetic CUPTI buffers for the tests and the collector benchmark: records
// packed back to back, each of its kind's size. CUPTI's own layout is opaque
// (only cuptiActivityGetNextRecord knows it), so code that stores buffers takes
// the iterator as a parameter and these stand in for it.
#include <cupti_activity.h>

#include <cstddef>
#include <cstdint>

namespace pipescope::collect {

inline size_t packedRecordSize(uint32_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    default: return 0;
    }
}

// Same contract as cuptiActivityGetNextRecord: *rec null starts at the buffer.
inline bool nextPacked(uint8_t* buffer, size_t validSize, CUpti_Activity** rec)
{
    uint8_t* p = *rec ? reinterpret_cast<uint8_t*>(*rec) + packedRecordSize((*rec)->kind) : buffer;
    if (p >= buffer + validSize)
        return false;
    *rec = reinterpret_cast<CUpti_Activity*>(p);
    return true;
}

} // namespace pipescope::collect
