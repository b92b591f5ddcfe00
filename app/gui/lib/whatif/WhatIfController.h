#pragma once
// The what-if editor's state, without a widget: the WhatIfWorker and which of
// its answers belongs to which request and job (answers for a job that was
// replaced, or for a drag step a newer one replaced, are dropped), the undo
// stack (every change is one step, a whole drag is one), the committed state,
// the saved scenarios and the search rows. WhatIfEditor shows what it emits
// and forwards the user's actions to it; a test drives it without widgets.
//
// A prediction is made once by the worker and then only shared
// (PredictionPtr): the controller, the editor's figures and the main
// window's pipeline view all keep the same immutable object.
#include "whatif/WhatIfWorker.h"

#include "analysis/Analysis.h"
#include "model/Trace.h"
#include "whatif/WhatIf.h"

#include <QObject>
#include <QString>
#include <QStringList>

#include <map>
#include <memory>
#include <optional>
#include <vector>

class QUndoStack;

namespace pipescope::gui {

class WhatIfController : public QObject {
    Q_OBJECT
public:
    // Who asked for a prediction, which decides what its answer does to the undo history.
    enum class Origin {
        Model,      // a new cost model (a job, a re-calibration): the history starts again
        Speeds,     // GPU speeds declared on the same layers: the history stays, its steps still apply
        DragStep,   // one mouse step of a drag: no undo step, the release makes it
        DragCommit, // the release of a drag (or a keyboard move of a boundary)
        Control,    // a control, the command line's changes, a search row, auto-balance
        Restore,    // undo, redo, a saved scenario: the state comes back as it was
    };
    Q_ENUM(Origin)
    // The work that keeps the Search and Auto-balance buttons busy, and where it stands.
    enum class Work { Search, Balance };
    Q_ENUM(Work)
    enum class WorkState {
        Running,
        Answered, // a balance's answer is also a prediction, a search's its rows
        Failed,   // errorChanged says why
        Cancelled,
    };
    Q_ENUM(WorkState)

    // What one undo step goes back or forward to.
    struct State {
        whatif::Scenario scenario;
        std::optional<int64_t> gpuBytes;
    };
    // A calibration the user asked for in the strip: a layer count or a model file.
    struct Recalibration {
        std::optional<int> layers;
        QString modelFile;
    };

    explicit WhatIfController(QObject* parent = nullptr);
    ~WhatIfController() override;

    // A job and the cost model calibrated on it (trace and analysis may be
    // null: a model file alone). Forgets everything about the previous job.
    void setJob(std::shared_ptr<const Trace> trace, std::shared_ptr<const AnalysisResult> analysis, whatif::CostModel model);
    // No what-if for this job: forgets the previous one, and answers still on their way are dropped.
    void setUnavailable();
    // Calibrates again on the job's trace with a layer count or a model file
    // (nothing without a trace); recalibration() says which once it answered.
    void recalibrate(Recalibration request);
    // Declares the GPUs' speeds on the job's model ("1,1,0.8,1", "trace", or
    // empty for none; as `pipescope whatif --stage-speed`) and starts again
    // on that model with the scenario shown. Returns the speeds declared, or
    // nothing when they are refused (errorChanged("stage-speed", why)).
    std::optional<std::vector<double>> setStageSpeeds(const QString& text);

    // The scenario changes, each one undo step once it is answered.
    void dragBoundaries(std::vector<int> boundaries); // a drag step: not a step of its own
    void commitBoundaries(std::vector<int> boundaries);
    // setting: the control that asked, where an error goes when core names none.
    void applyChange(whatif::ScenarioChanges changes, const QString& setting, const QString& undoText);
    void setGpuMemory(std::optional<int64_t> bytes);
    void autoBalance();
    void search(whatif::SearchSpace space);
    void cancelWork(); // stops a running search and auto-balance
    void applySearchRow(int row);
    // Keeps the current scenario and its prediction under `name` (replacing one of that name).
    void saveScenario(const QString& name);
    void applyScenario(const QString& name);
    // A scenario kept beside the job (KeptScenario, already checked against
    // jobCostModel()) brought back on the job just set: the speeds declared,
    // the GPU memory and the scenario, as the state the history starts from.
    void restoreKept(const whatif::Scenario& scenario, std::optional<int64_t> gpuBytes, const std::vector<double>& speeds);
    // Whether that restore is still on its way.
    bool restoring() const { return restoreRequest_ != 0; }

