// The Kineto importer against the real traces in the external corpus (facts
// from its README, computed independently with Python's decimal module) and
// against small hand-written edge and bad inputs.
#include "TestSupport.h"

#include "import/Import.h"
#include "import/kineto/JsonStream.h"
#include "import/common/FileNames.h"
#include "import/kineto/KinetoNames.h"
#include "store/Schema.h"
#include "store/Store.h"
#include "store/StoreWriter.h"
#include "util/Error.h"

#include <QDir>
#include <QFile>
#include <QtTest>
#include <nlohmann/json.hpp>
#include <zlib.h>

using namespace pipescope;

namespace {

struct Imported {
    ImportedSource source;
    std::string store;
};

Imported importOne(const std::string& input, const QTemporaryDir& dir, const ImportOptions& options = {},
                   const char* storeName = "out.pipescope")
{
    Imported r;
    r.store = test::path(dir, storeName);
    StoreWriter writer(r.store);
    ImportOptions o = options;
    o.progress = false;
    r.source = importKineto(input, writer, o);
    writer.finish();
    return r;
}

int64_t queryInt(Store& store, const std::string& sql)
{
    auto st = store.database().prepare(sql);
    if (!st.step())
        return -1;
    int64_t v = st.isNull(0) ? -1 : st.int64(0);
    st.reset();
    return v;
}

// "a:1,b:2" from a two-column query, for comparing small tables in one line.
QString queryPairs(Store& store, const std::string& sql)
{
    auto st = store.database().prepare(sql);
    QStringList parts;
    while (st.step())
        parts << QString::fromStdString(st.string(0)) + ":" + QString::number(st.int64(1));
    st.reset();
    return parts.join(',');
}

std::string testData(const char* name)
{
    return std::string(PIPESCOPE_TESTDATA) + "/kineto/" + name;
}

void writeFile(const std::string& path, const QByteArray& bytes)
{
    QFile f(QString::fromStdString(path));
    QVERIFY(f.open(QIODevice::WriteOnly));
    QCOMPARE(f.write(bytes), bytes.size());
}

QByteArray gzipBytes(const QByteArray& raw)
{
    z_stream z{};
    deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    QByteArray out(static_cast<int>(deflateBound(&z, static_cast<uLong>(raw.size()))) + 64, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
    z.avail_in = static_cast<uInt>(raw.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    deflate(&z, Z_FINISH);
    out.resize(static_cast<int>(z.total_out));
    deflateEnd(&z);
    return out;
}

const Diagnostic* findDiagnostic(const StoreSummary& s, const std::string& kind)
{
    for (const Diagnostic& d : s.diagnostics)
        if (d.kind == kind)
            return &d;
    return nullptr;
}

// The values a JSON text holds, in document order, as "kind+text" strings;
// the same notation for the streaming parser and for nlohmann::json.
struct StreamValues {
    QStringList out;
    bool null() { return add("n"); }
    bool boolean(bool b) { return add(b ? "t" : "f"); }
    bool integer(int64_t v) { return add("i" + QString::number(v)); }
    bool unsignedInteger(uint64_t v) { return add("u" + QString::number(v)); }
    bool floating(std::string_view t) { return add("d" + QString::fromUtf8(t.data(), qsizetype(t.size()))); }
    bool string(std::string_view t) { return add("s" + QString::fromUtf8(t.data(), qsizetype(t.size()))); }
    bool key(std::string_view t) { return add("k" + QString::fromUtf8(t.data(), qsizetype(t.size()))); }
    bool startObject() { return add("{"); }
    bool endObject() { return add("}"); }
    bool startArray() { return add("["); }
    bool endArray() { return add("]"); }
    bool add(const QString& v)
    {
        out << v;
        return true;
    }
};

struct NlohmannValues : nlohmann::json_sax<nlohmann::json> {
    QStringList out;
    bool null() override { return add("n"); }
    bool boolean(bool b) override { return add(b ? "t" : "f"); }
    bool number_integer(number_integer_t v) override { return add("i" + QString::number(v)); }
    bool number_unsigned(number_unsigned_t v) override
    {
        return add((v <= uint64_t(INT64_MAX) ? "i" : "u") + QString::number(v));
    }
    bool number_float(number_float_t, const string_t& t) override { return add("d" + QString::fromStdString(t)); }
    bool string(string_t& t) override { return add("s" + QString::fromStdString(t)); }
    bool binary(binary_t&) override { return add("b"); }
    bool key(string_t& t) override { return add("k" + QString::fromStdString(t)); }
    bool start_object(std::size_t) override { return add("{"); }
    bool end_object() override { return add("}"); }
    bool start_array(std::size_t) override { return add("["); }
    bool end_array() override { return add("]"); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
    bool add(const QString& v)
    {
        out << v;
        return true;
    }
};

// Parses text handed over in chunks of `chunk` bytes.
bool streamParse(std::string_view text, size_t chunk, StreamValues& values, kineto::JsonError* error = nullptr)
{
    size_t at = 0;
    kineto::JsonParser<StreamValues> parser(
        [&] {
            std::string_view c = text.substr(at, chunk);
            at += c.size();
            return c;
        },
        values);
    bool ok = parser.parse();
    if (error)
        *error = parser.error();
    return ok;
}

} // namespace

class TestKineto : public QObject {
    Q_OBJECT

private slots:
    void externalFacts_data();
    void externalFacts();
    void subMicrosecondTimestampsAreExact();
    void ncclArgsFromKernels();
    void timeBase_data();
    void timeBase();
    void gpuInfoFromDeviceProperties();
    void distributedInfoAfterTraceEvents();
    void rankFromFileNameAndOption();
    void sameRankTwiceNamesTheInput();
    void correlationFromFlows();
    void ncclArgsJoinedFromCpuOps();
    void coalescedBatchGetsEachOp();
    void simulatedTraceMarksStore();
    void badRecordsAreCountedNotFatal();
    void badFiles_data();
    void badFiles();
    void names();
    void jsonParserMatchesNlohmann_data();
    void jsonParserMatchesNlohmann();
    void jsonParserRejects_data();
    void jsonParserRejects();
    void moduleCallsAndSequenceNumbers();
    void nestingOfEqualRanges();
    void memoryEventsKeepTotals();
    void threadNamesAreKept();
};

void TestKineto::externalFacts_data()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<int>("rank");
    QTest::addColumn<int>("worldSize"); // -1: absent
    QTest::addColumn<int>("device");    // -1: no GPU
    QTest::addColumn<qint64>("kernels");
    QTest::addColumn<qint64>("memcpys");
    QTest::addColumn<qint64>("memsets");
    QTest::addColumn<qint64>("syncs");
    QTest::addColumn<QString>("cpuKinds");       // cpu_ranges per kind
    QTest::addColumn<QString>("kernelsByStream"); // stream:kernels
    QTest::addColumn<QString>("ncclByKind");      // kind per kernel: the CPU op that launched it (nccl:all_to_all,
                                                  // nccl:all_reduce, ...) outranks a SendRecv kernel name
    QTest::addColumn<qint64>("firstKernelNs");
    QTest::addColumn<qint64>("lastKernelEndNs");
    QTest::addColumn<qint64>("kernelBusyNs");
    QTest::addColumn<qint64>("gpuBusyNs"); // kernels + memcpy + memset
    QTest::addColumn<qint64>("gpuSpanNs");
    QTest::addColumn<qint64>("kernelsWithLaunch");

    // kind numbers: 0 annotation, 2 cpu_op, 3 runtime, 5 gpu annotation
    QTest::newRow("hta-nccl-2rank-r0")
        << "hta-nccl-2rank-r0.json.gz" << 0 << 2 << 0 << qint64(2700) << qint64(960) << qint64(114) << qint64(0)
        << "0:42,2:14346,3:8740,5:30" << "7:2679,40:21" << "AllReduce:15,Broadcast:6" << qint64(4458676422880181)
        << qint64(4458677083431186) << qint64(155215315) << qint64(157500014) << qint64(660551005) << qint64(2700);
    QTest::newRow("hta-sampled-128rank-r0")
        << "hta-sampled-128rank-r0.json.gz" << 0 << 128 << 0 << qint64(1154) << qint64(40) << qint64(10) << qint64(0)
        << "0:73,2:2329,3:1204" << "7:1036,23:108,84:8,203:2" << "AllGather:2,AllReduce:4,AllToAll:4" << qint64(1682725898082228000)
        << qint64(1682725899305046000) << qint64(547303000) << qint64(547656000) << qint64(1222847000) << qint64(1154);
    QTest::newRow("hta-sampled-128rank-r1")
        << "hta-sampled-128rank-r1.json.gz" << 1 << 128 << 1 << qint64(1104) << qint64(40) << qint64(10) << qint64(0)
        << "0:65,2:2302,3:1154" << "7:986,23:108,84:8,203:2" << "AllGather:2,AllReduce:4,AllToAll:4" << qint64(1682725898082381000)
        << qint64(1682725899313563000) << qint64(575496000) << qint64(580050000) << qint64(1231186000) << qint64(1104);
    QTest::newRow("hta-alexnet-1rank")
        << "hta-alexnet-1rank.json.gz" << 0 << -1 << 0 << qint64(79) << qint64(16) << qint64(3) << qint64(41)
        << "0:8,2:359,3:361" << "7:73,20:6" << "" << qint64(1695835573023613000) << qint64(1695835585863857000)
        << qint64(10630000) << qint64(66141000) << qint64(12920244000) << qint64(79);
    QTest::newRow("hta-amd-mi250-1rank")
        << "hta-amd-mi250-1rank.json.gz" << 0 << -1 << 2 << qint64(14) << qint64(2) << qint64(0) << qint64(0)
        << "0:3,2:70,3:21,5:2" << "0:14" << "" << qint64(4203669603771648) << qint64(4203669612366093)
        << qint64(110881) << qint64(149042) << qint64(8911887) << qint64(14);
    QTest::newRow("hta-ns-resolution-1rank")
        << "hta-ns-resolution-1rank.json.gz" << 0 << 1 << 0 << qint64(4350) << qint64(1600) << qint64(145) << qint64(0)
        << "0:70,2:23910,3:15329,5:15" << "7:4350" << "" << qint64(1712195495505582988)
        << qint64(1712195495985612167) << qint64(468153602) << qint64(472454441) << qint64(480029179) << qint64(4350);
    QTest::newRow("hta-no-distinfo")
        << "hta-no-distinfo.json.gz" << 0 << -1 << -1 << qint64(0) << qint64(0) << qint64(0) << qint64(0)
        << "0:43,2:2424" << "" << "" << qint64(-1) << qint64(-1) << qint64(0) << qint64(0) << qint64(-1) << qint64(0);
}

void TestKineto::externalFacts()
{
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QFETCH(QString, file);
    QFETCH(int, rank);
    QFETCH(int, worldSize);
    QFETCH(int, device);
    QTemporaryDir dir;
    Imported imp = importOne(test::externalData(("kineto/" + file).toUtf8().constData()), dir);
    QCOMPARE(imp.source.ranks, std::vector<int>{rank});

    Store store(imp.store);
    StoreSummary s = store.summary();
    QCOMPARE(s.ranks.size(), size_t(1));
    QCOMPARE(s.ranks[0].rank, rank);
    QCOMPARE(s.ranks[0].worldSize.value_or(-1), worldSize);
    QCOMPARE(s.ranks[0].sourceId, std::optional<int64_t>(imp.source.sourceId));

    // Device count comes from the activities, not from deviceProperties.
    if (device < 0) {
        QVERIFY(s.gpus.empty());
        QVERIFY(s.gpuSummaries.empty());
    } else {
        QCOMPARE(s.gpus.size(), size_t(1));
        QCOMPARE(s.gpus[0].device, device);
        QCOMPARE(s.ranks[0].device, std::optional<int>(device));
        QCOMPARE(s.gpuSummaries.size(), size_t(1));
        const GpuSummary& g = s.gpuSummaries[0];
        QCOMPARE(g.rank, rank);
        QCOMPARE(g.device, device);
        QTEST(qint64(g.kernels), "kernels");
        QTEST(qint64(g.memcpys), "memcpys");
        QTEST(qint64(g.memsets), "memsets");
        QTEST(qint64(g.syncs), "syncs");
        QTEST(qint64(g.kernelFirst.value_or(-1)), "firstKernelNs");
        QTEST(qint64(g.kernelLast.value_or(-1)), "lastKernelEndNs");
        QTEST(qint64(g.kernelBusy), "kernelBusyNs");
        QTEST(qint64(g.gpuBusy), "gpuBusyNs");
        QTEST(qint64(g.gpuLast.value_or(0) - g.gpuFirst.value_or(0)), "gpuSpanNs");
    }
    QTEST(queryPairs(store, "SELECT kind, COUNT(*) FROM cpu_ranges GROUP BY kind ORDER BY kind"), "cpuKinds");
    QTEST(queryPairs(store, "SELECT s.stream, COUNT(*) FROM activities a JOIN streams s ON s.id = a.stream_id"
                            " WHERE a.kind = 0 GROUP BY s.stream ORDER BY s.stream"),
          "kernelsByStream");
    QTEST(queryPairs(store, "SELECT n.kind, COUNT(*) FROM nccl_ops n JOIN activities a ON a.id = n.activity_id"
                            " WHERE a.kind = 0 GROUP BY n.kind ORDER BY n.kind"),
          "ncclByKind");
    QTEST(qint64(queryInt(store, "SELECT COUNT(*) FROM activities WHERE kind = 0 AND launch_id IS NOT NULL")),
          "kernelsWithLaunch");
    // Nothing of this file is left on a provisional rank.
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM activities WHERE rank <> " + std::to_string(rank)), int64_t(0));
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM cpu_ranges WHERE rank <> " + std::to_string(rank)), int64_t(0));
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM streams WHERE rank <> " + std::to_string(rank)), int64_t(0));
}

void TestKineto::subMicrosecondTimestampsAreExact()
{
    // ~1.7e15 us with three decimals: a double loses the nanoseconds (off by
    // +19.648 us on the busy union), exact decimal parsing keeps them.
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QTemporaryDir dir;
    Imported imp = importOne(test::externalData("kineto/hta-ns-resolution-1rank.json.gz"), dir);
    Store store(imp.store);
    StoreSummary s = store.summary();
    QCOMPARE(s.gpuSummaries.size(), size_t(1));
    QCOMPARE(s.gpuSummaries[0].kernelBusy, TimeNs(468153602));
    QCOMPARE(queryInt(store, "SELECT MIN(start_ns) FROM activities WHERE kind = 0"), int64_t(1712195495505582988));
    // Kernels whose start has a non-zero nanosecond part (a double would round most of them away).
    QVERIFY(queryInt(store, "SELECT COUNT(*) FROM activities WHERE kind = 0 AND start_ns % 1000 <> 0") > 4000);
}

void TestKineto::ncclArgsFromKernels()
{
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QTemporaryDir dir;
    Imported imp = importOne(test::externalData("kineto/hta-nccl-2rank-r0.json.gz"), dir);
    Store store(imp.store);
    // The first broadcast: 53120 Float elements over process group "0" (default_pg, ranks 0 and 1).
    auto st = store.database().prepare(
        "SELECT kind, is_p2p, in_nelems, out_nelems, bytes, dtype, group_name, group_desc, group_ranks, group_size,"
        " start_ns, end_ns FROM nccl_ops ORDER BY start_ns LIMIT 1");
    QVERIFY(st.step());
    QCOMPARE(st.string(0), std::string("Broadcast"));
    QCOMPARE(st.int64(1), int64_t(0));
    QCOMPARE(st.int64(2), int64_t(53120));
    QCOMPARE(st.int64(3), int64_t(53120));
    QCOMPARE(st.int64(4), int64_t(53120 * 4));
    QCOMPARE(st.string(5), std::string("Float"));
    QCOMPARE(st.string(6), std::string("0"));
    QCOMPARE(st.string(7), std::string("default_pg"));
    QCOMPARE(st.string(8), std::string("[0,1]"));
    QCOMPARE(st.int64(9), int64_t(2));
    QCOMPARE(st.int64(10), int64_t(4458676423385774));
    QCOMPARE(st.int64(11), int64_t(4458676423385774 + 30975));
    st.reset();
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM nccl_ops WHERE stream_id IS NULL OR activity_id IS NULL"), int64_t(0));
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM process_groups"), int64_t(1));
    auto pg = store.database().prepare("SELECT rank, name, desc, ranks, size FROM process_groups");
    QVERIFY(pg.step());
    QCOMPARE(pg.int64(0), int64_t(0));
    QCOMPARE(pg.string(1), std::string("0"));
    QCOMPARE(pg.string(2), std::string("default_pg"));
    QCOMPARE(pg.string(3), std::string("[0,1]"));
    QCOMPARE(pg.int64(4), int64_t(2));
    pg.reset();
}

void TestKineto::timeBase_data()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<qint64>("timeBase");
    QTest::addColumn<bool>("absolute");
    // baseTimeNanoseconds present: ts counts from it.
    QTest::newRow("amd baseTime") << "hta-amd-mi250-1rank.json.gz" << qint64(1735632360000000000) << true;
    QTest::newRow("nccl baseTime") << "hta-nccl-2rank-r0.json.gz" << qint64(1711964646000000000) << true;
    // No base: ts are epoch microseconds already.
    QTest::newRow("epoch us") << "hta-ns-resolution-1rank.json.gz" << qint64(0) << true;
}

void TestKineto::timeBase()
{
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QFETCH(QString, file);
    QTemporaryDir dir;
    Imported imp = importOne(test::externalData(("kineto/" + file).toUtf8().constData()), dir);
    QTEST(qint64(imp.source.timeBase), "timeBase");
    QTEST(imp.source.absoluteClock, "absolute");
    Store store(imp.store);
    QTEST(qint64(queryInt(store, "SELECT time_base_ns FROM sources")), "timeBase");
}

void TestKineto::gpuInfoFromDeviceProperties()
{
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QTemporaryDir dir;
    Imported imp = importOne(test::externalData("kineto/hta-ns-resolution-1rank.json.gz"), dir);
    Store store(imp.store);
    StoreSummary s = store.summary();
    QCOMPARE(s.gpus.size(), size_t(1));
    QCOMPARE(s.gpus[0].name, std::string("Tesla V100-SXM2-32GB"));
    QCOMPARE(s.gpus[0].memoryBytes, std::optional<int64_t>(34079637504));
    QCOMPARE(s.gpus[0].smCount, std::optional<int>(80));
    QCOMPARE(s.gpus[0].computeCapability, std::string("7.0"));
    QCOMPARE(s.ranks[0].host, std::string("twshared39868.02.pnb3.facebook.com"));
    QCOMPARE(s.ranks[0].pid, std::optional<int64_t>(1102));
}

void TestKineto::distributedInfoAfterTraceEvents()
{
    // Records are written before the rank is known and moved to it at the end.
    QTemporaryDir dir;
    Imported imp = importOne(testData("distinfo-after-events.json"), dir);
    QCOMPARE(imp.source.ranks, std::vector<int>{5});
    QCOMPARE(imp.source.absoluteClock, false); // 1000 us since the epoch is not a wall clock
    Store store(imp.store);
    StoreSummary s = store.summary();
    QCOMPARE(s.ranks.size(), size_t(1));
    QCOMPARE(s.ranks[0].rank, 5);
    QCOMPARE(s.ranks[0].worldSize, std::optional<int>(8));
    QCOMPARE(s.ranks[0].host, std::string("node-17"));
    QCOMPARE(s.ranks[0].pid, std::optional<int64_t>(100));
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM activities WHERE rank = 5"), int64_t(3));
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM cpu_ranges WHERE rank = 5"), int64_t(2));
    QCOMPARE(queryPairs(store, "SELECT stream, COUNT(*) FROM streams WHERE rank = 5 AND device = 3 GROUP BY stream"),
             QString("7:1,9:1"));
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM streams WHERE rank <> 5"), int64_t(0));
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM activities WHERE launch_id IS NOT NULL"), int64_t(1));
    QCOMPARE(s.gpus.size(), size_t(1));
    QCOMPARE(s.gpus[0].rank, 5);
    QCOMPARE(s.gpus[0].name, std::string("Test GPU"));
    QCOMPARE(s.gpus[0].computeCapability, std::string("9.0"));
    QCOMPARE(queryPairs(store, "SELECT name || '=' || desc || ranks, size FROM process_groups WHERE rank = 5 ORDER BY name"),
             QString("0=default_pg[0,1,2,3,4,5,6,7]:8,3=pp[1,5]:2"));
    // Sub-microsecond float times and memcpy details.
    auto st = store.database().prepare("SELECT start_ns, end_ns, grid, block FROM activities WHERE kind = 0");
    QVERIFY(st.step());
    QCOMPARE(st.int64(0), int64_t(1010125));
    QCOMPARE(st.int64(1), int64_t(1020126));
    QCOMPARE(st.string(2), std::string("4,2,1"));
    QCOMPARE(st.string(3), std::string("128,1,1"));
    st.reset();
    QCOMPARE(queryInt(store, "SELECT copy_kind FROM activities WHERE kind = 1"), int64_t(CopyKind::DtoH));
    QCOMPARE(queryInt(store, "SELECT bytes FROM activities WHERE kind = 1"), int64_t(4096));
    QCOMPARE(queryInt(store, "SELECT bytes FROM activities WHERE kind = 2"), int64_t(64));
}

void TestKineto::rankFromFileNameAndOption()
{
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QTemporaryDir dir;
    // The AMD trace has no distributedInfo: its rank comes from the file name...
    std::string named = test::path(dir, "job_rank_3.json.gz");
    QVERIFY(QFile::copy(QString::fromStdString(test::externalData("kineto/hta-amd-mi250-1rank.json.gz")),
                        QString::fromStdString(named)));
    Imported imp = importOne(named, dir, {}, "a.pipescope");
    QCOMPARE(imp.source.ranks, std::vector<int>{3});
    {
        Store store(imp.store);
        QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM activities WHERE rank = 3"), int64_t(16));
        QCOMPARE(queryInt(store, "SELECT rank FROM sources"), int64_t(3));
    }
    // ...and an explicit rank overrides both the file name and distributedInfo.
    ImportOptions o;
    o.rank = 7;
    imp = importOne(named, dir, o, "b.pipescope");
    QCOMPARE(imp.source.ranks, std::vector<int>{7});
    imp = importOne(test::externalData("kineto/hta-sampled-128rank-r1.json.gz"), dir, o, "c.pipescope");
    QCOMPARE(imp.source.ranks, std::vector<int>{7});
    Store store(imp.store);
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM activities WHERE rank <> 7"), int64_t(0));
    QCOMPARE(queryInt(store, "SELECT MIN(rank) FROM ranks"), int64_t(7));
}

void TestKineto::sameRankTwiceNamesTheInput()
{
    // The first file's rank comes from its name (settled after its events),
    // the second's from distributedInfo: the clash must be reported against
    // the inputs, not as a SQL error about the store's temporary file.
    QTemporaryDir dir;
    const QByteArray events = R"("traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
        "ts": 1, "dur": 1, "args": {"device": 0, "stream": 7}}])";
    std::string named = test::path(dir, "job-rank-0.json");
    std::string second = test::path(dir, "second.json");
    writeFile(named, "{" + events + "}");
    writeFile(second, R"({"distributedInfo": {"rank": 0}, )" + events + "}");
    ImportJobOptions o;
    o.inputs = {named, second};
    o.output = test::path(dir, "job.pipescope");
    o.progress = false;
    QString message;
    try {
        importJob(o);
    } catch (const Error& e) {
        message = e.what();
    }
    QVERIFY2(message.contains("second.json") && message.contains("rank 0"), qPrintable(message));
    QVERIFY2(!message.contains(".tmp-"), qPrintable(message));
    QVERIFY(!QFile::exists(QString::fromStdString(o.output)));
}

