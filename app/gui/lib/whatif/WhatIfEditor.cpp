#include "whatif/WhatIfEditor.h"
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

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

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

// Idle share of each bubble cause as one stacked bar, with its total beside.
class BubbleBar : public QWidget {
public:
    explicit BubbleBar(QWidget* parent) : QWidget(parent) { setMinimumSize(160, 18); }
    void setPrediction(PredictionPtr p)
    {
        prediction_ = std::move(p);
        QStringList tips;
        if (prediction_) {
            const auto& r = prediction_->replay;
            const double denom = double(std::max<TimeNs>(1, r.iterationNs)) * double(std::max<size_t>(1, r.ranks.size()));
            for (int c = 0; c < kBubbleCauses; ++c)
                if (r.bubbleNs[size_t(c)] > 0)
                    tips << QString("%1 %2").arg(qs(std::string(toString(BubbleCause(c)))),
                                                 qs(formatPercent(double(r.bubbleNs[size_t(c)]) / denom)));
        }
        setToolTip(tips.join('\n'));
        update();
    }
    QSize sizeHint() const override { return {260, 18}; }

protected:
    void paintEvent(QPaintEvent*) override
    {
        QPainter p(this);
        const int textW = 70;
        const QRect bar(0, 2, std::max(10, width() - textW), height() - 4);
        p.fillRect(bar, palette().alternateBase());
        if (!prediction_)
            return;
        const auto& r = prediction_->replay;
        const double denom = double(std::max<TimeNs>(1, r.iterationNs)) * double(std::max<size_t>(1, r.ranks.size()));
        double x = bar.left();
        for (int c = 0; c < kBubbleCauses; ++c) {
            const double w = bar.width() * double(r.bubbleNs[size_t(c)]) / denom;
            p.fillRect(QRectF(x, bar.top(), w, bar.height()), toQColor(timeline::causeColor(BubbleCause(c))));
            x += w;
        }
        p.setPen(palette().color(QPalette::Text));
        p.drawRect(bar.adjusted(0, 0, -1, -1));
        p.drawText(QRect(bar.right() + 6, 0, textW - 6, height()), Qt::AlignVCenter | Qt::AlignLeft,
                   qs(formatPercent(r.bubbleFraction)));
    }

private:
    PredictionPtr prediction_;
};

QCustomPlot* smallPlot(QWidget* parent, const QString& yLabel)
{
    auto* plot = new QCustomPlot(parent);
    plot->setMinimumHeight(110);
    plot->yAxis->setLabel(yLabel);
    plot->setAntialiasedElements(QCP::aeNone);
    plot->legend->setVisible(false);
    return plot;
}

// The ranks as the charts' x axis: one tick per rank, named by its number.
struct RankAxis {
    int ranks = 0;
    QVector<double> keys;
    QSharedPointer<QCPAxisTickerText> ticker;
};

RankAxis rankAxis(const whatif::Prediction& p)
{
    RankAxis axis;
    axis.ranks = static_cast<int>(p.replay.ranks.size());
    QVector<QString> labels;
    for (int r = 0; r < axis.ranks; ++r) {
        axis.keys << r;
        labels << QString::number(r);
    }
    axis.ticker = QSharedPointer<QCPAxisTickerText>::create();
    axis.ticker->addTicks(axis.keys, labels);
    return axis;
}

