// Frozen layers in the what-if (docs/whatif.md, "Frozen layers"): a frozen
// layer loses the weight-gradient part of its backward, its gradients and its
// optimizer state; the frozen prefix from layer 0 runs no backward at all.
// Auto-balance and search see the frozen costs.
#include "StoreFixture.h"
#include "WhatIfTestSupport.h"
#include "SyntheticTrace.h"
#include "TestSupport.h"
#include "util/Error.h"
#include "whatif/WhatIf.h"
#include "whatif/WhatIfJson.h"
#include "whatif/WhatIfText.h"

#include <QTemporaryDir>
#include <QtTest>

#include <functional>

#include <nlohmann/json.hpp>

using namespace pipescope;
using namespace pipescope::whatif;
using whatif::test::errorOf;
using pipescope::test::PipelineSpec;
using pipescope::test::pipelineTrace;
using pipescope::test::runCli;
using pipescope::test::writeStore;


namespace {

constexpr TimeNs kMs = 1'000'000;

CostModel fourLayers() { return whatif::test::fourEqualLayers(); }

CostModel frozen(std::vector<LayerRange> ranges)
{
    CostModel c = fourLayers();
    c.freezeLayers(ranges);
    return c;
}

Scenario scenario(ScheduleKind kind, int pp, int m, std::optional<std::vector<int>> boundaries = std::nullopt)
{
    Scenario s;
    s.schedule = kind;
    s.pp = pp;
    s.microbatches = m;
    s.boundaries = std::move(boundaries);
    return s;
}

} // namespace

class TestFreeze : public QObject {
    Q_OBJECT
private slots:
    void costsLoseWeightGradients();
    void frozenPrefixRunsNoBackward();
    void frozenMiddleKeepsInputGradient();
    void autoBalanceMovesBoundary();
    void zeroBubbleWeightStepShrinks();
    void memoryAndOptimizer();
    void rangesParsedAndChecked();
    void jsonAndText();
    void cli();
};

// A frozen layer after a trainable one keeps I = share x B; the prefix keeps nothing.
void TestFreeze::costsLoseWeightGradients()
{
    CostModel c = fourLayers();
    c.layers[2].backwardInputShare = 0.25; // measured from a zero-bubble trace: I 0.5 ms, W 1.5 ms
    c.firstStageExtra.backwardNs = 1e6;
    c.freezeLayers({{0, 0}, {2, 3}});
    QCOMPARE(c.frozenPrefix(), 1);
    QCOMPARE(c.layers[0].backwardNs, 0.0);
    QCOMPARE(c.firstStageExtra.backwardNs, 0.0);
    QVERIFY(c.firstStageExtra.frozen);
    QVERIFY(!c.layers[1].frozen);
    QCOMPARE(c.layers[1].backwardNs, 2e6);
    QCOMPARE(c.layers[2].backwardNs, 0.5e6);
    QCOMPARE(c.layers[2].backwardInputShare, 1.0);
    QCOMPARE(c.layers[3].backwardNs, 1e6);
    QCOMPARE(c.layers[0].forwardNs, 1e6); // frozen layers still run forward
    QCOMPARE(c.frozenLayers, (std::vector<LayerRange>{{0, 0}, {2, 3}}));
    // Overlapping and touching ranges merge.
    CostModel m = fourLayers();
    m.freezeLayers({{2, 3}, {0, 1}, {1, 2}});
    QCOMPARE(m.frozenLayers, (std::vector<LayerRange>{{0, 3}}));
    QVERIFY_THROWS_EXCEPTION(Error, m.freezeLayers({{0, 0}}));
}

// 1F1B, pp 2, m 2, boundary 2, freeze 0..1: stage 0 F = 2, B = 0 (no
// backward before the first trainable layer), stage 1 F = 2, B = 4 ms.
// Rank 0 F0 [0,2], F1 [2,4]; rank 1 F0 [2,4], B0 [4,8], F1 [8,10],
// B1 [10,14]; rank 0's empty B0, B1 at 8 and 14: 14 ms against 18 trainable.
void TestFreeze::frozenPrefixRunsNoBackward()
{
    const Scenario s = scenario(ScheduleKind::OneFOneB, 2, 2, std::vector<int>{2});
    QCOMPARE(predict(fourLayers(), s).iterationNs(), 18 * kMs);
    const Prediction p = predict(frozen({{0, 1}}), s);
    QCOMPARE(p.costs.stages[0].forward, 2 * kMs);
    QCOMPARE(p.costs.stages[0].backward, TimeNs(0));
    QCOMPARE(p.costs.stages[1].backward, 4 * kMs);
    QCOMPARE(p.iterationNs(), 14 * kMs);
}

