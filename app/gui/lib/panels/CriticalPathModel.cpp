#include "panels/CriticalPathModel.h"

#include "analysis/Verdict.h"

#include <algorithm>

namespace pipescope::gui {

CriticalPathModel::CriticalPathModel(QObject* parent)
    : CriticalPathModel(Breakdown::ByStage, parent)
{
}

CriticalPathModel::CriticalPathModel(Breakdown breakdown, QObject* parent)
    : AnalysisTableModel(parent)
    , breakdown_(breakdown)
{
    setResult({}, {});
}

void CriticalPathModel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace>)
{
    std::vector<std::vector<Cell>> rows;
    keys_.clear();
    const CriticalPath* cp = result ? &result->criticalPath : nullptr;
    const TimeNs len = cp ? cp->end - cp->start : 0;
    auto shareOf = [&](TimeNs ns) { return percent(len > 0 ? static_cast<double>(ns) / static_cast<double>(len) : 0.0); };
    QString head;
    if (breakdown_ == Breakdown::ByStage) {
        head = QStringLiteral("stage");
        if (cp && !cp->segments.empty())
            for (const auto& [stage, ns] : cp->byStage) {
                Cell name = stage >= 0 ? text(QStringLiteral("stage %1").arg(stage)) : text(QStringLiteral("outside the pipeline"));
                name.sort = qint64(stage);
                rows.push_back({name, duration(ns), shareOf(ns)});
                keys_.emplace_back(stage);
            }
    } else if (breakdown_ == Breakdown::ByKind) {
        head = QStringLiteral("kind");
        if (cp && !cp->segments.empty()) {
            std::vector<std::pair<std::string, TimeNs>> kinds(cp->byKind.begin(), cp->byKind.end());
            std::stable_sort(kinds.begin(), kinds.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
            for (const auto& [kind, ns] : kinds) {
                rows.push_back({text(QString::fromStdString(kind)), duration(ns), shareOf(ns)});
                keys_.emplace_back(QString::fromStdString(kind));
            }
        }
    } else {
        head = QStringLiteral("limiter");
        if (cp && !cp->segments.empty()) {
            const PathBreakdown pb = pathBreakdown(*result);
            for (int l = 0; l < kPathLimiters; ++l) {
                const TimeNs ns = pb.byLimiter[static_cast<size_t>(l)];
                if (ns <= 0)
                    continue;
                rows.push_back({text(QString::fromLatin1(toString(static_cast<PathLimiter>(l)))), duration(ns), shareOf(ns)});
                keys_.emplace_back(l);
            }
        }
    }
    setTable({head, QStringLiteral("time"), QStringLiteral("share")}, std::move(rows));
    setHeaderToolTip(ShareColumn, QStringLiteral("share of the critical path's length"));
}

QVariant CriticalPathModel::data(const QModelIndex& index, int role) const
{
    if (role == KeyRole)
        return checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid) ? keys_[static_cast<size_t>(index.row())]
                                                                                                   : QVariant();
    return AnalysisTableModel::data(index, role);
}

} // namespace pipescope::gui
