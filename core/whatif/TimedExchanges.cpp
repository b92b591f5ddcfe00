// Replay::runTimed: exchanges as a plan posts and waits for them
// (megatronExchangePlan), replayed in time order so that transfers in flight
// at the same moment can share the wire (ReplayCosts::sharedLinks).
#include "whatif/Replay.h"

#include "util/Error.h"
#include "util/Limits.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace pipescope::whatif {

namespace {

constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();

TimeNs checkedSum(TimeNs a, TimeNs b, const char* what, int rank)
{
    if (a > kMaxTimeNs - b)
        throw Error(std::string("replay: ") + what + " of rank " + std::to_string(rank) +
                    " lies beyond the nanosecond clock (about 146 years); the costs are too large");
    return a + b;
}

} // namespace

bool Replay::runTimed(const Schedule& s, const ReplayCosts& costs, const ExchangePlan& plan, ReplayResult& out,
                      const ReplayOptions& options)
{
    const int P = s.pp, M = s.microbatches;
    const size_t messages = static_cast<size_t>(std::max(0, plan.messages));
    // Per message: when each end posted, when the bytes moved.
    sendPost_.assign(messages, -1);
    recvPost_.assign(messages, -1);
    moved_.assign(messages, -1);
    sendDone_.assign(messages, -1); // the transfer's end (both ends complete then)
    // Per rank: the next step, the next batch to post, and its ops' waits in step order.
    struct Wait {
        int step;
        int message;
    };
    std::vector<std::vector<Wait>> waits(static_cast<size_t>(P));
    for (int r = 0; r < P; ++r) {
        for (const ExchangeGroup& g : plan.ranks[static_cast<size_t>(r)])
            for (const ExchangeOp& op : g.ops)
                waits[static_cast<size_t>(r)].push_back({waitStep(g, op), op.message});
        std::stable_sort(waits[static_cast<size_t>(r)].begin(), waits[static_cast<size_t>(r)].end(),
                         [](const Wait& a, const Wait& b) { return a.step < b.step; });
    }
    std::vector<size_t> nextWait(static_cast<size_t>(P), 0);
    nextGroup_.assign(static_cast<size_t>(P), 0);
    std::vector<char> running(static_cast<size_t>(P), 0); // a step in progress until rankFree_
    std::vector<char> started(static_cast<size_t>(P), 0); // the rank has begun (its first posts made)
    std::vector<char> afterPost(static_cast<size_t>(P), 0);

    struct Flow {
        int message;
        double left; // ns of work at full speed
        int link;    // sharing domain: 0 when all share one medium, else src * P + dst + 1
    };
    std::vector<Flow> flows;
    std::vector<int> perDomain(costs.sharedLinks ? 1 : static_cast<size_t>(P) * static_cast<size_t>(P) + 1, 0);

    auto ends = [&](int m) { return messageEnds(s, m); };
    auto domainOf = [&](const MessageEnds& e) {
        return costs.sharedLinks ? 0 : e.fromRank * P + e.toRank + 1;
    };
    auto startFlow = [&](int m, TimeNs now) {
        const MessageEnds e = ends(m);
        const int64_t bytes = static_cast<size_t>(e.boundary) < costs.boundaryBytes.size()
                                  ? costs.boundaryBytes[static_cast<size_t>(e.boundary)]
                                  : 0;
        moved_[static_cast<size_t>(m)] = now;
        const TimeNs work = costs.transferNs(bytes);
        if (work <= 0) {
            sendDone_[static_cast<size_t>(m)] = now;
            return;
        }
        flows.push_back(Flow{m, static_cast<double>(work), domainOf(e)});
        ++perDomain[static_cast<size_t>(flows.back().link)];
    };
    auto postGroups = [&](int r, int afterStep, TimeNs now) {
        const auto& groups = plan.ranks[static_cast<size_t>(r)];
        size_t& g = nextGroup_[static_cast<size_t>(r)];
        bool any = false;
        for (; g < groups.size() && groups[g].afterStep <= afterStep; ++g)
            for (const ExchangeOp& op : groups[g].ops) {
                const size_t k = static_cast<size_t>(op.message);
                (op.send ? sendPost_ : recvPost_)[k] = now;
                any = true;
                if (sendPost_[k] >= 0 && recvPost_[k] >= 0 && moved_[k] < 0)
                    startFlow(op.message, now);
            }
        return any;
    };
    // Starts what each idle rank can start at `now`; true when something changed.
    auto advanceRanks = [&](TimeNs now) {
        bool changed = false;
        for (int r = 0; r < P; ++r) {
            const size_t ri = static_cast<size_t>(r);
            const auto& list = s.ranks[ri];
            TimeNs& free = rankFree_[ri];
            if (!started[ri]) {
                if (free > now)
                    continue;
                started[ri] = 1;
                afterPost[ri] = postGroups(r, -1, free) ? 1 : 0;
                changed = true;
            }
            for (;;) {
                if (running[ri]) {
                    if (free > now)
                        break;
                    running[ri] = 0;
                    afterPost[ri] = postGroups(r, static_cast<int>(next_[ri]) - 1, free) ? 1 : 0;
                    changed = true;
                }
                size_t& n = next_[ri];
                if (n >= list.size())
                    break;
                // Every end waited for before this step has completed.
                TimeNs ready = free;
                bool blocked = false;
                auto& w = waits[ri];
                for (size_t i = nextWait[ri]; i < w.size() && w[i].step <= static_cast<int>(n); ++i) {
                    const TimeNs done = sendDone_[static_cast<size_t>(w[i].message)];
                    if (done < 0 || done > now) {
                        blocked = true;
                        break;
                    }
                    ready = std::max(ready, done);
                }
                if (blocked)
                    break;
                while (nextWait[ri] < w.size() && w[nextWait[ri]].step <= static_cast<int>(n))
                    ++nextWait[ri];
                const Action& a = list[n];
                const TimeNs hold = afterPost[ri] ? costs.exchangeGapNs : n > 0 ? costs.launchGapNs : 0;
                const TimeNs start = std::max(checkedSum(free, hold, "a step", r), ready);
                const TimeNs end = checkedSum(start, costs.stepNs(a.stage, a.kind, a.microbatch, M), "a step", r);
                out.ranks[ri].actions.push_back(
                    TimedAction{a.kind, a.stage, s.chunkOfStage[static_cast<size_t>(a.stage)], a.microbatch, start, end});
                free = end;
                running[ri] = 1;
                afterPost[ri] = 0;
                ++n;
                changed = true;
            }
        }
        return changed;
    };

    TimeNs now = 0;
    for (;;) {
        while (advanceRanks(now)) {
        }
        // The next moment something happens: a step ends, a rank begins, a transfer lands.
        TimeNs next = kNever;
        for (int r = 0; r < P; ++r) {
            const size_t ri = static_cast<size_t>(r);
            if (running[ri] || !started[ri])
                next = std::min(next, rankFree_[ri]);
        }
        double soonest = std::numeric_limits<double>::infinity();
        for (const Flow& f : flows)
            soonest = std::min(soonest, f.left * perDomain[static_cast<size_t>(f.link)]);
        if (!flows.empty())
            next = std::min(next, now + std::max<TimeNs>(1, static_cast<TimeNs>(std::ceil(soonest))));
        if (next == kNever)
            break;
        next = std::max(next, now);
        const double dt = static_cast<double>(next - now);
        for (Flow& f : flows)
            f.left -= dt / perDomain[static_cast<size_t>(f.link)];
        now = next;
        for (size_t i = 0; i < flows.size();) {
            if (flows[i].left <= 0.5) {
                sendDone_[static_cast<size_t>(flows[i].message)] = now;
                --perDomain[static_cast<size_t>(flows[i].link)];
                flows[i] = flows.back();
                flows.pop_back();
            } else {
                ++i;
            }
        }
    }
    for (int r = 0; r < P; ++r) {
        const size_t ri = static_cast<size_t>(r);
        if (next_[ri] < s.ranks[ri].size() || nextGroup_[ri] < plan.ranks[ri].size())
            return false;
        for (const Wait& w : waits[ri])
            if (sendDone_[static_cast<size_t>(w.message)] < 0)
                return false;
    }
    if (options.timeline) {
        for (size_t k = 0; k < messages; ++k) {
            if (moved_[k] < 0)
                continue;
            const MessageEnds e = ends(static_cast<int>(k));
            const int64_t bytes = static_cast<size_t>(e.boundary) < costs.boundaryBytes.size()
                                      ? costs.boundaryBytes[static_cast<size_t>(e.boundary)]
                                      : 0;
            out.transfers.push_back(TimedTransfer{e.fromRank, e.toRank, e.fromStage, e.toStage, e.microbatch, e.gradient,
                                                  bytes, moved_[k], sendDone_[k], sendPost_[k], recvPost_[k]});
        }
        std::sort(out.transfers.begin(), out.transfers.end(),
                  [](const TimedTransfer& a, const TimedTransfer& b) { return a.start < b.start; });
    }
    return true;
}

} // namespace pipescope::whatif
