#include "report/Timeline.h"

#include "report/detail/TimelineSteps.h"

#include "timeline/TimelineBuild.h"
#include "whatif/WhatIf.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

namespace pipescope::report {

using nlohmann::json;
using timeline::DrawItem;
using timeline::Event;
using timeline::Lane;
using timeline::LaneKind;
using timeline::TimelineModel;

namespace {

// Kernel names are shown in tooltips of single communication blocks; the
// table is capped so a trace with millions of distinct names stays small.
constexpr size_t kMaxNames = 2000;

bool isComm(uint8_t code) { return code == static_cast<uint8_t>(WorkClass::P2p) || code == static_cast<uint8_t>(WorkClass::Collective); }

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

// The per-lane cap on rows: with many ranks each row gets a share of the
// total (never under 200), and never more than the per-lane limit.
int rowCap(const TimelineLimits& limits, size_t ranks)
{
    if (ranks == 0 || limits.maxItemsTotal <= 0)
        return limits.maxItemsPerLane;
    const int64_t share = limits.maxItemsTotal / (4 * static_cast<int64_t>(ranks));
    return static_cast<int>(std::min<int64_t>(limits.maxItemsPerLane, std::max<int64_t>(200, share)));
}

enum class Row { Steps, Bubbles, Comm, Busy };

// Encodes rows as the model's draw lists over the window, counting what it
// drew, folded and left out, and numbering the names of exact communication
// blocks as they first appear.
class RowEncoder {
public:
    RowEncoder(const TimelineModel& model, TimeNs from, TimeNs to, int columns, int cap, json& names, TimelineCounts& counts)
        : model_(model), from_(from), to_(to), columns_(columns), cap_(cap), names_(names), counts_(counts)
    {
        fold_.foldPx = 1.0;
    }

    // Lane `lane` of `m` (the model, or the gathered window) as the rows of
    // `row`; blocks past the cap are added to `truncated`.
    json encode(const TimelineModel& m, int lane, Row row, int64_t& truncated)
    {
        json out = json::array();
        if (lane < 0 || to_ <= from_)
            return out;
        m.drawList(lane, from_, to_, columns_, items_, fold_);
        size_t keep = items_.size();
        if (cap_ > 0 && keep > static_cast<size_t>(cap_)) {
            keep = static_cast<size_t>(cap_);
            truncated += static_cast<int64_t>(items_.size() - keep);
        }
        for (size_t k = 0; k < items_.size(); ++k)
            if (items_[k].count > 1)
                counts_.folded += items_[k].count;
        for (size_t k = 0; k < keep; ++k) {
            const DrawItem& it = items_[k];
            out.push_back(block(it, it.event >= 0 ? &m.event(lane, it.event) : nullptr, row));
        }
        counts_.blocks += static_cast<int64_t>(keep);
        return out;
    }

private:
    // One block: [start, duration, the row's fields..., count].
    json block(const DrawItem& it, const Event* e, Row row)
    {
        const TimeNs end = std::min(it.end, to_);
        json r = json::array({it.start - from_, end - it.start});
        switch (row) {
        case Row::Steps:
            r.push_back(it.code);
            r.push_back(e ? e->microbatch : -1);
            r.push_back(e ? e->chunk : 0);
            break;
        case Row::Bubbles:
            r.push_back(it.code);
            break;
        case Row::Comm:
            r.push_back(it.code == static_cast<uint8_t>(WorkClass::P2p) ? 0 : 1);
            r.push_back(nameOf(e));
            break;
        case Row::Busy:
            break;
        }
        r.push_back(it.count);
        return r;
    }

    // The index of an exact block's name in the document's names, -1 for
    // none or once the table is full.
    int nameOf(const Event* e)
    {
        int name = -1;
        if (e && e->name > 0) {
            if (auto n = nameIndex_.find(e->name); n != nameIndex_.end())
                name = n->second;
            else if (names_.size() < kMaxNames) {
                name = static_cast<int>(names_.size());
                names_.push_back(model_.name(e->name)); // gathered events keep the model's name ids
                nameIndex_.emplace(e->name, name);
            }
        }
        return name;
    }

