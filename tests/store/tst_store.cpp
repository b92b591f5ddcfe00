// The store: round trip, launch linking, range nesting, busy unions,
// version checks, and that reading leaves the file untouched.
#include "TestSupport.h"
#include "store/Schema.h"
#include "store/Sqlite.h"
#include "store/Store.h"
#include "store/StoreWriter.h"
#include "util/Error.h"
#include "util/Limits.h"

#include <QCryptographicHash>
#include <QFile>
#include <QFileInfo>

#include <functional>

using namespace pipescope;

namespace {

QByteArray sha(const std::string& path)
{
    QFile f(QString::fromStdString(path));
    f.open(QIODevice::ReadOnly);
    return QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256);
}

// Two ranks, rank 0 with two streams on device 0, kernels that overlap,
// a memcpy, nested annotations and launches linked by correlation.
void writeSmallJob(const std::string& path, const std::function<void(StoreWriter&)>& more = {})
{
    StoreWriter w(path);
    auto src = w.addSource({"r0.json", "kineto", 0, 1000, R"({"note":"test"})"});
    w.setMeta("simulated", "1");
    w.addRank({0, 2, "host-a", 42, 0, src});
    w.addRank({1, 2, "host-b", 43, 0, std::nullopt});
    w.addGpu({0, 0, "NVIDIA H200", "", int64_t(141) << 30, 132, "9.0"});
    auto s7 = w.stream(0, 0, 7);
    auto s20 = w.stream(0, 0, 20, "nccl");
    auto r1s7 = w.stream(1, 0, 7);
    QCOMPARE(w.stream(0, 0, 7), s7);
    auto gemm = w.intern("sm90_gemm");
    QCOMPARE(w.intern("sm90_gemm"), gemm);
    QCOMPARE(w.intern(""), StringId(0));
    auto launch = w.intern("cudaLaunchKernel");
    // Kernels [100,200) and [150,300) overlap on two streams, [400,450) later: union 200+50.
    w.addActivity({0, s7, ActivityKind::Kernel, 100, 200, gemm, 1});
    auto k2 = w.addActivity({0, s20, ActivityKind::Kernel, 150, 300, w.intern("ncclDevKernel_SendRecv"), 2});
    w.addActivity({0, s7, ActivityKind::Kernel, 400, 450, gemm, 3});
    // A memcpy touching the last kernel: counted in the GPU union, not the kernel union.
    w.addActivity({0, s7, ActivityKind::Memcpy, 450, 500, w.intern("Memcpy DtoD"), std::nullopt, 4096, CopyKind::DtoD});
    w.addActivity({0, s7, ActivityKind::Sync, 500, 900, w.intern("cudaStreamSynchronize")});
    w.addActivity({1, r1s7, ActivityKind::Kernel, 1000, 1100, gemm, 1});
    // Launch calls; rank 1's correlation 1 must not link to rank 0's call.
    w.addCpuRange({0, 11, CpuRangeKind::Runtime, 90, 95, launch, std::nullopt, 1});
    w.addCpuRange({0, 11, CpuRangeKind::Runtime, 140, 145, launch, std::nullopt, 2});
    w.addCpuRange({1, 11, CpuRangeKind::Runtime, 990, 995, launch, std::nullopt, 1});
    // Nested annotations on one thread: step > forward > (layer0, layer1).
    w.addCpuRange({0, 11, CpuRangeKind::Annotation, 0, 1000, w.intern("ProfilerStep#1")});
    w.addCpuRange({0, 11, CpuRangeKind::Annotation, 10, 500, w.intern("forward_step")});
    w.addCpuRange({0, 11, CpuRangeKind::Nvtx, 20, 100, w.intern("layer0")});
    w.addCpuRange({0, 11, CpuRangeKind::Nvtx, 100, 200, w.intern("layer1")});
    NcclRecord op;
    op.rank = 0;
    op.activityId = k2;
    op.kind = Collective::SendRecv;
    op.isP2p = true;
    op.bytes = 1 << 20;
    op.dtype = "BFloat16";
    op.groupName = "1";
    op.groupDesc = "pp";
    op.groupRanks = "[0, 1]";
    op.peer = 1;
    op.start = 150;
    op.end = 300;
    op.streamId = s20;
    w.addNcclOp(op);
    w.addProcessGroup({0, "1", "pp", {0, 1}, 2});
    w.diagnostic(src, Severity::Warning, "missing_field:ts", "event 12 has no ts");
    w.diagnostic(src, Severity::Warning, "missing_field:ts", "event 13 has no ts");
    if (more)
        more(w);
    w.finish();
}

