#include "analysis/Verdict.h"
#include "analysis/detail/VerdictSteps.h"

#include "util/Format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace pipescope {

std::string_view toString(VerdictKind k)
{
    switch (k) {
    case VerdictKind::None: return "none";
    case VerdictKind::ComputeBound: return "compute-bound";
    case VerdictKind::StageImbalance: return "stage-imbalance";
    case VerdictKind::PipelineBubbles: return "pipeline-bubbles";
    case VerdictKind::CommunicationBound: return "communication-bound";
    case VerdictKind::DpSync: return "dp-sync";
    case VerdictKind::HostBound: return "host-bound";
    case VerdictKind::CopyBound: return "copy-bound";
    case VerdictKind::Idle: return "idle";
    case VerdictKind::Straggler: return "straggler";
    }
    return "none";
}

std::string_view toString(PathLimiter l)
{
    switch (l) {
    case PathLimiter::Compute: return "compute";
    case PathLimiter::P2p: return "point-to-point";
    case PathLimiter::Collective: return "collectives";
    case PathLimiter::Host: return "host";
    case PathLimiter::FillDrain: return "fill/drain";
    case PathLimiter::Copy: return "copies";
    case PathLimiter::Other: return "other idle";
    }
    return "other idle";
}

namespace {

size_t ix(PathLimiter l) { return static_cast<size_t>(l); }
size_t ix(BubbleCause c) { return static_cast<size_t>(c); }

PathLimiter limiterOfKind(PathKind kind)
{
    switch (kind) {
    case PathKind::F:
    case PathKind::B:
    case PathKind::I:
    case PathKind::W:
    case PathKind::Compute: return PathLimiter::Compute;
    case PathKind::P2p: return PathLimiter::P2p;
    case PathKind::Collective: return PathLimiter::Collective;
    case PathKind::Memcpy:
    case PathKind::Memset: return PathLimiter::Copy;
    case PathKind::Other:
    case PathKind::Idle: break;
    }
    return PathLimiter::Other;
}

PathLimiter limiterOfCause(BubbleCause c)
{
    switch (c) {
    case BubbleCause::FillDrain: return PathLimiter::FillDrain;
    case BubbleCause::WaitNeighbor:
    case BubbleCause::P2pTransfer: return PathLimiter::P2p;
    case BubbleCause::DpSync:
    case BubbleCause::AllToAll: return PathLimiter::Collective;
    case BubbleCause::HostBound:
    case BubbleCause::StepOverhead:
    case BubbleCause::LaunchGap: return PathLimiter::Host;
    case BubbleCause::Other: return PathLimiter::Other;
    }
    return PathLimiter::Other;
}

double share(TimeNs part, TimeNs whole) { return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0; }

// Whole percent and percentage points: a headline reads better without decimals.
std::string pct0(double fraction) { return std::to_string(std::lround(fraction * 100.0)) + "%"; }
std::string points(double fraction) { return std::to_string(std::lround(fraction * 100.0)) + " points"; }

std::string times(double ratio)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", ratio);
    return buf;
}

// Argmax over a rank -> ns map; ties go to the lowest rank.
int topOf(const std::map<int, TimeNs>& m)
{
    int best = -1;
    TimeNs bestNs = 0;
    for (const auto& [rank, ns] : m)
        if (ns > bestNs) {
            best = rank;
            bestNs = ns;
        }
    return best;
}

std::string stageOfRank(const AnalysisResult& r, int rank)
{
    for (const auto& a : r.pipeline.stageMap)
        if (a.rank == rank && a.stage >= 0)
            return " (stage " + std::to_string(a.stage) + ")";
    return {};
}

// F+B (and I, W) compute per microbatch of a stage.
double perMicrobatch(const StageBalance& s)
{
    double v = 0;
    for (const Distribution* d : {&s.forwardNs, &s.backwardNs, &s.backwardInputNs, &s.backwardWeightNs})
        if (d->count > 0)
            v += d->mean;
    return v;
}

} // namespace

