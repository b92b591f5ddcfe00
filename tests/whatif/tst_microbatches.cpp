// Uneven microbatches (docs/whatif.md and docs/analysis.md, "Uneven
// microbatches"): the analysis measures each microbatch's cost, the replay
// runs each with its own cost, and the study splits the idle time into what
// the microbatches' spread, the stages' imbalance and the schedule cause;
// reorderings and token files are priced against worked examples and
// against independent simulations.
#include "StoreFixture.h"
#include "SyntheticTrace.h"
#include "TestSupport.h"
#include "WhatIfTestSupport.h"
#include "analysis/Analysis.h"
#include "analysis/Verdict.h"
#include "analysis/detail/Context.h"
#include "report/Report.h"
#include "util/Error.h"
#include "util/Format.h"
#include "whatif/Microbatches.h"
#include "whatif/WhatIf.h"
#include "whatif/WhatIfJson.h"

#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

using namespace pipescope;
using namespace pipescope::whatif;
using pipescope::test::PipelineSpec;
using pipescope::test::pipelineTrace;
using pipescope::test::runCli;
using pipescope::test::writeStore;
using nlohmann::json;

namespace {

constexpr TimeNs kMs = 1'000'000;

// Two layers, F = 1 ms and B = 2 ms per microbatch each (one per stage).
CostModel twoLayers()
{
    CostModel c = whatif::test::fourEqualLayers();
    c.layers.resize(2);
    return c;
}

Scenario oneFOneB(int pp, int m) { return whatif::test::scenarioOf(ScheduleKind::OneFOneB, pp, m); }

// p = 2, m = 4, annotated steps; microbatches 1.5x, 0.5x, 1x and 1x.
PipelineSpec unevenSpec()
{
    PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 4;
    spec.annotate = true;
    spec.microbatchScale = {1.5, 0.5, 1.0, 1.0};
    return spec;
}

void writeText(const QString& path, const std::string& text)
{
    std::ofstream(path.toStdString()) << text;
}

} // namespace

class TestMicrobatches : public QObject {
    Q_OBJECT
private slots:
    void orders();
    void sizesFromSpec();
    void workedReplay();
    void measuredSpreadAndCalibration();
    void attributionMatchesIndependentSimulation();
    void tokensFile();
    void tokensFileErrors();
    void cli();
    void emittedTraceRecoversTheSpread();
    void reportSection();
    void hugeIndicesMakeNoTable();
};

void TestMicrobatches::orders()
{
    const std::vector<double> size{1.0, 3.0, 0.5, 2.0, 1.5};
    QCOMPARE(microbatchPermutation(size, MicrobatchOrder::Given), (std::vector<int>{0, 1, 2, 3, 4}));
    QCOMPARE(microbatchPermutation(size, MicrobatchOrder::LongestFirst), (std::vector<int>{1, 3, 4, 0, 2}));
    QCOMPARE(microbatchPermutation(size, MicrobatchOrder::ShortestFirst), (std::vector<int>{2, 0, 4, 3, 1}));
    QCOMPARE(microbatchPermutation(size, MicrobatchOrder::LongShort), (std::vector<int>{1, 2, 3, 0, 4}));
    QVERIFY(microbatchOrderFromString("measured") == MicrobatchOrder::Given);
    QVERIFY(microbatchOrderFromString("long-short") == MicrobatchOrder::LongShort);
    QVERIFY(!microbatchOrderFromString("random"));

    MicrobatchSizes s = uniformRows({1.5, 0.5}, SizeSource::Simulated);
    QCOMPARE(s.size(), (std::vector<double>{1.5, 0.5}));
    QCOMPARE(s.spread(), 0.5);
}

