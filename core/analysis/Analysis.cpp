#include "analysis/Analysis.h"

#include "analysis/Classify.h"
#include "analysis/MeasuredPipeline.h"
#include "analysis/detail/Context.h"
#include "util/Error.h"
#include "util/Limits.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace pipescope {

std::string_view toString(IterationSource s)
{
    switch (s) {
    case IterationSource::ProfilerStep: return "profiler_step";
    case IterationSource::Range: return "range";
    case IterationSource::StepRestart: return "step_restart";
    case IterationSource::Periodic: return "periodic";
    case IterationSource::WholeTrace: return "whole_trace";
    }
    return "whole_trace";
}

std::string_view toString(StageSource s)
{
    switch (s) {
    case StageSource::None: return "none";
    case StageSource::User: return "user";
    case StageSource::ProcessGroup: return "process_group";
    case StageSource::Peers: return "peers";
    }
    return "none";
}

std::string_view toString(StepLabels s)
{
    switch (s) {
    case StepLabels::None: return "none";
    case StepLabels::Annotations: return "annotations";
    case StepLabels::Inferred: return "inferred";
    case StepLabels::AnnotationsAndInferred: return "annotations+inferred";
    }
    return "none";
}

std::string_view toString(LayerRangeKind s)
{
    switch (s) {
    case LayerRangeKind::None: return "none";
    case LayerRangeKind::Modules: return "modules";
    case LayerRangeKind::Annotations: return "annotations";
    }
    return "none";
}

std::string_view toString(PathKind k)
{
    switch (k) {
    case PathKind::F: return "F";
    case PathKind::B: return "B";
    case PathKind::I: return "I";
    case PathKind::W: return "W";
    case PathKind::Compute: return "compute";
    case PathKind::P2p: return "p2p";
    case PathKind::Collective: return "collective";
    case PathKind::Memcpy: return "memcpy";
    case PathKind::Memset: return "memset";
    case PathKind::Other: return "other";
    case PathKind::Idle: return "idle";
    }
    return "other";
}

std::string describeStepSource(StepLabels labelsFrom)
{
    switch (labelsFrom) {
    case StepLabels::Annotations: return "steps from annotations";
    case StepLabels::Inferred: return "steps inferred";
    case StepLabels::AnnotationsAndInferred: return "steps partly annotated, partly inferred";
    case StepLabels::None: break;
    }
    return "no steps";
}

namespace {
constexpr std::array<std::string_view, 7> kWork = {"compute", "p2p", "collective", "memcpy", "memset", "sync", "other"};
constexpr std::array<std::string_view, 4> kRole = {"compute", "communication", "copy", "idle"};
} // namespace

std::string_view toString(WorkClass c) { return kWork.at(static_cast<size_t>(c)); }
std::string_view toString(StreamRole r) { return kRole.at(static_cast<size_t>(r)); }

const RankIdle* AnalysisResult::idleOf(int iteration, int rank) const
{
    for (const auto& r : idle)
        if (r.iteration == iteration && r.rank == rank)
            return &r;
    return nullptr;
}

std::map<int, int> parseStageMap(const std::string& text)
{
    std::map<int, int> out;
    auto fail = [&]() {
        return Error("--stage-map '" + text + "' is not a list of rank:stage pairs; write it as e.g. 0:0,1:0,2:1,3:1");
    };
    size_t pos = 0;
    while (pos < text.size()) {
        size_t comma = text.find(',', pos);
        std::string_view item(text.data() + pos, (comma == std::string::npos ? text.size() : comma) - pos);
        auto colon = item.find(':');
        if (colon == std::string_view::npos)
            throw fail();
        int rank = -1, stage = -1;
        auto r1 = std::from_chars(item.data(), item.data() + colon, rank);
        auto r2 = std::from_chars(item.data() + colon + 1, item.data() + item.size(), stage);
        if (r1.ec != std::errc() || r1.ptr != item.data() + colon || r2.ec != std::errc()
            || r2.ptr != item.data() + item.size() || rank < 0 || stage < 0)
            throw fail();
        if (rank > kMaxRank || stage > kMaxRank)
            throw Error("--stage-map: rank " + std::to_string(rank) + ":" + std::to_string(stage) +
                        " is outside the supported ranks and stages 0.." + std::to_string(kMaxRank));
        if (!out.emplace(rank, stage).second)
            throw Error("--stage-map names rank " + std::to_string(rank) + " twice; give each rank one stage");
        if (comma == std::string::npos)
            break;
        pos = comma + 1;
    }
    if (out.empty())
        throw fail();
    return out;
}

