#include "import/ShardedImport.h"

#include "import/common/ClockAlignment.h"
#include "import/common/FileNames.h"
#include "store/Store.h"
#include "util/BoundedJson.h"
#include "util/Error.h"
#include "util/Format.h"

#include <array>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <numeric>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

namespace pipescope {

namespace fs = std::filesystem;

namespace {

std::optional<int> parseCount(std::string_view text)
{
    if (text.empty() || text.size() > 9)
        return std::nullopt;
    int v = 0;
    for (char c : text) {
        if (c < '0' || c > '9')
            return std::nullopt;
        v = v * 10 + (c - '0');
    }
    return v;
}

} // namespace

ShardTask parseShardTask(std::string_view text)
{
    const size_t slash = text.find('/');
    const auto k = slash == std::string_view::npos ? std::nullopt : parseCount(text.substr(0, slash));
    const auto n = slash == std::string_view::npos ? std::nullopt : parseCount(text.substr(slash + 1));
    if (!k || !n || *n < 1 || *k >= *n)
        throw Error("--shard " + std::string(text) + ": expected K/N with 0 <= K < N, e.g. --shard 0/4 for the first of four tasks");
    if (*n > kMaxShardTasks)
        throw Error("--shard " + std::string(text) + ": at most " + std::to_string(kMaxShardTasks) +
                    " tasks may import one job; start fewer tasks (each imports several ranks)");
    return {*k, *n, "--shard"};
}

std::optional<ShardTask> shardTaskFromEnvironment(const std::function<const char*(const char*)>& getenv)
{
    auto number = [&](const char* name) -> std::optional<int> {
        const char* v = getenv(name);
        if (!v)
            return std::nullopt;
        auto n = parseCount(v);
        if (!n)
            throw Error(std::string(name) + "=" + printable(v, 40) +
                        ": not a task number; run pipescope import under the launcher as it sets it, or give --shard K/N");
        return n;
    };
    struct Pair {
        const char* rank;
        const char* size;
    };
    // An MPI launcher's numbers come first: mpirun inside a Slurm allocation
    // starts its daemons with srun, one per node, so SLURM_PROCID there counts
    // nodes, not tasks. srun sets SLURM_STEP_NUM_TASKS in each task; a batch
    // script has SLURM_NTASKS and SLURM_PROCID=0 too but is a single process.
    for (Pair p : {Pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, Pair{"PMI_RANK", "PMI_SIZE"},
                   Pair{"SLURM_PROCID", "SLURM_STEP_NUM_TASKS"}}) {
        const auto rank = number(p.rank);
        const auto size = rank ? number(p.size) : std::nullopt;
        if (!rank || !size)
            continue;
        if (*size < 1 || *rank >= *size)
            throw Error(std::string(p.rank) + "=" + std::to_string(*rank) + " is not below " + p.size + "=" +
                        std::to_string(*size) + "; give --shard K/N");
        if (*size > kMaxShardTasks)
            throw Error(std::string(p.size) + "=" + std::to_string(*size) + ": at most " + std::to_string(kMaxShardTasks) +
                        " tasks may import one job; start fewer tasks, or give --shard K/N");
        return ShardTask{*rank, *size, std::string(p.rank) + "/" + p.size};
    }
    return std::nullopt;
}

namespace {

// A trace's head: its first 64 KB, or more while its distributedInfo does
// not end there (the default group of a 16,384-rank job lists every rank:
// about 100-250 KB), up to 4 MB.
constexpr size_t kHeadBytes = 64 << 10;
constexpr size_t kMaxHeadBytes = 4 << 20;

std::string headText(const std::string& path, size_t bytes)
{
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        return {};
    std::string raw(bytes, '\0');
    raw.resize(std::fread(raw.data(), 1, raw.size(), f));
    std::fclose(f);
    if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f || static_cast<unsigned char>(raw[1]) != 0x8b)
        return raw;
    std::string text(bytes, '\0');
    z_stream z{};
    if (inflateInit2(&z, 15 + 32) != Z_OK)
        return {};
    z.next_in = reinterpret_cast<Bytef*>(raw.data());
    z.avail_in = static_cast<uInt>(raw.size());
    z.next_out = reinterpret_cast<Bytef*>(text.data());
    z.avail_out = static_cast<uInt>(text.size());
    inflate(&z, Z_NO_FLUSH);
    text.resize(text.size() - z.avail_out);
    inflateEnd(&z);
    return text;
}

// The end of the JSON object or array at text[open], npos when cut off: as
// jsonValueEnd, with long runs of numbers skipped a table lookup a byte.
size_t containerEnd(std::string_view text, size_t open)
{
    static const auto special = [] {
        std::array<bool, 256> t{};
        for (unsigned char c : std::string_view("\"{}[]"))
            t[c] = true;
        return t;
    }();
    const char* p = text.data();
    const size_t n = text.size();
    size_t depth = 0;
    for (size_t i = open; i < n; ++i) {
        while (i < n && !special[static_cast<unsigned char>(p[i])])
            ++i;
        if (i >= n)
            break;
        const char c = p[i];
        if (c == '"') {
            for (++i; i < n && p[i] != '"'; ++i)
                if (p[i] == '\\')
                    ++i;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if (depth > 0 && --depth == 0) {
            return i + 1;
        }
    }
    return std::string_view::npos;
}

// The JSON object that follows `"key":` in text, when it ends within it.
std::optional<std::string_view> objectAfter(std::string_view text, std::string_view key)
{
    const size_t at = text.find(key);
    if (at == std::string_view::npos)
        return std::nullopt;
    const size_t open = text.find('{', at + key.size());
    if (open == std::string_view::npos)
        return std::nullopt;
    const size_t end = containerEnd(text, open);
    if (end == std::string_view::npos)
        return std::nullopt; // cut off by the head's end
    return text.substr(open, end - open);
}

bool namesPipeline(std::string desc)
{
    for (char& c : desc)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (desc.find("pipeline") != std::string::npos)
        return true;
    size_t i = 0;
    while (i < desc.size()) {
        while (i < desc.size() && !std::isalnum(static_cast<unsigned char>(desc[i])))
            ++i;
        size_t j = i;
        while (j < desc.size() && std::isalnum(static_cast<unsigned char>(desc[j])))
            ++j;
        if (desc.compare(i, j - i, "pp") == 0)
            return true;
        i = j;
    }
    return false;
}

void readPipelineGroup(const nlohmann::json& pg, TraceHead& head)
{
    if (!pg.is_object())
        return;
    auto desc = pg.find("pg_desc");
    auto ranks = pg.find("ranks");
    if (desc == pg.end() || !desc->is_string() || ranks == pg.end() || !ranks->is_array() || !namesPipeline(*desc))
        return;
    std::vector<int> group;
    for (const auto& r : *ranks)
        if (r.is_number_integer() && r.get<int64_t>() >= 0 && r.get<int64_t>() < (1 << 24))
            group.push_back(r.get<int>());
    if (group.size() > 1)
        head.pipelineGroups.push_back(std::move(group));
}

// The heads of thousands of files, each read by every task: the groups of
// every rank (the default group, data parallel) are skipped, not parsed,
// in one fast pass; only a pipeline group (a few ranks) is parsed.

// The value after `"key"` and a colon at `at` (where the key's quote
// starts), as JSON; discarded when it is not there or not JSON.
nlohmann::json scalarAfter(std::string_view t, size_t at, size_t keyLength)
{
    size_t i = at + keyLength;
    while (i < t.size() && (t[i] == ' ' || t[i] == '\n' || t[i] == '\r' || t[i] == '\t'))
        ++i;
    if (i >= t.size() || t[i] != ':')
        return nlohmann::json(nlohmann::json::value_t::discarded);
    ++i;
    while (i < t.size() && (t[i] == ' ' || t[i] == '\n' || t[i] == '\r' || t[i] == '\t'))
        ++i;
    size_t end = i;
    if (end < t.size() && t[end] == '"') {
        for (++end; end < t.size() && t[end] != '"'; ++end)
            if (t[end] == '\\')
                ++end;
        ++end;
    } else {
        while (end < t.size() && t[end] != ',' && t[end] != '}' && t[end] != ']' && t[end] != ' ' && t[end] != '\n' && t[end] != '\r')
            ++end;
    }
    if (end > t.size() || end == i)
        return nlohmann::json(nlohmann::json::value_t::discarded);
    return nlohmann::json::parse(t.substr(i, end - i), nullptr, false);
}

// The rank and the pipeline groups of a trace's distributedInfo (the
// object's text, whole): its "rank" and each group whose "pg_desc" names a
// pipeline (PyTorch's pg_config: an array of flat objects, or an object of them).
void readDistributedInfo(std::string_view info, TraceHead& head)
{
    constexpr std::string_view kRank = "\"rank\"", kDesc = "\"pg_desc\"";
    for (size_t at = info.find(kRank); at != std::string_view::npos && !head.rank; at = info.find(kRank, at + 1)) {
        const auto r = scalarAfter(info, at, kRank.size());
        if (r.is_number_integer() && r.get<int64_t>() >= 0 && r.get<int64_t>() < (1 << 24))
            head.rank = r.get<int>();
    }
    for (size_t at = info.find(kDesc); at != std::string_view::npos; at = info.find(kDesc, at + 1)) {
        const auto desc = scalarAfter(info, at, kDesc.size());
        if (!desc.is_string() || !namesPipeline(desc.get<std::string>()))
            continue;
        // The group: the object around its pg_desc (flat: no braces in it before).
        const size_t open = info.rfind('{', at);
        if (open == std::string_view::npos || open == 0)
            continue;
        const size_t end = containerEnd(info, open);
        if (end == std::string_view::npos)
            continue;
        readPipelineGroup(nlohmann::json::parse(info.substr(open, end - open), nullptr, false), head);
    }
}

} // namespace

TraceHead readTraceHead(const std::string& path)
{
    TraceHead head;
    std::error_code ec;
    head.bytes = static_cast<int64_t>(fs::file_size(path, ec));
    if (ec)
        head.bytes = 0;
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        head.rank = rankFromFileName(path); // a pipe is not read twice (and would block without a writer)
        return head;
    }
    for (size_t bytes = kHeadBytes;; bytes *= 4) {
        const std::string text = headText(path, bytes);
        if (auto info = objectAfter(text, "\"distributedInfo\"")) {
            readDistributedInfo(*info, head);
            break;
        }
        // Read further only where distributedInfo begins but is cut off.
        if (text.size() < bytes || bytes >= kMaxHeadBytes || text.find("\"distributedInfo\"") == std::string::npos)
            break;
    }
    if (!head.rank)
        head.rank = rankFromFileName(path);
    try {
        head.wholeJobOnly = detectFormat(path) == "megatron-timing";
    } catch (const Error&) {
        // Not a trace: the import of its shard says so.
    }
    return head;
}

