// Views comparable with Holistic Trace Analysis (HTA): its temporal
// breakdown and its per-stream idle time breakdown, with its definitions.
// Exact mode uses pipescope's integer nanoseconds; HTA-compatible mode
// repeats HTA's own arithmetic: the trace's microsecond timestamps read as
// doubles and rounded inward to whole microseconds, and the last profiler
// step dropped.
#include "analysis/Classify.h"
#include "analysis/detail/Context.h"
#include "analysis/detail/HtaSteps.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <unordered_map>

namespace pipescope::detail {

namespace {

// The double a JSON parser reads for the decimal microsecond text of `ns`.
double microsAsDouble(int64_t ns)
{
    constexpr int64_t kExact = int64_t(1) << 53;
    if (ns > -kExact && ns < kExact)
        return static_cast<double>(ns) / 1000.0; // one correctly rounded division = strtod's result
    char buf[48];
    uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    std::snprintf(buf, sizeof buf, "%s%" PRIu64 ".%03" PRIu64, ns < 0 ? "-" : "", mag / 1000, mag % 1000);
    return std::strtod(buf, nullptr);
}

struct Ev {
    TimeNs start, end;            // ns (multiples of 1000 when rounded)
    std::optional<TimeNs> launch; // same clock
    int64_t stream;
    HtaKernelKind kind;
};

// HTA merges intervals in start order; an inverted interval left by rounding
// (end < start) stays a block of its own with a negative length, as in HTA.
struct Merged {
    std::vector<Interval> u;
    TimeNs length = 0;
};

// The clock offset import added to each rank's times: subtracting it reads a
// time as the trace wrote it.
class OriginalClock {
public:
    explicit OriginalClock(const Trace& t)
    {
        for (const auto& r : t.ranks)
            if (r.sourceId)
                for (const auto& s : t.sources)
                    if (s.id == *r.sourceId)
                        offsetOfRank_[r.rank] = s.clockOffset;
    }
    TimeNs operator()(int rank, TimeNs v) const
    {
        auto it = offsetOfRank_.find(rank);
        return v - (it == offsetOfRank_.end() ? 0 : it->second);
    }

private:
    std::unordered_map<int, TimeNs> offsetOfRank_;
};

// Per rank: ProfilerStep starts and names, and whether any CPU range starts
// on a sub-microsecond (read only in HTA-compatible mode).
struct ProfilerSteps {
    std::unordered_map<int, std::vector<TimeNs>> starts;
    std::unordered_map<int, std::set<StringId>> names;
    std::unordered_map<int, bool> fractional;
};

ProfilerSteps readProfilerSteps(const Trace& t, const OriginalClock& original, bool hta)
{
    ProfilerSteps steps;
    for (const CpuRange& r : t.cpuRanges) {
        if (hta && original(r.rank, r.start) % 1000 != 0)
            steps.fractional[r.rank] = true;
        const std::string& n = t.str(r.name);
        if (n.size() > 13 && n.compare(0, 13, "ProfilerStep#") == 0) {
            steps.starts[r.rank].push_back(r.start);
            steps.names[r.rank].insert(r.name);
        }
    }
    return steps;
}

// How many distinct ProfilerStep names the trace holds over all ranks.
size_t distinctStepNames(const ProfilerSteps& steps)
{
    std::set<StringId> names;
    for (const auto& [r, set] : steps.names)
        names.insert(set.begin(), set.end());
    return names.size();
}

// HTA's inward rounding of one rank's times to whole microseconds of the
// trace's own clock: starts rounded up, ends (start plus duration, as HTA
// adds them in doubles) rounded down.
struct RankRounding {
    const OriginalClock& original;
    int rank;