    WhatIfWorker* worker() const { return worker_; }
    QUndoStack* undoStack() const { return undo_; }
    std::shared_ptr<const Trace> trace() const { return trace_; }
    std::shared_ptr<const AnalysisResult> analysis() const { return analysis_; }
    const whatif::CostModel& costModel() const { return model_; }
    const whatif::CostModel& jobCostModel() const { return baseModel_; } // before any GPU speeds
    // The state the last change committed (no drag step), and the one the
    // job's what-if started from; nullopt before the first answer.
    std::optional<State> committedState() const { return haveCommitted_ ? std::optional<State>(committed_) : std::nullopt; }
    std::optional<State> initialState() const { return initial_; }
    // The shown prediction, the measured run's, and the scenario of the shown one (boundaries filled in); null before the first answer.
    PredictionPtr current() const { return current_; }
    PredictionPtr measured() const { return measured_; }
    ScenarioPtr scenario() const { return scenario_; }
    std::optional<Recalibration> recalibration() const { return recalibration_; }
    bool searching() const { return searching_; }
    bool balancing() const { return balancing_; }
    SearchRowsPtr searchRows() const { return searchRows_; }
    QStringList scenarioNames() const;
    // The prediction kept under a saved scenario's name; null for none.
    PredictionPtr savedPrediction(const QString& name) const;

    // The settings an error is shown beside (the editor has a line for
    // each): "boundaries", "schedule", "v", ..., "general" for the rest.
    static const QStringList& errorSettings();

signals:
    // The prediction shown now: from a drag step (Origin::DragStep) or any other change.
    void predictionChanged(pipescope::gui::PredictionPtr prediction, pipescope::gui::WhatIfController::Origin origin);
    // costModel() changed; sessionStarted: a session on it answered (a
    // re-calibration, a job's model), so speeds typed for the model it
    // replaced no longer apply.
    void costModelChanged(bool sessionStarted);
    // An error to show beside `setting` (one of errorSettings()); an empty message clears that line.
    void errorChanged(const QString& setting, const QString& message);
    void busyChanged(pipescope::gui::WhatIfController::Work work, pipescope::gui::WhatIfController::WorkState state);
    void searchProgress(const QString& phase, double fraction);
    void balanceProgress(const QString& phase, double fraction); // only while a balance runs
    void searchFinished(pipescope::gui::SearchRowsPtr rows);
    void scenariosChanged();

private:
    struct Pending {
        Origin origin = Origin::Control;
        QString setting; // the control that asked, for errors that name none
        QString undoText;
    };
    struct Saved {
        QString name;
        State state;
        PredictionPtr prediction;
    };
    class Command;

    quint64 send(quint64 id, Origin origin, const QString& setting, const QString& undoText = {});
    Pending takePending(quint64 id); // Restore when none is waiting (a dropped request's neighbour)
    void forgetJob();
    void restore(const State& state);
    void recordUndoStep(Origin origin, const QString& undoText, const whatif::Prediction& prediction);
    QString errorSetting(const QString& named, quint64 id);

    void onCostModel(CostModelPtr model, quint64 id);
    void onMeasured(PredictionPtr measured, quint64 id);
    void onScenario(ScenarioPtr scenario, quint64 id);
    void onPrediction(PredictionPtr prediction, quint64 id);
    void onFailed(const QString& message, const QString& setting, quint64 id);
    void onCancelled(quint64 id);
    void onSearch(SearchRowsPtr rows, quint64 id);

    WhatIfWorker* worker_;
    QUndoStack* undo_;
    std::shared_ptr<const Trace> trace_;
    std::shared_ptr<const AnalysisResult> analysis_;
    whatif::CostModel model_;
    whatif::CostModel baseModel_; // the job's model before any GPU speeds
    PredictionPtr measured_, current_;
    ScenarioPtr scenario_;
    State committed_;
    bool haveCommitted_ = false;
    std::optional<State> initial_;
    quint64 restoreRequest_ = 0; // restoreKept's scenario, until it is answered
    std::map<quint64, Pending> pending_;
    quint64 modelRequest_ = 0; // answers to older requests belong to a previous job
    quint64 searchRequest_ = 0;
    quint64 balanceRequest_ = 0;
    bool searching_ = false, balancing_ = false;
    std::optional<Recalibration> recalibration_, requestedRecalibration_;
    SearchRowsPtr searchRows_;
    std::vector<Saved> saved_;
};

} // namespace pipescope::gui
