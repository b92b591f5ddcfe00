#pragma once
// Inputs that are not regular files: a pipe (`cat t.json | pipescope import
// /dev/stdin`), a FIFO or a character device. They are read once, front to
// back, with the same limits as files. Opening one never blocks on a missing
// writer: pipescope waits for the first byte for a bounded time
// (PIPESCOPE_INPUT_WAIT_SECONDS, default 30) and then says what it expected.
#include <cstdio>
#include <string>

namespace pipescope {

// True when path exists and is not a regular file or a directory.
bool isStreamInput(const std::string& path);

// Opens a stream input for reading, once data (or the writer's end of input)
// has arrived. Throws Error naming the path when nothing comes in time or it
// cannot be opened. The FILE* is blocking and owned by the caller (fclose).
std::FILE* openStreamInput(const std::string& path);

// Copies a stream input into a new regular file in folder (which must exist)
// and returns its path; the caller removes it. Formats that need random
// access (SQLite exports) are read from the copy. Throws Error naming the
// input (or the folder, when it cannot be written).
std::string spoolStreamInput(const std::string& path, const std::string& folder);

} // namespace pipescope
