#pragma once
// CUPTI's activity buffers, from the moment CUPTI asks for one (on whichever
// program thread needs it) to the moment the writer thread has stored its
// records and hands it back. Nothing here calls CUPTI: the record iterator is
// passed in, so tests and bench/bench_collector.cpp drive the same path with
// CUPTI-shaped records.
#include "ActivityRecords.h"
#include "WriterThread.h"

#include <cupti_activity.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace pipescope::collect {

// A bounded pool of zeroed buffers. CUPTI is told (ZEROED_OUT_ACTIVITY_BUFFER)
// that they come zeroed, so the program's thread that asks for one neither
// zeroes 4 MiB nor faults in fresh pages: buffers are touched at start-up
// and the writer thread zeroes a buffer when it returns it.
class ActivityBufferPool {
public:
    static constexpr size_t kBufferSize = 4u << 20; // CUPTI's sweet spot; Kineto uses the same

    explicit ActivityBufferPool(size_t bufferSize = kBufferSize) : bufferSize_(bufferSize) {}
    ~ActivityBufferPool();
    ActivityBufferPool(const ActivityBufferPool&) = delete;
    ActivityBufferPool& operator=(const ActivityBufferPool&) = delete;

    void setLimit(size_t n);
    size_t limit() const;
    size_t bufferSize() const { return bufferSize_; }
    // Allocates and touches buffers until `n` are free (within the limit);
    // returns how many are free.
    size_t preallocate(size_t n);
    // A zeroed buffer of bufferSize() bytes, or nullptr when `limit` are in
    // flight (CUPTI then drops records and counts them).
    uint8_t* acquire();
    // Takes a buffer back, zeroed again: all of it, since CUPTI does not
    // promise to have written only within the valid size it reported.
    void release(uint8_t* buffer);

    size_t allocated() const;
    size_t available() const;

private:
    uint8_t* allocate();

    const size_t bufferSize_;
    mutable std::mutex mutex_;
    std::vector<uint8_t*> free_, all_;
    size_t limit_ = 64;
};

// Iterates a completed buffer: cuptiActivityGetNextRecord in the collector.
using NextRecordFn = bool (*)(uint8_t* buffer, size_t validSize, CUpti_Activity** record);

// Stores every record of a buffer; returns how many were read.
int64_t storeBuffer(ActivityTranslator& translator, CaptureDb& db, uint8_t* buffer, size_t validSize,
                    NextRecordFn next);

// What CUPTI's buffer-completed callback does with a buffer: queue it for the
// writer thread, which stores its records and returns it to the pool. When
// the writer cannot take it, its records are counted as dropped and the
// buffer goes straight back. Returns whether the writer took it.
bool postCompletedBuffer(WriterThread& writer, ActivityBufferPool& pool, ActivityTranslator& translator,
                         NextRecordFn next, uint8_t* buffer, size_t validSize);

} // namespace pipescope::collect
