#pragma once
// Builds the typed timeline from a measured trace and its analysis, or from a
// what-if prediction's replay.
#include "timeline/TimelineModel.h"
#include "whatif/WhatIf.h"

namespace pipescope::timeline {

struct MeasuredOptions {
    bool cpuAnnotations = true; // Annotation and NVTX ranges as CPU lanes
    int maxCpuDepth = 4;        // rows per CPU thread; deeper ranges share the last
};

// The whole trace: one lane per GPU stream with every activity, steps and
// bubbles for whatever iterations the result holds, CPU annotation lanes and
// the iteration boundaries. Activity indices refer to `trace.activities`.
TimelineModel buildMeasured(const Trace& trace, const AnalysisResult& result, const MeasuredOptions& options = {});

// The replay of a prediction: per rank its steps, bubbles and a lane of
// transfers it sends plus its all-reduce, pipeline sync and optimizer; times
// relative to 0. One iteration.
TimelineModel buildPredicted(const whatif::Prediction& prediction);

} // namespace pipescope::timeline
