// Nsight Systems SQLite import: a real export with independently computed
// facts, small hand-built 2.x and 3.x exports (tests/data/nsys/*.sql, built
// here with SQLite), and files that must be refused with one clear error.
#include "TestSupport.h"

#include "import/Import.h"
#include "store/Sqlite.h"
#include "store/StoreWriter.h"
#include "util/Error.h"

#include <QCryptographicHash>
#include <QFile>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>

using namespace pipescope;

namespace {

std::string readText(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// Builds an export from one of the SQL scripts in tests/data/nsys.
std::string buildExport(const QTemporaryDir& dir, const char* script, const char* name)
{
    std::string out = test::path(dir, name);
    sql::Database db(out, sql::Database::Mode::Create);
    db.exec(readText(std::string(PIPESCOPE_TESTDATA) + "/nsys/" + script));
    db.close();
    return out;
}

QByteArray fileHash(const std::string& path)
{
    QFile f(QString::fromStdString(path));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256);
}

struct Imported {
    ImportedSource source;
    std::string store;
};

Imported importToStore(const QTemporaryDir& dir, const std::string& input, ImportOptions options = {})
{
    options.progress = false;
    Imported r;
    r.store = test::path(dir, "out.pipescope");
    std::filesystem::remove(r.store);
    StoreWriter writer(r.store);
    r.source = importNsys(input, writer, options);
    writer.finish();
    return r;
}

int64_t scalar(sql::Database& db, const std::string& query)
{
    auto st = db.prepare(query);
    if (!st.step() || st.isNull(0))
        return -1;
    return st.int64(0);
}

std::string text(sql::Database& db, const std::string& query)
{
    auto st = db.prepare(query);
    if (!st.step())
        return "(no row)";
    return st.string(0);
}

// "name=count" pairs, ordered by count then name, for compact comparisons.
QStringList pairs(sql::Database& db, const std::string& query)
{
    QStringList out;
    auto st = db.prepare(query);
    while (st.step())
        out << QString::fromStdString(st.string(0) + "=" + std::to_string(st.int64(1)));
    return out;
}

std::map<std::string, int64_t> diagnostics(sql::Database& db)
{
    std::map<std::string, int64_t> out;
    auto st = db.prepare("SELECT kind, count FROM diagnostics");
    while (st.step())
        out[st.string(0)] = st.int64(1);
    return out;
}

} // namespace

class TestNsys : public QObject {
    Q_OBJECT

private slots:
    void cloverleafFacts();
    void cloverleafShortNames();
    void schema3x();
    void schema2x();
    void forcedRank();
    void missingStringTable();
    void mpiRanksAndRankOption();
    void stringsThatAreNotUtf8();
    void badInput_data();
    void badInput();
    void missingFile();
    void unreadablePagesAreFormatErrors();
};

