#pragma once
// Replicas of a stage at least 5% busier than the stage's median, one row each:
//   rank | stage | busy | x stage median
#include "AnalysisTableModel.h"

namespace pipescope::gui {

class StragglerModel : public AnalysisTableModel {
    Q_OBJECT
public:
    explicit StragglerModel(QObject* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;
};

} // namespace pipescope::gui
