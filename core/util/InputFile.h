#pragma once
// Reads a file in chunks, transparently gunzipping it when it starts with the
// gzip magic. Truncated or corrupt gzip data is a FormatError naming the file.
// A pipe, FIFO or device is read the same way, as a stream (util/StreamInput.h).
#include "util/AtomicOutput.h"
#include "util/Limits.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope {

class InputFile {
public:
    explicit InputFile(std::string path); // throws Error when it cannot be opened
    ~InputFile();
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    // Next chunk of decompressed bytes; empty at end of file.
    std::string_view read();

    bool compressed() const { return gz_ != nullptr; }
    const std::string& path() const { return path_; }
    // Bytes consumed from disk so far and the file's size (0 for a stream), for progress reports.
    uint64_t bytesOnDisk() const;
    uint64_t sizeOnDisk() const { return size_; }

    // Whole (decompressed) contents; for small files (model descriptions,
    // schedules) and tests. Throws FormatError past maxBytes, so a small
    // compressed file cannot expand into gigabytes.
    static std::string readAll(const std::string& path, size_t maxBytes = kMaxDescriptionBytes);

private:
    struct GzState;
    std::string path_;
    AtomicOutput::InputGuard input_; // not written over while being read
    std::FILE* file_ = nullptr;
    std::unique_ptr<GzState> gz_;
    size_t fill(); // next raw chunk into raw_ (the first one was read when opening)
    std::vector<char> raw_;
    size_t pending_ = 0;    // bytes of raw_ read when opening, not yet handed on
    uint64_t consumed_ = 0; // raw bytes read so far
    std::vector<char> out_;
    uint64_t size_ = 0;
    bool eof_ = false;
};

} // namespace pipescope
