#pragma once
// The client side of the remote protocol (docs/remote.md), for the desktop
// app, the tests and bench_serve: requests over a pair of descriptors (the
// pipes of `ssh host pipescope serve --stdio JOB`, or a loopback socket),
// with the bytes and round trips counted for the status bar. Also a server
// process started with pipes, and a link that adds latency and limits
// throughput, to measure what a user at the end of a long link would see.
#include "remote/Protocol.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

namespace pipescope::remote {

// Thrown when the server answers a request with an error response.
class ServerRefused : public Error {
public:
    ServerRefused(std::string code, const std::string& message) : Error(message), code_(std::move(code)) {}
    const std::string& code() const { return code_; }

private:
    std::string code_;
};

class Client {
public:
    // Does not own the descriptors.
    Client(int readFd, int writeFd) : readFd_(readFd), writeFd_(writeFd), reader_(kMaxResponseBytes) {}

    // Sends one request and waits for its response. Throws ProtocolError
    // for a response that breaks the protocol (or names another id), Error
    // when the link ends.
    Response call(RequestType type, const nlohmann::json& params = nlohmann::json::object());
    // The same, returning the result; throws ServerRefused for an error response.
    nlohmann::json result(RequestType type, const nlohmann::json& params = nlohmann::json::object());
    // Pipelining: several requests in flight, their latency paid once. The
    // server reads requests one after another and answers them in order, so
    // send() writes a request without waiting and returns its id, and
    // receive(id) reads the responses up to id's (those before it are kept
    // for their own receive). While more than kMaxRequestBytesInFlight of
    // requests wait for answers, send() first reads answers: a pipe holds
    // 64 KiB, and a server blocked writing an answer nobody reads would leave
    // a client blocked writing a request nobody reads.
    static constexpr size_t kMaxRequestBytesInFlight = 32 * 1024;
    int64_t send(RequestType type, const nlohmann::json& params = nlohmann::json::object());
    Response receive(int64_t id);
    // receive(id)'s result; throws ServerRefused for an error response.
    nlohmann::json resultOf(int64_t id);
    struct HelloOptions {
        // Ask for deflate (protocol 2): the server's larger responses then
        // come compressed, and are inflated here within the same bounds.
        bool compress = true;
        // The versions offered (empty: every version this build speaks).
        std::vector<int> versions;
    };
    // hello; returns its result. After it, compressing() says whether the
    // session agreed on compression.
    nlohmann::json hello(const HelloOptions& options) { return receiveHello(sendHello(options)); }
    nlohmann::json hello() { return hello(HelloOptions{}); }
    // hello in two halves, so that requests valid in every version (index)
    // can follow it before its answer comes.
    int64_t sendHello(const HelloOptions& options);
    nlohmann::json receiveHello(int64_t id);
    bool compressing() const { return compressing_; }
    // Send requests compressed too (once the session agreed on it); they are
    // small, so this is off unless asked for.
    void compressRequests(bool on) { compressRequests_ = on; }

    // Bytes on the wire (compressed, where they were), and the responses' JSON
    // inflated; roundTrips() counts the requests answered.
    int64_t bytesSent() const { return bytesSent_; }
    int64_t bytesReceived() const { return bytesReceived_; }
    int64_t payloadBytesReceived() const { return payloadBytesReceived_; }
    int64_t roundTrips() const { return roundTrips_; }
    double lastRoundTripSeconds() const { return lastSeconds_; }
    // The shortest round trip so far (0 before the first): the link's latency,
    // without the server's work of the slower requests.
    double bestRoundTripSeconds() const { return bestSeconds_; }

    // While waiting for a response, look at this flag every 100 ms and throw
    // Cancelled (util/Work.h) once it is set: a user's Cancel does not wait
    // for a slow server. Null (the default): wait as long as it takes.
    void setStop(const std::atomic<bool>* stop) { stop_ = stop; }

private:
    std::string readPayload();
    void readOne(); // the oldest request's answer, into arrived_
    struct InFlight {
        int64_t id;
        std::chrono::steady_clock::time_point sent;
        size_t bytes;
    };
    std::deque<InFlight> inFlight_;
    std::map<int64_t, Response> arrived_;
    size_t inFlightBytes_ = 0;
    int readFd_, writeFd_;
    FrameReader reader_;
    int64_t nextId_ = 1;
    int64_t bytesSent_ = 0, bytesReceived_ = 0, roundTrips_ = 0, payloadBytesReceived_ = 0;
    bool compressing_ = false, compressRequests_ = false;
    double lastSeconds_ = 0, bestSeconds_ = 0;
    const std::atomic<bool>* stop_ = nullptr;
};

// A child process with its standard input and output on pipes (its
// standard error goes to stderrPath, or stays the parent's when empty).
// argv[0] without a slash is looked for on PATH, as a shell would.
struct ChildProcess {
    pid_t pid = -1;
    int toChild = -1;   // write end: the child's standard input
    int fromChild = -1; // read end: the child's standard output
    // Closes our ends and waits; the child's exit status (128 + signal when killed).
    int wait();
    // Whether it still runs (reaps it when it has ended; exitStatus then holds its status).
    bool running();
    int exitStatus = -1;
    ~ChildProcess();
};
std::unique_ptr<ChildProcess> spawnChild(const std::vector<std::string>& argv, const std::string& stderrPath = {});

// A link between two descriptor pairs that delays each chunk by `latency`
// and passes at most `bytesPerSecond` (0: no limit) in each direction, as
// a wide-area link would. Runs threads until the ends close; stop() (or the
// destructor) waits for them.
class SlowLink {
public:
    struct Options {
        std::chrono::microseconds latency{50'000};
        double bytesPerSecond = 0;
    };
    // Relays aIn -> bOut and bIn -> aOut; takes ownership of the four descriptors.
    SlowLink(int aIn, int bOut, int bIn, int aOut, Options options);
    ~SlowLink();
    void stop();
    // For a client: a pair of descriptors whose other ends are relayed
    // through a new link to `serverIn`/`serverOut` (a child's pipes).
    struct Ends {
        int clientRead = -1, clientWrite = -1;
        std::unique_ptr<SlowLink> link;
    };
    static Ends between(int serverIn, int serverOut, Options options);

private:
    struct Direction;
    std::unique_ptr<Direction> ab_, ba_;
};

} // namespace pipescope::remote
