#include "model/ScheduleShare.h"

#include <algorithm>
#include <unordered_map>

namespace pipescope {

namespace {

// F and (B or I) of (virtual stage, microbatch): the two chains a pipeline
// hands from rank to rank. W never feeds another stage.
uint64_t chainKey(bool forward, int stage, int microbatch)
{
    return (static_cast<uint64_t>(forward ? 1 : 0) << 63) | (static_cast<uint64_t>(static_cast<uint32_t>(stage)) << 32)
           | static_cast<uint32_t>(microbatch);
}

bool feedsBackward(StepKind k) { return k == StepKind::B || k == StepKind::I; }

} // namespace

ScheduleShare scheduleShare(const std::vector<std::vector<Action>>& ranks, const std::array<TimeNs, 4>& costOfKind)
{
    ScheduleShare out;
    const size_t n = ranks.size();
    // Which chain links were measured at all: a producer that is not waits on nothing.
    std::unordered_map<uint64_t, TimeNs> ended; // chain key -> end in the replay, once run
    std::unordered_map<uint64_t, bool> present;
    for (const auto& actions : ranks)
        for (const Action& a : actions)
            if (a.kind == StepKind::F || feedsBackward(a.kind))
                present[chainKey(a.kind == StepKind::F, a.stage, a.microbatch)] = true;

    out.idleBefore.resize(n);
    std::vector<size_t> next(n, 0);
    std::vector<TimeNs> free(n, 0);
    size_t left = 0;
    for (size_t r = 0; r < n; ++r) {
        out.idleBefore[r].assign(ranks[r].size(), 0);
        left += ranks[r].size();
    }
    // Each pass runs, on every rank, the actions whose input is ready; an
    // order that lets no rank move is a deadlock.
    while (left > 0) {
        bool moved = false;
        for (size_t r = 0; r < n; ++r) {
            while (next[r] < ranks[r].size()) {
                const Action& a = ranks[r][next[r]];
                TimeNs ready = 0;
                if (a.kind == StepKind::F || feedsBackward(a.kind)) {
                    const bool forward = a.kind == StepKind::F;
                    const uint64_t input = chainKey(forward, a.stage + (forward ? -1 : 1), a.microbatch);
                    if (present.count(input)) {
                        auto e = ended.find(input);
                        if (e == ended.end())
                            break; // its producer has not run yet
                        ready = e->second;
                    }
                }
                const TimeNs start = std::max(free[r], ready);
                out.idleBefore[r][next[r]] = start - free[r];
                free[r] = start + costOfKind[static_cast<size_t>(a.kind) & 3];
                if (a.kind == StepKind::F || feedsBackward(a.kind))
                    ended[chainKey(a.kind == StepKind::F, a.stage, a.microbatch)] = free[r];
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
