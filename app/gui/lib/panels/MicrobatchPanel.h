#pragma once
// Uneven microbatches of the selected iteration (docs/analysis.md): a bar
// chart of each microbatch's size against the mean (forward plus backward
// over all stages; bars of uneven microbatches past the spread threshold are
// coloured), a line saying how uneven they are, and per stage the spread of
// F and B over the microbatches (MicrobatchModel). What the spread costs, and
// the orders to run them in, are in the What-if editor.
#include "panels/AnalysisPanel.h"

class QCustomPlot;
class QLabel;
class QTableView;

namespace pipescope::gui {

class MicrobatchModel;

class MicrobatchPanel : public AnalysisPanel {
    Q_OBJECT
public:
    explicit MicrobatchPanel(QWidget* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace) override;

    MicrobatchModel* model() const { return model_; }
    QCustomPlot* sizePlot() const { return plot_; }
    QString summary() const;

private:
    MicrobatchModel* model_;
    QCustomPlot* plot_;
    QLabel* note_;
    QTableView* view_;
};

} // namespace pipescope::gui
