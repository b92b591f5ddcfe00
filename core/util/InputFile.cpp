#include "util/InputFile.h"

#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/StreamInput.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <zlib.h>

namespace pipescope {

namespace {
constexpr size_t kChunk = 1 << 20;
}

struct InputFile::GzState {
    z_stream z{};
    bool ended = false; // saw Z_STREAM_END on the last member
};

InputFile::InputFile(std::string path) : path_(std::move(path))
{
    struct stat st{};
    if (::stat(path_.c_str(), &st) != 0)
        throw Error(path_ + ": cannot open: " + std::strerror(errno));
    if (S_ISDIR(st.st_mode))
        throw Error(path_ + ": is a directory, expected a trace file");
    input_ = AtomicOutput::InputGuard(path_);
    size_ = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
    // A pipe, FIFO or device is read as a stream: opened without blocking on a
    // missing writer, and never rewound (the first chunk is kept instead).
    file_ = S_ISREG(st.st_mode) ? std::fopen(path_.c_str(), "rb") : openStreamInput(path_);
    if (!file_)
        throw Error(path_ + ": cannot open: " + std::strerror(errno));
    raw_.resize(kChunk);
    // The destructor does not run for a constructor that throws: close here.
    auto fail = [this](const std::string& message) {
        std::fclose(file_);
        file_ = nullptr;
        gz_.reset();
        throw Error(message);
    };
    pending_ = std::fread(raw_.data(), 1, raw_.size(), file_);
    if (pending_ == 0 && std::ferror(file_))
        fail(path_ + ": read error: " + std::strerror(errno));
    consumed_ = pending_;
    if (pending_ >= 2 && static_cast<unsigned char>(raw_[0]) == 0x1f && static_cast<unsigned char>(raw_[1]) == 0x8b) {
        gz_ = std::make_unique<GzState>();
        if (inflateInit2(&gz_->z, 15 + 32) != Z_OK)
            fail(path_ + ": cannot initialise gzip decoder");
        out_.resize(kChunk * 4);
    }
}

InputFile::~InputFile()
{
    if (gz_)
        inflateEnd(&gz_->z);
    if (file_)
        std::fclose(file_);
}

uint64_t InputFile::bytesOnDisk() const
{
    return consumed_;
}

size_t InputFile::fill()
{
    if (pending_ > 0) {
        const size_t n = pending_;
        pending_ = 0;
        return n;
    }
    size_t n = std::fread(raw_.data(), 1, raw_.size(), file_);
    if (n == 0 && std::ferror(file_))
        throw Error(path_ + ": read error: " + std::strerror(errno));
    consumed_ += n;
    return n;
}

std::string_view InputFile::read()
{
    if (eof_)
        return {};
    if (!gz_) {
        size_t n = fill();
        if (n == 0)
            eof_ = true;
        return {raw_.data(), n};
    }
    z_stream& z = gz_->z;
    for (;;) {
        if (z.avail_in == 0) {
            size_t n = fill();
            if (n == 0) {
                eof_ = true;
                if (!gz_->ended)
                    throw FormatError(path_ + ": truncated gzip data (the file ends inside the compressed stream); "
                                              "re-copy or re-export the trace");
                return {};
            }
            z.next_in = reinterpret_cast<Bytef*>(raw_.data());
            z.avail_in = static_cast<uInt>(n);
        }
        if (gz_->ended) {
            // Concatenated gzip members are valid gzip; start the next one.
            if (inflateReset(&z) != Z_OK)
                throw FormatError(path_ + ": corrupt gzip data");
            gz_->ended = false;
        }
        z.next_out = reinterpret_cast<Bytef*>(out_.data());
        z.avail_out = static_cast<uInt>(out_.size());
        int rc = inflate(&z, Z_NO_FLUSH);
        size_t produced = out_.size() - z.avail_out;
        if (rc == Z_STREAM_END) {
            gz_->ended = true;
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            throw FormatError(path_ + ": corrupt gzip data (" + (z.msg ? z.msg : "inflate failed") +
                              "); re-copy or re-export the trace");
        }
        if (produced > 0)
            return {out_.data(), produced};
        if (gz_->ended && z.avail_in == 0) {
            // Peek for another member or the end of the file.
            continue;
        }
    }
}

std::string InputFile::readAll(const std::string& path, size_t maxBytes)
{
    InputFile f(path);
    std::string all;
    for (auto chunk = f.read(); !chunk.empty(); chunk = f.read()) {
        if (chunk.size() > maxBytes - all.size())
            throw FormatError(path + ": is larger than " + std::to_string(maxBytes >> 20) +
                              " MiB" + (f.compressed() ? " once decompressed" : "") +
                              ", more than such a file can reasonably hold; check that it is the right file");
        all.append(chunk);
    }
    return all;
}

} // namespace pipescope
