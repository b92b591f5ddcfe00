#include "CaptureDb.h"

#include "Clock.h"
#include "Log.h"
#include "import/capture/CaptureEnv.h"
#include "import/capture/CaptureSchema.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace pipescope::collect {

namespace {

void bindOpt(sqlite3_stmt* st, int i, const std::optional<int64_t>& v)
{
    if (v)
        sqlite3_bind_int64(st, i, *v);
    else
        sqlite3_bind_null(st, i);
}

void bindText(sqlite3_stmt* st, int i, std::string_view s)
{
    sqlite3_bind_text(st, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
}

void bindTextOrNull(sqlite3_stmt* st, int i, std::string_view s)
{
    if (s.empty())
        sqlite3_bind_null(st, i);
    else
        bindText(st, i, s);
}

std::string readFirstLine(const char* path)
{
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

} // namespace

ProcessMeta currentProcessMeta()
{
    ProcessMeta m;
    auto env = capture::detectRank();
    m.rank = env.rank;
    m.worldSize = env.worldSize;
    m.localRank = env.localRank;
    m.rankVar = env.rankVar;
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0)
        m.host = host;
    m.pid = static_cast<long>(getpid());
    m.bootId = readFirstLine("/proc/sys/kernel/random/boot_id");
    // /proc/self/cmdline separates arguments with NULs.
    std::ifstream cmd("/proc/self/cmdline", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    for (char& c : all)
        if (c == '\0')
            c = ' ';
    while (!all.empty() && all.back() == ' ')
        all.pop_back();
    m.command = all.substr(0, 4096);
    m.startNs = nowNs();
    return m;
}

CaptureDb::~CaptureDb() { close(); }

void CaptureDb::fail(const std::string& what)
{
    if (!failed_.empty())
        return;
    failed_ = what + " (" + path_ + "): " + (db_ ? sqlite3_errmsg(db_) : "no connection");
    warnOnce("capture-db", "cannot write the capture file: " + failed_ + "; recording stops, the program runs on");
}

bool CaptureDb::exec(const char* sql)
{
    if (!db_)
        return false;
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
        std::string msg = err ? err : "?";
        sqlite3_free(err);
        fail(std::string("SQL failed: ") + msg);
        return false;
    }
    return true;
}

sqlite3_stmt* CaptureDb::prepare(const char* sql)
{
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr) != SQLITE_OK) {
        fail("prepare failed");
        return nullptr;
    }
    return st;
}

bool CaptureDb::step(sqlite3_stmt* st)
{
    if (!st || !ok())
        return false;
    int rc = sqlite3_step(st);
    // Every statement binds all its parameters on each use: no clearing needed.
    sqlite3_reset(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fail("insert failed");
        return false;
    }
    return true;
}