void TestNsys::cloverleafFacts()
{
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QTemporaryDir dir;
    auto r = importToStore(dir, test::externalData("nsys/pipit-cloverleaf.sqlite"));
    QCOMPARE(r.source.ranks, std::vector<int>{0});
    QCOMPARE(r.source.timeBase, int64_t{1696392839587175550});
    QVERIFY(r.source.absoluteClock);
    QCOMPARE(r.source.records, int64_t{1312 + 279 + 1312 + 3048});

    sql::Database db(r.store, sql::Database::Mode::ReadOnly);
    QCOMPARE(scalar(db, "SELECT time_base_ns FROM sources"), int64_t{1696392839587175550});
    QCOMPARE(pairs(db, "SELECT kind, COUNT(*) FROM activities GROUP BY kind ORDER BY kind"),
             (QStringList{"0=1312", "1=279", "3=1312"}));
    // 3047 CUDA runtime calls and one driver call; no other event classes in this file.
    QCOMPARE(pairs(db, "SELECT kind, COUNT(*) FROM cpu_ranges GROUP BY kind ORDER BY kind"),
             (QStringList{"3=3047", "4=1"}));

    // Every kernel on device 0, stream 7; memcpys 254 HtoD + 25 DtoH.
    QCOMPARE(pairs(db, "SELECT s.rank || '/' || s.device || '/' || s.stream, COUNT(*) FROM activities a"
                       " JOIN streams s ON s.id = a.stream_id WHERE a.kind = 0 GROUP BY s.id"),
             QStringList{"0/0/7=1312"});
    QCOMPARE(pairs(db, "SELECT copy_kind, COUNT(*) FROM activities WHERE kind = 1 GROUP BY copy_kind ORDER BY 1"),
             (QStringList{"1=254", "2=25"}));

    QCOMPARE(scalar(db, "SELECT MIN(start_ns) FROM activities WHERE kind = 0"), int64_t{533338240});
    QCOMPARE(scalar(db, "SELECT MAX(end_ns) FROM activities WHERE kind = 0"), int64_t{875678947});
    QCOMPARE(scalar(db, "SELECT SUM(end_ns - start_ns) FROM activities WHERE kind = 0"), int64_t{294404540});
    QCOMPARE(scalar(db, "SELECT kernel_busy_ns FROM gpu_summary WHERE rank = 0 AND device = 0"),
             int64_t{294404540});
    QCOMPARE(scalar(db, "SELECT COUNT(*) FROM activities WHERE kind = 0 AND end_ns < start_ns"), int64_t{0});

    // Each kernel joins its launch the way Nsight's scripts do; all are cudaLaunchKernel.
    QCOMPARE(pairs(db, "SELECT s.value, COUNT(*) FROM activities a JOIN cpu_ranges c ON c.id = a.launch_id"
                       " JOIN strings s ON s.id = c.name_id WHERE a.kind = 0 GROUP BY s.value"),
             QStringList{"cudaLaunchKernel_v7000=1312"});

    // Names are demangled by default: 102 distinct, at most 31 kernels each,
    // and 8 names share that count.
    QCOMPARE(scalar(db, "SELECT COUNT(DISTINCT name_id) FROM activities WHERE kind = 0"), int64_t{102});
    QCOMPARE(scalar(db, "SELECT MAX(n) FROM (SELECT COUNT(*) n FROM activities WHERE kind = 0 GROUP BY name_id)"),
             int64_t{31});
    QCOMPARE(scalar(db, "SELECT COUNT(*) FROM (SELECT COUNT(*) n FROM activities WHERE kind = 0 GROUP BY name_id)"
                        " WHERE n = 31"),
             int64_t{8});

    // TARGET_INFO_GPU lists the machine's 4 GPUs; only device 0 ran anything.
    QCOMPARE(scalar(db, "SELECT COUNT(*) FROM gpus"), int64_t{1});
    QCOMPARE(text(db, "SELECT name || '|' || memory_bytes || '|' || sm_count || '|' || compute_capability FROM gpus"
                      " WHERE rank = 0 AND device = 0"),
             std::string("NVIDIA A100-SXM4-80GB|84990623744|108|8.0"));
    auto details = nlohmann::json::parse(text(db, "SELECT details FROM sources"));
    QCOMPARE(details["gpus"].size(), size_t{4});
    QCOMPARE(details["schemaVersion"].get<std::string>(), std::string("3.13.2"));
    QCOMPARE(details["productVersion"].get<std::string>(), std::string("2024.5.1.113"));
    QCOMPARE(scalar(db, "SELECT pid FROM ranks WHERE rank = 0"), int64_t{1701896});
    QCOMPARE(scalar(db, "SELECT device FROM ranks WHERE rank = 0"), int64_t{0});

    // Synchronisation records carry no stream (CUPTI's 0xFFFFFFFF): device-wide, stream -1.
    QCOMPARE(pairs(db, "SELECT s.stream, COUNT(*) FROM activities a JOIN streams s ON s.id = a.stream_id"
                       " WHERE a.kind = 3 GROUP BY s.stream"),
             QStringList{"-1=1312"});
    QCOMPARE(scalar(db, "SELECT COUNT(*) FROM diagnostics"), int64_t{0});
}