    TimeNs ceilUs(TimeNs v) const
    {
        return static_cast<TimeNs>(std::ceil(microsAsDouble(original(rank, v)))) * 1000 + (v - original(rank, v));
    }
    TimeNs floorEndUs(TimeNs s, TimeNs e) const
    {
        double end = microsAsDouble(original(rank, s)) + microsAsDouble(e - s);
        return static_cast<TimeNs>(std::floor(end)) * 1000 + (s - original(rank, s));
    }
};

// HTA rounds a rank's times when any of them (its CPU ranges' starts, its
// activities' starts) has a sub-microsecond part.
bool roundsRank(const Context& ctx, const RankData& rd, ProfilerSteps& steps, const OriginalClock& original)
{
    bool rounded = steps.fractional[rd.rank];
    for (size_t i = 0; i < rd.acts.size() && !rounded; ++i)
        rounded = original(rd.rank, ctx.act(rd.acts[i]).start) % 1000 != 0;
    return rounded;
}

// Where HTA cuts the rank's last profiler step off: at its latest start
// (rounded as the rank's times are), when the trace names at least two
// steps; nullopt keeps every activity.
std::optional<TimeNs> lastStepCut(const ProfilerSteps& steps, int rank, bool severalSteps, bool rounded, const RankRounding& rounding)
{
    auto st = steps.starts.find(rank);
    if (!severalSteps || st == steps.starts.end() || st->second.empty())
        return std::nullopt;
    TimeNs mx = *std::max_element(st->second.begin(), st->second.end());
    return rounded ? rounding.ceilUs(mx) : mx;
}

// An activity's times as HTA reads them.
Ev timesOf(const Activity& act, bool rounded, const RankRounding& rounding)
{
    Ev e{};
    e.start = act.start;
    e.end = act.end;
    e.launch = act.launchStart;
    if (rounded) {
        e.start = rounding.ceilUs(act.start);
        e.end = rounding.floorEndUs(act.start, act.end);
        if (e.launch)
            e.launch = rounding.ceilUs(*e.launch);
    }
    return e;
}

// The trace's stream number and HTA's kind of each activity, looked up once
// per stream and kernel name.
class HtaKinds {
public:
    HtaKinds(const Context& ctx, bool hta) : ctx_(ctx), hta_(hta) {}

