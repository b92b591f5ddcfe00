#pragma once
// Memory per rank: parameters, gradients and optimizer state (bytes per
// parameter and ZeRO stage configurable), plus each microbatch's stored
// activations from the start of its forward until its backward frees them,
// followed over the replayed timeline.
#include "whatif/Replay.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace pipescope::whatif {

struct MemoryConfig {
    double weightBytesPerParam = 2.0;     // bf16 weights
    double gradBytesPerParam = 4.0;       // fp32 main gradients
    double optimizerBytesPerParam = 12.0; // Adam: fp32 master weights + two moments
    int zeroStage = 0;                    // 1: optimizer sharded over dp, 2: + gradients, 3: + weights
    int dataParallel = 1;
    int64_t reservedBytes = 0;            // CUDA context, workspaces, fragmentation
    // Share of a microbatch's activations an I step keeps for its W step.
    double weightGradActivationShare = 0.5;
    // Selective recomputation (Korthikanti et al. 2022): the share of each
    // layer's stored activations it drops (the attention core's 5as/h of
    // 34 + 5as/h; GPT-3 175B: 80/114) and the share of the layer's forward it
    // re-runs inside the backward (the attention core's 4s^2h of 24sh^2 + 4s^2h
    // FLOPs: s / (6h + s)). Derived from a model description's sizes when given.
    double selectiveActivationShare = 0.7;
    double selectiveForwardShare = 0.03;
    std::optional<int64_t> gpuMemoryBytes; // for the out-of-memory flag
};

// Weights, gradients, optimizer state and the reserve for `params` parameters.
int64_t staticMemoryBytes(int64_t params, const MemoryConfig& config);
// The same when only `trainableParams` of them have gradients and optimizer
// state (the rest frozen: weights only).
int64_t staticMemoryBytes(int64_t params, int64_t trainableParams, const MemoryConfig& config);

struct MemoryPoint {
    TimeNs t = 0;
    int64_t bytes = 0;
};

struct RankMemory {
    int64_t parameters = 0;
    int64_t trainableParameters = 0; // with gradients and optimizer state
    int64_t staticBytes = 0;
    int64_t peakActivationBytes = 0;
    int64_t peakBytes = 0;
    TimeNs peakAt = 0;
    int peakInFlight = 0;          // microbatch-chunks holding activations at once
    std::vector<MemoryPoint> overTime; // step function: bytes from t until the next point
    bool outOfMemory = false;
};

// Most microbatches (per chunk) a rank holds at once: from the start of a
// forward until its B ends, or its W ends when the backward is split (or
// its I, with untilWeightGradient false).
std::vector<int> peakInFlight(const ReplayResult& replay, bool untilWeightGradient = true);

// paramsPerRank: parameters each rank holds; activationBytes: per virtual
// stage, bytes stored per microbatch.
// keepOverTime false: only the peaks (overTime stays empty), a few bytes per rank instead of per step.
// trainableParamsPerRank: those with gradients and optimizer state; empty: all of them.
// recomputeBytes: per virtual stage, what a backward holds again while it
// re-runs the forward (activation recomputation), from its start to its end
// (an I keeps weightGradActivationShare of stored + recomputed for its W).
std::vector<RankMemory> memoryOverTime(const ReplayResult& replay, const std::vector<int64_t>& paramsPerRank,
                                       const std::vector<int64_t>& activationBytes, const MemoryConfig& config,
                                       bool keepOverTime = true, const std::vector<int64_t>& trainableParamsPerRank = {},
                                       const std::vector<int64_t>& recomputeBytes = {});

} // namespace pipescope::whatif
