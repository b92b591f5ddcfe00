#pragma once
// Sharded import: a job too large for one process is imported by several,
// each writing the shard of the ranks it was given (a store of whole
// pipelines) where the traces are; the last task to finish completes the job
// index (store/JobIndex.h). Slurm and MPI launchers start the processes
// (`srun pipescope import ...`); on one machine, importShardsLocally() forks
// them. docs/scale.md tells how to run it.
#include "import/Import.h"
#include "store/JobIndex.h"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope {

// Which share of the rank files this process imports: task `index` of `count`.
struct ShardTask {
    int index = 0;
    int count = 1;
    std::string source; // what said so: "--shard", "SLURM_PROCID/SLURM_STEP_NUM_TASKS", ...
};

// "K/N" (0 <= K < N). Throws Error naming the text.
ShardTask parseShardTask(std::string_view text);

// The task a launcher started this process as: Open MPI
// (OMPI_COMM_WORLD_RANK/_SIZE), MPICH, Intel MPI and other PMI launchers
// (PMI_RANK/PMI_SIZE), or Slurm's srun (SLURM_PROCID and
// SLURM_STEP_NUM_TASKS; a batch script itself is not a task), in that order
// of precedence. nullopt outside a launcher. Throws Error naming the
// variable when its value is not a task number.
std::optional<ShardTask> shardTaskFromEnvironment(const std::function<const char*(const char*)>& getenv);

// What the head of a trace file says before it is imported.
struct TraceHead {
    std::optional<int> rank;                    // distributedInfo.rank, or rank-N in the file name
    std::vector<std::vector<int>> pipelineGroups; // ranks of its pipeline process groups (pg_config, desc "pp"/"pipeline")
    int64_t bytes = 0;                          // size on disk
    bool wholeJobOnly = false;                  // a format whose files are imported together (Megatron step timings)
};
// Reads at most the first 64 KiB (decompressed) of the file.
TraceHead readTraceHead(const std::string& path);

struct ShardPlan {
    int shards = 0;
    std::vector<std::vector<std::string>> files; // per shard, in input order
    std::string fingerprint;                     // the same in every task given the same inputs
    std::string groupedBy;                       // for the user and the index
    std::vector<std::vector<int>> pipelines;     // ranks of each pipeline found in the heads, lowest rank first
};
// Whole pipelines go to one shard: ranks the traces' pipeline process groups
// join stay together, groups balanced by bytes. Without such groups, rank r
// goes to shard r mod N, which keeps pipelines whole in the usual layouts
// (pipeline stages world/P ranks apart, N dividing world/P).
ShardPlan planShards(const std::vector<std::string>& files, const std::vector<TraceHead>& heads, int shards);

// The map step, run by each task on its finished shard: fills the analysis
// summaries of the shard's ranks (analysis/JobSummaries.h, summariseShard),
// given the job's pipelines as the plan found them (ShardPlan::pipelines).
// Optional; a summariser that throws leaves the ranks without them.
using ShardSummariser = std::function<void(const std::string& shardPath, std::vector<JobRankSummary>& ranks,
                                           const std::vector<std::vector<int>>& pipelines)>;

struct ShardImportResult {
    ShardRecord record;
    ImportJobReport report; // of this task's files
    JobIndex index;         // as this task left it: the whole index from the last task to end,
                            // the plan and this task's record from the others
    int tasksEnded = 0;     // tasks of the plan that had ended when this one did (itself included)
};
// Imports this task's share of options.inputs into the job folder
// options.output (made if missing) and records the shard; the last task to
// end writes the job index (under a lock file, reading every shard record
// once). A task that fails records its error (the job
// stays incomplete, and says so) and throws.
ShardImportResult importShard(const ImportJobOptions& options, const ShardTask& task,
                              const ShardSummariser& summarise = {});

// All N shards on this machine, each by its own process (fork), side by
// side. Returns the job index they left; tasks that failed are in its failed().
JobIndex importShardsLocally(const ImportJobOptions& options, int shards, const ShardSummariser& summarise = {});

} // namespace pipescope
