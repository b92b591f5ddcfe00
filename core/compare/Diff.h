#pragma once
// Two runs of a pipeline job compared in pipeline terms: configuration,
// iteration time, idle time by cause, each stage's forward and backward per
// microbatch, the critical path, kernels per stage, memory per stage, and
// the check of A's what-if prediction for B's configuration against B's
// measurement (docs/diff.md; JSON schema pipescope.diff/1).
#include "analysis/Analysis.h"
#include "whatif/WhatIf.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pipescope::compare {

// One run as the diff sees it. The analysis is of `trace`; `model` is the
// cost model calibrated on it, when the run's pipeline can be replayed.
struct RunInput {
    std::string name; // how the run is named in the output (its file)
    const Trace* trace = nullptr;
    const AnalysisResult* analysis = nullptr;
    const whatif::CostModel* model = nullptr;
};

// What the what-if engine and the user call a run's configuration.
struct RunConfig {
    bool pipeline = false;
    int ranks = 0;
    int pp = 1, dp = 1, v = 1, microbatches = 0;
    std::optional<ScheduleKind> schedule; // unset when unknown
    int layers = 0;                   // 0: unknown
    std::string layerSource = "none"; // trace | count | model | stages | none (whatif::LayerSource)
    std::vector<int> layersPerStage;  // per virtual stage; empty where unknown
};

// One field that differs, in words: {"schedule", "1f1b", "interleaved-1f1b"}.
struct Difference {
    std::string field;
    std::string a, b;
};

// A value measured in each run; unset where that run has none.
template <class T>
struct Both {
    std::optional<T> a, b;
    std::optional<T> delta() const
    {
        if (a && b)
            return *b - *a;
        return std::nullopt;
    }
};

struct StageDiff {
    int stage = 0;
    // Per microbatch: the stage's steps of that kind over every chunk, their
    // kernel time (union of each step's kernels), mean over replicas.
    Both<TimeNs> forwardNs, backwardNs; // backward: B, or I + W where split
    Both<TimeNs> fbNs;                  // forward + backward
    Both<TimeNs> busyNs;                // union of compute in the iteration, mean over replicas
    Both<int64_t> peakBytes;            // measured memory, the most over replicas
};

struct MicrobatchDiff {
    int stage = 0;
    int microbatch = 0;
    Both<TimeNs> forwardNs, backwardNs; // chunks added, replicas averaged
};

// A rank's idle time in its iteration window, by cause.
struct RankIdleDiff {
    int rank = 0;
    Both<int> stage;
    Both<TimeNs> windowNs, idleNs;
    std::array<Both<TimeNs>, kBubbleCauses> byCause{};
};

enum class KernelChange : uint8_t { Added, Removed, Changed, Same };
std::string_view toString(KernelChange c);

// One kernel name on one stage: per replica (the stage's ranks averaged),
// in the compared iteration.
struct KernelDiff {
    int stage = -1; // -1: ranks outside the pipeline
    std::string name;
    WorkClass workClass = WorkClass::Compute;
    Both<int64_t> count;
    Both<TimeNs> totalNs;
    KernelChange change = KernelChange::Same;
};

struct SavedPrediction;

// A's prediction for B's configuration, against B's measurement.
struct PredictionCheck {
    // From a saved prediction (pipescope.prediction/1): the very one the user
    // acted on, with the label they gave its scenario; else replayed now.
    bool saved = false;
    std::string savedLabel;
    std::vector<Difference> changes;     // what the scenario changed from A's configuration
    std::vector<std::string> notModelled; // differences the prediction does not cover
    whatif::Scenario scenario;
    // With other microbatch counts: whether B kept A's global batch (each
    // microbatch smaller) or A's microbatch size (a larger batch), read from
    // the runs' work per microbatch; the prediction replays that batch.
    std::string batch; // "global" | "microbatch" | "" (same microbatch count)
    TimeNs predictedNs = 0;
    TimeNs measuredNs = 0;
    double error = 0;                     // (predicted - measured) / measured
    std::optional<double> calibrationError; // A's replay of A against A's measurement
};

struct DiffOptions {
    int topKernels = 20; // kernel rows kept, largest absolute change in total time first
    // The prediction to check B against, saved on A; its job must be A
    // (diffRuns throws Error otherwise). Null: A's cost model predicts B's configuration now.
    const SavedPrediction* saved = nullptr;
};

struct DiffResult {
    std::string aName, bName;
    RunConfig a, b;
    std::vector<Difference> differences;
    Both<int> iteration;          // the compared iteration's index in each run
    Both<TimeNs> iterationNs;
    Both<double> bubbleShare;     // idle over window, pipeline ranks together
    // Mean per pipeline rank of the idle time by cause in the compared iteration.
    std::array<Both<TimeNs>, kBubbleCauses> idleByCause{};
    std::vector<RankIdleDiff> ranks;       // union of both runs' ranks, rank order
    std::vector<StageDiff> stages;         // union of both runs' stages
    // Per stage and microbatch, where both runs have the same stages and microbatches.
    std::vector<MicrobatchDiff> microbatches;
    std::string microbatchesWhyNot;        // why there are none, when there are none
    // Critical path of each run's compared iteration, by kind of segment.
    Both<TimeNs> criticalPathNs;
    std::map<std::string, Both<TimeNs>> criticalPathByKind;
    std::vector<KernelDiff> kernels;       // the topKernels largest changes
    int64_t kernelNames = 0;               // (stage, name) pairs compared
    int64_t kernelsAdded = 0, kernelsRemoved = 0;
    std::optional<PredictionCheck> prediction;
    std::string predictionWhyNot;          // why there is no prediction check
};

// Throws Error when either run has no analysis.
DiffResult diffRuns(const RunInput& a, const RunInput& b, const DiffOptions& options = {});

// The configuration of one run: from its analysis, and its cost model where given.
RunConfig runConfig(const AnalysisResult& analysis, const whatif::CostModel* model);

nlohmann::json diffToJson(const DiffResult& diff);
std::string diffText(const DiffResult& diff);

} // namespace pipescope::compare
