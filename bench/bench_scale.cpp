// Scale: a simulated job of R ranks (4 pipeline stages x R/4 data-parallel
// replicas of a 32-layer GPT, 8 microbatches, about 2.7 MB of Kineto JSON
// per rank with 4 iterations: 2.8 GB at 1,024 ranks), imported
//   - into one store by one process                (pipescope import),
//   - as a sharded job by 2 processes side by side (pipescope import --shards 2),
//   - as 2 srun-style tasks                        (the command started twice with
//                                                    SLURM_PROCID / SLURM_STEP_NUM_TASKS set as srun sets them),
//   - as those tasks with one core each (--jobs 1), task 0 alone and both side by side,
// (a sharded import includes the map step: each task analyses its shard),
// then summarised from the index alone (pipescope info), analysed (pipescope analyze and report on the sharded job, whole and
// under a memory budget that reads the pipeline of its busiest replica), one rank exported for Perfetto
// (pipescope export --ranks, which reads that rank's pipeline) and opened as the app
// opens it (its first frame; one pipeline, as the app reads a job too large to
// read whole, then one stage's replicas as a click on it loads them; and the
// whole job). Each step runs in a process
// of its own, so its peak memory is that process's peak resident set.
//
//   bench_scale [RANKS=32,256,1024] [ITERATIONS=4] [DIR] [--tasks N] [--layers L] [--sharded-only] [--keep]
//     DIR: where the traces go (default /tmp)
//     --tasks N: the srun-style import runs N tasks side by side (default 2)
//     --layers L: layers of the simulated model (default 32; 4 makes small rank traces)
//     --sharded-only: only the srun-style import (no one-store, --shards 2 or one-core runs)
//     --keep: leave the job in DIR/pipescope-bench-scale-R/job (for bench_serve --job)
//
// Every step's process runs with at most 1,024 open files (RLIMIT_NOFILE), a
// cluster's usual default, so that a step which holds a file per rank fails
// here too. PIPESCOPE_BENCH_CLI names the pipescope binary to run (default:
// the one built beside this benchmark; copy it away before long runs).
#include "analysis/JobSummaries.h"
#include "SimulatedJob.h"
#include "simulate/KinetoEmitter.h"
#include "store/JobIndex.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"

#ifdef PIPESCOPE_BENCH_APP
#include "session/AppSession.h"
using pipescope::gui::AppSession;
using pipescope::gui::OpenOptions;
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

using namespace pipescope;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Open files a step's process may hold: a cluster node's usual soft limit.
constexpr rlim_t kOpenFiles = 1024;

double seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

uint64_t bytesUnder(const fs::path& p)
{
    std::error_code ec;
    if (fs::is_regular_file(p, ec))
        return fs::file_size(p, ec);
    uint64_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(p, ec))
        if (e.is_regular_file())
            n += e.file_size();
    return n;
}

uint64_t writeJob(const fs::path& dir, int ranks, int iterations, int layers)
{
    benchjobs::writeSimulatedJob(dir, ranks, iterations, layers);
    return bytesUnder(dir);
}

struct Measured {
    double wall = 0;
    double peakMb = 0; // the largest peak resident set among the step's processes
    bool ok = false;
};

// Runs the commands side by side, each with its own environment additions; waits for all.
// quiet: standard output to `out` (default /dev/null).
Measured runCommands(const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>& commands, bool quiet = true,
                     const std::string& out = "/dev/null")
{
    Measured s;
    std::fflush(stdout);
    const auto t0 = Clock::now();
    std::vector<pid_t> pids;
    for (const auto& [argv, env] : commands) {
        const pid_t pid = fork();
        if (pid == 0) {
            rlimit files{};
            if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur > kOpenFiles) {
                files.rlim_cur = kOpenFiles;
                ::setrlimit(RLIMIT_NOFILE, &files);
            }
            for (const auto& e : env)
                putenv(const_cast<char*>(e.c_str()));
            if (quiet && !freopen(out.c_str(), "w", stdout))
                _exit(127);
            std::vector<char*> args;
            for (const auto& a : argv)
                args.push_back(const_cast<char*>(a.c_str()));
            args.push_back(nullptr);
            execv(args[0], args.data());
            _exit(127);
        }
        pids.push_back(pid);
    }
    s.ok = true;
    for (pid_t p : pids) {
        int status = 0;
        rusage ru{};
        wait4(p, &status, 0, &ru);
        s.ok = s.ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        s.peakMb = std::max(s.peakMb, static_cast<double>(ru.ru_maxrss) / 1024.0);
    }
    s.wall = seconds(t0);
    return s;
}

