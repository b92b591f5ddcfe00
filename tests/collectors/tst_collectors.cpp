// The collectors without a GPU: CUPTI-shaped records through the translator
// into a capture file, and the two libraries loaded the way CUDA and NCCL
// load them.
#include "ActivityBuffers.h"
#include "ActivityRecords.h"
#include "PackedRecords.h"
#include "CaptureDb.h"
#include "NcclProfilerApi.h"
#include "RecordingWindows.h"
#include "TestSupport.h"
#include "TracePlan.h"
#include "WriterThread.h"
#include "import/capture/CaptureSchema.h"

#include <cupti_driver_cbid.h>
#include <cupti_nvtx_cbid.h>
#include <cupti_runtime_cbid.h>

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <stdexcept>
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


// Writes `launches` x (runtime launch record, kernel record) into `buffer`; returns the bytes used.
size_t fillLaunches(uint8_t* buffer, int launches, uint32_t firstCorrelation)
{
    size_t off = 0;
    for (int i = 0; i < launches; ++i) {
        auto api = record<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
        api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
        api.start = 1000 + 100 * static_cast<uint64_t>(i), api.end = api.start + 10;
        api.correlationId = firstCorrelation + static_cast<uint32_t>(i);
        std::memcpy(buffer + off, &api, sizeof api);
        off += sizeof api;
        auto k = record<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        k.start = api.start + 50, k.end = api.start + 90, k.correlationId = api.correlationId;
        k.name = i % 2 ? "kernel_odd" : "kernel_even";
        std::memcpy(buffer + off, &k, sizeof k);
        off += sizeof k;
    }
    return off;
}

bool allZero(const uint8_t* b, size_t n)
{
    return std::all_of(b, b + n, [](uint8_t v) { return v == 0; });
}

std::map<std::string, std::string> testEnv;
const char* fakeGetEnv(const char* name)
{
    auto it = testEnv.find(name);
    return it == testEnv.end() ? nullptr : it->second.c_str();
}

bool hasCallback(const std::vector<CallbackSite>& sites, CUpti_CallbackDomain domain, CUpti_CallbackId id)
{
    return std::find(sites.begin(), sites.end(), CallbackSite{domain, id}) != sites.end();
}

} // namespace

