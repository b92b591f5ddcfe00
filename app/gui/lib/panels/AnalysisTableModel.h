#pragma once
// The common shape of the analysis tables in the desktop app: a read-only
// table of cells, each with the text shown (formatDuration, formatPercent),
// the raw number used for sorting (SortRole) and an optional tooltip. The
// concrete models (BubbleTableModel, ImbalanceModel, ...) only build rows
// from an AnalysisResult; sorting, alignment and TSV copying live here.
#include "analysis/Analysis.h"
#include "model/Trace.h"

#include <QAbstractTableModel>
#include <QColor>
#include <QModelIndexList>
#include <QStringList>
#include <QVariant>

#include <memory>
#include <vector>

namespace pipescope::gui {

class AnalysisTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Role {
        // Raw value for sorting: qint64 nanoseconds, double fractions, or the
        // display text for text columns. Give it to QSortFilterProxyModel::setSortRole.
        SortRole = Qt::UserRole + 1,
        // The first role free for subclasses.
        FirstCustomRole = Qt::UserRole + 16,
    };

    explicit AnalysisTableModel(QObject* parent = nullptr);

    // Rebuilds the rows from a new result; either pointer may be null (the
    // table is then empty). Models keep the pointers alive as long as they need them.
    virtual void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) = 0;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

protected:
    struct Cell {
        QString text;
        QVariant sort;      // defaults to text
        QString toolTip;
        bool numeric = false; // right-aligned
        bool emphasis = false; // bold (the bottleneck stage)
        QColor foreground;     // text colour when valid (a comparison's faster or slower)
    };
    static Cell text(const QString& s);
    static Cell duration(TimeNs ns);              // "1.234 ms" ("0" for none), exact ns on hover, sorts as qint64
    static Cell durationOrDash(double ns, bool present); // "—" (sorting first) when not present
    static Cell percent(double fraction);          // "12.34%", sorts as double
    static Cell integer(int64_t n);
    static Cell ratio(double x);                   // "1.234x"

    // Replaces header and rows in one model reset.
    void setTable(QStringList header, std::vector<std::vector<Cell>> rows);
    // Extra per-column header data (Qt::DecorationRole colour, tooltip).
    void setHeaderDecoration(int column, const QColor& colour);
    void setHeaderToolTip(int column, const QString& toolTip);

private:
    QStringList header_;
    std::vector<QVariant> headerDecoration_;
    QStringList headerToolTip_;
    std::vector<std::vector<Cell>> rows_;
};

// Tab-separated text of a model as shown (display text, in the model's row
// order, so a sorting proxy copies what the user sees): a header line, then
// one line per row, '\n' line ends. With rows given, only those rows (any
// column of a row selects it). Tabs and line breaks inside cells become spaces.
QString tsvOf(const QAbstractItemModel& model, const QModelIndexList& rows = {});

// Colours of the bubble causes and critical-path kinds, from the palette the
// app shares with the HTML report (core/timeline/Palette.h).
QColor causeColor(BubbleCause cause);
QColor pathKindColor(const std::string& kind); // F B I W compute p2p collective memcpy memset other idle

} // namespace pipescope::gui
