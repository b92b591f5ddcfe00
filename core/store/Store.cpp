#include "store/Store.h"

#include "store/Schema.h"
#include "store/detail/Shards.h"
#include "store/detail/StoreSteps.h"
#include "util/Error.h"
#include "util/StreamInput.h"
#include "util/Limits.h"

#include <algorithm>
#include <optional>
#include <limits>
#include <set>
#include <tuple>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace pipescope {

namespace {

// Every value read from a store is checked before it is used as an index or
// a time: a hand-edited or damaged file is one clear error, never a crash.
[[noreturn]] void damaged(const std::string& path, const std::string& what)
{
    throw FormatError(path + ": damaged store: " + what + "; re-import the traces");
}

struct Check {
    const std::string& path;
    const char* table;
    const sql::Statement& st;

    int rank(int c, const char* column = "rank") const
    {
        if (!st.isInteger(c) || !validRank(st.int64(c)))
            damaged(path, std::string(table) + "." + column + " holds a rank outside 0.." + std::to_string(kMaxRank));
        return static_cast<int>(st.int64(c));
    }
    std::optional<int> optRank(int c, const char* column) const
    {
        if (st.isNull(c))
            return std::nullopt;
        return rank(c, column);
    }
    TimeNs time(int c, const char* column) const
    {
        if (!st.isInteger(c) || !validTime(st.int64(c)))
            damaged(path, std::string(table) + "." + column + " holds a time that is not an integer within the representable range");
        return st.int64(c);
    }
    std::optional<TimeNs> optTime(int c, const char* column) const
    {
        if (st.isNull(c))
            return std::nullopt;
        return time(c, column);
    }
    int64_t integer(int c, const char* column, int64_t lo, int64_t hi) const
    {
        if (!st.isInteger(c) || st.int64(c) < lo || st.int64(c) > hi)
            damaged(path, std::string(table) + "." + column + " holds " + (st.isInteger(c) ? "an out-of-range value" : "a non-integer") +
                              " (" + std::to_string(st.int64(c)) + ")");
        return st.int64(c);
    }
    std::optional<int> optInt(int c, const char* column, int64_t lo, int64_t hi) const
    {
        if (st.isNull(c))
            return std::nullopt;
        return static_cast<int>(integer(c, column, lo, hi));
    }
    std::optional<int64_t> optInt64(int c, const char* column) const
    {
        if (st.isNull(c))
            return std::nullopt;
        return integer(c, column, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    }
    StringId string(int c, const char* column, size_t count) const
    {
        return integer(c, column, 0, static_cast<int64_t>(count) - 1);
    }
};

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// A JSON array of integers, read directly: a group of 16,384 ranks, held by
// every rank of it, is read 16,384 times (a DOM parse took 30 s for a
// window of 16,384 ranks). Anything else is nullopt: parseRanks reads it.
std::optional<std::vector<int>> parseIntegerArray(std::string_view t)
{
    size_t i = 0;
    const size_t n = t.size();
    auto space = [&] {
        while (i < n && (t[i] == ' ' || t[i] == '\n' || t[i] == '\r' || t[i] == '\t'))
            ++i;
    };
    space();
    if (i >= n || t[i] != '[')
        return std::nullopt;
    ++i;
    space();
    std::vector<int> out;
    if (i < n && t[i] == ']') {
        ++i;
        space();
        return i == n ? std::optional(out) : std::nullopt;
    }
    for (;;) {
        const bool negative = i < n && t[i] == '-';
        if (negative)
            ++i;
        const size_t first = i;
        int64_t v = 0;
        while (i < n && t[i] >= '0' && t[i] <= '9')
            v = v * 10 + (t[i++] - '0');
        const size_t digits = i - first;
        if (digits == 0 || digits > 18 || (digits > 1 && t[first] == '0') || (i < n && (t[i] == '.' || t[i] == 'e' || t[i] == 'E')))
            return std::nullopt;
        if (negative)
            v = -v;
        if (validRank(v))
            out.push_back(static_cast<int>(v));
        space();
        if (i < n && t[i] == ',') {
            ++i;
            space();
            continue;
        }
        if (i < n && t[i] == ']') {
            ++i;
            space();
            return i == n ? std::optional(std::move(out)) : std::nullopt;
        }
        return std::nullopt;
    }
}

std::vector<int> parseRanks(std::string_view text)
{
    std::vector<int> out;
    if (text.empty())
        return out;
    if (auto fast = parseIntegerArray(text))
        return std::move(*fast);
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_array())
        return out;
    for (const auto& v : j)
        if (v.is_number_integer() && validRank(v.get<int64_t>()))
            out.push_back(static_cast<int>(v.get<int64_t>()));
    return out;
}

} // namespace

Store::Store(const std::string& path) : path_(path)
{
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        throw Error(path + ": no such file");
    if (std::filesystem::is_directory(path, ec)) {
        if (!isShardedJob(path))
            throw Error(path + ": is a folder without a job index (" + kJobIndexName +
                        "), expected a .pipescope store or a sharded job folder");
        openShards(path);
        return;
    }
    // A pipe or FIFO would block SQLite's open until a writer comes, and
    // SQLite cannot read one anyway: it reads a store out of order.
    if (isStreamInput(path))
        throw FormatError(path + ": is a pipe or device, not a store file; a store is read out of order, so save it "
                                 "to a file first (e.g. `cat > job.pipescope`) and open that; traces can be imported "
                                 "from a pipe with `pipescope import " + path + " -o job.pipescope`");
    openFile(path);
}

