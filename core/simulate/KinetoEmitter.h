#pragma once
// Writes a simulated pipeline job as per-rank PyTorch profiler (Kineto) JSON
// files, DIR/rank-<r>.json, so the importer, the analysis and the app can be
// shown a pipeline without a cluster. Every file says it is simulated (a
// top-level "pipescope" object). Timings come from replaying the prediction
// once per iteration with small seeded jitter: deterministic, yet uneven
// like a measurement.
#include "util/Limits.h"
#include "whatif/WhatIf.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pipescope::simulate {

struct KinetoEmitOptions {
    int iterations = 2;
    uint64_t seed = 1;
    double jitter = 0.03;        // relative spread of step times per iteration
    TimeNs launchGapNs = 15'000; // host time between steps
    std::string modelName = "model";
    std::string gpuName = "NVIDIA H100 80GB HBM3";
    int firstStepNumber = 10;    // ProfilerStep#<n> of the first iteration
    // The prediction's cost model: with it each step's kernels run layer by
    // layer inside PyTorch's module events (python_function nn.Module calls,
    // autograd sequence numbers, fwdbwd flows), as with_stack=True records them.
    // Without it, each kernel is launched from one op carrying autograd's
    // sequence number (aten::linear forwards, evaluate_function backwards).
    const whatif::CostModel* costModel = nullptr;
    // forward_step / backward_step ranges around each step (Megatron-LM's and
    // pipescope_annotate's names). Off: a trace the analysis must read steps
    // from kernel order and point-to-point peers alone.
    bool stepAnnotations = true;
    // The most steps written (steps x iterations x data-parallel replicas):
    // `pipescope simulate` keeps kMaxEmittedSteps; the scale benchmarks,
    // which write jobs of thousands of small ranks, raise it.
    int64_t maxSteps = kMaxEmittedSteps;
};

struct KinetoEmitSummary {
    std::vector<std::string> files;        // one per global rank
    std::vector<int64_t> kernelsPerRank;   // compute + NCCL + optimizer kernels
    std::vector<TimeNs> iterationNs;       // replayed length of each iteration
};

// Throws Error when the folder cannot be created or written.
KinetoEmitSummary emitKineto(const whatif::Prediction& prediction, const KinetoEmitOptions& options, const std::string& dir);

} // namespace pipescope::simulate
