#include "panels/MicrobatchModel.h"

namespace pipescope::gui {

MicrobatchModel::MicrobatchModel(QObject* parent) : AnalysisTableModel(parent) { setResult({}, {}); }

void MicrobatchModel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace>)
{
    const QStringList header{QStringLiteral("stage"), QStringLiteral("F min"),  QStringLiteral("F p50"),
                             QStringLiteral("F p95"), QStringLiteral("F max"),  QStringLiteral("longest F"),
                             QStringLiteral("B min"), QStringLiteral("B p50"),  QStringLiteral("B p95"),
                             QStringLiteral("B max"), QStringLiteral("longest B")};
    std::vector<std::vector<Cell>> rows;
    if (result)
        for (const MicrobatchStage& s : result->microbatchSpread.stages) {
            auto mb = [](int m) { return m >= 0 ? integer(m) : text(QStringLiteral("—")); };
            rows.push_back({integer(s.stage), duration(s.forward.minNs), duration(s.forward.p50Ns),
                            duration(s.forward.p95Ns), duration(s.forward.maxNs), mb(s.forward.longest),
                            duration(s.backward.minNs), duration(s.backward.p50Ns), duration(s.backward.p95Ns),
                            duration(s.backward.maxNs), mb(s.backward.longest)});
        }
    setTable(header, std::move(rows));
}

} // namespace pipescope::gui