namespace detail {

double percentile(const std::vector<double>& v, double q)
{
    if (v.empty())
        return 0;
    double idx = q * static_cast<double>(v.size() - 1);
    auto lo = static_cast<size_t>(std::floor(idx));
    auto hi = std::min(lo + 1, v.size() - 1);
    double f = idx - static_cast<double>(lo);
    return v[lo] + (v[hi] - v[lo]) * f;
}

P2pDir Context::direction(uint32_t a) const
{
    const auto ops = opsOf(a);
    if (ops.empty()) {
        const std::optional<Collective> kind = collectiveFromKernelName(trace.str(act(a).name));
        return kind == Collective::Send ? P2pDir::Send : kind == Collective::Recv ? P2pDir::Recv : P2pDir::Unknown;
    }
    // A coalesced batch of sends and receives has no one direction.
    bool sends = false, recvs = false, other = false;
    for (const NcclOp& op : ops) {
        sends = sends || op.kind == Collective::Send;
        recvs = recvs || op.kind == Collective::Recv;
        other = other || (op.kind != Collective::Send && op.kind != Collective::Recv);
    }
    if (other || sends == recvs)
        return P2pDir::Unknown;
    return sends ? P2pDir::Send : P2pDir::Recv;
}

std::optional<int> Context::peer(uint32_t a) const
{
    const auto ops = opsOf(a);
    if (ops.empty())
        return std::nullopt;
    // One peer, or the first of a batch's (its ops are read one by one where it matters).
    return ops.front().peer;
}

void classifyActivities(Context& ctx, AnalysisResult& out)
{
    const Trace& t = ctx.trace;
    const size_t n = t.activities.size();
    ctx.cls.assign(n, static_cast<uint8_t>(WorkClass::Other));

    // Names repeat: classify each name once (per activity kind).
    std::vector<int8_t> kernelClassByName(t.strings.size() + 1, -1);
    int maxRank = -1;
    bool sorted = true;
    for (size_t i = 0; i < n; ++i) {
        const Activity& a = t.activities[i];
        WorkClass c;
        const NcclOp* op = ctx.ncclOf(static_cast<uint32_t>(i));
        if (op || a.kind != ActivityKind::Kernel || a.name < 0
            || static_cast<size_t>(a.name) >= kernelClassByName.size()) {
            c = classify(a.kind, t.str(a.name), op, ctx.options.commRules.get());
        } else {
            auto& cached = kernelClassByName[static_cast<size_t>(a.name)];
            if (cached < 0)
                cached = static_cast<int8_t>(classify(a.kind, t.str(a.name), nullptr, ctx.options.commRules.get()));
            c = static_cast<WorkClass>(cached);
        }
        ctx.cls[i] = static_cast<uint8_t>(c);
        maxRank = std::max(maxRank, a.rank);
        if (i > 0) {
            const Activity& p = t.activities[i - 1];
            if (p.rank > a.rank || (p.rank == a.rank && p.start > a.start))
                sorted = false;
        }
    }
    for (const auto& r : t.ranks)
        maxRank = std::max(maxRank, r.rank);
    // Per-rank tables are indexed by rank: stores and importers keep ranks in
    // 0..kMaxRank, and a trace built otherwise is refused here, not allocated.
    if (maxRank > kMaxRank)
        throw Error("rank " + std::to_string(maxRank) + " is outside the supported ranks 0.." + std::to_string(kMaxRank));

    std::vector<uint32_t> order;
    if (!sorted) {
        order.resize(n);
        for (size_t i = 0; i < n; ++i)
            order[i] = static_cast<uint32_t>(i);
        std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
            const auto& a = t.activities[x];
            const auto& b = t.activities[y];
            return a.rank != b.rank ? a.rank < b.rank : a.start < b.start;
        });
    }

    ctx.slot.assign(static_cast<size_t>(maxRank + 1), -1);
    for (size_t k = 0; k < n; ++k) {
        uint32_t i = sorted ? static_cast<uint32_t>(k) : order[k];
        const Activity& a = t.activities[i];
        if (a.rank < 0)
            continue;
        int& s = ctx.slot[static_cast<size_t>(a.rank)];
        if (s < 0) {
            s = static_cast<int>(ctx.ranks.size());
            ctx.ranks.push_back({});
            ctx.ranks.back().rank = a.rank;
        }
        RankData& rd = ctx.ranks[static_cast<size_t>(s)];
        rd.acts.push_back(i);
        auto c = static_cast<WorkClass>(ctx.cls[i]);
        if (c == WorkClass::Compute) {
            if (rd.compute.empty())
                rd.firstCompute = a.start;
            rd.compute.push_back(i);
            detail::unionAppend(rd.busy, a.start, a.end);
        } else if (c == WorkClass::P2p || c == WorkClass::Collective) {
            rd.comm.push_back(i);
        }
        ++out.kernelCounts[static_cast<size_t>(c)];
    }
    // Ranks come in rank order only when the input was sorted; keep the slot map consistent.
    std::sort(ctx.ranks.begin(), ctx.ranks.end(), [](const RankData& a, const RankData& b) { return a.rank < b.rank; });
    for (size_t k = 0; k < ctx.ranks.size(); ++k)
        ctx.slot[static_cast<size_t>(ctx.ranks[k].rank)] = static_cast<int>(k);
    for (const auto& rd : ctx.ranks)
        out.ranks.push_back(rd.rank);

    // Stream roles.
    std::unordered_map<int64_t, StreamClass> streams;
    for (size_t i = 0; i < n; ++i) {
        const Activity& a = t.activities[i];
        auto [it, inserted] = streams.try_emplace(a.streamId);
        StreamClass& sc = it->second;
        if (inserted) {
            sc.storeId = a.streamId;
            sc.rank = a.rank;
            if (const StreamInfo* si = t.stream(a.streamId))
                sc.stream = si->stream;
            else
                sc.stream = a.streamId;
        }
        ++sc.count[ctx.cls[i]];
        sc.timeNs[ctx.cls[i]] += a.end - a.start;
    }
    for (auto& [id, sc] : streams) {
        TimeNs comp = sc.timeNs[0], comm = sc.timeNs[1] + sc.timeNs[2], copy = sc.timeNs[3] + sc.timeNs[4];
        int64_t cnt = sc.count[0] + sc.count[1] + sc.count[2] + sc.count[3] + sc.count[4];
        if (cnt == 0)
            sc.role = StreamRole::Idle;
        else if (comm > comp && comm >= copy)
            sc.role = StreamRole::Communication;
        else if (copy > comp && copy > comm)
            sc.role = StreamRole::Copy;
        else if (sc.count[0] == 0 && sc.count[1] + sc.count[2] > 0)
            sc.role = StreamRole::Communication;
        else
            sc.role = StreamRole::Compute;
        out.streams.push_back(sc);
    }
    std::sort(out.streams.begin(), out.streams.end(), [](const StreamClass& a, const StreamClass& b) {
        return a.rank != b.rank ? a.rank < b.rank : a.stream < b.stream;
    });
}

} // namespace detail

