#pragma once
// A step of findBubbles (Bubbles.cpp), testable alone (tst_analysis_steps).
// Internal to core/analysis.
#include "analysis/Analysis.h"

#include <optional>
#include <span>
#include <vector>

namespace pipescope::detail {

// An idle gap [start, end) of a rank's compute timeline. `dependency` is the
// end of the latest communication op ending inside (start, end], or `start`
// when none does: up to it the rank waited for communication.
struct Gap {
    TimeNs start = 0;
    TimeNs end = 0;
    TimeNs dependency = 0;
    bool beforeKernel = false;         // a compute kernel follows (false: the gap closes the window)
    bool beforeStep = false;           // that kernel begins a pipeline step
    bool afterLastStep = false;        // the rank's last step of the iteration has ended
    bool transfersRecorded = false;    // the rank's transfers are in the trace: no transfer ending in the gap means its input was ready
    std::optional<TimeNs> nextLaunch;  // when the host launched that kernel, where known
};

// A communication op of the rank overlapping the waited part of a gap.
struct GapOp {
    TimeNs start = 0;
    TimeNs end = 0;
    bool p2p = false;       // point-to-point; else a collective
    TimeNs transferNs = 0;  // point-to-point: how long its bytes take at the pair's best speed
    BubbleCause cause = BubbleCause::DpSync; // a collective's cause: dp_sync, or fill_drain when pipeline-wide
};

struct GapPart {
    TimeNs start = 0;
    TimeNs end = 0;
    BubbleCause cause = BubbleCause::Other;
};

// Cuts a gap into parts by cause, in time order, appending them to `parts`
// (empty parts are left out). The waited part [start, dependency) goes to
// the ops overlapping it, `ops` in start order, piece by piece: a
// point-to-point op waits on its neighbour until its transfer could have
// started, and transfers after that; a collective takes its cause; what no
// op covers is "other". After the dependency, the host launching the next
// kernel late is host-bound; the rest is a launch gap when a kernel follows
// within `launchGap`; else, before a step with no launch recorded, the
// step's own overhead (its input was ready and the rank free; where the
// rank's transfers are not recorded, after what the fill budget explains);
// after the rank's last step, waiting on the stages still running; else
// "other".
// Waiting on a neighbour and "other" are fill/drain while `fillBudget`
// lasts: the schedule's own idle before this step (ScheduleShare), taken in
// time order and reduced by what is used.
void classifyGap(const Gap& gap, std::span<const GapOp> ops, TimeNs launchGap, TimeNs& fillBudget,
                 std::vector<GapPart>& parts);

} // namespace pipescope::detail
