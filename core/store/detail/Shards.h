#pragma once
// The sharded side of Store: a job folder's shards, opened together, read as
// one store. A record's id in a sharded job is its id in its shard with the
// shard's index in the bits above kShardIdBits (shard 0's ids are unchanged),
// so an id leads back to its shard and row; stream ids are renumbered in
// (rank, shard id) order, as a single store numbers them in rank-file order.
#include "store/Store.h"
#include "util/AtomicOutput.h"

#include <map>
#include <memory>
#include <vector>

namespace pipescope::store::detail {

inline constexpr int kShardIdBits = 40;
inline constexpr int64_t kLocalIdMask = (int64_t{1} << kShardIdBits) - 1;

inline int64_t tagId(int shard, int64_t id) { return (static_cast<int64_t>(shard) << kShardIdBits) | id; }
inline int shardOfId(int64_t id) { return static_cast<int>(id >> kShardIdBits); }
inline int64_t localId(int64_t id) { return id & kLocalIdMask; }

struct Shards {
    std::string folder;
    AtomicOutput::InputGuard guard; // no output replaces a file of the job while it is read
    JobIndex index;
    std::vector<std::unique_ptr<Store>> stores; // by shard index; null for a shard that had no traces
    std::map<int, int> shardOfRank;

    Store* ofRank(int rank) const;
    Store* ofId(int64_t id) const;
    // What is added to the shard's times (JobIndex::shardClockOffsets).
    TimeNs clockOffset(int shard) const;
    TimeNs clockOffsetOfRank(int rank) const;
};

// Adds a shard's clock offset to every time of what was read from it.
void shiftTrace(Trace& t, TimeNs by);
void shiftSummary(StoreSummary& s, TimeNs by);

// One store's streams as the sharded job numbers them: (shard, local id) -> id.
using StreamIds = std::map<std::pair<int, int64_t>, int64_t>;
StreamIds numberStreams(const std::vector<std::pair<int, std::vector<StreamInfo>>>& perShard);

// Shard traces made into the trace one store would give, one shard at a
// time: each is folded in and freed before the next is read, so a load
// holds the merged trace and one shard's at most. The activities are the
// exception: each shard's are kept, renumbered, until finish() lays them
// out in rank order (each rank's rows lie in one shard, already in order):
// one copy, no sort of the whole job's rows.
class TraceMerger {
public:
    // Every shard's streams (for their numbers); room for this many
    // NCCL operations is made at once (0: as they come).
    TraceMerger(const StreamIds& streamIds, size_t activities, size_t ncclOps);
    ~TraceMerger();
    TraceMerger(const TraceMerger&) = delete;
    TraceMerger& operator=(const TraceMerger&) = delete;
    void add(int shard, Trace&& part);
    Trace finish(); // the orders Store::load() gives

private:
    struct Strings;
    const StreamIds& streamIds_;
    Trace t_;
    std::vector<std::vector<Activity>> activityParts_; // each shard's, in its order
    std::unique_ptr<Strings> strings_;
};
StoreSummary mergeSummaries(std::vector<std::pair<int, StoreSummary>> parts);

StoreSummary shardedSummary(Shards& shards);
Trace shardedLoad(Shards& shards, const LoadOptions& options);
std::vector<std::vector<int64_t>> shardedAutogradSequences(Shards& shards, const std::vector<int64_t>& activityIds);

} // namespace pipescope::store::detail
