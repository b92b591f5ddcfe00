#pragma once
// The typed timeline: what a Gantt view paints, measured or predicted. Lanes
// (steps, bubbles, one per GPU stream, CPU annotations) carry compact events
// sorted by start, and each lane a level-of-detail pyramid, so that a painter
// asks for a draw list whose size and cost follow the pixels, not the events
// (see drawList). The desktop app paints it; the report encodes it as JSON.
// Qt-free, immutable once built (build with TimelineBuild.h).
#include "analysis/Analysis.h"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope::timeline {

enum class LaneKind : uint8_t { Steps = 0, Bubbles = 1, Kernels = 2, Transfers = 3, Cpu = 4, Memory = 5 };
std::string_view toString(LaneKind kind);

// Codes of Event::code share one small range so a bucket can keep time per code.
inline constexpr int kMaxCodes = 8;
inline constexpr uint8_t kNoStep = 0xff;

// One block on a lane, 40 bytes. What `code` means depends on the lane:
// Steps: StepKind; Bubbles: BubbleCause; Kernels and Transfers: WorkClass;
// Cpu: CpuRangeKind. Memory (a counter track): each event is one sample,
// from its time to the next sample's, and `detail` holds the GPU memory the
// allocator had in use then, in KiB (kMemoryUnitBytes).
inline constexpr int64_t kMemoryUnitBytes = 1024;
struct Event {
    TimeNs start = 0;
    TimeNs end = 0;
    int32_t activity = -1;   // index into Trace::activities (measured GPU work), else -1
    int32_t name = 0;        // index into TimelineModel::names (0: none)
    int32_t microbatch = -1; // the step's, or for a kernel the enclosing step's; -1 none
    // Kernels and Transfers: index into TimelineModel::comms (-1 none);
    // Steps and Bubbles: the iteration index.
    int32_t detail = -1;
    uint8_t code = 0;
    uint8_t chunk = 0;
    uint8_t step = kNoStep; // Kernels: StepKind of the enclosing step, kNoStep outside steps
    TimeNs duration() const { return end - start; }
};

// What a communication or copy moved, for tooltips and statistics.
struct CommDetail {
    int64_t bytes = -1;   // -1 unknown
    int32_t peer = -1;    // point-to-point peer rank (the receiver for a predicted transfer)
    int32_t groupSize = -1;
    int32_t op = 0;       // NCCL op kind ("AllReduce", "Send", ...) as a name index
    bool backward = false; // predicted transfers: gradient (true) or activation
};

// Level of detail: level 0 splits the lane's span into buckets of `base` ns,
// each level is 4x coarser. A bucket holds the union of busy time inside it,
// the code with the most time, how many events start in it and the longest
// of those (so a query knows where a wide event interrupts a folded run).
struct LodBucket {
    TimeNs busy = 0;
    TimeNs longest = 0;
    TimeNs longestStart = 0;
    uint32_t count = 0;
    uint8_t code = 0;
};

struct Lod {
    TimeNs origin = 0;
    TimeNs base = 1;
    std::vector<std::vector<LodBucket>> levels;
    TimeNs width(int level) const { return base << (2 * level); }
    // The coarsest level whose buckets are at most `bucketNs` wide; -1 when even level 0 is wider.
    int levelFor(double bucketNs) const;
};

struct Lane {
    LaneKind kind = LaneKind::Kernels;
    int rank = 0;
    int stage = -1;   // pipeline stage of the rank, -1 outside the pipeline
    int replica = 0;  // data-parallel replica (which pipeline)
    int device = -1;
    int64_t stream = -1;        // Kernels: the trace's own stream id
    int64_t streamStoreId = -1; // Kernels: StreamInfo::id
    StreamRole role = StreamRole::Compute;
    int64_t tid = -1;           // Cpu: thread
    int depth = 0;              // Cpu: nesting row (deeper ranges share the last row)
    std::string label;          // short, without the rank: "steps", "stream 7 compute", ...
    // A compared baseline run's track (withBaselineTracks): its events point
    // into no trace of this model (activity -1) and its times are shifted.
    bool baseline = false;
    std::vector<Event> events;  // sorted by start
    std::vector<TimeNs> maxEnd; // [i]: latest end among events[0..i]; binary-searchable
    Lod lod;
};

struct IterationMark {
    int index = 0;
    std::string label;
    TimeNs start = 0;
    TimeNs end = 0;
};

// One item of a draw list. An exact item is one event (`event` >= 0, count 1);
// a folded item stands for `count` events too narrow to draw one by one, with
// the code holding most of their time and the busy share of its span.
struct DrawItem {
    TimeNs start = 0; // clipped to the query's start
    TimeNs end = 0;
    double x0 = 0;    // pixels from the query's start
    double x1 = 0;
    float busyFraction = 1.0f;
    uint32_t count = 1;
    int64_t event = -1; // index into Lane::events for exact items
    uint8_t code = 0;
};

