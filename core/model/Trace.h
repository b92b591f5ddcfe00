#pragma once
// A job loaded from the store into memory for analysis: plain value types,
// no SQLite. Activities are sorted by (rank, start).
#include "model/Collective.h"
#include "model/Types.h"

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pipescope {

struct RankInfo {
    int rank = 0;
    std::optional<int> worldSize;
    std::string host;
    std::optional<int64_t> pid;
    std::optional<int> device;
    std::optional<int64_t> sourceId;
};

struct GpuInfo {
    int rank = 0;
    int device = 0;
    std::string name;
    std::string uuid;
    std::optional<int64_t> memoryBytes;
    std::optional<int> smCount;
    std::string computeCapability;
};

struct StreamInfo {
    int64_t id = 0; // store id
    int rank = 0;
    int device = 0;
    int64_t stream = 0; // the trace's own stream id
    std::string name;
};

// An optional 64-bit integer in 8 bytes instead of std::optional's 16:
// INT64_MIN stands for "none" (times never reach it, see validTime; a count or
// id of INT64_MIN reads as absent). It reads like std::optional<int64_t>
// (has_value, bool, *, value, value_or, comparisons, conversion to and from
// std::optional), so code written for std::optional compiles unchanged.
class OptionalInt64 {
public:
    static constexpr int64_t kNone = std::numeric_limits<int64_t>::min();

    constexpr OptionalInt64() = default;
    constexpr OptionalInt64(std::nullopt_t) {}
    constexpr OptionalInt64(int64_t v) : v_(v) {}
    constexpr OptionalInt64(const std::optional<int64_t>& o) : v_(o ? *o : kNone) {}
    constexpr OptionalInt64& operator=(std::nullopt_t)
    {
        v_ = kNone;
        return *this;
    }

    constexpr bool has_value() const { return v_ != kNone; }
    constexpr explicit operator bool() const { return has_value(); }
    constexpr int64_t operator*() const { return v_; }
    int64_t value() const
    {
        if (!has_value())
            throw std::bad_optional_access();
        return v_;
    }
    constexpr int64_t value_or(int64_t fallback) const { return has_value() ? v_ : fallback; }
    constexpr void reset() { v_ = kNone; }
    constexpr operator std::optional<int64_t>() const { return has_value() ? std::optional<int64_t>(v_) : std::nullopt; }

    friend constexpr bool operator==(OptionalInt64 a, OptionalInt64 b) { return a.v_ == b.v_; }
    friend constexpr bool operator==(OptionalInt64 a, std::nullopt_t) { return !a.has_value(); }
    friend constexpr bool operator==(OptionalInt64 a, int64_t b) { return a.has_value() && a.v_ == b; }
    friend constexpr bool operator==(OptionalInt64 a, const std::optional<int64_t>& b) { return a == OptionalInt64(b); }

private:
    int64_t v_ = kNone;
};

// 72 bytes (10M activities: 690 MiB): the optional fields are OptionalInt64,
// the name and the NCCL index 32-bit.
struct Activity {
    int64_t id = 0;
    TimeNs start = 0;
    TimeNs end = 0;
    int64_t streamId = 0;
    OptionalInt64 correlation;
    OptionalInt64 launchStart; // start of the CPU call that launched it
    OptionalInt64 bytes;
    int32_t name = 0;       // a StringId: string ids index Trace::strings, so they fit
    int rank = 0;
    int32_t ncclIndex = -1; // index into Trace::ncclOps, -1 if none
    ActivityKind kind = ActivityKind::Kernel;
    CopyKind copyKind = CopyKind::Unknown;
    // NCCL ops this kernel runs, Trace::ncclOps[ncclIndex .. + ncclCount):
    // one, or a coalesced batch's sends and receives (batch_isend_irecv).
    uint16_t ncclCount = 0;
};
static_assert(sizeof(Activity) == 72, "Activity is kept small: tens of millions are held in memory");

struct NcclOp {
    int64_t id = 0;
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
    std::vector<int> groupRanks;
    std::optional<int> groupSize;
    std::optional<int> peer;
    std::optional<int64_t> seq;
    std::optional<TimeNs> start;
    std::optional<TimeNs> end;
    std::optional<int64_t> streamId;
};

struct CpuRange {
    int64_t id = 0;
    int rank = 0;
    int64_t tid = 0;
    CpuRangeKind kind = CpuRangeKind::Annotation;
    TimeNs start = 0;
    TimeNs end = 0;
    StringId name = 0;
    std::optional<StringId> domain;
    int depth = 0;
    std::optional<int64_t> parentId;
    std::optional<int64_t> correlation;
};

struct ProcessGroup {
    int rank = 0; // reporting rank
    std::string name;
    std::string desc;
    std::vector<int> ranks;
    std::optional<int> size;
};

struct MemoryEvent {
    int rank = 0;
    int device = 0;
    TimeNs ts = 0;
    int64_t bytes = 0;
    std::optional<int64_t> address;
    // The allocator's totals right after this event, where the trace records
    // them (PyTorch's "Total Allocated" / "Total Reserved"): absolute memory
    // in use, including what was allocated before recording began.
    std::optional<int64_t> totalAllocated;
    std::optional<int64_t> totalReserved;
};

struct Diagnostic {
    std::optional<int64_t> sourceId;
    Severity severity = Severity::Warning;
    std::string kind;
    int64_t count = 0;
    std::string example;
};

struct SourceInfo {
    int64_t id = 0;
    std::string path;
    std::string format;
    std::optional<int> rank;
    TimeNs timeBase = 0;
    TimeNs clockOffset = 0;
    std::string alignment;
    std::string details; // JSON text
};

struct Trace {
    std::map<std::string, std::string> meta;
    std::vector<SourceInfo> sources;
    std::vector<RankInfo> ranks;
    std::vector<GpuInfo> gpus;
    std::vector<StreamInfo> streams;
    std::vector<Activity> activities; // sorted by (rank, start, end)
    std::vector<NcclOp> ncclOps;
    std::vector<CpuRange> cpuRanges;  // sorted by (rank, tid, start)
    std::vector<ProcessGroup> processGroups;
    std::vector<MemoryEvent> memoryEvents;
    std::vector<Diagnostic> diagnostics;
    // (rank, tid) -> the name the trace gives the CPU thread ("thread 4242
    // (python3)"); threads without one are absent.
    std::map<std::pair<int, int64_t>, std::string> threadNames;
    std::vector<std::string> strings; // indexed by StringId; strings[0] is ""
    // The ranks read when only some were (LoadOptions::ranks), sorted; empty:
    // every rank the store holds. The others are not missing from the job.
    std::vector<int> ranksRead;

    const std::string& str(StringId id) const
    {
        static const std::string empty;
        return id >= 0 && static_cast<size_t>(id) < strings.size() ? strings[static_cast<size_t>(id)] : empty;
    }
    const StreamInfo* stream(int64_t id) const;
    bool simulated() const;
};

} // namespace pipescope
