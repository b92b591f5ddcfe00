// `pipescope import` with parser threads (ImportJobOptions::jobs): the store
// must be the one a serial import writes, table by table and row by row, and
// bad files, cancellation and progress must behave as in a serial import.
#include "EmittedJob.h"
#include "TestSupport.h"

#include "import/Import.h"
#include "import/kineto/ParseAhead.h"
#include "store/Sqlite.h"
#include "store/StoreWriter.h"
#include "util/Error.h"
#include "simulate/KinetoEmitter.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"

#include <QDir>
#include <QFile>
#include <QtTest>
#include <atomic>
#include <mutex>
#include <set>
#include <sqlite3.h>
#include <thread>
#include <zlib.h>

using namespace pipescope;
using pipescope::test::emitJob;

namespace {

// Every table of a store as text, one line per row in the order of all its
// columns (ids first), so that two stores compare row by row. The creation
// time is the only value that may differ between two imports.
std::vector<std::string> dumpStore(const std::string& path)
{
    sql::Database db(path, sql::Database::Mode::ReadOnly);
    std::vector<std::string> tables;
    {
        auto st = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
        while (st.step())
            tables.push_back(st.string(0));
    }
    std::vector<std::string> lines;
    for (const std::string& table : tables) {
        int columns = 0;
        {
            auto st = db.prepare("SELECT COUNT(*) FROM pragma_table_info(?1)");
            st.bind(1, table);
            st.step();
            columns = static_cast<int>(st.int64(0));
        }
        std::string order;
        for (int c = 1; c <= columns; ++c)
            order += (c > 1 ? "," : "") + std::to_string(c);
        sqlite3_stmt* st = nullptr;
        const std::string sql = "SELECT * FROM \"" + table + "\" ORDER BY " + order;
        if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
            throw Error(sql + ": " + sqlite3_errmsg(db.handle()));
        int64_t rows = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            std::string line = table + ":";
            for (int c = 0; c < columns; ++c) {
                switch (sqlite3_column_type(st, c)) {
                case SQLITE_NULL:
                    line += " NULL";
                    break;
                case SQLITE_INTEGER:
                    line += " " + std::to_string(sqlite3_column_int64(st, c));
                    break;
                case SQLITE_FLOAT:
                    line += " f" + std::to_string(sqlite3_column_double(st, c));
                    break;
                default:
                    line += " '" + std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, c))) + "'";
                    break;
                }
            }
            if (table == "meta" && line.starts_with("meta: 'created_at'"))
                continue;
            lines.push_back(line);
            ++rows;
        }
        sqlite3_finalize(st);
        lines.push_back(table + ": " + std::to_string(rows) + " rows");
    }
    return lines;
}

// Fails naming the first row that differs.
void compareStores(const std::string& serial, const std::string& parallel)
{
    const auto a = dumpStore(serial), b = dumpStore(parallel);
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        QVERIFY2(a[i] == b[i], qPrintable(QString::fromStdString("serial:   " + a[i] + "\nparallel: " + b[i])));
    QCOMPARE(a.size(), b.size());
    QVERIFY(a.size() > 10);
}

QString describe(const ImportJobReport& r)
{
    QStringList out;
    for (size_t i = 0; i < r.sources.size(); ++i) {
        const ImportedSource& s = r.sources[i];
        QStringList ranks;
        for (int k : s.ranks)
            ranks << QString::number(k);
        out << QString("%1 source=%2 ranks=%3 base=%4 abs=%5 records=%6 job=%7 world=%8")
                   .arg(QString::fromStdString(r.files[i]))
                   .arg(s.sourceId)
                   .arg(ranks.join(','))
                   .arg(s.timeBase)
                   .arg(s.absoluteClock)
                   .arg(s.records)
                   .arg(QString::fromStdString(s.jobId))
                   .arg(s.worldSize.value_or(-1));
    }
    for (auto [rank, offset] : r.offsets)
        out << QString("offset %1 %2").arg(rank).arg(offset);
    out << QString("alignment %1").arg(static_cast<int>(r.alignmentUsed));
    for (const auto& w : r.warnings)
        out << QString::fromStdString(w);
    return out.join('\n');
}

