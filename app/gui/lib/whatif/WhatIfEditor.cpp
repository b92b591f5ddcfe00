#include "whatif/WhatIfEditor.h"
#include "whatif/WhatIfCharts.h"
#include "whatif/ExtraWork.h"
#include "whatif/Microbatches.h"
#include "views/QtPalette.h"

#include "views/PaletteLegend.h"

#include "whatif/LayerStrip.h"
#include "whatif/ParetoChart.h"
#include "timeline/Palette.h"
#include "util/Format.h"
#include "whatif/PartitionExport.h"
#include "whatif/StageSpeeds.h"
#include "whatif/WhatIfJson.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QLocale>
#include <QMenu>
#include <QPainter>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSaveFile>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QToolButton>
#include <QUndoStack>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace pipescope::gui {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QString speedupWords(std::optional<double> s)
{
    if (!s || *s <= 0)
        return QObject::tr("no measured iteration to compare");
    if (std::abs(*s - 1.0) < 0.005)
        return QObject::tr("as fast as measured");
    return *s > 1 ? QObject::tr("%1x faster").arg(*s, 0, 'f', 2) : QObject::tr("%1x slower").arg(1.0 / *s, 0, 'f', 2);
}

QString boundariesText(const std::vector<int>& b)
{
    QStringList parts;
    for (int x : b)
        parts << QString::number(x);
    return parts.join(',');
}

// How the replay exchanged (docs/whatif.md, "Exchanges"), for the iteration's tooltip.
QString exchangesTip(const whatif::Prediction& p)
{
    if (p.replay.blockingExchanges && p.costs.megatronExchanges)
        return QObject::tr("Replayed with Megatron-LM's exchanges as it issues them (interleaved 1F1B: overlapped in the steady "
                           "state, blocking in warm-up and cool-down; 1F1B: blocking batches), %1; %2 per transfer alone")
            .arg(p.costs.sharedLinks ? QObject::tr("every transfer in flight sharing one medium")
                                     : QObject::tr("each direction between two ranks a link of its own"),
                 qs(formatDuration(p.costs.p2pLatencyNs)));
    return p.replay.blockingExchanges
               ? QObject::tr("Replayed with blocking exchanges, as Megatron-LM runs them: a step waits for its "
                             "rank's batch of sends and receives and starts %1 after it")
                     .arg(qs(formatDuration(p.costs.exchangeGapNs)))
               : QObject::tr("Replayed with sends that overlap the next step");
}

// The search's rows as the table's cells, one string per column.
QStringList searchCells(const whatif::SearchRow& r, int i)
{
    return {QString::number(i + 1),
            qs(std::string(toString(r.scenario.schedule))),
            QString::number(r.scenario.v),
            QString::number(r.scenario.microbatches),
            qs(formatDuration(r.iterationNs)),
            speedupWords(r.speedup),
            qs(formatPercent(r.bubbleFraction)),
            qs(formatBytes(r.peakBytes)) + (r.outOfMemory ? QObject::tr(" (out of memory)") : QString()) +
                (r.pareto ? QObject::tr(" (front)") : QString()),
            (r.recomputeChosen ? QObject::tr("per stage: ") : QString()) + qs(whatif::recomputeText(r.scenario.recompute)),
            boundariesText(r.boundaries)};
}

} // namespace

WhatIfEditor::WhatIfEditor(QWidget* parent) : QWidget(parent), controller_(new WhatIfController(this))
{
    buildUi();
    wireController();
}

WhatIfEditor::~WhatIfEditor()
{
    // The controller's undo steps and worker go while the editor's widgets are still here.
    delete controller_;
}

