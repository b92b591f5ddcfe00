// The HTA-compatible views on real traces reproduce Holistic Trace Analysis's
// own figures (data/external/HTA-RESULTS.md), and the exact views agree with
// the corpus's independently computed busy unions (data/external/README.md).
#include "TestSupport.h"
#include "analysis/Analysis.h"
#include "import/Import.h"
#include "store/Store.h"
#include "store/StoreWriter.h"

#include <QtTest>
#include <nlohmann/json.hpp>

using namespace pipescope;

namespace {

Trace importAndLoad(const std::string& file, const QTemporaryDir& dir)
{
    std::string store = test::path(dir, "job.pipescope");
    {
        StoreWriter w(store);
        ImportOptions io;
        io.progress = false;
        importKineto(file, w, io);
        w.finish();
    }
    Store s(store);
    return s.load();
}

} // namespace

class TestAnalysisExternal : public QObject {
    Q_OBJECT
private slots:
    void htaTemporal_data();
    void htaTemporal();
    void htaIdle_data();
    void htaIdle();
    void exactMatchesBusyUnion_data();
    void exactMatchesBusyUnion();
    void notPipeline();
    void cliAnalyze();
};

void TestAnalysisExternal::htaTemporal_data()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<qint64>("kernelTime");
    QTest::addColumn<qint64>("idle");
    QTest::addColumn<qint64>("compute");
    QTest::addColumn<qint64>("nonCompute");
    QTest::addColumn<double>("overlap"); // -1: none
    // HTA-RESULTS.md, microseconds.
    QTest::newRow("sampled r0") << "hta-sampled-128rank-r0" << qint64(600058) << qint64(321378) << qint64(106252) << qint64(172428) << 11.81;
    QTest::newRow("sampled r1") << "hta-sampled-128rank-r1" << qint64(600674) << qint64(328671) << qint64(135548) << qint64(136455) << 20.05;
    QTest::newRow("nccl 2rank") << "hta-nccl-2rank-r0" << qint64(435586) << qint64(338781) << qint64(75169) << qint64(21636) << 14.31;
    QTest::newRow("ns resolution") << "hta-ns-resolution-1rank" << qint64(384634) << qint64(10113) << qint64(372150) << qint64(2371) << -1.0;
}

void TestAnalysisExternal::htaTemporal()
{
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QFETCH(QString, file);
    QFETCH(qint64, kernelTime);
    QFETCH(qint64, idle);
    QFETCH(qint64, compute);
    QFETCH(qint64, nonCompute);
    QFETCH(double, overlap);
    QTemporaryDir dir;
    Trace t = importAndLoad(test::externalData(("kineto/" + file + ".json.gz").toUtf8().constData()), dir);
    AnalyzeOptions o;
    o.htaCompatible = true;
    AnalysisResult r = analyze(t, o);
    QCOMPARE(r.hta.temporal.size(), size_t(1));
    const auto& h = r.hta.temporal[0];
    QCOMPARE(h.kernelTimeNs, kernelTime * 1000);
    QCOMPARE(h.idleTimeNs, idle * 1000);
    QCOMPARE(h.computeTimeNs, compute * 1000);
    QCOMPARE(h.nonComputeTimeNs, nonCompute * 1000);
    if (overlap < 0) {
        QVERIFY(!h.commCompOverlapPct);
    } else {
        QVERIFY(h.commCompOverlapPct);
        QCOMPARE(std::round(*h.commCompOverlapPct * 100) / 100, overlap);
    }
}

void TestAnalysisExternal::htaIdle_data()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<qint64>("stream");
    QTest::addColumn<qint64>("host");
    QTest::addColumn<qint64>("kernel");
    QTest::addColumn<qint64>("other");
    struct Row {
        const char* file;
        qint64 stream, host, kernel, other;
    };
    for (Row row : std::initializer_list<Row>{
             {"hta-sampled-128rank-r0", 7, 213825, 1985, 261740}, {"hta-sampled-128rank-r0", 23, 596037, 70, 34},
             {"hta-sampled-128rank-r0", 25, 0, 9, 47865},         {"hta-sampled-128rank-r0", 84, 148934, 6, 0},
             {"hta-sampled-128rank-r0", 203, 0, 0, 0},            {"hta-sampled-128rank-r1", 7, 156827, 1816, 281064},
             {"hta-sampled-128rank-r1", 23, 596313, 100, 0},      {"hta-sampled-128rank-r1", 25, 0, 9, 53028},
             {"hta-sampled-128rank-r1", 84, 251860, 0, 23247},    {"hta-sampled-128rank-r1", 203, 0, 0, 0},
             {"hta-nccl-2rank-r0", 7, 357247, 2155, 0},           {"hta-nccl-2rank-r0", 40, 381499, 0, 0},
             {"hta-ns-resolution-1rank", 7, 1709, 8404, 0}})
        QTest::newRow(QString("%1 stream %2").arg(row.file).arg(row.stream).toUtf8())
            << QString(row.file) << row.stream << row.host << row.kernel << row.other;
}

void TestAnalysisExternal::htaIdle()
{
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QFETCH(QString, file);
    QFETCH(qint64, stream);
    QFETCH(qint64, host);
    QFETCH(qint64, kernel);
    QFETCH(qint64, other);
    QTemporaryDir dir;
    Trace t = importAndLoad(test::externalData(("kineto/" + file + ".json.gz").toUtf8().constData()), dir);
    AnalyzeOptions o;
    o.htaCompatible = true;
    AnalysisResult r = analyze(t, o);
    const HtaStreamIdle* found = nullptr;
    for (const auto& s : r.hta.idle)
        if (s.stream == stream)
            found = &s;
    QVERIFY(found);
    QCOMPARE(found->hostWaitNs, host * 1000);
    QCOMPARE(found->kernelWaitNs, kernel * 1000);
    QCOMPARE(found->otherNs, other * 1000);
}

