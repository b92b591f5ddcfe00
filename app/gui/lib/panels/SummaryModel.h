#pragma once
// The job at a glance as a two-column table (fact | value), in this order:
// verdict, ranks, pipeline (p, dp, v, m or why none was found), schedule with
// confidence, iteration (label, duration, which of how many), GPU idle share,
// then one row per bubble cause ("idle: <cause>", time summed over ranks and
// its share of GPU time), then the bottleneck stage and the balanced lower
// bound when there is a pipeline; for a job read in part, then what the job
// index says of its other replicas. SummaryPanel shows it; it is also what the
// panel copies as TSV.
#include "panels/AnalysisTableModel.h"

#include "analysis/JobPart.h"

namespace pipescope::gui {

class SummaryModel : public AnalysisTableModel {
    Q_OBJECT
public:
    enum Column { FactColumn = 0, ValueColumn };

    explicit SummaryModel(QObject* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;
    // A job read in part: the ranks row says how many of the job's were read,
    // the pipeline row the job's data-parallel degree, and a "replicas" row
    // what the job index says of the replicas not read. Null: read whole.
    void setJobPart(std::shared_ptr<const JobPart> part);

private:
    void rebuild();
    std::shared_ptr<const AnalysisResult> result_;
    std::shared_ptr<const Trace> trace_;
    std::shared_ptr<const JobPart> part_;
};

} // namespace pipescope::gui
