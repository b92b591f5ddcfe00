#pragma once
// Reading a job in part. A job too large to read whole (a sharded job of a
// thousand ranks) is read one pipeline at a time: by default the pipeline of
// its busiest replica, so the stages' transfers and the schedule stay whole,
// and what was not read comes from the job index's summaries (each stage
// across all its replicas, and each stage's pace against its slowest
// replica). The CLI's analyze, whatif and report and the desktop app all
// decide and describe a partial read here, so they agree on which ranks a
// large job shows and on what they say of the rest.
#include "analysis/JobSummaries.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pipescope {

class Store;

// How much of a job a reader takes whole.
struct ReadLimits {
    // More GPU activities than this: a sharded job is read in part (the app
    // opens on one pipeline sooner than on the whole). Negative: no limit.
    int64_t wholeJobAbove = -1;
    // What the reader holds per GPU activity at its peak, and the most memory
    // it may take (negative: what the machine has available).
    int64_t bytesPerActivity = 0;
    int64_t budgetBytes = -1;
};

struct ReadPlan {
    std::vector<int> ranks;       // sorted, each once; empty: every rank
    bool chosen = false;          // ranks chosen here (the job too large), not asked for
    int64_t activities = 0;       // GPU activities of the ranks read
    int64_t jobActivities = 0;    // of the whole job
    int jobRanks = 0;
    std::vector<int> jobRankList; // the ranks the job holds, sorted
    int gpus = 0;                 // the GPUs it holds
    int ranksHeld = 0;            // of `ranks`, those the job holds (jobRanks when every rank is read)
};

// The ranks to read. `asked` (any order; empty: none asked for) wins. Else a
// job within the limits is read whole, and a sharded job beyond them reads
// the pipeline of its busiest replica (representativeRanks); a store file
// beyond them, or a job whose index does not know its pipelines, is still
// read whole (the reader's memory check then says what to do).
ReadPlan planRead(Store& store, const std::vector<int>& asked, const ReadLimits& limits);

// Whether `activities` fit the limits' memory (the budget, and what the
// machine has available).
bool fitsInMemory(int64_t activities, const ReadLimits& limits);

// GPU activities (kernels, copies, sets, syncs) of the ranks in the store's
// summary; empty ranks: all.
int64_t activitiesOf(Store& store, const std::vector<int>& ranks);

// What a reader of some ranks of a job knows of the others.
struct JobPart {
    int jobRanks = 0;             // ranks in the whole job
    std::vector<int> loadedRanks; // sorted; empty when every rank was read
    bool chosen = false;          // the ranks were chosen for the job's size, not asked for
    int64_t jobActivities = 0;    // GPU activities of the whole job
    // For a sharded job: each stage across all its replicas, from the job
    // index, and each staged rank's stage there.
    std::optional<JobOverview> overview;
    std::map<int, std::vector<int>> stageRanks; // stage -> its ranks in the whole job
    // Each stage's pace against all its replicas, when only some were read
    // (whatif::CalibrateOptions::replicaPace).
    std::vector<double> replicaPace;
    // The index's stages of the ranks read, when they are not whole
    // pipelines (some replicas of a stage without their pipelines' other
    // stages): the analysis takes them as given, as it would --stage-map.
    std::map<int, int> stageMapFromIndex;
    // The busiest replica of the job, from the index.
    std::optional<BusiestReplica> busiest;

    bool partial() const { return !loadedRanks.empty(); }
    // The job's data-parallel degree: the most replicas of a stage in the
    // index; 0 when there is no index.
    int replicas() const;
};

// Describes reading `plan.ranks` of the store's job (the plan's counts, and
// the job index; the store's summary is not read again).
JobPart describePart(Store& store, const ReadPlan& plan);

// Stragglers the index shows across all replicas of a stage: the busiest
// replica of each stage whose busy time is at least kStragglerRatio (as the
// analysis's) times its stage's median, costliest first. What a job read in
// part still says of the replicas it did not read.
struct IndexStraggler {
    int stage = 0;
    int rank = 0;
    TimeNs busyNs = 0, medianNs = 0;
    double relative = 1.0; // busyNs / medianNs
};
std::vector<IndexStraggler> indexStragglers(const JobOverview& overview);
// The threshold in words: "5%".
std::string stragglerThresholdText();

// For the user, one line: "4 of 1024 ranks (0,256,512,768), the pipeline of
// the busiest replica (rank 768, stage 3)"; "" when every rank was read.
std::string describeRanksRead(const JobPart& part);

} // namespace pipescope
