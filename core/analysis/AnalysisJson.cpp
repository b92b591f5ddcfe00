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

} // namespace

json toJson(const AnalysisResult& r, const AnalyzeOptions& o)
{
    json j;
    j["schema"] = kAnalysisSchema;
    j["time_unit"] = "ns";
    j["options"] = {{"iteration", o.iteration ? json(*o.iteration) : json(nullptr)},
                    {"pp", o.pipelineDegree ? json(*o.pipelineDegree) : json(nullptr)},
                    {"iteration_range", o.iterationRange},
                    {"hta_compatible", o.htaCompatible},
                    {"all_iterations", o.allIterations},
                    {"launch_gap_ns", o.launchGapNs}};
    j["ranks"] = r.ranks;
    j["world_size"] = r.worldSize ? json(*r.worldSize) : json(nullptr);

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
    j["classification"] = {{"activities", kc}, {"streams", streams}};

    json iters = json::array();
    for (const auto& it : r.iterations) {
        json ranks = json::array();
        for (const auto& rs : it.ranks)
            ranks.push_back({{"rank", rs.rank}, {"start", rs.start}, {"end", rs.end}, {"duration", rs.end - rs.start}});
        iters.push_back({{"index", it.index}, {"label", it.label}, {"source", it.source}, {"start", it.start},
                         {"end", it.end}, {"duration", it.end - it.start}, {"ranks", ranks}});
    }
    j["iterations"] = iters;
    j["selected_iteration"] = r.selectedIteration;

    const auto& p = r.pipeline;
    json stageMap = json::array();
    for (const auto& a : p.stageMap)
        stageMap.push_back({{"rank", a.rank}, {"stage", a.stage}, {"replica", a.replica}});
    j["pipeline"] = {{"found", p.found}, {"reason", p.reason}, {"stage_source", p.stageSource},
                     {"pp", p.pp}, {"dp", p.dp}, {"chunks", p.chunks}, {"microbatches", p.microbatches},
                     {"labels_from", p.labelsFrom}, {"stage_map", stageMap},
                     {"schedule", {{"name", p.schedule}, {"confidence", p.scheduleConfidence}, {"evidence", p.scheduleEvidence},
                                   {"alike", alikeNames(p.scheduleAlike)}}}};

    json steps = json::array();
    for (const auto& s : r.steps)
        steps.push_back({{"iteration", s.iteration}, {"rank", s.rank}, {"stage", s.stage}, {"chunk", s.chunk},
                         {"microbatch", s.microbatch}, {"kind", std::string(1, toChar(s.kind))}, {"start", s.start},
                         {"end", s.end}, {"compute_ns", s.computeNs}, {"annotated", s.annotated}});
    j["steps"] = steps;

    json bubbles = json::array();
    for (const auto& b : r.bubbles)
        bubbles.push_back({{"iteration", b.iteration}, {"rank", b.rank}, {"start", b.start}, {"end", b.end},
                           {"cause", toString(b.cause)}});
    j["bubbles"] = bubbles;

    json perRank = json::array();
    std::array<TimeNs, kBubbleCauses> total{};
    TimeNs window = 0, idle = 0;
    for (const auto& ri : r.idle) {
        perRank.push_back({{"iteration", ri.iteration}, {"rank", ri.rank}, {"stage", ri.stage}, {"window_ns", ri.windowNs},
                           {"busy_ns", ri.busyNs}, {"idle_ns", ri.idleNs},
                           {"idle_fraction", ri.windowNs > 0 ? round4(static_cast<double>(ri.idleNs) / static_cast<double>(ri.windowNs)) : 0.0},
                           {"by_cause", causes(ri.byCause)}});
        if (ri.iteration == r.selectedIteration) {
            for (int c = 0; c < kBubbleCauses; ++c)
                total[static_cast<size_t>(c)] += ri.byCause[static_cast<size_t>(c)];
            window += ri.windowNs;
            idle += ri.idleNs;
        }
    }
    j["idle"] = {{"per_rank", perRank},
                 {"selected", {{"window_ns", window}, {"idle_ns", idle},
                               {"idle_fraction", window > 0 ? round4(static_cast<double>(idle) / static_cast<double>(window)) : 0.0},
                               {"by_cause", causes(total)}}}};

    const auto& im = r.imbalance;
    json st = json::array();
    for (const auto& s : im.stages)
        st.push_back({{"stage", s.stage}, {"ranks", s.ranks}, {"busy_ns", s.busyNs}, {"forward", dist(s.forwardNs)},
                      {"backward", dist(s.backwardNs)}, {"backward_input", dist(s.backwardInputNs)},
                      {"backward_weight", dist(s.backwardWeightNs)}});
    json strag = json::array();
    for (const auto& s : im.stragglers)
        strag.push_back({{"stage", s.stage}, {"rank", s.rank}, {"replica", s.replica}, {"busy_ns", s.busyNs},
                         {"compute_ns", s.computeNs}, {"peer_median_ns", s.peerMedianNs}, {"relative_compute", round4(s.relative)},
                         {"cost_ns", s.costNs}});
    json speed = json::array();
    for (const auto& x : im.rankSpeed)
        speed.push_back({{"rank", x.rank}, {"stage", x.stage}, {"replica", x.replica}, {"steps", x.steps},
                         {"compute_ns", x.computeNs}, {"peer_median_ns", x.peerMedianNs},
                         {"relative_compute", x.relative ? json(round4(*x.relative)) : json(nullptr)}});
    json ov = json::array();
    for (const auto& x : im.overlap)
        ov.push_back({{"rank", x.rank}, {"comm_ns", x.commNs}, {"overlapped_ns", x.overlappedNs},
                      {"overlap_fraction", x.commNs > 0 ? json(round4(static_cast<double>(x.overlappedNs) / static_cast<double>(x.commNs))) : json(nullptr)}});
    j["imbalance"] = {{"stages", st}, {"max_over_mean", round4(im.maxOverMean)}, {"bottleneck_stage", im.bottleneckStage},
                      {"stragglers", strag}, {"rank_speed", speed}, {"iteration_ns", im.iterationNs},
                      {"balanced_lower_bound_ns", im.balancedLowerBoundNs},
                      {"ideal_bubble_fraction", round4(im.idealBubbleFraction)}, {"overlap", ov}};

    const auto& cp = r.criticalPath;
    json segs = json::array();
    for (const auto& s : cp.segments)
        segs.push_back({{"rank", s.rank}, {"stage", s.stage}, {"kind", s.kind}, {"start", s.start}, {"end", s.end}});
    json byStage = json::array();
    for (const auto& [stage, ns] : cp.byStage)
        byStage.push_back({{"stage", stage}, {"ns", ns}});
    j["critical_path"] = {{"iteration", cp.iteration}, {"start", cp.start}, {"end", cp.end}, {"segments", segs},
                          {"by_stage", byStage}, {"by_kind", cp.byKind}};

    const auto& h = r.hta;
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
    j["hta"] = {{"mode", h.htaCompatible ? "hta-compatible" : "exact"}, {"temporal_breakdown", tb},
                {"idle_breakdown", idl}, {"notes", h.notes}};

    // Per-layer costs: one array, each layer with its role in the model.
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
    addLayers(r.layers.before, "before");
    addLayers(r.layers.layers, "layer");
    addLayers(r.layers.after, "after");
    j["layers"] = layers;
    j["layer_source"] = {{"source", r.layers.source}, {"note", r.layers.note},
                         {"attributed_ns", r.layers.attributedNs}, {"compute_ns", r.layers.computeNs}};

    const Verdict v = verdict(r);
    j["verdict"] = {{"kind", v.kind}, {"headline", v.headline}, {"facts", v.facts}, {"loss_ns", v.lossNs}};

    json w = json::array();
    for (const auto& x : r.warnings)
        w.push_back({{"kind", x.kind}, {"message", x.message}});
    j["warnings"] = w;

    json fillCauses = json::array(), edges = json::array(), fillStages = json::array();
    for (int c = 0; c < kBubbleCauses; ++c)
        if (isFillable(static_cast<BubbleCause>(c)))
            fillCauses.push_back(std::string(toString(static_cast<BubbleCause>(c))));
    for (int k = 1; k < kFillableBuckets; ++k)
        edges.push_back(fillableBucketStartNs(k));
    for (const auto& f : r.fillableBubbles)
        fillStages.push_back({{"iteration", f.iteration}, {"stage", f.stage}, {"rank", f.rank}, {"count", f.count},
                              {"total_ns", f.totalNs}, {"longest_ns", f.longestNs}, {"histogram", f.histogram}});
    j["fillable_bubbles"] = {{"causes", fillCauses}, {"bucket_edges_ns", edges}, {"per_stage", fillStages}};

    const AllToAll& a2a = r.allToAll;
    json a2aRanks = json::array(), a2aStages = json::array();
    for (const auto& x : a2a.ranks)
        a2aRanks.push_back({{"rank", x.rank}, {"stage", x.stage}, {"replica", x.replica}, {"count", x.count}, {"bytes", x.bytes},
                            {"kernel_ns", x.kernelNs}, {"window_ns", x.windowNs}, {"critical_ns", x.criticalNs}});
    for (const auto& x : a2a.stages)
        a2aStages.push_back({{"stage", x.stage}, {"ranks", x.ranks}, {"mean_kernel_ns", x.meanKernelNs}, {"share", x.share}});
    j["all_to_all"] = {{"iteration", r.selectedIteration}, {"per_rank", a2aRanks}, {"per_stage", a2aStages},
                       {"min_ns", a2a.minNs}, {"median_ns", a2a.medianNs}, {"max_ns", a2a.maxNs},
                       {"critical_ns", a2a.criticalNs}, {"critical_share", a2a.criticalShare}};

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
    j["microbatches"] = {{"iteration", r.selectedIteration}, {"count", mbs.microbatches}, {"size", mbs.size},
                         {"cv", mbs.cv}, {"uneven", mbs.uneven}, {"shortest", mbs.shortest}, {"longest", mbs.longest},
                         {"per_stage", mbStages}};

    json memRanks = json::array();
    for (const MeasuredMemory& m : r.memory)
        memRanks.push_back({{"rank", m.rank}, {"stage", m.stage}, {"device", m.device}, {"absolute", m.absolute},
                            {"start_bytes", m.startBytes}, {"peak_bytes", m.peakBytes}, {"peak_at", m.peakAt},
                            {"min_bytes", m.minBytes}, {"end_bytes", m.endBytes},
                            {"peak_reserved_bytes", m.peakReservedBytes ? json(*m.peakReservedBytes) : json(nullptr)},
                            {"events", m.events}});
    j["memory"] = {{"iteration", r.selectedIteration}, {"per_rank", memRanks}};
    return j;
}

} // namespace pipescope
