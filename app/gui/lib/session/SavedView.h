#pragma once
// Views kept beside the job and links that open one (docs/app.md, "Saved
// views and links"): where the timeline looked, what was pinned and marked,
// in a small JSON file next to the job -- X.pipescope.view.json beside a
// store X.pipescope, J.view.json beside a job folder J (never inside it) --
// and `pipescope-gui JOB --at A..B --iteration N`, which opens another user
// at the same place.
#include "whatif/KeptScenario.h"

#include <QList>
#include <QPair>
#include <QString>
#include <QStringList>

#include <optional>

namespace pipescope {
struct Trace;
}

namespace pipescope::gui {

// What tells the job a view was saved for from another one at the same
// path (a store imported again, a view file copied): its ranks and GPU
// activities. Only for a job read whole.
struct JobStamp {
    qint64 ranks = 0, activities = 0;
    bool operator==(const JobStamp&) const = default;
};
std::optional<JobStamp> jobStamp(const Trace& trace); // nullopt for a job read in part
QString describe(const JobStamp& stamp);               // "4 ranks, 1234 GPU activities"

struct SavedView {
    // Times are nanoseconds from the job's start (the timeline model's
    // start), so that they stay exact in JSON whatever the trace's clock.
    qint64 fromNs = 0, toNs = 0;             // the visible range
    std::optional<qint64> originNs;          // the time origin
    QString originName;                      // what the axis says it counts from
    QStringList pinned;                      // TimelineView::laneKey of each pinned track, in order
    struct Marker {
        qint64 ns = 0;
        QString label;
        bool operator==(const Marker&) const = default;
    };
    QList<Marker> markers;
    struct Note {
        qint64 fromNs = 0, toNs = 0;
        QString text;
        bool operator==(const Note&) const = default;
    };
    QList<Note> notes;
    int iteration = -1; // the iteration shown (position among the job's, as --iteration), -1: the whole trace
    std::optional<JobStamp> job;         // the job it was saved for (views of version 1 and jobs read in part have none)
    std::optional<KeptScenario> whatIf;  // the what-if editor's scenario, when it was not the job's own
    bool operator==(const SavedView&) const = default;
};

// Why `view` read from `path` is not applied to the job of `trace` ("The
// saved view X was kept for another job (...) and was ignored"); empty when
// it is the job's, or either side has no stamp.
QString otherJobNotice(const SavedView& view, const Trace& trace, const QString& path);

// Where the view of a job opened from `inputs` is kept: "" when none can be
// (several inputs, or a file inside a job folder, which is never written into).
QString savedViewPath(const QStringList& inputs);

// Reads a view file. Absent: nullopt with *error empty. Damaged (not JSON,
// not a view, a value out of range): nullopt with *error saying so in one line.
std::optional<SavedView> readSavedView(const QString& path, QString* error);
// Writes it atomically (QSaveFile); false with *error in one line when the
// place cannot be written.
bool writeSavedView(const QString& path, const SavedView& view, QString* error);

// --at START..END: times as the app writes them ("1.25s", "1.25 s", "250ms",
// "12us", "12µs", "1500ns", a bare whole number of ns), START before END;
// exact to the nanosecond. Nullopt with *error when it is not one.
std::optional<QPair<qint64, qint64>> parseTimeRange(const QString& text, QString* error);
// A time the way --at takes it back exactly: the largest unit that is not
// more than it, with only the decimals it needs ("1.25s", "1.5ms", "750ns", "0s").
QString formatLinkTime(qint64 ns);
// `pipescope-gui JOB --at A..B [--iteration N]`, the job's path absolute and
// quoted for a shell where it needs to be. Times from the link's origin.
QString viewLink(const QStringList& inputs, qint64 fromNs, qint64 toNs, int iteration);

} // namespace pipescope::gui
