// Heterogeneous GPUs and stragglers in the what-if (docs/whatif.md, "Uneven
// GPUs"): per-stage speeds weight the cost model and auto-balance, costs
// measured on a trace are normalised to reference speed, and "rank R at its
// peers' speed" prices a data-parallel straggler.
#include "StoreFixture.h"
#include "WhatIfTestSupport.h"
#include "SyntheticTrace.h"
#include "TestSupport.h"
#include "analysis/Analysis.h"
#include "report/Report.h"
#include "util/Error.h"
#include "whatif/StageSpeeds.h"
#include "whatif/WhatIf.h"
#include "whatif/WhatIfJson.h"

#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

using namespace pipescope;
using namespace pipescope::whatif;
using pipescope::test::PipelineSpec;
using pipescope::test::pipelineTrace;
using pipescope::test::runCli;
using pipescope::test::writeStore;
using nlohmann::json;

namespace {

constexpr TimeNs kMs = 1'000'000;

CostModel fourLayers() { return whatif::test::fourEqualLayers(); }

Scenario oneFOneB(int pp, int m) { return whatif::test::scenarioOf(ScheduleKind::OneFOneB, pp, m); }

CostModel calibrated(const PipelineSpec& spec, int layers, AnalysisResult* out = nullptr)
{
    const Trace t = pipelineTrace(spec).trace;
    const AnalysisResult r = analyze(t);
    CalibrateOptions co;
    if (layers > 0)
        co.measured.layers = layers;
    if (out)
        *out = r;
    return calibrate(t, r, co);
}

// p = 2, dp = 2, m = 4, F = 1 ms, B = 2 ms; replica 1 of stage 1 (rank 3) 20% slower.
PipelineSpec stragglerSpec()
{
    PipelineSpec spec;
    spec.stages = 2;
    spec.replicas = 2;
    spec.microbatches = 4;
    spec.slowdown[{1, 1}] = 1.2;
    return spec;
}

} // namespace

class TestStageSpeed : public QObject {
    Q_OBJECT
private slots:
    void speedsAsWritten();
    void autoBalanceWeighsSpeed();
    void speedCountForPp();
    void homogeneousUnchanged();
    void measuredCostsNormalised();
    void stragglerAtPeerSpeed();
    void stragglerWithoutPeers();
    void cli();
    void cliErrors_data();
    void cliErrors();
    void reportLine();
    void speedsFromLayers();
    void speedsFromSimulatedTrace();
};

