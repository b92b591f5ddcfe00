#pragma once
// Steps of writeChromeTrace (ChromeTrace.cpp) worth testing alone
// (tst_trace_events). Internal to report/.
#include "model/Trace.h"
#include "report/ChromeTrace.h"
#include "util/TraceEventWriter.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace pipescope::report::detail {

// CPU lanes group a thread's ranges by what they are.
enum class CpuGroup : uint8_t { Annotations = 0, GpuAnnotations = 1, CpuOps = 2, Runtime = 3, Other = 4 };

CpuGroup groupOf(CpuRangeKind k);

// A thread of the written document: its tid within the rank's process and its name.
struct Lane {
    int tid = 0;
    std::string name;
};

struct RankLanes {
    std::map<int64_t, Lane> gpu;                      // store stream id -> lane
    std::map<std::pair<CpuGroup, int64_t>, Lane> cpu; // (group, thread id) -> lane
};

// The records an export keeps: those of the chosen ranks overlapping [from, to).
class ExportFilter {
public:
    explicit ExportFilter(const ChromeTraceOptions& options);
    bool keepRank(int rank) const { return allRanks_ || wanted_.count(rank) > 0; }
    bool keep(const Activity& a) const { return keepRank(a.rank) && inRange(a.start, a.end); }
    bool keep(const CpuRange& r) const { return keepRank(r.rank) && inRange(r.start, r.end); }

private:
    bool inRange(TimeNs start, TimeNs end) const { return end >= from_ && start < to_; }
    TimeNs from_, to_;
    std::set<int> wanted_;
    bool allRanks_;
};

// The lanes that receive events, per rank, numbered and named: tids from 1,
// GPU streams first in (device, stream) order ("stream 7 (compute)", with
// "GPU d " in front when the rank has several devices, the role when roleOf
// knows the store stream), then CPU threads in (group, thread) order
// ("thread 4242 (annotations)").
std::map<int, RankLanes> planLanes(const Trace& trace, const ExportFilter& filter,
                                   const std::map<int64_t, std::string>& roleOf);

// A kernel's NCCL facts as args, under the names the PyTorch profiler uses
// ("Collective name", "Src Rank" / "Dst Rank", "In msg nelems", ...); with
// `fused` (the operations of a kernel that ran several), "NCCL ops" lists
// them all.
void writeNcclArgs(TraceEventWriter& w, const NcclOp& op, const std::vector<const NcclOp*>* fused);

} // namespace pipescope::report::detail
