// The collectors without a GPU: CUPTI-shaped records through the translator
// into a capture file, and the two libraries loaded the way CUDA and NCCL
// load them.
#include "ActivityRecords.h"
#include "CaptureDb.h"
#include "NcclProfilerApi.h"
#include "TestSupport.h"
#include "import/capture/CaptureSchema.h"

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include <cstddef>
#include <cstdlib>
#include <dlfcn.h>
#include <sqlite3.h>
#include <unistd.h>

using namespace pipescope;
using namespace pipescope::collect;

namespace {

// Reads one integer (or -1 for NULL / no row) from a SQL query.
int64_t queryInt(const std::string& path, const std::string& sqlText)
{
    sqlite3* db = nullptr;
    int64_t v = -2;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(db, sqlText.c_str(), -1, &st, nullptr) == SQLITE_OK) {
            int rc = sqlite3_step(st);
            v = rc == SQLITE_ROW ? (sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 0)) : -1;
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

std::string queryText(const std::string& path, const std::string& sqlText)
{
    sqlite3* db = nullptr;
    std::string v = "<none>";
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(db, sqlText.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
            sqlite3_column_text(st, 0))
            v = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

ProcessMeta testMeta()
{
    ProcessMeta m;
    m.rank = 1;
    m.worldSize = 2;
    m.host = "node07";
    m.pid = 4242;
    m.startNs = 1'700'000'000'000'000'000;
    return m;
}

// Holds records in CUPTI's layout; the translator reads them as CUPTI would hand them over.
template <typename T>
T record(CUpti_ActivityKind kind)
{
    T r;
    std::memset(&r, 0, sizeof r);
    r.kind = kind;
    return r;
}

} // namespace

class TestCollectors : public QObject {
    Q_OBJECT

private slots:
    void translatorStoresCuptiRecords();
    void nvtxRangesPairAcrossBuffers();
    void apiCallsOutsideWindowsAreDropped();
    void writerIsNoOpAfterFailure();
    void cuptiLibraryEntryPoints();
    void ncclPluginSymbolsAndLayout();
    void ncclPluginRecordsOperations();
};

void TestCollectors::translatorStoresCuptiRecords()
{
    QTemporaryDir tmp;
    std::string path = test::path(tmp, "t.pscap");
    CaptureDb db;
    std::string error;
    QVERIFY2(db.open(path, testMeta(), error), error.c_str());
    ActivityTranslator tr([](int kind, uint32_t cbid) {
        return std::string(kind == 0 ? "cudaLaunchKernel" : "cuLaunchKernel") + "#" + std::to_string(cbid);
    });
    db.begin();

    auto k = record<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    k.start = 1000;
    k.end = 3000;
    k.deviceId = 0;
    k.contextId = 1;
    k.streamId = 7;
    k.correlationId = 42;
    k.gridX = 128, k.gridY = 1, k.gridZ = 1;
    k.blockX = 256, k.blockY = 1, k.blockZ = 1;
    k.name = "ampere_sgemm_128x64_nn";
    QVERIFY(tr.store(reinterpret_cast<CUpti_Activity*>(&k), db));
    k.start = 4000, k.end = 4500, k.correlationId = 43; // same name: interned once
    QVERIFY(tr.store(reinterpret_cast<CUpti_Activity*>(&k), db));

    auto c = record<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
    c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    c.bytes = 4096;
    c.start = 500, c.end = 900;
    c.deviceId = 0, c.contextId = 1, c.streamId = 7, c.correlationId = 41;
    QVERIFY(tr.store(reinterpret_cast<CUpti_Activity*>(&c), db));

    auto s = record<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
    s.bytes = 1 << 20;
    s.start = 5000, s.end = 5100, s.deviceId = 0, s.contextId = 1, s.streamId = 13, s.correlationId = 44;
    QVERIFY(tr.store(reinterpret_cast<CUpti_Activity*>(&s), db));

    auto y = record<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
    y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
    y.start = 5200, y.end = 6000, y.contextId = 1, y.streamId = 0xffffffffu, y.correlationId = 45;
    QVERIFY(tr.store(reinterpret_cast<CUpti_Activity*>(&y), db));

    auto api = record<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
    api.cbid = 211, api.start = 900, api.end = 950, api.threadId = 77, api.correlationId = 42;
    QVERIFY(tr.store(reinterpret_cast<CUpti_Activity*>(&api), db));
    auto drv = record<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
    drv.cbid = 307, drv.start = 960, drv.end = 990, drv.threadId = 77, drv.correlationId = 46;
    QVERIFY(tr.store(reinterpret_cast<CUpti_Activity*>(&drv), db));

    auto alloc = record<CUpti_ActivityMemory4>(CUPTI_ACTIVITY_KIND_MEMORY2);
    alloc.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    alloc.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    alloc.address = 0x7f0000000000, alloc.bytes = 1 << 30, alloc.timestamp = 100, alloc.deviceId = 0;
    QVERIFY(tr.store(reinterpret_cast<CUpti_Activity*>(&alloc), db));
    alloc.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    alloc.timestamp = 7000;
    QVERIFY(tr.store(reinterpret_cast<CUpti_Activity*>(&alloc), db));

    auto dev = record<CUpti_ActivityDevice5>(CUPTI_ACTIVITY_KIND_DEVICE);
    dev.id = 0, dev.name = "NVIDIA H200", dev.globalMemorySize = 150'000'000'000ULL, dev.numMultiprocessors = 132;
    dev.computeCapabilityMajor = 9, dev.computeCapabilityMinor = 0;
    QVERIFY(tr.store(reinterpret_cast<CUpti_Activity*>(&dev), db));
    auto ctx = record<CUpti_ActivityContext3>(CUPTI_ACTIVITY_KIND_CONTEXT);
    ctx.contextId = 1, ctx.deviceId = 0;
    QVERIFY(tr.store(reinterpret_cast<CUpti_Activity*>(&ctx), db));

    auto other = record<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_OPENACC_DATA);
    QVERIFY(!tr.store(reinterpret_cast<CUpti_Activity*>(&other), db));
    db.commit();
    db.close();

