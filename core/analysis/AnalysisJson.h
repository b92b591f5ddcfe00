#pragma once
// The analysis as JSON, schema "pipescope.analysis/2" (docs/analysis-json.md).
// An export format: the desktop app and the HTML report use AnalysisResult itself.
#include "analysis/Analysis.h"

#include <nlohmann/json.hpp>

namespace pipescope {

inline constexpr const char* kAnalysisSchema = "pipescope.analysis/2";

nlohmann::json toJson(const AnalysisResult& result, const AnalyzeOptions& options);

} // namespace pipescope
