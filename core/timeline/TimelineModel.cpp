#include "timeline/TimelineModel.h"
#include "timeline/detail/TimelineSteps.h"

#include <unordered_map>

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cmath>
#include <regex>

namespace pipescope::timeline {

std::string_view toString(LaneKind kind)
{
    static constexpr std::array<std::string_view, 6> k = {"steps", "bubbles", "kernels", "transfers", "cpu", "memory"};
    return k.at(static_cast<size_t>(kind));
}

int Lod::levelFor(double bucketNs) const
{
    if (levels.empty() || static_cast<double>(base) > bucketNs)
        return -1;
    int level = 0;
    while (level + 1 < static_cast<int>(levels.size()) && static_cast<double>(width(level + 1)) <= bucketNs)
        ++level;
    return level;
}

namespace {

TimeNs roundUpPow2(TimeNs v)
{
    TimeNs p = 1;
    while (p < v && p < (TimeNs(1) << 61))
        p <<= 1;
    return p;
}

// Level 0 has about one bucket per four events (8 bytes an event): views
// coarser than that read the pyramid, finer views walk events, of which
// there are then a few per pixel on average.
void buildLod(Lane& lane)
{
    Lod& lod = lane.lod;
    lod.levels.clear();
    const auto& ev = lane.events;
    if (ev.empty())
        return;
    lod.origin = ev.front().start;
    const TimeNs span = std::max<TimeNs>(1, lane.maxEnd.back() - lod.origin);
    lod.base = roundUpPow2(std::max<TimeNs>(1, 4 * span / static_cast<TimeNs>(ev.size())));
    const size_t n0 = static_cast<size_t>(span / lod.base) + 1;

    std::vector<LodBucket> level(n0);
    // Time per code while building, to pick each bucket's dominant code; float
    // keeps it to 32 bytes a bucket and only ranks codes.
    std::vector<std::array<float, kMaxCodes>> codeTime(n0, std::array<float, kMaxCodes>{});
    TimeNs covered = lod.origin;
    for (const Event& e : ev) {
        const size_t b0 = static_cast<size_t>((e.start - lod.origin) / lod.base);
        LodBucket& first = level[b0];
        ++first.count;
        if (e.duration() > first.longest) {
            first.longest = e.duration();
            first.longestStart = e.start;
        }
        // Busy time is the union: only the part past what earlier events covered.
        const TimeNs s = std::max(e.start, covered);
        if (e.end <= s)
            continue;
        const size_t code = std::min<size_t>(e.code, kMaxCodes - 1);
        for (size_t b = static_cast<size_t>((s - lod.origin) / lod.base); b < n0; ++b) {
            const TimeNs bs = lod.origin + static_cast<TimeNs>(b) * lod.base;
            if (bs >= e.end)
                break;
            const TimeNs part = std::min(e.end, bs + lod.base) - std::max(s, bs);
            level[b].busy += part;
            codeTime[b][code] += static_cast<float>(part);
        }
        covered = e.end;
    }
    auto settle = [](std::vector<LodBucket>& lv, const std::vector<std::array<float, kMaxCodes>>& ct) {
        for (size_t b = 0; b < lv.size(); ++b)
            lv[b].code = static_cast<uint8_t>(std::max_element(ct[b].begin(), ct[b].end()) - ct[b].begin());
    };
    settle(level, codeTime);
    lod.levels.push_back(std::move(level));
    while (lod.levels.back().size() > 2 && lod.levels.size() < 28) {
        const auto& fine = lod.levels.back();
        const size_t n = (fine.size() + 3) / 4;
        std::vector<LodBucket> coarse(n);
        std::vector<std::array<float, kMaxCodes>> ct(n, std::array<float, kMaxCodes>{});
        for (size_t b = 0; b < fine.size(); ++b) {
            LodBucket& c = coarse[b / 4];
            const LodBucket& f = fine[b];
            c.busy += f.busy;
            c.count += f.count;
            if (f.longest > c.longest) {
                c.longest = f.longest;
                c.longestStart = f.longestStart;
            }
            for (int k = 0; k < kMaxCodes; ++k)
                ct[b / 4][static_cast<size_t>(k)] += codeTime[b][static_cast<size_t>(k)];
        }
        settle(coarse, ct);
        codeTime = std::move(ct);
        lod.levels.push_back(std::move(coarse));
    }
}

bool byStart(const Event& e, TimeNs t) { return e.start < t; }

} // namespace

void TimelineModel::finalize()
{
    start = 0;
    end = 0;
    bool any = false;
    for (Lane& lane : lanes) {
        // Builders mostly add events in order: sorting is then a check, and an
        // exactly reserved vector is not copied to shrink it.
        auto byStartOrder = [](const Event& a, const Event& b) { return a.start < b.start; };
        if (!std::is_sorted(lane.events.begin(), lane.events.end(), byStartOrder))
            std::stable_sort(lane.events.begin(), lane.events.end(), byStartOrder);
        if (lane.events.capacity() > lane.events.size())
            lane.events.shrink_to_fit();
        lane.maxEnd.resize(lane.events.size());
        TimeNs m = std::numeric_limits<TimeNs>::min();
        for (size_t i = 0; i < lane.events.size(); ++i) {
            Event& e = lane.events[i];
            if (e.end < e.start)
                e.end = e.start; // a reversed interval from a bad record: keep it, zero long
            m = std::max(m, e.end);
            lane.maxEnd[i] = m;
        }
        buildLod(lane);
        if (!lane.events.empty()) {
            start = any ? std::min(start, lane.events.front().start) : lane.events.front().start;
            end = any ? std::max(end, lane.maxEnd.back()) : lane.maxEnd.back();
            any = true;
        }
    }
    if (names.empty())
        names.emplace_back();
}

const std::string& TimelineModel::name(int32_t id) const
{
    static const std::string empty;
    return id >= 0 && static_cast<size_t>(id) < names.size() ? names[static_cast<size_t>(id)] : empty;
}

size_t TimelineModel::eventCount() const
{
    size_t n = 0;
    for (const Lane& l : lanes)
        n += l.events.size();
    return n;
}

size_t TimelineModel::memoryBytes() const
{
    size_t n = sizeof(*this) + comms.capacity() * sizeof(CommDetail);
    for (const Lane& l : lanes) {
        n += sizeof(Lane) + l.events.capacity() * sizeof(Event) + l.maxEnd.capacity() * sizeof(TimeNs);
        for (const auto& lv : l.lod.levels)
            n += lv.capacity() * sizeof(LodBucket);
    }
    for (const auto& s : names)
        n += sizeof(std::string) + s.capacity();
    return n;
}

size_t TimelineModel::firstEndingAfter(int laneIndex, TimeNs t) const
{
    const auto& me = lanes[static_cast<size_t>(laneIndex)].maxEnd;
    // maxEnd rises with the index, so the first entry past t is itself an event ending after t.
    return static_cast<size_t>(std::upper_bound(me.begin(), me.end(), t) - me.begin());
}

namespace {

// How many events start before t: the index of the first one starting at or
// after it (events are sorted by start).
size_t startsBefore(const std::vector<Event>& ev, TimeNs t)
{
    return static_cast<size_t>(std::lower_bound(ev.begin(), ev.end(), t, byStart) - ev.begin());
}

// The block that starts with a narrow event, read from the pyramid level
// with about two buckets per pixel: buckets join it until a gap of foldNs,
// a wide event (the block ends where it begins) or, once the block is foldNs
// wide, a change of dominant code or busy share; its end is then tightened to
// the events.
detail::Fold foldFromPyramid(const Lane& lane, int level, const Event& e, TimeNs s, TimeNs to, TimeNs foldNs)
{
    detail::Fold fold;
    const auto& buckets = lane.lod.levels[static_cast<size_t>(level)];
    const TimeNs w = lane.lod.width(level);
    size_t b = static_cast<size_t>((s - lane.lod.origin) / w);
    TimeNs lastBusyEnd = s; // end of the last bucket with busy time
    bool stoppedAtWide = false; // or at a change of shape: the block ends exactly there
    for (; b < buckets.size(); ++b) {
        const TimeNs bs = lane.lod.origin + static_cast<TimeNs>(b) * w;
        if (bs >= to || bs - lastBusyEnd >= foldNs)
            break;
        const LodBucket& bk = buckets[b];
        if (bk.longest >= foldNs && bk.longestStart > s) {
            // A wide event starts here: the block ends where it begins.
            lastBusyEnd = std::max(lastBusyEnd, bk.longestStart);
            stoppedAtWide = true;
            break;
        }
        if (bk.busy == 0)
            continue;
        // Dense parts keep their shape: a new block where the dominant code or the
        // busy share changes, once the current one is foldPx wide.
        if (fold.busy > 0 && bs - s >= foldNs) {
            const double shareSoFar = static_cast<double>(fold.busy) / static_cast<double>(bs - s);
            const double share = static_cast<double>(bk.busy) / static_cast<double>(w);
            const auto dominant = std::max_element(fold.codeNs.begin(), fold.codeNs.end()) - fold.codeNs.begin();
            if (bk.code != dominant || std::abs(share - shareSoFar) > 0.35) {
                lastBusyEnd = bs;
                stoppedAtWide = true;
                break;
            }
        }
        fold.busy += bk.busy;
        fold.codeNs[bk.code] += bk.busy;
        lastBusyEnd = bs + w;
    }
    if (stoppedAtWide) {
        fold.end = lastBusyEnd;
    } else {
        // Tighten to the events: the latest end among those starting before the last bucket's end.
        const size_t k = startsBefore(lane.events, lastBusyEnd);
        fold.end = k > 0 ? std::min(lane.maxEnd[k - 1], lastBusyEnd + foldNs) : e.end;
        fold.end = std::max(fold.end, e.end);
    }
    if (fold.end <= s)
        fold.end = e.end; // the wide event starts where this one does: draw this one alone
    fold.busy = std::min(fold.busy, fold.end - s);
    if (fold.busy <= 0) {
        fold.busy = std::min(e.end, fold.end) - s;
        fold.codeNs[std::min<size_t>(e.code, kMaxCodes - 1)] += fold.busy;
    }
    return fold;
}

// Pixels from the query's start.
struct PixelScale {
    TimeNs from = 0;
    double nsPerPx = 1;
    double operator()(TimeNs t) const { return static_cast<double>(t - from) / nsPerPx; }
};

// The draw item of a block from `s` holding events [first, last): the event
// itself when it holds one, else the dominant code and busy share.
DrawItem blockItem(size_t first, size_t last, const Event& e, TimeNs s, const detail::Fold& fold, const PixelScale& px)
{
    const uint32_t count = static_cast<uint32_t>(std::max<size_t>(1, last - first));
    DrawItem item;
    item.start = s;
    item.end = fold.end;
    item.x0 = px(s);
    item.x1 = px(fold.end);
    item.count = count;
    if (count == 1) {
        item.event = static_cast<int64_t>(first);
        item.code = e.code;
        item.busyFraction = 1.0f;
    } else {
        item.code = static_cast<uint8_t>(std::max_element(fold.codeNs.begin(), fold.codeNs.end()) - fold.codeNs.begin());
        item.busyFraction = static_cast<float>(std::clamp(static_cast<double>(fold.busy) / static_cast<double>(fold.end - s), 0.0, 1.0));
    }
    return item;
}

} // namespace

namespace detail {

Fold foldNarrowEvents(const Lane& lane, size_t first, TimeNs s, TimeNs to, TimeNs foldNs)
{
    const auto& ev = lane.events;
    const Event& e = ev[first];
    Fold fold;
    fold.end = e.end;
    fold.busy = e.end - s;
    fold.codeNs[std::min<size_t>(e.code, kMaxCodes - 1)] += fold.busy;
    for (size_t j = first + 1; j < ev.size() && ev[j].start < to; ++j) {
        const Event& f = ev[j];
        if (f.end <= fold.end)
            continue; // inside what the block already covers
        if (f.duration() >= foldNs || f.start - fold.end >= foldNs)
            break;
        // A block at least foldPx wide ends where the dominant code changes.
        if (fold.end - s >= foldNs
            && f.code != std::max_element(fold.codeNs.begin(), fold.codeNs.end()) - fold.codeNs.begin())
            break;
        const TimeNs part = f.end - std::max(f.start, fold.end);
        fold.busy += part;
        fold.codeNs[std::min<size_t>(f.code, kMaxCodes - 1)] += part;
        fold.end = f.end;
    }
    return fold;
}

} // namespace detail

void TimelineModel::drawList(int laneIndex, TimeNs from, TimeNs to, int widthPx, std::vector<DrawItem>& out,
                             const DrawOptions& options) const
{
    out.clear();
    if (laneIndex < 0 || static_cast<size_t>(laneIndex) >= lanes.size() || to <= from || widthPx <= 0)
        return;
    const Lane& lane = lanes[static_cast<size_t>(laneIndex)];
    const auto& ev = lane.events;
    const size_t n = ev.size();
    if (n == 0)
        return;
    const PixelScale px{from, static_cast<double>(to - from) / widthPx};
    const TimeNs foldNs = std::max<TimeNs>(1, static_cast<TimeNs>(std::ceil(options.foldPx * px.nsPerPx)));
    const int level = lane.lod.levelFor(px.nsPerPx / 2);

    TimeNs t = from;
    size_t minIndex = 0; // events before it are drawn (or folded) already
    while (t < to) {
        size_t i = std::max(firstEndingAfter(laneIndex, t), minIndex);
        while (i < n && ev[i].end <= t && ev[i].start < t)
            ++i; // hidden under an event drawn before (nested or overlapping records)
        if (i >= n || ev[i].start >= to)
            break;
        const Event& e = ev[i];
        const TimeNs s = std::max(e.start, t);
        if (e.duration() >= foldNs) {
            out.push_back({s, e.end, px(s), px(e.end), 1.0f, 1, static_cast<int64_t>(i), e.code});
            t = e.end;
            minIndex = i + 1;
            continue;
        }
        // A narrow event: fold it with the narrow events and short gaps that follow,
        // read from the events where the view is finer than the pyramid.
        const detail::Fold fold = level < 0 ? detail::foldNarrowEvents(lane, i, s, to, foldNs)
                                            : foldFromPyramid(lane, level, e, s, to, foldNs);
        const size_t last = startsBefore(ev, fold.end); // events [i, last) went into the block
        out.push_back(blockItem(i, last, e, s, fold, px));
        t = fold.end;
        // An event starting inside the block but ending past it belongs to the block.
        minIndex = std::max(last, i + 1);
    }
}

int64_t TimelineModel::hitTest(int laneIndex, TimeNs t, TimeNs toleranceNs) const
{
    if (laneIndex < 0 || static_cast<size_t>(laneIndex) >= lanes.size())
        return -1;
    const Lane& lane = lanes[static_cast<size_t>(laneIndex)];
    const auto& ev = lane.events;
    // Events starting at or before t; the latest of them still running wins.
    const size_t j = static_cast<size_t>(std::upper_bound(ev.begin(), ev.end(), t, [](TimeNs v, const Event& e) { return v < e.start; }) - ev.begin());
    for (size_t k = j; k > 0; --k) {
        if (lane.maxEnd[k - 1] <= t)
            break; // nothing at or before k - 1 reaches t
        if (ev[k - 1].end > t || (ev[k - 1].start == t && ev[k - 1].end == t))
            return static_cast<int64_t>(k - 1);
    }
    // None contains t: the nearest edge within the tolerance.
    if (toleranceNs <= 0)
        return -1;
    int64_t best = -1;
    TimeNs bestDist = toleranceNs + 1;
    if (j > 0 && t - lane.maxEnd[j - 1] < bestDist) {
        // The event whose end is maxEnd[j - 1]: search back for it (usually j - 1).
        for (size_t k = j; k > 0; --k)
            if (ev[k - 1].end == lane.maxEnd[j - 1]) {
                best = static_cast<int64_t>(k - 1);
                bestDist = t - lane.maxEnd[j - 1];
                break;
            }
    }
    if (j < ev.size() && ev[j].start - t < bestDist)
        best = static_cast<int64_t>(j);
    return best;
}

int64_t TimelineModel::nextEvent(int laneIndex, TimeNs t) const
{
    if (laneIndex < 0 || static_cast<size_t>(laneIndex) >= lanes.size())
        return -1;
    const auto& ev = lanes[static_cast<size_t>(laneIndex)].events;
    const auto it = std::upper_bound(ev.begin(), ev.end(), t, [](TimeNs v, const Event& e) { return v < e.start; });
    return it == ev.end() ? -1 : static_cast<int64_t>(it - ev.begin());
}

int64_t TimelineModel::previousEvent(int laneIndex, TimeNs t) const
{
    if (laneIndex < 0 || static_cast<size_t>(laneIndex) >= lanes.size())
        return -1;
    const auto& ev = lanes[static_cast<size_t>(laneIndex)].events;
    const auto it = std::lower_bound(ev.begin(), ev.end(), t, byStart);
    return it == ev.begin() ? -1 : static_cast<int64_t>(it - ev.begin()) - 1;
}

TimelineModel::GroupSummary TimelineModel::summarize(int laneIndex, TimeNs from, TimeNs to, int64_t maxEvents) const
{
    GroupSummary g;
    if (laneIndex < 0 || static_cast<size_t>(laneIndex) >= lanes.size() || to <= from)
        return g;
    const auto& ev = lanes[static_cast<size_t>(laneIndex)].events;
    auto it = std::lower_bound(ev.begin(), ev.end(), from, [](const Event& e, TimeNs t) { return e.start < t; });
    for (; it != ev.end() && it->start < to; ++it) {
        if (g.count == maxEvents) {
            g.complete = false;
            break;
        }
        const TimeNs d = it->duration();
        ++g.count;
        g.busyNs += d;
        g.byCode[std::min<size_t>(it->code, kMaxCodes - 1)] += d;
        if (g.longest < 0 || d > ev[static_cast<size_t>(g.longest)].duration())
            g.longest = it - ev.begin();
    }
    return g;
}

AreaStats TimelineModel::areaStats(std::span<const int> laneIndices, TimeNs from, TimeNs to) const
{
    AreaStats st;
    st.from = from;
    st.to = to;
    if (to <= from)
        return st;
    std::unordered_map<int32_t, size_t> byName; // name -> index in kernelsByName
    for (int li : laneIndices) {
        if (li < 0 || static_cast<size_t>(li) >= lanes.size())
            continue;
        const Lane& lane = lanes[static_cast<size_t>(li)];
        for (size_t i = firstEndingAfter(li, from); i < lane.events.size() && lane.events[i].start < to; ++i) {
            const Event& e = lane.events[i];
            if (e.end <= from && !(e.start == e.end && e.start >= from))
                continue;
            const TimeNs part = std::min(e.end, to) - std::max(e.start, from);
            switch (lane.kind) {
            case LaneKind::Steps:
                if (e.code < 4) {
                    st.stepNs[e.code] += part;
                    ++st.stepCount[e.code];
                }
                break;
            case LaneKind::Bubbles:
                if (e.code < kBubbleCauses) {
                    st.idleNs[e.code] += part;
                    ++st.idleCount[e.code];
                }
                break;
            case LaneKind::Kernels:
            case LaneKind::Transfers:
                if (e.code < 7) {
                    st.classNs[e.code] += part;
                    ++st.classCount[e.code];
                }
                if (lane.kind == LaneKind::Kernels) {
                    const TimeNs d = e.duration();
                    st.kernelMinNs = st.kernels == 0 ? d : std::min(st.kernelMinNs, d);
                    st.kernelMaxNs = st.kernels == 0 ? d : std::max(st.kernelMaxNs, d);
                    st.kernelSumNs += d;
                    ++st.kernels;
                    auto [at, fresh] = byName.try_emplace(e.name, st.kernelsByName.size());
                    if (fresh)
                        st.kernelsByName.push_back({e.name, e.code, 0, 0, d, d});
                    NameStats& n = st.kernelsByName[at->second];
                    ++n.count;
                    n.totalNs += d;
                    n.minNs = std::min(n.minNs, d);
                    n.maxNs = std::max(n.maxNs, d);
                }
                break;
            case LaneKind::Cpu:
                ++st.cpuRanges;
                break;
            case LaneKind::Memory:
                break;
            }
        }
    }
    st.kernelAvgNs = st.kernels ? static_cast<double>(st.kernelSumNs) / static_cast<double>(st.kernels) : 0.0;
    std::sort(st.kernelsByName.begin(), st.kernelsByName.end(), [](const NameStats& a, const NameStats& b) {
        return a.totalNs != b.totalNs ? a.totalNs > b.totalNs : a.name < b.name;
    });
    return st;
}

SearchResult TimelineModel::search(std::string_view pattern, bool regex, bool caseSensitive) const
{
    SearchResult r;
    r.perLane.resize(lanes.size());
    if (pattern.empty())
        return r;
    constexpr size_t kMaxMatchedChars = 4096;
    std::vector<char> match(names.size(), 0);
    if (regex) {
        std::regex re;
        try {
            auto flags = std::regex::ECMAScript | std::regex::optimize;
            if (!caseSensitive)
                flags |= std::regex::icase;
            re.assign(pattern.begin(), pattern.end(), flags);
        } catch (const std::regex_error& e) {
            r.error = "The search pattern is not a valid regular expression (" + std::string(e.what()) + ").";
            return r;
        }
        for (size_t k = 1; k < names.size(); ++k) {
            const std::string& s = names[k];
            const auto endIt = s.begin() + static_cast<std::ptrdiff_t>(std::min(s.size(), kMaxMatchedChars));
            try {
                match[k] = std::regex_search(s.begin(), endIt, re) ? 1 : 0;
            } catch (const std::regex_error&) {
                match[k] = 0; // too complex for this name: treat as no match
            }
        }
    } else {
        auto lower = [](std::string_view v) {
            std::string o(v);
            for (char& c : o)
                c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            return o;
        };
        const std::string needle = caseSensitive ? std::string(pattern) : lower(pattern);
        for (size_t k = 1; k < names.size(); ++k) {
            const std::string_view s = std::string_view(names[k]).substr(0, kMaxMatchedChars);
            match[k] = (caseSensitive ? s.find(needle) : lower(s).find(needle)) != std::string_view::npos ? 1 : 0;
        }
    }
    if (std::find(match.begin(), match.end(), 1) == match.end())
        return r;
    for (size_t li = 0; li < lanes.size(); ++li) {
        const auto& ev = lanes[li].events;
        for (size_t i = 0; i < ev.size(); ++i) {
            const int32_t nm = ev[i].name;
            if (nm > 0 && static_cast<size_t>(nm) < match.size() && match[static_cast<size_t>(nm)])
                r.perLane[li].push_back(static_cast<int64_t>(i));
        }
        r.total += static_cast<int64_t>(r.perLane[li].size());
    }
    return r;
}

} // namespace pipescope::timeline
