// `pipescope simulate` and `pipescope whatif` from the command line: tables,
// JSON, simulated Kineto traces, and one clear error for each bad flag.
#include "TestSupport.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>

using pipescope::test::runCli;

namespace {

QString model(const char* name) { return QString::fromUtf8(PIPESCOPE_SOURCE_DIR) + "/resources/models/" + name; }

} // namespace

class TestWhatIfCli : public QObject {
    Q_OBJECT
private slots:
    void simulateTable();
    void simulateJson();
    void simulateAutoBalanceAndSearch();
    void badFlags_data();
    void badFlags();
    void scheduleCsv();
    void emitKineto();
    void whatIfOnSimulatedTrace();
    void whatIfOnRealCapture_data();
    void whatIfOnRealCapture();
    void layersFromModuleEvents();
    void noLayersNotice();
    void extraWorkOnRealCapture();
};

void TestWhatIfCli::simulateTable()
{
    const auto r = runCli({"simulate", model("gpt-32l.json")});
    QCOMPARE(r.exitCode, 0);
    QVERIFY2(r.out.contains("simulated: 1f1b, pp 4, 8 microbatches, boundaries 8,16,24"), qPrintable(r.out));
    QVERIFY(r.out.contains("iteration"));
    QVERIFY(r.out.contains("bubble"));
    QVERIFY(r.out.contains("peak memory"));
}

void TestWhatIfCli::simulateJson()
{
    const auto r = runCli({"simulate", model("gpt-32l.json"), "--schedule", "interleaved", "--microbatches", "8", "--json"});
    QCOMPARE(r.exitCode, 0);
    const QJsonObject doc = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(doc["schema"].toString(), QString("pipescope.whatif/1"));
    const QJsonObject p = doc["predictions"].toArray()[0].toObject();
    QCOMPARE(p["config"].toObject()["schedule"].toString(), QString("interleaved-1f1b"));
    QCOMPARE(p["config"].toObject()["v"].toInt(), 2);
    QCOMPARE(p["ranks"].toArray().size(), 4);
    // 4 ranks x 2 chunks x 8 microbatches x (F + B) steps.
    int steps = 0;
    for (const auto& rank : p["ranks"].toArray())
        steps += rank.toObject()["actions"].toArray().size();
    QCOMPARE(steps, 4 * 2 * 8 * 2);
    QVERIFY(p["iteration_ns"].toDouble() > 0);
}

void TestWhatIfCli::simulateAutoBalanceAndSearch()
{
    const auto r = runCli({"simulate", model("moe-24l.json"), "--auto-balance", "--search", "--json", "--summary"});
    QCOMPARE(r.exitCode, 0);
    const QJsonObject doc = QJsonDocument::fromJson(r.out.toUtf8()).object();
    const QJsonObject p = doc["predictions"].toArray()[0].toObject();
    QCOMPARE(p["label"].toString(), QString("auto-balance"));
    // The heavy MoE layers at the end and the head push boundaries back from 6,12,18.
    const QJsonArray b = p["config"].toObject()["boundaries"].toArray();
    QCOMPARE(b.size(), 3);
    QVERIFY(b[2].toInt() > 18);
    const QJsonArray search = doc["search"].toArray();
    QVERIFY(search.size() > 4);
    QCOMPARE(search[0].toObject()["rank"].toInt(), 1);
    QVERIFY(search[0].toObject()["iteration_ns"].toDouble() <= search[1].toObject()["iteration_ns"].toDouble());
}

void TestWhatIfCli::badFlags_data()
{
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<int>("exitCode");
    QTest::addColumn<QString>("message");
    const QString m = model("gpt-32l.json");
    QTest::newRow("boundaries not increasing") << QStringList{"simulate", m, "--boundaries", "8,4,20"} << 1
                                               << "--boundaries: stage boundaries must increase";
    QTest::newRow("boundaries count") << QStringList{"simulate", m, "--boundaries", "8,16"} << 1
                                      << "--boundaries: 2 stage boundaries given; 4 stages (pp x v) need 3";
    QTest::newRow("v does not divide") << QStringList{"simulate", m, "--schedule", "interleaved", "--v", "3"} << 1
                                       << "32 layers do not split evenly over 12 stages";
    QTest::newRow("unknown schedule") << QStringList{"simulate", m, "--schedule", "2f2b"} << 1 << "unknown schedule '2f2b'";
    QTest::newRow("zb-v needs v 2") << QStringList{"simulate", m, "--schedule", "zb-v", "--v", "4"} << 1
                                    << "zb-v places exactly two chunks per rank";
    QTest::newRow("pp zero") << QStringList{"simulate", m, "--pp", "0"} << 2 << "--pp";
    QTest::newRow("gpu memory beyond int64") << QStringList{"simulate", m, "--gpu-memory", "1e300"} << 2 << "--gpu-memory";
    QTest::newRow("gpu memory beyond int64 (whatif)")
        << QStringList{"whatif", "/nonexistent/job.pipescope", "--gpu-memory", "1e300"} << 2 << "--gpu-memory";
    QTest::newRow("missing model") << QStringList{"simulate", "/nonexistent/model.json"} << 1 << "/nonexistent/model.json";
    QTest::newRow("missing store") << QStringList{"whatif", "/nonexistent/job.pipescope"} << 1
                                   << "/nonexistent/job.pipescope";
}