void TestMicrobatches::sizesFromSpec()
{
    QCOMPARE(microbatchSizesFromSpec("3,1", 2, 1), (std::vector<double>{1.5, 0.5}));
    // Seeded: the same seed gives the same sizes, mean 1.
    const std::vector<double> a = microbatchSizesFromSpec("lognormal:0.5", 16, 7);
    QCOMPARE(a, microbatchSizesFromSpec("lognormal:0.5", 16, 7));
    QVERIFY(a != microbatchSizesFromSpec("lognormal:0.5", 16, 8));
    double sum = 0;
    for (double x : a)
        sum += x;
    QVERIFY(std::abs(sum / 16 - 1.0) < 1e-12);
    const std::vector<double> u = microbatchSizesFromSpec("uniform:1,3", 50, 1);
    const auto [lo, hi] = std::minmax_element(u.begin(), u.end());
    QVERIFY(*hi / *lo <= 3.0 + 1e-12 && *hi / *lo > 2.0); // drawn from 1..3, then scaled to mean 1
    for (const char* bad : {"lognormal:-1", "uniform:2,1", "1,2", "gamma:2", "1,x,3", "0,1,1"}) {
        try {
            (void)microbatchSizesFromSpec(bad, 3, 1);
            QFAIL(bad);
        } catch (const ValueError& e) {
            QCOMPARE(std::string(toString(e.setting())), std::string("microbatch-sizes"));
        }
    }
}

// 1F1B, p = 2, m = 2, each stage F = 1 ms, B = 2 ms for a mean microbatch;
// microbatch 0 is 1.5x, microbatch 1 0.5x. Given: rank 0 F0 [0,1.5],
// F1 [1.5,2]; rank 1 F0 [1.5,3], B0 [3,6], F1 [6,6.5], B1 [6.5,7.5]; rank 0
// B0 [6,9], B1 [9,10]: 10 ms. Equal: 9 ms. Shortest first: rank 0 F0
// [0,0.5], F1 [0.5,2]; rank 1 F0 [0.5,1], B0 [1,2], F1 [2,3.5], B1 [3.5,6.5];
// rank 0 B0 [2,3], B1 [6.5,9.5]: 9.5 ms.
void TestMicrobatches::workedReplay()
{
    CostModel model = twoLayers();
    model.microbatchSizes = uniformRows({1.5, 0.5}, SizeSource::Simulated);
    const Prediction given = predict(model, oneFOneB(2, 2));
    QVERIFY(given.unevenMicrobatches);
    QCOMPARE(given.iterationNs(), 10 * kMs);
    QCOMPARE(given.costs.microbatchCosts.size(), size_t(4));
    QCOMPARE(given.costs.microbatchCosts[0].forward, 1500 * 1000);
    QCOMPARE(given.costs.microbatchCosts[1].backward, 1 * kMs);

    Scenario equal = oneFOneB(2, 2);
    equal.microbatchOrder = MicrobatchOrder::Equal;
    const Prediction even = predict(model, equal);
    QVERIFY(!even.unevenMicrobatches);
    QCOMPARE(even.iterationNs(), 9 * kMs);

    // Another microbatch count has no sizes: every microbatch the mean.
    QVERIFY(!predict(model, oneFOneB(2, 4)).unevenMicrobatches);

    const MicrobatchStudy st = studyMicrobatches(model, oneFOneB(2, 2));
    QVERIFY(st.applies);
    QCOMPARE(st.givenNs, 10 * kMs);
    QCOMPARE(st.equalNs, 9 * kMs);
    QCOMPARE(st.balancedNs, 9 * kMs); // the stages are equal already
    QCOMPARE(st.spreadCostNs, 1 * kMs);
    QCOMPARE(st.imbalanceCostNs, TimeNs{0});
    // Rank 0 waits 4 ms between its first and last step (3 with equal
    // microbatches); rank 1 never waits.
    QCOMPARE(st.ranks.size(), size_t(2));
    QCOMPARE(st.ranks[0].idleNs, 4 * kMs);
    QCOMPARE(st.ranks[0].spreadNs, 1 * kMs);
    QCOMPARE(st.ranks[0].scheduleNs, 3 * kMs);
    QCOMPARE(st.ranks[1].idleNs, TimeNs{0});
    QCOMPARE(st.orders.size(), size_t(5));
    QVERIFY(st.orders[1].order == MicrobatchOrder::LongestFirst);
    QCOMPARE(st.orders[1].iterationNs, 10 * kMs);
    QVERIFY(st.orders[2].order == MicrobatchOrder::ShortestFirst);
    QCOMPARE(st.orders[2].iterationNs, 9500 * 1000);
    QVERIFY(st.bestOrder == MicrobatchOrder::ShortestFirst);
    QCOMPARE(st.bestGainNs, 500 * 1000);

    const json j = microbatchStudyToJson(st);
    QCOMPARE(j["spread_cost_ns"].get<int64_t>(), 1 * kMs);
    QCOMPARE(j["best_order"].get<std::string>(), std::string("shortest-first"));
    QCOMPARE(j["ranks"][0]["spread_ns"].get<int64_t>(), 1 * kMs);
    QVERIFY(!studyMicrobatches(twoLayers(), oneFOneB(2, 2)).applies);
}

