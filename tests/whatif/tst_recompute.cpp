// Activation recomputation in the what-if (docs/whatif.md, "Recomputation and
// the memory-time front"): full re-runs the stage's forward inside the
// backward and stores only the stage's input; selective re-runs a share of
// the forward and drops a share of the activations; auto-balance picks each
// stage's recomputation under a memory limit; the search marks the
// time-memory Pareto front. Every number is worked by hand.
#include "TestSupport.h"
#include "WhatIfTestSupport.h"
#include "util/Error.h"
#include "whatif/ModelDescription.h"
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
using pipescope::test::runCli;

namespace {

constexpr TimeNs kMs = 1'000'000;

// Four layers, F = 1 ms, B = 2 ms (I = W = 1 ms), 1000 activation bytes
// each, no parameters; the stage input (p2p) is 100 bytes. Selective
// recomputation re-runs 1/4 of the forward and drops 3/4 of the activations.
CostModel model()
{
    CostModel c = whatif::test::fourEqualLayers();
    for (LayerCostModel& l : c.layers)
        l.activationBytes = 1000;
    c.p2pBytes = 100;
    c.memory.selectiveForwardShare = 0.25;
    c.memory.selectiveActivationShare = 0.75;
    return c;
}

Scenario scenario(ScheduleKind kind, int pp, int m, std::vector<Recompute> recompute = {})
{
    Scenario s = whatif::test::scenarioOf(kind, pp, m);
    s.recompute = std::move(recompute);
    return s;
}

SearchRow row(TimeNs t, int64_t bytes)
{
    SearchRow r;
    r.iterationNs = t;
    r.peakBytes = bytes;
    return r;
}

} // namespace

class TestRecompute : public QObject {
    Q_OBJECT

private slots:
    void parsesAndNames()
    {
        QCOMPARE(parseRecompute("full"), std::vector<Recompute>{Recompute::Full});
        QCOMPARE(parseRecompute("none, selective,full"),
                 (std::vector<Recompute>{Recompute::None, Recompute::Selective, Recompute::Full}));
        QCOMPARE(recomputeText({}), std::string("none"));
        QCOMPARE(recomputeText({Recompute::Full, Recompute::Full}), std::string("full"));
        QCOMPARE(recomputeText({Recompute::Full, Recompute::None}), std::string("full,none"));
        QVERIFY(errorOf([] { parseRecompute("full,most"); }).starts_with("recompute: 'most' is not a recomputation"));
        QCOMPARE(recomputePerStage({Recompute::Selective}, 3), std::vector<Recompute>(3, Recompute::Selective));
        QCOMPARE(recomputePerStage({}, 2), std::vector<Recompute>(2, Recompute::None));
        QCOMPARE(QString::fromStdString(errorOf([] { recomputePerStage({Recompute::Full, Recompute::None}, 4); })),
                 QString("recompute: the recomputation lists 2 stages and the scenario has 4 (pp x v); give one setting "
                         "for all or one per virtual stage"));
    }

    // 2 stages of 2 layers: F = 2 ms, B = 4 ms (I = W = 2 ms). Full adds the
    // stage's forward to B and to I; selective a quarter of it.
    void fullAddsTheForwardToTheBackward()
    {
        const CostModel m = model();
        const Prediction none = predict(m, scenario(ScheduleKind::OneFOneB, 2, 4));
        QCOMPARE(none.costs.stages[0].backward, 4 * kMs);
        QVERIFY(none.recompute.empty());
        const Prediction full = predict(m, scenario(ScheduleKind::OneFOneB, 2, 4, {Recompute::Full}));
        for (const StageCost& c : full.costs.stages) {
            QCOMPARE(c.forward, 2 * kMs);
            QCOMPARE(c.backward, 6 * kMs);
            QCOMPARE(c.backwardInput, 4 * kMs);
            QCOMPARE(c.backwardWeight, 2 * kMs);
        }
        QCOMPARE(full.recompute, std::vector<Recompute>(2, Recompute::Full));
        // 1F1B with equal stages: (m + p - 1) x (F + B).
        QCOMPARE(none.iterationNs(), 5 * 6 * kMs);
        QCOMPARE(full.iterationNs(), 5 * 8 * kMs);
        const Prediction sel = predict(m, scenario(ScheduleKind::OneFOneB, 2, 4, {Recompute::Selective, Recompute::None}));
        QCOMPARE(sel.costs.stages[0].backward, 4 * kMs + kMs / 2);
        QCOMPARE(sel.costs.stages[1].backward, 4 * kMs);
        // Split backward: the recomputation runs in I, W is unchanged.
        const Prediction zb = predict(m, scenario(ScheduleKind::ZeroBubbleH1, 2, 4, {Recompute::Full}));
        QCOMPARE(zb.costs.stages[0].backwardInput, 4 * kMs);
        QCOMPARE(zb.costs.stages[0].backwardWeight, 2 * kMs);
    }

