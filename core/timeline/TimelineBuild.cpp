#include "timeline/TimelineBuild.h"

#include "analysis/Classify.h"
#include "timeline/detail/TimelineSteps.h"
#include "util/Demangle.h"
#include "util/Format.h"

#include <algorithm>
#include <cstdint>
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

// Kernels recorded by their mangled C++ names read demangled (Details keeps the name as recorded).
void demangleNames(std::vector<std::string>& names)
{
    for (std::string& n : names)
        if (auto d = demangle(n))
            n = std::move(*d);
}

// Where a rank's lanes sit: its pipeline stage and replica, from the analysis's stage map.
class Placement {
public:
    explicit Placement(const AnalysisResult& result)
    {
        for (const StageAssignment& a : result.pipeline.stageMap)
            stageOf_[a.rank] = a;
    }
    void operator()(Lane& l, int rank) const
    {
        l.rank = rank;
        if (auto f = stageOf_.find(rank); f != stageOf_.end()) {
            l.stage = f->second.stage;
            l.replica = f->second.replica;
        }
    }

private:
    std::map<int, StageAssignment> stageOf_;
};

// The analysis's steps and bubbles, one lane each per rank (their kind, place
// and label are set when the lanes are assembled), and each rank's steps by
// start, for the kernels' enclosing step.
struct StepLanes {
    std::map<int, Lane> steps, bubbles;
    std::map<int, std::vector<const Step*>> stepsOfRank;
};

StepLanes stepAndBubbleLanes(const AnalysisResult& result, Names& names)
{
    StepLanes sl;
    for (const Step& s : result.steps) {
        Lane& l = sl.steps[s.rank];
        Event e;
        e.start = s.start;
        e.end = s.end;
        e.code = static_cast<uint8_t>(s.kind);
        e.microbatch = s.microbatch;
        e.chunk = chunkByte(s.chunk);
        e.detail = s.iteration;
        e.name = names(stepLabel(s.kind, s.microbatch, s.chunk));
        l.events.push_back(e);
        sl.stepsOfRank[s.rank].push_back(&s);
    }
    for (const Bubble& b : result.bubbles) {
        Lane& l = sl.bubbles[b.rank];
        Event e;
        e.start = b.start;
        e.end = b.end;
        e.code = static_cast<uint8_t>(b.cause);
        e.detail = b.iteration;
        e.name = names(std::string(toString(b.cause)));
        l.events.push_back(e);
    }
    for (auto& [r, steps] : sl.stepsOfRank)
        std::sort(steps.begin(), steps.end(), [](const Step* a, const Step* b) { return a->start < b->start; });
    return sl;
}

const NcclOp* opOf(const Trace& trace, const Activity& a)
{
    return a.ncclIndex >= 0 && static_cast<size_t>(a.ncclIndex) < trace.ncclOps.size() ? &trace.ncclOps[static_cast<size_t>(a.ncclIndex)]
                                                                                          : nullptr;
}

// One lane per GPU stream with every activity on it, and which lane each stream has.
struct StreamLanes {
    std::unordered_map<int64_t, StreamRole> roleOf;
    // CUPTI files device-wide synchronizations under stream -1: a pseudo-stream
    // with nothing but waits gets no lane (the waits show on the CPU side).
    std::unordered_set<int64_t> pseudoStreams;
    // Stream ids are store row ids, small and dense: a table finds the lane, a map the rest.
    std::vector<int32_t> laneOfDenseStream;
    std::unordered_map<int64_t, int32_t> laneOfOtherStream;
    std::vector<Lane> lanes;

    bool skips(const Activity& a) const { return !pseudoStreams.empty() && pseudoStreams.count(a.streamId); }
    // The stream's lane index, -1 until it has one.
    int32_t& slot(int64_t streamId)
    {
        if (streamId >= 0 && static_cast<size_t>(streamId) < laneOfDenseStream.size())
            return laneOfDenseStream[static_cast<size_t>(streamId)];
        return laneOfOtherStream.try_emplace(streamId, -1).first->second;
    }
};