void TestNsys::cloverleafShortNames()
{
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QTemporaryDir dir;
    ImportOptions options;
    options.shortKernelNames = true;
    auto r = importToStore(dir, test::externalData("nsys/pipit-cloverleaf.sqlite"), options);
    sql::Database db(r.store, sql::Database::Mode::ReadOnly);
    QCOMPARE(pairs(db, "SELECT s.value, COUNT(*) n FROM activities a JOIN strings s ON s.id = a.name_id"
                       " WHERE a.kind = 0 GROUP BY s.value ORDER BY n DESC"),
             (QStringList{"par_ranged1d_kernel=968", "par_ranged2d_kernel=331", "par_reduce_kernel=13"}));
}

void TestNsys::schema3x()
{
    QTemporaryDir dir;
    auto input = buildExport(dir, "export-3x.sql", "export-3x.sqlite");
    auto before = fileHash(input);
    auto r = importToStore(dir, input);

    // Reading leaves the export byte for byte as it was, with no side files.
    QCOMPARE(fileHash(input), before);
    for (const char* side : {"-journal", "-wal", "-shm"})
        QVERIFY(!std::filesystem::exists(input + side));

    QCOMPARE(r.source.ranks, (std::vector<int>{0, 1}));
    QCOMPARE(r.source.timeBase, int64_t{1700000000000000000});
    sql::Database db(r.store, sql::Database::Mode::ReadOnly);

    // MPI_RANKS decides the ranks, not pid order (pid 200 is rank 0).
    QCOMPARE(pairs(db, "SELECT rank || ':' || pid || ':' || device, source_id FROM ranks ORDER BY rank"),
             (QStringList{"0:200:0=1", "1:100:1=1"}));

    // Kernels: 5 of 7 rows; one ends before it starts, one has no start.
    QCOMPARE(pairs(db, "SELECT rank || '/' || kind, COUNT(*) FROM activities GROUP BY rank, kind ORDER BY rank, kind"),
             (QStringList{"0/0=3", "0/2=1", "0/3=1", "1/0=2", "1/1=1", "1/3=1"}));
    QCOMPARE(pairs(db, "SELECT rank || '/' || device || '/' || stream || '/' || COALESCE(name, ''), 1"
                       " FROM streams ORDER BY rank, device, stream"),
             (QStringList{"0/0/7/=1", "0/0/13/comm=1", "0/5/7/=1", "1/1/-1/=1", "1/1/7/=1"}));
    QCOMPARE(text(db, "SELECT grid || ' ' || block FROM activities WHERE rank = 0 AND kind = 0 ORDER BY start_ns"),
             std::string("120,2,1 256,1,1"));

    // Launches link within a rank by correlation id, though both ranks reuse ids 11 and 12.
    QCOMPARE(pairs(db, "SELECT a.rank || '/' || a.start_ns || '->' || c.rank || '/' || c.start_ns || '/' || s.value, 1"
                       " FROM activities a JOIN cpu_ranges c ON c.id = a.launch_id JOIN strings s ON s.id = c.name_id"
                       " ORDER BY a.rank, a.start_ns"),
             (QStringList{"0/1000->0/900/cudaLaunchKernel_v7000=1", "0/2500->0/2400/cudaLaunchKernel_v7000=1",
                          "0/4100->0/4050/cudaStreamSynchronize_v3020=1", "0/6000->0/5900/cuLaunchKernel=1",
                          "0/7100->0/7000/cudaMemsetAsync_v3020=1", "1/1100->1/1000/cudaLaunchKernel_v7000=1",
                          "1/2600->1/2500/cudaLaunchKernel_v7000=1"}));

    // Event class 26 repeats a runtime call and is dropped; class 1 is a driver call.
    QCOMPARE(pairs(db, "SELECT rank || '/' || kind, COUNT(*) FROM cpu_ranges GROUP BY rank, kind ORDER BY rank, kind"),
             (QStringList{"0/1=3", "0/3=4", "0/4=1", "1/1=1", "1/3=2"}));

    // NVTX: push/pop and start/end ranges, registered strings, domains, nesting.
    QCOMPARE(pairs(db, "SELECT c.tid || ':' || s.value || ':' || COALESCE(d.value, '-') || ':' || c.depth, c.start_ns"
                       " FROM cpu_ranges c JOIN strings s ON s.id = c.name_id LEFT JOIN strings d ON d.id = c.domain_id"
                       " WHERE c.rank = 0 AND c.kind = 1 ORDER BY c.start_ns"),
             (QStringList{"201:step 1:-:0=0", "201:forward:pipeline:1=100", "202:microbatch 0:-:0=200"}));
    QCOMPARE(text(db, "SELECT p.end_ns FROM cpu_ranges c JOIN cpu_ranges p ON p.id = c.parent_id"
                      " JOIN strings s ON s.id = c.name_id WHERE s.value = 'forward'"),
             std::string("10000"));

    // Copies and sets are named as Kineto names them.
    QCOMPARE(pairs(db, "SELECT s.value, COALESCE(a.bytes, -1) FROM activities a JOIN strings s ON s.id = a.name_id"
                       " WHERE a.kind IN (1, 2, 3) ORDER BY a.rank, a.start_ns"),
             (QStringList{"Stream Sync=-1", "Memset (Device)=4096", "Memcpy HtoD (Pageable -> Device)=1048576",
                          "Context Sync=-1"}));

    // NCCL kernels become NCCL operations with the kind their name tells.
    QCOMPARE(pairs(db, "SELECT o.rank || '/' || o.kind || '/' || o.is_p2p || '/' || o.start_ns || '/' || o.end_ns,"
                       " o.activity_id = a.id FROM nccl_ops o JOIN activities a ON a.id = o.activity_id"
                       " ORDER BY o.rank"),
             (QStringList{"0/AllReduce/0/2500/4000=1", "1/SendRecv/1/2600/3900=1"}));

    // GPUs: the two the export describes, plus device 5 that only the kernel names.
    QCOMPARE(pairs(db, "SELECT rank || '/' || device || '/' || COALESCE(name, '?') || '/' || COALESCE(compute_capability, '?'),"
                       " COALESCE(sm_count, -1) FROM gpus ORDER BY rank, device"),
             (QStringList{"0/0/NVIDIA H100 80GB HBM3/9.0=132", "0/5/?/?=-1", "1/1/NVIDIA H100 80GB HBM3/9.0=132"}));

    auto diags = diagnostics(db);
    QCOMPARE(diags, (std::map<std::string, int64_t>{{"api:other_event_class", 1},
                                                    {"kernel:end_before_start", 1},
                                                    {"kernel:missing_time", 1},
                                                    {"kernel:unknown_device", 1},
                                                    {"nvtx:process_not_a_rank", 1},
                                                    {"nvtx:unterminated_range", 1}}));
    QCOMPARE(text(db, "SELECT severity FROM diagnostics WHERE kind = 'kernel:end_before_start'"), std::string("warning"));
    QCOMPARE(text(db, "SELECT severity FROM diagnostics WHERE kind = 'api:other_event_class'"), std::string("info"));

    auto details = nlohmann::json::parse(text(db, "SELECT details FROM sources"));
    QCOMPARE(details["schemaVersion"].get<std::string>(), std::string("3.11.1"));
    QCOMPARE(details["metaTable"].get<std::string>(), std::string("META_DATA_EXPORT"));
    QCOMPARE(scalar(db, "SELECT COUNT(*) FROM sources WHERE rank IS NULL AND format = 'nsys'"), int64_t{1});
}