// The small job with two memory events: one with the allocator's totals, one without.
void writeMemoryJob(const std::string& path)
{
    writeSmallJob(path, [](StoreWriter& w) {
        MemoryEvent e;
        e.ts = 120;
        e.bytes = 4096;
        e.address = 0x7f0000;
        e.totalAllocated = int64_t(1) << 30;
        e.totalReserved = int64_t(2) << 30;
        w.addMemoryEvent(e);
        e.ts = 130;
        e.bytes = -4096;
        e.totalAllocated = e.totalReserved = std::nullopt;
        w.addMemoryEvent(e);
    });
}

} // namespace

class TstStore : public QObject {
    Q_OBJECT
private slots:
    // What an importer corrects once it has read a whole file goes through
    // typed writer operations: late correlations, the launch calls of some
    // correlations, a provisional rank moved to the real one with its
    // streams, the source's rank; and what clock alignment reads back.
    void importerCorrections()
    {
        QTemporaryDir dir;
        const std::string path = (dir.path() + "/c.pipescope").toStdString();
        {
            StoreWriter w(path);
            const StoreWriter::Mark before = w.mark();
            const int64_t src = w.addSource({"r.json", "kineto", std::nullopt, 0, ""});
            const int64_t s7 = w.stream(9, 0, 7);
            const StringId k = w.intern("gemm");
            const int64_t a1 = w.addActivity({9, s7, ActivityKind::Kernel, 100, 200, k});
            w.addCpuRange({9, 42, CpuRangeKind::Runtime, 90, 95, k, std::nullopt, int64_t(5)});
            w.addCpuRange({9, 43, CpuRangeKind::Driver, 96, 97, k, std::nullopt, int64_t(6)});
            w.addCpuRange({9, 42, CpuRangeKind::Annotation, 80, 300, k, std::nullopt, int64_t(7)}); // not a launch call
            w.setActivityCorrelation(a1, 5);
            const auto calls = w.launchCallsWith({{5, 100}, {6, 200}, {7, 300}, {8, 400}}, before.cpuRanges);
            QCOMPARE(calls.size(), size_t(2));
            std::map<int64_t, std::pair<int64_t, TimeNs>> byKey;
            for (const auto& c : calls)
                byKey[c.key] = {c.tid, c.start};
            QVERIFY((byKey == std::map<int64_t, std::pair<int64_t, TimeNs>>{{100, {42, 90}}, {200, {43, 96}}}));
            QVERIFY(w.launchCallsWith({{5, 100}}, w.mark().cpuRanges).empty()); // only rows after the mark

            NcclRecord send;
            send.rank = 9;
            send.kind = Collective::Send;
            send.isP2p = true;
            send.peer = 1;
            send.start = 100;
            send.end = 200;
            w.addNcclOp(send);
            NcclRecord ar;
            ar.rank = 9;
            ar.kind = Collective::AllReduce;
            ar.groupName = "dp";
            ar.seq = 3;
            ar.start = 210;
            ar.end = 250;
            w.addNcclOp(ar);
            const auto transfers = w.transferEnds();
            QCOMPARE(transfers.size(), size_t(1));
            QVERIFY(transfers[0].rank == 9 && transfers[0].send && transfers[0].peer == 1 && transfers[0].end == 200);
            const auto collectives = w.collectiveEnds();
            QCOMPARE(collectives.size(), size_t(1));
            QCOMPARE(collectives[0].kind, std::string("AllReduce"));
            QCOMPARE(collectives[0].group, std::string("dp|"));
            QCOMPARE(collectives[0].seq, std::optional<int64_t>(3));
            QCOMPARE(collectives[0].end, TimeNs(250));

            w.relabelRank(9, 2, before, {s7});
            w.setSourceRank(src, 2, 1000, R"({"rank_from":"file_name"})");
            w.addRank({2, 4, "", 0, 0, src});
            w.finish();
        }
        Store store(path);
        const Trace t = store.load();
        QCOMPARE(t.activities.size(), size_t(1));
        QCOMPARE(t.activities[0].rank, 2);
        QCOMPARE(t.activities[0].correlation, std::optional<int64_t>(5));
        for (const CpuRange& r : t.cpuRanges)
            QCOMPARE(r.rank, 2);
        QCOMPARE(t.ncclOps.size(), size_t(2));
        QCOMPARE(t.ncclOps[0].rank, 2);
        QCOMPARE(t.streams.size(), size_t(1));
        QCOMPARE(t.streams[0].rank, 2);
        QCOMPARE(t.sources.size(), size_t(1));
        QCOMPARE(t.sources[0].rank, std::optional<int>(2));
        QCOMPARE(t.sources[0].timeBase, TimeNs(1000));
    }