void WhatIfEditor::wireStrip()
{
    connect(strip_, &LayerStrip::boundariesDragged, this,
            [this](std::vector<int> b) { controller_->dragBoundaries(std::move(b)); });
    connect(strip_, &LayerStrip::boundariesCommitted, this,
            [this](std::vector<int> b) { controller_->commitBoundaries(std::move(b)); });
    connect(strip_, &LayerStrip::layersRequested, this, [this](int layers) {
        if (recalibrates_)
            controller_->recalibrate(WhatIfController::Recalibration{layers, {}});
    });
    connect(strip_, &LayerStrip::modelFileRequested, this, [this](const QString& path) {
        if (recalibrates_)
            controller_->recalibrate(WhatIfController::Recalibration{std::nullopt, path});
    });
}

// Each scenario control asks for its change, one undo step each.
void WhatIfEditor::wireControls()
{
    connect(schedule_, &QComboBox::activated, this, [this](int index) {
        const QString name = schedule_->itemData(index).toString();
        if (name == "csv") {
            syncControls(); // the combo shows the schedule in force until a file is chosen
            const QString path = QFileDialog::getOpenFileName(this, tr("Schedule CSV"), {}, tr("CSV (*.csv);;All files (*)"));
            if (!path.isEmpty())
                loadScheduleCsv(path);
            return;
        }
        whatif::ScenarioChanges c;
        c.schedule = name.toStdString();
        applyChange(c, "schedule", tr("Schedule %1").arg(name));
    });
    connect(v_, &QSpinBox::valueChanged, this, [this](int v) {
        whatif::ScenarioChanges c;
        c.v = v;
        applyChange(c, "v", tr("v %1").arg(v));
    });
    connect(m_, &QSpinBox::valueChanged, this, [this](int m) {
        whatif::ScenarioChanges c;
        c.microbatches = m;
        applyChange(c, "microbatches", tr("%1 microbatches").arg(m));
    });
    connect(pp_, &QSpinBox::valueChanged, this, [this](int pp) {
        whatif::ScenarioChanges c;
        c.pp = pp;
        applyChange(c, "pp", tr("pp %1").arg(pp));
    });
    connect(gpu_, &QDoubleSpinBox::valueChanged, this, [this](double gib) {
        std::optional<int64_t> bytes;
        if (gib > 0)
            bytes = static_cast<int64_t>(std::llround(gib * kGiB));
        controller_->setGpuMemory(bytes);
    });
    connect(speeds_, &QLineEdit::editingFinished, this, [this] {
        if (speeds_->isModified()) {
            speeds_->setModified(false);
            setStageSpeeds(speeds_->text());
        }
    });
    connect(microbatchOrder_, &QComboBox::activated, this, [this](int index) {
        const QString name = microbatchOrder_->itemData(index).toString();
        const auto o = whatif::microbatchOrderFromString(name.toStdString());
        if (!o)
            return;
        whatif::ScenarioChanges c;
        c.microbatchOrder = *o;
        applyChange(c, "microbatch-order", tr("Microbatch order %1").arg(name));
    });
    connect(recompute_, &QComboBox::activated, this, [this](int index) {
        const QString name = recompute_->itemData(index).toString();
        const auto r = whatif::recomputeFromString(name.toStdString());
        if (!r)
            return; // "per stage" only shows a mixed setting
        whatif::ScenarioChanges c;
        c.recompute = std::vector<whatif::Recompute>{*r};
        applyChange(c, "recompute", tr("Recompute %1").arg(name));
    });
}

