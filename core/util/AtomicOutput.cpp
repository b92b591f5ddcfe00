#include "util/AtomicOutput.h"

#include "util/Error.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <mutex>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace pipescope {

namespace fs = std::filesystem;

namespace {

// The name part of a temporary: ".NAME.tmp-PID" plus SQLite's "-journal" must
// fit a file name (255 bytes on Linux file systems), so a long NAME is cut and
// a hash of the whole name keeps two long names that share a start apart.
std::string temporaryStem(const std::string& name)
{
    constexpr size_t kMaxName = 255;
    constexpr size_t kOverhead = 1 /* . */ + 5 /* .tmp- */ + 10 /* pid */ + 8 /* -journal */;
    if (name.size() + kOverhead <= kMaxName)
        return name;
    uint64_t h = 1469598103934665603ull; // FNV-1a
    for (unsigned char c : name)
        h = (h ^ c) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return name.substr(0, kMaxName - kOverhead - 17) + "~" + std::string(hex, 16);
}

// ---- inputs no output may replace ----------------------------------------

struct InputId {
    uint64_t id;
    dev_t dev;
    ino_t ino;
    std::string real;
    bool folder = false; // a job folder: nothing inside it may be written either
};

std::mutex& inputsMutex()
{
    static std::mutex m;
    return m;
}

std::vector<InputId>& inputs()
{
    static std::vector<InputId> v;
    return v;
}

std::string realPath(const std::string& path);

uint64_t gNextInputId = 1;              // guarded by inputsMutex()
std::atomic<bool> gKeepInputs{false};   // protectInputsForProcess() was called

// Registers path and returns its registration's id (0: not a file that can be overwritten).
uint64_t registerInput(const std::string& path)
{
    struct stat st{};
    InputId id{0, 0, 0, realPath(path)};
    if (::stat(path.c_str(), &st) == 0) {
        // Devices and pipes are read, not replaced; only files can be
        // overwritten. A job folder (one with a job.json) read as a job
        // protects every file in it: its index, shard records and stores.
        if (S_ISDIR(st.st_mode)) {
            // Only a job folder: a folder of traces may take a report of them.
            struct stat index{};
            if (id.real.empty() || ::stat((id.real + "/job.json").c_str(), &index) != 0)
                return 0;
            id.folder = true;
        } else if (!S_ISREG(st.st_mode)) {
            return 0;
        }
        id.dev = st.st_dev;
        id.ino = st.st_ino;
    }
    std::lock_guard lock(inputsMutex());
    id.id = gNextInputId++;
    inputs().push_back(std::move(id));
    return inputs().back().id;
}

void unregisterInput(uint64_t id)
{
    if (id == 0 || gKeepInputs.load())
        return;
    std::lock_guard lock(inputsMutex());
    auto& v = inputs();
    for (auto it = v.begin(); it != v.end(); ++it)
        if (it->id == id) {
            v.erase(it);
            return;
        }
}

std::string realPath(const std::string& path)
{
    std::error_code ec;
    fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
    return ec ? std::string() : p.string();
}

// ---- temporaries removed when a signal ends the process --------------------
// The handler may only use async-signal-safe calls, so paths live in fixed
// buffers claimed with atomics.

constexpr int kSlots = 32;
constexpr size_t kPathMax = 4096;
struct TempSlot {
    std::atomic<bool> used{false};
    std::atomic<bool> ready{false};
    char path[kPathMax];
};
std::array<TempSlot, kSlots> gSlots;
std::once_flag gHandlersOnce;

void removeTree(const char* path, int depth);

void removeTreeAt(int dirFd, const char* name, int depth)
{
    if (::unlinkat(dirFd, name, 0) == 0 || errno == ENOENT)
        return;
    if (depth > 2)
        return;
    int fd = ::openat(dirFd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    alignas(8) char buf[4096];
    for (;;) {
        long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name
            unsigned short reclen;
            std::memcpy(&reclen, buf + off + 16, sizeof reclen);
            const char* entry = buf + off + 19;
            if (std::strcmp(entry, ".") != 0 && std::strcmp(entry, "..") != 0)
                removeTreeAt(fd, entry, depth + 1);
            off += reclen;
        }
    }
    ::close(fd);
    ::unlinkat(dirFd, name, AT_REMOVEDIR);
}

void removeTree(const char* path, int depth) { removeTreeAt(AT_FDCWD, path, depth); }

void removeTracked()
{
    static const char* const suffixes[] = {"-journal", "-wal", "-shm"};
    for (auto& s : gSlots) {
        if (!s.ready.load())
            continue;
        removeTree(s.path, 0);
        size_t len = ::strnlen(s.path, kPathMax);
        for (const char* suffix : suffixes) {
            char p[kPathMax + 16];
            std::memcpy(p, s.path, len);
            std::memcpy(p + len, suffix, std::strlen(suffix) + 1);
            ::unlink(p);
        }
    }
}

void onSignal(int sig)
{
    removeTracked();
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

void installHandlers()
{
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGABRT}) {
        struct sigaction old{};
        if (::sigaction(sig, nullptr, &old) != 0)
            continue;
        // Leave signals the caller ignores (nohup) or handles itself alone.
        if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
            continue;
        struct sigaction sa{};
        sa.sa_handler = onSignal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        ::sigaction(sig, &sa, nullptr);
    }
}