    QCOMPARE(queryInt(path, "PRAGMA application_id"), int64_t(capture::kCaptureApplicationId));
    QCOMPARE(queryInt(path, "PRAGMA user_version"), int64_t(capture::kCaptureVersion));
    QCOMPARE(queryInt(path, "SELECT count(*) FROM gpu_activities WHERE kind = 0"), 2);
    QCOMPARE(queryInt(path, "SELECT count(*) FROM strings WHERE value = 'ampere_sgemm_128x64_nn'"), 1);
    QCOMPARE(queryText(path, "SELECT s.value FROM gpu_activities a JOIN strings s ON s.id = a.name_id "
                             "WHERE a.correlation = 43"),
             std::string("ampere_sgemm_128x64_nn"));
    QCOMPARE(queryInt(path, "SELECT grid_x * 1000 + block_x FROM gpu_activities WHERE correlation = 42"), 128256);
    QCOMPARE(queryInt(path, "SELECT bytes FROM gpu_activities WHERE kind = 1"), 4096);
    QCOMPARE(queryInt(path, "SELECT copy_kind FROM gpu_activities WHERE kind = 1"), 1);
    QCOMPARE(queryText(path, "SELECT s.value FROM gpu_activities a JOIN strings s ON s.id = a.name_id WHERE a.kind = 1"),
             std::string("Memcpy HtoD"));
    QCOMPARE(queryInt(path, "SELECT stream FROM gpu_activities WHERE kind = 2"), 13);
    // Context-wide synchronisation: no stream, no device (the merge maps the context).
    QCOMPARE(queryInt(path, "SELECT stream FROM gpu_activities WHERE kind = 3"), -1);
    QCOMPARE(queryInt(path, "SELECT device FROM gpu_activities WHERE kind = 3"), -1);
    QCOMPARE(queryInt(path, "SELECT context FROM gpu_activities WHERE kind = 3"), 1);
    QCOMPARE(queryText(path, "SELECT s.value FROM api_calls a JOIN strings s ON s.id = a.name_id WHERE a.kind = 0"),
             std::string("cudaLaunchKernel#211"));
    QCOMPARE(queryInt(path, "SELECT correlation FROM api_calls WHERE kind = 1"), 46);
    QCOMPARE(queryInt(path, "SELECT sum(bytes) FROM memory_events"), 0);
    QCOMPARE(queryInt(path, "SELECT bytes FROM memory_events WHERE ts_ns = 7000"), -(int64_t(1) << 30));
    QCOMPARE(queryText(path, "SELECT name FROM devices WHERE id = 0"), std::string("NVIDIA H200"));
    QCOMPARE(queryInt(path, "SELECT sm_count FROM devices WHERE id = 0"), 132);
    QCOMPARE(queryInt(path, "SELECT device FROM contexts WHERE id = 1"), 0);
    QCOMPARE(queryText(path, "SELECT value FROM meta WHERE key = 'rank'"), std::string("1"));
    QCOMPARE(queryText(path, "SELECT value FROM meta WHERE key = 'host'"), std::string("node07"));
    QCOMPARE(tr.stored(), int64_t(11));
}

