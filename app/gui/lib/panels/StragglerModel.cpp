#include "panels/StragglerModel.h"

namespace pipescope::gui {

StragglerModel::StragglerModel(QObject* parent)
    : AnalysisTableModel(parent)
{
    setResult({}, {});
}

void StragglerModel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace>)
{
    std::vector<std::vector<Cell>> rows;
    if (result)
        for (const Straggler& s : result->imbalance.stragglers)
            rows.push_back({integer(s.rank), integer(s.stage), duration(s.computeNs), duration(s.peerMedianNs),
                            percent(s.relative - 1.0), duration(s.costNs)});
    setTable({QStringLiteral("rank"), QStringLiteral("stage"), QStringLiteral("compute"), QStringLiteral("peers' median"),
              QStringLiteral("slower by"), QStringLiteral("max cost / iteration")},
             std::move(rows));
}

} // namespace pipescope::gui