bool processGone(long pid)
{
    if (pid <= 0 || pid == ::getpid())
        return false;
    return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

} // namespace

void AtomicOutput::protectInput(const std::string& path) { registerInput(path); }

void AtomicOutput::protectInputsForProcess() { gKeepInputs.store(true); }

AtomicOutput::InputGuard::InputGuard(const std::string& path) : id_(registerInput(path)) {}

AtomicOutput::InputGuard::~InputGuard() { release(); }

AtomicOutput::InputGuard::InputGuard(InputGuard&& other) noexcept : id_(std::exchange(other.id_, 0)) {}

AtomicOutput::InputGuard& AtomicOutput::InputGuard::operator=(InputGuard&& other) noexcept
{
    if (this != &other) {
        release();
        id_ = std::exchange(other.id_, 0);
    }
    return *this;
}

void AtomicOutput::InputGuard::release()
{
    unregisterInput(std::exchange(id_, 0));
}

void AtomicOutput::refuseInput(const std::string& path)
{
    struct stat st{};
    const bool exists = ::stat(path.c_str(), &st) == 0;
    const std::string real = realPath(path);
    std::lock_guard lock(inputsMutex());
    for (const auto& in : inputs()) {
        // An inode number is only the input's while the input still holds it:
        // once an input is deleted, a new file may be given the same number.
        auto stillTheInput = [&in] {
            struct stat now{};
            return in.real.empty() || (::stat(in.real.c_str(), &now) == 0 && now.st_dev == in.dev && now.st_ino == in.ino);
        };
        if (in.folder) {
            // Anything that resolves inside the folder (or is the folder).
            const bool inside = !real.empty() && real.size() >= in.real.size() &&
                                real.compare(0, in.real.size(), in.real) == 0 &&
                                (real.size() == in.real.size() || real[in.real.size()] == '/' || in.real == "/");
            if (inside)
                throw Error(path + ": cannot write: it lies in job folder " + in.real +
                            ", an input of this command, and would damage the job; choose an -o path outside it");
            continue;
        }
        bool same = (exists && in.ino != 0 && in.dev == st.st_dev && in.ino == st.st_ino && stillTheInput()) ||
                    (!real.empty() && real == in.real);
        if (same)
            throw Error(path + ": cannot write: it is also an input of this command and would be destroyed; "
                               "choose another -o path");
    }
}

int AtomicOutput::trackTemporary(const std::string& path)
{
    std::call_once(gHandlersOnce, installHandlers);
    if (path.size() + 1 > kPathMax)
        return -1;
    for (int i = 0; i < kSlots; ++i) {
        bool expected = false;
        if (gSlots[static_cast<size_t>(i)].used.compare_exchange_strong(expected, true)) {
            auto& s = gSlots[static_cast<size_t>(i)];
            std::memcpy(s.path, path.c_str(), path.size() + 1);
            s.ready.store(true);
            return i;
        }
    }
    return -1; // more than kSlots outputs at once: left to removeStaleTemporaries()
}

void AtomicOutput::untrackTemporary(int handle)
{
    if (handle < 0 || handle >= kSlots)
        return;
    auto& s = gSlots[static_cast<size_t>(handle)];
    s.ready.store(false);
    s.used.store(false);
}

