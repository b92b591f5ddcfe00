#pragma once
// Pipeline analysis of a loaded job: iterations, stages and steps, the
// schedule, bubbles by cause, imbalance, the critical path across ranks and
// views comparable with Holistic Trace Analysis. Plain values only, so the
// CLI, the desktop app and the HTML report share one result
// (see docs/analysis.md for the definitions, docs/analysis-json.md for the
// JSON form).
#include "model/Pipeline.h"
#include "model/Trace.h"
#include "util/Work.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pipescope {

class CommRules;

// ---- classification -------------------------------------------------------

enum class WorkClass : uint8_t { Compute = 0, P2p = 1, Collective = 2, Memcpy = 3, Memset = 4, Sync = 5, Other = 6 };
std::string_view toString(WorkClass c);

enum class StreamRole : uint8_t { Compute = 0, Communication = 1, Copy = 2, Idle = 3 };
std::string_view toString(StreamRole r);

struct StreamClass {
    int rank = 0;
    int64_t storeId = 0;
    int64_t stream = 0; // the trace's own stream id
    StreamRole role = StreamRole::Compute;
    std::array<int64_t, 7> count{};  // per WorkClass
    std::array<TimeNs, 7> timeNs{};  // per WorkClass, sum of durations
};

// ---- options ---------------------------------------------------------------

struct AnalyzeOptions {
    std::optional<int> iteration;      // index among detected iterations; default: a representative one
    std::optional<int> pipelineDegree; // --pp N: stage = rank / (world / N)
    std::map<int, int> stageMap;       // --stage-map rank:stage,...; wins over everything
    std::string iterationRange;        // annotation / NVTX range name marking iterations
    bool htaCompatible = false;        // HTA views in HTA's own arithmetic (whole us, last step dropped)
    bool allIterations = false;        // steps and bubbles of every iteration, not only the selected one
    TimeNs launchGapNs = 30'000;       // unexplained gaps up to this long are launch gaps
    const WorkControl* work = nullptr; // progress and cancel between passes (optional)
    // Autograd's sequence numbers of the framework ops that launched the given
    // activities, by store id (Store::autogradSequences). Optional: with it,
    // schedules whose kernels and transfers fall alike are told apart by which
    // forward each backward differentiates, and backward kernels find their
    // layer (docs/analysis.md section 10). Called at most twice per analysis.
    std::function<std::vector<std::vector<int64_t>>(const std::vector<int64_t>& activityIds)> autogradSequences;
    // Which kernels are communication beyond NCCL's (--comm-rules FILE and the
    // built-in table, CommRules.h); null: the built-in table.
    std::shared_ptr<const CommRules> commRules;
};

// ---- iterations ------------------------------------------------------------

struct RankSpan {
    int rank = 0;
    TimeNs start = 0;
    TimeNs end = 0;
};

// How an iteration's bounds were found (docs/analysis.md, section 1).
enum class IterationSource : uint8_t {
    ProfilerStep, // the profiler's own step ranges (ProfilerStep#N)
    Range,        // an annotation or NVTX range named by the user or known to mark steps
    StepRestart,  // step annotations that restart their microbatch numbering
    Periodic,     // the period of the GPU's repeating kernel sequence
    WholeTrace,   // nothing marks iterations: the trace is one
};
// "profiler_step", "range", "step_restart", "periodic", "whole_trace"
std::string_view toString(IterationSource s);

struct Iteration {
    int index = 0;
    std::string label;      // e.g. "ProfilerStep#5"
    IterationSource source = IterationSource::WholeTrace;
    TimeNs start = 0;       // over all ranks
    TimeNs end = 0;
    std::vector<RankSpan> ranks;
};

// ---- pipeline structure ----------------------------------------------------

struct StageAssignment {
    int rank = 0;
    int stage = -1;   // -1: not in the pipeline
    int replica = 0;  // data-parallel replica (which pipeline the rank belongs to)
};

