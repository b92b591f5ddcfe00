#pragma once
// The collectors run inside someone else's program: when something fails they
// say so once on stderr, under a key, and let the program carry on.
#include <string>

namespace pipescope::collect {

// Prints "pipescope: <message>" the first time `key` is seen in this process.
void warnOnce(const char* key, const std::string& message);
// Informational line, suppressed by PIPESCOPE_CAPTURE_QUIET=1.
void info(const std::string& message);

} // namespace pipescope::collect