// 2 stages, 4 equal layers (F + B = 3 ms), 1F1B, m = 2. With stage 1 at
// speed 0.5 a layer there takes 6 ms: 3 layers on stage 0 (9 ms) and 1 on
// stage 1 (6 ms) beat 2 + 2 (6 ms, 12 ms). Replay: rank 0 F0 [0,3], F1 [3,6];
// rank 1 F0 [3,5], B0 [5,9], F1 [9,11], B1 [11,15]; rank 0 B0 [9,15],
// B1 [15,21]: 21 ms. At equal speeds 2 + 2 gives 18 ms.
void TestStageSpeed::autoBalanceWeighsSpeed()
{
    CostModel model = fourLayers();
    const BalanceResult even = autoBalance(model, oneFOneB(2, 2));
    QCOMPARE(even.prediction.partition.boundaries(), std::vector<int>{2});
    QCOMPARE(even.prediction.iterationNs(), 18 * kMs);

    model.setStageSpeeds({1.0, 0.5});
    QVERIFY(model.heterogeneous());
    TimeNs bottleneck = 0;
    const std::vector<int> inFlight{2, 1};
    QCOMPARE(minMaxPartition(model, 2, inFlight, std::nullopt, 2, &bottleneck, {0, 1}), std::vector<int>{3});
    QCOMPARE(bottleneck, 9 * kMs);
    const BalanceResult slow = autoBalance(model, oneFOneB(2, 2));
    QCOMPARE(slow.prediction.partition.boundaries(), std::vector<int>{3});
    QCOMPARE(slow.prediction.iterationNs(), 21 * kMs);
    QCOMPARE(slow.prediction.costs.stages[1].forward, 2 * kMs);
    QCOMPARE(slow.prediction.costs.stages[1].backward, 4 * kMs);

    // The even split on these GPUs: stage 1 F = 4, B = 8 ms. Rank 1 runs
    // F0 [2,6], B0 [6,14], F1 [14,18], B1 [18,26]; rank 0 B1 [26,30].
    Scenario split = oneFOneB(2, 2);
    split.boundaries = std::vector<int>{2};
    QCOMPARE(predict(model, split).iterationNs(), 30 * kMs);

    // --search weights the same way: every 1F1B row keeps 3 layers on stage 0.
    SearchSpace space;
    space.schedules = {ScheduleKind::OneFOneB, ScheduleKind::GPipe};
    space.vs = {1};
    space.microbatches = {2};
    const std::vector<SearchRow> rows = searchConfigurations(model, oneFOneB(2, 2), space);
    QCOMPARE(rows.size(), size_t(2));
    for (const SearchRow& r : rows)
        QCOMPARE(r.boundaries, std::vector<int>{3});
    QCOMPARE(rows.front().iterationNs, 21 * kMs);

    const json j = costModelToJson(model);
    QCOMPARE(j["stage_speed"], json({1.0, 0.5}));
    QVERIFY(costModelToJson(fourLayers())["stage_speed"].is_null());
}

// Speeds are per pipeline rank: a scenario with another pp is refused by name.
void TestStageSpeed::speedCountForPp()
{
    CostModel model = fourLayers();
    model.setStageSpeeds({1.0, 0.5});
    try {
        (void)predict(model, oneFOneB(4, 4));
        QFAIL("expected an error");
    } catch (const ValueError& e) {
        QCOMPARE(std::string(toString(e.setting())), std::string("stage-speed"));
        QVERIFY2(std::string(e.what()).find("pp 4") != std::string::npos, e.what());
    }
    for (double bad : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
        CostModel m = fourLayers();
        QVERIFY_THROWS_EXCEPTION(ValueError, m.setStageSpeeds({1.0, bad}));
        QVERIFY(m.stageSpeed.empty());
    }
}

// All speeds 1 on a measured job: every answer as before, to the nanosecond.
void TestStageSpeed::homogeneousUnchanged()
{
    PipelineSpec spec;
    spec.stages = 4;
    spec.microbatches = 8;
    spec.commNs = 50'000;
    spec.slowdown[{0, 2}] = 1.3; // uneven stages, so the balance has work to do
    const CostModel plain = calibrated(spec, 16);
    CostModel ones = plain;
    ones.setStageSpeeds({1, 1, 1, 1});
    QVERIFY(!ones.heterogeneous());
    for (size_t l = 0; l < plain.layers.size(); ++l) {
        QCOMPARE(ones.layers[l].forwardNs, plain.layers[l].forwardNs);
        QCOMPARE(ones.layers[l].backwardNs, plain.layers[l].backwardNs);
    }
    const Scenario base = measuredScenario(plain);
    const Prediction a = predict(plain, base), b = predict(ones, base);
    QCOMPARE(b.iterationNs(), a.iterationNs());
    QCOMPARE(b.replay.bubbleNs, a.replay.bubbleNs);
    const BalanceResult ba = autoBalance(plain, base), bb = autoBalance(ones, base);
    QCOMPARE(bb.prediction.partition.boundaries(), ba.prediction.partition.boundaries());
    QCOMPARE(bb.prediction.iterationNs(), ba.prediction.iterationNs());
    QCOMPARE(bb.bottleneckNs, ba.bottleneckNs);
    SearchSpace space;
    space.vs = {1, 2};
    space.microbatches = {8};
    const auto ra = searchConfigurations(plain, base, space), rb = searchConfigurations(ones, base, space);
    QCOMPARE(rb.size(), ra.size());
    for (size_t i = 0; i < ra.size(); ++i) {
        QCOMPARE(rb[i].boundaries, ra[i].boundaries);
        QCOMPARE(rb[i].iterationNs, ra[i].iterationNs);
    }
}

