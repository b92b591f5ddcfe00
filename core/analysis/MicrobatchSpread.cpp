// Uneven microbatches (docs/analysis.md, "Uneven microbatches"): each
// microbatch's forward and backward time per stage in the selected
// iteration, their spread, and each microbatch's size against the mean.
#include "analysis/Analysis.h"
#include "analysis/detail/Context.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace pipescope::detail {

namespace {

// Stages x microbatches: 4096 x 4096 at most (a pipeline of 64 stages with
// 1,024 microbatches uses 64 K).
constexpr int64_t kMaxMicrobatchCells = int64_t{1} << 24;

MicrobatchTimes spreadOf(const std::vector<TimeNs>& perMicrobatch)
{
    MicrobatchTimes t;
    std::vector<double> v;
    for (size_t m = 0; m < perMicrobatch.size(); ++m) {
        const TimeNs x = perMicrobatch[m];
        if (x < 0)
            continue;
        v.push_back(static_cast<double>(x));
        if (t.shortest < 0 || x < perMicrobatch[size_t(t.shortest)])
            t.shortest = static_cast<int>(m);
        if (t.longest < 0 || x > perMicrobatch[size_t(t.longest)])
            t.longest = static_cast<int>(m);
    }
    if (v.empty())
        return t;
    std::sort(v.begin(), v.end());
    auto ns = [](double x) { return static_cast<TimeNs>(std::llround(x)); };
    t.minNs = ns(v.front());
    t.maxNs = ns(v.back());
    t.p50Ns = ns(percentile(v, 0.5));
    t.p95Ns = ns(percentile(v, 0.95));
    return t;
}

} // namespace

void measureMicrobatchSpread(AnalysisResult& out, const std::vector<Step>& selected)
{
    out.microbatchSpread = {};
    MicrobatchSpread& ms = out.microbatchSpread;
    int M = 0, P = 0;
    for (const Step& s : selected) {
        M = std::max(M, s.microbatch + 1);
        P = std::max(P, s.stage + 1);
    }
    // The table below is stages x microbatches; step labels from a trace can
    // claim any index, so a table larger than any real pipeline's is not made.
    if (M < 2 || P < 1 || static_cast<int64_t>(M) * P > kMaxMicrobatchCells)
        return;
    ms.microbatches = M;
    // (stage, microbatch, rank) -> forward, backward time on that rank (its chunks added).
    std::map<std::tuple<int, int, int>, std::pair<TimeNs, TimeNs>> perRank;
    for (const Step& s : selected) {
        if (s.stage < 0 || s.microbatch < 0 || s.end < s.start)
            continue;
        auto& [f, b] = perRank[{s.stage, s.microbatch, s.rank}];
        (s.kind == StepKind::F ? f : b) += s.end - s.start;
    }
    // Replicas averaged.
    const size_t cells = size_t(P) * size_t(M);
    std::vector<double> fSum(cells, 0), bSum(cells, 0), fN(cells, 0), bN(cells, 0);
    for (const auto& [key, fb] : perRank) {
        const auto [stage, mb, rank] = key;
        const size_t k = size_t(stage) * size_t(M) + size_t(mb);
        if (fb.first > 0) {
            fSum[k] += static_cast<double>(fb.first);
            fN[k] += 1;
        }
        if (fb.second > 0) {
            bSum[k] += static_cast<double>(fb.second);
            bN[k] += 1;
        }
    }
    std::vector<double> total(size_t(M), 0.0);
    for (int s = 0; s < P; ++s) {
        MicrobatchStage st;
        st.stage = s;
        st.forwardNs.assign(size_t(M), -1);
        st.backwardNs.assign(size_t(M), -1);
        bool any = false, complete = true;
        for (int m = 0; m < M; ++m) {
            const size_t k = size_t(s) * size_t(M) + size_t(m);
            if (fN[k] > 0)
                st.forwardNs[size_t(m)] = static_cast<TimeNs>(std::llround(fSum[k] / fN[k]));
            if (bN[k] > 0)
                st.backwardNs[size_t(m)] = static_cast<TimeNs>(std::llround(bSum[k] / bN[k]));
            any = any || fN[k] > 0 || bN[k] > 0;
            complete = complete && fN[k] > 0 && bN[k] > 0;
        }
        if (!any)
            continue;
        st.forward = spreadOf(st.forwardNs);
        st.backward = spreadOf(st.backwardNs);
        // A microbatch's size counts only stages that ran all of them, so a
        // step missing from the capture does not make its microbatch look small.
        if (complete)
            for (int m = 0; m < M; ++m)
                total[size_t(m)] += static_cast<double>(st.forwardNs[size_t(m)] + st.backwardNs[size_t(m)]);
        ms.stages.push_back(std::move(st));
    }
    double mean = 0;
    for (double t : total)
        mean += t;
    mean /= M;
    if (mean <= 0)
        return;
    ms.size.resize(size_t(M));
    double var = 0;
    for (int m = 0; m < M; ++m) {
        ms.size[size_t(m)] = total[size_t(m)] / mean;
        var += (ms.size[size_t(m)] - 1.0) * (ms.size[size_t(m)] - 1.0);
        if (ms.shortest < 0 || ms.size[size_t(m)] < ms.size[size_t(ms.shortest)])
            ms.shortest = m;
        if (ms.longest < 0 || ms.size[size_t(m)] > ms.size[size_t(ms.longest)])
            ms.longest = m;
    }
    ms.cv = std::sqrt(var / M);
    ms.uneven = ms.cv >= kUnevenMicrobatchCv;
}

} // namespace pipescope::detail
