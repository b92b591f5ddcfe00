#include "whatif/WhatIfController.h"

#include "util/Error.h"
#include "whatif/StageSpeeds.h"

#include <QUndoCommand>
#include <QUndoStack>

#include <algorithm>
#include <limits>

namespace pipescope::gui {

// One undo step: the state before and after a change. The change already
// happened when the step is pushed, so its first redo does nothing.
class WhatIfController::Command : public QUndoCommand {
public:
    Command(WhatIfController* controller, State before, State after, const QString& text, bool done = true)
        : QUndoCommand(text), controller_(controller), before_(std::move(before)), after_(std::move(after)), first_(done)
    {
    }
    void redo() override
    {
        if (first_) {
            first_ = false;
            return;
        }
        controller_->restore(after_);
    }
    void undo() override { controller_->restore(before_); }

private:
    WhatIfController* controller_;
    State before_, after_;
    bool first_;
};

WhatIfController::WhatIfController(QObject* parent)
    : QObject(parent), worker_(new WhatIfWorker(this)), undo_(new QUndoStack(this))
{
    connect(worker_, &WhatIfWorker::costModelReady, this, &WhatIfController::onCostModel);
    connect(worker_, &WhatIfWorker::measuredReady, this, &WhatIfController::onMeasured);
    connect(worker_, &WhatIfWorker::scenarioApplied, this, &WhatIfController::onScenario);
    connect(worker_, &WhatIfWorker::predictionReady, this, &WhatIfController::onPrediction);
    connect(worker_, &WhatIfWorker::failed, this, &WhatIfController::onFailed);
    connect(worker_, &WhatIfWorker::cancelled, this, &WhatIfController::onCancelled);
    connect(worker_, &WhatIfWorker::requestDropped, this, [this](quint64 id) { pending_.erase(id); });
    connect(worker_, &WhatIfWorker::searchFinished, this, &WhatIfController::onSearch);
    connect(worker_, &WhatIfWorker::searchProgress, this, &WhatIfController::searchProgress);
    connect(worker_, &WhatIfWorker::balanceProgress, this, [this](const QString& phase, double f) {
        if (balancing_)
            emit balanceProgress(phase, f);
    });
}

WhatIfController::~WhatIfController()
{
    // The undo steps call back into the controller; they go before its members do.
    undo_->clear();
}

const QStringList& WhatIfController::errorSettings()
{
    static const QStringList settings = {"boundaries", "schedule", "v",          "microbatches",     "pp",     "gpu",
                                         "extra",      "recompute", "microbatch-order", "stage-speed", "general"};
    return settings;
}

// Everything that belongs to the job shown so far: its predictions, search
// results, saved scenarios, undo history and calibration.
void WhatIfController::forgetJob()
{
    measured_.reset();
    current_.reset();
    scenario_.reset();
    haveCommitted_ = false;
    initial_.reset();
    restoreRequest_ = 0;
    undo_->clear();
    recalibration_.reset();
    requestedRecalibration_.reset();
    balancing_ = searching_ = false; // answers for the previous job are dropped
    searchRows_.reset();
    saved_.clear();
}

void WhatIfController::setJob(std::shared_ptr<const Trace> trace, std::shared_ptr<const AnalysisResult> analysis,
                              whatif::CostModel model)
{
    forgetJob();
    trace_ = std::move(trace);
    analysis_ = std::move(analysis);
    model_ = model;
    baseModel_ = model;
    emit costModelChanged(false);
    modelRequest_ = send(worker_->setCostModel(std::move(model)), Origin::Model, {});
}

void WhatIfController::setUnavailable()
{
    modelRequest_ = std::numeric_limits<quint64>::max(); // answers still on their way belong to the previous job
    forgetJob();
    trace_.reset();
    analysis_.reset();
    model_ = whatif::CostModel{};
    baseModel_ = model_;
    emit costModelChanged(false);
}

void WhatIfController::recalibrate(Recalibration request)
{
    if (!trace_)
        return;
    whatif::FromMeasuredOptions o;
    o.layers = request.layers;
    const QString modelFile = request.modelFile;
    requestedRecalibration_ = std::move(request);
    // The stages' pace across their replicas is the job's, whatever the layers:
    // a job read in part keeps the one its index gave.
    modelRequest_ = send(worker_->calibrate(trace_, analysis_, o, modelFile, baseModel_.replicaPace), Origin::Model, "layers");
}

std::optional<std::vector<double>> WhatIfController::setStageSpeeds(const QString& text)
{
    const QString t = text.trimmed();
    whatif::CostModel m = baseModel_;
    std::vector<double> speeds;
    try {
        if (whatif::speedsFromTrace(t.toStdString()))
            speeds = m.measuredStageSpeeds();
        else
            speeds = whatif::parseStageSpeeds(t.toStdString());
        m.setStageSpeeds(speeds);
        if (scenario_ && !speeds.empty() && static_cast<int>(speeds.size()) != scenario_->pp)
            throw ValueError(Setting::StageSpeed, tr("%1 speeds for a scenario of pp %2; give one per pipeline rank")
                                                .arg(speeds.size())
                                                .arg(scenario_->pp)
                                                .toStdString());
    } catch (const std::exception& e) {
        emit errorChanged("stage-speed", QString::fromUtf8(e.what()));
        return std::nullopt;
    }
    emit errorChanged("stage-speed", QString());
    // A new model: the session starts again on it, then the scenario shown comes back.
    const std::optional<whatif::Scenario> keep = scenario_ ? std::optional<whatif::Scenario>(*scenario_) : std::nullopt;
    model_ = m;
    emit costModelChanged(false);
    modelRequest_ = send(worker_->setCostModel(std::move(m)), Origin::Speeds, "stage-speed");
    if (keep)
        send(worker_->setScenario(*keep), Origin::Restore, "stage-speed");
    return speeds;
}

quint64 WhatIfController::send(quint64 id, Origin origin, const QString& setting, const QString& undoText)
{
    pending_[id] = Pending{origin, setting, undoText};
    return id;
}

WhatIfController::Pending WhatIfController::takePending(quint64 id)
{
    const auto it = pending_.find(id);
    if (it == pending_.end())
        return Pending{Origin::Restore, {}, {}};
    Pending p = std::move(it->second);
    pending_.erase(it);
    return p;
}

void WhatIfController::dragBoundaries(std::vector<int> boundaries)
{
    send(worker_->setBoundaries(std::move(boundaries)), Origin::DragStep, "boundaries");
}

void WhatIfController::commitBoundaries(std::vector<int> boundaries)
{
    send(worker_->setBoundaries(std::move(boundaries)), Origin::DragCommit, "boundaries", tr("Move stage boundary"));
}

void WhatIfController::applyChange(whatif::ScenarioChanges changes, const QString& setting, const QString& undoText)
{
    send(worker_->apply(std::move(changes)), Origin::Control, setting, undoText);
}

void WhatIfController::setGpuMemory(std::optional<int64_t> bytes)
{
    send(worker_->setGpuMemory(bytes), Origin::Control, "gpu", tr("GPU memory"));
}

void WhatIfController::autoBalance()
{
    balanceRequest_ = send(worker_->autoBalance(), Origin::Control, "boundaries", tr("Auto-balance"));
    balancing_ = true;
    emit busyChanged(Work::Balance, WorkState::Running);
}

void WhatIfController::search(whatif::SearchSpace space)
{
    searchRequest_ = worker_->search(std::move(space));
    searching_ = true;
    emit busyChanged(Work::Search, WorkState::Running);
}

void WhatIfController::cancelWork()
{
    if (searching_)
        worker_->cancelSearch();
    if (balancing_)
        worker_->cancelBalance();
}

void WhatIfController::applySearchRow(int row)
{
    if (!searchRows_ || row < 0 || row >= static_cast<int>(searchRows_->size()))
        return;
    const whatif::SearchRow& r = (*searchRows_)[size_t(row)];
    whatif::ScenarioChanges c;
    c.schedule = std::string(toString(r.scenario.schedule));
    c.pp = r.scenario.pp;
    c.v = r.scenario.v;
    c.microbatches = r.scenario.microbatches;
    c.boundaries = r.boundaries;
    c.recompute = r.scenario.recompute;
    applyChange(c, "schedule", tr("Search row %1").arg(row + 1));
}

void WhatIfController::saveScenario(const QString& name)
{
    if (!current_ || !scenario_)
        return;
    Saved s{name, State{*scenario_, current_->gpuMemoryBytes}, current_};
    s.state.scenario.label = name.toStdString();
    const auto it = std::find_if(saved_.begin(), saved_.end(), [&](const Saved& x) { return x.name == name; });
    if (it != saved_.end())
        *it = s;
    else
        saved_.push_back(s);
    emit scenariosChanged();
}

void WhatIfController::applyScenario(const QString& name)
{
    const auto it = std::find_if(saved_.begin(), saved_.end(), [&](const Saved& x) { return x.name == name; });
    if (it == saved_.end() || !haveCommitted_)
        return;
    // Nothing has happened yet: this step's first redo does the work.
    const State before = committed_, after = it->state;
    undo_->push(new Command(this, before, after, tr("Scenario %1").arg(name), false));
}

QStringList WhatIfController::scenarioNames() const
{
    QStringList names;
    for (const Saved& s : saved_)
        names << s.name;
    return names;
}

PredictionPtr WhatIfController::savedPrediction(const QString& name) const
{
    for (const Saved& s : saved_)
        if (s.name == name)
            return s.prediction;
    return nullptr;
}

void WhatIfController::restoreKept(const whatif::Scenario& scenario, std::optional<int64_t> gpuBytes,
                                   const std::vector<double>& speeds)
{
    if (!speeds.empty()) {
        // As setStageSpeeds: a session on the model at those speeds (its
        // first answer replaces the job's, which is dropped).
        model_ = baseModel_;
        model_.setStageSpeeds(speeds);
        emit costModelChanged(false);
        modelRequest_ = send(worker_->setCostModel(model_), Origin::Speeds, "stage-speed");
    }
    if (gpuBytes != model_.memory.gpuMemoryBytes)
        send(worker_->setGpuMemory(gpuBytes), Origin::Restore, "gpu");
    restoreRequest_ = send(worker_->setScenario(scenario), Origin::Restore, {});
}

void WhatIfController::restore(const State& state)
{
    if (current_ && current_->gpuMemoryBytes != state.gpuBytes)
        send(worker_->setGpuMemory(state.gpuBytes), Origin::Restore, "gpu");
    send(worker_->setScenario(state.scenario), Origin::Restore, {});
}

void WhatIfController::onCostModel(CostModelPtr model, quint64 id)
{
    if (id < modelRequest_)
        return;
    const auto asked = pending_.find(id);
    if (asked != pending_.end() && asked->second.origin == Origin::Speeds) {
        // The same layers at other speeds: the undo steps and the speeds typed stay.
        model_ = *model;
        emit costModelChanged(false);
        return;
    }
    model_ = *model;
    baseModel_ = *model;
    if (id == modelRequest_)
        recalibration_ = requestedRecalibration_;
    undo_->clear(); // the steps name layers of the model that was replaced
    emit costModelChanged(true);
}

void WhatIfController::onMeasured(PredictionPtr measured, quint64 id)
{
    if (id >= modelRequest_)
        measured_ = std::move(measured);
}

void WhatIfController::onScenario(ScenarioPtr scenario, quint64 id)
{
    if (id >= modelRequest_)
        scenario_ = std::move(scenario); // its prediction follows at once
}

// What an answer does to the undo history: a new model starts it again, a
// drag step waits for the release, a change becomes one step, and a state
// brought back (undo, redo, a saved scenario) only becomes the committed one.
void WhatIfController::recordUndoStep(Origin origin, const QString& undoText, const whatif::Prediction& prediction)
{
    if (origin == Origin::DragStep)
        return; // the release makes the undo step
    const State now{*scenario_, prediction.gpuMemoryBytes};
    switch (origin) {
    case Origin::Model:
        committed_ = now;
        haveCommitted_ = true;
        initial_ = now;
        undo_->clear();
        break;
    case Origin::DragCommit:
    case Origin::Control:
        if (haveCommitted_)
            undo_->push(new Command(this, committed_, now, undoText));
        committed_ = now;
        break;
    case Origin::Speeds:
        committed_ = now; // the scenario shown comes back next (Restore), the history stays
        haveCommitted_ = true;
        if (!initial_)
            initial_ = now; // a kept scenario's speeds came first: the job's own scenario at them
        break;
    case Origin::Restore:
        committed_ = now;
        break;
    case Origin::DragStep:
        break;
    }
}

void WhatIfController::onPrediction(PredictionPtr prediction, quint64 id)
{
    if (balancing_ && id == balanceRequest_) {
        balancing_ = false;
        emit busyChanged(Work::Balance, WorkState::Answered);
    }
    if (id < modelRequest_ || !scenario_)
        return;
    if (id == restoreRequest_)
        restoreRequest_ = 0;
    const Pending asked = takePending(id);
    recordUndoStep(asked.origin, asked.undoText, *prediction);
    current_ = std::move(prediction);
    emit predictionChanged(current_, asked.origin);
}

void WhatIfController::onCancelled(quint64 id)
{
    pending_.erase(id);
    if (balancing_ && id == balanceRequest_) {
        balancing_ = false;
        emit busyChanged(Work::Balance, WorkState::Cancelled);
    }
    if (id == searchRequest_ && searching_) {
        searching_ = false;
        emit busyChanged(Work::Search, WorkState::Cancelled);
    }
}

// Where an error goes: the setting core named when the editor has a line for
// it, else the control that asked; a layer count or weights concern the boundaries.
QString WhatIfController::errorSetting(const QString& named, quint64 id)
{
    QString where = named;
    const auto it = pending_.find(id);
    if (it != pending_.end()) {
        if (where.isEmpty() || !errorSettings().contains(where))
            where = it->second.setting; // core named no setting: the control that asked
        pending_.erase(it);
    }
    if (where == "weights" || where == "layers")
        where = "boundaries";
    return errorSettings().contains(where) ? where : QString("general");
}

void WhatIfController::onFailed(const QString& message, const QString& setting, quint64 id)
{
    if (balancing_ && id == balanceRequest_) {
        balancing_ = false;
        emit busyChanged(Work::Balance, WorkState::Failed);
    }
    if (id < modelRequest_ && id != searchRequest_)
        return;
    if (id == restoreRequest_)
        restoreRequest_ = 0;
    const QString where = errorSetting(setting, id);
    if (id == searchRequest_) {
        searching_ = false;
        emit busyChanged(Work::Search, WorkState::Failed);
    }
    emit errorChanged(where, message);
}

void WhatIfController::onSearch(SearchRowsPtr rows, quint64 id)
{
    if (id != searchRequest_)
        return;
    searching_ = false;
    searchRows_ = std::move(rows);
    emit busyChanged(Work::Search, WorkState::Answered);
    emit searchFinished(searchRows_);
}

} // namespace pipescope::gui
