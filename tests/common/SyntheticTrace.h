#pragma once
// Small hand-made traces with known answers, built as pipescope::Trace values
// (no store needed). TraceBuilder adds records one by one; pipelineTrace()
// plays a GPipe or 1F1B schedule with given stage times and writes the
// kernels, point-to-point transfers, collectives and annotations a real job
// would leave. Header-only so any test can use it.
#include "model/Trace.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace pipescope::test {

// For traces built by hand without a TraceBuilder: a string's id (added
// once), and one CPU range.
inline StringId intern(Trace& t, const std::string& s)
{
    for (size_t i = 0; i < t.strings.size(); ++i)
        if (t.strings[i] == s)
            return static_cast<StringId>(i);
    t.strings.push_back(s);
    return static_cast<StringId>(t.strings.size() - 1);
}

inline void addRange(Trace& t, int rank, int64_t tid, CpuRangeKind kind, const std::string& name, TimeNs start, TimeNs end,
              std::optional<int64_t> correlation = std::nullopt)
{
    CpuRange r;
    r.rank = rank;
    r.tid = tid;
    r.kind = kind;
    r.name = intern(t, name);
    r.start = start;
    r.end = end;
    r.correlation = correlation;
    t.cpuRanges.push_back(r);
}

class TraceBuilder {
public:
    TraceBuilder() { trace_.strings.push_back(""); }

    StringId name(std::string_view s)
    {
        auto [it, inserted] = names_.try_emplace(std::string(s), static_cast<StringId>(trace_.strings.size()));
        if (inserted)
            trace_.strings.emplace_back(s);
        return it->second;
    }

    int64_t stream(int rank, int64_t stream)
    {
        auto key = std::make_pair(rank, stream);
        auto it = streams_.find(key);
        if (it != streams_.end())
            return it->second;
        int64_t id = static_cast<int64_t>(trace_.streams.size()) + 1;
        trace_.streams.push_back({id, rank, rank % 8, stream, {}});
        streams_[key] = id;
        rank_(rank);
        return id;
    }

    Activity& kernel(int rank, int64_t streamNo, std::string_view kernelName, TimeNs start, TimeNs end,
                     std::optional<TimeNs> launchStart = std::nullopt, ActivityKind kind = ActivityKind::Kernel)
    {
        Activity a;
        a.id = static_cast<int64_t>(trace_.activities.size()) + 1;
        a.rank = rank;
        a.streamId = stream(rank, streamNo);
        a.kind = kind;
        a.name = name(kernelName);
        a.start = start;
        a.end = end;
        a.launchStart = launchStart;
        if (launchStart)
            a.correlation = a.id;
        trace_.activities.push_back(a);
        return trace_.activities.back();
    }