void TestCollectors::nvtxRangesPairAcrossBuffers()
{
    QTemporaryDir tmp;
    std::string path = test::path(tmp, "n.pscap");
    CaptureDb db;
    std::string error;
    QVERIFY(db.open(path, testMeta(), error));
    ActivityTranslator tr(nullptr);
    auto marker = [&](uint32_t id, CUpti_ActivityFlag flag, uint64_t ts, uint32_t tid, const char* name,
                      const char* domain) {
        auto m = record<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
        m.flags = flag, m.timestamp = ts, m.id = id, m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
        m.objectId.pt.threadId = tid;
        m.name = name, m.domain = domain;
        tr.store(reinterpret_cast<CUpti_Activity*>(&m), db);
    };
    db.begin();
    marker(1, CUPTI_ACTIVITY_FLAG_MARKER_START, 100, 5, "pipescope/forward mb=3 stage=1 chunk=0", nullptr);
    db.commit(); // a buffer boundary: the end arrives in the next one
    db.begin();
    marker(2, CUPTI_ACTIVITY_FLAG_MARKER_START, 150, 5, "pipescope/layer blocks.0", "pipescope");
    marker(2, CUPTI_ACTIVITY_FLAG_MARKER_END, 180, 5, nullptr, "pipescope");
    marker(1, CUPTI_ACTIVITY_FLAG_MARKER_END, 200, 5, nullptr, nullptr);
    marker(3, CUPTI_ACTIVITY_FLAG_MARKER_START, 300, 5, "async", nullptr);
    marker(3, CUPTI_ACTIVITY_FLAG_MARKER_END, 400, 6, nullptr, nullptr); // ends on another thread
    marker(4, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 450, 5, "checkpoint", nullptr);
    marker(9, CUPTI_ACTIVITY_FLAG_MARKER_END, 460, 5, nullptr, nullptr); // opened before recording
    marker(5, CUPTI_ACTIVITY_FLAG_MARKER_START, 500, 5, "never closed", nullptr);
    tr.finish(db);
    db.commit();
    db.close();

    QCOMPARE(queryInt(path, "SELECT count(*) FROM nvtx_ranges"), 5);
    QCOMPARE(queryInt(path, "SELECT end_ns FROM nvtx_ranges r JOIN strings s ON s.id = r.name_id "
                            "WHERE s.value = 'pipescope/forward mb=3 stage=1 chunk=0'"),
             200);
    QCOMPARE(queryText(path, "SELECT d.value FROM nvtx_ranges r JOIN strings d ON d.id = r.domain_id"),
             std::string("pipescope"));
    QCOMPARE(queryInt(path, "SELECT kind FROM nvtx_ranges WHERE start_ns = 300"), int64_t(capture::kStartEnd));
    QCOMPARE(queryInt(path, "SELECT kind FROM nvtx_ranges WHERE start_ns = 100"), int64_t(capture::kPushPop));
    QCOMPARE(queryInt(path, "SELECT kind FROM nvtx_ranges WHERE start_ns = 450"), int64_t(capture::kMark));
    QCOMPARE(queryInt(path, "SELECT end_ns FROM nvtx_ranges WHERE start_ns = 500"), -1);
    QCOMPARE(tr.skipped(), int64_t(1));
}

void TestCollectors::apiCallsOutsideWindowsAreDropped()
{
    QTemporaryDir tmp;
    std::string path = test::path(tmp, "w.pscap");
    CaptureDb db;
    std::string error;
    QVERIFY(db.open(path, testMeta(), error));
    ActivityTranslator tr(nullptr);
    tr.setApiFilter([](int64_t ts) { return ts >= 1000 && ts <= 2000; });
    db.begin();
    for (int64_t start : {500, 1000, 1500, 2500}) {
        auto api = record<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
        api.cbid = 211, api.start = static_cast<uint64_t>(start), api.end = static_cast<uint64_t>(start + 10);
        api.correlationId = static_cast<uint32_t>(start);
        tr.store(reinterpret_cast<CUpti_Activity*>(&api), db);
    }
    db.commit();
    db.close();
    QCOMPARE(queryInt(path, "SELECT count(*) FROM api_calls"), 2);
    QCOMPARE(queryInt(path, "SELECT min(start_ns) FROM api_calls"), 1000);
    QCOMPARE(queryText(path, "SELECT s.value FROM api_calls a JOIN strings s ON s.id = a.name_id"),
             std::string("cudaRuntime#211"));
    QCOMPARE(tr.skipped(), int64_t(2));
}

