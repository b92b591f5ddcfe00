#pragma once
// The analysis as the app holds it, read back from `pipescope analyze
// --json`'s document (schema pipescope.analysis/2, docs/analysis-json.md):
// what a remote job's server sends (docs/remote.md, "analysis" and "steps").
// Every section the document has is read; what it does not carry stays
// empty: the per-stream kernel counts' store ids are the document's, the
// point-to-point transfers (AnalysisResult::transfers) are not in it, and
// distributions come back with their means rounded to whole nanoseconds.
// Qt-free.
#include "analysis/Analysis.h"

#include <nlohmann/json.hpp>

namespace pipescope::gui {

// Throws FormatError naming the first field missing or of the wrong type, or
// a number out of the range a local analysis gives it (a rank, an iteration,
// a stage, a chunk or a microbatch the views would index with).
AnalysisResult analysisFromJson(const nlohmann::json& doc);

// The whole document from the analysis's summary (analysis "parts":
// "summary") and the steps, bubbles and critical path segments of a steps
// request of every rank: the summary less its "summary", with the three arrays.
nlohmann::json wholeAnalysisDocument(nlohmann::json summary, nlohmann::json steps, nlohmann::json bubbles,
                                     nlohmann::json segments);

} // namespace pipescope::gui