bool CaptureDb::open(const std::string& path, const ProcessMeta& meta, std::string& error)
{
    close();
    path_ = path;
    failed_.clear();
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr)
        != SQLITE_OK) {
        error = "cannot open " + path + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory");
        sqlite3_close(db_);
        db_ = nullptr;
        return false;
    }
    // The NCCL plugin and the CUPTI collector of one process may write at the
    // same time; each waits for the other's short transactions.
    sqlite3_busy_timeout(db_, 30000);
    // A killed process must not lose what was committed; power loss may.
    exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;");
    exec("BEGIN IMMEDIATE");
    exec(capture::kCaptureSchemaSql);
    {
        std::string pragmas = "PRAGMA application_id=" + std::to_string(capture::kCaptureApplicationId)
                              + "; PRAGMA user_version=" + std::to_string(capture::kCaptureVersion) + ";";
        exec(pragmas.c_str());
    }
    exec("COMMIT");
    if (!failed_.empty()) {
        error = failed_;
        close();
        return false;
    }

    insString_ = prepare("INSERT OR IGNORE INTO strings(value) VALUES (?1)");
    selString_ = prepare("SELECT id FROM strings WHERE value = ?1");
    insMeta_ = prepare("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)");
    insMetaMax_ = prepare("INSERT INTO meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = "
                          "excluded.value WHERE CAST(excluded.value AS INTEGER) > CAST(meta.value AS INTEGER)");
    insDevice_ = prepare("INSERT OR REPLACE INTO devices(id, name, uuid, memory_bytes, sm_count, cc_major, cc_minor) "
                         "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    insContext_ = prepare("INSERT OR REPLACE INTO contexts(id, device) VALUES (?1, ?2)");
    insGpu_ = prepare("INSERT INTO gpu_activities(kind, start_ns, end_ns, device, context, stream, correlation, "
                      "name_id, bytes, copy_kind, grid_x, grid_y, grid_z, block_x, block_y, block_z, graph_id) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)");
    insApi_ = prepare("INSERT INTO api_calls(kind, cbid, name_id, tid, start_ns, end_ns, correlation) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    insNvtx_ = prepare("INSERT INTO nvtx_ranges(kind, tid, start_ns, end_ns, name_id, domain_id) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    insMemory_ = prepare("INSERT INTO memory_events(device, ts_ns, bytes, address, memory_kind) "
                         "VALUES (?1, ?2, ?3, ?4, ?5)");
    insComm_ = prepare("INSERT OR REPLACE INTO nccl_comms(comm_hash, name, nranks, rank, nnodes, init_ns) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    insNccl_ = prepare("INSERT INTO nccl_ops(comm_hash, func, is_p2p, count, dtype, bytes, peer, root, seq, algo, "
                       "proto, nchannels, start_ns, end_ns) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)");
    insWindow_ = prepare("INSERT INTO windows(start_ns, end_ns, reason) VALUES (?1, ?2, ?3)");
    insDropped_ = prepare("INSERT INTO dropped(source, count) VALUES (?1, ?2) "
                          "ON CONFLICT(source) DO UPDATE SET count = count + excluded.count");
    if (!failed_.empty()) {
        error = failed_;
        close();
        return false;
    }

    begin();
    if (meta.rank)
        setMeta("rank", std::to_string(*meta.rank));
    if (meta.worldSize)
        setMeta("world_size", std::to_string(*meta.worldSize));
    if (meta.localRank)
        setMeta("local_rank", std::to_string(*meta.localRank));
    if (!meta.rankVar.empty())
        setMeta("rank_var", meta.rankVar);
    setMeta("host", meta.host);
    setMeta("pid", std::to_string(meta.pid));
    if (!meta.bootId.empty())
        setMeta("boot_id", meta.bootId);
    if (!meta.command.empty())
        setMeta("command", meta.command);
    setMeta("clock", "CLOCK_REALTIME");
    // The earliest start of the connections sharing the file.
    if (sqlite3_stmt* st = prepare("INSERT INTO meta(key, value) VALUES ('start_ns', ?1) ON CONFLICT(key) DO UPDATE "
                                   "SET value = excluded.value WHERE CAST(excluded.value AS INTEGER) < "
                                   "CAST(meta.value AS INTEGER)")) {
        bindText(st, 1, std::to_string(meta.startNs));
        step(st);
        sqlite3_finalize(st);
    }
    setMetaMax("end_ns", meta.startNs);
    commit();
    if (!failed_.empty()) {
        error = failed_;
        close();
        return false;
    }
    return true;
}

void CaptureDb::close()
{
    if (!db_)
        return;
    if (inTransaction_)
        commit();
    for (sqlite3_stmt* st : {insString_, selString_, insMeta_, insMetaMax_, insDevice_, insContext_, insGpu_, insApi_,
                             insNvtx_, insMemory_, insComm_, insNccl_, insWindow_, insDropped_})
        if (st)
            sqlite3_finalize(st);
    insString_ = selString_ = insMeta_ = insMetaMax_ = insDevice_ = insContext_ = insGpu_ = insApi_ = insNvtx_ =
        insMemory_ = insComm_ = insNccl_ = insWindow_ = insDropped_ = nullptr;
    sqlite3_close(db_);
    db_ = nullptr;
    strings_.clear();
}

bool CaptureDb::begin()
{
    if (!ok() || inTransaction_)
        return ok();
    inTransaction_ = exec("BEGIN IMMEDIATE");
    return inTransaction_;
}

bool CaptureDb::commit()
{
    if (!db_ || !inTransaction_)
        return ok();
    inTransaction_ = false;
    return exec("COMMIT");
}

void CaptureDb::setMeta(std::string_view key, std::string_view value)
{
    if (!ok())
        return;
    bindText(insMeta_, 1, key);
    bindText(insMeta_, 2, value);
    step(insMeta_);
}

void CaptureDb::setMetaMax(std::string_view key, int64_t value)
{
    if (!ok())
        return;
    bindText(insMetaMax_, 1, key);
    bindText(insMetaMax_, 2, std::to_string(value));
    step(insMetaMax_);
}

int64_t CaptureDb::intern(std::string_view text)
{
    if (!ok())
        return 0;
    if (auto it = strings_.find(text); it != strings_.end())
        return it->second;
    // Another connection to the file may have stored the string already.
    bindText(insString_, 1, text);
    step(insString_);
    int64_t id = 0;
    if (sqlite3_changes(db_) > 0) {
        id = sqlite3_last_insert_rowid(db_);
    } else {
        bindText(selString_, 1, text);
        if (sqlite3_step(selString_) == SQLITE_ROW)
            id = sqlite3_column_int64(selString_, 0);
        sqlite3_reset(selString_);
        sqlite3_clear_bindings(selString_);
    }
    strings_.emplace(std::string(text), id);
    return id;
}

void CaptureDb::addDevice(const DeviceRow& d)
{
    if (!ok())
        return;
    sqlite3_bind_int64(insDevice_, 1, d.id);
    bindTextOrNull(insDevice_, 2, d.name);
    bindTextOrNull(insDevice_, 3, d.uuid);
    bindOpt(insDevice_, 4, d.memoryBytes);
    bindOpt(insDevice_, 5, d.smCount);
    bindOpt(insDevice_, 6, d.ccMajor);
    bindOpt(insDevice_, 7, d.ccMinor);
    step(insDevice_);
}

void CaptureDb::addContext(int64_t context, int64_t device)
{
    if (!ok())
        return;
    sqlite3_bind_int64(insContext_, 1, context);
    sqlite3_bind_int64(insContext_, 2, device);
    step(insContext_);
}

void CaptureDb::addGpuActivity(const GpuActivityRow& a)
{
    if (!ok())
        return;
    sqlite3_stmt* st = insGpu_;
    sqlite3_bind_int(st, 1, a.kind);
    sqlite3_bind_int64(st, 2, a.start);
    sqlite3_bind_int64(st, 3, a.end);
    bindOpt(st, 4, a.device);
    bindOpt(st, 5, a.context);
    bindOpt(st, 6, a.stream);
    bindOpt(st, 7, a.correlation);
    sqlite3_bind_int64(st, 8, a.nameId);
    bindOpt(st, 9, a.bytes);
    bindOpt(st, 10, a.copyKind);
    for (int i = 0; i < 3; ++i) {
        bindOpt(st, 11 + i, a.grid[i]);
        bindOpt(st, 14 + i, a.block[i]);
    }
    bindOpt(st, 17, a.graphId);
    step(st);
}

void CaptureDb::addApiCall(const ApiCallRow& a)
{
    if (!ok())
        return;
    sqlite3_stmt* st = insApi_;
    sqlite3_bind_int(st, 1, a.kind);
    sqlite3_bind_int64(st, 2, a.cbid);
    sqlite3_bind_int64(st, 3, a.nameId);
    sqlite3_bind_int64(st, 4, a.tid);
    sqlite3_bind_int64(st, 5, a.start);
    sqlite3_bind_int64(st, 6, a.end);
    sqlite3_bind_int64(st, 7, a.correlation);
    step(st);
}

void CaptureDb::addNvtx(const NvtxRow& r)
{
    if (!ok())
        return;
    sqlite3_stmt* st = insNvtx_;
    sqlite3_bind_int(st, 1, r.kind);
    sqlite3_bind_int64(st, 2, r.tid);
    sqlite3_bind_int64(st, 3, r.start);
    bindOpt(st, 4, r.end);
    sqlite3_bind_int64(st, 5, r.nameId);
    bindOpt(st, 6, r.domainId);
    step(st);
}

void CaptureDb::addMemory(const MemoryRow& m)
{
    if (!ok())
        return;
    sqlite3_stmt* st = insMemory_;
    sqlite3_bind_int64(st, 1, m.device);
    sqlite3_bind_int64(st, 2, m.ts);
    sqlite3_bind_int64(st, 3, m.bytes);
    bindOpt(st, 4, m.address);
    bindOpt(st, 5, m.memoryKind);
    step(st);
}

void CaptureDb::addNcclComm(const NcclCommRow& c)
{
    if (!ok())
        return;
    sqlite3_stmt* st = insComm_;
    sqlite3_bind_int64(st, 1, static_cast<int64_t>(c.commHash));
    bindTextOrNull(st, 2, c.name);
    sqlite3_bind_int(st, 3, c.nranks);
    sqlite3_bind_int(st, 4, c.rank);
    if (c.nnodes)
        sqlite3_bind_int(st, 5, *c.nnodes);
    else
        sqlite3_bind_null(st, 5);
    sqlite3_bind_int64(st, 6, c.initNs);
    step(st);
}

void CaptureDb::addNcclOp(const NcclOpRow& op)
{
    if (!ok())
        return;
    sqlite3_stmt* st = insNccl_;
    sqlite3_bind_int64(st, 1, static_cast<int64_t>(op.commHash));
    bindText(st, 2, op.func);
    sqlite3_bind_int(st, 3, op.isP2p ? 1 : 0);
    bindOpt(st, 4, op.count);
    bindTextOrNull(st, 5, op.dtype);
    bindOpt(st, 6, op.bytes);
    bindOpt(st, 7, op.peer);
    bindOpt(st, 8, op.root);
    bindOpt(st, 9, op.seq);
    bindTextOrNull(st, 10, op.algo);
    bindTextOrNull(st, 11, op.proto);
    bindOpt(st, 12, op.nchannels);
    sqlite3_bind_int64(st, 13, op.start);
    sqlite3_bind_int64(st, 14, op.end);
    step(st);
}

void CaptureDb::addWindow(int64_t start, std::optional<int64_t> end, std::string_view reason)
{
    if (!ok())
        return;
    sqlite3_bind_int64(insWindow_, 1, start);
    bindOpt(insWindow_, 2, end);
    bindText(insWindow_, 3, reason);
    step(insWindow_);
}

void CaptureDb::addDropped(std::string_view source, int64_t count)
{
    if (!ok() || count <= 0)
        return;
    bindText(insDropped_, 1, source);
    sqlite3_bind_int64(insDropped_, 2, count);
    step(insDropped_);
}

} // namespace pipescope::collect
