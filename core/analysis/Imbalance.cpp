// Imbalance across stages: step times per microbatch, busy time, the
// bottleneck stage, data-parallel stragglers, a balanced-partition lower
// bound and compute/communication overlap.
#include "analysis/detail/Context.h"

#include <cmath>

namespace pipescope::detail {

namespace {

Distribution distributionOf(std::vector<double> v)
{
    Distribution d;
    if (v.empty())
        return d;
    std::sort(v.begin(), v.end());
    d.count = static_cast<int64_t>(v.size());
    double sum = 0;
    for (double x : v)
        sum += x;
    d.mean = sum / static_cast<double>(v.size());
    d.p50 = percentile(v, 0.5);
    d.p95 = percentile(v, 0.95);
    return d;
}

} // namespace

void measureImbalance(Context& ctx, AnalysisResult& out, const std::vector<Step>& steps)
{
    Imbalance& im = out.imbalance;
    if (out.selectedIteration < 0)
        return;
    const Iteration& it = out.iterations[static_cast<size_t>(out.selectedIteration)];
    im.iterationNs = it.end - it.start;

    // Compute/communication overlap per rank (HTA's definition, exact times).
    for (const auto& rd : ctx.ranks) {
        std::vector<Interval> comm, comp;
        for (uint32_t c : rd.comm) {
            const Activity& a = ctx.act(c);
            if (a.end <= it.start || a.start >= it.end)
                continue;
            unionAppend(comm, std::max(a.start, it.start), std::min(a.end, it.end));
        }
        for (const auto& b : rd.busy)
            if (b.end > it.start && b.start < it.end)
                comp.push_back({std::max(b.start, it.start), std::min(b.end, it.end)});
        Imbalance::Overlap o;
        o.rank = rd.rank;
        o.commNs = totalLength(comm);
        o.overlappedNs = intersectionLength(comm, comp);
        im.overlap.push_back(o);
    }

    if (!out.pipeline.found)
        return;
    const int p = out.pipeline.pp;
    std::map<int, StageBalance> stages;
    std::map<int, std::vector<double>> f, b, i, w;
    for (const Step& s : steps) {
        auto v = static_cast<double>(s.computeNs);
        switch (s.kind) {
        case StepKind::F: f[s.stage].push_back(v); break;
        case StepKind::B: b[s.stage].push_back(v); break;
        case StepKind::I: i[s.stage].push_back(v); break;
        case StepKind::W: w[s.stage].push_back(v); break;
        }
    }
    std::map<int, std::vector<std::pair<int, TimeNs>>> busyByStage;
    for (const auto& ri : out.idle)
        if (ri.iteration == out.selectedIteration && ri.stage >= 0)
            busyByStage[ri.stage].push_back({ri.rank, ri.busyNs});
    for (int s = 0; s < p; ++s) {
        StageBalance sb;
        sb.stage = s;
        sb.forwardNs = distributionOf(f[s]);
        sb.backwardNs = distributionOf(b[s]);
        sb.backwardInputNs = distributionOf(i[s]);
        sb.backwardWeightNs = distributionOf(w[s]);
        auto& reps = busyByStage[s];
        TimeNs sum = 0;
        for (const auto& [rank, busy] : reps) {
            sb.ranks.push_back(rank);
            sum += busy;
        }
        sb.busyNs = reps.empty() ? 0 : sum / static_cast<TimeNs>(reps.size());
        // Stragglers: replicas of the stage at least 5% busier than the stage's median.
        if (reps.size() >= 2) {
            std::vector<double> v;
            for (const auto& r : reps)
                v.push_back(static_cast<double>(r.second));
            std::sort(v.begin(), v.end());
            double med = percentile(v, 0.5);
            for (const auto& [rank, busy] : reps) {
                double ratio = med > 0 ? static_cast<double>(busy) / med : 1.0;
                if (ratio >= 1.05)
                    im.stragglers.push_back({s, rank, busy, ratio});
            }
        }
        im.stages.push_back(std::move(sb));
    }
    double sum = 0, mx = 0;
    int present = 0;
    for (const auto& sb : im.stages) {
        if (sb.ranks.empty())
            continue;
        ++present;
        sum += static_cast<double>(sb.busyNs);
        if (static_cast<double>(sb.busyNs) > mx) {
            mx = static_cast<double>(sb.busyNs);
            im.bottleneckStage = sb.stage;
        }
    }
    double mean = present ? sum / present : 0;
    im.maxOverMean = mean > 0 ? mx / mean : 1.0;
    const int m = out.pipeline.microbatches, v = out.pipeline.chunks;
    im.idealBubbleFraction = m > 0 ? static_cast<double>(p - 1) / static_cast<double>(v * m + p - 1) : 0;
    im.balancedLowerBoundNs = m > 0 ? static_cast<TimeNs>(std::llround(mean / (1.0 - im.idealBubbleFraction))) : 0;
}

} // namespace pipescope::detail