// The streams' roles, the pseudo-streams left out, and the lookup table's size.
StreamLanes indexStreams(const Trace& trace, const AnalysisResult& result)
{
    StreamLanes sl;
    for (const StreamClass& sc : result.streams) {
        sl.roleOf[sc.storeId] = sc.role;
        if (sc.stream < 0 && sc.role == StreamRole::Idle)
            sl.pseudoStreams.insert(sc.storeId);
    }
    int64_t maxId = -1;
    for (const StreamInfo& si : trace.streams)
        maxId = std::max(maxId, si.id);
    if (maxId >= 0 && maxId < 4 * static_cast<int64_t>(trace.streams.size()) + 1024)
        sl.laneOfDenseStream.assign(static_cast<size_t>(maxId) + 1, -1);
    return sl;
}

// A first pass over the activities makes the stream lanes and counts their
// events, so each lane's vector is allocated once at its final size (no
// doubling, no copy in finalize). Returns how many activities carry
// communication details.
size_t openStreamLanes(const Trace& trace, StreamLanes& sl, const Placement& place)
{
    std::vector<size_t> laneEvents;
    size_t commCount = 0;
    for (const Activity& a : trace.activities) {
        if (sl.skips(a))
            continue;
        int32_t& slot = sl.slot(a.streamId);
        if (slot < 0) {
            slot = static_cast<int32_t>(sl.lanes.size());
            Lane l;
            l.kind = LaneKind::Kernels;
            place(l, a.rank);
            l.streamStoreId = a.streamId;
            if (const StreamInfo* si = trace.stream(a.streamId)) {
                l.device = si->device;
                l.stream = si->stream;
            }
            if (auto r = sl.roleOf.find(a.streamId); r != sl.roleOf.end())
                l.role = r->second;
            l.label = "stream " + std::to_string(l.stream) + " " + std::string(toString(l.role));
            sl.lanes.push_back(std::move(l));
            laneEvents.push_back(0);
        }
        ++laneEvents[static_cast<size_t>(slot)];
        if (a.bytes || opOf(trace, a))
            ++commCount;
    }
    for (size_t k = 0; k < sl.lanes.size(); ++k)
        sl.lanes[k].events.reserve(laneEvents[k]);
    return commCount;
}

// The work class of each activity. Kernel names repeat: each name of a kernel
// without an NCCL record is classified once.
class KernelClasses {
public:
    KernelClasses(const Trace& trace, const AnalysisResult& result)
        : trace_(trace), rules_(result.commRules.get()), byName_(trace.strings.size(), -1)
    {
    }
    uint8_t operator()(const Activity& a, const NcclOp* op)
    {
        const bool knownName = a.name >= 0 && static_cast<size_t>(a.name) < trace_.strings.size();
        if (!op && a.kind == ActivityKind::Kernel && knownName) {
            int8_t& cached = byName_[static_cast<size_t>(a.name)];
            if (cached < 0)
                cached = static_cast<int8_t>(classify(a.kind, trace_.str(a.name), nullptr, rules_));
            return static_cast<uint8_t>(cached);
        }
        return static_cast<uint8_t>(classify(a.kind, trace_.str(a.name), op, rules_));
    }

private:
    const Trace& trace_;
    const CommRules* rules_;
    std::vector<int8_t> byName_;
};

// What a communication or copy moved: its NCCL record's bytes, peer, group
// and kind where it has one, else the bytes the activity itself records.
CommDetail commDetail(const Activity& a, const NcclOp* op, Names& names)
{
    CommDetail d;
    d.bytes = op && op->bytes ? *op->bytes : a.bytes.value_or(-1);
    if (op) {
        d.peer = op->peer.value_or(-1);
        d.groupSize = op->groupSize ? *op->groupSize : static_cast<int32_t>(op->groupRanks.size());
        d.op = names(std::string(toString(op->kind)));
    }
    return d;
}

