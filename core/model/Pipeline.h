#pragma once
// The pipeline as the analysis measured it: the hand-off between
// core/analysis (which fills it from a trace) and core/whatif (which builds a
// cost model from it and replays other configurations). Plain values only.
#include "model/Types.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope {

// ---- the vocabulary shared by measured and predicted pipelines -------------
// The analysis (what a trace shows), the what-if replay (what a configuration
// would do), the timeline and the report all speak these types.

// Why a GPU's compute stream sat idle inside an iteration (docs/analysis.md).
// Other is the last cause: code that meets a cause it does not know shows it as other.
enum class BubbleCause : uint8_t {
    FillDrain = 0,
    WaitNeighbor = 1,
    P2pTransfer = 2,
    DpSync = 3,
    AllToAll = 4,
    HostBound = 5,
    StepOverhead = 6,
    LaunchGap = 7,
    Other = 8
};
inline constexpr int kBubbleCauses = 9;
// "fill_drain", "wait_neighbor", "p2p_transfer", "dp_sync", "all_to_all", "host_bound", "step_overhead",
// "launch_gap", "other"
std::string_view toString(BubbleCause c);
std::optional<BubbleCause> bubbleCauseFromString(std::string_view name);
using CauseTotals = std::array<TimeNs, kBubbleCauses>;

// The one rule for where a rank's pipeline fills and drains, used by the
// analysis for measured idle time and by the replay for predicted idle time
// (docs/analysis.md, section 4): the fill lasts until the rank's first step
// that is not a forward begins, the drain from its last forward's end. Idle
// time there is fill/drain; between them it is waiting (or transfer, host,
// ...). A rank with only forwards, or only backwards, is all fill and drain
// around its steps.
class FillDrainBounds {
public:
    void add(bool forward, TimeNs start, TimeNs end)
    {
        any_ = true;
        if (!forward)
            firstOther_ = firstOther_ ? std::min(*firstOther_, start) : start;
        else
            lastForwardEnd_ = lastForwardEnd_ ? std::max(*lastForwardEnd_, end) : end;
    }
    bool any() const { return any_; }
    TimeNs fillEnd() const { return firstOther_ ? *firstOther_ : lastForwardEnd_.value_or(0); }
    TimeNs drainStart() const { return lastForwardEnd_ ? *lastForwardEnd_ : firstOther_.value_or(0); }
    // Idle [from, to) of the rank lies in its fill or its drain.
    bool inFillOrDrain(TimeNs from, TimeNs to) const { return !any_ || to <= fillEnd() || from >= drainStart(); }

private:
    bool any_ = false;
    std::optional<TimeNs> firstOther_, lastForwardEnd_;
};

// Microbatches whose costs vary by at least this coefficient of variation
// are uneven: the analysis says so, and a calibrated what-if replays each
// with its own cost (below it, the differences are taken for noise).
inline constexpr double kUnevenMicrobatchCv = 0.05;

enum class ScheduleKind : uint8_t {
    GPipe,
    OneFOneB,
    Interleaved1F1B, // Megatron-LM's order
    LoopedBFS,
    ZeroBubbleH1,    // ZB-H1 (v = 1), interleaved zero bubble (v > 1), torch's ZB1P order
    ZeroBubbleH2,
    ZeroBubbleV,
    DualPipeV,
    Custom,          // loaded from a CSV file
};

// Canonical names: gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb-h2, zb-v, dualpipev, custom.
std::string_view toString(ScheduleKind kind);
// The canonical name, or "unknown" when unset.
std::string scheduleName(const std::optional<ScheduleKind>& schedule);
// Accepts canonical names and common spellings (interleaved, zbh1, ZBVZeroBubble, ...); nullopt if unknown.
std::optional<ScheduleKind> scheduleKindFromString(std::string_view name);
// All built-in kinds, for searches, help texts and the app's schedule menu.
const std::vector<ScheduleKind>& builtinScheduleKinds();
// ZB-V and DualPipeV place two chunks per rank in a V; the others loop.
bool isVShaped(ScheduleKind kind);
bool splitsBackward(ScheduleKind kind); // uses I and W instead of B

