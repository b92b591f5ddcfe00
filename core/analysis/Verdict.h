#pragma once
// The one-sentence answer to "what limits this job?", drawn from an
// AnalysisResult: the critical path grouped by what it spends its time on,
// idle time by cause, and stage imbalance, with the thresholds below
// (docs/analysis.md, section 9). The CLI prints it first, the HTML report
// shows it on top, the analysis JSON carries it and the desktop app's summary
// panel shows it in bold.
#include "analysis/Analysis.h"

#include <array>
#include <string>
#include <vector>

namespace pipescope {

// What limits the job, as the verdict names it (docs/analysis.md, section 9).
enum class VerdictKind : uint8_t {
    None, ComputeBound, StageImbalance, PipelineBubbles, CommunicationBound, DpSync, HostBound, CopyBound, Idle, Straggler,
};
// "none", "compute-bound", "stage-imbalance", "pipeline-bubbles", "communication-bound", "dp-sync",
// "host-bound", "copy-bound", "idle", "straggler"
std::string_view toString(VerdictKind k);

struct Verdict {
    VerdictKind kind = VerdictKind::None;
    std::string headline;           // one sentence, plain text (trace strings never appear in it; escape it anyway)
    std::vector<std::string> facts; // supporting facts, most telling first
    TimeNs lossNs = 0;              // time per iteration the headline's limiter costs (see docs/analysis.md, section 9)
};

// What the critical path spends its time on. Idle segments of the path are
// attributed to the cause of the bubble they fall in on their rank.
enum class PathLimiter : uint8_t { Compute = 0, P2p = 1, Collective = 2, Host = 3, FillDrain = 4, Copy = 5, Other = 6 };
inline constexpr int kPathLimiters = 7;
std::string_view toString(PathLimiter l);

struct PathBreakdown {
    TimeNs totalNs = 0;
    std::array<TimeNs, kPathLimiters> byLimiter{};
    // Per limiter, the rank whose segments hold most of it (-1: none).
    std::array<int, kPathLimiters> topRank{};
};

PathBreakdown pathBreakdown(const AnalysisResult& result);

// Thresholds of the decision; documented in docs/analysis.md.
inline constexpr double kVerdictComputeShare = 0.50;  // compute >= half the path, or the busiest GPU busy >= half the iteration: compute-paced
inline constexpr double kVerdictImbalance = 1.10;     // busiest stage >= 10% over the mean: a bottleneck stage
inline constexpr double kVerdictBubbleIdle = 0.20;    // GPU idle >= 20% with fill/drain its largest cause: pipeline bubbles

// trace (optional) adds facts about the input: simulated, import errors.
Verdict verdict(const AnalysisResult& result, const Trace* trace = nullptr);

} // namespace pipescope