    // A rank moved onto one that already has the stream is refused.
    void relabelOntoATakenRankIsRefused()
    {
        QTemporaryDir dir;
        StoreWriter w((dir.path() + "/r.pipescope").toStdString());
        const StoreWriter::Mark before = w.mark();
        w.stream(2, 0, 7);
        const int64_t mine = w.stream(9, 0, 7);
        bool refused = false;
        try {
            w.relabelRank(9, 2, before, {mine});
        } catch (const Error&) {
            refused = true;
        }
        QVERIFY(refused);
    }

    void roundTrip()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        writeSmallJob(p);
        Store store(p);
        QCOMPARE(store.schemaVersion(), kSchemaVersion);
        Trace t = store.load(LoadOptions{.cpuOps = true, .runtimeCalls = true});
        QVERIFY(t.simulated());
        QCOMPARE(t.ranks.size(), size_t(2));
        QCOMPARE(t.ranks[0].host, std::string("host-a"));
        QCOMPARE(t.ranks[1].pid.value_or(0), int64_t(43));
        QCOMPARE(t.streams.size(), size_t(3));
        QCOMPARE(t.activities.size(), size_t(6));
        QCOMPARE(t.str(t.activities[0].name), std::string("sm90_gemm"));
        // Launch linking is per rank.
        QCOMPARE(t.activities[0].launchStart.value_or(-1), TimeNs(90));
        QCOMPARE(t.activities[1].launchStart.value_or(-1), TimeNs(140));
        QVERIFY(!t.activities[2].launchStart);
        QCOMPARE(t.activities[5].rank, 1);
        QCOMPARE(t.activities[5].launchStart.value_or(-1), TimeNs(990));
        // NCCL op attached to its kernel.
        QCOMPARE(t.ncclOps.size(), size_t(1));
        QCOMPARE(t.activities[1].ncclIndex, int64_t(0));
        QCOMPARE(t.ncclOps[0].groupRanks, (std::vector<int>{0, 1}));
        QCOMPARE(t.ncclOps[0].peer.value_or(-1), 1);
        QCOMPARE(t.processGroups.size(), size_t(1));
        QCOMPARE(t.processGroups[0].desc, std::string("pp"));
        QCOMPARE(t.gpus.size(), size_t(2)); // the explicit one plus rank 1's from its stream
        QCOMPARE(t.gpus[0].memoryBytes.value_or(0), int64_t(141) << 30);
        QCOMPARE(t.diagnostics.size(), size_t(1));
        QCOMPARE(t.diagnostics[0].count, int64_t(2));
        QCOMPARE(t.diagnostics[0].example, std::string("event 12 has no ts"));
    }

    void nesting()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        writeSmallJob(p);
        Trace t = Store(p).load();
        std::map<std::string, const CpuRange*> byName;
        for (const auto& r : t.cpuRanges)
            byName[t.str(r.name)] = &r;
        QCOMPARE(byName["ProfilerStep#1"]->depth, 0);
        QCOMPARE(byName["forward_step"]->depth, 1);
        QCOMPARE(byName["forward_step"]->parentId.value_or(-1), byName["ProfilerStep#1"]->id);
        QCOMPARE(byName["layer0"]->depth, 2);
        QCOMPARE(byName["layer1"]->depth, 2);
        QCOMPARE(byName["layer1"]->parentId.value_or(-1), byName["forward_step"]->id);
    }

    void summaryUnions()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        writeSmallJob(p);
        auto s = Store(p).summary();
        QCOMPARE(s.gpuSummaries.size(), size_t(2));
        const auto& g = s.gpuSummaries[0];
        QCOMPARE(g.kernels, int64_t(3));
        QCOMPARE(g.memcpys, int64_t(1));
        QCOMPARE(g.syncs, int64_t(1));
        QCOMPARE(g.kernelFirst.value_or(-1), TimeNs(100));
        QCOMPARE(g.kernelLast.value_or(-1), TimeNs(450));
        QCOMPARE(g.kernelBusy, TimeNs(250));
        QCOMPARE(g.gpuLast.value_or(-1), TimeNs(500));
        QCOMPARE(g.gpuBusy, TimeNs(300)); // sync is not busy time
        QCOMPARE(s.ncclCounts.size(), size_t(1));
        QCOMPARE(s.ncclCounts[0].second, int64_t(1));
        QCOMPARE(s.first.value_or(-1), TimeNs(100));
        QCOMPARE(s.last.value_or(-1), TimeNs(1100));
    }

    void shiftRank()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        {
            StoreWriter w(p);
            auto s = w.stream(3, 0, 7);
            w.addActivity({3, s, ActivityKind::Kernel, 100, 200, w.intern("k")});
            w.addCpuRange({3, 1, CpuRangeKind::Annotation, 50, 250, w.intern("a")});
            w.shiftRank(3, -50);
            w.finish();
        }
        Trace t = Store(p).load();
        QCOMPARE(t.activities[0].start, TimeNs(50));
        QCOMPARE(t.cpuRanges[0].start, TimeNs(0));
        QCOMPARE(t.ranks.size(), size_t(1));
        QCOMPARE(t.ranks[0].rank, 3);
    }

    void autogradSequencesOfLaunches()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        // Rank 0's first launch (90-95) lies in aten::mm (seq 7) in aten::linear
        // (seq 5); its second (140-145) in an op with no number.
        writeSmallJob(p, [](StoreWriter& w) {
            w.addCpuRange({0, 11, CpuRangeKind::CpuOp, 80, 99, w.intern("aten::linear"), std::nullopt, 5});
            w.addCpuRange({0, 11, CpuRangeKind::CpuOp, 85, 98, w.intern("aten::mm"), std::nullopt, 7});
            w.addCpuRange({0, 11, CpuRangeKind::CpuOp, 130, 150, w.intern("aten::copy_")});
        });
        Store store(p);
        const Trace t = store.load();
        std::vector<int64_t> ids;
        for (const Activity& a : t.activities)
            ids.push_back(a.id);
        const auto seqs = store.autogradSequences(ids);
        QCOMPARE(seqs.size(), ids.size());
        QCOMPARE(seqs[0], (std::vector<int64_t>{7, 5}));
        QVERIFY(seqs[1].empty()); // launched inside an op with no sequence number
        QVERIFY(seqs[2].empty()); // no launch recorded
        QVERIFY(seqs[5].empty()); // rank 1's launch: no op around it
        QCOMPARE(store.autogradSequences({int64_t(1) << 40}), (std::vector<std::vector<int64_t>>{{}}));
    }

    void autogradSequencesStopOnLoopingParents()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        writeSmallJob(p, [](StoreWriter& w) {
            w.addCpuRange({0, 11, CpuRangeKind::CpuOp, 85, 98, w.intern("aten::mm"), std::nullopt, 7});
        });
        {
            // A damaged store: the op is its own parent.
            sql::Database db(p, sql::Database::Mode::ReadWrite);
            db.exec("UPDATE cpu_ranges SET parent_id = id WHERE kind = 2");
        }
        Store store(p);
        const Trace t = store.load();
        const auto seqs = store.autogradSequences({t.activities[0].id});
        QCOMPARE(seqs.size(), size_t(1));
        QVERIFY(!seqs[0].empty());
        QVERIFY(seqs[0].size() <= 256);
        QVERIFY(std::all_of(seqs[0].begin(), seqs[0].end(), [](int64_t n) { return n == 7; }));
    }

    void readingDoesNotModify()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        writeSmallJob(p);
        auto before = sha(p);
        auto mtime = QFileInfo(QString::fromStdString(p)).lastModified();
        {
            Store s(p);
            s.summary();
            s.load();
        }
        QCOMPARE(sha(p), before);
        QCOMPARE(QFileInfo(QString::fromStdString(p)).lastModified(), mtime);
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 1);
    }

    void unfinishedWriterLeavesNothing()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        {
            StoreWriter w(p);
            auto s = w.stream(0, 0, 7);
            w.addActivity({0, s, ActivityKind::Kernel, 1, 2, w.intern("k")});
        }
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 0);
    }

    void memoryTotalsRoundTrip()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        writeMemoryJob(p);
        Store store(p);
        const Trace t = store.load();
        QCOMPARE(t.memoryEvents.size(), size_t(2));
        QCOMPARE(t.memoryEvents[0].bytes, int64_t(4096));
        QCOMPARE(t.memoryEvents[0].totalAllocated, std::optional<int64_t>(int64_t(1) << 30));
        QCOMPARE(t.memoryEvents[0].totalReserved, std::optional<int64_t>(int64_t(2) << 30));
        QVERIFY(!t.memoryEvents[1].totalAllocated);
        QVERIFY(!t.memoryEvents[1].totalReserved);
    }

    // A store written before the memory totals (schema 1: no
    // total_allocated / total_reserved columns) still opens and loads, with
    // the totals unknown.
    void schemaOneStoreLoads()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "old.pipescope");
        writeMemoryJob(p);
        {
            sql::Database db(p, sql::Database::Mode::ReadWrite);
            db.exec("CREATE TABLE memory_events_v1 (id INTEGER PRIMARY KEY, rank INTEGER NOT NULL, device INTEGER NOT NULL,"
                    " ts_ns INTEGER NOT NULL, bytes INTEGER NOT NULL, address INTEGER)");
            db.exec("INSERT INTO memory_events_v1 SELECT id, rank, device, ts_ns, bytes, address FROM memory_events");
            db.exec("DROP TABLE memory_events");
            db.exec("ALTER TABLE memory_events_v1 RENAME TO memory_events");
            db.exec("CREATE INDEX memory_events_by_time ON memory_events(rank, device, ts_ns)");
            db.exec("UPDATE meta SET value = '1' WHERE key = 'schema_version'");
            db.exec("PRAGMA user_version = 1");
        }
        Store store(p);
        QCOMPARE(store.schemaVersion(), 1);
        const Trace t = store.load();
        QCOMPARE(t.memoryEvents.size(), size_t(2));
        QCOMPARE(t.memoryEvents[0].bytes, int64_t(4096));
        QCOMPARE(t.memoryEvents[0].address, std::optional<int64_t>(0x7f0000));
        QVERIFY(!t.memoryEvents[0].totalAllocated);
        QVERIFY(!t.memoryEvents[0].totalReserved);
        QCOMPARE(t.activities.size(), size_t(6));
        QCOMPARE(store.summary().schemaVersion, 1);
    }

    void newerVersionRefused()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        writeSmallJob(p);
        {
            sql::Database db(p, sql::Database::Mode::ReadWrite);
            db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion + 1));
        }
        try {
            Store s(p);
            QFAIL("expected FormatError");
        } catch (const FormatError& e) {
            QVERIFY(QString(e.what()).contains("newer pipescope"));
            QVERIFY(QString(e.what()).contains(QString::fromStdString(p)));
        }
    }

    void notAStore_data()
    {
        QTest::addColumn<QByteArray>("contents");
        QTest::newRow("empty file") << QByteArray();
        QTest::newRow("text") << QByteArray("{\"traceEvents\": []}");
        QTest::newRow("random bytes") << QByteArray(4096, '\x5a');
    }
    void notAStore()
    {
        QFETCH(QByteArray, contents);
        QTemporaryDir dir;
        auto p = test::path(dir, "x.pipescope");
        QFile f(QString::fromStdString(p));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(contents);
        f.close();
        QVERIFY_THROWS_EXCEPTION(FormatError, Store s(p));
    }

    void otherSqliteRefused()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "other.sqlite");
        {
            sql::Database db(p, sql::Database::Mode::Create);
            db.exec("CREATE TABLE t(x)");
        }
        try {
            Store s(p);
            QFAIL("expected FormatError");
        } catch (const FormatError& e) {
            QVERIFY(QString(e.what()).contains("not a pipescope store"));
        }
    }

    void damagedCountsAreAFormatError()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        writeSmallJob(p);
        {
            sql::Database db(p, sql::Database::Mode::ReadWrite);
            db.exec("UPDATE meta SET value = '{\"x\": [1, 2, 3, 4]}' WHERE key = 'count.streams'");
        }
        Store s(p);
        QVERIFY_THROWS_EXCEPTION(FormatError, s.summary());
    }

    void missingFile() { QVERIFY_THROWS_EXCEPTION(Error, Store s("/nonexistent/job.pipescope")); }

    // The writer reads the tables for times outside the representable range
    // only when what it was given, moved by the shifts since, could lie
    // there: a shift that carries a valid time out of range still drops it.
    void shiftOutOfRangeDropsTheRow()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        {
            StoreWriter w(p);
            auto s = w.stream(0, 0, 7);
            w.addActivity({0, s, ActivityKind::Kernel, 0, 10, w.intern("near")});
            w.addActivity({0, s, ActivityKind::Kernel, kMaxTimeNs - 20, kMaxTimeNs - 10, w.intern("far")});
            w.addCpuRange({0, 1, CpuRangeKind::Annotation, kMaxTimeNs - 30, kMaxTimeNs - 5, w.intern("late")});
            w.shiftRank(0, 15);
            w.finish();
        }
        Store store(p);
        Trace t = store.load();
        QCOMPARE(t.activities.size(), size_t(1));
        QCOMPARE(t.str(t.activities[0].name), std::string("near"));
        QCOMPARE(t.activities[0].start, TimeNs(15));
        QVERIFY(t.cpuRanges.empty());
        QCOMPARE(t.diagnostics.size(), size_t(1));
        QCOMPARE(t.diagnostics[0].kind, std::string("bad_value:time_out_of_range"));
        QCOMPARE(t.diagnostics[0].count, int64_t(2));

        // Unshifted, the same times are valid and kept.
        auto q = test::path(dir, "kept.pipescope");
        {
            StoreWriter w(q);
            auto s = w.stream(0, 0, 7);
            w.addActivity({0, s, ActivityKind::Kernel, 0, 10, w.intern("near")});
            w.addActivity({0, s, ActivityKind::Kernel, kMaxTimeNs - 20, kMaxTimeNs - 10, w.intern("far")});
            w.finish();
        }
        Trace k = Store(q).load();
        QCOMPARE(k.activities.size(), size_t(2));
        QVERIFY(k.diagnostics.empty());
    }

    // The time index holds the ranges readers look up by time (annotations,
    // NVTX, GPU annotations), and the readers' condition is the index's own,
    // so that SQLite uses it: were the two to drift apart, every read of a
    // few ranks would scan the table instead.
    void timeIndexHoldsWhatReadersLookUp()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        writeSmallJob(p, [](StoreWriter& w) {
            w.addCpuRange({1, 3, CpuRangeKind::GpuAnnotation, 1000, 1100, w.intern("gpu")});
            w.addCpuRange({1, 3, CpuRangeKind::CpuOp, 990, 1000, w.intern("aten::mm")});
        });
        sql::Database db(p, sql::Database::Mode::ReadOnly);
        auto plan = db.prepare(std::string("EXPLAIN QUERY PLAN SELECT id FROM cpu_ranges WHERE rank = ?1 AND (") +
                               kCpuRangeKindsByTime + ") AND end_ns >= ?2 AND start_ns < ?3");
        QVERIFY(plan.step());
        QVERIFY2(std::string(plan.text(3)).find("USING INDEX cpu_ranges_by_time") != std::string::npos,
                 std::string(plan.text(3)).c_str());
        // 4 annotation and NVTX ranges on rank 0, the GPU annotation on rank 1; not the runtime calls or the CPU op.
        auto held = db.prepare("SELECT COUNT(*) FROM cpu_ranges INDEXED BY cpu_ranges_by_time WHERE rank >= 0 AND " +
                               std::string(kCpuRangeKindsByTime));
        QVERIFY(held.step());
        QCOMPARE(held.int64(0), int64_t(5));
        // The reader's few-ranks read goes through it and gives those ranges.
        Trace t = Store(p).load(LoadOptions{.ranks = std::vector<int>{1}});
        QCOMPARE(t.cpuRanges.size(), size_t(1));
        QCOMPARE(t.str(t.cpuRanges[0].name), std::string("gpu"));
    }

    void loadWindowAndRanks()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        writeSmallJob(p);
        Store store(p);
        Trace t = store.load(LoadOptions{.ranks = std::vector<int>{1}});
        QCOMPARE(t.activities.size(), size_t(1));
        QCOMPARE(t.activities[0].rank, 1);
        Trace w = store.load(LoadOptions{.from = 160, .to = 420});
        // Overlapping [160, 420): kernels [100,200), [150,300), [400,450).
        QCOMPARE(w.activities.size(), size_t(3));
    }

    void stringsAreBoundNotSpliced()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        const std::string evil = "x'); DROP TABLE activities; --";
        {
            StoreWriter w(p);
            auto s = w.stream(0, 0, 7);
            w.addActivity({0, s, ActivityKind::Kernel, 1, 2, w.intern(evil)});
            w.setMeta(evil, evil);
            w.finish();
        }
        Trace t = Store(p).load();
        QCOMPARE(t.activities.size(), size_t(1));
        QCOMPARE(t.str(t.activities[0].name), evil);
    }

    // A window load through the (rank, start_ns) index holds exactly the
    // activities of a full load that start in the window, with the same fields,
    // and the NCCL ops starting there, linked the same way.
    void loadStartingInWindow()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "job.pipescope");
        writeSmallJob(p);
        Store store(p);
        const Trace all = store.load();
        auto ids = [](const Trace& t) {
            std::vector<int64_t> out;
            for (const Activity& a : t.activities)
                out.push_back(a.id);
            return out;
        };
        {
            const Trace w = store.load(LoadOptions{.from = 150, .to = 500, .startsInWindow = true});
            // Starting in [150, 500): the NCCL kernel at 150, the kernel at 400, the memcpy at 450;
            // not [100,200) (it overlaps but starts before), not the sync at 500, nor rank 1's kernel.
            QCOMPARE(w.activities.size(), size_t(3));
            std::vector<int64_t> expected;
            for (const Activity& a : all.activities)
                if (a.start >= 150 && a.start < 500)
                    expected.push_back(a.id);
            QCOMPARE(ids(w), expected);
            for (const Activity& a : w.activities) {
                const auto f = std::find_if(all.activities.begin(), all.activities.end(), [&](const Activity& b) { return b.id == a.id; });
                QVERIFY(f != all.activities.end());
                QCOMPARE(a.rank, f->rank);
                QCOMPARE(a.streamId, f->streamId);
                QCOMPARE(a.start, f->start);
                QCOMPARE(a.end, f->end);
                QCOMPARE(a.name, f->name);
                QVERIFY(a.correlation == f->correlation);
                QVERIFY(a.bytes == f->bytes);
                QVERIFY(a.copyKind == f->copyKind);
            }
            QCOMPARE(w.ncclOps.size(), size_t(1));
            QCOMPARE(w.activities[0].start, TimeNs(150));
            QCOMPARE(w.activities[0].ncclIndex, 0);
            QVERIFY(w.ncclOps[0].activityId == w.activities[0].id);
            QCOMPARE(w.activities[1].ncclIndex, -1);
            QVERIFY(w.activities[2].bytes == int64_t(4096));
            QVERIFY(!w.activities[2].correlation);
            QCOMPARE(w.activities[2].correlation.value_or(-1), int64_t(-1));
        }
        {
            // [0, 150): only the kernel at 100; the op starts at 150, outside.
            const Trace w = store.load(LoadOptions{.from = 0, .to = 150, .startsInWindow = true});
            QCOMPARE(w.activities.size(), size_t(1));
            QCOMPARE(w.activities[0].start, TimeNs(100));
            QVERIFY(w.activities[0].correlation == int64_t(1));
            QCOMPARE(w.activities[0].ncclIndex, -1);
            QVERIFY(w.ncclOps.empty());
        }
        {
            // Rank filter and window together.
            const Trace w = store.load(LoadOptions{.ranks = std::vector<int>{1}, .from = 0, .to = 2000, .startsInWindow = true});
            QCOMPARE(w.activities.size(), size_t(1));
            QCOMPARE(w.activities[0].rank, 1);
        }
    }

    // Activity's optional fields: INT64_MIN is the absent value; the rest read as std::optional.
    void compactOptional()
    {
        OptionalInt64 none;
        QVERIFY(!none.has_value());
        QVERIFY(none == std::nullopt);
        QCOMPARE(none.value_or(7), int64_t(7));
        QVERIFY_THROWS_EXCEPTION(std::bad_optional_access, (void)none.value());
        OptionalInt64 zero = int64_t(0);
        QVERIFY(zero.has_value());
        QCOMPARE(*zero, int64_t(0));
        QVERIFY(zero == int64_t(0));
        QVERIFY(zero != none);
        const std::optional<int64_t> back = zero;
        QVERIFY(back == int64_t(0));
        OptionalInt64 fromOpt = std::optional<int64_t>(-5);
        QCOMPARE(fromOpt.value(), int64_t(-5));
        fromOpt = std::nullopt;
        QVERIFY(!fromOpt);
        QVERIFY(OptionalInt64(std::numeric_limits<int64_t>::min()) == std::nullopt);
    }
};

QTEST_GUILESS_MAIN(TstStore)
#include "tst_store.moc"