void writeFile(const QString& path, const QByteArray& bytes)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    QCOMPARE(f.write(bytes), bytes.size());
}

QByteArray readFile(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return f.readAll();
}

QByteArray gzipBytes(const QByteArray& raw)
{
    z_stream z{};
    deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
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

struct Outcome {
    ImportJobReport report;
    QString error; // what() of the exception, empty when the import succeeded
};

Outcome runImport(const QStringList& inputs, const std::string& output, Alignment alignment, int jobs,
                  const WorkControl* work = nullptr,
                  int64_t settleInMemoryRecords = ImportOptions::kSettleInMemoryRecords)
{
    ImportJobOptions o;
    for (const QString& in : inputs)
        o.inputs.push_back(in.toStdString());
    o.output = output;
    o.alignment = alignment;
    o.progress = false;
    o.jobs = jobs;
    o.work = work;
    o.settleInMemoryRecords = settleInMemoryRecords;
    Outcome out;
    try {
        out.report = importJob(o);
    } catch (const std::exception& e) {
        out.error = QString::fromUtf8(e.what());
    }
    return out;
}

// The folder's entries other than the inputs: a failed import leaves none.
QStringList leftovers(const QTemporaryDir& dir)
{
    return QDir(dir.path()).entryList(QDir::Files | QDir::Hidden | QDir::NoDotAndDotDot);
}

} // namespace

class TestImportJobs : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void sameStoreWithAnyNumberOfJobs_data();
    void sameStoreWithAnyNumberOfJobs();
    void workersWaitForTheWriter();
    void workersStayWithinTheirShareOfBatches();
    void workersStopWhenTheWriterStops();
    void brokenFileFailsTheImport_data();
    void brokenFileFailsTheImport();
    void cancelStopsTheWorkers();
    void progressComesFromTheCallingThread();

private:
    QTemporaryDir data_;
    QString job_;   // 8 simulated ranks, two of them gzipped, one whose rank is settled after its events
    QString edges_; // small hand-written traces of one job: flows only, NCCL args from CPU ops, simulated
};

void TestImportJobs::initTestCase()
{
    QVERIFY(data_.isValid());
    job_ = data_.path() + "/job";
    QVERIFY(QDir().mkpath(job_));
    emitJob(job_, 4, 2, 8);
    // Compressed files, and a file without distributedInfo.rank: its records
    // are written under a placeholder rank and moved to rank 6 (from its name) at its end.
    for (const char* name : {"rank-1.json", "rank-5.json"}) {
        const QString path = job_ + "/" + name;
        writeFile(path + ".gz", gzipBytes(readFile(path)));
        QVERIFY(QFile::remove(path));
    }
    {
        const QString path = job_ + "/rank-6.json";
        QByteArray text = readFile(path);
        const qsizetype at = text.indexOf("\"rank\": 6,");
        QVERIFY(at > 0);
        text.replace(at, qsizetype(strlen("\"rank\": 6,")), "");
        writeFile(path, text);
    }
    edges_ = data_.path() + "/edges";
    QVERIFY(QDir().mkpath(edges_));
    const QString testData = QString::fromUtf8(PIPESCOPE_TESTDATA) + "/kineto/";
    // rank-2: no distributedInfo, launches linked by flows only.
    QVERIFY(QFile::copy(testData + "flows-only.json", edges_ + "/rank-2.json"));
    QVERIFY(QFile::copy(testData + "nccl-cpu-args.json", edges_ + "/nccl-cpu-args.json"));
    QVERIFY(QFile::copy(testData + "simulated.json", edges_ + "/simulated.json"));
}

