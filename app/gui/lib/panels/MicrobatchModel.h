#pragma once
// Uneven microbatches (AnalysisResult::microbatchSpread; docs/analysis.md):
// per stage, the spread of forward and backward step time over the
// microbatches of the selected iteration, one row each:
//   stage | F min | F p50 | F p95 | F max | longest F | B min | B p50 | B p95 | B max | longest B
#include "panels/AnalysisTableModel.h"

namespace pipescope::gui {

class MicrobatchModel : public AnalysisTableModel {
    Q_OBJECT
public:
    explicit MicrobatchModel(QObject* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;
};

} // namespace pipescope::gui
