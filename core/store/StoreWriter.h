#pragma once
// Builds a store file. Importers and the capture merge feed records in any
// order; finish() resolves launch correlations, nests CPU ranges, builds the
// indexes and summaries, and atomically renames the file into place. A writer
// destroyed without finish() leaves nothing behind.
#include "model/Trace.h"
#include "store/Sqlite.h"
#include "util/AtomicOutput.h"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pipescope {

struct SourceRecord {
    std::string path;
    std::string format; // kineto | nsys | capture | simulated
    std::optional<int> rank;
    TimeNs timeBase = 0;
    std::string details; // JSON object text, may be empty
};

struct ActivityRecord {
    int rank = 0;
    int64_t streamId = 0; // from StoreWriter::stream()
    ActivityKind kind = ActivityKind::Kernel;
    TimeNs start = 0;
    TimeNs end = 0;
    StringId name = 0;
    std::optional<int64_t> correlation;
    std::optional<int64_t> bytes;
    std::optional<CopyKind> copyKind;
    std::string grid; // "x,y,z" or empty
    std::string block;
    // Normally left empty for finish() to fill; an importer that settled them
    // itself (see StoreWriter::settled()) stores them as they are.
    std::optional<int64_t> launchId; // cpu_ranges row of the launch call
    std::optional<TimeNs> launchNs;  // its start
};

struct CpuRangeRecord {
    int rank = 0;
    int64_t tid = 0;
    CpuRangeKind kind = CpuRangeKind::Annotation;
    TimeNs start = 0;
    TimeNs end = 0;
    StringId name = 0;
    std::optional<StringId> domain;
    std::optional<int64_t> correlation;
    // Likewise: left at 0 and empty unless the importer settled the nesting.
    int depth = 0;
    std::optional<int64_t> parentId;
};

// Nests CPU ranges as finish() does: ranges of one thread nest when one
// contains the other; a stack walk in start order (longer first on ties,
// then row order) finds each range's parent. Importers that settle nesting
// themselves use it too, so both give the same parents.
class RangeNester {
public:
    struct Parent {
        int64_t id;
        int64_t parent;
        int depth;
    };
    // Ranges in ascending (rank, tid, start, end, id).
    void add(int64_t rank, int64_t tid, TimeNs start, TimeNs end, int64_t id);
    // After the last add(): `found` then holds every range that has a parent, in walk order.
    void finish();
    std::vector<Parent> found;

private:
    void walk();
    struct Open {
        int64_t id;
        TimeNs end;
    };
    std::vector<Open> stack_;
    std::vector<Open> group_; // the ranges of one rank, tid and start, in ascending end, then id
    int64_t rank_ = 0, tid_ = 0;
    TimeNs start_ = 0;
    bool first_ = true;
};

struct NcclRecord {
    int rank = 0;
    std::optional<int64_t> activityId;
    Collective kind = Collective::Unknown;
    bool isP2p = false;
    std::optional<int64_t> inNelems;
    std::optional<int64_t> outNelems;
    std::optional<int64_t> bytes;
    std::string dtype;
    std::string groupName;
    std::string groupDesc;
    std::string groupRanks; // JSON array text, may be empty
    std::optional<int> groupSize;
    std::optional<int> peer;
    std::optional<int64_t> seq;
    std::optional<TimeNs> start;
    std::optional<TimeNs> end;
    std::optional<int64_t> streamId;
};

class StoreWriter {
public:
    // Throws Error when the output path cannot be written.
    explicit StoreWriter(const std::string& path);
    ~StoreWriter();
    StoreWriter(const StoreWriter&) = delete;
    StoreWriter& operator=(const StoreWriter&) = delete;

    StringId intern(std::string_view text);
    int64_t addSource(const SourceRecord& source);
    void setSourceAlignment(int64_t sourceId, TimeNs clockOffset, std::string_view alignment);
    // The path the user named, for a source read from a copy (a piped input).
    void setSourcePath(int64_t sourceId, std::string_view path);
    void setMeta(std::string_view key, std::string_view value);

    // Ranks and GPUs are upserted: later calls fill fields that were unknown.
    void addRank(const RankInfo& rank);
    void addGpu(const GpuInfo& gpu);
    void addProcessGroup(const ProcessGroup& group);
    // Returns the store id of (rank, device, stream), creating it on first use.
    int64_t stream(int rank, int device, int64_t stream, std::string_view name = {});

