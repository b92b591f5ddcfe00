#pragma once
// The analysis as JSON, schema "pipescope.analysis/1" (docs/analysis-json.md).
// The desktop app and the HTML report read this form.
#include "analysis/Analysis.h"

#include <nlohmann/json.hpp>

namespace pipescope {

inline constexpr const char* kAnalysisSchema = "pipescope.analysis/1";

nlohmann::json toJson(const AnalysisResult& result, const AnalyzeOptions& options);

} // namespace pipescope
