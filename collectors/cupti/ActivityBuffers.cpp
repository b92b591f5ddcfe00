#include "ActivityBuffers.h"

#include <cstdlib>
#include <cstring>

namespace pipescope::collect {

ActivityBufferPool::~ActivityBufferPool()
{
    for (uint8_t* b : all_)
        std::free(b);
}

void ActivityBufferPool::setLimit(size_t n)
{
    std::lock_guard lock(mutex_);
    limit_ = n;
}

size_t ActivityBufferPool::limit() const
{
    std::lock_guard lock(mutex_);
    return limit_;
}

size_t ActivityBufferPool::allocated() const
{
    std::lock_guard lock(mutex_);
    return all_.size();
}

size_t ActivityBufferPool::available() const
{
    std::lock_guard lock(mutex_);
    return free_.size();
}

uint8_t* ActivityBufferPool::allocate()
{
    // calloc: 16-byte aligned (CUPTI needs 8), and zero without a memset.
    auto* b = static_cast<uint8_t*>(std::calloc(1, bufferSize_));
    if (b)
        all_.push_back(b);
    return b;
}

size_t ActivityBufferPool::preallocate(size_t n)
{
    std::lock_guard lock(mutex_);
    while (free_.size() < n && all_.size() < limit_) {
        uint8_t* b = allocate();
        if (!b)
            break;
        // Fault the pages in now rather than on the thread CUPTI fills it from.
        std::memset(b, 0, bufferSize_);
        free_.push_back(b);
    }
    return free_.size();
}

uint8_t* ActivityBufferPool::acquire()
{
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
        uint8_t* b = free_.back();
        free_.pop_back();
        return b;
    }
    if (all_.size() >= limit_)
        return nullptr;
    return allocate();
}

void ActivityBufferPool::release(uint8_t* buffer)
{
    if (!buffer)
        return;
    std::memset(buffer, 0, bufferSize_);
    std::lock_guard lock(mutex_);
    free_.push_back(buffer);
}

int64_t storeBuffer(ActivityTranslator& translator, CaptureDb& db, uint8_t* buffer, size_t validSize,
                    NextRecordFn next)
{
    int64_t n = 0;
    CUpti_Activity* record = nullptr;
    while (next(buffer, validSize, &record)) {
        translator.store(record, db);
        ++n;
    }
    return n;
}

bool postCompletedBuffer(WriterThread& writer, ActivityBufferPool& pool, ActivityTranslator& translator,
                         NextRecordFn next, uint8_t* buffer, size_t validSize)
{
    if (!buffer)
        return true;
    if (validSize == 0) {
        pool.release(buffer);
        return true;
    }
    bool posted = writer.post(
        [&pool, &translator, next, buffer, validSize](CaptureDb& db) {
            // Back to the pool even when storing fails: a lost buffer is one
            // fewer for CUPTI, and once all are lost every record is dropped.
            struct GiveBack {
                ActivityBufferPool& pool;
                uint8_t* buffer;
                ~GiveBack() { pool.release(buffer); }
            } giveBack{pool, buffer};
            storeBuffer(translator, db, buffer, validSize, next);
        },
        "cupti_buffers", 0);
    if (!posted) {
        int64_t n = 0;
        CUpti_Activity* record = nullptr;
        while (next(buffer, validSize, &record))
            ++n;
        writer.countDropped("writer_queue", n);
        pool.release(buffer);
    }
    return posted;
}

} // namespace pipescope::collect