// Busy and idle per rank, stacked.
void plotBusy(QCustomPlot* plot, const whatif::Prediction& p, const RankAxis& axis)
{
    QVector<double> busy, idle;
    for (int r = 0; r < axis.ranks; ++r) {
        busy << p.replay.ranks[size_t(r)].busyNs / 1e6;
        idle << (p.iterationNs() - p.replay.ranks[size_t(r)].busyNs) / 1e6;
    }
    plot->clearPlottables();
    auto* busyBars = new QCPBars(plot->xAxis, plot->yAxis);
    busyBars->setName(QObject::tr("busy"));
    busyBars->setBrush(toQColor(timeline::stepColor(StepKind::F)));
    busyBars->setPen(Qt::NoPen);
    busyBars->setData(axis.keys, busy);
    auto* idleBars = new QCPBars(plot->xAxis, plot->yAxis);
    idleBars->setName(QObject::tr("idle"));
    idleBars->setBrush(toQColor(timeline::causeColor(BubbleCause::Other)));
    idleBars->setPen(Qt::NoPen);
    idleBars->setData(axis.keys, idle);
    idleBars->moveAbove(busyBars);
    plot->xAxis->setTicker(axis.ticker);
    plot->xAxis->setLabel(QObject::tr("rank: busy below, idle above"));
    plot->xAxis->setRange(-0.6, axis.ranks - 0.4);
    plot->yAxis->setRange(0, std::max(1e-3, p.iterationNs() / 1e6) * 1.05);
    plot->replot(QCustomPlot::rpQueuedReplot);
}

// Whether the prediction knows any rank's memory: the model gave parameter or activation sizes.
bool memoryKnown(const whatif::Prediction& p)
{
    return std::any_of(p.memory.begin(), p.memory.end(), [](const auto& m) { return m.peakBytes > 0; });
}

// Empty axes would look like zero memory: this says why there is nothing to show.
void addUnknownNote(QCustomPlot* plot, const QString& text)
{
    auto* note = new QCPItemText(plot);
    note->position->setType(QCPItemPosition::ptAxisRectRatio);
    note->position->setCoords(0.5, 0.45);
    note->setText(text);
    note->setColor(QColor("#666666"));
}

// Peak memory per rank against the GPU's; ranks out of memory in red, the
// measured run's peaks (the trace's allocator totals) as black ticks over the bars.
void plotPeakMemory(QCustomPlot* plot, const whatif::Prediction& p, const RankAxis& axis, bool known)
{
    const int ranks = axis.ranks;
    plot->clearPlottables();
    plot->clearItems();
    auto* ok = new QCPBars(plot->xAxis, plot->yAxis);
    auto* oom = new QCPBars(plot->xAxis, plot->yAxis);
    ok->setBrush(toQColor(timeline::stepColor(StepKind::B)));
    oom->setBrush(QColor("#d1242f"));
    ok->setPen(Qt::NoPen);
    oom->setPen(Qt::NoPen);
    double top = 0;
    for (int r = 0; r < ranks && size_t(r) < p.memory.size(); ++r) {
        const double gib = p.memory[size_t(r)].peakBytes / kGiB;
        (p.memory[size_t(r)].outOfMemory ? oom : ok)->addData(r, gib);
        top = std::max(top, gib);
    }
    bool measuredShown = false;
    {
        auto* measured = new QCPGraph(plot->xAxis, plot->yAxis);
        measured->setName(QObject::tr("measured"));
        measured->setLineStyle(QCPGraph::lsNone);
        measured->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssPlus, QPen(QColor("#1d2329"), 2), Qt::NoBrush, 10));
        for (int r = 0; r < ranks && size_t(r) < p.measuredPeakBytes.size(); ++r)
            if (p.measuredPeakBytes[size_t(r)] >= 0) {
                const double gib = p.measuredPeakBytes[size_t(r)] / kGiB;
                measured->addData(r, gib);
                top = std::max(top, gib);
                measuredShown = true;
            }
        measured->setVisible(measuredShown);
    }
    if (p.gpuMemoryBytes) {
        const double limit = *p.gpuMemoryBytes / kGiB;
        auto* line = new QCPItemStraightLine(plot);
        line->point1->setCoords(-1, limit);
        line->point2->setCoords(1, limit);
        line->setPen(QPen(QColor("#d1242f"), 1, Qt::DashLine));
        top = std::max(top, limit);
    }
    plot->xAxis->setTicker(axis.ticker);
    QString rankLabel = p.outOfMemory() ? QObject::tr("rank (out of memory)") : QObject::tr("rank");
    if (measuredShown)
        rankLabel += QObject::tr("; + measured peak");
    plot->xAxis->setLabel(rankLabel);
    plot->xAxis->setRange(-0.6, ranks - 0.4);
    plot->yAxis->setRange(0, std::max(1e-3, top) * 1.1);
    if (!known)
        addUnknownNote(plot, measuredShown ? QObject::tr("predicted: unknown") : QObject::tr("unknown"));
    plot->replot(QCustomPlot::rpQueuedReplot);
}

