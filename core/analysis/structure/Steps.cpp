// The F/B/I/W steps on each pipeline rank: from step annotations where the
// trace has them, else from the compute cut at point-to-point transfers, each
// run of kernels read as a forward or a backward (or one of each, back to
// back) from the transfers around it. LabelSteps.cpp gives the steps their
// chunks and microbatches.
#include "analysis/Classify.h"
#include "analysis/detail/Context.h"
#include "analysis/structure/detail/StructureSteps.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pipescope::detail {

namespace {

bool backwardHint(std::string_view name)
{
    std::string s(name.substr(0, 256));
    for (auto& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (std::string_view h : {"backward", "bwd", "dgrad", "wgrad", "_grad", "grad_"})
        if (s.find(h) != std::string::npos)
            return true;
    return false;
}

TimeNs unionOf(const Context& ctx, const std::vector<uint32_t>& ks, size_t from, size_t to)
{
    std::vector<Interval> u;
    for (size_t q = from; q < to; ++q)
        unionAppend(u, ctx.act(ks[q]).start, ctx.act(ks[q]).end);
    return totalLength(u);
}

using KernelIt = std::vector<uint32_t>::const_iterator;

// ------------------------------------------------------------ annotations

// A step annotation: the CPU range and what its name says.
struct Labelled {
    TimeNs start, end;
    StepLabel label;
};

// The step annotations of each pipeline rank (by its index in ctx.ranks), in start order.
std::vector<std::vector<Labelled>> annotationLabels(const Context& ctx)
{
    const Trace& t = ctx.trace;
    std::unordered_map<StringId, std::optional<StepLabel>> labelCache;
    std::vector<std::vector<Labelled>> labelled(ctx.ranks.size());
    for (const CpuRange& r : t.cpuRanges) {
        if (r.kind != CpuRangeKind::Annotation && r.kind != CpuRangeKind::Nvtx && r.kind != CpuRangeKind::Other)
            continue;
        const RankData* rd = ctx.rankData(r.rank);
        if (!rd || rd->stage < 0)
            continue;
        auto [it, inserted] = labelCache.try_emplace(r.name);
        if (inserted)
            it->second = parseStepLabel(t.str(r.name));
        if (it->second)
            labelled[static_cast<size_t>(rd - ctx.ranks.data())].push_back({r.start, r.end, *it->second});
    }
    for (auto& labels : labelled)
        std::sort(labels.begin(), labels.end(), [](const Labelled& a, const Labelled& b) { return a.start < b.start; });
    return labelled;
}

// Steps from annotations: the kernels launched inside a labelled range (the
// innermost one) are its step.
void annotatedDrafts(const Context& ctx, const RankData& rd, int iteration, KernelIt lo, KernelIt hi,
                     const std::vector<Labelled>& labels, std::vector<Draft>& drafts)
{
    std::map<size_t, std::vector<uint32_t>> byLabel;
    for (auto k = lo; k != hi; ++k) {
        const Activity& a = ctx.act(*k);
        TimeNs when = a.launchStart.value_or(a.start);
        auto p = std::upper_bound(labels.begin(), labels.end(), when,
                                  [](TimeNs v, const Labelled& l) { return v < l.start; });
        // Innermost enclosing label: scan back a few for nesting.
        for (int back = 0; back < 8 && p != labels.begin(); ++back) {
            --p;
            if (when < p->end) {
                byLabel[static_cast<size_t>(p - labels.begin())].push_back(*k);
                break;
            }
        }
    }
    for (auto& [li, ks] : byLabel) {
        const StepLabel& l = labels[li].label;
        Step s;
        s.iteration = iteration;
        s.rank = rd.rank;
        s.stage = rd.stage;
        s.chunk = l.chunk;           // -1 until labelled from the data flow
        s.kind = l.kind;
        s.microbatch = l.microbatch; // same
        s.start = ctx.act(ks.front()).start;
        s.end = s.start;
        std::vector<Interval> u;
        for (uint32_t k : ks) {
            s.end = std::max(s.end, ctx.act(k).end);
            unionAppend(u, ctx.act(k).start, ctx.act(k).end);
        }
        s.computeNs = totalLength(u);
        s.annotated = true;
        drafts.push_back({s, l.kind == StepKind::B && !l.explicitKind});
    }
}

// ------------------------------------------------------------ segments

enum class Evidence : uint8_t { None, F, B };

// A run of compute kernels between point-to-point transfers, and what the
// transfers before and after it say about its kind.
struct Segment {
    int rank = 0;
    int iteration = 0;
    std::vector<uint32_t> kernels;
    Evidence before = Evidence::None, after = Evidence::None;
    bool beforeCertain = false, afterCertain = false;
};

// Kernel names the optimizer runs, looked up once per name.
class OptimizerKernels {
public:
    explicit OptimizerKernels(const Trace& t) : trace_(t) {}
    bool operator()(const Activity& a)
    {
        auto [opt, fresh] = known_.try_emplace(a.name, false);
        if (fresh)
            opt->second = isOptimizerKernel(trace_.str(a.name));
        return opt->second;
    }

private:
    const Trace& trace_;
    std::unordered_map<StringId, bool> known_;
};

// The point-to-point ops of a rank, in launch order, handed out as the
// kernels that follow them launch.
struct LaunchCursor {
    const Context& ctx;
    std::vector<uint32_t> ops;
    size_t next = 0; // first op not yet placed

    void launchedBefore(TimeNs when, std::vector<uint32_t>& into)
    {
        into.clear();
        for (; next < ops.size() && *ctx.act(ops[next]).launchStart < when; ++next)
            into.push_back(ops[next]);
    }
};

// Cuts one rank's compute in one iteration into segments at its
// point-to-point ops, and notes on each segment what its inputs and outputs
// say: an activation from the stage before or a gradient from the stage after
// (a forward or a backward), and whether the op's direction is known.
class SegmentCutter {
public:
    SegmentCutter(const Context& ctx, const RankData& rd, int iteration, OptimizerKernels& optimizer,
                  std::vector<Segment>& segments)
        : ctx_(ctx), rd_(rd), iteration_(iteration), optimizer_(optimizer), segments_(segments)
    {
        cur_ = fresh();
    }

    void cut(const RankSpan& span, KernelIt lo, KernelIt hi)
    {
        const std::vector<uint32_t> p2p = transfersIn(span);
        if (launchOrderKnown(lo, hi, p2p))
            cutByLaunch(lo, hi, p2p);
        else
            cutByTime(lo, hi, p2p);
    }

private:
    Segment fresh() const
    {
        Segment s;
        s.rank = rd_.rank;
        s.iteration = iteration_;
        return s;
    }
    // Ends the current segment and starts the next.
    void close()
    {
        segments_.push_back(std::move(cur_));
        cur_ = fresh();
    }

    // Comm ops are in start order; the ones of this iteration start inside its span
    // (an op still running from before is found by looking back a little).
    std::vector<uint32_t> transfersIn(const RankSpan& span) const
    {
        std::vector<uint32_t> p2p;
        auto c0 = std::lower_bound(rd_.comm.begin(), rd_.comm.end(), span.start,
                                   [&](uint32_t c, TimeNs v) { return ctx_.act(c).start < v; });
        for (int back = 0; back < 4 && c0 != rd_.comm.begin(); ++back)
            --c0;
        for (; c0 != rd_.comm.end() && ctx_.act(*c0).start <= span.end; ++c0) {
            const Activity& a = ctx_.act(*c0);
            if (ctx_.classOf(*c0) == WorkClass::P2p && a.end >= span.start)
                p2p.push_back(*c0);
        }
        return p2p;
    }

    // Where a transfer sits among the compute kernels: by the CPU's
    // launch order when the trace links every launch (a send queued
    // behind a long receive on a busy NCCL stream starts late on the
    // GPU, but was issued right after its step), else by GPU time.
    bool launchOrderKnown(KernelIt lo, KernelIt hi, const std::vector<uint32_t>& p2p) const
    {
        bool byLaunch = !p2p.empty();
        for (auto k = lo; k != hi && byLaunch; ++k) {
            const Activity& a = ctx_.act(*k);
            byLaunch = a.launchStart.has_value() && (k == lo || *a.launchStart >= *ctx_.act(*(k - 1)).launchStart);
        }
        for (uint32_t c : p2p)
            byLaunch = byLaunch && ctx_.act(c).launchStart.has_value();
        return byLaunch;
    }

    // The peer's stage relative to this rank's: -1 the stage before, 1 the
    // stage after (around a ring too, then `wrap`), 0 anything else.
    int stageRel(std::optional<int> peer, bool& wrap) const
    {
        wrap = false;
        if (!peer)
            return 0;
        const RankData* pr = ctx_.rankData(*peer);
        if (!pr || pr->stage < 0)
            return 0;
        int d = pr->stage - rd_.stage;
        if (d == -1 || d == 1)
            return d;
        if (ctx_.ring && rd_.stage == 0 && pr->stage == ctx_.pp - 1) {
            wrap = true;
            return -1;
        }
        if (ctx_.ring && rd_.stage == ctx_.pp - 1 && pr->stage == 0) {
            wrap = true;
            return 1;
        }
        return 0;
    }

    // An op after the current segment: a send to the next stage follows a forward.
    void output(uint32_t c)
    {
        P2pDir dir = ctx_.direction(c);
        bool wrap = false;
        int rel = stageRel(ctx_.peer(c), wrap);
        if (rel == 0 || dir == P2pDir::Recv)
            return;
        cur_.after = rel > 0 ? Evidence::F : Evidence::B;
        cur_.afterCertain = cur_.afterCertain || dir == P2pDir::Send;
    }
    // An op before the current segment, which begins at nextStart: a receive
    // from the stage before feeds a forward.
    void input(uint32_t c, TimeNs nextStart)
    {
        P2pDir dir = ctx_.direction(c);
        bool wrap = false;
        int rel = stageRel(ctx_.peer(c), wrap);
        if (rel == 0 || dir == P2pDir::Send)
            return;
        // An op of unknown direction still running when the step began was not its
        // input (a send of the previous step's output overlapping this one).
        if (dir == P2pDir::Unknown && ctx_.act(c).end > nextStart)
            return;
        cur_.before = rel < 0 ? Evidence::F : Evidence::B;
        cur_.beforeCertain = cur_.beforeCertain || dir == P2pDir::Recv;
    }

    // Cuts where ops were issued between two kernels' launches.
    void cutByLaunch(KernelIt lo, KernelIt hi, const std::vector<uint32_t>& p2p)
    {
        LaunchCursor cursor{ctx_, p2p};
        std::sort(cursor.ops.begin(), cursor.ops.end(), [&](uint32_t x, uint32_t y) {
            return *ctx_.act(x).launchStart < *ctx_.act(y).launchStart;
        });
        std::vector<uint32_t> ops;
        // Ops issued before the first kernel are its inputs.
        cursor.launchedBefore(*ctx_.act(*lo).launchStart, ops);
        for (uint32_t c : ops)
            input(c, ctx_.act(*lo).start);
        for (auto k = lo; k != hi; ++k) {
            const Activity& a = ctx_.act(*k);
            const bool optimizer = optimizer_(a);
            cursor.launchedBefore(*a.launchStart, ops);
            if (optimizer) {
                // The optimizer is not part of any step; what was issued
                // before it is the segment's output.
                if (!cur_.kernels.empty()) {
                    for (uint32_t c : ops)
                        output(c);
                    close();
                }
                continue;
            }
            if (!cur_.kernels.empty() && !ops.empty()) {
                for (uint32_t c : ops)
                    output(c);
                close();
                for (uint32_t c : ops)
                    input(c, a.start);
            }
            cur_.kernels.push_back(*k);
        }
        // Ops issued after the last kernel (its outputs).
        cursor.launchedBefore(std::numeric_limits<TimeNs>::max(), ops);
        for (uint32_t c : ops)
            output(c);
        if (!cur_.kernels.empty())
            segments_.push_back(std::move(cur_));
    }

    // Ops that start (sends) or end (receives) in the gap [from, to] between
    // the segment and the next kernel; byStart and byEnd hold the same ops.
    void opsInGap(const std::vector<uint32_t>& byStart, const std::vector<uint32_t>& byEnd, TimeNs from, TimeNs to,
                  std::vector<uint32_t>& cutOps) const
    {
        cutOps.clear();
        auto s0 = std::lower_bound(byStart.begin(), byStart.end(), from,
                                   [&](uint32_t c, TimeNs v) { return ctx_.act(c).start < v; });
        for (; s0 != byStart.end() && ctx_.act(*s0).start <= to; ++s0)
            if (ctx_.direction(*s0) != P2pDir::Recv)
                cutOps.push_back(*s0);
        auto e0 = std::lower_bound(byEnd.begin(), byEnd.end(), from,
                                   [&](uint32_t c, TimeNs v) { return ctx_.act(c).end < v; });
        for (; e0 != byEnd.end() && ctx_.act(*e0).end <= to; ++e0)
            if (ctx_.direction(*e0) != P2pDir::Send)
                cutOps.push_back(*e0);
    }

    // Cuts where ops start or end in the GPU's gaps between kernels.
    void cutByTime(KernelIt lo, KernelIt hi, const std::vector<uint32_t>& p2p)
    {
        // p2p ops that end (or start) before the first kernel are its inputs.
        TimeNs firstStart = ctx_.act(*lo).start;
        for (uint32_t c : p2p)
            if (ctx_.act(c).start <= firstStart)
                input(c, firstStart);
        std::vector<uint32_t> byStart = p2p, byEnd = p2p;
        std::sort(byEnd.begin(), byEnd.end(), [&](uint32_t x, uint32_t y) { return ctx_.act(x).end < ctx_.act(y).end; });
        std::vector<uint32_t> cutOps;
        TimeNs prevEnd = std::numeric_limits<TimeNs>::min();
        for (auto k = lo; k != hi; ++k) {
            const Activity& a = ctx_.act(*k);
            if (optimizer_(a)) {
                // The optimizer is not part of any step.
                if (!cur_.kernels.empty()) {
                    // Sends posted between the segment's end and the
                    // optimizer are the segment's outputs (the last
                    // backward's gradient goes out as the optimizer starts).
                    for (uint32_t c : p2p)
                        if (ctx_.act(c).start >= prevEnd && ctx_.act(c).start <= a.start && ctx_.direction(c) != P2pDir::Recv)
                            output(c);
                    close();
                }
                continue;
            }
            if (!cur_.kernels.empty() && prevEnd <= a.start) {
                opsInGap(byStart, byEnd, prevEnd, a.start, cutOps);
                if (!cutOps.empty()) {
                    for (uint32_t c : cutOps)
                        output(c);
                    close();
                    for (uint32_t c : cutOps)
                        input(c, a.start);
                }
            }
            cur_.kernels.push_back(*k);
            prevEnd = cur_.kernels.size() == 1 ? a.end : std::max(prevEnd, a.end);
        }
        // Ops after the last kernel (its outputs).
        for (uint32_t c : p2p)
            if (ctx_.act(c).start >= prevEnd)
                output(c);
        if (!cur_.kernels.empty())
            segments_.push_back(std::move(cur_));
    }

    const Context& ctx_;
    const RankData& rd_;
    const int iteration_;
    OptimizerKernels& optimizer_;
    std::vector<Segment>& segments_;
    Segment cur_;
};

// ------------------------------------------------------------ segments read as steps

// Typical F and B compute from segments whose kind is clear, to tell a merged
// F+B (or B+F) from a single step and to find where to split it.
struct TypicalSteps {
    std::vector<TimeNs> compute; // per segment: the union of its kernels
    double meanF = 0, meanB = 0;
    double fShare = 1.0 / 3.0;   // a forward's share of a forward and a backward
};

TypicalSteps typicalStepTimes(const Context& ctx, const std::vector<Segment>& segments)
{
    TypicalSteps ts;
    double sumF = 0, sumB = 0;
    int nF = 0, nB = 0;
    ts.compute.resize(segments.size());
    for (size_t i = 0; i < segments.size(); ++i) {
        const Segment& s = segments[i];
        ts.compute[i] = unionOf(ctx, s.kernels, 0, s.kernels.size());
        Evidence e = s.before != Evidence::None ? s.before : s.after;
        bool single = s.before == Evidence::None || s.after == Evidence::None || s.before == s.after;
        if (!single || e == Evidence::None)
            continue;
        (e == Evidence::F ? sumF : sumB) += static_cast<double>(ts.compute[i]);
        ++(e == Evidence::F ? nF : nB);
    }
    ts.meanF = nF ? sumF / nF : 0;
    ts.meanB = nB ? sumB / nB : 0;
    ts.fShare = (sumF > 0 && sumB > 0) ? ts.meanF / (ts.meanF + ts.meanB) : 1.0 / 3.0;
    return ts;
}

// What a segment is: one step, a forward and a backward back to back (in
// either order), possibly so where ops of unknown direction leave it open
// (Amb), or unknown for want of any neighbour traffic.
enum class Reading : uint8_t { SingleF, SingleB, SplitFB, SplitBF, AmbFB, AmbBF, Unknown };

// A segment between ops whose direction is unknown may be one step or two:
// its compute decides when typical step times are known (else the rank's F
// and B counts do, see balanceAmbiguous).
Reading readingOf(const Segment& s, TimeNs compute, const TypicalSteps& ts)
{
    Reading k;
    if (s.before == Evidence::None && s.after == Evidence::None)
        k = Reading::Unknown;
    else if (s.before == Evidence::None || s.after == Evidence::None || s.before == s.after)
        k = (s.before != Evidence::None ? s.before : s.after) == Evidence::F ? Reading::SingleF : Reading::SingleB;
    else if (s.before == Evidence::F)
        k = (s.afterCertain || s.beforeCertain) ? Reading::SplitFB : Reading::AmbFB;
    else
        k = (s.afterCertain || s.beforeCertain) ? Reading::SplitBF : Reading::AmbBF;
    if (s.kernels.size() < 2 && (k == Reading::SplitFB || k == Reading::AmbFB))
        k = Reading::SingleF;
    if (s.kernels.size() < 2 && (k == Reading::SplitBF || k == Reading::AmbBF))
        k = Reading::SingleB;
    if ((k == Reading::AmbFB || k == Reading::AmbBF) && ts.meanF > 0 && ts.meanB > 0) {
        auto c = static_cast<double>(compute);
        double one = k == Reading::AmbFB ? ts.meanF : ts.meanB;
        bool two = std::abs(c - (ts.meanF + ts.meanB)) < std::abs(c - one);
        k = k == Reading::AmbFB ? (two ? Reading::SplitFB : Reading::SingleF) : (two ? Reading::SplitBF : Reading::SingleB);
    }
    return k;
}

// F and B steps per (rank, iteration), and the segments still open either way.
struct Tally {
    int f = 0, b = 0, ambFB = 0, ambBF = 0;

    void add(Reading k)
    {
        switch (k) {
        case Reading::SingleF: ++f; break;
        case Reading::SingleB: ++b; break;
        case Reading::SplitFB:
        case Reading::SplitBF: ++f; ++b; break;
        case Reading::AmbFB: ++ambFB; break;
        case Reading::AmbBF: ++ambBF; break;
        case Reading::Unknown: break;
        }
    }
};

using RankIteration = std::pair<int, int>;

std::vector<Reading> readSegments(const std::vector<Segment>& segments, const TypicalSteps& ts,
                                  std::map<RankIteration, Tally>& tally)
{
    std::vector<Reading> kinds(segments.size());
    for (size_t i = 0; i < segments.size(); ++i) {
        const Segment& s = segments[i];
        Tally& tl = tally[{s.rank, s.iteration}];
        kinds[i] = readingOf(s, ts.compute[i], ts);
        tl.add(kinds[i]);
    }
    return kinds;
}

// Whether to split the open F+B and B+F segments of a (rank, iteration):
// the choice that balances its F and B counts best.
std::map<RankIteration, std::pair<bool, bool>> balanceAmbiguous(const std::map<RankIteration, Tally>& tally)
{
    std::map<RankIteration, std::pair<bool, bool>> splitAmb;
    for (const auto& [key, tl] : tally) {
        int best = -1;
        std::pair<bool, bool> choice{false, false};
        for (int a = 0; a < 2; ++a)
            for (int b = 0; b < 2; ++b) {
                int f = tl.f + tl.ambFB + (b ? tl.ambBF : 0);
                int bb = tl.b + tl.ambBF + (a ? tl.ambFB : 0);
                int diff = std::abs(f - bb);
                if (best < 0 || diff < best) {
                    best = diff;
                    choice = {a == 1, b == 1};
                }
            }
        splitAmb[key] = choice;
    }
    return splitAmb;
}

// No neighbour evidence at all: kernel names decide, else call it forward.
Reading guessFromNames(const Context& ctx, const Segment& s)
{
    size_t hinted = 0;
    for (uint32_t kk : s.kernels)
        hinted += backwardHint(ctx.trace.str(ctx.act(kk).name)) ? 1 : 0;
    return hinted * 2 > s.kernels.size() ? Reading::SingleB : Reading::SingleF;
}

void emitDraft(const Context& ctx, const Segment& s, StepKind kind, size_t from, size_t to, std::vector<Draft>& drafts)
{
    if (from >= to)
        return;
    Step st;
    st.iteration = s.iteration;
    st.rank = s.rank;
    st.stage = ctx.rankData(s.rank)->stage;
    st.kind = kind;
    st.start = ctx.act(s.kernels[from]).start;
    st.end = st.start;
    for (size_t q = from; q < to; ++q)
        st.end = std::max(st.end, ctx.act(s.kernels[q]).end);
    st.computeNs = unionOf(ctx, s.kernels, from, to);
    st.chunk = -1;
    st.microbatch = -1;
    drafts.push_back({st, kind == StepKind::B});
}

// The segment's step or steps, a merged pair split where splitPoint says.
void emitReading(const Context& ctx, const Segment& s, Reading k, double fShare, std::vector<Draft>& drafts)
{
    switch (k) {
    case Reading::SingleF: emitDraft(ctx, s, StepKind::F, 0, s.kernels.size(), drafts); break;
    case Reading::SingleB: emitDraft(ctx, s, StepKind::B, 0, s.kernels.size(), drafts); break;
    case Reading::SplitFB: {
        size_t at = splitPoint(ctx, s.kernels, fShare, false);
        emitDraft(ctx, s, StepKind::F, 0, at, drafts);
        emitDraft(ctx, s, StepKind::B, at, s.kernels.size(), drafts);
        break;
    }
    case Reading::SplitBF: {
        size_t at = splitPoint(ctx, s.kernels, 1.0 - fShare, true);
        emitDraft(ctx, s, StepKind::B, 0, at, drafts);
        emitDraft(ctx, s, StepKind::F, at, s.kernels.size(), drafts);
        break;
    }
    default: break;
    }
}

// Reads every segment as one step or two and appends their drafts; returns
// whether some kind was guessed from kernel names alone.
bool draftsFromSegments(const Context& ctx, const std::vector<Segment>& segments, std::vector<Draft>& drafts)
{
    const TypicalSteps ts = typicalStepTimes(ctx, segments);
    std::map<RankIteration, Tally> tally;
    const std::vector<Reading> kinds = readSegments(segments, ts, tally);
    std::map<RankIteration, std::pair<bool, bool>> splitAmb = balanceAmbiguous(tally);

    bool anyGuessed = false;
    std::set<int> evidenced;
    for (size_t i = 0; i < segments.size(); ++i)
        if (kinds[i] != Reading::Unknown)
            evidenced.insert(segments[i].rank);
    for (size_t i = 0; i < segments.size(); ++i) {
        const Segment& s = segments[i];
        Reading k = kinds[i];
        auto choice = splitAmb[{s.rank, s.iteration}];
        if (k == Reading::AmbFB)
            k = choice.first ? Reading::SplitFB : Reading::SingleF;
        if (k == Reading::AmbBF)
            k = choice.second ? Reading::SplitBF : Reading::SingleB;
        if (k == Reading::Unknown && evidenced.count(s.rank))
            continue; // compute outside the steps (loss, optimizer, ...) on a rank whose steps are known
        if (k == Reading::Unknown) {
            k = guessFromNames(ctx, s);
            anyGuessed = true;
        }
        emitReading(ctx, s, k, ts.fShare, drafts);
    }
    return anyGuessed;
}

// ------------------------------------------------------------ all steps

// Steps of every pipeline rank and iteration: drafts from annotations where
// the rank has any, else segments still to be read.
struct FoundSteps {
    std::vector<Draft> drafts;
    std::vector<Segment> segments;
    bool anyAnnotated = false, anyInferred = false;
};

FoundSteps findSteps(const Context& ctx, const AnalysisResult& out)
{
    FoundSteps found;
    const std::vector<std::vector<Labelled>> labelled = annotationLabels(ctx);
    OptimizerKernels optimizer(ctx.trace);
    for (size_t slot = 0; slot < ctx.ranks.size(); ++slot) {
        const RankData& rd = ctx.ranks[slot];
        if (rd.stage < 0)
            continue;
        const std::vector<Labelled>& labels = labelled[slot];
        for (const Iteration& it : out.iterations) {
            const RankSpan* span = nullptr;
            for (const auto& rs : it.ranks)
                if (rs.rank == rd.rank)
                    span = &rs;
            if (!span)
                continue;
            auto lo = std::lower_bound(rd.compute.begin(), rd.compute.end(), span->start,
                                       [&](uint32_t k, TimeNs v) { return ctx.act(k).start < v; });
            auto hi = std::upper_bound(lo, rd.compute.end(), span->end,
                                       [&](TimeNs v, uint32_t k) { return v < ctx.act(k).start; });
            if (lo == hi)
                continue;
            if (!labels.empty()) {
                found.anyAnnotated = true;
                annotatedDrafts(ctx, rd, it.index, lo, hi, labels, found.drafts);
                continue;
            }
            // Inference: cut the compute at point-to-point operations.
            found.anyInferred = true;
            SegmentCutter(ctx, rd, it.index, optimizer, found.segments).cut(*span, lo, hi);
        }
    }
    return found;
}

// Chunks and microbatches of the selected iteration.
void countChunksAndMicrobatches(const std::vector<Step>& steps, int selectedIteration, PipelineStructure& ps)
{
    int chunks = 1, m = 0;
    std::map<std::pair<int, int>, int> fwdPerRankChunk;
    for (const auto& st : steps) {
        if (st.iteration != selectedIteration)
            continue;
        chunks = std::max(chunks, st.chunk + 1);
        if (st.kind == StepKind::F)
            m = std::max(m, ++fwdPerRankChunk[{st.rank, st.chunk}]);
    }
    ps.chunks = chunks;
    ps.microbatches = m;
}

} // namespace

size_t splitPoint(const Context& ctx, const std::vector<uint32_t>& kernels, double share, bool backwardFirst)
{
    // Backward-looking kernel names mark the backward's extent, when names say so: F then B
    // splits at the first of them, B then F after the last (a backward also runs
    // un-hinted kernels such as GEMMs, a forward none of the hinted ones).
    const Trace& t = ctx.trace;
    const size_t n = kernels.size();
    if (!backwardFirst) {
        for (size_t i = 0; i < n; ++i)
            if (backwardHint(t.str(ctx.act(kernels[i]).name))) {
                if (i >= 1)
                    return i;
                break;
            }
    } else {
        for (size_t i = n; i > 0; --i)
            if (backwardHint(t.str(ctx.act(kernels[i - 1]).name))) {
                if (i < n)
                    return i;
                break;
            }
    }
    TimeNs total = unionOf(ctx, kernels, 0, kernels.size());
    double target = share * static_cast<double>(total);
    size_t best = 1;
    double bestDiff = -1;
    TimeNs acc = 0;
    for (size_t i = 1; i < kernels.size(); ++i) {
        acc += ctx.act(kernels[i - 1]).end - ctx.act(kernels[i - 1]).start;
        double d = std::abs(static_cast<double>(acc) - target);
        if (bestDiff < 0 || d < bestDiff) {
            bestDiff = d;
            best = i;
        }
    }
    return best;
}

void buildSteps(Context& ctx, AnalysisResult& out, std::vector<Step>& steps)
{
    PipelineStructure& ps = out.pipeline;
    if (!ps.found) {
        ps.labelsFrom = StepLabels::None;
        return;
    }
    FoundSteps found = findSteps(ctx, out);
    const bool anyGuessed = draftsFromSegments(ctx, found.segments, found.drafts);
    labelSteps(ctx, out, found.drafts);
    for (auto& d : found.drafts)
        steps.push_back(d.step);
    std::stable_sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
        return a.iteration != b.iteration ? a.iteration < b.iteration : a.rank != b.rank ? a.rank < b.rank : a.start < b.start;
    });

    ps.labelsFrom = found.anyAnnotated && found.anyInferred ? StepLabels::AnnotationsAndInferred
                    : found.anyAnnotated                    ? StepLabels::Annotations
                                                            : StepLabels::Inferred;
    if (anyGuessed)
        ctx.warn("step_kinds_guessed", "some steps have no neighbour traffic around them, so forward/backward was "
                                       "guessed from kernel names; annotate steps (NVTX) for exact labels");
    countChunksAndMicrobatches(steps, out.selectedIteration, ps);
}

} // namespace pipescope::detail