// A trace whose microbatches are 1.5x, 0.5x, 1x and 1x: the analysis reads
// each one's steps, and calibration keeps the sizes per measured stage.
void TestMicrobatches::measuredSpreadAndCalibration()
{
    PipelineSpec spec = unevenSpec();
    const Trace t = pipelineTrace(spec).trace;
    const AnalysisResult r = analyze(t);
    const MicrobatchSpread& ms = r.microbatchSpread;
    QCOMPARE(ms.microbatches, 4);
    QCOMPARE(ms.stages.size(), size_t(2));
    QCOMPARE(ms.stages[0].forwardNs, (std::vector<TimeNs>{1500 * 1000, 500 * 1000, kMs, kMs}));
    QCOMPARE(ms.stages[1].backwardNs, (std::vector<TimeNs>{3 * kMs, 1 * kMs, 2 * kMs, 2 * kMs}));
    QCOMPARE(ms.stages[0].forward.maxNs, 1500 * 1000);
    QCOMPARE(ms.stages[0].forward.longest, 0);
    QCOMPARE(ms.stages[0].forward.shortest, 1);
    QCOMPARE(ms.stages[0].forward.p50Ns, kMs);
    QCOMPARE(ms.size, (std::vector<double>{1.5, 0.5, 1.0, 1.0}));
    QVERIFY(std::abs(ms.cv - std::sqrt(0.125)) < 1e-12);
    QVERIFY(ms.uneven);
    QCOMPARE(ms.longest, 0);
    // The verdict names them among its facts.
    const Verdict v = verdict(r);
    QVERIFY(std::find(v.facts.begin(), v.facts.end(),
                      "uneven microbatches: 0.50x to 1.50x of the mean (CV 0.35); stages wait on the long ones "
                      "(microbatch 0 is the longest)") != v.facts.end());

    const CostModel model = calibrate(t, r);
    QVERIFY(model.microbatchSizes);
    QCOMPARE(std::string(toString(model.microbatchSizes->source)), std::string("trace"));
    QCOMPARE(model.microbatchSizes->rows(), 2);
    QCOMPARE(model.microbatchSizes->forward[1], (std::vector<double>{1.5, 0.5, 1.0, 1.0}));
    // The measured configuration replays with each microbatch's own cost.
    const Prediction p = predict(model, measuredScenario(model));
    QVERIFY(p.unevenMicrobatches);
    const double err = std::abs(static_cast<double>(p.iterationNs() - *model.measuredIterationNs)) /
                       static_cast<double>(*model.measuredIterationNs);
    QVERIFY2(err < 0.005, qPrintable(QString::number(err)));

    // Even microbatches: nothing kept, the replay is today's.
    spec.microbatchScale.clear();
    const Trace even = pipelineTrace(spec).trace;
    const AnalysisResult re = analyze(even);
    QVERIFY(!re.microbatchSpread.uneven);
    for (const std::string& fact : verdict(re).facts)
        QVERIFY(fact.find("uneven microbatches") == std::string::npos);
    QCOMPARE(re.microbatchSpread.cv, 0.0);
    QVERIFY(!calibrate(even, re).microbatchSizes);
}

