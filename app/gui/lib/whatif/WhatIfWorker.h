#pragma once
// The what-if engine off the UI thread: one whatif::Session on a thread of
// its own, fed by requests from the editor. A drag sends a request per mouse
// step; while one is being replayed, newer boundary requests replace the
// pending one (the newest drag position wins), so the session never falls
// behind the mouse. Results and errors come back as signals emitted on the
// thread the worker object lives on (the UI thread), in request order.
// A search runs on a second thread so it never holds up a drag.
#include "whatif/Session.h"
#include "whatif/WhatIf.h"

#include <QObject>
#include <QString>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <variant>
#include <vector>

class QThread;

namespace pipescope::gui {

using PredictionPtr = std::shared_ptr<const whatif::Prediction>;
using ScenarioPtr = std::shared_ptr<const whatif::Scenario>;
using CostModelPtr = std::shared_ptr<const whatif::CostModel>;
using SearchRowsPtr = std::shared_ptr<const std::vector<whatif::SearchRow>>;

class WhatIfWorker : public QObject {
    Q_OBJECT
public:
    explicit WhatIfWorker(QObject* parent = nullptr);
    ~WhatIfWorker() override;

    // Each request returns its id (increasing); the answer names it.
    // A new cost model starts a new session (measuredReady, then predictionReady).
    quint64 setCostModel(whatif::CostModel model);
    // Calibrates a cost model on the analysis (layer count or model file as
    // in `options`; modelFile: a model description to load, or empty), then
    // starts a session on it (costModelReady first).
    // replicaPace: CalibrateOptions::replicaPace (a job read in part).
    quint64 calibrate(std::shared_ptr<const Trace> trace, std::shared_ptr<const AnalysisResult> analysis,
                      whatif::FromMeasuredOptions options, QString modelFile = {}, std::vector<double> replicaPace = {});
    quint64 setBoundaries(std::vector<int> boundaries);
    quint64 apply(whatif::ScenarioChanges changes);
    quint64 setScenario(whatif::Scenario scenario);
    // cancelBalance() stops it, pending or running (cancelled(); the scenario stays).
    quint64 autoBalance();
    void cancelBalance();
    quint64 setGpuMemory(std::optional<int64_t> bytes);
    // Auto-balances and replays every combination of the space around the
    // current scenario; cancelSearch() stops it (cancelled()).
    quint64 search(whatif::SearchSpace space = {});
    void cancelSearch();

    // Requests posted but not yet started (a drag keeps this at one at most).
    int pendingRequests() const;

signals:
    void costModelReady(pipescope::gui::CostModelPtr model, quint64 requestId);
    void measuredReady(pipescope::gui::PredictionPtr measured, quint64 requestId);
    // The scenario the session holds after a request (boundaries filled in),
    // emitted just before predictionReady for the same request.
    void scenarioApplied(pipescope::gui::ScenarioPtr scenario, quint64 requestId);
    void predictionReady(pipescope::gui::PredictionPtr prediction, quint64 requestId);
    // message: core's sentence; setting: toString(ValueError::setting()) ("boundaries",
    // "v", ...) or empty when core named none.
    void failed(QString message, QString setting, quint64 requestId);
    // A balance or search stopped by cancelBalance() / cancelSearch(): not an error.
    void cancelled(quint64 requestId);
    // A drag step replaced by a newer one before it ran: it gets no answer.
    void requestDropped(quint64 requestId);
    void searchProgress(QString phase, double fraction);
    void balanceProgress(QString phase, double fraction);
    void searchFinished(pipescope::gui::SearchRowsPtr rows, quint64 requestId);

private:
    struct Request {
        enum Kind { Calibrate, Model, Boundaries, Apply, SetScenario, Balance, GpuMemory } kind = Boundaries;
        quint64 id = 0;
        std::shared_ptr<whatif::CostModel> model;
        std::vector<int> boundaries;
        whatif::ScenarioChanges changes;
        whatif::Scenario scenario;
        std::optional<int64_t> gpuBytes;
        std::shared_ptr<const Trace> trace;
        std::shared_ptr<const AnalysisResult> analysis;
        whatif::FromMeasuredOptions measured;
        QString modelFile;
        std::vector<double> replicaPace;
    };
    quint64 post(Request r);
    void runNext(); // on the session thread
    void report(const Request& r, bool withMeasured);
    void reportError(quint64 id, const QString& message, const QString& setting);
    void reportCancelled(quint64 id);

    QThread* thread_;
    QObject* context_;       // lives on thread_: requests run in its event queue
    QThread* searchThread_;
    QObject* searchContext_;
    std::atomic<quint64> nextId_{1};
    mutable std::mutex mutex_;
    std::deque<Request> queue_;
    std::unique_ptr<whatif::Session> session_; // touched only on thread_
    std::atomic<bool> stopSearch_{false};
    std::atomic<bool> stopBalance_{false};
};

} // namespace pipescope::gui

Q_DECLARE_METATYPE(pipescope::gui::PredictionPtr)
Q_DECLARE_METATYPE(pipescope::gui::ScenarioPtr)
Q_DECLARE_METATYPE(pipescope::gui::SearchRowsPtr)
Q_DECLARE_METATYPE(pipescope::gui::CostModelPtr)
