#include "views/QueryTrack.h"

#include <QStringList>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

namespace pipescope::gui {

namespace {

using timeline::Event;
using timeline::Lane;
using timeline::LaneKind;

int columnNamed(const std::vector<std::string>& columns, std::initializer_list<const char*> names)
{
    for (const char* want : names)
        for (size_t i = 0; i < columns.size(); ++i)
            if (QString::fromStdString(columns[i]).compare(QLatin1String(want), Qt::CaseInsensitive) == 0)
                return static_cast<int>(i);
    return -1;
}

// A whole number of a cell: an integer, or a real without a fraction.
std::optional<int64_t> wholeNumber(const QueryCell& c)
{
    if (c.type == QueryCell::Type::Integer)
        return c.integer;
    if (c.type == QueryCell::Type::Real && std::isfinite(c.real) && c.real == std::floor(c.real) && std::abs(c.real) < 9.0e18)
        return static_cast<int64_t>(c.real);
    return std::nullopt;
}

// One row's block before it is placed on a track.
struct Block {
    TimeNs start = 0, end = 0;
    int32_t name = 0;
    int32_t row = 0;
};

// What a track is keyed by: a rank, or a track column's value.
struct TrackKey {
    int64_t rank = -1;
    std::string value;
    bool operator<(const TrackKey& o) const { return rank != o.rank ? rank < o.rank : value < o.value; }
};

} // namespace

bool isQueryTrack(const Lane& lane) { return lane.kind == LaneKind::Cpu && lane.tid == kQueryTrackTid; }

std::optional<QueryTrackColumns> queryTrackColumns(const std::vector<std::string>& columns, QString* why)
{
    why->clear();
    QueryTrackColumns c;
    c.rank = columnNamed(columns, {"rank"});
    c.track = columnNamed(columns, {"track"});
    c.start = columnNamed(columns, {"start_ns", "ts", "start"});
    c.end = columnNamed(columns, {"end_ns", "end"});
    c.duration = columnNamed(columns, {"dur", "dur_ns", "duration_ns", "duration"});
    c.name = columnNamed(columns, {"name"});
    if ((c.rank >= 0 || c.track >= 0) && c.start >= 0 && (c.end >= 0 || c.duration >= 0))
        return c;
    QStringList have;
    for (const std::string& name : columns)
        have << QString::fromStdString(name);
    *why = QStringLiteral("To draw a result as a track it needs a column rank (or track), a start (start_ns, ts or start) and an "
                          "end (end_ns or end) or a duration (dur or dur_ns), in ns on the job's clock; name is optional. "
                          "This result has: %1")
               .arg(have.isEmpty() ? QStringLiteral("no columns") : have.join(QStringLiteral(", ")));
    return std::nullopt;
}

std::optional<QueryTracks> buildQueryTracks(const QueryResult& result, const timeline::TimelineModel& job, const QString& title,
                                            QString* why)
{
    const std::optional<QueryTrackColumns> c = queryTrackColumns(result.columns, why);
    if (!c)
        return std::nullopt;
    QueryTracks t;
    t.title = title;
    t.names.emplace_back();
    std::unordered_map<std::string, int32_t> interned;
    std::map<TrackKey, std::vector<Block>> blocks;
    for (size_t r = 0; r < result.rows.size(); ++r) {
        const std::vector<QueryCell>& row = result.rows[r];
        ++t.rows;
        TrackKey key;
        if (c->rank >= 0) {
            const auto rank = wholeNumber(row[static_cast<size_t>(c->rank)]);
            if (!rank || *rank < 0 || *rank > std::numeric_limits<int>::max()) {
                ++t.unusable;
                continue;
            }
            key.rank = *rank;
        } else {
            const QueryCell& v = row[static_cast<size_t>(c->track)];
            if (v.type == QueryCell::Type::Null) {
                ++t.unusable;
                continue;
            }
            key.value = queryCellText(v);
        }
        const auto start = wholeNumber(row[static_cast<size_t>(c->start)]);
        const auto endOrDuration = wholeNumber(row[static_cast<size_t>(c->end >= 0 ? c->end : c->duration)]);
        if (!start || !endOrDuration) {
            ++t.unusable;
            continue;
        }
        const TimeNs end = c->end >= 0 ? *endOrDuration : *start + *endOrDuration;
        if (end < *start || (c->end < 0 && *endOrDuration < 0)) {
            ++t.unusable;
            continue;
        }
        if (*start < job.start || end > job.end) {
            ++t.outside;
            continue;
        }
        Block b{*start, end, 0, static_cast<int32_t>(r)};
        if (c->name >= 0 && row[static_cast<size_t>(c->name)].type != QueryCell::Type::Null) {
            const std::string name = queryCellText(row[static_cast<size_t>(c->name)]);
            auto [it, fresh] = interned.try_emplace(name, static_cast<int32_t>(t.names.size()));
            if (fresh)
                t.names.push_back(name);
            b.name = it->second;
        }
        blocks[key].push_back(b);
        ++t.drawn;
    }
    if (t.drawn == 0) {
        *why = QStringLiteral("Nothing to draw: %1").arg(describe(t));
        return std::nullopt;
    }
    for (auto& [key, list] : blocks) {
        std::stable_sort(list.begin(), list.end(), [](const Block& a, const Block& b) { return a.start < b.start; });
        // Overlapping rows go one row down, as far as the last row.
        std::vector<TimeNs> rowEnd;
        std::vector<Lane> lanes;
        for (const Block& b : list) {
            size_t depth = 0;
            while (depth < rowEnd.size() && rowEnd[depth] > b.start && depth + 1 < static_cast<size_t>(kMaxQueryTrackRows))
                ++depth;
            if (depth == rowEnd.size()) {
                rowEnd.push_back(b.end);
                Lane l;
                l.kind = LaneKind::Cpu;
                l.tid = kQueryTrackTid;
                l.rank = key.rank >= 0 ? static_cast<int>(key.rank) : -1;
                l.depth = static_cast<int>(depth);
                QString label = key.rank >= 0 ? title : title + QStringLiteral(": ") + QString::fromStdString(key.value);
                if (depth > 0)
                    label += QStringLiteral(" · %1").arg(depth + 1);
                l.label = label.toStdString();
                lanes.push_back(std::move(l));
            }
            rowEnd[depth] = std::max(rowEnd[depth], b.end);
            Event e;
            e.start = b.start;
            e.end = b.end;
            e.name = b.name;
            e.detail = b.row; // the result's row, for the tooltip
            e.code = static_cast<uint8_t>(CpuRangeKind::Annotation);
            lanes[depth].events.push_back(e);
        }
        for (Lane& l : lanes)
            t.lanes.push_back(std::move(l));
    }
    return t;
}

QString describe(const QueryTracks& t)
{
    QString text = QStringLiteral("%1: %2 of %3 rows on %4 track%5")
                       .arg(t.title)
                       .arg(t.drawn)
                       .arg(t.rows)
                       .arg(t.lanes.size())
                       .arg(t.lanes.size() == 1 ? QString() : QStringLiteral("s"));
    QStringList left;
    if (t.unusable > 0)
        left << QStringLiteral("%1 without a whole-number rank, start and end").arg(t.unusable);
    if (t.outside > 0)
        left << QStringLiteral("%1 outside the job's time span").arg(t.outside);
    if (!left.isEmpty())
        text += QStringLiteral(" (%1)").arg(left.join(QStringLiteral(", ")));
    return text;
}

timeline::TimelineModel withQueryTracks(const timeline::TimelineModel& base, const std::vector<std::shared_ptr<const QueryTracks>>& tracks)
{
    timeline::TimelineModel m = base;
    // Each rank's stage and replica, as its own tracks have them.
    std::map<int, std::pair<int, int>> placeOfRank;
    for (const Lane& l : base.lanes)
        if (!l.baseline && !isQueryTrack(l))
            placeOfRank.try_emplace(l.rank, l.stage, l.replica);
    std::unordered_map<std::string, int32_t> interned;
    for (size_t i = 0; i < m.names.size(); ++i)
        interned.try_emplace(m.names[i], static_cast<int32_t>(i));
    for (const auto& t : tracks) {
        for (const Lane& from : t->lanes) {
            Lane l = from;
            if (const auto at = placeOfRank.find(l.rank); l.rank >= 0 && at != placeOfRank.end()) {
                l.stage = at->second.first;
                l.replica = at->second.second;
            }
            for (Event& e : l.events) {
                const std::string& name = t->names[static_cast<size_t>(e.name)];
                auto [it, fresh] = interned.try_emplace(name, static_cast<int32_t>(m.names.size()));
                if (fresh)
                    m.names.push_back(name);
                e.name = it->second;
            }
            m.lanes.push_back(std::move(l));
        }
    }
    m.finalize();
    return m;
}

} // namespace pipescope::gui
