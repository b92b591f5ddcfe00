// bench_analyze: time `analyze()` on synthetic 1F1B pipeline jobs of about
// 1, 3 and 10 million GPU activities held in memory (the analysis input after
// a store is loaded). Prints events, time and ns per event; cost should grow
// linearly. Usage: bench_analyze [millions ...]   (default: 1 3 10)
#include "../tests/common/SyntheticTrace.h"
#include "analysis/Analysis.h"

#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace pipescope;

namespace {

// One iteration of an 8-stage 1F1B pipeline, repeated with a time shift:
// rank-major, so activities stay sorted by (rank, start) without a sort.
Trace buildJob(size_t targetEvents)
{
    test::PipelineSpec spec;
    spec.stages = 8;
    spec.microbatches = 16;
    spec.forwardKernels = 20;
    spec.backwardKernels = 40;
    spec.forwardNs = 2'000'000;
    spec.backwardNs = 4'000'000;
    spec.commNs = 30'000;
    spec.optimizerNs = 200'000;
    spec.profilerSteps = true;
    Trace one = test::pipelineTrace(spec).trace;
    TimeNs period = 0, first = one.activities.front().start;
    for (const auto& a : one.activities)
        period = std::max(period, a.end - first);
    period += 500'000;
    const size_t iterations = std::max<size_t>(1, targetEvents / one.activities.size());

    Trace t;
    t.strings = one.strings;
    t.streams = one.streams;
    t.ranks = one.ranks;
    t.activities.reserve(iterations * one.activities.size());
    t.ncclOps.reserve(iterations * one.ncclOps.size());
    size_t begin = 0;
    while (begin < one.activities.size()) {
        size_t end = begin;
        while (end < one.activities.size() && one.activities[end].rank == one.activities[begin].rank)
            ++end;
        for (size_t it = 0; it < iterations; ++it) {
            TimeNs shift = static_cast<TimeNs>(it) * period;
            for (size_t i = begin; i < end; ++i) {
                Activity a = one.activities[i];
                a.id = static_cast<int64_t>(t.activities.size()) + 1;
                a.start += shift;
                a.end += shift;
                if (a.launchStart)
                    a.launchStart = *a.launchStart + shift;
                if (a.ncclIndex >= 0) {
                    NcclOp op = one.ncclOps[static_cast<size_t>(a.ncclIndex)];
                    op.activityId = a.id;
                    a.ncclIndex = static_cast<int64_t>(t.ncclOps.size());
                    t.ncclOps.push_back(std::move(op));
                }
                t.activities.push_back(a);
            }
        }
        begin = end;
    }
    for (const auto& r : one.cpuRanges)
        for (size_t it = 0; it < iterations; ++it) {
            CpuRange c = r;
            c.start += static_cast<TimeNs>(it) * period;
            c.end += static_cast<TimeNs>(it) * period;
            c.name = static_cast<StringId>(t.strings.size());
            t.strings.push_back("ProfilerStep#" + std::to_string(it + 1));
            t.cpuRanges.push_back(c);
        }
    std::stable_sort(t.cpuRanges.begin(), t.cpuRanges.end(), [](const CpuRange& a, const CpuRange& b) {
        return std::tie(a.rank, a.tid, a.start) < std::tie(b.rank, b.tid, b.start);
    });
    return t;
}

double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b)
{
    return std::chrono::duration<double>(b - a).count();
}

} // namespace

int main(int argc, char** argv)
{
    std::vector<double> millions;
    for (int i = 1; i < argc; ++i)
        millions.push_back(std::atof(argv[i]));
    if (millions.empty())
        millions = {1, 3, 10};
    // Wall time and CPU time of this process (the machine may be shared).
    std::printf("%12s %10s %10s %12s %12s %12s %14s\n", "activities", "iterations", "build s", "analyze s", "analyze cpu", "cpu ns/act", "all-iter cpu");
    for (double m : millions) {
        auto t0 = std::chrono::steady_clock::now();
        Trace t = buildJob(static_cast<size_t>(m * 1e6));
        auto t1 = std::chrono::steady_clock::now();
        std::clock_t c1 = std::clock();
        AnalysisResult r = analyze(t);
        std::clock_t c2 = std::clock();
        auto t2 = std::chrono::steady_clock::now();
        AnalyzeOptions all;
        all.allIterations = true;
        AnalysisResult r2 = analyze(t, all);
        std::clock_t c3 = std::clock();
        double cpu = static_cast<double>(c2 - c1) / CLOCKS_PER_SEC;
        std::printf("%12zu %10zu %10.2f %12.3f %12.3f %12.1f %14.3f   (schedule %s, %zu bubbles in all iterations)\n",
                    t.activities.size(), r.iterations.size(), seconds(t0, t1), seconds(t1, t2), cpu,
                    cpu * 1e9 / static_cast<double>(t.activities.size()), static_cast<double>(c3 - c2) / CLOCKS_PER_SEC,
                    scheduleName(r.pipeline.schedule).c_str(), r2.bubbles.size());
    }
    return 0;
}