AnalysisResult analyze(const Trace& trace, const AnalyzeOptions& options)
{
    AnalysisResult out;
    out.commRules = options.commRules;
    const WorkControl* work = options.work;
    checkpoint(work, "classifying kernels", 0.0);
    detail::Context ctx(trace, options, out.warnings);
    detail::classifyActivities(ctx, out);
    if (ctx.ranks.empty())
        throw Error("the trace holds no GPU activity (no kernels, copies or memsets) to analyse; "
                    "import a trace recorded with GPU activity enabled");

    for (const auto& r : trace.ranks)
        if (r.worldSize)
            out.worldSize = std::max(out.worldSize.value_or(0), *r.worldSize);
    if (out.worldSize && static_cast<int>(ctx.ranks.size()) < *out.worldSize) {
        // Of the ranks read: a job read in part misses none of those it left.
        std::vector<int> expected = trace.ranksRead;
        if (expected.empty())
            for (int r = 0; r < *out.worldSize; ++r)
                expected.push_back(r);
        std::string missing;
        int count = 0;
        for (int r : expected)
            if (!ctx.rankData(r)) {
                if (count < 16)
                    missing += (missing.empty() ? "" : ", ") + std::to_string(r);
                ++count;
            }
        if (count > 0)
            ctx.warn("missing_ranks", std::to_string(count) + " of " + std::to_string(expected.size())
                                          + (trace.ranksRead.empty() ? " ranks" : " ranks read (of " + std::to_string(*out.worldSize) + ")")
                                          + " have no GPU activity in the trace (" + missing + (count > 16 ? ", ..." : "")
                                          + "); the analysis covers the others");
    }

    checkpoint(work, "finding iterations", 0.15);
    detail::detectIterations(ctx, out);
    detail::mapStages(ctx, out);
    checkpoint(work, "finding steps", 0.3);
    std::vector<Step> allSteps;
    detail::buildSteps(ctx, out, allSteps);
    detail::matchScheduleTemplate(ctx, out, allSteps);
    std::vector<Step> selected;
    for (const auto& s : allSteps)
        if (s.iteration == out.selectedIteration)
            selected.push_back(s);
    detail::inferSchedule(ctx, out, selected);
    checkpoint(work, "finding bubbles", 0.5);
    std::vector<Bubble> allBubbles;
    detail::findBubbles(ctx, out, allSteps, allBubbles);
    checkpoint(work, "imbalance and critical path", 0.7);
    detail::measureImbalance(ctx, out, selected);
    detail::traceCriticalPath(ctx, out, selected);
    detail::measureAllToAll(ctx, out);
    detail::measureMicrobatchSpread(out, selected);
    checkpoint(work, "trace views", 0.85);
    detail::computeHtaViews(ctx, out);
    checkpoint(work, "per-layer costs", 0.95);
    detail::attributeLayers(ctx, out, selected);
    out.memory = measureMemory(trace, out);
    checkpoint(work, "analysis done", 1.0);

    if (options.allIterations) {
        out.steps = std::move(allSteps);
        out.bubbles = std::move(allBubbles);
    } else {
        out.steps = std::move(selected);
        for (auto& b : allBubbles)
            if (b.iteration == out.selectedIteration)
                out.bubbles.push_back(b);
    }
    return out;
}