// Memory over the iteration, a step line per rank.
void plotMemoryOverTime(QCustomPlot* plot, const whatif::Prediction& p, int ranks, bool known)
{
    plot->clearGraphs();
    plot->clearItems();
    if (!known)
        addUnknownNote(plot, QObject::tr("memory unknown: the trace gives no parameter or\nactivation sizes (open it with a model file, --model)"));
    static const std::array<std::string_view, 8> hues = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1",
                                                         "#edc948", "#76b7b2", "#ff9da7", "#9c755f"};
    double peak = 0;
    for (int r = 0; r < ranks && size_t(r) < p.memory.size(); ++r) {
        auto* g = plot->addGraph();
        g->setLineStyle(QCPGraph::lsStepLeft);
        g->setPen(QPen(toQColor(timeline::rgbFromHex(hues[size_t(r) % hues.size()])), 1.5));
        g->setName(QObject::tr("rank %1").arg(r));
        QVector<double> t, y;
        for (const auto& pt : p.memory[size_t(r)].overTime) {
            t << pt.t / 1e6;
            y << pt.bytes / kGiB;
            peak = std::max(peak, pt.bytes / kGiB);
        }
        g->setData(t, y, true);
    }
    plot->xAxis->setLabel(QObject::tr("ms"));
    plot->xAxis->setRange(0, std::max(1e-3, p.iterationNs() / 1e6));
    plot->yAxis->setRange(0, std::max(1e-3, peak) * 1.1);
    plot->legend->setVisible(known && ranks <= 8);
    plot->replot(QCustomPlot::rpQueuedReplot);
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

void WhatIfEditor::buildUi()
{
    auto* root = new QVBoxLayout(this);
    root->setContentsMargins(4, 4, 4, 4);

    // Layer strip with its error line, the controls, the actions, and the line for errors of no control.
    strip_ = new LayerStrip(this);
    root->addWidget(strip_);
    root->addWidget(errorLabel("boundaries"));
    QGridLayout* controls = buildScenarioControls();
    QHBoxLayout* actions = buildActions();
    controls->setColumnStretch(8, 1);
    root->addLayout(controls);
    root->addLayout(actions);
    root->addWidget(errorLabel("general"));

    buildFigures(root);

    // Diagram and charts side by side with the tables.
    auto* split = new QSplitter(Qt::Vertical, this);
    buildDiagram(split);
    auto* tabs = new QTabWidget(split);
    buildCharts(tabs);
    buildSearch(tabs);
    buildScenarios(tabs);
    buildExport(tabs);
    split->addWidget(tabs);
    split->setChildrenCollapsible(false); // never a 0-px chart: the editor scrolls instead
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    root->addWidget(split, 1);

    wireStrip();
    wireControls();
    strip_->setEditable(false);
}

// A red line beside a control for the errors about its setting (one of WhatIfController::errorSettings()).
QLabel* WhatIfEditor::errorLabel(const QString& setting)
{
    Q_ASSERT(WhatIfController::errorSettings().contains(setting));
    auto* l = new QLabel(this);
    l->setStyleSheet("color: #d1242f;");
    l->setWordWrap(true);
    l->hide();
    l->setObjectName("error-" + setting);
    errors_[setting] = l;
    return l;
}