void TestNsys::schema2x()
{
    QTemporaryDir dir;
    auto input = buildExport(dir, "export-2x.sql", "export-2x.sqlite");
    auto r = importToStore(dir, input);
    QCOMPARE(r.source.ranks, std::vector<int>{0});
    QCOMPARE(r.source.timeBase, int64_t{1630000000123456789});
    QCOMPARE(r.source.records, int64_t{2 + 1 + 3 + 1});

    sql::Database db(r.store, sql::Database::Mode::ReadOnly);
    auto details = nlohmann::json::parse(text(db, "SELECT details FROM sources"));
    QCOMPARE(details["schemaVersion"].get<std::string>(), std::string("2.7.1"));
    QCOMPARE(details["metaTable"].get<std::string>(), std::string("EXPORT_META_DATA"));
    QCOMPARE(scalar(db, "SELECT rank FROM sources"), int64_t{0});
    QCOMPARE(scalar(db, "SELECT pid FROM ranks"), int64_t{4242});
    // Without enum tables the numbering of 2.x exports applies: class 0 is the runtime.
    QCOMPARE(pairs(db, "SELECT kind, COUNT(*) FROM cpu_ranges GROUP BY kind ORDER BY kind"),
             (QStringList{"1=1", "3=3"}));
    QCOMPARE(scalar(db, "SELECT COUNT(*) FROM activities WHERE launch_id IS NOT NULL"), int64_t{3});
    QCOMPARE(text(db, "SELECT s.value FROM activities a JOIN strings s ON s.id = a.name_id WHERE a.kind = 1"),
             std::string("Memcpy DtoH"));
    QCOMPARE(scalar(db, "SELECT kernel_busy_ns FROM gpu_summary"), int64_t{1000 + 1200});
    QCOMPARE(text(db, "SELECT name || '/' || compute_capability FROM gpus"), std::string("Tesla V100-SXM2-16GB/7.0"));
    QCOMPARE(scalar(db, "SELECT COUNT(*) FROM diagnostics"), int64_t{0});
}