void TestAnalysisExternal::exactMatchesBusyUnion_data()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<qint64>("spanNs");
    QTest::addColumn<qint64>("idleNs");
    // README.md: busy union over kernel + gpu_memcpy + gpu_memset, exact.
    QTest::newRow("nccl 2rank") << "hta-nccl-2rank-r0" << qint64(660551005) << qint64(503050991);
    QTest::newRow("sampled r0") << "hta-sampled-128rank-r0" << qint64(1222847000) << qint64(675191000);
    QTest::newRow("sampled r1") << "hta-sampled-128rank-r1" << qint64(1231186000) << qint64(651136000);
    QTest::newRow("alexnet") << "hta-alexnet-1rank" << qint64(12920244000) << qint64(12854103000);
    QTest::newRow("amd mi250") << "hta-amd-mi250-1rank" << qint64(8911887) << qint64(8762845);
    QTest::newRow("ns resolution") << "hta-ns-resolution-1rank" << qint64(480029179) << qint64(7574738);
}

void TestAnalysisExternal::exactMatchesBusyUnion()
{
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QFETCH(QString, file);
    QFETCH(qint64, spanNs);
    QFETCH(qint64, idleNs);
    QTemporaryDir dir;
    Trace t = importAndLoad(test::externalData(("kineto/" + file + ".json.gz").toUtf8().constData()), dir);
    AnalysisResult r = analyze(t);
    QCOMPARE(r.hta.temporal.size(), size_t(1));
    QCOMPARE(r.hta.temporal[0].kernelTimeNs, spanNs);
    QCOMPARE(r.hta.temporal[0].idleTimeNs, idleNs);
    // The pipeline view's idle of each iteration splits exactly into causes.
    for (const auto& ri : r.idle) {
        TimeNs sum = 0;
        for (TimeNs v : ri.byCause)
            sum += v;
        QCOMPARE(sum, ri.idleNs);
    }
}

// None of the corpus is pipeline-parallel.
void TestAnalysisExternal::notPipeline()
{
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QTemporaryDir dir;
    Trace t = importAndLoad(test::externalData("kineto/hta-nccl-2rank-r0.json.gz"), dir);
    AnalysisResult r = analyze(t);
    QVERIFY(!r.pipeline.found);
    QCOMPARE(r.iterations.size(), size_t(3)); // ProfilerStep#4, #5, #6
    QCOMPARE(std::string(toString(r.iterations[0].source)), std::string("profiler_step"));
    QCOMPARE(r.kernelCounts[static_cast<size_t>(WorkClass::Collective)], int64_t(21));
}

// pipescope analyze: tables, JSON, and the store left untouched unless --cache.
void TestAnalysisExternal::cliAnalyze()
{
#ifndef PIPESCOPE_CLI
    QSKIP("the pipescope command-line tool is not built");
#else
    PIPESCOPE_REQUIRE_EXTERNAL_DATA();
    QTemporaryDir dir;
    importAndLoad(test::externalData("kineto/hta-nccl-2rank-r0.json.gz"), dir);
    const QString store = QString::fromStdString(test::path(dir, "job.pipescope"));
    auto bytes = [&]() {
        QFile f(store);
        f.open(QIODevice::ReadOnly);
        return f.readAll();
    };
    const QByteArray before = bytes();

    auto text = test::runCli({"analyze", store});
    QCOMPARE(text.exitCode, 0);
    QVERIFY(text.out.contains("no pipeline found"));
    QVERIFY(text.out.contains("HTA temporal breakdown"));
    QVERIFY(text.out.contains("1 of 2 ranks have no GPU activity"));

    auto hta = test::runCli({"analyze", store, "--json", "--hta-compatible"});
    QCOMPARE(hta.exitCode, 0);
    auto j = nlohmann::json::parse(hta.out.toStdString());
    QCOMPARE(j["schema"].get<std::string>(), std::string("pipescope.analysis/2"));
    QCOMPARE(j["hta"]["mode"].get<std::string>(), std::string("hta-compatible"));
    QCOMPARE(j["hta"]["temporal_breakdown"][0]["idle_time_ns"].get<int64_t>(), int64_t(338781000));
    QCOMPARE(j["pipeline"]["found"].get<bool>(), false);
    QCOMPARE(bytes(), before);

    auto bad = test::runCli({"analyze", store, "--iteration", "7"});
    QCOMPARE(bad.exitCode, 1);
    QVERIFY(bad.err.contains("out of range"));
    auto missing = test::runCli({"analyze", dir.path() + "/nope.pipescope"});
    QCOMPARE(missing.exitCode, 1);

    auto out = test::runCli({"analyze", store, "--json", "-o", dir.path() + "/a.json"});
    QCOMPARE(out.exitCode, 0);
    QVERIFY(QFile::exists(dir.path() + "/a.json"));

    // Only --cache writes to the store, and the second run reads the cached result.
    auto c1 = test::runCli({"analyze", store, "--json", "--cache"});
    QCOMPARE(c1.exitCode, 0);
    QVERIFY(bytes() != before);
    Store s(store.toStdString());
    QCOMPARE(s.database().prepare("SELECT COUNT(*) FROM cache").step(), true);
    auto c2 = test::runCli({"analyze", store, "--json", "--cache"});
    QCOMPARE(c2.out, c1.out);
#endif
}

QTEST_GUILESS_MAIN(TestAnalysisExternal)
#include "tst_analysis_external.moc"