// A measured job whose stage 1 runs on a GPU half as fast: its layers were
// timed at 1 ms F + 2 ms B each (2 layers per stage, F = 2 ms, B = 4 ms per
// step), stage 0's at 0.5 + 1 ms. Declared speeds 1, 0.5 make every layer
// 0.5 + 1 ms at reference speed; the measured configuration replays as
// before, and balance moves a layer to the fast stage: 3 layers there
// (4.5 ms per microbatch) and 1 on stage 1 (1.5 / 0.5 = 3 ms).
void TestStageSpeed::measuredCostsNormalised()
{
    PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 4;
    spec.slowdown[{0, 1}] = 2.0;
    const CostModel plain = calibrated(spec, 4);
    QCOMPARE(plain.layers[2].forwardNs, 1e6);
    CostModel model = plain;
    model.setStageSpeeds({1.0, 0.5});
    for (const LayerCostModel& l : model.layers) {
        QCOMPARE(l.forwardNs, 0.5e6);
        QCOMPARE(l.backwardNs, 1e6);
    }
    const Scenario base = measuredScenario(model);
    QCOMPARE(predict(model, base).iterationNs(), predict(plain, base).iterationNs());
    const BalanceResult b = autoBalance(model, base);
    QCOMPARE(b.prediction.partition.boundaries(), std::vector<int>{3});
    QCOMPARE(b.bottleneckNs, TimeNs(4'500'000));
    QCOMPARE(b.prediction.costs.stages[0].forward, TimeNs(1'500'000));
    QCOMPARE(b.prediction.costs.stages[1].forward, 1 * kMs);
    // Declaring the speeds again (or others) starts from the measured costs, not the last ones.
    model.setStageSpeeds({1.0, 1.0});
    QCOMPARE(model.layers[2].forwardNs, 1e6);
    QCOMPARE(model.layers[0].forwardNs, 0.5e6);
    // A measured model needs one speed per measured stage.
    try {
        model.setStageSpeeds({1.0, 1.0, 1.0});
        QFAIL("expected an error");
    } catch (const ValueError& e) {
        QCOMPARE(std::string(toString(e.setting())), std::string("stage-speed"));
        QCOMPARE(std::string(e.what()), std::string("3 stage speeds given; the measured pipeline has 2 stages (one speed per pipeline rank)"));
    }
}

