#pragma once
// "Add W of work per iteration on every stage, in its bubbles first": work
// such as a second-order optimizer's curvature updates (PipeFisher), which
// splits into pieces of some minimum length, placed into a replayed
// iteration's idle gaps, the rest after each rank's last step, delaying its
// all-reduce and optimizer (docs/whatif.md, Extra work in bubbles).
#include "whatif/WhatIf.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pipescope::whatif {

inline constexpr TimeNs kDefaultMinPieceNs = 100'000;

struct RankExtraWork {
    int rank = 0;
    std::vector<int> stages;  // the virtual stages the rank runs
    TimeNs fillableNs = 0;    // its gaps of at least the minimum piece, between its first step's start and its last step's end
    TimeNs hiddenNs = 0;      // the work placed in them
    TimeNs overflowNs = 0;    // the rest, run after its last step
    TimeNs endNs = 0;         // when it has run the overflow, its all-reduce, the pipeline-wide collective and its optimizer
};

struct ExtraWorkPrediction {
    TimeNs workNs = 0;        // per rank and iteration
    TimeNs minPieceNs = kDefaultMinPieceNs;
    TimeNs baseIterationNs = 0; // the replay's, without the work
    TimeNs iterationNs = 0;     // with it
    std::vector<RankExtraWork> ranks;

    TimeNs extraNs() const { return iterationNs - baseIterationNs; }
};

// Places workNs on every rank of a replay: into each idle gap between steps
// at least minPieceNs long, up to its length, in time order; what does not
// fit runs after the rank's last step. The end of the iteration is then
// replayed as the replay does it (all-reduce, the pipeline-wide collective
// once every rank has joined, optimizer), so a rank whose compute ends early
// absorbs overflow in its slack. Throws Error for a negative work or piece.
ExtraWorkPrediction addExtraWork(const Schedule& schedule, const ReplayCosts& costs, const ReplayResult& replay,
                                 TimeNs workNs, TimeNs minPieceNs = kDefaultMinPieceNs);
ExtraWorkPrediction addExtraWork(const Prediction& prediction, TimeNs workNs, TimeNs minPieceNs = kDefaultMinPieceNs);

// One line: the predicted iteration, the extra time, what each rank hid.
std::string extraWorkText(const ExtraWorkPrediction& e);
// The "extra_work" block of a prediction in the what-if document.
nlohmann::json extraWorkToJson(const ExtraWorkPrediction& e);

} // namespace pipescope::whatif
