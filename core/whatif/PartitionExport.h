#pragma once
// A partition in the words of the frameworks that take one: Megatron-LM's
// --pipeline-model-parallel-layout string and its
// --decoder-first/last-pipeline-num-layers flags, and per-stage lists of the
// modules each stage holds. Pure formatting: the app's what-if editor copies
// these to the clipboard, the CLI and tests call them directly.
#include "whatif/CostModel.h"
#include "model/Schedule.h"

#include <optional>
#include <string>
#include <vector>

namespace pipescope::whatif {

// The layout value for stages listed in Megatron-LM's order (entry
// vpp_rank * pp + pp_rank), embedding first and loss last:
// {4, 4, 4, 4} -> "Et*4|t*4|t*4|t*4,L"; a one-layer stage is "t".
std::string megatronLayout(const Partition& partition);

// The layout for a partition under a schedule, or nullopt (with the reason in
// `why`) when Megatron-LM could not place the stages as the schedule does:
// Megatron puts virtual stage s on rank s mod pp as chunk s / pp, which
// V-shaped schedules (zb-v, dualpipev) do not.
std::optional<std::string> megatronLayout(const Partition& partition, const Schedule& schedule, std::string* why = nullptr);

// The uneven-split flags, or nullopt (with the reason in `why`) where they
// cannot say it: they describe one chunk per rank whose stages between the
// first and the last hold equal layer counts. An even split needs no flags
// (the empty string). Example: {3, 4, 4, 5} ->
// "--decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 5".
std::optional<std::string> megatronUnevenFlags(const Partition& partition, const Schedule& schedule,
                                               std::string* why = nullptr);

// The layer names of each virtual stage, or empty where the cost model does
// not know real names (layer source "count" or "stages"). Names that repeat
// in the model ("decoder" x 32) carry their layer index: "decoder[5]".
std::vector<std::vector<std::string>> stageModules(const Partition& partition, const CostModel& model);

// Everything above as one plain text block, a section per export, saying
// plainly where an export does not apply.
std::string partitionExportText(const Partition& partition, const Schedule& schedule, const CostModel& model);

} // namespace pipescope::whatif
