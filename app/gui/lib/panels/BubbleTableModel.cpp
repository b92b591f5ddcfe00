#include "panels/BubbleTableModel.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace pipescope::gui {

BubbleTableModel::BubbleTableModel(QObject* parent)
    : AnalysisTableModel(parent)
{
    setResult({}, {});
}

std::optional<BubbleCause> BubbleTableModel::causeOfColumn(int column)
{
    if (column >= FirstCauseColumn && column < FirstCauseColumn + kBubbleCauses)
        return static_cast<BubbleCause>(column - FirstCauseColumn);
    return std::nullopt;
}

void BubbleTableModel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace>)
{
    QStringList header{QStringLiteral("rank"), QStringLiteral("stage")};
    for (int c = 0; c < kBubbleCauses; ++c)
        header.append(QString::fromLatin1(toString(static_cast<BubbleCause>(c))));
    header << QStringLiteral("idle") << QStringLiteral("idle %");

    std::vector<const RankIdle*> idle;
    if (result)
        for (const RankIdle& ri : result->idle)
            if (ri.iteration == result->selectedIteration)
                idle.push_back(&ri);
    // Lanes in the order of the timeline and the report: stage, replica, rank.
    std::map<int, std::pair<int, int>> order;
    if (result)
        for (const auto& a : result->pipeline.stageMap)
            order[a.rank] = {a.stage < 0 ? 1 << 30 : a.stage, a.replica};
    auto key = [&](const RankIdle* ri) {
        auto f = order.find(ri->rank);
        auto sr = f != order.end() ? f->second : std::make_pair(1 << 30, 0);
        return std::make_tuple(sr.first, sr.second, ri->rank);
    };
    std::stable_sort(idle.begin(), idle.end(), [&](const RankIdle* x, const RankIdle* y) { return key(x) < key(y); });

    std::vector<std::vector<Cell>> rows;
    rankOfRow_.clear();
    biggest_.clear();
    std::map<int, size_t> rowOfRank;
    for (const RankIdle* ri : idle) {
        std::vector<Cell> row{integer(ri->rank), ri->stage >= 0 ? integer(ri->stage) : Cell{QStringLiteral("—"), QVariant(qint64(-1)), {}, true}};
        for (int c = 0; c < kBubbleCauses; ++c)
            row.push_back(duration(ri->byCause[static_cast<size_t>(c)]));
        row.push_back(duration(ri->idleNs));
        row.push_back(percent(ri->windowNs > 0 ? static_cast<double>(ri->idleNs) / static_cast<double>(ri->windowNs) : 0.0));
        rowOfRank[ri->rank] = rows.size();
        rows.push_back(std::move(row));
        rankOfRow_.push_back(ri->rank);
        biggest_.emplace_back();
    }
    if (result)
        for (const Bubble& b : result->bubbles) {
            if (b.iteration != result->selectedIteration)
                continue;
            auto it = rowOfRank.find(b.rank);
            if (it == rowOfRank.end())
                continue;
            auto& spans = biggest_[it->second];
            // Longest first; the earliest of equally long ones, so the answer does not depend on input order.
            auto better = [&](const Span& s) { return b.end - b.start > s.end - s.start || (b.end - b.start == s.end - s.start && b.start < s.start); };
            Span& byCause = spans[static_cast<size_t>(b.cause)];
            if (better(byCause))
                byCause = {b.start, b.end};
            Span& any = spans[kBubbleCauses];
            if (better(any))
                any = {b.start, b.end};
        }
    setTable(header, std::move(rows));
    for (int c = 0; c < kBubbleCauses; ++c)
        setHeaderDecoration(FirstCauseColumn + c, causeColor(static_cast<BubbleCause>(c)));
    setHeaderToolTip(IdleShareColumn, QStringLiteral("idle time as a share of the iteration window"));
}

QVariant BubbleTableModel::data(const QModelIndex& index, int role) const
{
    if ((role == BiggestBubbleRole || role == RankRole) &&
        checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
        const size_t row = static_cast<size_t>(index.row());
        if (role == RankRole)
            return rankOfRow_[row];
        const auto cause = causeOfColumn(index.column());
        const Span& s = biggest_[row][cause ? static_cast<size_t>(*cause) : static_cast<size_t>(kBubbleCauses)];
        if (s.end <= s.start)
            return {};
        return QVariantList{qint64(s.start), qint64(s.end)};
    }
    return AnalysisTableModel::data(index, role);
}

} // namespace pipescope::gui
