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

    void bringUp(TimeNs now)
    {
        if (count > 0)
            service += static_cast<double>(now - at) / count;
        at = now;
    }
};

// When a domain's next transfer lands, as of its `version` (a later change
// of the domain's count supersedes it).
struct Landing {
    TimeNs at;
    int domain;
    uint64_t version;
    bool operator>(const Landing& o) const { return at > o.at; }
};

// A rank's step `step` starts only once message `message` has landed.
struct Wait {
    int step;
    int message;
};

// Replay's scratch that a timed run fills: per message, when each end
// posted and when the bytes moved and landed; per rank, its next batch to
// post, its next step and when it is free.
struct TimedScratch {
    std::vector<TimeNs>& sendPost;
    std::vector<TimeNs>& recvPost;
    std::vector<TimeNs>& moved;
    std::vector<TimeNs>& sendDone; // the transfer's end (both ends complete then)
    std::vector<size_t>& nextGroup;
    std::vector<size_t>& next;
    std::vector<TimeNs>& rankFree;
};

// One timed replay: events in time order (a step ends, a rank begins, a
// transfer lands), after each the ranks they touch run what they can.
class TimedRun {
public:
    TimedRun(const Schedule& s, const ReplayCosts& costs, const ExchangePlan& plan, ReplayResult& out,
             TimedScratch scratch)
        : s_(s), costs_(costs), plan_(plan), out_(out), x_(scratch), P_(s.pp), M_(s.microbatches),
          waits_(static_cast<size_t>(P_)), nextWait_(static_cast<size_t>(P_), 0), running_(static_cast<size_t>(P_), 0),
          started_(static_cast<size_t>(P_), 0), afterPost_(static_cast<size_t>(P_), 0),
          isDirty_(static_cast<size_t>(P_), 0)
    {
        // Per rank: its ops' waits in step order.
        for (int r = 0; r < P_; ++r) {
            for (const ExchangeGroup& g : plan.ranks[static_cast<size_t>(r)])
                for (const ExchangeOp& op : g.ops)
                    waits_[static_cast<size_t>(r)].push_back({waitStep(g, op), op.message});
            std::stable_sort(waits_[static_cast<size_t>(r)].begin(), waits_[static_cast<size_t>(r)].end(),
                             [](const Wait& a, const Wait& b) { return a.step < b.step; });
        }
        for (int r = 0; r < P_; ++r)
            wakes_.emplace(x_.rankFree[static_cast<size_t>(r)], r);
    }

    void simulate();
    // Every step run, every batch posted, every message waited for landed.
    bool finished() const;

private:
    void reschedule(int id, Domain& d);
    void touch(int r);
    void touchBoth(const MessageEnds& e);
    int domainOf(const MessageEnds& e) const;
    void startFlow(int m, TimeNs now);
    bool postGroups(int r, int afterStep, TimeNs now);
    void postAfter(int r, int step);
    void advance(int r, TimeNs now);
    TimeNs nextMoment();
    void land(TimeNs now);

    const Schedule& s_;
    const ReplayCosts& costs_;
    const ExchangePlan& plan_;
    ReplayResult& out_;
    TimedScratch x_;
    const int P_, M_;
    // Per rank: its waits, the next of them, a step in progress until
    // rankFree, begun (its first posts made), whether its last act was a post.
    std::vector<std::vector<Wait>> waits_;
    std::vector<size_t> nextWait_;
    std::vector<char> running_, started_, afterPost_;
    std::unordered_map<int, Domain> domains_;
    std::priority_queue<Landing, std::vector<Landing>, std::greater<>> landings_;
    // Ranks to look at again at this moment: a step of theirs ended, they
    // begin, or a transfer of theirs landed.
    std::vector<int> dirty_;
    std::vector<char> isDirty_;
    // When each running rank's step ends, or a rank begins.
    std::priority_queue<std::pair<TimeNs, int>, std::vector<std::pair<TimeNs, int>>, std::greater<>> wakes_;
};