void TestImportJobs::sameStoreWithAnyNumberOfJobs_data()
{
    QTest::addColumn<QStringList>("inputs");
    QTest::addColumn<int>("alignment");
    QTest::newRow("simulated job, time base") << QStringList{job_} << int(Alignment::TimeBase);
    QTest::newRow("simulated job, collectives") << QStringList{job_} << int(Alignment::Collectives);
    QTest::newRow("simulated job, no alignment") << QStringList{job_} << int(Alignment::None);
    QTest::newRow("one file") << QStringList{job_ + "/rank-6.json"} << int(Alignment::TimeBase);
    QTest::newRow("edge cases") << QStringList{edges_} << int(Alignment::TimeBase);
    QTest::newRow("rank after events")
        << QStringList{QString::fromUtf8(PIPESCOPE_TESTDATA) + "/kineto/distinfo-after-events.json"}
        << int(Alignment::TimeBase);
    if (test::haveExternalData()) {
        const auto ext = [](const char* name) { return QString::fromStdString(test::externalData(name)); };
        QTest::newRow("external 128-rank pair")
            << QStringList{ext("kineto/hta-sampled-128rank-r0.json.gz"), ext("kineto/hta-sampled-128rank-r1.json.gz")}
            << int(Alignment::Collectives);
        QTest::newRow("external nccl") << QStringList{ext("kineto/hta-nccl-2rank-r0.json.gz")} << int(Alignment::TimeBase);
        QTest::newRow("external ns resolution")
            << QStringList{ext("kineto/hta-ns-resolution-1rank.json.gz")} << int(Alignment::TimeBase);
    }
}

void TestImportJobs::sameStoreWithAnyNumberOfJobs()
{
    QFETCH(QStringList, inputs);
    QFETCH(int, alignment);
    QTemporaryDir out;
    const std::string serialPath = test::path(out, "serial.pipescope");
    const Outcome serial = runImport(inputs, serialPath, Alignment(alignment), 1);
    QVERIFY2(serial.error.isEmpty(), qPrintable(serial.error));
    for (int jobs : {2, 4}) {
        const std::string path = test::path(out, ("jobs-" + std::to_string(jobs) + ".pipescope").c_str());
        const Outcome parallel = runImport(inputs, path, Alignment(alignment), jobs);
        QVERIFY2(parallel.error.isEmpty(), qPrintable(parallel.error));
        QCOMPARE(describe(parallel.report), describe(serial.report));
        compareStores(serialPath, path);
        if (QTest::currentTestFailed())
            return;
    }
    // Launch links and nesting settled as each file is parsed, or by
    // StoreWriter::finish() for files over the cap (0: every file; 40: the
    // small ones are held, the others not), come out the same.
    for (int64_t cap : {int64_t{0}, int64_t{40}}) {
        for (int jobs : {1, 2}) {
            const std::string path =
                test::path(out, ("cap-" + std::to_string(cap) + "-jobs-" + std::to_string(jobs) + ".pipescope").c_str());
            const Outcome other = runImport(inputs, path, Alignment(alignment), jobs, nullptr, cap);
            QVERIFY2(other.error.isEmpty(), qPrintable(other.error));
            QCOMPARE(describe(other.report), describe(serial.report));
            compareStores(serialPath, path);
            if (QTest::currentTestFailed())
                return;
            // Linking's lookup index is gone, and the store's indexes took its pages.
            sql::Database db(path, sql::Database::Mode::ReadOnly);
            auto lookup = db.prepare("SELECT COUNT(*) FROM sqlite_master WHERE name = 'launch_lookup'");
            QVERIFY(lookup.step());
            QCOMPARE(lookup.int64(0), int64_t(0));
            auto freePages = db.prepare("PRAGMA freelist_count");
            QVERIFY(freePages.step());
            QCOMPARE(freePages.int64(0), int64_t(0));
        }
    }
    // The comparisons above cover launch_id, launch_ns, depth and parent_id:
    // make sure they were there to compare.
    sql::Database db(serialPath, sql::Database::Mode::ReadOnly);
    auto count = [&](const char* sqlText) {
        auto st = db.prepare(sqlText);
        st.step();
        return st.int64(0);
    };
    if (count("SELECT COUNT(*) FROM activities WHERE correlation IS NOT NULL") > 0)
        QVERIFY(count("SELECT COUNT(*) FROM activities WHERE launch_id IS NOT NULL AND launch_ns IS NOT NULL") > 0);
    if (inputs == QStringList{job_})
        QVERIFY(count("SELECT COUNT(*) FROM cpu_ranges WHERE parent_id IS NOT NULL AND depth > 0") > 0);
}

