#include "report/ChromeTrace.h"
#include "report/detail/ChromeTraceSteps.h"

#include "analysis/Analysis.h"
#include "analysis/MeasuredPipeline.h"
#include "util/JsonText.h"
#include "util/TraceEventWriter.h"

#include <algorithm>
#include <optional>
#include <cstdio>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>

namespace pipescope::report {

namespace {

using nlohmann::json;
using namespace detail;

const char* groupName(CpuGroup g)
{
    switch (g) {
    case CpuGroup::Annotations: return "annotations";
    case CpuGroup::GpuAnnotations: return "GPU annotations";
    case CpuGroup::CpuOps: return "CPU ops";
    case CpuGroup::Runtime: return "runtime calls";
    default: return "other";
    }
}

// Categories as the PyTorch profiler writes them, so `pipescope import` reads the file back.
const char* cpuCategory(CpuRangeKind k)
{
    switch (k) {
    case CpuRangeKind::Annotation:
    case CpuRangeKind::Nvtx:
        return "user_annotation";
    case CpuRangeKind::CpuOp: return "cpu_op";
    case CpuRangeKind::Runtime: return "cuda_runtime";
    case CpuRangeKind::Driver: return "cuda_driver";
    case CpuRangeKind::GpuAnnotation: return "gpu_user_annotation";
    default: return "other";
    }
}

const char* gpuCategory(ActivityKind k)
{
    switch (k) {
    case ActivityKind::Kernel: return "kernel";
    case ActivityKind::Memcpy: return "gpu_memcpy";
    case ActivityKind::Memset: return "gpu_memset";
    default: return "cuda_sync";
    }
}

using StreamIndex = std::unordered_map<int64_t, const StreamInfo*>;

StreamIndex indexStreams(const Trace& trace)
{
    StreamIndex streams;
    for (const auto& s : trace.streams)
        streams.emplace(s.id, &s);
    return streams;
}

const StreamInfo* streamOf(const StreamIndex& streams, int64_t id)
{
    const auto it = streams.find(id);
    return it != streams.end() ? it->second : nullptr;
}

// The document's members ahead of its events: the time base, and for a
// single rank what the PyTorch profiler writes per rank (so an import keeps
// the rank), and the simulator's mark on a simulated job.
void writeHeader(TraceEventWriter& w, const Trace& trace, const std::map<int, RankLanes>& lanes, TimeNs baseTime)
{
    w.beginDocument();
    w.raw("\"displayTimeUnit\":\"ns\",\"baseTimeNanoseconds\":");
    w.number(baseTime);
    w.raw(",\n");
    if (lanes.size() == 1) {
        const int rank = lanes.begin()->first;
        json dist = {{"rank", rank}};
        for (const auto& ri : trace.ranks) {
            if (ri.rank != rank)
                continue;
            if (ri.worldSize)
                dist["world_size"] = *ri.worldSize;
            if (!ri.host.empty())
                w.member("host_name", ri.host);
        }
        w.member("distributedInfo", RawJson{jsonText(dist)});
        json devs = json::array();
        for (const auto& g : trace.gpus) {
            if (g.rank != rank)
                continue;
            json d = {{"id", g.device}, {"name", g.name}};
            if (g.memoryBytes)
                d["totalGlobalMem"] = *g.memoryBytes;
            if (g.smCount)
                d["numSms"] = *g.smCount;
            int major = 0, minor = 0;
            if (std::sscanf(g.computeCapability.c_str(), "%d.%d", &major, &minor) == 2) {
                d["computeMajor"] = major;
                d["computeMinor"] = minor;
            }
            devs.push_back(std::move(d));
        }
        if (!devs.empty())
            w.member("deviceProperties", RawJson{jsonText(devs)});
    }
    if (trace.simulated()) {
        json p = {{"simulated", true}};
        if (auto it = trace.meta.find("simulated_by"); it != trace.meta.end())
            p["simulated_by"] = it->second;
        w.member("pipescope", RawJson{jsonText(p)});
    }
    w.beginEvents();
}

// Metadata events naming each rank's process and its lanes, and their order.
void writeLaneNames(TraceEventWriter& w, const std::map<int, RankLanes>& lanes, const std::map<int, int>& stageOf)
{
    for (const auto& [rank, rl] : lanes) {
        std::string pname = "rank " + std::to_string(rank);
        if (auto it = stageOf.find(rank); it != stageOf.end())
            pname += " (stage " + std::to_string(it->second) + ")";
        w.metadata("process_name", rank, 0, "name", pname);
        w.metadata("process_sort_index", rank, 0, "sort_index", int64_t{rank});
        std::vector<const Lane*> all;
        for (const auto& [id, lane] : rl.gpu)
            all.push_back(&lane);
        for (const auto& [key, lane] : rl.cpu)
            all.push_back(&lane);
        std::sort(all.begin(), all.end(), [](const Lane* a, const Lane* b) { return a->tid < b->tid; });
        for (const Lane* lane : all) {
            w.metadata("thread_name", rank, lane->tid, "name", lane->name);
            w.metadata("thread_sort_index", rank, lane->tid, "sort_index", int64_t{lane->tid});
        }
    }
}

using FusedOps = std::unordered_map<int64_t, std::vector<const NcclOp*>>;

// Kernels that ran several NCCL operations (a send fused with a receive):
// the trace links the first; the args list them all.
FusedOps fusedOps(const Trace& trace)
{
    FusedOps fused;
    std::unordered_map<int64_t, int> perActivity;
    for (const auto& op : trace.ncclOps)
        if (op.activityId)
            ++perActivity[*op.activityId];
    for (const auto& op : trace.ncclOps)
        if (op.activityId && perActivity[*op.activityId] > 1)
            fused[*op.activityId].push_back(&op);
    return fused;
}

// Names repeat a lot (the same kernels every step): each is escaped once.
class NameCache {
public:
    explicit NameCache(const Trace& trace) : trace_(trace), names_(trace.strings.size()) {}
    RawJson operator()(StringId id)
    {
        static const std::string none = "\"\"";
        if (id < 0 || static_cast<size_t>(id) >= names_.size())
            return RawJson{none};
        std::string& s = names_[static_cast<size_t>(id)];
        if (s.empty())
            s = TraceEventWriter::quoted(trace_.strings[static_cast<size_t>(id)]);
        return RawJson{s};
    }

private:
    const Trace& trace_;
    std::vector<std::string> names_;
};

// Cancel and progress by records looked at, not written: a narrow range still answers promptly.
struct Progress {
    const WorkControl* work = nullptr;
    double records = 1.0;
    size_t seen = 0;
    void tick()
    {
        if (work && (++seen & 0x3fff) == 0)
            work->checkpoint("writing the Chrome trace", static_cast<double>(seen) / records);
    }
};

// What the event writers read besides the record itself.
struct EventContext {
    const Trace& trace;
    const ExportFilter& filter;
    const std::map<int, RankLanes>& lanes;
    const StreamIndex& streams;
    const FusedOps& fused;
    NameCache& names;
    TimeNs baseTime;
};

// A GPU activity as a complete event on its stream's lane, with its device,
// stream, correlation, bytes, copy kind and NCCL facts as args.
void writeActivity(TraceEventWriter& w, const EventContext& c, const Activity& a)
{
    const RankLanes& rl = c.lanes.at(a.rank);
    const StreamInfo* si = streamOf(c.streams, a.streamId);
    w.beginComplete(gpuCategory(a.kind), c.names(a.name), a.rank, rl.gpu.at(a.streamId).tid, a.start - c.baseTime,
                    a.end - a.start);
    w.beginArgs();
    w.arg("device", si ? si->device : 0);
    w.arg("stream", si ? si->stream : a.streamId);
    if (a.correlation)
        w.arg("correlation", *a.correlation);
    const NcclOp* op = a.ncclIndex >= 0 && static_cast<size_t>(a.ncclIndex) < c.trace.ncclOps.size()
                           ? &c.trace.ncclOps[static_cast<size_t>(a.ncclIndex)]
                           : nullptr;
    std::optional<int64_t> bytes = a.bytes ? std::optional<int64_t>(a.bytes) : op ? op->bytes : std::nullopt;
    if (bytes)
        w.arg("bytes", *bytes);
    if (a.kind == ActivityKind::Memcpy && a.copyKind != CopyKind::Unknown)
        w.arg("kind", toString(a.copyKind));
    if (op) {
        const auto it = c.fused.find(a.id);
        writeNcclArgs(w, *op, it != c.fused.end() ? &it->second : nullptr);
    }
    w.endArgs();
    w.endEvent();
}

// A CPU range as a complete event on its thread's lane of its group; its
// domain and correlation, when it has them, as args.
void writeCpuRange(TraceEventWriter& w, const EventContext& c, const CpuRange& r)
{
    w.beginComplete(cpuCategory(r.kind), c.names(r.name), r.rank, c.lanes.at(r.rank).cpu.at({groupOf(r.kind), r.tid}).tid,
                    r.start - c.baseTime, r.end - r.start);
    if (r.domain || r.correlation) {
        w.beginArgs();
        if (r.domain)
            w.arg("domain", c.names(*r.domain));
        if (r.correlation)
            w.arg("correlation", *r.correlation);
        w.endArgs();
    }
    w.endEvent();
}

// The events: GPU activities, then CPU ranges, each in the trace's order.
void writeEvents(TraceEventWriter& w, const EventContext& c, const WorkControl* work, ChromeTraceStats& stats)
{
    Progress progress{work, static_cast<double>(c.trace.activities.size() + c.trace.cpuRanges.size()) + 1.0};
    for (const auto& a : c.trace.activities) {
        progress.tick();
        if (!c.filter.keep(a))
            continue;
        writeActivity(w, c, a);
        ++stats.gpuEvents;
    }
    for (const auto& r : c.trace.cpuRanges) {
        progress.tick();
        if (!c.filter.keep(r))
            continue;
        writeCpuRange(w, c, r);
        ++stats.cpuEvents;
    }
}

} // namespace

namespace detail {

CpuGroup groupOf(CpuRangeKind k)
{
    switch (k) {
    case CpuRangeKind::Annotation:
    case CpuRangeKind::Nvtx:
        return CpuGroup::Annotations;
    case CpuRangeKind::GpuAnnotation:
        return CpuGroup::GpuAnnotations;
    case CpuRangeKind::CpuOp:
        return CpuGroup::CpuOps;
    case CpuRangeKind::Runtime:
    case CpuRangeKind::Driver:
        return CpuGroup::Runtime;
    default:
        return CpuGroup::Other;
    }
}

ExportFilter::ExportFilter(const ChromeTraceOptions& options)
    : from_(options.from.value_or(std::numeric_limits<TimeNs>::min())),
      to_(options.to.value_or(std::numeric_limits<TimeNs>::max())), allRanks_(!options.ranks)
{
    if (options.ranks)
        wanted_.insert(options.ranks->begin(), options.ranks->end());
}

std::map<int, RankLanes> planLanes(const Trace& trace, const ExportFilter& filter,
                                   const std::map<int64_t, std::string>& roleOf)
{
    // The lanes that receive events, so that the names come first.
    std::map<int, RankLanes> lanes;
    for (const auto& a : trace.activities)
        if (filter.keep(a))
            lanes[a.rank].gpu.try_emplace(a.streamId);
    for (const auto& r : trace.cpuRanges)
        if (filter.keep(r))
            lanes[r.rank].cpu.try_emplace({groupOf(r.kind), r.tid});

    const StreamIndex streams = indexStreams(trace);
    for (auto& [rank, rl] : lanes) {
        // GPU streams first in (device, stream) order, then CPU threads.
        std::vector<std::tuple<int, int64_t, int64_t>> order; // device, stream, store id
        std::set<int> devices;
        for (auto& [id, lane] : rl.gpu) {
            const StreamInfo* si = streamOf(streams, id);
            order.emplace_back(si ? si->device : 0, si ? si->stream : id, id);
            devices.insert(si ? si->device : 0);
        }
        std::sort(order.begin(), order.end());
        int tid = 0;
        for (const auto& [device, stream, id] : order) {
            Lane& lane = rl.gpu[id];
            lane.tid = ++tid;
            lane.name = devices.size() > 1 ? "GPU " + std::to_string(device) + " stream " : "stream ";
            lane.name += std::to_string(stream);
            if (auto it = roleOf.find(id); it != roleOf.end())
                lane.name += " (" + it->second + ")";
        }
        for (auto& [key, lane] : rl.cpu) {
            lane.tid = ++tid;
            lane.name = "thread " + std::to_string(key.second) + " (" + groupName(key.first) + ")";
        }
    }
    return lanes;
}

void writeNcclArgs(TraceEventWriter& w, const NcclOp& op, const std::vector<const NcclOp*>* fused)
{
    w.arg("Collective name", toString(op.kind));
    if (op.peer)
        w.arg(op.kind == Collective::Recv ? "Src Rank" : "Dst Rank", *op.peer);
    if (op.inNelems)
        w.arg("In msg nelems", *op.inNelems);
    if (op.outNelems)
        w.arg("Out msg nelems", *op.outNelems);
    if (!op.dtype.empty())
        w.arg("dtype", op.dtype);
    if (op.groupSize)
        w.arg("Group size", *op.groupSize);
    if (!op.groupName.empty())
        w.arg("Process Group Name", op.groupName);
    if (!op.groupDesc.empty())
        w.arg("Process Group Description", op.groupDesc);
    if (!op.groupRanks.empty())
        w.arg("Process Group Ranks", RawJson{jsonText(json(op.groupRanks))});
    if (op.seq)
        w.arg("Seq", *op.seq);
    if (fused) {
        w.beginArrayArg("NCCL ops");
        for (const NcclOp* x : *fused) {
            w.beginObject();
            w.arg("kind", toString(x->kind));
            if (x->peer)
                w.arg("peer", *x->peer);
            if (x->bytes)
                w.arg("bytes", *x->bytes);
            w.endObject();
        }
        w.endArrayArg();
    }
}

} // namespace detail

std::string microsText(TimeNs ns)
{
    return TraceEventWriter::micros(ns);
}

namespace {

// Each step and the step that needs its output: the earliest later F, B or I
// of the same iteration, replica and microbatch (W feeds nobody), the rule
// timeline/TimelineLinks.h draws in the app.
std::vector<std::pair<size_t, size_t>> stepDependencies(const AnalysisResult& analysis)
{
    std::map<int, int> replicaOf;
    for (const StageAssignment& a : analysis.pipeline.stageMap)
        replicaOf[a.rank] = a.replica;
    std::map<std::tuple<int, int, int>, std::vector<size_t>> siblings; // (iteration, replica, microbatch)
    for (size_t i = 0; i < analysis.steps.size(); ++i) {
        const Step& s = analysis.steps[i];
        const auto r = replicaOf.find(s.rank);
        siblings[{s.iteration, r == replicaOf.end() ? 0 : r->second, s.microbatch}].push_back(i);
    }
    std::vector<std::pair<size_t, size_t>> out;
    for (auto& [key, group] : siblings) {
        std::stable_sort(group.begin(), group.end(),
                         [&](size_t a, size_t b) { return analysis.steps[a].start < analysis.steps[b].start; });
        for (size_t k = 0; k < group.size(); ++k) {
            const Step& x = analysis.steps[group[k]];
            if (x.kind == StepKind::W)
                continue;
            for (size_t j = k + 1; j < group.size(); ++j) {
                const Step& y = analysis.steps[group[j]];
                if (y.kind != StepKind::W && y.start > x.start) {
                    out.push_back({group[k], group[j]});
                    break;
                }
            }
        }
    }
    return out;
}

} // namespace

void addAnalysis(ChromeTraceOptions& options, const AnalysisResult& analysis, const Trace* trace)
{
    if (analysis.pipeline.found)
        for (const auto& s : analysis.pipeline.stageMap)
            if (s.stage >= 0)
                options.stageOf[s.rank] = s.stage;
    for (const auto& s : analysis.streams)
        options.roleOf[s.storeId] = std::string(toString(s.role));
    if (!trace)
        return;
    options.steps = analysis.steps;
    options.bubbles = analysis.bubbles;
    options.stepFlows = stepDependencies(analysis);
    if (analysis.pipeline.found)
        options.messages = measurePipeline(*trace, analysis).messages;
}

namespace {

// The analysis's tracks of one rank: tids after its streams and threads.
struct AnalysisLanes {
    int steps = 0, idle = 0, transfers = 0;
};

// Each rank's pipeline steps, idle time by cause and matched messages as
// three more threads (ChromeTrace.h), sorted above its streams; a flow
// joins each send to its receive.
void writeAnalysisTracks(TraceEventWriter& w, const ChromeTraceOptions& o, const ExportFilter& filter,
                         const std::map<int, RankLanes>& lanes, ChromeTraceStats& stats)
{
    if (o.steps.empty() && o.bubbles.empty() && o.messages.empty())
        return;
    auto inRange = [&](TimeNs s, TimeNs e) { return e >= o.from.value_or(std::numeric_limits<TimeNs>::min()) &&
                                                    s < o.to.value_or(std::numeric_limits<TimeNs>::max()); };
    std::map<int, AnalysisLanes> tracks;
    for (const auto& [rank, rl] : lanes) {
        int last = 0;
        for (const auto& [id, lane] : rl.gpu)
            last = std::max(last, lane.tid);
        for (const auto& [key, lane] : rl.cpu)
            last = std::max(last, lane.tid);
        const AnalysisLanes a{last + 1, last + 2, last + 3};
        tracks[rank] = a;
        const std::pair<int, const char*> named[] = {{a.steps, "pipeline steps"}, {a.idle, "idle by cause"}, {a.transfers, "transfers"}};
        for (const auto& [tid, name] : named) {
            w.metadata("thread_name", rank, tid, "name", name);
            w.metadata("thread_sort_index", rank, tid, "sort_index", int64_t{tid - last - 4}); // above the streams
        }
        stats.lanes += 3;
    }
    const TimeNs base = stats.baseTime;
    for (const Step& s : o.steps) {
        const auto t = tracks.find(s.rank);
        if (t == tracks.end() || !filter.keepRank(s.rank) || !inRange(s.start, s.end))
            continue;
        const std::string name = std::string(1, toChar(s.kind)) + " " + std::to_string(s.microbatch);
        w.beginComplete("pipescope.step", name, s.rank, t->second.steps, s.start - base, s.end - s.start);
        w.beginArgs();
        w.arg("microbatch", int64_t{s.microbatch});
        w.arg("chunk", int64_t{s.chunk});
        w.arg("stage", int64_t{s.stage});
        w.arg("iteration", int64_t{s.iteration});
        w.arg("compute_ns", s.computeNs);
        w.arg("labelled", s.annotated ? std::string_view("annotation") : std::string_view("inferred"));
        w.endArgs();
        w.endEvent();
        ++stats.analysisEvents;
    }
    for (const Bubble& b : o.bubbles) {
        const auto t = tracks.find(b.rank);
        if (t == tracks.end() || !filter.keepRank(b.rank) || !inRange(b.start, b.end))
            continue;
        w.beginComplete("pipescope.bubble", toString(b.cause), b.rank, t->second.idle, b.start - base, b.end - b.start);
        w.beginArgs();
        w.arg("cause", toString(b.cause));
        w.arg("iteration", int64_t{b.iteration});
        w.endArgs();
        w.endEvent();
        ++stats.analysisEvents;
    }
    int64_t flow = 0;
    for (const auto& [from, to] : o.stepFlows) {
        if (from >= o.steps.size() || to >= o.steps.size())
            continue;
        const Step& x = o.steps[from];
        const Step& y = o.steps[to];
        const auto tx = tracks.find(x.rank), ty = tracks.find(y.rank);
        if (tx == tracks.end() || ty == tracks.end() || !inRange(x.start, x.end) || !inRange(y.start, y.end))
            continue;
        ++flow;
        w.flowStart("pipescope.step", "needs", flow, x.rank, tx->second.steps, x.start - base);
        w.flowEnd("pipescope.step", "needs", flow, y.rank, ty->second.steps, y.start - base);
    }
    for (const MeasuredMessage& m : o.messages) {
        const auto from = tracks.find(m.srcRank), to = tracks.find(m.dstRank);
        // Both ends in the range, or the arrow would point outside the file.
        if (from == tracks.end() || to == tracks.end() || !inRange(m.sendStart, m.sendEnd) ||
            !inRange(m.recvStart, m.recvEnd))
            continue;
        const std::string send = "send to rank " + std::to_string(m.dstRank);
        const std::string recv = "receive from rank " + std::to_string(m.srcRank);
        w.beginComplete("pipescope.transfer", send, m.srcRank, from->second.transfers, m.sendStart - base,
                        std::max<TimeNs>(1, m.sendEnd - m.sendStart));
        w.beginArgs();
        w.arg("bytes", m.bytes);
        w.endArgs();
        w.endEvent();
        w.beginComplete("pipescope.transfer", recv, m.dstRank, to->second.transfers, m.recvStart - base,
                        std::max<TimeNs>(1, m.recvEnd - m.recvStart));
        w.beginArgs();
        w.arg("bytes", m.bytes);
        w.endArgs();
        w.endEvent();
        ++flow;
        w.flowStart("pipescope.transfer", "message", flow, m.srcRank, from->second.transfers, m.sendStart - base);
        w.flowEnd("pipescope.transfer", "message", flow, m.dstRank, to->second.transfers, m.recvStart - base);
        stats.analysisEvents += 2;
    }
}

} // namespace

TimeNs chromeTraceOrigin(const Trace& trace)
{
    TimeNs origin = std::numeric_limits<TimeNs>::max();
    for (const auto& a : trace.activities)
        origin = std::min(origin, a.start);
    for (const auto& r : trace.cpuRanges)
        origin = std::min(origin, r.start);
    return origin == std::numeric_limits<TimeNs>::max() ? 0 : origin;
}

ChromeTraceStats writeChromeTrace(const Trace& trace, std::ostream& out, const ChromeTraceOptions& options)
{
    const ExportFilter filter(options);
    const std::map<int, RankLanes> lanes = planLanes(trace, filter, options.roleOf);

    ChromeTraceStats stats;
    stats.baseTime = options.origin ? *options.origin : chromeTraceOrigin(trace);
    stats.ranks = static_cast<int64_t>(lanes.size());
    for (const auto& [rank, rl] : lanes)
        stats.lanes += static_cast<int64_t>(rl.gpu.size() + rl.cpu.size());

    TraceEventWriter w(out, TraceEventStyle::compact());
    writeHeader(w, trace, lanes, stats.baseTime);
    writeLaneNames(w, lanes, options.stageOf);

    const StreamIndex streams = indexStreams(trace);
    const FusedOps fused = fusedOps(trace);
    NameCache names(trace);
    const EventContext context{trace, filter, lanes, streams, fused, names, stats.baseTime};
    writeEvents(w, context, options.work, stats);
    writeAnalysisTracks(w, options, filter, lanes, stats);

    w.endDocument();
    return stats;
}

} // namespace pipescope::report
