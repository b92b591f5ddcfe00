#pragma once
// Per-stage balance of the selected iteration: one row per stage,
//   stage | ranks | F mean | F p50 | F p95 | B mean | B p50 | B p95 | busy | busy / mean
// F and B are compute per microbatch (docs/analysis.md, section 6); busy is
// the stage's compute in the iteration (mean over replicas); the last column
// is busy over the mean of all stages. The bottleneck stage's row is bold.
#include "panels/AnalysisTableModel.h"

namespace pipescope::gui {

class ImbalanceModel : public AnalysisTableModel {
    Q_OBJECT
public:
    enum Column { StageColumn = 0, RanksColumn, FMeanColumn, FP50Column, FP95Column, BMeanColumn, BP50Column, BP95Column, BusyColumn, RatioColumn };

    explicit ImbalanceModel(QObject* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;
};

} // namespace pipescope::gui