// F = forward, B = full backward, I = backward for inputs only, W = backward
// for weights only (zero-bubble schedules split B into I and W).
enum class StepKind : uint8_t { F = 0, B = 1, I = 2, W = 3 };

inline char toChar(StepKind k) { return "FBIW"[static_cast<int>(k)]; }

struct PipelineStep {
    int rank = 0;
    int stage = 0;       // pipeline stage (virtual stage = chunk * pp + stage for interleaved)
    int chunk = 0;       // virtual chunk on this rank (0 when not interleaved)
    int microbatch = 0;
    StepKind kind = StepKind::F;
    TimeNs start = 0;
    TimeNs end = 0;
    TimeNs computeNs = 0; // compute-kernel time inside [start, end)
};

// One measured point-to-point transfer between neighbouring stages.
struct MeasuredTransfer {
    int srcRank = 0;
    int dstRank = 0;
    int64_t bytes = 0;
    TimeNs transferNs = 0; // kernel time minus waiting: what the bytes needed
};

// One point-to-point message with both ends matched (the k-th send from one
// rank to another is the k-th receive there): when the sender's and the
// receiver's kernels started, and when the data had landed (the receive's end).
struct MeasuredMessage {
    int srcRank = 0;
    int dstRank = 0;
    int64_t bytes = 0;
    TimeNs sendStart = 0;
    TimeNs recvStart = 0;
    TimeNs recvEnd = 0;
    TimeNs sendEnd = 0;
};

// Per-layer measured cost, when annotations attribute kernels to layers.
struct LayerCost {
    std::string name;
    int stage = 0;
    TimeNs forwardNs = 0;
    TimeNs backwardNs = 0;
    std::optional<TimeNs> backwardInputNs;
    std::optional<TimeNs> backwardWeightNs;
};

struct MeasuredPipeline {
    int pipelineDegree = 1;   // p
    int dataParallel = 1;
    int chunks = 1;           // v
    int microbatches = 0;     // m
    std::optional<ScheduleKind> schedule; // unset: no known schedule explains the steps
    double scheduleConfidence = 0.0;
    std::vector<int> stageOfRank;        // indexed by rank; -1 when unmapped
    std::vector<int> replicaOfRank;      // indexed by rank: its data-parallel replica (pipeline); empty: all 0
    std::vector<PipelineStep> steps;     // one iteration
    std::vector<MeasuredTransfer> transfers;
    std::vector<MeasuredMessage> messages; // matched sends and receives of the iteration
    std::vector<LayerCost> layers;       // empty when layers cannot be attributed
    TimeNs iterationNs = 0;              // measured iteration time (max over ranks)
    std::optional<TimeNs> iterationStart; // where that iteration begins on the trace clock
    std::vector<TimeNs> idleNsPerStage;  // measured idle inside the iteration
    TimeNs dataParallelSyncNs = 0;       // gradient all-reduce at iteration end
    // A collective over the pipeline's ranks after their last step (a loss or
    // gradient-norm all-reduce, a barrier): from the last rank joining it to
    // the last leaving. 0 when there is none.
    TimeNs pipelineSyncNs = 0;
    // [rank]: when the rank could begin the iteration, from its start: the
    // receive it posted for its first step (a rank still busy with the
    // previous iteration posts it late). Empty or 0: at the start.
    std::vector<TimeNs> rankStartNs;
    TimeNs optimizerNs = 0;
    // Whether a rank's compute waited for its own sends: the batched,
    // blocking exchanges Megatron-LM and torch.distributed.pipelining run by
    // default (steps start only after a send its receiver was late for), as
    // opposed to sends that overlap the next step. With it, the median time
    // from an exchange's end to the next step (synchronize and launch).
    bool blockingExchanges = false;
    TimeNs exchangeGapNs = 0;
    std::optional<int64_t> gpuMemoryBytes;
    // [rank]: measured peak GPU memory in use over the iteration, from the
    // allocator's totals (AnalysisResult::memory); -1 where the trace has no
    // absolute figure. Empty when it records no memory at all.
    std::vector<int64_t> measuredPeakBytes;
};

} // namespace pipescope
