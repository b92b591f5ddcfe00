#pragma once
// A query's result drawn as tracks on the timeline, as Perfetto's "show as
// debug track" does: each row with a rank (or a track value), a start and an
// end (or a duration) is a block, named by its `name` column when it has one.
// The blocks of one rank (or track value) share a track, and rows that
// overlap go to a second, third, fourth row under it. The tracks are Cpu
// lanes of no thread (tid kQueryTrackTid), so the timeline draws, hovers,
// searches and selects them as it does CPU ranges.
#include "store/Query.h"
#include "timeline/TimelineModel.h"

#include <QString>

#include <memory>
#include <optional>
#include <vector>

namespace pipescope::gui {

inline constexpr int64_t kQueryTrackTid = -1000; // Lane::tid of a query's track: no thread has it
inline constexpr int kMaxQueryTrackRows = 4;     // rows per track; overlaps beyond share the last
bool isQueryTrack(const timeline::Lane& lane);

// Where the columns are (-1: absent). Names are matched without case:
// rank or track; start_ns, ts or start; end_ns or end, else dur, dur_ns,
// duration_ns or duration; name.
struct QueryTrackColumns {
    int rank = -1, track = -1, start = -1, end = -1, duration = -1, name = -1;
};
// Nullopt, with *why naming the columns needed and those the result has,
// when a result cannot be drawn.
std::optional<QueryTrackColumns> queryTrackColumns(const std::vector<std::string>& columns, QString* why);

struct QueryTracks {
    QString title;                     // "query 1"
    std::vector<timeline::Lane> lanes; // events only (name: index into names); placed by withQueryTracks
    std::vector<std::string> names;    // names[0] is ""
    int64_t rows = 0;                  // in the result
    int64_t drawn = 0;                 // rows drawn
    int64_t unusable = 0;              // no whole-number rank, start or end; an end before the start
    int64_t outside = 0;               // not inside the job's time span
};

// The tracks of `result` over `job` (times on the job's clock, as the store
// holds them; rows not inside [job.start, job.end] are left out, so a stray
// row cannot stretch the timeline). Nullopt with *why when the columns are not
// there or no row can be drawn.
std::optional<QueryTracks> buildQueryTracks(const QueryResult& result, const timeline::TimelineModel& job, const QString& title,
                                            QString* why);
// "query 1: 12 of 15 rows on 2 tracks (2 without a whole-number rank, start and
// end, 1 outside the job's time span)".
QString describe(const QueryTracks& tracks);

// `base` with the tracks added: a rank's track in that rank's stage and
// replica (as its other tracks), a track value's among the ranks outside the
// pipeline.
timeline::TimelineModel withQueryTracks(const timeline::TimelineModel& base,
                                        const std::vector<std::shared_ptr<const QueryTracks>>& tracks);

} // namespace pipescope::gui