void TestNsys::forcedRank()
{
    QTemporaryDir dir;
    auto input = buildExport(dir, "export-2x.sql", "export-2x.sqlite");
    ImportOptions options;
    options.rank = 3;
    auto r = importToStore(dir, input, options);
    QCOMPARE(r.source.ranks, std::vector<int>{3});
    sql::Database db(r.store, sql::Database::Mode::ReadOnly);
    QCOMPARE(pairs(db, "SELECT rank, COUNT(*) FROM activities GROUP BY rank"), QStringList{"3=3"});
    QCOMPARE(pairs(db, "SELECT rank, COUNT(*) FROM cpu_ranges GROUP BY rank"), QStringList{"3=4"});
}

void TestNsys::missingStringTable()
{
    // Names then fall back to their ids; the records themselves are intact.
    QTemporaryDir dir;
    auto input = buildExport(dir, "export-2x.sql", "export-2x.sqlite");
    {
        sql::Database db(input, sql::Database::Mode::ReadWrite);
        db.exec("DROP TABLE StringIds");
    }
    auto r = importToStore(dir, input);
    sql::Database db(r.store, sql::Database::Mode::ReadOnly);
    QCOMPARE(pairs(db, "SELECT s.value, COUNT(*) FROM activities a JOIN strings s ON s.id = a.name_id"
                       " WHERE a.kind = 0 GROUP BY s.value"),
             QStringList{"(string 1)=2"});
    QCOMPARE(scalar(db, "SELECT COUNT(*) FROM activities WHERE launch_id IS NOT NULL"), int64_t{3});
    QCOMPARE(diagnostics(db), (std::map<std::string, int64_t>{{"strings:missing", 3}}));
}

