#include "remote/RemoteTiles.h"

#include "util/Format.h"

#include <QPointer>
#include <QThreadPool>

#include <algorithm>
#include <unordered_map>

namespace pipescope::gui {

using nlohmann::json;
using timeline::LaneKind;

namespace {

// Whether a lane's tiles cover [from, to) with events at least foldNs drawn alone.
bool covered(const std::vector<RemoteLink::TileWindow>& windows, TimeNs from, TimeNs to, double foldNs)
{
    for (const auto& w : windows)
        if (w.from <= from && to <= w.to && w.foldNs <= foldNs * 1.0001)
            return true;
    return false;
}

} // namespace

RemoteTiles::RemoteTiles(std::shared_ptr<const Job> job, QObject* parent) : QObject(parent), job_(std::move(job)), model_(job_->timeline)
{
    pause_.setSingleShot(true);
    pause_.setInterval(kPauseMs);
    connect(&pause_, &QTimer::timeout, this, &RemoteTiles::fetch);
}

RemoteTiles::~RemoteTiles() = default;

void RemoteTiles::viewChanged(qint64 from, qint64 to, int widthPx, std::vector<int> lanes)
{
    if (to <= from || widthPx <= 0)
        return;
    wanted_ = View{from, to, widthPx, std::move(lanes)};
    pause_.start();
}

void RemoteTiles::fetch()
{
    if (inFlight_ || !wanted_ || !job_->remote || !model_)
        return;
    const View v = std::move(*wanted_);
    wanted_.reset();
    RemoteLink& link = *job_->remote;
    const double nsPerPx = double(v.to - v.from) / v.widthPx;
    const double viewFold = 3.0 * nsPerPx; // the view folds what is narrower than 3 px
    const auto& windows = link.tileWindows();
    const auto& serverLanes = link.serverLanes();
    // Half a screen more on each side, within the job.
    const TimeNs span = v.to - v.from;
    const TimeNs from = std::max<TimeNs>(model_->start, v.from - span / 2);
    const TimeNs to = std::min<TimeNs>(model_->end + 1, v.to + span / 2);
    if (to <= from)
        return;
    std::vector<int> lanes;
    for (int l : v.lanes)
        if (l >= 0 && static_cast<size_t>(l) < serverLanes.size() && serverLanes[static_cast<size_t>(l)] >= 0 &&
            (static_cast<size_t>(l) >= windows.size() || !covered(windows[static_cast<size_t>(l)], v.from, v.to, viewFold)))
            lanes.push_back(l);
    if (lanes.empty())
        return;
    // At the view's own ns per pixel, one pixel's fold: a zoom in up to 3x stays exact.
    const int width = static_cast<int>(std::clamp<double>(std::ceil(double(to - from) / nsPerPx), 1, remote::kMaxWidthPx));
    const double foldNs = double(to - from) / width;
    inFlight_ = true;
    ++fetches_;
    QPointer<RemoteTiles> self(this);
    auto job = job_;
    auto base = model_;
    auto numbers = link.serverEventNumbers();
    auto wins = windows;
    auto servers = serverLanes;
    QThreadPool::globalInstance()->start([self, job, base, numbers = std::move(numbers), wins = std::move(wins),
                                          servers = std::move(servers), lanes, from, to, width, foldNs]() mutable {
        std::optional<Refined> done;
        try {
            std::vector<json> tiles;
            {
                auto pipe = job->remote->pipeline();
                const size_t perRequest = static_cast<size_t>(std::clamp<int64_t>(remote::kMaxTilePixels / width, 1, remote::kMaxTileLanes));
                std::vector<int64_t> ids;
                for (size_t i = 0; i < lanes.size(); i += perRequest) {
                    json some = json::array();
                    for (size_t k = i; k < std::min(lanes.size(), i + perRequest); ++k)
                        some.push_back(servers[static_cast<size_t>(lanes[k])]);
                    ids.push_back(pipe.send(remote::RequestType::Tiles,
                                            {{"from_ns", from}, {"to_ns", to}, {"width_px", width}, {"lanes", some}, {"fold_px", 1}}));
                }
                for (int64_t id : ids)
                    tiles.push_back(pipe.result(id));
            }
            done = refine(*base, std::move(numbers), std::move(wins), servers, tiles, from, to, foldNs);
        } catch (const std::exception&) {
            // A link that failed says so in the status bar (MainWindow looks every 2 s); the picture stays.
        }
        QMetaObject::invokeMethod(self, [self, job, done = std::move(done)]() mutable {
            if (!self)
                return;
            self->inFlight_ = false;
            if (done) {
                job->remote->setServerEvents(job->remote->serverLanes(), std::move(done->numbers));
                job->remote->setTileWindows(std::move(done->windows));
                self->model_ = std::move(done->model);
                Q_EMIT self->refined(self->model_);
            }
            if (self->wanted_)
                self->fetch();
        }, Qt::QueuedConnection);
    });
}

RemoteTiles::Refined RemoteTiles::refine(const timeline::TimelineModel& base, std::vector<std::vector<int64_t>> numbers,
                                         std::vector<std::vector<RemoteLink::TileWindow>> windows, const std::vector<int>& serverLanes,
                                         const std::vector<json>& tiles, TimeNs from, TimeNs to, double foldNs)
{
    Refined out;
    out.model = std::make_shared<timeline::TimelineModel>(base);
    timeline::TimelineModel& m = *out.model;
    numbers.resize(m.lanes.size());
    windows.resize(m.lanes.size());
    std::unordered_map<std::string, int32_t> interned;
    for (size_t i = 0; i < m.names.size(); ++i)
        interned.try_emplace(m.names[i], static_cast<int32_t>(i));
    auto intern = [&](const std::string& s) {
        auto [it, added] = interned.try_emplace(s, static_cast<int32_t>(m.names.size()));
        if (added)
            m.names.push_back(s);
        return it->second;
    };
    std::unordered_map<int, size_t> localOf;
    for (size_t l = 0; l < serverLanes.size() && l < m.lanes.size(); ++l)
        if (serverLanes[l] >= 0)
            localOf[serverLanes[l]] = l;
    timeline::TimelineModel changed; // the lanes refined, finalized alone
    std::vector<size_t> changedAt;
    for (const json& t : tiles) {
        const TimeNs origin = t.at("origin_ns").get<TimeNs>();
        const json& names = t.at("names");
        for (const json& lt : t.at("lanes")) {
            const auto local = localOf.find(lt.at("lane").get<int>());
            if (local == localOf.end())
                throw FormatError("the server's tiles name a lane that was not asked for");
            const size_t l = local->second;
            const timeline::Lane& lane = m.lanes[l];
            const int codes = lane.kind == LaneKind::Cpu ? timeline::kMaxCodes : lane.kind == LaneKind::Bubbles ? kBubbleCauses : 7;
            // What the lane keeps: the events outside the range, those cut by
            // its edges (a folded block clipped to its part outside; one
            // server event whole, joined with its part inside below).
            std::vector<timeline::Event> events;
            std::vector<int64_t> nums;
            std::unordered_map<int64_t, size_t> byNumber;
            const auto& old = lane.events;
            const auto& oldNums = numbers[l];
            for (size_t i = 0; i < old.size(); ++i) {
                timeline::Event e = old[i];
                const int64_t n = i < oldNums.size() ? oldNums[i] : -1;
                if (e.end > from && e.start < to) {
                    if (n >= 0 && (e.start < from || e.end > to)) {
                        // kept whole
                    } else if (e.start < from) {
                        e.end = from;
                    } else if (e.end > to) {
                        e.start = to;
                    } else {
                        continue;
                    }
                }
                if (n >= 0)
                    byNumber[n] = events.size();
                events.push_back(e);
                nums.push_back(n);
            }
            for (const json& item : lt.at("items")) {
                if (!item.is_array() || item.size() != 8)
                    throw FormatError("the server's tiles: an item that is not [start, end, count, code, busy, event, name, microbatch]");
                timeline::Event e;
                e.start = origin + item[0].get<TimeNs>();
                e.end = std::min(origin + item[1].get<TimeNs>(), to);
                const int64_t count = item[2].get<int64_t>();
                const int code = item[3].get<int>();
                if (code < 0 || code >= codes || e.end < e.start || e.start < from || e.start > to || count < 0)
                    continue;
                e.code = static_cast<uint8_t>(code);
                e.microbatch = item[7].get<int32_t>();
                const int64_t n = count == 1 ? item[5].get<int64_t>() : -1;
                if (n >= 0) {
                    const std::string id = std::to_string(item[6].get<int64_t>());
                    e.name = names.contains(id) ? intern(names.at(id).get<std::string>()) : 0;
                    if (auto seen = byNumber.find(n); seen != byNumber.end()) {
                        timeline::Event& k = events[seen->second];
                        k.start = std::min(k.start, e.start);
                        k.end = std::max(k.end, e.end);
                        continue;
                    }
                    byNumber[n] = events.size();
                } else if (count > 0) {
                    e.name = intern(formatCount(count) + " events, folded by the server at this resolution");
                } else {
                    e.name = intern("part of an event that started earlier, folded by the server at this resolution");
                }
                events.push_back(e);
                nums.push_back(n);
            }
            std::vector<size_t> order(events.size());
            for (size_t i = 0; i < order.size(); ++i)
                order[i] = i;
            std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return events[a].start < events[b].start; });
            timeline::Lane refined = lane;
            refined.events.clear();
            numbers[l].clear();
            for (size_t i : order) {
                refined.events.push_back(events[i]);
                numbers[l].push_back(nums[i]);
            }
            // The lane's windows: the new one, and the old ones less the range.
            std::vector<RemoteLink::TileWindow> w;
            for (const auto& x : windows[l]) {
                if (x.to <= from || x.from >= to) {
                    w.push_back(x);
                    continue;
                }
                if (x.from < from)
                    w.push_back({x.from, from, x.foldNs});
                if (x.to > to)
                    w.push_back({to, x.to, x.foldNs});
            }
            w.push_back({from, to, foldNs});
            windows[l] = std::move(w);
            changed.lanes.push_back(std::move(refined));
            changedAt.push_back(l);
        }
    }
    changed.finalize();
    for (size_t i = 0; i < changedAt.size(); ++i)
        m.lanes[changedAt[i]] = std::move(changed.lanes[i]);
    out.numbers = std::move(numbers);
    out.windows = std::move(windows);
    return out;
}

} // namespace pipescope::gui
