#pragma once
// The what-if editor: the layer strip whose stage boundaries the user drags,
// the scenario controls (schedule, v, microbatches, pp, GPU memory),
// auto-balance and the ranked search, and what each change predicts: the
// iteration time and speed-up against the measured run, bubble share by
// cause, per-stage busy and idle, peak memory against the GPU's, memory over
// time, and the pipeline diagram of measured against predicted. Every change
// is one undo step (a whole drag is one); scenarios can be kept by name and
// compared; the partition exports as pipescope.whatif/1 JSON, Megatron-LM
// arguments and per-stage module lists.
//
// The editor is the view: the state (requests, undo stack, saved scenarios,
// search rows) lives in its WhatIfController, which the editor forwards the
// user's actions to and shows the answers of. The predictions come from a
// WhatIfWorker on its own thread; errors from core show in red beside the
// control they concern, and the previous prediction stays. During a drag
// only the strip, the headline figures and the diagram follow each step; the
// charts and the text below them catch up when the drag is released.
//
// The code is in rooms: WhatIfEditorLayout.cpp makes the widgets,
// WhatIfCharts.cpp draws the charts, WhatIfEditor.cpp wires them to the
// controller and writes the readouts.
#include "whatif/KeptScenario.h"
#include "whatif/LayerStrip.h"
#include "views/PipelineView.h"
#include "whatif/WhatIfController.h"
#include "whatif/WhatIfWorker.h"

#include "analysis/Analysis.h"
#include "model/Trace.h"
#include "whatif/WhatIf.h"

#include <QWidget>

#include <map>
#include <memory>
#include <optional>

class QCheckBox;
class QComboBox;
class QCustomPlot;
class QDoubleSpinBox;
class QGridLayout;
class QHBoxLayout;
class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QSplitter;
class QTableWidget;
class QTabWidget;
class QToolButton;
class QUndoStack;
class QVBoxLayout;

namespace pipescope::gui {

class ParetoChart;

class WhatIfEditor : public QWidget {
    Q_OBJECT
public:
    explicit WhatIfEditor(QWidget* parent = nullptr);
    ~WhatIfEditor() override;

    // A job: its trace and analysis (for re-calibrating with a layer count or
    // a model file, and the measured diagram) and the cost model calibrated on them.
    void setJob(std::shared_ptr<const Trace> trace, std::shared_ptr<const AnalysisResult> analysis, whatif::CostModel model);
    // No what-if for this job (no pipeline found, calibration refused): the
    // editor empties and says why in one sentence.
    void setUnavailable(const QString& reason);
    // Whether the editor re-calibrates by itself when the strip asks for a
    // layer count or a model file (on by default; off where the window
    // re-opens the job with those options instead).
    void setRecalibratesOnRequest(bool on) { recalibrates_ = on; }
    // Where the job came from, for the JSON export's source.
    void setSourcePath(const QString& path) { sourcePath_ = path; }

    // The editor's state and the requests in flight, without the widgets.
    WhatIfController* controller() const { return controller_; }
    LayerStrip* layerStrip() const { return strip_; }
    PipelineView* pipelineView() const { return pipeline_; }
    WhatIfWorker* worker() const { return controller_->worker(); }
    QUndoStack* undoStack() const { return controller_->undoStack(); }
    // A copy of the shown prediction; none before the first answer.
    std::optional<whatif::Prediction> currentPrediction() const;
    // The same, shared and immutable: what the views keep without copying it
    // (a drag step replaces it; it is never changed in place). Null without one.
    PredictionPtr currentPredictionShared() const { return controller_->current(); }
    std::optional<whatif::Prediction> measuredPrediction() const;
    PredictionPtr measuredPredictionShared() const { return controller_->measured(); }
    const whatif::CostModel& costModel() const { return controller_->costModel(); }
    // The scenario of the current prediction (boundaries filled in); none before the first answer.
    std::optional<whatif::Scenario> currentScenario() const;
    // A calibration the user asked for in the strip, which the cost model now
    // comes from instead of the job's: a layer count or a model file.
    using Recalibration = WhatIfController::Recalibration;
    std::optional<Recalibration> recalibration() const { return controller_->recalibration(); }

    // The scenario shown, as a saved view keeps it beside the job (schedule,
    // pp, v, microbatches, boundaries, order, recomputation, GPU memory and
    // speeds, extra work); nullopt while it is still the job's own, without
    // a what-if, or with a schedule loaded from a CSV file.
    std::optional<KeptScenario> keptScenario() const;
    // Brings a kept scenario back on the job just set, as the state its
    // history starts from. False, with *why in a few words and nothing
    // applied, when it does not fit the job's what-if.
    bool restoreScenario(const KeptScenario& kept, QString* why);

    // "Extra work / iteration" in ms (0: none) and the line saying what it
    // costs on the shown prediction (empty while none is asked).
    double extraWorkMs() const;
    void setExtraWorkMs(double ms);
    QString extraWorkText() const;

