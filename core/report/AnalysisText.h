#pragma once
// The text form of an analysis, as `pipescope analyze` prints it: the
// verdict, the pipeline, idle by cause, imbalance, the critical path, the
// levers the what-if engine priced, HTA views and warnings. Beside the
// what-if text (whatif/WhatIfText.h) so that every front end prints the same.
#include "analysis/Analysis.h"
#include "whatif/Levers.h"

#include <ostream>
#include <string>

namespace pipescope::report {

void printAnalysisText(std::ostream& os, const std::string& file, const AnalysisResult& r, const whatif::Levers& levers);

} // namespace pipescope::report
