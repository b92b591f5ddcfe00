#include "report/Timeline.h"

#include "analysis/Classify.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace pipescope::report {

using nlohmann::json;

std::vector<Block> foldBlocks(const std::vector<Block>& blocks, TimeNs quantum)
{
    std::vector<Block> out;
    out.reserve(blocks.size());
    TimeNs longest = 0; // of the member whose code the open block carries
    for (const Block& b : blocks) {
        const TimeNs width = b.end - b.start;
        if (!out.empty()) {
            Block& cur = out.back();
            const bool narrow = width < quantum;
            const bool curNarrow = cur.count > 1 || cur.end - cur.start < quantum;
            if (narrow && curNarrow && b.start - cur.end < quantum) {
                if (width > longest) {
                    longest = width;
                    cur.code = b.code;
                }
                cur.end = std::max(cur.end, b.end);
                cur.count += b.count;
                cur.microbatch = -1;
                cur.name = -1;
                continue;
            }
        }
        out.push_back(b);
        longest = width;
    }
    return out;
}

namespace {

struct Row {
    std::vector<Block> blocks;
};

json encodeRow(const std::vector<Block>& blocks, TimeNs origin, const TimelineLimits& limits, TimeNs quantum,
               TimelineCounts& counts, int64_t& truncated, int fields)
{
    std::vector<Block> folded = foldBlocks(blocks, quantum);
    for (const Block& b : folded)
        if (b.count > 1)
            counts.folded += b.count;
    size_t keep = folded.size();
    if (limits.maxItemsPerLane > 0 && keep > static_cast<size_t>(limits.maxItemsPerLane)) {
        keep = static_cast<size_t>(limits.maxItemsPerLane);
        truncated += static_cast<int64_t>(folded.size() - keep);
    }
    json rows = json::array();
    for (size_t i = 0; i < keep; ++i) {
        const Block& b = folded[i];
        json r = json::array({b.start - origin, b.end - b.start});
        // fields: 0 busy [s,d,count], 1 step [s,d,kind,mb,chunk,count], 2 bubble [s,d,cause,count],
        // 3 comm [s,d,type,name,count]
        if (fields == 1) {
            r.push_back(b.code);
            r.push_back(b.microbatch);
            r.push_back(b.chunk);
        } else if (fields == 2) {
            r.push_back(b.code);
        } else if (fields == 3) {
            r.push_back(b.code);
            r.push_back(b.name);
        }
        r.push_back(b.count);
        rows.push_back(std::move(r));
    }
    counts.blocks += static_cast<int64_t>(keep);
    return rows;
}

TimeNs quantumOf(TimeNs duration, const TimelineLimits& limits)
{
    return std::max<TimeNs>(1, duration / std::max(1, limits.foldColumns));
}

json baseDocument(TimeNs start, TimeNs duration, TimeNs quantum)
{
    json causes = json::array();
    for (int c = 0; c < kBubbleCauses; ++c)
        causes.push_back(std::string(toString(static_cast<BubbleCause>(c))));
    return json{{"start_ns", start},
                {"duration_ns", duration},
                {"fold_ns", quantum},
                {"kinds", json::array({"F", "B", "I", "W"})},
                {"causes", std::move(causes)},
                {"comm_kinds", json::array({"p2p", "collective"})},
                {"lanes", json::array()},
                {"names", json::array()}};
}

} // namespace

