#pragma once
// JSON documents read whole (job indexes, shard records, saved predictions,
// Megatron step files, model descriptions) are checked before they are
// parsed: a parsed value costs tens of times its text, and deep nesting costs
// the most ("[[[[..." of 64 KB can take gigabytes). A document over the size
// or nesting limit is refused with one FormatError naming it.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace pipescope {

// Documents written by pipescope or by a tool nest a few levels; 64 leaves room.
inline constexpr size_t kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in text (strings skipped), or
// limit + 1 as soon as it goes past limit.
size_t jsonDepth(std::string_view text, size_t limit = kMaxJsonDepth);

// Where the object or array that opens at text[open] ends: the index just
// past its closing bracket (strings skipped), or npos when it does not end
// within text. For reading a value out of a file's head.
size_t jsonValueEnd(std::string_view text, size_t open);

// Parses text as JSON after checking its size and nesting. `what` names the
// input in errors ("job/job.json: ..."); `advice` says what to do. Throws
// FormatError for a document too large, too deeply nested or not JSON.
nlohmann::json parseBoundedJson(std::string_view text, const std::string& what, size_t maxBytes,
                                const std::string& advice, size_t maxDepth = kMaxJsonDepth);

// Reads a whole file of at most maxBytes (refused with FormatError naming it
// beyond that, or when it cannot be read) without blocking on a FIFO.
std::string readBoundedFile(const std::string& path, size_t maxBytes, const std::string& advice);

} // namespace pipescope
