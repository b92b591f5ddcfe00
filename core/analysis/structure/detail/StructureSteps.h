#pragma once
// Steps of the pipeline structure (stage map and steps) shared by the files of
// core/analysis/structure, and those tested alone (tst_structure_steps).
// Internal to core/analysis.
#include "analysis/detail/Context.h"

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace pipescope::detail {

// ---- stage map (StageMap.cpp)

// Orders a path or cycle of ranks (one connected component of the
// point-to-point peers, `adj`) so that stage 0 is the rank that computes
// first: a path starts at the end that computes first, a cycle at its rank
// that computes first, and each next rank is the unvisited neighbour that
// computes first (ties to the lower rank; ranks without compute come last).
// Sets `cycle` when the component has no end. A component that is no simple
// path or cycle comes back shorter than `comp`.
std::vector<int> orderChain(const std::vector<int>& comp, const std::map<int, std::set<int>>& adj,
                            const std::map<int, TimeNs>& firstCompute, bool& cycle);

// ---- steps (Steps.cpp, LabelSteps.cpp)

// A step whose chunk or microbatch may still be unknown (-1).
struct Draft {
    Step step;
    bool plainBackward = false; // a "backward" that did not say whether it is a full B or only I
};

// Runs of drafts per (iteration, rank), as [begin, end) indices into drafts
// sorted by iteration, rank and start.
using DraftRuns = std::vector<std::pair<size_t, size_t>>;

// Gives every step its chunk and microbatch where annotations did not, from
// the data flow between stages: which neighbour fed each step. Also tells a
// split backward's input part (I) from a full backward (B) where names do
// not, and finds the chunk layout (a ring for interleaved schedules, a V for
// ZB-V and DualPipeV). Sorts drafts by iteration, rank and start.
void labelSteps(Context& ctx, const AnalysisResult& out, std::vector<Draft>& drafts);

// Where a run of kernels holding a forward and a backward back to back
// (backwardFirst: the backward first) splits: the index of the second step's
// first kernel, at least 1. Kernel names that look like a backward's mark its
// extent when they say so (F then B splits at the first of them, B then F
// after the last); else it is the kernel boundary where the durations of the
// kernels before it add up nearest to `share` of the run's compute (the
// union of its kernels).
size_t splitPoint(const Context& ctx, const std::vector<uint32_t>& kernels, double share, bool backwardFirst);

// The last labels, per run: a microbatch still unknown is one past that of
// the run's previous step of the same chunk and direction (forwards apart,
// B and I together; 0 for the first), and a W takes the chunk and microbatch
// of the earliest I of its run that has no W yet (else chunk 0 and a count of
// its own). Expects every F, B and I to have its chunk.
void assignMicrobatches(std::vector<Draft>& drafts, const DraftRuns& runs);

} // namespace pipescope::detail