json measuredTimeline(const Trace& trace, const AnalysisResult& result, const TimelineLimits& limits, TimelineCounts* countsOut)
{
    TimelineCounts counts;
    if (result.selectedIteration < 0 || static_cast<size_t>(result.selectedIteration) >= result.iterations.size())
        return json(nullptr);
    const Iteration& it = result.iterations[static_cast<size_t>(result.selectedIteration)];
    const TimeNs origin = it.start, duration = it.end - it.start;
    const TimeNs quantum = quantumOf(duration, limits);
    json doc = baseDocument(origin, duration, quantum);

    std::map<int, StageAssignment> stageOf;
    for (const auto& a : result.pipeline.stageMap)
        stageOf[a.rank] = a;

    // Kernel names are shown in tooltips of single communication blocks; the
    // table is capped so a trace with millions of distinct names stays small.
    constexpr size_t kMaxNames = 2000;
    std::unordered_map<StringId, int> nameIndex;
    json& names = doc["names"];

    struct Lane {
        int rank = 0, stage = -1, replica = 0;
        std::vector<Block> steps, bubbles, comm, busy;
    };
    std::map<int, Lane> lanes;
    for (int r : result.ranks) {
        Lane l;
        l.rank = r;
        if (auto f = stageOf.find(r); f != stageOf.end()) {
            l.stage = f->second.stage;
            l.replica = f->second.replica;
        }
        lanes[r] = std::move(l);
    }
    for (const Step& s : result.steps)
        if (s.iteration == result.selectedIteration)
            if (auto f = lanes.find(s.rank); f != lanes.end())
                f->second.steps.push_back({s.start, s.end, static_cast<int>(s.kind), s.microbatch, s.chunk, -1, 1});
    for (const Bubble& b : result.bubbles)
        if (b.iteration == result.selectedIteration)
            if (auto f = lanes.find(b.rank); f != lanes.end())
                f->second.bubbles.push_back({b.start, b.end, static_cast<int>(b.cause), -1, 0, -1, 1});

    for (const Activity& a : trace.activities) {
        if (a.end <= it.start || a.start >= it.end)
            continue;
        auto f = lanes.find(a.rank);
        if (f == lanes.end())
            continue;
        const NcclOp* op = a.ncclIndex >= 0 && static_cast<size_t>(a.ncclIndex) < trace.ncclOps.size()
                               ? &trace.ncclOps[static_cast<size_t>(a.ncclIndex)]
                               : nullptr;
        const WorkClass wc = classify(a.kind, trace.str(a.name), op);
        const TimeNs s = std::max(a.start, it.start), e = std::min(a.end, it.end);
        if (wc == WorkClass::Compute) {
            auto& busy = f->second.busy;
            // Union on the fly: activities of a rank come sorted by start.
            if (!busy.empty() && s <= busy.back().end)
                busy.back().end = std::max(busy.back().end, e);
            else
                busy.push_back({s, e, 0, -1, 0, -1, 1});
        } else if (wc == WorkClass::P2p || wc == WorkClass::Collective) {
            int name = -1;
            if (auto n = nameIndex.find(a.name); n != nameIndex.end())
                name = n->second;
            else if (names.size() < kMaxNames) {
                name = static_cast<int>(names.size());
                names.push_back(trace.str(a.name));
                nameIndex.emplace(a.name, name);
            }
            f->second.comm.push_back({s, e, wc == WorkClass::P2p ? 0 : 1, -1, 0, name, 1});
        }
    }

    TimelineLimits capped = limits;
    if (!lanes.empty() && limits.maxItemsTotal > 0) {
        const int64_t share = limits.maxItemsTotal / (4 * static_cast<int64_t>(lanes.size()));
        capped.maxItemsPerLane = static_cast<int>(std::min<int64_t>(limits.maxItemsPerLane, std::max<int64_t>(200, share)));
    }
    counts.rowCap = capped.maxItemsPerLane;
    std::vector<Lane*> order;
    for (auto& [r, l] : lanes)
        order.push_back(&l);
    std::stable_sort(order.begin(), order.end(), [](const Lane* x, const Lane* y) {
        auto key = [](const Lane* l) { return std::make_tuple(l->stage < 0 ? 1 << 30 : l->stage, l->replica, l->rank); };
        return key(x) < key(y);
    });
    for (Lane* l : order) {
        auto byStart = [](const Block& x, const Block& y) { return x.start < y.start; };
        std::stable_sort(l->steps.begin(), l->steps.end(), byStart);
        std::stable_sort(l->bubbles.begin(), l->bubbles.end(), byStart);
        std::stable_sort(l->comm.begin(), l->comm.end(), byStart);
        int64_t truncated = 0;
        json lane{{"rank", l->rank}, {"stage", l->stage}, {"replica", l->replica}};
        lane["steps"] = encodeRow(l->steps, origin, capped, quantum, counts, truncated, 1);
        lane["bubbles"] = encodeRow(l->bubbles, origin, capped, quantum, counts, truncated, 2);
        lane["comm"] = encodeRow(l->comm, origin, capped, quantum, counts, truncated, 3);
        lane["busy"] = encodeRow(l->busy, origin, capped, quantum, counts, truncated, 0);
        lane["truncated"] = truncated;
        counts.truncated += truncated;
        doc["lanes"].push_back(std::move(lane));
    }
    if (countsOut)
        *countsOut = counts;
    return doc;
}

json predictedTimeline(const json& prediction, const TimelineLimits& limits)
{
    const TimeNs duration = prediction.value("iteration_ns", TimeNs(0));
    if (duration <= 0 || !prediction.contains("ranks"))
        return json(nullptr);
    const TimeNs quantum = quantumOf(duration, limits);
    json doc = baseDocument(0, duration, quantum);
    TimelineCounts counts;
    auto causeCode = [](const std::string& name) {
        for (int c = 0; c < kBubbleCauses; ++c)
            if (toString(static_cast<BubbleCause>(c)) == name)
                return c;
        return static_cast<int>(BubbleCause::Other);
    };
    for (const json& r : prediction["ranks"]) {
        std::vector<Block> steps, bubbles, comm;
        for (const json& a : r.value("actions", json::array())) {
            const std::string k = a.value("kind", std::string("F"));
            const int code = k == "B" ? 1 : k == "I" ? 2 : k == "W" ? 3 : 0;
            steps.push_back({a.value("start_ns", TimeNs(0)), a.value("end_ns", TimeNs(0)), code, a.value("microbatch", -1),
                             a.value("chunk", 0), -1, 1});
        }
        for (const json& b : r.value("bubbles", json::array()))
            bubbles.push_back({b.value("start_ns", TimeNs(0)), b.value("end_ns", TimeNs(0)), causeCode(b.value("cause", std::string())),
                               -1, 0, -1, 1});
        for (const char* what : {"all_reduce", "pipeline_sync"})
            if (r.contains(what)) {
                const TimeNs s = r[what].value("start_ns", TimeNs(0)), e = r[what].value("end_ns", TimeNs(0));
                if (e > s)
                    comm.push_back({s, e, 1, -1, 0, -1, 1});
            }
        auto byStart = [](const Block& x, const Block& y) { return x.start < y.start; };
        std::stable_sort(steps.begin(), steps.end(), byStart);
        std::stable_sort(bubbles.begin(), bubbles.end(), byStart);
        std::stable_sort(comm.begin(), comm.end(), byStart);
        const auto stages = r.value("stages", std::vector<int>{});
        int64_t truncated = 0;
        json lane{{"rank", r.value("rank", 0)}, {"stage", stages.empty() ? -1 : stages.front()}, {"replica", 0}};
        lane["steps"] = encodeRow(steps, 0, limits, quantum, counts, truncated, 1);
        lane["bubbles"] = encodeRow(bubbles, 0, limits, quantum, counts, truncated, 2);
        lane["comm"] = encodeRow(comm, 0, limits, quantum, counts, truncated, 3);
        lane["busy"] = json::array();
        lane["truncated"] = truncated;
        doc["lanes"].push_back(std::move(lane));
    }
    return doc;
}

} // namespace pipescope::report
