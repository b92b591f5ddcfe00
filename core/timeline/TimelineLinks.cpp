#include "timeline/TimelineLinks.h"

#include <algorithm>
#include <cctype>
#include <tuple>
#include <vector>

namespace pipescope::timeline {

namespace {

bool carriesWork(uint8_t code) { return StepKind(code & 3) != StepKind::W; }

// Calls f(ref) for every step of the same iteration, replica and microbatch as `x`.
template <class F>
void forSiblings(const TimelineModel& m, const Lane& xl, const Event& x, F&& f)
{
    for (size_t li = 0; li < m.lanes.size(); ++li) {
        const Lane& l = m.lanes[li];
        if (l.kind != LaneKind::Steps || l.replica != xl.replica)
            continue;
        for (size_t i = 0; i < l.events.size(); ++i) {
            const Event& e = l.events[i];
            if (e.detail == x.detail && e.microbatch == x.microbatch)
                f(EventRef{static_cast<int>(li), static_cast<int64_t>(i)}, e);
        }
    }
}

bool validRef(const TimelineModel& m, EventRef r)
{
    return r.lane >= 0 && static_cast<size_t>(r.lane) < m.lanes.size() && r.event >= 0
           && static_cast<size_t>(r.event) < m.lanes[static_cast<size_t>(r.lane)].events.size();
}

const CommDetail* commOf(const TimelineModel& m, const Event& e)
{
    return e.detail >= 0 && static_cast<size_t>(e.detail) < m.comms.size() ? &m.comms[static_cast<size_t>(e.detail)] : nullptr;
}

} // namespace

P2pDirection p2pDirection(const TimelineModel& m, EventRef ref)
{
    if (!validRef(m, ref))
        return P2pDirection::None;
    const LaneKind kind = m.lanes[static_cast<size_t>(ref.lane)].kind;
    if (kind != LaneKind::Kernels && kind != LaneKind::Transfers)
        return P2pDirection::None;
    const CommDetail* d = commOf(m, m.event(ref.lane, ref.event));
    if (!d || d->op <= 0)
        return P2pDirection::None;
    std::string op = m.name(d->op);
    std::transform(op.begin(), op.end(), op.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const bool send = op.find("send") != std::string::npos, recv = op.find("recv") != std::string::npos;
    if (send == recv)
        return P2pDirection::None;
    return send ? P2pDirection::Send : P2pDirection::Recv;
}

std::optional<EventRef> matchingTransfer(const TimelineModel& m, EventRef ref)
{
    if (!validRef(m, ref))
        return std::nullopt;
    const Lane& l = m.lanes[static_cast<size_t>(ref.lane)];
    const Event& x = m.event(ref.lane, ref.event);
    const CommDetail* d = commOf(m, x);
    if ((l.kind != LaneKind::Kernels && l.kind != LaneKind::Transfers) || !d || d->peer < 0)
        return std::nullopt;

    if (l.kind == LaneKind::Transfers) {
        // A predicted transfer: the receiver's first step of the microbatch in
        // the transfer's direction that starts once it has begun.
        std::optional<EventRef> best;
        TimeNs bestStart = 0;
        for (size_t li = 0; li < m.lanes.size(); ++li) {
            const Lane& pl = m.lanes[li];
            if (pl.kind != LaneKind::Steps || pl.rank != d->peer)
                continue;
            for (size_t i = 0; i < pl.events.size(); ++i) {
                const Event& e = pl.events[i];
                const StepKind k = StepKind(e.code & 3);
                const bool wanted = d->backward ? (k == StepKind::B || k == StepKind::I) : k == StepKind::F;
                if (wanted && e.microbatch == x.microbatch && e.start >= x.start && (!best || e.start < bestStart)) {
                    best = EventRef{static_cast<int>(li), static_cast<int64_t>(i)};
                    bestStart = e.start;
                }
            }
        }
        return best;
    }

    const P2pDirection dir = p2pDirection(m, ref);
    if (dir == P2pDirection::None)
        return std::nullopt;
    const P2pDirection other = dir == P2pDirection::Send ? P2pDirection::Recv : P2pDirection::Send;
    // Every transfer of `rank` to or from `peer` in one direction, in start order.
    auto transfers = [&](int rank, int peer, P2pDirection want) {
        std::vector<std::tuple<TimeNs, int, int64_t>> out;
        for (size_t li = 0; li < m.lanes.size(); ++li) {
            const Lane& pl = m.lanes[li];
            if (pl.rank != rank || (pl.kind != LaneKind::Kernels && pl.kind != LaneKind::Transfers))
                continue;
            for (size_t i = 0; i < pl.events.size(); ++i) {
                const Event& e = pl.events[i];
                const CommDetail* c = commOf(m, e);
                if (c && c->peer == peer && p2pDirection(m, {static_cast<int>(li), static_cast<int64_t>(i)}) == want)
                    out.emplace_back(e.start, static_cast<int>(li), static_cast<int64_t>(i));
            }
        }
        std::sort(out.begin(), out.end());
        return out;
    };
    const auto mine = transfers(l.rank, d->peer, dir);
    auto it = std::find(mine.begin(), mine.end(), std::make_tuple(x.start, ref.lane, ref.event));
    if (it == mine.end())
        return std::nullopt;
    const auto theirs = transfers(d->peer, l.rank, other);
    const size_t k = static_cast<size_t>(it - mine.begin());
    if (k >= theirs.size())
        return std::nullopt;
    return EventRef{std::get<1>(theirs[k]), std::get<2>(theirs[k])};
}

std::optional<EventRef> dependentStep(const TimelineModel& m, EventRef ref)
{
    if (!validRef(m, ref) || m.lanes[static_cast<size_t>(ref.lane)].kind != LaneKind::Steps)
        return std::nullopt;
    const Lane& xl = m.lanes[static_cast<size_t>(ref.lane)];
    const Event& x = m.event(ref.lane, ref.event);
    if (!carriesWork(x.code))
        return std::nullopt;
    std::optional<EventRef> best;
    TimeNs bestStart = 0;
    forSiblings(m, xl, x, [&](EventRef r, const Event& e) {
        if (carriesWork(e.code) && e.start > x.start && (!best || e.start < bestStart)) {
            best = r;
            bestStart = e.start;
        }
    });
    return best;
}

std::optional<EventRef> precedingStep(const TimelineModel& m, EventRef ref)
{
    if (!validRef(m, ref) || m.lanes[static_cast<size_t>(ref.lane)].kind != LaneKind::Steps)
        return std::nullopt;
    const Lane& xl = m.lanes[static_cast<size_t>(ref.lane)];
    const Event& x = m.event(ref.lane, ref.event);
    std::optional<EventRef> best;
    TimeNs bestStart = 0;
    if (!carriesWork(x.code)) {
        // A W computes the weight gradient of its own stage's B or I.
        forSiblings(m, xl, x, [&](EventRef r, const Event& e) {
            if (r.lane == ref.lane && e.chunk == x.chunk && carriesWork(e.code) && StepKind(e.code & 3) != StepKind::F
                && e.start < x.start && (!best || e.start > bestStart)) {
                best = r;
                bestStart = e.start;
            }
        });
        return best;
    }
    forSiblings(m, xl, x, [&](EventRef r, const Event& e) {
        if (carriesWork(e.code) && e.start < x.start && (!best || e.start > bestStart)) {
            best = r;
            bestStart = e.start;
        }
    });
    return best;
}

std::optional<BubbleWait> bubbleWait(const TimelineModel& m, EventRef ref)
{
    if (!validRef(m, ref) || m.lanes[static_cast<size_t>(ref.lane)].kind != LaneKind::Bubbles)
        return std::nullopt;
    const Lane& bl = m.lanes[static_cast<size_t>(ref.lane)];
    const Event& b = m.event(ref.lane, ref.event);
    for (size_t li = 0; li < m.lanes.size(); ++li) {
        const Lane& l = m.lanes[li];
        if (l.kind != LaneKind::Steps || l.rank != bl.rank)
            continue;
        // The first step starting at or after the bubble's start (steps of a rank do not overlap).
        auto it = std::lower_bound(l.events.begin(), l.events.end(), b.start,
                                   [](const Event& e, TimeNs t) { return e.start < t; });
        if (it == l.events.end() || it->detail != b.detail)
            return std::nullopt;
        BubbleWait w;
        w.next = EventRef{static_cast<int>(li), static_cast<int64_t>(it - l.events.begin())};
        w.waitedOn = precedingStep(m, w.next);
        return w;
    }
    return std::nullopt;
}

int cpuLaneAt(const TimelineModel& m, int rank, int64_t tid, TimeNs t)
{
    int first = -1, deepest = -1, depth = -1;
    for (size_t li = 0; li < m.lanes.size(); ++li) {
        const Lane& l = m.lanes[li];
        if (l.kind != LaneKind::Cpu || l.rank != rank || l.tid != tid)
            continue;
        if (first < 0)
            first = static_cast<int>(li);
        if (l.depth > depth && m.hitTest(static_cast<int>(li), t) >= 0) {
            deepest = static_cast<int>(li);
            depth = l.depth;
        }
    }
    return deepest >= 0 ? deepest : first;
}

} // namespace pipescope::timeline
