#pragma once
// Exact conversion of decimal microsecond timestamps (as Kineto writes them,
// e.g. "1712195495505582.988") to integer nanoseconds. Doubles cannot hold
// epoch-based microseconds to the nanosecond, so the text is parsed directly.
#include <cstdint>
#include <optional>
#include <string_view>

namespace pipescope {

// Parses an optionally signed decimal number of microseconds ("12", "12.5",
// "1.2345e3" is also accepted) into nanoseconds, rounding half away from zero
// beyond the third decimal. Returns nullopt for text that is not a number or
// does not fit in int64 nanoseconds.
std::optional<int64_t> parseMicrosToNanos(std::string_view text);

} // namespace pipescope
