#include "report/ChromeTrace.h"

#include "analysis/Analysis.h"
#include "util/Error.h"
#include "util/JsonText.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>

namespace pipescope::report {

namespace {

using nlohmann::json;

// CPU lanes group a thread's ranges by what they are.
enum class CpuGroup : uint8_t { Annotations = 0, GpuAnnotations = 1, CpuOps = 2, Runtime = 3, Other = 4 };

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

// Buffered appends to the output stream.
class Writer {
public:
    explicit Writer(std::ostream& os) : os_(os) { buf_.reserve(kChunk + 4096); }

    Writer& operator<<(std::string_view s)
    {
        buf_.append(s);
        if (buf_.size() >= kChunk)
            flush();
        return *this;
    }
    Writer& operator<<(char c)
    {
        buf_.push_back(c);
        return *this;
    }
    Writer& num(int64_t v)
    {
        char tmp[24];
        auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
        buf_.append(tmp, r.ptr);
        return *this;
    }
    void flush()
    {
        os_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
        buf_.clear();
        if (!os_)
            throw Error("cannot write the trace: the output stream failed (disk full?)");
    }

private:
    static constexpr size_t kChunk = 1 << 20;
    std::ostream& os_;
    std::string buf_;
};

std::string escaped(std::string_view s) { return jsonText(json(std::string(s))); }

struct Lane {
    int tid = 0;
    std::string name;
};

struct RankLanes {
    std::map<int64_t, Lane> gpu;                            // store stream id -> lane
    std::map<std::pair<CpuGroup, int64_t>, Lane> cpu;       // (group, thread id) -> lane
};

} // namespace

std::string microsText(TimeNs ns)
{
    // Unsigned arithmetic: the magnitude of INT64_MIN does not fit int64.
    uint64_t mag = ns < 0 ? uint64_t(0) - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    char tmp[32];
    char* p = tmp;
    if (ns < 0)
        *p++ = '-';
    p = std::to_chars(p, tmp + sizeof tmp, mag / 1000).ptr;
    *p++ = '.';
    uint64_t frac = mag % 1000;
    *p++ = static_cast<char>('0' + frac / 100);
    *p++ = static_cast<char>('0' + frac / 10 % 10);
    *p++ = static_cast<char>('0' + frac % 10);
    return std::string(tmp, p);
}

void addAnalysis(ChromeTraceOptions& options, const AnalysisResult& analysis)
{
    if (analysis.pipeline.found)
        for (const auto& s : analysis.pipeline.stageMap)
            if (s.stage >= 0)
                options.stageOf[s.rank] = s.stage;
    for (const auto& s : analysis.streams)
        options.roleOf[s.storeId] = std::string(toString(s.role));
}

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
    const TimeNs from = options.from.value_or(std::numeric_limits<TimeNs>::min());
    const TimeNs to = options.to.value_or(std::numeric_limits<TimeNs>::max());
    std::set<int> wanted;
    if (options.ranks)
        wanted.insert(options.ranks->begin(), options.ranks->end());
    auto keepRank = [&](int rank) { return !options.ranks || wanted.count(rank) > 0; };
    auto inRange = [&](TimeNs start, TimeNs end) { return end >= from && start < to; };
    auto keepActivity = [&](const Activity& a) { return keepRank(a.rank) && inRange(a.start, a.end); };
    auto keepRange = [&](const CpuRange& r) { return keepRank(r.rank) && inRange(r.start, r.end); };

    std::unordered_map<int64_t, const StreamInfo*> streams;
    for (const auto& s : trace.streams)
        streams.emplace(s.id, &s);

    // Pass 1: the lanes that receive events, so the names come first.
    std::map<int, RankLanes> lanes;
    for (const auto& a : trace.activities)
        if (keepActivity(a))
            lanes[a.rank].gpu.try_emplace(a.streamId);
    for (const auto& r : trace.cpuRanges)
        if (keepRange(r))
            lanes[r.rank].cpu.try_emplace({groupOf(r.kind), r.tid});

    ChromeTraceStats stats;
    stats.baseTime = chromeTraceOrigin(trace);
    stats.ranks = static_cast<int64_t>(lanes.size());

    for (auto& [rank, rl] : lanes) {
        // GPU streams first in (device, stream) order, then CPU threads.
        std::vector<std::tuple<int, int64_t, int64_t>> order; // device, stream, store id
        std::set<int> devices;
        for (auto& [id, lane] : rl.gpu) {
            const StreamInfo* si = streams.count(id) ? streams[id] : nullptr;
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
            if (auto it = options.roleOf.find(id); it != options.roleOf.end())
                lane.name += " (" + it->second + ")";
        }
        for (auto& [key, lane] : rl.cpu) {
            lane.tid = ++tid;
            lane.name = "thread " + std::to_string(key.second) + " (" + groupName(key.first) + ")";
        }
        stats.lanes += tid;
    }

