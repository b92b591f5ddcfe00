// Replay::runTimed: exchanges as a plan posts and waits for them
// (megatronExchangePlan), replayed in time order so that transfers in flight
// at the same moment can share the wire (ReplayCosts::sharedLinks).
#include "whatif/Replay.h"

#include "util/Error.h"
#include "util/Limits.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <string>
#include <unordered_map>

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

    // Transfers in flight share their domain's speed equally: the whole
    // medium, or one direction between two ranks. Each domain keeps the work
    // every one of its transfers has received so far (its service); a
    // transfer lands when the service reaches what it had at the start plus
    // the transfer's work, so an event costs a heap operation, not a scan.
    struct Domain {
        double service = 0; // ns of work each transfer in flight has received
        TimeNs at = 0;      // when service was last brought up to date
        int count = 0;      // transfers in flight
        uint64_t version = 0;
        std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>> finishes;
    };
    std::unordered_map<int, Domain> domains;
    struct Landing {
        TimeNs at;
        int domain;
        uint64_t version;
        bool operator>(const Landing& o) const { return at > o.at; }
    };
    std::priority_queue<Landing, std::vector<Landing>, std::greater<>> landings;
    auto bringUp = [](Domain& d, TimeNs now) {
        if (d.count > 0)
            d.service += static_cast<double>(now - d.at) / d.count;
        d.at = now;
    };
    auto reschedule = [&](int id, Domain& d) {
        ++d.version;
        if (d.count == 0)
            return;
        const double left = std::max(0.0, d.finishes.top().first - d.service);
        landings.push(Landing{d.at + std::max<TimeNs>(1, static_cast<TimeNs>(std::ceil(left * d.count))), id, d.version});
    };

    // Ranks to look at again at this moment: a step of theirs ended, they
    // begin, or a transfer of theirs landed.
    std::vector<int> dirty;
    std::vector<char> isDirty(static_cast<size_t>(P), 0);
    auto touch = [&](int r) {
        if (!isDirty[static_cast<size_t>(r)]) {
            isDirty[static_cast<size_t>(r)] = 1;
            dirty.push_back(r);
        }
    };
    auto touchBoth = [&](const MessageEnds& e) {
        touch(e.fromRank);
        touch(e.toRank);
    };
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
            touchBoth(e);
            return;
        }
        const int id = domainOf(e);
        Domain& d = domains[id];
        bringUp(d, now);
        d.finishes.emplace(d.service + static_cast<double>(work), m);
        ++d.count;
        reschedule(id, d);
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
    // When each running rank's step ends, or a rank begins.
    std::priority_queue<std::pair<TimeNs, int>, std::vector<std::pair<TimeNs, int>>, std::greater<>> wakes;
    for (int r = 0; r < P; ++r)
        wakes.emplace(rankFree_[static_cast<size_t>(r)], r);
    auto landedNow = [&](int m) { touchBoth(ends(m)); };
    // Starts what rank r can start at `now`.
    auto advance = [&](int r, TimeNs now) {
        const size_t ri = static_cast<size_t>(r);
        const auto& list = s.ranks[ri];
        TimeNs& free = rankFree_[ri];
        auto postAfter = [&](int step) { afterPost[ri] = postGroups(r, step, free) ? 1 : 0; };
        if (!started[ri]) {
            if (free > now)
                return;
            started[ri] = 1;
            postAfter(-1);
        }
        for (;;) {
            if (running[ri]) {
                if (free > now)
                    return;
                running[ri] = 0;
                postAfter(static_cast<int>(next_[ri]) - 1);
            }
            size_t& n = next_[ri];
            if (n >= list.size())
                return;
            // Every end waited for before this step has completed.
            TimeNs ready = free;
            auto& w = waits[ri];
            for (size_t i = nextWait[ri]; i < w.size() && w[i].step <= static_cast<int>(n); ++i) {
                const TimeNs done = sendDone_[static_cast<size_t>(w[i].message)];
                if (done < 0 || done > now)
                    return; // looked at again when it lands
                ready = std::max(ready, done);
            }
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
            wakes.emplace(end, r);
        }
    };

    TimeNs now = 0;
    for (;;) {
        while (!wakes.empty() && wakes.top().first <= now) {
            touch(wakes.top().second);
            wakes.pop();
        }
        while (!dirty.empty()) {
            const int r = dirty.back();
            dirty.pop_back();
            isDirty[static_cast<size_t>(r)] = 0;
            advance(r, now);
        }
        // The next moment something happens: a step ends, a rank begins, a transfer lands.
        while (!landings.empty() && landings.top().version != domains[landings.top().domain].version)
            landings.pop(); // superseded: its domain's count changed since
        TimeNs next = wakes.empty() ? kNever : wakes.top().first;
        if (!landings.empty())
            next = std::min(next, landings.top().at);
        if (next == kNever)
            break;
        now = std::max(next, now);
        while (!landings.empty() && landings.top().at <= now) {
            const Landing l = landings.top();
            landings.pop();
            Domain& d = domains[l.domain];
            if (l.version != d.version)
                continue;
            bringUp(d, now);
            while (d.count > 0 && d.finishes.top().first <= d.service + 0.5) {
                const int m = d.finishes.top().second;
                d.finishes.pop();
                --d.count;
                sendDone_[static_cast<size_t>(m)] = now;
                landedNow(m);
            }
            reschedule(l.domain, d);
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
