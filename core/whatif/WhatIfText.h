#pragma once
// Readable tables of what-if answers for the command line.
#include "whatif/WhatIf.h"

#include <string>
#include <vector>

namespace pipescope::whatif {

std::string describeConfig(const Prediction& prediction);
std::string predictionText(const Prediction& prediction);
std::string searchText(const std::vector<SearchRow>& rows, size_t maxRows = 20);

} // namespace pipescope::whatif
