#pragma once
// Compare mode on the timeline: a baseline run's steps, bubbles and GPU
// streams shown beside the job's, each rank's baseline tracks in the job's
// group for the same stage, shifted so that the two runs' compared
// iterations start together.
#include "timeline/TimelineModel.h"

#include <string>

namespace pipescope::timeline {

// The job's model with the baseline's Steps, Bubbles and Kernels lanes
// appended (CPU lanes are left out), each labelled `prefix` + its label,
// moved by `shiftNs` (the job's iteration start minus the baseline's), with
// Lane::baseline set and no link to the baseline's trace (activity -1,
// detail -1 on kernels). The job's lanes keep their indices.
TimelineModel withBaselineTracks(const TimelineModel& job, const TimelineModel& baseline, TimeNs shiftNs,
                                 const std::string& prefix);

} // namespace pipescope::timeline