PathBreakdown pathBreakdown(const AnalysisResult& r)
{
    PathBreakdown out;
    out.topRank.fill(-1);
    const CriticalPath& cp = r.criticalPath;
    if (cp.segments.empty())
        return out;

    std::map<int, std::vector<const Bubble*>> bubblesOf;
    for (const Bubble& b : r.bubbles)
        if (b.iteration == cp.iteration)
            bubblesOf[b.rank].push_back(&b);
    for (auto& [rank, v] : bubblesOf)
        std::sort(v.begin(), v.end(), [](const Bubble* x, const Bubble* y) { return x->start < y->start; });

    std::array<std::map<int, TimeNs>, kPathLimiters> perRank;
    auto add = [&](PathLimiter l, int rank, TimeNs ns) {
        if (ns <= 0)
            return;
        out.byLimiter[ix(l)] += ns;
        perRank[ix(l)][rank] += ns;
    };
    for (const PathSegment& s : cp.segments) {
        out.totalNs += s.end - s.start;
        if (s.kind != PathKind::Idle) {
            add(limiterOfKind(s.kind), s.rank, s.end - s.start);
            continue;
        }
        // The idle part of the path takes the cause of the rank's bubbles it overlaps;
        // what no bubble covers (the rank computing on another stream) stays "other".
        TimeNs covered = 0;
        auto it = bubblesOf.find(s.rank);
        if (it != bubblesOf.end()) {
            // A rank's bubbles are disjoint gaps in start order: start at the
            // last one beginning before the segment (linear in the path, not
            // segments times bubbles).
            const auto& bs = it->second;
            auto from = std::upper_bound(bs.begin(), bs.end(), s.start, [](TimeNs v, const Bubble* b) { return v < b->start; });
            if (from != bs.begin())
                --from;
            for (auto bi = from; bi != bs.end(); ++bi) {
                const Bubble* b = *bi;
                if (b->start >= s.end)
                    break;
                const TimeNs lo = std::max(s.start, b->start), hi = std::min(s.end, b->end);
                if (hi > lo) {
                    add(limiterOfCause(b->cause), s.rank, hi - lo);
                    covered += hi - lo;
                }
            }
        }
        add(PathLimiter::Other, s.rank, s.end - s.start - covered);
    }
    for (int l = 0; l < kPathLimiters; ++l)
        out.topRank[static_cast<size_t>(l)] = topOf(perRank[static_cast<size_t>(l)]);
    return out;
}

namespace {

// With interleaving, the chunk of the bottleneck stage that carries most of
// its excess, when one does (the last chunk of the last stage computes the
// loss; the first holds the embedding): "most of stage 3's excess is its
// chunk 3 (virtual stage 15 of 16, the last, where the loss is computed):
// F 17.3 ms + B 19.3 ms per microbatch, against F 3.3 ms + B 6.9 ms for the
// median chunk".
std::string dominantChunk(const AnalysisResult& r, int stage)
{
    const PipelineStructure& p = r.pipeline;
    if (p.chunks < 2 || p.pp < 2)
        return {};
    // Forward and backward time per microbatch of each (stage, chunk), over the selected iteration.
    struct PerChunk {
        double forward = 0, backward = 0;
        std::set<int> microbatches;
        double f() const { return forward / static_cast<double>(std::max<size_t>(1, microbatches.size())); }
        double b() const { return backward / static_cast<double>(std::max<size_t>(1, microbatches.size())); }
    };
    std::map<std::pair<int, int>, PerChunk> perChunk;
    for (const Step& st : r.steps) {
        if (st.iteration != r.selectedIteration || st.stage < 0)
            continue;
        const TimeNs t = st.computeNs > 0 ? st.computeNs : st.end - st.start;
        PerChunk& e = perChunk[{st.stage, st.chunk}];
        (st.kind == StepKind::F ? e.forward : e.backward) += static_cast<double>(t);
        e.microbatches.insert(st.microbatch);
    }
    if (perChunk.size() < 4)
        return {};
    std::vector<const PerChunk*> all;
    for (const auto& [key, e] : perChunk)
        all.push_back(&e);
    std::sort(all.begin(), all.end(), [](const PerChunk* a, const PerChunk* b) { return a->f() + a->b() < b->f() + b->b(); });
    const PerChunk& median = *all[all.size() / 2];
    const double typical = median.f() + median.b();
    double excess = 0, worst = 0;
    int worstChunk = -1;
    for (const auto& [key, e] : perChunk) {
        if (key.first != stage)
            continue;
        const double over = e.f() + e.b() - typical;
        excess += std::max(0.0, over);
        if (over > worst) {
            worst = over;
            worstChunk = key.second;
        }
    }
    if (worstChunk < 0 || excess <= 0 || worst < 0.5 * excess || worst < 0.25 * typical)
        return {};
    const PerChunk& w = perChunk[{stage, worstChunk}];
    const int virtualStage = worstChunk * p.pp + stage, stages = p.pp * p.chunks;
    std::string where;
    if (virtualStage == stages - 1)
        where = ", the last, where the loss is computed";
    else if (virtualStage == 0)
        where = ", the first, with the embedding";
    auto ns = [](double t) { return formatDuration(static_cast<TimeNs>(t)); };
    return "most of stage " + std::to_string(stage) + "'s excess is its chunk " + std::to_string(worstChunk) +
           " (virtual stage " + std::to_string(virtualStage) + " of " + std::to_string(stages) + where + "): F " +
           ns(w.f()) + " + B " + ns(w.b()) + " per microbatch, against F " + ns(median.f()) + " + B " + ns(median.b()) +
           " for the median chunk";
}

} // namespace

