// The what-if editor's widgets, one group at a time (WhatIfEditor::buildUi):
// the strip and scenario controls, the action row, the headline figures,
// then the diagram over the tabs of charts, search, scenarios and export.
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

} // namespace

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

} // namespace pipescope::gui