// What the controller says: predictions, the cost model, errors, the work in flight, search rows, saved scenarios.
void WhatIfEditor::wireController()
{
    connect(controller_, &WhatIfController::predictionChanged, this, &WhatIfEditor::showPrediction);
    connect(controller_, &WhatIfController::costModelChanged, this, [this](bool sessionStarted) {
        if (sessionStarted)
            speeds_->clear(); // speeds were declared on the model that was replaced
        strip_->setCostModel(costModel());
    });
    connect(controller_, &WhatIfController::errorChanged, this, &WhatIfEditor::showError);
    connect(controller_, &WhatIfController::busyChanged, this, &WhatIfEditor::showBusy);
    connect(controller_, &WhatIfController::searchProgress, this, [this](const QString& phase, double f) {
        status_->setText(f >= 0 ? tr("searching: %1 (%2%)").arg(phase).arg(int(f * 100)) : tr("searching: %1").arg(phase));
    });
    connect(controller_, &WhatIfController::balanceProgress, this, [this](const QString& phase, double f) {
        status_->setText(f >= 0 ? tr("auto-balance: %1 (%2%)").arg(phase).arg(int(f * 100)) : tr("auto-balance: %1").arg(phase));
    });
    connect(controller_, &WhatIfController::searchFinished, this, &WhatIfEditor::showSearchRows);
    connect(controller_, &WhatIfController::scenariosChanged, this, &WhatIfEditor::refreshScenarioList);
}

// Every widget that showed the job so far: search results, saved scenarios
// and comparisons, figures and messages (the controller forgot the state).
void WhatIfEditor::forgetJob()
{
    clearErrors();
    refreshBusy();
    forgetControls();
    strip_->forgetPartition();
    searchTable_->setRowCount(0);
    pareto_->setRows(nullptr, std::nullopt);
    refreshScenarioList();
    compare_->setRowCount(0);
    export_->clear();
    speeds_->clear();
    {
        const QSignalBlocker block(extraWork_);
        extraWork_->setValue(0);
    }
    extraResult_->clear();
    extraResult_->hide();
    microbatchResult_->clear();
    status_->clear();
    iteration_->clear();
    speedup_->clear();
    static_cast<BubbleBar*>(bubbleBar_)->setPrediction(nullptr);
    pipeline_->setPrediction(nullptr);
    for (QCustomPlot* plot : {busyPlot_, memoryPlot_, memoryTimePlot_}) {
        plot->clearPlottables();
        plot->clearItems();
        plot->replot(QCustomPlot::rpQueuedReplot);
    }
}

// The scenario controls show nothing until this job's first prediction
// (syncControls), and take no input meanwhile: no value of the last job stays.
void WhatIfEditor::forgetControls()
{
    const QSignalBlocker b1(schedule_), b2(v_), b3(m_), b4(pp_), b5(gpu_), b6(recompute_), b7(microbatchOrder_);
    // The entries added for the last job's CSV schedule or mixed recomputation go too.
    if (const int custom = schedule_->findData(QString("custom")); custom >= 0)
        schedule_->removeItem(custom);
    if (const int mixed = recompute_->findData(QString("per-stage")); mixed >= 0)
        recompute_->removeItem(mixed);
    for (QComboBox* box : {schedule_, recompute_, microbatchOrder_})
        box->setCurrentIndex(-1);
    for (QAbstractSpinBox* box : std::initializer_list<QAbstractSpinBox*>{v_, m_, pp_, gpu_})
        box->clear();
    setControlsEnabled(false);
}

void WhatIfEditor::setControlsEnabled(bool on)
{
    for (QWidget* w : std::initializer_list<QWidget*>{schedule_, v_, m_, pp_, gpu_, recompute_, speeds_})
        w->setEnabled(on);
    microbatchOrder_->setEnabled(on && costModel().microbatchSizes.has_value());
}

void WhatIfEditor::setJob(std::shared_ptr<const Trace> trace, std::shared_ptr<const AnalysisResult> analysis,
                          whatif::CostModel model)
{
    controller_->setJob(std::move(trace), std::move(analysis), std::move(model));
    forgetJob();
    extraWork_->setEnabled(true); // Search and Auto-balance: refreshBusy
    pipeline_->setMeasured(controller_->analysis());
    strip_->setEditable(false); // until the session answers
}

void WhatIfEditor::setUnavailable(const QString& reason)
{
    controller_->setUnavailable();
    forgetJob();
    strip_->setBoundaries({});
    strip_->setEditable(false);
    // Nothing to balance, search or add work to until a job has a what-if.
    for (QWidget* w : std::initializer_list<QWidget*>{balance_, search_, extraWork_})
        w->setEnabled(false);
    pipeline_->setMeasured(nullptr);
    iteration_->setText(tr("No what-if for this job"));
    showError("general", reason);
    emit predictionChanged();
}

