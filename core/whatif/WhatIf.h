#pragma once
// What-if questions: a scenario (schedule, pipeline degree, v, microbatches,
// stage boundaries) replayed on a cost model, answered with the predicted
// iteration time, speed-up against the measured run, bubble fraction and
// per-stage memory; auto-balance of the partition under memory limits; and a
// ranked search over schedule x v x microbatches.
#include "analysis/Analysis.h"
#include "whatif/CostModel.h"
#include "whatif/Memory.h"
#include "whatif/Recompute.h"
#include "whatif/Replay.h"
#include "model/Schedule.h"
#include "util/Limits.h"
#include "util/Work.h"

#include <optional>
#include <string>
#include <vector>

namespace pipescope::whatif {

struct Scenario {
    std::string label;
    ScheduleKind schedule = ScheduleKind::OneFOneB;
    int pp = 1;
    int v = 1;
    int microbatches = 1;
    std::optional<std::vector<int>> boundaries; // unset: the measured partition if it fits, else an even split
    std::optional<Schedule> custom;              // a loaded CSV order; overrides schedule, pp, v, microbatches
    // Uneven microbatches: the order they run in (the cost model's
    // microbatchSizes; no effect without them or with another count).
    MicrobatchOrder microbatchOrder = MicrobatchOrder::Given;
    // Activation recomputation: empty none, one item every stage, else one
    // per virtual stage (recomputePerStage).
    std::vector<Recompute> recompute;
};

struct Prediction {
    std::string label;
    Schedule schedule;
    Partition partition;
    ReplayCosts costs;
    ReplayResult replay;
    // Replicas replayed one by one (CostModel::replicaSizes): the slowest,
    // whose costs and replay these are; -1 when one pipeline stands for all.
    int slowestReplica = -1;
    std::vector<RankMemory> memory;
    int dataParallel = 1;
    std::optional<int64_t> gpuMemoryBytes;
    std::optional<TimeNs> measuredIterationNs;
    MicrobatchOrder microbatchOrder = MicrobatchOrder::Given;
    bool unevenMicrobatches = false; // replayed with each microbatch's own costs
    // [rank]: the measured run's peak memory (CostModel::measuredPeakBytes),
    // for a prediction at the measured pipeline degree; empty otherwise.
    std::vector<int64_t> measuredPeakBytes;
    std::vector<Recompute> recompute; // per virtual stage (empty: none)

    // The replay of the measured run itself (its schedule, degree, chunks,
    // microbatches and partition, no speed, freeze or recomputation change):
    // its difference from the measurement is the model's calibration error,
    // not a speed-up (calibrationError()).
    bool measuredConfiguration = false;

    // The replay of the measured configuration with the same model, which
    // speedup() is counted against when set (so the model's calibration error
    // is not taken for a gain); unset: the measured iteration.
    std::optional<TimeNs> baselineNs;

