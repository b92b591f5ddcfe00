#pragma once
// A pipeline schedule: for each rank, the ordered list of compute steps it
// runs in one iteration. Stages are virtual stages (pp * v of them); each
// lives on one rank as one of its chunks.
#include "model/Pipeline.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

// Shared by the what-if engine (which replays schedules) and the analysis
// (which reads unannotated steps against them).
namespace pipescope {

struct Action {
    StepKind kind = StepKind::F;
    int stage = 0;      // virtual stage
    int microbatch = 0;
};

struct Schedule {
    ScheduleKind kind = ScheduleKind::Custom;
    int pp = 1;           // ranks in the pipeline
    int stages = 1;       // virtual stages = pp * v
    int microbatches = 1;
    std::vector<int> rankOfStage;  // [stage]
    std::vector<int> chunkOfStage; // [stage]
    std::vector<std::vector<Action>> ranks; // per rank, in execution order

    int chunks() const { return pp > 0 ? stages / pp : 0; }
    // Whether the action's input is made on the rank that runs it: the
    // previous virtual stage's forward (the next one's backward) runs there,
    // the last stage's backward follows its own forward, or, for the first
    // stage's forward, the data loader gives it. A weight gradient (W) needs
    // only its own stage's input gradient.
    bool inputOnRank(const Action& a, int rank) const
    {
        if (a.kind == StepKind::W)
            return true;
        const int from = a.kind == StepKind::F ? a.stage - 1 : a.stage + 1;
        if (from < 0 || from >= stages)
            return true;
        return static_cast<size_t>(from) < rankOfStage.size() && rankOfStage[static_cast<size_t>(from)] == rank;
    }
    size_t actionCount() const;
    std::string name() const { return std::string(toString(kind)); }
};

// Human-readable step label in torch's notation: stage, kind, microbatch ("2F3").
std::string actionLabel(const Action& a);

// Builds a built-in schedule. Throws Error with one sentence when the
// combination is not supported (e.g. ZB-V with v != 2, DualPipeV with m < 2p).
Schedule makeSchedule(ScheduleKind kind, int pp, int v, int microbatches);

// The virtual stage of (pipeline stage/rank, chunk) under a kind's placement.
int virtualStage(ScheduleKind kind, int pp, int rank, int chunk);

// Per rank, the forwards it runs before its first backward (B or I) in the
// schedule's order: its warm-up. A rank without a backward counts every
// forward.
std::vector<int> warmupForwards(const Schedule& schedule);

// Parses torch.distributed.pipelining's compute-only schedule CSV: one row per
// rank, cells like "0F0", "1I3", "1W3", "2B0", empty cells for idle steps;
// "(0F4;1B2)OVERLAP_F_B" cells run their sub-steps in order; communication
// and FSDP cells (SEND_F, RECV_B, UNSHARD, ...) are ignored. The result is
// validated (see validateSchedule). `source` names the input in errors.
Schedule parseScheduleCsv(std::string_view text, const std::string& source);
Schedule loadScheduleCsv(const std::string& path);

// Refuses a schedule that breaks a dependency (B before its F, W before its I,
// a microbatch missing or run twice, a stage on two ranks) or deadlocks, with
// a message naming the first bad step. Throws Error.
void validateSchedule(const Schedule& schedule, const std::string& source);

} // namespace pipescope
