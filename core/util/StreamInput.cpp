#include "util/StreamInput.h"

#include "util/Error.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pipescope {

namespace {

int waitSeconds()
{
    if (const char* env = std::getenv("PIPESCOPE_INPUT_WAIT_SECONDS")) {
        char* end = nullptr;
        long v = std::strtol(env, &end, 10);
        if (end != env && *end == '\0' && v >= 0 && v <= 86400)
            return static_cast<int>(v);
    }
    return 30;
}

} // namespace

bool isStreamInput(const std::string& path)
{
    struct stat st{};
    return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

std::FILE* openStreamInput(const std::string& path)
{
    // O_NONBLOCK: opening a FIFO that no one writes to returns at once
    // instead of blocking until a writer appears.
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        throw Error(path + ": cannot open: " + std::strerror(errno));
    const int limit = waitSeconds();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit);
    for (;;) {
        struct pollfd p{fd, POLLIN, 0};
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        const int rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left.count(), 1000))));
        if (rc < 0 && errno != EINTR) {
            const int err = errno;
            ::close(fd);
            throw Error(path + ": cannot read: " + std::strerror(err));
        }
        if (rc > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)))
            break; // data, or the writer's end of input: read() now returns without waiting
        if (std::chrono::steady_clock::now() >= deadline) {
            ::close(fd);
            throw Error(path + ": nothing arrived within " + std::to_string(limit) +
                        " s (a pipe or FIFO with no writer?); start the program that writes the trace first, or "
                        "pass a file (PIPESCOPE_INPUT_WAIT_SECONDS sets how long to wait)");
        }
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0)
        ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    std::FILE* f = ::fdopen(fd, "rb");
    if (!f) {
        const int err = errno;
        ::close(fd);
        throw Error(path + ": cannot open: " + std::strerror(err));
    }
    return f;
}

std::string spoolStreamInput(const std::string& path, const std::string& folder)
{
    std::FILE* in = openStreamInput(path);
    std::string name = std::filesystem::path(path).filename().string();
    if (name.empty() || name.size() > 100)
        name = "input";
    const std::string out = (std::filesystem::path(folder) / name).string();
    std::FILE* to = std::fopen(out.c_str(), "wbx");
    if (!to) {
        const int err = errno;
        std::fclose(in);
        throw Error(out + ": cannot write a copy of " + path + " (" + std::strerror(err) +
                    "); set TMPDIR to a writable folder with room for the trace");
    }
    char buf[1 << 16];
    bool ok = true;
    int err = 0;
    uint64_t total = 0;
    for (;;) {
        const size_t n = std::fread(buf, 1, sizeof buf, in);
        if (n == 0) {
            if (std::ferror(in)) {
                std::fclose(in);
                std::fclose(to);
                std::remove(out.c_str());
                throw Error(path + ": read error: " + std::strerror(errno));
            }
            break;
        }
        total += n;
        if (std::fwrite(buf, 1, n, to) != n) {
            ok = false;
            err = errno;
            break;
        }
    }
    std::fclose(in);
    if (std::fclose(to) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        std::remove(out.c_str());
        throw Error(out + ": cannot write a copy of " + path + " (" + std::strerror(err) +
                    "); set TMPDIR to a folder with room for the trace");
    }
    if (total == 0) {
        std::remove(out.c_str());
        throw FormatError(path + ": is not a regular file (a pipe or device) and gave no data; send a trace into it "
                                 "(cat trace.json | pipescope import /dev/stdin -o job.pipescope) or pass a file");
    }
    return out;
}

} // namespace pipescope