class TestCollectors : public QObject {
    Q_OBJECT

private slots:
    void translatorStoresCuptiRecords();
    void nvtxRangesPairAcrossBuffers();
    void apiCallsOutsideWindowsAreDropped();
    void writerIsNoOpAfterFailure();
    void captureOptions_data();
    void captureOptions();
    void tracePlanKeepsLaunchPathFree_data();
    void tracePlanKeepsLaunchPathFree();
    void apiCallSelection();
    void cuptiClockCheck();
    void recordingWindows();
    void bufferPoolHandsOutZeroedBuffers();
    void completedBuffersReachTheFile();
    void fullWriterQueueCountsDroppedRecords();
    void failedBufferStillReturnsToPool();
    void overheadRecordsAreSummed();
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

void TestCollectors::captureOptions_data()
{
    QTest::addColumn<QStringList>("env"); // NAME=VALUE
    QTest::addColumn<int>("startOn");
    QTest::addColumn<int>("api");
    QTest::addColumn<int>("clock");
    QTest::addColumn<int>("flushMs");
    QTest::addColumn<int>("buffers");
    QTest::addColumn<int>("warnings");
    auto so = [](StartOn s) { return static_cast<int>(s); };
    auto am = [](ApiMode a) { return static_cast<int>(a); };
    auto cm = [](ClockMode c) { return static_cast<int>(c); };
    QTest::newRow("defaults") << QStringList{} << so(StartOn::Immediately) << am(ApiMode::Launches)
                              << cm(ClockMode::Auto) << 1000 << 64 << 0;
    QTest::newRow("delay") << QStringList{"PIPESCOPE_CAPTURE_DELAY=2.5"} << so(StartOn::Delay)
                           << am(ApiMode::Launches) << cm(ClockMode::Auto) << 1000 << 64 << 0;
    QTest::newRow("profiler-api, all calls")
        << QStringList{"PIPESCOPE_CAPTURE_START_ON=profiler-api", "PIPESCOPE_CAPTURE_API=all"}
        << so(StartOn::ProfilerApi) << am(ApiMode::All) << cm(ClockMode::Auto) << 1000 << 64 << 0;
    QTest::newRow("nvtx, no calls, callback clock")
        << QStringList{"PIPESCOPE_CAPTURE_START_ON=nvtx:steps", "PIPESCOPE_CAPTURE_API=none",
                       "PIPESCOPE_CAPTURE_CLOCK=callback"}
        << so(StartOn::Nvtx) << am(ApiMode::None) << cm(ClockMode::Callback) << 1000 << 64 << 0;
    QTest::newRow("flush off, 8 buffers, CUPTI's clock")
        << QStringList{"PIPESCOPE_CAPTURE_FLUSH_MS=0", "PIPESCOPE_CAPTURE_BUFFERS=8", "PIPESCOPE_CAPTURE_CLOCK=cupti"}
        << so(StartOn::Immediately) << am(ApiMode::Launches) << cm(ClockMode::Cupti) << 0 << 8 << 0;
    QTest::newRow("bad values are ignored, each with a warning")
        << QStringList{"PIPESCOPE_CAPTURE_START_ON=nvtx:", "PIPESCOPE_CAPTURE_DELAY=soon",
                       "PIPESCOPE_CAPTURE_API=some",      "PIPESCOPE_CAPTURE_CLOCK=tsc",
                       "PIPESCOPE_CAPTURE_BUFFERS=1",     "PIPESCOPE_CAPTURE_FLUSH_MS=-5"}
        << so(StartOn::Immediately) << am(ApiMode::Launches) << cm(ClockMode::Auto) << 1000 << 64 << 6;
}

void TestCollectors::captureOptions()
{
    QFETCH(QStringList, env);
    QFETCH(int, startOn);
    QFETCH(int, api);
    QFETCH(int, clock);
    QFETCH(int, flushMs);
    QFETCH(int, buffers);
    QFETCH(int, warnings);
    testEnv.clear();
    for (const QString& kv : env) {
        qsizetype eq = kv.indexOf('=');
        testEnv[kv.left(eq).toStdString()] = kv.mid(eq + 1).toStdString();
    }
    std::vector<OptionWarning> said;
    CaptureOptions o = readCaptureOptions(fakeGetEnv, &said);
    QCOMPARE(static_cast<int>(o.startOn), startOn);
    QCOMPARE(static_cast<int>(o.api), api);
    QCOMPARE(static_cast<int>(o.clock), clock);
    QCOMPARE(o.flushPeriodMs, flushMs);
    QCOMPARE(static_cast<int>(o.bufferLimit), buffers);
    QCOMPARE(static_cast<int>(said.size()), warnings);
    if (o.startOn == StartOn::Nvtx)
        QCOMPARE(o.nvtxName, std::string("steps"));
    testEnv.clear();
}

void TestCollectors::tracePlanKeepsLaunchPathFree_data()
{
    QTest::addColumn<QString>("startOn");
    QTest::addColumn<QString>("api");
    QTest::addColumn<int>("triggerCallbacks");
    QTest::newRow("from the start") << "" << "" << 0;
    QTest::newRow("profiler-api") << "profiler-api" << "" << 4;
    QTest::newRow("nvtx range") << "nvtx:train" << "" << 6;
    QTest::newRow("all calls") << "" << "all" << 0;
    QTest::newRow("no calls") << "" << "none" << 0;
}

void TestCollectors::tracePlanKeepsLaunchPathFree()
{
    QFETCH(QString, startOn);
    QFETCH(QString, api);
    QFETCH(int, triggerCallbacks);
    testEnv.clear();
    if (!startOn.isEmpty())
        testEnv["PIPESCOPE_CAPTURE_START_ON"] = startOn.toStdString();
    if (!api.isEmpty())
        testEnv["PIPESCOPE_CAPTURE_API"] = api.toStdString();
    CaptureOptions o = readCaptureOptions(fakeGetEnv);
    testEnv.clear();
    TracePlan p = makeTracePlan(o);

    // Concurrent kernel records, never KERNEL (it serialises every kernel).
    auto has = [](const std::vector<CUpti_ActivityKind>& kinds, CUpti_ActivityKind k) {
        return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
    };
    QVERIFY(has(p.windowKinds, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    for (const auto* kinds : {&p.startupKinds, &p.windowKinds, &p.apiKinds})
        QVERIFY(!has(*kinds, CUPTI_ACTIVITY_KIND_KERNEL));
    QVERIFY(!has(p.windowKinds, CUPTI_ACTIVITY_KIND_OVERHEAD)); // a diagnostic, off by default
    QVERIFY(has(p.startupKinds, CUPTI_ACTIVITY_KIND_DEVICE));

    // Launch calls come as activity records: whole kinds only with --all-api,
    // CUPTI's per-call selection by default, nothing with none.
    QCOMPARE(p.apiKinds.size(), size_t(api == "all" ? 2 : 0));
    QCOMPARE(p.selectApiCalls, api.isEmpty());

    // The callbacks of the whole run: the flush at cudaDeviceReset and at
    // context destruction, nothing else.
    QCOMPARE(p.callbacks.size(), size_t(2));
    QVERIFY(hasCallback(p.callbacks, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020));
    QVERIFY(hasCallback(p.callbacks, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));
    QCOMPARE(static_cast<int>(p.triggerCallbacks.size()), triggerCallbacks);
    for (const auto* sites : {&p.callbacks, &p.triggerCallbacks}) {
        QVERIFY(!hasCallback(*sites, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
        QVERIFY(!hasCallback(*sites, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
        for (const CallbackSite& s : *sites) // NVTX: pushes and pops only, never marks or names
            if (s.domain == CUPTI_CB_DOMAIN_NVTX)
                QVERIFY(s.id != CUPTI_CBID_NVTX_nvtxMarkA && s.id != CUPTI_CBID_NVTX_nvtxNameOsThreadA);
    }
    if (startOn == "profiler-api") {
        QVERIFY(hasCallback(p.triggerCallbacks, CUPTI_CB_DOMAIN_RUNTIME_API,
                            CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000));
        QVERIFY(hasCallback(p.triggerCallbacks, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop));
    }
    if (startOn.startsWith("nvtx")) {
        QVERIFY(hasCallback(p.triggerCallbacks, CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePushA));
        QVERIFY(hasCallback(p.triggerCallbacks, CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxDomainRangePop));
    }

    // Buffers come zeroed and one per thread; sync records only for completed work.
    auto attribute = [&p](CUpti_ActivityAttribute a) -> std::optional<size_t> {
        for (const AttributeSetting& s : p.attributes)
            if (s.attribute == a)
                return s.value;
        return std::nullopt;
    };
    QCOMPARE(attribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER), std::optional<size_t>(1));
    QCOMPARE(attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER), std::optional<size_t>(1));
    QVERIFY(!p.allSyncRecords);
    QVERIFY(p.preallocatedBuffers >= 2 && p.preallocatedBuffers <= o.bufferLimit);
}

void TestCollectors::apiCallSelection()
{
    const std::map<uint32_t, std::string> runtime = {
        {1, "cudaLaunchKernel"}, {2, "cudaGetDevice"},    {3, "cudaMemcpyAsync"},      {4, "cudaMallocHost"},
        {5, "cudaEventQuery"},   {6, "cudaStreamQuery"},  {7, "cudaGraphLaunch"},      {8, "cudaStreamWaitEvent"},
        {9, "cudaFreeAsync"},    {10, "cudaGetLastError"}, {11, "cudaDeviceSynchronize"}};
    auto name = [](const std::map<uint32_t, std::string>& table) {
        return [&table](uint32_t id) {
            auto it = table.find(id);
            return it == table.end() ? std::string() : it->second;
        };
    };
    QCOMPARE(selectApiCalls(capture::kRuntime, 12, name(runtime)),
             (std::vector<CUpti_CallbackId>{1, 3, 4, 7, 8, 9, 11}));
    const std::map<uint32_t, std::string> driver = {
        {1, "cuLaunchKernelEx"}, {2, "cuCtxGetCurrent"}, {3, "cuMemAlloc"}, {4, "cuStreamQuery"},
        {5, "cuMemcpyHtoDAsync"}, {6, "cuKernelGetAttribute"}};
    QCOMPARE(selectApiCalls(capture::kDriver, 7, name(driver)), (std::vector<CUpti_CallbackId>{1, 3, 5}));
    QCOMPARE(stripVersion("cudaLaunchKernel_v7000"), std::string("cudaLaunchKernel"));
    QCOMPARE(stripVersion("cuMemAlloc_v2"), std::string("cuMemAlloc"));
    QCOMPARE(stripVersion("cuLaunchKernel"), std::string("cuLaunchKernel"));
    QCOMPARE(stripVersion("cu_vfoo"), std::string("cu_vfoo"));
}

void TestCollectors::cuptiClockCheck()
{
    const int64_t before = 1'700'000'000'000'000'000, after = before + 2'000;
    QVERIFY(cuptiClockIsRealtime(before, uint64_t(before + 1'000), after));
    QVERIFY(cuptiClockIsRealtime(before, uint64_t(before - 1'000'000), after)); // coarse, within slack
    QVERIFY(!cuptiClockIsRealtime(before, 123'456'789'000ULL, after));          // CLOCK_MONOTONIC_RAW (WSL)
    QVERIFY(!cuptiClockIsRealtime(before, 0, after));
}

void TestCollectors::recordingWindows()
{
    RecordingWindows w;
    QVERIFY(!w.contains(100));
    QVERIFY(!w.close(50));
    w.open(100);
    QVERIFY(w.isOpen());
    QVERIFY(!w.contains(99));
    QVERIFY(w.contains(100) && w.contains(1'000'000));
    w.open(150); // already open: the first start stands
    QVERIFY(w.contains(120));
    auto span = w.close(200);
    QVERIFY(span);
    QCOMPARE(span->first, int64_t(100));
    QCOMPARE(span->second, int64_t(200));
    QVERIFY(!w.isOpen());
    QVERIFY(w.contains(150) && w.contains(200));
    QVERIFY(!w.contains(201));
    w.open(300);
    QVERIFY(!w.contains(250));
    QVERIFY(w.contains(400));
}

void TestCollectors::bufferPoolHandsOutZeroedBuffers()
{
    ActivityBufferPool pool(64 * 1024);
    pool.setLimit(3);
    QCOMPARE(pool.preallocate(2), size_t(2));
    QCOMPARE(pool.allocated(), size_t(2));
    uint8_t* a = pool.acquire();
    uint8_t* b = pool.acquire();
    uint8_t* c = pool.acquire(); // the third is allocated on demand
    QVERIFY(a && b && c);
    QCOMPARE(reinterpret_cast<uintptr_t>(c) % 8, uintptr_t(0));
    QVERIFY(!pool.acquire()); // at the limit: CUPTI gets none and counts what it drops
    QVERIFY(allZero(a, pool.bufferSize()) && allZero(c, pool.bufferSize()));
    std::memset(a, 0xab, pool.bufferSize());
    pool.release(a);
    QCOMPARE(pool.available(), size_t(1));
    uint8_t* again = pool.acquire();
    QCOMPARE(again, a);
    QVERIFY(allZero(again, pool.bufferSize()));
    // A full 4 MiB buffer holds thousands of launches (kernel + launch call records).
    QVERIFY(ActivityBufferPool::kBufferSize / (sizeof(CUpti_ActivityKernel10) + 2 * sizeof(CUpti_ActivityAPI))
            > 10'000);
}

void TestCollectors::completedBuffersReachTheFile()
{
    QTemporaryDir tmp;
    std::string path = test::path(tmp, "b.pscap");
    WriterThread writer;
    std::string error;
    QVERIFY2(writer.start(path, testMeta(), error), error.c_str());
    ActivityBufferPool pool(256 * 1024);
    pool.setLimit(4);
    pool.preallocate(2);
    ActivityTranslator tr([](int, uint32_t) { return std::string("cudaLaunchKernel"); });
    RecordingWindows windows;
    windows.open(1000 + 100 * 300); // launches 300.. only
    tr.setApiFilter([&windows](int64_t ts) { return windows.contains(ts); });
    int launches = 0;
    for (uint32_t first : {0u, 500u}) {
        uint8_t* buf = pool.acquire();
        QVERIFY(buf);
        size_t used = fillLaunches(buf, 500, first);
        QVERIFY(used < pool.bufferSize());
        QVERIFY(postCompletedBuffer(writer, pool, tr, nextPacked, buf, used));
        launches += 500;
    }
    QVERIFY(postCompletedBuffer(writer, pool, tr, nextPacked, pool.acquire(), 0)); // an empty one comes back too
    QVERIFY(writer.flush());
    writer.stop();
    QCOMPARE(pool.available(), pool.allocated()); // every buffer is back in the pool
    QCOMPARE(queryInt(path, "SELECT count(*) FROM gpu_activities WHERE kind = 0"), int64_t(launches));
    // Both buffers used the same start times: the window keeps launches 300..499 of each.
    QCOMPARE(queryInt(path, "SELECT count(*) FROM api_calls"), 400);
    QCOMPARE(queryInt(path, "SELECT count(DISTINCT name_id) FROM gpu_activities"), 2);
    QCOMPARE(queryInt(path, "SELECT count(*) FROM dropped"), 0);
}

void TestCollectors::fullWriterQueueCountsDroppedRecords()
{
    QTemporaryDir tmp;
    std::string path = test::path(tmp, "q.pscap");
    WriterThread writer;
    std::string error;
    QVERIFY(writer.start(path, testMeta(), error, {}, std::chrono::milliseconds(1000), 1));
    // Hold the writer in a job, fill its one-job queue, then hand it a buffer.
    std::mutex m;
    std::condition_variable cv;
    bool running = false, release = false;
    QVERIFY(writer.post([&](CaptureDb&) {
        std::unique_lock lock(m);
        running = true;
        cv.notify_all();
        cv.wait(lock, [&] { return release; });
    }));
    {
        std::unique_lock lock(m);
        QVERIFY(cv.wait_for(lock, std::chrono::seconds(10), [&] { return running; }));
    }
    QVERIFY(writer.post([](CaptureDb&) {}));
    ActivityBufferPool pool(64 * 1024);
    ActivityTranslator tr(nullptr);
    uint8_t* buf = pool.acquire();
    size_t used = fillLaunches(buf, 100, 0);
    QVERIFY(!postCompletedBuffer(writer, pool, tr, nextPacked, buf, used));
    QCOMPARE(pool.available(), size_t(1)); // back at once, not leaked
    {
        std::lock_guard lock(m);
        release = true;
    }
    cv.notify_all();
    QVERIFY(writer.flush());
    writer.stop();
    QCOMPARE(queryInt(path, "SELECT count FROM dropped WHERE source = 'writer_queue'"), 200);
    QCOMPARE(queryInt(path, "SELECT count(*) FROM gpu_activities"), 0);
}

// A record iterator that fails mid-buffer (out of memory while storing, say).
static bool nextThrows(uint8_t*, size_t, CUpti_Activity**)
{
    throw std::runtime_error("store failed");
}

void TestCollectors::failedBufferStillReturnsToPool()
{
    QTemporaryDir tmp;
    WriterThread writer;
    std::string error;
    QVERIFY2(writer.start(test::path(tmp, "f.pscap"), testMeta(), error), error.c_str());
    ActivityBufferPool pool(64 * 1024);
    pool.setLimit(1);
    ActivityTranslator tr(nullptr);
    uint8_t* buf = pool.acquire();
    QVERIFY(buf);
    QVERIFY(postCompletedBuffer(writer, pool, tr, nextThrows, buf, 128));
    QVERIFY(writer.flush());
    writer.stop();
    // The writer skips the failed job; the buffer must still come back, or
    // CUPTI runs out of buffers and drops every later record.
    QCOMPARE(pool.available(), size_t(1));
    QVERIFY(pool.acquire() != nullptr);
}

void TestCollectors::overheadRecordsAreSummed()
{
    QTemporaryDir tmp;
    std::string path = test::path(tmp, "o.pscap");
    CaptureDb db;
    std::string error;
    QVERIFY(db.open(path, testMeta(), error));
    ActivityTranslator tr(nullptr);
    db.begin();
    auto overhead = [&](CUpti_ActivityOverheadKind kind, uint64_t start, uint64_t end, bool details) {
        auto o = record<CUpti_ActivityOverhead3>(CUPTI_ACTIVITY_KIND_OVERHEAD);
        o.overheadKind = kind, o.start = start, o.end = end;
        // CUPTI hands details over for the client to free.
        o.overheadData = details ? std::malloc(sizeof(CUpti_ActivityOverheadCommandBufferFullData)) : nullptr;
        QVERIFY(tr.store(reinterpret_cast<CUpti_Activity*>(&o), db));
    };
    overhead(CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION, 100, 400, false);
    overhead(CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION, 1000, 1100, false);
    overhead(CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL, 2000, 7000, true);
    overhead(CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH, 0, 0, false); // no times: counted, no duration
    tr.finish(db);
    db.commit();
    db.close();
    auto meta = [&](const char* key) {
        return queryText(path, std::string("SELECT value FROM meta WHERE key = '") + key + "'");
    };
    QCOMPARE(meta("cupti.overhead.instrumentation.count"), std::string("2"));
    QCOMPARE(meta("cupti.overhead.instrumentation.ns"), std::string("400"));
    QCOMPARE(meta("cupti.overhead.command_buffer_full.ns"), std::string("5000"));
    QCOMPARE(meta("cupti.overhead.buffer_flush.count"), std::string("1"));
    QCOMPARE(meta("cupti.overhead.buffer_flush.ns"), std::string("0"));
    QCOMPARE(queryInt(path, "SELECT count(*) FROM gpu_activities"), 0);
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