void TestKineto::correlationFromFlows()
{
    // No args.correlation anywhere: ac2g and the older async_cpu_to_gpu flows
    // link launches; fwdbwd flows do not.
    QTemporaryDir dir;
    Imported imp = importOne(testData("flows-only.json"), dir);
    Store store(imp.store);
    QCOMPARE(queryPairs(store, "SELECT n.value, a.correlation FROM activities a JOIN strings n ON n.id = a.name_id"
                               " WHERE a.correlation IS NOT NULL ORDER BY a.start_ns"),
             QString("k1:501,k2:502,Memcpy HtoD (Pinned -> Device):503"));
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM activities WHERE launch_id IS NOT NULL"), int64_t(3));
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM cpu_ranges WHERE correlation IS NOT NULL"), int64_t(3));
    QCOMPARE(queryInt(store, "SELECT copy_kind FROM activities WHERE kind = 1"), int64_t(CopyKind::HtoD));
    StoreSummary s = store.summary();
    const Diagnostic* d = findDiagnostic(s, "no_correlation");
    QVERIFY(d);
    QVERIFY(QString::fromStdString(d->example).contains("1 GPU activities")); // k3 has no flow
}

void TestKineto::ncclArgsJoinedFromCpuOps()
{
    QTemporaryDir dir;
    Imported imp = importOne(testData("nccl-cpu-args.json"), dir);
    Store store(imp.store);
    auto st = store.database().prepare(
        "SELECT kind, is_p2p, in_nelems, out_nelems, bytes, dtype, group_name, group_desc, group_ranks, group_size, peer,"
        " seq FROM nccl_ops ORDER BY start_ns");
    // Generic kernel: everything from record_param_comms with the same External id.
    QVERIFY(st.step());
    QCOMPARE(st.string(0), std::string("AllGather"));
    QCOMPARE(st.int64(1), int64_t(0));
    QCOMPARE(st.int64(2), int64_t(1024));
    QCOMPARE(st.int64(3), int64_t(4096));
    QCOMPARE(st.int64(4), int64_t(4096 * 2));
    QCOMPARE(st.string(5), std::string("BFloat16"));
    QCOMPARE(st.string(6), std::string("2"));
    QCOMPARE(st.string(7), std::string("dp"));
    QCOMPARE(st.string(8), std::string("[0,1,2,3]"));
    QCOMPARE(st.int64(9), int64_t(4));
    QVERIFY(st.isNull(10));
    QCOMPARE(st.int64(11), int64_t(17));
    // SendRecv kernel whose launch runs inside a record_param_comms "send": the
    // explicit collective name wins over the kernel's name.
    QVERIFY(st.step());
    QCOMPARE(st.string(0), std::string("Send"));
    QCOMPARE(st.int64(1), int64_t(1));
    QCOMPARE(st.int64(4), int64_t(256 * 4));
    QCOMPARE(st.string(7), std::string("pp"));
    QCOMPARE(st.int64(10), int64_t(3));
    // No CPU op to join: the kernel's name alone.
    QVERIFY(st.step());
    QCOMPARE(st.string(0), std::string("ReduceScatter"));
    QVERIFY(st.isNull(2));
    QVERIFY(!st.step());
    st.reset();
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM process_groups WHERE rank = 1"), int64_t(2));
}

