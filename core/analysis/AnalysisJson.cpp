#include "analysis/AnalysisJson.h"

#include "analysis/Verdict.h"

#include <cmath>

namespace pipescope {

namespace {

using json = nlohmann::json;

json causes(const std::array<TimeNs, kBubbleCauses>& v)
{
    json j = json::object();
    for (int c = 0; c < kBubbleCauses; ++c)
        j[std::string(toString(static_cast<BubbleCause>(c)))] = v[static_cast<size_t>(c)];
    return j;
}

json alikeNames(const std::vector<ScheduleKind>& kinds)
{
    json a = json::array();
    for (ScheduleKind k : kinds)
        a.push_back(std::string(toString(k)));
    return a;
}

json dist(const Distribution& d)
{
    return {{"count", d.count}, {"mean_ns", std::llround(d.mean)}, {"p50_ns", std::llround(d.p50)}, {"p95_ns", std::llround(d.p95)}};
}

double round4(double v) { return std::round(v * 10000.0) / 10000.0; }

json optionsJson(const AnalyzeOptions& o)
{
    return {{"iteration", o.iteration ? json(*o.iteration) : json(nullptr)},
            {"pp", o.pipelineDegree ? json(*o.pipelineDegree) : json(nullptr)},
            {"iteration_range", o.iterationRange},
            {"hta_compatible", o.htaCompatible},
            {"all_iterations", o.allIterations},
            {"launch_gap_ns", o.launchGapNs}};
}

json classificationJson(const AnalysisResult& r)
{
    json kc = json::object();
    for (int c = 0; c < 7; ++c)
        kc[std::string(toString(static_cast<WorkClass>(c)))] = r.kernelCounts[static_cast<size_t>(c)];
    json streams = json::array();
    for (const auto& s : r.streams) {
        json busy = json::object(), count = json::object();
        for (int c = 0; c < 7; ++c) {
            if (s.count[static_cast<size_t>(c)] == 0)
                continue;
            busy[std::string(toString(static_cast<WorkClass>(c)))] = s.timeNs[static_cast<size_t>(c)];
            count[std::string(toString(static_cast<WorkClass>(c)))] = s.count[static_cast<size_t>(c)];
        }
        streams.push_back({{"rank", s.rank}, {"stream", s.stream}, {"store_id", s.storeId},
                           {"role", toString(s.role)}, {"count", count}, {"time_ns", busy}});
    }
    return {{"activities", kc}, {"streams", streams}};
}

json iterationsJson(const AnalysisResult& r)
{
    json iters = json::array();
    for (const auto& it : r.iterations) {
        json ranks = json::array();
        for (const auto& rs : it.ranks)
            ranks.push_back({{"rank", rs.rank}, {"start", rs.start}, {"end", rs.end}, {"duration", rs.end - rs.start}});
        iters.push_back({{"index", it.index}, {"label", it.label}, {"source", toString(it.source)}, {"start", it.start},
                         {"end", it.end}, {"duration", it.end - it.start}, {"ranks", ranks}});
    }
    return iters;
}

json pipelineJson(const PipelineStructure& p)
{
    json stageMap = json::array();
    for (const auto& a : p.stageMap)
        stageMap.push_back({{"rank", a.rank}, {"stage", a.stage}, {"replica", a.replica}});
    return {{"found", p.found}, {"reason", p.reason}, {"stage_source", toString(p.stageSource)},
            {"pp", p.pp}, {"dp", p.dp}, {"chunks", p.chunks}, {"microbatches", p.microbatches},
            {"labels_from", toString(p.labelsFrom)}, {"stage_map", stageMap},
            {"schedule", {{"name", scheduleName(p.schedule)}, {"confidence", p.scheduleConfidence}, {"evidence", p.scheduleEvidence},
                          {"alike", alikeNames(p.scheduleAlike)}}}};
}

json stepsJson(const AnalysisResult& r)
{
    json steps = json::array();
    for (const auto& s : r.steps)
        steps.push_back({{"iteration", s.iteration}, {"rank", s.rank}, {"stage", s.stage}, {"chunk", s.chunk},
                         {"microbatch", s.microbatch}, {"kind", std::string(1, toChar(s.kind))}, {"start", s.start},
                         {"end", s.end}, {"compute_ns", s.computeNs}, {"annotated", s.annotated}});
    return steps;
}

json bubblesJson(const AnalysisResult& r)
{
    json bubbles = json::array();
    for (const auto& b : r.bubbles)
        bubbles.push_back({{"iteration", b.iteration}, {"rank", b.rank}, {"start", b.start}, {"end", b.end},
                           {"cause", toString(b.cause)}});
    return bubbles;
}

// Every rank's idle time in every iteration, and the selected iteration's sum.
json idleJson(const AnalysisResult& r)
{
    json perRank = json::array();
    std::array<TimeNs, kBubbleCauses> total{};
    TimeNs window = 0, idle = 0;
    for (const auto& ri : r.idle) {
        perRank.push_back({{"iteration", ri.iteration}, {"rank", ri.rank}, {"stage", ri.stage}, {"window_ns", ri.windowNs},
                           {"busy_ns", ri.busyNs}, {"idle_ns", ri.idleNs},
                           {"idle_fraction", ri.windowNs > 0 ? round4(static_cast<double>(ri.idleNs) / static_cast<double>(ri.windowNs)) : 0.0},
                           {"by_cause", causes(ri.byCause)}});
        if (!ri.waitedOn.empty()) {
            json w = json::array();
            for (const auto& [vs, ns] : ri.waitedOn)
                w.push_back({{"virtual_stage", vs}, {"ns", ns}});
            perRank.back()["waited_on"] = std::move(w);
        }
        if (ri.iteration == r.selectedIteration) {
            for (int c = 0; c < kBubbleCauses; ++c)
                total[static_cast<size_t>(c)] += ri.byCause[static_cast<size_t>(c)];
            window += ri.windowNs;
            idle += ri.idleNs;
        }
    }
    return {{"per_rank", perRank},
            {"selected", {{"window_ns", window}, {"idle_ns", idle},
                          {"idle_fraction", window > 0 ? round4(static_cast<double>(idle) / static_cast<double>(window)) : 0.0},
                          {"by_cause", causes(total)}}}};
}

json imbalanceJson(const Imbalance& im)
{
    json st = json::array();
    for (const auto& s : im.stages)
        st.push_back({{"stage", s.stage}, {"ranks", s.ranks}, {"busy_ns", s.busyNs}, {"forward", dist(s.forwardNs)},
                      {"backward", dist(s.backwardNs)}, {"backward_input", dist(s.backwardInputNs)},
                      {"backward_weight", dist(s.backwardWeightNs)}});
    json strag = json::array();
    for (const auto& s : im.stragglers)
        strag.push_back({{"stage", s.stage}, {"rank", s.rank}, {"replica", s.replica}, {"busy_ns", s.busyNs},
                         {"compute_ns", s.computeNs}, {"peer_median_ns", s.peerMedianNs}, {"relative_compute", round4(s.relative)},
                         {"cost_ns", s.costNs}, {"slowest_iterations", s.slowestIterations}, {"iterations", s.iterations}});
    json moving = json::array();
    for (const auto& m : im.movingSlowest) {
        json who = json::array();
        for (const auto& [rank, n] : m.slowest)
            who.push_back({{"rank", rank}, {"iterations", n}});
        moving.push_back({{"stage", m.stage}, {"iterations", m.iterations}, {"slowest", who}});
    }
    json speed = json::array();
    for (const auto& x : im.rankSpeed)
        speed.push_back({{"rank", x.rank}, {"stage", x.stage}, {"replica", x.replica}, {"steps", x.steps},
                         {"compute_ns", x.computeNs}, {"peer_median_ns", x.peerMedianNs},
                         {"relative_compute", x.relative ? json(round4(*x.relative)) : json(nullptr)}});
    json ov = json::array();
    for (const auto& x : im.overlap)
        ov.push_back({{"rank", x.rank}, {"comm_ns", x.commNs}, {"overlapped_ns", x.overlappedNs},
                      {"overlap_fraction", x.commNs > 0 ? json(round4(static_cast<double>(x.overlappedNs) / static_cast<double>(x.commNs))) : json(nullptr)}});
    return {{"stages", st}, {"max_over_mean", round4(im.maxOverMean)}, {"bottleneck_stage", im.bottleneckStage},
            {"stragglers", strag}, {"moving_slowest", moving}, {"rank_speed", speed}, {"iteration_ns", im.iterationNs},
            {"balanced_lower_bound_ns", im.balancedLowerBoundNs},
            {"ideal_bubble_fraction", round4(im.idealBubbleFraction)}, {"overlap", ov}};
}

json criticalPathJson(const CriticalPath& cp)
{
    json segs = json::array();
    for (const auto& s : cp.segments)
        segs.push_back({{"rank", s.rank}, {"stage", s.stage}, {"kind", toString(s.kind)}, {"start", s.start}, {"end", s.end}});
    json byStage = json::array();
    for (const auto& [stage, ns] : cp.byStage)
        byStage.push_back({{"stage", stage}, {"ns", ns}});
    return {{"iteration", cp.iteration}, {"start", cp.start}, {"end", cp.end}, {"segments", segs},
            {"by_stage", byStage}, {"by_kind", cp.byKind}};
}

json htaJson(const HtaViews& h)
{
    json tb = json::array(), idl = json::array();
    for (const auto& x : h.temporal) {
        auto pct = [&](TimeNs v) { return x.kernelTimeNs > 0 ? std::round(10000.0 * static_cast<double>(v) / static_cast<double>(x.kernelTimeNs)) / 100.0 : 0.0; };
        tb.push_back({{"rank", x.rank}, {"kernel_time_ns", x.kernelTimeNs}, {"idle_time_ns", x.idleTimeNs},
                      {"compute_time_ns", x.computeTimeNs}, {"non_compute_time_ns", x.nonComputeTimeNs},
                      {"idle_pct", pct(x.idleTimeNs)}, {"compute_pct", pct(x.computeTimeNs)},
                      {"non_compute_pct", pct(x.nonComputeTimeNs)},
                      {"comm_comp_overlap_pct", x.commCompOverlapPct ? json(std::round(*x.commCompOverlapPct * 100) / 100) : json(nullptr)},
                      {"rounded_to_us", x.rounded}, {"last_step_dropped", x.lastStepDropped}});
    }
    for (const auto& x : h.idle)
        idl.push_back({{"rank", x.rank}, {"stream", x.stream}, {"host_wait_ns", x.hostWaitNs},
                       {"kernel_wait_ns", x.kernelWaitNs}, {"other_ns", x.otherNs}});
    return {{"mode", h.htaCompatible ? "hta-compatible" : "exact"}, {"temporal_breakdown", tb},
            {"idle_breakdown", idl}, {"notes", h.notes}};
}

// Per-layer costs: one array, each layer with its role in the model.
json layersJson(const LayerAttribution& la)
{
    json layers = json::array();
    auto addLayers = [&](const std::vector<LayerCost>& ls, const char* role) {
        for (const LayerCost& l : ls) {
            json x = {{"name", l.name}, {"role", role}, {"stage", l.stage}, {"forward_ns", l.forwardNs},
                      {"backward_ns", l.backwardNs}};
            x["backward_input_ns"] = l.backwardInputNs ? json(*l.backwardInputNs) : json(nullptr);
            x["backward_weight_ns"] = l.backwardWeightNs ? json(*l.backwardWeightNs) : json(nullptr);
            layers.push_back(std::move(x));
        }
    };
    addLayers(la.before, "before");
    addLayers(la.layers, "layer");
    addLayers(la.after, "after");
    return layers;
}

json layerSourceJson(const LayerAttribution& la)
{
    return {{"source", toString(la.source)}, {"note", la.note}, {"attributed_ns", la.attributedNs}, {"compute_ns", la.computeNs}};
}

json verdictJson(const AnalysisResult& r)
{
    const Verdict v = verdict(r);
    return {{"kind", toString(v.kind)}, {"headline", v.headline}, {"facts", v.facts}, {"loss_ns", v.lossNs}};
}

json warningsJson(const std::vector<Warning>& warnings)
{
    json w = json::array();
    for (const auto& x : warnings)
        w.push_back({{"kind", x.kind}, {"message", x.message}});
    return w;
}

json fillableJson(const AnalysisResult& r)
{
    json fillCauses = json::array(), edges = json::array(), fillStages = json::array();
    for (int c = 0; c < kBubbleCauses; ++c)
        if (isFillable(static_cast<BubbleCause>(c)))
            fillCauses.push_back(std::string(toString(static_cast<BubbleCause>(c))));
    for (int k = 1; k < kFillableBuckets; ++k)
        edges.push_back(fillableBucketStartNs(k));
    for (const auto& f : r.fillableBubbles)
        fillStages.push_back({{"iteration", f.iteration}, {"stage", f.stage}, {"rank", f.rank}, {"count", f.count},
                              {"total_ns", f.totalNs}, {"longest_ns", f.longestNs}, {"histogram", f.histogram}});
    return {{"causes", fillCauses}, {"bucket_edges_ns", edges}, {"per_stage", fillStages}};
}

json allToAllJson(const AnalysisResult& r)
{
    const AllToAll& a2a = r.allToAll;
    json a2aRanks = json::array(), a2aStages = json::array();
    for (const auto& x : a2a.ranks)
        a2aRanks.push_back({{"rank", x.rank}, {"stage", x.stage}, {"replica", x.replica}, {"count", x.count}, {"bytes", x.bytes},
                            {"kernel_ns", x.kernelNs}, {"window_ns", x.windowNs}, {"critical_ns", x.criticalNs}});
    for (const auto& x : a2a.stages)
        a2aStages.push_back({{"stage", x.stage}, {"ranks", x.ranks}, {"mean_kernel_ns", x.meanKernelNs}, {"share", x.share}});
    return {{"iteration", r.selectedIteration}, {"per_rank", a2aRanks}, {"per_stage", a2aStages},
            {"min_ns", a2a.minNs}, {"median_ns", a2a.medianNs}, {"max_ns", a2a.maxNs},
            {"critical_ns", a2a.criticalNs}, {"critical_share", a2a.criticalShare}};
}

json microbatchesJson(const AnalysisResult& r)
{
    const MicrobatchSpread& mbs = r.microbatchSpread;
    auto times = [](const MicrobatchTimes& t) {
        return json{{"min_ns", t.minNs}, {"p50_ns", t.p50Ns}, {"p95_ns", t.p95Ns}, {"max_ns", t.maxNs},
                    {"shortest", t.shortest}, {"longest", t.longest}};
    };
    json mbStages = json::array();
    for (const MicrobatchStage& mst : mbs.stages)
        mbStages.push_back({{"stage", mst.stage},
                            {"forward", times(mst.forward)},
                            {"backward", times(mst.backward)},
                            {"forward_ns", mst.forwardNs},
                            {"backward_ns", mst.backwardNs}});
    return {{"iteration", r.selectedIteration}, {"count", mbs.microbatches}, {"size", mbs.size},
            {"cv", mbs.cv}, {"uneven", mbs.uneven}, {"shortest", mbs.shortest}, {"longest", mbs.longest},
            {"per_stage", mbStages}};
}

json memoryJson(const AnalysisResult& r)
{
    json memRanks = json::array();
    for (const MeasuredMemory& m : r.memory)
        memRanks.push_back({{"rank", m.rank}, {"stage", m.stage}, {"device", m.device}, {"absolute", m.absolute},
                            {"start_bytes", m.startBytes}, {"peak_bytes", m.peakBytes}, {"peak_at", m.peakAt},
                            {"min_bytes", m.minBytes}, {"end_bytes", m.endBytes},
                            {"peak_reserved_bytes", m.peakReservedBytes ? json(*m.peakReservedBytes) : json(nullptr)},
                            {"events", m.events}});
    return {{"iteration", r.selectedIteration}, {"per_rank", memRanks}};
}

} // namespace

// The document is a std::map-keyed nlohmann::json: its keys print sorted,
// whatever order the sections are added in.
json toJson(const AnalysisResult& r, const AnalyzeOptions& o)
{
    json j;
    j["schema"] = kAnalysisSchema;
    j["time_unit"] = "ns";
    j["options"] = optionsJson(o);
    j["ranks"] = r.ranks;
    j["world_size"] = r.worldSize ? json(*r.worldSize) : json(nullptr);
    j["classification"] = classificationJson(r);
    j["iterations"] = iterationsJson(r);
    j["selected_iteration"] = r.selectedIteration;
    j["pipeline"] = pipelineJson(r.pipeline);
    j["steps"] = stepsJson(r);
    j["bubbles"] = bubblesJson(r);
    j["idle"] = idleJson(r);
    j["imbalance"] = imbalanceJson(r.imbalance);
    j["critical_path"] = criticalPathJson(r.criticalPath);
    j["hta"] = htaJson(r.hta);
    j["layers"] = layersJson(r.layers);
    j["layer_source"] = layerSourceJson(r.layers);
    j["verdict"] = verdictJson(r);
    j["warnings"] = warningsJson(r.warnings);
    j["fillable_bubbles"] = fillableJson(r);
    j["all_to_all"] = allToAllJson(r);
    j["microbatches"] = microbatchesJson(r);
    j["memory"] = memoryJson(r);
    return j;
}

} // namespace pipescope
