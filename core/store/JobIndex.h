#pragma once
// A sharded job: a folder of stores ("shards"), each written by its own
// process and holding whole pipelines, plus job.json, the index that says
// which shard holds which ranks and what each rank's GPUs did. Store opens a
// job folder as it opens one store file; docs/trace-format.md ("Sharded
// jobs") documents the layout and its version.
#include "model/Pipeline.h"
#include "model/Types.h"

#include <optional>
#include <string>
#include <vector>

namespace pipescope {

inline constexpr const char* kJobIndexName = "job.json";
// The index's format; newer ones are refused, as newer stores are.
inline constexpr const char* kJobFormat = "pipescope.job/1";
// The most import tasks (shards) one job may have: beyond the 16,384-rank jobs
// the sharded import is built for, and small enough that a task's share of
// the index (a byte a task per finished-task count) stays small.
inline constexpr int kMaxShardTasks = 65'536;

// One iteration of one rank as its shard's analysis saw it (the map step of
// a sharded import): the iteration's window over the shard's ranks, compute
// busy time inside it, and idle time by cause.
struct JobRankIteration {
    std::string label;      // e.g. "ProfilerStep#5"
    TimeNs windowNs = 0;
    TimeNs busyNs = 0;
    CauseTotals idleByCause{};
};

// What the index keeps per rank: enough for an overview of the job without
// opening its shards.
struct JobRankSummary {
    int rank = 0;
    int shard = 0;
    TimeNs clockOffset = 0; // added to the rank's times by clock alignment
    int64_t kernels = 0;
    TimeNs gpuBusy = 0;     // union of kernel, memcpy and memset intervals
    std::optional<TimeNs> first, last;
    // From the shard's analysis, when it found a pipeline: the rank's stage
    // and its iterations.
    std::optional<int> stage;
    std::vector<JobRankIteration> iterations;
};

// One import task's shard: written by the task itself when it ends.
struct ShardRecord {
    int index = 0;           // K of --shard K/N
    std::string file;        // the shard's store, relative to the job folder ("" when it had no traces to import)
    bool ok = false;         // false: the task failed, error says why
    std::string error;
    std::vector<int> ranks;
    std::vector<std::string> inputs;
    int64_t inputBytes = 0;
    int64_t records = 0;
    double seconds = 0;      // wall time of the task's import
    int64_t peakRssBytes = 0;
    std::string host;
    int64_t pid = 0;
    std::vector<JobRankSummary> rankSummaries;
};

struct JobIndex {
    std::string plan;        // fingerprint of the shard plan: the tasks of one import share it
    int shards = 0;          // N
    std::string groupedBy;   // how ranks were put together into shards, for the user
    std::vector<ShardRecord> records; // by index, those that ended
    // Per shard, added to its times when read: clock alignment across shards
    // (import --align collectives), set by the task that completes the job;
    // empty when every shard keeps its own times.
    std::vector<TimeNs> shardClockOffsets;
    // The job's pipelines as the shard plan found them (ranks that one
    // pipeline's process group joins); empty when the traces did not say.
    std::vector<std::vector<int>> pipelines;

    bool complete() const;
    std::vector<int> missing() const; // shards whose task has not ended (yet)
    std::vector<int> failed() const;
    const ShardRecord* record(int index) const;
    const std::vector<int>* pipelineOf(int rank) const; // null when unknown
};

// A folder holding a job index.
bool isShardedJob(const std::string& path);

// Names inside the job folder.
std::string shardStoreName(int index, int shards);  // "shard-0003-of-0008.pipescope"
std::string shardRecordName(int index, int shards); // "shard-0003-of-0008.json"

// Throws FormatError naming the folder when the index is missing, damaged or
// newer. Only the last task of an import writes the whole index; while it is
// incomplete, the records of the tasks that did end are read from their shard
// records (withShardRecords), unless endedTasks is false (the plan alone).
JobIndex readJobIndex(const std::string& folder, bool endedTasks = true);
// Written atomically (a reader sees the old index or the new one).
void writeJobIndex(const std::string& folder, const JobIndex& index);

std::string shardRecordText(const ShardRecord& record, const std::string& plan, int shards);
// A task's record; nullopt when the file is unreadable or belongs to another plan.
std::optional<ShardRecord> readShardRecord(const std::string& path, const std::string& plan, int shards);

// "JOB: 2 of 8 shards are missing (3, 7): ..." with what to do; "" when complete.
std::string incompleteJobMessage(const std::string& folder, const JobIndex& index);
// The index with the records of the shards whose tasks ended (their shard
// records in the folder, of index.plan and index.shards), as the last task
// writes it: how an incomplete index learns which tasks did finish.
JobIndex withShardRecords(const std::string& folder, JobIndex index);

} // namespace pipescope