struct DrawOptions {
    double foldPx = 3.0; // events narrower than this fold into their neighbours
};

// One kernel name's kernels in an area: what Perfetto's slice aggregation
// and Nsight's statistics give per name.
struct NameStats {
    int32_t name = 0;     // index into TimelineModel::names
    uint8_t code = 0;     // WorkClass of its kernels
    int64_t count = 0;
    TimeNs totalNs = 0, minNs = 0, maxNs = 0; // full kernel durations
};

// Statistics of a time range over some lanes. Times are clipped to the range;
// kernel count/sum/min/max count every Kernels-lane event overlapping it at its
// full duration (what the kernel took).
struct AreaStats {
    TimeNs from = 0, to = 0;
    std::array<TimeNs, 7> classNs{};     // per WorkClass (Kernels and Transfers lanes)
    std::array<int64_t, 7> classCount{};
    std::array<TimeNs, 4> stepNs{};      // per StepKind
    std::array<int64_t, 4> stepCount{};
    std::array<TimeNs, kBubbleCauses> idleNs{}; // per BubbleCause
    std::array<int64_t, kBubbleCauses> idleCount{};
    int64_t cpuRanges = 0;
    int64_t kernels = 0;
    TimeNs kernelSumNs = 0, kernelMinNs = 0, kernelMaxNs = 0;
    double kernelAvgNs = 0;
    std::vector<NameStats> kernelsByName; // every name, most total time first (then by name index)
};

struct SearchResult {
    std::string error;                         // a bad regular expression, in one sentence
    int64_t total = 0;
    std::vector<std::vector<int64_t>> perLane; // [lane]: event indices, by start
};

class TimelineModel {
public:
    std::vector<Lane> lanes; // grouped: stage (unmapped last), replica, rank, then steps, bubbles, streams, CPU
    std::vector<std::string> names; // names[0] is ""
    std::vector<CommDetail> comms;
    std::vector<IterationMark> iterations;
    TimeNs start = 0, end = 0; // over all events
    bool predicted = false;    // times relative to 0 from a replay

    // Sorts each lane, fills maxEnd and the pyramids, and the time span.
    // Builders call it; call it again after editing lanes by hand.
    void finalize();

    const std::string& name(int32_t id) const;
    const Event& event(int lane, int64_t index) const { return lanes[static_cast<size_t>(lane)].events[static_cast<size_t>(index)]; }
    size_t eventCount() const;
    size_t memoryBytes() const; // events, pyramids, names and details

    // The draw list of one lane over [from, to) painted `widthPx` wide:
    // exact events where they are at least foldPx wide, runs of narrower
    // events folded into counted blocks, dense parts read from the pyramid
    // level with about two buckets per pixel. Never more than about
    // widthPx / foldPx * 2 + 2 items; work O(pixels + items * log n).
    void drawList(int lane, TimeNs from, TimeNs to, int widthPx, std::vector<DrawItem>& out,
                  const DrawOptions& options = {}) const;
    std::vector<DrawItem> drawList(int lane, TimeNs from, TimeNs to, int widthPx, const DrawOptions& options = {}) const
    {
        std::vector<DrawItem> out;
        drawList(lane, from, to, widthPx, out, options);
        return out;
    }

    // The event under time t on a lane, or the nearest one within
    // `toleranceNs`; among overlapping events the latest-starting. -1 none.
    int64_t hitTest(int lane, TimeNs t, TimeNs toleranceNs = 0) const;
    // What a folded block stands for: the events of a lane starting in
    // [from, to), counted exactly up to `maxEvents` (a block of millions at
    // full zoom-out reads its first maxEvents and says so).
    struct GroupSummary {
        int64_t count = 0;          // events starting in the range
        TimeNs busyNs = 0;          // their durations summed
        int64_t longest = -1;       // index of the longest of them
        std::array<TimeNs, kMaxCodes> byCode{}; // durations per code (class, cause or step kind)
        bool complete = true;       // false: more than maxEvents, the figures cover the first maxEvents
    };
    GroupSummary summarize(int lane, TimeNs from, TimeNs to, int64_t maxEvents = 200'000) const;
    // First event starting after t, last event starting before t; -1 none.
    int64_t nextEvent(int lane, TimeNs t) const;
    int64_t previousEvent(int lane, TimeNs t) const;
    // Index of the first event on the lane ending after t (events.size() if none).
    size_t firstEndingAfter(int lane, TimeNs t) const;

    AreaStats areaStats(std::span<const int> laneIndices, TimeNs from, TimeNs to) const;

    // Events whose name contains `pattern` (or matches it as an ECMAScript
    // regular expression), per lane. Names are matched up to their first 4096
    // characters; an empty pattern finds nothing.
    SearchResult search(std::string_view pattern, bool regex, bool caseSensitive = false) const;
};

} // namespace pipescope::timeline
