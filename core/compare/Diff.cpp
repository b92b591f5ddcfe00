#include "compare/Diff.h"

#include "analysis/Classify.h"
#include "compare/SavedPrediction.h"
#include "util/Error.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <unordered_map>

namespace pipescope::compare {

std::string_view toString(KernelChange c)
{
    switch (c) {
    case KernelChange::Added: return "added";
    case KernelChange::Removed: return "removed";
    case KernelChange::Changed: return "changed";
    case KernelChange::Same: return "same";
    }
    return "same";
}

namespace {

const Iteration* selectedIteration(const AnalysisResult& r)
{
    for (const Iteration& it : r.iterations)
        if (it.index == r.selectedIteration)
            return &it;
    return nullptr;
}

std::map<int, int> stageOfRank(const AnalysisResult& r)
{
    std::map<int, int> m;
    if (r.pipeline.found)
        for (const StageAssignment& s : r.pipeline.stageMap)
            m[s.rank] = s.stage;
    return m;
}

// Ranks of each pipeline stage (replicas).
std::map<int, std::vector<int>> ranksOfStage(const AnalysisResult& r)
{
    std::map<int, std::vector<int>> m;
    if (r.pipeline.found)
        for (const StageAssignment& s : r.pipeline.stageMap)
            if (s.stage >= 0)
                m[s.stage].push_back(s.rank);
    return m;
}

std::string intList(const std::vector<int>& v)
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i)
        s += (i ? "," : "") + std::to_string(v[i]);
    return s;
}

// Per stage: the steps' kernel time per microbatch, by F and backward (B, I, W).
struct StageSteps {
    std::map<int, TimeNs> forward, backward;                   // by stage, over replicas and microbatches
    std::map<std::pair<int, int>, TimeNs> mbForward, mbBackward; // by (stage, microbatch), over replicas
};

TimeNs stepTime(const Step& s) { return s.computeNs > 0 ? s.computeNs : s.end - s.start; }

StageSteps stageSteps(const AnalysisResult& r)
{
    StageSteps out;
    for (const Step& s : r.steps) {
        if (s.iteration != r.selectedIteration)
            continue;
        const TimeNs t = stepTime(s);
        if (s.kind == StepKind::F) {
            out.forward[s.stage] += t;
            out.mbForward[{s.stage, s.microbatch}] += t;
        } else {
            out.backward[s.stage] += t;
            out.mbBackward[{s.stage, s.microbatch}] += t;
        }
    }
    return out;
}

// Replicas of a stage that ran steps in the compared iteration.
std::map<int, int> replicasWithSteps(const AnalysisResult& r)
{
    std::map<int, std::set<int>> ranks;
    for (const Step& s : r.steps)
        if (s.iteration == r.selectedIteration)
            ranks[s.stage].insert(s.rank);
    std::map<int, int> n;
    for (const auto& [stage, set] : ranks)
        n[stage] = static_cast<int>(set.size());
    return n;
}

struct KernelKey {
    int stage;
    int32_t name;
    bool operator==(const KernelKey& o) const { return stage == o.stage && name == o.name; }
};
struct KernelKeyHash {
    size_t operator()(const KernelKey& k) const
    {
        return std::hash<int64_t>()((static_cast<int64_t>(k.stage) << 32) ^ static_cast<uint32_t>(k.name));
    }
};
struct KernelSum {
    int64_t count = 0;
    TimeNs totalNs = 0;
    WorkClass cls = WorkClass::Compute;
};

