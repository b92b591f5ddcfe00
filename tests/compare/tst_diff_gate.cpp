// The CI gate over a diff (core/compare/DiffGate): conditions parsed from
// text (and refused with the accepted forms), evaluated on small hand-made
// diffs, with the exact line each regression prints.
#include "TestSupport.h"
#include "compare/DiffGate.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>

using namespace pipescope;
using namespace pipescope::compare;

namespace {

// A 4-stage run A (the baseline) and B: iteration 12.310 -> 12.830 ms (+4.2%);
// forward + backward per microbatch 5.250, 5.000, 5.000, 5.000 ms -> 5.250,
// 5.300 (+6%), 5.000, 5.600 (+12%); stage 3's forward 2.000 -> 2.250 ms;
// fill/drain idle 10 -> 12.5 ms per rank, host-bound 0 -> 0.3 ms, wait 4 -> 4 ms.
DiffResult sample()
{
    DiffResult d;
    d.aName = "a.pipescope";
    d.bName = "b.pipescope";
    for (RunConfig* c : {&d.a, &d.b}) {
        c->pipeline = true;
        c->ranks = 4;
        c->pp = 4;
        c->microbatches = 8;
    }
    d.iteration = {1, 1};
    d.iterationNs = {12'310'000, 12'830'000};
    const TimeNs fa[] = {2'000'000, 2'000'000, 2'000'000, 2'000'000}, fb[] = {2'000'000, 2'100'000, 2'000'000, 2'250'000};
    const TimeNs ba[] = {3'250'000, 3'000'000, 3'000'000, 3'000'000}, bb[] = {3'250'000, 3'200'000, 3'000'000, 3'350'000};
    for (int s = 0; s < 4; ++s) {
        StageDiff sd;
        sd.stage = s;
        sd.forwardNs = {fa[s], fb[s]};
        sd.backwardNs = {ba[s], bb[s]};
        sd.fbNs = {fa[s] + ba[s], fb[s] + bb[s]};
        sd.busyNs = {40'000'000, 40'000'000};
        d.stages.push_back(sd);
    }
    for (auto& c : d.idleByCause)
        c = {0, 0};
    d.idleByCause[size_t(BubbleCause::FillDrain)] = {10'000'000, 12'500'000};
    d.idleByCause[size_t(BubbleCause::HostBound)] = {0, 300'000};
    d.idleByCause[size_t(BubbleCause::WaitNeighbor)] = {4'000'000, 4'000'000};
    return d;
}

// The cause names, as the model spells them (docs/analysis.md, "Bubbles").
QString causes()
{
    QString out;
    for (int c = 0; c < kBubbleCauses; ++c)
        out += (c ? ", " : "") + QString::fromUtf8(toString(BubbleCause(c)).data(), qsizetype(toString(BubbleCause(c)).size()));
    return out;
}

std::vector<std::string> lines(const GateResult& g)
{
    std::vector<std::string> out;
    for (const auto& r : g.regressions)
        out.push_back(r.line);
    return out;
}

GateResult gate(const DiffResult& d, const std::string& conditions)
{
    return evaluateGate(d, parseGateConditions(conditions));
}

std::string refusalOf(const std::string& text)
{
    try {
        parseGateConditions(text);
    } catch (const Error& e) {
        const std::string m = e.what();
        const std::string forms = "; " + gateConditionForms();
        // Every refusal ends with the accepted forms.
        if (m.size() < forms.size() || m.compare(m.size() - forms.size(), forms.size(), forms) != 0)
            return "(no forms) " + m;
        return m.substr(0, m.size() - forms.size());
    }
    return "(accepted)";
}

} // namespace

class TstDiffGate : public QObject {
    Q_OBJECT
private slots:
    void parsesConditions()
    {
        GateCondition c = parseGateCondition("iteration>+3%");
        QVERIFY(c.metric == GateMetric::Iteration);
        QVERIFY(c.relative && !c.orEqual && !c.stage);
        QCOMPARE(c.fraction, 0.03);
        QCOMPARE(c.text, std::string("iteration>+3%"));
        QCOMPARE(c.thresholdText, std::string("+3%"));

        c = parseGateCondition(" stage [2] > 5 % ");
        QVERIFY(c.metric == GateMetric::StageFb);
        QCOMPARE(c.stage, std::optional<int>(2));
        QCOMPARE(c.text, std::string("stage[2]>5%"));
        QCOMPARE(c.thresholdText, std::string("+5%"));

        c = parseGateCondition("stage>=+5%");
        QVERIFY(!c.stage && c.orEqual);

        c = parseGateCondition("bubble.fill_drain>+2ms");
        QVERIFY(c.metric == GateMetric::BubbleCause);
        QVERIFY(c.cause == BubbleCause::FillDrain);
        QVERIFY(!c.relative);
        QCOMPARE(c.thresholdNs, TimeNs(2'000'000));

        QCOMPARE(parseGateCondition("bubble>-500us").thresholdNs, TimeNs(-500'000));
        QVERIFY(parseGateCondition("bubble>-500us").metric == GateMetric::Bubble);
        QCOMPARE(parseGateCondition("stage[1].busy>1.5s").thresholdNs, TimeNs(1'500'000'000));
        QVERIFY(parseGateCondition("stage[1].busy>1.5s").metric == GateMetric::StageBusy);
        QVERIFY(parseGateCondition("stage.forward>250ns").metric == GateMetric::StageForward);
        QCOMPARE(parseGateCondition("stage[0].backward>2\xC2\xB5s").thresholdNs, TimeNs(2'000));
        QCOMPARE(parseGateCondition("iteration>-0.5%").fraction, -0.005);

        const auto list = parseGateConditions("iteration>+3%, stage>+5%,bubble.dp_sync>+1ms");
        QCOMPARE(list.size(), size_t(3));
        QVERIFY(list[2].cause == BubbleCause::DpSync);
    }

    void refusesMalformedConditions_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("message");
        QTest::newRow("no unit") << "iteration>3"
                                 << "'iteration>3' is not a gate condition: the threshold 3 needs a unit: % (of the "
                                    "baseline) or ns, us, ms, s";
        QTest::newRow("less than") << "iteration<+3%"
                                   << "'iteration<+3%' is not a gate condition: the comparison must be > or >= (a gate "
                                      "fails when B's value grows beyond the threshold; a negative threshold asks for "
                                      "an improvement)";
        QTest::newRow("no comparison") << "iteration" << "'iteration' is not a gate condition: no comparison (>)";
        QTest::newRow("two comparisons") << "iteration>>3%"
                                         << "'iteration>>3%' is not a gate condition: more than one comparison";
        QTest::newRow("unknown metric") << "latency>+3%"
                                        << "'latency>+3%' is not a gate condition: 'latency' is not a metric";
        QTest::newRow("unknown cause")
            << "bubble.cosmic>+1ms"
            << "'bubble.cosmic>+1ms' is not a gate condition: 'cosmic' is not a bubble cause (" + causes() + ")";
        QTest::newRow("stage not a number")
            << "stage[x]>+1%" << "'stage[x]>+1%' is not a gate condition: the stage in [] must be a whole number from 0 (got 'x')";
        QTest::newRow("negative stage")
            << "stage[-1]>+1%" << "'stage[-1]>+1%' is not a gate condition: the stage in [] must be a whole number from 0 (got '-1')";
        QTest::newRow("unclosed") << "stage[2>+1%" << "'stage[2>+1%' is not a gate condition: '[' without ']' after stage";
        QTest::newRow("stage part") << "stage[2].idle>+1%"
                                    << "'stage[2].idle>+1%' is not a gate condition: a stage is followed by nothing, "
                                       ".forward, .backward, .fb or .busy (got '.idle')";
        QTest::newRow("bad unit") << "iteration>+3parsecs"
                                  << "'iteration>+3parsecs' is not a gate condition: 'parsecs' is not a unit: give % (of "
                                     "the baseline) or ns, us, ms, s";
        QTest::newRow("exponent") << "iteration>1e3%"
                                  << "'iteration>1e3%' is not a gate condition: 'e3%' is not a unit: give % (of the "
                                     "baseline) or ns, us, ms, s";
        QTest::newRow("no threshold") << "iteration>"
                                      << "'iteration>' is not a gate condition: no threshold after the comparison";
        QTest::newRow("no number") << "iteration>+%"
                                   << "'iteration>+%' is not a gate condition: the threshold must be a number with a "
                                      "unit (got '+%')";
        QTest::newRow("no metric") << ">+3%" << "'>+3%' is not a gate condition: nothing before the comparison";
        QTest::newRow("too large") << "iteration>+2000000%"
                                   << "'iteration>+2000000%' is not a gate condition: the threshold must be at most "
                                      "1,000,000%";
        QTest::newRow("empty item") << "iteration>+3%," << "an empty gate condition";
    }
    void refusesMalformedConditions()
    {
        QFETCH(QString, text);
        QFETCH(QString, message);
        QCOMPARE(QString::fromStdString(refusalOf(text.toStdString())), message);
    }

    void formsNameEveryMetric()
    {
        QCOMPARE(QString::fromStdString(gateConditionForms()),
                 "write METRIC>THRESHOLD (or >=), e.g. iteration>+3%, stage[2]>+5%, stage>+5% (any stage), "
                 "bubble.fill_drain>+2ms; METRIC: iteration, stage or stage[N] (forward+backward per microbatch; "
                 ".forward, .backward or .busy after it), bubble or bubble.CAUSE (" +
                     causes() + "); THRESHOLD: a number with % (of the baseline) or ns, us, ms, s");
        QVERIFY(causes().startsWith("fill_drain, wait_neighbor, p2p_transfer, dp_sync, "));
    }

    void iteration()
    {
        const DiffResult d = sample();
        GateResult g = gate(d, "iteration>+3%");
        QVERIFY(g.refusal.empty());
        QCOMPARE(lines(g), (std::vector<std::string>{"iteration +4.2% (12.310 ms -> 12.830 ms) exceeds +3%"}));
        QCOMPARE(g.regressions[0].subject, std::string("iteration"));
        QCOMPARE(g.regressions[0].aNs, TimeNs(12'310'000));
        QCOMPARE(g.regressions[0].bNs, TimeNs(12'830'000));
        QVERIFY(!g.passed());
        // Below the threshold: passed.
        g = gate(d, "iteration>+5%");
        QVERIFY(g.passed());
        QVERIFY(g.regressions.empty());
        // An absolute threshold: +520 µs.
        QCOMPARE(lines(gate(d, "iteration>+0.5ms")),
                 (std::vector<std::string>{"iteration +520.000 µs (12.310 ms -> 12.830 ms) exceeds +0.5ms"}));
        QVERIFY(gate(d, "iteration>+520us").passed());
        QCOMPARE(lines(gate(d, "iteration>=+520us")),
                 (std::vector<std::string>{"iteration +520.000 µs (12.310 ms -> 12.830 ms) reaches +520us"}));
        // A negative threshold asks for an improvement of at least that much.
        QCOMPARE(lines(gate(d, "iteration>-1%")),
                 (std::vector<std::string>{"iteration +4.2% (12.310 ms -> 12.830 ms) exceeds -1%"}));
    }

    // Exactly at the threshold is not beyond it; just beyond shows enough decimals to say so.
    void atTheThreshold()
    {
        DiffResult d = sample();
        d.iterationNs = {100'000'000, 103'000'000};
        QVERIFY(gate(d, "iteration>+3%").passed());
        QCOMPARE(lines(gate(d, "iteration>=3%")),
                 (std::vector<std::string>{"iteration +3.0% (100.000 ms -> 103.000 ms) reaches +3%"}));
        d.iterationNs = {100'000'000, 103'040'000};
        QCOMPARE(lines(gate(d, "iteration>+3%")),
                 (std::vector<std::string>{"iteration +3.04% (100.000 ms -> 103.040 ms) exceeds +3%"}));
    }

    void stages()
    {
        const DiffResult d = sample();
        // Any stage: one line per stage beyond, in stage order.
        QCOMPARE(lines(gate(d, "stage>+5%")),
                 (std::vector<std::string>{
                     "stage[1] +6.0% (5.000 ms -> 5.300 ms forward+backward per microbatch) exceeds +5%",
                     "stage[3] +12.0% (5.000 ms -> 5.600 ms forward+backward per microbatch) exceeds +5%"}));
        QVERIFY(gate(d, "stage[2]>+5%").passed());
        QCOMPARE(lines(gate(d, "stage[3].forward>+100us")),
                 (std::vector<std::string>{"stage[3].forward +250.000 µs (2.000 ms -> 2.250 ms per microbatch) exceeds +100us"}));
        const GateResult g = gate(d, "stage[1].backward>+5%");
        QCOMPARE(lines(g), (std::vector<std::string>{"stage[1].backward +6.7% (3.000 ms -> 3.200 ms per microbatch) exceeds +5%"}));
        QCOMPARE(g.regressions[0].subject, std::string("stage[1].backward"));
        QCOMPARE(g.regressions[0].stage, std::optional<int>(1));
        QVERIFY(gate(d, "stage.busy>+0ns").passed());
    }

    void bubbles()
    {
        const DiffResult d = sample();
        QCOMPARE(lines(gate(d, "bubble.fill_drain>+2ms")),
                 (std::vector<std::string>{"bubble.fill_drain +2.500 ms (10.000 ms -> 12.500 ms per rank) exceeds +2ms"}));
        QVERIFY(gate(d, "bubble.fill_drain>+3ms").passed());
        // All causes: 14.000 -> 16.800 ms (+20%).
        QCOMPARE(lines(gate(d, "bubble>+10%")),
                 (std::vector<std::string>{"bubble +20.0% (14.000 ms -> 16.800 ms per rank) exceeds +10%"}));
        // From nothing, any growth is beyond a percentage; none is not.
        QCOMPARE(lines(gate(d, "bubble.host_bound>+10%")),
                 (std::vector<std::string>{"bubble.host_bound up from 0 (0 ns -> 300.000 µs per rank) exceeds +10%"}));
        QVERIFY(!gate(d, "bubble.host_bound>+10%").regressions[0].change);
        QVERIFY(gate(d, "bubble.dp_sync>+10%").passed());
        QVERIFY(gate(d, "bubble.wait_neighbor>+0%").passed());
    }

    void severalConditionsEachLine()
    {
        const GateResult g = gate(sample(), "iteration>+3%,stage[3]>+10%,bubble.fill_drain>+2ms,stage[0]>+1%");
        QCOMPARE(g.conditions,
                 (std::vector<std::string>{"iteration>+3%", "stage[3]>+10%", "bubble.fill_drain>+2ms", "stage[0]>+1%"}));
        QCOMPARE(lines(g), (std::vector<std::string>{
                               "iteration +4.2% (12.310 ms -> 12.830 ms) exceeds +3%",
                               "stage[3] +12.0% (5.000 ms -> 5.600 ms forward+backward per microbatch) exceeds +10%",
                               "bubble.fill_drain +2.500 ms (10.000 ms -> 12.500 ms per rank) exceeds +2ms"}));
    }

    // Runs that cannot be gated: refused with the reason.
    void refusesWhatCannotBeCompared()
    {
        DiffResult d = sample();
        d.b.pp = 8;
        QCOMPARE(gate(d, "iteration>+3%").refusal,
                 std::string("A has 4 stages and B 8; a baseline gates runs of the same pipeline (save a new one for "
                             "this job)"));
        d = sample();
        d.b.pipeline = false;
        QCOMPARE(gate(d, "iteration>+3%").refusal,
                 std::string("A has a pipeline of 4 stages and B none; a baseline gates runs of the same pipeline (save "
                             "a new one for this job)"));
        d = sample();
        d.iterationNs.b.reset();
        QCOMPARE(gate(d, "iteration>+3%").refusal,
                 std::string("B (b.pipescope) has no iteration to compare; profile at least one whole iteration"));
        // The whole trace, where nothing marks iterations, is not an iteration to gate on.
        d = sample();
        QCOMPARE(evaluateGate(d, parseGateConditions("iteration>+3%"), GateRuns{false, true}).refusal,
                 std::string("B (b.pipescope) shows no iterations (no ProfilerStep#N or step ranges, no repeating "
                             "kernels), so its whole trace would be compared; profile with iteration markers, or name "
                             "them with --iteration-range"));
        AnalysisResult marked, whole;
        marked.iterations = {Iteration{0, "ProfilerStep#0", IterationSource::ProfilerStep, 0, 10, {}},
                             Iteration{1, "ProfilerStep#1", IterationSource::ProfilerStep, 10, 20, {}}};
        marked.selectedIteration = 1;
        whole.iterations = {Iteration{0, "", IterationSource::WholeTrace, 0, 20, {}}};
        whole.selectedIteration = 0;
        QVERIFY(!gateRuns(marked, whole).aWholeTrace && gateRuns(marked, whole).bWholeTrace);
        QVERIFY(gateRuns(whole, marked).aWholeTrace && !gateRuns(whole, marked).bWholeTrace);
        d = sample();
        QCOMPARE(gate(d, "stage[7]>+5%").refusal,
                 std::string("stage[7]>+5%: there is no stage 7 (the runs have 4 stages, 0 to 3)"));
        d.stages[2].fbNs.b.reset();
        QCOMPARE(gate(d, "stage>+5%").refusal,
                 std::string("stage>+5%: B's traces do not show stage 2's forward and backward time per microbatch"));
        d = sample();
        d.idleByCause[size_t(BubbleCause::DpSync)].a.reset();
        // What could be checked is still listed beside the refusal.
        const GateResult g = gate(d, "iteration>+3%,bubble.dp_sync>+1ms");
        QCOMPARE(g.refusal, std::string("bubble.dp_sync>+1ms: A has no idle time measured in its iteration"));
        QCOMPARE(lines(g), (std::vector<std::string>{"iteration +4.2% (12.310 ms -> 12.830 ms) exceeds +3%"}));
        QVERIFY(!g.passed());
        // No conditions: nothing to refuse.
        d.b.pp = 2;
        QVERIFY(evaluateGate(d, {}).passed());
    }

    void json()
    {
        const nlohmann::json j = gateToJson(gate(sample(), "iteration>+3%,stage[2]>+5%"));
        QCOMPARE(j.dump(),
                 std::string(R"({"conditions":["iteration>+3%","stage[2]>+5%"],"passed":false,"refusal":null,)"
                             R"("regressions":[{"a_ns":12310000,"b_ns":12830000,"change":0.04224207961007311,)"
                             R"("condition":"iteration>+3%","delta_ns":520000,)"
                             R"("line":"iteration +4.2% (12.310 ms -> 12.830 ms) exceeds +3%","stage":null,)"
                             R"("subject":"iteration"}]})"));
    }
};

QTEST_GUILESS_MAIN(TstDiffGate)
#include "tst_diff_gate.moc"
