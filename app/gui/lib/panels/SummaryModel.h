#pragma once
// The job at a glance as a two-column table (fact | value), in this order:
// verdict, ranks, pipeline (p, dp, v, m or why none was found), schedule with
// confidence, iteration (label, duration, which of how many), GPU idle share,
// then one row per bubble cause ("idle: <cause>", time summed over ranks and
// its share of GPU time), then the bottleneck stage and the balanced lower
// bound when there is a pipeline. SummaryPanel shows it; it is also what the
// panel copies as TSV.
#include "panels/AnalysisTableModel.h"

namespace pipescope::gui {

class SummaryModel : public AnalysisTableModel {
    Q_OBJECT
public:
    enum Column { FactColumn = 0, ValueColumn };

    explicit SummaryModel(QObject* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;
};

} // namespace pipescope::gui