    int64_t addActivity(const ActivityRecord& a);
    int64_t addCpuRange(const CpuRangeRecord& r);
    // Many rows at once, in order, as addActivity()/addCpuRange() one by one
    // would write them (the same ids, one after the other), but several rows
    // per INSERT: a statement's step costs about as much as a row. Return
    // the last row's id (0 for no rows).
    int64_t addActivities(const std::vector<ActivityRecord>& rows);
    int64_t addCpuRanges(const std::vector<CpuRangeRecord>& rows);
    int64_t addNcclOp(const NcclRecord& op);
    void addMemoryEvent(const MemoryEvent& e);
    // The name a trace gives a CPU thread (written when the store is finished;
    // a later name for the same thread replaces an earlier one).
    void threadName(int rank, int64_t tid, std::string_view name);

    // Counts `count` bad records of `kind` from `sourceId`; keeps the first example message.
    void diagnostic(std::optional<int64_t> sourceId, Severity severity, std::string_view kind,
                    std::string_view example, int64_t count = 1);

    // Taking back an input that failed part-way: discardInput() removes the
    // rows, strings and streams added since beginInput() and undoes what it
    // did to ranks, GPUs, groups and diagnostics; keepInput() keeps it all.
    // Changes to earlier rows (shiftRank, setSourceAlignment) are not taken
    // back. One input at a time. (Not an SQL savepoint: without a journal,
    // which would double the memory of every large UPDATE, SQLite cannot roll back.)
    void beginInput();
    void keepInput();
    void discardInput();

    // Says that the rows with ids in (activitiesAfter, activitiesUpTo] and
    // (cpuRangesAfter, cpuRangesUpTo], all of `rank`, were added with their
    // launch links and nesting already settled, as finish() would settle
    // them: the rank's other rows do not change them (they are all its rows).
    // finish() then skips the rank, unless another input also holds it, or
    // rows of it were dropped (dropOutOfRangeTimes), or it holds other rows:
    // then it settles the rank again from scratch.
    void settled(int rank, int64_t activitiesAfter, int64_t activitiesUpTo, int64_t cpuRangesAfter,
                 int64_t cpuRangesUpTo);

    // Adds offset to every time of a rank (activities, ranges, NCCL ops, memory).
    void shiftRank(int rank, TimeNs offset);

    // The largest row ids so far: rows added later have larger ids.
    struct Mark {
        int64_t activities = 0, cpuRanges = 0, ncclOps = 0, memoryEvents = 0;
    };
    Mark mark();
    // Adds offsets[rank] to every time of those ranks, in one pass per table
    // over the rows added after `since` (or over all rows).
    void shiftRanks(const std::map<int, TimeNs>& offsets, const Mark& since);
    void shiftRanks(const std::map<int, TimeNs>& offsets) { shiftRanks(offsets, Mark()); }

    // ---- corrections an importer makes once it knows more (typed, so that
    // no importer names a table) ----
    // The correlation of a stored activity or CPU range (a launch flow resolved late).
    void setActivityCorrelation(int64_t activityId, int64_t correlation);
    void setCpuRangeCorrelation(int64_t cpuRangeId, int64_t correlation);
    // The launch calls (runtime or driver CPU ranges) stored after
    // `cpuRangesAfter` that carry one of these correlations: for each, the
    // caller's key, the call's thread and its start.
    struct LaunchCall {
        int64_t key = 0;
        int64_t tid = 0;
        TimeNs start = 0;
    };
    std::vector<LaunchCall> launchCallsWith(const std::vector<std::pair<int64_t, int64_t>>& correlationAndKey,
                                            int64_t cpuRangesAfter);
    // Rows stored after `since` under rank `from` move to rank `to`, with
    // these streams (store ids). Throws Error when `to` already has one of
    // the streams (the rank came from another input too).
    void relabelRank(int from, int to, const Mark& since, const std::vector<int64_t>& streamIds);
    // What an importer learnt of a source once it had read it all.
    void setSourceRank(int64_t sourceId, int rank, TimeNs timeBase, std::string_view detailsJson);

    // ---- what the job's clock alignment reads back ----
    // The stored collectives with an end, per rank in start order: their
    // kind, group ("name|ranks", either part empty when unknown) and
    // sequence number when the trace gave one.
    struct CollectiveEnd {
        int rank = 0;
        std::string kind, group;
        std::optional<int64_t> seq;
        TimeNs end = 0;
    };
    std::vector<CollectiveEnd> collectiveEnds();
    // The stored sends and receives with a peer and an end, per rank in start order.
    struct TransferEnd {
        int rank = 0;
        bool send = false;
        int peer = 0;
        TimeNs end = 0;
    };
    std::vector<TransferEnd> transferEnds();
    // The same read from any store's database (a finished shard's, read-only).
    static std::vector<CollectiveEnd> collectiveEnds(sql::Database& db);
    static std::vector<TransferEnd> transferEnds(sql::Database& db);

