#pragma once
// Replicas whose step compute is at least 5% over the median of their stage's
// other replicas, costliest first, one row each:
//   rank | stage | compute | peers' median | slower by | max cost / iteration
#include "panels/AnalysisTableModel.h"

namespace pipescope::gui {

class StragglerModel : public AnalysisTableModel {
    Q_OBJECT
public:
    explicit StragglerModel(QObject* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;
};

} // namespace pipescope::gui