// The second pass: every activity as an event on its stream's lane, with its
// class, communication details and enclosing step.
void fillStreamLanes(const Trace& trace, const AnalysisResult& result, const StepLanes& stepLanes, StreamLanes& sl,
                     Names& names, std::vector<CommDetail>& comms)
{
    KernelClasses classOf(trace, result);
    detail::StepCursor steps(stepLanes.stepsOfRank);
    for (size_t i = 0; i < trace.activities.size(); ++i) {
        const Activity& a = trace.activities[i];
        if (sl.skips(a))
            continue;
        Lane& lane = sl.lanes[static_cast<size_t>(sl.slot(a.streamId))];
        const NcclOp* op = opOf(trace, a);
        Event e;
        e.start = a.start;
        e.end = a.end;
        e.activity = toIndex32(i);
        const bool knownName = a.name >= 0 && static_cast<size_t>(a.name) < trace.strings.size();
        e.name = knownName ? a.name : 0;
        e.code = classOf(a, op);
        if (op || a.bytes) {
            e.detail = toIndex32(comms.size());
            comms.push_back(commDetail(a, op, names));
        }
        // The step the activity runs in, for its tooltip and colour by step.
        if (const Step* st = steps.enclosing(a.rank, a.start)) {
            e.step = static_cast<uint8_t>(st->kind);
            e.microbatch = st->microbatch;
            e.chunk = chunkByte(st->chunk);
        }
        lane.events.push_back(e);
    }
}

// GPU memory in use over time, per rank and device, from the allocator's
// totals the profiler recorded with its memory events (profile_memory):
// a counter track. At most kMaxMemorySamples samples a lane: beyond that,
// each of as many equal slices of time keeps its highest sample, so peaks
// survive.
constexpr size_t kMaxMemorySamples = 8192;

std::vector<Lane> memoryLanes(const Trace& trace, const Placement& place, TimeNs jobEnd)
{
    std::map<std::pair<int, int>, std::vector<std::pair<TimeNs, int64_t>>> samples; // (rank, device) -> (ts, bytes)
    for (const MemoryEvent& e : trace.memoryEvents)
        if (e.totalAllocated)
            samples[{e.rank, e.device}].push_back({e.ts, *e.totalAllocated});
    std::vector<Lane> lanes;
    for (auto& [key, s] : samples) {
        std::stable_sort(s.begin(), s.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        if (s.size() > kMaxMemorySamples) {
            const TimeNs t0 = s.front().first, span = std::max<TimeNs>(1, s.back().first - t0 + 1);
            std::vector<std::pair<TimeNs, int64_t>> kept;
            size_t slice = SIZE_MAX;
            for (const auto& p : s) {
                const size_t at = static_cast<size_t>(static_cast<double>(p.first - t0) / static_cast<double>(span) *
                                                      static_cast<double>(kMaxMemorySamples));
                if (at != slice) {
                    kept.push_back(p);
                    slice = at;
                } else if (p.second > kept.back().second) {
                    kept.back() = p;
                }
            }
            s = std::move(kept);
        }
        Lane l;
        l.kind = LaneKind::Memory;
        place(l, key.first);
        l.device = key.second;
        int64_t peak = 0;
        for (size_t i = 0; i < s.size(); ++i) {
            Event e;
            e.start = s[i].first;
            e.end = i + 1 < s.size() ? s[i + 1].first : std::max(jobEnd, s[i].first);
            const int64_t units = s[i].second / kMemoryUnitBytes;
            e.detail = static_cast<int32_t>(std::clamp<int64_t>(units, 0, std::numeric_limits<int32_t>::max()));
            peak = std::max(peak, s[i].second);
            l.events.push_back(e);
        }
        l.label = "memory (peak " + formatBytes(peak) + ")";
        lanes.push_back(std::move(l));
    }
    return lanes;
}

// CPU annotations, one row per thread and nesting depth.
using CpuLanes = std::map<std::tuple<int, int64_t, int>, Lane>;

CpuLanes cpuLanes(const Trace& trace, const MeasuredOptions& options, const Placement& place)
{
    CpuLanes lanes;
    if (!options.cpuAnnotations)
        return lanes;
    for (const CpuRange& r : trace.cpuRanges) {
        if (r.kind != CpuRangeKind::Annotation && r.kind != CpuRangeKind::Nvtx)
            continue;
        const int depth = std::clamp(r.depth, 0, std::max(0, options.maxCpuDepth - 1));
        Lane& l = lanes[{r.rank, r.tid, depth}];
        if (l.events.empty()) {
            l.kind = LaneKind::Cpu;
            place(l, r.rank);
            l.tid = r.tid;
            l.depth = depth;
            // The thread as the trace names it ("thread 4242 (python3)"), else its id.
            const auto named = trace.threadNames.find({r.rank, r.tid});
            l.label = (named != trace.threadNames.end() ? "cpu " + named->second : "cpu " + std::to_string(r.tid)) +
                      (depth ? " depth " + std::to_string(depth) : std::string());
        }
        Event e;
        e.start = r.start;
        e.end = r.end;
        e.code = static_cast<uint8_t>(r.kind);
        e.name = static_cast<int32_t>(r.name >= 0 && static_cast<size_t>(r.name) < trace.strings.size() ? r.name : 0);
        l.events.push_back(e);
    }
    return lanes;
}

// Every lane into the model, in the model's lane order.
void assembleLanes(TimelineModel& m, StepLanes& stepLanes, StreamLanes& streamLanes, CpuLanes& cpu,
                   std::vector<Lane>& memory, const Placement& place)
{
    for (Lane& l : memory)
        m.lanes.push_back(std::move(l));
    for (auto& [r, l] : stepLanes.steps) {
        l.kind = LaneKind::Steps;
        place(l, r);
        l.label = "steps";
        m.lanes.push_back(std::move(l));
    }
    for (auto& [r, l] : stepLanes.bubbles) {
        l.kind = LaneKind::Bubbles;
        place(l, r);
        l.label = "bubbles";
        m.lanes.push_back(std::move(l));
    }
    for (Lane& l : streamLanes.lanes)
        m.lanes.push_back(std::move(l));
    for (auto& [k, l] : cpu)
        m.lanes.push_back(std::move(l));
    sortLanes(m.lanes);
}

} // namespace

