#pragma once
// Uneven microbatches (docs/whatif.md, Uneven microbatches): how much each
// microbatch of an iteration costs against the mean, and the orders the
// what-if can run them in. Packed sequences, multimodal batches and video
// make microbatches differ; a stage waiting on a neighbour's long microbatch
// idles even when the stages are balanced.
#include "model/Pipeline.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope::whatif {

// The order a scenario runs the microbatches in. Given: as measured (or as
// the tokens file lists them); Equal: every microbatch the mean (the same
// total work spread evenly); the others reorder the given microbatches.
enum class MicrobatchOrder : uint8_t { Given, Equal, LongestFirst, ShortestFirst, LongShort };

// "given", "equal", "longest-first", "shortest-first", "long-short"
std::string_view toString(MicrobatchOrder order);
// Also accepts "measured" and "as-measured" for Given.
std::optional<MicrobatchOrder> microbatchOrderFromString(std::string_view name);
const std::vector<MicrobatchOrder>& allMicrobatchOrders();

// A calibrated model keeps the measured microbatch sizes when their spread
// is at least kUnevenMicrobatchCv (model/Pipeline.h); below it every
// microbatch replays as its stage's mean.

// Where microbatch sizes came from: the measured steps, a tokens file, or
// simulate --microbatch-sizes.
enum class SizeSource : uint8_t { Trace, Tokens, Simulated };
// "trace", "tokens", "simulated"
std::string_view toString(SizeSource s);

struct MicrobatchSizes {
    SizeSource source = SizeSource::Trace;
    // Relative cost of each microbatch (1 = the row's mean), forward and
    // backward: one row for every layer alike, or one row per measured
    // virtual stage (a layer takes the row of the stage that ran it).
    std::vector<std::vector<double>> forward, backward;
    std::vector<double> tokens; // the tokens file's counts, when it came from one

    int count() const { return forward.empty() ? 0 : static_cast<int>(forward.front().size()); }
    int rows() const { return static_cast<int>(forward.size()); }
    // Each microbatch's size over all rows, forward and backward (mean 1).
    std::vector<double> size() const;
    // Coefficient of variation of size().
    double spread() const;
};

// The same work cut into `count` microbatches (the global batch kept): the
// new microbatch j covers [j, j + 1) x n / count of the n given ones and
// takes the mean size over what it covers, weighted by the overlap.
MicrobatchSizes resampledSizes(const MicrobatchSizes& sizes, int count);

// Position i of the schedule runs microbatch perm[i] of the given ones.
std::vector<int> microbatchPermutation(const std::vector<double>& size, MicrobatchOrder order);

// Relative sizes from a description (simulate --microbatch-sizes):
//   "lognormal:SIGMA"  log-normal sizes with that sigma, seeded;
//   "uniform:LO,HI"    uniform between LO and HI;
//   "A,B,C,..."        the sizes themselves (exactly `count` of them).
// Normalised to mean 1. Throws ValueError(Setting::MicrobatchSizes) naming the problem.
std::vector<double> microbatchSizesFromSpec(const std::string& spec, int count, uint64_t seed);

// A single-row MicrobatchSizes from relative sizes (forward and backward alike).
MicrobatchSizes uniformRows(std::vector<double> sizes, SizeSource source);

// A tokens file (--microbatch-tokens): the token count of each microbatch,
// as numbers separated by commas, spaces or new lines ('#' starts a comment),
// or JSON {"tokens": [...], "forward_ns_per_token": F, "backward_ns_per_token": B}
// where the per-token costs (per layer) are optional.
struct MicrobatchTokens {
    std::vector<double> tokens;
    std::optional<double> forwardNsPerToken, backwardNsPerToken;
};
// Throws Error naming the file and what is wrong with it.
MicrobatchTokens loadMicrobatchTokens(const std::string& path);

} // namespace pipescope::whatif