// dp = 2: rank 3 (stage 1, replica 1) computes 4 x (1.2 + 2.4) = 14.4 ms
// against its peer's 12 ms. With each stage at its slowest replica, stage 1
// takes F = 1.2, B = 2.4 ms; under 1F1B with stage 1 the bottleneck the
// iteration is F0 + m (F1 + B1) + B0 = 1 + 4 x 3.6 + 2 = 17.4 ms; at the
// peers' speed 1 + 4 x 3 + 2 = 15 ms: a gain of 2.4 ms.
void TestStageSpeed::stragglerAtPeerSpeed()
{
    AnalysisResult r;
    const CostModel model = calibrated(stragglerSpec(), 0, &r);
    QCOMPARE(r.imbalance.stragglers.size(), size_t(1));
    QCOMPARE(r.imbalance.stragglers[0].rank, 3);
    const StragglerFix f = priceStraggler(model, r, 3);
    QCOMPARE(f.stage, 1);
    QCOMPARE(f.replica, 1);
    QVERIFY(std::abs(f.relative - 1.2) < 1e-9);
    QCOMPARE(f.computeNs, TimeNs(14'400'000));
    QCOMPARE(f.peerMedianNs, TimeNs(12'000'000));
    QVERIFY2(std::abs(f.slowestReplicaNs - 17'400'000) <= 2, std::to_string(f.slowestReplicaNs).c_str());
    QVERIFY2(std::abs(f.fixedNs - 15 * kMs) <= 2, std::to_string(f.fixedNs).c_str());
    QVERIFY2(std::abs(f.gainNs - 2'400'000) <= 4, std::to_string(f.gainNs).c_str());
    QCOMPARE(f.iterationNs, f.fixedNs);
    // The measured configuration itself replays at each stage's slowest
    // replica (CostModel::replicaPace): the 17.4 ms the job ran, not the
    // replica means' faster pipeline.
    QVERIFY(std::abs(model.replicaPace[1] - 14.4 / 13.2) < 1e-9);
    QCOMPARE(model.replicaPace[0], 1.0);
    const TimeNs replayed = predict(model, measuredScenario(model)).iterationNs();
    QVERIFY2(std::abs(replayed - f.slowestReplicaNs) <= 2, std::to_string(replayed).c_str());
    qInfo("measured %.3f ms, replayed %.3f ms at the slowest replicas, %.3f ms on replica means",
          double(*model.measuredIterationNs) / 1e6, double(replayed) / 1e6, double(f.baseIterationNs) / 1e6);
    QVERIFY(std::abs(static_cast<double>(replayed - *model.measuredIterationNs)) <
            std::abs(static_cast<double>(f.baseIterationNs - *model.measuredIterationNs)));
    // A rank as fast as its peers gains nothing.
    QCOMPARE(priceStraggler(model, r, 2).gainNs, TimeNs(0));
    const json j = stragglerFixToJson(f);
    QCOMPARE(j["rank"].get<int>(), 3);
    QCOMPARE(j["gain_ns"].get<TimeNs>(), f.gainNs);
}

void TestStageSpeed::stragglerWithoutPeers()
{
    PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 4;
    AnalysisResult r;
    const CostModel model = calibrated(spec, 0, &r);
    for (int rank : {1, 7}) {
        try {
            (void)priceStraggler(model, r, rank);
            QFAIL("expected an error");
        } catch (const ValueError& e) {
            QCOMPARE(std::string(toString(e.setting())), std::string("fix-straggler"));
        }
    }
}