size_t linesIn(const fs::path& p)
{
    std::ifstream in(p);
    size_t n = 0;
    for (std::string line; std::getline(in, line);)
        ++n;
    return n;
}

void print(const char* what, const Measured& s, double mb, int processes)
{
    std::printf("  %-34s %7.1f s  %7.0f MB/s per process  peak %6.0f MB%s\n", what, s.wall,
                s.wall > 0 ? mb / s.wall / processes : 0.0, s.peakMb, s.ok ? "" : "  FAILED");
}

} // namespace

#ifdef PIPESCOPE_BENCH_APP
// One app step, as its own process: bench_scale --app-step KIND JOB [RANKS].
int appStep(const std::string& kind, const std::string& job, const std::string& ranks)
{
    const QStringList inputs{QString::fromStdString(job)};
    OpenOptions o;
    o.firstFrameAbove = 0;
    const auto t0 = Clock::now();
    if (kind == "first") {
        o.wholeJobAbove = -1; // the first frame of a job read whole (one read in part goes straight to its pipeline)
        auto first = AppSession::loadFirstFrame(inputs, o, nullptr);
        std::printf("  %-34s %7.2f s  (%zu activities in its window)\n", "app: first frame ready", seconds(t0),
                    first ? first->trace->activities.size() : size_t{0});
        return first ? 0 : 1;
    }
    o.firstFrameAbove = -1;
    o.wholeJobAbove = kind == "whole" ? -1 : 0;
    if (kind == "ranks") {
        std::stringstream in(ranks);
        for (std::string item; std::getline(in, item, ',');)
            o.ranks.push_back(std::atoi(item.c_str()));
    }
    auto j = AppSession::load(inputs, o, nullptr);
    std::printf("  %-34s %7.2f s  (%zu of %d ranks, %zu activities%s)\n", ("app: " + kind + " ready").c_str(), seconds(t0),
                j->partial() ? j->part.loadedRanks.size() : static_cast<size_t>(j->part.jobRanks), j->part.jobRanks,
                j->trace->activities.size(), j->costModel ? ", what-if calibrated" : "");
    return 0;
}
#endif