    void classify(uint32_t a, Ev& e)
    {
        const Activity& act = ctx_.act(a);
        auto [sc, freshStream] = streamNo_.try_emplace(act.streamId, act.streamId);
        if (freshStream)
            if (const StreamInfo* si = ctx_.trace.stream(act.streamId))
                sc->second = si->stream;
        e.stream = sc->second;
        if (act.kind != ActivityKind::Kernel) {
            e.kind = HtaKernelKind::Memory;
            return;
        }
        auto [kc, freshKind] = kindOfName_.try_emplace(act.name, HtaKernelKind::Other);
        if (freshKind)
            kc->second = htaKernelKind(ctx_.trace.str(act.name));
        e.kind = kc->second;
        // HTA's regexes know NCCL only; outside its own arithmetic, DeepEP,
        // NVSHMEM and the other communication kernels (CommRules.h) count
        // as communication, not computation.
        if (!hta_ && e.kind == HtaKernelKind::Computation &&
            (ctx_.classOf(a) == WorkClass::Collective || ctx_.classOf(a) == WorkClass::P2p))
            e.kind = HtaKernelKind::Communication;
    }

private:
    const Context& ctx_;
    bool hta_;
    std::unordered_map<int64_t, int64_t> streamNo_;
    std::unordered_map<StringId, HtaKernelKind> kindOfName_;
};

void mergeAppend(Merged& m, TimeNs s, TimeNs e)
{
    if (!m.u.empty() && s <= m.u.back().end) {
        TimeNs grown = std::max(m.u.back().end, e);
        m.length += grown - m.u.back().end;
        m.u.back().end = grown;
    } else {
        m.u.push_back({s, e});
        m.length += e - s;
    }
}

// One rank's work as HTA merges it: all of it, computation and
// communication, and each stream's gaps.
struct RankWork {
    Merged all, compute, comm;
    std::map<int64_t, HtaStreamGaps> streams;
};

// One pass in start order (ceil keeps that order) over the rank's activities
// but synchronizations and those HTA drops with the last profiler step.
RankWork mergeRankWork(const Context& ctx, const RankData& rd, bool rounded, const RankRounding& rounding,
                       std::optional<TimeNs> lastStep, HtaKinds& kinds)
{
    RankWork w;
    for (uint32_t a : rd.acts) {
        const Activity& act = ctx.act(a);
        if (act.kind == ActivityKind::Sync)
            continue;
        Ev e = timesOf(act, rounded, rounding);
        if (lastStep && (!e.launch || *e.launch >= *lastStep))
            continue;
        kinds.classify(a, e);
        mergeAppend(w.all, e.start, e.end);
        if (e.kind == HtaKernelKind::Computation)
            mergeAppend(w.compute, e.start, e.end);
        else if (e.kind == HtaKernelKind::Communication)
            mergeAppend(w.comm, e.start, e.end);
        w.streams[e.stream].add(e.start, e.end, e.launch);
    }
    return w;
}

// HTA's temporal breakdown of a rank with work.
HtaTemporal temporalBreakdown(int rank, bool rounded, bool lastStepDropped, const RankWork& w)
{
    HtaTemporal tb;
    tb.rank = rank;
    tb.rounded = rounded;
    tb.lastStepDropped = lastStepDropped;
    tb.kernelTimeNs = w.all.u.back().end - w.all.u.front().start;
    tb.idleTimeNs = tb.kernelTimeNs - w.all.length;
    tb.computeTimeNs = w.compute.length;
    tb.nonComputeTimeNs = tb.kernelTimeNs - tb.computeTimeNs - tb.idleTimeNs;
    if (w.comm.length > 0)
        tb.commCompOverlapPct = 100.0 * static_cast<double>(intersectionLength(w.comm.u, w.compute.u)) / static_cast<double>(w.comm.length);
    return tb;
}

} // namespace

void HtaStreamGaps::add(TimeNs start, TimeNs end, std::optional<TimeNs> launch)
{
    if (any) {
        TimeNs gap = start - prevEnd;
        if (launch && *launch > prevEnd)
            idle.hostWaitNs += gap;
        else if (gap < 30'000)
            idle.kernelWaitNs += gap;
        else
            idle.otherNs += gap;
    }
    any = true;
    prevEnd = end;
}

void computeHtaViews(Context& ctx, AnalysisResult& out)
{
    HtaViews& hv = out.hta;
    hv.htaCompatible = ctx.options.htaCompatible;
    const bool hta = hv.htaCompatible;

    const OriginalClock original(ctx.trace);
    ProfilerSteps steps = readProfilerSteps(ctx.trace, original, hta);
    // HTA drops the last profiler step when the trace names at least two of them.
    const bool severalSteps = hta && distinctStepNames(steps) >= 2;
    HtaKinds kinds(ctx, hta);
    for (const auto& rd : ctx.ranks) {
        const RankRounding rounding{original, rd.rank};
        const bool rounded = hta && roundsRank(ctx, rd, steps, original);
        const std::optional<TimeNs> lastStep = hta ? lastStepCut(steps, rd.rank, severalSteps, rounded, rounding) : std::nullopt;
        RankWork work = mergeRankWork(ctx, rd, rounded, rounding, lastStep, kinds);
        if (work.all.u.empty())
            continue;
        hv.temporal.push_back(temporalBreakdown(rd.rank, rounded, lastStep.has_value(), work));
        for (auto& [stream, st] : work.streams) {
            st.idle.rank = rd.rank;
            st.idle.stream = stream;
            hv.idle.push_back(st.idle);
        }
    }
    if (hta)
        hv.notes.push_back("HTA-compatible: whole-microsecond inward rounding where the trace has sub-microsecond "
                           "timestamps, last ProfilerStep dropped when there are two or more");
}

} // namespace pipescope::detail
