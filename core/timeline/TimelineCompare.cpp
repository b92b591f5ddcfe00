#include "timeline/TimelineCompare.h"

#include <unordered_map>

namespace pipescope::timeline {

TimelineModel withBaselineTracks(const TimelineModel& job, const TimelineModel& baseline, TimeNs shiftNs,
                                 const std::string& prefix)
{
    TimelineModel m = job;
    std::unordered_map<std::string, int32_t> interned;
    interned.reserve(m.names.size());
    for (size_t i = 0; i < m.names.size(); ++i)
        interned.try_emplace(m.names[i], static_cast<int32_t>(i));
    auto nameOf = [&](int32_t baselineName) {
        const std::string& n = baseline.name(baselineName);
        auto [it, fresh] = interned.try_emplace(n, static_cast<int32_t>(m.names.size()));
        if (fresh)
            m.names.push_back(n);
        return it->second;
    };
    for (const Lane& l : baseline.lanes) {
        if (l.kind == LaneKind::Cpu || l.kind == LaneKind::Memory)
            continue;
        Lane c;
        c.kind = l.kind;
        c.rank = l.rank;
        c.stage = l.stage;
        c.replica = l.replica;
        c.device = l.device;
        c.stream = l.stream;
        c.role = l.role;
        c.label = prefix + l.label;
        c.baseline = true;
        c.events.reserve(l.events.size());
        for (Event e : l.events) {
            e.start += shiftNs;
            e.end += shiftNs;
            e.activity = -1;
            e.name = nameOf(e.name);
            if (l.kind == LaneKind::Kernels || l.kind == LaneKind::Transfers)
                e.detail = -1;
            c.events.push_back(e);
        }
        m.lanes.push_back(std::move(c));
    }
    m.finalize();
    return m;
}

} // namespace pipescope::timeline
