#include "timeline/TimelineBuild.h"

#include "analysis/Classify.h"
#include "util/Demangle.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace pipescope::timeline {

namespace {

// Interns labels the builders make up (step and bubble names) next to the trace's own strings.
class Names {
public:
    explicit Names(std::vector<std::string>& table) : table_(table)
    {
        if (table_.empty())
            table_.emplace_back();
    }
    int32_t operator()(const std::string& s)
    {
        auto [it, inserted] = made_.try_emplace(s, static_cast<int32_t>(table_.size()));
        if (inserted)
            table_.push_back(s);
        return it->second;
    }

private:
    std::vector<std::string>& table_;
    std::unordered_map<std::string, int32_t> made_;
};

std::string stepLabel(StepKind kind, int microbatch, int chunk)
{
    std::string s(1, toChar(kind));
    s += std::to_string(microbatch);
    if (chunk > 0)
        s += " chunk " + std::to_string(chunk);
    return s;
}

uint8_t chunkByte(int chunk) { return static_cast<uint8_t>(std::clamp(chunk, 0, 255)); }

int32_t toIndex32(size_t i) { return i <= static_cast<size_t>(std::numeric_limits<int32_t>::max()) ? static_cast<int32_t>(i) : -1; }

// Order of lanes inside a rank: steps, bubbles, compute/communication/copy streams, transfers, CPU.
auto laneKey(const Lane& l)
{
    return std::make_tuple(l.stage < 0 ? std::numeric_limits<int>::max() : l.stage, l.replica, l.rank, static_cast<int>(l.kind),
                           static_cast<int>(l.role), l.stream, l.tid, l.depth);
}

void sortLanes(std::vector<Lane>& lanes)
{
    std::stable_sort(lanes.begin(), lanes.end(), [](const Lane& a, const Lane& b) { return laneKey(a) < laneKey(b); });
}

} // namespace

