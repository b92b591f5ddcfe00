#pragma once
// The ranges pipescope accepts from any input. docs/input-output-promises.md
// states them for users; values outside are counted as bad records (or, when
// nothing usable is left, make the input an error), never wrapped or trusted.
#include <cstddef>
#include <cstdint>

namespace pipescope {

// Global ranks are 0..kMaxRank: per-rank tables stay small however a file numbers its ranks.
inline constexpr int kMaxRank = 1'048'575;
inline constexpr int kMaxWorldSize = kMaxRank + 1;
constexpr bool validRank(int64_t r) { return r >= 0 && r <= kMaxRank; }

// Times on the aligned clock lie in [-kMaxTimeNs, kMaxTimeNs] (about 146
// years either side of the epoch), so that any difference of two times, and
// any time plus a duration, fits in int64 nanoseconds.
inline constexpr int64_t kMaxTimeNs = int64_t{1} << 62;
constexpr bool validTime(int64_t t) { return t >= -kMaxTimeNs && t <= kMaxTimeNs; }

// One name, argument or metadata value: longer ones are truncated and diagnosed.
inline constexpr size_t kMaxStringBytes = size_t{1} << 20;
// A whole top-level metadata value (deviceProperties, distributedInfo) kept for reading.
inline constexpr size_t kMaxMetadataBytes = size_t{16} << 20;
// A single string token in a JSON trace longer than this makes the file
// unusable: reading it would hold the whole token in memory.
inline constexpr size_t kMaxTokenBytes = size_t{64} << 20;
// Model descriptions and schedule files are read whole; they are small.
inline constexpr size_t kMaxDescriptionBytes = size_t{64} << 20;

// What-if work, counted in schedule steps (one F, B, I or W of one microbatch
// on one stage). A replay keeps a few tens of bytes per step; a JSON timeline
// or an emitted Kineto trace needs kilobytes per step, so both are capped
// lower. Larger requests are refused before any work starts.
inline constexpr int64_t kMaxReplaySteps = 10'000'000;
inline constexpr int64_t kReplayBytesPerStep = 64;       // schedule + timed step + arrival times
inline constexpr int64_t kMaxTimelineSteps = 500'000;
inline constexpr int64_t kTimelineBytesPerStep = 2'400; // JSON document in memory: step, transfer, bubble, memory point
inline constexpr int64_t kMaxEmittedSteps = 250'000;    // steps x iterations x data-parallel replicas
inline constexpr int kMaxEmittedRanks = 16'384;         // a simulated job's files, one per rank
inline constexpr int64_t kEmittedBytesPerStep = 4'600;  // Kineto events of one step, launch and transfer included
// Steps replayed by one auto-balance refinement and by a whole search.
inline constexpr int64_t kMaxBalanceSteps = 100'000'000;
inline constexpr int64_t kMaxSearchSteps = 400'000'000;

} // namespace pipescope