void WhatIfEditor::applyChange(whatif::ScenarioChanges changes, const QString& setting, const QString& undoText)
{
    controller_->applyChange(std::move(changes), setting, undoText);
}

// A prediction from the controller. A drag step moves only the strip, the
// headline figures and the diagram; anything else also clears the errors,
// syncs the controls and redraws the charts and the text below them.
void WhatIfEditor::showPrediction(const PredictionPtr& prediction, Origin origin)
{
    const bool dragStep = origin == Origin::DragStep;
    if (!dragStep)
        clearErrors();
    status_->clear();
    strip_->setEditable(costModel().layerSource != whatif::LayerSource::Stages);
    strip_->setStageRanks(prediction->schedule.rankOfStage);
    strip_->setBoundaries(prediction->partition.boundaries());
    if (!dragStep)
        syncControls();
    showHeadline(prediction);
    if (!dragStep) {
        refreshCharts(*prediction);
        export_->setPlainText(exportText());
        refreshExtraWork();
        refreshMicrobatches();
    }
    emit predictionChanged();
}

// Search and Auto-balance as the work in flight allows, and the status line saying where it stands.
void WhatIfEditor::showBusy(WhatIfController::Work work, WhatIfController::WorkState state)
{
    using Work = WhatIfController::Work;
    using WorkState = WhatIfController::WorkState;
    refreshBusy();
    switch (state) {
    case WorkState::Running:
        status_->setText(work == Work::Search ? tr("searching...") : tr("auto-balance..."));
        break;
    case WorkState::Answered:
        if (work == Work::Search)
            status_->clear(); // a balance's answer is a prediction, which clears the line as it is shown
        break;
    case WorkState::Failed:
        status_->clear();
        break;
    case WorkState::Cancelled:
        if (work == Work::Balance)
            status_->setText(tr("auto-balance cancelled"));
        else
            status_->clear();
        break;
    }
}

void WhatIfEditor::showError(const QString& setting, const QString& message)
{
    QLabel* l = errors_.count(setting) ? errors_[setting] : errors_["general"];
    l->setText(message);
    l->setVisible(!message.isEmpty());
    if (!message.isEmpty())
        Q_EMIT errorShown(setting, message);
}

QString WhatIfEditor::firstError() const
{
    for (const auto& [name, label] : errors_)
        if (label->isVisibleTo(const_cast<WhatIfEditor*>(this)) && !label->text().isEmpty())
            return label->text();
    return {};
}

void WhatIfEditor::applyChanges(const whatif::ScenarioChanges& changes)
{
    applyChange(changes, QStringLiteral("general"), QStringLiteral("Apply changes"));
}

void WhatIfEditor::clearErrors()
{
    for (auto& [name, label] : errors_) {
        label->clear();
        label->hide();
    }
}

QString WhatIfEditor::errorText(const QString& setting) const
{
    const auto it = errors_.find(setting);
    return it != errors_.end() && it->second->isVisibleTo(const_cast<WhatIfEditor*>(this)) ? it->second->text() : QString();
}

QString WhatIfEditor::predictedIterationText() const { return iteration_->text(); }
QString WhatIfEditor::speedupText() const { return speedup_->text(); }

std::optional<whatif::Prediction> WhatIfEditor::currentPrediction() const
{
    const PredictionPtr current = controller_->current();
    return current ? std::optional<whatif::Prediction>(*current) : std::nullopt;
}

std::optional<whatif::Prediction> WhatIfEditor::measuredPrediction() const
{
    const PredictionPtr measured = controller_->measured();
    return measured ? std::optional<whatif::Prediction>(*measured) : std::nullopt;
}