    // Removes records whose times left the representable range (see
    // util/Limits.h), counting them as bad records of their source. Throws
    // FormatError naming the source when none of a rank's records are left.
    // finish() runs it; importers run it before comparing times across ranks.
    // Between beginInput() and keepInput() it checks only that input's rows,
    // so a merge can discard a file whose times are all unusable and go on.
    void dropOutOfRangeTimes();

    // Direct access for importers that need a query the writer does not offer
    // (e.g. collective matching for clock alignment). Data written so far is visible.
    sql::Database& database()
    {
        timesUnknown_ = true;
        return db_;
    }

    // Optional progress callback for the long steps of finish().
    void setProgress(std::function<void(std::string_view step)> progress) { progress_ = std::move(progress); }

    // Links, indexes, summarises and renames the file into place.
    void finish();
    const std::string& path() const { return out_.finalPath(); }

private:
    void flushDiagnostics();
    // Links the launches of every rank, or of the ranks given (none: nothing).
    void linkLaunches(const std::vector<int>* ranks = nullptr);
    // Nests the ranges of every rank, or of the ranks given (none: nothing).
    void nestCpuRanges(const std::vector<int>* ranks = nullptr);
    std::vector<int> unsettledRanks();
    void summarise();

    AtomicOutput out_;
    sql::Database db_;
    sql::Statement insActivity_, insCpu_, insNccl_, insString_, insMemory_;
    sql::Statement insActivities_, insCpuRanges_; // kRowsPerInsert rows each
    struct StringHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, StringId, StringHash, std::equal_to<>> strings_;
    std::map<std::tuple<int, int, int64_t>, int64_t> streams_;
    std::map<int, RankInfo> ranks_;
    std::map<std::pair<int, int>, GpuInfo> gpus_;
    std::map<std::pair<int, std::string>, ProcessGroup> groups_;
    struct DiagEntry {
        Severity severity;
        int64_t count = 0;
        std::string example;
    };
    std::map<std::pair<int64_t, std::string>, DiagEntry> diags_;
    std::map<std::pair<int, int64_t>, std::string> threads_; // (rank, tid) -> name, written by finish()
    std::optional<sql::Statement> setActivityCorrelation_, setCpuRangeCorrelation_; // prepared on first use
    std::function<void(std::string_view)> progress_;
    bool finished_ = false;
    struct Settled {
        int rank;
        int64_t activitiesAfter, activitiesUpTo, cpuRangesAfter, cpuRangesUpTo;
    };
    std::vector<Settled> settled_;
    std::map<int, Settled> settledClean_; // in finish(): the settled ranks it leaves as they are
    std::set<int> droppedRanks_; // ranks that lost rows in dropOutOfRangeTimes()
    // The extent of every time bound so far and the shifts applied since (the
    // sum of their sizes): while the one plus the other stays within
    // kMaxTimeNs, no row can lie outside it, and dropOutOfRangeTimes() need
    // not read the tables. Unknown once an importer had the database itself.
    void noteTime(TimeNs t)
    {
        minTime_ = std::min(minTime_, t);
        maxTime_ = std::max(maxTime_, t);
    }
    void noteShift(TimeNs offset);
    bool timesSurelyInRange() const;
    TimeNs minTime_ = 0, maxTime_ = 0, shifted_ = 0;
    bool timesUnknown_ = false;
    // An in-memory map's entries as they were before the current input first
    // touched them (nullopt: absent), to put back if the input is discarded.
    // Kept per entry: copying whole maps per input would grow with the job.
    template <typename Map>
    struct Before {
        std::map<typename Map::key_type, std::optional<typename Map::mapped_type>> entries;
        void note(const Map& map, const typename Map::key_type& key)
        {
            if (entries.count(key))
                return;
            auto it = map.find(key);
            entries.emplace(key, it == map.end() ? std::nullopt : std::optional(it->second));
        }
        void restore(Map& map)
        {
            for (auto& [key, value] : entries)
                if (value)
                    map.insert_or_assign(key, std::move(*value));
                else
                    map.erase(key);
        }
    };
    // The state at beginInput(): each input table's largest row id, and the memory the input changed.
    struct InputStart {
        std::array<int64_t, 7> maxIds{};
        Before<decltype(streams_)> streams;
        Before<decltype(ranks_)> ranks;
        Before<decltype(gpus_)> gpus;
        Before<decltype(groups_)> groups;
        Before<decltype(diags_)> diags;
        std::map<std::pair<int, int64_t>, std::string> threads;
    };
    std::optional<InputStart> inputStart_;
};

} // namespace pipescope
