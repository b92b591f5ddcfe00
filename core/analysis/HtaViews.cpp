// Views comparable with Holistic Trace Analysis (HTA): its temporal
// breakdown and its per-stream idle time breakdown, with its definitions.
// Exact mode uses pipescope's integer nanoseconds; HTA-compatible mode
// repeats HTA's own arithmetic: the trace's microsecond timestamps read as
// doubles and rounded inward to whole microseconds, and the last profiler
// step dropped.
#include "analysis/Classify.h"
#include "analysis/detail/Context.h"

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

} // namespace

void computeHtaViews(Context& ctx, AnalysisResult& out)
{
    const Trace& t = ctx.trace;
    HtaViews& hv = out.hta;
    hv.htaCompatible = ctx.options.htaCompatible;
    const bool hta = hv.htaCompatible;

    std::unordered_map<int, TimeNs> offsetOfRank;
    for (const auto& r : t.ranks)
        if (r.sourceId)
            for (const auto& s : t.sources)
                if (s.id == *r.sourceId)
                    offsetOfRank[r.rank] = s.clockOffset;

    // Per rank: ProfilerStep starts and whether any start has a sub-microsecond part.
    std::unordered_map<int, std::vector<TimeNs>> stepStarts;
    std::unordered_map<int, std::set<StringId>> stepNames;
    std::unordered_map<int, bool> fractional;
    auto original = [&](int rank, TimeNs v) {
        auto it = offsetOfRank.find(rank);
        return v - (it == offsetOfRank.end() ? 0 : it->second);
    };
    for (const CpuRange& r : t.cpuRanges) {
        if (hta && original(r.rank, r.start) % 1000 != 0)
            fractional[r.rank] = true;
        const std::string& n = t.str(r.name);
        if (n.size() > 13 && n.compare(0, 13, "ProfilerStep#") == 0) {
            stepStarts[r.rank].push_back(r.start);
            stepNames[r.rank].insert(r.name);
        }
    }

    std::unordered_map<int64_t, int64_t> streamNo;
    std::unordered_map<StringId, HtaKernelKind> kindOfName;
    for (const auto& rd : ctx.ranks) {
        const int rank = rd.rank;
        bool rounded = false;
        if (hta) {
            rounded = fractional[rank];
            for (size_t i = 0; i < rd.acts.size() && !rounded; ++i)
                rounded = original(rank, ctx.act(rd.acts[i]).start) % 1000 != 0;
        }
        auto ceilUs = [&](TimeNs v) {
            return static_cast<TimeNs>(std::ceil(microsAsDouble(original(rank, v)))) * 1000 + (v - original(rank, v));
        };
        auto floorEndUs = [&](TimeNs s, TimeNs e) {
            double end = microsAsDouble(original(rank, s)) + microsAsDouble(e - s);
            return static_cast<TimeNs>(std::floor(end)) * 1000 + (s - original(rank, s));
        };

        std::optional<TimeNs> lastStep;
        bool dropLast = false;
        if (hta) {
            // HTA drops the last profiler step when the trace names at least two of them.
            std::set<StringId> names;
            for (const auto& [r, set] : stepNames)
                names.insert(set.begin(), set.end());
            auto st = stepStarts.find(rank);
            if (names.size() >= 2 && st != stepStarts.end() && !st->second.empty()) {
                TimeNs mx = *std::max_element(st->second.begin(), st->second.end());
                lastStep = rounded ? ceilUs(mx) : mx;
                dropLast = true;
            }
        }

        // One pass in start order (ceil keeps that order): unions as HTA merges them, and
        // each stream's gaps before its events.
        struct StreamState {
            bool any = false;
            TimeNs prevEnd = 0;
            HtaStreamIdle idle;
        };
        std::map<int64_t, StreamState> streams;
        Merged ma, mc, mm;
        auto append = [](Merged& m, TimeNs s, TimeNs e) {
            if (!m.u.empty() && s <= m.u.back().end) {
                TimeNs grown = std::max(m.u.back().end, e);
                m.length += grown - m.u.back().end;
                m.u.back().end = grown;
            } else {
                m.u.push_back({s, e});
                m.length += e - s;
            }
        };
        for (uint32_t a : rd.acts) {
            const Activity& act = ctx.act(a);
            if (act.kind == ActivityKind::Sync)
                continue;
            Ev e;
            e.start = act.start;
            e.end = act.end;
            e.launch = act.launchStart;
            if (rounded) {
                e.start = ceilUs(act.start);
                e.end = floorEndUs(act.start, act.end);
                if (e.launch)
                    e.launch = ceilUs(*e.launch);
            }
            if (dropLast && (!e.launch || *e.launch >= *lastStep))
                continue;
            auto [sc, freshStream] = streamNo.try_emplace(act.streamId, act.streamId);
            if (freshStream)
                if (const StreamInfo* si = t.stream(act.streamId))
                    sc->second = si->stream;
            e.stream = sc->second;
            if (act.kind == ActivityKind::Kernel) {
                auto [kc, freshKind] = kindOfName.try_emplace(act.name, HtaKernelKind::Other);
                if (freshKind)
                    kc->second = htaKernelKind(t.str(act.name));
                e.kind = kc->second;
                // HTA's regexes know NCCL only; outside its own arithmetic, DeepEP,
                // NVSHMEM and the other communication kernels (CommRules.h) count
                // as communication, not computation.
                if (!hta && e.kind == HtaKernelKind::Computation &&
                    (ctx.classOf(a) == WorkClass::Collective || ctx.classOf(a) == WorkClass::P2p))
                    e.kind = HtaKernelKind::Communication;
            } else {
                e.kind = HtaKernelKind::Memory;
            }
            append(ma, e.start, e.end);
            if (e.kind == HtaKernelKind::Computation)
                append(mc, e.start, e.end);
            else if (e.kind == HtaKernelKind::Communication)
                append(mm, e.start, e.end);
            StreamState& st = streams[e.stream];
            if (st.any) {
                TimeNs gap = e.start - st.prevEnd;
                if (e.launch && *e.launch > st.prevEnd)
                    st.idle.hostWaitNs += gap;
                else if (gap < 30'000)
                    st.idle.kernelWaitNs += gap;
                else
                    st.idle.otherNs += gap;
            }
            st.any = true;
            st.prevEnd = e.end;
        }
        if (ma.u.empty())
            continue;

        HtaTemporal tb;
        tb.rank = rank;
        tb.rounded = rounded;
        tb.lastStepDropped = dropLast;
        tb.kernelTimeNs = ma.u.back().end - ma.u.front().start;
        tb.idleTimeNs = tb.kernelTimeNs - ma.length;
        tb.computeTimeNs = mc.length;
        tb.nonComputeTimeNs = tb.kernelTimeNs - tb.computeTimeNs - tb.idleTimeNs;
        if (mm.length > 0)
            tb.commCompOverlapPct = 100.0 * static_cast<double>(intersectionLength(mm.u, mc.u)) / static_cast<double>(mm.length);
        hv.temporal.push_back(tb);
        for (auto& [stream, st] : streams) {
            st.idle.rank = rank;
            st.idle.stream = stream;
            hv.idle.push_back(st.idle);
        }
    }
    if (hta)
        hv.notes.push_back("HTA-compatible: whole-microsecond inward rounding where the trace has sub-microsecond "
                           "timestamps, last ProfilerStep dropped when there are two or more");
}

} // namespace pipescope::detail