Store::~Store() = default;
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;

const JobIndex* Store::jobIndex() const { return shards_ ? &shards_->index : nullptr; }

void Store::openFile(const std::string& path)
{
    db_ = sql::Database(path, sql::Database::Mode::ReadOnly);
    int appId = 0;
    try {
        auto st = db_.prepare("PRAGMA application_id");
        st.step();
        appId = static_cast<int>(st.int64(0));
        version_ = db_.userVersion();
    } catch (const Error&) {
        throw FormatError(path + ": not a pipescope store (not a SQLite database); import traces with `pipescope import`");
    }
    if (appId != kApplicationId || !db_.tableExists("meta"))
        throw FormatError(path + ": not a pipescope store; import traces into one with `pipescope import`");
    if (version_ > kSchemaVersion)
        throw FormatError(path + ": written by a newer pipescope (store schema " + std::to_string(version_) +
                          ", this build reads up to " + std::to_string(kSchemaVersion) + "); upgrade pipescope");
    if (version_ < 1)
        throw FormatError(path + ": store has no schema version; it is damaged or was not finished, re-import it");
    for (const char* table : {"strings", "sources", "ranks", "gpus", "streams", "cpu_ranges", "activities", "nccl_ops",
                              "process_groups", "memory_events", "diagnostics", "gpu_summary", "cache"})
        if (!db_.tableExists(table))
            damaged(path, std::string("table ") + table + " is missing");
    // Memory-mapped reads skip a copy per page; stores are read far more than
    // written. A whole load unmaps the file when it is done (see load()).
    db_.exec("PRAGMA mmap_size = 17179869184");
    db_.exec("PRAGMA cache_size = -65536");
}

std::optional<std::string> Store::cached(const std::string& key)
{
    if (shards_)
        return std::nullopt;
    auto st = db_.prepare("SELECT value FROM cache WHERE key = ?1");
    st.bind(1, key);
    if (!st.step())
        return std::nullopt;
    return st.string(0);
}