    // 1F1B, pp 2: rank 0 holds 2 microbatches at once, rank 1 one. Per
    // microbatch a stage stores 2000 bytes; full stores its 100-byte input
    // and holds the 2000 again during each backward; selective stores 500
    // and holds 1500 again.
    void memoryPerInFlightMicrobatch()
    {
        const CostModel m = model();
        const Prediction none = predict(m, scenario(ScheduleKind::OneFOneB, 2, 4));
        QCOMPARE(none.memory[0].peakActivationBytes, int64_t(4000));
        QCOMPARE(none.memory[1].peakActivationBytes, int64_t(2000));
        const Prediction full = predict(m, scenario(ScheduleKind::OneFOneB, 2, 4, {Recompute::Full}));
        QCOMPARE(full.memory[0].peakActivationBytes, int64_t(2 * 100 + 2000));
        QCOMPARE(full.memory[1].peakActivationBytes, int64_t(100 + 2000));
        QCOMPARE(full.peakBytes(), int64_t(2200)); // no parameters: activations only
        const Prediction sel = predict(m, scenario(ScheduleKind::OneFOneB, 2, 4, {Recompute::Selective}));
        QCOMPARE(sel.memory[0].peakActivationBytes, int64_t(2 * 500 + 1500));
        QCOMPARE(sel.memory[1].peakActivationBytes, int64_t(500 + 1500));
        // Everything is released by the end of the iteration.
        QCOMPARE(full.memory[0].overTime.back().bytes, int64_t(0));

        // Extras are never recomputed; the input is at most the layers' own activations.
        CostModel e = m;
        e.firstStageExtra.activationBytes = 50;
        const ActivationBytes a =
            stageActivationBytes(e, evenPartition(4, 2), 4, {Recompute::Full, Recompute::Selective});
        QCOMPARE(a.stored, (std::vector<int64_t>{150, 500}));
        QCOMPARE(a.recompute, (std::vector<int64_t>{2000, 1500}));
        e.p2pBytes = 5000;
        QCOMPARE(stageActivationBytes(e, evenPartition(4, 2), 4, {Recompute::Full}).stored,
                 (std::vector<int64_t>{2050, 2000}));
    }

    // Limit 3000 bytes. Even split without recomputation: stage 0 needs 2 x
    // 2000 = 4000. Auto-balance with the per-stage choice keeps 2|2 and gives
    // stage 0 selective (2 x 500 + 1500 = 2500), stage 1 none (2000):
    // bottleneck 6.5 ms against 9 ms for the only split that fits without (1|3).
    void autoBalanceChoosesPerStage()
    {
        const CostModel m = model();
        BalanceOptions o;
        o.memoryLimitBytes = 3000;
        const BalanceResult plain = autoBalance(m, scenario(ScheduleKind::OneFOneB, 2, 4), o);
        QCOMPARE(plain.prediction.partition.boundaries(), std::vector<int>{1});
        QCOMPARE(plain.bottleneckNs, 9 * kMs);
        QCOMPARE(plain.prediction.iterationNs(), 39 * kMs);
        QCOMPARE(plain.prediction.peakBytes(), int64_t(3000));

        o.recomputeChoices = {Recompute::None, Recompute::Selective, Recompute::Full};
        const BalanceResult chosen = autoBalance(m, scenario(ScheduleKind::OneFOneB, 2, 4), o);
        QVERIFY(chosen.memoryFeasible);
        QCOMPARE(chosen.prediction.partition.boundaries(), std::vector<int>{2});
        QCOMPARE(chosen.prediction.recompute, (std::vector<Recompute>{Recompute::Selective, Recompute::None}));
        QCOMPARE(chosen.bottleneckNs, 6 * kMs + kMs / 2);
        // Rank 0: F 2, B 4.5; rank 1: F 2, B 4 (ms), traced step by step: 31.5 ms.
        QCOMPARE(chosen.prediction.iterationNs(), 31 * kMs + kMs / 2);
        QCOMPARE(chosen.prediction.peakBytes(), int64_t(2500));
        QVERIFY(!chosen.prediction.outOfMemory());

        // Without a limit every stage takes the cheapest choice: none.
        BalanceOptions free;
        free.recomputeChoices = o.recomputeChoices;
        const BalanceResult unlimited = autoBalance(m, scenario(ScheduleKind::OneFOneB, 2, 4), free);
        QVERIFY(unlimited.prediction.recompute.empty());
        QCOMPARE(unlimited.prediction.iterationNs(), 30 * kMs);
    }

