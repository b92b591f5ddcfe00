#pragma once
// GPU speeds as users write them, parsed once for the CLI (--stage-speed,
// --gpu-types with --gpu-throughput) and the app's what-if editor (its
// "GPU speeds" box): one relative throughput per pipeline rank, 1 = as fast
// as the reference, 0.5 = twice as slow (docs/whatif.md, "Stage speeds").
// Errors are ValueError naming the setting ("stage-speed", "gpu-types",
// "gpu-throughput").
#include <string>
#include <string_view>
#include <vector>

namespace pipescope::whatif {

// "trace" (any case, blanks around it): read the speeds from the trace.
bool speedsFromTrace(std::string_view text);

// One number per item ("1", "0.8", ...), each finite, above 0 and at most
// 1,000,000. Blanks around an item are ignored.
std::vector<double> parseStageSpeeds(const std::vector<std::string>& items);
// The same from one comma-separated text ("1, 1, 0.8, 1"); empty text: none.
std::vector<double> parseStageSpeeds(std::string_view text);

// Per-rank speeds from a GPU type per rank (A,A,B,B) and each type's
// throughput (A=1,B=0.6).
std::vector<double> speedsFromGpuTypes(const std::vector<std::string>& types,
                                       const std::vector<std::string>& throughputs);

} // namespace pipescope::whatif
