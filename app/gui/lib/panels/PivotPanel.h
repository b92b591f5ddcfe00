#pragma once
// The Pivot panel: the analysis's steps (AnalysisResult::steps) grouped by stage
// and kind, and optionally by microbatch or iteration, with each group's
// count, total, mean, p50 and p95 step duration (StepPivot). Sortable, and
// copyable as TSV like every panel's table.
#include "panels/AnalysisPanel.h"
#include "panels/AnalysisTableModel.h"
#include "panels/StepPivot.h"

class QComboBox;
class QLabel;
class QTableView;

namespace pipescope::gui {

class PivotModel : public AnalysisTableModel {
    Q_OBJECT
public:
    explicit PivotModel(QObject* parent = nullptr);
    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;
    void setGrouping(PivotBy by);
    PivotBy grouping() const { return by_; }

private:
    void rebuild();
    std::shared_ptr<const AnalysisResult> result_;
    PivotBy by_ = PivotBy::StageKind;
};

class PivotPanel : public AnalysisPanel {
    Q_OBJECT
public:
    explicit PivotPanel(QWidget* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace) override;

    PivotModel* model() const { return model_; }
    QComboBox* groupingBox() const { return grouping_; }
    QTableView* view() const { return view_; }

private:
    PivotModel* model_;
    QComboBox* grouping_;
    QLabel* note_;
    QTableView* view_;
};

} // namespace pipescope::gui
