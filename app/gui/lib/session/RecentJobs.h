#pragma once
// File > Open recent: the jobs opened lately, newest first, kept with
// QSettings. Each is kept as it was opened: absolute paths (a job opened
// from the command line in another folder opens again from anywhere) and
// the options that change what it shows (--layers, --model,
// --measured-boundaries, --iteration, --comm-rules). A remote job is kept
// as its ssh://host/path address.
#include "session/AppSession.h"

#include <QList>
#include <QStringList>

namespace pipescope::gui {

struct RecentJob {
    QStringList inputs;  // absolute paths, or one ssh:// address
    OpenOptions options; // only the options above; the rest as defaulted
    // "a.pipescope" or "a.json, b.json", with the options as on the command line.
    QString label() const;
};

// Newest first; entries kept by an older version (paths only) included.
QList<RecentJob> recentJobs();
// Puts a job first (once: the same inputs opened again replace their entry).
void rememberRecentJob(const QStringList& inputs, const OpenOptions& options);

} // namespace pipescope::gui
