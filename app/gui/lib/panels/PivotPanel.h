#pragma once
// The Pivot panel: the analysis's steps (AnalysisResult::steps) grouped by stage
// and kind, and optionally by microbatch or iteration, with each group's
// count, total, mean, p50 and p95 step duration (StepPivot). Sortable, and
// copyable as TSV like every panel's table. An area selected on the timeline
// (time range x ranks) narrows it to the steps in that area (setArea) until
// "All steps" or another job.
#include "panels/AnalysisPanel.h"
#include "panels/AnalysisTableModel.h"
#include "panels/StepPivot.h"

class QComboBox;
class QLabel;
class QPushButton;
class QTableView;

namespace pipescope::gui {

class PivotModel : public AnalysisTableModel {
    Q_OBJECT
public:
    explicit PivotModel(QObject* parent = nullptr);
    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;
    void setGrouping(PivotBy by);
    PivotBy grouping() const { return by_; }
    void setArea(std::optional<StepArea> area);
    const std::optional<StepArea>& area() const { return area_; }

private:
    void rebuild();
    std::shared_ptr<const AnalysisResult> result_;
    PivotBy by_ = PivotBy::StageKind;
    std::optional<StepArea> area_;
};

class PivotPanel : public AnalysisPanel {
    Q_OBJECT
public:
    explicit PivotPanel(QWidget* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace) override;
    // The steps of an area selected on the timeline; its times are said from
    // `origin` (the timeline's time origin, named by originName).
    void setArea(const StepArea& area, qint64 origin, const QString& originName);
    // Back to every step the analysis holds.
    void clearArea();

    PivotModel* model() const { return model_; }
    QString noteText() const;
    QPushButton* allStepsButton() const { return allSteps_; }
    QComboBox* groupingBox() const { return grouping_; }
    QTableView* view() const { return view_; }

private:
    void showNote();
    PivotModel* model_;
    QComboBox* grouping_;
    QPushButton* allSteps_;
    QLabel* note_;
    QString areaText_; // what the area is, as the note says it
    QTableView* view_;
};

} // namespace pipescope::gui
