#pragma once
// Entry point the what-if engine uses to calibrate on a trace: the measured
// pipeline of one iteration (see model/Pipeline.h).
#include "model/Pipeline.h"
#include "model/Trace.h"

#include <optional>
#include <string>

namespace pipescope {

struct MeasureOptions {
    std::optional<int> iteration;      // index among detected iterations; default: a representative one
    std::optional<int> pipelineDegree; // --pp N
    std::string iterationRange;        // user-given annotation name marking iterations
};

// Throws Error when no pipeline can be found in the trace.
MeasuredPipeline measurePipeline(const Trace& trace, const MeasureOptions& options = {});

struct AnalysisResult;
// The same from an analysis already made (the app and the report analyse once
// and calibrate on that result): the result's selected iteration is measured.
MeasuredPipeline measurePipeline(const Trace& trace, const AnalysisResult& result);

} // namespace pipescope
