#include "compare/SavedPrediction.h"

#include "util/AtomicOutput.h"
#include "util/BoundedJson.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/InputFile.h"
#include "util/JsonText.h"
#include "util/Limits.h"

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>

namespace pipescope::compare {

using nlohmann::json;

namespace {

constexpr const char* kAdvice = "save one with pipescope whatif --save-prediction FILE or the app's File > Save prediction";

// A field refused while reading: turned into one FormatError naming the file
// (or, when saving, one Error naming the destination).
struct Refused {
    std::string why;
};

// The value as a message quotes it: numbers as written, strings escaped and short, else their kind.
std::string shown(const json& v)
{
    if (v.is_number())
        return printable(v.dump(), 40);
    if (v.is_string())
        return "\"" + printable(v.get_ref<const std::string&>(), 40) + "\"";
    if (v.is_array())
        return "an array";
    if (v.is_object())
        return "an object";
    return v.dump(); // null, true, false
}

std::string range(int64_t lo, int64_t hi)
{
    if (hi == INT64_MAX)
        return "a whole number of at least " + formatCount(lo);
    return "a whole number from " + formatCount(lo) + " to " + formatCount(hi);
}

// A JSON integer (never a fraction, an exponent or a value beyond int64) in [lo, hi].
int64_t wholeValue(const json& v, const std::string& field, int64_t lo, int64_t hi)
{
    bool exact = false;
    int64_t x = 0;
    if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        exact = u <= static_cast<uint64_t>(INT64_MAX);
        x = static_cast<int64_t>(u);
    } else if (v.is_number_integer()) {
        exact = true;
        x = v.get<int64_t>();
    }
    if (!exact || x < lo || x > hi)
        throw Refused{field + " must be " + range(lo, hi) + ", got " + shown(v)};
    return x;
}

const json* member(const json& obj, const char* key)
{
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
}

int64_t whole(const json& obj, const std::string& where, const char* key, int64_t lo, int64_t hi)
{
    const json* v = member(obj, key);
    if (!v)
        throw Refused{where + key + " is missing"};
    return wholeValue(*v, where + key, lo, hi);
}

int wholeInt(const json& obj, const std::string& where, const char* key, int lo, int hi)
{
    return static_cast<int>(whole(obj, where, key, lo, hi));
}

// A string member; `fallback` when absent (refused as missing without one).
std::string text(const json& obj, const std::string& where, const char* key, const char* fallback, size_t maxBytes)
{
    const json* v = member(obj, key);
    if (!v) {
        if (!fallback)
            throw Refused{where + key + " is missing"};
        return fallback;
    }
    if (!v->is_string())
        throw Refused{where + key + " must be a string, got " + shown(*v)};
    const std::string& s = v->get_ref<const std::string&>();
    if (s.size() > maxBytes)
        throw Refused{where + key + " is longer than " + formatCount(static_cast<int64_t>(maxBytes)) + " bytes"};
    return s;
}

const json& object(const json& obj, const char* key)
{
    const json* v = member(obj, key);
    if (!v)
        throw Refused{std::string(key) + " is missing"};
    if (!v->is_object())
        throw Refused{std::string(key) + " must be an object, got " + shown(*v)};
    return *v;
}

std::string builtinNames()
{
    std::string names;
    for (ScheduleKind k : builtinScheduleKinds())
        names += (names.empty() ? "" : ", ") + std::string(toString(k));
    return names;
}

// Runs one of the what-if engine's checks; its refusal names the scenario field it concerns.
template <typename Check>
void engineCheck(const char* fallbackField, Check&& check)
{
    try {
        check();
    } catch (const ValueError& e) {
        throw Refused{"scenario." + std::string(toString(e.setting())) + ": " + e.what()};
    } catch (const Error& e) {
        throw Refused{std::string("scenario.") + fallbackField + ": " + e.what()};
    }
}

// The schedule, pipeline degree, chunks and microbatches checked as the
// what-if engine checks a scenario the user gives: its ranges, the replay
// limit, and a combination the schedule accepts.
void checkRunnable(const SavedPrediction& s, const std::string& schedule)
{
    whatif::ScenarioChanges changes;
    changes.schedule = schedule;
    changes.pp = s.pp;
    changes.v = s.v;
    changes.microbatches = s.microbatches;
    whatif::Scenario scenario;
    engineCheck("schedule", [&] { scenario = whatif::applyChanges(whatif::Scenario{}, changes); });
    engineCheck("microbatches", [&] { (void)whatif::scheduleFor(scenario); });
}

// The partition and recomputation, for the pp x v stages of a runnable scenario.
void checkStages(const SavedPrediction& s)
{
    const int stages = s.pp * s.v; // at most 4,096 x 64
    if (s.layers && *s.layers < stages)
        throw Refused{"scenario.layers (" + std::to_string(*s.layers) + ") is fewer than the " + std::to_string(stages) +
                      " stages of pp x v"};
    if (!s.boundaries.empty())
        engineCheck("boundaries", [&] { (void)whatif::partitionFromBoundaries(s.boundaries, s.layers.value_or(INT_MAX), stages); });
    else if (s.layers)
        engineCheck("boundaries", [&] { (void)whatif::evenPartition(*s.layers, stages); });
    engineCheck("recompute", [&] { (void)whatif::recomputePerStage(whatif::parseRecompute(s.recompute), stages); });
}

SavedPrediction fromJson(const json& j)
{
    if (!j.is_object())
        throw Refused{"the document is not a JSON object"};
    const json* schema = member(j, "schema");
    if (!schema || !schema->is_string() || schema->get_ref<const std::string&>() != "pipescope.prediction/1")
        throw Refused{"its schema is not pipescope.prediction/1"};
    SavedPrediction s;
    const json& job = object(j, "job");
    s.jobName = text(job, "job.", "name", "", kMaxSavedNameBytes);
    s.job.ranks = wholeInt(job, "job.", "ranks", 1, kMaxWorldSize);
    s.job.activities = whole(job, "job.", "activities", 0, INT64_MAX);
    s.job.iteration = wholeInt(job, "job.", "iteration", -1, INT_MAX);
    s.job.iterationStartNs = whole(job, "job.", "iteration_start_ns", -kMaxTimeNs, kMaxTimeNs);
    s.job.iterationNs = whole(job, "job.", "iteration_ns", 0, INT64_MAX);

    const json& sc = object(j, "scenario");
    s.label = text(sc, "scenario.", "label", "", kMaxSavedNameBytes);
    const std::string schedule = text(sc, "scenario.", "schedule", nullptr, 64);
    const auto kind = scheduleKindFromString(schedule);
    if (!kind || *kind == ScheduleKind::Custom)
        throw Refused{"scenario.schedule \"" + printable(schedule, 64) + "\" is not a built-in schedule (" + builtinNames() +
                      ")"};
    s.schedule = *kind;
    // The what-if engine's ranges (applyChanges).
    s.pp = wholeInt(sc, "scenario.", "pp", 1, 4096);
    s.v = wholeInt(sc, "scenario.", "v", 1, 64);
    s.microbatches = wholeInt(sc, "scenario.", "microbatches", 1, 100000);
    checkRunnable(s, schedule);
    const json* boundaries = member(sc, "boundaries");
    if (!boundaries)
        throw Refused{"scenario.boundaries is missing"};
    if (!boundaries->is_array())
        throw Refused{"scenario.boundaries must be an array of layer numbers, got " + shown(*boundaries)};
    const size_t stages = static_cast<size_t>(s.pp) * static_cast<size_t>(s.v);
    if (!boundaries->empty() && boundaries->size() != stages - 1)
        throw Refused{"scenario.boundaries holds " + formatCount(static_cast<int64_t>(boundaries->size())) +
                      " boundaries; pp x v = " + std::to_string(stages) + " stages need " + std::to_string(stages - 1) +
                      " (or none, for an even split)"};
    s.boundaries.reserve(boundaries->size());
    for (size_t i = 0; i < boundaries->size(); ++i)
        s.boundaries.push_back(
            static_cast<int>(wholeValue((*boundaries)[i], "scenario.boundaries[" + std::to_string(i) + "]", 1, INT_MAX)));
    if (const json* layers = member(sc, "layers"); layers && !layers->is_null())
        s.layers = static_cast<int>(wholeValue(*layers, "scenario.layers", 1, kMaxSavedLayers));
    s.recompute = text(sc, "scenario.", "recompute", "none", kMaxSavedPredictionBytes);
    checkStages(s);

    s.predictedNs = whole(j, "", "predicted_iteration_ns", 1, INT64_MAX);
    if (const json* measured = member(j, "measured_iteration_ns"); measured && !measured->is_null())
        s.measuredNs = wholeValue(*measured, "measured_iteration_ns", 0, INT64_MAX);
    return s;
}

// Cut to maxBytes on a UTF-8 character boundary.
std::string cut(std::string s, size_t maxBytes)
{
    if (s.size() <= maxBytes)
        return s;
    size_t n = maxBytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
        --n;
    s.resize(n);
    return s;
}

} // namespace

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
    s.jobName = cut(jobName, kMaxSavedNameBytes);
    s.job = job;
    s.label = cut(p.label, kMaxSavedNameBytes);
    s.schedule = p.schedule.kind;
    s.pp = p.schedule.pp;
    s.v = p.schedule.chunks();
    s.microbatches = p.schedule.microbatches;
    if (p.partition.stages() > 0) {
        s.boundaries = p.partition.boundaries();
        s.layers = p.partition.firstLayer.back();
    }
    s.recompute = whatif::recomputeText(p.recompute);
    s.predictedNs = p.iterationNs();
    s.measuredNs = p.measuredIterationNs;
    return s;
}

