#pragma once
// What each layer costs: per-microbatch F, B, I and W times, parameters and
// stored activations, plus the first and last stage extras (embedding, head,
// loss), point-to-point and all-reduce costs and the memory configuration.
// Built from a model description, from a measured pipeline, or both; turned
// into per-stage replay costs for any partition of the layers.
#include "model/Pipeline.h"
#include "whatif/Memory.h"
#include "whatif/MicrobatchSizes.h"
#include "whatif/ModelDescription.h"
#include "whatif/Replay.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace pipescope::whatif {

struct LayerCostModel {
    std::string name;
    double forwardNs = 0, backwardNs = 0; // per microbatch at the reference microbatch count
    double backwardInputShare = 0.5;      // I = share x B, W = the rest
    int64_t params = 0;
    int64_t activationBytes = 0;
    bool frozen = false;                  // no weight gradients, gradient buffers or optimizer state
    int64_t trainableParams() const { return frozen ? 0 : params; }
};

// Layers FIRST..LAST, 0-based and inclusive (--freeze 0..3,30..31).
struct LayerRange {
    int first = 0, last = 0;
    bool operator==(const LayerRange&) const = default;
};
// Each item "FIRST..LAST" or a single "N"; throws ValueError(Setting::Freeze) naming
// the item that is not a range or runs backwards. Layer counts are checked by
// CostModel::freezeLayers.
std::vector<LayerRange> parseLayerRanges(const std::vector<std::string>& items);
// "0..3, 30..31"
std::string layerRangesText(const std::vector<LayerRange>& ranges);

// First layer of each virtual stage, plus the layer count at the end:
// firstLayer.size() == stages + 1, firstLayer.front() == 0, strictly increasing.
struct Partition {
    std::vector<int> firstLayer;

    int stages() const { return static_cast<int>(firstLayer.size()) - 1; }
    int layersOf(int stage) const { return firstLayer[size_t(stage) + 1] - firstLayer[size_t(stage)]; }
    std::vector<int> boundaries() const { return {firstLayer.begin() + 1, firstLayer.end() - 1}; }
};

// Layers split evenly; throws Error when `layers` is not a multiple of `stages`.
Partition evenPartition(int layers, int stages);
// From user boundaries (first layer of stages 1..S-1); throws Error naming the
// problem: wrong count, not increasing, outside 1..layers-1.
Partition partitionFromBoundaries(const std::vector<int>& boundaries, int layers, int stages);

struct FromMeasuredOptions {
    std::optional<int> layers;             // layer count when the trace does not attribute layers
    std::vector<int> measuredBoundaries;   // the measured run's partition (default: even split)
    std::vector<double> layerWeights;      // relative cost per layer (default: model's, else equal)
};

// Where a cost model's layers come from.
enum class LayerSource : uint8_t {
    Stages, // nothing known: one layer per measured stage, so no boundary can move
    Count,  // a layer count the user gave, each stage's time split over its layers
    Model,  // a model description
    Trace,  // attributed from the trace (module or pipescope/layer ranges)
};
// "stages", "count", "model", "trace" (the JSON's layer_source)
std::string_view toString(LayerSource source);

// From an exchange's end to the next step when nothing measured it (a
// model description): the host's synchronize and the next launch.
inline constexpr TimeNs kDefaultExchangeGapNs = 30'000;

// Measured speeds this close to 1 are noise, not a slower GPU.
inline constexpr double kSameSpeedTolerance = 0.03;

struct CostModel {
    std::string name;
    std::vector<LayerCostModel> layers;
    LayerSource layerSource = LayerSource::Stages;
    LayerCostModel firstStageExtra; // on virtual stage 0
    LayerCostModel lastStageExtra;  // on the last virtual stage
    // What the extras were taken to be where the trace does not attribute
    // time to layers (--layers N): one sentence for the user; empty when
    // nothing was assumed (docs/whatif.md, "Layers from a count").
    std::string stageExtrasNote;

    int64_t p2pBytes = 0;           // activation crossing a boundary, per microbatch
    TimeNs p2pLatencyNs = 0;
    double p2pBytesPerNs = 0;       // 0: transfers take only the latency
    // Bytes a send delivers before the receiver posts its receive: NCCL's
    // default channel buffer (NCCL_BUFFSIZE, 4 MiB).
    int64_t p2pEagerBytes = int64_t(4) << 20;