// batch_isend_irecv: one SendRecv kernel launched by nccl:coalesced runs the
// sends and receives recorded on the thread since the previous batch.
void TestKineto::coalescedBatchGetsEachOp()
{
    QTemporaryDir dir;
    const std::string in = test::path(dir, "coalesced.json");
    writeFile(in, R"json({"distributedInfo": {"rank": 1, "world_size": 4}, "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "nccl:send", "pid": 1, "tid": 5, "ts": 100, "dur": 3},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 5, "ts": 100.5, "dur": 2,
         "args": {"Collective name": "send", "Dst Rank": 2, "In msg nelems": 512, "Out msg nelems": 512, "dtype": "BFloat16",
                  "Process Group Name": "1", "Process Group Description": "pp", "Group size": 4}},
        {"ph": "X", "cat": "cpu_op", "name": "nccl:recv", "pid": 1, "tid": 5, "ts": 104, "dur": 3},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 5, "ts": 104.5, "dur": 2,
         "args": {"Collective name": "recv", "Src Rank": 0, "In msg nelems": 512, "Out msg nelems": 512, "dtype": "BFloat16"}},
        {"ph": "X", "cat": "cpu_op", "name": "nccl:coalesced", "pid": 1, "tid": 5, "ts": 108, "dur": 4},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 5, "ts": 109, "dur": 2, "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "pid": 1, "tid": 20,
         "ts": 115, "dur": 50, "args": {"device": 1, "stream": 20, "correlation": 7, "Collective name": "coalesced",
                                        "Process Group Name": "1", "Process Group Description": "pp", "Group size": 4}},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 5, "ts": 200, "dur": 2,
         "args": {"Collective name": "recv", "Src Rank": 2, "In msg nelems": 256, "Out msg nelems": 256, "dtype": "Float"}},
        {"ph": "X", "cat": "cpu_op", "name": "nccl:coalesced", "pid": 1, "tid": 5, "ts": 204, "dur": 4},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 5, "ts": 205, "dur": 2, "args": {"correlation": 8}},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "pid": 1, "tid": 20,
         "ts": 210, "dur": 30, "args": {"device": 1, "stream": 20, "correlation": 8, "Collective name": "coalesced"}}
    ]})json");
    Imported imp = importOne(in, dir);
    Store store(imp.store);
    auto st = store.database().prepare(
        "SELECT n.kind, n.peer, n.bytes, COALESCE(NULLIF(n.group_name, ''), '-'), n.start_ns - (SELECT MIN(start_ns) FROM nccl_ops),"
        " n.activity_id FROM nccl_ops n ORDER BY n.start_ns, n.id");
    std::vector<std::string> rows;
    std::vector<int64_t> activity;
    while (st.step()) {
        rows.push_back(st.string(0) + " " + std::to_string(st.int64(1)) + " " + std::to_string(st.int64(2)) + " " +
                       st.string(3) + " " + std::to_string(st.int64(4)));
        activity.push_back(st.int64(5));
    }
    st.reset();
    QCOMPARE(rows, (std::vector<std::string>{"Send 2 1024 1 0", "Recv 0 1024 1 0", "Recv 2 1024 - 95000"}));
    QCOMPARE(activity[0], activity[1]);
    QVERIFY(activity[2] != activity[0]);
    // Loaded, the first kernel carries both ops.
    const Trace t = store.load();
    int batches = 0;
    for (const Activity& a : t.activities)
        if (a.ncclIndex >= 0 && a.ncclCount == 2) {
            ++batches;
            QVERIFY(t.ncclOps[size_t(a.ncclIndex)].kind == Collective::Send);
            QVERIFY(t.ncclOps[size_t(a.ncclIndex) + 1].kind == Collective::Recv);
        }
    QCOMPARE(batches, 1);
}

