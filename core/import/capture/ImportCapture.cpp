#include "import/capture/ImportCapture.h"
#include "util/JsonText.h"

#include "import/capture/CaptureSchema.h"
#include "import/capture/detail/CaptureSteps.h"
#include "import/common/ClockAlignment.h"
#include "store/Sqlite.h"
#include "util/Error.h"
#include "util/Work.h"

#include <algorithm>
#include <exception>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <sqlite3.h>
#include <unordered_map>

namespace pipescope {

namespace fs = std::filesystem;

namespace {

using capture::detail::CommFacts;
using capture::detail::FileFacts;
using capture::detail::NcclKernel;
using capture::detail::NcclLaunch;

// global rank of (communicator, rank in it)
using PeerMap = std::map<uint64_t, std::map<int, int>>;

std::string hashText(uint64_t h)
{
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

int pragmaInt(sql::Database& db, const char* pragma)
{
    auto st = db.prepare(std::string("PRAGMA ") + pragma);
    return st.step() ? static_cast<int>(st.int64(0)) : 0;
}

// Opens read-write when it can, so SQLite can fold in the write-ahead log a
// killed process left behind; read-only otherwise.
sql::Database openCapture(const std::string& path)
{
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
        throw Error(path + ": no such capture file");
    sql::Database db;
    try {
        db = sql::Database(path, sql::Database::Mode::ReadWrite);
    } catch (const Error&) {
        db = sql::Database(path, sql::Database::Mode::ReadOnly);
    }
    int appId = 0, version = 0;
    try {
        appId = pragmaInt(db, "application_id");
        version = pragmaInt(db, "user_version");
    } catch (const Error&) {
        throw FormatError(path + ": not a pipescope capture file (not a readable SQLite database)");
    }
    if (appId != capture::kCaptureApplicationId)
        throw FormatError(path + ": not a pipescope capture file; capture files are written by `pipescope capture`");
    if (version > capture::kCaptureVersion)
        throw FormatError(path + ": capture file version " + std::to_string(version) +
                          " is newer than this pipescope reads (" + std::to_string(capture::kCaptureVersion) +
                          "); update pipescope");
    return db;
}

std::optional<int> metaInt(const std::map<std::string, std::string>& meta, const char* key)
{
    auto it = meta.find(key);
    if (it == meta.end() || it->second.empty())
        return std::nullopt;
    try {
        return std::stoi(it->second);
    } catch (...) {
        return std::nullopt;
    }
}

std::optional<int64_t> metaInt64(const std::map<std::string, std::string>& meta, const char* key)
{
    auto it = meta.find(key);
    if (it == meta.end() || it->second.empty())
        return std::nullopt;
    try {
        return std::stoll(it->second);
    } catch (...) {
        return std::nullopt;
    }
}

FileFacts readFacts(sql::Database& db, const std::string& path)
{
    FileFacts f;
    f.path = path;
    std::map<std::string, std::string> meta;
    {
        auto st = db.prepare("SELECT key, value FROM meta");
        while (st.step())
            meta[st.string(0)] = st.string(1);
    }
    f.rank = metaInt(meta, "rank");
    f.worldSize = metaInt(meta, "world_size");
    f.host = meta["host"];
    f.bootId = meta["boot_id"];
    f.command = meta["command"];
    f.rankVar = meta["rank_var"];
    f.pid = metaInt64(meta, "pid");
    f.startNs = metaInt64(meta, "start_ns").value_or(0);
    f.endNs = std::max(f.startNs, metaInt64(meta, "end_ns").value_or(f.startNs));
    {
        auto st = db.prepare("SELECT comm_hash, name, nranks, rank, nnodes FROM nccl_comms ORDER BY init_ns");
        while (st.step()) {
            CommFacts c;
            c.hash = static_cast<uint64_t>(st.int64(0));
            c.name = st.isNull(1) ? "" : st.string(1);
            c.nranks = static_cast<int>(st.int64(2));
            c.rank = static_cast<int>(st.int64(3));
            if (!st.isNull(4))
                c.nnodes = static_cast<int>(st.int64(4));
            f.comms.push_back(c);
        }
    }
    {
        auto st = db.prepare("SELECT (SELECT count(*) FROM gpu_activities), (SELECT count(*) FROM nccl_ops)");
        if (st.step()) {
            f.gpuActivities = st.int64(0);
            f.ncclOps = st.int64(1);
        }
    }
    // The last record may be later than the last end_ns update (a killed process).
    {
        auto st = db.prepare("SELECT max(m) FROM (SELECT max(end_ns) AS m FROM gpu_activities UNION ALL "
                             "SELECT max(end_ns) FROM api_calls UNION ALL SELECT max(end_ns) FROM nvtx_ranges UNION ALL "
                             "SELECT max(end_ns) FROM nccl_ops)");
        if (st.step() && !st.isNull(0))
            f.endNs = std::max(f.endNs, st.int64(0));
    }
    return f;
}

// What the steps of importing one capture file share: the file, the rank it
// becomes, the store being written and the source the rows are recorded under.
struct RankImport {
    sql::Database& db;
    const FileFacts& facts;
    int rank;
    StoreWriter& writer;
    ImportedSource& src;
};

// The facts that only go into the source's details, and the counts of
// records the recorder dropped (also told as diagnostics).
struct SourceDetails {
    nlohmann::json details = nlohmann::json::object();
    std::vector<std::pair<std::string, int64_t>> dropped;
};

SourceDetails readSourceDetails(sql::Database& db, const FileFacts& facts)
{
    SourceDetails out;
    nlohmann::json& details = out.details;
    details["capture_version"] = pragmaInt(db, "user_version");
    details["host"] = facts.host;
    if (facts.pid)
        details["pid"] = *facts.pid;
    if (!facts.bootId.empty())
        details["boot_id"] = facts.bootId;
    if (!facts.command.empty())
        details["command"] = facts.command;
    if (!facts.rankVar.empty())
        details["rank_var"] = facts.rankVar;
    details["clock"] = "CLOCK_REALTIME";
    details["start_ns"] = facts.startNs;
    details["end_ns"] = facts.endNs;
    {
        auto st = db.prepare("SELECT start_ns, end_ns, reason FROM windows ORDER BY start_ns");
        nlohmann::json windows = nlohmann::json::array();
        while (st.step())
            windows.push_back({{"start_ns", st.int64(0)},
                               {"end_ns", st.isNull(1) ? nlohmann::json() : nlohmann::json(st.int64(1))},
                               {"reason", st.string(2)}});
        details["windows"] = windows;
    }
    {
        auto st = db.prepare("SELECT source, count FROM dropped ORDER BY source");
        nlohmann::json d = nlohmann::json::object();
        while (st.step()) {
            out.dropped.emplace_back(st.string(0), st.int64(1));
            d[st.string(0)] = st.int64(1);
        }
        details["dropped"] = d;
    }
    {
        auto st = db.prepare("SELECT key, value FROM meta WHERE key LIKE 'cupti.%'");
        while (st.step())
            details[st.string(0)] = st.string(1);
    }
    return out;
}

int64_t addCaptureSource(const std::string& path, const FileFacts& facts, int rank, const nlohmann::json& details,
                         StoreWriter& writer)
{
    SourceRecord sr;
    sr.path = path;
    sr.format = "capture";
    sr.rank = rank;
    sr.timeBase = facts.startNs;
    sr.details = jsonText(details);
    return writer.addSource(sr);
}

void reportDropped(const RankImport& in, const std::vector<std::pair<std::string, int64_t>>& dropped,
                   int64_t* droppedOut)
{
    for (auto& [source, n] : dropped) {
        in.writer.diagnostic(in.src.sourceId, Severity::Warning, "capture_dropped:" + source,
                             std::to_string(n) + " records were dropped while recording (" + source +
                                 "); the timeline has gaps");
        if (droppedOut)
            *droppedOut += n;
    }
}

// Strings: capture ids -> store ids, interned on first use.
class CaptureStrings {
public:
    CaptureStrings(sql::Database& db, StoreWriter& writer) : writer_(writer)
    {
        auto st = db.prepare("SELECT id, value FROM strings");
        while (st.step())
            text_.emplace(st.int64(0), st.string(1));
    }
    StringId id(int64_t captureId)
    {
        auto it = ids_.find(captureId);
        if (it != ids_.end())
            return it->second;
        auto s = text_.find(captureId);
        StringId id = writer_.intern(s == text_.end() ? std::string_view{} : std::string_view(s->second));
        ids_.emplace(captureId, id);
        return id;
    }
    const std::string& text(int64_t captureId) const
    {
        static const std::string empty;
        auto s = text_.find(captureId);
        return s == text_.end() ? empty : s->second;
    }

private:
    StoreWriter& writer_;
    std::unordered_map<int64_t, std::string> text_;
    std::unordered_map<int64_t, StringId> ids_;
};

void addDevices(const RankImport& in)
{
    auto st = in.db.prepare("SELECT id, name, uuid, memory_bytes, sm_count, cc_major, cc_minor FROM devices");
    while (st.step()) {
        GpuInfo g;
        g.rank = in.rank;
        g.device = static_cast<int>(st.int64(0));
        g.name = st.isNull(1) ? "" : st.string(1);
        g.uuid = st.isNull(2) ? "" : st.string(2);
        g.memoryBytes = st.optInt64(3);
        if (!st.isNull(4))
            g.smCount = static_cast<int>(st.int64(4));
        if (!st.isNull(5) && !st.isNull(6))
            g.computeCapability = std::to_string(st.int64(5)) + "." + std::to_string(st.int64(6));
        in.writer.addGpu(g);
    }
}

// CUPTI context id -> device: synchronisation records name only their context.
std::map<int64_t, int> readContextDevices(sql::Database& db)
{
    std::map<int64_t, int> contextDevice;
    auto st = db.prepare("SELECT id, device FROM contexts");
    while (st.step())
        contextDevice[st.int64(0)] = static_cast<int>(st.int64(1));
    return contextDevice;
}

// What the GPU activities tell the later steps: kernels per device (the
// rank's device is the busiest) and the NCCL kernels, by correlation id.
struct GpuActivityFacts {
    std::map<int, int64_t> kernelsPerDevice;
    std::unordered_map<int64_t, NcclKernel> ncclKernels;
};

GpuActivityFacts addGpuActivities(const RankImport& in, CaptureStrings& strings,
                                  const std::map<int64_t, int>& contextDevice)
{
    GpuActivityFacts out;
    auto st = in.db.prepare("SELECT kind, start_ns, end_ns, device, context, stream, correlation, name_id, bytes, "
                            "copy_kind, grid_x, grid_y, grid_z, block_x, block_y, block_z FROM gpu_activities "
                            "ORDER BY start_ns");
    while (st.step()) {
        int kind = static_cast<int>(st.int64(0));
        if (kind < 0 || kind > 3) {
            in.writer.diagnostic(in.src.sourceId, Severity::Warning, "capture_bad_kind",
                                 "GPU activity of unknown kind " + std::to_string(kind) + " skipped");
            continue;
        }
        int device = 0;
        if (!st.isNull(3))
            device = static_cast<int>(st.int64(3));
        else if (!st.isNull(4) && contextDevice.count(st.int64(4)))
            device = contextDevice.at(st.int64(4));
        // Context-wide synchronisation has no stream of its own.
        int64_t stream = st.isNull(5) ? -1 : st.int64(5);
        int64_t streamId = in.writer.stream(in.rank, device, stream,
                                            stream < 0 ? std::string("sync") : "stream " + std::to_string(stream));
        ActivityRecord a;
        a.rank = in.rank;
        a.streamId = streamId;
        a.kind = static_cast<ActivityKind>(kind);
        a.start = st.int64(1);
        a.end = std::max(a.start, st.int64(2));
        a.name = strings.id(st.int64(7));
        a.correlation = st.optInt64(6);
        a.bytes = st.optInt64(8);
        if (!st.isNull(9))
            a.copyKind = static_cast<CopyKind>(std::clamp<int64_t>(st.int64(9), 0, 10));
        if (!st.isNull(10))
            a.grid = std::to_string(st.int64(10)) + "," + std::to_string(st.int64(11)) + "," +
                     std::to_string(st.int64(12));
        if (!st.isNull(13))
            a.block = std::to_string(st.int64(13)) + "," + std::to_string(st.int64(14)) + "," +
                      std::to_string(st.int64(15));
        int64_t id = in.writer.addActivity(a);
        ++in.src.records;
        if (kind == capture::kKernel) {
            ++out.kernelsPerDevice[device];
            if (a.correlation && isNcclKernelName(strings.text(st.int64(7))))
                out.ncclKernels[*a.correlation] = NcclKernel{id, a.start, a.end, streamId};
        }
    }
    return out;
}

// The runtime and driver calls. Returns the launch calls of NCCL kernels, in
// the order of the calls' start: NCCL operations find their kernel there.
std::vector<NcclLaunch> addApiCalls(const RankImport& in, CaptureStrings& strings,
                                    const std::unordered_map<int64_t, NcclKernel>& ncclKernels)
{
    std::vector<NcclLaunch> ncclLaunches;
    auto st = in.db.prepare("SELECT kind, tid, start_ns, end_ns, name_id, correlation FROM api_calls ORDER BY start_ns");
    while (st.step()) {
        CpuRangeRecord r;
        r.rank = in.rank;
        r.tid = st.int64(1);
        r.kind = st.int64(0) == capture::kDriver ? CpuRangeKind::Driver : CpuRangeKind::Runtime;
        r.start = st.int64(2);
        r.end = std::max(r.start, st.int64(3));
        r.name = strings.id(st.int64(4));
        r.correlation = st.int64(5);
        in.writer.addCpuRange(r);
        ++in.src.records;
        if (auto it = ncclKernels.find(*r.correlation); it != ncclKernels.end())
            ncclLaunches.push_back(NcclLaunch{std::make_pair(r.start, r.end), it->second});
    }
    return ncclLaunches;
}

void addNvtxRanges(const RankImport& in, CaptureStrings& strings)
{
    int64_t unclosed = 0;
    auto st = in.db.prepare("SELECT kind, tid, start_ns, end_ns, name_id, domain_id FROM nvtx_ranges ORDER BY start_ns");
    while (st.step()) {
        CpuRangeRecord r;
        r.rank = in.rank;
        r.tid = st.int64(1);
        r.kind = CpuRangeKind::Nvtx;
        r.start = st.int64(2);
        if (st.isNull(3)) {
            ++unclosed;
            r.end = std::max(r.start, in.facts.endNs);
        } else {
            r.end = std::max(r.start, st.int64(3));
        }
        r.name = strings.id(st.int64(4));
        if (!st.isNull(5))
            r.domain = strings.id(st.int64(5));
        in.writer.addCpuRange(r);
        ++in.src.records;
    }
    if (unclosed > 0)
        for (int64_t i = 0; i < unclosed; ++i)
            in.writer.diagnostic(in.src.sourceId, Severity::Info, "capture_nvtx_unclosed",
                                 "an NVTX range was still open when recording ended; it is closed at the end");
}

void addMemoryEvents(const RankImport& in)
{
    // Device memory only: pinned and pageable host memory is not the GPU's.
    auto st = in.db.prepare("SELECT device, ts_ns, bytes, address FROM memory_events "
                            "WHERE memory_kind IS NULL OR memory_kind IN (3, 5) ORDER BY ts_ns");
    while (st.step()) {
        MemoryEvent m;
        m.rank = in.rank;
        m.device = static_cast<int>(st.int64(0));
        m.ts = st.int64(1);
        m.bytes = st.int64(2);
        m.address = st.optInt64(3);
        in.writer.addMemoryEvent(m);
        ++in.src.records;
    }
}

// Communicators: groups with global ranks where known.
class Communicators {
public:
    Communicators(const FileFacts& facts, const PeerMap& peers) : peers_(peers)
    {
        for (const auto& c : facts.comms)
            byHash_[c.hash] = c;
    }
    const std::map<uint64_t, CommFacts>& byHash() const { return byHash_; }
    std::optional<int> globalOf(uint64_t hash, int commRank) const
    {
        auto it = peers_.find(hash);
        if (it == peers_.end())
            return std::nullopt;
        auto r = it->second.find(commRank);
        return r == it->second.end() ? std::nullopt : std::optional<int>(r->second);
    }
    // Every member's global rank, or none when one of them is unknown.
    std::vector<int> groupRanks(const CommFacts& c) const
    {
        std::vector<int> ranks;
        for (int i = 0; i < c.nranks; ++i)
            if (auto g = globalOf(c.hash, i))
                ranks.push_back(*g);
        if (static_cast<int>(ranks.size()) != c.nranks)
            ranks.clear();
        return ranks;
    }

private:
    const PeerMap& peers_;
    std::map<uint64_t, CommFacts> byHash_;
};

void addProcessGroups(const RankImport& in, const Communicators& comms)
{
    for (const auto& [hash, c] : comms.byHash()) {
        ProcessGroup g;
        g.rank = in.rank;
        g.name = hashText(hash);
        g.desc = c.name;
        g.ranks = comms.groupRanks(c);
        g.size = c.nranks;
        in.writer.addProcessGroup(g);
    }
}

// One nccl_ops row as the store records it, before its times are known
// (columns of the query in addNcclOps).
NcclRecord ncclRecordOf(const sql::Statement& st, int rank, const Communicators& comms)
{
    auto hash = static_cast<uint64_t>(st.int64(0));
    NcclRecord op;
    op.rank = rank;
    // NCCL's profiler names the function as NCCL does ("AllReduce", "Send").
    op.kind = collectiveFromCallName(st.string(1));
    op.isP2p = st.int64(2) != 0;
    op.inNelems = st.optInt64(3);
    op.outNelems = st.optInt64(3);
    op.dtype = st.isNull(4) ? "" : st.string(4);
    op.bytes = st.optInt64(5);
    op.groupName = hashText(hash);
    if (auto it = comms.byHash().find(hash); it != comms.byHash().end()) {
        op.groupDesc = it->second.name;
        op.groupSize = it->second.nranks;
        auto ranks = comms.groupRanks(it->second);
        if (!ranks.empty())
            op.groupRanks = nlohmann::json(ranks).dump();
    }
    if (!st.isNull(6))
        op.peer = comms.globalOf(hash, static_cast<int>(st.int64(6)));
    op.seq = st.optInt64(8);
    return op;
}

void addNcclOps(const RankImport& in, const Communicators& comms, std::vector<NcclLaunch>& ncclLaunches)
{
    std::sort(ncclLaunches.begin(), ncclLaunches.end(),
              [](const NcclLaunch& a, const NcclLaunch& b) { return a.call < b.call; });
    int64_t unlinked = 0;
    auto st = in.db.prepare("SELECT comm_hash, func, is_p2p, count, dtype, bytes, peer, root, seq, start_ns, end_ns "
                            "FROM nccl_ops ORDER BY start_ns");
    while (st.step()) {
        NcclRecord op = ncclRecordOf(st, in.rank, comms);
        TimeNs enqueueStart = st.int64(9), enqueueEnd = std::max(enqueueStart, st.int64(10));
        // NCCL's events mark the host side (NCCL 2.28 starts them right
        // after the kernel launch, older versions around the enqueue); the
        // GPU time is that of the NCCL kernel launched nearest to the event.
        if (const NcclKernel* kernel = capture::detail::nearestNcclLaunch(ncclLaunches, enqueueStart, enqueueEnd)) {
            op.activityId = kernel->activityId;
            op.start = kernel->start;
            op.end = kernel->end;
            op.streamId = kernel->streamId;
        } else {
            op.start = enqueueStart;
            op.end = enqueueEnd;
            if (in.facts.gpuActivities > 0)
                ++unlinked;
        }
        in.writer.addNcclOp(op);
        ++in.src.records;
    }
    for (int64_t i = 0; i < unlinked; ++i)
        in.writer.diagnostic(in.src.sourceId, Severity::Info, "capture_nccl_unlinked",
                             "an NCCL operation has no recorded kernel; its times are the host enqueue times");
}

void addRankInfo(const RankImport& in, const std::map<int, int64_t>& kernelsPerDevice)
{
    RankInfo ri;
    ri.rank = in.rank;
    ri.worldSize = in.facts.worldSize;
    ri.host = in.facts.host;
    ri.pid = in.facts.pid;
    ri.sourceId = in.src.sourceId;
    if (!kernelsPerDevice.empty())
        ri.device = std::max_element(kernelsPerDevice.begin(), kernelsPerDevice.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; })
                        ->first;
    in.writer.addRank(ri);
}

ImportedSource importOne(const std::string& path, sql::Database& db, const FileFacts& facts, int rank,
                         const PeerMap& peers, StoreWriter& writer, int64_t* droppedOut)
{
    ImportedSource src;
    src.ranks = {rank};
    // Recorded on CLOCK_REALTIME: times are epoch ns already, nothing to add
    // (importJob shifts each source by this).
    src.timeBase = 0;
    src.absoluteClock = true;

    SourceDetails details = readSourceDetails(db, facts);
    src.sourceId = addCaptureSource(path, facts, rank, details.details, writer);
    const RankImport in{db, facts, rank, writer, src};
    reportDropped(in, details.dropped, droppedOut);

    CaptureStrings strings(db, writer);
    addDevices(in);
    const std::map<int64_t, int> contextDevice = readContextDevices(db);
    GpuActivityFacts gpu = addGpuActivities(in, strings, contextDevice);
    std::vector<NcclLaunch> ncclLaunches = addApiCalls(in, strings, gpu.ncclKernels);
    addNvtxRanges(in, strings);
    addMemoryEvents(in);

    const Communicators comms(facts, peers);
    addProcessGroups(in, comms);
    addNcclOps(in, comms, ncclLaunches);
    addRankInfo(in, gpu.kernelsPerDevice);
    return src;
}

// A file left out of the merge stays on record in the store, not only on the terminal.
void skippedDiagnostic(StoreWriter& writer, const std::string& path, const std::string& why)
{
    writer.diagnostic(std::nullopt, Severity::Error, "capture_file_skipped:" + fs::path(path).filename().string(),
                      why + "; the file was skipped, its rank is missing from the job");
}

// The first file the merge could not use: rethrown as it was when the
// directory holds that file alone, named in the message when every file failed.
struct FirstFailure {
    std::exception_ptr error;
    std::string problem;
    // Called from inside the handler of `e`.
    void note(const Error& e)
    {
        if (!error) {
            error = std::current_exception();
            problem = e.what();
        }
    }
};

// A damaged or foreign file is left out with a warning; the job is the
// files that can be read, and only when none can is the merge an error.
std::vector<FileFacts> readAllFacts(MergeReport& report, FirstFailure& failure)
{
    std::vector<FileFacts> facts;
    for (const auto& f : report.files) {
        try {
            sql::Database db = openCapture(f);
            facts.push_back(readFacts(db, f));
        } catch (const Cancelled&) {
            throw;
        } catch (const Error& e) {
            report.skipped.emplace_back(f, e.what());
            report.warnings.push_back(std::string(e.what()) + "; skipped");
            failure.note(e);
        }
    }
    return facts;
}

// Communicator rank -> global rank, from every file that joined it.
PeerMap mapPeers(const std::vector<FileFacts>& facts, const std::vector<std::optional<int>>& assigned)
{
    PeerMap peers;
    for (size_t i = 0; i < facts.size(); ++i)
        if (assigned[i])
            for (const auto& c : facts[i].comms)
                peers[c.hash][c.rank] = *assigned[i];
    return peers;
}

// One file into the store as `rank`. A file that fails part-way (a damaged
// page, a missing table) takes its rows with it: the job is the ranks that
// could be read whole.
void mergeRankFile(StoreWriter& writer, const FileFacts& facts, int rank, const PeerMap& peers, MergeReport& report,
                   FirstFailure& failure)
{
    writer.beginInput();
    ImportedSource src;
    int64_t dropped = 0;
    try {
        sql::Database db = openCapture(facts.path);
        src = importOne(facts.path, db, facts, rank, peers, writer, &dropped);
        writer.dropOutOfRangeTimes(); // a file with no usable time is skipped like an unreadable one
        writer.keepInput();
    } catch (const Cancelled&) {
        throw;
    } catch (const Error& e) {
        // The store being written failing (disk full) is no fault of the file: that ends the merge.
        if (std::string_view(e.what()).starts_with(report.output + ": "))
            throw;
        writer.discardInput();
        failure.note(e);
        report.skipped.emplace_back(facts.path, e.what());
        report.warnings.push_back(std::string(e.what()) + "; skipped");
        skippedDiagnostic(writer, facts.path, e.what());
        return;
    }
    report.droppedRecords += dropped;
    report.rankFiles[rank] = facts.path;
    // Every process records on its host's CLOCK_REALTIME: ranks of one
    // host share the clock exactly, hosts agree as far as NTP keeps them.
    writer.setSourceAlignment(src.sourceId, 0, "time_base");
    report.offsets.emplace_back(rank, 0);
    report.sources.push_back(src);
}

// Ranks stay on their hosts' clocks, unless asked to align them by matched
// collectives; several hosts without that get a note saying so.
void alignClocks(StoreWriter& writer, const std::vector<FileFacts>& facts, const std::vector<std::optional<int>>& assigned,
                 const MergeOptions& options, MergeReport& report)
{
    std::set<std::string> hosts;
    for (size_t i = 0; i < facts.size(); ++i)
        if (assigned[i])
            hosts.insert(facts[i].bootId.empty() ? facts[i].host : facts[i].bootId);
    if (options.alignCollectives) {
        std::vector<int> ranks;
        for (const auto& [r, f] : report.rankFiles)
            ranks.push_back(r);
        auto shifts = alignByOperations(writer, ranks);
        for (auto& [r, off] : report.offsets)
            if (auto it = shifts.find(r); it != shifts.end())
                off += it->second;
        for (const auto& src : report.sources)
            if (src.ranks.size() == 1 && shifts.count(src.ranks[0]))
                writer.setSourceAlignment(src.sourceId, shifts.at(src.ranks[0]), "collectives");
        report.alignedByCollectives = !shifts.empty();
    } else if (hosts.size() > 1) {
        writer.diagnostic(std::nullopt, Severity::Info, "capture_hosts_clock",
                          std::to_string(hosts.size()) + " hosts: ranks aligned by their system clocks (NTP); "
                          "merge with `pipescope merge --align collectives` to align by collectives");
    }
}

} // namespace

namespace capture::detail {

std::vector<std::optional<int>> assignRanks(const std::vector<FileFacts>& facts, std::vector<std::string>& warnings)
{
    // Ranks: files that name one keep it; a second claimant of a rank and
    // files without one get the next free ranks. A process that recorded
    // nothing and names no rank (a launcher touching CUDA) is left out.
    std::vector<std::optional<int>> assigned(facts.size());
    std::set<int> taken;
    std::vector<size_t> order(facts.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    // Among claimants of a rank, the one with the most records wins.
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return facts[a].gpuActivities + facts[a].ncclOps > facts[b].gpuActivities + facts[b].ncclOps;
    });
    std::vector<size_t> unranked;
    for (size_t i : order) {
        const auto& f = facts[i];
        bool empty = f.gpuActivities == 0 && f.ncclOps == 0;
        if (f.rank && !taken.count(*f.rank)) {
            assigned[i] = *f.rank;
            taken.insert(*f.rank);
        } else if (empty) {
            warnings.push_back(f.path + ": recorded nothing" +
                               (f.rank ? " and repeats rank " + std::to_string(*f.rank) : std::string()) + "; left out");
        } else {
            if (f.rank)
                warnings.push_back(f.path + ": rank " + std::to_string(*f.rank) +
                                   " is claimed by another process too; given a new rank");
            unranked.push_back(i);
        }
    }
    std::sort(unranked.begin(), unranked.end(),
              [&](size_t a, size_t b) { return facts[a].startNs < facts[b].startNs; });
    int next = taken.empty() ? 0 : *taken.rbegin() + 1;
    for (size_t i : unranked) {
        assigned[i] = next;
        taken.insert(next++);
        if (!facts[i].rank)
            warnings.push_back(facts[i].path + ": names no rank (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, "
                               "PMI_RANK unset); stored as rank " + std::to_string(*assigned[i]));
    }
    return assigned;
}

const NcclKernel* nearestNcclLaunch(const std::vector<NcclLaunch>& launches, TimeNs enqueueStart, TimeNs enqueueEnd)
{
    auto next = std::lower_bound(launches.begin(), launches.end(), enqueueStart,
                                 [](const NcclLaunch& l, TimeNs t) { return l.call.first < t; });
    // How far the launch call lies from the operation's event (0 when they overlap).
    auto distance = [&](const NcclLaunch& l) {
        TimeNs lo = std::max(l.call.first, enqueueStart), hi = std::min(l.call.second, enqueueEnd);
        return std::max<TimeNs>(0, lo - hi);
    };
    const NcclKernel* kernel = nullptr;
    TimeNs best = 0;
    if (next != launches.end()) {
        kernel = &next->kernel;
        best = distance(*next);
    }
    if (next != launches.begin()) {
        auto prev = std::prev(next);
        if (!kernel || distance(*prev) <= best)
            kernel = &prev->kernel;
    }
    return kernel;
}

} // namespace capture::detail