// Freeze 1..2 (layer 0 trainable): layers 1 and 2 keep their input gradient,
// B = 1 ms each. Both stages F = 2, B = 3 ms: (m + p - 1)(F + B) = 15 ms.
void TestFreeze::frozenMiddleKeepsInputGradient()
{
    const CostModel c = frozen({{1, 2}});
    QCOMPARE(c.frozenPrefix(), 0);
    const Prediction p = predict(c, scenario(ScheduleKind::OneFOneB, 2, 2, std::vector<int>{2}));
    QCOMPARE(p.costs.stages[0].backward, 3 * kMs);
    QCOMPARE(p.costs.stages[1].backward, 3 * kMs);
    QCOMPARE(p.iterationNs(), 15 * kMs);
}

// Freeze 0..1: layers cost 1, 1, 3, 3 ms (F + B). Boundary 2 gives stages of
// 2 and 6 ms, boundary 3 of 5 and 3 ms: auto-balance moves the boundary to 3.
// Replay: rank 0 F0 [0,3], F1 [3,6]; rank 1 F0 [3,4], B0 [4,6], F1 [6,7],
// B1 [7,9]; rank 0 B0 [6,8], B1 [9,11]: 11 ms (14 ms at boundary 2).
void TestFreeze::autoBalanceMovesBoundary()
{
    const CostModel c = frozen({{0, 1}});
    TimeNs bottleneck = 0;
    QCOMPARE(minMaxPartition(c, 2, {2, 1}, std::nullopt, 2, &bottleneck), std::vector<int>{3});
    QCOMPARE(bottleneck, 5 * kMs);
    const BalanceResult b = autoBalance(c, scenario(ScheduleKind::OneFOneB, 2, 2));
    QCOMPARE(b.prediction.partition.boundaries(), std::vector<int>{3});
    QCOMPARE(b.prediction.iterationNs(), 11 * kMs);
    // Without freezing the even split stays.
    QCOMPARE(autoBalance(fourLayers(), scenario(ScheduleKind::OneFOneB, 2, 2)).prediction.partition.boundaries(),
             std::vector<int>{2});

    SearchSpace space;
    space.schedules = {ScheduleKind::OneFOneB};
    space.vs = {1};
    space.microbatches = {2};
    const std::vector<SearchRow> rows = searchConfigurations(c, scenario(ScheduleKind::OneFOneB, 2, 2), space);
    QCOMPARE(rows.size(), size_t(1));
    QCOMPARE(rows.front().boundaries, std::vector<int>{3});
    QCOMPARE(rows.front().iterationNs, 11 * kMs);
}

// ZB-H1, pp 2, m 2 (rank 0: F0 F1 I0 W0 I1 W1; rank 1: F0 I0 F1 I1 W0 W1),
// freeze 1..3: stage 0 F = 2, I = 2, W = 1 (layer 0's only), stage 1 F = 2,
// I = 2, W = 0. Rank 1 F0 [2,4], I0 [4,6], F1 [6,8], I1 [8,10], empty Ws;
// rank 0 F0 [0,2], F1 [2,4], I0 [6,8], W0 [8,9], I1 [10,12], W1 [12,13]:
// 13 ms. Trainable, both W steps take 2 ms and rank 0 ends at 14.
void TestFreeze::zeroBubbleWeightStepShrinks()
{
    const Scenario s = scenario(ScheduleKind::ZeroBubbleH1, 2, 2, std::vector<int>{2});
    const Prediction before = predict(fourLayers(), s);
    QCOMPARE(before.costs.stages[0].backwardWeight, 2 * kMs);
    QCOMPARE(before.iterationNs(), 14 * kMs);
    const Prediction p = predict(frozen({{1, 3}}), s);
    QCOMPARE(p.costs.stages[0].backwardInput, 2 * kMs);
    QCOMPARE(p.costs.stages[0].backwardWeight, 1 * kMs);
    QCOMPARE(p.costs.stages[1].backwardInput, 2 * kMs);
    QCOMPARE(p.costs.stages[1].backwardWeight, TimeNs(0));
    QCOMPARE(p.iterationNs(), 13 * kMs);
}