namespace {

bool isPointToPoint(const NcclOp& op)
{
    return op.isP2p || pipescope::isPointToPoint(op.kind);
}

// Matches the iteration's point-to-point messages end to end: NCCL delivers
// the messages between two ranks in order, so the k-th send from a to b is
// the k-th receive on b from a. A pair whose counts differ (a capture that
// began or ended mid-exchange) is left out rather than mismatched.
void measureMessages(const Trace& trace, const Iteration& it, MeasuredPipeline& mp)
{
    std::unordered_map<int64_t, const Activity*> kernelOf;
    for (const Activity& a : trace.activities)
        if (a.ncclIndex >= 0)
            kernelOf.emplace(a.id, &a);
    struct End {
        TimeNs start, end;
        int64_t bytes, op;
    };
    std::map<std::pair<int, int>, std::vector<End>> sends, recvs; // by (sender, receiver)
    for (const NcclOp& op : trace.ncclOps) {
        if (!op.activityId || !op.peer || (op.kind != Collective::Send && op.kind != Collective::Recv))
            continue;
        auto k = kernelOf.find(*op.activityId);
        if (k == kernelOf.end())
            continue;
        const End e{k->second->start, k->second->end, op.bytes.value_or(0), op.id};
        if (op.kind == Collective::Send)
            sends[{op.rank, *op.peer}].push_back(e);
        else
            recvs[{*op.peer, op.rank}].push_back(e);
    }
    auto byStart = [](const End& a, const End& b) { return a.start != b.start ? a.start < b.start : a.op < b.op; };
    for (auto& [pair, ss] : sends) {
        auto rv = recvs.find(pair);
        if (rv == recvs.end() || rv->second.size() != ss.size())
            continue;
        std::sort(ss.begin(), ss.end(), byStart);
        std::sort(rv->second.begin(), rv->second.end(), byStart);
        for (size_t i = 0; i < ss.size(); ++i) {
            const End& snd = ss[i];
            const End& rcv = rv->second[i];
            if (rcv.start < it.start || rcv.start >= it.end || rcv.end < snd.start)
                continue;
            mp.messages.push_back({pair.first, pair.second, snd.bytes > 0 ? snd.bytes : rcv.bytes, snd.start, rcv.start,
                                   rcv.end, snd.end});
        }
    }
}

// Whether the trace allows blocking exchanges (docs/analysis.md,
// "Exchanges"): a send that began before its receiver posted keeps the
// sender's compute waiting under batched, blocking exchanges, so a step that
// starts before such a send has ended shows sends that overlap compute. With
// enough such sends and (almost) none overlapped, exchanges may block; the
// what-if then keeps whichever reproduces the measured iteration better.
// Also the median time from an exchange kernel's end to the step after it.
void measureExchanges(MeasuredPipeline& mp)
{
    constexpr TimeNs kPending = 20'000;
    std::map<int, std::vector<std::pair<TimeNs, TimeNs>>> steps; // rank -> (start, end), sorted
    for (const PipelineStep& st : mp.steps)
        steps[st.rank].emplace_back(st.start, st.end);
    for (auto& [rank, v] : steps)
        std::sort(v.begin(), v.end());
    auto nextStart = [&](int rank, TimeNs t) -> std::optional<TimeNs> {
        auto it = steps.find(rank);
        if (it == steps.end())
            return std::nullopt;
        auto s = std::lower_bound(it->second.begin(), it->second.end(), std::make_pair(t, TimeNs(0)));
        if (s == it->second.end())
            return std::nullopt;
        return s->first;
    };
    int pending = 0, overlapped = 0;
    for (const MeasuredMessage& m : mp.messages) {
        if (m.recvStart < m.sendStart + kPending / 2 || m.sendEnd - m.sendStart < kPending)
            continue;
        const auto next = nextStart(m.srcRank, m.sendStart);
        if (!next)
            continue;
        ++pending;
        if (*next < m.sendEnd)
            ++overlapped;
    }
    mp.blockingExchanges = pending >= 3 && overlapped * 20 <= pending;
    if (!mp.blockingExchanges)
        return;
    std::map<int, std::vector<TimeNs>> ends; // rank -> its exchange kernels' ends
    for (const MeasuredMessage& m : mp.messages) {
        ends[m.srcRank].push_back(m.sendEnd);
        ends[m.dstRank].push_back(m.recvEnd);
    }
    std::vector<TimeNs> gaps;
    for (auto& [rank, e] : ends) {
        std::sort(e.begin(), e.end());
        auto it = steps.find(rank);
        if (it == steps.end())
            continue;
        TimeNs prevEnd = std::numeric_limits<TimeNs>::min();
        for (const auto& [start, end] : it->second) {
            // The last exchange that ended between the previous step and this one.
            auto after = std::upper_bound(e.begin(), e.end(), start);
            if (after != e.begin() && *std::prev(after) >= prevEnd)
                gaps.push_back(start - *std::prev(after));
            prevEnd = end;
        }
    }
    if (!gaps.empty()) {
        std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
        mp.exchangeGapNs = gaps[gaps.size() / 2];
    }
}

// When each pipeline rank began the iteration: the receive it posted for its
// first step (its earliest receive kernel inside the iteration that starts
// before that step), else, on the first stage, whose first forward waits for
// no one, that forward's start.
void measureRankStarts(const Trace& trace, const Iteration& it, MeasuredPipeline& mp)
{
    std::map<int, TimeNs> firstStep;
    for (const PipelineStep& st : mp.steps) {
        auto [e, inserted] = firstStep.try_emplace(st.rank, st.start);
        if (!inserted)
            e->second = std::min(e->second, st.start);
    }
    std::unordered_set<int64_t> receiving; // kernels carrying a receive (a fused send + receive lists both)
    for (const NcclOp& op : trace.ncclOps)
        if (op.activityId && op.kind == Collective::Recv)
            receiving.insert(*op.activityId);
    mp.rankStartNs.assign(mp.stageOfRank.size(), 0);
    std::unordered_set<int> found;
    for (const Activity& a : trace.activities) {
        if (a.ncclIndex < 0 || a.rank < 0 || static_cast<size_t>(a.rank) >= mp.rankStartNs.size())
            continue;
        auto fs = firstStep.find(a.rank);
        if (fs == firstStep.end() || a.start < it.start || a.start > fs->second || !receiving.count(a.id))
            continue;
        TimeNs& start = mp.rankStartNs[static_cast<size_t>(a.rank)];
        start = start > 0 ? std::min(start, a.start - it.start) : a.start - it.start;
        found.insert(a.rank);
    }
    for (const auto& [rank, first] : firstStep)
        if (!found.count(rank) && rank >= 0 && static_cast<size_t>(rank) < mp.rankStartNs.size()
            && mp.stageOfRank[static_cast<size_t>(rank)] == 0)
            mp.rankStartNs[static_cast<size_t>(rank)] = std::max<TimeNs>(0, first - it.start);
}

// The collective over ranks of several stages that each pipeline rank runs
// after its last step (a loss or gradient-norm all-reduce, a barrier): it
// ends only once the last rank has joined, so the replay needs it as one
// synchronisation, not as per-rank time. Sets mp.pipelineSyncNs (last join to
// last leave).
void measurePipelineSync(const Trace& trace, const Iteration& it, MeasuredPipeline& mp)
{
    std::map<int, TimeNs> lastStep;
    for (const PipelineStep& st : mp.steps) {
        auto [e, inserted] = lastStep.try_emplace(st.rank, st.end);
        if (!inserted)
            e->second = std::max(e->second, st.end);
    }
    std::map<int, TimeNs> spanEnd;
    for (const RankSpan& rs : it.ranks)
        spanEnd[rs.rank] = rs.end;
    auto stageOf = [&](int rank) {
        return rank >= 0 && static_cast<size_t>(rank) < mp.stageOfRank.size() ? mp.stageOfRank[static_cast<size_t>(rank)] : -1;
    };
    std::map<int, std::pair<TimeNs, TimeNs>> joined; // rank -> (join, leave) of its first one after its last step
    for (const Activity& a : trace.activities) {
        if (a.ncclIndex < 0 || stageOf(a.rank) < 0)
            continue;
        const NcclOp& op = trace.ncclOps[static_cast<size_t>(a.ncclIndex)];
        if (isPointToPoint(op))
            continue;
        int firstStage = -1;
        bool spans = false;
        for (int g : op.groupRanks) {
            const int st = stageOf(g);
            if (st >= 0 && firstStage >= 0 && st != firstStage)
                spans = true;
            if (st >= 0 && firstStage < 0)
                firstStage = st;
        }
        if (!spans)
            continue;
        auto ls = lastStep.find(a.rank);
        auto se = spanEnd.find(a.rank);
        if (ls == lastStep.end() || se == spanEnd.end() || a.start < ls->second || a.start >= se->second)
            continue;
        auto [j, inserted] = joined.try_emplace(a.rank, a.start, a.end);
        if (!inserted && a.start < j->second.first)
            j->second = {a.start, a.end};
    }
    if (!joined.empty() && joined.size() == lastStep.size()) {
        TimeNs join = std::numeric_limits<TimeNs>::min(), leave = std::numeric_limits<TimeNs>::min();
        for (const auto& [rank, jl] : joined) {
            join = std::max(join, jl.first);
            leave = std::max(leave, jl.second);
        }
        mp.pipelineSyncNs = std::max<TimeNs>(0, leave - join);
    }
}

} // namespace