void TestKineto::simulatedTraceMarksStore()
{
    QTemporaryDir dir;
    Imported imp = importOne(testData("simulated.json"), dir);
    Store store(imp.store);
    StoreSummary s = store.summary();
    QCOMPARE(s.meta["simulated"], std::string("1"));
    QCOMPARE(s.meta["simulated_by"], std::string("pipescope simulate 0.1.0 (1f1b, 4 stages)"));

    Imported plain = importOne(testData("flows-only.json"), dir, {}, "plain.pipescope");
    Store plainStore(plain.store);
    QVERIFY(!plainStore.summary().meta.count("simulated"));
}

void TestKineto::badRecordsAreCountedNotFatal()
{
    QTemporaryDir dir;
    std::string in = test::path(dir, "bad-records.json");
    writeFile(in, R"({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "ts as string", "pid": 0, "tid": 7, "ts": "20", "dur": 5},
        {"ph": "X", "cat": "kernel", "name": "no dur", "pid": 0, "tid": 7, "ts": 30},
        {"ph": "X", "cat": "kernel", "name": "negative", "pid": 0, "tid": 7, "ts": 40, "dur": -1},
        {"ph": "X", "cat": "kernel", "name": "no device", "pid": "GPU", "tid": 7, "ts": 50, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "no tid", "pid": 1, "tid": {"x": 1}, "ts": 50, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "ok op", "pid": 1, "tid": 2, "ts": 50, "dur": 1, "args": {"deep": [[1, [2]], {"a": {}}]}},
        {"ph": "X", "cat": "cpu_op", "name": ["not", "a", "string"], "pid": 1, "tid": 2, "ts": 60, "dur": 1},
        {"ph": "X", "cat": "python_function", "name": "f", "pid": 1, "tid": 2, "ts": 60, "dur": 1},
        {"ph": "B", "name": "begin", "pid": 1, "tid": 2, "ts": 70},
        {"ph": 7, "name": "bad phase"},
        {"ph": "X", "cat": "kernel", "name": "ts huge", "pid": 0, "tid": 7, "ts": 1e300, "dur": 1},
        42,
        [1, 2],
        {"ph": "X", "cat": "kernel", "name": "ok2", "pid": 0, "tid": 7, "ts": 100.5, "dur": 0.25}
    ]})");
    Imported imp = importOne(in, dir);
    QCOMPARE(imp.source.records, int64_t(4)); // ok, ok op, the unnamed op, ok2
    Store store(imp.store);
    StoreSummary s = store.summary();
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM activities"), int64_t(2));
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM cpu_ranges"), int64_t(2));
    struct Expect {
        const char* kind;
        int64_t count;
        Severity severity;
    };
    for (const Expect& e : {Expect{"bad_value:ts", 2, Severity::Warning}, Expect{"missing_field:dur", 1, Severity::Warning},
                            Expect{"negative_duration", 1, Severity::Warning},
                            Expect{"missing_field:device", 1, Severity::Warning},
                            Expect{"bad_value:tid", 1, Severity::Warning}, Expect{"bad_type:name", 1, Severity::Info},
                            Expect{"skipped:python_function", 1, Severity::Info},
                            Expect{"unsupported_phase:B/E", 1, Severity::Info}, Expect{"bad_type:ph", 1, Severity::Warning},
                            Expect{"bad_event", 2, Severity::Warning}}) {
        const Diagnostic* d = findDiagnostic(s, e.kind);
        QVERIFY2(d, e.kind);
        QCOMPARE(d->count, e.count);
        QCOMPARE(int(d->severity), int(e.severity));
        QCOMPARE(d->sourceId, std::optional<int64_t>(imp.source.sourceId));
        QVERIFY2(QString::fromStdString(d->example).contains("bad-records.json"), d->example.c_str());
    }
}

