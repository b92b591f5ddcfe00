#pragma once
// Idle time per rank by cause as a sortable table (BubbleTableModel behind a
// QSortFilterProxyModel sorting on raw numbers). Activating a cell (double
// click, Enter) emits jumpTo with the longest bubble of that rank and cause
// (of any cause for the rank, stage, idle and idle % columns), so the main
// window can show it on the timeline.
#include "panels/AnalysisPanel.h"

class QLabel;
class QTableView;

namespace pipescope::gui {

class BubbleTableModel;
class FillableModel;

class BubblePanel : public AnalysisPanel {
    Q_OBJECT
public:
    explicit BubblePanel(QWidget* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace) override;

    BubbleTableModel* model() const { return model_; }
    QTableView* view() const { return view_; }
    FillableModel* fillableModel() const { return fillable_; }

Q_SIGNALS:
    // [startNs, endNs) on the trace clock, on `rank`.
    void jumpTo(qint64 startNs, qint64 endNs, int rank);

private:
    void activate(const QModelIndex& proxyIndex);

    BubbleTableModel* model_;
    QTableView* view_;
    QLabel* totals_;
    FillableModel* fillable_;
    QTableView* fillableView_;
};

} // namespace pipescope::gui