void WhatIfEditor::syncControls()
{
    const ScenarioPtr scenario = controller_->scenario();
    if (!scenario)
        return;
    const PredictionPtr current = controller_->current();
    const QSignalBlocker b1(schedule_), b2(v_), b3(m_), b4(pp_), b5(gpu_), b6(recompute_), b7(microbatchOrder_);
    setControlsEnabled(true);
    microbatchOrder_->setCurrentIndex(
        std::max(0, microbatchOrder_->findData(qs(std::string(toString(scenario->microbatchOrder))))));
    {
        const std::vector<whatif::Recompute> rc =
            current ? current->recompute : whatif::recomputePerStage(scenario->recompute, 1);
        const QString text = qs(whatif::recomputeText(rc));
        int at = recompute_->findData(text);
        if (at < 0) {
            // Stages differ (auto-balance's choice, a search row): shown, not offered.
            at = recompute_->findData(QString("per-stage"));
            if (at < 0) {
                recompute_->addItem(tr("per stage"), QString("per-stage"));
                at = recompute_->count() - 1;
            }
            recompute_->setItemText(at, tr("per stage: %1").arg(text));
        }
        recompute_->setCurrentIndex(at);
    }
    const QString name = qs(std::string(toString(scenario->schedule)));
    int index = schedule_->findData(name);
    if (index < 0) {
        // A loaded CSV: shown by name until another schedule is chosen.
        index = schedule_->findData(QString("custom"));
        if (index < 0) {
            schedule_->insertItem(schedule_->count() - 1, tr("custom (CSV)"), QString("custom"));
            index = schedule_->findData(QString("custom"));
        }
    }
    schedule_->setCurrentIndex(index);
    v_->setValue(scenario->v);
    m_->setValue(scenario->microbatches);
    pp_->setValue(scenario->pp);
    const auto gpu = current ? current->gpuMemoryBytes : costModel().memory.gpuMemoryBytes;
    gpu_->setValue(gpu ? double(*gpu) / kGiB : 0.0);
}

// The figures a drag step moves: iteration, speed-up, bubble bar and the diagram.
void WhatIfEditor::showHeadline(const PredictionPtr& prediction)
{
    const whatif::Prediction& p = *prediction;
    iteration_->setText(tr("Predicted iteration %1").arg(qs(formatDuration(p.iterationNs()))));
    iteration_->setToolTip(exchangesTip(p));
    if (auto err = p.calibrationError()) {
        // The measured configuration replayed: its difference is the model's error, not a speed-up.
        speedup_->setText(tr("calibration %1 (measured %2)")
                              .arg(qs(formatSignedPercent(*err)), qs(formatDuration(*p.measuredIterationNs))));
        speedup_->setToolTip(tr("The measured configuration replayed: %1 against %2 measured. The difference is the "
                                "model's calibration error, not a speed-up; other scenarios' speed-ups are against the "
                                "measured run.")
                                 .arg(qs(formatDuration(p.iterationNs())), qs(formatDuration(*p.measuredIterationNs))));
    } else {
        speedup_->setText(speedupWords(p.speedup()) +
                          (p.measuredIterationNs ? tr(" (measured %1)").arg(qs(formatDuration(*p.measuredIterationNs))) : QString()));
        speedup_->setToolTip(tr("Measured iteration / predicted iteration"));
    }
    static_cast<BubbleBar*>(bubbleBar_)->setPrediction(prediction);
    pipeline_->setPrediction(prediction);
}

// The charts a drag waits for: busy and idle, peak memory, memory over time.
void WhatIfEditor::refreshCharts(const whatif::Prediction& p)
{
    const RankAxis axis = rankAxis(p);
    const bool known = memoryKnown(p);
    plotBusy(busyPlot_, p, axis);
    plotPeakMemory(memoryPlot_, p, axis, known);
    plotMemoryOverTime(memoryTimePlot_, p, axis.ranks, known);
}