    // Rows (ms, bytes): A 10/50, B 12/40, C 11/60, D 12/40, E 9/80, F 9/90, G 15/40.
    // C is beaten by A, F by E, G by B; B and D tie and both stay.
    void paretoFrontOfHandMadeRows()
    {
        const std::vector<SearchRow> rows{row(10, 50), row(12, 40), row(11, 60), row(12, 40),
                                          row(9, 80),  row(9, 90),  row(15, 40)};
        QCOMPARE(paretoFront(rows), (std::vector<size_t>{0, 1, 3, 4}));
        QVERIFY(paretoFront({}).empty());
        QCOMPARE(paretoFront({row(5, 5)}), std::vector<size_t>{0});
    }

    // 1F1B, pp 2, 4 microbatches, limit 3000: none (1|3, 39 ms, 3000 B),
    // full (2|2, 40 ms, 2200 B) and the per-stage choice (2|2 selective +
    // none, 31.5 ms, 2500 B). The choice beats none in both; full needs the
    // least memory: the front is the choice and full.
    void searchMarksTheFront()
    {
        const CostModel m = model();
        SearchSpace space;
        space.schedules = {ScheduleKind::OneFOneB};
        space.vs = {1};
        space.microbatches = {4};
        space.recompute = {Recompute::None, Recompute::Full};
        space.recomputePerStage = true;
        BalanceOptions o;
        o.memoryLimitBytes = 3000;
        const std::vector<SearchRow> rows = searchConfigurations(m, scenario(ScheduleKind::OneFOneB, 2, 4), space, o);
        QCOMPARE(rows.size(), size_t(3));
        QCOMPARE(rows[0].iterationNs, 31 * kMs + kMs / 2);
        QVERIFY(rows[0].recomputeChosen);
        QCOMPARE(rows[0].scenario.recompute, (std::vector<Recompute>{Recompute::Selective, Recompute::None}));
        QCOMPARE(rows[0].peakBytes, int64_t(2500));
        QVERIFY(rows[0].pareto);
        QCOMPARE(rows[1].iterationNs, 39 * kMs);
        QCOMPARE(rows[1].peakBytes, int64_t(3000));
        QVERIFY(!rows[1].pareto);
        QCOMPARE(rows[2].iterationNs, 40 * kMs);
        QCOMPARE(rows[2].peakBytes, int64_t(2200));
        QCOMPARE(rows[2].boundaries, std::vector<int>{2});
        QVERIFY(rows[2].pareto);
        QCOMPARE(rows[2].scenario.label, std::string("1f1b v1 m4 recompute full"));

        const nlohmann::json j = searchToJson(rows);
        QCOMPARE(j[0]["recompute"], nlohmann::json({"selective", "none"}));
        QCOMPARE(j[0]["recompute_chosen"], true);
        QCOMPARE(j[0]["pareto"], true);
        QCOMPARE(j[1]["pareto"], false);
        QCOMPARE(j[2]["recompute"], nlohmann::json({"full", "full"}));
        const std::string text = searchText(rows);
        QVERIFY(text.find("per stage: selective,none") != std::string::npos);
        QVERIFY(text.find("front: * marks") != std::string::npos);

        // A search without recomputation keeps its rows and labels as before.
        SearchSpace plain = space;
        plain.recompute.clear();
        plain.recomputePerStage = false;
        const std::vector<SearchRow> before = searchConfigurations(m, scenario(ScheduleKind::OneFOneB, 2, 4), plain, o);
        QCOMPARE(before.size(), size_t(1));
        QCOMPARE(before[0].scenario.label, std::string("1f1b v1 m4"));
        QVERIFY(before[0].pareto);
    }

    void changesAndJson()
    {
        ScenarioChanges c;
        c.recompute = std::vector<Recompute>{Recompute::Full, Recompute::None};
        const Scenario s = applyChanges(scenario(ScheduleKind::OneFOneB, 2, 4), c);
        QCOMPARE(s.recompute, (std::vector<Recompute>{Recompute::Full, Recompute::None}));
        const Prediction p = predict(model(), s);
        const nlohmann::json j = predictionToJson(p, JsonOptions{false});
        QCOMPARE(j["config"]["recompute"], nlohmann::json({"full", "none"}));
        QVERIFY(describeConfig(p).ends_with(", recompute full,none"));
        QCOMPARE(predictionToJson(predict(model(), scenario(ScheduleKind::OneFOneB, 2, 4)), JsonOptions{false})["config"]["recompute"],
                 nlohmann::json({"none", "none"}));
        // A per-stage list for 2 stages does not fit 4.
        QVERIFY(errorOf([] { predict(model(), scenario(ScheduleKind::OneFOneB, 4, 4, {Recompute::Full, Recompute::None})); })
                    .starts_with("recompute: the recomputation lists 2 stages"));
        const nlohmann::json cm = costModelToJson(model());
        QCOMPARE(cm["memory"]["selective_activation_share"].get<double>(), 0.75);
        QCOMPARE(cm["memory"]["selective_forward_share"].get<double>(), 0.25);
    }

