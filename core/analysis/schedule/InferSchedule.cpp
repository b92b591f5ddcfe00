// The schedule from the order of the steps, where the steps were not read
// against the built-in schedules' transfers (ScheduleMatch.cpp): how many
// forwards each rank runs before its first backward, whether all forwards
// come first, chunk by chunk, and how the backward is split.
#include "analysis/detail/Context.h"
#include "analysis/schedule/detail/ScheduleSteps.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace pipescope::detail {

namespace {

// The selected iteration's steps per rank, and whether the backward is split.
struct StepOrder {
    std::map<int, std::vector<const Step*>> byRank;
    bool split = false;        // some I or W step
    bool fullBackward = false; // some B step
};

StepOrder stepOrderOf(const std::vector<Step>& steps)
{
    StepOrder o;
    for (const auto& s : steps) {
        o.byRank[s.rank].push_back(&s);
        o.split = o.split || s.kind == StepKind::I || s.kind == StepKind::W;
        o.fullBackward = o.fullBackward || s.kind == StepKind::B;
    }
    return o;
}

// What one rank's order shows.
struct RankOrder {
    int fBeforeB = 0;        // forwards before the first backward (B or I)
    int nF = 0;              // forwards in all
    bool allFFirst = true;   // no forward after a backward
    bool chunkMajor = true;  // forwards never go back to a lower chunk
    size_t chunks = 0;       // distinct chunks
};

RankOrder rankOrderOf(const std::vector<const Step*>& seq)
{
    RankOrder r;
    int lastChunk = 0;
    bool seenB = false;
    std::set<int> chunks;
    for (const Step* st : seq) {
        chunks.insert(st->chunk);
        if (st->kind == StepKind::F) {
            ++r.nF;
            if (!seenB)
                ++r.fBeforeB;
            else
                r.allFFirst = false;
            r.chunkMajor = r.chunkMajor && st->chunk >= lastChunk;
            lastChunk = st->chunk;
        } else if (st->kind != StepKind::W) {
            seenB = true;
        }
    }
    r.chunks = chunks.size();
    return r;
}

// Per schedule, the pipeline ranks whose order fits it.
struct WarmupTally {
    int stages = 0, gpipe = 0, onef1b = 0, interleaved = 0, looped = 0, zbh1 = 0, zbh2 = 0, twoChunks = 0;
    double onef1bPartial = 0; // ranks one forward off 1F1B's warm-up count half each

