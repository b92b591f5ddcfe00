// Serve: the first frame of a remote job, as the app at the end of a long
// link sees it (docs/remote.md). A simulated job of R ranks (4 pipeline
// stages x R/4 data-parallel replicas of a 32-layer GPT, 8 microbatches,
// 1F1B, as bench_scale writes it) is imported as a sharded job (2 shards),
// then `pipescope serve --stdio JOB` runs behind a link that adds 50 ms each
// way and passes 20 MB/s, and a client asks for the first frame (hello,
// index, analysis, tiles of the whole job at 1,000 px), then a pan and a
// zoom (tiles of the rows on screen). Printed: seconds and bytes moved for
// each; the same without the link (the server's own time).
//
// Both protocols are measured: 2 (hello asks for deflate, the first frame
// takes the analysis's summary) and 1 (no compression, the whole analysis).
//
//   bench_serve [RANKS=32] [ITERATIONS=2] [DIR] [--keep] [--layers L] [--job JOB]
//   (DIR: where the job goes, default /tmp; --keep: leave the job there and
//   reuse it on the next run instead of writing it again; --layers: of the
//   simulated model, default 32; --job: serve this job instead, e.g. the one
//   `bench_scale R ... --keep` left)
//
// Printed too: the server's peak resident set (VmHWM) after each session.
// The server runs with at most 1,024 open files, a cluster's usual limit.
// PIPESCOPE_BENCH_CLI names the pipescope binary (default: the one built
// beside this benchmark).
//
//   bench_serve RANKS ITERATIONS DIR --keep --app [--runs N]
//   (the app's own path instead, where the app is built: `pipescope-gui
//   ssh://host/JOB` as remote/RemoteJob.h opens it, through a stand-in ssh
//   that runs the server here, behind the same link and through a plain
//   pipe; printed: seconds to the first frame and to the whole job, bytes
//   and requests, and when each phase began)
#include "SimulatedJob.h"
#include "remote/Client.h"
#include "simulate/KinetoEmitter.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"

#ifdef PIPESCOPE_BENCH_APP
#include "remote/RemoteAddress.h"
#include "remote/RemoteJob.h"
#include "remote/RemoteLink.h"
#include "remote/RemoteTiles.h"
#include "util/Work.h"
#endif

#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <fstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace pipescope;
using namespace pipescope::remote;
using nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string cliPath() { return std::getenv("PIPESCOPE_BENCH_CLI") ? std::getenv("PIPESCOPE_BENCH_CLI") : PIPESCOPE_CLI; }