TimelineModel buildMeasured(const Trace& trace, const AnalysisResult& result, const MeasuredOptions& options)
{
    TimelineModel m;
    m.names = trace.strings;
    // Kernels recorded by their mangled C++ names read demangled (Details keeps the name as recorded).
    for (std::string& n : m.names)
        if (auto d = demangle(n))
            n = std::move(*d);
    Names names(m.names);

    std::map<int, StageAssignment> stageOf;
    for (const StageAssignment& a : result.pipeline.stageMap)
        stageOf[a.rank] = a;
    auto place = [&](Lane& l, int rank) {
        l.rank = rank;
        if (auto f = stageOf.find(rank); f != stageOf.end()) {
            l.stage = f->second.stage;
            l.replica = f->second.replica;
        }
    };

    // Steps and bubbles, one lane each per rank.
    std::map<int, Lane> stepLanes, bubbleLanes;
    std::map<int, std::vector<const Step*>> stepsOfRank;
    for (const Step& s : result.steps) {
        Lane& l = stepLanes[s.rank];
        Event e;
        e.start = s.start;
        e.end = s.end;
        e.code = static_cast<uint8_t>(s.kind);
        e.microbatch = s.microbatch;
        e.chunk = chunkByte(s.chunk);
        e.detail = s.iteration;
        e.name = names(stepLabel(s.kind, s.microbatch, s.chunk));
        l.events.push_back(e);
        stepsOfRank[s.rank].push_back(&s);
    }
    for (const Bubble& b : result.bubbles) {
        Lane& l = bubbleLanes[b.rank];
        Event e;
        e.start = b.start;
        e.end = b.end;
        e.code = static_cast<uint8_t>(b.cause);
        e.detail = b.iteration;
        e.name = names(std::string(toString(b.cause)));
        l.events.push_back(e);
    }
    for (auto& [r, steps] : stepsOfRank)
        std::sort(steps.begin(), steps.end(), [](const Step* a, const Step* b) { return a->start < b->start; });

    // One lane per GPU stream with every activity on it. A first pass makes
    // the lanes and counts their events, so each lane's vector is allocated
    // once at its final size (no doubling, no copy in finalize).
    std::unordered_map<int64_t, StreamRole> roleOf;
    // CUPTI files device-wide synchronizations under stream -1: a pseudo-stream
    // with nothing but waits gets no lane (the waits show on the CPU side).
    std::unordered_set<int64_t> pseudoStreams;
    for (const StreamClass& sc : result.streams) {
        roleOf[sc.storeId] = sc.role;
        if (sc.stream < 0 && sc.role == StreamRole::Idle)
            pseudoStreams.insert(sc.storeId);
    }
    // Stream ids are store row ids, small and dense: a table finds the lane, a map the rest.
    std::vector<int32_t> laneOfDenseStream;
    {
        int64_t maxId = -1;
        for (const StreamInfo& si : trace.streams)
            maxId = std::max(maxId, si.id);
        if (maxId >= 0 && maxId < 4 * static_cast<int64_t>(trace.streams.size()) + 1024)
            laneOfDenseStream.assign(static_cast<size_t>(maxId) + 1, -1);
    }
    std::unordered_map<int64_t, int32_t> laneOfOtherStream;
    auto laneSlot = [&](int64_t streamId) -> int32_t& {
        if (streamId >= 0 && static_cast<size_t>(streamId) < laneOfDenseStream.size())
            return laneOfDenseStream[static_cast<size_t>(streamId)];
        return laneOfOtherStream.try_emplace(streamId, -1).first->second;
    };
    auto opOf = [&](const Activity& a) -> const NcclOp* {
        return a.ncclIndex >= 0 && static_cast<size_t>(a.ncclIndex) < trace.ncclOps.size()
                   ? &trace.ncclOps[static_cast<size_t>(a.ncclIndex)]
                   : nullptr;
    };
    std::vector<Lane> streamLanes;
    std::vector<size_t> laneEvents;
    size_t commCount = 0;
    for (const Activity& a : trace.activities) {
        if (!pseudoStreams.empty() && pseudoStreams.count(a.streamId))
            continue;
        int32_t& slot = laneSlot(a.streamId);
        if (slot < 0) {
            slot = static_cast<int32_t>(streamLanes.size());
            Lane l;
            l.kind = LaneKind::Kernels;
            place(l, a.rank);
            l.streamStoreId = a.streamId;
            if (const StreamInfo* si = trace.stream(a.streamId)) {
                l.device = si->device;
                l.stream = si->stream;
            }
            if (auto r = roleOf.find(a.streamId); r != roleOf.end())
                l.role = r->second;
            l.label = "stream " + std::to_string(l.stream) + " " + std::string(toString(l.role));
            streamLanes.push_back(std::move(l));
            laneEvents.push_back(0);
        }
        ++laneEvents[static_cast<size_t>(slot)];
        if (a.bytes || opOf(a))
            ++commCount;
    }
    for (size_t k = 0; k < streamLanes.size(); ++k)
        streamLanes[k].events.reserve(laneEvents[k]);
    m.comms.reserve(commCount);

    // Kernel names repeat: classify each name once (kernels without an NCCL record).
    std::vector<int8_t> kernelClassByName(trace.strings.size(), -1);
    // Activities are sorted by (rank, start): the enclosing step is found by a cursor
    // moving forward through the rank's steps (a binary search when the order breaks).
    const std::vector<const Step*>* rankSteps = nullptr;
    int cursorRank = std::numeric_limits<int>::min();
    TimeNs cursorStart = std::numeric_limits<TimeNs>::min();
    size_t cursor = 0; // steps of the rank starting at or before the activity
    for (size_t i = 0; i < trace.activities.size(); ++i) {
        const Activity& a = trace.activities[i];
        if (!pseudoStreams.empty() && pseudoStreams.count(a.streamId))
            continue;
        Lane& lane = streamLanes[static_cast<size_t>(laneSlot(a.streamId))];
        const NcclOp* op = opOf(a);
        Event e;
        e.start = a.start;
        e.end = a.end;
        e.activity = toIndex32(i);
        const bool knownName = a.name >= 0 && static_cast<size_t>(a.name) < trace.strings.size();
        e.name = knownName ? a.name : 0;
        if (!op && a.kind == ActivityKind::Kernel && knownName) {
            int8_t& cached = kernelClassByName[static_cast<size_t>(a.name)];
            if (cached < 0)
                cached = static_cast<int8_t>(classify(a.kind, trace.str(a.name), nullptr, result.commRules.get()));
            e.code = static_cast<uint8_t>(cached);
        } else {
            e.code = static_cast<uint8_t>(classify(a.kind, trace.str(a.name), op, result.commRules.get()));
        }
        if (op || a.bytes) {
            CommDetail d;
            d.bytes = op && op->bytes ? *op->bytes : a.bytes.value_or(-1);
            if (op) {
                d.peer = op->peer.value_or(-1);
                d.groupSize = op->groupSize ? *op->groupSize : static_cast<int32_t>(op->groupRanks.size());
                d.op = names(std::string(toString(op->kind)));
            }
            e.detail = toIndex32(m.comms.size());
            m.comms.push_back(d);
        }
        // The step the activity runs in, for its tooltip and colour by step.
        if (a.rank != cursorRank || a.start < cursorStart) {
            auto s = stepsOfRank.find(a.rank);
            rankSteps = s != stepsOfRank.end() ? &s->second : nullptr;
            cursor = rankSteps ? static_cast<size_t>(std::upper_bound(rankSteps->begin(), rankSteps->end(), a.start,
                                                                      [](TimeNs t, const Step* st) { return t < st->start; })
                                                     - rankSteps->begin())
                               : 0;
            cursorRank = a.rank;
        } else if (rankSteps) {
            while (cursor < rankSteps->size() && (*rankSteps)[cursor]->start <= a.start)
                ++cursor;
        }
        cursorStart = a.start;
        if (rankSteps && cursor > 0 && (*rankSteps)[cursor - 1]->end > a.start) {
            const Step* st = (*rankSteps)[cursor - 1];
            e.step = static_cast<uint8_t>(st->kind);
            e.microbatch = st->microbatch;
            e.chunk = chunkByte(st->chunk);
        }
        lane.events.push_back(e);
    }

    // CPU annotations, one row per thread and nesting depth.
    std::map<std::tuple<int, int64_t, int>, Lane> cpuLanes;
    if (options.cpuAnnotations)
        for (const CpuRange& r : trace.cpuRanges) {
            if (r.kind != CpuRangeKind::Annotation && r.kind != CpuRangeKind::Nvtx)
                continue;
            const int depth = std::clamp(r.depth, 0, std::max(0, options.maxCpuDepth - 1));
            Lane& l = cpuLanes[{r.rank, r.tid, depth}];
            if (l.events.empty()) {
                l.kind = LaneKind::Cpu;
                place(l, r.rank);
                l.tid = r.tid;
                l.depth = depth;
                l.label = "cpu " + std::to_string(r.tid) + (depth ? " depth " + std::to_string(depth) : std::string());
            }
            Event e;
            e.start = r.start;
            e.end = r.end;
            e.code = static_cast<uint8_t>(r.kind);
            e.name = static_cast<int32_t>(r.name >= 0 && static_cast<size_t>(r.name) < trace.strings.size() ? r.name : 0);
            l.events.push_back(e);
        }

    for (auto& [r, l] : stepLanes) {
        l.kind = LaneKind::Steps;
        place(l, r);
        l.label = "steps";
        m.lanes.push_back(std::move(l));
    }
    for (auto& [r, l] : bubbleLanes) {
        l.kind = LaneKind::Bubbles;
        place(l, r);
        l.label = "bubbles";
        m.lanes.push_back(std::move(l));
    }
    for (Lane& l : streamLanes)
        m.lanes.push_back(std::move(l));
    for (auto& [k, l] : cpuLanes)
        m.lanes.push_back(std::move(l));
    sortLanes(m.lanes);

    for (const Iteration& it : result.iterations)
        m.iterations.push_back({it.index, it.label, it.start, it.end});
    m.finalize();
    return m;
}

