#include "compare/SavedPrediction.h"

#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/InputFile.h"
#include "util/JsonText.h"

#include <nlohmann/json.hpp>

namespace pipescope::compare {

using nlohmann::json;

JobIdentity jobIdentity(const Trace& trace, const AnalysisResult& analysis)
{
    JobIdentity id;
    id.ranks = static_cast<int>(analysis.ranks.size());
    id.activities = static_cast<int64_t>(trace.activities.size());
    for (const Iteration& it : analysis.iterations)
        if (it.index == analysis.selectedIteration) {
            id.iteration = it.index;
            id.iterationStartNs = it.start;
            id.iterationNs = it.end - it.start;
        }
    return id;
}

std::string describe(const JobIdentity& id)
{
    return std::to_string(id.ranks) + (id.ranks == 1 ? " rank, " : " ranks, ") + formatCount(id.activities) +
           " activities, iteration " + std::to_string(id.iteration) + " of " + formatDuration(id.iterationNs);
}

SavedPrediction savePrediction(const std::string& jobName, const JobIdentity& job, const whatif::Prediction& p)
{
    SavedPrediction s;
    s.jobName = jobName;
    s.job = job;
    s.label = p.label;
    s.schedule = p.schedule.kind;
    s.pp = p.schedule.pp;
    s.v = p.schedule.chunks();
    s.microbatches = p.schedule.microbatches;
    if (p.partition.stages() > 0)
        s.boundaries = p.partition.boundaries();
    s.recompute = whatif::recomputeText(p.recompute);
    s.predictedNs = p.iterationNs();
    s.measuredNs = p.measuredIterationNs;
    return s;
}

json savedPredictionToJson(const SavedPrediction& s)
{
    return {{"schema", "pipescope.prediction/1"},
            {"job",
             {{"name", s.jobName},
              {"ranks", s.job.ranks},
              {"activities", s.job.activities},
              {"iteration", s.job.iteration},
              {"iteration_start_ns", s.job.iterationStartNs},
              {"iteration_ns", s.job.iterationNs}}},
            {"scenario",
             {{"label", s.label},
              {"schedule", std::string(toString(s.schedule))},
              {"pp", s.pp},
              {"v", s.v},
              {"microbatches", s.microbatches},
              {"boundaries", s.boundaries},
              {"recompute", s.recompute}}},
            {"predicted_iteration_ns", s.predictedNs},
            {"measured_iteration_ns", s.measuredNs ? json(*s.measuredNs) : json(nullptr)}};
}

SavedPrediction readSavedPrediction(const std::string& path)
{
    const std::string text = InputFile::readAll(path);
    const json j = json::parse(text, nullptr, false);
    auto bad = [&](const std::string& why) {
        return FormatError(path + ": not a saved prediction (" + why +
                           "); save one with pipescope whatif --save-prediction FILE or the app's File > Save prediction");
    };
    if (j.is_discarded() || !j.is_object())
        throw bad("not JSON");
    if (j.value("schema", std::string()) != "pipescope.prediction/1")
        throw bad("its schema is not pipescope.prediction/1");
    SavedPrediction s;
    try {
        const json& job = j.at("job");
        s.jobName = job.value("name", std::string());
        s.job.ranks = job.at("ranks").get<int>();
        s.job.activities = job.at("activities").get<int64_t>();
        s.job.iteration = job.at("iteration").get<int>();
        s.job.iterationStartNs = job.at("iteration_start_ns").get<TimeNs>();
        s.job.iterationNs = job.at("iteration_ns").get<TimeNs>();
        const json& sc = j.at("scenario");
        s.label = sc.value("label", std::string());
        const std::string schedule = sc.at("schedule").get<std::string>();
        const auto kind = scheduleKindFromString(schedule);
        if (!kind)
            throw bad("unknown schedule \"" + printable(schedule, 80) + "\"");
        s.schedule = *kind;
        s.pp = sc.at("pp").get<int>();
        s.v = sc.at("v").get<int>();
        s.microbatches = sc.at("microbatches").get<int>();
        s.boundaries = sc.at("boundaries").get<std::vector<int>>();
        s.recompute = sc.value("recompute", std::string("none"));
        s.predictedNs = j.at("predicted_iteration_ns").get<TimeNs>();
        if (j.contains("measured_iteration_ns") && j["measured_iteration_ns"].is_number_integer())
            s.measuredNs = j["measured_iteration_ns"].get<TimeNs>();
    } catch (const json::exception& e) {
        throw bad(std::string("a field is missing or of the wrong type: ") + e.what());
    }
    if (s.pp < 1 || s.v < 1 || s.microbatches < 1 || s.predictedNs <= 0)
        throw bad("pp, v, microbatches and the predicted time must be positive");
    return s;
}

void writeSavedPrediction(const std::string& path, const SavedPrediction& saved)
{
    AtomicOutput::writeFile(path, jsonText(savedPredictionToJson(saved), 1) + "\n");
}

} // namespace pipescope::compare