void TimedRun::reschedule(int id, Domain& d)
{
    ++d.version;
    if (d.count == 0)
        return;
    const double left = std::max(0.0, d.finishes.top().first - d.service);
    landings_.push(Landing{d.at + std::max<TimeNs>(1, static_cast<TimeNs>(std::ceil(left * d.count))), id, d.version});
}

void TimedRun::touch(int r)
{
    if (!isDirty_[static_cast<size_t>(r)]) {
        isDirty_[static_cast<size_t>(r)] = 1;
        dirty_.push_back(r);
    }
}

void TimedRun::touchBoth(const MessageEnds& e)
{
    touch(e.fromRank);
    touch(e.toRank);
}

int TimedRun::domainOf(const MessageEnds& e) const
{
    return costs_.sharedLinks ? 0 : e.fromRank * P_ + e.toRank + 1;
}

void TimedRun::startFlow(int m, TimeNs now)
{
    const MessageEnds e = messageEnds(s_, m);
    const int64_t bytes = static_cast<size_t>(e.boundary) < costs_.boundaryBytes.size()
                              ? costs_.boundaryBytes[static_cast<size_t>(e.boundary)]
                              : 0;
    x_.moved[static_cast<size_t>(m)] = now;
    const TimeNs work = costs_.transferNs(bytes);
    if (work <= 0) {
        x_.sendDone[static_cast<size_t>(m)] = now;
        touchBoth(e);
        return;
    }
    const int id = domainOf(e);
    Domain& d = domains_[id];
    d.bringUp(now);
    d.finishes.emplace(d.service + static_cast<double>(work), m);
    ++d.count;
    reschedule(id, d);
}

// Posts rank r's batches due after step `afterStep`; a message both ends
// have posted starts to move. Whether anything was posted.
bool TimedRun::postGroups(int r, int afterStep, TimeNs now)
{
    const auto& groups = plan_.ranks[static_cast<size_t>(r)];
    size_t& g = x_.nextGroup[static_cast<size_t>(r)];
    bool any = false;
    for (; g < groups.size() && groups[g].afterStep <= afterStep; ++g)
        for (const ExchangeOp& op : groups[g].ops) {
            const size_t k = static_cast<size_t>(op.message);
            (op.send ? x_.sendPost : x_.recvPost)[k] = now;
            any = true;
            if (x_.sendPost[k] >= 0 && x_.recvPost[k] >= 0 && x_.moved[k] < 0)
                startFlow(op.message, now);
        }
    return any;
}

void TimedRun::postAfter(int r, int step)
{
    const size_t ri = static_cast<size_t>(r);
    afterPost_[ri] = postGroups(r, step, x_.rankFree[ri]) ? 1 : 0;
}

// Starts what rank r can start at `now`.
void TimedRun::advance(int r, TimeNs now)
{
    const size_t ri = static_cast<size_t>(r);
    const auto& list = s_.ranks[ri];
    TimeNs& free = x_.rankFree[ri];
    if (!started_[ri]) {
        if (free > now)
            return;
        started_[ri] = 1;
        postAfter(r, -1);
    }
    for (;;) {
        if (running_[ri]) {
            if (free > now)
                return;
            running_[ri] = 0;
            postAfter(r, static_cast<int>(x_.next[ri]) - 1);
        }
        size_t& n = x_.next[ri];
        if (n >= list.size())
            return;
        // Every end waited for before this step has completed.
        TimeNs ready = free;
        auto& w = waits_[ri];
        for (size_t i = nextWait_[ri]; i < w.size() && w[i].step <= static_cast<int>(n); ++i) {
            const TimeNs done = x_.sendDone[static_cast<size_t>(w[i].message)];
            if (done < 0 || done > now)
                return; // looked at again when it lands
            ready = std::max(ready, done);
        }
        while (nextWait_[ri] < w.size() && w[nextWait_[ri]].step <= static_cast<int>(n))
            ++nextWait_[ri];
        const Action& a = list[n];
        const TimeNs hold = afterPost_[ri] ? costs_.exchangeGapNs
                            : n > 0        ? costs_.gapBefore(r, a.kind, s_.inputOnRank(a, r))
                                           : 0;
        const TimeNs start = std::max(checkedSum(free, hold, "a step", r), ready);
        const TimeNs end = checkedSum(start, costs_.stepNs(a.stage, a.kind, a.microbatch, M_), "a step", r);
        out_.ranks[ri].actions.push_back(
            TimedAction{a.kind, a.stage, s_.chunkOfStage[static_cast<size_t>(a.stage)], a.microbatch, start, end});
        free = end;
        running_[ri] = 1;
        afterPost_[ri] = 0;
        ++n;
        wakes_.emplace(end, r);
    }
}