TimelineModel buildPredicted(const whatif::Prediction& prediction)
{
    TimelineModel m;
    m.predicted = true;
    Names names(m.names);
    const auto& schedule = prediction.schedule;
    const auto& replay = prediction.replay;
    auto stageOfRank = [&](int rank) {
        for (size_t s = 0; s < schedule.rankOfStage.size(); ++s)
            if (schedule.rankOfStage[s] == rank)
                return static_cast<int>(s);
        return rank;
    };
    std::vector<Lane> transferLanes(replay.ranks.size());
    for (size_t r = 0; r < replay.ranks.size(); ++r) {
        const int rank = static_cast<int>(r);
        const whatif::RankReplay& rr = replay.ranks[r];
        Lane steps, bubbles;
        steps.kind = LaneKind::Steps;
        steps.label = "steps";
        bubbles.kind = LaneKind::Bubbles;
        bubbles.label = "bubbles";
        Lane& comm = transferLanes[r];
        comm.kind = LaneKind::Transfers;
        comm.label = "communication";
        for (Lane* l : {&steps, &bubbles, &comm}) {
            l->rank = rank;
            l->stage = stageOfRank(rank);
        }
        for (const whatif::TimedAction& a : rr.actions) {
            Event e;
            e.start = a.start;
            e.end = a.end;
            e.code = static_cast<uint8_t>(a.kind);
            e.microbatch = a.microbatch;
            e.chunk = chunkByte(a.chunk);
            e.detail = 0;
            e.name = names(stepLabel(a.kind, a.microbatch, a.chunk));
            steps.events.push_back(e);
        }
        for (const whatif::Bubble& b : rr.bubbles) {
            Event e;
            e.start = b.start;
            e.end = b.end;
            e.code = static_cast<uint8_t>(b.cause);
            e.detail = 0;
            e.name = names(std::string(toString(b.cause)));
            bubbles.events.push_back(e);
        }
        auto add = [&](TimeNs s, TimeNs e, WorkClass c, const char* what) {
            if (e <= s)
                return;
            Event ev;
            ev.start = s;
            ev.end = e;
            ev.code = static_cast<uint8_t>(c);
            ev.name = names(what);
            comm.events.push_back(ev);
        };
        add(rr.allReduceStart, rr.allReduceEnd, WorkClass::Collective, "all-reduce");
        add(rr.syncStart, rr.syncEnd, WorkClass::Collective, "pipeline sync");
        add(rr.optimizerStart, rr.optimizerEnd, WorkClass::Compute, "optimizer");
        m.lanes.push_back(std::move(steps));
        m.lanes.push_back(std::move(bubbles));
    }
    for (const whatif::TimedTransfer& t : replay.transfers) {
        if (t.srcRank < 0 || static_cast<size_t>(t.srcRank) >= transferLanes.size())
            continue;
        CommDetail d;
        d.bytes = t.bytes;
        d.peer = t.dstRank;
        d.backward = t.backward;
        Event e;
        e.start = t.start;
        e.end = t.end;
        e.code = static_cast<uint8_t>(WorkClass::P2p);
        e.microbatch = t.microbatch;
        e.detail = toIndex32(m.comms.size());
        e.name = names(std::string(t.backward ? "gradient" : "activation") + " to rank " + std::to_string(t.dstRank));
        m.comms.push_back(d);
        transferLanes[static_cast<size_t>(t.srcRank)].events.push_back(e);
    }
    for (Lane& l : transferLanes)
        if (!l.events.empty())
            m.lanes.push_back(std::move(l));
    sortLanes(m.lanes);
    m.iterations.push_back({0, "predicted", 0, replay.iterationNs});
    m.finalize();
    return m;
}

} // namespace pipescope::timeline
