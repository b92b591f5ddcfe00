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
//   bench_serve [RANKS=32] [ITERATIONS=2] [DIR]   (DIR: where the job goes; default /tmp)
#include "remote/Client.h"
#include "simulate/KinetoEmitter.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace pipescope;
using namespace pipescope::remote;
using nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string modelText(int ranks)
{
    return R"({"format": "pipescope.model/1", "name": "gpt-32l", "hidden_size": 4096, "attention_heads": 32,
  "sequence_length": 2048, "microbatch_size": 1, "vocab_size": 50304, "dtype": "bf16", "gpu_tflops": 400,
  "layers": [{"name": "decoder", "count": 32}],
  "communication": {"p2p_latency_us": 20, "p2p_bandwidth_gbps": 25, "allreduce_latency_us": 30, "allreduce_bandwidth_gbps": 40},
  "memory": {"gpu_memory_gib": 80, "weight_bytes_per_param": 2, "grad_bytes_per_param": 4,
             "optimizer_bytes_per_param": 12, "zero_stage": 1, "reserved_gib": 3},
  "parallel": {"pp": 4, "dp": )" + std::to_string(ranks / 4) + R"(, "microbatches": 8, "schedule": "1f1b"}})";
}

void writeTraces(const fs::path& dir, int ranks, int iterations)
{
    using namespace whatif;
    const ModelDescription md = parseModelDescription(modelText(ranks), "bench_serve");
    CostModel model = CostModel::fromModel(md);
    model.dataParallel = *md.dp;
    model.memory.dataParallel = *md.dp;
    Scenario base;
    base.label = "simulated";
    base.pp = *md.pp;
    base.microbatches = *md.microbatches;
    ScenarioChanges changes;
    changes.schedule = *md.schedule;
    simulate::KinetoEmitOptions eo;
    eo.iterations = iterations;
    eo.modelName = md.name;
    eo.costModel = &model;
    simulate::emitKineto(predict(model, applyChanges(base, changes)), eo, dir.string());
}

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
    s.child = spawnChild({PIPESCOPE_CLI, "serve", "--stdio", job});
    s.ends = SlowLink::between(s.child->toChild, s.child->fromChild, link);
    s.child->toChild = s.child->fromChild = -1;
    s.client = std::make_unique<Client>(s.ends.clientRead, s.ends.clientWrite);
    return s;
}

void close(Session& s)
{
    ::close(s.ends.clientWrite);
    char buf[256];
    while (::read(s.ends.clientRead, buf, sizeof buf) > 0) {
    }
    ::close(s.ends.clientRead);
    s.child->wait();
    s.ends.link->stop();
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

void bench(const std::string& job, SlowLink::Options link, const char* title)
{
    std::printf("%s\n", title);
    Session s = open(job, link);
    Client& c = *s.client;
    json ix;
    size_t lanes = 0;
    // The whole job at 1,000 px: every lane the limit allows.
    json which = json::array();
    const Step hello = measure(c, [&] { c.hello(); });
    const Step index = measure(c, [&] { ix = c.result(RequestType::Index); });
    const Step analysis = measure(c, [&] { c.result(RequestType::Analysis); });
    lanes = std::min<size_t>(ix["timeline"]["lanes"].size(), size_t(kMaxTilePixels / 1000));
    for (size_t i = 0; i < lanes; ++i)
        which.push_back(i);
    const Step tiles = measure(c, [&] {
        c.result(RequestType::Tiles, {{"from_ns", ix["timeline"]["start_ns"]}, {"to_ns", ix["timeline"]["end_ns"]}, {"width_px", 1000}, {"lanes", which}});
    });
    Step first;
    for (const Step* x : {&hello, &index, &analysis, &tiles}) {
        first.seconds += x->seconds;
        first.sent += x->sent;
        first.received += x->received;
        first.roundTrips += x->roundTrips;
    }
    print("  hello (the job loaded and analysed)", hello);
    print("  index", index);
    print("  analysis", analysis);
    print("  tiles, whole job at 1,000 px", tiles);
    print("first frame (hello, index, analysis, tiles)", first);
    std::printf("    (%zu lanes of %zu drawn, %zu ranks loaded of %zu)\n", lanes, ix["timeline"]["lanes"].size(), ix["loaded_ranks"].size(),
                ix["ranks"].size());
    // The rows on screen: 48 of them, 1,600 px wide.
    json screen = json::array();
    for (size_t i = 0; i < std::min<size_t>(48, ix["timeline"]["lanes"].size()); ++i)
        screen.push_back(i);
    const int64_t from = ix["iterations"].back()["start_ns"].get<int64_t>();
    const int64_t to = ix["iterations"].back()["end_ns"].get<int64_t>();
    const Step pan = measure(c, [&] {
        c.result(RequestType::Tiles, {{"from_ns", from + (to - from) / 10}, {"to_ns", to + (to - from) / 10}, {"width_px", 1600}, {"lanes", screen}});
    });
    print("pan (tiles of 48 rows, 1,600 px)", pan);
    const Step zoom = measure(c, [&] {
        c.result(RequestType::Tiles, {{"from_ns", from + (to - from) / 2}, {"to_ns", from + (to - from) / 2 + (to - from) / 50}, {"width_px", 1600}, {"lanes", screen}});
    });
    print("zoom x50 (tiles of 48 rows, 1,600 px)", zoom);
    const Step model = measure(c, [&] { c.result(RequestType::CostModel); });
    print("cost model (for the what-if drag)", model);
    close(s);
}

} // namespace

int main(int argc, char** argv)
{
    std::signal(SIGPIPE, SIG_IGN);
    const int ranks = argc > 1 ? std::atoi(argv[1]) : 32;
    const int iterations = argc > 2 ? std::atoi(argv[2]) : 2;
    const fs::path base = (argc > 3 ? fs::path(argv[3]) : fs::temp_directory_path()) / ("bench-serve-" + std::to_string(ranks));
    if (ranks < 4 || ranks % 4 != 0) {
        std::fprintf(stderr, "bench_serve: RANKS must be a multiple of 4\n");
        return 2;
    }
    std::error_code ec;
    fs::remove_all(base, ec);
    fs::create_directories(base / "traces");
    const auto t0 = Clock::now();
    writeTraces(base / "traces", ranks, iterations);
    const std::string job = (base / "job").string();
    if (!run({PIPESCOPE_CLI, "import", (base / "traces").string(), "--shards", "2", "-q", "-o", job})) {
        std::fprintf(stderr, "bench_serve: the import failed\n");
        return 1;
    }
    std::printf("%d ranks, %d iterations: written and imported as 2 shards in %.1f s\n", ranks, iterations, since(t0));
    SlowLink::Options slow;
    slow.latency = std::chrono::milliseconds(50);
    slow.bytesPerSecond = 20e6;
    bench(job, slow, "through a link of 50 ms each way and 20 MB/s:");
    bench(job, SlowLink::Options{std::chrono::microseconds(0), 0}, "through a plain pipe (the server's own time):");
    fs::remove_all(base, ec);
    return 0;
}
