#include "util/AtomicOutput.h"

#include "util/Error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace pipescope {

namespace fs = std::filesystem;

AtomicOutput::AtomicOutput(std::string finalPath) : final_(std::move(finalPath))
{
    if (final_.empty())
        throw Error("output path is empty; pass one with -o FILE");
    fs::path p(final_);
    fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw Error(final_ + ": cannot write: folder " + dir.string() + " does not exist; create it or choose another -o path");
    if (fs::is_directory(p, ec))
        throw Error(final_ + ": cannot write: it is a directory; give a file name with -o");
    if (::access(dir.c_str(), W_OK) != 0)
        throw Error(final_ + ": cannot write: folder " + dir.string() + " is not writable (" + std::strerror(errno) +
                    "); choose another -o path");
    temp_ = (dir / ("." + p.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
    fs::remove(temp_, ec);
}

AtomicOutput::~AtomicOutput()
{
    if (!committed_) {
        std::error_code ec;
        fs::remove(temp_, ec);
        fs::remove(temp_ + "-journal", ec);
        fs::remove(temp_ + "-wal", ec);
        fs::remove(temp_ + "-shm", ec);
    }
}

void AtomicOutput::commit()
{
    if (std::rename(temp_.c_str(), final_.c_str()) != 0)
        throw Error(final_ + ": cannot write: " + std::strerror(errno));
    committed_ = true;
}

void AtomicOutput::writeFile(const std::string& path, const std::string& contents)
{
    AtomicOutput out(path);
    std::FILE* f = std::fopen(out.tempPath().c_str(), "wb");
    if (!f)
        throw Error(path + ": cannot write: " + std::strerror(errno));
    size_t n = std::fwrite(contents.data(), 1, contents.size(), f);
    bool ok = n == contents.size();
    ok = (std::fflush(f) == 0) && ok;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok)
        throw Error(path + ": cannot write: " + std::strerror(errno) + " (disk full?)");
    out.commit();
}

} // namespace pipescope