namespace {

// The files of a folder in name order, and their serial import into a store.
std::vector<std::string> filesOf(const QString& folder)
{
    std::vector<std::string> files;
    for (const QString& name : QDir(folder).entryList(QDir::Files, QDir::Name))
        files.push_back((folder + "/" + name).toStdString());
    return files;
}

void importSerially(const std::vector<std::string>& files, const ImportOptions& io, const std::string& path)
{
    StoreWriter writer(path);
    for (const auto& f : files)
        importKineto(f, writer, io);
    writer.finish();
}

} // namespace

void TestImportJobs::workersWaitForTheWriter()
{
    // One batch queued per file at most: workers wait for the writer at
    // nearly every batch, yet each file's records arrive whole and in order.
    QTemporaryDir out;
    const std::vector<std::string> files = filesOf(job_);
    QCOMPARE(files.size(), size_t(8));
    ImportOptions io;
    io.progress = false;
    const std::string serial = test::path(out, "serial.pipescope"), ahead = test::path(out, "ahead.pipescope");
    importSerially(files, io, serial);
    {
        StoreWriter writer(ahead);
        kineto::ParseAhead parse(files, std::vector<bool>(files.size(), true), io, 3, 1);
        for (size_t i = 0; i < files.size(); ++i)
            parse.import(i, writer);
        writer.finish();
    }
    compareStores(serial, ahead);
}

void TestImportJobs::workersStayWithinTheirShareOfBatches()
{
    // Files that each fit in their queue (about 4 batches of 8 allowed) and
    // a writer that starts late: the workers may not parse file after file
    // ahead of it (all 8 files: about 34 batches). Two workers, 8 batches
    // each: at most 16 queued over all files, plus up to 8 of the file the
    // writer is on (16 before the writer starts). The store is the serial
    // import's.
    QTemporaryDir out;
    const std::vector<std::string> files = filesOf(job_);
    QCOMPARE(files.size(), size_t(8));
    ImportOptions io;
    io.progress = false;
    const std::string serial = test::path(out, "serial.pipescope"), ahead = test::path(out, "ahead.pipescope");
    importSerially(files, io, serial);
    {
        StoreWriter writer(ahead);
        kineto::ParseAhead parse(files, std::vector<bool>(files.size(), true), io, 2, 8);
        // Before the writer starts, the workers fill their share and stop there.
        QTRY_VERIFY_WITH_TIMEOUT(parse.peakQueued() >= 16, 60000);
        QTest::qWait(300); // time to parse more files, were they let
        QCOMPARE(parse.peakQueued(), size_t(16));
        for (size_t i = 0; i < files.size(); ++i)
            parse.import(i, writer);
        writer.finish();
        QVERIFY2(parse.peakQueued() <= 24, std::to_string(parse.peakQueued()).c_str());
    }
    compareStores(serial, ahead);
}

void TestImportJobs::workersStopWhenTheWriterStops()
{
    // The writer gives up after the first file (an error, a cancel) while
    // the other workers wait on full queues: destroying the pool ends them.
    QTemporaryDir out;
    const std::vector<std::string> files = filesOf(job_);
    ImportOptions io;
    io.progress = false;
    StoreWriter writer(test::path(out, "job.pipescope"));
    {
        kineto::ParseAhead parse(files, std::vector<bool>(files.size(), true), io, 4, 1);
        parse.import(0, writer);
        QTest::qWait(100); // the others fill their queue of one batch and wait
    } // returns once every worker has ended
}

void TestImportJobs::brokenFileFailsTheImport_data()
{
    QTest::addColumn<QByteArray>("content");
    QTest::addColumn<QString>("message");
    QTest::addColumn<bool>("named"); // named on the command line, or found in the folder
    // Breaks after many good events, so the writer has written some of the file.
    QByteArray truncated = readFile(job_ + "/rank-0.json");
    truncated.chop(truncated.size() / 3);
    QTest::newRow("truncated, named") << truncated << "invalid JSON at line" << true;
    QTest::newRow("truncated, in the folder") << truncated << "invalid JSON at line" << false;
    QTest::newRow("no usable events") << QByteArray(R"({"traceEvents": [{"ph": "M", "name": "x"}]})")
                                      << "no usable events" << true;
    QTest::newRow("rank out of range")
        << QByteArray(R"({"distributedInfo": {"rank": 99999999}, "traceEvents": []})") << "outside the supported ranks"
        << true;
}