bool isCaptureFile(const std::string& path)
{
    sqlite3* db = nullptr;
    bool yes = false;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            yes = sqlite3_column_int(st, 0) == capture::kCaptureApplicationId;
        sqlite3_finalize(st);
    }
    sqlite3_close_v2(db);
    return yes;
}

ImportedSource importCapture(const std::string& path, StoreWriter& writer, const ImportOptions& options)
{
    sql::Database db = openCapture(path);
    FileFacts facts = readFacts(db, path);
    int rank = options.rank.value_or(facts.rank.value_or(0));
    // Alone, a file knows its communicators' global ranks only for the one
    // that spans the whole job, where the two numberings agree.
    PeerMap peers;
    for (const auto& c : facts.comms)
        if (facts.worldSize && c.nranks == *facts.worldSize && c.rank == rank)
            for (int i = 0; i < c.nranks; ++i)
                peers[c.hash][i] = i;
    return importOne(path, db, facts, rank, peers, writer, nullptr);
}

std::vector<std::string> captureFilesIn(const std::string& dir)
{
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw Error(dir + ": not a directory; pass the folder `pipescope capture -o` wrote");
    std::vector<std::string> files;
    std::string suffix = capture::kCaptureSuffix;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (!entry.is_regular_file())
            continue;
        auto name = entry.path().filename().string();
        if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
            files.push_back(entry.path().string());
    }
    if (ec)
        throw Error(dir + ": cannot list directory: " + ec.message());
    std::sort(files.begin(), files.end());
    return files;
}

