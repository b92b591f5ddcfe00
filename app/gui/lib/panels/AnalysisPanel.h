#pragma once
// Base of the analysis panels the main window docks (SummaryPanel,
// BubblePanel, ImbalancePanel, CriticalPathPanel, HtaPanel,
// DiagnosticsPanel). Each panel shows one immutable AnalysisResult and the
// Trace it came from, and lets the user copy its tables as tab-separated text:
// Ctrl+C (QKeySequence::Copy) on a table copies its selected rows, or all of
// them when none is selected, and its context menu has "Copy table as TSV".
#include "analysis/Analysis.h"
#include "model/Trace.h"

#include <QAbstractItemModel>
#include <QWidget>

#include <memory>
#include <vector>

class QAbstractItemModel;
class QTableView;

namespace pipescope::gui {

class AnalysisPanel : public QWidget {
    Q_OBJECT
public:
    explicit AnalysisPanel(QWidget* parent = nullptr);

    // Shows a new result; both may be null (the panel is then empty). The
    // panel keeps the pointers for as long as it shows them.
    virtual void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace) = 0;

    // TSV text of the panel's table number `table` (0: the main one), as
    // shown (sorted as the view sorts it); selected rows only when `selectionOnly`
    // and rows are selected. Empty for a table that does not exist.
    QString tableTsv(int table = 0, bool selectionOnly = false) const;
    int tableCount() const { return static_cast<int>(tables_.size()); }

public Q_SLOTS:
    // Puts the main table on the clipboard as TSV (selected rows, else all).
    void copyTable();

protected:
    // Makes a table copyable (Ctrl+C, context menu); the first registered is the main one.
    void registerTable(QTableView* view);

    std::shared_ptr<const AnalysisResult> result_;
    std::shared_ptr<const Trace> trace_;

private:
    void copyView(QTableView* view) const;
    std::vector<QTableView*> tables_;
};

// A read-only table view with the panels' defaults: sortable through a
// QSortFilterProxyModel on AnalysisTableModel::SortRole when `sortable`,
// whole-row selection, alternating rows, columns sized to their contents.
QTableView* makeTableView(QAbstractItemModel* model, bool sortable, QWidget* parent);

} // namespace pipescope::gui
