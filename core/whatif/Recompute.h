#pragma once
// Activation recomputation per virtual stage (docs/whatif.md, "Recomputation
// and the memory-time front"): none keeps every activation until the
// backward; selective (Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models") drops the attention core's
// activations and re-runs that share of the forward inside the backward;
// full keeps only the stage's input and re-runs the layers' whole forward
// inside the backward, holding their activations again while it runs.
#include "whatif/Memory.h"
#include "whatif/Replay.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope::whatif {

struct CostModel;
struct Partition;

enum class Recompute : uint8_t { None, Selective, Full };

// "none", "selective", "full"
std::string_view toString(Recompute r);
std::optional<Recompute> recomputeFromString(std::string_view text);
// One name for every stage, or one per virtual stage, comma-separated
// ("full" or "full,selective,none,none"). Throws ValueError(Setting::Recompute)
// naming an unknown item.
std::vector<Recompute> parseRecompute(const std::string& text);
// "none" for an empty list; one name when all stages agree; else the list.
std::string recomputeText(const std::vector<Recompute>& perStage);
// A scenario's setting for `stages` virtual stages: empty is none
// everywhere, one item applies to every stage, else one per stage. Throws
// ValueError(Setting::Recompute) for another count.
std::vector<Recompute> recomputePerStage(const std::vector<Recompute>& setting, int stages);
bool anyRecompute(const std::vector<Recompute>& perStage);

// What one virtual stage stores per microbatch from its forward until its
// backward (storedBytes), and what its backward holds again while it runs
// the recomputed forward (recomputeBytes); both before the microbatch scale.
struct StageActivation {
    double storedBytes = 0;
    double recomputeBytes = 0;
};
// layerBytes: the stage's layers' activations; extraBytes: its first/last
// stage extras' (embedding, head, loss: never recomputed); inputBytes: the
// activation entering the stage (the cost model's p2pBytes).
StageActivation stageActivation(Recompute r, double layerBytes, double extraBytes, double inputBytes,
                                const MemoryConfig& config);
// Forward time re-run inside the backward for a stage whose layers' forward takes layerForwardNs.
double recomputeForwardNs(Recompute r, double layerForwardNs, const MemoryConfig& config);

// Per virtual stage, the bytes a microbatch stores and the bytes the
// backward holds again (recomputeBytes), scaled as the cost model scales
// activations for `microbatches`. perStage: recomputePerStage's answer.
struct ActivationBytes {
    std::vector<int64_t> stored, recompute;
};
ActivationBytes stageActivationBytes(const CostModel& model, const Partition& partition, int microbatches,
                                     const std::vector<Recompute>& perStage);
// Adds the recomputed forward to each stage's backward (B, and I when the
// backward is split), at the stage's speed and microbatch scale; uneven
// microbatches get it in proportion to their forward.
void addRecomputeCosts(const CostModel& model, const Partition& partition, const Schedule& schedule,
                       const std::vector<Recompute>& perStage, ReplayCosts& costs);

} // namespace pipescope::whatif