// Kernels starting in each rank's window of the compared iteration, per
// (stage, name), divided by the ranks of the stage (per replica).
std::map<std::pair<int, std::string>, KernelSum> kernelsPerStage(const Trace& t, const AnalysisResult& r)
{
    std::map<std::pair<int, std::string>, KernelSum> out;
    const Iteration* it = selectedIteration(r);
    if (!it)
        return out;
    const std::map<int, int> stageOf = stageOfRank(r);
    std::map<int, std::pair<TimeNs, TimeNs>> window;
    for (const RankSpan& s : it->ranks)
        window[s.rank] = {s.start, s.end};
    std::map<int, int> ranksInStage;
    for (const auto& [rank, w] : window) {
        auto st = stageOf.find(rank);
        ++ranksInStage[st == stageOf.end() ? -1 : st->second];
    }
    std::unordered_map<KernelKey, KernelSum, KernelKeyHash> sums;
    const CommRules* rules = r.commRules.get();
    // Activities are sorted by (rank, start): each rank's window is one range.
    for (const auto& [rank, w] : window) {
        const auto& acts = t.activities;
        auto lo = std::lower_bound(acts.begin(), acts.end(), std::make_pair(rank, w.first),
                                   [](const Activity& a, const std::pair<int, TimeNs>& k) {
                                       return a.rank != k.first ? a.rank < k.first : a.start < k.second;
                                   });
        auto st = stageOf.find(rank);
        const int stage = st == stageOf.end() ? -1 : st->second;
        for (auto a = lo; a != acts.end() && a->rank == rank && a->start < w.second; ++a) {
            if (a->kind != ActivityKind::Kernel)
                continue;
            KernelSum& k = sums[KernelKey{stage, a->name}];
            if (k.count == 0) {
                const NcclOp* op = a->ncclIndex >= 0 && static_cast<size_t>(a->ncclIndex) < t.ncclOps.size()
                                       ? &t.ncclOps[static_cast<size_t>(a->ncclIndex)]
                                       : nullptr;
                k.cls = classify(a->kind, t.str(a->name), op, rules);
            }
            ++k.count;
            k.totalNs += a->end - a->start;
        }
    }
    for (const auto& [key, sum] : sums) {
        const int64_t n = std::max(1, ranksInStage[key.stage]);
        KernelSum per = sum;
        // Rounded to the nearest: a count of 3 kernels over 2 replicas reads 2.
        per.count = (sum.count + n / 2) / n;
        per.totalNs = (sum.totalNs + n / 2) / n;
        out[{key.stage, t.str(key.name)}] = per;
    }
    return out;
}

// A run's layers per stage, or "unknown" where its trace has no layer ranges.
std::string partitionText(const RunConfig& c) { return c.layersPerStage.empty() ? "unknown" : intList(c.layersPerStage); }

void addDifference(std::vector<Difference>& d, const std::string& field, const std::string& a, const std::string& b)
{
    if (a != b)
        d.push_back({field, a, b});
}

std::vector<Difference> configDifferences(const RunConfig& a, const RunConfig& b)
{
    std::vector<Difference> d;
    addDifference(d, "pipeline", a.pipeline ? "found" : "none", b.pipeline ? "found" : "none");
    addDifference(d, "ranks", std::to_string(a.ranks), std::to_string(b.ranks));
    if (!a.pipeline || !b.pipeline)
        return d;
    addDifference(d, "pp", std::to_string(a.pp), std::to_string(b.pp));
    addDifference(d, "dp", std::to_string(a.dp), std::to_string(b.dp));
    addDifference(d, "v", std::to_string(a.v), std::to_string(b.v));
    addDifference(d, "microbatches", std::to_string(a.microbatches), std::to_string(b.microbatches));
    addDifference(d, "schedule", scheduleName(a.schedule), scheduleName(b.schedule));
    if (a.layers > 0 && b.layers > 0)
        addDifference(d, "layers", std::to_string(a.layers), std::to_string(b.layers));
    if (!a.layersPerStage.empty() && !b.layersPerStage.empty())
        addDifference(d, "layers_per_stage", intList(a.layersPerStage), intList(b.layersPerStage));
    else // a partition the trace does not give is not the other run's: never "the same configuration"
        d.push_back({"layers_per_stage", partitionText(a), partitionText(b)});
    return d;
}

