#pragma once
// Opens a remote job (ssh://[user@]host[:port]/path, docs/remote.md "The
// app") into the same Job a local open gives, so every view works on it
// unchanged, built from what the server sends and nothing more:
//
// * the analysis: its summary and the steps of every rank (one `steps`
//   request per few hundred ranks), read back into an AnalysisResult;
// * the timeline: its lanes from the index; steps and bubbles from the
//   analysis, exact; every other lane from level-of-detail tiles, sharp over
//   the analysed iteration and coarser around it, so the bytes follow the
//   pixels, not the kernels (a folded block stays one block when zoomed);
// * the what-if: the calibrated cost model (core/remote/CostModelWire.h),
//   replayed locally, so the drag needs no round trip.
//
// The job's trace is empty (no activity is copied): details of a kernel,
// the Chrome trace export and re-calibration need the job itself.
#include "session/AppSession.h"

#include <functional>

namespace pipescope::gui {

class RemoteLink;

// Runs on the session's worker thread. Throws Error with one line (the
// address and ssh's, the server's or the link's words), Cancelled.
std::shared_ptr<const Job> loadRemote(const QString& address, const OpenOptions& options, const WorkControl* work = nullptr);
// The same over a link already connected (tests and measurements: a link
// through remote::SlowLink).
// With `firstFrame`, the first frame's Job is handed to it as soon as it is
// built (complete false), before the rest is fetched.
using RemoteFirstFrame = std::function<void(std::shared_ptr<const Job>)>;
std::shared_ptr<const Job> loadRemote(std::shared_ptr<RemoteLink> link, const OpenOptions& options, const WorkControl* work = nullptr,
                                      const RemoteFirstFrame& firstFrame = {});

} // namespace pipescope::gui
