#pragma once
// A step of detectIterations (Iterations.cpp), testable alone
// (tst_analysis_steps). Internal to core/analysis.
#include "analysis/Analysis.h"

#include <vector>

namespace pipescope::detail {

// The iteration analysed when the user names none: the first (warm-up) is
// skipped when there are three or more, and of the rest the one of median
// duration is taken (the shorter median of an even count; equal durations
// keep index order). -1 when there are no iterations.
int representativeIteration(const std::vector<Iteration>& iterations);

} // namespace pipescope::detail
