#pragma once
// Map and reduce over a sharded job (store/JobIndex.h). The map runs in
// each import task: its shard holds whole pipelines, so the shard's own
// analysis gives each of its ranks a stage and, per iteration, busy time and
// idle time by cause. The reduce reads those summaries from the job index
// alone, whatever the job's size, and sets the replicas of each stage side
// by side: the spread that tells a straggler from a slow stage.
#include "store/JobIndex.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipescope {

// The map: analyses the shard store at path and fills stage and iterations
// of the ranks it holds. Throws Error when the shard cannot be analysed.
// A shard of more than wholeAbove GPU kernels is analysed pipeline by
// pipeline (pipelines: the ranks of each, as the import plan found them;
// ranks in none are analysed together), so that the map's memory follows
// one pipeline, not the shard; each pipeline's ranks get the summaries the
// whole shard's analysis gives them.
inline constexpr int64_t kMapWholeAbove = 500'000; // about 180 MB of analysis
void summariseShardAbove(const std::string& path, std::vector<JobRankSummary>& ranks,
                         const std::vector<std::vector<int>>& pipelines, int64_t wholeAbove);
// The same with wholeAbove = kMapWholeAbove: a ShardSummariser.
void summariseShard(const std::string& path, std::vector<JobRankSummary>& ranks,
                    const std::vector<std::vector<int>>& pipelines);

struct StageReplicas {
    int stage = 0;
    int replicas = 0;               // ranks of the stage with the iteration
    TimeNs windowNs = 0;            // the iteration's median window over them
    TimeNs busyMin = 0, busyMedian = 0, busyMax = 0; // compute busy time
    TimeNs busyMean = 0;
    int busiestRank = 0, idlestRank = 0;
    CauseTotals idleMedian{};       // per cause, the median over the replicas
};

struct JobOverview {
    std::string iteration;          // the label of the iteration shown
    std::vector<StageReplicas> stages;
    int ranks = 0;                  // ranks with a stage and the iteration
};

// The reduce. The iteration: `label` when given, else, among the labels
// every staged rank has, the one whose median window is the median of them
// (the first left out when there are three or more: a warm-up). nullopt when
// no shard's analysis found a pipeline.
std::optional<JobOverview> overviewFromIndex(const JobIndex& index, const std::optional<std::string>& label = std::nullopt);

// The replica with the most compute in the overview (the stage that limits
// the pipeline, and its slowest member) and its pipeline's ranks, when the
// index knows the job's pipelines: what to analyse of a job too large to
// analyse whole.
struct BusiestReplica {
    int rank = 0;
    int stage = 0;
    TimeNs busyNs = 0;
    std::vector<int> pipeline; // empty when the index does not know it
};
std::optional<BusiestReplica> busiestReplica(const JobIndex& index, const JobOverview& overview);

// What a what-if calibrated on some ranks of a sharded job (whatif --ranks,
// the app on a job too large to load whole) needs of the replicas it did not
// read: per stage, the slowest replica's busy time in the overview's
// iteration over the mean busy time of the loaded ranks of that stage
// (CostModel::replicaPace, so each stage runs at its slowest replica's pace).
// 1 for a stage with one replica or no loaded rank; indexed by stage, as
// many as the overview's highest stage + 1.
std::vector<double> replicaPaceFromIndex(const JobIndex& index, const JobOverview& overview,
                                         const std::vector<int>& loadedRanks);

// The ranks to read of a job too large to read whole: the pipeline of the
// busiest replica (busiestReplica), so the stages' transfers and the
// schedule stay whole; empty when the index does not know the pipelines.
std::vector<int> representativeRanks(const JobIndex& index);

// "0,256,512,768"
std::string rankListText(const std::vector<int>& ranks);
// For the user: the list up to 8 ranks ("0,256,512,768"), else its ends
// ("0 to 1023").
std::string rankListShort(const std::vector<int>& ranks);

} // namespace pipescope