void TestKineto::badFiles_data()
{
    QTest::addColumn<QByteArray>("content");
    QTest::addColumn<QString>("message");
    const QByteArray good = R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1}]})";
    QTest::newRow("empty") << QByteArray() << "the file is empty";
    QTest::newRow("whitespace") << QByteArray("  \n\n ") << "invalid JSON at line 3, column 2";
    QTest::newRow("invalid JSON") << QByteArray("{\"traceEvents\": [\n{\"ph\": \"X\",\n \"ts\": 1,, }]}")
                                  << "invalid JSON at line 3, column 10";
    QTest::newRow("truncated JSON") << good.left(good.size() - 10) << "invalid JSON at line 1";
    QTest::newRow("top-level array") << QByteArray("[{\"ph\": \"X\"}]") << "the top level is a JSON array";
    QTest::newRow("top-level number") << QByteArray("42") << "the top level is not a JSON object";
    QTest::newRow("top-level string") << QByteArray("\"traceEvents\"") << "the top level is not a JSON object";
    QTest::newRow("no traceEvents") << QByteArray("{\"schemaVersion\": 1, \"distributedInfo\": {\"rank\": 0}}")
                                    << "no \"traceEvents\" array";
    QTest::newRow("traceEvents object") << QByteArray("{\"traceEvents\": {}}") << "\"traceEvents\" is not an array";
    QTest::newRow("traceEvents number") << QByteArray("{\"traceEvents\": 3}") << "\"traceEvents\" is not an array";
    QTest::newRow("no usable events") << QByteArray("{\"traceEvents\": [{\"ph\": \"X\", \"ts\": \"1\", \"dur\": 1}, 5]}")
                                      << "no usable events (2 in traceEvents";
    QTest::newRow("only metadata") << QByteArray("{\"traceEvents\": [{\"ph\": \"M\", \"name\": \"process_name\"}]}")
                                   << "no usable events";
    QTest::newRow("invalid UTF-8") << QByteArray("{\"traceEvents\": [{\"name\": \"\xff\xfe\"}]}") << "invalid JSON";
    QTest::newRow("binary") << QByteArray("\x00\x01\x02\x03 not json", 13) << "invalid JSON";
    QTest::newRow("trailing garbage") << good + " }" << "invalid JSON";
    QTest::newRow("truncated gzip") << gzipBytes(good).left(20) << "truncated gzip";
    QTest::newRow("corrupt gzip") << QByteArray("\x1f\x8b\x08\x00garbage-garbage-garbage", 27) << "corrupt gzip";
    QTest::newRow("gzip of garbage") << gzipBytes("not json at all") << "invalid JSON";
}

void TestKineto::badFiles()
{
    QFETCH(QByteArray, content);
    QFETCH(QString, message);
    QTemporaryDir dir;
    std::string in = test::path(dir, "bad trace.json");
    writeFile(in, content);
    std::string out = test::path(dir, "out.pipescope");
    try {
        StoreWriter writer(out);
        ImportOptions o;
        o.progress = false;
        importKineto(in, writer, o);
        QFAIL("no FormatError");
    } catch (const FormatError& e) {
        QString what = QString::fromUtf8(e.what());
        QVERIFY2(what.startsWith(QString::fromStdString(in) + ": "), e.what());
        QVERIFY2(what.contains(message), e.what());
        QVERIFY2(!what.contains('\n'), e.what());
    }
    // The writer was never finished: no store is left behind.
    QVERIFY(!QFile::exists(QString::fromStdString(out)));
}