// The scenario's controls in a row, each with its label above and its inline error beneath.
QGridLayout* WhatIfEditor::buildScenarioControls()
{
    auto* controls = new QGridLayout;
    auto addControl = [&](int col, const QString& label, QWidget* w, const QString& setting) {
        controls->addWidget(new QLabel(label, this), 0, col);
        controls->addWidget(w, 1, col);
        controls->addWidget(errorLabel(setting), 2, col);
        w->setAccessibleName(label);
    };
    schedule_ = new QComboBox(this);
    for (ScheduleKind k : builtinScheduleKinds())
        schedule_->addItem(qs(std::string(toString(k))), qs(std::string(toString(k))));
    schedule_->addItem(tr("CSV file..."), QString("csv"));
    v_ = new QSpinBox(this);
    v_->setRange(1, 64);
    m_ = new QSpinBox(this);
    m_->setRange(1, 100000);
    pp_ = new QSpinBox(this);
    pp_->setRange(1, 4096);
    gpu_ = new QDoubleSpinBox(this);
    gpu_->setRange(0, 4096);
    gpu_->setDecimals(1);
    gpu_->setSuffix(" GiB");
    gpu_->setSpecialValueText(tr("unknown"));
    extraWork_ = new QDoubleSpinBox(this);
    extraWork_->setRange(0, 1e6);
    extraWork_->setDecimals(3);
    extraWork_->setSuffix(" ms");
    extraWork_->setSpecialValueText(tr("none"));
    extraWork_->setToolTip(tr("Work added to every rank per iteration (e.g. second-order optimizer updates), placed in its "
                              "bubbles first; what does not fit runs after its last step (pipescope whatif --extra-work)"));
    for (QAbstractSpinBox* s : std::initializer_list<QAbstractSpinBox*>{v_, m_, pp_, gpu_, extraWork_})
        s->setKeyboardTracking(false); // one request per value, not per keystroke
    addControl(0, tr("Schedule"), schedule_, "schedule");
    addControl(1, tr("v (chunks per rank)"), v_, "v");
    addControl(2, tr("Microbatches"), m_, "microbatches");
    addControl(3, tr("pp"), pp_, "pp");
    addControl(4, tr("GPU memory"), gpu_, "gpu");
    addControl(5, tr("Extra work / iteration"), extraWork_, "extra");
    recompute_ = new QComboBox(this);
    for (whatif::Recompute r : {whatif::Recompute::None, whatif::Recompute::Selective, whatif::Recompute::Full})
        recompute_->addItem(qs(std::string(toString(r))), qs(std::string(toString(r))));
    recompute_->setToolTip(tr("Activation recomputation on every stage: the forward again inside each backward, for "
                              "less stored activation memory (pipescope whatif --recompute)"));
    addControl(6, tr("Recompute"), recompute_, "recompute");
    microbatchOrder_ = new QComboBox(this);
    for (whatif::MicrobatchOrder o : whatif::allMicrobatchOrders())
        microbatchOrder_->addItem(qs(std::string(toString(o))), qs(std::string(toString(o))));
    microbatchOrder_->setToolTip(tr("Uneven microbatches: run them as given (measured), all equal (the same total work "
                                    "spread evenly), or reordered (pipescope whatif --microbatch-order). Needs microbatches "
                                    "that differ: the trace's, or a tokens file"));
    addControl(7, tr("Microbatch order"), microbatchOrder_, "microbatch-order");
    return controls;
}

