#pragma once
// Steps of CostModel::fromMeasured (CostModelFromMeasured.cpp) that read the
// stage times and the iteration's tail off a measured pipeline, each testable
// alone (tst_whatif_steps). Internal to whatif/.
#include "analysis/MeasuredPipeline.h"
#include "whatif/CostModel.h"

#include <vector>

namespace pipescope::whatif::detail {

// The measured pipeline's shape: p ranks of v chunks each, S = p x v virtual
// stages, m microbatches, run in the order of `kind`.
struct MeasuredShape {
    int p = 1, v = 1, S = 1, m = 1;
    ScheduleKind kind = ScheduleKind::OneFOneB;
};

// Mean step times per virtual stage, -1 where the trace has none: the
// forward, the backward (B, else I + W when split, else I alone) and, where
// the backward is split, I's share of I + W.
struct StageStepTimes {
    std::vector<double> forward, backward, inputShare;
};

// Each virtual stage's mean step times over the measured steps (a step's
// stage and chunk give its virtual stage; steps outside the pipeline or
// ending before they start are left out).
StageStepTimes fitStepTimes(const MeasuredPipeline& measured, const MeasuredShape& shape);

// The time after the last step that the measured all-reduce, the
// pipeline-wide collective (c.pipelineSyncNs) and the optimizer do not
// explain, carried as optimizer time; when they explain more than there is,
// the optimizer and then the all-reduce are cut to what there is. Reads
// c.rankStartNs (with them the iteration starts at measured.iterationStart)
// and sets c.measuredOptimizerNs and c.measuredAllReduceNs. Nothing without
// an iteration time or steps.
void attributeIterationTail(const MeasuredPipeline& measured, CostModel& c);

} // namespace pipescope::whatif::detail