    // hidden 4096, 32 heads, sequence 4096: 5as/h = 160, so selective drops
    // 160 / 194 of the activations and re-runs s / (6h + s) = 1/7 of the forward.
    void sharesFromTheModelDescription()
    {
        const ModelDescription d = parseModelDescription(
            R"({"format": "pipescope.model/1", "hidden_size": 4096, "attention_heads": 32, "sequence_length": 4096,
                "layer_forward_ms": 1, "layers": [{"count": 2}]})",
            "m.json");
        QCOMPARE(d.memory.selectiveActivationShare, 160.0 / 194.0);
        QCOMPARE(d.memory.selectiveForwardShare, 1.0 / 7.0);
        const ModelDescription o = parseModelDescription(
            R"({"format": "pipescope.model/1", "layer_forward_ms": 1, "layers": [{"count": 2}],
                "memory": {"selective_activation_share": 0.5, "selective_forward_share": 0.1}})",
            "m.json");
        QCOMPARE(o.memory.selectiveActivationShare, 0.5);
        QCOMPARE(o.memory.selectiveForwardShare, 0.1);
    }

    // The command line: simulate --recompute full (and a wrong list).
    void commandLine()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("m.json");
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"format": "pipescope.model/1",
                    "layers": [{"count": 4, "forward_ms": 1, "backward_ms": 2, "activation_bytes": 1000}],
                    "communication": {"p2p_bytes": 100},
                    "parallel": {"pp": 2, "microbatches": 4, "schedule": "1f1b"}})");
        f.close();
        auto r = runCli({"simulate", path, "--recompute", "full", "--json", "--summary"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const nlohmann::json doc = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(doc["predictions"][0]["config"]["recompute"], nlohmann::json({"full", "full"}));
        // 2 of 2 ms more per backward, 5 (F + B) slots on the critical path: 10 ms more than without.
        r = runCli({"simulate", path, "--json", "--summary"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const nlohmann::json plain = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(plain["predictions"][0]["config"]["recompute"], nlohmann::json({"none", "none"}));
        QCOMPARE(doc["predictions"][0]["iteration_ns"].get<TimeNs>() - plain["predictions"][0]["iteration_ns"].get<TimeNs>(),
                 10 * kMs);
        // Stored activations: rank 0 holds 2 inputs of 100 bytes plus 2000 recomputed, against 2 x 2000.
        QCOMPARE(doc["predictions"][0]["peak_bytes"].get<int64_t>(), int64_t(2200));
        QCOMPARE(plain["predictions"][0]["peak_bytes"].get<int64_t>(), int64_t(4000));
        r = runCli({"simulate", path, "--search", "--search-recompute", "none,full", "--json", "--summary"});
        QCOMPARE(r.exitCode, 0);
        const nlohmann::json search = nlohmann::json::parse(r.out.toStdString())["search"];
        QVERIFY(search.size() >= 2);
        bool anyFront = false;
        for (const auto& row : search)
            anyFront = anyFront || row["pareto"].get<bool>();
        QVERIFY(anyFront);
        r = runCli({"simulate", path, "--recompute", "full,none,none"});
        QVERIFY(r.exitCode != 0);
        QVERIFY2(r.err.contains("the recomputation lists 3 stages"), qPrintable(r.err));
        r = runCli({"simulate", path, "--recompute", "auto"});
        QVERIFY(r.exitCode != 0);
        QVERIFY2(r.err.contains("--recompute auto"), qPrintable(r.err));

        // The HTML report names the recomputation under its what-if table.
        const QString html = dir.filePath("r.html");
        r = runCli({"report", QString::fromUtf8(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope",
                    "--layers", "16", "--recompute", "full", "-o", html});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QFile page(html);
        QVERIFY(page.open(QIODevice::ReadOnly));
        const QString text = QString::fromUtf8(page.readAll());
        QVERIFY(text.contains("<p id=\"whatif-recompute\">Activation recomputation"));
        QVERIFY(text.contains("requested: full; auto-balance: full."));
    }
};

QTEST_GUILESS_MAIN(TestRecompute)
#include "tst_recompute.moc"