void TestNsys::mpiRanksAndRankOption()
{
    QTemporaryDir dir;
    auto input = buildExport(dir, "export-3x.sql", "export-3x.sqlite");
    {
        sql::Database db(input, sql::Database::Mode::ReadWrite);
        db.exec("INSERT INTO MPI_RANKS VALUES ('not a tid', 5)");
    }
    ImportOptions options;
    options.rank = 7;
    // Several MPI ranks: the option cannot apply to all of them and is ignored.
    auto r = importToStore(dir, input, options);
    QCOMPARE(r.source.ranks, (std::vector<int>{0, 1}));
    {
        sql::Database db(r.store, sql::Database::Mode::ReadOnly);
        QCOMPARE(scalar(db, "SELECT count FROM diagnostics WHERE kind = 'rank_option_ignored'"), int64_t{1});
        // Found before the source row existed, still counted against it.
        QCOMPARE(scalar(db, "SELECT COUNT(*) FROM diagnostics WHERE kind = 'mpi_ranks:bad_row' AND source_id = 1"),
                 int64_t{1});
    }

    // A single MPI rank: the option renumbers it.
    {
        sql::Database db(input, sql::Database::Mode::ReadWrite);
        db.exec("DELETE FROM MPI_RANKS WHERE rank <> 0");
    }
    r = importToStore(dir, input, options);
    QCOMPARE(r.source.ranks, std::vector<int>{7});
    sql::Database db(r.store, sql::Database::Mode::ReadOnly);
    QCOMPARE(pairs(db, "SELECT rank, COUNT(*) FROM activities GROUP BY rank"), QStringList{"7=5"});
    QCOMPARE(scalar(db, "SELECT count FROM diagnostics WHERE kind = 'kernel:process_not_a_rank'"), int64_t{2});
}

void TestNsys::stringsThatAreNotUtf8()
{
    // Exports carry whatever bytes the traced program gave; they are kept
    // as they are, and the source's JSON details stay valid.
    QTemporaryDir dir;
    auto input = buildExport(dir, "export-2x.sql", "export-2x.sqlite");
    {
        sql::Database db(input, sql::Database::Mode::ReadWrite);
        db.exec("UPDATE TARGET_INFO_GPU SET name = CAST(X'47505597FF' AS TEXT);"
                "UPDATE StringIds SET value = CAST(X'6178C3' AS TEXT) WHERE id = 1;");
    }
    auto r = importToStore(dir, input);
    sql::Database db(r.store, sql::Database::Mode::ReadOnly);
    QCOMPARE(text(db, "SELECT hex(s.value) FROM activities a JOIN strings s ON s.id = a.name_id WHERE a.kind = 0"),
             std::string("6178C3"));
    QCOMPARE(text(db, "SELECT hex(name) FROM gpus"), std::string("47505597FF"));
    auto details = nlohmann::json::parse(text(db, "SELECT details FROM sources"));
    QCOMPARE(details["gpus"].size(), size_t{1});
}

void TestNsys::badInput_data()
{
    QTest::addColumn<QString>("name");
    QTest::addColumn<QByteArray>("content"); // raw bytes, or SQL to build a database with when it starts with "sql:"
    QTest::addColumn<QString>("says");

    QTest::newRow("text file") << "trace.sqlite" << QByteArray("hello, this is not a database\n")
                               << "not an SQLite database";
    QTest::newRow("empty file") << "trace.sqlite" << QByteArray() << "file is empty";
    QTest::newRow("report, not export") << "trace.nsys-rep" << QByteArray(4096, '\x7f') << "nsys export";
    QTest::newRow("short header") << "trace.sqlite" << QByteArray("SQLite") << "not an SQLite database";
    QTest::newRow("SQLite, no nsys tables")
        << "other.sqlite" << QByteArray("sql:CREATE TABLE t(a); INSERT INTO t VALUES (1);")
        << "not an Nsight Systems export";
    QTest::newRow("kernels but no metadata")
        << "nometa.sqlite" << QByteArray("sql:CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start, end);")
        << "not an Nsight Systems export";
    QTest::newRow("unknown schema 4.0")
        << "future.sqlite"
        << QByteArray("sql:CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT);"
                      "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '4.0.0');")
        << "schema 4.0.0 is not supported";
    QTest::newRow("unknown schema 1.x")
        << "old.sqlite"
        << QByteArray("sql:CREATE TABLE EXPORT_META_DATA(name TEXT, value TEXT);"
                      "INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_SCHEMA_VERSION', '1.2');")
        << "schema 1.2 is not supported";
    QTest::newRow("metadata without name/value")
        << "odd.sqlite" << QByteArray("sql:CREATE TABLE META_DATA_EXPORT(k, v);") << "schema is unknown";
}