namespace {
std::string kindName(std::optional<Collective> c) { return c ? std::string(toString(*c)) : std::string("none"); }
} // namespace

void TestKineto::names()
{
    using namespace kineto;
    // Every spelling a trace uses for an operation reads as one kind.
    QCOMPARE(kindName(collectiveFromCallName("allreduce")), kindName(Collective::AllReduce));
    QCOMPARE(kindName(collectiveFromCallName("_allgather_base")), kindName(Collective::AllGather));
    QCOMPARE(kindName(collectiveFromCallName("allgather_into_tensor_coalesced")), kindName(Collective::AllGather));
    QCOMPARE(kindName(collectiveFromCallName("reduce_scatter_tensor_coalesced")), kindName(Collective::ReduceScatter));
    QCOMPARE(kindName(collectiveFromCallName("all_to_all")), kindName(Collective::AllToAll));
    QCOMPARE(kindName(collectiveFromCallName("alltoall_base")), kindName(Collective::AllToAll));
    QCOMPARE(kindName(collectiveFromCallName("broadcast")), kindName(Collective::Broadcast));
    QCOMPARE(kindName(collectiveFromCallName("reduce")), kindName(Collective::Reduce));
    QCOMPARE(kindName(collectiveFromCallName("send")), kindName(Collective::Send));
    QCOMPARE(kindName(collectiveFromCallName("recv")), kindName(Collective::Recv));
    QCOMPARE(kindName(collectiveFromCallName("barrier")), kindName(Collective::Barrier));
    QCOMPARE(kindName(collectiveFromCallName("scatter")), kindName(Collective::Scatter));
    QCOMPARE(kindName(collectiveFromCallName("gather")), kindName(Collective::Gather));
    QCOMPARE(kindName(collectiveFromCallName("coalesced")), kindName(Collective::Coalesced));
    QCOMPARE(kindName(collectiveFromCallName("ncclAllReduce")), kindName(Collective::AllReduce)); // NCCL's profiler
    QCOMPARE(kindName(collectiveFromCallName("mystery")), kindName(Collective::Unknown));
    QCOMPARE(kindName(collectiveFromCallName("")), kindName(Collective::Unknown));
    QCOMPARE(kindName(collectiveFromKernelName("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)")),
             kindName(Collective::AllReduce));
    QCOMPARE(kindName(collectiveFromKernelName("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)")),
             kindName(Collective::ReduceScatter));
    QCOMPARE(kindName(collectiveFromKernelName("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)")),
             kindName(Collective::SendRecv));
    QCOMPARE(kindName(collectiveFromKernelName("void ncclDevKernelDebug_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)")),
             kindName(Collective::Broadcast));
    QCOMPARE(kindName(collectiveFromKernelName("ncclAllReduceRingLLKernel_sum_f32(ncclWorkElem)")), kindName(Collective::AllReduce));
    QCOMPARE(kindName(collectiveFromKernelName("ncclSendRecvKernel_copy_i8")), kindName(Collective::SendRecv));
    QCOMPARE(kindName(collectiveFromKernelName("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)")), kindName(Collective::Generic));
    QCOMPARE(kindName(collectiveFromKernelName("ncclDevKernel_Mystery(ncclDevKernelArgsStorage<4096ul>)")), kindName(Collective::Unknown));
    QCOMPARE(kindName(collectiveFromKernelName("ampere_sgemm_128x64_nn")), std::string("none"));
    QCOMPARE(kindName(collectiveFromKernelName("nccl_helper_copy")), std::string("none")); // "nccl" alone is not a NCCL kernel's name
    QVERIFY(isNcclKernelName("ncclDevKernel_Generic"));
    QVERIFY(isNcclKernelName("void NCCLsomething"));
    QVERIFY(!isNcclKernelName("ampere_sgemm_128x64_nn"));
    // The names pipescope writes read back as what they were written for.
    for (int i = 0; i <= static_cast<int>(Collective::Generic); ++i) {
        const auto c = static_cast<Collective>(i);
        QCOMPARE(kindName(collectiveFromKind(toString(c))), kindName(c));
        // No NCCL kernel is named for a barrier (an all-reduce runs it) or a coalesced batch.
        if (c != Collective::Unknown && c != Collective::Coalesced && c != Collective::Barrier)
            QCOMPARE(kindName(collectiveFromKernelName(ncclKernelName(c, "Sum_bf16_RING_LL"))), kindName(c));
        if (c != Collective::Unknown && c != Collective::Generic)
            QCOMPARE(kindName(collectiveFromCallName(torchCollectiveName(c))), kindName(c));
    }
    QCOMPARE(kindName(collectiveFromKind("sendrecv")), kindName(Collective::SendRecv));
    QVERIFY(isPointToPoint(Collective::SendRecv) && !isPointToPoint(Collective::AllToAll));
    QVERIFY(isGroupCollective(Collective::AllToAll) && !isGroupCollective(Collective::Send) &&
            !isGroupCollective(Collective::Generic));
    QCOMPARE(dtypeSize("Float"), std::optional<int>(4));
    QCOMPARE(dtypeSize("c10::BFloat16"), std::optional<int>(2));
    QCOMPARE(dtypeSize("Long"), std::optional<int>(8));
    QCOMPARE(dtypeSize("Byte"), std::optional<int>(1));
    QCOMPARE(dtypeSize("Mystery"), std::optional<int>());
    QCOMPARE(int(copyKindFromName("Memcpy HtoD (Pageable -> Device)")), int(CopyKind::HtoD));
    QCOMPARE(int(copyKindFromName("Memcpy DtoD (Device -> Device)")), int(CopyKind::DtoD));
    QCOMPARE(int(copyKindFromName("Memcpy PtoP (Device -> Device)")), int(CopyKind::PtoP));
    QCOMPARE(int(copyKindFromName("DtoH")), int(CopyKind::DtoH));
    QCOMPARE(int(copyKindFromName("Memset (Device)")), int(CopyKind::Unknown));
    QCOMPARE(rankFromFileName("/x/rank-0.Apr_03_18_51_38.1102.pt.trace.json"), std::optional<int>(0));
    QCOMPARE(rankFromFileName("trace_rank_12.json.gz"), std::optional<int>(12));
    QCOMPARE(rankFromFileName("RANK7.json"), std::optional<int>(7));
    QCOMPARE(rankFromFileName("/data/rank-9/trace.json"), std::optional<int>());
    QCOMPARE(rankFromFileName("hta-sampled-128rank-r0.json.gz"), std::optional<int>());
    QCOMPARE(rankFromFileName("frank3.json"), std::optional<int>());
    auto host = hostFromFileName("/logs/gpu-node-07.cluster_12345.1712195495123.pt.trace.json.gz");
    QVERIFY(host);
    QCOMPARE(host->host, std::string("gpu-node-07.cluster"));
    QCOMPARE(host->pid, int64_t(12345));
    QVERIFY(hostFromFileName("node_1_77.1712195495123.pt.trace.json"));
    QCOMPARE(hostFromFileName("node_1_77.1712195495123.pt.trace.json")->host, std::string("node_1"));
    QVERIFY(!hostFromFileName("rank3_12345.1712195495123.pt.trace.json")); // a worker name, not a host
    QVERIFY(!hostFromFileName("trace.json"));
    QVERIFY(!hostFromFileName("host_12.abc.pt.trace.json"));
    QVERIFY(!hostFromFileName("host.1712195495123.pt.trace.json"));
}