void TestWhatIfCli::badFlags()
{
    QFETCH(QStringList, args);
    QFETCH(int, exitCode);
    QFETCH(QString, message);
    const auto r = runCli(args);
    QCOMPARE(r.exitCode, exitCode);
    QVERIFY2(r.err.contains(message), qPrintable(r.err));
    QVERIFY2(r.err.trimmed().count('\n') < 3, qPrintable(r.err)); // one clear message, not a dump
    QVERIFY(r.out.isEmpty() || exitCode == 2);
}

void TestWhatIfCli::scheduleCsv()
{
    QTemporaryDir dir;
    const QString good = dir.path() + "/good.csv", bad = dir.path() + "/bad.csv";
    {
        QFile f(good);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
    }
    {
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("0F0,0B0,0F1,0B1\n1F0,1F1,1B0,1B1\n");
    }
    const auto ok = runCli({"simulate", model("gpt-32l.json"), "--schedule-csv", good});
    QCOMPARE(ok.exitCode, 0);
    QVERIFY2(ok.out.contains("custom, pp 2, 2 microbatches, boundaries 16"), qPrintable(ok.out));
    const auto r = runCli({"simulate", model("gpt-32l.json"), "--schedule-csv", bad});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("rank 0, step 2 (0B0) waits for 1B0") && r.err.contains("deadlocks"), qPrintable(r.err));
}

void TestWhatIfCli::emitKineto()
{
    QTemporaryDir dir;
    const auto r = runCli({"simulate", model("gpt-32l.json"), "--emit-kineto", dir.path() + "/trace"});
    QCOMPARE(r.exitCode, 0);
    for (int rank = 0; rank < 4; ++rank) {
        QFile f(dir.path() + "/trace/rank-" + QString::number(rank) + ".json");
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QJsonObject doc = QJsonDocument::fromJson(f.readAll()).object();
        QCOMPARE(doc["distributedInfo"].toObject()["rank"].toInt(), rank);
        QCOMPARE(doc["pipescope"].toObject()["simulated"].toBool(), true);
        QCOMPARE(doc["pipescope"].toObject()["schedule"].toString(), QString("1f1b"));
        int kernels = 0;
        for (const auto& e : doc["traceEvents"].toArray())
            if (e.toObject()["cat"].toString() == "kernel")
                ++kernels;
        // 2 iterations x (16 steps x 5 kernels per layer + optimizer) + 2 x 16 (rank 1, 2) or 2 x 8 (rank 0, 3)
        // transfers; each stage holds 8 layers, the last one the head too (gpt-32l's embedding costs nothing).
        const int layers = 8 + (rank == 3 ? 1 : 0);
        QCOMPARE(kernels, 2 * (16 * 5 * layers + 1) + ((rank == 0 || rank == 3) ? 2 * 16 : 2 * 32));
    }
}

