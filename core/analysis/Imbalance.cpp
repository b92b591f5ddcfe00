// Imbalance across stages: step times per microbatch, busy time, the
// bottleneck stage, data-parallel stragglers, a balanced-partition lower
// bound and compute/communication overlap.
#include "analysis/detail/Context.h"

#include <cmath>
#include <map>
#include <set>
#include <tuple>

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

// A straggler is a worker, so it is the slowest of its stage iteration after
// iteration; a slowest replica that changes with the data is not one. Over
// the iterations analysed with every replica of a stage (busy time, the union
// of its compute kernels), a straggler must be the busiest in more than half
// of them when there are three or more; the stages where none is are named.
void keepPersistentStragglers(const AnalysisResult& out, Imbalance& im,
                              const std::map<int, std::vector<const StageAssignment*>>& replicasOf)
{
    std::map<std::pair<int, int>, TimeNs> busy; // (iteration, rank)
    std::set<int> iterations;
    for (const RankIdle& ri : out.idle) {
        busy[{ri.iteration, ri.rank}] = ri.busyNs;
        iterations.insert(ri.iteration);
    }
    std::map<int, std::map<int, int>> slowestCount; // stage -> rank -> iterations
    std::map<int, int> counted;                     // stage -> iterations with every replica
    for (const auto& [stage, reps] : replicasOf) {
        if (reps.size() < 2)
            continue;
        for (int it : iterations) {
            int slowest = -1;
            TimeNs most = -1;
            bool all = true;
            for (const StageAssignment* a : reps) {
                auto b = busy.find({it, a->rank});
                if (b == busy.end() || b->second <= 0) {
                    all = false;
                    break;
                }
                if (b->second > most) {
                    most = b->second;
                    slowest = a->rank;
                }
            }
            if (!all)
                continue;
            ++counted[stage];
            ++slowestCount[stage][slowest];
        }
    }
    std::set<int> moving;
    std::vector<Straggler> kept;
    for (Straggler s : im.stragglers) {
        s.iterations = counted[s.stage];
        s.slowestIterations = slowestCount[s.stage][s.rank];
        if (s.iterations >= 3 && 2 * s.slowestIterations <= s.iterations) {
            moving.insert(s.stage);
            continue;
        }
        kept.push_back(s);
    }
    im.stragglers = std::move(kept);
    for (int stage : moving) {
        MovingSlowest m;
        m.stage = stage;
        m.iterations = counted[stage];
        for (const auto& [rank, n] : slowestCount[stage])
            m.slowest.emplace_back(rank, n);
        std::stable_sort(m.slowest.begin(), m.slowest.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
        im.movingSlowest.push_back(std::move(m));
    }
}

// Each rank's compute against the median of the OTHER replicas of its stage
// (leave-one-out: with two replicas the median of both would include the
// straggler itself and halve its excess), over the steps all of them ran.
void compareReplicas(const AnalysisResult& out, const std::vector<Step>& steps, Imbalance& im)
{
    using StepKey = std::tuple<int, int, int>; // kind, chunk, microbatch
    std::map<int, std::map<StepKey, TimeNs>> computeOf; // rank -> step -> compute
    for (const Step& s : steps)
        computeOf[s.rank][{static_cast<int>(s.kind), s.chunk, s.microbatch}] += s.computeNs;
    std::map<int, std::vector<const StageAssignment*>> replicasOf; // stage -> its ranks with steps
    for (const StageAssignment& a : out.pipeline.stageMap)
        if (a.stage >= 0 && computeOf.count(a.rank))
            replicasOf[a.stage].push_back(&a);

    std::map<int, TimeNs> busyOf;
    for (const auto& ri : out.idle)
        if (ri.iteration == out.selectedIteration)
            busyOf[ri.rank] = ri.busyNs;
    for (const auto& [stage, reps] : replicasOf) {
        // The steps every replica of the stage ran: a step one replica lost
        // (a capture cut short) must not count as a speed difference.
        std::map<StepKey, TimeNs> common = computeOf[reps.front()->rank];
        for (const StageAssignment* a : reps) {
            const auto& own = computeOf[a->rank];
            for (auto it = common.begin(); it != common.end();)
                it = own.count(it->first) ? std::next(it) : common.erase(it);
        }
        std::vector<TimeNs> compute;
        for (const StageAssignment* a : reps) {
            TimeNs c = 0;
            for (const auto& [key, ns] : computeOf[a->rank])
                if (common.count(key))
                    c += ns;
            compute.push_back(c);
        }
        for (size_t i = 0; i < reps.size(); ++i) {
            RankSpeed rs;
            rs.rank = reps[i]->rank;
            rs.stage = stage;
            rs.replica = reps[i]->replica;
            rs.steps = static_cast<int>(common.size());
            rs.computeNs = compute[i];
            std::vector<double> peers;
            for (size_t j = 0; j < reps.size(); ++j)
                if (j != i)
                    peers.push_back(static_cast<double>(compute[j]));
            std::sort(peers.begin(), peers.end());
            rs.peerMedianNs = static_cast<TimeNs>(std::llround(percentile(peers, 0.5)));
            if (rs.peerMedianNs > 0 && rs.steps > 0)
                rs.relative = static_cast<double>(rs.computeNs) / static_cast<double>(rs.peerMedianNs);
            if (rs.relative && *rs.relative >= kStragglerRatio)
                im.stragglers.push_back({stage, rs.rank, rs.replica, busyOf[rs.rank], rs.computeNs, rs.peerMedianNs, *rs.relative,
                                         rs.computeNs - rs.peerMedianNs});
            im.rankSpeed.push_back(rs);
        }
    }
    std::sort(im.rankSpeed.begin(), im.rankSpeed.end(), [](const RankSpeed& a, const RankSpeed& b) { return a.rank < b.rank; });
    std::stable_sort(im.stragglers.begin(), im.stragglers.end(),
                     [](const Straggler& a, const Straggler& b) { return a.costNs > b.costNs; });
    keepPersistentStragglers(out, im, replicasOf);
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
        im.stages.push_back(std::move(sb));
    }
    compareReplicas(out, steps, im);
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