MergeReport mergeCaptureDir(const std::string& dir, const MergeOptions& options)
{
    MergeReport report;
    report.files = captureFilesIn(dir);
    if (report.files.empty())
        throw Error(dir + ": holds no capture files (*" + std::string(capture::kCaptureSuffix) +
                    "); did the command run CUDA code under `pipescope capture`?");
    report.output = options.output.empty() ? (fs::path(dir) / "job.pipescope").string() : options.output;

    FirstFailure failure;
    std::vector<FileFacts> facts = readAllFacts(report, failure);
    if (facts.empty() && report.files.size() == 1)
        std::rethrow_exception(failure.error);
    if (facts.empty())
        throw FormatError(dir + ": none of its " + std::to_string(report.files.size()) +
                          " capture files can be read (first: " + failure.problem + ")");

    const std::vector<std::optional<int>> assigned = capture::detail::assignRanks(facts, report.warnings);
    const PeerMap peers = mapPeers(facts, assigned);

    StoreWriter writer(report.output);
    for (const auto& [path, why] : report.skipped)
        skippedDiagnostic(writer, path, why);
    for (size_t i = 0; i < facts.size(); ++i)
        if (assigned[i])
            mergeRankFile(writer, facts[i], *assigned[i], peers, report, failure);
    if (report.sources.empty() && !report.skipped.empty()) {
        if (report.files.size() == 1)
            std::rethrow_exception(failure.error);
        throw FormatError(dir + ": none of its " + std::to_string(report.files.size()) +
                          " capture files could be merged (first: " + failure.problem + ")");
    }
    alignClocks(writer, facts, assigned, options, report);
    if (report.droppedRecords > 0)
        report.warnings.push_back(std::to_string(report.droppedRecords) +
                                  " records were dropped while recording (see `pipescope info`)");
    writer.setMeta("capture_files", std::to_string(report.sources.size()));
    writer.finish();
    return report;
}

} // namespace pipescope