// A's prediction for B's configuration; nothing (and why) when none applies.
// Whether B's microbatches are A's size (true) or A's global batch cut into
// more (false): the work per microbatch of both runs, over the stages both
// have, against the two answers.
bool keepsMicrobatchSize(const RunConfig& ca, const RunConfig& cb, const std::vector<StageDiff>& stages)
{
    if (ca.pp != cb.pp || cb.microbatches <= 0)
        return false; // the what-if engine's default: the global batch is kept
    double sa = 0, sb = 0;
    for (const StageDiff& s : stages)
        if (s.fbNs.a && s.fbNs.b) {
            sa += static_cast<double>(*s.fbNs.a);
            sb += static_cast<double>(*s.fbNs.b);
        }
    if (sa <= 0 || sb <= 0)
        return false;
    const double ratio = sb / sa;
    const double globalKept = static_cast<double>(ca.microbatches) / static_cast<double>(cb.microbatches);
    return std::abs(ratio - 1.0) < std::abs(ratio - globalKept);
}

std::optional<PredictionCheck> predictionCheck(const RunInput& a, const RunInput& b, const RunConfig& ca,
                                               const RunConfig& cb, TimeNs measuredB, const std::vector<StageDiff>& stages,
                                               std::string& whyNot)
{
    if (!ca.pipeline || !cb.pipeline) {
        whyNot = "a prediction needs a pipeline in both runs";
        return std::nullopt;
    }
    if (!a.model) {
        whyNot = "run A's pipeline could not be calibrated, so it predicts nothing";
        return std::nullopt;
    }
    if (!cb.schedule || *cb.schedule == ScheduleKind::Custom) {
        whyNot = "run B's schedule is not one the what-if engine replays (" + scheduleName(cb.schedule) + ")";
        return std::nullopt;
    }
    PredictionCheck check;
    const whatif::Scenario base = whatif::measuredScenario(*a.model);
    whatif::Scenario s = base;
    s.label = "B's configuration";
    s.schedule = *cb.schedule;
    s.pp = cb.pp;
    s.v = std::max(1, cb.v);
    s.microbatches = std::max(1, cb.microbatches);
    if (isVShaped(s.schedule))
        s.v = 2;
    // B's partition, in A's layers where both have the same ones.
    const bool sameLayers = ca.layers > 0 && ca.layers == cb.layers && a.model->layerSource != whatif::LayerSource::Stages;
    // Without layer ranges in B's trace (and no boundaries given for it) B's
    // partition is unknown: the replay assumes one, and says which.
    const bool bPartitionKnown = !cb.layersPerStage.empty() && b.model && b.model->measuredPartition;
    if (b.model && b.model->measuredPartition && sameLayers &&
        b.model->measuredPartition->stages() == s.pp * s.v)
        s.boundaries = b.model->measuredPartition->boundaries();
    else if (s.pp != base.pp || s.v != base.v)
        s.boundaries.reset(); // re-split evenly
    if (!bPartitionKnown)
        check.notModelled.push_back(std::string("B's partition (no layer ranges in its trace; ") +
                                    (s.boundaries ? "A's assumed)" : "an even split assumed)"));
    if (cb.dp != ca.dp)
        check.notModelled.push_back("data-parallel replicas " + std::to_string(ca.dp) + " -> " + std::to_string(cb.dp));
    if (ca.layers > 0 && cb.layers > 0 && ca.layers != cb.layers)
        check.notModelled.push_back("layers " + std::to_string(ca.layers) + " -> " + std::to_string(cb.layers));
    if (!sameLayers && bPartitionKnown && ca.layersPerStage != cb.layersPerStage)
        check.notModelled.push_back("B's partition (its layers are not A's), replayed with an even split");

    addDifference(check.changes, "schedule", std::string(toString(base.schedule)), std::string(toString(s.schedule)));
    addDifference(check.changes, "pp", std::to_string(base.pp), std::to_string(s.pp));
    addDifference(check.changes, "v", std::to_string(base.v), std::to_string(s.v));
    addDifference(check.changes, "microbatches", std::to_string(base.microbatches), std::to_string(s.microbatches));
    addDifference(check.changes, "boundaries", base.boundaries ? intList(*base.boundaries) : "even",
                  s.boundaries ? intList(*s.boundaries) : "even");
    if (check.changes.empty()) {
        if (!bPartitionKnown) {
            std::string others; // what else differs, that the what-if engine does not change
            for (size_t i = 1; i < check.notModelled.size(); ++i) // the first is the partition's note
                others += (others.empty() ? "" : ", ") + check.notModelled[i];
            whyNot = "run B's partition is unknown (its trace has no layer ranges), and the rest of its configuration is A's" +
                     (others.empty() ? std::string() : " but for what the what-if engine does not change (" + others + ")") +
                     ": give B's boundaries (diff --b-measured-boundaries, with --layers) to predict it";
        } else
            whyNot = check.notModelled.empty() ? "run B has run A's configuration: there is nothing to predict"
                                               : "run B differs from A only in what the what-if engine does not change (" +
                                                     check.notModelled.front() + ")";
        return std::nullopt;
    }
    whatif::ReplayOptions ro;
    ro.timeline = false;
    whatif::CostModel model = *a.model;
    if (s.microbatches != base.microbatches) {
        const bool sameSize = keepsMicrobatchSize(ca, cb, stages);
        check.batch = sameSize ? "microbatch" : "global";
        if (sameSize)
            model.keepGlobalBatch = false;
    }
    whatif::Prediction p;
    try {
        p = whatif::predict(model, s, ro);
    } catch (const Error& e) {
        whyNot = std::string("run A's cost model cannot replay B's configuration: ") + e.what();
        return std::nullopt;
    }
    check.scenario = s;
    check.predictedNs = p.iterationNs();
    check.measuredNs = measuredB;
    check.error = measuredB > 0 ? static_cast<double>(check.predictedNs - measuredB) / static_cast<double>(measuredB) : 0;
    try {
        const whatif::Prediction own = whatif::predict(*a.model, base, ro);
        check.calibrationError = own.calibrationError();
    } catch (const Error&) {
    }
    return check;
}