MeasuredPipeline measurePipeline(const Trace& trace, const MeasureOptions& options)
{
    AnalyzeOptions ao;
    ao.iteration = options.iteration;
    ao.pipelineDegree = options.pipelineDegree;
    ao.iterationRange = options.iterationRange;
    return measurePipeline(trace, analyze(trace, ao));
}

MeasuredPipeline measurePipeline(const Trace& trace, const AnalysisResult& r)
{
    if (!r.pipeline.found)
        throw Error("no pipeline found in the trace (" + r.pipeline.reason
                    + "); give the pipeline degree with --pp N if the job is pipeline-parallel");

    MeasuredPipeline mp;
    mp.pipelineDegree = r.pipeline.pp;
    mp.dataParallel = r.pipeline.dp;
    mp.chunks = r.pipeline.chunks;
    mp.microbatches = r.pipeline.microbatches;
    mp.schedule = r.pipeline.schedule;
    mp.scheduleConfidence = r.pipeline.scheduleConfidence;
    int maxRank = r.ranks.empty() ? -1 : r.ranks.back();
    if (r.worldSize)
        maxRank = std::max(maxRank, *r.worldSize - 1);
    mp.stageOfRank.assign(static_cast<size_t>(maxRank + 1), -1);
    mp.replicaOfRank.assign(static_cast<size_t>(maxRank + 1), 0);
    for (const auto& a : r.pipeline.stageMap)
        if (a.rank >= 0 && a.rank <= maxRank) {
            mp.stageOfRank[static_cast<size_t>(a.rank)] = a.stage;
            mp.replicaOfRank[static_cast<size_t>(a.rank)] = a.replica;
        }
    for (const auto& s : r.steps) {
        if (s.iteration != r.selectedIteration) // a result made with allIterations
            continue;
        PipelineStep ps;
        ps.rank = s.rank;
        ps.stage = s.stage;
        ps.chunk = s.chunk;
        ps.microbatch = s.microbatch;
        ps.kind = s.kind;
        ps.start = s.start;
        ps.end = s.end;
        ps.computeNs = s.computeNs;
        mp.steps.push_back(ps);
    }
    if (r.selectedIteration >= 0) {
        const Iteration& it = r.iterations[static_cast<size_t>(r.selectedIteration)];
        mp.iterationNs = it.end - it.start;
        mp.iterationStart = it.start;
    }
    mp.idleNsPerStage.assign(static_cast<size_t>(mp.pipelineDegree), 0);
    std::vector<int> perStage(static_cast<size_t>(mp.pipelineDegree), 0);
    for (const auto& ri : r.idle) {
        if (ri.iteration != r.selectedIteration || ri.stage < 0 || ri.stage >= mp.pipelineDegree)
            continue;
        mp.idleNsPerStage[static_cast<size_t>(ri.stage)] += ri.idleNs;
        ++perStage[static_cast<size_t>(ri.stage)];
        mp.dataParallelSyncNs = std::max(mp.dataParallelSyncNs, ri.byCause[static_cast<size_t>(BubbleCause::DpSync)]);
    }
    mp.transfers = r.transfers;
    mp.layers = r.layers.layers;
    if (r.selectedIteration >= 0) {
        const Iteration& it = r.iterations[static_cast<size_t>(r.selectedIteration)];
        measureMessages(trace, it, mp);
        measureExchanges(mp);
        measureRankStarts(trace, it, mp);
        // The bubbles already count waiting in collectives over the pipeline's
        // ranks as fill_drain, so dataParallelSyncNs above is the all-reduce alone.
        measurePipelineSync(trace, it, mp);
    }
    for (size_t s = 0; s < perStage.size(); ++s)
        if (perStage[s] > 1)
            mp.idleNsPerStage[s] /= perStage[s];
    // Compute on the critical path outside F/B/I/W steps is the optimizer and the like.
    if (auto it = r.criticalPath.byKind.find("compute"); it != r.criticalPath.byKind.end())
        mp.optimizerNs = it->second;
    if (!r.memory.empty())
        mp.measuredPeakBytes.assign(mp.stageOfRank.size(), -1);
    for (const MeasuredMemory& m : r.memory)
        if (m.absolute && m.rank >= 0 && static_cast<size_t>(m.rank) < mp.measuredPeakBytes.size())
            mp.measuredPeakBytes[static_cast<size_t>(m.rank)] = m.peakBytes;
    return mp;
}

} // namespace pipescope
