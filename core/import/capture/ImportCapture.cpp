#include "import/capture/ImportCapture.h"
#include "util/JsonText.h"

#include "import/capture/CaptureSchema.h"
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

struct CommFacts {
    uint64_t hash = 0;
    std::string name;
    int nranks = 0;
    int rank = 0; // rank in the communicator
    std::optional<int> nnodes;
};

struct FileFacts {
    std::string path;
    std::optional<int> rank, worldSize;
    std::string host, bootId, command, rankVar;
    std::optional<int64_t> pid;
    TimeNs startNs = 0, endNs = 0;
    std::vector<CommFacts> comms;
    int64_t gpuActivities = 0, ncclOps = 0;
};

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

struct NcclKernel {
    int64_t activityId = 0;
    TimeNs start = 0, end = 0;
    int64_t streamId = 0;
};

ImportedSource importOne(const std::string& path, sql::Database& db, const FileFacts& facts, int rank,
                         const PeerMap& peers, StoreWriter& writer, int64_t* droppedOut)
{
    ImportedSource src;
    src.ranks = {rank};
    // Recorded on CLOCK_REALTIME: times are epoch ns already, nothing to add
    // (importJob shifts each source by this).
    src.timeBase = 0;
    src.absoluteClock = true;

    // Facts that only go into the source's details.
    nlohmann::json details = nlohmann::json::object();
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
    std::vector<std::pair<std::string, int64_t>> dropped;
    {
        auto st = db.prepare("SELECT source, count FROM dropped ORDER BY source");
        nlohmann::json d = nlohmann::json::object();
        while (st.step()) {
            dropped.emplace_back(st.string(0), st.int64(1));
            d[st.string(0)] = st.int64(1);
        }
        details["dropped"] = d;
    }
    {
        auto st = db.prepare("SELECT key, value FROM meta WHERE key LIKE 'cupti.%'");
        while (st.step())
            details[st.string(0)] = st.string(1);
    }

    SourceRecord sr;
    sr.path = path;
    sr.format = "capture";
    sr.rank = rank;
    sr.timeBase = facts.startNs;
    sr.details = jsonText(details);
    src.sourceId = writer.addSource(sr);

    for (auto& [source, n] : dropped) {
        writer.diagnostic(src.sourceId, Severity::Warning, "capture_dropped:" + source,
                          std::to_string(n) + " records were dropped while recording (" + source +
                              "); the timeline has gaps");
        if (droppedOut)
            *droppedOut += n;
    }

    // Strings: capture ids -> store ids, on first use.
    std::unordered_map<int64_t, std::string> captureStrings;
    {
        auto st = db.prepare("SELECT id, value FROM strings");
        while (st.step())
            captureStrings.emplace(st.int64(0), st.string(1));
    }
    std::unordered_map<int64_t, StringId> storeIds;
    auto str = [&](int64_t captureId) -> StringId {
        auto it = storeIds.find(captureId);
        if (it != storeIds.end())
            return it->second;
        auto s = captureStrings.find(captureId);
        StringId id = writer.intern(s == captureStrings.end() ? std::string_view{} : std::string_view(s->second));
        storeIds.emplace(captureId, id);
        return id;
    };
    auto nameOf = [&](int64_t captureId) -> const std::string& {
        static const std::string empty;
        auto s = captureStrings.find(captureId);
        return s == captureStrings.end() ? empty : s->second;
    };

    {
        auto st = db.prepare("SELECT id, name, uuid, memory_bytes, sm_count, cc_major, cc_minor FROM devices");
        while (st.step()) {
            GpuInfo g;
            g.rank = rank;
            g.device = static_cast<int>(st.int64(0));
            g.name = st.isNull(1) ? "" : st.string(1);
            g.uuid = st.isNull(2) ? "" : st.string(2);
            g.memoryBytes = st.optInt64(3);
            if (!st.isNull(4))
                g.smCount = static_cast<int>(st.int64(4));
            if (!st.isNull(5) && !st.isNull(6))
                g.computeCapability = std::to_string(st.int64(5)) + "." + std::to_string(st.int64(6));
            writer.addGpu(g);
        }
    }
    std::map<int64_t, int> contextDevice;
    {
        auto st = db.prepare("SELECT id, device FROM contexts");
        while (st.step())
            contextDevice[st.int64(0)] = static_cast<int>(st.int64(1));
    }

    std::map<int, int64_t> kernelsPerDevice;
    std::unordered_map<int64_t, NcclKernel> ncclKernels; // by correlation
    {
        auto st = db.prepare("SELECT kind, start_ns, end_ns, device, context, stream, correlation, name_id, bytes, "
                             "copy_kind, grid_x, grid_y, grid_z, block_x, block_y, block_z FROM gpu_activities "
                             "ORDER BY start_ns");
        while (st.step()) {
            int kind = static_cast<int>(st.int64(0));
            if (kind < 0 || kind > 3) {
                writer.diagnostic(src.sourceId, Severity::Warning, "capture_bad_kind",
                                  "GPU activity of unknown kind " + std::to_string(kind) + " skipped");
                continue;
            }
            int device = 0;
            if (!st.isNull(3))
                device = static_cast<int>(st.int64(3));
            else if (!st.isNull(4) && contextDevice.count(st.int64(4)))
                device = contextDevice[st.int64(4)];
            // Context-wide synchronisation has no stream of its own.
            int64_t stream = st.isNull(5) ? -1 : st.int64(5);
            int64_t streamId =
                writer.stream(rank, device, stream, stream < 0 ? std::string("sync") : "stream " + std::to_string(stream));
            ActivityRecord a;
            a.rank = rank;
            a.streamId = streamId;
            a.kind = static_cast<ActivityKind>(kind);
            a.start = st.int64(1);
            a.end = std::max(a.start, st.int64(2));
            a.name = str(st.int64(7));
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
            int64_t id = writer.addActivity(a);
            ++src.records;
            if (kind == capture::kKernel) {
                ++kernelsPerDevice[device];
                if (a.correlation && isNcclKernelName(nameOf(st.int64(7))))
                    ncclKernels[*a.correlation] = NcclKernel{id, a.start, a.end, streamId};
            }
        }
    }

    // Launch calls of NCCL kernels, by start time: NCCL operations find their kernel here.
    std::vector<std::pair<std::pair<TimeNs, TimeNs>, NcclKernel>> ncclLaunches; // (launch call start, end)
    {
        auto st = db.prepare("SELECT kind, tid, start_ns, end_ns, name_id, correlation FROM api_calls ORDER BY start_ns");
        while (st.step()) {
            CpuRangeRecord r;
            r.rank = rank;
            r.tid = st.int64(1);
            r.kind = st.int64(0) == capture::kDriver ? CpuRangeKind::Driver : CpuRangeKind::Runtime;
            r.start = st.int64(2);
            r.end = std::max(r.start, st.int64(3));
            r.name = str(st.int64(4));
            r.correlation = st.int64(5);
            writer.addCpuRange(r);
            ++src.records;
            if (auto it = ncclKernels.find(*r.correlation); it != ncclKernels.end())
                ncclLaunches.emplace_back(std::make_pair(r.start, r.end), it->second);
        }
    }
    {
        int64_t unclosed = 0;
        auto st = db.prepare("SELECT kind, tid, start_ns, end_ns, name_id, domain_id FROM nvtx_ranges ORDER BY start_ns");
        while (st.step()) {
            CpuRangeRecord r;
            r.rank = rank;
            r.tid = st.int64(1);
            r.kind = CpuRangeKind::Nvtx;
            r.start = st.int64(2);
            if (st.isNull(3)) {
                ++unclosed;
                r.end = std::max(r.start, facts.endNs);
            } else {
                r.end = std::max(r.start, st.int64(3));
            }
            r.name = str(st.int64(4));
            if (!st.isNull(5))
                r.domain = str(st.int64(5));
            writer.addCpuRange(r);
            ++src.records;
        }
        if (unclosed > 0)
            for (int64_t i = 0; i < unclosed; ++i)
                writer.diagnostic(src.sourceId, Severity::Info, "capture_nvtx_unclosed",
                                  "an NVTX range was still open when recording ended; it is closed at the end");
    }
    {
        // Device memory only: pinned and pageable host memory is not the GPU's.
        auto st = db.prepare("SELECT device, ts_ns, bytes, address FROM memory_events "
                             "WHERE memory_kind IS NULL OR memory_kind IN (3, 5) ORDER BY ts_ns");
        while (st.step()) {
            MemoryEvent m;
            m.rank = rank;
            m.device = static_cast<int>(st.int64(0));
            m.ts = st.int64(1);
            m.bytes = st.int64(2);
            m.address = st.optInt64(3);
            writer.addMemoryEvent(m);
            ++src.records;
        }
    }

    // Communicators: groups with global ranks where known.
    std::map<uint64_t, CommFacts> comms;
    for (const auto& c : facts.comms)
        comms[c.hash] = c;
    auto globalOf = [&](uint64_t hash, int commRank) -> std::optional<int> {
        auto it = peers.find(hash);
        if (it == peers.end())
            return std::nullopt;
        auto r = it->second.find(commRank);
        return r == it->second.end() ? std::nullopt : std::optional<int>(r->second);
    };
    auto groupRanks = [&](const CommFacts& c) {
        std::vector<int> ranks;
        for (int i = 0; i < c.nranks; ++i)
            if (auto g = globalOf(c.hash, i))
                ranks.push_back(*g);
        if (static_cast<int>(ranks.size()) != c.nranks)
            ranks.clear();
        return ranks;
    };
    for (const auto& [hash, c] : comms) {
        ProcessGroup g;
        g.rank = rank;
        g.name = hashText(hash);
        g.desc = c.name;
        g.ranks = groupRanks(c);
        g.size = c.nranks;
        writer.addProcessGroup(g);
    }
    {
        std::sort(ncclLaunches.begin(), ncclLaunches.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        int64_t unlinked = 0;
        auto st = db.prepare("SELECT comm_hash, func, is_p2p, count, dtype, bytes, peer, root, seq, start_ns, end_ns "
                             "FROM nccl_ops ORDER BY start_ns");
        while (st.step()) {
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
            if (auto it = comms.find(hash); it != comms.end()) {
                op.groupDesc = it->second.name;
                op.groupSize = it->second.nranks;
                auto ranks = groupRanks(it->second);
                if (!ranks.empty())
                    op.groupRanks = nlohmann::json(ranks).dump();
            }
            if (!st.isNull(6))
                op.peer = globalOf(hash, static_cast<int>(st.int64(6)));
            op.seq = st.optInt64(8);
            TimeNs enqueueStart = st.int64(9), enqueueEnd = std::max(enqueueStart, st.int64(10));
            // NCCL's events mark the host side (NCCL 2.28 starts them right
            // after the kernel launch, older versions around the enqueue); the
            // GPU time is that of the NCCL kernel launched nearest to the event.
            auto next = std::lower_bound(ncclLaunches.begin(), ncclLaunches.end(), enqueueStart,
                                         [](const auto& l, TimeNs t) { return l.first.first < t; });
            auto distance = [&](const auto& l) {
                TimeNs lo = std::max(l.first.first, enqueueStart), hi = std::min(l.first.second, enqueueEnd);
                return std::max<TimeNs>(0, lo - hi);
            };
            const NcclKernel* kernel = nullptr;
            TimeNs best = 0;
            if (next != ncclLaunches.end()) {
                kernel = &next->second;
                best = distance(*next);
            }
            if (next != ncclLaunches.begin()) {
                auto prev = std::prev(next);
                if (!kernel || distance(*prev) <= best)
                    kernel = &prev->second;
            }
            if (kernel) {
                op.activityId = kernel->activityId;
                op.start = kernel->start;
                op.end = kernel->end;
                op.streamId = kernel->streamId;
            } else {
                op.start = enqueueStart;
                op.end = enqueueEnd;
                if (facts.gpuActivities > 0)
                    ++unlinked;
            }
            writer.addNcclOp(op);
            ++src.records;
        }
        for (int64_t i = 0; i < unlinked; ++i)
            writer.diagnostic(src.sourceId, Severity::Info, "capture_nccl_unlinked",
                              "an NCCL operation has no recorded kernel; its times are the host enqueue times");
    }

    RankInfo ri;
    ri.rank = rank;
    ri.worldSize = facts.worldSize;
    ri.host = facts.host;
    ri.pid = facts.pid;
    ri.sourceId = src.sourceId;
    if (!kernelsPerDevice.empty())
        ri.device = std::max_element(kernelsPerDevice.begin(), kernelsPerDevice.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; })
                        ->first;
    writer.addRank(ri);
    return src;
}

