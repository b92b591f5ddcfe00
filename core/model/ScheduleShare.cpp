#include "model/ScheduleShare.h"

#include <algorithm>

namespace pipescope {

namespace {

bool feedsBackward(StepKind k) { return k == StepKind::B || k == StepKind::I; }

} // namespace

ScheduleShare scheduleShare(const std::vector<std::vector<Action>>& ranks, const std::array<TimeNs, 4>& costOfKind)
{
    ScheduleShare out;
    const size_t n = ranks.size();
    // Dense tables over (virtual stage, microbatch): when the F (and the B
    // or I) of each ended in the replay, -1 while not yet; -2 where the
    // trace has none, so that a step waiting on it waits on nothing.
    int stages = 0, microbatches = 0;
    size_t left = 0;
    for (const auto& actions : ranks) {
        left += actions.size();
        for (const Action& a : actions) {
            if (a.stage < 0 || a.microbatch < 0)
                return out; // not a step of a pipeline
            stages = std::max(stages, a.stage + 1);
            microbatches = std::max(microbatches, a.microbatch + 1);
        }
    }
    const size_t cells = static_cast<size_t>(stages) * static_cast<size_t>(microbatches);
    if (cells > (size_t{1} << 28))
        return out;
    constexpr TimeNs kAbsent = -2, kPending = -1;
    std::vector<TimeNs> forwardEnd(cells, kAbsent), backwardEnd(cells, kAbsent);
    auto cell = [microbatches](int stage, int microbatch) {
        return static_cast<size_t>(stage) * static_cast<size_t>(microbatches) + static_cast<size_t>(microbatch);
    };
    for (const auto& actions : ranks)
        for (const Action& a : actions) {
            if (a.kind == StepKind::F)
                forwardEnd[cell(a.stage, a.microbatch)] = kPending;
            else if (feedsBackward(a.kind))
                backwardEnd[cell(a.stage, a.microbatch)] = kPending;
        }

    out.idleBefore.resize(n);
    std::vector<size_t> next(n, 0);
    std::vector<TimeNs> free(n, 0);
    for (size_t r = 0; r < n; ++r)
        out.idleBefore[r].assign(ranks[r].size(), 0);
    // Each pass runs, on every rank, the actions whose input is ready; an
    // order that lets no rank move is a deadlock.
    while (left > 0) {
        bool moved = false;
        for (size_t r = 0; r < n; ++r) {
            while (next[r] < ranks[r].size()) {
                const Action& a = ranks[r][next[r]];
                TimeNs ready = 0;
                const bool forward = a.kind == StepKind::F;
                if (forward || feedsBackward(a.kind)) {
                    const int from = a.stage + (forward ? -1 : 1);
                    if (from >= 0 && from < stages) {
                        const TimeNs e = (forward ? forwardEnd : backwardEnd)[cell(from, a.microbatch)];
                        if (e == kPending)
                            break; // its producer has not run yet
                        if (e >= 0)
                            ready = e;
                    }
                }
                const TimeNs start = std::max(free[r], ready);
                out.idleBefore[r][next[r]] = start - free[r];
                free[r] = start + costOfKind[static_cast<size_t>(a.kind) & 3];
                if (forward)
                    forwardEnd[cell(a.stage, a.microbatch)] = free[r];
                else if (feedsBackward(a.kind))
                    backwardEnd[cell(a.stage, a.microbatch)] = free[r];
                ++next[r];
                --left;
                moved = true;
            }
        }
        if (!moved)
            return ScheduleShare{};
    }
    const TimeNs makespan = n ? *std::max_element(free.begin(), free.end()) : 0;
    out.idleAfter.resize(n);
    for (size_t r = 0; r < n; ++r)
        out.idleAfter[r] = makespan - free[r];
    out.complete = true;
    return out;
}

} // namespace pipescope
