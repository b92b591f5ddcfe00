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
// The predictions come from a WhatIfWorker on its own thread; errors from
// core show in red beside the control they concern, and the previous
// prediction stays.
#include "whatif/LayerStrip.h"
#include "views/PipelineView.h"
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
class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QUndoStack;

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

    LayerStrip* layerStrip() const { return strip_; }
    PipelineView* pipelineView() const { return pipeline_; }
    WhatIfWorker* worker() const { return worker_; }
    QUndoStack* undoStack() const { return undo_; }
    std::optional<whatif::Prediction> currentPrediction() const;
    // The same, shared and immutable: what the views keep without copying it
    // (a drag step replaces it; it is never changed in place). Null without one.
    PredictionPtr currentPredictionShared() const { return current_; }
    std::optional<whatif::Prediction> measuredPrediction() const;
    const whatif::CostModel& costModel() const { return model_; }
    // The scenario of the current prediction (boundaries filled in); none before the first answer.
    std::optional<whatif::Scenario> currentScenario() const;
    // A calibration the user asked for in the strip, which the cost model now
    // comes from instead of the job's: a layer count or a model file.
    struct Recalibration {
        std::optional<int> layers;
        QString modelFile;
    };
    std::optional<Recalibration> recalibration() const { return recalibration_; }

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
    struct State {
        whatif::Scenario scenario;
        std::optional<int64_t> gpuBytes;
    };
    enum class Origin { Model, DragStep, DragCommit, Control, Restore };
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

    void buildUi();
    quint64 send(quint64 id, Origin origin, const QString& setting, const QString& undoText = {});
    void applyChange(whatif::ScenarioChanges changes, const QString& setting, const QString& undoText);
    void restore(const State& state);
    void onScenario(ScenarioPtr scenario, quint64 id);
    void onPrediction(PredictionPtr prediction, quint64 id);
    void onFailed(const QString& message, const QString& setting, quint64 id);
    void onCancelled(quint64 id);
    void onCostModel(CostModelPtr model, quint64 id);
    void onSearch(SearchRowsPtr rows, quint64 id);
    void syncControls();
    void showError(const QString& setting, const QString& message);
    void clearErrors();
    void forgetJob(); // drops every trace of the job shown so far (setJob, setUnavailable)
    void refreshFigures();
    void refreshExtraWork();
    void refreshMicrobatches();
    void refreshScenarioList();
    void refreshBusy(); // Search, Auto-balance and Cancel enabled as the work in flight allows

    WhatIfWorker* worker_;
    QUndoStack* undo_;
    std::shared_ptr<const Trace> trace_;
    std::shared_ptr<const AnalysisResult> analysis_;
    whatif::CostModel model_;
    QString sourcePath_;
    PredictionPtr measured_, current_;
    ScenarioPtr scenario_;
    State committed_;
    bool haveCommitted_ = false;
    bool recalibrates_ = true;
    std::map<quint64, Pending> pending_;
    quint64 modelRequest_ = 0; // answers to older requests belong to a previous job
    quint64 searchRequest_ = 0;
    quint64 balanceRequest_ = 0;
    bool searching_ = false, balancing_ = false;
    std::optional<Recalibration> recalibration_, requestedRecalibration_;
    SearchRowsPtr searchRows_;
    std::vector<Saved> saved_;

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
    whatif::CostModel baseModel_;          // the job's model before any GPU speeds
    QLabel* microbatchResult_ = nullptr;  // what uneven microbatches cost on the shown scenario
    QCheckBox* searchRecompute_ = nullptr;
    ParetoChart* pareto_ = nullptr;
    QPushButton* balance_;
    QPushButton* search_;
    QPushButton* cancel_;
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
