#pragma once
// State shared by the analysis passes: per-rank index lists over the trace's
// activities, their classification and the compute-busy intervals. Internal
// to core/analysis.
#include "analysis/Analysis.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace pipescope::detail {

struct Interval {
    TimeNs start = 0;
    TimeNs end = 0;
    TimeNs length() const { return end - start; }
};

// Appends [s, e) to a union kept sorted and disjoint; inputs must come in
// start order. Touching intervals merge.
inline void unionAppend(std::vector<Interval>& u, TimeNs s, TimeNs e)
{
    if (e < s)
        e = s;
    if (!u.empty() && s <= u.back().end) {
        u.back().end = std::max(u.back().end, e);
        return;
    }
    u.push_back({s, e});
}

inline TimeNs totalLength(const std::vector<Interval>& u)
{
    TimeNs t = 0;
    for (const auto& i : u)
        t += i.length();
    return t;
}

// Length of the intersection of two sorted disjoint unions.
inline TimeNs intersectionLength(const std::vector<Interval>& a, const std::vector<Interval>& b)
{
    TimeNs total = 0;
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        TimeNs s = std::max(a[i].start, b[j].start);
        TimeNs e = std::min(a[i].end, b[j].end);
        if (e > s)
            total += e - s;
        if (a[i].end < b[j].end)
            ++i;
        else
            ++j;
    }
    return total;
}

// Busy time of a union inside [from, to).
inline TimeNs busyWithin(const std::vector<Interval>& u, TimeNs from, TimeNs to)
{
    auto it = std::lower_bound(u.begin(), u.end(), from, [](const Interval& i, TimeNs t) { return i.end <= t; });
    TimeNs total = 0;
    for (; it != u.end() && it->start < to; ++it)
        total += std::min(it->end, to) - std::max(it->start, from);
    return total;
}

// What a point-to-point operation tells about its step: the peer rank and,
// when known, whether this rank sends, receives or both.
enum class P2pDir : uint8_t { Unknown, Send, Recv, Both };

// What a step annotation's name says; -1 where it says nothing.
struct StepLabel {
    StepKind kind = StepKind::F;
    int microbatch = -1;
    int stage = -1;
    int chunk = -1;
    bool explicitKind = false; // I/W spelled out (backward_input, 1I3), not a plain "backward"
};

// Reads pipescope's, torch.distributed.pipelining's and Megatron's step names
// ("pipescope/forward mb=3 stage=1 chunk=0", "2F0", "Backward 3",
// "forward_step"); nullopt for any other name.
std::optional<StepLabel> parseStepLabel(std::string_view name);

struct RankData {
    int rank = 0;
    std::vector<uint32_t> acts;    // every activity of the rank, start order
    std::vector<uint32_t> compute; // compute kernels, start order
    std::vector<uint32_t> comm;    // p2p and collective kernels, start order
    std::vector<Interval> busy;    // union of compute kernels
    int stage = -1;
    int replica = 0;
    TimeNs firstCompute = 0;
};

struct Context {
    const Trace& trace;
    const AnalyzeOptions& options;
    std::vector<uint8_t> cls;           // WorkClass per activity
    std::vector<RankData> ranks;        // ascending rank
    std::vector<int> slot;              // rank -> index into ranks, -1 when absent
    std::vector<Warning>& warnings;
    bool ring = false;                  // the last stage sends to the first (interleaved schedules)
    bool vShape = false;                // chunks placed in a V (stage 0 also holds the last virtual stage)
    int pp = 1;                         // stages, once mapped
    bool scheduleMatched = false;       // steps and schedule read against a built-in schedule's transfers

    Context(const Trace& t, const AnalyzeOptions& o, std::vector<Warning>& w) : trace(t), options(o), warnings(w) {}

    WorkClass classOf(uint32_t a) const { return static_cast<WorkClass>(cls[a]); }
    const Activity& act(uint32_t a) const { return trace.activities[a]; }
    const NcclOp* ncclOf(uint32_t a) const
    {
        auto i = trace.activities[a].ncclIndex;
        return i >= 0 && static_cast<size_t>(i) < trace.ncclOps.size() ? &trace.ncclOps[static_cast<size_t>(i)] : nullptr;
    }
    // Every NCCL op the kernel runs: one, or a coalesced batch's sends and receives.
    std::span<const NcclOp> opsOf(uint32_t a) const
    {
        const Activity& x = trace.activities[a];
        if (x.ncclIndex < 0 || static_cast<size_t>(x.ncclIndex) >= trace.ncclOps.size())
            return {};
        const size_t first = static_cast<size_t>(x.ncclIndex);
        const size_t n = std::min<size_t>(std::max<size_t>(1, x.ncclCount), trace.ncclOps.size() - first);
        return {trace.ncclOps.data() + first, n};
    }
    RankData* rankData(int rank)
    {
        return rank >= 0 && static_cast<size_t>(rank) < slot.size() && slot[static_cast<size_t>(rank)] >= 0
                   ? &ranks[static_cast<size_t>(slot[static_cast<size_t>(rank)])]
                   : nullptr;
    }
    const RankData* rankData(int rank) const { return const_cast<Context*>(this)->rankData(rank); }
    P2pDir direction(uint32_t a) const;
    std::optional<int> peer(uint32_t a) const;
    void warn(std::string kind, std::string message) { warnings.push_back({std::move(kind), std::move(message)}); }
};

// Passes, in the order analyze() runs them.
void classifyActivities(Context& ctx, AnalysisResult& out);
void detectIterations(Context& ctx, AnalysisResult& out);
void mapStages(Context& ctx, AnalysisResult& out);
void buildSteps(Context& ctx, AnalysisResult& out, std::vector<Step>& allSteps);
// Unannotated steps: when a built-in schedule puts its point-to-point
// transfers exactly where the trace has them, relabels the steps from it
// (kind, chunk, microbatch), sets the schedule and returns true.
bool matchScheduleTemplate(Context& ctx, AnalysisResult& out, std::vector<Step>& allSteps);
void inferSchedule(Context& ctx, AnalysisResult& out, const std::vector<Step>& selectedSteps);
void findBubbles(Context& ctx, AnalysisResult& out, const std::vector<Step>& allSteps, std::vector<Bubble>& allBubbles);
void measureImbalance(Context& ctx, AnalysisResult& out, const std::vector<Step>& selectedSteps);
void traceCriticalPath(Context& ctx, AnalysisResult& out, const std::vector<Step>& selectedSteps);
void computeHtaViews(Context& ctx, AnalysisResult& out);
void attributeLayers(Context& ctx, AnalysisResult& out, const std::vector<Step>& selectedSteps);
void measureAllToAll(Context& ctx, AnalysisResult& out); // after traceCriticalPath
// A communication activity that is an all-to-all exchange: its NCCL record
// says so, or (without one) its name or a communication rule does.
bool isAllToAll(const Context& ctx, uint32_t activity);
void measureMicrobatchSpread(AnalysisResult& out, const std::vector<Step>& selectedSteps);

// Percentile of a sorted vector (linear interpolation).
double percentile(const std::vector<double>& sorted, double q);

} // namespace pipescope::detail
