#pragma once
// The app's session layer: opens what the user gives (a store, Kineto JSON
// files, a folder of rank files, Nsight SQLite exports) on a worker thread,
// analyses it once and hands the views one immutable Job. Inputs other than
// a store are imported into a store in the user's cache folder, reused while
// the inputs are unchanged (same paths, sizes and modification times).
// Progress and Cancel go through core's WorkControl; one load runs at a time,
// and a new open() cancels the one in flight. A large store is opened in two
// phases: a first frame of one window (firstFrame, an incomplete Job), then
// the whole trace (loaded); each Job is complete for what it covers. An
// ssh://host/path input opens a remote job (remote/RemoteJob.h) on the same
// worker, with the same signals.
#include "analysis/Analysis.h"
#include "analysis/JobPart.h"
#include "model/Trace.h"
#include "timeline/TimelineModel.h"
#include "util/AtomicOutput.h"
#include "whatif/CostModel.h"
#include "whatif/Levers.h"

#include <QObject>
#include <QStringList>
#include <QTemporaryDir>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <thread>

namespace pipescope {
class Store;
struct StoreSummary;
} // namespace pipescope

namespace pipescope::gui {

class RemoteLink;

struct OpenOptions {
    int layers = 0;            // like `pipescope whatif --layers N` when the trace names no layers
    QString modelFile;         // like `--model FILE`
    QString commRulesFile;     // like `--comm-rules FILE`: more communication kernels
    std::vector<int> measuredBoundaries; // like `--measured-boundaries`: the measured run's partition
    std::optional<int> iteration;
    // Stores with more GPU activities than this show a first frame of one
    // window before the whole trace has loaded (see AppSession::loadFirstFrame);
    // 0: always, negative: never.
    int64_t firstFrameAbove = 1'000'000;
    // The ranks to read (sorted; empty: all of them, but see wholeJobAbove),
    // like `pipescope analyze --ranks`.
    std::vector<int> ranks;
    // A sharded job with more GPU activities than this, or more than the
    // memory left would hold, is read in part: the pipeline of its busiest
    // replica (representativeRanks), the other replicas summarised from the
    // job index until the user asks for them (Job::partial()). Negative: read
    // whole (within the memory left).
    int64_t wholeJobAbove = 2'000'000;
};

// Everything the views show about one job. Shared read-only between views.
struct Job {
    QStringList inputs;   // what the user opened
    QString storePath;    // the store analysed (the input itself, or the cached import)
    QString title;        // for the window title
    bool simulated = false;
    std::shared_ptr<const Trace> trace;
    std::shared_ptr<const AnalysisResult> analysis;
    std::shared_ptr<const timeline::TimelineModel> timeline;
    std::optional<whatif::CostModel> costModel; // unset when the what-if engine cannot calibrate
    QString whatIfError;                        // why, in one sentence
    whatif::Levers levers;                      // what would help most, priced on costModel (empty without one)
    OpenOptions options;
    // False for the first frame of a large store: trace, analysis and timeline
    // of the activities starting in [windowFrom, windowTo) only, no cost model;
    // the complete job follows. Either way the job is whole for what it covers.
    bool complete = true;
    TimeNs windowFrom = 0, windowTo = 0;
    // The opened files and the store: no report or export the user saves may
    // replace them while the job is open.
    std::shared_ptr<const std::vector<AtomicOutput::InputGuard>> protectedFiles;
    // Said in the status bar once the job shows (e.g. the import cache could
    // not be written and a temporary store was used); empty when all is well.
    QString notice;
    // The temporary store's folder when the cache was unusable; removed with the job.
    std::shared_ptr<const QTemporaryDir> scratch;

    // A job read in part (OpenOptions::ranks, or a sharded job too large to
    // read whole): the ranks read and what the job index says of the rest.
    JobPart part;
    bool partial() const { return part.partial(); }

    // A remote job (ssh://host/path, remote/RemoteJob.h): the link it was
    // read through, kept open for the status bar's figures; null for a
    // local job. Its trace holds no activity (none is copied), storePath is empty.
    std::shared_ptr<RemoteLink> remote;
    bool isRemote() const { return remote != nullptr; }
};

class AppSession : public QObject {
    Q_OBJECT
public:
    explicit AppSession(QObject* parent = nullptr);
    ~AppSession() override;

    // Starts loading; emits progress, then loaded or failed (or cancelled).
    // For a large store, firstFrame comes first with an incomplete Job.
    void open(const QStringList& inputs, const OpenOptions& options = {});
    void cancel();
    bool busy() const { return worker_.joinable() && !finished_; }
    std::shared_ptr<const Job> job() const { return job_; }

    // Where imports are cached: $XDG_CACHE_HOME/pipescope/imports (tests may override).
    static QString cacheFolder();
    // The cached store path for a set of inputs: a hash of their paths, sizes and times.
    static QString cachedStorePath(const QStringList& inputs);
    // Loads synchronously on the calling thread (the worker's body; tests and --screenshot).
    static std::shared_ptr<const Job> load(const QStringList& inputs, const OpenOptions& options,
                                           const WorkControl* work = nullptr);
    // The first phase of open(): when the store holds more than
    // options.firstFrameAbove GPU activities, a Job of one window (complete
    // false): the activities starting in firstFrameWindow(), read through the
    // store's (rank, start_ns) index, analysed and built; no what-if
    // calibration. nullptr for smaller stores (load() is fast enough there),
    // and for a sharded job read in part (its pipeline loads sooner).
    static std::shared_ptr<const Job> loadFirstFrame(const QStringList& inputs, const OpenOptions& options,
                                                     const WorkControl* work = nullptr);
    // The window of a first frame, from the store's summary and its (rank,
    // start_ns) index: on the rank with the most GPU activities, the middle 1/20
    // of them by count (fewer when the store holds more than 20 x
    // kFirstFrameActivities: about kFirstFrameActivities in all), as the times
    // from its (n - k) / 2-th activity's start to its (n + k) / 2-th. Taken by
    // count, not time, the window lands where the GPUs work, however long the
    // idle stretches of the capture. nullopt without activities.
    static constexpr int64_t kFirstFrameActivities = 500'000;
    static std::optional<std::pair<TimeNs, TimeNs>> firstFrameWindow(Store& store, const StoreSummary& summary);

Q_SIGNALS:
    void progress(const QString& phase, double fraction); // fraction < 0: unknown
    void loaded(std::shared_ptr<const pipescope::gui::Job> job);      // always a complete job
    void firstFrame(std::shared_ptr<const pipescope::gui::Job> job);  // an incomplete job; loaded follows
    void failed(const QString& message);
    void cancelled();

private:
    void join();

    std::thread worker_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> finished_{true};
    unsigned generation_ = 0;
    std::shared_ptr<const Job> job_;
};

} // namespace pipescope::gui

Q_DECLARE_METATYPE(std::shared_ptr<const pipescope::gui::Job>)
