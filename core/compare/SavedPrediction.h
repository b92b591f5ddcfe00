#pragma once
// A prediction saved for the run that follows it (pipescope.prediction/1,
// docs/diff.md): the scenario the user chose on run A, what the what-if
// engine predicted for it, and A's identity, so that `pipescope diff A B
// --prediction FILE` (and report --compare, and the app's compare mode)
// checks B against the very prediction the user acted on.
#include "analysis/Analysis.h"
#include "whatif/WhatIf.h"

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope::compare {

// What tells one job from another without hashing its store: its ranks,
// activity count and the analysed iteration's place and length.
struct JobIdentity {
    int ranks = 0;
    int64_t activities = 0;
    int iteration = -1;
    TimeNs iterationStartNs = 0;
    TimeNs iterationNs = 0;
    bool operator==(const JobIdentity&) const = default;
};
JobIdentity jobIdentity(const Trace& trace, const AnalysisResult& analysis);
std::string describe(const JobIdentity& id); // "32 ranks, 596,544 activities, iteration 1 of 1.303 s"

// A saved prediction is a few hundred bytes; its largest legitimate form
// (4,096 x 64 stages, one recomputation each) is a few MiB. A larger file,
// or one nested deeper than kMaxJsonDepth, is refused before it is parsed.
inline constexpr size_t kMaxSavedPredictionBytes = size_t{16} << 20;
// The job's name and the scenario's label: longer ones are cut when saving.
inline constexpr size_t kMaxSavedNameBytes = 4096;
// Layers a saved scenario may split (its optional "layers" field).
inline constexpr int kMaxSavedLayers = 1'000'000;

struct SavedPrediction {
    std::string jobName; // how the job was named when the prediction was saved
    JobIdentity job;
    std::string label;   // the scenario's name in the editor, if any
    ScheduleKind schedule = ScheduleKind::OneFOneB;
    int pp = 1, v = 1, microbatches = 1;
    std::vector<int> boundaries; // empty: even split
    std::optional<int> layers;   // the layers the boundaries split (files saved before it was written lack it)
    std::string recompute = "none";
    TimeNs predictedNs = 0;
    std::optional<TimeNs> measuredNs; // A's measured iteration
};

// The prediction as saved: the scenario from what the prediction replayed.
SavedPrediction savePrediction(const std::string& jobName, const JobIdentity& job, const whatif::Prediction& prediction);
// The best row of a search (`whatif --search`): its scenario, auto-balanced
// boundaries and predicted time, labelled "search best: ...". layers: the
// cost model's layer count; measuredNs: the measured iteration.
SavedPrediction savePrediction(const std::string& jobName, const JobIdentity& job, const whatif::SearchRow& best,
                               int layers, std::optional<TimeNs> measuredNs);
nlohmann::json savedPredictionToJson(const SavedPrediction& saved);

// Reads a pipescope.prediction/1 document. Every field is checked: whole
// numbers exactly and in range, a built-in schedule with a pipeline degree,
// chunks and microbatches the what-if engine runs (applyChanges and
// scheduleFor, as for a scenario the user gives), boundaries that increase
// from above 0 and count pp x v - 1 (below "layers" when given), a
// recomputation for every stage. Throws FormatError naming `source` and the
// field ("F: not a saved prediction (scenario.pp must be a whole number from
// 1 to 4,096, got 4294967300); save one with ..."); a document over
// kMaxSavedPredictionBytes or nested deeper than kMaxJsonDepth is refused
// before it is parsed.
SavedPrediction parseSavedPrediction(std::string_view text, const std::string& source);
// The file's contents (gzip-compressed or through a pipe too) parsed as above.
SavedPrediction readSavedPrediction(const std::string& path);
// Atomically; throws Error naming the path, before writing, for a prediction
// that could not be read back (a schedule CSV's order, a value out of range).
void writeSavedPrediction(const std::string& path, const SavedPrediction& saved);

} // namespace pipescope::compare
