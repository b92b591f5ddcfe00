// Store benchmark: writes a synthetic store of N GPU activities (plus launch
// calls and annotations), then times finish(), Store::summary() (what
// `pipescope info` reads) and Store::load() (what the analysis reads).
//   bench_store [activities=10000000] [dir=/tmp] [keep]   (keep: leave the store for timing `pipescope info`)
#include "store/Store.h"
#include "store/StoreWriter.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/resource.h>

using namespace pipescope;
using Clock = std::chrono::steady_clock;

static double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

static long peakRssMiB()
{
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;
}

int main(int argc, char** argv)
{
    const int64_t n = argc > 1 ? std::atoll(argv[1]) : 10'000'000;
    const std::string dir = argc > 2 ? argv[2] : "/tmp";
    const std::string path = dir + "/bench_store.pipescope";
    const int ranks = 8;

    auto t0 = Clock::now();
    {
        StoreWriter w(path);
        StringId names[16];
        for (int i = 0; i < 16; ++i)
            names[i] = w.intern("kernel_" + std::to_string(i));
        StringId launch = w.intern("cudaLaunchKernel");
        StringId step = w.intern("ProfilerStep#1");
        const int64_t perRank = n / ranks;
        for (int r = 0; r < ranks; ++r) {
            int64_t s7 = w.stream(r, r, 7), s20 = w.stream(r, r, 20);
            TimeNs t = 1'000'000'000;
            for (int64_t i = 0; i < perRank; ++i) {
                TimeNs dur = 2000 + (i * 7919) % 5000;
                bool comm = i % 10 == 0;
                w.addActivity({r, comm ? s20 : s7, ActivityKind::Kernel, t, t + dur, names[i % 16], i});
                if (i % 4 == 0) // a quarter of the kernels with their launch call, as CPU ranges
                    w.addCpuRange({r, 1, CpuRangeKind::Runtime, t - 5000, t - 3000, launch, std::nullopt, i});
                t += dur + 500;
            }
            w.addCpuRange({r, 1, CpuRangeKind::Annotation, 1'000'000'000, t, step});
        }
        double insert = secondsSince(t0);
        auto t1 = Clock::now();
        auto tStep = Clock::now();
        std::string last = "flush";
        w.setProgress([&](std::string_view stepName) {
            std::printf("  finish: %-18s %.2f s\n", last.c_str(), secondsSince(tStep));
            tStep = Clock::now();
            last = std::string(stepName);
        });
        w.finish();
        std::printf("  finish: %-18s %.2f s\n", last.c_str(), secondsSince(tStep));
        std::printf("write   %lld activities: insert %.2f s (%.2f M rows/s), finish %.2f s\n", (long long)n, insert,
                    double(n + n / 4) / insert / 1e6, secondsSince(t1));
    }
    auto size = std::filesystem::file_size(path);
    std::printf("store   %.1f MiB (%.1f bytes/activity incl. launches)\n", double(size) / 1048576.0, double(size) / double(n));

    auto t2 = Clock::now();
    {
        Store s(path);
        auto sum = s.summary();
        std::printf("summary %.3f s  (what `pipescope info` reads; %zu GPUs)\n", secondsSince(t2), sum.gpuSummaries.size());
    }
    auto t3 = Clock::now();
    {
        Store s(path);
        auto trace = s.load();
        std::printf("load    %.2f s  (%zu activities, %.2f M/s)\n", secondsSince(t3), trace.activities.size(),
                    double(trace.activities.size()) / secondsSince(t3) / 1e6);
    }
    std::printf("peak RSS %ld MiB\n", peakRssMiB());
    if (argc > 3 && std::string(argv[3]) == "keep")
        std::printf("kept %s\n", path.c_str());
    else
        std::filesystem::remove(path);
    return 0;
}