// 1000 parameters and 100 activation bytes per layer, 18 bytes per parameter
// (2 weights + 4 gradients + 12 Adam), optimizer 1 us per parameter.
void TestFreeze::memoryAndOptimizer()
{
    auto sized = [] {
        CostModel c = fourLayers();
        for (LayerCostModel& l : c.layers) {
            l.params = 1000;
            l.activationBytes = 100;
        }
        c.optimizerNsPerParam = 1000;
        return c;
    };
    const Scenario s = scenario(ScheduleKind::OneFOneB, 2, 2, std::vector<int>{2});
    // Trainable: rank 0 holds 2 x 1000 x 18 bytes and 2 microbatches of 200 bytes.
    const Prediction all = predict(sized(), s);
    QCOMPARE(all.memory[0].staticBytes, int64_t(36000));
    QCOMPARE(all.memory[0].peakBytes, int64_t(36400));
    QCOMPARE(all.costs.optimizerNs, (std::vector<TimeNs>{2 * kMs, 2 * kMs}));
    // Prefix 0..1 frozen: weights only, no activations kept, no optimizer step.
    CostModel prefix = sized();
    prefix.freezeLayers({{0, 1}});
    const Prediction p = predict(prefix, s);
    QCOMPARE(p.memory[0].parameters, int64_t(2000));
    QCOMPARE(p.memory[0].trainableParameters, int64_t(0));
    QCOMPARE(p.memory[0].staticBytes, int64_t(4000));
    QCOMPARE(p.memory[0].peakBytes, int64_t(4000));
    QCOMPARE(p.memory[1].peakBytes, int64_t(36200));
    QCOMPARE(p.costs.optimizerNs, (std::vector<TimeNs>{0, 2 * kMs}));
    // Layer 1 frozen after a trainable layer 0: its activations stay (its input gradient needs them).
    CostModel middle = sized();
    middle.freezeLayers({{1, 1}});
    const Prediction q = predict(middle, s);
    QCOMPARE(q.memory[0].staticBytes, int64_t(4000 + 16000));
    QCOMPARE(q.memory[0].peakBytes, int64_t(20400));
    QCOMPARE(q.costs.optimizerNs, (std::vector<TimeNs>{1 * kMs, 2 * kMs}));
}

void TestFreeze::rangesParsedAndChecked()
{
    QCOMPARE(parseLayerRanges({"0..3", "30..31", "7"}), (std::vector<LayerRange>{{0, 3}, {30, 31}, {7, 7}}));
    QCOMPARE(layerRangesText({{0, 3}, {7, 7}}), std::string("0..3, 7"));
    const std::string shape = "; give FIRST..LAST (0-based, inclusive), several comma-separated, e.g. 0..3,30..31";
    QCOMPARE(errorOf([] { parseLayerRanges({"1-3"}); }), "freeze: '1-3' is not a layer range" + shape);
    QCOMPARE(errorOf([] { parseLayerRanges({"-1..3"}); }), "freeze: '-1..3' is not a layer range" + shape);
    QCOMPARE(errorOf([] { parseLayerRanges({"2.."}); }), "freeze: '2..' is not a layer range" + shape);
    QCOMPARE(errorOf([] { parseLayerRanges({""}); }), "freeze: '' is not a layer range" + shape);
    QCOMPARE(errorOf([] { parseLayerRanges({"5..3"}); }),
             std::string("freeze: the range 5..3 runs backwards; give FIRST..LAST with FIRST at most LAST"));
    QCOMPARE(errorOf([] { fourLayers().freezeLayers({{2, 4}}); }),
             std::string("freeze: the range 2..4 is outside the model's 4 layers (numbered 0..3)"));
}