namespace detail {

VerdictBasis verdictBasis(const PathBreakdown& pb, const IdleTotals& idle)
{
    VerdictBasis basis;
    if (pb.totalNs > 0) {
        basis.name = "the critical path";
        basis.totalNs = pb.totalNs;
        basis.byLimiter = pb.byLimiter;
        basis.topRank = pb.topRank;
        return basis;
    }
    basis.name = "GPU time";
    basis.totalNs = idle.windowNs;
    basis.byLimiter[ix(PathLimiter::Compute)] = idle.windowNs - idle.idleNs;
    std::array<std::map<int, TimeNs>, kPathLimiters> perRank;
    for (const auto& [rank, causes] : idle.perRank)
        for (int c = 0; c < kBubbleCauses; ++c) {
            const PathLimiter l = limiterOfCause(static_cast<BubbleCause>(c));
            basis.byLimiter[ix(l)] += causes[static_cast<size_t>(c)];
            perRank[ix(l)][rank] += causes[static_cast<size_t>(c)];
        }
    basis.topRank.fill(-1);
    for (int l = 1; l < kPathLimiters; ++l)
        basis.topRank[static_cast<size_t>(l)] = topOf(perRank[static_cast<size_t>(l)]);
    return basis;
}

VerdictDecision decideVerdict(const VerdictSignals& s)
{
    VerdictDecision d;
    // The largest non-compute part of the basis names the limiter; ties go to the earlier limiter.
    for (int l = 1; l < kPathLimiters; ++l)
        if (s.byLimiter[static_cast<size_t>(l)] > s.byLimiter[ix(d.limiter)])
            d.limiter = static_cast<PathLimiter>(l);
    // Compute paces the job when it fills the critical path or keeps the busiest
    // GPU busy: the path alone can run through receives that wait on a slow stage.
    const bool computePaced = s.computeShare >= kVerdictComputeShare || s.busiestShare >= kVerdictComputeShare;
    if (computePaced && s.pipeline && s.bottleneck && s.stages >= 2 && s.maxOverMean >= kVerdictImbalance)
        d.kind = VerdictKind::StageImbalance;
    else if (computePaced && s.pipeline && s.idleFraction >= kVerdictBubbleIdle && s.fillDrainLeads)
        d.kind = VerdictKind::PipelineBubbles;
    else if (computePaced)
        d.kind = VerdictKind::ComputeBound;
    else if (d.limiter == PathLimiter::FillDrain && s.pipeline)
        d.kind = VerdictKind::PipelineBubbles;
    else
        switch (d.limiter) {
        case PathLimiter::P2p: d.kind = VerdictKind::CommunicationBound; break;
        case PathLimiter::Collective: d.kind = VerdictKind::DpSync; break;
        case PathLimiter::Host: d.kind = VerdictKind::HostBound; break;
        case PathLimiter::Copy: d.kind = VerdictKind::CopyBound; break;
        default: d.kind = VerdictKind::Idle; break;
        }
    return d;
}

} // namespace detail