void TestCollectors::writerIsNoOpAfterFailure()
{
    CaptureDb db;
    std::string error;
    QVERIFY(!db.open("/nonexistent-dir/x.pscap", testMeta(), error));
    QVERIFY(error.find("/nonexistent-dir/x.pscap") != std::string::npos);
    // Every call after a failure is harmless.
    db.begin();
    GpuActivityRow a;
    db.addGpuActivity(a);
    QCOMPARE(db.intern("x"), int64_t(0));
    db.commit();
    QVERIFY(!db.ok());
}

void TestCollectors::cuptiLibraryEntryPoints()
{
    void* lib = dlopen(PIPESCOPE_CUPTI_LIB, RTLD_NOW | RTLD_LOCAL);
    QVERIFY2(lib, dlerror());
    QVERIFY(dlsym(lib, "InitializeInjection"));
    QVERIFY(dlsym(lib, "InitializeInjectionNvtx2"));
    // Without a driver, set-up fails, says so once and returns 0; a second call is a no-op.
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!driver && !QFile::exists("/dev/nvidiactl")) {
        QTemporaryDir tmp;
        qputenv("PIPESCOPE_CAPTURE_DIR", tmp.path().toUtf8());
        auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
        QCOMPARE(init(), 0);
        QCOMPARE(init(), 0);
        QVERIFY(QDir(tmp.path()).entryList(QDir::Files).isEmpty());
        qunsetenv("PIPESCOPE_CAPTURE_DIR");
    }
}

void TestCollectors::ncclPluginSymbolsAndLayout()
{
    void* lib = dlopen(PIPESCOPE_NCCL_LIB, RTLD_NOW | RTLD_LOCAL);
    QVERIFY2(lib, dlerror());
    auto* v5 = static_cast<psNcclProfiler_v5*>(dlsym(lib, "ncclProfiler_v5"));
    auto* v4 = static_cast<psNcclProfiler_v4*>(dlsym(lib, "ncclProfiler_v4"));
    QVERIFY(v5 && v4);
    QCOMPARE(std::string(v5->name), std::string("pipescope"));
    QCOMPARE(std::string(v4->name), std::string("pipescope"));
    QVERIFY(v5->init && v5->startEvent && v5->stopEvent && v5->recordEventState && v5->finalize);
    QVERIFY(v4->init && v4->startEvent && v4->stopEvent && v4->recordEventState && v4->finalize);
    // Offsets of the fields the plugin reads, as NCCL lays them out (x86-64).
    QCOMPARE(offsetof(psNcclProfilerEventDescr_v5, rank), size_t(16));
    QCOMPARE(offsetof(psNcclProfilerEventDescr_v5, coll.seqNumber), size_t(24));
    QCOMPARE(offsetof(psNcclProfilerEventDescr_v5, coll.count), size_t(56));
    QCOMPARE(offsetof(psNcclProfilerEventDescr_v5, coll.datatype), size_t(72));
    QCOMPARE(offsetof(psNcclProfilerEventDescr_v5, coll.nChannels), size_t(80));
    QCOMPARE(offsetof(psNcclProfilerEventDescr_v5, coll.algo), size_t(88));
    QCOMPARE(offsetof(psNcclProfilerEventDescr_v5, p2p.count), size_t(48));
    QCOMPARE(offsetof(psNcclProfilerEventDescr_v5, p2p.peer), size_t(56));
    QCOMPARE(offsetof(psNcclProfilerEventDescr_v4, coll.proto), size_t(96));
    QCOMPARE(offsetof(psNcclProfilerEventDescr_v4, p2p.peer), size_t(56));
    QCOMPARE(sizeof(((psNcclProfilerEventDescr_v5*)nullptr)->type), size_t(8));
    QCOMPARE(sizeof(((psNcclProfilerEventDescr_v4*)nullptr)->type), size_t(1));
}