// The next moment something happens: a step ends, a rank begins, a transfer lands.
TimeNs TimedRun::nextMoment()
{
    while (!landings_.empty() && landings_.top().version != domains_[landings_.top().domain].version)
        landings_.pop(); // superseded: its domain's count changed since
    TimeNs next = wakes_.empty() ? kNever : wakes_.top().first;
    if (!landings_.empty())
        next = std::min(next, landings_.top().at);
    return next;
}

// The transfers that have landed by `now`, and their ranks touched.
void TimedRun::land(TimeNs now)
{
    while (!landings_.empty() && landings_.top().at <= now) {
        const Landing l = landings_.top();
        landings_.pop();
        Domain& d = domains_[l.domain];
        if (l.version != d.version)
            continue;
        d.bringUp(now);
        while (d.count > 0 && d.finishes.top().first <= d.service + 0.5) {
            const int m = d.finishes.top().second;
            d.finishes.pop();
            --d.count;
            x_.sendDone[static_cast<size_t>(m)] = now;
            touchBoth(messageEnds(s_, m));
        }
        reschedule(l.domain, d);
    }
}

void TimedRun::simulate()
{
    TimeNs now = 0;
    for (;;) {
        while (!wakes_.empty() && wakes_.top().first <= now) {
            touch(wakes_.top().second);
            wakes_.pop();
        }
        while (!dirty_.empty()) {
            const int r = dirty_.back();
            dirty_.pop_back();
            isDirty_[static_cast<size_t>(r)] = 0;
            advance(r, now);
        }
        const TimeNs next = nextMoment();
        if (next == kNever)
            break;
        now = std::max(next, now);
        land(now);
    }
}

bool TimedRun::finished() const
{
    for (int r = 0; r < P_; ++r) {
        const size_t ri = static_cast<size_t>(r);
        if (x_.next[ri] < s_.ranks[ri].size() || x_.nextGroup[ri] < plan_.ranks[ri].size())
            return false;
        for (const Wait& w : waits_[ri])
            if (x_.sendDone[static_cast<size_t>(w.message)] < 0)
                return false;
    }
    return true;
}

} // namespace

bool Replay::runTimed(const Schedule& s, const ReplayCosts& costs, const ExchangePlan& plan, ReplayResult& out,
                      const ReplayOptions& options)
{
    const int P = s.pp;
    const size_t messages = static_cast<size_t>(std::max(0, plan.messages));
    // Per message: when each end posted, when the bytes moved.
    sendPost_.assign(messages, -1);
    recvPost_.assign(messages, -1);
    moved_.assign(messages, -1);
    sendDone_.assign(messages, -1); // the transfer's end (both ends complete then)
    nextGroup_.assign(static_cast<size_t>(P), 0);
    TimedRun run(s, costs, plan, out, TimedScratch{sendPost_, recvPost_, moved_, sendDone_, nextGroup_, next_, rankFree_});
    run.simulate();
    if (!run.finished())
        return false;
    if (options.timeline)
        recordPlannedTransfers(s, costs, messages, out);
    return true;
}

} // namespace pipescope::whatif
