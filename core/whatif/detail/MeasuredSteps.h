#pragma once
// Steps of CostModel::fromMeasured (CostModelFromMeasured.cpp) that read the
// stage times and the iteration's tail off a measured pipeline, each testable
// alone (tst_whatif_steps). Internal to whatif/.
#include "analysis/MeasuredPipeline.h"
#include "whatif/CostModel.h"

#include <array>
#include <optional>
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

// Each pipeline rank's host gap before a forward and before a backward: the
// median, over its steps whose input had been produced (by every replica)
// before its previous step ended and with no exchange ending between, of the
// time from the previous step's end to the step's start. 0 where fewer than
// three steps show it; empty when no rank does, or when on every rank their
// first quartile adds up to less than 5% of the iteration over its steps
// (launch noise, or waits of another kind: CostModel::stepGapNs).
//
// An input from another rank counts as there `remoteLatency` after its
// producer ended (remoteInputLatency, where the trace times no transfer).
// Where a rank and kind show at least three such steps with an input from
// another rank and three with one of its own (or none: the data loader),
// `all` holds the first's median and `local` the second's; elsewhere `all`
// holds the median over every step and `local` -1. `local` is empty when no
// rank and kind tell the two apart (CostModel::localStepGapNs).
struct MeasuredStepGaps {
    std::vector<std::array<TimeNs, 2>> all, local;
};
MeasuredStepGaps measuredStepGaps(const MeasuredPipeline& measured, const MeasuredShape& shape, TimeNs remoteLatency = 0);

// Where the trace's messages do not say when their bytes left (none, or at
// least three in four sends of exactly 1 ns: the instants a timing file
// implies): the median, over steps whose input came from another rank after
// the step's rank had finished its previous step, of the time from the
// input's producer ending to the step starting. Unset with fewer than eight
// such steps, or where the messages are timed.
std::optional<TimeNs> remoteInputLatency(const MeasuredPipeline& measured, const MeasuredShape& shape);

// The steps that waited for their input (produced after the rank's previous
// step ended): the median time from their input's end to their start, and
// the tenth percentile of what they took beyond their rank's host gap (at
// least 0). Unset with fewer than eight such steps or without gaps.
struct WaitedInput {
    std::optional<TimeNs> medianAfterInputNs, beyondGapNs;
};
WaitedInput waitedInputLatency(const MeasuredPipeline& measured, const MeasuredShape& shape,
                               const std::vector<std::array<TimeNs, 2>>& gaps);

// The order one replica ran its steps in, per pipeline rank, when it holds
// the built-in schedule's steps in another order (and is a valid schedule);
// nullopt when it is the built-in order or not a whole one.
std::optional<Schedule> measuredOrder(const MeasuredPipeline& measured, const MeasuredShape& shape);

// The time after the last step that the measured all-reduce, the
// pipeline-wide collective (c.pipelineSyncNs) and the optimizer do not
// explain, carried as optimizer time; when they explain more than there is,
// the optimizer and then the all-reduce are cut to what there is. Reads
// c.rankStartNs (with them the iteration starts at measured.iterationStart)
// and sets c.measuredOptimizerNs and c.measuredAllReduceNs. Nothing without
// an iteration time or steps.
void attributeIterationTail(const MeasuredPipeline& measured, CostModel& c);

} // namespace pipescope::whatif::detail