// A file left out of the merge stays on record in the store, not only on the terminal.
void skippedDiagnostic(StoreWriter& writer, const std::string& path, const std::string& why)
{
    writer.diagnostic(std::nullopt, Severity::Error, "capture_file_skipped:" + fs::path(path).filename().string(),
                      why + "; the file was skipped, its rank is missing from the job");
}

} // namespace

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

    // A damaged or foreign file is left out with a warning; the job is the
    // files that can be read, and only when none can is the merge an error.
    std::vector<FileFacts> facts;
    std::string firstProblem;
    std::exception_ptr firstError;
    for (const auto& f : report.files) {
        try {
            sql::Database db = openCapture(f);
            facts.push_back(readFacts(db, f));
        } catch (const Cancelled&) {
            throw;
        } catch (const Error& e) {
            report.skipped.emplace_back(f, e.what());
            report.warnings.push_back(std::string(e.what()) + "; skipped");
            if (!firstError) {
                firstError = std::current_exception();
                firstProblem = e.what();
            }
        }
    }
    if (facts.empty() && report.files.size() == 1)
        std::rethrow_exception(firstError);
    if (facts.empty())
        throw FormatError(dir + ": none of its " + std::to_string(report.files.size()) +
                          " capture files can be read (first: " + firstProblem + ")");

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
            report.warnings.push_back(f.path + ": recorded nothing" +
                                      (f.rank ? " and repeats rank " + std::to_string(*f.rank) : std::string()) +
                                      "; left out");
        } else {
            if (f.rank)
                report.warnings.push_back(f.path + ": rank " + std::to_string(*f.rank) +
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
            report.warnings.push_back(facts[i].path + ": names no rank (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, "
                                      "PMI_RANK unset); stored as rank " + std::to_string(*assigned[i]));
    }

    // Communicator rank -> global rank, from every file that joined it.
    PeerMap peers;
    for (size_t i = 0; i < facts.size(); ++i)
        if (assigned[i])
            for (const auto& c : facts[i].comms)
                peers[c.hash][c.rank] = *assigned[i];

    StoreWriter writer(report.output);
    for (const auto& [path, why] : report.skipped)
        skippedDiagnostic(writer, path, why);
    for (size_t i = 0; i < facts.size(); ++i) {
        if (!assigned[i])
            continue;
        // A file that fails part-way (a damaged page, a missing table) takes
        // its rows with it: the job is the ranks that could be read whole.
        writer.beginInput();
        ImportedSource src;
        int64_t dropped = 0;
        try {
            sql::Database db = openCapture(facts[i].path);
            src = importOne(facts[i].path, db, facts[i], *assigned[i], peers, writer, &dropped);
            writer.dropOutOfRangeTimes(); // a file with no usable time is skipped like an unreadable one
            writer.keepInput();
        } catch (const Cancelled&) {
            throw;
        } catch (const Error& e) {
            // The store being written failing (disk full) is no fault of the file: that ends the merge.
            if (std::string_view(e.what()).starts_with(report.output + ": "))
                throw;
            writer.discardInput();
            if (!firstError) {
                firstError = std::current_exception();
                firstProblem = e.what();
            }
            report.skipped.emplace_back(facts[i].path, e.what());
            report.warnings.push_back(std::string(e.what()) + "; skipped");
            skippedDiagnostic(writer, facts[i].path, e.what());
            continue;
        }
        report.droppedRecords += dropped;
        report.rankFiles[*assigned[i]] = facts[i].path;
        // Every process records on its host's CLOCK_REALTIME: ranks of one
        // host share the clock exactly, hosts agree as far as NTP keeps them.
        writer.setSourceAlignment(src.sourceId, 0, "time_base");
        report.offsets.emplace_back(*assigned[i], 0);
        report.sources.push_back(src);
    }
    if (report.sources.empty() && !report.skipped.empty()) {
        if (report.files.size() == 1)
            std::rethrow_exception(firstError);
        throw FormatError(dir + ": none of its " + std::to_string(report.files.size()) +
                          " capture files could be merged (first: " + firstProblem + ")");
    }
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
    if (report.droppedRecords > 0)
        report.warnings.push_back(std::to_string(report.droppedRecords) +
                                  " records were dropped while recording (see `pipescope info`)");
    writer.setMeta("capture_files", std::to_string(report.sources.size()));
    writer.finish();
    return report;
}

} // namespace pipescope