    // The controls, for tests and the main window's shortcuts.
    QComboBox* scheduleBox() const { return schedule_; }
    QSpinBox* vBox() const { return v_; }
    QSpinBox* microbatchBox() const { return m_; }
    QSpinBox* ppBox() const { return pp_; }
    QDoubleSpinBox* gpuMemoryBox() const { return gpu_; }
    QTableWidget* searchTable() const { return searchTable_; }
    // Activation recomputation of the scenario (none, selective, full; "per
    // stage" when the stages differ), whether Search also tries it, and the
    // search's time-memory front, whose points apply their configuration.
    QComboBox* recomputeBox() const { return recompute_; }
    // Uneven microbatches: the order they run in (enabled when the cost model
    // has microbatch sizes), and the line saying what their spread costs and
    // which order is fastest (empty while the model has no sizes).
    QComboBox* microbatchOrderBox() const { return microbatchOrder_; }
    // Relative speed of each pipeline rank's GPU ("1,1,0.8,1"), or "trace" to
    // read them from the layers the trace timed on each rank (the field then
    // shows the speeds read); empty: every GPU the reference. As
    // `pipescope whatif --stage-speed`. A change of speeds replaces the cost
    // model (the undo history starts again) and keeps the scenario.
    QLineEdit* speedsBox() const { return speeds_; }
    void setStageSpeeds(const QString& text);
    QString microbatchText() const;
    QCheckBox* searchRecomputeBox() const { return searchRecompute_; }
    ParetoChart* paretoChart() const { return pareto_; }
    QPushButton* balanceButton() const { return balance_; }
    // Cancels a running search or auto-balance.
    QPushButton* cancelButton() const { return cancel_; }
    // The line beside the figures: "searching: ...", "auto-balance cancelled", ...
    QString statusText() const;
    // The inline error beside a control ("schedule", "v", "microbatches",
    // "pp", "gpu", "boundaries"; anything else: the general line); empty when none.
    QString errorText(const QString& setting) const;
    // The first error shown beside any control, empty when none.
    QString firstError() const;
    // Applies changes as one undoable step (the command line's --boundaries, --schedule, ...).
    void applyChanges(const whatif::ScenarioChanges& changes);
    QString predictedIterationText() const;
    QString speedupText() const;

    // As the buttons do.
    void autoBalance();
    void search();
    void applySearchRow(int row);
    void loadScheduleCsv(const QString& path);
    void saveScenario(const QString& name);
    QStringList scenarioNames() const;
    void applyScenario(const QString& name);
    // Rows of key figures for two saved scenarios ("current" names the current one).
    void compare(const QString& a, const QString& b);
    QTableWidget* comparisonTable() const { return compare_; }
    // The exports of the current partition.
    QString exportText() const;
    std::string whatIfJson() const;
    bool saveWhatIfJson(const QString& path, QString* error = nullptr) const;

signals:
    void predictionChanged();
    void errorShown(const QString& setting, const QString& message);

private:
    using Origin = WhatIfController::Origin;

    // The widgets, one group at a time, in the order they were always made
    // (it is the focus order): the strip and scenario controls, the action
    // row, the headline figures, then the diagram over the tabs (charts,
    // search, scenarios and comparison, export).
    void buildUi();
    QLabel* errorLabel(const QString& setting);
    QGridLayout* buildScenarioControls();
    QHBoxLayout* buildActions();
    void buildExportMenu(QToolButton* button);
    QToolButton* historyButton(bool undo);
    void buildFigures(QVBoxLayout* root);
    void buildDiagram(QSplitter* split);
    void buildCharts(QTabWidget* tabs);
    void buildSearch(QTabWidget* tabs);
    void buildScenarios(QTabWidget* tabs);
    void buildExport(QTabWidget* tabs);
    // The user's actions on the strip and the scenario controls, forwarded to the controller.
    void wireStrip();
    void wireControls();
    // What the controller says, shown.
    void wireController();
    void showPrediction(const PredictionPtr& prediction, Origin origin);
    void showBusy(WhatIfController::Work work, WhatIfController::WorkState state);
    void showSearchRows(const SearchRowsPtr& rows);
    void applyChange(whatif::ScenarioChanges changes, const QString& setting, const QString& undoText);
    void syncControls();
    void showError(const QString& setting, const QString& message);
    void clearErrors();
    void forgetJob(); // empties every widget that showed the job so far (setJob, setUnavailable)
    void forgetControls();
    void setControlsEnabled(bool on);
    void showHeadline(const PredictionPtr& prediction); // what a drag step updates
    void refreshCharts(const whatif::Prediction& p);    // what waits for the drag's release
    void refreshExtraWork();
    void refreshMicrobatches();
    void refreshScenarioList();
    void refreshBusy(); // Search, Auto-balance and Cancel enabled as the work in flight allows

    WhatIfController* controller_;
    QString sourcePath_;
    bool recalibrates_ = true;
    std::optional<KeptScenario> restoring_; // what keptScenario() says until the restore is answered

    LayerStrip* strip_;
    PipelineView* pipeline_;
    QComboBox* schedule_;
    QSpinBox* v_;
    QSpinBox* m_;
    QSpinBox* pp_;
    QDoubleSpinBox* gpu_;
    QComboBox* recompute_ = nullptr;
    QComboBox* microbatchOrder_ = nullptr;
    QLineEdit* speeds_ = nullptr;
    QLabel* microbatchResult_ = nullptr;  // what uneven microbatches cost on the shown scenario
    QCheckBox* searchRecompute_ = nullptr;
    ParetoChart* pareto_ = nullptr;
    QPushButton* balance_;
    QPushButton* search_;
    QPushButton* cancel_;
    QCheckBox* ghost_ = nullptr;        // the prediction drawn over the measured run
    QCheckBox* criticalPath_ = nullptr; // the critical path drawn on the diagram
    std::map<QString, QLabel*> errors_;
    QLabel* iteration_;
    QLabel* speedup_;
    QDoubleSpinBox* extraWork_ = nullptr; // work added per rank and iteration, ms (0: none)
    QLabel* extraResult_ = nullptr;       // what it costs on the shown prediction
    QLabel* status_;
    QWidget* bubbleBar_;
    QCustomPlot* busyPlot_;
    QCustomPlot* memoryPlot_;
    QCustomPlot* memoryTimePlot_;
    QTableWidget* searchTable_;
    QListWidget* scenarios_;
    QComboBox* compareA_;
    QComboBox* compareB_;
    QTableWidget* compare_;
    QPlainTextEdit* export_;
};

} // namespace pipescope::gui