int main(int argc, char** argv)
{
#ifdef PIPESCOPE_BENCH_APP
    if (argc >= 4 && std::string(argv[1]) == "--app-step") {
        try {
            return appStep(argv[2], argv[3], argc > 4 ? argv[4] : "");
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_scale: %s\n", e.what());
            return 1;
        }
    }
#endif
    std::vector<std::string> positional;
    int tasks = 2, layers = 32;
    bool shardedOnly = false, keep = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--tasks" && i + 1 < argc)
            tasks = std::max(1, std::atoi(argv[++i]));
        else if (a == "--layers" && i + 1 < argc)
            layers = std::atoi(argv[++i]);
        else if (a == "--sharded-only")
            shardedOnly = true;
        else if (a == "--keep")
            keep = true;
        else
            positional.push_back(a);
    }
    if (layers < 4 || layers % 4 != 0) {
        std::fprintf(stderr, "bench_scale: --layers must be a multiple of 4\n");
        return 2;
    }
    std::vector<int> sizes;
    {
        std::stringstream in(positional.size() > 0 ? positional[0] : "32,256,1024");
        for (std::string item; std::getline(in, item, ',');)
            sizes.push_back(std::atoi(item.c_str()));
    }
    const int iterations = positional.size() > 1 ? std::atoi(positional[1].c_str()) : 4;
    const fs::path base = positional.size() > 2 ? fs::path(positional[2]) : fs::temp_directory_path();
    const std::string cli = std::getenv("PIPESCOPE_BENCH_CLI") ? std::getenv("PIPESCOPE_BENCH_CLI") : PIPESCOPE_CLI;
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    std::printf("bench_scale: 4 stages x R/4 replicas of gpt-%dl, 8 microbatches 1F1B, %d iterations; %u cores; "
                "at most %d open files per process\n",
                layers, iterations, cores, static_cast<int>(kOpenFiles));
    for (int ranks : sizes) {
        const fs::path dir = base / ("pipescope-bench-scale-" + std::to_string(ranks));
        fs::remove_all(dir);
        fs::create_directories(dir);
        const fs::path traces = dir / "traces";
        auto t0 = Clock::now();
        const double mb = static_cast<double>(writeJob(traces, ranks, iterations, layers)) / 1e6;
        std::printf("\n%d ranks: %.0f MB of Kineto JSON (written in %.1f s)\n", ranks, mb, seconds(t0));

        Measured s;
        if (!shardedOnly) {
            const fs::path one = dir / "one.pipescope";
            s = runCommands({{{cli, "import", traces.string(), "-q", "-o", one.string()}, {}}});
            print("import, 1 process, one store", s, mb, 1);
            std::printf("  %-34s %7.0f MB\n", "  store", static_cast<double>(bytesUnder(one)) / 1e6);
            fs::remove(one);

            const fs::path local = dir / "local";
            s = runCommands({{{cli, "import", traces.string(), "--shards", "2", "-q", "-o", local.string()}, {}}});
            print("import --shards 2 (2 processes)", s, mb, 2);
            fs::remove_all(local);
        }

        // As srun starts them: N tasks side by side, each told its place.
        // More tasks than cores: one parser thread each, as --cpus-per-task=1 would.
        const fs::path job = dir / "job";
        std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> srunTasks;
        for (int k = 0; k < tasks; ++k) {
            std::vector<std::string> command{cli, "import", traces.string(), "-q", "-o", job.string()};
            if (tasks > static_cast<int>(cores))
                command.insert(command.end(), {"--jobs", "1"});
            srunTasks.push_back({command,
                                 {"SLURM_PROCID=" + std::to_string(k), "SLURM_STEP_NUM_TASKS=" + std::to_string(tasks),
                                  "SLURM_NTASKS=" + std::to_string(tasks), "SLURM_LOCALID=" + std::to_string(k)}});
        }
        s = runCommands(srunTasks);
        print(("import as " + std::to_string(tasks) + " srun tasks" + (tasks > static_cast<int>(cores) ? ", --jobs 1" : "")).c_str(), s, mb,
              tasks);
        // One core per task, as a cluster gives each task its own: task 0
        // alone, then both side by side. Equal rates per process: no loss
        // from running side by side (on a machine with a core per task).
        if (!shardedOnly) {
            const fs::path solo = dir / "solo";
            auto task = [&](int k, const fs::path& out) {
                return std::pair<std::vector<std::string>, std::vector<std::string>>{
                    {cli, "import", traces.string(), "-q", "--jobs", "1", "-o", out.string()},
                    {"SLURM_PROCID=" + std::to_string(k), "SLURM_STEP_NUM_TASKS=2", "SLURM_NTASKS=2",
                     "SLURM_LOCALID=" + std::to_string(k)}};
            };
            s = runCommands({task(0, solo)});
            double share = mb / 2;
            if (std::ifstream rec(solo / "shard-0000-of-0002.json"); rec) {
                std::stringstream text;
                text << rec.rdbuf();
                share = static_cast<double>(nlohmann::json::parse(text.str()).value("input_bytes", int64_t{0})) / 1e6;
            }
            print("import, task 0 of 2 alone, --jobs 1", s, share, 1);
            fs::remove_all(solo);
            s = runCommands({task(0, solo), task(1, solo)});
            print("import, 2 tasks side by side, --jobs 1", s, mb, 2);
            fs::remove_all(solo);
        }
        const uint64_t index = bytesUnder(job / kJobIndexName);
        std::printf("  %-34s %7.0f MB in shards, index %.1f KB\n", "  sharded job",
                    static_cast<double>(bytesUnder(job) - index) / 1e6, static_cast<double>(index) / 1e3);
        fs::remove_all(traces);

        // What a user reads: the text of info and analyze, kept beside the job.
        s = runCommands({{{cli, "info", job.string()}, {}}}, true, (dir / "info.txt").string());
        std::printf("  %-34s %7.2f s  peak %6.0f MB%s, %zu lines\n", "info (stages from the index)", s.wall, s.peakMb, s.ok ? "" : "  FAILED",
                    linesIn(dir / "info.txt"));
        s = runCommands({{{cli, "analyze", job.string()}, {}}}, true, (dir / "analyze.txt").string());
        std::printf("  %-34s %7.1f s  peak %6.0f MB%s, %zu lines\n", "analyze, text", s.wall, s.peakMb, s.ok ? "" : "  FAILED",
                    linesIn(dir / "analyze.txt"));
        s = runCommands({{{cli, "analyze", job.string(), "--json", "-o", (dir / "analysis.json").string()}, {}}});
        std::printf("  %-34s %7.1f s  peak %6.0f MB%s\n", "analyze (sharded job)", s.wall, s.peakMb, s.ok ? "" : "  FAILED");
        s = runCommands({{{cli, "report", job.string(), "-o", (dir / "report.html").string()}, {}}});
        std::printf("  %-34s %7.1f s  peak %6.0f MB%s, page %.1f MB\n", "report (sharded job)", s.wall, s.peakMb, s.ok ? "" : "  FAILED",
                    static_cast<double>(bytesUnder(dir / "report.html")) / 1e6);
        // One rank for Perfetto: its pipeline is read, not the job.
        s = runCommands({{{cli, "export", job.string(), "--ranks", "1", "-o", (dir / "rank-1.json").string()}, {}}});
        std::printf("  %-34s %7.2f s  peak %6.0f MB%s\n", "export --ranks 1 (its pipeline read)", s.wall, s.peakMb, s.ok ? "" : "  FAILED");
        fs::remove(dir / "rank-1.json");
        // Under a memory budget the whole job does not fit: analyze and report
        // read the pipeline of the busiest replica, the rest from the index.
        const std::vector<std::string> budget{"PIPESCOPE_MEMORY_BUDGET=33554432"};
        s = runCommands({{{cli, "analyze", job.string(), "--json", "-o", (dir / "analysis-part.json").string()}, budget}});
        std::printf("  %-34s %7.2f s  peak %6.0f MB%s\n", "analyze, 32 MB budget (1 pipeline)", s.wall, s.peakMb, s.ok ? "" : "  FAILED");
        s = runCommands({{{cli, "report", job.string(), "-o", (dir / "report-part.html").string()}, budget}});
        std::printf("  %-34s %7.2f s  peak %6.0f MB%s\n", "report, 32 MB budget (1 pipeline)", s.wall, s.peakMb, s.ok ? "" : "  FAILED");
#ifdef PIPESCOPE_BENCH_APP
        // Each app step in a process of its own (this program, started again),
        // so that its peak is the app's alone and not this process's too.
        const std::string self = fs::read_symlink("/proc/self/exe").string();
        auto appStep = [&](const char* kind, const char* label, const std::string& rankList = {}) {
            std::vector<std::string> args{self, "--app-step", kind, job.string()};
            if (!rankList.empty())
                args.push_back(rankList);
            const Measured m = runCommands({{args, {}}}, false);
            std::printf("  %-34s %7.2f s  peak %6.0f MB%s\n", label, m.wall, m.peakMb, m.ok ? "" : "  FAILED");
        };
        appStep("first", "app: first frame, process");
        // Read in part (what the app does with a job over OpenOptions::wholeJobAbove
        // activities): the busiest replica's pipeline, then one stage's replicas
        // on a click; and, for comparison, the whole job.
        const JobIndex jobIndex = readJobIndex(job.string());
        std::vector<int> stage1 = representativeRanks(jobIndex);
        for (const ShardRecord& r : jobIndex.records)
            for (const JobRankSummary& rs : r.rankSummaries)
                if (rs.stage == 1)
                    stage1.push_back(rs.rank);
        std::sort(stage1.begin(), stage1.end());
        stage1.erase(std::unique(stage1.begin(), stage1.end()), stage1.end());
        appStep("pipeline", "app: one pipeline, process");
        // A stage's replicas and the whole job grow with the job: left out of a --sharded-only run.
        if (!shardedOnly) {
            appStep("ranks", "app: + stage 1's replicas, process", rankListText(stage1));
            appStep("whole", "app: whole job, process");
        }
#else
        std::printf("  (the app's figures need the desktop app's library: build with Qt 6 and QCustomPlot)\n");
#endif
        if (keep) {
            std::printf("  (the job kept in %s; info.txt and analyze.txt beside it)\n", job.c_str());
        } else {
            fs::remove_all(dir);
        }
    }
    return 0;
}