    // A NCCL kernel with its NCCL record.
    Activity& nccl(int rank, int64_t streamNo, std::string kind, TimeNs start, TimeNs end, std::optional<int> peer,
                   int64_t bytes, std::vector<int> groupRanks = {}, std::string kernelName = {})
    {
        bool p2p = kind == "Send" || kind == "Recv" || kind == "SendRecv";
        if (kernelName.empty())
            kernelName = p2p ? "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
                             : "ncclDevKernel_" + kind + "_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
        Activity& a = kernel(rank, streamNo, kernelName, start, end, start - 2'000);
        NcclOp op;
        op.id = static_cast<int64_t>(trace_.ncclOps.size()) + 1;
        op.rank = rank;
        op.activityId = a.id;
        op.kind = collectiveFromKind(kind);
        op.isP2p = p2p;
        op.bytes = bytes;
        op.peer = peer;
        op.groupRanks = std::move(groupRanks);
        op.start = start;
        op.end = end;
        a.ncclIndex = static_cast<int64_t>(trace_.ncclOps.size());
        trace_.ncclOps.push_back(std::move(op));
        return a;
    }

    void range(int rank, CpuRangeKind kind, std::string_view rangeName, TimeNs start, TimeNs end, int64_t tid = 1)
    {
        CpuRange r;
        r.id = static_cast<int64_t>(trace_.cpuRanges.size()) + 1;
        r.rank = rank;
        r.tid = tid;
        r.kind = kind;
        r.start = start;
        r.end = end;
        r.name = name(rangeName);
        trace_.cpuRanges.push_back(r);
        rank_(rank);
    }

    void worldSize(int n) { worldSize_ = n; }

    // Drops every record of a rank, as if its file were missing.
    void dropRank(int rank) { dropped_.push_back(rank); }

    Trace build()
    {
        Trace t = trace_;
        auto gone = [&](int r) { return std::find(dropped_.begin(), dropped_.end(), r) != dropped_.end(); };
        // Keep activity -> NCCL links valid while sorting and dropping.
        std::vector<std::pair<Activity, std::optional<NcclOp>>> acts;
        for (const auto& a : t.activities)
            if (!gone(a.rank))
                acts.push_back({a, a.ncclIndex >= 0 ? std::optional<NcclOp>(t.ncclOps[static_cast<size_t>(a.ncclIndex)])
                                                    : std::nullopt});
        std::stable_sort(acts.begin(), acts.end(), [](const auto& x, const auto& y) {
            return std::tie(x.first.rank, x.first.start, x.first.end) < std::tie(y.first.rank, y.first.start, y.first.end);
        });
        t.activities.clear();
        t.ncclOps.clear();
        for (auto& [a, op] : acts) {
            if (op) {
                a.ncclIndex = static_cast<int64_t>(t.ncclOps.size());
                t.ncclOps.push_back(*op);
            }
            t.activities.push_back(a);
        }
        t.cpuRanges.erase(std::remove_if(t.cpuRanges.begin(), t.cpuRanges.end(), [&](const CpuRange& r) { return gone(r.rank); }),
                          t.cpuRanges.end());
        std::stable_sort(t.cpuRanges.begin(), t.cpuRanges.end(), [](const CpuRange& x, const CpuRange& y) {
            return std::tie(x.rank, x.tid, x.start) < std::tie(y.rank, y.tid, y.start);
        });
        t.ranks.clear();
        for (int r : ranks_)
            if (!gone(r)) {
                RankInfo ri;
                ri.rank = r;
                if (worldSize_)
                    ri.worldSize = worldSize_;
                t.ranks.push_back(ri);
            }
        return t;
    }

private:
    void rank_(int r)
    {
        if (std::find(ranks_.begin(), ranks_.end(), r) == ranks_.end()) {
            ranks_.push_back(r);
            std::sort(ranks_.begin(), ranks_.end());
        }
    }

    Trace trace_;
    std::unordered_map<std::string, StringId> names_;
    std::map<std::pair<int, int64_t>, int64_t> streams_;
    std::vector<int> ranks_;
    std::vector<int> dropped_;
    std::optional<int> worldSize_;
};

// ----------------------------------------------------------------------------

struct PipelineSpec {
    int stages = 4;            // p
    int microbatches = 8;      // m
    int replicas = 1;          // data-parallel degree; rank = stage * replicas + replica
    std::string schedule = "1f1b"; // "gpipe" or "1f1b"
    TimeNs forwardNs = 1'000'000;
    TimeNs backwardNs = 2'000'000;
    int forwardKernels = 2;    // kernels per forward step (equal length)
    int backwardKernels = 4;
    TimeNs commNs = 0;         // point-to-point transfer time
    int64_t bytes = 1 << 20;
    int iterations = 1;
    TimeNs optimizerNs = 0;    // one optimizer kernel per rank after its last step
    TimeNs allReduceNs = 0;    // data-parallel all-reduce per stage before the optimizer (replicas > 1)
    bool annotate = false;     // pipescope NVTX step ranges
    bool profilerSteps = false; // ProfilerStep#N annotations
    bool directional = true;   // NCCL records say Send / Recv (else SendRecv)
    bool peers = true;         // NCCL records at all (else bare kernels only)
    // Multiplier of step times per (replica, stage): stragglers and slow stages.
    std::map<std::pair<int, int>, double> slowdown;
    // The same for one iteration only: (replica, stage, iteration) -> multiplier (data that moves the slowest replica).
    std::map<std::tuple<int, int, int>, double> slowdownIn;
    // Multiplier of step times per microbatch (uneven microbatches); empty: all 1.
    std::vector<double> microbatchScale;
    // Host stalls: (rank, step index on that rank, iteration) -> the launch of that step
    // reaches the GPU this long after the step could have started.
    std::map<std::tuple<int, int, int>, TimeNs> hostStall;
    TimeNs iterationGapNs = 100'000;
};

struct BuiltPipeline {
    Trace trace;
    std::vector<TimeNs> iterationStart, iterationEnd; // over all ranks
};

inline BuiltPipeline pipelineTrace(const PipelineSpec& spec, TraceBuilder* into = nullptr)
{
    TraceBuilder local;
    TraceBuilder& tb = into ? *into : local;
    const int p = spec.stages, m = spec.microbatches, dp = spec.replicas;
    BuiltPipeline out;
    auto rankOf = [&](int replica, int stage) { return stage * dp + replica; };
    enum { F = 0, B = 1 };
    struct Op {
        int kind, mb;
    };
    std::vector<std::vector<Op>> order(static_cast<size_t>(p));
    for (int s = 0; s < p; ++s) {
        auto& o = order[static_cast<size_t>(s)];
        if (spec.schedule == "gpipe") {
            for (int i = 0; i < m; ++i)
                o.push_back({F, i});
            for (int i = 0; i < m; ++i)
                o.push_back({B, i});
        } else {
            int w = std::min(p - s - 1, m);
            for (int i = 0; i < w; ++i)
                o.push_back({F, i});
            for (int i = 0; i < m - w; ++i) {
                o.push_back({F, w + i});
                o.push_back({B, i});
            }
            for (int i = m - w; i < m; ++i)
                o.push_back({B, i});
        }
    }
    TimeNs t0 = 1'000'000'000;
    for (int iter = 0; iter < spec.iterations; ++iter) {
        TimeNs iterStart = t0;
        TimeNs iterEnd = t0;
        std::vector<TimeNs> endOf(static_cast<size_t>(p * dp), iterStart); // end of each rank's last step
        for (int rep = 0; rep < dp; ++rep) {
            std::vector<int> pipeRanks;
            for (int s = 0; s < p; ++s)
                pipeRanks.push_back(rankOf(rep, s));
            // done[stage][kind][mb] = end time
            std::vector<std::vector<std::vector<TimeNs>>> done(
                static_cast<size_t>(p), std::vector<std::vector<TimeNs>>(2, std::vector<TimeNs>(static_cast<size_t>(m), -1)));
            std::vector<size_t> next(static_cast<size_t>(p), 0);
            std::vector<TimeNs> freeAt(static_cast<size_t>(p), iterStart);
            bool progress = true;
            while (progress) {
                progress = false;
                for (int s = 0; s < p; ++s) {
                    auto& o = order[static_cast<size_t>(s)];
                    size_t& k = next[static_cast<size_t>(s)];
                    if (k >= o.size())
                        continue;
                    Op op = o[k];
                    TimeNs ready = freeAt[static_cast<size_t>(s)];
                    int src = -1;
                    if (op.kind == F && s > 0) {
                        TimeNs d = done[static_cast<size_t>(s - 1)][F][static_cast<size_t>(op.mb)];
                        if (d < 0)
                            continue;
                        src = s - 1;
                    }
                    if (op.kind == B) {
                        if (done[static_cast<size_t>(s)][F][static_cast<size_t>(op.mb)] < 0)
                            continue;
                        if (s < p - 1) {
                            TimeNs d = done[static_cast<size_t>(s + 1)][B][static_cast<size_t>(op.mb)];
                            if (d < 0)
                                continue;
                            src = s + 1;
                        }
                    }
                    // NCCL point-to-point is a rendezvous: the transfer starts once the sender's
                    // output is ready and the receiver has posted its receive (before this step).
                    TimeNs transferStart = 0;
                    if (src >= 0) {
                        TimeNs produced = done[static_cast<size_t>(src)][op.kind][static_cast<size_t>(op.mb)];
                        transferStart = std::max(ready, produced);
                        ready = transferStart + spec.commNs;
                    }
                    int rank = rankOf(rep, s);
                    double scale = 1.0;
                    if (auto it = spec.slowdown.find({rep, s}); it != spec.slowdown.end())
                        scale = it->second;
                    if (auto it = spec.slowdownIn.find({rep, s, iter}); it != spec.slowdownIn.end())
                        scale *= it->second;
                    if (static_cast<size_t>(op.mb) < spec.microbatchScale.size())
                        scale *= spec.microbatchScale[static_cast<size_t>(op.mb)];
                    TimeNs stall = 0;
                    if (auto it = spec.hostStall.find({rank, static_cast<int>(k), iter}); it != spec.hostStall.end())
                        stall = it->second;
                    TimeNs start = ready + stall;
                    if (src >= 0) {
                        TimeNs produced = done[static_cast<size_t>(src)][op.kind][static_cast<size_t>(op.mb)];
                        TimeNs post = freeAt[static_cast<size_t>(s)];
                        TimeNs arrived = transferStart + spec.commNs;
                        int srcRank = rankOf(rep, src);
                        const char* kname = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)";
                        if (spec.peers) {
                            tb.nccl(rank, 20, spec.directional ? "Recv" : "SendRecv", post, arrived, srcRank, spec.bytes, pipeRanks);
                            tb.nccl(srcRank, 21, spec.directional ? "Send" : "SendRecv", produced, arrived, rank, spec.bytes, pipeRanks);
                        } else {
                            tb.kernel(rank, 20, kname, post, arrived, post - 2'000);
                            tb.kernel(srcRank, 21, kname, produced, arrived, produced - 2'000);
                        }
                    }
                    int nk = op.kind == F ? spec.forwardKernels : spec.backwardKernels;
                    TimeNs total = static_cast<TimeNs>(static_cast<double>(op.kind == F ? spec.forwardNs : spec.backwardNs) * scale);
                    TimeNs each = total / nk;
                    TimeNs t = start;
                    for (int q = 0; q < nk; ++q) {
                        TimeNs launch = (q == 0 && stall > 0) ? start : t - 5'000;
                        tb.kernel(rank, 7, "sm90_gemm_" + std::to_string(q % 3), t, t + each, launch);
                        t += each;
                    }
                    if (spec.annotate) {
                        std::string label = std::string(op.kind == F ? "pipescope/forward" : "pipescope/backward")
                                            + " mb=" + std::to_string(op.mb) + " stage=" + std::to_string(s) + " chunk=0";
                        tb.range(rank, CpuRangeKind::Nvtx, label, start - 5'000, t - 5'000 + 1);
                    }
                    done[static_cast<size_t>(s)][static_cast<size_t>(op.kind)][static_cast<size_t>(op.mb)] = t;
                    freeAt[static_cast<size_t>(s)] = t;
                    ++k;
                    progress = true;
                }
            }
            for (int s = 0; s < p; ++s)
                iterEnd = std::max(iterEnd, freeAt[static_cast<size_t>(s)]);
            for (int s = 0; s < p; ++s)
                endOf[static_cast<size_t>(rankOf(rep, s))] = freeAt[static_cast<size_t>(s)];
        }
        // Data-parallel all-reduce per stage, then the optimizer.
        TimeNs finish = iterStart;
        for (int s = 0; s < p; ++s) {
            TimeNs arrive = 0;
            std::vector<int> members;
            for (int rep = 0; rep < dp; ++rep) {
                arrive = std::max(arrive, endOf[static_cast<size_t>(rankOf(rep, s))]);
                members.push_back(rankOf(rep, s));
            }
            for (int rep = 0; rep < dp; ++rep) {
                int rank = rankOf(rep, s);
                TimeNs t = endOf[static_cast<size_t>(rank)];
                if (dp > 1 && spec.allReduceNs > 0) {
                    tb.nccl(rank, 22, "AllReduce", t, arrive + spec.allReduceNs, std::nullopt, spec.bytes * 16, members);
                    t = arrive + spec.allReduceNs;
                }
                if (spec.optimizerNs > 0) {
                    tb.kernel(rank, 7, "multi_tensor_apply_kernel_adam", t, t + spec.optimizerNs, t - 5'000);
                    t += spec.optimizerNs;
                }
                finish = std::max(finish, t);
            }
        }
        iterEnd = std::max(iterEnd, finish);
        if (spec.profilerSteps)
            for (int r = 0; r < p * dp; ++r)
                tb.range(r, CpuRangeKind::Annotation, "ProfilerStep#" + std::to_string(iter + 1), iterStart - 100'000, iterEnd - 10'000);
        out.iterationStart.push_back(iterStart);
        out.iterationEnd.push_back(iterEnd);
        t0 = iterEnd + spec.iterationGapNs;
    }
    if (!into)
        out.trace = tb.build();
    return out;
}

} // namespace pipescope::test