void WhatIfEditor::setStageSpeeds(const QString& text)
{
    const std::optional<std::vector<double>> speeds = controller_->setStageSpeeds(text);
    if (!speeds || !whatif::speedsFromTrace(text.trimmed().toStdString()))
        return;
    // Read from the trace: the field shows the speeds read.
    QStringList shown;
    for (double x : *speeds)
        shown << QString::number(x, 'g', 3);
    speeds_->setText(shown.join(QLatin1Char(',')));
}

std::optional<KeptScenario> WhatIfEditor::keptScenario() const
{
    if (controller_->restoring())
        return restoring_;
    const auto committed = controller_->committedState();
    if (!committed)
        return std::nullopt;
    std::optional<KeptScenario> kept = keepScenario(committed->scenario, committed->gpuBytes, costModel(), extraWorkMs());
    if (const auto start = controller_->initialState(); kept && start) {
        std::optional<KeptScenario> own = keepScenario(start->scenario, start->gpuBytes, costModel(), 0);
        own->stageSpeeds.clear();
        if (own == kept)
            return std::nullopt; // nothing changed: the job's own scenario is not kept
    }
    return kept;
}

bool WhatIfEditor::restoreScenario(const KeptScenario& kept, QString* why)
{
    if (costModel().layerCount() == 0) {
        *why = tr("this job has no what-if");
        return false;
    }
    const std::optional<whatif::Scenario> scenario = scenarioFitting(kept, controller_->jobCostModel(), why);
    if (!scenario)
        return false;
    restoring_ = kept;
    setExtraWorkMs(kept.extraWorkMs);
    QStringList speeds;
    for (double s : kept.stageSpeeds)
        speeds << QString::number(s, 'g', QLocale::FloatingPointShortest);
    speeds_->setText(speeds.join(QLatin1Char(',')));
    speeds_->setModified(false);
    controller_->restoreKept(*scenario, kept.gpuMemoryBytes, std::vector<double>(kept.stageSpeeds.begin(), kept.stageSpeeds.end()));
    return true;
}

QString WhatIfEditor::microbatchText() const
{
    return microbatchResult_->isVisibleTo(const_cast<WhatIfEditor*>(this)) ? microbatchResult_->text() : QString();
}

void WhatIfEditor::refreshMicrobatches()
{
    const ScenarioPtr scenario = controller_->scenario();
    const whatif::CostModel& model = costModel();
    if (!controller_->current() || !scenario || !model.unevenFor(scenario->microbatches, whatif::MicrobatchOrder::Given)) {
        microbatchResult_->hide();
        return;
    }
    // Six replays of the shown schedule: milliseconds even for thousands of steps.
    try {
        const whatif::MicrobatchStudy st = whatif::studyMicrobatches(model, *scenario);
        if (!st.applies) {
            microbatchResult_->hide();
            return;
        }
        const double g = static_cast<double>(std::max<TimeNs>(1, st.givenNs));
        QString text = tr("Uneven microbatches (%1x to %2x of the mean, %3): the spread costs %4 per iteration (%5); "
                          "equal microbatches would take %6.")
                           .arg(st.minSize, 0, 'f', 2)
                           .arg(st.maxSize, 0, 'f', 2)
                           .arg(st.source == whatif::SizeSource::Trace ? tr("as measured") : tr("from the %1").arg(qs(std::string(toString(st.source)))))
                           .arg(qs(formatDuration(st.spreadCostNs)), qs(formatPercent(static_cast<double>(st.spreadCostNs) / g)),
                                qs(formatDuration(st.equalNs)));
        if (st.bestGainNs > 0)
            text += tr(" Running them %1 saves %2 (%3).")
                        .arg(qs(std::string(toString(st.bestOrder))), qs(formatDuration(st.bestGainNs)),
                             qs(formatPercent(static_cast<double>(st.bestGainNs) / g)));
        else
            text += tr(" No reordering beats the given order.");
        QStringList waits;
        for (const whatif::MicrobatchRankIdle& r : st.ranks)
            waits << tr("rank %1 %2").arg(r.rank).arg(qs(formatDuration(r.spreadNs)));
        text += tr(" Waiting caused by the spread: %1.").arg(waits.join(QStringLiteral(", ")));
        microbatchResult_->setText(text);
        microbatchResult_->show();
    } catch (const std::exception&) {
        microbatchResult_->hide();
    }
}