// The study's spread cost against the truth of an independent simulation
// (tests/common/SyntheticTrace.h, not pipescope's replay): the same job with
// equal microbatches of the same total work.
void TestMicrobatches::attributionMatchesIndependentSimulation()
{
    PipelineSpec spec;
    spec.stages = 4;
    spec.microbatches = 8;
    spec.annotate = true;
    spec.microbatchScale = {1.8, 0.6, 0.7, 1.4, 0.5, 1.0, 1.2, 0.8}; // mean 1
    const auto uneven = pipelineTrace(spec);
    spec.microbatchScale.clear();
    const auto equal = pipelineTrace(spec);
    const TimeNs truth = (uneven.iterationEnd[0] - uneven.iterationStart[0]) - (equal.iterationEnd[0] - equal.iterationStart[0]);
    QVERIFY(truth > 0);

    const AnalysisResult r = analyze(uneven.trace);
    const CostModel model = calibrate(uneven.trace, r);
    const MicrobatchStudy st = studyMicrobatches(model, measuredScenario(model));
    QVERIFY(st.applies);
    const double err = std::abs(static_cast<double>(st.spreadCostNs - truth)) / static_cast<double>(truth);
    QVERIFY2(err < 0.02, qPrintable(QStringLiteral("spread cost %1 ns, truth %2 ns").arg(st.spreadCostNs).arg(truth)));
    // Equal stages: no imbalance to speak of.
    QVERIFY(std::abs(static_cast<double>(st.imbalanceCostNs)) < 0.01 * static_cast<double>(st.givenNs));

    // Longest first, checked against the simulation run in that order.
    spec.microbatchScale = {1.8, 1.4, 1.2, 1.0, 0.8, 0.7, 0.6, 0.5};
    const auto sorted = pipelineTrace(spec);
    const TimeNs sortedNs = sorted.iterationEnd[0] - sorted.iterationStart[0];
    const TimeNs predicted = st.orders[1].iterationNs;
    QVERIFY(st.orders[1].order == MicrobatchOrder::LongestFirst);
    const double orderErr = std::abs(static_cast<double>(predicted - sortedNs)) / static_cast<double>(sortedNs);
    QVERIFY2(orderErr < 0.02, qPrintable(QStringLiteral("longest first %1 ns, simulated %2 ns").arg(predicted).arg(sortedNs)));
}

void TestMicrobatches::tokensFile()
{
    QTemporaryDir dir;
    const QString text = dir.filePath("tokens.txt"), js = dir.filePath("tokens.json");
    writeText(text, "# tokens per microbatch\n3000, 1000\n");
    const MicrobatchTokens t = loadMicrobatchTokens(text.toStdString());
    QCOMPARE(t.tokens, (std::vector<double>{3000, 1000}));
    QVERIFY(!t.forwardNsPerToken);

    CostModel model = twoLayers();
    model.setMicrobatchTokens(t);
    QCOMPARE(std::string(toString(model.microbatchSizes->source)), std::string("tokens"));
    QCOMPARE(predict(model, oneFOneB(2, 2)).iterationNs(), 10 * kMs); // sizes 1.5 and 0.5, as in workedReplay

    // Per-token costs replace the layers' mean costs: mean 2000 tokens x
    // 250 ns = 0.5 ms forward, x 500 ns = 1 ms backward per layer: half of
    // workedReplay's times.
    writeText(js, R"({"tokens": [3000, 1000], "forward_ns_per_token": 250, "backward_ns_per_token": 500})");
    CostModel perToken = twoLayers();
    perToken.setMicrobatchTokens(loadMicrobatchTokens(js.toStdString()));
    QCOMPARE(perToken.layers[0].forwardNs, 0.5e6);
    QCOMPARE(predict(perToken, oneFOneB(2, 2)).iterationNs(), 5 * kMs);
    const json j = costModelToJson(perToken);
    QCOMPARE(j["microbatch_sizes"]["source"].get<std::string>(), std::string("tokens"));
    QCOMPARE(j["microbatch_sizes"]["tokens"], json({3000.0, 1000.0}));
    QVERIFY(costModelToJson(twoLayers())["microbatch_sizes"].is_null());
}