namespace {

using detail::IdleTotals;
using detail::VerdictBasis;

IdleTotals selectedIdle(const AnalysisResult& r)
{
    IdleTotals idle;
    for (const RankIdle& ri : r.idle) {
        if (ri.iteration != r.selectedIteration)
            continue;
        ++idle.ranks;
        idle.windowNs += ri.windowNs;
        idle.idleNs += ri.idleNs;
        for (int c = 0; c < kBubbleCauses; ++c)
            idle.byCause[static_cast<size_t>(c)] += ri.byCause[static_cast<size_t>(c)];
        idle.perRank[ri.rank] = ri.byCause;
    }
    return idle;
}

Verdict noVerdict(const AnalysisResult& r)
{
    Verdict v;
    v.kind = VerdictKind::None;
    v.headline = "no verdict: no iteration with GPU work was analysed";
    for (const auto& w : r.warnings)
        v.facts.push_back(w.message);
    return v;
}

// What the headline and the facts are drawn from.
struct Evidence {
    const AnalysisResult& r;
    const IdleTotals& idle;
    const PathBreakdown& pb;
    const VerdictBasis& basis;
    const StageBalance* bottleneck; // the imbalance's bottleneck stage, if any
    double idleFrac;                // idle over window time, summed over ranks
};

const StageBalance* bottleneckStage(const Imbalance& im)
{
    const StageBalance* bottleneck = nullptr;
    for (const auto& s : im.stages)
        if (s.stage == im.bottleneckStage)
            bottleneck = &s;
    return bottleneck;
}

detail::VerdictSignals signalsOf(const Evidence& e)
{
    const AnalysisResult& r = e.r;
    detail::VerdictSignals s;
    s.computeShare = share(e.basis.byLimiter[ix(PathLimiter::Compute)], e.basis.totalNs);
    for (const RankIdle& ri : r.idle)
        if (ri.iteration == r.selectedIteration && ri.windowNs > 0)
            s.busiestShare = std::max(s.busiestShare, share(ri.busyNs, ri.windowNs));
    s.pipeline = r.pipeline.found;
    s.bottleneck = e.bottleneck != nullptr;
    s.stages = r.imbalance.stages.size();
    s.maxOverMean = r.imbalance.maxOverMean;
    s.idleFraction = e.idleFrac;
    int largestCause = 0;
    for (int c = 1; c < kBubbleCauses; ++c)
        if (e.idle.byCause[static_cast<size_t>(c)] > e.idle.byCause[static_cast<size_t>(largestCause)])
            largestCause = c;
    s.fillDrainLeads = e.idle.byCause[ix(BubbleCause::FillDrain)] > 0 && largestCause == static_cast<int>(BubbleCause::FillDrain);
    s.byLimiter = e.basis.byLimiter;
    return s;
}

void stageImbalanceHeadline(Verdict& v, const Evidence& e)
{
    const Imbalance& im = e.r.imbalance;
    const StageBalance* bottleneck = e.bottleneck;
    TimeNs meanBusy = 0;
    double meanPerMb = 0;
    int withSteps = 0;
    for (const auto& s : im.stages) {
        meanBusy += s.busyNs;
        if (perMicrobatch(s) > 0) {
            meanPerMb += perMicrobatch(s);
            ++withSteps;
        }
    }
    meanBusy /= static_cast<TimeNs>(im.stages.size());
    // The steady phase of every schedule runs at the bottleneck's pace, so its
    // busy time beyond the mean is what balancing wins back; never more than
    // the gap to the balanced-partition lower bound.
    v.lossNs = std::max<TimeNs>(0, bottleneck->busyNs - meanBusy);
    if (im.balancedLowerBoundNs > 0 && im.iterationNs > im.balancedLowerBoundNs)
        v.lossNs = std::min(v.lossNs, im.iterationNs - im.balancedLowerBoundNs);
    std::string what;
    if (withSteps == static_cast<int>(im.stages.size()) && meanPerMb > 0)
        what = "its F+B per microbatch is " + times(perMicrobatch(*bottleneck) / (meanPerMb / withSteps)) + " the mean";
    else
        what = "its busy time is " + times(im.maxOverMean) + " the mean";
    v.headline = "stage " + std::to_string(bottleneck->stage) + " is the bottleneck: " + what + "; balancing the stages could save ~" +
                 formatDuration(v.lossNs) + " per iteration";
}

// The straggler that explains the verdict, when one does: a stage imbalance
// whose bottleneck's excess over the mean stage is no more than one of its
// replicas' excess over its peers (without that replica the stage would not
// stand out), or data-parallel waiting while a replica lags. Stragglers are
// only those that persist across iterations (Imbalance::stragglers).
const Straggler* explainingStraggler(const Evidence& e, VerdictKind kind)
{
    const Imbalance& im = e.r.imbalance;
    if (im.stragglers.empty())
        return nullptr;
    if (kind == VerdictKind::DpSync)
        return &im.stragglers.front();
    if (kind != VerdictKind::StageImbalance || !e.bottleneck)
        return nullptr;
    TimeNs meanBusy = 0;
    for (const auto& s : im.stages)
        meanBusy += s.busyNs;
    meanBusy /= static_cast<TimeNs>(std::max<size_t>(1, im.stages.size()));
    const TimeNs stageExcess = e.bottleneck->busyNs - meanBusy;
    for (const Straggler& s : im.stragglers)
        if (s.stage == e.bottleneck->stage && s.computeNs - s.peerMedianNs >= stageExcess)
            return &s;
    return nullptr;
}

void stragglerHeadline(Verdict& v, const Straggler& s, bool stageStandsOut)
{
    v.kind = VerdictKind::Straggler;
    v.headline = "rank " + std::to_string(s.rank) + " (stage " + std::to_string(s.stage) + ", replica " +
                 std::to_string(s.replica) + ") is a straggler: it computes " + times(s.relative) + " its stage's other replicas (" +
                 formatDuration(s.computeNs) + " vs " + formatDuration(s.peerMedianNs) + ")" +
                 (s.iterations >= 2 ? ", the slowest of its stage in " + std::to_string(s.slowestIterations) + " of " +
                                          std::to_string(s.iterations) + " iterations"
                                    : std::string()) +
                 "; every replica waits for it at the gradient sync" +
                 (stageStandsOut ? ", and stage " + std::to_string(s.stage) + " is the busiest only because of it" : std::string());
    v.lossNs = s.costNs;
}

// Per-step overhead that outweighs what the verdict would name: at least
// kOverheadShare of GPU time idles before steps whose input had arrived
// (step_overhead), more per rank than the named limiter's loss.
constexpr double kOverheadShare = 0.2;

bool overheadLeads(const Evidence& e, TimeNs namedLossNs)
{
    const TimeNs overhead = e.idle.byCause[ix(BubbleCause::StepOverhead)];
    return e.idle.windowNs > 0 && share(overhead, e.idle.windowNs) >= kOverheadShare &&
           overhead / std::max(1, e.idle.ranks) > namedLossNs;
}

void overheadHeadline(Verdict& v, const Evidence& e, const std::string& instead)
{
    const TimeNs overhead = e.idle.byCause[ix(BubbleCause::StepOverhead)];
    size_t steps = 0;
    for (const Step& st : e.r.steps)
        steps += st.iteration == e.r.selectedIteration;
    v.kind = VerdictKind::HostBound;
    v.lossNs = overhead / std::max(1, e.idle.ranks);
    v.headline = "per-step overhead: " + pct0(share(overhead, e.idle.windowNs)) +
                 " of GPU time idles before steps whose input had already arrived" +
                 (steps > 0 ? " (" + formatDuration(overhead / static_cast<TimeNs>(steps)) + " per step on average)" : std::string()) +
                 "; cutting it is worth more than " + instead;
}

void bubbleHeadline(Verdict& v, const Evidence& e)
{
    const PipelineStructure& p = e.r.pipeline;
    const IdleTotals& idle = e.idle;
    std::string ideal = "p=" + std::to_string(p.pp) + (p.chunks > 1 ? ", v=" + std::to_string(p.chunks) : std::string()) +
                        ", m=" + std::to_string(p.microbatches);
    v.headline = "pipeline bubbles: " + pct0(e.idleFrac) + " of GPU time idle, " +
                 points(share(idle.byCause[ix(BubbleCause::FillDrain)], idle.windowNs)) + " of it fill/drain (ideal for " + ideal +
                 " is " + pct0(e.r.imbalance.idealBubbleFraction) + ")";
    v.lossNs = idle.byCause[ix(BubbleCause::FillDrain)] / idle.ranks;
}

void computeHeadline(Verdict& v, const Evidence& e)
{
    const Imbalance& im = e.r.imbalance;
    v.headline = "compute-bound: " + pct0(1.0 - e.idleFrac) + " of GPU time is compute";
    if (e.r.pipeline.found && !im.stages.empty())
        v.headline += ", the busiest stage " + times(im.maxOverMean) + " the mean";
    if (e.pb.totalNs > 0)
        v.headline += ", " + pct0(share(e.pb.byLimiter[ix(PathLimiter::Compute)], e.pb.totalNs)) + " of the critical path";
    v.lossNs = e.idle.idleNs / e.idle.ranks;
}

// A non-compute limiter's headline: its share of the basis and the rank with most of it.
void limiterHeadline(Verdict& v, const Evidence& e, PathLimiter lim)
{
    const VerdictBasis& basis = e.basis;
    std::string label, what;
    switch (lim) {
    case PathLimiter::P2p: label = "communication-bound"; what = "point-to-point communication"; break;
    case PathLimiter::Collective: label = "data-parallel sync"; what = "collectives (gradient all-reduce and the like)"; break;
    case PathLimiter::Host: label = "host-bound"; what = "the GPU waiting for the host to launch work"; break;
    case PathLimiter::Copy: label = "copy-bound"; what = "memory copies and memsets"; break;
    default: label = "unexplained idle"; what = "idle time without a recorded cause"; break;
    }
    v.lossNs = basis.byLimiter[ix(lim)];
    v.headline = label + ": " + pct0(share(basis.byLimiter[ix(lim)], basis.totalNs)) + " of " + basis.name + " (" +
                 formatDuration(v.lossNs) + " of " + formatDuration(basis.totalNs) + ") is " + what;
    if (basis.topRank[ix(lim)] >= 0)
        v.headline += ", most of it on rank " + std::to_string(basis.topRank[ix(lim)]) + stageOfRank(e.r, basis.topRank[ix(lim)]);
}

// The basis's parts, largest first.
std::string basisFact(const VerdictBasis& basis)
{
    std::vector<std::pair<TimeNs, int>> parts;
    for (int l = 0; l < kPathLimiters; ++l)
        if (basis.byLimiter[static_cast<size_t>(l)] > 0)
            parts.emplace_back(basis.byLimiter[static_cast<size_t>(l)], l);
    std::stable_sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    std::string s = basis.name + ":";
    for (size_t i = 0; i < parts.size(); ++i)
        s += (i ? ", " : " ") + std::string(toString(static_cast<PathLimiter>(parts[i].second))) + " " +
             (share(parts[i].first, basis.totalNs) < 0.005 ? std::string("<1%") : pct0(share(parts[i].first, basis.totalNs)));
    return s;
}

// GPU idle time and its three largest causes.
std::string idleFact(const IdleTotals& idle, double idleFrac)
{
    std::vector<std::pair<TimeNs, int>> causes;
    for (int c = 0; c < kBubbleCauses; ++c)
        if (idle.byCause[static_cast<size_t>(c)] > 0)
            causes.emplace_back(idle.byCause[static_cast<size_t>(c)], c);
    std::stable_sort(causes.begin(), causes.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    std::string s = "GPU idle: " + pct0(idleFrac) + " of GPU time";
    for (size_t i = 0; i < causes.size() && i < 3; ++i)
        s += (i ? ", " : "; ") + std::string(toString(static_cast<BubbleCause>(causes[i].second))) + " " +
             points(share(causes[i].first, idle.windowNs));
    return s;
}

// The pipeline's shape, its busiest stage, uneven microbatches and stragglers.
void pipelineFacts(std::vector<std::string>& f, const Evidence& e)
{
    const PipelineStructure& p = e.r.pipeline;
    const Imbalance& im = e.r.imbalance;
    if (!p.found) {
        // Why, so that a reader can tell "not a pipeline" from "not proven one".
        f.push_back("no pipeline found (" + p.reason + "), so no stage imbalance or fill/drain");
        return;
    }
    char conf[16];
    std::snprintf(conf, sizeof conf, "%.0f%%", p.scheduleConfidence * 100.0);
    // Of a job read in part (or whose traces miss ranks), dp counts the
    // replicas among the ranks analysed, not the job's.
    std::string dp = std::to_string(p.dp);
    if (e.r.worldSize && static_cast<size_t>(*e.r.worldSize) > e.r.ranks.size())
        dp += " among the " + std::to_string(e.r.ranks.size()) + " of " + std::to_string(*e.r.worldSize) + " ranks analysed";
    f.push_back("pipeline: p=" + std::to_string(p.pp) + ", dp=" + dp + ", v=" + std::to_string(p.chunks) +
                ", m=" + std::to_string(p.microbatches) + ", schedule " + scheduleName(p.schedule) + " (confidence " + conf +
                "), ideal bubble " + pct0(im.idealBubbleFraction) + "; " + p.reason);
    if (e.bottleneck)
        f.push_back("busiest stage " + std::to_string(e.bottleneck->stage) + ": busy " + times(im.maxOverMean) + " the mean; iteration " +
                    formatDuration(im.iterationNs) + ", balanced-partition lower bound " + formatDuration(im.balancedLowerBoundNs));
    if (const MicrobatchSpread& ms = e.r.microbatchSpread; ms.uneven && !ms.size.empty()) {
        const auto [lo, hi] = std::minmax_element(ms.size.begin(), ms.size.end());
        char spread[96];
        std::snprintf(spread, sizeof spread, "%.2fx to %.2fx of the mean (CV %.2f)", *lo, *hi, ms.cv);
        f.push_back("uneven microbatches: " + std::string(spread) + "; stages wait on the long ones (microbatch " +
                    std::to_string(ms.longest) + " is the longest)");
    }
    for (size_t i = 0; i < im.stragglers.size() && i < 3; ++i) {
        const Straggler& s = im.stragglers[i];
        f.push_back("straggler: rank " + std::to_string(s.rank) + " (stage " + std::to_string(s.stage) + ") computes " +
                    pct0(s.relative - 1.0) + " slower than the other replicas of its stage (" + formatDuration(s.computeNs) +
                    " vs " + formatDuration(s.peerMedianNs) + "), costing up to " + formatDuration(s.costNs) + " per iteration" +
                    (s.iterations >= 2 ? "; the slowest of its stage in " + std::to_string(s.slowestIterations) + " of " +
                                             std::to_string(s.iterations) + " iterations"
                                       : std::string()));
    }
    for (size_t i = 0; i < im.movingSlowest.size() && i < 2; ++i) {
        const MovingSlowest& m = im.movingSlowest[i];
        std::string who;
        for (size_t k = 0; k < m.slowest.size() && k < 4; ++k)
            who += (who.empty() ? "" : ", ") + std::string("rank ") + std::to_string(m.slowest[k].first) + " in " +
                   std::to_string(m.slowest[k].second);
        if (m.slowest.size() > 4)
            who += ", ...";
        f.push_back("no straggler in stage " + std::to_string(m.stage) + ": its slowest replica changes from iteration to "
                    "iteration (" + who + " of " + std::to_string(m.iterations) +
                    "): the work differs with the data, not a worker; equal work per replica (token balancing across "
                    "data-parallel ranks) is the lever");
    }
}

// Communication that runs beside compute (DualPipe-style overlap) is not
// compute, even when the compute stream never idles.
void allToAllFact(std::vector<std::string>& f, const AnalysisResult& r)
{
    if (r.allToAll.ranks.empty())
        return;
    const AllToAll& a = r.allToAll;
    TimeNs window = 0;
    for (const AllToAllRank& x : a.ranks)
        window = std::max(window, x.windowNs);
    if (window > 0 && share(a.maxNs, window) >= 0.05)
        f.push_back("all-to-all kernels (expert or embedding exchange): " + formatDuration(a.medianNs) + " per rank (median, " +
                    pct0(share(a.medianNs, window)) + " of the iteration), " + pct0(a.criticalShare) + " of the critical path");
}

// The analysis's first warnings, and what the input says about itself.
void inputFacts(std::vector<std::string>& f, const AnalysisResult& r, const Trace* trace)
{
    for (size_t i = 0; i < r.warnings.size() && i < 2; ++i)
        f.push_back("analysis warning: " + r.warnings[i].message);
    if (r.warnings.size() > 2)
        f.push_back(std::to_string(r.warnings.size() - 2) + " more analysis warnings (see the diagnostics)");
    if (!trace)
        return;
    if (trace->simulated())
        f.push_back("the trace is SIMULATED: these numbers describe the simulator, not hardware");
    int64_t problems = 0;
    for (const Diagnostic& d : trace->diagnostics)
        if (d.severity != Severity::Info)
            problems += d.count;
    if (problems > 0)
        f.push_back("the import reported " + std::to_string(problems) + " problem records (see the diagnostics)");
}

// Whom the ranks wait on (RankIdle::waitedOn): the virtual stage most
// waiting leads back to, when it holds at least 2% of GPU time.
void waitedOnFact(std::vector<std::string>& f, const Evidence& e)
{
    const PipelineStructure& p = e.r.pipeline;
    std::map<int, TimeNs> total;
    for (const RankIdle& ri : e.r.idle)
        if (ri.iteration == e.r.selectedIteration)
            for (const auto& [vs, ns] : ri.waitedOn)
                total[vs] += ns;
    if (total.empty() || p.pp <= 0)
        return;
    const auto top = std::max_element(total.begin(), total.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    if (share(top->second, e.idle.windowNs) < 0.02)
        return;
    const int vs = top->first, S = p.pp * std::max(1, p.chunks);
    const bool v = p.schedule && isVShaped(*p.schedule);
    const int stage = v ? (vs < p.pp ? vs : 2 * p.pp - 1 - vs) : vs % p.pp;
    const int chunk = v ? (vs < p.pp ? 0 : 1) : vs / p.pp;
    TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = 0;
    std::string ranks;
    int count = 0;
    for (const RankIdle& ri : e.r.idle)
        if (ri.iteration == e.r.selectedIteration)
            for (const auto& [w, ns] : ri.waitedOn)
                if (w == vs && ns > 0) {
                    lo = std::min(lo, ns);
                    hi = std::max(hi, ns);
                    if (++count <= 6)
                        ranks += (ranks.empty() ? "" : ", ") + std::to_string(ri.rank);
                }
    if (count > 6)
        ranks += ", ... (" + std::to_string(count) + " ranks)";
    std::string where = "stage " + std::to_string(stage);
    if (p.chunks > 1)
        where = "virtual stage " + std::to_string(vs) + ", stage " + std::to_string(stage) + " chunk " + std::to_string(chunk);
    if (vs == S - 1)
        where += ", the last";
    f.push_back("waiting on a neighbour leads back to " + where + ": " + formatDuration(lo) +
                (hi > lo ? " to " + formatDuration(hi) : std::string()) + " per iteration on rank" +
                (ranks.find(',') != std::string::npos ? "s " : " ") + ranks);
}

std::vector<std::string> supportingFacts(const Evidence& e, const Trace* trace)
{
    const Iteration& it = e.r.iterations[static_cast<size_t>(e.r.selectedIteration)];
    std::vector<std::string> f;
    f.push_back(it.label + ": " + formatDuration(it.end - it.start) + " on " + std::to_string(e.idle.ranks) + " ranks" +
                (e.pb.totalNs > 0 ? "; critical path in " + std::to_string(e.r.criticalPath.segments.size()) + " segments" : std::string()));
    f.push_back(basisFact(e.basis));
    f.push_back(idleFact(e.idle, e.idleFrac));
    pipelineFacts(f, e);
    waitedOnFact(f, e);
    allToAllFact(f, e.r);
    inputFacts(f, e.r, trace);
    return f;
}

} // namespace

Verdict verdict(const AnalysisResult& r, const Trace* trace)
{
    const IdleTotals idle = selectedIdle(r);
    if (r.selectedIteration < 0 || static_cast<size_t>(r.selectedIteration) >= r.iterations.size() || idle.ranks == 0 ||
        idle.windowNs <= 0)
        return noVerdict(r);
    const PathBreakdown pb = pathBreakdown(r);
    const VerdictBasis basis = detail::verdictBasis(pb, idle);
    const Evidence e{r, idle, pb, basis, bottleneckStage(r.imbalance), share(idle.idleNs, idle.windowNs)};
    const detail::VerdictDecision d = detail::decideVerdict(signalsOf(e));

    Verdict v;
    v.kind = d.kind;
    std::string chunkFact; // the bottleneck's dominant chunk, the first fact when there is one
    const Straggler* straggler = explainingStraggler(e, d.kind);
    switch (straggler ? VerdictKind::Straggler : d.kind) {
    case VerdictKind::Straggler: stragglerHeadline(v, *straggler, d.kind == VerdictKind::StageImbalance); break;
    case VerdictKind::StageImbalance:
        stageImbalanceHeadline(v, e);
        chunkFact = dominantChunk(r, e.bottleneck->stage);
        break;
    case VerdictKind::PipelineBubbles: bubbleHeadline(v, e); break;
    case VerdictKind::ComputeBound: computeHeadline(v, e); break;
    default: limiterHeadline(v, e, d.limiter); break;
    }
    if (!straggler && d.kind != VerdictKind::HostBound && d.kind != VerdictKind::None && overheadLeads(e, v.lossNs)) {
        const std::string instead = d.kind == VerdictKind::StageImbalance
                                        ? "balancing the stages (~" + formatDuration(v.lossNs) + " per iteration)"
                                        : "the " + std::string(toString(d.kind)) + " limiter (~" + formatDuration(v.lossNs) + ")";
        overheadHeadline(v, e, instead);
    }
    v.facts = supportingFacts(e, trace);
    if (straggler) // the headline says it
        std::erase_if(v.facts, [&](const std::string& f) { return f.starts_with("straggler: rank " + std::to_string(straggler->rank) + " "); });
    if (!chunkFact.empty())
        v.facts.insert(v.facts.begin(), chunkFact);
    return v;
}

} // namespace pipescope
