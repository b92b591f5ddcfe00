#pragma once
// The selected iteration's critical path: a stacked bar per stage of the time
// the path spends there, split by kind (F, B, I, W, compute, p2p, collective,
// copies, idle) in the report's colours; below, three tables: by stage (the
// main one), by kind and by limiter (CriticalPathModel).
#include "panels/AnalysisPanel.h"

class QCustomPlot;
class QLabel;
class QTableView;

namespace pipescope::gui {

class CriticalPathModel;

class CriticalPathPanel : public AnalysisPanel {
    Q_OBJECT
public:
    explicit CriticalPathPanel(QWidget* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace) override;

    CriticalPathModel* stageModel() const { return byStage_; }
    CriticalPathModel* kindModel() const { return byKind_; }
    CriticalPathModel* limiterModel() const { return byLimiter_; }
    QCustomPlot* plot() const { return plot_; }

private:
    void replot();

    CriticalPathModel* byStage_;
    CriticalPathModel* byKind_;
    CriticalPathModel* byLimiter_;
    QCustomPlot* plot_;
    QLabel* note_;
};

} // namespace pipescope::gui