struct Step {
    int iteration = 0;
    int rank = 0;
    int stage = 0;
    int chunk = 0;
    int microbatch = 0;
    StepKind kind = StepKind::F;
    TimeNs start = 0;
    TimeNs end = 0;
    TimeNs computeNs = 0;
    bool annotated = false; // label taken from an annotation, not inferred
};

// Where the ranks' stages came from: the user (--pp, --stage-map), the
// process groups the trace records, or the point-to-point peers.
enum class StageSource : uint8_t { None, User, ProcessGroup, Peers };
// "none", "user", "process_group", "peers"
std::string_view toString(StageSource s);

// Where the steps' labels (forward or backward, microbatch) came from.
enum class StepLabels : uint8_t { None, Annotations, Inferred, AnnotationsAndInferred };
// "none", "annotations", "inferred", "annotations+inferred"
std::string_view toString(StepLabels s);

struct PipelineStructure {
    bool found = false;
    std::string reason;          // why no pipeline was found, or how it was found
    StageSource stageSource = StageSource::None;
    int pp = 1, dp = 1, chunks = 1, microbatches = 0;
    std::vector<StageAssignment> stageMap;
    StepLabels labelsFrom = StepLabels::None;
    std::optional<ScheduleKind> schedule; // unset when no known schedule explains the steps
    double scheduleConfidence = 0.0;
    std::string scheduleEvidence;
    // Schedules that explain the trace as well as `schedule` does (they order
    // steps differently only where no transfer or annotation shows it).
    std::vector<ScheduleKind> scheduleAlike;
};

// Where the steps came from, in words: "steps from annotations", "steps
// inferred", "steps partly annotated, partly inferred" or "no steps".
std::string describeStepSource(StepLabels labelsFrom);
// scheduleName (the schedule's name, or "unknown"): model/Pipeline.h.

// ---- bubbles ---------------------------------------------------------------

// BubbleCause and kBubbleCauses: model/Pipeline.h.

struct Bubble {
    int iteration = 0;
    int rank = 0;
    TimeNs start = 0;
    TimeNs end = 0;
    BubbleCause cause = BubbleCause::Other;
};

struct RankIdle {
    int iteration = 0;
    int rank = 0;
    int stage = -1;
    TimeNs windowNs = 0;  // the iteration window
    TimeNs busyNs = 0;    // union of compute kernels inside it
    TimeNs idleNs = 0;    // windowNs - busyNs
    std::array<TimeNs, kBubbleCauses> byCause{}; // sums exactly to idleNs
    // Waiting for inputs beyond the schedule's own share, by the virtual
    // stage that held them up: following each late input back through the
    // steps that only waited for theirs, to the first one whose rank was
    // busy (the slower stage or chunk). Virtual stage order; pipeline ranks
    // whose steps are labelled only.
    std::vector<std::pair<int, TimeNs>> waitedOn;
};

// ---- imbalance -------------------------------------------------------------

struct Distribution {
    int64_t count = 0;
    double mean = 0, p50 = 0, p95 = 0;
};

struct StageBalance {
    int stage = 0;
    std::vector<int> ranks;
    Distribution forwardNs, backwardNs, backwardInputNs, backwardWeightNs;
    TimeNs busyNs = 0; // mean over the stage's replicas
};

// A rank's compute against the other data-parallel replicas of its stage,
// over the steps (kind, chunk, microbatch) every replica of the stage ran in
// the selected iteration. Compute is each step's kernel time (union of its
// kernels), so waiting for neighbours or the all-reduce does not count.
struct RankSpeed {
    int rank = 0;
    int stage = 0;
    int replica = 0;
    int steps = 0;                   // steps compared
    TimeNs computeNs = 0;            // their compute on this rank
    TimeNs peerMedianNs = 0;         // median of the other replicas' computeNs (0 without peers)
    std::optional<double> relative;  // computeNs / peerMedianNs: 1.00 as fast as the peers, 1.10 10% slower; none without peers
};

