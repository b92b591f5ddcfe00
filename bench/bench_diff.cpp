// bench_diff: `pipescope diff` on two imported jobs of the size the issue
// names (32 ranks, about 600 MB of Kineto JSON each): A is 1F1B, B the same
// job interleaved with two chunks. The jobs are written by `pipescope
// simulate --emit-kineto` and imported with `pipescope import` (not timed);
// then, in a child process so that its peak memory is its own, each store is
// loaded, analysed and calibrated and the two are compared. Prints the JSON
// size, each phase's time and the child's peak resident memory.
// Usage: bench_diff [iterations per job]   (default 13: about 600 MB at 32 ranks)
#include "compare/Diff.h"
#include "store/Store.h"
#include "whatif/WhatIf.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace pipescope;
namespace fs = std::filesystem;

namespace {

double since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const std::string& command)
{
    const int rc = std::system(command.c_str());
    if (rc != 0)
        std::fprintf(stderr, "bench_diff: failed (%d): %s\n", rc, command.c_str());
    return rc;
}

uint64_t folderBytes(const fs::path& dir)
{
    uint64_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file())
            n += e.file_size();
    return n;
}

struct Loaded {
    Trace trace;
    AnalysisResult analysis;
    std::optional<whatif::CostModel> model;
};

void load(const std::string& path, Loaded& out, double& loadS, double& analyzeS, double& calibrateS)
{
    auto t0 = std::chrono::steady_clock::now();
    Store store(path);
    out.trace = store.load();
    loadS = since(t0);
    t0 = std::chrono::steady_clock::now();
    out.analysis = analyze(out.trace);
    analyzeS = since(t0);
    t0 = std::chrono::steady_clock::now();
    out.model = whatif::calibrate(out.trace, out.analysis);
    calibrateS = since(t0);
}

} // namespace

int main(int argc, char** argv)
{
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 13;
    const std::string cli = PIPESCOPE_CLI;
    const std::string model = std::string(PIPESCOPE_SOURCE_DIR) + "/resources/models/gpt-32l.json";
    char tmpl[] = "/tmp/bench-diff-XXXXXX";
    if (!mkdtemp(tmpl))
        return 1;
    const fs::path dir = tmpl;
    const std::string its = std::to_string(iterations);
    std::printf("two jobs of 32 ranks (pp 8, dp 4, 32 microbatches, %d iterations), A 1F1B, B interleaved v=2\n", iterations);
    if (run(cli + " simulate " + model + " --pp 8 --dp 4 --microbatches 32 --schedule 1f1b --iterations " + its +
            " --emit-kineto " + (dir / "a").string() + " > /dev/null") ||
        run(cli + " simulate " + model + " --pp 8 --dp 4 --microbatches 32 --schedule interleaved-1f1b --v 2 --iterations " +
            its + " --emit-kineto " + (dir / "b").string() + " > /dev/null"))
        return 1;
    std::printf("  Kineto JSON: A %.0f MB, B %.0f MB\n", folderBytes(dir / "a") / 1e6, folderBytes(dir / "b") / 1e6);
    for (const char* job : {"a", "b"}) {
        const auto t0 = std::chrono::steady_clock::now();
        if (run(cli + " import " + (dir / job).string() + " --align collectives -q -o " + (dir / (std::string(job) + ".pipescope")).string()))
            return 1;
        std::printf("  import %s: %.1f s (not part of the diff), store %.0f MB\n", job, since(t0),
                    fs::file_size(dir / (std::string(job) + ".pipescope")) / 1e6);
        fs::remove_all(dir / job);
    }

    std::fflush(stdout); // the child must not print the parent's buffered lines again
    const pid_t child = fork();
    if (child == 0) {
        const auto t0 = std::chrono::steady_clock::now();
        Loaded a, b;
        double la, aa, ca, lb, ab, cb;
        load((dir / "a.pipescope").string(), a, la, aa, ca);
        load((dir / "b.pipescope").string(), b, lb, ab, cb);
        const auto t1 = std::chrono::steady_clock::now();
        const compare::DiffResult d = compare::diffRuns({"a", &a.trace, &a.analysis, a.model ? &*a.model : nullptr},
                                                        {"b", &b.trace, &b.analysis, b.model ? &*b.model : nullptr});
        const double diffS = since(t1);
        std::printf("  A: load %.2f s, analyze %.2f s, calibrate %.2f s (%zu activities)\n", la, aa, ca, a.trace.activities.size());
        std::printf("  B: load %.2f s, analyze %.2f s, calibrate %.2f s (%zu activities)\n", lb, ab, cb, b.trace.activities.size());
        std::printf("  diff itself: %.3f s; %lld (stage, kernel) pairs\n", diffS, static_cast<long long>(d.kernelNames));
        if (d.prediction)
            std::printf("  prediction check: predicted %.3f ms, measured %.3f ms (%+.2f%%)\n", d.prediction->predictedNs / 1e6,
                        d.prediction->measuredNs / 1e6, d.prediction->error * 100);
        std::printf("  total, stores to comparison: %.2f s\n", since(t0));
        std::fflush(stdout);
        _exit(0);
    }
    int status = 0;
    struct rusage ru {};
    wait4(child, &status, 0, &ru);
    std::printf("  peak resident memory of the comparison: %.0f MB\n", ru.ru_maxrss / 1024.0);
    fs::remove_all(dir);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