double WhatIfEditor::extraWorkMs() const { return extraWork_->value(); }
void WhatIfEditor::setExtraWorkMs(double ms) { extraWork_->setValue(ms); }
QString WhatIfEditor::extraWorkText() const { return extraResult_->isVisibleTo(const_cast<WhatIfEditor*>(this)) ? extraResult_->text() : QString(); }

void WhatIfEditor::refreshExtraWork()
{
    const double ms = extraWork_->value();
    const PredictionPtr current = controller_->current();
    if (!current || ms <= 0) {
        extraResult_->hide();
        return;
    }
    // A post-pass over the shown prediction's replay: cheap enough for the UI thread.
    try {
        const auto e = whatif::addExtraWork(*current, static_cast<TimeNs>(std::llround(ms * 1e6)));
        TimeNs hidden = 0, work = 0;
        for (const auto& r : e.ranks) {
            hidden += r.hiddenNs;
            work += e.workNs;
        }
        extraResult_->setText(tr("With %1 of extra work per rank: iteration %2 (%3 longer); %4 of the work fits in bubbles")
                                  .arg(qs(formatDuration(e.workNs)), qs(formatDuration(e.iterationNs)), qs(formatDuration(e.extraNs())),
                                       qs(formatPercent(work > 0 ? static_cast<double>(hidden) / static_cast<double>(work) : 0.0))));
        extraResult_->show();
        showError("extra", QString()); // clears it
    } catch (const std::exception& ex) {
        extraResult_->hide();
        showError("extra", QString::fromUtf8(ex.what()));
    }
}

void WhatIfEditor::autoBalance() { controller_->autoBalance(); }

void WhatIfEditor::search()
{
    whatif::SearchSpace space;
    if (searchRecompute_->isChecked()) {
        space.recompute = {whatif::Recompute::None, whatif::Recompute::Selective, whatif::Recompute::Full};
        space.recomputePerStage = true;
    }
    controller_->search(std::move(space));
}

void WhatIfEditor::refreshBusy()
{
    search_->setEnabled(!controller_->searching());
    balance_->setEnabled(!controller_->balancing());
    cancel_->setEnabled(controller_->searching() || controller_->balancing());
}

QString WhatIfEditor::statusText() const { return status_->text(); }

std::optional<whatif::Scenario> WhatIfEditor::currentScenario() const
{
    const ScenarioPtr scenario = controller_->scenario();
    return scenario ? std::optional<whatif::Scenario>(*scenario) : std::nullopt;
}

void WhatIfEditor::showSearchRows(const SearchRowsPtr& rows)
{
    searchTable_->setRowCount(static_cast<int>(rows->size()));
    for (int i = 0; i < static_cast<int>(rows->size()); ++i) {
        const whatif::SearchRow& r = (*rows)[size_t(i)];
        const QStringList cells = searchCells(r, i);
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (r.outOfMemory)
                item->setForeground(QColor("#d1242f"));
            searchTable_->setItem(i, c, item);
        }
    }
    searchTable_->resizeColumnsToContents();
    const PredictionPtr current = controller_->current();
    pareto_->setRows(rows, current ? current->gpuMemoryBytes : costModel().memory.gpuMemoryBytes);
}

void WhatIfEditor::applySearchRow(int row) { controller_->applySearchRow(row); }

void WhatIfEditor::loadScheduleCsv(const QString& path)
{
    whatif::ScenarioChanges c;
    c.scheduleCsv = path.toStdString();
    applyChange(c, "schedule", tr("Schedule from %1").arg(path));
}

