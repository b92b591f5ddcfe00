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
// "rank 3 (stage 1, replica 1) computes 20.0% slower than its peers; at their speed: iteration X (-Y)".
std::string stragglerFixText(const StragglerFix& fix);
// "stage speeds 1, 1, 0.8, 1", or empty when every speed is 1.
std::string stageSpeedText(const CostModel& model);
// One line when the replay runs blocking exchanges (docs/whatif.md, "Exchanges"); empty otherwise.
std::string exchangesText(const CostModel& model);
// "host gap before each step, as measured: forward 6.9-8.6 ms, backward 0.4-12.4 ms
// per rank; the measured order of steps is replayed" (empty when neither applies).
std::string stepGapsText(const CostModel& model);
std::string noLayersNotice(const CostModel& model);
// "frozen layers 0..1, 30..31 (4 of 32): ...", or empty when none is frozen.
std::string frozenLayersText(const CostModel& model);
// "layers 0..1 frozen: iteration X (-Y against Z with every layer trainable)".
std::string freezeGainText(const CostModel& model, TimeNs frozenNs, TimeNs trainableNs);

} // namespace pipescope::whatif
