#pragma once
// The Pivot panel's table, without Qt: the analysis's steps grouped by stage
// and kind (F, B, I, W), and optionally by microbatch or iteration, with
// their count, total, mean, median (p50) and 95th percentile of each step's
// duration (end - start, as the timeline draws it). Percentiles are nearest
// rank: the ceil(p x n)-th shortest step. Every step the analysis holds
// counts: the selected iteration's, or every iteration's when analysed with
// allIterations.
#include "analysis/Analysis.h"

#include <cstdint>
#include <vector>

namespace pipescope::gui {

enum class PivotBy : uint8_t {
    StageKind,           // stage x kind
    StageKindMicrobatch, // stage x kind x microbatch
    StageKindIteration,  // stage x kind x iteration
};

struct PivotRow {
    int stage = 0;
    StepKind kind = StepKind::F;
    int microbatch = -1; // -1 unless grouped by microbatch
    int iteration = -1;  // -1 unless grouped by iteration
    int64_t count = 0;
    TimeNs totalNs = 0, meanNs = 0, p50Ns = 0, p95Ns = 0;
};

// An area selected on the timeline: the steps of these ranks that overlap
// [from, to), each counted whole (its own duration, as the area statistics
// count kernels that overlap the range).
struct StepArea {
    TimeNs from = 0, to = 0;
    std::vector<int> ranks; // sorted
    bool operator==(const StepArea&) const = default;
};
bool inArea(const Step& step, const StepArea& area);

// Rows in (stage, kind, microbatch or iteration) order; none without steps.
// With an area, only the steps in it.
std::vector<PivotRow> pivotSteps(const AnalysisResult& result, PivotBy by, const StepArea* area = nullptr);

// Nearest-rank percentile (0 < p <= 1) of values sorted ascending; 0 when empty.
TimeNs nearestRank(const std::vector<TimeNs>& sorted, double p);

} // namespace pipescope::gui