void WhatIfEditor::saveScenario(const QString& name) { controller_->saveScenario(name); }

QStringList WhatIfEditor::scenarioNames() const { return controller_->scenarioNames(); }

void WhatIfEditor::refreshScenarioList()
{
    const QStringList names = scenarioNames();
    scenarios_->clear();
    const QString a = compareA_->currentText(), b = compareB_->currentText();
    const QSignalBlocker ba(compareA_), bb(compareB_);
    compareA_->clear();
    compareB_->clear();
    compareA_->addItem(tr("current"));
    compareB_->addItem(tr("current"));
    for (const QString& name : names) {
        scenarios_->addItem(name);
        compareA_->addItem(name);
        compareB_->addItem(name);
    }
    compareA_->setCurrentText(a.isEmpty() ? tr("current") : a);
    compareB_->setCurrentText(b.isEmpty() && !names.isEmpty() ? names.back() : b);
    compare(compareA_->currentText(), compareB_->currentText());
}

void WhatIfEditor::applyScenario(const QString& name) { controller_->applyScenario(name); }

void WhatIfEditor::compare(const QString& a, const QString& b)
{
    auto find = [&](const QString& name) -> PredictionPtr {
        if (name == tr("current") || name.isEmpty())
            return controller_->current();
        return controller_->savedPrediction(name);
    };
    const PredictionPtr pa = find(a), pb = find(b);
    const QStringList rows = {tr("schedule"), tr("pp"),       tr("v"),           tr("microbatches"),
                              tr("boundaries"), tr("iteration"), tr("speed-up"), tr("bubble"),
                              tr("peak memory"), tr("out of memory")};
    compare_->clear();
    compare_->setRowCount(rows.size());
    compare_->setColumnCount(2);
    compare_->setHorizontalHeaderLabels({a, b});
    compare_->setVerticalHeaderLabels(rows);
    auto fill = [&](int col, const PredictionPtr& p) {
        if (!p)
            return;
        const QStringList cells = {qs(p->schedule.name()),
                                   QString::number(p->schedule.pp),
                                   QString::number(p->schedule.chunks()),
                                   QString::number(p->schedule.microbatches),
                                   boundariesText(p->partition.boundaries()),
                                   qs(formatDuration(p->iterationNs())),
                                   speedupWords(p->speedup()),
                                   qs(formatPercent(p->replay.bubbleFraction)),
                                   qs(formatBytes(p->peakBytes())),
                                   p->outOfMemory() ? tr("yes") : tr("no")};
        for (int r = 0; r < cells.size(); ++r)
            compare_->setItem(r, col, new QTableWidgetItem(cells[r]));
    };
    fill(0, pa);
    fill(1, pb);
}

QString WhatIfEditor::exportText() const
{
    const PredictionPtr current = controller_->current();
    if (!current)
        return {};
    return qs(whatif::partitionExportText(current->partition, current->schedule, costModel()));
}

std::string WhatIfEditor::whatIfJson() const
{
    std::vector<whatif::Prediction> predictions;
    if (const PredictionPtr measured = controller_->measured())
        predictions.push_back(*measured);
    if (const PredictionPtr current = controller_->current())
        predictions.push_back(*current);
    const std::shared_ptr<const Trace> trace = controller_->trace();
    const bool simulated = trace && trace->simulated();
    return whatif::whatIfDocument(whatif::WhatIfSource{"trace", sourcePath_.toStdString(), simulated}, costModel(), predictions)
        .dump(2);
}

bool WhatIfEditor::saveWhatIfJson(const QString& path, QString* error) const
{
    QSaveFile f(path);
    const std::string text = whatIfJson() + "\n";
    if (!f.open(QIODevice::WriteOnly) || f.write(text.data(), qint64(text.size())) != qint64(text.size()) || !f.commit()) {
        if (error)
            *error = tr("%1: cannot write: %2").arg(path, f.errorString());
        return false;
    }
    return true;
}

} // namespace pipescope::gui
