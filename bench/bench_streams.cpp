// bench_streams: time `analyze()` and the report's timeline on jobs with many
// GPU streams, one kernel each (alternating compute and NCCL kernels, one
// profiler step around them, every launch linked): every per-stream step of
// the analysis must be linear or n log n in the number of streams (the
// verdict's path breakdown once took 0.56 s at 25k streams, 9 s at 100k and
// did not end at 400k).
// Prints streams, time and µs per stream. Usage: bench_streams [thousands ...]
// (default: 25 50 100 200 400)
#include "../tests/common/SyntheticTrace.h"
#include "analysis/Analysis.h"
#include "analysis/Verdict.h"
#include "timeline/TimelineBuild.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace pipescope;

namespace {

Trace buildJob(int streams)
{
    test::TraceBuilder tb;
    tb.range(0, CpuRangeKind::Annotation, "ProfilerStep#1", 900, 1000 + 2'000 * static_cast<TimeNs>(streams) + 10'000);
    for (int i = 0; i < streams; ++i) {
        const TimeNs start = 1000 + 2'000 * static_cast<TimeNs>(i);
        tb.kernel(0, i, i % 2 ? "ncclKernel_AllReduce_RING_LL_Sum_float" : "sm90_xmma_gemm_bf16bf16", start, start + 3'000,
                  start - 500);
    }
    return tb.build();
}

double seconds(std::chrono::steady_clock::time_point from)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
}

} // namespace

int main(int argc, char** argv)
{
    std::vector<int> sizes;
    for (int i = 1; i < argc; ++i)
        sizes.push_back(std::atoi(argv[i]) * 1000);
    if (sizes.empty())
        sizes = {25'000, 50'000, 100'000, 200'000, 400'000};
    std::printf("%10s %12s %12s %12s %14s\n", "streams", "analyze s", "verdict s", "timeline s", "us per stream");
    for (int n : sizes) {
        const Trace t = buildJob(n);
        auto t0 = std::chrono::steady_clock::now();
        const AnalysisResult r = analyze(t);
        const double a = seconds(t0);
        t0 = std::chrono::steady_clock::now();
        const Verdict v = verdict(r, &t);
        const double vs = seconds(t0);
        t0 = std::chrono::steady_clock::now();
        const auto model = timeline::buildMeasured(t, r);
        const double ts = seconds(t0);
        std::printf("%10d %12.3f %12.3f %12.3f %14.2f   (%zu lanes; %s)\n", n, a, vs, ts, (a + vs + ts) * 1e6 / n,
                    model.lanes.size(), std::string(toString(v.kind)).c_str());
    }
    return 0;
}
