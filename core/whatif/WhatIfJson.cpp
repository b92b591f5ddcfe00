#include "whatif/WhatIfJson.h"
#include "whatif/WhatIfText.h"

#include "Version.h"

namespace pipescope::whatif {

using nlohmann::json;

namespace {

json causes(const BubbleTotals& t)
{
    json o = json::object();
    for (int c = 0; c < kBubbleCauseCount; ++c)
        o[std::string(toString(static_cast<BubbleCause>(c)))] = t[size_t(c)];
    return o;
}

json layerJson(const LayerCostModel& l)
{
    return json{{"name", l.name},
                {"forward_ns", l.forwardNs},
                {"backward_ns", l.backwardNs},
                {"backward_input_share", l.backwardInputShare},
                {"params", l.params},
                {"activation_bytes", l.activationBytes},
                {"frozen", l.frozen}};
}

json optionalNumber(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

// Per virtual stage: "none", "selective" or "full".
json recomputeJson(const std::vector<Recompute>& perStage)
{
    json out = json::array();
    for (Recompute r : perStage)
        out.push_back(std::string(toString(r)));
    return out;
}

json configJson(const Prediction& p)
{
    std::vector<int> layersPerStage;
    for (int s = 0; s < p.partition.stages(); ++s)
        layersPerStage.push_back(p.partition.layersOf(s));
    std::vector<int> stageRank(p.schedule.rankOfStage.begin(), p.schedule.rankOfStage.end());
    return json{{"schedule", p.schedule.name()},
                {"pp", p.schedule.pp},
                {"v", p.schedule.chunks()},
                {"stages", p.schedule.stages},
                {"microbatches", p.schedule.microbatches},
                {"dp", p.dataParallel},
                {"boundaries", p.partition.boundaries()},
                {"layers_per_stage", layersPerStage},
                {"rank_of_stage", stageRank},
                {"recompute", recomputeJson(recomputePerStage(p.recompute, p.schedule.stages))}};
}

} // namespace

json costModelToJson(const CostModel& m)
{
    json layers = json::array();
    for (const auto& l : m.layers)
        layers.push_back(layerJson(l));
    json doc{{"name", m.name},
                {"layers", std::move(layers)},
                {"first_stage_extra", layerJson(m.firstStageExtra)},
                {"last_stage_extra", layerJson(m.lastStageExtra)},
                {"p2p",
                 {{"latency_ns", m.p2pLatencyNs},
                  {"bytes_per_ns", m.p2pBytesPerNs},
                  {"bytes", m.p2pBytes},
                  {"eager_bytes", m.p2pEagerBytes}}},
                {"launch_gap_ns", m.launchGapNs},
                // [pipeline rank] {forward, backward}: the measured host gap before a step; null when not modelled.
                {"step_gaps_ns", m.stepGapNs.empty() ? json(nullptr) : [&] {
                     json a = json::array();
                     for (const auto& g : m.stepGapNs)
                         a.push_back({{"forward", g[0]}, {"backward", g[1]}});
                     return a;
                 }()},
                // [pipeline rank] {forward, backward}: the gap before a step whose input its own rank made,
                // where measured apart from step_gaps_ns (-1: not told apart); null when not.
                {"local_step_gaps_ns", m.localStepGapNs.empty() ? json(nullptr) : [&] {
                     json a = json::array();
                     for (const auto& g : m.localStepGapNs)
                         a.push_back({{"forward", g[0]}, {"backward", g[1]}});
                     return a;
                 }()},
                {"measured_order", m.measuredOrder.has_value()},
                {"exchanges", {{"blocking", m.blockingExchanges}, {"gap_ns", m.exchangeGapNs}, {"megatron", m.megatronExchanges}, {"shared_links", m.sharedLinks}}},
                {"pipeline_sync_ns", m.pipelineSyncNs},
                {"rank_start_ns", m.rankStartNs},
                {"dp", m.dataParallel},
                {"reference_microbatches", m.referenceMicrobatches},
                {"keep_global_batch", m.keepGlobalBatch},
                {"memory",
                 {{"weight_bytes_per_param", m.memory.weightBytesPerParam},
                  {"grad_bytes_per_param", m.memory.gradBytesPerParam},
                  {"optimizer_bytes_per_param", m.memory.optimizerBytesPerParam},
                  {"zero_stage", m.memory.zeroStage},
                  {"reserved_bytes", m.memory.reservedBytes},
                  {"selective_activation_share", m.memory.selectiveActivationShare},
                  {"selective_forward_share", m.memory.selectiveForwardShare},
                  {"gpu_memory_bytes", optionalNumber(m.memory.gpuMemoryBytes)}}}};
    doc["stage_speed"] = m.stageSpeed.empty() ? json(nullptr) : json(m.stageSpeed);
    json frozen = json::array();
    for (const LayerRange& r : m.frozenLayers)
        frozen.push_back(json::array({r.first, r.last}));
    doc["frozen_layers"] = std::move(frozen);
    if (m.microbatchSizes) {
        const MicrobatchSizes& ms = *m.microbatchSizes;
        doc["microbatch_sizes"] = json{{"source", toString(ms.source)},
                                       {"count", ms.count()},
                                       {"spread_cv", ms.spread()},
                                       {"size", ms.size()},
                                       {"forward", ms.forward},
                                       {"backward", ms.backward},
                                       {"tokens", ms.tokens.empty() ? json(nullptr) : json(ms.tokens)}};
    } else {
        doc["microbatch_sizes"] = nullptr;
    }
    return doc;
}

json stragglerFixToJson(const StragglerFix& f)
{
    return json{{"rank", f.rank},
                {"stage", f.stage},
                {"replica", f.replica},
                {"relative_compute", f.relative},
                {"compute_ns", f.computeNs},
                {"peer_median_ns", f.peerMedianNs},
                {"base_iteration_ns", f.baseIterationNs},
                {"slowest_replica_ns", f.slowestReplicaNs},
                {"fixed_ns", f.fixedNs},
                {"gain_ns", f.gainNs},
                {"iteration_ns", f.iterationNs}};
}

json predictionToJson(const Prediction& p, const JsonOptions& options)
{
    const auto speedup = p.speedup();
    json ranks = json::array();
    for (size_t r = 0; r < p.replay.ranks.size(); ++r) {
        const RankReplay& rr = p.replay.ranks[r];
        std::vector<int> stages;
        for (int s = 0; s < p.schedule.stages; ++s)
            if (p.schedule.rankOfStage[size_t(s)] == static_cast<int>(r))
                stages.push_back(s);
        json jr{{"rank", r},
                {"stages", stages},
                {"busy_ns", rr.busyNs},
                {"compute_end_ns", rr.computeEnd},
                {"all_reduce", {{"start_ns", rr.allReduceStart}, {"end_ns", rr.allReduceEnd}}},
                {"pipeline_sync", {{"start_ns", rr.syncStart}, {"end_ns", rr.syncEnd}}},
                {"optimizer", {{"start_ns", rr.optimizerStart}, {"end_ns", rr.optimizerEnd}}},
                {"bubbles_by_cause_ns", causes(rr.bubbleNs)}};
        if (r < p.memory.size()) {
            const RankMemory& m = p.memory[r];
            json mem{{"parameters", m.parameters},
                     {"static_bytes", m.staticBytes},
                     {"peak_activation_bytes", m.peakActivationBytes},
                     {"peak_bytes", m.peakBytes},
                     {"peak_at_ns", m.peakAt},
                     {"peak_in_flight", m.peakInFlight},
                     {"out_of_memory", m.outOfMemory},
                     {"measured_peak_bytes", r < p.measuredPeakBytes.size() && p.measuredPeakBytes[r] >= 0
                                                 ? json(p.measuredPeakBytes[r])
                                                 : json(nullptr)}};
            if (options.timeline) {
                json pts = json::array();
                for (const MemoryPoint& pt : m.overTime)
                    pts.push_back(json::array({pt.t, pt.bytes}));
                mem["over_time"] = std::move(pts);
            }
            jr["memory"] = std::move(mem);
        }
        if (options.timeline) {
            json acts = json::array();
            for (const TimedAction& a : rr.actions)
                acts.push_back(json{{"kind", std::string(1, toChar(a.kind))},
                                    {"stage", a.stage},
                                    {"chunk", a.chunk},
                                    {"microbatch", a.microbatch},
                                    {"start_ns", a.start},
                                    {"end_ns", a.end}});
            jr["actions"] = std::move(acts);
            json bubbles = json::array();
            for (const Bubble& b : rr.bubbles)
                bubbles.push_back(json{{"start_ns", b.start}, {"end_ns", b.end}, {"cause", std::string(toString(b.cause))}});
            jr["bubbles"] = std::move(bubbles);
        }
        ranks.push_back(std::move(jr));
    }
    json out{{"label", p.label},
             {"config", configJson(p)},
             {"iteration_ns", p.replay.iterationNs},
             {"measured_iteration_ns", optionalNumber(p.measuredIterationNs)},
             {"speedup", speedup ? json(*speedup) : json(nullptr)},
             // What speedup is counted against: the replay of the measured run, or (null) the measured iteration.
             {"baseline_ns", p.baselineNs ? json(*p.baselineNs) : json(nullptr)},
             {"measured_configuration", p.measuredConfiguration},
             {"calibration_error", p.calibrationError() ? json(*p.calibrationError()) : json(nullptr)},
             {"bubble_fraction", p.replay.bubbleFraction},
             {"bubbles_by_cause_ns", causes(p.replay.bubbleNs)},
             {"blocking_exchanges", p.replay.blockingExchanges},
             {"peak_bytes", p.peakBytes()},
             {"gpu_memory_bytes", optionalNumber(p.gpuMemoryBytes)},
             {"out_of_memory", p.outOfMemory()},
             {"microbatch_order", std::string(toString(p.microbatchOrder))},
             {"uneven_microbatches", p.unevenMicrobatches},
             {"ranks", std::move(ranks)}};
    if (options.timeline) {
        json transfers = json::array();
        for (const TimedTransfer& t : p.replay.transfers)
            transfers.push_back(json{{"src_rank", t.srcRank},
                                     {"dst_rank", t.dstRank},
                                     {"src_stage", t.srcStage},
                                     {"dst_stage", t.dstStage},
                                     {"microbatch", t.microbatch},
                                     {"direction", t.backward ? "backward" : "forward"},
                                     {"bytes", t.bytes},
                                     {"start_ns", t.start},
                                     {"end_ns", t.end}});
        out["transfers"] = std::move(transfers);
    }
    return out;
}

json searchToJson(const std::vector<SearchRow>& rows)
{
    json out = json::array();
    int rank = 1;
    for (const SearchRow& r : rows)
        out.push_back(json{{"rank", rank++},
                           {"schedule", std::string(toString(r.scenario.schedule))},
                           {"pp", r.scenario.pp},
                           {"v", r.scenario.v},
                           {"microbatches", r.scenario.microbatches},
                           {"boundaries", r.boundaries},
                           {"iteration_ns", r.iterationNs},
                           {"bubble_fraction", r.bubbleFraction},
                           {"peak_bytes", r.peakBytes},
                           {"out_of_memory", r.outOfMemory},
                           {"speedup", r.speedup ? json(*r.speedup) : json(nullptr)},
                           {"recompute", recomputeJson(recomputePerStage(r.scenario.recompute, r.scenario.pp * r.scenario.v))},
                           {"recompute_chosen", r.recomputeChosen},
                           {"pareto", r.pareto}});
    return out;
}

json whatIfDocument(const WhatIfSource& source, const CostModel& model, const std::vector<Prediction>& predictions,
                    const std::vector<SearchRow>* search, const JsonOptions& options)
{
    json doc{{"schema", kWhatIfSchema},
             {"generator", std::string("pipescope ") + kVersion},
             {"source", {{"kind", source.kind}, {"path", source.path}, {"simulated", source.simulated}}},
             {"cost_model", costModelToJson(model)}};
    if (model.measuredIterationNs) {
        doc["measured"] = json{{"iteration_ns", *model.measuredIterationNs},
                               {"schedule", scheduleName(model.measuredSchedule)},
                               {"pp", model.measuredPp},
                               {"v", model.measuredV},
                               {"microbatches", model.measuredMicrobatches},
                               {"idle_ns_per_stage", model.measuredIdleNsPerStage},
                               {"boundaries", model.measuredPartition ? json(model.measuredPartition->boundaries())
                                                                      : json(nullptr)}};
    } else {
        doc["measured"] = nullptr;
    }
    json preds = json::array();
    for (const Prediction& p : predictions)
        preds.push_back(predictionToJson(p, options));
    doc["predictions"] = std::move(preds);
    doc["search"] = search ? searchToJson(*search) : json(nullptr);
    doc["layer_source"] = std::string(toString(model.layerSource));
    if (model.layerSource == LayerSource::Count && !model.stageExtrasNote.empty())
        doc["stage_extras"] = model.stageExtrasNote;
    const std::string notice = noLayersNotice(model);
    doc["notice"] = notice.empty() ? json(nullptr) : json(notice);
    return doc;
}

} // namespace pipescope::whatif