// The check of a saved prediction: its scenario against B's configuration.
PredictionCheck savedCheck(const SavedPrediction& saved, const RunConfig& ca, const RunConfig& cb, TimeNs measuredB)
{
    PredictionCheck check;
    check.saved = true;
    check.savedLabel = saved.label;
    check.scenario.label = saved.label;
    check.scenario.schedule = saved.schedule;
    check.scenario.pp = saved.pp;
    check.scenario.v = saved.v;
    check.scenario.microbatches = saved.microbatches;
    if (!saved.boundaries.empty())
        check.scenario.boundaries = saved.boundaries;
    const std::string savedLayers = intList(saved.boundaries);
    addDifference(check.changes, "schedule", scheduleName(ca.schedule), std::string(toString(saved.schedule)));
    addDifference(check.changes, "pp", std::to_string(ca.pp), std::to_string(saved.pp));
    addDifference(check.changes, "v", std::to_string(ca.v), std::to_string(saved.v));
    addDifference(check.changes, "microbatches", std::to_string(ca.microbatches), std::to_string(saved.microbatches));
    auto boundariesOf = [](const std::vector<int>& layersPerStage) {
        std::vector<int> b;
        int at = 0;
        for (size_t i = 0; i + 1 < layersPerStage.size(); ++i)
            b.push_back(at += layersPerStage[i]);
        return b;
    };
    if (!ca.layersPerStage.empty())
        addDifference(check.changes, "boundaries", intList(boundariesOf(ca.layersPerStage)),
                      saved.boundaries.empty() ? "even" : savedLayers);
    else if (!saved.boundaries.empty()) // A's own partition is not in its trace
        check.changes.push_back({"boundaries", "unknown", savedLayers});
    if (saved.recompute != "none")
        check.changes.push_back({"recompute", "none", saved.recompute});
    // What B runs that the saved scenario did not say.
    auto unlike = [&](const std::string& field, const std::string& predicted, const std::string& ran) {
        if (predicted != ran)
            check.notModelled.push_back("B runs " + field + " " + ran + ", the saved scenario " + predicted);
    };
    unlike("schedule", std::string(toString(saved.schedule)), scheduleName(cb.schedule));
    unlike("pp", std::to_string(saved.pp), std::to_string(cb.pp));
    unlike("v", std::to_string(saved.v), std::to_string(cb.v));
    unlike("microbatches", std::to_string(saved.microbatches), std::to_string(cb.microbatches));
    if (!cb.layersPerStage.empty() && !saved.boundaries.empty())
        unlike("boundaries", savedLayers, intList(boundariesOf(cb.layersPerStage)));
    else if (cb.layersPerStage.empty())
        check.notModelled.push_back("B's partition is unknown (no layer ranges in its trace): not checked against the "
                                    "saved scenario's");
    if (cb.dp != ca.dp)
        check.notModelled.push_back("data-parallel replicas " + std::to_string(ca.dp) + " -> " + std::to_string(cb.dp));
    check.predictedNs = saved.predictedNs;
    check.measuredNs = measuredB;
    check.error = measuredB > 0 ? static_cast<double>(check.predictedNs - measuredB) / static_cast<double>(measuredB) : 0;
    return check;
}

} // namespace

