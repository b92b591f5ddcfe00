#pragma once
// The self-contained HTML report of a job (`pipescope report`): job facts,
// a zoomable Gantt timeline of one iteration, idle time by cause, stage
// imbalance, the critical path, HTA-comparable views, warnings and a what-if
// comparison of the measured partition with an auto-balanced one. One file
// with inline CSS, JS and data; nothing is loaded from anywhere else.
// docs/report.md describes every section.
#include "analysis/Analysis.h"
#include "analysis/JobPart.h"
#include "analysis/Verdict.h"
#include "compare/Diff.h"
#include "model/Trace.h"
#include "whatif/WhatIf.h"

#include <optional>
#include <string>
#include <vector>

namespace pipescope::report {

struct ReportOptions {
    std::optional<int> iteration; // index among detected iterations; default: a representative one
    std::string storePath;        // shown in the header
    // Timeline resolution: intervals shorter than window / foldColumns are
    // folded with their neighbours into one counted block (a 4K screen has
    // fewer pixels across than this, so nothing visible is lost at full view).
    int foldColumns = 4000;
    // Most blocks drawn per lane and row; the rest are left out and the
    // report says how many.
    int maxItemsPerLane = 5000;
    bool whatIf = true;
    // The what-if section's question, as `pipescope whatif` takes it: a
    // scenario besides the measured one (auto-balanced under the scenario's
    // schedule), and how to calibrate (layer count, model description, ...).
    whatif::ScenarioChanges whatIfChanges;
    whatif::CalibrateOptions calibrate;
    // Token counts per microbatch (--microbatch-tokens): the what-if's
    // microbatch sizes instead of the measured ones.
    std::optional<whatif::MicrobatchTokens> microbatchTokens;
    // Progress and cancel between sections and inside the auto-balance (optional).
    const WorkControl* work = nullptr;
    // AnalyzeOptions::autogradSequences for the analysis renderReport() runs (optional).
    std::function<std::vector<std::vector<int64_t>>(const std::vector<int64_t>&)> autogradSequences;
    // AnalyzeOptions::commRules (--comm-rules) for that analysis.
    std::shared_ptr<const CommRules> commRules;
    // A baseline run compared with this job (--compare, docs/diff.md): the
    // report gains a comparison section first. Optional; must outlive the call.
    const compare::DiffResult* comparison = nullptr;
    // A job read in part (analysis/JobPart.h): the page says which ranks it
    // covers and shows each stage across all its replicas from the job
    // index; the analysis renderReport() runs takes the index's stages for
    // ranks that are not whole pipelines. Optional; must outlive the call.
    const JobPart* jobPart = nullptr;
};

// The report as one HTML document. Throws Error when the trace holds no GPU
// activity (as the analysis does); a what-if engine that cannot calibrate on
// the trace is not an error: its message is shown in the what-if section.
// verdict, when given, receives the verdict the report shows on top.
std::string renderReport(const Trace& trace, const ReportOptions& options = {}, Verdict* verdict = nullptr);

// The same on an analysis already made of `trace` (the app's): the page shows
// analysis.selectedIteration, and options.iteration is not looked at. Steps
// and bubbles of other iterations (AnalyzeOptions::allIterations) are left
// out, so the page equals the one renderReport(trace, options) writes when
// both select the same iteration.
std::string renderReport(const Trace& trace, const AnalysisResult& analysis, const ReportOptions& options,
                         Verdict* verdict = nullptr);

} // namespace pipescope::report