namespace {

std::map<std::string, std::string> readMeta(sql::Database& db)
{
    std::map<std::string, std::string> meta;
    auto st = db.prepare("SELECT key, value FROM meta");
    while (st.step())
        meta.emplace(st.string(0), st.string(1));
    return meta;
}

std::vector<SourceInfo> readSources(sql::Database& db)
{
    std::vector<SourceInfo> out;
    auto st = db.prepare("SELECT id, path, format, rank, time_base_ns, clock_offset_ns, alignment, details FROM sources ORDER BY id");
    const Check ck{db.path(), "sources", st};
    while (st.step()) {
        SourceInfo s;
        s.id = st.int64(0);
        s.path = st.string(1);
        s.format = st.string(2);
        s.rank = ck.optRank(3, "rank");
        s.timeBase = ck.time(4, "time_base_ns");
        s.clockOffset = ck.time(5, "clock_offset_ns");
        s.alignment = st.string(6);
        s.details = st.string(7);
        out.push_back(std::move(s));
    }
    return out;
}

std::vector<RankInfo> readRanks(sql::Database& db)
{
    std::vector<RankInfo> out;
    auto st = db.prepare("SELECT rank, world_size, host, pid, device, source_id FROM ranks ORDER BY rank");
    const Check ck{db.path(), "ranks", st};
    while (st.step()) {
        RankInfo r;
        r.rank = ck.rank(0);
        r.worldSize = ck.optInt(1, "world_size", 1, kMaxWorldSize);
        r.host = st.string(2);
        r.pid = st.optInt64(3);
        r.device = ck.optInt(4, "device", 0, kIntMax);
        r.sourceId = st.optInt64(5);
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<GpuInfo> readGpus(sql::Database& db)
{
    std::vector<GpuInfo> out;
    auto st = db.prepare("SELECT rank, device, name, uuid, memory_bytes, sm_count, compute_capability FROM gpus ORDER BY rank, device");
    const Check ck{db.path(), "gpus", st};
    while (st.step()) {
        GpuInfo g;
        g.rank = ck.rank(0);
        g.device = static_cast<int>(ck.integer(1, "device", std::numeric_limits<int>::min(), kIntMax));
        g.name = st.string(2);
        g.uuid = st.string(3);
        g.memoryBytes = st.optInt64(4);
        g.smCount = ck.optInt(5, "sm_count", 0, kIntMax);
        g.computeCapability = st.string(6);
        out.push_back(std::move(g));
    }
    return out;
}

std::vector<StreamInfo> readStreams(sql::Database& db)
{
    std::vector<StreamInfo> out;
    auto st = db.prepare("SELECT id, rank, device, stream, name FROM streams ORDER BY id");
    const Check ck{db.path(), "streams", st};
    while (st.step()) {
        StreamInfo s;
        s.id = st.int64(0);
        s.rank = ck.rank(1);
        s.device = static_cast<int>(ck.integer(2, "device", std::numeric_limits<int>::min(), kIntMax));
        s.stream = st.int64(3);
        s.name = st.string(4);
        out.push_back(std::move(s));
    }
    return out;
}

std::vector<Diagnostic> readDiagnostics(sql::Database& db)
{
    std::vector<Diagnostic> out;
    auto st = db.prepare("SELECT source_id, severity, kind, count, example FROM diagnostics ORDER BY id");
    while (st.step()) {
        Diagnostic d;
        d.sourceId = st.optInt64(0);
        auto sev = st.text(1);
        d.severity = sev == "error" ? Severity::Error : sev == "info" ? Severity::Info : Severity::Warning;
        d.kind = st.string(2);
        d.count = st.int64(3);
        d.example = st.string(4);
        out.push_back(std::move(d));
    }
    return out;
}

} // namespace

StoreSummary Store::summary()
{
    if (shards_)
        return store::detail::shardedSummary(*shards_);
    StoreSummary s;
    s.schemaVersion = version_;
    s.meta = readMeta(db_);
    s.sources = readSources(db_);
    s.ranks = readRanks(db_);
    s.gpus = readGpus(db_);
    s.streams = readStreams(db_);
    s.diagnostics = readDiagnostics(db_);
    int64_t totals[4] = {0, 0, 0, 0};
    auto st = db_.prepare("SELECT rank, device, kernels, memcpys, memsets, syncs, kernel_first_ns, kernel_last_ns,"
                          " kernel_busy_ns, gpu_first_ns, gpu_last_ns, gpu_busy_ns FROM gpu_summary ORDER BY rank, device");
    const Check ck{path(), "gpu_summary", st};
    while (st.step()) {
        GpuSummary g;
        g.rank = ck.rank(0);
        g.device = static_cast<int>(ck.integer(1, "device", std::numeric_limits<int>::min(), kIntMax));
        g.kernels = st.int64(2);
        g.memcpys = st.int64(3);
        g.memsets = st.int64(4);
        g.syncs = st.int64(5);
        g.kernelFirst = ck.optTime(6, "kernel_first_ns");
        g.kernelLast = ck.optTime(7, "kernel_last_ns");
        g.kernelBusy = ck.integer(8, "kernel_busy_ns", 0, std::numeric_limits<int64_t>::max());
        g.gpuFirst = ck.optTime(9, "gpu_first_ns");
        g.gpuLast = ck.optTime(10, "gpu_last_ns");
        g.gpuBusy = ck.integer(11, "gpu_busy_ns", 0, std::numeric_limits<int64_t>::max());
        totals[0] += g.kernels;
        totals[1] += g.memcpys;
        totals[2] += g.memsets;
        totals[3] += g.syncs;
        if (g.gpuFirst && (!s.first || *g.gpuFirst < *s.first))
            s.first = g.gpuFirst;
        if (g.gpuLast && (!s.last || *g.gpuLast > *s.last))
            s.last = g.gpuLast;
        s.gpuSummaries.push_back(g);
    }
    for (int k = 0; k < 4; ++k)
        s.activityCounts.emplace_back(std::string(toString(static_cast<ActivityKind>(k))), totals[k]);
    // Counts are written by StoreWriter::summarise(); a hand-edited store with
    // malformed counts is reported, not allowed to escape as an internal error.
    try {
        readCounts(s);
    } catch (const std::exception&) {
        throw FormatError(path() + ": the store's count metadata is damaged; re-import the traces");
    }
    if (s.ncclCounts.empty()) {
        // A store written before count.nccl_ops: counted from the table.
        auto nccl = db_.prepare("SELECT kind, COUNT(*) FROM nccl_ops GROUP BY kind");
        while (nccl.step())
            s.ncclCounts.emplace_back(nccl.string(0), nccl.int64(1));
    }
    // The most frequent first, ties by name.
    std::sort(s.ncclCounts.begin(), s.ncclCounts.end(),
              [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
    return s;
}

void Store::readCounts(StoreSummary& s)
{
    if (auto it = s.meta.find("count.streams"); it != s.meta.end()) {
        auto j = nlohmann::json::parse(it->second, nullptr, false);
        if (j.is_object())
            for (auto& [k, v] : j.items())
                if (v.is_array() && v.size() == 4)
                    s.streamCounts[std::stoll(k)] = {v[0].get<int64_t>(), v[1].get<int64_t>(), v[2].get<int64_t>(),
                                                     v[3].get<int64_t>()};
    }
    if (auto it = s.meta.find("count.nccl_ops"); it != s.meta.end()) {
        auto j = nlohmann::json::parse(it->second, nullptr, false);
        if (!j.is_object())
            throw FormatError("count.nccl_ops");
        for (auto& [k, v] : j.items())
            s.ncclCounts.emplace_back(k, v.get<int64_t>());
    }
    if (auto it = s.meta.find("count.cpu_ranges"); it != s.meta.end()) {
        auto j = nlohmann::json::parse(it->second, nullptr, false);
        if (j.is_object())
            for (auto& [k, v] : j.items())
                if (v.is_number_integer())
                    s.cpuRangeCounts.emplace_back(k, v.get<int64_t>());
    }
}

std::optional<TimeNs> Store::earliestRecord()
{
    std::optional<TimeNs> earliest;
    auto take = [&earliest](std::optional<TimeNs> t) {
        if (t && (!earliest || *t < *earliest))
            earliest = t;
    };
    if (shards_) {
        for (size_t k = 0; k < shards_->stores.size(); ++k)
            if (Store* shard = shards_->stores[k].get())
                if (const auto t = shard->earliestRecord())
                    take(*t + shards_->clockOffset(static_cast<int>(k)));
        return earliest;
    }
    // One seek per rank and table: the time indexes lead with the rank. The
    // CPU ranges' condition is the time index's own (kCpuRangeKindsByTime).
    auto activities = db_.prepare("SELECT MIN(start_ns) FROM activities WHERE rank = ?1");
    auto ranges = db_.prepare(std::string("SELECT MIN(start_ns) FROM cpu_ranges WHERE rank = ?1 AND ") + kCpuRangeKindsByTime);
    const Check ca{path(), "activities", activities}, cr{path(), "cpu_ranges", ranges};
    auto ranks = db_.prepare("SELECT rank FROM ranks UNION SELECT rank FROM gpu_summary");
    while (ranks.step()) {
        const int64_t rank = ranks.int64(0);
        activities.reset();
        activities.bind(1, rank);
        if (activities.step())
            take(ca.optTime(0, "start_ns"));
        ranges.reset();
        ranges.bind(1, rank);
        if (ranges.step())
            take(cr.optTime(0, "start_ns"));
    }
    return earliest;
}

std::optional<TimeNs> Store::activityStart(int rank, int64_t index)
{
    if (index < 0)
        return std::nullopt;
    if (shards_) {
        Store* shard = shards_->ofRank(rank);
        const auto start = shard ? shard->activityStart(rank, index) : std::nullopt;
        return start ? std::optional<TimeNs>(*start + shards_->clockOffsetOfRank(rank)) : std::nullopt;
    }
    auto st = db_.prepare("SELECT start_ns FROM activities WHERE rank = ?1 ORDER BY start_ns LIMIT 1 OFFSET ?2");
    st.bind(1, static_cast<int64_t>(rank)).bind(2, index);
    if (!st.step())
        return std::nullopt;
    const Check ck{path(), "activities", st};
    return ck.time(0, "start_ns");
}

std::optional<LaunchCall> Store::launchOf(int64_t activityId)
{
    if (shards_) {
        Store* shard = shards_->ofId(activityId);
        auto call = shard ? shard->launchOf(store::detail::localId(activityId)) : std::nullopt;
        if (call) {
            call->start += shards_->clockOffset(store::detail::shardOfId(activityId));
            call->end += shards_->clockOffset(store::detail::shardOfId(activityId));
        }
        return call;
    }
    auto st = db_.prepare("SELECT c.tid, c.start_ns, c.end_ns, s.value FROM activities a"
                          " JOIN cpu_ranges c ON c.id = a.launch_id LEFT JOIN strings s ON s.id = c.name_id"
                          " WHERE a.id = ?1");
    st.bind(1, activityId);
    if (!st.step())
        return std::nullopt;
    const Check ck{path(), "cpu_ranges", st};
    LaunchCall call;
    call.tid = st.int64(0);
    call.start = ck.time(1, "start_ns");
    call.end = ck.time(2, "end_ns");
    call.name = st.isNull(3) ? std::string() : st.string(3);
    return call;
}

std::vector<std::vector<int64_t>> Store::autogradSequences(const std::vector<int64_t>& activityIds)
{
    if (shards_)
        return store::detail::shardedAutogradSequences(*shards_, activityIds);
    // The launch call, then the ranges enclosing it (parent_id, from range
    // nesting); cpu ops keep their sequence number in `correlation`.
    auto launch = db_.prepare("SELECT launch_id FROM activities WHERE id = ?1");
    auto range = db_.prepare("SELECT kind, correlation, parent_id FROM cpu_ranges WHERE id = ?1");
    std::vector<std::vector<int64_t>> out(activityIds.size());
    for (size_t i = 0; i < activityIds.size(); ++i) {
        launch.bind(1, activityIds[i]);
        std::optional<int64_t> at;
        if (launch.step())
            at = launch.optInt64(0);
        launch.reset();
        // Bounded: a damaged store's parents may loop.
        for (int depth = 0; at && depth < 256; ++depth) {
            range.bind(1, *at);
            if (!range.step()) {
                range.reset();
                break;
            }
            if (range.int64(0) == static_cast<int64_t>(CpuRangeKind::CpuOp) && !range.isNull(1))
                out[i].push_back(range.int64(1));
            at = range.optInt64(2);
            range.reset();
        }
    }
    return out;
}

std::function<std::vector<std::vector<int64_t>>(const std::vector<int64_t>&)> autogradSequencesAt(std::string path)
{
    return [path = std::move(path)](const std::vector<int64_t>& ids) { return Store(path).autogradSequences(ids); };
}

namespace {

std::vector<std::string> readStrings(sql::Database& db)
{
    // Ids are dense from 0: each must lie below the number of strings.
    auto count = db.prepare("SELECT COUNT(*) FROM strings");
    count.step();
    const auto n = static_cast<size_t>(std::max<int64_t>(count.int64(0), 1));
    std::vector<std::string> strings;
    strings.assign(n, std::string());
    auto st = db.prepare("SELECT id, value FROM strings ORDER BY id");
    const Check ck{db.path(), "strings", st};
    while (st.step())
        strings[static_cast<size_t>(ck.string(0, "id", n))] = st.string(1);
    return strings;
}

// Which rows a load keeps (LoadOptions), and for a window load the ranks it
// walks: every rank with a stream (activities and ops name their rank's
// streams) or a row in `ranks`.
struct LoadFilter {
    const LoadOptions& options;
    TimeNs from = std::numeric_limits<TimeNs>::min();
    TimeNs to = std::numeric_limits<TimeNs>::max();
    bool window = false;
    std::vector<int> windowRanks;
    // A few of the store's ranks (at most a quarter): read rank by rank
    // through the (rank, ...) indexes instead of scanning whole tables.
    std::vector<int> fewRanks;

    std::vector<int> ranks; // options.ranks, sorted

    bool wantRank(int rank) const
    {
        return !options.ranks || std::binary_search(ranks.begin(), ranks.end(), rank);
    }
};

LoadFilter loadFilter(const LoadOptions& options, const Trace& t)
{
    LoadFilter f{options};
    if (options.ranks) {
        f.ranks = *options.ranks;
        std::sort(f.ranks.begin(), f.ranks.end());
    }
    f.from = options.from.value_or(std::numeric_limits<TimeNs>::min());
    f.to = options.to.value_or(std::numeric_limits<TimeNs>::max());
    f.window = options.startsInWindow && (options.from || options.to);
    if (f.window) {
        for (const RankInfo& r : t.ranks)
            f.windowRanks.push_back(r.rank);
        for (const StreamInfo& s : t.streams)
            f.windowRanks.push_back(s.rank);
        std::sort(f.windowRanks.begin(), f.windowRanks.end());
        f.windowRanks.erase(std::unique(f.windowRanks.begin(), f.windowRanks.end()), f.windowRanks.end());
        std::erase_if(f.windowRanks, [&](int r) { return !f.wantRank(r); });
    } else if (options.ranks) {
        std::vector<int> held;
        for (const RankInfo& r : t.ranks)
            held.push_back(r.rank);
        for (const StreamInfo& s : t.streams)
            held.push_back(s.rank);
        std::sort(held.begin(), held.end());
        held.erase(std::unique(held.begin(), held.end()), held.end());
        std::vector<int> wanted = held;
        std::erase_if(wanted, [&](int r) { return !f.wantRank(r); });
        if (wanted.size() * 4 <= held.size())
            f.fewRanks = std::move(wanted);
    }
    return f;
}

// Runs read over a statement's rows: once, or for a few ranks
// (filter.fewRanks) once per rank, the rank bound to parameter rankParam.
// bind binds the other parameters, anew for each rank (a reset clears them).
template <typename Bind, typename Read>
void readByRank(sql::Statement& st, const LoadFilter& filter, int rankParam, const Bind& bind, const Read& read)
{
    if (filter.fewRanks.empty()) {
        bind();
        read();
        return;
    }
    for (int rank : filter.fewRanks) {
        st.reset();
        bind();
        st.bind(rankParam, static_cast<int64_t>(rank));
        read();
    }
}

constexpr const char* kActivityColumns =
    "SELECT a.id, a.rank, a.stream_id, a.kind, a.start_ns, a.end_ns, a.name_id, a.correlation, a.launch_ns,"
    " a.bytes, a.copy_kind FROM activities a";

// One row of kActivityColumns into `out`, unless its rank is not loaded.
void readActivity(const sql::Statement& st, const Check& ck, const LoadFilter& filter, size_t strings,
                  std::vector<Activity>& out)
{
    int rank = ck.rank(1);
    if (!filter.wantRank(rank))
        return;
    Activity a;
    a.id = st.int64(0);
    a.rank = rank;
    a.streamId = st.int64(2);
    a.kind = static_cast<ActivityKind>(ck.integer(3, "kind", 0, 3));
    a.start = ck.time(4, "start_ns");
    a.end = ck.time(5, "end_ns");
    if (a.end < a.start)
        damaged(ck.path, "activities.end_ns lies before start_ns");
    a.name = static_cast<int32_t>(ck.string(6, "name_id", std::min<size_t>(strings, std::numeric_limits<int32_t>::max())));
    a.correlation = st.optInt64(7);
    a.launchStart = ck.optTime(8, "launch_ns");
    a.bytes = st.optInt64(9);
    if (!st.isNull(10))
        a.copyKind = static_cast<CopyKind>(ck.integer(10, "copy_kind", 0, 10));
    out.push_back(a);
}

// The activities starting in the window, rank by rank.
void readWindowActivities(sql::Database& db, const LoadFilter& filter, size_t strings, std::vector<Activity>& out)
{
    // One index range per rank: rows come in (rank, start) order.
    auto st = db.prepare(std::string(kActivityColumns) + " WHERE a.rank = ?1 AND a.start_ns >= ?2 AND a.start_ns < ?3");
    const Check ck{db.path(), "activities", st};
    const std::vector<int>& ranks = filter.windowRanks;
    for (size_t k = 0; k < ranks.size(); ++k) {
        checkpoint(filter.options.work, "loading activities", static_cast<double>(k) / static_cast<double>(ranks.size()));
        st.reset();
        st.bind(1, static_cast<int64_t>(ranks[k])).bind(2, filter.from).bind(3, filter.to);
        while (st.step())
            readActivity(st, ck, filter, strings, out);
    }
}

// The activities overlapping [from, to), in row order.
void scanActivities(sql::Database& db, const LoadFilter& filter, size_t strings, std::vector<Activity>& out)
{
    // A plain table scan in row order, sorted here: far faster than
    // walking the time index with a lookup per row.
    // Rows whose times are not integers are read too, so that the damage
    // check sees them instead of the comparison dropping them.
    const char* const overlaps = "((a.end_ns >= ?1 AND a.start_ns < ?2)"
                                 " OR typeof(a.start_ns) != 'integer' OR typeof(a.end_ns) != 'integer')";
    if (!filter.fewRanks.empty()) {
        // A few ranks: each one's rows through the (rank, start_ns) index.
        auto st = db.prepare(std::string(kActivityColumns) + " WHERE a.rank = ?3 AND " + overlaps);
        const Check ck{db.path(), "activities", st};
        const std::vector<int>& ranks = filter.fewRanks;
        for (size_t k = 0; k < ranks.size(); ++k) {
            checkpoint(filter.options.work, "loading activities", static_cast<double>(k) / static_cast<double>(ranks.size()));
            st.reset();
            st.bind(1, filter.from).bind(2, filter.to).bind(3, static_cast<int64_t>(ranks[k]));
            while (st.step())
                readActivity(st, ck, filter, strings, out);
        }
        return;
    }
    auto st = db.prepare(std::string(kActivityColumns) + " WHERE " + overlaps);
    st.bind(1, filter.from).bind(2, filter.to);
    auto count = db.prepare("SELECT COUNT(*) FROM activities");
    count.step();
    out.reserve(static_cast<size_t>(count.int64(0)));
    const double total = static_cast<double>(std::max<int64_t>(1, count.int64(0)));
    int64_t rows = 0;
    const Check ck{db.path(), "activities", st};
    while (st.step()) {
        if ((++rows & 0xFFFF) == 0)
            checkpoint(filter.options.work, "loading activities", static_cast<double>(rows) / total);
        readActivity(st, ck, filter, strings, out);
    }
}

// Every activity names a stream of the store (the timeline and the
// analysis look its stream up).
void checkActivityStreams(const std::string& path, const std::vector<Activity>& activities,
                          const std::vector<StreamInfo>& streams)
{
    std::vector<int64_t> ids;
    ids.reserve(streams.size());
    for (const StreamInfo& s : streams)
        ids.push_back(s.id);
    std::sort(ids.begin(), ids.end());
    for (const Activity& a : activities)
        if (!std::binary_search(ids.begin(), ids.end(), a.streamId))
            damaged(path, "activity " + std::to_string(a.id) + " names stream " + std::to_string(a.streamId) +
                              ", which the streams table does not hold");
}

// The activities in (rank, start, end) order, rows with equal keys in the order read.
void sortActivities(std::vector<Activity>& activities)
{
    auto before = [](const Activity& x, const Activity& y) {
        if (x.rank != y.rank)
            return x.rank < y.rank;
        if (x.start != y.start)
            return x.start < y.start;
        return x.end < y.end;
    };
    // Importers mostly write in time order; sorting is then a no-op worth skipping.
    if (std::is_sorted(activities.begin(), activities.end(), before))
        return;
    // An import's parser threads write the ranks' batches interleaved, each
    // rank's rows in time order: distributing the rows by rank, in the order
    // read, sorts them in one pass (a stable sort of a shard's million rows
    // took a fifth of its read). A rank's rows out of time order are then
    // sorted among themselves, stably: the same order as a stable sort of all.
    std::vector<int> ranks;
    for (const Activity& a : activities)
        if (ranks.empty() || ranks.back() != a.rank)
            ranks.push_back(a.rank);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    auto slot = [&](int rank) { return static_cast<size_t>(std::lower_bound(ranks.begin(), ranks.end(), rank) - ranks.begin()); };
    std::vector<size_t> at(ranks.size() + 1, 0);
    for (const Activity& a : activities)
        ++at[slot(a.rank) + 1];
    for (size_t k = 1; k < at.size(); ++k)
        at[k] += at[k - 1];
    const std::vector<size_t> begins(at.begin(), at.end());
    std::vector<Activity> sorted(activities.size());
    int lastRank = std::numeric_limits<int>::min();
    size_t lastSlot = 0;
    for (const Activity& a : activities) {
        if (a.rank != lastRank) {
            lastRank = a.rank;
            lastSlot = slot(a.rank);
        }
        sorted[at[lastSlot]++] = a;
    }
    std::vector<Activity>().swap(activities); // the rows once, not twice, in memory from here on
    for (size_t k = 0; k + 1 < begins.size(); ++k) {
        const auto first = sorted.begin() + static_cast<std::ptrdiff_t>(begins[k]);
        const auto last = sorted.begin() + static_cast<std::ptrdiff_t>(begins[k + 1]);
        if (!std::is_sorted(first, last, before))
            std::stable_sort(first, last, before);
    }
    activities = std::move(sorted);
}

void readActivities(sql::Database& db, const LoadFilter& filter, Trace& t)
{
    checkpoint(filter.options.work, "loading activities", 0.0);
    if (filter.window)
        readWindowActivities(db, filter, t.strings.size(), t.activities);
    else
        scanActivities(db, filter, t.strings.size(), t.activities);
    checkActivityStreams(db.path(), t.activities, t.streams);
    sortActivities(t.activities);
}

constexpr const char* kNcclColumns =
    "SELECT id, rank, activity_id, kind, is_p2p, in_nelems, out_nelems, bytes, dtype, group_name,"
    " group_desc, group_ranks, group_size, peer, seq, start_ns, end_ns, stream_id FROM nccl_ops";

// One row of kNcclColumns into `out`, unless its rank is not loaded or it
// lies outside [from, to) (an op without a time is kept).
void readNcclOp(const sql::Statement& st, const Check& ck, const LoadFilter& filter, std::vector<NcclOp>& out)
{
    NcclOp op;
    op.id = st.int64(0);
    op.rank = ck.rank(1);
    if (!filter.wantRank(op.rank))
        return;
    op.activityId = st.optInt64(2);
    op.kind = collectiveFromKind(st.string(3));
    op.isP2p = st.int64(4) != 0;
    op.inNelems = st.optInt64(5);
    op.outNelems = st.optInt64(6);
    op.bytes = st.optInt64(7);
    op.dtype = st.string(8);
    op.groupName = st.string(9);
    op.groupDesc = st.string(10);
    op.groupSize = ck.optInt(12, "group_size", 0, kMaxWorldSize);
    op.peer = ck.optRank(13, "peer");
    op.seq = st.optInt64(14);
    op.start = ck.optTime(15, "start_ns");
    op.end = ck.optTime(16, "end_ns");
    op.streamId = st.optInt64(17);
    if (op.end && *op.end < filter.from)
        return;
    if (op.start && *op.start >= filter.to)
        return;
    op.groupRanks = parseRanks(st.text(11)); // after the window: a collective's group may list thousands
    out.push_back(std::move(op));
}

// The NCCL ops of the loaded ranks, in (rank, start_ns, id) order (NULL start first).
void readNcclOps(sql::Database& db, const LoadFilter& filter, std::vector<NcclOp>& out)
{
    if (filter.window) {
        // Per rank, in the full load's order (rank, start_ns with NULL first, id).
        auto untimed = db.prepare(std::string(kNcclColumns) + " WHERE rank = ?1 AND start_ns IS NULL ORDER BY id");
        auto timed = db.prepare(std::string(kNcclColumns) + " WHERE rank = ?1 AND start_ns >= ?2 AND start_ns < ?3 ORDER BY start_ns, id");
        const Check cu{db.path(), "nccl_ops", untimed}, ct{db.path(), "nccl_ops", timed};
        for (int rank : filter.windowRanks) {
            untimed.reset();
            untimed.bind(1, static_cast<int64_t>(rank));
            while (untimed.step())
                readNcclOp(untimed, cu, filter, out);
            timed.reset();
            timed.bind(1, static_cast<int64_t>(rank)).bind(2, filter.from).bind(3, filter.to);
            while (timed.step())
                readNcclOp(timed, ct, filter, out);
        }
    } else {
        // In (rank, start_ns, id) order, NULL start first as SQLite sorts
        // NULLs; a few ranks each through the (rank, start_ns) index.
        auto st = db.prepare(std::string(kNcclColumns) +
                             (filter.fewRanks.empty() ? " ORDER BY rank, start_ns, id" : " WHERE rank = ?1 ORDER BY start_ns, id"));
        const Check ck{db.path(), "nccl_ops", st};
        readByRank(st, filter, 1, [] {}, [&] {
            while (st.step())
                readNcclOp(st, ck, filter, out);
        });
    }
}

std::vector<CpuRange> readCpuRanges(sql::Database& db, const LoadFilter& filter, size_t strings)
{
    std::vector<CpuRange> out;
    // The kinds the time index holds, spelled as its definition spells them
    // (kCpuRangeKindsByTime) so that SQLite sees the index serves the query.
    std::string kinds = kCpuRangeKindsByTime;
    if (filter.options.cpuOps)
        kinds += " OR kind = 2";
    if (filter.options.runtimeCalls)
        kinds += " OR kind IN (3, 4)";
    // A few ranks: each one's rows through the (rank, tid, start_ns) index;
    // else one scan of the table.
    const bool few = !filter.fewRanks.empty();
    auto st = db.prepare("SELECT id, rank, tid, kind, start_ns, end_ns, name_id, domain_id, depth, parent_id, correlation"
                         " FROM cpu_ranges WHERE " + std::string(few ? "rank = ?3 AND " : "") + "(" + kinds +
                         ") AND end_ns >= ?1 AND start_ns < ?2");
    const Check ck{db.path(), "cpu_ranges", st};
    auto readRows = [&] {
        while (st.step()) {
            CpuRange r;
            r.id = st.int64(0);
            r.rank = ck.rank(1);
            if (!filter.wantRank(r.rank))
                continue;
            r.tid = st.int64(2);
            r.kind = static_cast<CpuRangeKind>(ck.integer(3, "kind", 0, 6));
            r.start = ck.time(4, "start_ns");
            r.end = ck.time(5, "end_ns");
            if (r.end < r.start)
                damaged(db.path(), "cpu_ranges.end_ns lies before start_ns");
            r.name = ck.string(6, "name_id", strings);
            if (!st.isNull(7))
                r.domain = ck.string(7, "domain_id", strings);
            r.depth = static_cast<int>(ck.integer(8, "depth", 0, kIntMax));
            r.parentId = st.optInt64(9);
            r.correlation = st.optInt64(10);
            out.push_back(r);
        }
    };
    readByRank(st, filter, 3, [&] { st.bind(1, filter.from).bind(2, filter.to); }, readRows);
    auto before = [](const CpuRange& x, const CpuRange& y) {
        return std::tie(x.rank, x.tid, x.start, x.id) < std::tie(y.rank, y.tid, y.start, y.id);
    };
    if (!std::is_sorted(out.begin(), out.end(), before))
        std::sort(out.begin(), out.end(), before);
    return out;
}

// The process groups the loaded ranks reported (each rank reports those it
// joined, with their ranks: a job's default group lists every rank, so one
// rank's groups hold as many numbers as the job has ranks).
std::vector<ProcessGroup> readProcessGroups(sql::Database& db, const LoadFilter& filter)
{
    std::vector<ProcessGroup> out;
    const bool few = !filter.fewRanks.empty();
    auto st = db.prepare(std::string("SELECT rank, name, desc, ranks, size FROM process_groups") +
                         (few ? " WHERE rank = ?1" : "") + " ORDER BY rank, name");
    const Check ck{db.path(), "process_groups", st};
    auto readRows = [&] {
        while (st.step()) {
            ProcessGroup g;
            g.rank = ck.rank(0);
            if (!filter.wantRank(g.rank))
                continue;
            g.name = st.string(1);
            g.desc = st.string(2);
            g.ranks = parseRanks(st.text(3));
            g.size = ck.optInt(4, "size", 0, kMaxWorldSize);
            out.push_back(std::move(g));
        }
    };
    readByRank(st, filter, 1, [] {}, readRows);
    return out;
}

std::vector<MemoryEvent> readMemoryEvents(sql::Database& db, int version, const LoadFilter& filter)
{
    std::vector<MemoryEvent> out;
    // Schema 1 stores have no totals: read as unknown. A few ranks: each
    // one's rows through the (rank, device, ts_ns) index.
    const bool few = !filter.fewRanks.empty();
    auto st = db.prepare(std::string(version >= 2 ? "SELECT rank, device, ts_ns, bytes, address, total_allocated, total_reserved"
                                                    " FROM memory_events"
                                                  : "SELECT rank, device, ts_ns, bytes, address, NULL, NULL FROM memory_events") +
                         (few ? " WHERE rank = ?1 ORDER BY device, ts_ns" : " ORDER BY rank, device, ts_ns"));
    const Check ck{db.path(), "memory_events", st};
    auto readRows = [&] {
        while (st.step()) {
            MemoryEvent e;
            e.rank = ck.rank(0);
            if (!filter.wantRank(e.rank))
                continue;
            e.device = static_cast<int>(ck.integer(1, "device", std::numeric_limits<int>::min(), kIntMax));
            e.ts = ck.time(2, "ts_ns");
            e.bytes = st.int64(3);
            e.address = st.optInt64(4);
            e.totalAllocated = st.optInt64(5);
            e.totalReserved = st.optInt64(6);
            out.push_back(e);
        }
    };
    readByRank(st, filter, 1, [] {}, readRows);
    return out;
}

// The names the trace gave CPU threads (schema 3; none before).
std::map<std::pair<int, int64_t>, std::string> readThreadNames(sql::Database& db, int version, const LoadFilter& filter)
{
    std::map<std::pair<int, int64_t>, std::string> out;
    if (version < 3)
        return out;
    auto st = db.prepare("SELECT rank, tid, name FROM threads");
    const Check ck{db.path(), "threads", st};
    while (st.step()) {
        const int rank = ck.rank(0);
        if (filter.wantRank(rank))
            out[{rank, st.int64(1)}] = std::string(st.text(2));
    }
    return out;
}

} // namespace

namespace store::detail {

void linkNcclOps(std::vector<Activity>& activities, const std::vector<NcclOp>& ncclOps)
{
    std::unordered_map<int64_t, int64_t> byActivity;
    for (size_t i = 0; i < ncclOps.size(); ++i)
        if (ncclOps[i].activityId)
            byActivity.emplace(*ncclOps[i].activityId, static_cast<int64_t>(i));
    if (!byActivity.empty())
        for (auto& a : activities)
            if (auto it = byActivity.find(a.id); it != byActivity.end()) {
                a.ncclIndex = static_cast<int32_t>(it->second);
                // A coalesced batch's ops share the kernel's start, so they load side by side.
                size_t n = 1;
                while (static_cast<size_t>(it->second) + n < ncclOps.size() && n < 0xffff &&
                       ncclOps[static_cast<size_t>(it->second) + n].activityId == a.id)
                    ++n;
                a.ncclCount = static_cast<uint16_t>(n);
            }
}

} // namespace store::detail

Trace Store::load(const LoadOptions& options)
{
    Trace t = loadTrace(options);
    if (options.ranks) {
        t.ranksRead = *options.ranks;
        std::sort(t.ranksRead.begin(), t.ranksRead.end());
        t.ranksRead.erase(std::unique(t.ranksRead.begin(), t.ranksRead.end()), t.ranksRead.end());
    }
    return t;
}

Trace Store::loadTrace(const LoadOptions& options)
{
    if (shards_)
        return store::detail::shardedLoad(*shards_, options);
    Trace t;
    t.meta = readMeta(db_);
    t.sources = readSources(db_);
    t.ranks = readRanks(db_);
    t.gpus = readGpus(db_);
    t.streams = readStreams(db_);
    t.diagnostics = readDiagnostics(db_);
    t.strings = readStrings(db_);

    const LoadFilter filter = loadFilter(options, t);
    if (options.ranks) {
        // A read of some ranks holds their GPUs and files (and the files'
        // diagnostics), not every one of the store's.
        std::erase_if(t.gpus, [&](const GpuInfo& g) { return !filter.wantRank(g.rank); });
        std::set<int64_t> dropped;
        std::erase_if(t.sources, [&](const SourceInfo& src) {
            const bool other = src.rank && !filter.wantRank(*src.rank);
            if (other)
                dropped.insert(src.id);
            return other;
        });
        std::erase_if(t.diagnostics, [&](const Diagnostic& d) { return d.sourceId && dropped.count(*d.sourceId); });
    }
    readActivities(db_, filter, t);
    readNcclOps(db_, filter, t.ncclOps);
    store::detail::linkNcclOps(t.activities, t.ncclOps);
    t.cpuRanges = readCpuRanges(db_, filter, t.strings.size());
    t.processGroups = readProcessGroups(db_, filter);
    t.memoryEvents = readMemoryEvents(db_, version_, filter);
    t.threadNames = readThreadNames(db_, version_, filter);
    // The mapped pages of a store of gigabytes would count towards the
    // reader's memory for as long as it stays open (a sharded job keeps
    // every shard open): once loaded, later lookups read through the page cache.
    db_.exec("PRAGMA mmap_size = 0");
    db_.exec("PRAGMA shrink_memory");
    return t;
}

} // namespace pipescope