void TestImportJobs::brokenFileFailsTheImport()
{
    QFETCH(QByteArray, content);
    QFETCH(QString, message);
    QFETCH(bool, named);
    // Good ranks before and after the broken file (rank-3 in file order); a
    // second broken file after it must not be the one reported.
    QTemporaryDir dir;
    const QString in = dir.path() + "/traces";
    QVERIFY(QDir().mkpath(in));
    for (const char* rank : {"rank-0", "rank-2", "rank-4"})
        QVERIFY(QFile::copy(job_ + "/" + rank + ".json", in + "/" + rank + ".json"));
    writeFile(in + "/rank-3.json", content);
    writeFile(in + "/rank-7.json", "{\"traceEvents\": [");
    const QStringList inputs = named ? QStringList{in + "/rank-0.json", in + "/rank-2.json", in + "/rank-3.json",
                                                   in + "/rank-4.json", in + "/rank-7.json"}
                                     : QStringList{in};
    const Outcome serial = runImport(inputs, test::path(dir, "serial.pipescope"), Alignment::TimeBase, 1);
    QVERIFY2(serial.error.startsWith(in + "/rank-3.json: "), qPrintable(serial.error));
    QVERIFY2(serial.error.contains(message), qPrintable(serial.error));
    for (int jobs : {2, 4}) {
        const Outcome parallel = runImport(inputs, test::path(dir, "parallel.pipescope"), Alignment::TimeBase, jobs);
        QCOMPARE(parallel.error, serial.error);
    }
    QCOMPARE(leftovers(dir), QStringList());
}

void TestImportJobs::cancelStopsTheWorkers()
{
    // Stopped while the second file is read: workers blocked on a full queue
    // or parsing further files must all end, and nothing is left behind.
    QTemporaryDir dir;
    std::atomic<bool> stop{false};
    WorkControl work;
    work.stop = &stop;
    int files = 0;
    work.onProgress = [&](std::string_view phase, double) {
        if (phase.starts_with("importing ") && ++files == 2)
            stop = true;
    };
    const Outcome o = runImport({job_}, test::path(dir, "job.pipescope"), Alignment::TimeBase, 4, &work);
    QCOMPARE(o.error, QString("cancelled"));
    QCOMPARE(leftovers(dir), QStringList());
}

void TestImportJobs::progressComesFromTheCallingThread()
{
    // The app's progress dialog is told from the thread that called
    // importJob() only, and about every file in order.
    QTemporaryDir dir;
    const auto caller = std::this_thread::get_id();
    std::mutex m;
    std::set<std::thread::id> threads;
    QStringList phases;
    WorkControl work;
    work.onProgress = [&](std::string_view phase, double) {
        std::lock_guard<std::mutex> lock(m);
        threads.insert(std::this_thread::get_id());
        const QString p = QString::fromUtf8(phase.data(), qsizetype(phase.size()));
        if (phases.isEmpty() || phases.back() != p)
            phases << p;
    };
    const Outcome o = runImport({job_}, test::path(dir, "job.pipescope"), Alignment::TimeBase, 4, &work);
    QVERIFY2(o.error.isEmpty(), qPrintable(o.error));
    QCOMPARE(threads, std::set<std::thread::id>{caller});
    QStringList importing;
    for (const QString& p : phases)
        if (p.startsWith("importing "))
            importing << p.mid(10);
    QStringList files;
    for (const auto& f : o.report.files)
        files << QString::fromStdString(f);
    QCOMPARE(importing, files);
    QVERIFY(phases.filter("reading ").size() >= files.size());
    QVERIFY(phases.contains("finishing the store"));
}

QTEST_GUILESS_MAIN(TestImportJobs)
#include "tst_import_jobs.moc"
