#pragma once
// Read access to a store file. Opening never modifies the file; a file
// written by a newer pipescope is refused with a message saying so.
#include "model/Trace.h"
#include "store/JobIndex.h"
#include "store/Sqlite.h"
#include "util/Work.h"

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pipescope {

struct GpuSummary {
    int rank = 0;
    int device = 0;
    int64_t kernels = 0, memcpys = 0, memsets = 0, syncs = 0;
    std::optional<TimeNs> kernelFirst, kernelLast;
    TimeNs kernelBusy = 0; // union of kernel intervals
    std::optional<TimeNs> gpuFirst, gpuLast;
    TimeNs gpuBusy = 0; // union of kernel + memcpy + memset intervals
};

struct StoreSummary {
    int schemaVersion = 0;
    std::map<std::string, std::string> meta;
    std::vector<SourceInfo> sources;
    std::vector<RankInfo> ranks;
    std::vector<GpuInfo> gpus;
    std::vector<StreamInfo> streams;
    std::vector<std::pair<std::string, int64_t>> activityCounts;   // per kind name
    std::vector<std::pair<std::string, int64_t>> ncclCounts;       // per NCCL kind
    std::vector<std::pair<std::string, int64_t>> cpuRangeCounts;   // per cpu range kind
    std::vector<GpuSummary> gpuSummaries;
    std::map<int64_t, std::array<int64_t, 4>> streamCounts; // stream id -> count per ActivityKind
    std::vector<Diagnostic> diagnostics;
    std::optional<TimeNs> first, last; // over all GPU activities
};

struct LoadOptions {
    std::optional<std::vector<int>> ranks; // all when unset
    std::optional<TimeNs> from, to;        // activities overlapping [from, to)
    // With from/to: instead, activities and NCCL ops *starting* in [from, to)
    // (ops without a start too), read rank by rank through the (rank, start_ns)
    // indexes: time follows the window, not the store (a first frame of a large store).
    bool startsInWindow = false;
    bool cpuOps = false;                   // also load cpu_op ranges (large)
    bool runtimeCalls = false;             // also load runtime/driver call ranges
    const WorkControl* work = nullptr;     // progress and cancel (optional)
};

// The CPU call (cudaLaunchKernel, cudaMemcpyAsync, ...) that launched a GPU activity.
struct LaunchCall {
    int64_t tid = 0;
    TimeNs start = 0;
    TimeNs end = 0;
    std::string name;
};

// Store::autogradSequences of the store at path, opened read-only when called:
// for AnalyzeOptions::autogradSequences where the store is closed before the
// analysis runs. The store must still be there when it is called.
std::function<std::vector<std::vector<int64_t>>(const std::vector<int64_t>&)> autogradSequencesAt(std::string path);

namespace store::detail {
struct Shards;
}

// A store file, or a sharded job (a folder of shard stores and a job index,
// store/JobIndex.h): every reader opens both through this class, and sees a
// sharded job as the one store its traces would have made. Ids of a sharded
// job's records carry their shard in their high bits (store/detail/Shards.h).
class Store {
public:
    // Throws FormatError when the path is not a pipescope store or job
    // folder, is newer than this build, or is a job with shards missing.
    explicit Store(const std::string& path);
    ~Store();
    Store(Store&&) noexcept;
    Store& operator=(Store&&) noexcept;

    StoreSummary summary();
    Trace load(const LoadOptions& options = {});
    // The start of a rank's index-th GPU activity in start order (0-based),
    // read from the (rank, start_ns) index; nullopt past its last.
    std::optional<TimeNs> activityStart(int rank, int64_t index);
    // The earliest start over the whole job of a GPU activity or of a CPU
    // range that load() reads by default (annotations, NVTX ranges, GPU
    // annotations), on the job's aligned clock: what
    // report::chromeTraceOrigin gives the whole job's trace, read through the
    // (rank, start) indexes without loading it. nullopt when the job holds
    // neither.
    std::optional<TimeNs> earliestRecord();
    // The runtime or driver call that launched an activity (by store id),
    // through its launch link; nullopt when the trace recorded none.
    std::optional<LaunchCall> launchOf(int64_t activityId);
    // For each activity (by store id): the autograd sequence numbers of the
    // framework ops around the call that launched it, innermost first (a
    // backward op carries the number of the forward op that made its node).
    // Empty where the trace recorded no launch or no numbered op.
    std::vector<std::vector<int64_t>> autogradSequences(const std::vector<int64_t>& activityIds);

    // Cached results (e.g. analysis JSON). get() reads; put() needs a writable
    // store and is only done when the user asks for caching.
    std::optional<std::string> cached(const std::string& key);

    // A single store's database (a sharded job has none of its own).
    sql::Database& database() { return db_; }
    const std::string& path() const { return path_; }
    int schemaVersion() const { return version_; }
    // The job index of a sharded job; null for a store file.
    const JobIndex* jobIndex() const;

private:
    Trace loadTrace(const LoadOptions& options);
    void openFile(const std::string& path);
    void openShards(const std::string& folder);
    void readCounts(StoreSummary& s);

    std::string path_;
    sql::Database db_;
    int version_ = 0;
    std::unique_ptr<store::detail::Shards> shards_;
};

} // namespace pipescope
