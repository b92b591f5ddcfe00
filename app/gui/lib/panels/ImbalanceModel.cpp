#include "panels/ImbalanceModel.h"

namespace pipescope::gui {

ImbalanceModel::ImbalanceModel(QObject* parent)
    : AnalysisTableModel(parent)
{
    setResult({}, {});
}

void ImbalanceModel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace>)
{
    const QStringList header{QStringLiteral("stage"),  QStringLiteral("ranks"),  QStringLiteral("F mean"), QStringLiteral("F p50"),
                             QStringLiteral("F p95"),  QStringLiteral("B mean"), QStringLiteral("B p50"),  QStringLiteral("B p95"),
                             QStringLiteral("busy"),   QStringLiteral("busy / mean")};
    std::vector<std::vector<Cell>> rows;
    if (result && result->pipeline.found) {
        const Imbalance& im = result->imbalance;
        double mean = 0;
        for (const auto& s : im.stages)
            mean += static_cast<double>(s.busyNs);
        if (!im.stages.empty())
            mean /= static_cast<double>(im.stages.size());
        for (const auto& s : im.stages) {
            QString ranks;
            for (int r : s.ranks)
                ranks += (ranks.isEmpty() ? QString() : QStringLiteral(",")) + QString::number(r);
            std::vector<Cell> row{integer(s.stage), text(ranks),
                                  durationOrDash(s.forwardNs.mean, s.forwardNs.count > 0),
                                  durationOrDash(s.forwardNs.p50, s.forwardNs.count > 0),
                                  durationOrDash(s.forwardNs.p95, s.forwardNs.count > 0),
                                  durationOrDash(s.backwardNs.mean, s.backwardNs.count > 0),
                                  durationOrDash(s.backwardNs.p50, s.backwardNs.count > 0),
                                  durationOrDash(s.backwardNs.p95, s.backwardNs.count > 0),
                                  duration(s.busyNs),
                                  ratio(mean > 0 ? static_cast<double>(s.busyNs) / mean : 0.0)};
            if (s.stage == im.bottleneckStage)
                for (Cell& c : row) {
                    c.emphasis = true;
                    c.toolTip = QStringLiteral("the bottleneck (busiest) stage");
                }
            rows.push_back(std::move(row));
        }
    }
    setTable(header, std::move(rows));
    setHeaderToolTip(RatioColumn, QStringLiteral("the stage's busy time over the mean of all stages"));
}

} // namespace pipescope::gui