    TimeNs iterationNs() const { return replay.iterationNs; }
    std::optional<double> speedup() const; // baseline (else measured) / predicted
    // (predicted - measured) / measured, for the measured configuration only.
    std::optional<double> calibrationError() const;
    bool outOfMemory() const;
    int64_t peakBytes() const; // over ranks
};

// The configuration the cost model was measured in (pp, v, m, schedule, partition).
Scenario measuredScenario(const CostModel& model);

// The replay of the measured configuration (what gains are counted against,
// Prediction::baselineNs); nullopt when the model has no measured run or it
// cannot be replayed.
std::optional<TimeNs> measuredReplayNs(const CostModel& model);

// What the user asked to change (command-line flags, the app's editor).
struct ScenarioChanges {
    std::optional<std::string> schedule; // a name scheduleKindFromString accepts
    std::optional<std::string> scheduleCsv; // path of a torch schedule CSV
    std::optional<int> pp, v, microbatches;
    std::optional<std::vector<int>> boundaries;
    std::optional<MicrobatchOrder> microbatchOrder;
    std::optional<std::vector<Recompute>> recompute;
};

// Applies changes to a base scenario. A schedule that needs two chunks per
// rank gets v = 2 unless v is given; changing pp or v drops the base
// boundaries (the layers are re-split). Throws Error naming a bad value.
Scenario applyChanges(Scenario base, const ScenarioChanges& changes);

// Throws Error with one sentence for a scenario that cannot run (bad
// boundaries, a v that does not divide the layers, ...).
Prediction predict(const CostModel& model, const Scenario& scenario, const ReplayOptions& options = {});

// The parts of predict() a what-if session reuses while the user drags:
// the schedule and the partition a scenario stands for, and the replay,
// costs and memory of a prediction whose schedule and partition are set.
// Throws ValueError when the scenario has more steps than a replay takes (kMaxReplaySteps).
Schedule scheduleFor(const Scenario& scenario);
// The same, but the measured run's own order (CostModel::measuredOrder) for
// a scenario of the measured schedule, degree, chunks and microbatches.
Schedule scheduleFor(const CostModel& model, const Scenario& scenario);
// Steps (F, B, I, W of one microbatch on one stage) the scenario's schedule
// runs per iteration, counted without building it.
int64_t scenarioSteps(const Scenario& scenario);
// Throws Error, before any work, when the scenario's timeline would not fit:
// as a JSON document (document true; kMaxTimelineSteps) or emitted as
// Kineto traces `emittedCopies` times (iterations x replicas; kMaxEmittedSteps).
void checkTimelineSize(const Scenario& scenario, bool document, int64_t emittedCopies);
Partition partitionFor(const CostModel& model, const Scenario& scenario, int stages);
void evaluate(const CostModel& model, Prediction& prediction, const ReplayOptions& options, Replay& replay);

struct CalibrateOptions {
    const ModelDescription* model = nullptr; // layer structure and sizes, when the user has a model file
    FromMeasuredOptions measured;            // layer count, measured boundaries, relative layer costs
    std::optional<int64_t> gpuMemoryBytes;   // overrides the trace's GPU memory
    // Each stage's pace against its data-parallel replicas (CostModel::
    // replicaPace), when the trace holds only some of them: a sharded job
    // read in part takes it from its index (replicaPaceFromIndex in
    // analysis/JobSummaries.h). Empty: from the analysis's rank speeds.
    std::vector<double> replicaPace;
};

// The cost model of a job calibrated on an analysis already made (the CLI,
// the report and the app analyse once and share the result): its selected
// iteration is measured and calibrated on. Throws Error when the analysis
// found no pipeline or the measurement is unusable.
CostModel calibrate(const Trace& trace, const AnalysisResult& analysis, const CalibrateOptions& options = {});

// For a measured 1F1B or interleaved run: replays the measured configuration
// with Megatron-LM's exchanges over separate links and over one shared
// medium (and, with keepCurrent, the exchanges the model has) and keeps the
// one closest to the measured iteration (docs/whatif.md, "Exchanges").
// calibrate() calls it with keepCurrent.
void chooseExchanges(CostModel& model, bool keepCurrent);

struct BalanceOptions {
    std::optional<int64_t> memoryLimitBytes; // default: the cost model's GPU memory, if known
    bool refineWithReplay = true;            // hill-climb the min-max partition on replayed time
    int maxRefineRounds = 16;
    const WorkControl* work = nullptr;       // progress and cancel (optional)
    int64_t maxRefineSteps = kMaxBalanceSteps; // schedule steps the refinement may replay in all
    bool timeline = true;                    // record the result's bubbles and transfers
    // Non-empty: each stage takes the first of these (least time first, e.g.
    // none, selective, full) that lets it fit the memory limit, instead of
    // the scenario's recomputation.
    std::vector<Recompute> recomputeChoices;
};

struct BalanceResult {
    Prediction prediction;
    TimeNs bottleneckNs = 0; // slowest stage's F + B per microbatch under the min-max partition
    int replays = 0;
    bool memoryFeasible = true; // a partition within the memory limit exists
};

// The partition minimising predicted iteration time for the scenario's
// schedule: min-max dynamic programming over heterogeneous layers with each
// stage's memory limit, then checked and refined by replay.
BalanceResult autoBalance(const CostModel& model, const Scenario& scenario, const BalanceOptions& options = {});

// Just the min-max step: boundaries minimising the slowest stage (F + B per
// microbatch, extras included, divided by the speed of the rank holding the
// stage: rankOfStage[s], when given, with the model's stageSpeed) with each
// stage's memory at most its limit (inFlight[s] microbatches stored on stage
// s). Empty when infeasible. stageOptions[s]: the recomputation stage s may
// run, least time first (empty: none everywhere); `chosen` gets, per stage,
// the first of its options that fits the memory.
std::vector<int> minMaxPartition(const CostModel& model, int stages, const std::vector<int>& inFlight,
                                 std::optional<int64_t> memoryLimitPerStage, int microbatches, TimeNs* bottleneck = nullptr,
                                 const std::vector<int>& rankOfStage = {},
                                 const std::vector<std::vector<Recompute>>& stageOptions = {},
                                 std::vector<Recompute>* chosen = nullptr);

// The what-if "rank R runs at its peers' speed": prices a data-parallel
// straggler in iteration time. The replay models one replica per stage, so
// each stage runs as its slowest replica (its compute scaled by max over the
// replicas' compute / their mean, from the analysis's RankSpeed); the fix
// replaces R's compute with its peers' median. gainNs is the difference of
// the two replays of the measured configuration; iterationNs the second
// (docs/whatif.md).
struct StragglerFix {
    int rank = 0, stage = 0, replica = 0;
    double relative = 1.0;          // R's compute / its peers' median
    TimeNs computeNs = 0, peerMedianNs = 0;
    TimeNs baseIterationNs = 0;     // the measured configuration, as predict() replays it (replica means)
    TimeNs slowestReplicaNs = 0;    // each stage at its slowest replica
    TimeNs fixedNs = 0;             // ... with R at its peers' median
    TimeNs gainNs = 0;              // slowestReplicaNs - fixedNs (>= 0)
    TimeNs iterationNs = 0;         // predicted iteration with R at its peers' speed (fixedNs)
};
// Throws ValueError(Setting::FixStraggler) when R is not a pipeline rank with
// data-parallel peers in the analysis.
StragglerFix priceStraggler(const CostModel& model, const AnalysisResult& analysis, int rank);

struct SearchSpace {
    std::vector<ScheduleKind> schedules; // default: all built-in
    std::vector<int> vs;                 // default: 1, 2, 3, 4 (what each schedule accepts)
    std::vector<int> microbatches;       // default: around the scenario's count
    int pp = 0;                          // default: the scenario's
    // Recomputation tried everywhere (uniform); empty: the scenario's own.
    std::vector<Recompute> recompute;
    // Also let auto-balance choose per stage among none, selective and full.
    bool recomputePerStage = false;
};

struct SearchRow {
    Scenario scenario;
    std::vector<int> boundaries;
    TimeNs iterationNs = 0;
    double bubbleFraction = 0;
    int64_t peakBytes = 0;
    bool outOfMemory = false;
    std::optional<double> speedup;
    bool recomputeChosen = false; // per stage by auto-balance (scenario.recompute holds the choice)
    bool pareto = false;          // on the time-memory front (paretoFront)
};

// Indices of the rows no other row beats in both iteration time and peak
// memory (at most as slow and as large, and better in one), in row order.
std::vector<size_t> paretoFront(const std::vector<SearchRow>& rows);

// Every valid combination (x the space's recomputation) auto-balanced and
// replayed, fastest first; those that run out of memory come last. Rows on
// the time-memory front have pareto set.
std::vector<SearchRow> searchConfigurations(const CostModel& model, const Scenario& base, const SearchSpace& space,
                                            const BalanceOptions& options = {});

} // namespace pipescope::whatif
