#include "remote/Client.h"

#include "util/Format.h"
#include "util/Work.h"

#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace pipescope::remote {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

void writeAll(int fd, std::string_view bytes)
{
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            throw Error(std::string("the link to the server is closed (") + std::strerror(errno) + ")");
        }
        bytes.remove_prefix(static_cast<size_t>(n));
    }
}

} // namespace

std::string Client::readPayload()
{
    std::vector<char> buf(256 * 1024);
    for (;;) {
        if (auto p = reader_.next()) {
            payloadBytesReceived_ += static_cast<int64_t>(p->size());
            return *p;
        }
        if (stop_) {
            pollfd p{readFd_, POLLIN, 0};
            const int ready = ::poll(&p, 1, 100);
            if (stop_->load())
                throw Cancelled();
            if (ready == 0 || (ready < 0 && errno == EINTR))
                continue;
        }
        const ssize_t n = ::read(readFd_, buf.data(), buf.size());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            throw Error(std::string("cannot read from the server (") + std::strerror(errno) + ")");
        }
        if (n == 0)
            throw Error(reader_.midMessage() ? "the server's answer was cut off (the link closed inside a message)"
                                             : "the server closed the link");
        bytesReceived_ += n;
        reader_.feed(buf.data(), static_cast<size_t>(n));
    }
}

int64_t Client::send(RequestType type, const json& params)
{
    json req = params.is_object() ? params : json::object();
    const int64_t id = nextId_++;
    req["id"] = id;
    req["type"] = toString(type);
    const std::string payload = req.dump();
    if (payload.size() > kMaxRequestBytes)
        throw Error("a request of " + std::to_string(payload.size()) + " bytes, over the protocol's limit of " + std::to_string(kMaxRequestBytes));
    const std::string framed = compressing_ && compressRequests_ ? frameDeflated(payload) : frame(payload);
    while (!inFlight_.empty() && inFlightBytes_ + framed.size() > kMaxRequestBytesInFlight)
        readOne();
    writeAll(writeFd_, framed);
    bytesSent_ += static_cast<int64_t>(framed.size());
    inFlight_.push_back({id, Clock::now(), framed.size()});
    inFlightBytes_ += framed.size();
    return id;
}

void Client::readOne()
{
    const InFlight awaited = inFlight_.front();
    Response r = parseResponse(readPayload());
    inFlight_.pop_front();
    inFlightBytes_ -= awaited.bytes;
    lastSeconds_ = std::chrono::duration<double>(Clock::now() - awaited.sent).count();
    bestSeconds_ = roundTrips_ == 0 ? lastSeconds_ : std::min(bestSeconds_, lastSeconds_);
    ++roundTrips_;
    if (r.id == -1 && !r.ok)
        throw ServerRefused(r.errorCode, r.errorMessage);
    if (r.id != awaited.id)
        throw ProtocolError("a response to request " + std::to_string(r.id) + " where " + std::to_string(awaited.id) + " was awaited");
    arrived_.emplace(awaited.id, std::move(r));
}

Response Client::receive(int64_t id)
{
    for (;;) {
        if (auto it = arrived_.find(id); it != arrived_.end()) {
            Response r = std::move(it->second);
            arrived_.erase(it);
            return r;
        }
        if (inFlight_.empty() || inFlight_.front().id > id)
            throw Error("no request " + std::to_string(id) + " awaits its answer");
        readOne();
    }
}

Response Client::call(RequestType type, const json& params) { return receive(send(type, params)); }

json Client::resultOf(int64_t id)
{
    Response r = receive(id);
    if (!r.ok)
        throw ServerRefused(r.errorCode, r.errorMessage);
    return std::move(r.result);
}

json Client::result(RequestType type, const json& params) { return resultOf(send(type, params)); }

int64_t Client::sendHello(const HelloOptions& options)
{
    json versions = json::array();
    for (int v = kOldestProtocolVersion; v <= kProtocolVersion; ++v)
        versions.push_back(v);
    if (!options.versions.empty())
        versions = options.versions;
    json params{{"versions", versions}, {"client", "pipescope"}};
    if (options.compress)
        params["compression"] = json::array({kDeflate});
    return send(RequestType::Hello, params);
}

json Client::receiveHello(int64_t id)
{
    // The answers after hello's may come compressed: the reader learns it
    // before it reads their headers (it reads one message at a time).
    json h = resultOf(id);
    compressing_ = h.contains("compression") && h["compression"] == kDeflate;
    reader_.allowCompressed(compressing_);
    return h;
}

// ---- child process ---------------------------------------------------------

int ChildProcess::wait()
{
    if (toChild >= 0)
        ::close(toChild);
    if (fromChild >= 0)
        ::close(fromChild);
    toChild = fromChild = -1;
    if (pid < 0)
        return exitStatus;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
    exitStatus = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return exitStatus;
}

bool ChildProcess::running()
{
    if (pid < 0)
        return false;
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == 0)
        return true;
    if (r == pid)
        exitStatus = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    pid = -1;
    return false;
}

ChildProcess::~ChildProcess()
{
    if (pid >= 0)
        wait();
}