    Writer w(out);
    w << "{\"displayTimeUnit\":\"ns\",\"baseTimeNanoseconds\":";
    w.num(stats.baseTime);
    w << ",\n";
    if (lanes.size() == 1) {
        // One rank: what the PyTorch profiler writes per rank, so an import keeps the rank.
        const int rank = lanes.begin()->first;
        json dist = {{"rank", rank}};
        for (const auto& ri : trace.ranks) {
            if (ri.rank != rank)
                continue;
            if (ri.worldSize)
                dist["world_size"] = *ri.worldSize;
            if (!ri.host.empty())
                w << "\"host_name\":" << escaped(ri.host) << ",\n";
        }
        w << "\"distributedInfo\":" << jsonText(dist) << ",\n";
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
            w << "\"deviceProperties\":" << jsonText(devs) << ",\n";
    }
    if (trace.simulated()) {
        json p = {{"simulated", true}};
        if (auto it = trace.meta.find("simulated_by"); it != trace.meta.end())
            p["simulated_by"] = it->second;
        w << "\"pipescope\":" << jsonText(p) << ",\n";
    }
    w << "\"traceEvents\":[";

    bool first = true;
    auto begin = [&] {
        w << (first ? "\n" : ",\n");
        first = false;
    };
    auto meta = [&](int pid, int tid, std::string_view what, std::string_view argKey, std::string_view argValue) {
        begin();
        w << "{\"ph\":\"M\",\"name\":\"" << what << "\",\"pid\":";
        w.num(pid) << ",\"tid\":";
        w.num(tid) << ",\"args\":{\"" << argKey << "\":" << argValue << "}}";
    };
    auto number = [](int64_t v) { return std::to_string(v); };

    for (const auto& [rank, rl] : lanes) {
        std::string pname = "rank " + std::to_string(rank);
        if (auto it = options.stageOf.find(rank); it != options.stageOf.end())
            pname += " (stage " + std::to_string(it->second) + ")";
        meta(rank, 0, "process_name", "name", escaped(pname));
        meta(rank, 0, "process_sort_index", "sort_index", number(rank));
        std::vector<const Lane*> all;
        for (const auto& [id, lane] : rl.gpu)
            all.push_back(&lane);
        for (const auto& [key, lane] : rl.cpu)
            all.push_back(&lane);
        std::sort(all.begin(), all.end(), [](const Lane* a, const Lane* b) { return a->tid < b->tid; });
        for (const Lane* lane : all) {
            meta(rank, lane->tid, "thread_name", "name", escaped(lane->name));
            meta(rank, lane->tid, "thread_sort_index", "sort_index", number(lane->tid));
        }
    }

    // Kernels that ran several NCCL operations (a send fused with a receive):
    // the trace links the first; the args list them all.
    std::unordered_map<int64_t, std::vector<const NcclOp*>> fused;
    {
        std::unordered_map<int64_t, int> perActivity;
        for (const auto& op : trace.ncclOps)
            if (op.activityId)
                ++perActivity[*op.activityId];
        for (const auto& op : trace.ncclOps)
            if (op.activityId && perActivity[*op.activityId] > 1)
                fused[*op.activityId].push_back(&op);
    }

    // Names repeat a lot (the same kernels every step): escape each once.
    std::vector<std::string> names(trace.strings.size());
    auto name = [&](StringId id) -> const std::string& {
        static const std::string none = "\"\"";
        if (id < 0 || static_cast<size_t>(id) >= names.size())
            return none;
        std::string& s = names[static_cast<size_t>(id)];
        if (s.empty())
            s = escaped(trace.strings[static_cast<size_t>(id)]);
        return s;
    };
    auto times = [&](TimeNs start, TimeNs end) {
        w << ",\"ts\":" << microsText(start - stats.baseTime) << ",\"dur\":" << microsText(end - start);
    };

