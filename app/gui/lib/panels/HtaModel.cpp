#include "panels/HtaModel.h"

#include <cstdio>

namespace pipescope::gui {

HtaModel::HtaModel(QObject* parent)
    : HtaModel(View::Temporal, parent)
{
}

HtaModel::HtaModel(View view, QObject* parent)
    : AnalysisTableModel(parent)
    , view_(view)
{
    setResult({}, {});
}

void HtaModel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace>)
{
    std::vector<std::vector<Cell>> rows;
    if (view_ == View::Temporal) {
        if (result)
            for (const HtaTemporal& x : result->hta.temporal) {
                auto pct = [&](TimeNs v) {
                    return percent(x.kernelTimeNs > 0 ? static_cast<double>(v) / static_cast<double>(x.kernelTimeNs) : 0.0);
                };
                Cell overlap{QStringLiteral("—"), QVariant(-1.0), {}, true};
                if (x.commCompOverlapPct) {
                    // HTA prints this one as a percentage with two decimals already.
                    char buf[32];
                    std::snprintf(buf, sizeof buf, "%.2f%%", *x.commCompOverlapPct);
                    overlap = Cell{QString::fromLatin1(buf), QVariant(*x.commCompOverlapPct), {}, true};
                }
                rows.push_back({integer(x.rank), duration(x.kernelTimeNs), duration(x.idleTimeNs), pct(x.idleTimeNs), duration(x.computeTimeNs),
                                pct(x.computeTimeNs), duration(x.nonComputeTimeNs), pct(x.nonComputeTimeNs), overlap});
            }
        setTable({QStringLiteral("rank"), QStringLiteral("kernel time"), QStringLiteral("idle"), QStringLiteral("idle %"),
                  QStringLiteral("compute"), QStringLiteral("compute %"), QStringLiteral("non-compute"), QStringLiteral("non-compute %"),
                  QStringLiteral("comm/comp overlap")},
                 std::move(rows));
    } else {
        if (result)
            for (const HtaStreamIdle& x : result->hta.idle)
                rows.push_back({integer(x.rank), integer(x.stream), duration(x.hostWaitNs), duration(x.kernelWaitNs), duration(x.otherNs)});
        setTable({QStringLiteral("rank"), QStringLiteral("stream"), QStringLiteral("host wait"), QStringLiteral("kernel wait"),
                  QStringLiteral("other")},
                 std::move(rows));
    }
}

} // namespace pipescope::gui