std::unique_ptr<ChildProcess> spawnChild(const std::vector<std::string>& argv, const std::string& stderrPath)
{
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0)
        throw Error(std::string("cannot make a pipe (") + std::strerror(errno) + ")");
    if (::pipe2(out, O_CLOEXEC) != 0) {
        ::close(in[0]);
        ::close(in[1]);
        throw Error(std::string("cannot make a pipe (") + std::strerror(errno) + ")");
    }
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const std::string execFailed = "cannot run " + argv.front() + ": ";
    const pid_t pid = ::fork();
    if (pid < 0)
        throw Error(std::string("cannot start ") + argv.front() + " (" + std::strerror(errno) + ")");
    if (pid == 0) {
        ::dup2(in[0], 0);
        ::dup2(out[1], 1);
        if (!stderrPath.empty()) {
            const int e = ::open(stderrPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (e >= 0)
                ::dup2(e, 2);
        }
        ::execvp(args[0], args.data());
        // One line on the child's standard error, for whoever shows it (no
        // allocation after fork: another thread may have held malloc's lock).
        const char* why = std::strerror(errno);
        [[maybe_unused]] ssize_t w = ::write(2, execFailed.data(), execFailed.size());
        w = ::write(2, why, std::strlen(why));
        w = ::write(2, "\n", 1);
        _exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    auto c = std::make_unique<ChildProcess>();
    c->pid = pid;
    c->toChild = in[1];
    c->fromChild = out[0];
    return c;
}

// ---- a slow link -----------------------------------------------------------

struct SlowLink::Direction {
    int in = -1, out = -1;
    Options options;
    std::mutex mutex;
    std::condition_variable ready;
    struct Chunk {
        Clock::time_point at;
        std::string bytes; // empty: the end
    };
    std::deque<Chunk> queue;
    bool stopping = false;
    Clock::time_point busyUntil{};
    std::thread reader, writer;

    void push(Chunk c)
    {
        std::lock_guard lock(mutex);
        queue.push_back(std::move(c));
        ready.notify_one();
    }

    void readLoop()
    {
        std::vector<char> buf(64 * 1024);
        for (;;) {
            {
                std::lock_guard lock(mutex);
                if (stopping)
                    break;
            }
            pollfd p{in, POLLIN, 0};
            const int r = ::poll(&p, 1, 50);
            if (r == 0 || (r < 0 && errno == EINTR))
                continue;
            const ssize_t n = r < 0 ? -1 : ::read(in, buf.data(), buf.size());
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            // The link sends a chunk after those before it, at its rate,
            // and it arrives one latency later.
            const auto now = Clock::now();
            const auto start = std::max(now, busyUntil);
            const auto sending = options.bytesPerSecond > 0
                                     ? std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(double(n) / options.bytesPerSecond))
                                     : Clock::duration::zero();
            busyUntil = start + sending;
            push({busyUntil + options.latency, std::string(buf.data(), static_cast<size_t>(n))});
        }
        push({Clock::now() + options.latency, {}});
    }

    void writeLoop()
    {
        bool broken = false;
        for (;;) {
            Chunk c;
            {
                std::unique_lock lock(mutex);
                ready.wait(lock, [&] { return !queue.empty(); });
                c = std::move(queue.front());
                queue.pop_front();
            }
            if (c.bytes.empty())
                break;
            std::this_thread::sleep_until(c.at);
            std::string_view rest = c.bytes;
            while (!broken && !rest.empty()) {
                const ssize_t n = ::write(out, rest.data(), rest.size());
                if (n < 0 && errno == EINTR)
                    continue;
                if (n < 0) {
                    broken = true;
                    break;
                }
                rest.remove_prefix(static_cast<size_t>(n));
            }
        }
        ::close(out);
        out = -1;
    }

    void start()
    {
        reader = std::thread([this] { readLoop(); });
        writer = std::thread([this] { writeLoop(); });
    }

    void stop()
    {
        {
            std::lock_guard lock(mutex);
            stopping = true;
        }
        if (reader.joinable())
            reader.join();
        if (writer.joinable())
            writer.join();
        if (in >= 0)
            ::close(in);
        in = -1;
    }
};

SlowLink::SlowLink(int aIn, int bOut, int bIn, int aOut, Options options)
    : ab_(std::make_unique<Direction>()), ba_(std::make_unique<Direction>())
{
    ab_->in = aIn;
    ab_->out = bOut;
    ab_->options = options;
    ba_->in = bIn;
    ba_->out = aOut;
    ba_->options = options;
    ab_->start();
    ba_->start();
}

SlowLink::~SlowLink() { stop(); }

void SlowLink::stop()
{
    if (ab_)
        ab_->stop();
    if (ba_)
        ba_->stop();
}

SlowLink::Ends SlowLink::between(int serverIn, int serverOut, Options options)
{
    int up[2], down[2];
    if (::pipe2(up, O_CLOEXEC) != 0 || ::pipe2(down, O_CLOEXEC) != 0)
        throw Error(std::string("cannot make a pipe (") + std::strerror(errno) + ")");
    Ends e;
    e.clientWrite = up[1];
    e.clientRead = down[0];
    e.link = std::make_unique<SlowLink>(up[0], serverIn, serverOut, down[1], options);
    return e;
}

} // namespace pipescope::remote