void TestMicrobatches::tokensFileErrors()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("bad.txt");
    const std::vector<std::pair<std::string, std::string>> cases{
        {"100\nabc\n", "line 2: 'abc' is not a number"},
        {"", "lists no token counts"},
        {"100, -5", "above 0"},
        {"{\"tokens\": 3}", "no \"tokens\" array"},
        {"{\"tokens\": [1], \"forward_ns_per_token\": \"x\"}", "forward_ns_per_token"},
        {"{broken", "not valid JSON"},
    };
    for (const auto& [content, expected] : cases) {
        writeText(path, content);
        try {
            (void)loadMicrobatchTokens(path.toStdString());
            QFAIL(content.c_str());
        } catch (const Error& e) {
            const std::string what = e.what();
            QVERIFY2(what.find(expected) != std::string::npos && what.find("bad.txt") != std::string::npos, e.what());
        }
    }
    try {
        (void)loadMicrobatchTokens(dir.filePath("missing.txt").toStdString());
        QFAIL("missing file");
    } catch (const Error&) {
    }
}

void TestMicrobatches::cli()
{
    QTemporaryDir dir;
    PipelineSpec spec = unevenSpec();
    const QString store = dir.filePath("job.pipescope");
    writeStore(pipelineTrace(spec).trace, store.toStdString());

    auto r = runCli({"whatif", store, "--microbatch-order", "shortest-first", "--json", "--summary"});
    QCOMPARE(r.exitCode, 0);
    const json doc = json::parse(r.out.toStdString());
    QCOMPARE(doc["predictions"][0]["microbatch_order"].get<std::string>(), std::string("given"));
    QCOMPARE(doc["predictions"][0]["uneven_microbatches"].get<bool>(), true);
    QCOMPARE(doc["predictions"][1]["microbatch_order"].get<std::string>(), std::string("shortest-first"));
    QVERIFY(doc["microbatches"]["applies"].get<bool>());
    QCOMPARE(doc["microbatches"]["size"], json({1.5, 0.5, 1.0, 1.0}));
    // The requested order is one of the study's rows.
    for (const json& row : doc["microbatches"]["orders"])
        if (row["order"] == "shortest-first")
            QCOMPARE(row["iteration_ns"], doc["predictions"][1]["iteration_ns"]);

    r = runCli({"whatif", store});
    QCOMPARE(r.exitCode, 0);
    QVERIFY2(r.out.contains("uneven microbatches (4, sizes as measured)") && r.out.contains("the spread costs"),
             qPrintable(r.out));

    r = runCli({"analyze", store, "--json"});
    QCOMPARE(r.exitCode, 0);
    const json a = json::parse(r.out.toStdString());
    QCOMPARE(a["microbatches"]["uneven"].get<bool>(), true);
    QCOMPARE(a["microbatches"]["per_stage"][0]["forward_ns"], json({1500000, 500000, 1000000, 1000000}));
    QVERIFY(a["microbatches"]["cost"]["spread_cost_ns"].get<int64_t>() > 0);

    r = runCli({"whatif", store, "--microbatch-order", "random"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--microbatch-order: unknown microbatch order 'random'; choose one of given, equal"), qPrintable(r.err));
    r = runCli({"whatif", store, "--microbatch-tokens", dir.filePath("none.txt")});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("none.txt"), qPrintable(r.err));
    r = runCli({"simulate", QStringLiteral(PIPESCOPE_SOURCE_DIR "/resources/models/gpt-32l.json"), "--microbatch-sizes",
                "lognormal:9"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--microbatch-sizes: 'lognormal:9': the log-normal sigma must be one number from 0 to 3"),
             qPrintable(r.err));
}

// simulate --microbatch-sizes writes a job whose microbatches differ; the
// importer, the analysis and the study read back what the simulation says
// the spread costs.
void TestMicrobatches::emittedTraceRecoversTheSpread()
{
    QTemporaryDir dir;
    const QString model = QStringLiteral(PIPESCOPE_SOURCE_DIR "/resources/models/gpt-32l.json");
    auto r = runCli({"simulate", model, "--pp", "4", "--microbatches", "8", "--microbatch-sizes", "lognormal:0.4",
                     "--seed", "5", "--emit-kineto", dir.filePath("job"), "--json", "--summary"});
    QCOMPARE(r.exitCode, 0);
    const json sim = json::parse(r.out.toStdString());
    const int64_t truth = sim["microbatches"]["spread_cost_ns"].get<int64_t>();
    QVERIFY(truth > 0);
    r = runCli({"import", dir.filePath("job"), "-o", dir.filePath("job.pipescope")});
    QCOMPARE(r.exitCode, 0);
    r = runCli({"analyze", dir.filePath("job.pipescope"), "--json"});
    QCOMPARE(r.exitCode, 0);
    const json a = json::parse(r.out.toStdString());
    QVERIFY(a["microbatches"]["uneven"].get<bool>());
    // Each microbatch's size as simulated, up to the emitter's 3% jitter per step.
    const std::vector<double> simSize = sim["microbatches"]["size"].get<std::vector<double>>();
    const std::vector<double> readSize = a["microbatches"]["size"].get<std::vector<double>>();
    QCOMPARE(readSize.size(), simSize.size());
    for (size_t i = 0; i < simSize.size(); ++i)
        QVERIFY2(std::abs(readSize[i] - simSize[i]) < 0.03 * simSize[i],
                 qPrintable(QStringLiteral("microbatch %1: %2 read, %3 simulated").arg(i).arg(readSize[i]).arg(simSize[i])));
    const int64_t measured = a["microbatches"]["cost"]["spread_cost_ns"].get<int64_t>();
    const double err = std::abs(static_cast<double>(measured - truth)) / static_cast<double>(truth);
    QVERIFY2(err < 0.03, qPrintable(QStringLiteral("from the trace %1 ns, simulated %2 ns").arg(measured).arg(truth)));
}

// The report's section gives the same spread cost and best order as the
// study, and is left out for even microbatches.
void TestMicrobatches::reportSection()
{
    PipelineSpec spec = unevenSpec();
    const Trace t = pipelineTrace(spec).trace;
    const AnalysisResult r = analyze(t);
    const CostModel model = calibrate(t, r);
    const MicrobatchStudy st = studyMicrobatches(model, measuredScenario(model));
    QVERIFY(st.applies);
    const std::string html = report::renderReport(t, r, {});
    QVERIFY(html.find("<section id=\"microbatches\">") != std::string::npos);
    QVERIFY(html.find("<a href=\"#microbatches\">") != std::string::npos);
    const size_t at = html.find("<p id=\"microbatch-cost\">");
    QVERIFY(at != std::string::npos);
    const std::string line = html.substr(at, html.find("</p>", at) - at);
    QVERIFY2(line.find("the spread costs " + formatDuration(st.spreadCostNs)) != std::string::npos, line.c_str());
    QVERIFY2(line.find("equal microbatches (the same total work spread evenly) " + formatDuration(st.equalNs)) != std::string::npos,
             line.c_str());
    if (st.bestGainNs > 0)
        QVERIFY2(line.find(std::string(toString(st.bestOrder))) != std::string::npos, line.c_str());
    QVERIFY(html.find("<table id=\"microbatch-spread\">") != std::string::npos);
    QVERIFY(html.find("<table id=\"microbatch-orders\">") != std::string::npos);

    spec.microbatchScale.clear();
    const std::string even = report::renderReport(pipelineTrace(spec).trace);
    QVERIFY(even.find("id=\"microbatches\"") == std::string::npos);
}

// Step labels may claim any stage and microbatch: two steps at index
// 999,999 would ask for a 10^12-cell table; the spread is left out instead.
void TestMicrobatches::hugeIndicesMakeNoTable()
{
    AnalysisResult r;
    std::vector<Step> steps(2);
    steps[1].stage = 999'999;
    steps[1].microbatch = 999'999;
    steps[1].end = 10;
    detail::measureMicrobatchSpread(r, steps);
    QCOMPARE(r.microbatchSpread.microbatches, 0);
    QVERIFY(r.microbatchSpread.stages.empty());
}

QTEST_GUILESS_MAIN(TestMicrobatches)
#include "tst_microbatches.moc"