// A replica whose compute is at least kStragglerRatio times its peers' median.
struct Straggler {
    int stage = 0;
    int rank = 0;
    int replica = 0;
    TimeNs busyNs = 0;        // union of its compute kernels in the iteration
    TimeNs computeNs = 0;     // compute of the compared steps (RankSpeed)
    TimeNs peerMedianNs = 0;  // the other replicas' median over the same steps
    double relative = 1.0;    // computeNs / peerMedianNs
    // Iteration time it costs at most: the gradient all-reduce waits for the
    // slowest replica, which is late by no more than its excess compute over
    // its peers, computeNs - peerMedianNs (pipeline slack can hide part of it).
    TimeNs costNs = 0;
    // Iterations in which it was the busiest replica of its stage, of those
    // analysed with every replica (a straggler is one that persists: more
    // than half of them, when there are three or more).
    int slowestIterations = 0;
    int iterations = 0;
};

inline constexpr double kStragglerRatio = 1.05;

// A stage whose slowest replica changes from iteration to iteration (the
// data, not a worker): no straggler is claimed there.
struct MovingSlowest {
    int stage = 0;
    int iterations = 0;                       // analysed with every replica
    std::vector<std::pair<int, int>> slowest; // (rank, iterations it was the slowest), most first
};

struct Imbalance {
    std::vector<StageBalance> stages;
    double maxOverMean = 1.0;
    int bottleneckStage = -1;
    std::vector<RankSpeed> rankSpeed;    // every pipeline rank with steps, in rank order
    std::vector<Straggler> stragglers;   // replicas >= 5% slower than the median of their stage's other replicas, costliest first
    std::vector<MovingSlowest> movingSlowest; // stages whose slowest replica moves between iterations
    TimeNs iterationNs = 0;
    TimeNs balancedLowerBoundNs = 0;     // mean busy / (1 - ideal bubble fraction)
    double idealBubbleFraction = 0;      // (p-1)/(v*m+p-1)
    struct Overlap { int rank = 0; TimeNs commNs = 0; TimeNs overlappedNs = 0; };
    std::vector<Overlap> overlap;        // compute/communication overlap per rank
};

// ---- critical path ---------------------------------------------------------

// What a segment of the critical path spends its time on: the step kind for
// compute inside a step, else the work class, or idle.
enum class PathKind : uint8_t { F, B, I, W, Compute, P2p, Collective, Memcpy, Memset, Other, Idle };
// "F", "B", "I", "W", "compute", "p2p", "collective", "memcpy", "memset", "other", "idle"
std::string_view toString(PathKind k);

struct PathSegment {
    int rank = 0;
    int stage = -1;
    PathKind kind = PathKind::Compute;
    TimeNs start = 0;
    TimeNs end = 0;
};

struct CriticalPath {
    int iteration = 0;
    TimeNs start = 0, end = 0;
    std::vector<PathSegment> segments; // in time order, contiguous, covering [start, end)
    std::map<int, TimeNs> byStage;      // -1: ranks outside the pipeline
    std::map<std::string, TimeNs> byKind; // by toString(PathKind), in name order as every output lists them
};

// ---- HTA-compatible views --------------------------------------------------

// Times in ns; in HTA-compatible mode they are whole microseconds (multiples
// of 1000 ns) wherever HTA rounds.
struct HtaTemporal {
    int rank = 0;
    TimeNs kernelTimeNs = 0, idleTimeNs = 0, computeTimeNs = 0, nonComputeTimeNs = 0;
    std::optional<double> commCompOverlapPct; // none without communication
    bool rounded = false;       // HTA rounded this rank's times to whole us
    bool lastStepDropped = false;
};

struct HtaStreamIdle {
    int rank = 0;
    int64_t stream = 0;
    TimeNs hostWaitNs = 0, kernelWaitNs = 0, otherNs = 0;
};

struct HtaViews {
    bool htaCompatible = false;
    std::vector<HtaTemporal> temporal;
    std::vector<HtaStreamIdle> idle;
    std::vector<std::string> notes;
};

// ---- layers ----------------------------------------------------------------