// The actions on a row of their own: with the scenario's eight controls one
// row would make the window wider than a laptop screen.
QHBoxLayout* WhatIfEditor::buildActions()
{
    balance_ = new QPushButton(tr("Auto-balance"), this);
    search_ = new QPushButton(tr("Search"), this);
    cancel_ = new QPushButton(tr("Cancel"), this);
    cancel_->setEnabled(false);
    QToolButton* undoBtn = historyButton(true);
    QToolButton* redoBtn = historyButton(false);
    auto* exportBtn = new QToolButton(this);
    buildExportMenu(exportBtn);
    searchRecompute_ = new QCheckBox(tr("with recomputation"), this);
    searchRecompute_->setToolTip(tr("Search also tries selective and full recomputation everywhere and auto-balance's "
                                    "choice per stage within the GPU memory"));
    auto* actions = new QHBoxLayout;
    for (QWidget* w : std::initializer_list<QWidget*>{balance_, search_, searchRecompute_, cancel_, undoBtn, redoBtn, exportBtn})
        actions->addWidget(w);
    actions->addSpacing(16);
    auto* speedsLabel = new QLabel(tr("GPU speeds"), this);
    speeds_ = new QLineEdit(this);
    speeds_->setPlaceholderText(tr("1,1,0.8,1 or trace"));
    speeds_->setToolTip(tr("Relative throughput of each pipeline rank's GPU (0.8: its layers take 1/0.8 as long), or "
                           "'trace' to read them from the time each rank took for its layers (pipescope whatif "
                           "--stage-speed). Auto-balance then gives slower GPUs fewer layers"));
    speeds_->setAccessibleName(speedsLabel->text());
    speeds_->setMaximumWidth(speeds_->fontMetrics().horizontalAdvance(QStringLiteral("0.800,0.800,0.800,0.800,0.8")));
    actions->addWidget(speedsLabel);
    actions->addWidget(speeds_);
    actions->addWidget(errorLabel("stage-speed"), 1);
    actions->addStretch(1);

    connect(balance_, &QPushButton::clicked, this, &WhatIfEditor::autoBalance);
    connect(search_, &QPushButton::clicked, this, &WhatIfEditor::search);
    connect(cancel_, &QPushButton::clicked, controller_, &WhatIfController::cancelWork);
    return actions;
}

// Undo or Redo as a button of a fixed width: the step it would take is its
// tooltip ("Undo Move stage boundary"), so the row never moves as steps change.
QToolButton* WhatIfEditor::historyButton(bool undo)
{
    QUndoStack* stack = undoStack();
    const QString name = undo ? tr("Undo") : tr("Redo");
    auto* action = new QAction(name, this);
    auto refresh = [action, stack, name, undo] {
        action->setEnabled(undo ? stack->canUndo() : stack->canRedo());
        const QString step = undo ? stack->undoText() : stack->redoText();
        action->setToolTip(step.isEmpty() ? name : name + QLatin1Char(' ') + step);
    };
    refresh();
    connect(stack, &QUndoStack::indexChanged, action, refresh);
    connect(stack, &QUndoStack::cleanChanged, action, refresh);
    connect(action, &QAction::triggered, stack, undo ? &QUndoStack::undo : &QUndoStack::redo);
    auto* button = new QToolButton(this);
    button->setObjectName(undo ? QStringLiteral("undo") : QStringLiteral("redo"));
    button->setDefaultAction(action);
    button->setFixedWidth(std::max(button->sizeHint().width(),
                                   button->fontMetrics().horizontalAdvance(tr("Undo")) + 16));
    return button;
}

// Export: the what-if JSON to a file, the Megatron-LM arguments and module lists to the clipboard.
void WhatIfEditor::buildExportMenu(QToolButton* button)
{
    button->setText(tr("Export"));
    button->setPopupMode(QToolButton::InstantPopup);
    auto* exportMenu = new QMenu(button);
    exportMenu->addAction(tr("Save as pipescope.whatif/1 JSON..."), this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save what-if JSON"), "whatif.json", tr("JSON (*.json)"));
        QString error;
        if (!path.isEmpty() && !saveWhatIfJson(path, &error))
            showError("general", error);
    });
    exportMenu->addAction(tr("Copy Megatron-LM arguments and module lists"), this,
                          [this] { QApplication::clipboard()->setText(exportText()); });
    button->setMenu(exportMenu);
}

