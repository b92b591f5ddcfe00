#pragma once
// Stage balance of the selected iteration: bar charts of F and B compute per
// microbatch per stage (mean; B is I + W under zero-bubble schedules), of busy time per stage with the mean (what
// every stage would do if balanced), the balanced-partition lower bound and
// the measured iteration as lines; below, the per-stage table (ImbalanceModel,
// sortable) and the stragglers (StragglerModel).
#include "panels/AnalysisPanel.h"

class QCustomPlot;
class QCPBarsGroup;
class QLabel;
class QTableView;

namespace pipescope::gui {

class ImbalanceModel;
class StragglerModel;

class ImbalancePanel : public AnalysisPanel {
    Q_OBJECT
public:
    explicit ImbalancePanel(QWidget* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace) override;

    ImbalanceModel* model() const { return model_; }
    StragglerModel* stragglerModel() const { return stragglers_; }
    QCustomPlot* stepPlot() const { return stepPlot_; }
    QCustomPlot* busyPlot() const { return busyPlot_; }

private:
    void replot();

    ImbalanceModel* model_;
    StragglerModel* stragglers_;
    QCustomPlot* stepPlot_;
    QCustomPlot* busyPlot_;
    QCPBarsGroup* stepGroup_; // F beside B; bars leave it when the plot clears them
    QLabel* note_;
    QTableView* view_;
    QTableView* stragglerView_;
};

} // namespace pipescope::gui
