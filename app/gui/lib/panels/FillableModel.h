#pragma once
// Per stage, the bubbles of the selected iteration that could hold extra work
// (AnalysisResult::fillableBubbles; docs/analysis.md), one row each:
//   stage | rank | bubbles | total | longest | one column per length class
// The length classes shown are those some stage has (<0.1 ms, 0.1-0.2 ms, ...,
// each twice the one before), each cell the number of bubbles in it.
#include "panels/AnalysisTableModel.h"

namespace pipescope::gui {

class FillableModel : public AnalysisTableModel {
    Q_OBJECT
public:
    explicit FillableModel(QObject* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;
};

} // namespace pipescope::gui