void TestStageSpeed::cli()
{
    QTemporaryDir dir;
    const QString store = dir.path() + "/dp.pipescope";
    writeStore(pipelineTrace(stragglerSpec()).trace, store.toStdString());
    auto r = runCli({"whatif", store, "--fix-straggler", "3", "--json", "--summary"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const json doc = json::parse(r.out.toStdString());
    QCOMPARE(doc["schema"].get<std::string>(), std::string("pipescope.whatif/1"));
    const json& fix = doc["straggler_fix"];
    QCOMPARE(fix["rank"].get<int>(), 3);
    QVERIFY(std::abs(fix["gain_ns"].get<TimeNs>() - 2'400'000) <= 4);
    QVERIFY(std::abs(fix["iteration_ns"].get<TimeNs>() - 15 * kMs) <= 2);
    QVERIFY(doc["cost_model"]["stage_speed"].is_null());

    r = runCli({"whatif", store, "--fix-straggler", "3"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("straggler: rank 3 (stage 1, replica 1) computes 20.00% slower than its peers"), qPrintable(r.out));

    // Two stages on GPU types: the same as --stage-speed 1,0.5.
    const QString two = dir.path() + "/two.pipescope";
    PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 4;
    spec.slowdown[{0, 1}] = 2.0;
    writeStore(pipelineTrace(spec).trace, two.toStdString());
    const auto a = runCli({"whatif", two, "--layers", "4", "--stage-speed", "1,0.5", "--auto-balance", "--json", "--summary"});
    const auto b = runCli({"whatif", two, "--layers", "4", "--gpu-types", "H100,A10", "--gpu-throughput", "H100=1,A10=0.5",
                           "--auto-balance", "--json", "--summary"});
    QVERIFY2(a.exitCode == 0, qPrintable(a.err));
    QVERIFY2(b.exitCode == 0, qPrintable(b.err));
    const json ja = json::parse(a.out.toStdString()), jb = json::parse(b.out.toStdString());
    QCOMPARE(ja["cost_model"]["stage_speed"], json({1.0, 0.5}));
    QCOMPARE(ja["predictions"], jb["predictions"]);
    const json& balanced = ja["predictions"].back();
    QCOMPARE(balanced["label"].get<std::string>(), std::string("auto-balance"));
    QCOMPARE(balanced["config"]["boundaries"], json({3}));
    const auto text = runCli({"whatif", two, "--layers", "4", "--stage-speed", "1,0.5"});
    QVERIFY2(text.out.contains("stage speeds 1, 0.5"), qPrintable(text.out));
    // One speed per measured stage, checked once the trace is read.
    const auto count = runCli({"whatif", two, "--stage-speed", "1,1,1"});
    QCOMPARE(count.exitCode, 1);
    QCOMPARE(count.err.trimmed(), QString("pipescope whatif: error: --stage-speed: 3 stage speeds given; the measured "
                                          "pipeline has 2 stages (one speed per pipeline rank)"));
    const auto nopeer = runCli({"whatif", two, "--fix-straggler", "1"});
    QCOMPARE(nopeer.exitCode, 1);
    QVERIFY2(nopeer.err.startsWith("pipescope whatif: error: --fix-straggler: rank 1 has no data-parallel peers"),
             qPrintable(nopeer.err));
}

// Bad values are refused before the store is opened, with one line naming the flag.
void TestStageSpeed::cliErrors_data()
{
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("line");
    const QString speedTail = "; a relative throughput must be a finite number above 0 and at most 1,000,000 "
                              "(1 = as fast as the reference, 0.5 = twice as slow)";
    QTest::newRow("zero") << QStringList{"--stage-speed", "1,0"}
                          << "pipescope whatif: error: --stage-speed: the speed of stage 1 is 0" + speedTail;
    QTest::newRow("negative") << QStringList{"--stage-speed", "-1,1"}
                              << "pipescope whatif: error: --stage-speed: the speed of stage 0 is -1" + speedTail;
    QTest::newRow("nan") << QStringList{"--stage-speed", "1,nan"}
                         << "pipescope whatif: error: --stage-speed: the speed of stage 1 is nan" + speedTail;
    QTest::newRow("inf") << QStringList{"--stage-speed", "inf,1"}
                         << "pipescope whatif: error: --stage-speed: the speed of stage 0 is inf" + speedTail;
    QTest::newRow("both forms") << QStringList{"--stage-speed", "1,1", "--gpu-types", "A,A", "--gpu-throughput", "A=1"}
                                << "pipescope whatif: error: --stage-speed: give the speeds either with --stage-speed or "
                                   "with --gpu-types and --gpu-throughput, not both";
    QTest::newRow("types alone") << QStringList{"--gpu-types", "A,B"}
                                 << "pipescope whatif: error: --gpu-throughput: --gpu-types (one GPU type per stage, e.g. "
                                    "A,A,B,B) and --gpu-throughput (each type's relative throughput, e.g. A=1,B=0.6) go together";
    QTest::newRow("unknown type") << QStringList{"--gpu-types", "A,B", "--gpu-throughput", "A=1"}
                                  << "pipescope whatif: error: --gpu-types: GPU type 'B' has no throughput in --gpu-throughput";
    QTest::newRow("no equals") << QStringList{"--gpu-types", "A", "--gpu-throughput", "A"}
                               << "pipescope whatif: error: --gpu-throughput: 'A' is not TYPE=SPEED (e.g. A=1,B=0.6)";
    QTest::newRow("not a number") << QStringList{"--gpu-types", "A", "--gpu-throughput", "A=fast"}
                                  << "pipescope whatif: error: --gpu-throughput: the throughput of GPU type 'A' is 'fast', not a number";
    QTest::newRow("zero throughput") << QStringList{"--gpu-types", "A", "--gpu-throughput", "A=0"}
                                     << "pipescope whatif: error: --gpu-throughput: the throughput of GPU type 'A' is 0" + speedTail;
    QTest::newRow("twice") << QStringList{"--gpu-types", "A", "--gpu-throughput", "A=1,A=2"}
                           << "pipescope whatif: error: --gpu-throughput: GPU type 'A' is given twice";
}

void TestStageSpeed::cliErrors()
{
    QFETCH(QStringList, args);
    QFETCH(QString, line);
    const auto r = runCli(QStringList{"whatif", "missing.pipescope"} + args);
    QCOMPARE(r.exitCode, 1);
    QCOMPARE(r.err.trimmed(), line);
    QVERIFY(r.out.isEmpty());
}

void TestStageSpeed::reportLine()
{
    const Trace t = pipelineTrace(stragglerSpec()).trace;
    const std::string html = report::renderReport(t);
    const size_t at = html.find("<p id=\"whatif-straggler\">");
    QVERIFY(at != std::string::npos);
    const std::string line = html.substr(at, html.find("</p>", at) - at);
    QVERIFY2(line.find("rank 3 (stage 1, replica 1) computes 20.00% slower than its peers") != std::string::npos, line.c_str());
    QVERIFY2(line.find("--fix-straggler") != std::string::npos, line.c_str());
    // No straggler, no line.
    PipelineSpec even = stragglerSpec();
    even.slowdown.clear();
    QVERIFY(report::renderReport(pipelineTrace(even).trace).find("whatif-straggler") == std::string::npos);
}

// Two ranks whose layers were timed on the trace: 3 ms (F + B) per layer on
// rank 0, 6 ms on rank 1. Reference: the median of the two, 4.5 ms, so rank
// 0 runs at 1.5 and rank 1 at 0.75; a rank within 3% of the reference is 1.
void TestStageSpeed::speedsFromLayers()
{
    CostModel m = fourLayers();
    m.layerSource = LayerSource::Trace;
    m.measuredCosts = true;
    m.measuredPp = 2;
    m.measuredSchedule = ScheduleKind::OneFOneB;
    m.measuredPartition = partitionFromBoundaries({2}, 4, 2);
    for (int l = 2; l < 4; ++l) {
        m.layers[size_t(l)].forwardNs *= 2;
        m.layers[size_t(l)].backwardNs *= 2;
    }
    QCOMPARE(m.measuredStageSpeeds(), (std::vector<double>{1.5, 0.75}));
    // Declared, they make the layers reference-speed costs: 4.5 ms each.
    m.setStageSpeeds(m.measuredStageSpeeds());
    QCOMPARE(m.layers[0].forwardNs + m.layers[0].backwardNs, 4.5e6);
    QCOMPARE(m.layers[3].forwardNs + m.layers[3].backwardNs, 4.5e6);
    // Asked again, the speeds are the same (costs are undone to measured first).
    QCOMPARE(m.measuredStageSpeeds(), (std::vector<double>{1.5, 0.75}));

    CostModel close = fourLayers();
    close.layerSource = LayerSource::Trace;
    close.measuredCosts = true;
    close.measuredPp = 2;
    close.measuredPartition = partitionFromBoundaries({2}, 4, 2);
    close.layers[3].forwardNs *= 1.04; // rank 1's median: 3.02 ms against 3 ms
    QCOMPARE(close.measuredStageSpeeds(), (std::vector<double>{1.0, 1.0}));

    try {
        (void)fourLayers().measuredStageSpeeds(); // layers not from a trace
        QFAIL("expected an error");
    } catch (const ValueError& e) {
        QCOMPARE(std::string(toString(e.setting())), std::string("stage-speed"));
        QVERIFY2(std::string(e.what()).find("with_modules=True") != std::string::npos, e.what());
    }
}

// simulate --stage-speed writes a job whose rank 2 runs at 0.8; the
// imported trace's module ranges give that speed back, and auto-balance
// gives rank 2 fewer layers.
void TestStageSpeed::speedsFromSimulatedTrace()
{
    QTemporaryDir dir;
    const QString model = QStringLiteral(PIPESCOPE_SOURCE_DIR "/resources/models/gpt-32l.json");
    auto r = runCli({"simulate", model, "--pp", "4", "--microbatches", "8", "--stage-speed", "1,1,0.8,1", "--emit-kineto",
                     dir.filePath("job")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    r = runCli({"import", dir.filePath("job"), "-o", dir.filePath("job.pipescope")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    r = runCli({"whatif", dir.filePath("job.pipescope"), "--stage-speed", "trace", "--auto-balance", "--json", "--summary"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const json doc = json::parse(r.out.toStdString());
    const std::vector<double> speeds = doc["cost_model"]["stage_speed"].get<std::vector<double>>();
    QCOMPARE(speeds.size(), size_t(4));
    QCOMPARE(speeds[0], 1.0);
    QCOMPARE(speeds[1], 1.0);
    QCOMPARE(speeds[3], 1.0);
    QVERIFY2(std::abs(speeds[2] - 0.8) < 0.016, qPrintable(QString::number(speeds[2])));
    const json& balanced = doc["predictions"].back();
    const std::vector<int> layers = balanced["config"]["layers_per_stage"].get<std::vector<int>>();
    QVERIFY2(layers[2] < 8, qPrintable(QString::fromStdString(balanced["config"].dump())));

    // A trace that times no layers cannot give speeds.
    const QString plain = dir.filePath("plain.pipescope");
    writeStore(pipelineTrace(stragglerSpec()).trace, plain.toStdString());
    r = runCli({"whatif", plain, "--layers", "4", "--stage-speed", "trace"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.startsWith("pipescope whatif: error: --stage-speed: speeds come from the trace only when it times each layer"),
             qPrintable(r.err));
}

// Speeds as the CLI and the app's editor take them: one parser, one set of
// rules and messages.
void TestStageSpeed::speedsAsWritten()
{
    QCOMPARE(parseStageSpeeds(std::string_view(" 1, 1,0.8 ,1")), (std::vector<double>{1, 1, 0.8, 1}));
    QVERIFY(parseStageSpeeds(std::string_view("  ")).empty());
    QVERIFY(speedsFromTrace(" Trace "));
    QVERIFY(!speedsFromTrace("traces"));
    auto settingOf = [](auto&& call) {
        try {
            call();
        } catch (const ValueError& e) {
            return std::string(toString(e.setting())) + ": " + e.what();
        }
        return std::string("no error");
    };
    QCOMPARE(settingOf([] { parseStageSpeeds(std::string_view("1,fast")); }),
             std::string("stage-speed: the speed of stage 1 is 'fast', not a number; give one relative throughput per "
                         "pipeline rank (e.g. 1,1,0.8,1) or 'trace' to read them from the trace"));
    QCOMPARE(settingOf([] { parseStageSpeeds(std::string_view("1,0")); }),
             std::string("stage-speed: the speed of stage 1 is 0; a relative throughput must be a finite number above 0 "
                         "and at most 1,000,000 (1 = as fast as the reference, 0.5 = twice as slow)"));
    QCOMPARE(speedsFromGpuTypes({"A", "B", "A"}, {"A=1", "B=0.5"}), (std::vector<double>{1, 0.5, 1}));
    QCOMPARE(settingOf([] { speedsFromGpuTypes({"A", "C"}, {"A=1"}); }),
             std::string("gpu-types: GPU type 'C' has no throughput in --gpu-throughput"));
    QCOMPARE(settingOf([] { speedsFromGpuTypes({"A"}, {}); }).substr(0, 14), std::string("gpu-throughput"));
}

QTEST_GUILESS_MAIN(TestStageSpeed)
#include "tst_stage_speed.moc"
