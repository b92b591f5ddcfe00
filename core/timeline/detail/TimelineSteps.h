#pragma once
// Steps of the timeline builders and of the draw list that are worth testing
// alone (tst_timeline_steps). Internal to timeline/.
#include "timeline/TimelineModel.h"

#include <array>
#include <cstddef>
#include <limits>
#include <map>
#include <vector>

namespace pipescope::timeline::detail {

// The step each activity of a trace runs in, for activities taken in the
// trace's (rank, start) order: a cursor moves forward through the rank's
// steps, and a binary search finds its place again when that order breaks
// (a new rank, or a start earlier than the one before).
class StepCursor {
public:
    // stepsOfRank: each rank's steps sorted by start; it must outlive the cursor.
    explicit StepCursor(const std::map<int, std::vector<const Step*>>& stepsOfRank) : stepsOfRank_(stepsOfRank) {}

    // The last step of `rank` starting at or before `start`, when it is still
    // running at `start` (ends after it); nullptr otherwise.
    const Step* enclosing(int rank, TimeNs start);

private:
    const std::map<int, std::vector<const Step*>>& stepsOfRank_;
    const std::vector<const Step*>* rankSteps_ = nullptr;
    int rank_ = std::numeric_limits<int>::min();
    TimeNs start_ = std::numeric_limits<TimeNs>::min();
    size_t started_ = 0; // steps of the rank starting at or before the last start asked for
};

// A run of narrow events folded into one draw-list block: where it ends, the
// busy time it holds and that time per code.
struct Fold {
    TimeNs end = 0;
    TimeNs busy = 0;
    std::array<TimeNs, kMaxCodes> codeNs{};
};

// The block that starts with the narrow event lane.events[first], drawn from
// `s` (its start, or later where an earlier block ended), read from the
// events themselves (views finer than the level-of-detail pyramid): the
// events that follow join it while each is narrower than foldNs, starts less
// than foldNs after the block's end and starts before `to`; once the block is
// foldNs wide it also ends where an event's code differs from the block's
// dominant one. Events ending inside the block add nothing.
Fold foldNarrowEvents(const Lane& lane, size_t first, TimeNs s, TimeNs to, TimeNs foldNs);

} // namespace pipescope::timeline::detail
