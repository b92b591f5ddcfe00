#pragma once
// Reading a large job: the ranks to read (--ranks LIST), and a check, before
// anything is read, that the machine has the memory the whole read needs,
// so that a job too large ends with advice instead of the kernel's OOM killer.
#include "store/Store.h"

#include <optional>
#include <string>
#include <vector>

namespace pipescope::cli {

// "0-3,8,12-15": ranks in ascending order, each once. Throws FlagError
// naming --ranks when the text is not such a list.
std::vector<int> parseRankList(const std::string& text);

// What the analysis of a trace needs per GPU activity at its peak, measured
// by bench/bench_scale (the trace, the analysis and the what-if model).
inline constexpr int64_t kAnalysisBytesPerActivity = 600;

// Throws Error naming the input when analysing the ranks (all: nullopt)
// would need more memory than availableMemory() (util/Memory.h), with what
// to do instead.
void checkMemoryFor(Store& store, const std::optional<std::vector<int>>& ranks, const std::string& input);

// For a what-if calibrated on some ranks of a sharded job: each stage's pace
// against all its replicas, from the job index (CalibrateOptions::
// replicaPace). Empty for a store file, or when every rank is read.
std::vector<double> replicaPaceFor(Store& store, const std::optional<std::vector<int>>& ranks);

} // namespace pipescope::cli
