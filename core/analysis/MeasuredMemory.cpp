// Measured memory: each rank's GPU memory over the selected iteration, read
// from the trace's allocator events (docs/analysis.md, "Measured memory").
#include "analysis/Analysis.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

namespace pipescope {

namespace {

struct Window {
    TimeNs start = 0;
    TimeNs end = 0;
    TimeNs spanStart = 0, spanEnd = 0; // the rank's GPU span
};

// The rank's windows on the selected iteration: its GPU span, opened as
// early as the first launch of that work, and widened to the rank's own
// iteration range (ProfilerStep#N, a named range) where the trace has one,
// since the allocator reports on the host, ahead of the GPU.
std::map<int, Window> windowsOf(const Trace& trace, const Iteration& it)
{
    std::map<int, Window> w;
    for (const RankSpan& rs : it.ranks)
        w[rs.rank] = {rs.start, rs.end, rs.start, rs.end};
    for (const Activity& a : trace.activities) {
        auto f = w.find(a.rank);
        if (f == w.end() || a.kind == ActivityKind::Sync || !a.launchStart)
            continue;
        if (a.start >= f->second.spanStart && a.start < f->second.spanEnd)
            f->second.start = std::min(f->second.start, static_cast<TimeNs>(*a.launchStart));
    }
    if (it.source == IterationSource::ProfilerStep || it.source == IterationSource::Range) {
        StringId label = -1;
        for (size_t i = 1; i < trace.strings.size(); ++i)
            if (trace.strings[i] == it.label) {
                label = static_cast<StringId>(i);
                break;
            }
        if (label > 0)
            for (const CpuRange& c : trace.cpuRanges) {
                auto f = w.find(c.rank);
                if (c.name != label || f == w.end())
                    continue;
                if (c.start < f->second.spanEnd && c.end > f->second.spanStart) { // the range around this span
                    f->second.start = std::min(f->second.start, c.start);
                    f->second.end = std::max(f->second.end, c.end);
                }
            }
    }
    return w;
}

} // namespace

std::vector<MeasuredMemory> measureMemory(const Trace& trace, const AnalysisResult& r)
{
    std::vector<MeasuredMemory> out;
    if (trace.memoryEvents.empty() || r.selectedIteration < 0 ||
        static_cast<size_t>(r.selectedIteration) >= r.iterations.size())
        return out;
    const Iteration& it = r.iterations[static_cast<size_t>(r.selectedIteration)];
    const std::map<int, Window> windows = windowsOf(trace, it);

    // Events per rank and device, in time order (equal times keep trace order).
    std::map<int, std::map<int, std::vector<uint32_t>>> byRank;
    for (size_t i = 0; i < trace.memoryEvents.size(); ++i) {
        const MemoryEvent& e = trace.memoryEvents[i];
        if (windows.count(e.rank))
            byRank[e.rank][e.device].push_back(static_cast<uint32_t>(i));
    }
    std::map<int, int> stageOf;
    for (const StageAssignment& a : r.pipeline.stageMap)
        stageOf[a.rank] = a.stage;
    std::map<int, int> mainDevice;
    for (const RankInfo& ri : trace.ranks)
        if (ri.device)
            mainDevice[ri.rank] = *ri.device;

    for (auto& [rank, devices] : byRank) {
        // The rank's own GPU; else the device with the most events.
        auto pick = devices.end();
        if (auto md = mainDevice.find(rank); md != mainDevice.end())
            pick = devices.find(md->second);
        if (pick == devices.end())
            pick = std::max_element(devices.begin(), devices.end(),
                                    [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
        std::vector<uint32_t>& ev = pick->second;
        std::stable_sort(ev.begin(), ev.end(),
                         [&](uint32_t a, uint32_t b) { return trace.memoryEvents[a].ts < trace.memoryEvents[b].ts; });
        const Window win = windows.at(rank);

        MeasuredMemory m;
        m.rank = rank;
        m.device = pick->first;
        if (auto s = stageOf.find(rank); s != stageOf.end())
            m.stage = s->second;

        // Before the window: the absolute level where totals say it, and the reserve.
        std::optional<int64_t> level, reserved;
        size_t i = 0;
        for (; i < ev.size() && trace.memoryEvents[ev[i]].ts < win.start; ++i) {
            const MemoryEvent& e = trace.memoryEvents[ev[i]];
            if (e.totalAllocated)
                level = e.totalAllocated;
            else if (level)
                *level += e.bytes;
            if (e.totalReserved)
                reserved = e.totalReserved;
        }
        size_t end = i;
        while (end < ev.size() && trace.memoryEvents[ev[end]].ts <= win.end)
            ++end;
        // Without a level before the window, the first event in it with a
        // total gives the start: its total less the changes up to it.
        if (!level) {
            int64_t sum = 0;
            for (size_t k = i; k < end; ++k) {
                const MemoryEvent& e = trace.memoryEvents[ev[k]];
                sum += e.bytes;
                if (e.totalAllocated) {
                    level = *e.totalAllocated - sum;
                    break;
                }
            }
        }
        m.absolute = level.has_value();
        m.startBytes = level.value_or(0);
        int64_t cur = m.startBytes;
        m.peakBytes = m.minBytes = cur;
        m.peakAt = win.start;
        for (size_t k = i; k < end; ++k) {
            const MemoryEvent& e = trace.memoryEvents[ev[k]];
            cur = e.totalAllocated ? *e.totalAllocated : cur + e.bytes;
            if (cur > m.peakBytes) {
                m.peakBytes = cur;
                m.peakAt = e.ts;
            }
            m.minBytes = std::min(m.minBytes, cur);
            if (e.totalReserved)
                reserved = std::max(reserved.value_or(0), *e.totalReserved);
        }
        m.endBytes = cur;
        m.peakReservedBytes = reserved;
        m.events = static_cast<int64_t>(end - i);
        out.push_back(m);
    }
    return out;
}

} // namespace pipescope