namespace {

uint64_t fnv1a(uint64_t h, std::string_view bytes)
{
    for (unsigned char c : bytes) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

struct UnionFind {
    std::map<int, int> parent;
    int find(int x)
    {
        auto it = parent.emplace(x, x).first;
        if (it->second == x)
            return x;
        const int root = find(it->second);
        parent[x] = root;
        return root;
    }
    void join(int a, int b)
    {
        a = find(a);
        b = find(b);
        if (a != b)
            parent[std::max(a, b)] = std::min(a, b);
    }
};

} // namespace

ShardPlan planShards(const std::vector<std::string>& files, const std::vector<TraceHead>& heads, int shards)
{
    if (shards < 1)
        throw Error("a sharded import needs at least one shard");
    ShardPlan plan;
    plan.shards = shards;
    plan.files.resize(static_cast<size_t>(shards));
    uint64_t h = fnv1a(14695981039346656037ull, std::to_string(shards));
    for (size_t i = 0; i < files.size(); ++i)
        h = fnv1a(fnv1a(h, files[i]), "|" + std::to_string(heads[i].bytes) + "\n");
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    plan.fingerprint = hex;

    UnionFind groups;
    bool anyGroup = false;
    for (const TraceHead& head : heads) {
        anyGroup = anyGroup || head.wholeJobOnly;
        for (const auto& g : head.pipelineGroups)
            for (size_t j = 1; j < g.size(); ++j) {
                groups.join(g[0], g[j]);
                anyGroup = true;
            }
    }
    std::vector<size_t> shardOf(files.size(), 0);
    if (anyGroup) {
        const bool timings = std::any_of(heads.begin(), heads.end(), [](const TraceHead& t) { return t.wholeJobOnly; });
        plan.groupedBy = timings ? "pipeline groups (Megatron step timings: one pipeline)"
                                 : "pipeline groups (the process groups in the traces' distributedInfo)";
        // Components of files: by the root of their rank; a file without a rank stands alone.
        std::map<std::pair<int, size_t>, std::vector<size_t>> components;
        for (size_t i = 0; i < files.size(); ++i)
            components[heads[i].wholeJobOnly ? std::make_pair(-2, size_t{0})
                       : heads[i].rank   ? std::make_pair(groups.find(*heads[i].rank), size_t{0})
                                         : std::make_pair(-1, i)]
                .push_back(i);
        struct Component {
            int64_t bytes = 0;
            std::vector<size_t> files;
        };
        std::vector<Component> list;
        for (auto& [key, fileIndexes] : components) {
            Component c;
            c.files = fileIndexes;
            std::vector<int> ranks;
            for (size_t i : fileIndexes) {
                c.bytes += heads[i].bytes;
                if (heads[i].rank)
                    ranks.push_back(*heads[i].rank);
            }
            std::sort(ranks.begin(), ranks.end());
            if (ranks.size() > 1)
                plan.pipelines.push_back(std::move(ranks));
            list.push_back(std::move(c));
        }
        std::sort(plan.pipelines.begin(), plan.pipelines.end());
        std::stable_sort(list.begin(), list.end(), [](const Component& a, const Component& b) { return a.bytes > b.bytes; });
        std::vector<int64_t> load(static_cast<size_t>(shards), 0);
        for (const Component& c : list) {
            const size_t s = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
            load[s] += c.bytes;
            for (size_t i : c.files)
                shardOf[i] = s;
        }
    } else {
        plan.groupedBy = "rank modulo " + std::to_string(shards) + " (no pipeline process groups in the traces' heads)";
        for (size_t i = 0; i < files.size(); ++i)
            shardOf[i] = static_cast<size_t>(heads[i].rank ? *heads[i].rank % shards : static_cast<int>(i % static_cast<size_t>(shards)));
    }
    for (size_t i = 0; i < files.size(); ++i)
        plan.files[shardOf[i]].push_back(files[i]);
    return plan;
}

namespace {

std::string hostName()
{
    char buf[256] = {};
    return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string();
}

// A lock file in the job folder: O_EXCL creation is atomic on local and
// network file systems alike (flock is not: Lustre refuses it by default).
// The file names its owner (host and pid): a lock whose owner on this host is
// gone is taken over at once, one older than kStaleSeconds (a task that died
// elsewhere holding it) with a warning naming the owner and its age, and a
// wait of more than a few seconds is told once with the same facts.
class FolderLock {
public:
    using Warn = std::function<void(const std::string&)>;
    explicit FolderLock(const std::string& folder, const Warn& warn = {})
        : path_((fs::path(folder) / ".job.lock").string())
    {
        using namespace std::chrono;
        const auto started = steady_clock::now();
        const auto until = started + minutes(10);
        const std::string me = hostName() + " " + std::to_string(::getpid());
        bool told = false;
        std::string holder; // the owner seen last, and since when it held the lock
        auto heldSince = started;
        auto pause = microseconds(500);
        for (;;) {
            const int fd = ::open(path_.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
            if (fd >= 0) {
                const std::string line = me + "\n";
                [[maybe_unused]] ssize_t n = ::write(fd, line.data(), line.size());
                ::close(fd);
                return;
            }
            if (errno != EEXIST)
                throw Error(path_ + ": cannot make the job's lock file (" + std::strerror(errno) +
                            "); the job folder must be writable by every import task");
            const Owner owner = readOwner();
            if (owner.pid <= 0 && owner.ageSeconds <= kStaleSeconds) {
                // Made an instant ago, its owner not yet written.
                std::this_thread::sleep_for(pause);
                continue;
            }
            if (const std::string who = owner.host + " " + std::to_string(owner.pid); who != holder) {
                holder = who;
                heldSince = steady_clock::now();
            }
            if (owner.goneHere()) {
                ::unlink(path_.c_str());
                continue;
            }
            if (owner.ageSeconds > kStaleSeconds) {
                if (warn)
                    warn(path_ + ": removed a lock left " + std::to_string(owner.ageSeconds) + " s ago by " +
                         owner.describe() + ", which no longer holds it");
                ::unlink(path_.c_str());
                continue;
            }
            // Many tasks queue for the lock, each holding it for milliseconds:
            // only one holder that keeps it is worth telling of.
            if (!told && steady_clock::now() - heldSince > seconds(5) && warn) {
                told = true;
                warn(path_ + ": waiting for the job's lock, held by " + owner.describe() + " for " +
                     std::to_string(owner.ageSeconds) + " s; remove the file if no import of this job is running");
            }
            if (steady_clock::now() > until)
                throw Error(path_ + ": the job's lock has been held by " + owner.describe() +
                            " for 10 minutes; remove the file if no import of this job is running");
            // Short waits first (a holder keeps the lock for milliseconds),
            // spread so that many tasks do not retry in step.
            std::this_thread::sleep_for(pause + microseconds(::getpid() % 997));
            pause = std::min(pause * 2, duration_cast<microseconds>(milliseconds(20)));
        }
    }
    ~FolderLock() { ::unlink(path_.c_str()); }
    FolderLock(const FolderLock&) = delete;
    FolderLock& operator=(const FolderLock&) = delete;

private:
    struct Owner {
        std::string host;
        long pid = 0;
        long ageSeconds = 0;
        bool goneHere() const
        {
            return pid > 0 && host == hostName() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
        }
        std::string describe() const
        {
            return pid > 0 ? "task " + std::to_string(pid) + " on " + (host.empty() ? std::string("an unnamed host") : host)
                           : std::string("a task that did not name itself");
        }
    };
    Owner readOwner() const
    {
        Owner o;
        struct stat st{};
        if (::stat(path_.c_str(), &st) == 0)
            o.ageSeconds = static_cast<long>(::time(nullptr) - st.st_mtime);
        std::FILE* f = std::fopen(path_.c_str(), "rb");
        if (!f)
            return o;
        char buf[300] = {};
        const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
        std::fclose(f);
        const std::string line(buf, n);
        const size_t space = line.rfind(' ');
        if (space != std::string::npos) {
            o.host = printable(line.substr(0, space), 64);
            o.pid = std::strtol(line.c_str() + space + 1, nullptr, 10);
        }
        return o;
    }
    static constexpr long kStaleSeconds = 120;
    std::string path_;
};

// Which tasks of the plan have ended, one byte each after a header naming
// the plan: each task clears its own as it starts (a re-run) and sets it as
// it ends, under the lock, and counts the others, so finishing costs a task
// N bytes, not N shard records; the last to end (every byte set) reads the
// records and writes the index once. Returns the tasks that have ended.
int markTaskEnded(const std::string& folder, const ShardPlan& plan, int task, bool ended = true)
{
    const std::string path = (fs::path(folder) / ".job.ended").string();
    const std::string header = plan.fingerprint + " " + std::to_string(plan.shards) + "\n";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0)
        throw Error(path + ": cannot write the job's task list (" + std::strerror(errno) +
                    "); the job folder must be writable by every import task");
    std::string bytes(header.size() + static_cast<size_t>(plan.shards), '\0');
    const ssize_t got = ::pread(fd, bytes.data(), bytes.size(), 0);
    const bool ours = got == static_cast<ssize_t>(bytes.size()) && bytes.compare(0, header.size(), header) == 0;
    if (!ours) { // another plan's, or none yet
        bytes.assign(header);
        bytes.append(static_cast<size_t>(plan.shards), '0');
    }
    const char mark = ended ? '1' : '0';
    bytes[header.size() + static_cast<size_t>(task)] = mark;
    const bool written = (ours ? ::pwrite(fd, &mark, 1, static_cast<off_t>(header.size() + static_cast<size_t>(task))) == 1
                               : ::ftruncate(fd, 0) == 0 &&
                                     ::pwrite(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
    ::close(fd);
    if (!written)
        throw Error(path + ": cannot write the job's task list; the job folder must be writable by every import task");
    return static_cast<int>(std::count(bytes.begin() + static_cast<std::ptrdiff_t>(header.size()), bytes.end(), '1'));
}

// The plan's index: without records (the job as it starts), or with those of
// the tasks that ended.
JobIndex planIndex(const ShardPlan& plan)
{
    JobIndex index;
    index.plan = plan.fingerprint;
    index.shards = plan.shards;
    index.groupedBy = plan.groupedBy;
    index.pipelines = plan.pipelines;
    return index;
}

JobIndex collectIndex(const std::string& folder, const ShardPlan& plan) { return withShardRecords(folder, planIndex(plan)); }

void makeJobFolder(const std::string& folder)
{
    std::error_code ec;
    if (fs::exists(folder, ec) && !fs::is_directory(folder, ec))
        throw Error(folder + ": exists and is not a folder (a single store?); a sharded import writes a job folder, give a new path");
    fs::create_directories(folder, ec);
    if (ec && !fs::is_directory(folder))
        throw Error(folder + ": cannot make the job folder (" + ec.message() + ")");
}

int64_t peakRssBytes()
{
    rusage ru{};
    return ::getrusage(RUSAGE_SELF, &ru) == 0 ? static_cast<int64_t>(ru.ru_maxrss) * 1024 : 0;
}

// What the shard's store says of each rank, for the index.
std::vector<JobRankSummary> rankSummaries(const std::string& shardPath, int shard, const ImportJobReport& report)
{
    std::map<int, JobRankSummary> byRank;
    for (const GpuSummary& g : Store(shardPath).summary().gpuSummaries) {
        JobRankSummary& r = byRank[g.rank];
        r.rank = g.rank;
        r.shard = shard;
        r.kernels += g.kernels;
        r.gpuBusy += g.gpuBusy;
        if (g.gpuFirst && (!r.first || *g.gpuFirst < *r.first))
            r.first = g.gpuFirst;
        if (g.gpuLast && (!r.last || *g.gpuLast > *r.last))
            r.last = g.gpuLast;
    }
    for (const auto& [rank, offset] : report.offsets)
        if (auto it = byRank.find(rank); it != byRank.end())
            it->second.clockOffset = offset;
    std::vector<JobRankSummary> out;
    for (auto& [rank, s] : byRank)
        out.push_back(s);
    return out;
}

// Clock alignment across shards (each aligned within itself on import): the
// operations that span shards (data-parallel collectives) give each shard
// one shift, the median of its ranks' shifts, from the shard of the lowest
// rank outwards, as within a store (import/common/ClockAlignment.h).
std::vector<TimeNs> alignShards(const std::string& folder, const JobIndex& index)
{
    std::vector<StoreWriter::CollectiveEnd> collectives;
    std::vector<StoreWriter::TransferEnd> transfers;
    std::vector<int> ranks;
    for (const ShardRecord& r : index.records) {
        if (r.file.empty())
            continue;
        Store shard((fs::path(folder) / r.file).string());
        auto c = StoreWriter::collectiveEnds(shard.database());
        auto t = StoreWriter::transferEnds(shard.database());
        collectives.insert(collectives.end(), std::make_move_iterator(c.begin()), std::make_move_iterator(c.end()));
        transfers.insert(transfers.end(), t.begin(), t.end());
        ranks.insert(ranks.end(), r.ranks.begin(), r.ranks.end());
    }
    std::sort(ranks.begin(), ranks.end());
    const std::map<int, TimeNs> byRank = detail::offsetsFromEnds(collectives, transfers, ranks);
    std::vector<TimeNs> offsets(static_cast<size_t>(index.shards), 0);
    for (const ShardRecord& r : index.records) {
        std::vector<TimeNs> mine;
        for (int rank : r.ranks)
            if (auto it = byRank.find(rank); it != byRank.end())
                mine.push_back(it->second);
        if (mine.empty())
            continue; // shares no operation with the others: its own clock stays
        std::nth_element(mine.begin(), mine.begin() + static_cast<long>(mine.size() / 2), mine.end());
        offsets[static_cast<size_t>(r.index)] = mine[mine.size() / 2];
    }
    return offsets;
}

} // namespace

ShardImportResult importShard(const ImportJobOptions& options, const ShardTask& task, const ShardSummariser& summarise)
{
    const auto started = std::chrono::steady_clock::now();
    const std::string& folder = options.output;
    makeJobFolder(folder);
    std::vector<std::string> warnings;
    const std::vector<std::string> files = expandTraceInputs(options.inputs, warnings);
    if (options.warn)
        for (const auto& w : warnings)
            options.warn(w);
    std::vector<TraceHead> heads;
    heads.reserve(files.size());
    for (const auto& f : files)
        heads.push_back(readTraceHead(f));
    const ShardPlan plan = planShards(files, heads, task.count);
    {
        // An index left by another import (other inputs, another N) is
        // replaced at once: readers must not take the old shards for this job's.
        FolderLock lock(folder, options.warn);
        bool other = true;
        try {
            const JobIndex old = readJobIndex(folder, false);
            other = old.plan != plan.fingerprint || old.shards != plan.shards;
        } catch (const Error&) {
        }
        if (other)
            writeJobIndex(folder, planIndex(plan));
        markTaskEnded(folder, plan, task.index, false);
    }

    ShardImportResult result;
    ShardRecord& record = result.record;
    record.index = task.index;
    record.host = hostName();
    record.pid = static_cast<int64_t>(::getpid());
    std::exception_ptr failure;
    try {
        const auto& mine = plan.files[static_cast<size_t>(task.index)];
        ImportJobOptions sub = options;
        sub.inputs = mine;
        sub.inputsFoundInFolders = true;
        sub.output = (fs::path(folder) / shardStoreName(task.index, task.count)).string();
        if (!mine.empty()) {
            bool traces = true;
            try {
                result.report = importJob(sub);
            } catch (const NoTraceFound&) {
                // Only files that are not traces (notes.json) fell to this
                // task: skipped with their warnings, as a one-store import does.
                traces = false;
            }
            if (traces)
                record.file = shardStoreName(task.index, task.count);
        }
        if (!record.file.empty()) {
            record.inputs = result.report.files;
            for (const auto& src : result.report.sources) {
                record.ranks.insert(record.ranks.end(), src.ranks.begin(), src.ranks.end());
                record.records += src.records;
            }
            std::sort(record.ranks.begin(), record.ranks.end());
            for (const auto& f : record.inputs) {
                std::error_code ec;
                const auto size = fs::file_size(f, ec);
                record.inputBytes += ec ? 0 : static_cast<int64_t>(size);
            }
            record.rankSummaries = rankSummaries(sub.output, task.index, result.report);
            if (summarise) {
                checkpoint(options.work, "summarising the shard", -1);
                try {
                    summarise(sub.output, record.rankSummaries, plan.pipelines);
                } catch (const Error& e) {
                    for (auto& r : record.rankSummaries) {
                        r.stage.reset();
                        r.iterations.clear();
                    }
                    result.report.warnings.push_back("shard " + std::to_string(task.index) +
                                                     ": no analysis summaries in the job index (" + e.what() + ")");
                    if (options.warn)
                        options.warn(result.report.warnings.back());
                }
            }
        }
        record.ok = true;
    } catch (const std::exception& e) {
        record.ok = false;
        record.error = e.what();
        failure = std::current_exception();
    }
    record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    record.peakRssBytes = peakRssBytes();
    try {
        AtomicOutput::writeFile((fs::path(folder) / shardRecordName(task.index, task.count)).string(),
                                shardRecordText(record, plan.fingerprint, plan.shards));
        FolderLock lock(folder, options.warn);
        result.tasksEnded = markTaskEnded(folder, plan, task.index);
        if (result.tasksEnded < plan.shards) {
            // Not the last: the index is the last task's to write.
            result.index = planIndex(plan);
            result.index.records.push_back(record);
            if (failure)
                std::rethrow_exception(failure);
            result.report.warnings.insert(result.report.warnings.begin(), warnings.begin(), warnings.end());
            return result;
        }
        result.index = collectIndex(folder, plan);
        if (result.index.complete() && options.alignment == Alignment::Collectives && plan.shards > 1) {
            try {
                std::vector<TimeNs> offsets = alignShards(folder, result.index);
                if (std::any_of(offsets.begin(), offsets.end(), [](TimeNs d) { return d != 0; }))
                    result.index.shardClockOffsets = std::move(offsets);
            } catch (const Error& e) {
                result.report.warnings.push_back(std::string("the shards' clocks were not aligned with each other (") +
                                                 e.what() + "); each keeps its own");
                if (options.warn)
                    options.warn(result.report.warnings.back());
            }
        }
        writeJobIndex(folder, result.index);
    } catch (const Error&) {
        if (!failure)
            throw;
    }
    if (failure)
        std::rethrow_exception(failure);
    result.report.warnings.insert(result.report.warnings.begin(), warnings.begin(), warnings.end());
    return result;
}

JobIndex importShardsLocally(const ImportJobOptions& options, int shards, const ShardSummariser& summarise)
{
    if (shards < 1)
        throw Error("--shards " + std::to_string(shards) + ": give 1 or more");
    makeJobFolder(options.output);
    ImportJobOptions child = options;
    child.progress = false;
    child.work = nullptr;
    if (child.jobs == 0)
        child.jobs = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / shards);
    std::fflush(stdout);
    std::fflush(stderr);
    std::vector<pid_t> pids;
    for (int k = 0; k < shards; ++k) {
        const pid_t pid = ::fork();
        if (pid < 0) {
            const std::string why = std::strerror(errno);
            for (pid_t p : pids)
                ::waitpid(p, nullptr, 0);
            throw Error("cannot start the import process of shard " + std::to_string(k) + " (" + why +
                        "); import with fewer --shards");
        }
        if (pid == 0) {
            int code = 0;
            try {
                importShard(child, {k, shards, "--shards"}, summarise);
            } catch (...) {
                code = 1; // the shard's record holds the error
            }
            std::fflush(stderr);
            ::_exit(code);
        }
        pids.push_back(pid);
    }
    for (pid_t p : pids) {
        int status = 0;
        while (::waitpid(p, &status, 0) < 0 && errno == EINTR) {
        }
    }
    return readJobIndex(options.output);
}

} // namespace pipescope
