#pragma once
// The link to a remote job's server: `ssh host pipescope serve --stdio PATH`
// started with pipes (RemoteAddress::sshCommand), the protocol's client over
// them (core/remote/Client.h), and ssh's own standard error, kept so that a
// failure is said in ssh's (or the server's) words in one line. Requests
// may come from any thread, one at a time. Qt-free but for the address.
#include "remote/Client.h"
#include "remote/RemoteAddress.h"

#include <nlohmann/json.hpp>

#include <QString>

#include <chrono>
#include <memory>
#include <mutex>

namespace pipescope {
struct WorkControl;
}

namespace pipescope::gui {

class RemoteLink {
public:
    // Starts ssh and says hello (the server loads the job then, so this
    // takes as long as that). Throws Error with one line naming the address
    // and what went wrong (ssh's message: an unknown host, a key refused; the
    // server's: a path that is not a job), Cancelled when work's stop is set.
    // With `slow`, the pipes run through a remote::SlowLink (latency and a
    // throughput limit), for tests and measurements of a long link.
    static std::shared_ptr<RemoteLink> connect(const RemoteAddress& address, const WorkControl* work = nullptr,
                                               const remote::SlowLink::Options* slow = nullptr);
    ~RemoteLink();
    RemoteLink(const RemoteLink&) = delete;
    RemoteLink& operator=(const RemoteLink&) = delete;

    // One request; its result. Throws ServerRefused for an error response
    // (the session goes on), Error with one line when the link fails (the
    // link is then closed: later requests fail at once with the same line).
    nlohmann::json result(remote::RequestType type, const nlohmann::json& params = nlohmann::json::object(),
                          const WorkControl* work = nullptr);

    // Several requests in flight at once, answered in order (remote::Client's
    // send and receive): their round trips' latency is paid once. Holds the
    // link while it lives: requests from other threads wait for it to go.
    // Failures as result() says.
    class Pipeline {
    public:
        int64_t send(remote::RequestType type, const nlohmann::json& params = nlohmann::json::object());
        nlohmann::json result(int64_t id);

    private:
        friend class RemoteLink;
        Pipeline(RemoteLink& link, const WorkControl* work);
        RemoteLink& link_;
        std::unique_lock<std::mutex> lock_;
    };
    Pipeline pipeline(const WorkControl* work = nullptr) { return Pipeline(*this, work); }
    // The index, asked for with hello (one round trip for both); null when
    // the server refused it (ask again to hear why).
    const nlohmann::json& index() const { return index_; }

    const RemoteAddress& address() const { return address_; }
    const nlohmann::json& hello() const { return hello_; }
    int protocol() const { return hello_.value("protocol", 1); }

    struct Stats {
        double latestSeconds = 0; // the last request's round trip
        double bestSeconds = 0;   // the shortest: the link's own latency
        int64_t bytesSent = 0, bytesReceived = 0, roundTrips = 0;
        int64_t payloadBytesReceived = 0; // the responses' JSON, inflated
        bool compressing = false;
    };
    Stats stats() const;
    // Whether the server still runs; once it has ended, why (ssh's or the
    // server's last line), and the link is closed.
    bool alive();
    QString failure() const;
    // The open's figures (loadRemote sets them): seconds from ssh's start to
    // a job on screen, and the bytes moved until then.
    void setOpenFigures(double seconds, int64_t bytes)
    {
        openSeconds_ = seconds;
        openBytes_ = bytes;
    }
    double openSeconds() const { return openSeconds_; }
    // The server's lane and event of a timeline event the app built from its
    // tiles (for a details request); lane -1 for a folded block or an event
    // the app built itself (steps and bubbles from the analysis).
    struct ServerEvent {
        int lane = -1;
        int64_t event = -1;
    };
    ServerEvent serverEvent(int lane, int64_t event) const;
    // [local lane]: its server lane (-1 none) and each event's server number (-1 none).
    void setServerEvents(std::vector<int> lanes, std::vector<std::vector<int64_t>> events)
    {
        serverLanes_ = std::move(lanes);
        serverEvents_ = std::move(events);
    }
    // What the tiles of each local lane cover (remote/RemoteTiles.h asks
    // again where the view needs finer): a time range and the narrowest
    // event it draws alone (events narrower were folded by the server).
    struct TileWindow {
        int64_t from = 0, to = 0;
        double foldNs = 0;
    };
    void setTileWindows(std::vector<std::vector<TileWindow>> windows) { tileWindows_ = std::move(windows); }
    const std::vector<std::vector<TileWindow>>& tileWindows() const { return tileWindows_; }
    const std::vector<int>& serverLanes() const { return serverLanes_; }
    const std::vector<std::vector<int64_t>>& serverEventNumbers() const { return serverEvents_; }
    // When ssh was started.
    std::chrono::steady_clock::time_point started() const { return started_; }
    int64_t openBytes() const { return openBytes_; }
    // "ssh host: 12 ms round trip, 240 KB moved in 6 requests" for the status
    // bar (the round trip: the shortest so far, the link's latency).
    QString describe() const;

private:
    RemoteLink() = default;
    [[noreturn]] void fail(const std::exception& e);
    QString stderrLine() const;
    void closeInput(); // the server's standard input: the session ends
    // Ends the child: its input closed, what it still sends read, then it is
    // waited for (stopped after `graceMs`).
    void finish(int graceMs);

    RemoteAddress address_;
    std::unique_ptr<remote::ChildProcess> child_;
    std::unique_ptr<remote::SlowLink> slow_;
    int readFd_ = -1, writeFd_ = -1; // the client's ends: the child's pipes, or the slow link's
    std::unique_ptr<remote::Client> client_;
    std::string stderrPath_;
    nlohmann::json hello_, index_;
    mutable std::mutex mutex_;
    QString failure_; // set once the link failed
    mutable Stats last_;
    std::chrono::steady_clock::time_point started_;
    std::vector<int> serverLanes_;
    std::vector<std::vector<int64_t>> serverEvents_;
    std::vector<std::vector<TileWindow>> tileWindows_;
    double openSeconds_ = 0;
    int64_t openBytes_ = 0; // the figures when a request in flight holds the client
};

} // namespace pipescope::gui
