#pragma once
// Steps of loading and summarising a store that carry a rule of their own:
// how loaded GPU activities find the NCCL operations they ran, and how a
// GPU's summary row (counts, kernel and GPU busy time) is accumulated.
// Internal to store/ (Store.cpp, StoreWriter.cpp); declared here for tests.
#include "model/Trace.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace pipescope::store::detail {

// Points each activity at the NCCL operations that name it (activityId):
// ncclIndex is the first such operation in `ncclOps`, ncclCount how many
// follow it side by side (a coalesced batch, at most 0xffff). Operations
// that name no loaded activity change nothing.
void linkNcclOps(std::vector<Activity>& activities, const std::vector<NcclOp>& ncclOps);

// The union of intervals added in ascending start order: first and last
// time, and busy = the length of the union (overlapping or touching
// intervals count once). close() after the last add().
struct BusyUnion {
    std::optional<TimeNs> first, last;
    TimeNs busy = 0;
    TimeNs blockStart = 0, blockEnd = 0;
    bool open = false;
    void add(TimeNs s, TimeNs e)
    {
        if (!first || s < *first)
            first = s;
        if (!last || e > *last)
            last = e;
        if (open && s <= blockEnd) {
            blockEnd = std::max(blockEnd, e);
            return;
        }
        close();
        blockStart = s;
        blockEnd = e;
        open = true;
    }
    void close()
    {
        if (open)
            busy += blockEnd - blockStart;
        open = false;
    }
};

// Activity counts per stream id and ActivityKind, as `pipescope info` shows them.
using StreamCounts = std::map<int64_t, std::array<int64_t, 4>>;

// One GPU's gpu_summary row, from its activities in ascending start order:
// counts per kind (kinds outside 0..3 are not counted), the union of its
// kernels, and the union of all but synchronisation (the GPU's busy time).
// Each activity of a known kind is also counted for its stream in `perStream`.
struct DeviceTally {
    std::array<int64_t, 4> counts{};
    BusyUnion kernels, gpu;
    void add(int kind, TimeNs s, TimeNs e, int64_t stream, StreamCounts& perStream)
    {
        if (kind >= 0 && kind < 4) {
            ++counts[static_cast<size_t>(kind)];
            ++perStream[stream][static_cast<size_t>(kind)];
        }
        if (kind == static_cast<int>(ActivityKind::Kernel))
            kernels.add(s, e);
        if (kind != static_cast<int>(ActivityKind::Sync))
            gpu.add(s, e);
    }
    void close()
    {
        kernels.close();
        gpu.close();
    }
};

} // namespace pipescope::store::detail
