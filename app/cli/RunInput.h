#pragma once
// A run named on the command line as a store, a trace file or a folder of
// per-rank traces: traces are imported into a temporary store, removed when
// the run is closed. Used by the commands that compare two runs.
#include "analysis/Analysis.h"
#include "analysis/JobPart.h"
#include "store/Store.h"
#include "whatif/WhatIf.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace pipescope::cli {

struct LoadedRun {
    std::string name;           // as the user named it
    std::filesystem::path scratch; // the temporary folder of an imported trace, removed on destruction
    int scratchSignal = -1;        // its AtomicOutput::trackTemporary handle: a signal removes it too
    Trace trace;
    AnalysisResult analysis;
    std::optional<whatif::CostModel> model; // when the pipeline calibrates
    std::string modelWhyNot;                // why there is none
    JobPart part;                           // a sharded job read in part: what was read (analysis/JobPart.h)

    LoadedRun() = default;
    LoadedRun(const LoadedRun&) = delete;
    LoadedRun& operator=(const LoadedRun&) = delete;
    ~LoadedRun();
};

// Opens, analyses and calibrates one run; a sharded job beyond the memory
// budget is read one pipeline, as analyze reads it (RankSelection.h). `label` ("A", "B") prefixes
// progress. Throws Error naming the input.
std::unique_ptr<LoadedRun> loadRun(const std::string& input, AnalyzeOptions analyze,
                                   const whatif::CalibrateOptions& calibrate, bool progress);

} // namespace pipescope::cli
