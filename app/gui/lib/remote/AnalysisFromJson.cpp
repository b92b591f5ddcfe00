#include "remote/AnalysisFromJson.h"

#include "analysis/AnalysisJson.h"
#include "util/Error.h"

#include <cmath>

namespace pipescope::gui {

namespace {

using json = nlohmann::json;

// The enum value whose name is `name`, among the first `count`.
template <class E>
E named(const json& v, int count, const char* what)
{
    const std::string name = v.get<std::string>();
    for (int i = 0; i < count; ++i)
        if (toString(static_cast<E>(i)) == name)
            return static_cast<E>(i);
    throw FormatError(std::string("the server's analysis: unknown ") + what + " '" + name + "'");
}

template <class T>
std::optional<T> optional(const json& v)
{
    return v.is_null() ? std::nullopt : std::optional<T>(v.get<T>());
}

std::array<TimeNs, kBubbleCauses> causes(const json& j)
{
    std::array<TimeNs, kBubbleCauses> out{};
    for (int c = 0; c < kBubbleCauses; ++c)
        out[static_cast<size_t>(c)] = j.value(std::string(toString(static_cast<BubbleCause>(c))), TimeNs{0});
    return out;
}

Distribution dist(const json& j)
{
    return {j.at("count").get<int64_t>(), j.at("mean_ns").get<double>(), j.at("p50_ns").get<double>(),
            j.at("p95_ns").get<double>()};
}

void readClassification(const json& j, AnalysisResult& r)
{
    for (int c = 0; c < 7; ++c)
        r.kernelCounts[static_cast<size_t>(c)] = j.at("activities").value(std::string(toString(static_cast<WorkClass>(c))), int64_t{0});
    for (const json& s : j.at("streams")) {
        StreamClass sc;
        sc.rank = s.at("rank").get<int>();
        sc.stream = s.at("stream").get<int64_t>();
        sc.storeId = s.at("store_id").get<int64_t>();
        sc.role = named<StreamRole>(s.at("role"), 4, "stream role");
        for (int c = 0; c < 7; ++c) {
            const std::string k(toString(static_cast<WorkClass>(c)));
            sc.count[static_cast<size_t>(c)] = s.at("count").value(k, int64_t{0});
            sc.timeNs[static_cast<size_t>(c)] = s.at("time_ns").value(k, TimeNs{0});
        }
        r.streams.push_back(sc);
    }
}

void readIterations(const json& j, AnalysisResult& r)
{
    for (const json& it : j) {
        Iteration x;
        x.index = it.at("index").get<int>();
        x.label = it.at("label").get<std::string>();
        x.source = named<IterationSource>(it.at("source"), 5, "iteration source");
        x.start = it.at("start").get<TimeNs>();
        x.end = it.at("end").get<TimeNs>();
        for (const json& rs : it.at("ranks"))
            x.ranks.push_back({rs.at("rank").get<int>(), rs.at("start").get<TimeNs>(), rs.at("end").get<TimeNs>()});
        r.iterations.push_back(std::move(x));
    }
}

void readPipeline(const json& j, PipelineStructure& p)
{
    p.found = j.at("found").get<bool>();
    p.reason = j.at("reason").get<std::string>();
    p.stageSource = named<StageSource>(j.at("stage_source"), 4, "stage source");
    p.pp = j.at("pp").get<int>();
    p.dp = j.at("dp").get<int>();
    p.chunks = j.at("chunks").get<int>();
    p.microbatches = j.at("microbatches").get<int>();
    p.labelsFrom = named<StepLabels>(j.at("labels_from"), 4, "step labels");
    for (const json& a : j.at("stage_map"))
        p.stageMap.push_back({a.at("rank").get<int>(), a.at("stage").get<int>(), a.at("replica").get<int>()});
    const json& s = j.at("schedule");
    p.schedule = scheduleKindFromString(s.at("name").get<std::string>());
    p.scheduleConfidence = s.at("confidence").get<double>();
    p.scheduleEvidence = s.at("evidence").get<std::string>();
    for (const json& a : s.at("alike"))
        if (auto k = scheduleKindFromString(a.get<std::string>()))
            p.scheduleAlike.push_back(*k);
}

StepKind stepKind(const json& v)
{
    const std::string k = v.get<std::string>();
    for (int i = 0; i < 4; ++i)
        if (k.size() == 1 && toChar(static_cast<StepKind>(i)) == k[0])
            return static_cast<StepKind>(i);
    throw FormatError("the server's analysis: unknown step kind '" + k + "'");
}

void readSteps(const json& j, AnalysisResult& r)
{
    r.steps.reserve(j.size());
    for (const json& s : j)
        r.steps.push_back({s.at("iteration").get<int>(), s.at("rank").get<int>(), s.at("stage").get<int>(), s.at("chunk").get<int>(),
                           s.at("microbatch").get<int>(), stepKind(s.at("kind")), s.at("start").get<TimeNs>(), s.at("end").get<TimeNs>(),
                           s.at("compute_ns").get<TimeNs>(), s.at("annotated").get<bool>()});
}

void readBubbles(const json& j, AnalysisResult& r)
{
    r.bubbles.reserve(j.size());
    for (const json& b : j)
        r.bubbles.push_back({b.at("iteration").get<int>(), b.at("rank").get<int>(), b.at("start").get<TimeNs>(), b.at("end").get<TimeNs>(),
                             named<BubbleCause>(b.at("cause"), kBubbleCauses, "bubble cause")});
}

void readIdle(const json& j, AnalysisResult& r)
{
    for (const json& x : j.at("per_rank")) {
        RankIdle ri;
        ri.iteration = x.at("iteration").get<int>();
        ri.rank = x.at("rank").get<int>();
        ri.stage = x.at("stage").get<int>();
        ri.windowNs = x.at("window_ns").get<TimeNs>();
        ri.busyNs = x.at("busy_ns").get<TimeNs>();
        ri.idleNs = x.at("idle_ns").get<TimeNs>();
        ri.byCause = causes(x.at("by_cause"));
        if (x.contains("waited_on"))
            for (const json& w : x.at("waited_on"))
                ri.waitedOn.emplace_back(w.at("virtual_stage").get<int>(), w.at("ns").get<TimeNs>());
        r.idle.push_back(std::move(ri));
    }
}

void readImbalance(const json& j, Imbalance& im)
{
    for (const json& s : j.at("stages"))
        im.stages.push_back({s.at("stage").get<int>(), s.at("ranks").get<std::vector<int>>(), dist(s.at("forward")),
                             dist(s.at("backward")), dist(s.at("backward_input")), dist(s.at("backward_weight")),
                             s.at("busy_ns").get<TimeNs>()});
    im.maxOverMean = j.at("max_over_mean").get<double>();
    im.bottleneckStage = j.at("bottleneck_stage").get<int>();
    for (const json& s : j.at("stragglers"))
        im.stragglers.push_back({s.at("stage").get<int>(), s.at("rank").get<int>(), s.at("replica").get<int>(),
                                 s.at("busy_ns").get<TimeNs>(), s.at("compute_ns").get<TimeNs>(), s.at("peer_median_ns").get<TimeNs>(),
                                 s.at("relative_compute").get<double>(), s.at("cost_ns").get<TimeNs>(),
                                 s.at("slowest_iterations").get<int>(), s.at("iterations").get<int>()});
    for (const json& m : j.at("moving_slowest")) {
        MovingSlowest ms;
        ms.stage = m.at("stage").get<int>();
        ms.iterations = m.at("iterations").get<int>();
        for (const json& w : m.at("slowest"))
            ms.slowest.emplace_back(w.at("rank").get<int>(), w.at("iterations").get<int>());
        im.movingSlowest.push_back(std::move(ms));
    }
    for (const json& x : j.at("rank_speed"))
        im.rankSpeed.push_back({x.at("rank").get<int>(), x.at("stage").get<int>(), x.at("replica").get<int>(), x.at("steps").get<int>(),
                                x.at("compute_ns").get<TimeNs>(), x.at("peer_median_ns").get<TimeNs>(),
                                optional<double>(x.at("relative_compute"))});
    im.iterationNs = j.at("iteration_ns").get<TimeNs>();
    im.balancedLowerBoundNs = j.at("balanced_lower_bound_ns").get<TimeNs>();
    im.idealBubbleFraction = j.at("ideal_bubble_fraction").get<double>();
    for (const json& x : j.at("overlap"))
        im.overlap.push_back({x.at("rank").get<int>(), x.at("comm_ns").get<TimeNs>(), x.at("overlapped_ns").get<TimeNs>()});
}

void readCriticalPath(const json& j, CriticalPath& cp)
{
    cp.iteration = j.at("iteration").get<int>();
    cp.start = j.at("start").get<TimeNs>();
    cp.end = j.at("end").get<TimeNs>();
    cp.segments.reserve(j.at("segments").size());
    for (const json& s : j.at("segments"))
        cp.segments.push_back({s.at("rank").get<int>(), s.at("stage").get<int>(), named<PathKind>(s.at("kind"), 11, "critical path kind"),
                               s.at("start").get<TimeNs>(), s.at("end").get<TimeNs>()});
    for (const json& s : j.at("by_stage"))
        cp.byStage[s.at("stage").get<int>()] = s.at("ns").get<TimeNs>();
    cp.byKind = j.at("by_kind").get<std::map<std::string, TimeNs>>();
}

void readHta(const json& j, HtaViews& h)
{
    h.htaCompatible = j.at("mode").get<std::string>() == "hta-compatible";
    for (const json& x : j.at("temporal_breakdown")) {
        HtaTemporal t;
        t.rank = x.at("rank").get<int>();
        t.kernelTimeNs = x.at("kernel_time_ns").get<TimeNs>();
        t.idleTimeNs = x.at("idle_time_ns").get<TimeNs>();
        t.computeTimeNs = x.at("compute_time_ns").get<TimeNs>();
        t.nonComputeTimeNs = x.at("non_compute_time_ns").get<TimeNs>();
        t.commCompOverlapPct = optional<double>(x.at("comm_comp_overlap_pct"));
        t.rounded = x.at("rounded_to_us").get<bool>();
        t.lastStepDropped = x.at("last_step_dropped").get<bool>();
        h.temporal.push_back(t);
    }
    for (const json& x : j.at("idle_breakdown"))
        h.idle.push_back({x.at("rank").get<int>(), x.at("stream").get<int64_t>(), x.at("host_wait_ns").get<TimeNs>(),
                          x.at("kernel_wait_ns").get<TimeNs>(), x.at("other_ns").get<TimeNs>()});
    h.notes = j.at("notes").get<std::vector<std::string>>();
}

void readLayers(const json& layers, const json& source, LayerAttribution& la)
{
    for (const json& x : layers) {
        LayerCost l{x.at("name").get<std::string>(), x.at("stage").get<int>(), x.at("forward_ns").get<TimeNs>(),
                    x.at("backward_ns").get<TimeNs>(), optional<TimeNs>(x.at("backward_input_ns")),
                    optional<TimeNs>(x.at("backward_weight_ns"))};
        const std::string role = x.at("role").get<std::string>();
        (role == "before" ? la.before : role == "after" ? la.after : la.layers).push_back(std::move(l));
    }
    la.source = named<LayerRangeKind>(source.at("source"), 3, "layer source");
    la.note = source.at("note").get<std::string>();
    la.attributedNs = source.at("attributed_ns").get<TimeNs>();
    la.computeNs = source.at("compute_ns").get<TimeNs>();
}

void readFillable(const json& j, AnalysisResult& r)
{
    for (const json& f : j.at("per_stage")) {
        FillableBubbles fb;
        fb.iteration = f.at("iteration").get<int>();
        fb.stage = f.at("stage").get<int>();
        fb.rank = f.at("rank").get<int>();
        fb.count = f.at("count").get<int64_t>();
        fb.totalNs = f.at("total_ns").get<TimeNs>();
        fb.longestNs = f.at("longest_ns").get<TimeNs>();
        const auto h = f.at("histogram").get<std::vector<int64_t>>();
        for (size_t k = 0; k < h.size() && k < fb.histogram.size(); ++k)
            fb.histogram[k] = h[k];
        r.fillableBubbles.push_back(fb);
    }
}

void readAllToAll(const json& j, AllToAll& a)
{
    for (const json& x : j.at("per_rank"))
        a.ranks.push_back({x.at("rank").get<int>(), x.at("stage").get<int>(), x.at("replica").get<int>(), x.at("count").get<int64_t>(),
                           x.at("bytes").get<int64_t>(), x.at("kernel_ns").get<TimeNs>(), x.at("window_ns").get<TimeNs>(),
                           x.at("critical_ns").get<TimeNs>()});
    for (const json& x : j.at("per_stage"))
        a.stages.push_back({x.at("stage").get<int>(), x.at("ranks").get<int>(), x.at("mean_kernel_ns").get<TimeNs>(),
                            x.at("share").get<double>()});
    a.minNs = j.at("min_ns").get<TimeNs>();
    a.medianNs = j.at("median_ns").get<TimeNs>();
    a.maxNs = j.at("max_ns").get<TimeNs>();
    a.criticalNs = j.at("critical_ns").get<TimeNs>();
    a.criticalShare = j.at("critical_share").get<double>();
}

MicrobatchTimes times(const json& t)
{
    return {t.at("min_ns").get<TimeNs>(), t.at("p50_ns").get<TimeNs>(), t.at("p95_ns").get<TimeNs>(), t.at("max_ns").get<TimeNs>(),
            t.at("shortest").get<int>(), t.at("longest").get<int>()};
}

void readMicrobatches(const json& j, MicrobatchSpread& m)
{
    m.microbatches = j.at("count").get<int>();
    for (const json& s : j.at("per_stage"))
        m.stages.push_back({s.at("stage").get<int>(), s.at("forward_ns").get<std::vector<TimeNs>>(),
                            s.at("backward_ns").get<std::vector<TimeNs>>(), times(s.at("forward")), times(s.at("backward"))});
    m.size = j.at("size").get<std::vector<double>>();
    m.cv = j.at("cv").get<double>();
    m.uneven = j.at("uneven").get<bool>();
    m.shortest = j.at("shortest").get<int>();
    m.longest = j.at("longest").get<int>();
}

void readMemory(const json& j, AnalysisResult& r)
{
    for (const json& m : j.at("per_rank"))
        r.memory.push_back({m.at("rank").get<int>(), m.at("stage").get<int>(), m.at("device").get<int>(), m.at("absolute").get<bool>(),
                            m.at("start_bytes").get<int64_t>(), m.at("peak_bytes").get<int64_t>(), m.at("peak_at").get<TimeNs>(),
                            m.at("min_bytes").get<int64_t>(), m.at("end_bytes").get<int64_t>(),
                            optional<int64_t>(m.at("peak_reserved_bytes")), m.at("events").get<int64_t>()});
}

// The numbers the views use as indices and sizes, in the ranges a local
// analysis gives them: a server that sends others (a damaged or a hostile one)
// is refused with one line instead of reaching a view.
void checkRanges(const AnalysisResult& r)
{
    auto fail = [](const std::string& what) { throw FormatError("the server's analysis: " + what + "; the session is closed"); };
    const int iterations = static_cast<int>(r.iterations.size());
    const PipelineStructure& p = r.pipeline;
    constexpr int kMaxRank = 1 << 24, kMaxStages = 1 << 16, kMaxMicrobatches = 1 << 20, kMaxChunks = 256;
    if (p.pp < 1 || p.pp > kMaxStages || p.dp < 1 || p.dp > kMaxRank || p.chunks < 1 || p.chunks > kMaxChunks ||
        p.microbatches < 0 || p.microbatches > kMaxMicrobatches)
        fail("a pipeline of pp " + std::to_string(p.pp) + ", dp " + std::to_string(p.dp) + ", " + std::to_string(p.chunks) +
             " chunks and " + std::to_string(p.microbatches) + " microbatches");
    if (r.selectedIteration < -1 || r.selectedIteration >= iterations)
        fail("the analysed iteration " + std::to_string(r.selectedIteration) + " of " + std::to_string(iterations));
    auto rank = [&](int x) {
        if (x < 0 || x >= kMaxRank)
            fail("rank " + std::to_string(x));
    };
    auto iteration = [&](int x) {
        if (x < 0 || x >= iterations)
            fail("iteration " + std::to_string(x) + " of " + std::to_string(iterations));
    };
    auto span = [&](TimeNs a, TimeNs b) {
        if (b < a)
            fail("an item that ends before it starts");
    };
    for (int x : r.ranks)
        rank(x);
    for (const StageAssignment& a : p.stageMap) {
        rank(a.rank);
        if (a.stage < -1 || a.stage >= p.pp * p.chunks || a.replica < 0 || a.replica >= kMaxRank)
            fail("stage " + std::to_string(a.stage) + " of replica " + std::to_string(a.replica) + " for rank " + std::to_string(a.rank));
    }
    for (const Step& s : r.steps) {
        rank(s.rank);
        iteration(s.iteration);
        span(s.start, s.end);
        if (s.stage < 0 || s.stage >= kMaxStages || s.chunk < 0 || s.chunk >= kMaxChunks || s.microbatch < 0 || s.microbatch >= kMaxMicrobatches)
            fail("a step of stage " + std::to_string(s.stage) + ", chunk " + std::to_string(s.chunk) + ", microbatch " + std::to_string(s.microbatch));
    }
    for (const Bubble& b : r.bubbles) {
        rank(b.rank);
        iteration(b.iteration);
        span(b.start, b.end);
    }
    for (const RankIdle& i : r.idle) {
        rank(i.rank);
        iteration(i.iteration);
    }
    for (const PathSegment& s : r.criticalPath.segments) {
        rank(s.rank);
        span(s.start, s.end);
    }
    for (const Iteration& it : r.iterations)
        span(it.start, it.end);
}

} // namespace

AnalysisResult analysisFromJson(const json& doc)
{
    if (!doc.is_object() || doc.value("schema", std::string()) != kAnalysisSchema)
        throw FormatError(std::string("the server's analysis is not a ") + kAnalysisSchema + " document");
    AnalysisResult r;
    try {
        r.ranks = doc.at("ranks").get<std::vector<int>>();
        r.worldSize = optional<int>(doc.at("world_size"));
        readClassification(doc.at("classification"), r);
        readIterations(doc.at("iterations"), r);
        r.selectedIteration = doc.at("selected_iteration").get<int>();
        readPipeline(doc.at("pipeline"), r.pipeline);
        readSteps(doc.at("steps"), r);
        readBubbles(doc.at("bubbles"), r);
        readIdle(doc.at("idle"), r);
        readImbalance(doc.at("imbalance"), r.imbalance);
        readCriticalPath(doc.at("critical_path"), r.criticalPath);
        readHta(doc.at("hta"), r.hta);
        readLayers(doc.at("layers"), doc.at("layer_source"), r.layers);
        for (const json& w : doc.at("warnings"))
            r.warnings.push_back({w.at("kind").get<std::string>(), w.at("message").get<std::string>()});
        readFillable(doc.at("fillable_bubbles"), r);
        readAllToAll(doc.at("all_to_all"), r.allToAll);
        readMicrobatches(doc.at("microbatches"), r.microbatchSpread);
        readMemory(doc.at("memory"), r);
    } catch (const json::exception& e) {
        throw FormatError(std::string("the server's analysis: ") + e.what() +
                          "; the server and this pipescope may differ in version");
    }
    checkRanges(r);
    return r;
}

json wholeAnalysisDocument(json summary, json steps, json bubbles, json segments)
{
    summary.erase("summary");
    summary["steps"] = std::move(steps);
    summary["bubbles"] = std::move(bubbles);
    if (summary.contains("critical_path") && summary["critical_path"].is_object())
        summary["critical_path"]["segments"] = std::move(segments);
    return summary;
}

} // namespace pipescope::gui