void AtomicOutput::removeStaleTemporaries(const std::string& folder, const std::string& name)
{
    const std::string prefix = "." + temporaryStem(name) + ".tmp-";
    std::error_code ec;
    for (auto it = fs::directory_iterator(folder, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        const std::string entry = it->path().filename().string();
        if (entry.compare(0, prefix.size(), prefix) != 0)
            continue;
        size_t i = prefix.size(), digits = 0;
        long pid = 0;
        while (i < entry.size() && entry[i] >= '0' && entry[i] <= '9' && digits < 10) {
            pid = pid * 10 + (entry[i] - '0');
            ++i;
            ++digits;
        }
        const std::string rest = entry.substr(i);
        if (digits == 0 || !(rest.empty() || rest == "-journal" || rest == "-wal" || rest == "-shm"))
            continue;
        if (processGone(pid)) {
            std::error_code rmEc;
            fs::remove_all(it->path(), rmEc);
        }
    }
}

AtomicOutput::AtomicOutput(std::string finalPath, Target target) : final_(std::move(finalPath))
{
    if (final_.empty())
        throw Error("output path is empty; pass one with -o FILE");
    if (final_ == "-") { // the usual name for standard output
        if (target == Target::RegularFile)
            throw Error("-o -: a store cannot be written to standard output (it is written out of order); give a file name");
        final_ = "/dev/stdout";
    }
    refuseInput(final_);
    target_ = final_;
    struct stat lst{}, st{};
    const bool isLink = ::lstat(final_.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
    if (::stat(final_.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        // A terminal, pipe or device: renaming over it would replace the node itself.
        if (target == Target::RegularFile)
            throw Error(final_ + ": cannot write: it is not a regular file (a device, pipe or socket); "
                                 "a store must be written to a regular file, choose another -o path");
        direct_ = true;
        temp_ = final_;
        return;
    }
    if (isLink) {
        // Replace the file the link points to and keep the link itself.
        target_ = realPath(final_);
        if (target_.empty())
            throw Error(final_ + ": cannot write: the symbolic link cannot be resolved; choose another -o path");
    }
    fs::path p(target_);
    fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw Error(final_ + ": cannot write: folder " + dir.string() + " does not exist; create it or choose another -o path");
    if (fs::is_directory(p, ec))
        throw Error(final_ + ": cannot write: it is a directory; give a file name with -o");
    if (::access(dir.c_str(), W_OK) != 0)
        throw Error(final_ + ": cannot write: folder " + dir.string() + " is not writable (" + std::strerror(errno) +
                    "); choose another -o path");
    removeStaleTemporaries(dir.string(), p.filename().string());
    temp_ = (dir / ("." + temporaryStem(p.filename().string()) + ".tmp-" + std::to_string(::getpid()))).string();
    fs::remove(temp_, ec);
    tracked_ = trackTemporary(temp_);
}

AtomicOutput::~AtomicOutput()
{
    if (!committed_ && !direct_) {
        std::error_code ec;
        fs::remove(temp_, ec);
        fs::remove(temp_ + "-journal", ec);
        fs::remove(temp_ + "-wal", ec);
        fs::remove(temp_ + "-shm", ec);
    }
    untrackTemporary(tracked_);
}

void AtomicOutput::commit()
{
    if (direct_) {
        committed_ = true;
        return;
    }
    // An input registered after construction must still not be replaced.
    refuseInput(final_);
    if (std::rename(temp_.c_str(), target_.c_str()) != 0)
        throw Error(final_ + ": cannot write: " + std::strerror(errno));
    committed_ = true;
}

void AtomicOutput::writeFile(const std::string& path, const std::string& contents)
{
    AtomicOutput out(path, Target::FileOrStream);
    std::FILE* f = std::fopen(out.tempPath().c_str(), out.direct() ? "w" : "wb");
    if (!f)
        throw Error(path + ": cannot write: " + std::strerror(errno));
    size_t n = std::fwrite(contents.data(), 1, contents.size(), f);
    bool ok = n == contents.size();
    int err = ok ? 0 : errno;
    if (std::fflush(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (std::fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok)
        throw Error(path + ": cannot write: " + std::strerror(err) +
                    (err == ENOSPC ? "; free space on its disk or choose another -o path" : "; choose another -o path"));
    out.commit();
}

} // namespace pipescope
