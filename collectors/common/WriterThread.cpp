#include "WriterThread.h"

#include "Clock.h"
#include "Log.h"

namespace pipescope::collect {

WriterThread::~WriterThread() { stop(); }

bool WriterThread::start(const std::string& path, const ProcessMeta& meta, std::string& error,
                         std::function<void()> tick, std::chrono::milliseconds period, size_t maxQueued)
{
    if (running_.load())
        return true;
    if (!db_.open(path, meta, error))
        return false;
    tick_ = std::move(tick);
    period_ = period;
    maxQueued_ = maxQueued;
    stopping_ = false;
    try {
        thread_ = std::thread([this] { run(); });
    } catch (...) {
        error = "cannot start the writer thread";
        db_.close();
        return false;
    }
    running_.store(true);
    return true;
}

bool WriterThread::post(Job job, const char* dropSource, int64_t weight)
{
    {
        std::lock_guard lock(mutex_);
        if (running_.load() && !stopping_ && queue_.size() < maxQueued_) {
            queue_.push_back(std::move(job));
            ++posted_;
            wake_.notify_one();
            return true;
        }
    }
    std::lock_guard lock(dropMutex_);
    pendingDrops_.emplace_back(dropSource, weight);
    return false;
}

void WriterThread::countDropped(const char* source, int64_t n)
{
    if (n <= 0)
        return;
    std::lock_guard lock(dropMutex_);
    pendingDrops_.emplace_back(source, n);
}

bool WriterThread::flush(std::chrono::milliseconds timeout)
{
    std::unique_lock lock(mutex_);
    if (!running_.load())
        return false;
    uint64_t target = posted_;
    wake_.notify_one();
    return done_.wait_for(lock, timeout, [&] { return completed_ >= target || !running_.load(); });
}

void WriterThread::stop(std::chrono::milliseconds timeout)
{
    {
        std::lock_guard lock(mutex_);
        if (!running_.load() || stopping_)
            return;
        stopping_ = true;
        wake_.notify_one();
    }
    // The thread drains the queue before it ends. A writer stuck in SQLite
    // (a full disk, say) must not hang the program's exit: then it is detached.
    {
        std::unique_lock lock(mutex_);
        bool finished = done_.wait_for(lock, timeout, [&] { return !running_.load(); });
        if (!finished) {
            lock.unlock();
            thread_.detach();
            warnOnce("writer-stuck", "the capture writer did not finish in time; the capture file may be incomplete");
            return;
        }
    }
    if (thread_.joinable())
        thread_.join();
}

void WriterThread::run()
{
    auto nextTick = std::chrono::steady_clock::now() + period_;
    for (;;) {
        std::deque<Job> batch;
        bool stopping = false;
        {
            std::unique_lock lock(mutex_);
            wake_.wait_until(lock, nextTick, [&] { return !queue_.empty() || stopping_; });
            batch.swap(queue_);
            stopping = stopping_;
        }
        if (tick_ && (std::chrono::steady_clock::now() >= nextTick || stopping)) {
            // The tick may post jobs (CUPTI delivers buffers synchronously
            // from inside a flush), so it runs without the lock held.
            tick_();
            nextTick = std::chrono::steady_clock::now() + period_;
            std::lock_guard lock(mutex_);
            for (auto& j : queue_)
                batch.push_back(std::move(j));
            queue_.clear();
        } else if (!tick_ && std::chrono::steady_clock::now() >= nextTick) {
            nextTick = std::chrono::steady_clock::now() + period_;
        }
        std::vector<std::pair<std::string, int64_t>> drops;
        {
            std::lock_guard lock(dropMutex_);
            drops.swap(pendingDrops_);
        }
        if (!batch.empty() || !drops.empty()) {
            db_.begin();
            for (auto& job : batch) {
                try {
                    job(db_);
                } catch (...) {
                    warnOnce("writer-job", "a capture record could not be stored; it is skipped");
                }
            }
            for (auto& [source, n] : drops)
                db_.addDropped(source, n);
            // Keeps end_ns meaningful when the process is killed before stop().
            db_.setMetaMax("end_ns", nowNs());
            db_.commit();
        }
        std::lock_guard lock(mutex_);
        completed_ += batch.size();
        done_.notify_all();
        if (stopping && queue_.empty()) {
            db_.begin();
            db_.setMetaMax("end_ns", nowNs());
            {
                std::lock_guard dl(dropMutex_);
                for (auto& [source, n] : pendingDrops_)
                    db_.addDropped(source, n);
                pendingDrops_.clear();
            }
            db_.commit();
            db_.close();
            running_.store(false);
            done_.notify_all();
            return;
        }
    }
}

} // namespace pipescope::collect
