#include "store/StoreWriter.h"

#include "Version.h"
#include "store/Schema.h"
#include "store/detail/StoreSteps.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/Limits.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

namespace pipescope {

namespace {

std::string utcNow()
{
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

template <typename T>
void fill(std::optional<T>& into, const std::optional<T>& from)
{
    if (!into && from)
        into = from;
}

void fill(std::string& into, const std::string& from)
{
    if (into.empty() && !from.empty())
        into = from;
}

std::string ranksJson(const std::vector<int>& ranks)
{
    return nlohmann::json(ranks).dump();
}

// Rows per multi-row INSERT of activities and CPU ranges, the bulk of a
// store: a statement's step has a fixed cost about that of one row, spread
// over a few dozen rows.
constexpr int kRowsPerInsert = 32;

// The columns of activities and cpu_ranges the writer fills, in the order
// bindActivity() and bindCpuRange() bind them.
constexpr const char* kActivityColumns =
    "rank, stream_id, kind, start_ns, end_ns, name_id, correlation, bytes, copy_kind, grid, block, launch_id, launch_ns";
constexpr int kActivityColumnCount = 13;
constexpr const char* kCpuRangeColumns = "rank, tid, kind, start_ns, end_ns, name_id, domain_id, correlation, depth, parent_id";
constexpr int kCpuRangeColumnCount = 10;

// INSERT INTO table(columns) VALUES (?, ...), ... for `rows` rows: row r's
// parameters are r * count + 1 .. (r + 1) * count.
std::string insertText(const char* table, const char* columns, int count, int rows)
{
    std::string row = "(";
    for (int c = 0; c < count; ++c)
        row += c == 0 ? "?" : ", ?";
    row += ")";
    std::string text = std::string("INSERT INTO ") + table + "(" + columns + ") VALUES ";
    for (int r = 0; r < rows; ++r)
        text += (r > 0 ? ", " : "") + row;
    return text;
}

// Binds row `row` of a statement from insertText(). Every run of a statement
// leaves its parameters NULL (Statement::run()), so unset fields stay NULL.
void bindActivity(sql::Statement& st, int row, const ActivityRecord& a)
{
    const int p = row * kActivityColumnCount;
    st.bind(p + 1, a.rank).bind(p + 2, a.streamId).bind(p + 3, static_cast<int>(a.kind)).bind(p + 4, a.start);
    st.bind(p + 5, a.end).bind(p + 6, a.name).bind(p + 7, a.correlation).bind(p + 8, a.bytes);
    if (a.copyKind)
        st.bind(p + 9, static_cast<int>(*a.copyKind));
    if (!a.grid.empty())
        st.bind(p + 10, a.grid);
    if (!a.block.empty())
        st.bind(p + 11, a.block);
    if (a.launchId)
        st.bind(p + 12, *a.launchId).bind(p + 13, a.launchNs);
}

void bindCpuRange(sql::Statement& st, int row, const CpuRangeRecord& r)
{
    const int p = row * kCpuRangeColumnCount;
    st.bind(p + 1, r.rank).bind(p + 2, r.tid).bind(p + 3, static_cast<int>(r.kind)).bind(p + 4, r.start);
    st.bind(p + 5, r.end).bind(p + 6, r.name).bind(p + 7, r.domain).bind(p + 8, r.correlation);
    st.bind(p + 9, r.depth).bind(p + 10, r.parentId);
}

} // namespace

namespace {
sql::Database createDatabase(const AtomicOutput& out)
{
    try {
        return sql::Database(out.tempPath(), sql::Database::Mode::Create);
    } catch (const Error&) {
        throw Error(out.finalPath() + ": cannot write a store there; choose another -o path");
    }
}
} // namespace

StoreWriter::StoreWriter(const std::string& path) : out_(path), db_(createDatabase(out_))
{
    db_.setDisplayName(out_.finalPath());
    // The file is private until finish() renames it, so durability during the
    // build buys nothing: no journal, no fsync, one long transaction.
    db_.exec("PRAGMA page_size = 8192");
    db_.exec("PRAGMA journal_mode = OFF");
    db_.exec("PRAGMA synchronous = OFF");
    db_.exec("PRAGMA locking_mode = EXCLUSIVE");
    db_.exec("PRAGMA temp_store = MEMORY");
    db_.exec("PRAGMA cache_size = -131072");
    db_.exec("BEGIN");
    db_.exec(kSchemaSql);
    db_.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
    db_.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
    insString_ = db_.prepare("INSERT INTO strings(id, value) VALUES (?1, ?2)");
    insActivity_ = db_.prepare(insertText("activities", kActivityColumns, kActivityColumnCount, 1));
    insActivities_ = db_.prepare(insertText("activities", kActivityColumns, kActivityColumnCount, kRowsPerInsert));
    insCpu_ = db_.prepare(insertText("cpu_ranges", kCpuRangeColumns, kCpuRangeColumnCount, 1));
    insCpuRanges_ = db_.prepare(insertText("cpu_ranges", kCpuRangeColumns, kCpuRangeColumnCount, kRowsPerInsert));
    insNccl_ = db_.prepare(
        "INSERT INTO nccl_ops(rank, activity_id, kind, is_p2p, in_nelems, out_nelems, bytes, dtype, group_name, group_desc,"
        " group_ranks, group_size, peer, seq, start_ns, end_ns, stream_id)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)");
    insMemory_ = db_.prepare("INSERT INTO memory_events(rank, device, ts_ns, bytes, address, total_allocated, total_reserved)"
                             " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    insString_.bind(1, int64_t{0}).bind(2, std::string_view{}).run();
    strings_.emplace(std::string(), 0);
}

StoreWriter::~StoreWriter() = default;

StringId StoreWriter::intern(std::string_view text)
{
    if (text.size() > kMaxStringBytes) {
        // Cut at a character boundary; one oversized name must not cost gigabytes.
        size_t cut = kMaxStringBytes;
        while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
            --cut;
        diagnostic(std::nullopt, Severity::Warning, "truncated:string",
                   "a name or value longer than " + std::to_string(kMaxStringBytes) + " bytes was truncated (" +
                       std::to_string(text.size()) + " bytes, starting \"" + printable(text.substr(0, 40)) + "\")");
        text = text.substr(0, cut);
    }
    auto it = strings_.find(text);
    if (it != strings_.end())
        return it->second;
    StringId id = static_cast<StringId>(strings_.size());
    insString_.bind(1, id).bind(2, text).run();
    strings_.emplace(std::string(text), id);
    return id;
}

int64_t StoreWriter::addSource(const SourceRecord& s)
{
    auto st = db_.prepare("INSERT INTO sources(path, format, rank, time_base_ns, details) VALUES (?1, ?2, ?3, ?4, ?5)");
    st.bind(1, s.path).bind(2, s.format).bind(3, s.rank).bind(4, s.timeBase);
    if (s.details.empty())
        st.bindNull(5);
    else
        st.bind(5, s.details);
    st.run();
    return db_.lastInsertRowid();
}

void StoreWriter::setSourceAlignment(int64_t sourceId, TimeNs clockOffset, std::string_view alignment)
{
    auto st = db_.prepare("UPDATE sources SET clock_offset_ns = ?2, alignment = ?3 WHERE id = ?1");
    st.bind(1, sourceId).bind(2, clockOffset).bind(3, alignment).run();
}

void StoreWriter::setSourcePath(int64_t sourceId, std::string_view path)
{
    auto st = db_.prepare("UPDATE sources SET path = ?2 WHERE id = ?1");
    st.bind(1, sourceId).bind(2, path).run();
}

void StoreWriter::setMeta(std::string_view key, std::string_view value)
{
    auto st = db_.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)");
    st.bind(1, key).bind(2, value).run();
}

void StoreWriter::addRank(const RankInfo& r)
{
    if (inputStart_)
        inputStart_->ranks.note(ranks_, r.rank);
    auto [it, inserted] = ranks_.try_emplace(r.rank, r);
    if (inserted)
        return;
    RankInfo& have = it->second;
    fill(have.worldSize, r.worldSize);
    fill(have.host, r.host);
    fill(have.pid, r.pid);
    fill(have.device, r.device);
    fill(have.sourceId, r.sourceId);
}

void StoreWriter::addGpu(const GpuInfo& g)
{
    if (inputStart_)
        inputStart_->gpus.note(gpus_, {g.rank, g.device});
    auto [it, inserted] = gpus_.try_emplace({g.rank, g.device}, g);
    if (inserted)
        return;
    GpuInfo& have = it->second;
    fill(have.name, g.name);
    fill(have.uuid, g.uuid);
    fill(have.memoryBytes, g.memoryBytes);
    fill(have.smCount, g.smCount);
    fill(have.computeCapability, g.computeCapability);
}

void StoreWriter::addProcessGroup(const ProcessGroup& g)
{
    if (inputStart_)
        inputStart_->groups.note(groups_, {g.rank, g.name});
    groups_.insert_or_assign({g.rank, g.name}, g);
}

int64_t StoreWriter::stream(int rank, int device, int64_t streamNo, std::string_view name)
{
    auto key = std::make_tuple(rank, device, streamNo);
    auto it = streams_.find(key);
    if (it != streams_.end())
        return it->second;
    // The row may exist without being cached: an importer that settles a
    // file's rank late moves its streams to it in SQL (KinetoImport). Two
    // sources of one rank then share streams, as when both name it at once,
    // and importJob reports the clash against the inputs.
    auto st = db_.prepare("INSERT OR IGNORE INTO streams(rank, device, stream, name) VALUES (?1, ?2, ?3, ?4)");
    st.bind(1, rank).bind(2, device).bind(3, streamNo);
    if (name.empty())
        st.bindNull(4);
    else
        st.bind(4, name);
    st.run();
    int64_t id = 0;
    if (db_.changes() > 0) {
        id = db_.lastInsertRowid();
    } else {
        auto find = db_.prepare("SELECT id FROM streams WHERE rank = ?1 AND device = ?2 AND stream = ?3");
        find.bind(1, rank).bind(2, device).bind(3, streamNo);
        find.step();
        id = find.int64(0);
    }
    if (inputStart_)
        inputStart_->streams.note(streams_, key);
    streams_.emplace(key, id);
    return id;
}

int64_t StoreWriter::addActivity(const ActivityRecord& a)
{
    noteTime(a.start);
    noteTime(a.end);
    bindActivity(insActivity_, 0, a);
    insActivity_.run();
    return db_.lastInsertRowid();
}

int64_t StoreWriter::addCpuRange(const CpuRangeRecord& r)
{
    noteTime(r.start);
    noteTime(r.end);
    bindCpuRange(insCpu_, 0, r);
    insCpu_.run();
    return db_.lastInsertRowid();
}

namespace {

// Rows bound kRowsPerInsert at a time into `many`, the rest one by one into `one`.
template <typename Row, typename Bind>
int64_t insertRows(sql::Database& db, sql::Statement& many, sql::Statement& one, const std::vector<Row>& rows, Bind bind)
{
    size_t i = 0;
    for (; i + kRowsPerInsert <= rows.size(); i += kRowsPerInsert) {
        for (int k = 0; k < kRowsPerInsert; ++k)
            bind(many, k, rows[i + static_cast<size_t>(k)]);
        many.run();
    }
    for (; i < rows.size(); ++i) {
        bind(one, 0, rows[i]);
        one.run();
    }
    return rows.empty() ? 0 : db.lastInsertRowid();
}

} // namespace

int64_t StoreWriter::addActivities(const std::vector<ActivityRecord>& rows)
{
    for (const ActivityRecord& a : rows) {
        noteTime(a.start);
        noteTime(a.end);
    }
    return insertRows(db_, insActivities_, insActivity_, rows, bindActivity);
}

int64_t StoreWriter::addCpuRanges(const std::vector<CpuRangeRecord>& rows)
{
    for (const CpuRangeRecord& r : rows) {
        noteTime(r.start);
        noteTime(r.end);
    }
    return insertRows(db_, insCpuRanges_, insCpu_, rows, bindCpuRange);
}

int64_t StoreWriter::addNcclOp(const NcclRecord& op)
{
    if (op.start)
        noteTime(*op.start);
    if (op.end)
        noteTime(*op.end);
    auto& st = insNccl_;
    st.bind(1, op.rank).bind(2, op.activityId).bind(3, toString(op.kind)).bind(4, op.isP2p ? 1 : 0);
    st.bind(5, op.inNelems).bind(6, op.outNelems).bind(7, op.bytes);
    auto optText = [&](int i, const std::string& s) {
        if (!s.empty())
            st.bind(i, s);
    };
    optText(8, op.dtype);
    optText(9, op.groupName);
    optText(10, op.groupDesc);
    optText(11, op.groupRanks);
    st.bind(12, op.groupSize).bind(13, op.peer).bind(14, op.seq).bind(15, op.start).bind(16, op.end);
    st.bind(17, op.streamId);
    st.run();
    return db_.lastInsertRowid();
}

void StoreWriter::addMemoryEvent(const MemoryEvent& e)
{
    noteTime(e.ts);
    insMemory_.bind(1, e.rank).bind(2, e.device).bind(3, e.ts).bind(4, e.bytes).bind(5, e.address);
    insMemory_.bind(6, e.totalAllocated).bind(7, e.totalReserved).run();
}

void StoreWriter::diagnostic(std::optional<int64_t> sourceId, Severity severity, std::string_view kind,
                             std::string_view example, int64_t count)
{
    std::pair<int64_t, std::string> key{sourceId.value_or(0), std::string(kind)};
    if (inputStart_)
        inputStart_->diags.note(diags_, key);
    auto& d = diags_[key];
    if (d.count == 0) {
        d.severity = severity;
        d.example = std::string(example.substr(0, 500));
    }
    d.severity = std::max(d.severity, severity);
    d.count += count;
}

namespace {
// The tables an input adds rows to before finish(); the rest are written by finish() from memory.
constexpr const char* kInputTables[] = {"strings", "sources", "streams", "activities", "cpu_ranges", "nccl_ops",
                                        "memory_events"};
} // namespace

void StoreWriter::threadName(int rank, int64_t tid, std::string_view name)
{
    threads_[{rank, tid}] = std::string(name);
}

void StoreWriter::setActivityCorrelation(int64_t activityId, int64_t correlation)
{
    if (!setActivityCorrelation_)
        setActivityCorrelation_.emplace(db_.prepare("UPDATE activities SET correlation = ?2 WHERE id = ?1"));
    setActivityCorrelation_->bind(1, activityId).bind(2, correlation).run();
}

void StoreWriter::setCpuRangeCorrelation(int64_t cpuRangeId, int64_t correlation)
{
    if (!setCpuRangeCorrelation_)
        setCpuRangeCorrelation_.emplace(db_.prepare("UPDATE cpu_ranges SET correlation = ?2 WHERE id = ?1"));
    setCpuRangeCorrelation_->bind(1, cpuRangeId).bind(2, correlation).run();
}

std::vector<StoreWriter::LaunchCall>
StoreWriter::launchCallsWith(const std::vector<std::pair<int64_t, int64_t>>& correlationAndKey, int64_t cpuRangesAfter)
{
    std::vector<LaunchCall> out;
    if (correlationAndKey.empty())
        return out;
    db_.exec("CREATE TEMP TABLE IF NOT EXISTS pending_launches(correlation INTEGER PRIMARY KEY, k INTEGER)");
    db_.exec("DELETE FROM temp.pending_launches");
    {
        auto ins = db_.prepare("INSERT OR IGNORE INTO temp.pending_launches(correlation, k) VALUES (?1, ?2)");
        for (const auto& [correlation, key] : correlationAndKey)
            ins.bind(1, correlation).bind(2, key).run();
    }
    {
        auto sel = db_.prepare("SELECT p.k, c.tid, c.start_ns FROM cpu_ranges c JOIN temp.pending_launches p"
                               " ON p.correlation = c.correlation WHERE c.id > ?1 AND c.kind IN (?2, ?3)");
        sel.bind(1, cpuRangesAfter)
            .bind(2, static_cast<int64_t>(CpuRangeKind::Runtime))
            .bind(3, static_cast<int64_t>(CpuRangeKind::Driver));
        while (sel.step())
            out.push_back({sel.int64(0), sel.int64(1), sel.int64(2)});
    }
    db_.exec("DROP TABLE temp.pending_launches");
    return out;
}

void StoreWriter::relabelRank(int from, int to, const Mark& since, const std::vector<int64_t>& streamIds)
{
    const std::pair<const char*, int64_t> tables[] = {{"activities", since.activities},
                                                      {"cpu_ranges", since.cpuRanges},
                                                      {"nccl_ops", since.ncclOps},
                                                      {"memory_events", since.memoryEvents}};
    for (const auto& [table, after] : tables) {
        auto st = db_.prepare(std::string("UPDATE ") + table + " SET rank = ?1 WHERE id > ?2 AND rank = ?3");
        st.bind(1, to).bind(2, after).bind(3, from).run();
    }
    auto st = db_.prepare("UPDATE streams SET rank = ?1 WHERE id = ?2");
    for (int64_t id : streamIds)
        st.bind(1, to).bind(2, id).run();
}

std::vector<StoreWriter::CollectiveEnd> StoreWriter::collectiveEnds() { return collectiveEnds(db_); }

std::vector<StoreWriter::CollectiveEnd> StoreWriter::collectiveEnds(sql::Database& db)
{
    std::vector<CollectiveEnd> out;
    auto st = db.prepare("SELECT rank, kind, COALESCE(group_name, '') || '|' || COALESCE(group_ranks, ''), seq, end_ns FROM nccl_ops"
                          " WHERE is_p2p = 0 AND end_ns IS NOT NULL ORDER BY rank, start_ns, id");
    while (st.step())
        out.push_back({static_cast<int>(st.int64(0)), st.string(1), st.string(2),
                       st.isNull(3) ? std::nullopt : std::optional<int64_t>(st.int64(3)), st.int64(4)});
    return out;
}

std::vector<StoreWriter::TransferEnd> StoreWriter::transferEnds() { return transferEnds(db_); }

std::vector<StoreWriter::TransferEnd> StoreWriter::transferEnds(sql::Database& db)
{
    std::vector<TransferEnd> out;
    auto st = db.prepare("SELECT rank, kind, peer, end_ns FROM nccl_ops WHERE is_p2p = 1 AND peer IS NOT NULL"
                          " AND end_ns IS NOT NULL AND kind IN (?1, ?2) ORDER BY rank, start_ns, id");
    st.bind(1, toString(Collective::Send)).bind(2, toString(Collective::Recv));
    while (st.step())
        out.push_back({static_cast<int>(st.int64(0)), st.text(1) == toString(Collective::Send),
                       static_cast<int>(st.int64(2)), st.int64(3)});
    return out;
}

void StoreWriter::setSourceRank(int64_t sourceId, int rank, TimeNs timeBase, std::string_view detailsJson)
{
    auto st = db_.prepare("UPDATE sources SET rank = ?2, time_base_ns = ?3, details = ?4 WHERE id = ?1");
    st.bind(1, sourceId).bind(2, rank).bind(3, timeBase).bind(4, detailsJson);
    st.run();
}

void StoreWriter::beginInput()
{
    assert(!inputStart_ && !finished_);
    InputStart start;
    static_assert(std::size(kInputTables) == std::tuple_size_v<decltype(start.maxIds)>);
    for (size_t i = 0; i < std::size(kInputTables); ++i) {
        auto st = db_.prepare(std::string("SELECT COALESCE(MAX(id), -1) FROM ") + kInputTables[i]);
        st.step();
        start.maxIds[i] = st.int64(0);
    }
    start.threads = threads_;
    inputStart_ = std::move(start);
}

void StoreWriter::keepInput()
{
    assert(inputStart_);
    inputStart_.reset();
}

void StoreWriter::discardInput()
{
    assert(inputStart_);
    // Rows get ids above the largest one (no AUTOINCREMENT), so an input's rows are those above the mark.
    for (size_t i = 0; i < std::size(kInputTables); ++i) {
        auto st = db_.prepare(std::string("DELETE FROM ") + kInputTables[i] + " WHERE id > ?1");
        st.bind(1, inputStart_->maxIds[i]).run();
    }
    const StringId strings = inputStart_->maxIds[0] + 1; // string ids count from 0
    for (auto it = strings_.begin(); it != strings_.end();)
        it = it->second >= strings ? strings_.erase(it) : std::next(it);
    inputStart_->streams.restore(streams_);
    inputStart_->ranks.restore(ranks_);
    inputStart_->gpus.restore(gpus_);
    inputStart_->groups.restore(groups_);
    inputStart_->diags.restore(diags_);
    threads_ = std::move(inputStart_->threads);
    // What the input settled went with its rows.
    std::erase_if(settled_, [&](const Settled& s) {
        return s.activitiesAfter >= inputStart_->maxIds[3] && s.cpuRangesAfter >= inputStart_->maxIds[4];
    });
    inputStart_.reset();
}

void StoreWriter::settled(int rank, int64_t activitiesAfter, int64_t activitiesUpTo, int64_t cpuRangesAfter,
                          int64_t cpuRangesUpTo)
{
    settled_.push_back({rank, activitiesAfter, activitiesUpTo, cpuRangesAfter, cpuRangesUpTo});
}

void StoreWriter::noteShift(TimeNs offset)
{
    if (offset <= -kMaxTimeNs || offset >= kMaxTimeNs || shifted_ > kMaxTimeNs)
        timesUnknown_ = true;
    else
        shifted_ += offset < 0 ? -offset : offset;
}

bool StoreWriter::timesSurelyInRange() const
{
    return !timesUnknown_ && shifted_ <= kMaxTimeNs && maxTime_ <= kMaxTimeNs - shifted_ &&
           minTime_ >= -kMaxTimeNs + shifted_;
}

void StoreWriter::shiftRank(int rank, TimeNs offset)
{
    if (offset == 0)
        return;
    noteShift(offset);
    auto run = [&](const char* sqlText) {
        auto st = db_.prepare(sqlText);
        st.bind(1, offset).bind(2, rank).run();
    };
    run("UPDATE activities SET start_ns = start_ns + ?1, end_ns = end_ns + ?1, launch_ns = launch_ns + ?1 WHERE rank = ?2");
    run("UPDATE cpu_ranges SET start_ns = start_ns + ?1, end_ns = end_ns + ?1 WHERE rank = ?2");
    run("UPDATE nccl_ops SET start_ns = start_ns + ?1, end_ns = end_ns + ?1 WHERE rank = ?2");
    run("UPDATE memory_events SET ts_ns = ts_ns + ?1 WHERE rank = ?2");
}

StoreWriter::Mark StoreWriter::mark()
{
    auto maxId = [&](const char* table) {
        auto st = db_.prepare(std::string("SELECT COALESCE(MAX(id), 0) FROM ") + table);
        st.step();
        return st.int64(0);
    };
    return {maxId("activities"), maxId("cpu_ranges"), maxId("nccl_ops"), maxId("memory_events")};
}

void StoreWriter::shiftRanks(const std::map<int, TimeNs>& offsets, const Mark& since)
{
    // shiftRank() once per rank would read every table once per rank.
    db_.exec("CREATE TEMP TABLE IF NOT EXISTS rank_shift(rank INTEGER PRIMARY KEY, delta INTEGER NOT NULL)");
    db_.exec("DELETE FROM temp.rank_shift");
    bool any = false;
    {
        auto ins = db_.prepare("INSERT INTO temp.rank_shift(rank, delta) VALUES (?1, ?2)");
        TimeNs largest = 0; // each row moves once, by its rank's offset
        for (const auto& [rank, offset] : offsets)
            if (offset == std::numeric_limits<TimeNs>::min() || std::abs(offset) > largest)
                largest = offset == std::numeric_limits<TimeNs>::min() ? kMaxTimeNs : std::abs(offset);
        noteShift(largest);
        for (const auto& [rank, offset] : offsets) {
            if (offset != 0) {
                ins.bind(1, rank).bind(2, offset).run();
                any = true;
            }
        }
    }
    auto run = [&](const char* sqlText, int64_t after) {
        auto st = db_.prepare(sqlText);
        st.bind(1, after).run();
    };
    if (any) {
        run("UPDATE activities SET start_ns = start_ns + s.delta, end_ns = end_ns + s.delta, launch_ns = launch_ns + s.delta"
            " FROM temp.rank_shift s WHERE activities.id > ?1 AND s.rank = activities.rank",
            since.activities);
        run("UPDATE cpu_ranges SET start_ns = start_ns + s.delta, end_ns = end_ns + s.delta"
            " FROM temp.rank_shift s WHERE cpu_ranges.id > ?1 AND s.rank = cpu_ranges.rank",
            since.cpuRanges);
        run("UPDATE nccl_ops SET start_ns = start_ns + s.delta, end_ns = end_ns + s.delta"
            " FROM temp.rank_shift s WHERE nccl_ops.id > ?1 AND s.rank = nccl_ops.rank",
            since.ncclOps);
        run("UPDATE memory_events SET ts_ns = ts_ns + s.delta"
            " FROM temp.rank_shift s WHERE memory_events.id > ?1 AND s.rank = memory_events.rank",
            since.memoryEvents);
    }
    db_.exec("DELETE FROM temp.rank_shift");
}

void StoreWriter::dropOutOfRangeTimes()
{
    if (timesSurelyInRange())
        return;
    const std::string k = std::to_string(kMaxTimeNs);
    auto bad = [&](const char* column, bool nullable) {
        std::string c = column;
        // Not an integer in [-k, k]. Text and blobs sort after every number,
        // so the range test fails for them; an integer column holds a real
        // only when it is no integer (or outside int64), which the cast
        // tells. The same rows as typeof(c) <> 'integer' OR c < -k OR c > k,
        // without a function call per row.
        std::string test = "(NOT (" + c + " BETWEEN -" + k + " AND " + k + " AND " + c + " = CAST(" + c + " AS INTEGER)))";
        return nullable ? "(" + c + " IS NOT NULL AND " + test + ")" : test;
    };
    struct Table {
        const char* name;
        std::string where;
    };
    // While an input is open only its rows (ids above its mark) are checked:
    // the rows of earlier inputs were checked when they were kept.
    auto since = [&](size_t table) {
        return inputStart_ ? " AND id > " + std::to_string(inputStart_->maxIds[table]) : std::string();
    };
    const Table tables[] = {
        // launch_ns copies a launch call's start, which is checked in cpu_ranges
        // (rows the importer settled have it; the rest get it in finish()).
        {"activities", "(" + bad("start_ns", false) + " OR " + bad("end_ns", false) + ")" + since(3)},
        {"cpu_ranges", "(" + bad("start_ns", false) + " OR " + bad("end_ns", false) + ")" + since(4)},
        {"nccl_ops", "(" + bad("start_ns", true) + " OR " + bad("end_ns", true) + ")" + since(5)},
        {"memory_events", bad("ts_ns", false) + since(6)},
    };
    std::map<int, int64_t> dropped;
    for (const auto& t : tables) {
        auto st = db_.prepare(std::string("SELECT rank, COUNT(*) FROM ") + t.name + " WHERE " + t.where + " GROUP BY rank");
        bool any = false;
        while (st.step()) {
            dropped[static_cast<int>(st.int64(0))] += st.int64(1);
            any = true;
        }
        st = {};
        if (any)
            db_.exec(std::string("DELETE FROM ") + t.name + " WHERE " + t.where);
    }
    if (dropped.empty())
        return;
    for (const auto& [rank, count] : dropped) {
        droppedRanks_.insert(rank);
        std::optional<int64_t> source;
        std::string sourcePath = "rank " + std::to_string(rank);
        if (auto it = ranks_.find(rank); it != ranks_.end() && it->second.sourceId)
            source = it->second.sourceId;
        if (!source) {
            auto q = db_.prepare("SELECT id FROM sources WHERE rank = ?1 ORDER BY id LIMIT 1");
            q.bind(1, rank);
            if (q.step())
                source = q.int64(0);
        }
        if (source) {
            auto q = db_.prepare("SELECT path FROM sources WHERE id = ?1");
            q.bind(1, *source);
            if (q.step())
                sourcePath = q.string(0);
        }
        diagnostic(source, Severity::Warning, "bad_value:time_out_of_range",
                   sourcePath + ": a record whose time (after applying the file's time base) lies outside " +
                       "the representable range of about 146 years around 1970 was skipped");
        diags_[{source.value_or(0), "bad_value:time_out_of_range"}].count += count - 1;
        auto left = db_.prepare("SELECT (SELECT COUNT(*) FROM activities WHERE rank = ?1) +"
                                " (SELECT COUNT(*) FROM cpu_ranges WHERE rank = ?1)");
        left.bind(1, rank);
        left.step();
        if (left.int64(0) == 0)
            throw FormatError(sourcePath + ": every time lies outside the representable range once the file's time base "
                                           "is applied (" + std::to_string(count) +
                              " records); check its time base (baseTimeNanoseconds or the session start)");
    }
}

void StoreWriter::flushDiagnostics()
{
    auto st = db_.prepare("INSERT INTO diagnostics(source_id, severity, kind, count, example) VALUES (?1, ?2, ?3, ?4, ?5)");
    for (const auto& [key, d] : diags_) {
        if (key.first == 0)
            st.bindNull(1);
        else
            st.bind(1, key.first);
        st.bind(2, toString(d.severity)).bind(3, key.second).bind(4, d.count).bind(5, d.example).run();
    }
    diags_.clear();
}

void StoreWriter::linkLaunches(const std::vector<int>* ranks)
{
    // One indexed lookup per correlated activity; the first runtime/driver
    // call with the same correlation id on the same rank is the launch. The
    // lookup index lives only while linking (readers follow launch_id), and is
    // built before the store's indexes, which then reuse its freed pages.
    if (ranks && ranks->empty())
        return;
    db_.exec("CREATE INDEX launch_lookup ON cpu_ranges(rank, correlation) WHERE correlation IS NOT NULL AND kind IN (3, 4)");
    std::string text = "UPDATE activities SET (launch_id, launch_ns) = (SELECT c.id, c.start_ns FROM cpu_ranges c"
                       " WHERE c.rank = activities.rank AND c.correlation = activities.correlation AND c.kind IN (3, 4)"
                       " ORDER BY c.id LIMIT 1) WHERE correlation IS NOT NULL";
    if (!ranks) {
        db_.exec(text);
    } else {
        // One pass over the table for all the ranks (there is no index on activities yet).
        std::string list = "[";
        for (int r : *ranks)
            list += (list.size() > 1 ? "," : "") + std::to_string(r);
        auto st = db_.prepare(text + " AND rank IN (SELECT value FROM json_each(?1))");
        st.bind(1, list + "]").run();
    }
    db_.exec("DROP INDEX launch_lookup");
}

void RangeNester::add(int64_t rank, int64_t tid, TimeNs start, TimeNs end, int64_t id)
{
    if (first_ || rank != rank_ || tid != tid_ || start != start_) {
        walk();
        if (first_ || rank != rank_ || tid != tid_)
            stack_.clear();
        rank_ = rank;
        tid_ = tid;
        start_ = start;
        first_ = false;
    }
    group_.push_back({id, end});
}

void RangeNester::finish()
{
    walk();
    stack_.clear();
    first_ = true;
}

void RangeNester::walk()
{
    // Descending end; ranges with equal ends keep row order.
    for (size_t i = group_.size(); i > 0;) {
        size_t j = i - 1;
        while (j > 0 && group_[j - 1].end == group_[i - 1].end)
            --j;
        for (size_t k = j; k < i; ++k) {
            const Open& r = group_[k];
            while (!stack_.empty() && stack_.back().end <= start_)
                stack_.pop_back();
            // A range that starts inside the top but ends after it is a partial
            // overlap, not nesting: treat it as a sibling of the top.
            while (!stack_.empty() && r.end > stack_.back().end)
                stack_.pop_back();
            if (!stack_.empty())
                found.push_back({r.id, stack_.back().id, static_cast<int>(stack_.size())});
            stack_.push_back({r.id, r.end});
        }
        i = j;
    }
    group_.clear();
}

void StoreWriter::nestCpuRanges(const std::vector<int>* ranks)
{
    // One pass in (rank, tid, start_ns, end_ns) order, sorted by SQLite's
    // sorter (the store's time index holds only some kinds of range): ranges
    // of one start are put in descending end by RangeNester. The updates then
    // go in row order, page after page.
    if (ranks && ranks->empty())
        return;
    std::string list = "[";
    if (ranks) {
        for (int r : *ranks)
            list += (list.size() > 1 ? "," : "") + std::to_string(r);
        // Start from scratch: rows an importer settled may have parents.
        auto reset = db_.prepare("UPDATE cpu_ranges SET depth = 0, parent_id = NULL"
                                 " WHERE rank IN (SELECT value FROM json_each(?1)) AND parent_id IS NOT NULL");
        reset.bind(1, list + "]").run();
    }
    auto sel = db_.prepare(std::string("SELECT id, rank, tid, start_ns, end_ns FROM cpu_ranges") +
                           (ranks ? " WHERE rank IN (SELECT value FROM json_each(?1))" : "") +
                           " ORDER BY rank, tid, start_ns, end_ns, id");
    if (ranks)
        sel.bind(1, list + "]");
    RangeNester nester;
    while (sel.step())
        nester.add(sel.int64(1), sel.int64(2), sel.int64(3), sel.int64(4), sel.int64(0));
    nester.finish();
    sel.reset();
    auto& updates = nester.found;
    std::sort(updates.begin(), updates.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    auto upd = db_.prepare("UPDATE cpu_ranges SET depth = ?2, parent_id = ?3 WHERE id = ?1");
    for (const auto& u : updates)
        upd.bind(1, u.id).bind(2, u.depth).bind(3, u.parent).run();
}

std::vector<int> StoreWriter::unsettledRanks()
{
    // Ranks some input settled once, that lost no rows and have no rows from
    // elsewhere, are done; every other rank that has rows is settled here.
    std::map<int, int> times;
    for (const Settled& s : settled_)
        ++times[s.rank];
    std::set<int> todo(droppedRanks_.begin(), droppedRanks_.end());
    for (const auto& [rank, n] : times)
        if (n > 1)
            todo.insert(rank);
    // The rows outside the settled id ranges, table by table.
    auto others = [&](const char* table, auto after, auto upTo) {
        std::vector<std::pair<int64_t, int64_t>> spans;
        for (const Settled& s : settled_)
            spans.emplace_back(s.*after, s.*upTo);
        std::sort(spans.begin(), spans.end());
        auto st = db_.prepare(std::string("SELECT DISTINCT rank FROM ") + table + " WHERE id > ?1 AND id <= ?2");
        int64_t from = std::numeric_limits<int64_t>::min();
        auto scan = [&](int64_t a, int64_t b) {
            if (a >= b)
                return;
            st.bind(1, a).bind(2, b);
            while (st.step())
                todo.insert(static_cast<int>(st.int64(0)));
            st.reset();
        };
        for (const auto& [a, b] : spans) {
            scan(from, a);
            from = std::max(from, b);
        }
        scan(from, std::numeric_limits<int64_t>::max());
    };
    others("activities", &Settled::activitiesAfter, &Settled::activitiesUpTo);
    others("cpu_ranges", &Settled::cpuRangesAfter, &Settled::cpuRangesUpTo);
    return {todo.begin(), todo.end()};
}

namespace {

// The activities of settled ranks for the GPU summaries. A settled rank's
// rows are the ids of one span (settled()): read in one pass in row order
// and sorted here as the index would give them (start, then id), rather
// than looked up one by one through the index. One rank is held at a time.
class SettledActivities {
public:
    struct Row {
        TimeNs start;
        int64_t id;
        TimeNs end;
        int64_t stream;
        int kind;
    };
    // The streams table is read only when some rank is settled.
    SettledActivities(sql::Database& db, bool anySettled) : db_(db)
    {
        if (anySettled) {
            auto st = db_.prepare("SELECT id, rank, device FROM streams");
            while (st.step())
                streamDevice_[st.int64(0)] = {st.int64(1), st.int64(2)};
        }
    }
    // The rows of (rank, device); span: the rank's settled activity ids (after, upTo].
    const std::vector<Row>& rows(int64_t rank, int64_t device, std::pair<int64_t, int64_t> span)
    {
        if (loadedRank_ != rank)
            load(rank, span);
        return byDevice_[device];
    }

private:
    void load(int64_t rank, std::pair<int64_t, int64_t> span)
    {
        byDevice_.clear();
        auto st = db_.prepare("SELECT id, stream_id, kind, start_ns, end_ns FROM activities WHERE id > ?1 AND id <= ?2");
        st.bind(1, span.first).bind(2, span.second);
        while (st.step()) {
            auto it = streamDevice_.find(st.int64(1));
            if (it == streamDevice_.end() || it->second.first != rank)
                continue;
            byDevice_[it->second.second].push_back(
                {st.int64(3), st.int64(0), st.int64(4), st.int64(1), static_cast<int>(st.int64(2))});
        }
        for (auto& [device, rows] : byDevice_)
            std::sort(rows.begin(), rows.end(),
                      [](const Row& a, const Row& b) { return std::tie(a.start, a.id) < std::tie(b.start, b.id); });
        loadedRank_ = rank;
    }

    sql::Database& db_;
    std::map<int64_t, std::pair<int64_t, int64_t>> streamDevice_; // stream id -> rank, device
    std::map<int64_t, std::vector<Row>> byDevice_;                // of the settled rank being summarised
    std::optional<int64_t> loadedRank_;
};

// gpu_summary: a row per (rank, device) that has a stream. settledSpans:
// rank -> its settled activity ids (after, upTo], for the ranks finish()
// left as the importer settled them. Returns the counts per stream.
store::detail::StreamCounts writeGpuSummaries(sql::Database& db,
                                              const std::map<int, std::pair<int64_t, int64_t>>& settledSpans)
{
    auto pairs = db.prepare("SELECT DISTINCT rank, device FROM streams ORDER BY rank, device");
    auto acts = db.prepare("SELECT kind, start_ns, end_ns, stream_id FROM activities WHERE rank = ?1 AND stream_id IN"
                           " (SELECT id FROM streams WHERE rank = ?1 AND device = ?2) ORDER BY start_ns");
    auto ins = db.prepare("INSERT INTO gpu_summary(rank, device, kernels, memcpys, memsets, syncs, kernel_first_ns,"
                          " kernel_last_ns, kernel_busy_ns, gpu_first_ns, gpu_last_ns, gpu_busy_ns)"
                          " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
    std::vector<std::pair<int64_t, int64_t>> keys;
    while (pairs.step())
        keys.emplace_back(pairs.int64(0), pairs.int64(1));
    store::detail::StreamCounts perStream;
    SettledActivities settled(db, !settledSpans.empty());
    for (auto [rank, device] : keys) {
        store::detail::DeviceTally tally;
        if (auto clean = settledSpans.find(static_cast<int>(rank)); clean != settledSpans.end()) {
            for (const SettledActivities::Row& r : settled.rows(rank, device, clean->second))
                tally.add(r.kind, r.start, r.end, r.stream, perStream);
        } else {
            acts.bind(1, rank).bind(2, device);
            while (acts.step())
                tally.add(static_cast<int>(acts.int64(0)), acts.int64(1), acts.int64(2), acts.int64(3), perStream);
        }
        acts.reset();
        tally.close();
        const auto& c = tally.counts;
        ins.bind(1, rank).bind(2, device).bind(3, c[0]).bind(4, c[1]).bind(5, c[2]).bind(6, c[3]);
        ins.bind(7, tally.kernels.first).bind(8, tally.kernels.last).bind(9, tally.kernels.busy);
        ins.bind(10, tally.gpu.first).bind(11, tally.gpu.last).bind(12, tally.gpu.busy).run();
    }
    return perStream;
}

std::string streamCountsJson(const store::detail::StreamCounts& perStream)
{
    nlohmann::json streamCounts = nlohmann::json::object();
    for (const auto& [id, c] : perStream)
        streamCounts[std::to_string(id)] = c;
    return streamCounts.dump();
}

// CPU ranges per kind name, as JSON object text.
// NCCL operations per kind: a reader's scan of the table would read every
// row's page (a collective of 4,096 ranks lists them all: a page a row).
std::string ncclCountsJson(sql::Database& db)
{
    auto nccl = db.prepare("SELECT kind, COUNT(*) FROM nccl_ops GROUP BY kind");
    nlohmann::json counts = nlohmann::json::object();
    while (nccl.step())
        counts[nccl.string(0)] = nccl.int64(1);
    return counts.dump();
}

std::string cpuRangeCountsJson(sql::Database& db)
{
    // Counted here: GROUP BY would sort every row.
    auto cpu = db.prepare("SELECT kind FROM cpu_ranges");
    std::map<int64_t, int64_t> byKind;
    while (cpu.step())
        ++byKind[cpu.int64(0)];
    cpu.reset();
    nlohmann::json cpuCounts = nlohmann::json::object();
    for (const auto& [kind, n] : byKind) {
        auto k = static_cast<int>(kind);
        std::string name = k >= 0 && k <= 6 ? std::string(toString(static_cast<CpuRangeKind>(k))) : std::to_string(k);
        cpuCounts[name] = n;
    }
    return cpuCounts.dump();
}

int64_t activitiesWithLaunch(sql::Database& db)
{
    auto launches = db.prepare("SELECT COUNT(*) FROM activities WHERE launch_id IS NOT NULL");
    launches.step();
    return launches.int64(0);
}

} // namespace

void StoreWriter::summarise()
{
    db_.exec("INSERT OR IGNORE INTO ranks(rank) SELECT DISTINCT rank FROM streams");
    db_.exec("INSERT OR IGNORE INTO gpus(rank, device) SELECT DISTINCT rank, device FROM streams");
    // The ranks finish() leaves as their importer settled them, by their activity ids.
    std::map<int, std::pair<int64_t, int64_t>> settledSpans;
    for (const auto& [rank, s] : settledClean_)
        settledSpans.emplace(rank, std::make_pair(s.activitiesAfter, s.activitiesUpTo));
    const store::detail::StreamCounts perStream = writeGpuSummaries(db_, settledSpans);

    // Counts that `pipescope info` shows, so it never scans the big tables.
    setMeta("count.streams", streamCountsJson(perStream));
    setMeta("count.cpu_ranges", cpuRangeCountsJson(db_));
    setMeta("count.nccl_ops", ncclCountsJson(db_));
    setMeta("count.activities_with_launch", std::to_string(activitiesWithLaunch(db_)));
}

void StoreWriter::finish()
{
    if (finished_)
        return;
    setActivityCorrelation_.reset(); // statements end before the file is closed
    setCpuRangeCorrelation_.reset();
    auto step = [&](std::string_view s) {
        if (progress_)
            progress_(s);
    };
    step("checking times");
    dropOutOfRangeTimes();
    flushDiagnostics();
    {
        auto st = db_.prepare("INSERT OR REPLACE INTO threads(rank, tid, name) VALUES (?1, ?2, ?3)");
        for (const auto& [key, name] : threads_)
            st.bind(1, key.first).bind(2, key.second).bind(3, name).run();
    }
    {
        auto st = db_.prepare("INSERT OR REPLACE INTO ranks(rank, world_size, host, pid, device, source_id)"
                              " VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
        for (const auto& [rank, r] : ranks_) {
            st.bind(1, rank).bind(2, r.worldSize);
            if (r.host.empty())
                st.bindNull(3);
            else
                st.bind(3, r.host);
            st.bind(4, r.pid).bind(5, r.device).bind(6, r.sourceId).run();
        }
    }
    {
        auto st = db_.prepare("INSERT OR REPLACE INTO gpus(rank, device, name, uuid, memory_bytes, sm_count, compute_capability)"
                              " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
        for (const auto& [key, g] : gpus_) {
            st.bind(1, g.rank).bind(2, g.device);
            auto optText = [&](int i, const std::string& s) {
                if (s.empty())
                    st.bindNull(i);
                else
                    st.bind(i, s);
            };
            optText(3, g.name);
            optText(4, g.uuid);
            st.bind(5, g.memoryBytes).bind(6, g.smCount);
            optText(7, g.computeCapability);
            st.run();
        }
    }
    {
        auto st = db_.prepare("INSERT OR REPLACE INTO process_groups(rank, name, desc, ranks, size) VALUES (?1, ?2, ?3, ?4, ?5)");
        for (const auto& [key, g] : groups_) {
            st.bind(1, g.rank).bind(2, g.name).bind(3, g.desc).bind(4, ranksJson(g.ranks)).bind(5, g.size).run();
        }
    }
    // Launches are linked and ranges nested before the indexes are built
    // (the updates then maintain none).
    // Importers settled most ranks as they added the rows (settled()).
    const bool allUnsettled = settled_.empty();
    const std::vector<int> unsettled = allUnsettled ? std::vector<int>{} : unsettledRanks();
    step("linking launches");
    linkLaunches(allUnsettled ? nullptr : &unsettled);
    step("nesting ranges");
    nestCpuRanges(allUnsettled ? nullptr : &unsettled);
    if (!allUnsettled)
        for (const Settled& s : settled_)
            if (!std::binary_search(unsettled.begin(), unsettled.end(), s.rank))
                settledClean_.emplace(s.rank, s);
    step("indexing");
    db_.exec(kIndexSql);
    step("summarising");
    summarise();
    auto meta = db_.prepare("INSERT OR IGNORE INTO meta(key, value) VALUES (?1, ?2)");
    meta.bind(1, "schema_version").bind(2, std::to_string(kSchemaVersion)).run();
    meta.bind(1, "created_by").bind(2, std::string("pipescope ") + kVersion).run();
    meta.bind(1, "created_at").bind(2, utcNow()).run();
    meta.bind(1, "time_unit").bind(2, "ns").run();
    insActivity_ = {};
    insActivities_ = {};
    insCpu_ = {};
    insCpuRanges_ = {};
    insNccl_ = {};
    insString_ = {};
    insMemory_ = {};
    meta = {};
    // Statistics for the query planner, from a sample of each index (a full
    // ANALYZE reads every index of a store of gigabytes; PRAGMA optimize's
    // choice of tables depends on the queries this connection happened to run).
    step("analysing");
    db_.exec("PRAGMA analysis_limit = 1000");
    db_.exec("ANALYZE");
    step("committing");
    db_.exec("COMMIT");
    db_.close();
    out_.commit();
    finished_ = true;
}

} // namespace pipescope
