#include "import/kineto/ParseAhead.h"

#include "util/Error.h"

#include <algorithm>

namespace pipescope::kineto {

namespace {

// Unwinds a worker's parse once the import is over.
struct Stopped {};

} // namespace

ParseAhead::ParseAhead(const std::vector<std::string>& files, const std::vector<bool>& parse,
                       const ImportOptions& options, int threads, size_t queuedBatches)
    : options_(options), queuedBatches_(std::max<size_t>(queuedBatches, 1)), files_(files.size())
{
    for (size_t i = 0; i < files.size(); ++i) {
        files_[i].path = files[i];
        if (i < parse.size() && parse[i]) {
            files_[i].import = std::make_unique<KinetoFileImport>(files[i], options_);
            order_.push_back(i);
        }
    }
    const size_t n = std::min(order_.size(), static_cast<size_t>(std::max(threads, 1)));
    queuedCap_ = queuedBatches_ * std::max<size_t>(n, 1);
    if (!order_.empty())
        writing_ = &files_[order_.front()];
    workers_.reserve(n);
    try {
        for (size_t k = 0; k < n; ++k)
            workers_.emplace_back([this] { work(); });
    } catch (...) {
        stopWorkers();
        throw;
    }
}

ParseAhead::~ParseAhead() { stopWorkers(); }

void ParseAhead::stopWorkers()
{
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    room_.notify_all();
    for (std::thread& t : workers_)
        t.join();
    workers_.clear();
}

void ParseAhead::work()
{
    for (;;) {
        File* file = nullptr;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (stop_ || next_ == order_.size())
                return;
            file = &files_[order_[next_++]];
        }
        std::exception_ptr error;
        try {
            file->import->parse([this, file](RecordBatch& batch) { hand(*file, batch); });
        } catch (const Stopped&) {
            return;
        } catch (...) {
            error = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            file->parsed = true;
            file->error = error;
        }
        ready_.notify_all();
    }
}

void ParseAhead::hand(File& file, RecordBatch& batch)
{
    {
        std::unique_lock<std::mutex> lock(mutex_);
        room_.wait(lock, [&] {
            return stop_ || (file.queue.size() < queuedBatches_ && (queued_ < queuedCap_ || &file == writing_));
        });
        if (stop_)
            throw Stopped{};
        file.queue.push_back(std::move(batch));
        peakQueued_ = std::max(peakQueued_, ++queued_);
        // The parser refills a written batch, which has room already.
        batch = RecordBatch{};
        if (!spare_.empty()) {
            batch = std::move(spare_.back());
            spare_.pop_back();
        }
    }
    ready_.notify_all();
}

ImportedSource ParseAhead::import(size_t i, StoreWriter& writer)
{
    File& file = files_.at(i);
    if (!file.import)
        throw Error(file.path + ": internal error: not a file parsed ahead, or imported twice");
    BatchWriter out(writer, file.path, options_);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        writing_ = &file;
    }
    room_.notify_all(); // its worker may be waiting for room that others' batches hold
    for (;;) {
        RecordBatch batch;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            ready_.wait(lock, [&] { return !file.queue.empty() || file.parsed; });
            if (file.queue.empty()) {
                if (file.error)
                    std::rethrow_exception(file.error);
                break;
            }
            batch = std::move(file.queue.front());
            file.queue.pop_front();
            --queued_;
        }
        room_.notify_all();
        out.write(batch);
        batch.clear();
        std::lock_guard<std::mutex> lock(mutex_);
        if (spare_.size() < workers_.size() * 2)
            spare_.push_back(std::move(batch));
    }
    ImportedSource source = file.import->finish(out);
    file.import.reset();
    return source;
}

size_t ParseAhead::peakQueued()
{
    std::lock_guard<std::mutex> lock(mutex_);
    return peakQueued_;
}

} // namespace pipescope::kineto