    const TimelineModel& model_;
    TimeNs from_, to_;
    int columns_;
    int cap_;
    json& names_;
    TimelineCounts& counts_;
    timeline::DrawOptions fold_;
    std::vector<DrawItem> items_;
    std::unordered_map<int32_t, int> nameIndex_;
};

} // namespace

namespace detail {

GatheredRows gatherRankRows(const TimelineModel& model, TimeNs from, TimeNs to)
{
    GatheredRows g;
    std::map<int, size_t> rankIndex;
    for (size_t li = 0; li < model.lanes.size(); ++li) {
        const Lane& lane = model.lanes[li];
        auto [it, inserted] = rankIndex.try_emplace(lane.rank, g.ranks.size());
        if (inserted) {
            RankRows r;
            r.rank = lane.rank;
            r.stage = lane.stage;
            r.replica = lane.replica;
            g.ranks.push_back(r);
        }
        RankRows& r = g.ranks[it->second];
        switch (lane.kind) {
        case LaneKind::Steps:
            if (r.steps < 0)
                r.steps = static_cast<int>(li);
            break;
        case LaneKind::Bubbles:
            if (r.bubbles < 0)
                r.bubbles = static_cast<int>(li);
            break;
        case LaneKind::Kernels:
        case LaneKind::Transfers:
            for (int row : {0, 1}) { // 0: comm, 1: busy
                int& index = row == 0 ? r.comm : r.busy;
                for (size_t i = model.firstEndingAfter(static_cast<int>(li), from); i < lane.events.size() && lane.events[i].start < to; ++i) {
                    const Event& e = lane.events[i];
                    if (row == 0 ? !isComm(e.code) : e.code != static_cast<uint8_t>(WorkClass::Compute))
                        continue;
                    if (index < 0) {
                        index = static_cast<int>(g.window.lanes.size());
                        Lane l;
                        l.kind = lane.kind;
                        l.rank = lane.rank;
                        g.window.lanes.push_back(std::move(l));
                    }
                    g.window.lanes[static_cast<size_t>(index)].events.push_back(e);
                }
            }
            break;
        case LaneKind::Cpu:
        case LaneKind::Memory:
            break;
        }
    }
    g.window.finalize();
    return g;
}

} // namespace detail

json encodeTimeline(const TimelineModel& model, TimeNs from, TimeNs to, const TimelineLimits& limits, TimelineCounts* countsOut,
                    const std::set<int>* ranks)
{
    TimelineCounts counts;
    const TimeNs duration = std::max<TimeNs>(0, to - from);
    const int columns = std::max(1, limits.foldColumns);
    // What drawList folds at `columns` pixels with foldPx 1.
    const TimeNs quantum = std::max<TimeNs>(1, (duration + columns - 1) / columns);
    json doc = baseDocument(from, duration, quantum);

    // The ranks in the model's lane order, and the window's kernels and transfers gathered per rank and row.
    const detail::GatheredRows gathered = detail::gatherRankRows(model, from, to);
    auto wanted = [ranks](int rank) { return !ranks || ranks->count(rank) > 0; };
    counts.rowCap = rowCap(limits, static_cast<size_t>(std::count_if(gathered.ranks.begin(), gathered.ranks.end(),
                                                                         [&](const detail::RankRows& r) { return wanted(r.rank); })));

    RowEncoder rows(model, from, to, columns, counts.rowCap, doc["names"], counts);
    for (const detail::RankRows& r : gathered.ranks) {
        if (!wanted(r.rank))
            continue;
        int64_t truncated = 0;
        json lane{{"rank", r.rank}, {"stage", r.stage}, {"replica", r.replica}};
        lane["steps"] = rows.encode(model, r.steps, Row::Steps, truncated);
        lane["bubbles"] = rows.encode(model, r.bubbles, Row::Bubbles, truncated);
        lane["comm"] = rows.encode(gathered.window, r.comm, Row::Comm, truncated);
        lane["busy"] = rows.encode(gathered.window, r.busy, Row::Busy, truncated);
        lane["truncated"] = truncated;
        counts.truncated += truncated;
        doc["lanes"].push_back(std::move(lane));
    }
    if (countsOut)
        *countsOut = counts;
    return doc;
}

namespace {

struct FoldedLane {
    const char* role = "";
    int of = 0;
};

// Replicas folded (TimelineLimits::foldReplicasAbove): the lanes shown, by
// rank; empty when every rank is shown. Ranks outside the pipeline are shown.
std::map<int, FoldedLane> foldReplicas(const AnalysisResult& result, const TimelineLimits& limits)
{
    const auto& staged = result.pipeline.stageMap;
    const auto inStages = std::count_if(staged.begin(), staged.end(), [](const StageAssignment& a) { return a.stage >= 0; });
    if (limits.foldReplicasAbove < 0 || inStages <= limits.foldReplicasAbove)
        return {};
    std::map<int, TimeNs> busy;
    for (const RankIdle& ri : result.idle)
        if (ri.iteration == result.selectedIteration)
            busy[ri.rank] = ri.busyNs;
    std::map<int, std::vector<std::pair<TimeNs, int>>> byStage; // stage -> (busy, rank)
    for (const StageAssignment& a : staged)
        if (a.stage >= 0) {
            const auto b = busy.find(a.rank);
            byStage[a.stage].emplace_back(b == busy.end() ? 0 : b->second, a.rank);
        }
    if (std::none_of(byStage.begin(), byStage.end(), [](const auto& s) { return s.second.size() > 1; }))
        return {};
    std::map<int, FoldedLane> shown;
    for (auto& [stage, replicas] : byStage) {
        // Most compute first; among equals the lowest rank.
        std::sort(replicas.begin(), replicas.end(), [](const auto& a, const auto& b) {
            return a.first != b.first ? a.first > b.first : a.second < b.second;
        });
        const int of = static_cast<int>(replicas.size());
        shown[replicas.front().second] = {"slowest", of}; // a stage of one replica: no role drawn
        if (of > 1) {
            // The least compute; among equals the lowest rank.
            auto fastest = std::find_if(replicas.begin(), replicas.end(), [&](const auto& r) { return r.first == replicas.back().first; });
            if (fastest == replicas.begin())
                ++fastest; // every replica equal: the next one
            shown[fastest->second] = {"fastest", of};
        }
    }
    std::set<int> inPipeline;
    for (const StageAssignment& a : staged)
        if (a.stage >= 0)
            inPipeline.insert(a.rank);
    for (int r : result.ranks)
        if (!inPipeline.count(r))
            shown[r] = {"", 0};
    return shown;
}

} // namespace

json measuredTimeline(const Trace& trace, const AnalysisResult& result, const TimelineLimits& limits, TimelineCounts* counts)
{
    if (result.selectedIteration < 0 || static_cast<size_t>(result.selectedIteration) >= result.iterations.size())
        return json(nullptr);
    const Iteration& it = result.iterations[static_cast<size_t>(result.selectedIteration)];
    const std::map<int, FoldedLane> folded = foldReplicas(result, limits);
    std::set<int> shown;
    for (const auto& [rank, lane] : folded)
        shown.insert(rank);
    auto wanted = [&](int rank) { return folded.empty() || shown.count(rank) > 0; };

    // The model needs only the iteration's activities: a trace of those, with
    // the NCCL records they point to, keeps the build to the window.
    Trace window;
    window.strings = trace.strings;
    window.streams = trace.streams;
    window.ranks = trace.ranks;
    for (const Activity& a : trace.activities) {
        if (a.end <= it.start || a.start >= it.end || !wanted(a.rank))
            continue;
        Activity copy = a;
        if (a.ncclIndex >= 0 && static_cast<size_t>(a.ncclIndex) < trace.ncclOps.size()) {
            copy.ncclIndex = static_cast<int64_t>(window.ncclOps.size());
            const size_t n = std::min<size_t>(std::max<size_t>(1, a.ncclCount), trace.ncclOps.size() - static_cast<size_t>(a.ncclIndex));
            for (size_t k = 0; k < n; ++k)
                window.ncclOps.push_back(trace.ncclOps[static_cast<size_t>(a.ncclIndex) + k]);
            copy.ncclCount = static_cast<uint16_t>(n);
        } else {
            copy.ncclIndex = -1;
            copy.ncclCount = 0;
        }
        window.activities.push_back(copy);
    }
    timeline::MeasuredOptions mo;
    mo.cpuAnnotations = false;
    const TimelineModel model = timeline::buildMeasured(window, result, mo);
    json doc = encodeTimeline(model, it.start, it.end, limits, counts, folded.empty() ? nullptr : &shown);

    // Ranks with nothing in the model (no GPU work, no steps) still get their lane, last in their place.
    std::map<int, const StageAssignment*> stageOf;
    for (const StageAssignment& a : result.pipeline.stageMap)
        stageOf[a.rank] = &a;
    json& lanes = doc["lanes"];
    bool added = false;
    for (int r : result.ranks) {
        if (!wanted(r) || std::any_of(lanes.begin(), lanes.end(), [&](const json& l) { return l["rank"].get<int>() == r; }))
            continue;
        const auto f = stageOf.find(r);
        lanes.push_back(json{{"rank", r},
                             {"stage", f != stageOf.end() ? f->second->stage : -1},
                             {"replica", f != stageOf.end() ? f->second->replica : 0},
                             {"steps", json::array()},
                             {"bubbles", json::array()},
                             {"comm", json::array()},
                             {"busy", json::array()},
                             {"truncated", 0}});
        added = true;
    }
    if (added) {
        std::vector<json> sorted(lanes.begin(), lanes.end());
        auto key = [](const json& l) {
            const int stage = l["stage"].get<int>();
            return std::make_tuple(stage < 0 ? std::numeric_limits<int>::max() : stage, l["replica"].get<int>(), l["rank"].get<int>());
        };
        std::stable_sort(sorted.begin(), sorted.end(), [&](const json& a, const json& b) { return key(a) < key(b); });
        lanes = json(std::move(sorted));
    }
    if (!folded.empty()) {
        for (json& l : lanes)
            if (const auto f = folded.find(l["rank"].get<int>()); f != folded.end() && f->second.of > 1) {
                l["role"] = f->second.role;
                l["of"] = f->second.of;
            }
        const auto inStages = std::count_if(result.pipeline.stageMap.begin(), result.pipeline.stageMap.end(),
                                            [](const StageAssignment& a) { return a.stage >= 0; });
        doc["folded"] = {{"ranks", static_cast<int64_t>(inStages)}, {"shown", static_cast<int64_t>(lanes.size())}};
    }
    return doc;
}

json predictedTimeline(const whatif::Prediction& prediction, const TimelineLimits& limits)
{
    const TimeNs duration = prediction.replay.iterationNs;
    if (duration <= 0)
        return json(nullptr);
    return encodeTimeline(timeline::buildPredicted(prediction), 0, duration, limits);
}

json predictedTimeline(const json& prediction, const TimelineLimits& limits)
{
    const TimeNs duration = prediction.value("iteration_ns", TimeNs(0));
    if (duration <= 0 || !prediction.contains("ranks"))
        return json(nullptr);
    // The lanes buildPredicted makes, from the JSON's fields.
    TimelineModel m;
    m.predicted = true;
    m.names.emplace_back();
    std::map<std::string, int32_t> nameIds;
    auto intern = [&](const std::string& s) {
        auto [it, inserted] = nameIds.try_emplace(s, static_cast<int32_t>(m.names.size()));
        if (inserted)
            m.names.push_back(s);
        return it->second;
    };
    auto causeCode = [](const std::string& name) {
        for (int c = 0; c < kBubbleCauses; ++c)
            if (toString(static_cast<BubbleCause>(c)) == name)
                return static_cast<uint8_t>(c);
        return static_cast<uint8_t>(BubbleCause::Other);
    };
    auto event = [](TimeNs s, TimeNs e, uint8_t code) {
        Event ev;
        ev.start = s;
        ev.end = e;
        ev.code = code;
        return ev;
    };
    std::map<int, size_t> transfersOf; // rank -> its Transfers lane
    std::vector<Lane> transferLanes;
    for (const json& r : prediction["ranks"]) {
        const int rank = r.value("rank", 0);
        const auto stages = r.value("stages", std::vector<int>{});
        Lane steps, bubbles, comm;
        steps.kind = LaneKind::Steps;
        bubbles.kind = LaneKind::Bubbles;
        comm.kind = LaneKind::Transfers;
        for (Lane* l : {&steps, &bubbles, &comm}) {
            l->rank = rank;
            l->stage = stages.empty() ? rank : stages.front();
        }
        for (const json& a : r.value("actions", json::array())) {
            const std::string k = a.value("kind", std::string("F"));
            Event e = event(a.value("start_ns", TimeNs(0)), a.value("end_ns", TimeNs(0)),
                            static_cast<uint8_t>(k == "B" ? 1 : k == "I" ? 2 : k == "W" ? 3 : 0));
            e.microbatch = a.value("microbatch", -1);
            e.chunk = static_cast<uint8_t>(std::clamp(a.value("chunk", 0), 0, 255));
            steps.events.push_back(e);
        }
        for (const json& b : r.value("bubbles", json::array()))
            bubbles.events.push_back(
                event(b.value("start_ns", TimeNs(0)), b.value("end_ns", TimeNs(0)), causeCode(b.value("cause", std::string()))));
        struct Part {
            const char* key;
            const char* name;
            WorkClass cls;
        };
        for (const Part& p : {Part{"all_reduce", "all-reduce", WorkClass::Collective}, Part{"pipeline_sync", "pipeline sync", WorkClass::Collective},
                              Part{"optimizer", "optimizer", WorkClass::Compute}})
            if (r.contains(p.key)) {
                const TimeNs s = r[p.key].value("start_ns", TimeNs(0)), e = r[p.key].value("end_ns", TimeNs(0));
                if (e > s) {
                    Event ev = event(s, e, static_cast<uint8_t>(p.cls));
                    ev.name = intern(p.name);
                    comm.events.push_back(ev);
                }
            }
        m.lanes.push_back(std::move(steps));
        m.lanes.push_back(std::move(bubbles));
        transfersOf[rank] = transferLanes.size();
        transferLanes.push_back(std::move(comm));
    }
    for (const json& t : prediction.value("transfers", json::array()))
        if (auto f = transfersOf.find(t.value("src_rank", -1)); f != transfersOf.end()) {
            Event e = event(t.value("start_ns", TimeNs(0)), t.value("end_ns", TimeNs(0)), static_cast<uint8_t>(WorkClass::P2p));
            e.microbatch = t.value("microbatch", -1);
            e.name = intern(std::string(t.value("direction", std::string()) == "backward" ? "gradient" : "activation") + " to rank " +
                            std::to_string(t.value("dst_rank", -1)));
            transferLanes[f->second].events.push_back(e);
        }
    for (Lane& l : transferLanes)
        if (!l.events.empty())
            m.lanes.push_back(std::move(l));
    std::stable_sort(m.lanes.begin(), m.lanes.end(), [](const Lane& a, const Lane& b) {
        return std::make_tuple(a.stage < 0 ? std::numeric_limits<int>::max() : a.stage, a.rank, static_cast<int>(a.kind))
               < std::make_tuple(b.stage < 0 ? std::numeric_limits<int>::max() : b.stage, b.rank, static_cast<int>(b.kind));
    });
    m.finalize();
    return encodeTimeline(m, 0, duration, limits);
}

} // namespace pipescope::report