// Headline figures: iteration, speed-up, bubble share and the status line,
// the diagram's switches, and the lines for extra work and uneven microbatches.
void WhatIfEditor::buildFigures(QVBoxLayout* root)
{
    auto* figures = new QHBoxLayout;
    iteration_ = new QLabel(this);
    QFont big = iteration_->font();
    big.setPointSizeF(big.pointSizeF() * 1.3);
    big.setBold(true);
    iteration_->setFont(big);
    speedup_ = new QLabel(this);
    QFont bold = speedup_->font();
    bold.setBold(true);
    speedup_->setFont(bold); // the iteration is the headline; the speed-up beside it, a size smaller
    bubbleBar_ = new BubbleBar(this);
    status_ = new QLabel(this);
    // Figures change on every drag step: their text must never resize the
    // window. The row fits the What-if tab of a 1366x768 screen (beside the
    // Summary dock) with room to spare.
    iteration_->setFixedWidth(iteration_->fontMetrics().horizontalAdvance(QStringLiteral("Predicted iteration 000.000 ms ")));
    speedup_->setFixedWidth(speedup_->fontMetrics().horizontalAdvance(QStringLiteral("as fast as measured (measured 000.000 ms) ")));
    status_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    figures->addWidget(iteration_);
    figures->addSpacing(12);
    figures->addWidget(speedup_);
    figures->addSpacing(12);
    figures->addWidget(new QLabel(tr("Bubble:"), this));
    figures->addWidget(bubbleBar_, 1);
    figures->addWidget(status_);
    // The diagram's switches sit with its colour key (buildDiagram).
    ghost_ = new QCheckBox(tr("Prediction as ghost"), this);
    criticalPath_ = new QCheckBox(tr("Critical path"), this);
    criticalPath_->setChecked(true);
    root->addLayout(figures);
    extraResult_ = new QLabel(this);
    extraResult_->setObjectName("extra-work-result");
    extraResult_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    extraResult_->hide();
    root->addWidget(extraResult_);
    connect(extraWork_, &QDoubleSpinBox::valueChanged, this, [this] { refreshExtraWork(); });
    microbatchResult_ = new QLabel(this);
    microbatchResult_->setObjectName("microbatch-result");
    microbatchResult_->setWordWrap(true);
    microbatchResult_->setTextFormat(Qt::PlainText);
    microbatchResult_->hide();
    root->addWidget(microbatchResult_);
}

// The pipeline diagram of measured against predicted, with its legend.
void WhatIfEditor::buildDiagram(QSplitter* split)
{
    pipeline_ = new PipelineView(split);
    connect(ghost_, &QCheckBox::toggled, pipeline_,
            [this](bool on) { pipeline_->setMode(on ? PipelineView::Ghost : PipelineView::Stacked); });
    connect(criticalPath_, &QCheckBox::toggled, pipeline_, &PipelineView::setCriticalPathVisible);
    // Two rows per stage (measured, predicted) stay readable: about 18 px each.
    pipeline_->setMinimumHeight(2 * 4 * 18 + 60);
    auto* diagram = new QWidget(split);
    auto* diagramLayout = new QVBoxLayout(diagram);
    diagramLayout->setContentsMargins(0, 0, 0, 0);
    diagramLayout->setSpacing(0);
    pipeline_->setParent(diagram);
    diagramLayout->addWidget(pipeline_, 1);
    // The colour key (it wraps where the tab is narrow) and the diagram's switches.
    auto* keyRow = new QHBoxLayout;
    keyRow->addWidget(new PaletteLegend(PaletteLegend::Steps | PaletteLegend::Causes | PaletteLegend::TranslucentCauses | PaletteLegend::CriticalPath, diagram), 1);
    ghost_->setParent(diagram);
    criticalPath_->setParent(diagram);
    keyRow->addWidget(ghost_, 0, Qt::AlignTop);
    keyRow->addWidget(criticalPath_, 0, Qt::AlignTop);
    diagramLayout->addLayout(keyRow);
    split->addWidget(diagram);
}

// Busy and idle per rank, peak memory per rank, and memory over time.
void WhatIfEditor::buildCharts(QTabWidget* tabs)
{
    auto* charts = new QWidget(tabs);
    auto* chartRow = new QHBoxLayout(charts);
    busyPlot_ = smallPlot(charts, tr("ms per rank"));
    memoryPlot_ = smallPlot(charts, tr("peak GiB"));
    memoryTimePlot_ = smallPlot(charts, tr("GiB over time"));
    // The ranks' key beside the chart, not over the lines' ends.
    memoryTimePlot_->axisRect()->insetLayout()->take(memoryTimePlot_->legend);
    memoryTimePlot_->plotLayout()->addElement(0, 1, memoryTimePlot_->legend);
    memoryTimePlot_->plotLayout()->setColumnStretchFactor(1, 0.001);
    memoryTimePlot_->legend->setRowSpacing(0);
    memoryTimePlot_->legend->setMargins(QMargins(4, 2, 4, 2));
    chartRow->addWidget(busyPlot_, 1);
    chartRow->addWidget(memoryPlot_, 1);
    chartRow->addWidget(memoryTimePlot_, 2);
    tabs->addTab(charts, tr("Busy, idle and memory"));
}

