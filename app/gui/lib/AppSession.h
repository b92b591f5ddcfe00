#pragma once
// The app's session layer: opens what the user gives (a store, Kineto JSON
// files, a folder of rank files, Nsight SQLite exports) on a worker thread,
// analyses it once and hands the views one immutable Job. Inputs other than
// a store are imported into a store in the user's cache folder, reused while
// the inputs are unchanged (same paths, sizes and modification times).
// Progress and Cancel go through core's WorkControl; one load runs at a time,
// and a new open() cancels the one in flight.
#include "analysis/Analysis.h"
#include "model/Trace.h"
#include "timeline/TimelineModel.h"
#include "whatif/CostModel.h"

#include <QObject>
#include <QStringList>

#include <atomic>
#include <memory>
#include <optional>
#include <thread>

namespace pipescope::gui {

struct OpenOptions {
    int layers = 0;            // like `pipescope whatif --layers N` when the trace names no layers
    QString modelFile;         // like `--model FILE`
    std::vector<int> measuredBoundaries; // like `--measured-boundaries`: the measured run's partition
    std::optional<int> iteration;
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
    OpenOptions options;
};

class AppSession : public QObject {
    Q_OBJECT
public:
    explicit AppSession(QObject* parent = nullptr);
    ~AppSession() override;

    // Starts loading; emits progress, then loaded or failed (or cancelled).
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

Q_SIGNALS:
    void progress(const QString& phase, double fraction); // fraction < 0: unknown
    void loaded(std::shared_ptr<const pipescope::gui::Job> job);
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