void TestCollectors::ncclPluginRecordsOperations()
{
    QTemporaryDir tmp;
    qputenv("PIPESCOPE_CAPTURE_DIR", tmp.path().toUtf8());
    qputenv("RANK", "3");
    qputenv("WORLD_SIZE", "4");
    void* lib = dlopen(PIPESCOPE_NCCL_LIB, RTLD_NOW | RTLD_LOCAL);
    QVERIFY2(lib, dlerror());
    auto* v5 = static_cast<psNcclProfiler_v5*>(dlsym(lib, "ncclProfiler_v5"));

    void* ctx = nullptr;
    int mask = -1;
    QCOMPARE(v5->init(&ctx, 0xfeedbeefULL, &mask, "pp", 1, 2, 1, nullptr), psNcclSuccess);
    QVERIFY(ctx);
    QCOMPARE(mask, psNcclProfileColl | psNcclProfileP2p);

    psNcclProfilerEventDescr_v5 d;
    std::memset(&d, 0, sizeof d);
    d.type = psNcclProfileColl;
    d.rank = 1;
    d.coll.seqNumber = 7;
    d.coll.func = "AllReduce";
    d.coll.count = 1024;
    d.coll.datatype = "ncclBfloat16";
    d.coll.algo = "Ring";
    d.coll.proto = "Simple";
    d.coll.nChannels = 2;
    void* ev = nullptr;
    QCOMPARE(v5->startEvent(ctx, &ev, &d), psNcclSuccess);
    QVERIFY(ev);
    QCOMPARE(v5->stopEvent(ev), psNcclSuccess);

    std::memset(&d, 0, sizeof d);
    d.type = psNcclProfileP2p;
    d.p2p.func = "Send";
    d.p2p.count = 100;
    d.p2p.datatype = "ncclFloat32";
    d.p2p.peer = 0;
    for (int i = 0; i < 2; ++i) {
        QCOMPARE(v5->startEvent(ctx, &ev, &d), psNcclSuccess);
        QCOMPARE(v5->stopEvent(ev), psNcclSuccess);
    }
    // Events of kinds it did not ask for get no handle.
    d.type = psNcclProfileProxyOp;
    QCOMPARE(v5->startEvent(ctx, &ev, &d), psNcclSuccess);
    QVERIFY(!ev);
    QCOMPARE(v5->stopEvent(nullptr), psNcclSuccess);
    QCOMPARE(v5->finalize(ctx), psNcclSuccess); // commits what was recorded

    QStringList files = QDir(tmp.path()).entryList({"*.pscap"}, QDir::Files);
    QCOMPARE(files.size(), 1);
    QVERIFY(files[0].startsWith("rank3."));
    QVERIFY(files[0].endsWith("." + QString::number(getpid()) + ".pscap"));
    std::string path = test::path(tmp, files[0].toUtf8().constData());
    QCOMPARE(queryInt(path, "SELECT count(*) FROM nccl_ops"), 3);
    QCOMPARE(queryInt(path, "SELECT bytes FROM nccl_ops WHERE func = 'AllReduce'"), 2048);
    QCOMPARE(queryInt(path, "SELECT seq FROM nccl_ops WHERE func = 'AllReduce'"), 7);
    QCOMPARE(queryText(path, "SELECT algo || '/' || proto FROM nccl_ops WHERE func = 'AllReduce'"),
             std::string("Ring/Simple"));
    QCOMPARE(queryText(path, "SELECT group_concat(seq) FROM (SELECT seq FROM nccl_ops WHERE func = 'Send' ORDER BY seq)"),
             std::string("0,1"));
    QCOMPARE(queryInt(path, "SELECT sum(bytes) FROM nccl_ops WHERE func = 'Send'"), 800);
    QCOMPARE(queryInt(path, "SELECT count(*) FROM nccl_ops WHERE end_ns < start_ns"), 0);
    QCOMPARE(queryInt(path, "SELECT rank FROM nccl_comms WHERE comm_hash = 4276993775"), 1);
    QCOMPARE(queryInt(path, "SELECT nranks FROM nccl_comms"), 2);
    QCOMPARE(queryText(path, "SELECT name FROM nccl_comms"), std::string("pp"));
    QCOMPARE(queryText(path, "SELECT value FROM meta WHERE key = 'rank'"), std::string("3"));
    QCOMPARE(queryText(path, "SELECT value FROM meta WHERE key = 'world_size'"), std::string("4"));
    qunsetenv("RANK");
    qunsetenv("WORLD_SIZE");
    qunsetenv("PIPESCOPE_CAPTURE_DIR");
}

QTEST_GUILESS_MAIN(TestCollectors)
#include "tst_collectors.moc"
