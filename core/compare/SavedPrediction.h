#pragma once
// A prediction saved for the run that follows it (pipescope.prediction/1,
// docs/diff.md): the scenario the user chose on run A, what the what-if
// engine predicted for it, and A's identity, so that `pipescope diff A B
// --prediction FILE` (and report --compare, and the app's compare mode)
// checks B against the very prediction the user acted on.
#include "analysis/Analysis.h"
#include "whatif/WhatIf.h"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
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

struct SavedPrediction {
    std::string jobName; // how the job was named when the prediction was saved
    JobIdentity job;
    std::string label;   // the scenario's name in the editor, if any
    ScheduleKind schedule = ScheduleKind::OneFOneB;
    int pp = 1, v = 1, microbatches = 1;
    std::vector<int> boundaries; // empty: even split
    std::string recompute = "none";
    TimeNs predictedNs = 0;
    std::optional<TimeNs> measuredNs; // A's measured iteration
};

// The prediction as saved: the scenario from what the prediction replayed.
SavedPrediction savePrediction(const std::string& jobName, const JobIdentity& job, const whatif::Prediction& prediction);
nlohmann::json savedPredictionToJson(const SavedPrediction& saved);
// Throws FormatError naming the file for a file that is not pipescope.prediction/1.
SavedPrediction readSavedPrediction(const std::string& path);
void writeSavedPrediction(const std::string& path, const SavedPrediction& saved); // atomically; throws Error

} // namespace pipescope::compare