// Per-layer costs of the selected iteration, per microbatch, attributed from
// the trace's module ranges (PyTorch's nn.Module calls) or pipescope/layer
// annotations (docs/analysis.md, section 10). `stage` is the virtual stage.
// Where per-layer costs came from: PyTorch's module ranges, pipescope/layer
// annotations, or nowhere.
enum class LayerRangeKind : uint8_t { None, Modules, Annotations };
// "none", "modules", "annotations"
std::string_view toString(LayerRangeKind s);

struct LayerAttribution {
    LayerRangeKind source = LayerRangeKind::None;
    std::string note;              // how the layers were found, or why there are none
    std::vector<LayerCost> layers; // the repeated blocks in model order: what a partition moves
    std::vector<LayerCost> before; // ahead of the blocks (embedding)
    std::vector<LayerCost> after;  // after them (final norm, head, loss)
    TimeNs attributedNs = 0;       // compute time of the measured ranks' iteration given to a layer
    TimeNs computeNs = 0;          // all compute time there
};

// ---- fillable bubbles ------------------------------------------------------

// Idle time on a stage's compute stream that extra work could fill (a
// second-order optimizer's per-layer updates, as in PipeFisher): the parts of
// bubbles caused by fill_drain, wait_neighbor, p2p_transfer and dp_sync,
// adjacent parts merged into one interval (docs/analysis.md, section 4).
bool isFillable(BubbleCause cause);

// Lengths in log2 buckets from 0.1 ms: bucket 0 holds bubbles shorter than
// 0.1 ms, bucket k >= 1 those in [0.1 ms * 2^(k-1), 0.1 ms * 2^k), the last
// everything from 102.4 ms up.
inline constexpr int kFillableBuckets = 12;
inline constexpr TimeNs kFillableBucketBaseNs = 100'000;
int fillableBucket(TimeNs length);
TimeNs fillableBucketStartNs(int bucket); // lower edge; 0 for bucket 0

struct FillableBubbles {
    int iteration = 0;
    int stage = 0;
    // The stage's replica with the least fillable time: extra work runs on
    // every replica, so the one with the least room bounds it.
    int rank = 0;
    int64_t count = 0;
    TimeNs totalNs = 0;
    TimeNs longestNs = 0;
    std::array<int64_t, kFillableBuckets> histogram{};
};

// ---- uneven microbatches ---------------------------------------------------

// Spread of one step kind's time over the microbatches of one stage.
struct MicrobatchTimes {
    TimeNs minNs = 0, p50Ns = 0, p95Ns = 0, maxNs = 0;
    int shortest = -1, longest = -1; // microbatch index
};

struct MicrobatchStage {
    int stage = 0;
    // [microbatch]: the step's time (end - start, the stage's chunks added,
    // replicas averaged); -1 where the microbatch has no such step.
    std::vector<TimeNs> forwardNs, backwardNs; // backward: B, or I + W where split
    MicrobatchTimes forward, backward;
};

// Each microbatch's cost in the selected iteration (docs/analysis.md,
// "Uneven microbatches"): packed sequences and multimodal batches make them
// differ, and a stage then waits on its neighbour's long microbatch.
struct MicrobatchSpread {
    int microbatches = 0;
    std::vector<MicrobatchStage> stages; // pipeline stages with steps
    std::vector<double> size;            // [microbatch]: forward + backward over all stages, mean 1
    double cv = 0;                       // coefficient of variation of size
    bool uneven = false;                 // cv >= kUnevenMicrobatchCv
    int shortest = -1, longest = -1;
};

// ---- expert-parallel (mixture-of-experts) all-to-all ----------------------

// One rank's all-to-all exchanges in the selected iteration: NCCL all-to-all
// operations (AllToAll, as torch.distributed's all_to_all records them), or
// kernels named so where the trace has no NCCL record.
struct AllToAllRank {
    int rank = 0;
    int stage = -1;
    int replica = 0;
    int64_t count = 0;       // kernels starting in the rank's iteration window
    int64_t bytes = 0;       // their message sizes where known
    TimeNs kernelNs = 0;     // union of their kernel time inside the window
    TimeNs windowNs = 0;     // the rank's iteration window
    TimeNs criticalNs = 0;   // of kernelNs, on the iteration's critical path
};

