// Sharded import at many tasks: what finishing costs a task as the task
// count N grows. A launcher starts N tasks (srun -n N pipescope import ...);
// each imports its share and ends by marking itself in the job folder, and
// the last to end reads the N shard records and writes the index once. The
// traces here are small (R rank files of a few kernels), so what is timed is
// the index work, not the import: per task it must stay flat as N grows (an
// index rewritten by every task grows with N^2).
//
// The tasks run in W worker processes side by side (default 8), each running
// its share of the tasks one after another in-process, so process start-up
// is not counted; the lock and the task list are contended as under srun.
//
//   bench_shard_tasks [TASKS=128,1024,4096] [WORKERS=8] [RANKS=64] [DIR]
#include "import/Import.h"
#include "import/ShardedImport.h"
#include "store/JobIndex.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace pipescope;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// R rank files of 4 kernels each, on one clock.
void writeTraces(const fs::path& dir, int ranks)
{
    fs::create_directories(dir);
    for (int r = 0; r < ranks; ++r) {
        std::ofstream out(dir / ("rank-" + std::to_string(r) + ".json"));
        out << "{\"distributedInfo\": {\"rank\": " << r << ", \"world_size\": " << ranks
            << "}, \"baseTimeNanoseconds\": 1704067200000000000, \"traceEvents\": [";
        for (int k = 0; k < 4; ++k)
            out << (k ? "," : "") << "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k" << k << "\",\"pid\":0,\"tid\":7,\"ts\":"
                << 1000 + 20 * k << ",\"dur\":10,\"args\":{\"device\":0,\"stream\":7}}";
        out << "]}\n";
    }
}

} // namespace

int main(int argc, char** argv)
{
    std::vector<int> sizes;
    {
        std::stringstream in(argc > 1 ? argv[1] : "128,1024,4096");
        for (std::string item; std::getline(in, item, ',');)
            sizes.push_back(std::atoi(item.c_str()));
    }
    const int workers = argc > 2 ? std::max(1, std::atoi(argv[2])) : 8;
    const int ranks = argc > 3 ? std::max(1, std::atoi(argv[3])) : 64;
    const fs::path base = (argc > 4 ? fs::path(argv[4]) : fs::temp_directory_path()) / "pipescope-bench-shard-tasks";
    fs::remove_all(base);
    writeTraces(base / "traces", ranks);
    std::printf("bench_shard_tasks: %d rank files of 4 kernels, tasks run by %d worker processes side by side\n", ranks,
                workers);
    std::printf("%8s %10s %14s %14s %12s\n", "tasks", "wall s", "ms per task", "index bytes", "complete");
    for (int n : sizes) {
        const fs::path job = base / ("job-" + std::to_string(n));
        const auto t0 = Clock::now();
        std::vector<pid_t> pids;
        for (int w = 0; w < workers; ++w) {
            const pid_t pid = ::fork();
            if (pid == 0) {
                int code = 0;
                for (int k = w; k < n; k += workers) {
                    ImportJobOptions o;
                    o.inputs = {(base / "traces").string()};
                    o.output = job.string();
                    o.progress = false;
                    o.jobs = 1;
                    try {
                        importShard(o, {k, n, "bench"});
                    } catch (const std::exception& e) {
                        std::fprintf(stderr, "task %d: %s\n", k, e.what());
                        code = 1;
                    }
                }
                std::fflush(stderr);
                ::_exit(code);
            }
            pids.push_back(pid);
        }
        bool ok = true;
        for (pid_t p : pids) {
            int status = 0;
            ::waitpid(p, &status, 0);
            ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        }
        const double wall = seconds(t0);
        bool complete = false;
        try {
            complete = readJobIndex(job.string()).complete();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s\n", e.what());
        }
        std::error_code ec;
        const auto indexBytes = fs::file_size(job / kJobIndexName, ec);
        std::printf("%8d %10.2f %14.2f %14llu %12s\n", n, wall, 1000.0 * wall / n,
                    static_cast<unsigned long long>(ec ? 0 : indexBytes), ok && complete ? "yes" : "NO");
        std::fflush(stdout);
        fs::remove_all(job, ec);
    }
    fs::remove_all(base);
    return 0;
}