    double share(double n) const { return stages ? n / stages : 0.0; }
    std::string of(int n) const { return std::to_string(n) + " of " + std::to_string(stages) + " pipeline ranks"; }
};

// Per stage: forwards before the first backward (B or I), compared with what each schedule runs.
WarmupTally tallyWarmups(const Context& ctx, const StepOrder& order, int p, int v)
{
    WarmupTally t;
    for (const auto& [rank, seq] : order.byRank) {
        const RankData* rd = ctx.rankData(rank);
        if (!rd || rd->stage < 0)
            continue;
        ++t.stages;
        const int s = rd->stage;
        const RankOrder r = rankOrderOf(seq);
        t.twoChunks += r.chunks == 2;
        t.gpipe += r.allFFirst;
        t.looped += r.allFFirst && r.chunkMajor;
        const int one = warmup1F1B(p, s, r.nF);
        if (r.fBeforeB == one)
            ++t.onef1b;
        else if (std::abs(r.fBeforeB - one) == 1)
            t.onef1bPartial += 0.5;
        t.interleaved += r.fBeforeB == warmupInterleaved(p, s, v, r.nF);
        t.zbh1 += r.fBeforeB == one;
        t.zbh2 += r.fBeforeB == warmupZeroBubbleH2(p, s, r.nF);
    }
    return t;
}

// The schedule the order reads as ("unknown": none), how well the ranks fit
// it, in words, and a schedule that orders this iteration's steps the same way.
struct ScheduleReading {
    std::string name = "unknown", evidence;
    double score = 0;
    std::string alike;
};

// A backward split into I and W: ZB-V or DualPipeV in a V, else ZB-H1 or ZB-H2.
ScheduleReading readSplitBackward(const Context& ctx, const StepOrder& order, const WarmupTally& t, int v)
{
    ScheduleReading r;
    if (ctx.vShape) {
        r.name = order.fullBackward ? "dualpipev" : "zb-v";
        r.score = t.share(t.twoChunks);
        r.evidence = "chunks placed in a V (stage 0 also runs the last virtual stage), backward split into I and W"
                     + std::string(order.fullBackward ? ", with full backwards overlapped in the middle" : "")
                     + "; " + t.of(t.twoChunks) + " run two chunks";
    } else if (v > 1) {
        r.name = "zb-h1";
        r.score = 0.8;
        r.evidence = std::to_string(v) + " looped chunks per rank with the backward split into I and W (interleaved zero bubble)";
    } else if (t.zbh2 > t.zbh1) {
        r.name = "zb-h2";
        r.score = t.share(t.zbh2);
        r.evidence = "backward split into I and W; " + t.of(t.zbh2) + " run min(m, 2(p-stage)-1) forwards before their first I";
    } else {
        r.name = "zb-h1";
        r.score = t.share(t.zbh1);
        r.evidence = "backward split into I and W; " + t.of(t.zbh1) + " run min(m, p-stage) forwards before their first I";
        if (t.zbh1 == t.zbh2)
            r.alike = "zb-h2";
    }
    return r;
}

// Full backwards: looped BFS or interleaved 1F1B with chunks, GPipe or 1F1B without.
ScheduleReading readFullBackward(const Context& ctx, const WarmupTally& t, int v)
{
    ScheduleReading r;
    if (ctx.vShape) {
        r.evidence = "chunks placed in a V but the backward is not split; no known schedule orders steps so";
    } else if (v > 1) {
        if (t.looped > t.interleaved) {
            r.name = "looped-bfs";
            r.score = t.share(t.looped);
            r.evidence = std::to_string(v) + " chunks per rank; " + t.of(t.looped) + " run every forward, chunk by chunk, before any backward";
        } else {
            r.name = "interleaved-1f1b";
            r.score = t.share(t.interleaved);
            r.evidence = std::to_string(v) + " chunks per rank; " + t.of(t.interleaved)
                         + " run Megatron's 2(p-stage-1)+(v-1)p+1 warm-up forwards before their first backward";
            if (t.interleaved == t.looped)
                r.alike = "looped-bfs";
        }
    } else {
        double g = t.share(t.gpipe), o = t.share(t.onef1b + t.onef1bPartial);
        if (g >= o && g > 0) {
            r.name = "gpipe";
            r.score = g;
            r.evidence = t.of(t.gpipe) + " run all forwards before any backward";
            if (g == o)
                r.alike = "1f1b";
        } else if (o > 0) {
            r.name = "1f1b";
            r.score = o;
            r.evidence = t.of(t.onef1b) + " run min(m, p-stage) forwards before their first backward, then alternate";
        }
    }
    return r;
}

// The schedule, its confidence (lower for inferred steps, few microbatches
// and a twin schedule) and the evidence in words.
void publishSchedule(PipelineStructure& ps, const ScheduleReading& r, int p, int m)
{
    const bool annotated = ps.labelsFrom == StepLabels::Annotations;
    double base = annotated ? 1.0 : 0.85;
    if (m < 2)
        base *= 0.5;
    std::string evidence = r.evidence;
    if (r.name == "unknown") {
        if (evidence.empty())
            evidence = "the order of forward and backward steps matches no known schedule";
    } else {
        if (!r.alike.empty()) {
            base *= 0.5;
            evidence += "; " + r.alike + " orders the steps of " + std::to_string(m) + " microbatches on " + std::to_string(p)
                        + " stages the same way, so the two cannot be told apart";
        }
        if (!annotated)
            evidence += std::string("; steps ") + (ps.labelsFrom == StepLabels::Inferred ? "" : "partly ")
                        + "inferred from kernel order and point-to-point peers, not annotated";
    }
    ps.schedule = r.name == "unknown" ? std::nullopt : scheduleKindFromString(r.name);
    ps.scheduleConfidence = r.name == "unknown" ? 0.0 : std::round(std::clamp(r.score * base, 0.0, 1.0) * 100) / 100;
    ps.scheduleEvidence = evidence;
}

} // namespace

int warmup1F1B(int p, int s, int nF) { return std::min(nF, p - s); }

int warmupInterleaved(int p, int s, int v, int nF) { return std::min(nF, 2 * (p - s - 1) + (v - 1) * p + 1); }

int warmupZeroBubbleH2(int p, int s, int nF) { return std::min(nF, 2 * (p - s) - 1); }

void inferSchedule(Context& ctx, AnalysisResult& out, const std::vector<Step>& steps)
{
    PipelineStructure& ps = out.pipeline;
    if (ctx.scheduleMatched)
        return; // read against the schedules' transfers already (ScheduleMatch.cpp)
    if (!ps.found || steps.empty()) {
        ps.schedule.reset();
        ps.scheduleConfidence = 0;
        ps.scheduleEvidence = ps.found ? "no steps in the selected iteration" : "no pipeline";
        return;
    }
    const int p = ps.pp, m = ps.microbatches, v = ps.chunks;
    const StepOrder order = stepOrderOf(steps);
    const WarmupTally tally = tallyWarmups(ctx, order, p, v);
    const ScheduleReading reading = order.split ? readSplitBackward(ctx, order, tally, v) : readFullBackward(ctx, tally, v);
    publishSchedule(ps, reading, p, m);
}

} // namespace pipescope::detail