// The round trip the demo uses: simulate a job, import its traces, ask what-if.
void TestWhatIfCli::whatIfOnSimulatedTrace()
{
    QTemporaryDir dir;
    QCOMPARE(runCli({"simulate", model("gpt-32l.json"), "--emit-kineto", dir.path() + "/t"}).exitCode, 0);
    const QString store = dir.path() + "/job.pipescope";
    const auto imp = runCli({"import", dir.path() + "/t", "-o", store, "-q"});
    if (imp.exitCode != 0)
        QSKIP(qPrintable("import failed: " + imp.err));
    // The traces carry module calls, so the layers come from them (layersFromModuleEvents).
    const auto moved = runCli({"whatif", store, "--boundaries", "1,2,3"});
    QVERIFY2(moved.exitCode == 0, qPrintable(moved.err));

    const auto r = runCli({"whatif", store, "--layers", "32", "--boundaries", "6,14,22", "--json", "--summary"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const QJsonObject doc = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(doc["source"].toObject()["simulated"].toBool(), true);
    const QJsonArray preds = doc["predictions"].toArray();
    QCOMPARE(preds.size(), 2);
    const QJsonObject measured = preds[0].toObject(), requested = preds[1].toObject();
    QCOMPARE(measured["label"].toString(), QString("measured configuration"));
    // Replaying the measured configuration lands within 2% of the measurement.
    const double err = measured["iteration_ns"].toDouble() / doc["measured"].toObject()["iteration_ns"].toDouble() - 1;
    QVERIFY2(std::abs(err) < 0.02, qPrintable(QString::number(err)));
    QCOMPARE(requested["config"].toObject()["boundaries"].toArray().size(), 3);
    QVERIFY(requested["speedup"].toDouble() > 0);

    const auto t = runCli({"whatif", store, "--layers", "32", "--auto-balance", "--schedule", "interleaved"});
    QVERIFY2(t.exitCode == 0, qPrintable(t.err));
    QVERIFY(t.out.contains("auto-balance: interleaved-1f1b, pp 4, v 2"));
    QVERIFY(t.out.contains("SIMULATED"));

    // One rank alone is no pipeline; the hint names whatif's flag for the measured degree,
    // not --pp, which here is the degree to predict.
    const QString single = dir.path() + "/one.pipescope";
    QCOMPARE(runCli({"import", dir.path() + "/t/rank-0.json", "-o", single, "-q"}).exitCode, 0);
    const auto none = runCli({"whatif", single});
    QCOMPARE(none.exitCode, 1);
    QVERIFY2(none.err.contains("no pipeline found") && none.err.contains("--measured-pp N"), qPrintable(none.err));
    QVERIFY2(none.err.contains(single), qPrintable(none.err));
}

// The bundled real capture (four processes time-sharing one GPU, 1F1B over
// 8 microbatches): replaying the measured configuration reproduces the
// measured iteration within 2% and every rank's idle time within 5% of it,
// for both iterations after the start-up one.
void TestWhatIfCli::whatIfOnRealCapture_data()
{
    QTest::addColumn<QString>("which");
    QTest::newRow("typical (2)") << QString();
    QTest::newRow("1") << QString("1");
}

void TestWhatIfCli::whatIfOnRealCapture()
{
    QFETCH(QString, which);
    const QString store = QString::fromUtf8(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";
    if (!QFile::exists(store))
        QSKIP("the bundled capture is not in this checkout");
    QStringList args{"whatif", store, "--json", "--summary"};
    if (!which.isEmpty())
        args << "--iteration" << which;
    const auto r = runCli(args);
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const QJsonObject doc = QJsonDocument::fromJson(r.out.toUtf8()).object();
    const QJsonObject measured = doc["measured"].toObject();
    QCOMPARE(measured["schedule"].toString(), QString("1f1b"));
    QCOMPARE(measured["pp"].toInt(), 4);
    QCOMPARE(measured["microbatches"].toInt(), 8);
    const QJsonObject replay = doc["predictions"].toArray()[0].toObject();
    QCOMPARE(replay["label"].toString(), QString("measured configuration"));
    const double iteration = measured["iteration_ns"].toDouble();
    const double err = replay["iteration_ns"].toDouble() / iteration - 1;
    QVERIFY2(std::abs(err) < 0.02, qPrintable(QString::number(err)));
    const QJsonArray idle = measured["idle_ns_per_stage"].toArray();
    const QJsonArray ranks = replay["ranks"].toArray();
    QCOMPARE(ranks.size(), 4);
    QCOMPARE(idle.size(), 4);
    for (int k = 0; k < ranks.size(); ++k) {
        double predicted = 0;
        const QJsonObject causes = ranks[k].toObject()["bubbles_by_cause_ns"].toObject();
        for (auto c = causes.begin(); c != causes.end(); ++c)
            predicted += c.value().toDouble();
        const double diff = (predicted - idle[k].toDouble()) / iteration;
        QVERIFY2(std::abs(diff) < 0.05, qPrintable(QString("rank %1: %2").arg(k).arg(diff)));
    }
}

namespace {

double iterationOf(const QString& json, int prediction)
{
    return QJsonDocument::fromJson(json.toUtf8()).object()["predictions"].toArray()[prediction].toObject()["iteration_ns"].toDouble();
}

// The simulated job's traces without their module calls, as a profile
// recorded without with_stack=True would be.
QString importWithoutModules(const QTemporaryDir& dir)
{
    if (runCli({"simulate", model("gpt-32l.json"), "--emit-kineto", dir.path() + "/m"}).exitCode != 0)
        return {};
    QDir().mkdir(dir.path() + "/bare");
    for (int rank = 0; rank < 4; ++rank) {
        QFile in(dir.path() + "/m/rank-" + QString::number(rank) + ".json");
        QFile out(dir.path() + "/bare/rank-" + QString::number(rank) + ".json");
        if (!in.open(QIODevice::ReadOnly) || !out.open(QIODevice::WriteOnly))
            return {};
        while (!in.atEnd()) {
            const QByteArray line = in.readLine();
            if (!line.contains("\"python_function\""))
                out.write(line);
        }
    }
    const QString store = dir.path() + "/bare.pipescope";
    return runCli({"import", dir.path() + "/bare", "-o", store, "-q"}).exitCode == 0 ? store : QString();
}

} // namespace

// simulate --emit-kineto writes PyTorch's module calls around each layer's
// kernels; the import recovers per-layer costs from them, and moving a
// boundary predicts what simulating the moved partition gives within 3%.
void TestWhatIfCli::layersFromModuleEvents()
{
    QTemporaryDir dir;
    QCOMPARE(runCli({"simulate", model("gpt-32l.json"), "--emit-kineto", dir.path() + "/t"}).exitCode, 0);
    QFile f(dir.path() + "/t/rank-3.json");
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QJsonArray events = QJsonDocument::fromJson(f.readAll()).object()["traceEvents"].toArray();
    QStringList modules;
    for (const auto& e : events) {
        const QJsonObject o = e.toObject();
        if (o["cat"].toString() != "python_function" || !o["name"].toString().startsWith("nn.Module: ") ||
            modules.contains(o["name"].toString()))
            continue;
        modules << o["name"].toString();
        // The stage's model is a root; every module inside names its parent frame.
        QCOMPARE(o["args"].toObject()["Python parent id"].isNull(), modules.size() == 1);
        QVERIFY(o["args"].toObject()["Python id"].isDouble());
    }
    QCOMPARE(modules.size(), 10); // the stage's model, its 8 blocks and the head
    QCOMPARE(modules[0], QString("nn.Module: TransformerModel_0"));
    QCOMPARE(modules[1], QString("nn.Module: TransformerBlock_0"));
    QCOMPARE(modules[9], QString("nn.Module: Linear_0"));

    const QString store = dir.path() + "/job.pipescope";
    QCOMPARE(runCli({"import", dir.path() + "/t", "-o", store, "-q"}).exitCode, 0);
    const auto a = runCli({"analyze", store, "--json"});
    QVERIFY2(a.exitCode == 0, qPrintable(a.err));
    const QJsonObject analysis = QJsonDocument::fromJson(a.out.toUtf8()).object();
    QCOMPARE(analysis["layer_source"].toObject()["source"].toString(), QString("modules"));
    const QJsonArray layers = analysis["layers"].toArray();
    QCOMPARE(layers.size(), 33);
    QCOMPARE(layers[0].toObject()["name"].toString(), QString("layers.0"));
    QCOMPARE(layers[31].toObject()["stage"].toInt(), 3);
    QCOMPARE(layers[32].toObject()["name"].toString(), QString("Linear"));
    QCOMPARE(layers[32].toObject()["role"].toString(), QString("after"));

    for (const char* boundaries : {"7,15,23", "6,14,26", "10,18,24"}) {
        const auto w = runCli({"whatif", store, "--boundaries", boundaries, "--json", "--summary"});
        QVERIFY2(w.exitCode == 0, qPrintable(w.err));
        const QJsonObject doc = QJsonDocument::fromJson(w.out.toUtf8()).object();
        QCOMPARE(doc["layer_source"].toString(), QString("trace"));
        QVERIFY(doc["notice"].isNull());
        const auto truth = runCli({"simulate", model("gpt-32l.json"), "--boundaries", boundaries, "--json", "--summary"});
        QVERIFY2(truth.exitCode == 0, qPrintable(truth.err));
        const double err = iterationOf(w.out, 1) / iterationOf(truth.out, 0) - 1;
        QVERIFY2(std::abs(err) < 0.03, qPrintable(QString("%1: %2").arg(boundaries).arg(err)));
    }
}

// Without module calls or layer ranges, every output that proposes a
// partition says that nothing can move and how to give layers.
void TestWhatIfCli::noLayersNotice()
{
    QTemporaryDir dir;
    const QString store = importWithoutModules(dir);
    QVERIFY(!store.isEmpty());
    const QString line = "the trace does not attribute kernels to layers, so each stage is one layer and no boundary can "
                         "move; give --layers N or --model FILE, or record with torch.profiler's with_stack=True (module "
                         "calls) or the pipescope_annotate helper (layer ranges)";
    const auto text = runCli({"whatif", store, "--auto-balance"});
    QVERIFY2(text.exitCode == 0, qPrintable(text.err));
    QVERIFY2(text.out.contains("NOTE: " + line + "\n"), qPrintable(text.out));
    const auto json = runCli({"whatif", store, "--auto-balance", "--json", "--summary"});
    const QJsonObject doc = QJsonDocument::fromJson(json.out.toUtf8()).object();
    QCOMPARE(doc["layer_source"].toString(), QString("stages"));
    QCOMPARE(doc["notice"].toString(), line);
    const auto noLayers = runCli({"whatif", store, "--boundaries", "1,2,3"});
    QCOMPARE(noLayers.exitCode, 1);
    QVERIFY2(noLayers.err.contains("--layers N"), qPrintable(noLayers.err));

    // The report says the same, and takes whatif's options to fix it.
    const QString html = dir.path() + "/r.html";
    QCOMPARE(runCli({"report", store, "-o", html}).exitCode, 0);
    QFile r(html);
    QVERIFY(r.open(QIODevice::ReadOnly));
    const QString page = QString::fromUtf8(r.readAll());
    QVERIFY(page.contains("id=\"whatif-no-layers\""));
    QVERIFY(page.contains("no boundary can move; give --layers N or --model FILE"));
    const QString html2 = dir.path() + "/r2.html";
    const auto withLayers = runCli({"report", store, "-o", html2, "--layers", "32", "--microbatches", "16"});
    QVERIFY2(withLayers.exitCode == 0, qPrintable(withLayers.err));
    QFile r2(html2);
    QVERIFY(r2.open(QIODevice::ReadOnly));
    const QString page2 = QString::fromUtf8(r2.readAll());
    QVERIFY(!page2.contains("id=\"whatif-no-layers\""));
    QVERIFY(page2.contains("(32 layers, an even split"));
    QVERIFY(page2.contains("<td>requested</td>"));
}

// --extra-work: every rank places the work in its gaps first; the rest delays
// its end, so the iteration grows by at most the largest overflow.
void TestWhatIfCli::extraWorkOnRealCapture()
{
    const QString store = QString::fromUtf8(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";
    if (!QFile::exists(store))
        QSKIP("the bundled capture is not in this checkout");
    const auto r = runCli({"whatif", store, "--extra-work", "80", "--json", "--summary"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const QJsonObject doc = QJsonDocument::fromJson(r.out.toUtf8()).object();
    const QJsonObject extra = doc["predictions"].toArray()[0].toObject()["extra_work"].toObject();
    QCOMPARE(extra["work_ns"].toDouble(), 80e6);
    QCOMPARE(extra["min_piece_ns"].toDouble(), 1e5);
    const double base = extra["base_iteration_ns"].toDouble(), iteration = extra["iteration_ns"].toDouble();
    QCOMPARE(extra["extra_ns"].toDouble(), iteration - base);
    const QJsonArray ranks = extra["ranks"].toArray();
    QCOMPARE(ranks.size(), 4);
    double largestOverflow = 0;
    for (const auto& v : ranks) {
        const QJsonObject rk = v.toObject();
        QCOMPARE(rk["hidden_ns"].toDouble() + rk["overflow_ns"].toDouble(), 80e6);
        QVERIFY(rk["hidden_ns"].toDouble() <= rk["fillable_ns"].toDouble());
        largestOverflow = std::max(largestOverflow, rk["overflow_ns"].toDouble());
    }
    QVERIFY(iteration > base);
    QVERIFY(iteration <= base + largestOverflow);

    const auto text = runCli({"whatif", store, "--extra-work", "5"});
    QVERIFY2(text.exitCode == 0, qPrintable(text.err));
    QVERIFY2(text.out.contains("measured configuration: extra work 5.000 ms per stage"), qPrintable(text.out));
    const auto bad = runCli({"whatif", store, "--extra-work", "-1"});
    QVERIFY(bad.exitCode != 0);
    QVERIFY2(bad.err.contains("--extra-work"), qPrintable(bad.err));
}

QTEST_GUILESS_MAIN(TestWhatIfCli)
#include "tst_whatif_cli.moc"
