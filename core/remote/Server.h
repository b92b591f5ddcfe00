#pragma once
// The server side of the remote protocol (remote/Protocol.h, docs/remote.md):
// one job, opened read-only, answering one client's requests. `pipescope
// serve` runs a session over standard input and output or over a loopback
// connection; tests run it in-process.
//
// What it may read: the job named when it was made, and, for a diff, a
// baseline that lies beside it (directly in the same folder, after every
// symbolic link is resolved). It writes nothing: the store is opened
// read-only, and nothing is cached on disk.
#include "analysis/Analysis.h"
#include "analysis/JobPart.h"
#include "remote/Protocol.h"
#include "store/Store.h"
#include "timeline/TimelineModel.h"
#include "whatif/WhatIf.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope::remote {

struct ServerOptions {
    // How much of a job is read whole: as the app reads it (a sharded job of
    // more than two million GPU activities is read one pipeline, its busiest
    // replica's), within the commands' 2 GiB budget (PIPESCOPE_MEMORY_BUDGET
    // replaces it).
    ReadLimits limits = defaultLimits();
    static ReadLimits defaultLimits();
};

// One answer: the response payload, and whether the session ends after it
// is sent (with `closeReason` as the server's error line).
struct Answer {
    std::string payload;
    bool mayCompress = true; // hello's answer goes as it is (the client learns from it whether to inflate)
    bool close = false;
    std::string closeReason;
};

class Server {
public:
    // Opens the job (a store or a sharded job folder). Throws Error naming
    // it when it is not one.
    explicit Server(const std::string& jobPath, ServerOptions options = {});
    ~Server();

    // Answers one request payload. Throws ProtocolError for a malformed one
    // (the session then ends); a well-formed request the server cannot
    // answer gets an error response.
    Answer handle(std::string_view payload);

    const std::string& jobPath() const { return jobPath_; }
    // A new client on the same server (--listen): hello comes first again.
    // What was loaded of the job stays.
    void resetSession()
    {
        helloDone_ = false;
        version_ = 0;
        compress_ = false;
    }
    // The protocol version this session agreed on (0 before hello), and
    // whether its messages may be compressed (hello agreed on deflate).
    int version() const { return version_; }
    bool compressing() const { return compress_; }

    // For tests: the loaded timeline (loads the job).
    const timeline::TimelineModel& timelineModel();

private:
    struct Loaded;
    struct Analysed;
    struct Baseline;
    void ensureLoaded();
    nlohmann::json hello(const Request& r);
    nlohmann::json index();
    Analysed& analysed(const Request& r);
    const nlohmann::json& extrasOf(Analysed& a);
    std::string analysisText(const Request& r);
    nlohmann::json steps(const Request& r);
    nlohmann::json tiles(const Request& r);
    nlohmann::json details(const Request& r);
    nlohmann::json search(const Request& r);
    nlohmann::json costModel(const Request& r);
    nlohmann::json diff(const Request& r);

    std::string jobPath_;
    std::filesystem::path jobCanonical_;
    ServerOptions options_;
    Store store_;
    bool helloDone_ = false;
    int version_ = 0;
    bool compress_ = false;
    std::unique_ptr<Loaded> loaded_;
    std::string loadError_; // why the job could not be loaded, once tried
    // The rest of the first frame, made while hello's answer travels: the
    // index's text and the analysis's summary, each on a thread of its own.
    // Every request waits for them first (they read and fill the caches).
    void warmFirstFrame();
    void settleWarm();
    std::vector<std::future<void>> warming_;
    std::string indexText_;
};

// The outcome of a session.
struct SessionResult {
    int exitCode = 0;     // 0: the client closed; kExitProtocol: a malformed message; 1: a read or write failed
    std::string error;    // one line for standard error ("" when exitCode is 0)
    int64_t requests = 0;
    int64_t bytesIn = 0, bytesOut = 0; // on the wire
    int64_t payloadBytesOut = 0;       // the responses before compression
};

// Serves one client: reads messages from inFd and writes the responses to
// outFd until the input ends. Neither descriptor is closed.
SessionResult serveSession(Server& server, int inFd, int outFd);

// Where the kernel gives transparent huge pages only to memory that asks
// for them (/sys/kernel/mm/transparent_hugepage/enabled is "madvise", as on
// Debian and most clusters), re-executes this program (/proc/self/exe, the
// same arguments and descriptors) with glibc's malloc told to ask
// (GLIBC_TUNABLES glibc.malloc.hugetlb=1). Loading a job touches hundreds of
// MB at once: in 2 MB pages it takes a fifth of the page faults and less
// time in the kernel and the TLB (1,024 ranks on 2 cores: a hello 3.3-3.5 s
// -> 2.1-2.7 s).
// Returns, doing nothing, where that is already so, where the kernel gives
// huge pages to all memory or to none, or where the exec fails. Call it
// first, before anything is read from standard input.
void preferHugePages();

// The baseline a diff request names, resolved against the job's folder:
// the canonical path when it lies directly in the same folder as the job
// (symbolic links resolved), else nullopt with `why` set.
std::optional<std::filesystem::path> resolveBaseline(const std::filesystem::path& jobCanonical, const std::string& name,
                                                     std::string& why);

} // namespace pipescope::remote
