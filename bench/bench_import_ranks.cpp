// Import throughput on many ranks: writes a simulated job as per-rank Kineto
// traces (as `pipescope simulate --emit-kineto` does; 4 stages x 8
// data-parallel ranks of a 32-layer GPT, about 600 MB of JSON with 29
// iterations), imports it with 1, 2, ... parser threads (ImportJobOptions::jobs,
// `pipescope import --jobs`) and prints MB/s of JSON for the whole import,
// split into reading the files (parse and insert) and finishing the store
// (index, link, nest, summarise). Wall time depends on what else the machine
// runs: the load average is printed, and CPU seconds beside each run.
//
//   bench_import_ranks [ITERATIONS=29] [RUNS=3] [DIR] [--ranks R] [--layers L]
//   (DIR keeps the traces; default: a temp dir, removed. --ranks: the job's
//   ranks, a multiple of 4, default 32; --layers: of the simulated model,
//   default 32, 4 for small rank traces)
//
// PIPESCOPE_BENCH_SETTLE=N sets ImportJobOptions::settleInMemoryRecords (0:
// launch links and nesting are all settled by StoreWriter::finish(), as
// before files were settled as they were parsed).
#include "import/Import.h"
#include "util/Error.h"
#include "SimulatedJob.h"
#include "simulate/KinetoEmitter.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace pipescope;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

double cpuSeconds()
{
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

std::string loadAverage()
{
    std::ifstream f("/proc/loadavg");
    std::string a, b, c;
    f >> a >> b >> c;
    return a.empty() ? "unknown" : a + " " + b + " " + c;
}

// Writes the job's rank files (pipeline 4, ranks / 4 replicas) into dir;
// returns their total size in bytes.
uint64_t writeJob(const fs::path& dir, int ranks, int iterations, int layers)
{
    const simulate::KinetoEmitSummary s = benchjobs::writeSimulatedJob(dir, ranks, iterations, layers);
    uint64_t bytes = 0;
    for (const auto& f : s.files)
        bytes += fs::file_size(f);
    return bytes;
}

struct Run {
    double wall = 0, cpu = 0;
    double read = 0, readCpu = 0; // until the store is being finished
};

Run importOnce(const fs::path& dir, const fs::path& store, int jobs)
{
    fs::remove(store);
    Run r;
    const auto t0 = Clock::now();
    const double c0 = cpuSeconds();
    WorkControl work;
    // PIPESCOPE_BENCH_STEPS=1: the time of each step of finishing the store.
    const bool steps = std::getenv("PIPESCOPE_BENCH_STEPS") != nullptr;
    std::string lastStep;
    double lastAt = 0;
    work.onProgress = [&](std::string_view phase, double) {
        if (r.read == 0 && phase == "finishing the store") {
            r.read = seconds(t0);
            r.readCpu = cpuSeconds() - c0;
        }
        if (steps && r.read > 0) {
            const double now = seconds(t0);
            if (!lastStep.empty())
                std::printf("      %-40s %6.2f s\n", lastStep.c_str(), now - lastAt);
            lastStep = std::string(phase);
            lastAt = now;
        }
    };
    ImportJobOptions o;
    o.inputs = {dir.string()};
    o.output = store.string();
    o.progress = false;
    o.jobs = jobs;
    o.work = &work;
    if (const char* settle = std::getenv("PIPESCOPE_BENCH_SETTLE"))
        o.settleInMemoryRecords = std::atoll(settle);
    importJob(o);
    r.wall = seconds(t0);
    if (steps && !lastStep.empty())
        std::printf("      %-40s %6.2f s\n", (lastStep + " (and commit)").c_str(), r.wall - lastAt);
    r.cpu = cpuSeconds() - c0;
    return r;
}

} // namespace

int main(int argc, char** argv)
{
    std::vector<std::string> args;
    int ranks = 32, layers = 32;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--ranks" && i + 1 < argc)
            ranks = std::atoi(argv[++i]);
        else if (a == "--layers" && i + 1 < argc)
            layers = std::atoi(argv[++i]);
        else
            args.push_back(a);
    }
    if (ranks < 4 || ranks % 4 != 0 || layers < 4 || layers % 4 != 0) {
        std::fprintf(stderr, "bench_import_ranks: --ranks and --layers must be multiples of 4\n");
        return 2;
    }
    const int iterations = args.size() > 0 ? std::atoi(args[0].c_str()) : 29;
    const int runs = std::max(1, args.size() > 1 ? std::atoi(args[1].c_str()) : 3);
    const bool keep = args.size() > 2;
    const fs::path dir = keep ? fs::path(args[2]) : fs::temp_directory_path() / ("pipescope-bench-ranks-" + std::to_string(::getpid()));
    const fs::path traces = dir / "traces";
    const fs::path store = dir / "job.pipescope";
    try {
        uint64_t bytes = 0;
        if (keep && fs::exists(traces)) {
            for (const auto& e : fs::directory_iterator(traces))
                bytes += e.file_size();
            std::printf("using the %.1f MB of JSON in %s\n", double(bytes) / 1e6, traces.c_str());
        } else {
            fs::create_directories(traces);
            const auto t = Clock::now();
            bytes = writeJob(traces, ranks, iterations, layers);
            std::printf("wrote a simulated %d-rank job (%d layers, %d iterations): %.1f MB of JSON in %.1f s (%s)\n", ranks, layers,
                        iterations, double(bytes) / 1e6, seconds(t), traces.c_str());
        }
        const double mb = double(bytes) / 1e6;
        const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        std::set<int> jobList{1, 2, cores};
        std::printf("%d cores; load average before: %s\n\n", cores, loadAverage().c_str());
        std::printf("%5s %4s %9s %9s %9s %11s %9s %9s %11s\n", "jobs", "run", "wall s", "CPU s", "read s", "read CPU s",
                    "finish s", "MB/s", "read MB/s");
        for (int jobs : jobList) {
            std::vector<double> rates;
            for (int k = 0; k < runs; ++k) {
                const Run r = importOnce(traces, store, jobs);
                rates.push_back(mb / r.wall);
                std::printf("%5d %4d %9.2f %9.2f %9.2f %11.2f %9.2f %9.1f %11.1f\n", jobs, k + 1, r.wall, r.cpu, r.read,
                            r.readCpu, r.wall - r.read, mb / r.wall, mb / r.read);
                std::fflush(stdout);
            }
            std::sort(rates.begin(), rates.end());
            std::printf("jobs=%d: %.1f MB/s of JSON (median of %d runs), best %.1f\n\n", jobs, rates[rates.size() / 2],
                        runs, rates.back());
        }
        std::printf("store %.1f MB; load average after: %s\n", double(fs::file_size(store)) / 1e6, loadAverage().c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_import_ranks: %s\n", e.what());
        return 1;
    }
    if (!keep)
        fs::remove_all(dir);
    return 0;
}