// The search's ranked table and its memory-time front; a row or a point applies its configuration.
void WhatIfEditor::buildSearch(QTabWidget* tabs)
{
    searchTable_ = new QTableWidget(tabs);
    searchTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    searchTable_->setSelectionBehavior(QAbstractItemView::SelectRows);
    searchTable_->setColumnCount(10);
    searchTable_->setHorizontalHeaderLabels(
        {tr("#"), tr("schedule"), tr("v"), tr("microbatches"), tr("iteration"), tr("speed-up"), tr("bubble"),
         tr("peak memory"), tr("recompute"), tr("boundaries")});
    searchTable_->horizontalHeader()->setStretchLastSection(true);
    tabs->addTab(searchTable_, tr("Search"));
    pareto_ = new ParetoChart(tabs);
    tabs->addTab(pareto_, tr("Memory-time front"));

    connect(searchTable_, &QTableWidget::cellClicked, this, [this](int row, int) { applySearchRow(row); });
    connect(pareto_, &ParetoChart::rowClicked, this, &WhatIfEditor::applySearchRow);
}

// The saved scenarios (a double click applies one) and two of them, or the current one, compared.
void WhatIfEditor::buildScenarios(QTabWidget* tabs)
{
    auto* scenarioTab = new QWidget(tabs);
    auto* sl = new QHBoxLayout(scenarioTab);
    auto* left = new QVBoxLayout;
    scenarios_ = new QListWidget(scenarioTab);
    auto* save = new QPushButton(tr("Save current as..."), scenarioTab);
    left->addWidget(scenarios_);
    left->addWidget(save);
    sl->addLayout(left, 1);
    auto* right = new QVBoxLayout;
    auto* pick = new QHBoxLayout;
    compareA_ = new QComboBox(scenarioTab);
    compareB_ = new QComboBox(scenarioTab);
    pick->addWidget(compareA_);
    pick->addWidget(new QLabel(tr("against"), scenarioTab));
    pick->addWidget(compareB_);
    right->addLayout(pick);
    compare_ = new QTableWidget(scenarioTab);
    compare_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    compare_->horizontalHeader()->setStretchLastSection(true);
    right->addWidget(compare_);
    sl->addLayout(right, 2);
    tabs->addTab(scenarioTab, tr("Scenarios"));

    connect(save, &QPushButton::clicked, this, [this] {
        bool ok = false;
        const QString name = QInputDialog::getText(this, tr("Save scenario"), tr("Name:"), QLineEdit::Normal,
                                                   tr("scenario %1").arg(scenarioNames().size() + 1), &ok);
        if (ok && !name.trimmed().isEmpty())
            saveScenario(name.trimmed());
    });
    connect(scenarios_, &QListWidget::itemDoubleClicked, this, [this](QListWidgetItem* item) { applyScenario(item->text()); });
    auto recompare = [this] { compare(compareA_->currentText(), compareB_->currentText()); };
    connect(compareA_, &QComboBox::currentTextChanged, this, recompare);
    connect(compareB_, &QComboBox::currentTextChanged, this, recompare);
}

// The partition as Megatron-LM arguments and per-stage module lists.
void WhatIfEditor::buildExport(QTabWidget* tabs)
{
    export_ = new QPlainTextEdit(tabs);
    export_->setReadOnly(true);
    tabs->addTab(export_, tr("Export"));
}

// The strip's drags, releases and calibration requests.
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
