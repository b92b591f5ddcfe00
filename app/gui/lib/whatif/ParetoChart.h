#pragma once
// The time-memory front of a ranked search (docs/whatif.md, "Recomputation
// and the memory-time front"): every searched configuration as a point,
// predicted iteration time against peak memory, the Pareto front joined and
// highlighted, out-of-memory points in red and the GPU memory limit as a
// dashed line. Clicking a point asks for its configuration (rowClicked).
#include "whatif/WhatIf.h"

#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

class QCustomPlot;

namespace pipescope::gui {

class ParetoChart : public QWidget {
    Q_OBJECT

public:
    explicit ParetoChart(QWidget* parent = nullptr);

    void setRows(std::shared_ptr<const std::vector<whatif::SearchRow>> rows, std::optional<int64_t> memoryLimitBytes);
    int rowCount() const { return rows_ ? static_cast<int>(rows_->size()) : 0; }
    // The row whose point lies within a few pixels of `pos` (plot
    // coordinates), nearest first; -1 when none does.
    int rowAt(const QPoint& pos) const;
    // Where row `row` is drawn, in the plot's coordinates.
    QPoint pointOf(int row) const;
    QCustomPlot* plot() const { return plot_; }
    // Rows drawn as on the front, in row order.
    std::vector<int> frontRows() const;

signals:
    void rowClicked(int row);

private:
    QCustomPlot* plot_;
    std::shared_ptr<const std::vector<whatif::SearchRow>> rows_;
};

} // namespace pipescope::gui