    int dataParallel = 1;
    // Gradient all-reduce: from bandwidth, or scaled from a measured one.
    TimeNs allReduceLatencyNs = 0;
    double allReduceBytesPerNs = 0;
    double gradCommBytesPerParam = 2.0;
    std::optional<TimeNs> measuredAllReduceNs; // for the measured rank holding `measuredUnits`
    std::optional<TimeNs> measuredOptimizerNs;
    double measuredUnits = 0;                  // parameters (or layers) of the measured busiest rank
    double optimizerNsPerParam = 0;
    TimeNs launchGapNs = 0;
    // [pipeline rank][F, B]: the host's measured gap before a step whose input
    // was ready before the rank's previous step ended (the median over such
    // steps: what every step pays for its launch, transfer calls and Python);
    // 0 where the trace shows too few such steps (launchGapNs holds there).
    // Empty: launchGapNs everywhere.
    std::vector<std::array<TimeNs, 2>> stepGapNs;
    // [pipeline rank][F, B]: where the trace tells them apart, the gap before
    // a step whose input the rank made itself (or the data loader: no
    // receive to post), stepGapNs then being the gap before one whose input
    // came from another rank; -1 where not told apart. Empty: stepGapNs for all.
    std::vector<std::array<TimeNs, 2>> localStepGapNs;
    // The order the measured run ran its steps in, per pipeline rank, where
    // it is not the built-in schedule's (a breadth-first run that starts its
    // backwards early, an order of the framework's own): the measured
    // configuration replays it (scheduleFor(model, scenario)). Its kind is the
    // built-in kind it was read as.
    std::optional<Schedule> measuredOrder;
    // Exchanges hold the compute stream (ReplayCosts::blockingExchanges), as
    // the measured run showed (MeasuredPipeline::blockingExchanges).
    bool blockingExchanges = false;
    TimeNs exchangeGapNs = 0;
    // Exchanges as Megatron-LM issues them, and whether transfers share one
    // medium (ReplayCosts::megatronExchanges, sharedLinks): chosen by
    // calibrate() when they reproduce the measured run better, or by the user.
    bool megatronExchanges = false;
    bool sharedLinks = false;
    // Collective over all pipeline ranks at the iteration end (measured:
    // from the last rank joining to the last leaving).
    TimeNs pipelineSyncNs = 0;
    // [pipeline rank] when each rank began the measured iteration (see
    // MeasuredPipeline::rankStartNs); used while the pipeline degree is the measured one.
    std::vector<TimeNs> rankStartNs;

    MemoryConfig memory;

    // Costs are per microbatch at this count; with keepGlobalBatch, another
    // count scales each microbatch (and its activations and transfers) by
    // referenceMicrobatches / m.
    int referenceMicrobatches = 1;
    bool keepGlobalBatch = false;

    // The measured run, when built from a trace.
    std::optional<TimeNs> measuredIterationNs;
    std::vector<TimeNs> measuredIdleNsPerStage; // per pipeline stage (rank of the pipeline)
    // [pipeline rank]: the measured run's peak GPU memory in use (the most
    // over the stage's replicas), from the trace's allocator totals
    // (AnalysisResult::memory); -1 where unknown; empty when the trace has none.
    std::vector<int64_t> measuredPeakBytes;
    std::optional<Partition> measuredPartition;
    std::optional<ScheduleKind> measuredSchedule; // the measured run's; unset when unknown or not measured
    int measuredPp = 0, measuredV = 1, measuredMicrobatches = 0;

    // Relative compute throughput of each pipeline rank's GPU (1 = reference,
    // 0.5 = takes twice as long); empty: all 1. A stage's layers take
    // reference cost / speed of the rank holding it (docs/whatif.md).
    std::vector<double> stageSpeed;
    // [measured pipeline rank]: its slowest data-parallel replica's compute
    // over the replicas' mean (>= 1), from the analysed iteration; empty for
    // dp = 1. Every replica's pipeline waits for the slowest at the gradient
    // all-reduce, so each stage runs at its slowest replica's pace.
    std::vector<double> replicaPace;
    // Set by fromMeasured: the layer costs are as measured on the stage that
    // ran them, so setStageSpeeds() turns them into reference-speed costs.
    bool measuredCosts = false;

    // Frozen layers (freezeLayers), sorted and merged; empty: all trainable.
    std::vector<LayerRange> frozenLayers;

