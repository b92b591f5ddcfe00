#pragma once
// A step of Replay::run (Replay.cpp), testable alone (tst_whatif_steps).
// Internal to whatif/.
#include "whatif/Replay.h"

namespace pipescope::whatif::detail {

// Names a replayed rank's idle time by the analysis's causes, once its steps
// and iteration end are in `rr`: before its first step, fill and drain; in
// a gap between steps, up to `hostGap` of launch gap, the rest fill and
// drain when it lies in the rank's fill or drain (FillDrainBounds), else a
// wait on a neighbour; its all-reduce, data-parallel sync; its wait in the
// pipeline-wide collective and after its optimizer until `iterationEnd`,
// fill and drain. Adds to rr.bubbleNs (and, with `timeline`, rr.bubbles),
// which the caller clears; sets rr.busyNs (steps and optimizer).
// `fillBudget`, when given, holds the schedule's own idle before each of the
// rank's actions (ScheduleShare, in the rank's order), then, when it holds
// one more, after its last: a gap is fill/drain up to it and waiting on a
// neighbour beyond, as the analysis names measured idle. Without it, the
// region rule (model/Pipeline.h) decides.
void classifyIdle(RankReplay& rr, TimeNs hostGap, TimeNs iterationEnd, bool timeline,
                  const std::vector<TimeNs>* fillBudget = nullptr);

} // namespace pipescope::whatif::detail