void TestKineto::jsonParserMatchesNlohmann_data()
{
    QTest::addColumn<QByteArray>("text");
    // Every hand-written trace, and values that stress the tokenizer.
    for (const QString& name : QDir(QString::fromUtf8(PIPESCOPE_TESTDATA) + "/kineto").entryList({"*.json"})) {
        QFile f(QString::fromUtf8(PIPESCOPE_TESTDATA) + "/kineto/" + name);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QTest::newRow(name.toUtf8().constData()) << f.readAll();
    }
    QTest::newRow("escapes") << QByteArray(R"({"a\"b": "x\n\t\"\\\/\b\f\r", "u": "\u00e9\u20ac\ud83d\ude00", "z": "\u0000"})");
    QTest::newRow("utf-8") << QByteArray("[\"caf\xc3\xa9\", \"\xe2\x82\xac\", \"\xf0\x9f\x98\x80\", \"\xf4\x8f\xbf\xbf\"]");
    QTest::newRow("numbers") << QByteArray("[0, -0, 1, -1, 9223372036854775807, 9223372036854775808, -9223372036854775808,"
                                           " -9223372036854775809, 18446744073709551615, 18446744073709551616, 1.5, -0.25,"
                                           " 1e3, 1E-3, 2.5e+10, 1712195495505582.988, 0.001]");
    QTest::newRow("literals and nesting") << QByteArray(" [true, false, null, [], {}, [[[{}]]], {\"a\": {\"b\": [null]}}] \r\n");
    QTest::newRow("bom") << QByteArray("\xEF\xBB\xBF{\"traceEvents\": []}");
}

void TestKineto::jsonParserMatchesNlohmann()
{
    QFETCH(QByteArray, text);
    std::string_view view(text.constData(), size_t(text.size()));
    NlohmannValues expected;
    QVERIFY(nlohmann::json::sax_parse(view.begin(), view.end(), &expected));
    // Chunk sizes that put chunk boundaries inside every kind of token.
    for (size_t chunk : {size_t(1), size_t(2), size_t(3), size_t(5), size_t(7), size_t(64), size_t(1) << 20}) {
        StreamValues values;
        QVERIFY(streamParse(view, chunk, values));
        QCOMPARE(values.out, expected.out);
    }
}

void TestKineto::jsonParserRejects_data()
{
    QTest::addColumn<QByteArray>("text");
    QTest::addColumn<int>("offset"); // where the error is reported
    QTest::newRow("empty") << QByteArray() << 0;
    QTest::newRow("trailing comma") << QByteArray("[1, 2,]") << 6;
    QTest::newRow("missing colon") << QByteArray("{\"a\" 1}") << 5;
    QTest::newRow("single quotes") << QByteArray("{'a': 1}") << 1;
    QTest::newRow("leading zero") << QByteArray("[01]") << 2;
    QTest::newRow("bare minus") << QByteArray("[-]") << 2;
    QTest::newRow("no fraction digits") << QByteArray("[1.]") << 3;
    QTest::newRow("no exponent digits") << QByteArray("[1e+]") << 4;
    QTest::newRow("plus sign") << QByteArray("[+1]") << 1;
    QTest::newRow("NaN") << QByteArray("[NaN]") << 1;
    QTest::newRow("bad literal") << QByteArray("[tru]") << 1;
    QTest::newRow("raw newline in string") << QByteArray("[\"a\nb\"]") << 3;
    QTest::newRow("bad escape") << QByteArray("[\"\\x\"]") << 3;
    QTest::newRow("bad \\u") << QByteArray("[\"\\u12G4\"]") << 6;
    QTest::newRow("lone low surrogate") << QByteArray("[\"\\udc00\"]") << 2;
    QTest::newRow("lone high surrogate") << QByteArray("[\"\\ud800x\"]") << 8;
    QTest::newRow("overlong UTF-8") << QByteArray("[\"\xc0\xaf\"]") << 2;
    QTest::newRow("UTF-8 surrogate") << QByteArray("[\"\xed\xa0\x80\"]") << 2;
    QTest::newRow("truncated UTF-8") << QByteArray("[\"\xe2\x82\"]") << 2;
    QTest::newRow("above U+10FFFF") << QByteArray("[\"\xf4\x90\x80\x80\"]") << 2;
    QTest::newRow("unterminated string") << QByteArray("[\"abc") << 5;
    QTest::newRow("unclosed array") << QByteArray("[1, 2") << 5;
    QTest::newRow("two values") << QByteArray("{} {}") << 3;
    QTest::newRow("NUL after value") << QByteArray("{}\0", 3) << 2;
    QTest::newRow("too deep") << QByteArray(10001, '[') << 10000;
}

void TestKineto::jsonParserRejects()
{
    QFETCH(QByteArray, text);
    QFETCH(int, offset);
    std::string_view view(text.constData(), size_t(text.size()));
    if (text.size() < 10000) {
        NlohmannValues other;
        QVERIFY(!nlohmann::json::sax_parse(view.begin(), view.end(), &other) || text.contains('\0'));
    }
    for (size_t chunk : {size_t(1), size_t(3), size_t(1) << 20}) {
        StreamValues values;
        kineto::JsonError error;
        QVERIFY(!streamParse(view, chunk, values, &error));
        QCOMPARE(int(error.offset), offset);
        QVERIFY(!error.what.empty());
    }
}

// Ranges of one thread with the same start nest longest first; ranges with the
// same start and end nest in file order (the earlier one outside), whatever the
// order of the events in the file. A partial overlap is a sibling.
void TestKineto::nestingOfEqualRanges()
{
    QTemporaryDir dir;
    std::string in = test::path(dir, "equal.json");
    writeFile(in, R"({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 2, "ts": 10, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "first", "pid": 1, "tid": 2, "ts": 10, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "second", "pid": 1, "tid": 2, "ts": 10, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 2, "ts": 5, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "overlap", "pid": 1, "tid": 2, "ts": 40, "dur": 60},
        {"ph": "X", "cat": "cpu_op", "name": "other_thread", "pid": 1, "tid": 3, "ts": 10, "dur": 5},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 5, "args": {"device": 0, "stream": 7}}
    ]})");
    Imported imp = importOne(in, dir);
    Store store(imp.store);
    auto range = [&](const char* name, const char* column) {
        return queryInt(store, std::string("SELECT COALESCE(c.") + column + ", -1) FROM cpu_ranges c JOIN strings s ON s.id = c.name_id"
                                   " WHERE s.value = '" + name + "'");
    };
    QCOMPARE(range("outer", "depth"), int64_t(0));
    QCOMPARE(range("outer", "parent_id"), int64_t(-1));
    QCOMPARE(range("first", "parent_id"), range("outer", "id"));
    QCOMPARE(range("second", "parent_id"), range("first", "id"));
    QCOMPARE(range("second", "depth"), int64_t(2));
    QCOMPARE(range("inner", "parent_id"), range("second", "id"));
    QCOMPARE(range("inner", "depth"), int64_t(3));
    QCOMPARE(range("overlap", "parent_id"), range("outer", "id"));
    QCOMPARE(range("overlap", "depth"), int64_t(1));
    QCOMPARE(range("other_thread", "parent_id"), int64_t(-1));
    QCOMPARE(range("other_thread", "depth"), int64_t(0));
}