void TestNsys::badInput()
{
    QFETCH(QString, name);
    QFETCH(QByteArray, content);
    QFETCH(QString, says);
    QTemporaryDir dir;
    std::string input = test::path(dir, name.toUtf8().constData());
    if (content.startsWith("sql:")) {
        sql::Database db(input, sql::Database::Mode::Create);
        db.exec(content.mid(4).toStdString());
    } else {
        QFile f(QString::fromStdString(input));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(content);
    }
    auto before = fileHash(input);
    StoreWriter writer(test::path(dir, "out.pipescope"));
    try {
        importNsys(input, writer, ImportOptions{.rank = {}, .progress = false});
        QFAIL("import accepted a bad file");
    } catch (const FormatError& e) {
        QString msg = QString::fromUtf8(e.what());
        QVERIFY2(msg.startsWith(QString::fromStdString(input) + ": "), qPrintable(msg));
        QVERIFY2(msg.contains(says), qPrintable(msg));
        QVERIFY2(!msg.contains('\n'), qPrintable(msg));
    }
    QCOMPARE(fileHash(input), before);
}

void TestNsys::missingFile()
{
    QTemporaryDir dir;
    std::string input = test::path(dir, "absent.sqlite");
    StoreWriter writer(test::path(dir, "out.pipescope"));
    try {
        importNsys(input, writer, ImportOptions{});
        QFAIL("import accepted a missing file");
    } catch (const Error& e) {
        QVERIFY2(QString::fromUtf8(e.what()).startsWith(QString::fromStdString(input) + ": no such file"), e.what());
    }
}

void TestNsys::unreadablePagesAreFormatErrors()
{
    // A valid header over pages cut off halfway: the error names the file
    // (not SQLite's URI for it) and says it is corrupt.
    QTemporaryDir dir;
    auto full = buildExport(dir, "export-3x.sql", "full.sqlite");
    std::string cut = test::path(dir, "cut.sqlite");
    std::string bytes = readText(full);
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    StoreWriter writer(test::path(dir, "out.pipescope"));
    try {
        importNsys(cut, writer, ImportOptions{.rank = {}, .progress = false});
        QFAIL("import accepted a truncated file");
    } catch (const FormatError& e) {
        QString msg = QString::fromUtf8(e.what());
        QVERIFY2(msg.startsWith(QString::fromStdString(cut) + ": "), qPrintable(msg));
        QVERIFY2(!msg.contains("file:"), qPrintable(msg));
    }

    // A schema format number no SQLite knows (header bytes 44-47).
    std::string odd = test::path(dir, "odd-format.sqlite");
    bytes[44] = bytes[45] = bytes[46] = 0;
    bytes[47] = 9;
    std::ofstream(odd, std::ios::binary) << bytes;
    try {
        importNsys(odd, writer, ImportOptions{.rank = {}, .progress = false});
        QFAIL("import accepted an unknown schema format");
    } catch (const FormatError& e) {
        QCOMPARE(QString::fromUtf8(e.what()),
                 QString::fromStdString(odd) + ": cannot read the Nsight Systems export: unsupported file format");
    }
}

QTEST_GUILESS_MAIN(TestNsys)
#include "tst_nsys.moc"
