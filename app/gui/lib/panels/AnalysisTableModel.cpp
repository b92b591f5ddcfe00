#include "panels/AnalysisTableModel.h"
#include "views/QtPalette.h"

#include "timeline/Palette.h"
#include "util/Format.h"

#include <QFont>
#include <QSet>

#include <algorithm>
#include <cstdio>
#include <string_view>

namespace pipescope::gui {

AnalysisTableModel::AnalysisTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

int AnalysisTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int AnalysisTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(header_.size());
}

QVariant AnalysisTableModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& row = rows_[static_cast<size_t>(index.row())];
    if (static_cast<size_t>(index.column()) >= row.size())
        return {};
    const Cell& c = row[static_cast<size_t>(index.column())];
    switch (role) {
    case Qt::DisplayRole:
        return c.text;
    case Qt::ToolTipRole:
        return c.toolTip.isEmpty() ? QVariant() : QVariant(c.toolTip);
    case Qt::TextAlignmentRole:
        return c.numeric ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter)) : QVariant(int(Qt::AlignLeft | Qt::AlignVCenter));
    case Qt::FontRole:
        if (c.emphasis) {
            QFont f;
            f.setBold(true);
            return f;
        }
        return {};
    case Qt::ForegroundRole:
        return c.foreground.isValid() ? QVariant(c.foreground) : QVariant();
    case SortRole:
        return c.sort.isValid() ? c.sort : QVariant(c.text);
    default:
        return {};
    }
}

QVariant AnalysisTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= header_.size())
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (role) {
    case Qt::DisplayRole:
        return header_[section];
    case Qt::DecorationRole:
        return static_cast<size_t>(section) < headerDecoration_.size() ? headerDecoration_[static_cast<size_t>(section)] : QVariant();
    case Qt::ToolTipRole:
        return section < headerToolTip_.size() && !headerToolTip_[section].isEmpty() ? QVariant(headerToolTip_[section]) : QVariant();
    default:
        return {};
    }
}

void AnalysisTableModel::setTable(QStringList header, std::vector<std::vector<Cell>> rows)
{
    beginResetModel();
    header_ = std::move(header);
    headerDecoration_.assign(static_cast<size_t>(header_.size()), QVariant());
    headerToolTip_ = QStringList();
    for (int i = 0; i < header_.size(); ++i)
        headerToolTip_.append(QString());
    rows_ = std::move(rows);
    endResetModel();
}

void AnalysisTableModel::setHeaderDecoration(int column, const QColor& colour)
{
    if (column >= 0 && static_cast<size_t>(column) < headerDecoration_.size()) {
        headerDecoration_[static_cast<size_t>(column)] = colour;
        Q_EMIT headerDataChanged(Qt::Horizontal, column, column);
    }
}

void AnalysisTableModel::setHeaderToolTip(int column, const QString& toolTip)
{
    if (column >= 0 && column < headerToolTip_.size()) {
        headerToolTip_[column] = toolTip;
        Q_EMIT headerDataChanged(Qt::Horizontal, column, column);
    }
}

AnalysisTableModel::Cell AnalysisTableModel::text(const QString& s)
{
    return Cell{s, QVariant(s), QString(), false, false};
}

AnalysisTableModel::Cell AnalysisTableModel::duration(TimeNs ns)
{
    // None at all reads "0" beside "1.234 ms", not "0 ns" (which reads as a measured tiny time).
    const QString shown = ns == 0 ? QStringLiteral("0") : QString::fromStdString(formatDuration(ns));
    return Cell{shown, QVariant(qint64(ns)), QString::number(ns) + QStringLiteral(" ns"), true};
}

AnalysisTableModel::Cell AnalysisTableModel::durationOrDash(double ns, bool present)
{
    if (!present)
        return Cell{QStringLiteral("—"), QVariant(qint64(-1)), QString(), true, false};
    return duration(static_cast<TimeNs>(ns + 0.5));
}

AnalysisTableModel::Cell AnalysisTableModel::percent(double fraction)
{
    return Cell{QString::fromStdString(formatPercent(fraction)), QVariant(fraction), QString(), true};
}

AnalysisTableModel::Cell AnalysisTableModel::integer(int64_t n)
{
    return Cell{QString::number(n), QVariant(qint64(n)), QString(), true};
}

AnalysisTableModel::Cell AnalysisTableModel::ratio(double x)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3fx", x);
    return Cell{QString::fromLatin1(buf), QVariant(x), QString(), true};
}

namespace {

QString tsvCell(QString s)
{
    for (QChar& ch : s)
        if (ch == QLatin1Char('\t') || ch == QLatin1Char('\n') || ch == QLatin1Char('\r'))
            ch = QLatin1Char(' ');
    return s;
}

} // namespace

QString tsvOf(const QAbstractItemModel& model, const QModelIndexList& rows)
{
    QString out;
    const int cols = model.columnCount();
    for (int c = 0; c < cols; ++c)
        out += (c ? QStringLiteral("\t") : QString()) + tsvCell(model.headerData(c, Qt::Horizontal, Qt::DisplayRole).toString());
    out += QLatin1Char('\n');
    QList<int> wanted;
    if (rows.isEmpty()) {
        for (int r = 0; r < model.rowCount(); ++r)
            wanted.append(r);
    } else {
        QSet<int> seen;
        for (const QModelIndex& i : rows)
            if (i.isValid() && i.model() == &model && !seen.contains(i.row())) {
                seen.insert(i.row());
                wanted.append(i.row());
            }
        std::sort(wanted.begin(), wanted.end());
    }
    for (int r : wanted) {
        for (int c = 0; c < cols; ++c)
            out += (c ? QStringLiteral("\t") : QString()) + tsvCell(model.data(model.index(r, c), Qt::DisplayRole).toString());
        out += QLatin1Char('\n');
    }
    return out;
}

namespace {


} // namespace

QColor causeColor(BubbleCause cause) { return toQColor(timeline::causeColor(cause)); }

QColor pathKindColor(const std::string& kind)
{
    if (kind.size() == 1 && std::string_view("FBIW").find(kind[0]) != std::string_view::npos)
        return toQColor(timeline::stepColor(static_cast<StepKind>(std::string_view("FBIW").find(kind[0]))));
    if (kind == "compute")
        return toQColor(timeline::classColor(WorkClass::Compute));
    if (kind == "p2p")
        return toQColor(timeline::classColor(WorkClass::P2p));
    if (kind == "collective")
        return toQColor(timeline::classColor(WorkClass::Collective));
    if (kind == "memcpy")
        return toQColor(timeline::classColor(WorkClass::Memcpy));
    if (kind == "memset")
        return toQColor(timeline::classColor(WorkClass::Memset));
    // Idle on the path has no cause of its own: the beige of cause "other".
    if (kind == "idle")
        return causeColor(BubbleCause::Other);
    return toQColor(timeline::classColor(WorkClass::Other));
}

} // namespace pipescope::gui