// A process's peak resident set in MB (0 when it cannot be read).
double peakMbOf(pid_t pid)
{
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("VmHWM:", 0) == 0)
            return std::atof(line.c_str() + 6) / 1024.0;
    return 0;
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool run(const std::vector<std::string>& argv)
{
    const pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(127);
        std::vector<char*> args;
        for (const auto& a : argv)
            args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execv(args[0], args.data());
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

struct Step {
    double seconds = 0;
    int64_t sent = 0, received = 0, roundTrips = 0;
};

struct Session {
    std::unique_ptr<ChildProcess> child;
    SlowLink::Ends ends;
    std::unique_ptr<Client> client;
};

Session open(const std::string& job, SlowLink::Options link)
{
    Session s;
    s.child = spawnChild({cliPath(), "serve", "--stdio", job});
    s.ends = SlowLink::between(s.child->toChild, s.child->fromChild, link);
    s.child->toChild = s.child->fromChild = -1;
    s.client = std::make_unique<Client>(s.ends.clientRead, s.ends.clientWrite);
    return s;
}

// Ends the session; returns the server's peak resident set in MB.
double close(Session& s)
{
    const double peak = peakMbOf(s.child->pid);
    ::close(s.ends.clientWrite);
    char buf[256];
    while (::read(s.ends.clientRead, buf, sizeof buf) > 0) {
    }
    ::close(s.ends.clientRead);
    s.child->wait();
    s.ends.link->stop();
    return peak;
}

template <class F>
Step measure(Client& c, F&& f)
{
    const int64_t sent = c.bytesSent(), received = c.bytesReceived(), trips = c.roundTrips();
    const auto t0 = Clock::now();
    f();
    return {since(t0), c.bytesSent() - sent, c.bytesReceived() - received, c.roundTrips() - trips};
}

void print(const char* what, const Step& s)
{
    std::printf("  %-44s %7.3f s  %9.1f KB moved (%lld B sent, %lld B received)  %lld round trips\n", what, s.seconds,
                double(s.sent + s.received) / 1000.0, (long long)s.sent, (long long)s.received, (long long)s.roundTrips);
}

struct Frame {
    Step first, pan, zoom;
    double serverPeakMb = 0;
    bool refused = false; // the analysis was refused (too large for protocol 1)
};

// The first frame as protocol 2 draws it (hello asking for deflate, index,
// the analysis's summary, tiles) or as protocol 1 did (no compression, the
// whole analysis document).
Frame bench(const std::string& job, SlowLink::Options link, const char* title, bool slim)
{
    std::printf("%s\n", title);
    Session s = open(job, link);
    Client& c = *s.client;
    json ix;
    size_t lanes = 0;
    // The whole job at 1,000 px: every lane the limit allows.
    json which = json::array();
    Client::HelloOptions ho;
    ho.compress = slim;
    if (!slim)
        ho.versions = {1};
    json h;
    const Step hello = measure(c, [&] { h = c.hello(ho); });
    const Step index = measure(c, [&] { ix = c.result(RequestType::Index); });
    std::string refused;
    const Step analysis = measure(c, [&] {
        try {
            c.result(RequestType::Analysis, slim ? json{{"parts", "summary"}} : json::object());
        } catch (const ServerRefused& e) {
            refused = e.code() + ": " + e.what();
        }
    });
    lanes = std::min<size_t>(ix["timeline"]["lanes"].size(), size_t(kMaxTilePixels / 1000));
    for (size_t i = 0; i < lanes; ++i)
        which.push_back(i);
    const Step tiles = measure(c, [&] {
        c.result(RequestType::Tiles, {{"from_ns", ix["timeline"]["start_ns"]}, {"to_ns", ix["timeline"]["end_ns"]}, {"width_px", 1000}, {"lanes", which}});
    });
    Frame f;
    Step& first = f.first;
    for (const Step* x : {&hello, &index, &analysis, &tiles}) {
        first.seconds += x->seconds;
        first.sent += x->sent;
        first.received += x->received;
        first.roundTrips += x->roundTrips;
    }
    print("  hello (the job loaded and analysed)", hello);
    print("  index", index);
    print(slim ? "  analysis, summary" : "  analysis, whole document", analysis);
    if (!refused.empty())
        std::printf("    (refused, %s)\n", refused.c_str());
    f.refused = !refused.empty();
    print("  tiles, whole job at 1,000 px", tiles);
    print("first frame (hello, index, analysis, tiles)", first);
    std::printf("    (%zu lanes of %zu drawn, %zu ranks loaded of %zu; %.1f KB of JSON inflated from %.1f KB)\n", lanes,
                ix["timeline"]["lanes"].size(), ix["loaded_ranks"].size(), ix["ranks"].size(), double(c.payloadBytesReceived()) / 1000.0,
                double(c.bytesReceived()) / 1000.0);
    // The rows on screen: 48 of them, 1,600 px wide.
    json screen = json::array();
    for (size_t i = 0; i < std::min<size_t>(48, ix["timeline"]["lanes"].size()); ++i)
        screen.push_back(i);
    const int64_t from = ix["iterations"].back()["start_ns"].get<int64_t>();
    const int64_t to = ix["iterations"].back()["end_ns"].get<int64_t>();
    f.pan = measure(c, [&] {
        c.result(RequestType::Tiles, {{"from_ns", from + (to - from) / 10}, {"to_ns", to + (to - from) / 10}, {"width_px", 1600}, {"lanes", screen}});
    });
    print("pan (tiles of 48 rows, 1,600 px)", f.pan);
    f.zoom = measure(c, [&] {
        c.result(RequestType::Tiles, {{"from_ns", from + (to - from) / 2}, {"to_ns", from + (to - from) / 2 + (to - from) / 50}, {"width_px", 1600}, {"lanes", screen}});
    });
    print("zoom x50 (tiles of 48 rows, 1,600 px)", f.zoom);
    if (slim) {
        // What the summary leaves out, on demand: four loaded ranks (one
        // pipeline's) over a tenth of the iteration.
        const json& it = ix["iterations"][h["job"]["selected_iteration"].get<size_t>()];
        const int64_t a = it["start_ns"].get<int64_t>(), b = it["end_ns"].get<int64_t>();
        json four = json::array();
        for (size_t i = 0; i < std::min<size_t>(4, ix["loaded_ranks"].size()); ++i)
            four.push_back(ix["loaded_ranks"][i]);
        json got;
        const Step steps = measure(c, [&] {
            got = c.result(RequestType::Steps, {{"ranks", four}, {"from_ns", a}, {"to_ns", a + (b - a) / 10}});
        });
        std::printf("    (%zu steps, %zu bubbles, %zu critical path segments)\n", got["steps"].size(), got["bubbles"].size(),
                    got["critical_path"].size());
        print("steps, 4 loaded ranks, a tenth of the iteration", steps);
    }
    const Step model = measure(c, [&] { c.result(RequestType::CostModel); });
    print("cost model (for the what-if drag)", model);
    f.serverPeakMb = close(s);
    std::printf("  (the server's peak resident set: %.0f MB)\n", f.serverPeakMb);
    return f;
}

#ifdef PIPESCOPE_BENCH_APP
// The app's open of a remote job (remote/RemoteJob.h) through a stand-in for
// ssh that runs the server here, behind `link`: seconds to the first frame
// (the Job the app paints first) and to the whole job, bytes, requests, and
// when each phase began.
struct AppFrame {
    double first = 0, whole = 0, zoom = 0, zoomRefine = 0;
    int64_t firstBytes = 0, wholeBytes = 0, firstRequests = 0, wholeRequests = 0, zoomBytes = 0;
};

AppFrame appOpen(const std::string& job, SlowLink::Options link, bool verbose)
{
    using namespace pipescope::gui;
    const QString address = QStringLiteral("ssh://localhost") + QString::fromStdString(fs::absolute(job).string());
    AppFrame f;
    const auto t0 = Clock::now();
    std::string last;
    WorkControl work;
    work.onProgress = [&](std::string_view phase, double) {
        // One line a phase (a phase that repeats with a count says it once).
        std::string p(phase);
        if (const size_t cut = p.find(" ("); cut != std::string::npos)
            p.resize(cut);
        if (verbose && p != last)
            std::printf("    %6.3f s  %s\n", since(t0), p.c_str());
        last = p;
    };
    auto l = RemoteLink::connect(*RemoteAddress::parse(address, nullptr), &work, &link);
    auto firstFrame = [&](const std::shared_ptr<const Job>&) {
        const RemoteLink::Stats s = l->stats();
        f.first = since(t0);
        f.firstBytes = s.bytesSent + s.bytesReceived;
        f.firstRequests = s.roundTrips;
        if (verbose)
            std::printf("    %6.3f s  first frame ready\n", f.first);
    };
    const auto whole = loadRemote(l, {}, &work, firstFrame);
    f.whole = since(t0);
    const RemoteLink::Stats s = l->stats();
    f.wholeBytes = s.bytesSent + s.bytesReceived;
    f.wholeRequests = s.roundTrips;
    if (f.first == 0) {
        f.first = f.whole;
        f.firstBytes = f.wholeBytes;
        f.firstRequests = f.wholeRequests;
    }
    if (verbose)
        std::printf("    %6.3f s  whole job ready (%zu steps, %zu timeline lanes)\n", f.whole, whole->analysis->steps.size(),
                    whole->timeline->lanes.size());
    // A zoom x50 into the analysed iteration, 48 rows of tiles at 1,600 px,
    // as the timeline asks it (remote/RemoteTiles.h: half a screen more each
    // side, one pixel's fold), and the model refined with them.
    std::vector<int> rows;
    for (size_t i = 0; i < l->serverLanes().size() && rows.size() < 48; ++i)
        if (l->serverLanes()[i] >= 0)
            rows.push_back(static_cast<int>(i));
    const Iteration& it = whole->analysis->iterations[static_cast<size_t>(std::max(0, whole->analysis->selectedIteration))];
    const TimeNs span = (it.end - it.start) / 50, a = it.start + (it.end - it.start) / 2 - span / 2;
    const TimeNs from = a - span / 2, to = a + span + span / 2;
    const auto z0 = Clock::now();
    const int64_t moved0 = l->stats().bytesSent + l->stats().bytesReceived;
    std::vector<json> tiles;
    {
        auto pipe = l->pipeline();
        json lanes = json::array();
        for (int r : rows)
            lanes.push_back(l->serverLanes()[static_cast<size_t>(r)]);
        tiles.push_back(pipe.result(pipe.send(RequestType::Tiles, {{"from_ns", from}, {"to_ns", to}, {"width_px", 3200}, {"lanes", lanes}, {"fold_px", 1}})));
    }
    const auto z1 = Clock::now();
    const auto refined = RemoteTiles::refine(*whole->timeline, l->serverEventNumbers(), l->tileWindows(), l->serverLanes(), tiles, from, to,
                                             double(to - from) / 3200);
    f.zoom = since(z0);
    f.zoomRefine = std::chrono::duration<double>(Clock::now() - z1).count();
    f.zoomBytes = l->stats().bytesSent + l->stats().bytesReceived - moved0;
    return f;
}

int appBench(const std::string& job, int runs)
{
    // ssh's stand-in: the command after the host, run here.
    const fs::path ssh = fs::temp_directory_path() / ("bench-serve-ssh-" + std::to_string(::getpid()));
    {
        std::ofstream out(ssh);
        out << "#!/bin/sh\nwhile [ $# -gt 0 ] && [ \"$1\" != \"--\" ]; do shift; done\nshift 2\nexec /bin/sh -c \"exec $*\"\n";
    }
    fs::permissions(ssh, fs::perms::owner_all);
    ::setenv("PIPESCOPE_SSH", ssh.c_str(), 1);
    ::setenv("PIPESCOPE_REMOTE_COMMAND", cliPath().c_str(), 1);
    SlowLink::Options slow;
    slow.latency = std::chrono::milliseconds(50);
    slow.bytesPerSecond = 20e6;
    const SlowLink::Options plain{std::chrono::microseconds(0), 0};
    int rc = 0;
    try {
        for (const auto& [title, link] : {std::pair{"through a link of 50 ms each way and 20 MB/s", slow}, std::pair{"through a plain pipe", plain}}) {
            std::printf("the app's open (pipescope-gui ssh://host/JOB), %s:\n", title);
            for (int r = 0; r < runs; ++r) {
                const AppFrame f = appOpen(job, link, r == 0);
                std::printf("  run %d: first frame %.2f s, %.1f KB in %lld requests; whole job %.2f s, %.1f KB in %lld requests; "
                            "zoom x50 (48 rows) %.3f s, of which the model refined %.3f s, %.1f KB\n",
                            r + 1, f.first, double(f.firstBytes) / 1000.0, (long long)f.firstRequests, f.whole, double(f.wholeBytes) / 1000.0,
                            (long long)f.wholeRequests, f.zoom, f.zoomRefine, double(f.zoomBytes) / 1000.0);
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_serve: %s\n", e.what());
        rc = 1;
    }
    fs::remove(ssh);
    return rc;
}
#endif

} // namespace

int main(int argc, char** argv)
{
    std::signal(SIGPIPE, SIG_IGN);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    // A cluster node's usual limit of open files, inherited by the server.
    if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur > 1024) {
        files.rlim_cur = 1024;
        ::setrlimit(RLIMIT_NOFILE, &files);
    }
    std::vector<std::string> args;
    bool keep = false, app = false;
    int layers = 32, runs = 3;
    std::string given;
    for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]) == "--keep")
            keep = true;
        else if (std::string(argv[i]) == "--layers" && i + 1 < argc)
            layers = std::atoi(argv[++i]);
        else if (std::string(argv[i]) == "--job" && i + 1 < argc)
            given = argv[++i];
        else if (std::string(argv[i]) == "--app")
            app = true;
        else if (std::string(argv[i]) == "--runs" && i + 1 < argc)
            runs = std::max(1, std::atoi(argv[++i]));
        else
            args.push_back(argv[i]);
    const int ranks = args.size() > 0 ? std::atoi(args[0].c_str()) : 32;
    const int iterations = args.size() > 1 ? std::atoi(args[1].c_str()) : 2;
    const fs::path base = (args.size() > 2 ? fs::path(args[2]) : fs::temp_directory_path()) /
                          ("bench-serve-" + std::to_string(ranks) + "x" + std::to_string(iterations) +
                           (layers != 32 ? "-" + std::to_string(layers) + "l" : std::string()));
    if (ranks < 4 || ranks % 4 != 0) {
        std::fprintf(stderr, "bench_serve: RANKS must be a multiple of 4\n");
        return 2;
    }
    const std::string job = given.empty() ? (base / "job").string() : given;
    std::error_code ec;
    if (!given.empty()) {
        keep = true; // never removed here
        std::printf("serving %s\n", job.c_str());
    } else if (keep && fs::exists(base / "job" / "job.json")) {
        // --keep: the job stays for the next run, which reads it again.
        std::printf("%d ranks, %d iterations: the job kept in %s\n", ranks, iterations, job.c_str());
    } else {
        fs::remove_all(base, ec);
        fs::create_directories(base / "traces");
        auto t0 = Clock::now();
        benchjobs::writeSimulatedJob(base / "traces", ranks, iterations, layers);
        const double written = since(t0);
        t0 = Clock::now();
        if (!run({cliPath(), "import", (base / "traces").string(), "--shards", "2", "-q", "-o", job})) {
            std::fprintf(stderr, "bench_serve: the import failed\n");
            return 1;
        }
        std::printf("%d ranks, %d iterations: written in %.1f s, imported as 2 shards in %.1f s\n", ranks, iterations, written, since(t0));
    }
    if (app) {
#ifdef PIPESCOPE_BENCH_APP
        const int rc = appBench(job, runs);
        if (!keep)
            fs::remove_all(base, ec);
        return rc;
#else
        std::fprintf(stderr, "bench_serve: --app needs the app (Qt 6): this build has none\n");
        return 2;
#endif
    }
    SlowLink::Options slow;
    slow.latency = std::chrono::milliseconds(50);
    slow.bytesPerSecond = 20e6;
    const SlowLink::Options plain{std::chrono::microseconds(0), 0};
    const Frame two = bench(job, slow, "protocol 2 (deflate, the analysis's summary), through a link of 50 ms each way and 20 MB/s:", true);
    const Frame twoPlain = bench(job, plain, "protocol 2, through a plain pipe (the server's own time):", true);
    const Frame one = bench(job, slow, "protocol 1 (no compression, the whole analysis), through the same link:", false);
    const Frame onePlain = bench(job, plain, "protocol 1, through a plain pipe:", false);
    std::printf("\n| ranks | protocol | first frame, link | first frame, plain | moved | pan | zoom | server peak |\n");
    for (const auto& [name, link, pipe] : {std::tuple{"2", &two, &twoPlain}, std::tuple{"1", &one, &onePlain}})
        std::printf("| %d | %s | %.2f s | %.2f s | %.2f MB | %.2f s | %.2f s | %.0f MB |%s\n", ranks, name, link->first.seconds, pipe->first.seconds,
                    double(link->first.sent + link->first.received) / 1e6, link->pan.seconds, link->zoom.seconds, link->serverPeakMb,
                    link->refused ? " (the analysis refused: too large)" : "");
    if (!keep)
        fs::remove_all(base, ec);
    return 0;
}