SavedPrediction savePrediction(const std::string& jobName, const JobIdentity& job, const whatif::SearchRow& best,
                               int layers, std::optional<TimeNs> measuredNs)
{
    SavedPrediction s;
    s.jobName = cut(jobName, kMaxSavedNameBytes);
    s.job = job;
    s.label = cut("search best: " + best.scenario.label, kMaxSavedNameBytes);
    s.schedule = best.scenario.schedule;
    s.pp = best.scenario.pp;
    s.v = best.scenario.v;
    s.microbatches = best.scenario.microbatches;
    s.boundaries = best.boundaries;
    if (layers > 0)
        s.layers = layers;
    s.recompute = whatif::recomputeText(best.scenario.recompute);
    s.predictedNs = best.iterationNs;
    s.measuredNs = measuredNs;
    return s;
}

json savedPredictionToJson(const SavedPrediction& s)
{
    json scenario = {{"label", s.label},
                     {"schedule", std::string(toString(s.schedule))},
                     {"pp", s.pp},
                     {"v", s.v},
                     {"microbatches", s.microbatches},
                     {"boundaries", s.boundaries}};
    if (s.layers)
        scenario["layers"] = *s.layers;
    scenario["recompute"] = s.recompute;
    return {{"schema", "pipescope.prediction/1"},
            {"job",
             {{"name", s.jobName},
              {"ranks", s.job.ranks},
              {"activities", s.job.activities},
              {"iteration", s.job.iteration},
              {"iteration_start_ns", s.job.iterationStartNs},
              {"iteration_ns", s.job.iterationNs}}},
            {"scenario", std::move(scenario)},
            {"predicted_iteration_ns", s.predictedNs},
            {"measured_iteration_ns", s.measuredNs ? json(*s.measuredNs) : json(nullptr)}};
}

SavedPrediction parseSavedPrediction(std::string_view text, const std::string& source)
{
    const json j = parseBoundedJson(text, source, kMaxSavedPredictionBytes, kAdvice);
    try {
        return fromJson(j);
    } catch (const Refused& r) {
        throw FormatError(source + ": not a saved prediction (" + r.why + "); " + kAdvice);
    }
}

SavedPrediction readSavedPrediction(const std::string& path)
{
    // One byte over the limit reaches parseBoundedJson, which says what to do.
    return parseSavedPrediction(InputFile::readAll(path, kMaxSavedPredictionBytes + 1), path);
}

void writeSavedPrediction(const std::string& path, const SavedPrediction& saved)
{
    const std::string text = jsonText(savedPredictionToJson(saved), 1) + "\n";
    // What is written must read back: checked as a reader checks it, before anything is written.
    try {
        (void)fromJson(json::parse(text));
    } catch (const Refused& r) {
        throw Error(path + ": cannot save this prediction: " + r.why);
    }
    AtomicOutput::writeFile(path, text);
}

} // namespace pipescope::compare
