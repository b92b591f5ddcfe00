#include "panels/FillableModel.h"

#include "util/Format.h"

#include <algorithm>

namespace pipescope::gui {

FillableModel::FillableModel(QObject* parent) : AnalysisTableModel(parent) { setResult({}, {}); }

void FillableModel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace>)
{
    std::vector<const FillableBubbles*> shown;
    if (result)
        for (const FillableBubbles& f : result->fillableBubbles)
            if (f.iteration == result->selectedIteration)
                shown.push_back(&f);
    std::vector<int> buckets;
    for (int k = 0; k < kFillableBuckets; ++k)
        if (std::any_of(shown.begin(), shown.end(), [k](const FillableBubbles* f) { return f->histogram[static_cast<size_t>(k)] > 0; }))
            buckets.push_back(k);
    auto d = [](TimeNs ns) { return QString::fromStdString(formatDuration(ns)); };
    QStringList header{QStringLiteral("stage"), QStringLiteral("rank"), QStringLiteral("bubbles"), QStringLiteral("total"),
                       QStringLiteral("longest")};
    for (int k : buckets) {
        const TimeNs lo = fillableBucketStartNs(k);
        if (k == 0)
            header << QStringLiteral("< %1").arg(d(kFillableBucketBaseNs));
        else if (k == kFillableBuckets - 1)
            header << QStringLiteral("≥ %1").arg(d(lo));
        else
            header << QStringLiteral("%1–%2").arg(d(lo), d(2 * lo));
    }
    std::vector<std::vector<Cell>> rows;
    for (const FillableBubbles* f : shown) {
        std::vector<Cell> row{integer(f->stage), integer(f->rank), integer(f->count), duration(f->totalNs), duration(f->longestNs)};
        for (int k : buckets)
            row.push_back(integer(f->histogram[static_cast<size_t>(k)]));
        rows.push_back(std::move(row));
    }
    setTable(std::move(header), std::move(rows));
}

} // namespace pipescope::gui