struct AllToAllStage {
    int stage = -1;          // -1: ranks outside the pipeline
    int ranks = 0;
    TimeNs meanKernelNs = 0; // mean over the stage's ranks with all-to-all
    double share = 0;        // kernel time over window time, summed over those ranks
};

struct AllToAll {
    std::vector<AllToAllRank> ranks;  // ranks with all-to-all, rank order; empty: none
    std::vector<AllToAllStage> stages;
    // Spread of kernelNs across ranks: a rank far above the median waits
    // for the others inside the exchange (uneven expert load) or is slow.
    TimeNs minNs = 0, medianNs = 0, maxNs = 0;
    TimeNs criticalNs = 0;      // on the critical path, over ranks
    double criticalShare = 0;   // of the critical path's length
};

// ---- measured memory -------------------------------------------------------

// A rank's GPU memory over the selected iteration, from the trace's allocator
// events (PyTorch's [memory] events with profile_memory=True, CUPTI memory
// records in captures; docs/analysis.md, "Measured memory"). Absolute when
// the events carry the allocator's total (PyTorch's "Total Allocated"); else
// relative to the iteration's start, summed from the changes alone.
struct MeasuredMemory {
    int rank = 0;
    int stage = -1;          // -1: not in the pipeline
    int device = 0;          // the GPU whose events these are
    bool absolute = false;   // from Total Allocated; false: relative to startBytes = 0
    int64_t startBytes = 0;  // in use as the iteration's window opens
    int64_t peakBytes = 0;   // most in use inside the window
    TimeNs peakAt = 0;       // when it was first reached (the window's start if never exceeded)
    int64_t minBytes = 0;    // least in use inside the window
    int64_t endBytes = 0;    // in use as it closes
    std::optional<int64_t> peakReservedBytes; // the caching allocator's reserve, where the trace says
    int64_t events = 0;      // allocator events inside the window
};

// ---- the whole result ------------------------------------------------------

struct Warning {
    std::string kind;
    std::string message;
};

struct AnalysisResult {
    std::vector<int> ranks;
    std::optional<int> worldSize;
    std::vector<StreamClass> streams;
    std::array<int64_t, 7> kernelCounts{}; // per WorkClass over the job
    std::vector<Iteration> iterations;
    int selectedIteration = -1;
    PipelineStructure pipeline;
    std::vector<Step> steps;         // the selected iteration (all with allIterations)
    std::vector<Bubble> bubbles;     // same
    std::vector<RankIdle> idle;      // every iteration and rank
    Imbalance imbalance;             // selected iteration
    CriticalPath criticalPath;       // selected iteration
    HtaViews hta;
    std::vector<MeasuredTransfer> transfers; // point-to-point transfers of the selected iteration
    LayerAttribution layers;         // selected iteration
    std::vector<Warning> warnings;
    std::vector<FillableBubbles> fillableBubbles; // every iteration, per pipeline stage
    AllToAll allToAll;               // selected iteration
    MicrobatchSpread microbatchSpread; // selected iteration
    std::vector<MeasuredMemory> memory; // selected iteration, ranks with allocator events, rank order
    std::shared_ptr<const CommRules> commRules; // the rules the kernels were classified by (null: built-in)

    // Totals of the selected iteration.
    const RankIdle* idleOf(int iteration, int rank) const;
};

// Throws Error when the trace holds no GPU activity at all.
AnalysisResult analyze(const Trace& trace, const AnalyzeOptions& options = {});

// Measured memory of r's selected iteration (r.memory; analyze() fills it).
std::vector<MeasuredMemory> measureMemory(const Trace& trace, const AnalysisResult& r);

// Parses "0:0,1:0,2:1" into rank -> stage; throws Error naming the text.
std::map<int, int> parseStageMap(const std::string& text);

} // namespace pipescope
