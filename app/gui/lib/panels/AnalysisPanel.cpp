#include "panels/AnalysisPanel.h"

#include "panels/AnalysisTableModel.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QSortFilterProxyModel>
#include <QTableView>

namespace pipescope::gui {

AnalysisPanel::AnalysisPanel(QWidget* parent)
    : QWidget(parent)
{
}

void AnalysisPanel::registerTable(QTableView* view)
{
    tables_.push_back(view);
    auto* copy = new QAction(tr("Copy table as TSV"), view);
    copy->setShortcut(QKeySequence::Copy);
    // Only while this table has focus, so two panels in one window do not fight over Ctrl+C.
    copy->setShortcutContext(Qt::WidgetShortcut);
    connect(copy, &QAction::triggered, this, [this, view] { copyView(view); });
    view->addAction(copy);
    view->setContextMenuPolicy(Qt::ActionsContextMenu);
}

QString AnalysisPanel::tableTsv(int table, bool selectionOnly) const
{
    if (table < 0 || static_cast<size_t>(table) >= tables_.size())
        return {};
    const QTableView* view = tables_[static_cast<size_t>(table)];
    if (!view->model())
        return {};
    QModelIndexList rows;
    if (selectionOnly && view->selectionModel())
        rows = view->selectionModel()->selectedIndexes();
    return tsvOf(*view->model(), rows);
}

void AnalysisPanel::copyView(QTableView* view) const
{
    for (size_t i = 0; i < tables_.size(); ++i)
        if (tables_[i] == view)
            QApplication::clipboard()->setText(tableTsv(static_cast<int>(i), true));
}

void AnalysisPanel::copyTable()
{
    if (!tables_.empty())
        copyView(tables_.front());
}

QTableView* makeTableView(QAbstractItemModel* model, bool sortable, QWidget* parent)
{
    auto* view = new QTableView(parent);
    if (sortable) {
        auto* proxy = new QSortFilterProxyModel(view);
        proxy->setSourceModel(model);
        proxy->setSortRole(AnalysisTableModel::SortRole);
        view->setModel(proxy);
        // Model order (stage, replica, rank) until the user clicks a header.
        view->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
        view->setSortingEnabled(true);
    } else {
        view->setModel(model);
    }
    view->setEditTriggers(QAbstractItemView::NoEditTriggers);
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->setSelectionMode(QAbstractItemView::ExtendedSelection);
    view->setAlternatingRowColors(true);
    view->verticalHeader()->setVisible(false);
    view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    view->horizontalHeader()->setStretchLastSection(true);
    return view;
}

} // namespace pipescope::gui