void TestFreeze::jsonAndText()
{
    const CostModel c = frozen({{0, 1}});
    const nlohmann::json j = costModelToJson(c);
    QCOMPARE(j["frozen_layers"], nlohmann::json::parse("[[0, 1]]"));
    QCOMPARE(j["layers"][0]["frozen"].get<bool>(), true);
    QCOMPARE(j["layers"][2]["frozen"].get<bool>(), false);
    QCOMPARE(costModelToJson(fourLayers())["frozen_layers"], nlohmann::json::array());
    QCOMPARE(frozenLayersText(c), std::string("frozen layers 0..1 (2 of 4): no weight gradients, gradient buffers or "
                                              "optimizer state; layers 0..1 and the first-stage extra run no backward "
                                              "(nothing before them needs an input gradient)"));
    QVERIFY(frozenLayersText(fourLayers()).empty());
    QCOMPARE(freezeGainText(c, 14 * kMs, 18 * kMs),
             std::string("layers 0..1 frozen: iteration 14.000 ms (-4.000 ms against 18.000 ms with every layer trainable)"));
}

// A measured 1F1B job, pp 2, m 2, each stage F = 2 ms, B = 4 ms: with
// --layers 4 every layer is F = 1, B = 2 ms, as above.
void TestFreeze::cli()
{
    QTemporaryDir dir;
    const QString store = dir.path() + "/two.pipescope";
    PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 2;
    spec.forwardNs = 2 * kMs;
    spec.backwardNs = 4 * kMs;
    writeStore(pipelineTrace(spec).trace, store.toStdString());

    auto r = runCli({"whatif", store, "--layers", "4", "--freeze", "0..1", "--auto-balance", "--json", "--summary"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const nlohmann::json doc = nlohmann::json::parse(r.out.toStdString());
    QCOMPARE(doc["cost_model"]["frozen_layers"], nlohmann::json::parse("[[0, 1]]"));
    const nlohmann::json& measured = doc["predictions"][0];
    QCOMPARE(measured["label"].get<std::string>(), std::string("measured configuration"));
    QVERIFY2(std::abs(measured["iteration_ns"].get<TimeNs>() - 14 * kMs) <= 2, measured["iteration_ns"].dump().c_str());
    const nlohmann::json& balanced = doc["predictions"].back();
    QCOMPARE(balanced["label"].get<std::string>(), std::string("auto-balance"));
    QCOMPARE(balanced["config"]["boundaries"], nlohmann::json::parse("[3]"));
    QVERIFY2(std::abs(balanced["iteration_ns"].get<TimeNs>() - 11 * kMs) <= 2, balanced["iteration_ns"].dump().c_str());
    const nlohmann::json& freeze = doc["freeze"];
    QCOMPARE(freeze["frozen_layers"], nlohmann::json::parse("[[0, 1]]"));
    QVERIFY(std::abs(freeze["trainable_iteration_ns"].get<TimeNs>() - 18 * kMs) <= 2);
    QVERIFY(std::abs(freeze["gain_ns"].get<TimeNs>() - 4 * kMs) <= 4);

    r = runCli({"whatif", store, "--layers", "4", "--freeze", "0..1"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("frozen layers 0..1 (2 of 4)"), qPrintable(r.out));
    QVERIFY2(r.out.contains("freeze: layers 0..1 frozen: iteration 14.000 ms (-4.000 ms against 18.000 ms with every "
                            "layer trainable)"),
             qPrintable(r.out));
    QVERIFY(runCli({"whatif", store, "--layers", "4", "--json", "--summary"}).out.contains("\"freeze\": null"));

    // Out of range once the layer count is known; malformed before the store is opened.
    r = runCli({"whatif", store, "--layers", "4", "--freeze", "0..1,3..4"});
    QCOMPARE(r.exitCode, 1);
    QCOMPARE(r.err.trimmed(), QString("pipescope whatif: error: --freeze: the range 3..4 is outside the model's 4 layers "
                                      "(numbered 0..3)"));
    r = runCli({"whatif", "missing.pipescope", "--freeze", "3..1"});
    QCOMPARE(r.exitCode, 1);
    QCOMPARE(r.err.trimmed(), QString("pipescope whatif: error: --freeze: the range 3..1 runs backwards; give "
                                      "FIRST..LAST with FIRST at most LAST"));
}

QTEST_GUILESS_MAIN(TestFreeze)
#include "tst_freeze.moc"
