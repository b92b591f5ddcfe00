#pragma once
// The text form of an analysis, as `pipescope analyze` prints it: the
// verdict, the pipeline, idle by cause, imbalance, the critical path, the
// levers the what-if engine priced, HTA views and warnings. Beside the
// what-if text (whatif/WhatIfText.h) so that every front end prints the same.
#include "analysis/Analysis.h"
#include "analysis/JobPart.h"
#include "whatif/Levers.h"

#include <ostream>
#include <string>

namespace pipescope::report {

// part: for a job read in part (analysis/JobPart.h), what was read and what
// the job index says of the rest, printed first.
void printAnalysisText(std::ostream& os, const std::string& file, const AnalysisResult& r, const whatif::Levers& levers,
                       const JobPart* part = nullptr);

} // namespace pipescope::report
