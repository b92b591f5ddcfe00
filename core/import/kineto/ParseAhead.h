#pragma once
// Parses a job's Kineto files on worker threads, ahead of the one thread that
// writes the store. A worker queues a file's records in a few batches and
// waits when the writer is behind: when its file's queue is full, or when
// the queues of all files together hold as many batches as the workers may
// (the file the writer is on excepted, so that it always goes on). Memory
// stays bounded whatever the size and the number of the files. The writer
// takes the files in their order and writes each file's batches in the
// order they were made, so the store is the same as a serial import makes:
// same rows, ids, diagnostics. A file that cannot be parsed fails when the
// writer reaches it, after the files before it, as in a serial import.
// Progress and cancellation are reported on the writing thread (the only one
// that calls WorkControl::onProgress); workers only read its stop flag.
#include "import/Import.h"
#include "import/kineto/KinetoImport.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pipescope::kineto {

class ParseAhead {
public:
    // Batches queued per file before its worker waits for the writer: a few
    // megabytes (RecordBatch.h), enough to keep the writer busy between
    // handovers. All files together hold at most this many per worker.
    static constexpr size_t kQueuedBatches = 8;

    // files: the job's inputs in import order; those with parse[i] set are
    // parsed here, by `threads` workers.
    ParseAhead(const std::vector<std::string>& files, const std::vector<bool>& parse, const ImportOptions& options,
               int threads, size_t queuedBatches = kQueuedBatches);
    ~ParseAhead(); // stops the workers and waits for them
    ParseAhead(const ParseAhead&) = delete;
    ParseAhead& operator=(const ParseAhead&) = delete;

    // On the writing thread, file by file in their order: writes file i's
    // batches as they come, then finishes the file (KinetoFileImport).
    ImportedSource import(size_t i, StoreWriter& writer);

    // The most batches queued at once over all files so far: at most the
    // workers' share (queuedBatches per worker) plus the writer's file's.
    size_t peakQueued();

private:
    struct File {
        std::string path;
        std::unique_ptr<KinetoFileImport> import;
        std::deque<RecordBatch> queue;
        bool parsed = false;
        std::exception_ptr error;
    };
    void work();
    void hand(File& file, RecordBatch& batch);
    void stopWorkers();

    ImportOptions options_;
    size_t queuedBatches_;
    std::vector<File> files_;
    std::vector<size_t> order_; // the files to parse, in import order
    size_t next_ = 0;           // into order_
    size_t queued_ = 0;         // batches queued over all files
    size_t peakQueued_ = 0;
    size_t queuedCap_ = 0;      // at most this many, but for the writer's file
    const File* writing_ = nullptr; // the file the writer is on
    std::mutex mutex_;
    std::condition_variable ready_; // a batch was queued or a file parsed
    std::condition_variable room_;  // a batch was taken, or stop
    bool stop_ = false;
    std::vector<RecordBatch> spare_; // written batches, kept for their capacity
    std::vector<std::thread> workers_;
};

} // namespace pipescope::kineto