RunConfig runConfig(const AnalysisResult& r, const whatif::CostModel* model)
{
    RunConfig c;
    c.ranks = static_cast<int>(r.ranks.size());
    c.pipeline = r.pipeline.found;
    if (!c.pipeline) {
        // No pipeline: one stage, and every rank holds the whole model.
        c.dp = std::max(1, c.ranks);
        return c;
    }
    c.pp = r.pipeline.pp;
    c.dp = r.pipeline.dp;
    c.v = r.pipeline.chunks;
    c.microbatches = r.pipeline.microbatches;
    c.schedule = r.pipeline.schedule;
    if (model) {
        c.layerSource = std::string(whatif::toString(model->layerSource));
        if (model->layerSource != whatif::LayerSource::Stages) {
            c.layers = model->layerCount();
            if (model->measuredPartition)
                for (int s = 0; s < model->measuredPartition->stages(); ++s)
                    c.layersPerStage.push_back(model->measuredPartition->layersOf(s));
        }
    }
    return c;
}

namespace {

// Each run's analysed iteration: its index and length.
void compareIterations(const AnalysisResult& ra, const AnalysisResult& rb, DiffResult& d)
{
    if (const Iteration* ia = selectedIteration(ra)) {
        d.iteration.a = ia->index;
        d.iterationNs.a = ia->end - ia->start;
    }
    if (const Iteration* ib = selectedIteration(rb)) {
        d.iteration.b = ib->index;
        d.iterationNs.b = ib->end - ib->start;
    }
}

// One run's idle time per rank into `ranks`, and its idle share and the mean
// idle per cause over its pipeline ranks into d (side a or b).
void idleSide(const AnalysisResult& r, const std::map<int, int>& stageOf, bool isA, std::map<int, RankIdleDiff>& ranks,
              DiffResult& d)
{
    TimeNs window = 0, idle = 0;
    CauseTotals total{};
    int n = 0;
    for (const RankIdle& ri : r.idle) {
        if (ri.iteration != r.selectedIteration)
            continue;
        RankIdleDiff& rd = ranks[ri.rank];
        rd.rank = ri.rank;
        auto st = stageOf.find(ri.rank);
        (isA ? rd.stage.a : rd.stage.b) = st == stageOf.end() ? -1 : st->second;
        (isA ? rd.windowNs.a : rd.windowNs.b) = ri.windowNs;
        (isA ? rd.idleNs.a : rd.idleNs.b) = ri.idleNs;
        for (int c = 0; c < kBubbleCauses; ++c)
            (isA ? rd.byCause[size_t(c)].a : rd.byCause[size_t(c)].b) = ri.byCause[size_t(c)];
        if (r.pipeline.found && (st == stageOf.end() || st->second < 0))
            continue; // outside the pipeline
        window += ri.windowNs;
        idle += ri.idleNs;
        for (int c = 0; c < kBubbleCauses; ++c)
            total[size_t(c)] += ri.byCause[size_t(c)];
        ++n;
    }
    if (n == 0)
        return;
    (isA ? d.bubbleShare.a : d.bubbleShare.b) = window > 0 ? static_cast<double>(idle) / static_cast<double>(window) : 0.0;
    for (int c = 0; c < kBubbleCauses; ++c)
        (isA ? d.idleByCause[size_t(c)].a : d.idleByCause[size_t(c)].b) = (total[size_t(c)] + n / 2) / n;
}

// Idle by cause: per rank, and the mean over each run's pipeline ranks.
void compareIdle(const AnalysisResult& ra, const AnalysisResult& rb, DiffResult& d)
{
    std::map<int, RankIdleDiff> ranks;
    idleSide(ra, stageOfRank(ra), true, ranks, d);
    idleSide(rb, stageOfRank(rb), false, ranks, d);
    for (auto& [rank, rd] : ranks)
        d.ranks.push_back(rd);
}

// A stage's summed step time per microbatch and replica (rounded), if the stage ran any.
std::optional<TimeNs> perMicrobatch(const std::map<int, TimeNs>& sums, const std::map<int, int>& replicas, int stage,
                                    int microbatches)
{
    auto it = sums.find(stage);
    auto rep = replicas.find(stage);
    if (it == sums.end() || rep == replicas.end() || microbatches <= 0)
        return std::nullopt;
    const int64_t n = static_cast<int64_t>(rep->second) * microbatches;
    return (it->second + n / 2) / n;
}

std::optional<TimeNs> busyOf(const AnalysisResult& r, int stage)
{
    for (const StageBalance& bal : r.imbalance.stages)
        if (bal.stage == stage)
            return bal.busyNs;
    return std::nullopt;
}

std::optional<int64_t> peakOf(const AnalysisResult& r, const std::map<int, int>& stageOf, int stage)
{
    std::optional<int64_t> peak;
    for (const MeasuredMemory& m : r.memory) {
        auto st = stageOf.find(m.rank);
        if (st != stageOf.end() && st->second == stage)
            peak = std::max(peak.value_or(m.peakBytes), m.peakBytes);
    }
    return peak;
}

// What the two runs' steps hold, per stage (and per stage and microbatch).
struct StageSides {
    StageSteps a, b;
    std::map<int, int> replicasA, replicasB;
    std::set<int> stages;
};

StageSides stageSides(const AnalysisResult& ra, const AnalysisResult& rb)
{
    StageSides s{stageSteps(ra), stageSteps(rb), replicasWithSteps(ra), replicasWithSteps(rb), {}};
    for (const auto& m : {ranksOfStage(ra), ranksOfStage(rb)})
        for (const auto& [stage, rs] : m)
            s.stages.insert(stage);
    return s;
}

// Per stage: F and B per microbatch, F+B, busy time and measured peak memory.
void compareStages(const AnalysisResult& ra, const AnalysisResult& rb, const StageSides& sides, DiffResult& d)
{
    const std::map<int, int> stageA = stageOfRank(ra), stageB = stageOfRank(rb);
    for (int s : sides.stages) {
        StageDiff sd;
        sd.stage = s;
        sd.forwardNs = {perMicrobatch(sides.a.forward, sides.replicasA, s, d.a.microbatches),
                        perMicrobatch(sides.b.forward, sides.replicasB, s, d.b.microbatches)};
        sd.backwardNs = {perMicrobatch(sides.a.backward, sides.replicasA, s, d.a.microbatches),
                         perMicrobatch(sides.b.backward, sides.replicasB, s, d.b.microbatches)};
        if (sd.forwardNs.a && sd.backwardNs.a)
            sd.fbNs.a = *sd.forwardNs.a + *sd.backwardNs.a;
        if (sd.forwardNs.b && sd.backwardNs.b)
            sd.fbNs.b = *sd.forwardNs.b + *sd.backwardNs.b;
        sd.busyNs = {ra.pipeline.found ? busyOf(ra, s) : std::nullopt, rb.pipeline.found ? busyOf(rb, s) : std::nullopt};
        sd.peakBytes = {peakOf(ra, stageA, s), peakOf(rb, stageB, s)};
        d.stages.push_back(sd);
    }
}

// A stage's time for one microbatch, averaged over the replicas that ran it.
std::optional<TimeNs> microbatchTime(const std::map<std::pair<int, int>, TimeNs>& v, const std::map<int, int>& rep, int stage,
                                     int microbatch)
{
    auto it = v.find({stage, microbatch});
    auto r = rep.find(stage);
    if (it == v.end() || r == rep.end() || r->second <= 0)
        return std::nullopt;
    return (it->second + r->second / 2) / r->second;
}

// Per microbatch, where both runs cut the work the same way.
void compareMicrobatches(const StageSides& sides, DiffResult& d)
{
    if (!d.a.pipeline || !d.b.pipeline) {
        d.microbatchesWhyNot = "both runs need a pipeline";
        return;
    }
    if (d.a.pp != d.b.pp || d.a.microbatches != d.b.microbatches) {
        d.microbatchesWhyNot = "the runs have different stages or microbatches";
        return;
    }
    for (int s : sides.stages)
        for (int m = 0; m < d.a.microbatches; ++m) {
            MicrobatchDiff md;
            md.stage = s;
            md.microbatch = m;
            md.forwardNs = {microbatchTime(sides.a.mbForward, sides.replicasA, s, m),
                            microbatchTime(sides.b.mbForward, sides.replicasB, s, m)};
            md.backwardNs = {microbatchTime(sides.a.mbBackward, sides.replicasA, s, m),
                             microbatchTime(sides.b.mbBackward, sides.replicasB, s, m)};
            if (md.forwardNs.a || md.forwardNs.b || md.backwardNs.a || md.backwardNs.b)
                d.microbatches.push_back(md);
        }
}

// The critical path's length and time by kind (0 where a run with a path has none of a kind).
void compareCriticalPaths(const AnalysisResult& ra, const AnalysisResult& rb, DiffResult& d)
{
    if (ra.criticalPath.end > ra.criticalPath.start)
        d.criticalPathNs.a = ra.criticalPath.end - ra.criticalPath.start;
    if (rb.criticalPath.end > rb.criticalPath.start)
        d.criticalPathNs.b = rb.criticalPath.end - rb.criticalPath.start;
    for (const auto& [kind, t] : ra.criticalPath.byKind)
        d.criticalPathByKind[kind].a = t;
    for (const auto& [kind, t] : rb.criticalPath.byKind)
        d.criticalPathByKind[kind].b = t;
    if (d.criticalPathNs.a)
        for (auto& [kind, v] : d.criticalPathByKind)
            if (!v.a)
                v.a = 0;
    if (d.criticalPathNs.b)
        for (auto& [kind, v] : d.criticalPathByKind)
            if (!v.b)
                v.b = 0;
}

using KernelSums = std::map<std::pair<int, std::string>, KernelSum>;

// Kernels per stage and name: A's joined with B's, then B's that A lacks.
std::vector<KernelDiff> joinKernels(const KernelSums& ka, const KernelSums& kb, DiffResult& d)
{
    std::vector<KernelDiff> all;
    auto join = [&](const KernelSums& from, bool isA) {
        for (const auto& [key, sum] : from) {
            auto other = (isA ? kb : ka).find(key);
            if (!isA && other != ka.end())
                continue; // joined from A's side
            KernelDiff k;
            k.stage = key.first;
            k.name = key.second;
            k.workClass = sum.cls;
            (isA ? k.count.a : k.count.b) = sum.count;
            (isA ? k.totalNs.a : k.totalNs.b) = sum.totalNs;
            if (isA && other != kb.end()) {
                k.count.b = other->second.count;
                k.totalNs.b = other->second.totalNs;
            }
            k.change = !k.count.a ? KernelChange::Added
                       : !k.count.b ? KernelChange::Removed
                       : (*k.count.a != *k.count.b || *k.totalNs.a != *k.totalNs.b) ? KernelChange::Changed
                                                                                     : KernelChange::Same;
            d.kernelsAdded += k.change == KernelChange::Added;
            d.kernelsRemoved += k.change == KernelChange::Removed;
            all.push_back(std::move(k));
        }
    };
    join(ka, true);
    join(kb, false);
    return all;
}

// The kernels that changed, largest change first, at most options.topKernels.
void compareKernels(const RunInput& a, const RunInput& b, const DiffOptions& options, DiffResult& d)
{
    std::vector<KernelDiff> all = joinKernels(kernelsPerStage(*a.trace, *a.analysis), kernelsPerStage(*b.trace, *b.analysis), d);
    d.kernelNames = static_cast<int64_t>(all.size());
    auto change = [](const KernelDiff& k) { return std::llabs(k.totalNs.b.value_or(0) - k.totalNs.a.value_or(0)); };
    std::sort(all.begin(), all.end(), [&](const KernelDiff& x, const KernelDiff& y) {
        if (change(x) != change(y))
            return change(x) > change(y);
        if (x.stage != y.stage)
            return x.stage < y.stage;
        return x.name < y.name;
    });
    std::erase_if(all, [](const KernelDiff& k) { return k.change == KernelChange::Same; });
    if (static_cast<int>(all.size()) > options.topKernels)
        all.resize(static_cast<size_t>(std::max(0, options.topKernels)));
    d.kernels = std::move(all);
}

// A's prediction for B (a saved one, or replayed now) against B's iteration.
void checkPrediction(const RunInput& a, const RunInput& b, const DiffOptions& options, DiffResult& d)
{
    if (options.saved) {
        const JobIdentity id = jobIdentity(*a.trace, *a.analysis);
        if (!(id == options.saved->job))
            throw Error("the saved prediction is of another job (" + describe(options.saved->job) + "; run A has " +
                        describe(id) + "): give the run it was saved from as A");
        if (d.iterationNs.b)
            d.prediction = savedCheck(*options.saved, d.a, d.b, *d.iterationNs.b);
        else
            d.predictionWhyNot = "run B has no iteration to measure";
    } else if (d.iterationNs.b)
        d.prediction = predictionCheck(a, b, d.a, d.b, *d.iterationNs.b, d.stages, d.predictionWhyNot);
    else
        d.predictionWhyNot = "run B has no iteration to measure";
}

} // namespace

DiffResult diffRuns(const RunInput& a, const RunInput& b, const DiffOptions& options)
{
    if (!a.analysis || !a.trace || !b.analysis || !b.trace)
        throw Error("a comparison needs both runs analysed");
    const AnalysisResult& ra = *a.analysis;
    const AnalysisResult& rb = *b.analysis;
    DiffResult d;
    d.aName = a.name;
    d.bName = b.name;
    d.a = runConfig(ra, a.model);
    d.b = runConfig(rb, b.model);
    d.differences = configDifferences(d.a, d.b);
    compareIterations(ra, rb, d);
    compareIdle(ra, rb, d);
    const StageSides sides = stageSides(ra, rb);
    compareStages(ra, rb, sides, d);
    compareMicrobatches(sides, d);
    compareCriticalPaths(ra, rb, d);
    compareKernels(a, b, options, d);
    checkPrediction(a, b, options, d);
    return d;
}

} // namespace pipescope::compare
