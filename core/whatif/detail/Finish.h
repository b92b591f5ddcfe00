#pragma once
// What predict() and autoBalance() share: a Prediction filled in by a replay.
// Internal to whatif/.
#include "whatif/WhatIf.h"

#include <string>
#include <vector>

namespace pipescope::whatif::detail {

// A prediction of `schedule` over `partition`, evaluated (replayed, memory).
Prediction finish(const CostModel& model, std::string label, Schedule schedule, Partition partition,
                  const ReplayOptions& options, Replay& replay, MicrobatchOrder order,
                  std::vector<Recompute> recompute = {});

} // namespace pipescope::whatif::detail