    // Uneven microbatches: each microbatch's cost against the mean, from the
    // trace (kept when their spread is at least kUnevenMicrobatchCv), a
    // tokens file or a simulated distribution. Unset: all microbatches equal.
    // Applies to scenarios with this many microbatches (docs/whatif.md).
    std::optional<MicrobatchSizes> microbatchSizes;
    // Data-parallel replicas whose work differs (each holds other sequences):
    // [replica] each microbatch's measured steps on each stage against the
    // stage's mean over every replica, so each replica's pipeline replays
    // with its own work and the iteration waits for the slowest at the
    // gradient sync (docs/whatif.md, "Data-parallel replicas"). Used in
    // place of replicaPace by every scenario but equal microbatches; another
    // microbatch count splits or merges each replica's measured microbatches
    // (resampledSizes). Empty for dp = 1.
    std::vector<MicrobatchSizes> replicaSizes;
    // Whether a scenario of this shape replays each replica (replicaSizes).
    bool perReplicaFor(int pp, int microbatches, MicrobatchOrder order) const;
    // Sizes from token counts: relative costs tokens / mean; with per-token
    // costs, every layer's forward (backward) becomes mean tokens x ns per token.
    // Throws ValueError(Setting::MicrobatchTokens) for an empty list.
    void setMicrobatchTokens(const MicrobatchTokens& tokens);
    // Whether a scenario of `microbatches` runs uneven microbatches under `order`.
    bool unevenFor(int microbatches, MicrobatchOrder order) const;

    int layerCount() const { return static_cast<int>(layers.size()); }
    // Freezes the layers of `ranges` (docs/whatif.md, Frozen layers): each
    // loses the weight-gradient part of its backward (W = (1 - share) x B)
    // and its gradients and optimizer state; the frozen prefix starting at
    // layer 0, with the first-stage extra before it, runs no backward at all
    // and stores no activations, since nothing before it needs an input
    // gradient. Throws ValueError(Setting::Freeze) for a range outside the layers;
    // Error when layers are frozen already.
    void freezeLayers(const std::vector<LayerRange>& ranges);
    // Layers 0..n-1 all frozen (0 when layer 0 is trainable).
    int frozenPrefix() const;
    double speedOfRank(int rank) const;
    // The pace a pipeline rank's work runs at in a replay: its declared speed,
    // slowed by replicaPace (the slowest data-parallel replica of the stage
    // sets the pipeline's pace; the layer costs are replica means).
    double paceOfRank(int rank) const;
    bool heterogeneous() const; // some stage speed differs from 1
    // Declares the GPUs' speeds, one per pipeline rank (measuredPp of them for
    // a calibrated model). Costs measured on a trace already include the
    // speed of the rank that ran them: each layer (and extra) is multiplied by
    // the speed of its measured rank, so the measured configuration replays
    // unchanged and a moved layer costs reference / speed of its new rank.
    // Throws ValueError(Setting::StageSpeed) for a wrong count or a speed that is
    // not a finite number above 0.
    void setStageSpeeds(std::vector<double> speeds);
    // Each pipeline rank's speed as the trace shows it (docs/whatif.md,
    // "Speeds from the trace"): the median forward + backward time of the
    // layers its measured stages ran, against the median over all ranks, so
    // 0.8 is a rank that takes 1.25x as long for the same layer; speeds
    // within kSameSpeedTolerance of 1 are 1. Needs layers timed from the
    // trace (layer source "trace") on at least two ranks; throws
    // ValueError(Setting::StageSpeed) naming what is missing otherwise.
    std::vector<double> measuredStageSpeeds() const;

    static CostModel fromModel(const ModelDescription& model);
    // Calibrates on a measured pipeline; `model` (optional) supplies layer
    // structure, relative costs, parameters, activations, memory settings and
    // communication overrides. Throws Error when the measurement is unusable.
    static CostModel fromMeasured(const MeasuredPipeline& measured, const ModelDescription* model = nullptr,
                                  const FromMeasuredOptions& options = {});

    // Per-stage replay costs for a partition over a schedule's stages; with
    // microbatchSizes for the schedule's microbatch count and an order other
    // than Equal, also each microbatch's own costs (ReplayCosts::microbatchCosts):
    // a layer's cost scaled by the size of that microbatch on the measured
    // stage that ran the layer.
    ReplayCosts replayCosts(const Partition& partition, const Schedule& schedule,
                            MicrobatchOrder order = MicrobatchOrder::Given) const;
    // Parameters and stored activation bytes per microbatch, per virtual stage.
    std::vector<int64_t> stageParams(const Partition& partition) const;
    // Parameters with gradients and optimizer state (not frozen), per virtual stage.
    std::vector<int64_t> stageTrainableParams(const Partition& partition) const;
    std::vector<int64_t> stageActivationBytes(const Partition& partition, int microbatches) const;
    double microbatchScale(int microbatches) const;
};

} // namespace pipescope::whatif
