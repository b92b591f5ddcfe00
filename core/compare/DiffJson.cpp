// pipescope.diff/1 (docs/diff.md).
#include "compare/Diff.h"

#include <nlohmann/json.hpp>

#include <cmath>

namespace pipescope::compare {

namespace {

using nlohmann::json;

template <class T>
json opt(const std::optional<T>& v)
{
    return v ? json(*v) : json(nullptr);
}

json round4(double x) { return std::round(x * 1e4) / 1e4; }

template <class T>
json pair(const Both<T>& v)
{
    json j = {{"a", opt(v.a)}, {"b", opt(v.b)}};
    if constexpr (std::is_integral_v<T>)
        j["delta"] = opt(v.delta());
    return j;
}

json config(const RunConfig& c)
{
    return {{"pipeline", c.pipeline},
            {"ranks", c.ranks},
            {"pp", c.pp},
            {"dp", c.dp},
            {"v", c.v},
            {"microbatches", c.microbatches},
            {"schedule", scheduleName(c.schedule)},
            {"layers", c.layers > 0 ? json(c.layers) : json(nullptr)},
            {"layer_source", c.layerSource},
            {"layers_per_stage", c.layersPerStage}};
}

json differences(const std::vector<Difference>& v)
{
    json out = json::array();
    for (const Difference& d : v)
        out.push_back({{"field", d.field}, {"a", d.a}, {"b", d.b}});
    return out;
}

json causes(const std::array<Both<TimeNs>, kBubbleCauses>& v)
{
    json out = json::object();
    for (int c = 0; c < kBubbleCauses; ++c)
        out[std::string(toString(static_cast<BubbleCause>(c)))] = pair(v[size_t(c)]);
    return out;
}

} // namespace

nlohmann::json diffToJson(const DiffResult& d)
{
    json doc;
    doc["schema"] = "pipescope.diff/1";
    doc["a"] = {{"name", d.aName}, {"config", config(d.a)}, {"iteration", opt(d.iteration.a)}};
    doc["b"] = {{"name", d.bName}, {"config", config(d.b)}, {"iteration", opt(d.iteration.b)}};
    doc["differences"] = differences(d.differences);
    json it = {{"a_ns", opt(d.iterationNs.a)}, {"b_ns", opt(d.iterationNs.b)}, {"delta_ns", opt(d.iterationNs.delta())}};
    it["change"] = d.iterationNs.a && d.iterationNs.b && *d.iterationNs.a > 0
                       ? round4(static_cast<double>(*d.iterationNs.delta()) / static_cast<double>(*d.iterationNs.a))
                       : json(nullptr);
    doc["iteration"] = it;
    doc["bubble_share"] = {{"a", d.bubbleShare.a ? round4(*d.bubbleShare.a) : json(nullptr)},
                           {"b", d.bubbleShare.b ? round4(*d.bubbleShare.b) : json(nullptr)}};
    doc["bubbles_by_cause_ns"] = causes(d.idleByCause);

    json ranks = json::array();
    for (const RankIdleDiff& r : d.ranks)
        ranks.push_back({{"rank", r.rank},
                         {"stage", pair(r.stage)},
                         {"window_ns", pair(r.windowNs)},
                         {"idle_ns", pair(r.idleNs)},
                         {"by_cause_ns", causes(r.byCause)}});
    doc["ranks"] = ranks;

    json stages = json::array();
    for (const StageDiff& s : d.stages)
        stages.push_back({{"stage", s.stage},
                          {"a_forward_ns", opt(s.forwardNs.a)},
                          {"b_forward_ns", opt(s.forwardNs.b)},
                          {"a_backward_ns", opt(s.backwardNs.a)},
                          {"b_backward_ns", opt(s.backwardNs.b)},
                          {"a_fb_per_microbatch_ns", opt(s.fbNs.a)},
                          {"b_fb_per_microbatch_ns", opt(s.fbNs.b)},
                          {"delta_fb_ns", opt(s.fbNs.delta())},
                          {"a_busy_ns", opt(s.busyNs.a)},
                          {"b_busy_ns", opt(s.busyNs.b)},
                          {"a_peak_bytes", opt(s.peakBytes.a)},
                          {"b_peak_bytes", opt(s.peakBytes.b)}});
    doc["stages"] = stages;

    json mbs = json::array();
    for (const MicrobatchDiff& m : d.microbatches)
        mbs.push_back({{"stage", m.stage},
                       {"microbatch", m.microbatch},
                       {"a_forward_ns", opt(m.forwardNs.a)},
                       {"b_forward_ns", opt(m.forwardNs.b)},
                       {"a_backward_ns", opt(m.backwardNs.a)},
                       {"b_backward_ns", opt(m.backwardNs.b)}});
    doc["microbatches"] = mbs;
    doc["microbatches_note"] = d.microbatches.empty() ? json(d.microbatchesWhyNot) : json(nullptr);

    json byKind = json::object();
    for (const auto& [kind, v] : d.criticalPathByKind)
        byKind[kind] = pair(v);
    doc["critical_path"] = {{"a_ns", opt(d.criticalPathNs.a)}, {"b_ns", opt(d.criticalPathNs.b)}, {"by_kind_ns", byKind}};

    json kernels = json::array();
    for (const KernelDiff& k : d.kernels)
        kernels.push_back({{"stage", k.stage},
                           {"name", k.name},
                           {"class", std::string(toString(k.workClass))},
                           {"change", std::string(toString(k.change))},
                           {"a_count", opt(k.count.a)},
                           {"b_count", opt(k.count.b)},
                           {"a_total_ns", opt(k.totalNs.a)},
                           {"b_total_ns", opt(k.totalNs.b)},
                           {"delta_ns", k.totalNs.b.value_or(0) - k.totalNs.a.value_or(0)}});
    doc["kernels"] = kernels;
    doc["kernel_names"] = d.kernelNames;
    doc["kernels_added"] = d.kernelsAdded;
    doc["kernels_removed"] = d.kernelsRemoved;

    if (d.prediction) {
        const PredictionCheck& p = *d.prediction;
        const whatif::Scenario& s = p.scenario;
        doc["prediction_check"] = {
            {"saved", p.saved},
            {"label", p.saved && !p.savedLabel.empty() ? json(p.savedLabel) : json(nullptr)},
            {"predicted_ns", p.predictedNs},
            {"measured_ns", p.measuredNs},
            {"error", round4(p.error)},
            {"calibration_error", p.calibrationError ? round4(*p.calibrationError) : json(nullptr)},
            {"changes", differences(p.changes)},
            {"not_modelled", p.notModelled},
            {"batch", p.batch.empty() ? json(nullptr) : json(p.batch)},
            {"scenario",
             {{"schedule", std::string(toString(s.schedule))},
              {"pp", s.pp},
              {"v", s.v},
              {"microbatches", s.microbatches},
              {"boundaries", s.boundaries ? json(*s.boundaries) : json(nullptr)}}}};
        doc["prediction_check_note"] = nullptr;
    } else {
        doc["prediction_check"] = nullptr;
        doc["prediction_check_note"] = d.predictionWhyNot;
    }
    return doc;
}

} // namespace pipescope::compare
