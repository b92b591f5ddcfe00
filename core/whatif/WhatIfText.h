#pragma once
// Readable tables of what-if answers for the command line.
#include "whatif/WhatIf.h"

#include <string>
#include <vector>

namespace pipescope::whatif {

std::string describeConfig(const Prediction& prediction);
std::string predictionText(const Prediction& prediction);
std::string searchText(const std::vector<SearchRow>& rows, size_t maxRows = 20);
// One line for every output that proposes a partition when the cost model
// knows no layers (layer source "stages"): no boundary can move, and how to
// give it layers. Empty when the layers are known.
std::string noLayersNotice(const CostModel& model);

} // namespace pipescope::whatif