// with_stack=True: nn.Module calls are kept as annotation ranges nested by
// time (the module tree), other Python frames are counted and dropped; a cpu
// op's autograd sequence number is kept in its correlation column.
void TestKineto::moduleCallsAndSequenceNumbers()
{
    QTemporaryDir dir;
    std::string in = test::path(dir, "modules.json");
    writeFile(in, R"({"traceEvents": [
        {"ph": "X", "cat": "python_function", "name": "nn.Module: GPT_0", "pid": 1, "tid": 2, "ts": 10, "dur": 100,
         "args": {"Python parent id": null, "Python id": 1, "Python module id": 0}},
        {"ph": "X", "cat": "python_function", "name": "model.py(40): forward", "pid": 1, "tid": 2, "ts": 11, "dur": 98,
         "args": {"Python parent id": 1, "Python id": 2}},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Block_0", "pid": 1, "tid": 2, "ts": 12, "dur": 40,
         "args": {"Python parent id": 2, "Python id": 3, "Python module id": 0}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 13, "dur": 10,
         "args": {"External id": 5, "Sequence number": 77, "Fwd thread id": 0}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 2, "ts": 30, "dur": 1, "args": {"External id": 6}},
        {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0", "pid": 1, "tid": 3,
         "ts": 200, "dur": 10, "args": {"Sequence number": 77, "Fwd thread id": 1}},
        {"ph": "s", "id": 1, "pid": 1, "tid": 2, "ts": 13, "cat": "fwdbwd", "name": "fwdbwd"},
        {"ph": "f", "id": 1, "pid": 1, "tid": 3, "ts": 200, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 5, "args": {"device": 0, "stream": 7}}
    ]})");
    Imported imp = importOne(in, dir);
    Store store(imp.store);
    auto range = [&](const char* name, const char* column) {
        return queryInt(store, std::string("SELECT COALESCE(c.") + column + ", -1) FROM cpu_ranges c JOIN strings s ON s.id = c.name_id"
                                   " WHERE s.value = '" + name + "'");
    };
    QCOMPARE(queryInt(store, "SELECT COUNT(*) FROM cpu_ranges"), int64_t(5));
    QCOMPARE(range("nn.Module: GPT_0", "kind"), int64_t(CpuRangeKind::Annotation));
    QCOMPARE(range("nn.Module: GPT_0", "depth"), int64_t(0));
    QCOMPARE(range("nn.Module: Block_0", "depth"), int64_t(1));
    QCOMPARE(range("nn.Module: Block_0", "parent_id"), range("nn.Module: GPT_0", "id"));
    QCOMPARE(range("aten::mm", "parent_id"), range("nn.Module: Block_0", "id"));
    QCOMPARE(range("aten::mm", "correlation"), int64_t(77));
    QCOMPARE(range("aten::empty", "correlation"), int64_t(-1));
    QCOMPARE(range("autograd::engine::evaluate_function: MmBackward0", "correlation"), int64_t(77));
    const StoreSummary summary = store.summary();
    const Diagnostic* d = findDiagnostic(summary, "skipped:python_function");
    QVERIFY(d);
    QCOMPARE(d->count, int64_t(1));
}

// The names Kineto gives CPU threads (thread_name metadata) are kept per
// rank; other metadata is not, and a name without a thread is ignored.
void TestKineto::threadNamesAreKept()
{
    QTemporaryDir dir;
    std::string in = test::path(dir, "threads.json");
    writeFile(in, R"JSON({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4},
      "traceEvents": [
      {"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python3"}},
      {"ph": "M", "name": "thread_name", "pid": 4242, "tid": 4242, "args": {"name": "thread 4242 (python3)"}},
      {"ph": "M", "name": "thread_name", "pid": 4242, "tid": 4250, "args": {"name": "thread 4250 (pt_autograd_0)"}},
      {"ph": "M", "name": "thread_name", "pid": 4242, "args": {"name": "no thread"}},
      {"ph": "M", "name": "thread_sort_index", "pid": 4242, "tid": 4242, "args": {"sort_index": 4242}},
      {"ph": "X", "cat": "user_annotation", "name": "forward_step", "pid": 4242, "tid": 4242, "ts": 90, "dur": 20},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 100, "dur": 5, "args": {"device": 0, "stream": 7}}
    ]})JSON");
    Imported imp = importOne(in, dir);
    Store store(imp.store);
    QCOMPARE(store.schemaVersion(), kSchemaVersion);
    const Trace t = store.load();
    const std::map<std::pair<int, int64_t>, std::string> expected{{{3, 4242}, "thread 4242 (python3)"},
                                                                    {{3, 4250}, "thread 4250 (pt_autograd_0)"}};
    QVERIFY(t.threadNames == expected);
    LoadOptions other;
    other.ranks = std::vector<int>{0};
    QVERIFY(store.load(other).threadNames.empty()); // only the ranks loaded
}

void TestKineto::memoryEventsKeepTotals()
{
    // PyTorch's allocator events (profile_memory=True) as its profiler writes
    // them: an allocation and its free with the allocator's totals after
    // each; one from an older PyTorch without totals; one whose totals are
    // -1 (unknown); host memory (Device Type 0), which is not the GPU's.
    QTemporaryDir dir;
    std::string in = test::path(dir, "memory.json");
    writeFile(in, R"({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
      "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 100, "dur": 5, "args": {"device": 0, "stream": 7}},
      {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 90.5,
       "args": {"Total Reserved": 20971520, "Total Allocated": 1049088, "Bytes": 512, "Addr": 139868585591296,
                "Device Id": 0, "Device Type": 1}},
      {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 95,
       "args": {"Total Reserved": 20971520, "Total Allocated": 1048576, "Bytes": -512, "Addr": 139868585591296,
                "Device Id": 0, "Device Type": 1}},
      {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 96,
       "args": {"Device Type": 1, "Device Id": 0, "Addr": 139868585592320, "Bytes": 1024}},
      {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 97,
       "args": {"Device Type": 1, "Device Id": 0, "Addr": 139868585593344, "Bytes": 2048, "Total Allocated": -1,
                "Total Reserved": -1}},
      {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 98,
       "args": {"Total Reserved": 0, "Total Allocated": 4096, "Bytes": 4096, "Addr": 94000000, "Device Id": -1,
                "Device Type": 0}}
    ]})");
    Imported imp = importOne(in, dir);
    Store store(imp.store);
    auto st = store.database().prepare(
        "SELECT rank, device, ts_ns, bytes, address, total_allocated, total_reserved FROM memory_events ORDER BY ts_ns");
    QVERIFY(st.step());
    QCOMPARE(st.int64(0), int64_t(0));
    QCOMPARE(st.int64(1), int64_t(0));
    QCOMPARE(st.int64(3), int64_t(512));
    QCOMPARE(st.int64(4), int64_t(139868585591296));
    QCOMPARE(st.int64(5), int64_t(1049088));
    QCOMPARE(st.int64(6), int64_t(20971520));
    const int64_t first = st.int64(2);
    QVERIFY(st.step());
    QCOMPARE(st.int64(2) - first, int64_t(4500)); // 95 - 90.5 us, exactly
    QCOMPARE(st.int64(3), int64_t(-512));
    QCOMPARE(st.int64(5), int64_t(1048576));
    QVERIFY(st.step());
    QCOMPARE(st.int64(3), int64_t(1024));
    QVERIFY(st.isNull(5));
    QVERIFY(st.isNull(6));
    QVERIFY(st.step());
    QCOMPARE(st.int64(3), int64_t(2048));
    QVERIFY(st.isNull(5));
    QVERIFY(st.isNull(6));
    QVERIFY(!st.step()); // no host memory
    st.reset();

    const Trace t = store.load();
    QCOMPARE(t.memoryEvents.size(), size_t(4));
    QCOMPARE(t.memoryEvents[0].totalAllocated, std::optional<int64_t>(1049088));
    QCOMPARE(t.memoryEvents[0].totalReserved, std::optional<int64_t>(20971520));
    QCOMPARE(t.memoryEvents[1].totalAllocated, std::optional<int64_t>(1048576));
    QVERIFY(!t.memoryEvents[2].totalAllocated);
    QVERIFY(!t.memoryEvents[3].totalReserved);
}

QTEST_GUILESS_MAIN(TestKineto)
#include "tst_kineto.moc"