namespace detail {

const Step* StepCursor::enclosing(int rank, TimeNs start)
{
    if (rank != rank_ || start < start_) {
        auto s = stepsOfRank_.find(rank);
        rankSteps_ = s != stepsOfRank_.end() ? &s->second : nullptr;
        started_ = rankSteps_ ? static_cast<size_t>(std::upper_bound(rankSteps_->begin(), rankSteps_->end(), start,
                                                                     [](TimeNs t, const Step* st) { return t < st->start; })
                                                    - rankSteps_->begin())
                              : 0;
        rank_ = rank;
    } else if (rankSteps_) {
        while (started_ < rankSteps_->size() && (*rankSteps_)[started_]->start <= start)
            ++started_;
    }
    start_ = start;
    if (rankSteps_ && started_ > 0 && (*rankSteps_)[started_ - 1]->end > start)
        return (*rankSteps_)[started_ - 1];
    return nullptr;
}

} // namespace detail

TimelineModel buildMeasured(const Trace& trace, const AnalysisResult& result, const MeasuredOptions& options)
{
    TimelineModel m;
    m.names = trace.strings;
    demangleNames(m.names);
    Names names(m.names);
    const Placement place(result);

    StepLanes stepLanes = stepAndBubbleLanes(result, names);
    StreamLanes streamLanes = indexStreams(trace, result);
    m.comms.reserve(openStreamLanes(trace, streamLanes, place));
    fillStreamLanes(trace, result, stepLanes, streamLanes, names, m.comms);
    CpuLanes cpu = cpuLanes(trace, options, place);
    TimeNs jobEnd = 0;
    for (const Activity& a : trace.activities)
        jobEnd = std::max(jobEnd, a.end);
    std::vector<Lane> memory = memoryLanes(trace, place, jobEnd);
    assembleLanes(m, stepLanes, streamLanes, cpu, memory, place);

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
