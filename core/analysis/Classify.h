#pragma once
// What a GPU activity is doing, from its kind, its NCCL record and its name.
#include "analysis/Analysis.h"

#include <string>
#include <string_view>

namespace pipescope {

// NCCL operations and kernel names: model/Collective.h.

// Kernel kinds as Holistic Trace Analysis names them (its regexes, first
// match): communication, memory, computation, other.
enum class HtaKernelKind : uint8_t { Communication, Memory, Computation, Other };
HtaKernelKind htaKernelKind(std::string_view name);

// Optimizer kernels (multi_tensor_apply, Adam, SGD, ...): once per iteration,
// outside the pipeline's forward and backward steps.
bool isOptimizerKernel(std::string_view name);

class CommRules;

// Classifies one activity. `nccl` is the op linked to it, when any. The
// user's rules in `rules` come first, then NCCL's record and kernel names,
// then the built-in table of other communication kernels (CommRules.h).
WorkClass classify(ActivityKind kind, std::string_view name, const NcclOp* nccl, const CommRules* rules = nullptr);

} // namespace pipescope
