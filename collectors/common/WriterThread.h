#pragma once
// The collectors' writer: producers (CUPTI's buffer callback, NCCL's event
// callbacks) post jobs; one thread runs them against the capture file in
// batched transactions. The queue is bounded: when full, a job is dropped and
// counted, never blocking the profiled program.
#include "CaptureDb.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace pipescope::collect {

class WriterThread {
public:
    using Job = std::function<void(CaptureDb&)>;

    WriterThread() = default;
    ~WriterThread();
    WriterThread(const WriterThread&) = delete;
    WriterThread& operator=(const WriterThread&) = delete;

    // Opens the file and starts the thread. `tick` runs on the writer thread
    // about every `period` (outside any lock), e.g. to ask CUPTI for its
    // completed buffers. Returns false with `error` set on failure.
    bool start(const std::string& path, const ProcessMeta& meta, std::string& error,
               std::function<void()> tick = {}, std::chrono::milliseconds period = std::chrono::milliseconds(1000),
               size_t maxQueued = 4096);
    bool running() const { return running_.load(); }

    // Queues a job; returns false (and counts it under `dropSource`) when the
    // queue is full or the writer is not running. `weight` is the number of
    // records the job holds, for the drop count.
    bool post(Job job, const char* dropSource = "writer_queue", int64_t weight = 1);
    // Counts records lost before they reached the writer; stored with the next batch.
    void countDropped(const char* source, int64_t n);

    // Waits until every job posted before the call is committed, at most `timeout`.
    bool flush(std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));
    // Runs the remaining jobs, records the end time, closes the file and joins.
    void stop(std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

private:
    void run();

    CaptureDb db_;
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    std::deque<Job> queue_;
    size_t maxQueued_ = 4096;
    uint64_t posted_ = 0, completed_ = 0;
    bool stopping_ = false;
    std::atomic<bool> running_{false};
    std::function<void()> tick_;
    std::chrono::milliseconds period_{1000};
    // Dropped before reaching the file; written by the thread.
    std::mutex dropMutex_;
    std::vector<std::pair<std::string, int64_t>> pendingDrops_;
};

} // namespace pipescope::collect