    // Cancel and progress by records looked at, not written: a narrow range still answers promptly.
    const double records = static_cast<double>(trace.activities.size() + trace.cpuRanges.size()) + 1.0;
    size_t seen = 0;
    auto progress = [&] {
        if (options.work && (++seen & 0x3fff) == 0)
            options.work->checkpoint("writing the Chrome trace", static_cast<double>(seen) / records);
    };
    for (const auto& a : trace.activities) {
        progress();
        if (!keepActivity(a))
            continue;
        const RankLanes& rl = lanes[a.rank];
        const StreamInfo* si = streams.count(a.streamId) ? streams[a.streamId] : nullptr;
        begin();
        w << "{\"ph\":\"X\",\"cat\":\"" << gpuCategory(a.kind) << "\",\"name\":" << name(a.name) << ",\"pid\":";
        w.num(a.rank) << ",\"tid\":";
        w.num(rl.gpu.at(a.streamId).tid);
        times(a.start, a.end);
        w << ",\"args\":{\"device\":";
        w.num(si ? si->device : 0) << ",\"stream\":";
        w.num(si ? si->stream : a.streamId);
        if (a.correlation) {
            w << ",\"correlation\":";
            w.num(*a.correlation);
        }
        const NcclOp* op = a.ncclIndex >= 0 && static_cast<size_t>(a.ncclIndex) < trace.ncclOps.size()
                               ? &trace.ncclOps[static_cast<size_t>(a.ncclIndex)]
                               : nullptr;
        std::optional<int64_t> bytes = a.bytes ? std::optional<int64_t>(a.bytes) : op ? op->bytes : std::nullopt;
        if (bytes) {
            w << ",\"bytes\":";
            w.num(*bytes);
        }
        if (a.kind == ActivityKind::Memcpy && a.copyKind != CopyKind::Unknown)
            w << ",\"kind\":\"" << toString(a.copyKind) << '"';
        if (op) {
            // NCCL facts under the argument names the PyTorch profiler uses.
            w << ",\"Collective name\":" << escaped(toString(op->kind));
            if (op->peer) {
                w << (op->kind == Collective::Recv ? ",\"Src Rank\":" : ",\"Dst Rank\":");
                w.num(*op->peer);
            }
            if (op->inNelems) {
                w << ",\"In msg nelems\":";
                w.num(*op->inNelems);
            }
            if (op->outNelems) {
                w << ",\"Out msg nelems\":";
                w.num(*op->outNelems);
            }
            if (!op->dtype.empty())
                w << ",\"dtype\":" << escaped(op->dtype);
            if (op->groupSize) {
                w << ",\"Group size\":";
                w.num(*op->groupSize);
            }
            if (!op->groupName.empty())
                w << ",\"Process Group Name\":" << escaped(op->groupName);
            if (!op->groupDesc.empty())
                w << ",\"Process Group Description\":" << escaped(op->groupDesc);
            if (!op->groupRanks.empty())
                w << ",\"Process Group Ranks\":" << jsonText(json(op->groupRanks));
            if (op->seq) {
                w << ",\"Seq\":";
                w.num(*op->seq);
            }
            if (auto it = fused.find(a.id); it != fused.end()) {
                w << ",\"NCCL ops\":[";
                for (size_t k = 0; k < it->second.size(); ++k) {
                    const NcclOp& x = *it->second[k];
                    w << (k ? ",{" : "{") << "\"kind\":" << escaped(toString(x.kind));
                    if (x.peer) {
                        w << ",\"peer\":";
                        w.num(*x.peer);
                    }
                    if (x.bytes) {
                        w << ",\"bytes\":";
                        w.num(*x.bytes);
                    }
                    w << '}';
                }
                w << ']';
            }
        }
        w << "}}";
        ++stats.gpuEvents;
    }

    for (const auto& r : trace.cpuRanges) {
        progress();
        if (!keepRange(r))
            continue;
        begin();
        w << "{\"ph\":\"X\",\"cat\":\"" << cpuCategory(r.kind) << "\",\"name\":" << name(r.name) << ",\"pid\":";
        w.num(r.rank) << ",\"tid\":";
        w.num(lanes[r.rank].cpu.at({groupOf(r.kind), r.tid}).tid);
        times(r.start, r.end);
        bool args = false;
        auto arg = [&](std::string_view key) {
            w << (args ? "," : ",\"args\":{") << '"' << key << "\":";
            args = true;
        };
        if (r.domain) {
            arg("domain");
            w << name(*r.domain);
        }
        if (r.correlation) {
            arg("correlation");
            w.num(*r.correlation);
        }
        if (args)
            w << '}';
        w << '}';
        ++stats.cpuEvents;
    }

    w << "\n]}\n";
    w.flush();
    out.flush();
    if (!out)
        throw Error("cannot write the trace: the output stream failed (disk full?)");
    return stats;
}

} // namespace pipescope::report
