// Blocking exchanges (docs/whatif.md, "Exchanges"): the batches Megatron-LM
// posts, the replay that waits for them, the analysis that tells them from
// sends that overlap compute, and the replay held against an independent
// model of Megatron's 1F1B and interleaved loops (tests/common/MegatronJob.h).
#include "MegatronJob.h"
#include "SyntheticTrace.h"
#include "TestSupport.h"
#include "WhatIfTestSupport.h"
#include "analysis/Analysis.h"
#include "analysis/MeasuredPipeline.h"
#include "model/Exchanges.h"
#include "report/Report.h"
#include "store/Store.h"
#include "whatif/WhatIf.h"

#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

using namespace pipescope;
using namespace pipescope::whatif;
using pipescope::test::MegatronSpec;
using pipescope::test::megatronTrace;

namespace {

constexpr TimeNs kMs = 1'000'000;

// "after-step[op op ...]" per batch; an op is s/r, a (activation) or g
// (gradient), and the microbatch: "1[sa1 rg0]".
std::string planText(const Schedule& s, const ExchangePlan& plan, int rank)
{
    std::string out;
    for (const ExchangeGroup& g : plan.ranks[size_t(rank)]) {
        if (!out.empty())
            out += ' ';
        out += std::to_string(g.afterStep) + "[";
        for (size_t i = 0; i < g.ops.size(); ++i) {
            const int m = g.ops[i].message;
            out += (i ? " " : "") + std::string(g.ops[i].send ? "s" : "r") + ((m & 1) ? "g" : "a") +
                   std::to_string((m / 2) % s.microbatches);
            if (const int w = waitStep(g, g.ops[i]); w != g.afterStep + 1)
                out += ">" + std::to_string(w); // waited for later than the next step
        }
        out += "]";
    }
    return out;
}

struct Calibrated {
    AnalysisResult analysis;
    MeasuredPipeline measured;
    CostModel model;
};

Calibrated calibrate(const Trace& t, int layers)
{
    Calibrated c;
    c.analysis = analyze(t);
    c.measured = measurePipeline(t, c.analysis);
    CalibrateOptions o;
    o.measured.layers = layers;
    c.model = whatif::calibrate(t, c.analysis, o);
    return c;
}

double relErr(TimeNs predicted, TimeNs measured)
{
    return std::abs(static_cast<double>(predicted - measured)) / static_cast<double>(measured);
}

} // namespace

class TestExchanges : public QObject {
    Q_OBJECT
private slots:
    void megatronOneFOneBPlan();
    void megatronInterleavedPlan();
    void megatronOverlappedPlan();
    void sharedLinks();
    void otherSchedulesBatchPerStep();
    void blockingSenderWaits();
    void overlappingSendsAreNotBlocking();
    void megatronReplay_data();
    void megatronReplay();
    void megatronWhatIf_data();
    void megatronWhatIf();
    void emittedBlockingJob();
    void reportSaysBlocking();
    void exchangesOptionChecked();
};

// 1F1B on two ranks, three microbatches: recv/send around warm-up
// forwards, send_forward_recv_backward and send_backward_recv_forward in
// the steady state, recv/send around cool-down backwards.
void TestExchanges::megatronOneFOneBPlan()
{
    const Schedule s = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 3);
    const ExchangePlan plan = exchangePlan(s);
    QCOMPARE(plan.messages, 6);
    // Rank 0 runs F0 F1 B0 F2 B1 B2.
    QCOMPARE(planText(s, plan, 0), std::string("0[sa0] 1[sa1 rg0] 3[sa2 rg1] 4[rg2]"));
    // Rank 1 runs F0 B0 F1 B1 F2 B2.
    QCOMPARE(planText(s, plan, 1), std::string("-1[ra0] 1[sg0 ra1] 3[sg1 ra2] 5[sg2]"));
}

// Interleaved, p = 2, v = 2, m = 4: Megatron's send_forward_recv_forward in
// the warm-up, the four-way batch after its last forward, one batch per
// forward-backward pair in the steady state, send_backward_recv_backward after.
void TestExchanges::megatronInterleavedPlan()
{
    const Schedule s = makeSchedule(ScheduleKind::Interleaved1F1B, 2, 2, 4);
    const ExchangePlan plan = exchangePlan(s);
    const std::string r1 = planText(s, plan, 1);
    // Every batch after a pair holds both outputs and the next inputs.
    QVERIFY2(r1.rfind("-1[ra0]", 0) == 0, r1.c_str());
    for (const ExchangeGroup& g : plan.ranks[1])
        QVERIFY(!g.ops.empty());
    // Each message is sent once and received once over the whole pipeline.
    std::vector<int> sends(size_t(plan.messages), 0), recvs(size_t(plan.messages), 0);
    for (const auto& rank : plan.ranks)
        for (const ExchangeGroup& g : rank)
            for (const ExchangeOp& op : g.ops)
                ++(op.send ? sends : recvs)[size_t(op.message)];
    int used = 0;
    for (int m = 0; m < plan.messages; ++m) {
        QCOMPARE(sends[size_t(m)], recvs[size_t(m)]);
        QVERIFY(sends[size_t(m)] <= 1);
        used += sends[size_t(m)];
    }
    // 3 boundaries x 4 microbatches x 2 directions, all between ranks.
    QCOMPARE(used, 24);
    // In the steady state a batch carries two sends (a forward's output and a
    // backward's gradient) on the ranks where both leave the rank.
    bool fourWay = false;
    for (const ExchangeGroup& g : plan.ranks[0]) {
        int sendsIn = 0;
        for (const ExchangeOp& op : g.ops)
            sendsIn += op.send ? 1 : 0;
        fourWay = fourWay || (sendsIn == 2 && g.ops.size() >= 3);
    }
    QVERIFY(fourWay);
}

// Interleaved, p = 2, v = 2, m = 4, as Megatron-LM runs it with
// overlap_p2p_comm: rank 0 runs F(c0,0) F(c0,1) F(c1,0) F(c1,1) | F(c0,2)
// B(c1,0) F(c0,3) B(c1,1) F(c1,2) B(c0,0) F(c1,3) B(c0,1) | B(c1,2) B(c1,3)
// B(c0,2) B(c0,3). Warm-up and cool-down exchanges hold the next step; after
// the warm-up the first backward's gradient is received without blocking;
// in the steady state a receive is waited for before the step that needs it
// and a send once the rank's next send that way is posted (">N": before step N).
void TestExchanges::megatronOverlappedPlan()
{
    const Schedule s = makeSchedule(ScheduleKind::Interleaved1F1B, 2, 2, 4);
    const ExchangePlan plan = megatronExchangePlan(s);
    QCOMPARE(planText(s, plan, 0),
             std::string("0[sa0] 1[sa1 ra0] 2[sa0 ra1] 3[sa1] 3[rg0>5] 4[sa2>7] 5[sg0>8 rg1>7] 6[sa3>9 ra2>8] "
                         "7[sg1>10 rg0>9] 8[sa2>11 ra3>10] 9[rg1>11] 10[sa3>16] 11[rg2] 12[sg2 rg3] 13[sg3 rg2] "
                         "14[rg3]"));
    // Each message sent once and received once, every send waited for.
    std::vector<int> sends(size_t(plan.messages), 0), recvs(size_t(plan.messages), 0);
    for (const auto& rank : plan.ranks)
        for (const ExchangeGroup& g : rank)
            for (const ExchangeOp& op : g.ops) {
                ++(op.send ? sends : recvs)[size_t(op.message)];
                QVERIFY(waitStep(g, op) > g.afterStep);
            }
    QCOMPARE(sends, recvs);
    // 1F1B keeps its blocking batches.
    const Schedule one = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 3);
    QCOMPARE(planText(one, megatronExchangePlan(one), 0), planText(one, exchangePlan(one), 0));
}

// 1F1B, p = 2, m = 2, forwards 10 ms, backwards 20 ms, 5 ms per transfer.
// Rank 0 runs F0 F1 B0 B1, rank 1 F0 B0 F1 B1. Rank 0: F0 0-10, act0
// 10-15, F1 15-25; rank 1: F0 15-25, B0 25-45. Then act1 (posted 25) and
// grad0 (posted 45) move together from 45: 50 over separate links, 55 when
// they share one medium at half speed each. Rank 0's B0 follows, rank 1's F1
// 50/55-60/65, B1 to 80/85, grad1 alone to 85/90, rank 0's B1 to 105/110.
void TestExchanges::sharedLinks()
{
    const Schedule s = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 2);
    ReplayCosts c;
    c.stages = {StageCost{10 * kMs, 20 * kMs, 0, 0}, StageCost{10 * kMs, 20 * kMs, 0, 0}};
    c.boundaryBytes = {0};
    c.p2pLatencyNs = 5 * kMs;
    c.megatronExchanges = true;
    const ReplayResult separate = Replay().run(s, c);
    QVERIFY(separate.blockingExchanges);
    QCOMPARE(separate.ranks[0].actions[2].start, 50 * kMs);
    QCOMPARE(separate.ranks[1].actions[2].start, 50 * kMs);
    QCOMPARE(separate.ranks[0].actions[3].start, 85 * kMs);
    QCOMPARE(separate.ranks[0].computeEnd, 105 * kMs);
    c.sharedLinks = true;
    const ReplayResult shared = Replay().run(s, c);
    QCOMPARE(shared.ranks[0].actions[2].start, 55 * kMs);
    QCOMPARE(shared.ranks[1].actions[2].start, 55 * kMs);
    QCOMPARE(shared.ranks[0].actions[3].start, 90 * kMs);
    QCOMPARE(shared.ranks[0].computeEnd, 110 * kMs);
    // The transfers as replayed: act1 and grad0 from 45, landing together.
    int together = 0;
    for (const TimedTransfer& t : shared.transfers)
        if (t.start == 45 * kMs && t.end == 55 * kMs)
            ++together;
    QCOMPARE(together, 2);
}

void TestExchanges::otherSchedulesBatchPerStep()
{
    // GPipe on two ranks, two microbatches: after each step its output and the next input.
    const Schedule s = makeSchedule(ScheduleKind::GPipe, 2, 1, 2);
    const ExchangePlan plan = exchangePlan(s);
    QCOMPARE(planText(s, plan, 0), std::string("0[sa0] 1[sa1 rg0] 2[rg1]"));
    QCOMPARE(planText(s, plan, 1), std::string("-1[ra0] 0[ra1] 2[sg0] 3[sg1]"));
}

// GPipe, two ranks, three microbatches, rank 1 three times slower. Rank 0's
// send of microbatch 1 waits until rank 1 posts its receive (after its first
// forward, at 4 ms), so its third forward starts at 4 ms instead of 2 ms, plus
// the exchange gap. The iteration is rank 1's either way.
void TestExchanges::blockingSenderWaits()
{
    const Schedule s = makeSchedule(ScheduleKind::GPipe, 2, 1, 3);
    ReplayCosts c;
    c.stages = {StageCost{1 * kMs, 1 * kMs, 0, 0}, StageCost{3 * kMs, 3 * kMs, 0, 0}};
    c.boundaryBytes = {0};
    c.eagerBytes = 0;
    c.p2pLatencyNs = 0;
    const ReplayResult async = Replay().run(s, c);
    QCOMPARE(async.ranks[0].actions[2].start, 2 * kMs);
    c.blockingExchanges = true;
    QVERIFY(!async.blockingExchanges);
    const ReplayResult blocking = Replay().run(s, c);
    QVERIFY(blocking.blockingExchanges);
    QCOMPARE(blocking.ranks[0].actions[2].start, 4 * kMs);
    QCOMPARE(blocking.iterationNs, async.iterationNs);
    c.exchangeGapNs = 100'000;
    const ReplayResult gapped = Replay().run(s, c);
    // F1 ends at 2.1 ms; rank 1 posts at 4.1 ms; then the gap.
    QCOMPARE(gapped.ranks[0].actions[2].start, 4 * kMs + 200'000);
    // Rank 1's first forward follows its receive's batch (done at 1 ms).
    QCOMPARE(gapped.ranks[1].actions[0].start, 1 * kMs + 100'000);

    // A message that fits the receiver's buffer does not wait for it.
    c.exchangeGapNs = 0;
    c.eagerBytes = 1;
    const ReplayResult eager = Replay().run(s, c);
    QCOMPARE(eager.ranks[0].actions[2].start, 2 * kMs);

    // The same Replay object runs both ways in turn (the plan is kept, the state is not).
    Replay re;
    c.eagerBytes = 0;
    c.blockingExchanges = true;
    QCOMPARE(re.run(s, c).ranks[0].actions[2].start, 4 * kMs);
    c.blockingExchanges = false;
    QCOMPARE(re.run(s, c).ranks[0].actions[2].start, 2 * kMs);
}

// pipescope's own simulated traces overlap sends with the next step; the
// analysis must not call them blocking.
void TestExchanges::overlappingSendsAreNotBlocking()
{
    pipescope::test::PipelineSpec spec;
    spec.schedule = "gpipe";
    spec.annotate = true;
    spec.commNs = 50'000;
    spec.slowdown[{0, 1}] = 3.0;
    const Trace t = pipescope::test::pipelineTrace(spec).trace;
    const MeasuredPipeline mp = measurePipeline(t, analyze(t));
    QVERIFY(!mp.blockingExchanges);
    QCOMPARE(mp.exchangeGapNs, TimeNs(0));
}

void TestExchanges::megatronReplay_data()
{
    QTest::addColumn<int>("v");
    QTest::addColumn<int>("microbatches");
    QTest::newRow("1f1b m8") << 1 << 8;
    QTest::newRow("1f1b m16") << 1 << 16;
    QTest::newRow("interleaved v2 m8") << 2 << 8;
    QTest::newRow("interleaved v2 m16") << 2 << 16;
    QTest::newRow("interleaved v2 m4 (all warm-up)") << 2 << 4;
}

// Replaying the measured configuration of a Megatron job reproduces its
// iteration within 2% (the target for interleaved jobs).
void TestExchanges::megatronReplay()
{
    QFETCH(int, v);
    QFETCH(int, microbatches);
    MegatronSpec spec;
    spec.v = v;
    spec.microbatches = microbatches;
    const auto run = megatronTrace(spec);
    const Calibrated c = calibrate(run.trace, spec.layers);
    QCOMPARE(c.analysis.pipeline.pp, 4);
    QCOMPARE(c.analysis.pipeline.chunks, v);
    QCOMPARE(c.analysis.pipeline.microbatches, microbatches);
    QVERIFY(c.measured.blockingExchanges);
    QVERIFY(c.model.blockingExchanges); // and they reproduce the job better than overlapping sends
    // Layers come from the job's pipescope/layer ranges: 16 blocks, the embedding and the head.
    QCOMPARE(std::string(toString(c.model.layerSource)), std::string("trace"));
    QCOMPARE(c.model.layerCount(), 16);
    // The host's synchronize and launch after each batch: 30 us in the job.
    QVERIFY2(std::abs(static_cast<double>(c.measured.exchangeGapNs - spec.syncNs)) < 2'000,
             qPrintable(QString::number(c.measured.exchangeGapNs)));
    const Prediction p = predict(c.model, measuredScenario(c.model));
    const double err = relErr(p.iterationNs(), *c.model.measuredIterationNs);
    // Without the batches the replay is several percent short.
    CostModel overlapping = c.model;
    overlapping.blockingExchanges = false;
    const double errOverlapping = relErr(predict(overlapping, measuredScenario(overlapping)).iterationNs(),
                                         *c.model.measuredIterationNs);
    qInfo("measured %.3f ms, replayed %.3f ms (%.2f%%; %.2f%% with sends that overlap compute)",
          double(*c.model.measuredIterationNs) / 1e6, double(p.iterationNs()) / 1e6, err * 100, errOverlapping * 100);
    QVERIFY2(err < 0.02, qPrintable(QString::number(err)));
}

void TestExchanges::megatronWhatIf_data()
{
    QTest::addColumn<int>("fromV");
    QTest::addColumn<int>("toV");
    QTest::addColumn<int>("microbatches");
    QTest::newRow("1f1b to interleaved, m8") << 1 << 2 << 8;
    QTest::newRow("interleaved to 1f1b, m8") << 2 << 1 << 8;
    QTest::newRow("1f1b to interleaved, m16") << 1 << 2 << 16;
    QTest::newRow("interleaved v2 to v4, m8") << 2 << 4 << 8;
}

// A what-if between 1F1B and interleaved predicts the other Megatron run
// within 5% (the target).
void TestExchanges::megatronWhatIf()
{
    QFETCH(int, fromV);
    QFETCH(int, toV);
    QFETCH(int, microbatches);
    MegatronSpec spec;
    spec.microbatches = microbatches;
    spec.v = fromV;
    const Calibrated from = calibrate(megatronTrace(spec).trace, spec.layers);
    spec.v = toV;
    const Calibrated to = calibrate(megatronTrace(spec).trace, spec.layers);
    ScenarioChanges ch;
    ch.schedule = toV > 1 ? "interleaved-1f1b" : "1f1b";
    ch.v = toV;
    const Prediction p = predict(from.model, applyChanges(measuredScenario(from.model), ch));
    const double err = relErr(p.iterationNs(), *to.model.measuredIterationNs);
    qInfo("from v %d: predicted %.3f ms for v %d, measured %.3f ms (%.2f%%)", fromV, double(p.iterationNs()) / 1e6, toV,
          double(*to.model.measuredIterationNs) / 1e6, err * 100);
    QVERIFY2(err < 0.05, qPrintable(QString::number(err)));
}

// simulate --exchanges blocking writes a job whose compute waits for its
// batches; the importer and the analysis read it back as blocking, and the
// replay of the measured configuration reproduces it.
void TestExchanges::emittedBlockingJob()
{
    using nlohmann::json;
    QTemporaryDir dir;
    const QString model = QStringLiteral(PIPESCOPE_SOURCE_DIR "/resources/models/gpt-32l.json");
    // Interleaved: a rank receives the next backward's gradient a step early,
    // before the next forward; the step ranges do not name their chunk.
    for (const QString& schedule : {QStringLiteral("1f1b"), QStringLiteral("interleaved")}) {
        const QString job = dir.filePath("job-" + schedule);
        auto r = pipescope::test::runCli({"simulate", model, "--pp", "4", "--microbatches", "8", "--schedule", schedule,
                                          "--exchanges", "blocking", "--emit-kineto", job, "--iterations", "3"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        r = pipescope::test::runCli({"import", job, "-o", job + ".pipescope"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        {
            // Megatron's batches are coalesced: one SendRecv kernel per batch, its
            // sends and receives (from the nccl:send / nccl:recv ops) all on it.
            Store store((job + ".pipescope").toStdString());
            auto one = [&](const std::string& sql) {
                auto st = store.database().prepare(sql);
                const int64_t v = st.step() ? st.int64(0) : -1;
                st.reset();
                return v;
            };
            QCOMPARE(one("SELECT COUNT(*) FROM nccl_ops WHERE kind NOT IN ('Send', 'Recv')"), int64_t(0));
            QVERIFY(one("SELECT COUNT(*) FROM (SELECT activity_id FROM nccl_ops GROUP BY activity_id HAVING COUNT(*) >= 2)") > 0);
            QCOMPARE(one("SELECT COUNT(*) FROM nccl_ops WHERE peer IS NULL"), int64_t(0));
        }
        r = pipescope::test::runCli({"whatif", job + ".pipescope", "--json"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const json doc = json::parse(r.out.toStdString());
        QVERIFY(doc["cost_model"]["exchanges"]["blocking"].get<bool>());
        QVERIFY(doc["predictions"][0]["blocking_exchanges"].get<bool>());
        const auto& first = doc["predictions"][0];
        const double predicted = first["iteration_ns"].get<double>();
        const double measured = first["measured_iteration_ns"].get<double>();
        QVERIFY2(std::abs(predicted - measured) / measured < 0.02,
                 qPrintable(QStringLiteral("%1: predicted %2, measured %3").arg(schedule).arg(predicted).arg(measured)));
        r = pipescope::test::runCli({"whatif", job + ".pipescope"});
        QVERIFY2(r.out.contains("exchanges: blocking batches"), qPrintable(r.out));
    }
    // The default job overlaps its sends, and the analysis says so.
    const QString job = dir.filePath("overlapped");
    QCOMPARE(pipescope::test::runCli({"simulate", model, "--pp", "4", "--emit-kineto", job}).exitCode, 0);
    QCOMPARE(pipescope::test::runCli({"import", job, "-o", job + ".pipescope"}).exitCode, 0);
    const auto r = pipescope::test::runCli({"whatif", job + ".pipescope", "--json"});
    QVERIFY(!json::parse(r.out.toStdString())["cost_model"]["exchanges"]["blocking"].get<bool>());
}

// The report's what-if section says when it replays blocking exchanges, and
// says nothing for a job whose sends overlap compute.
void TestExchanges::reportSaysBlocking()
{
    MegatronSpec spec;
    spec.v = 2;
    const std::string html = report::renderReport(megatronTrace(spec).trace);
    const size_t at = html.find("<p id=\"whatif-exchanges\">");
    QVERIFY(at != std::string::npos);
    const std::string line = html.substr(at, html.find("</p>", at) - at);
    QVERIFY2(line.find("Exchanges: blocking batches, as Megatron-LM runs them") != std::string::npos, line.c_str());
    QVERIFY2(line.find("30.000 µs from a batch to the next step") != std::string::npos, line.c_str());

    pipescope::test::PipelineSpec overlapping;
    overlapping.annotate = true;
    overlapping.commNs = 50'000;
    QVERIFY(report::renderReport(pipescope::test::pipelineTrace(overlapping).trace).find("whatif-exchanges") ==
            std::string::npos);
}

void TestExchanges::exchangesOptionChecked()
{
    const QString model = QStringLiteral(PIPESCOPE_SOURCE_DIR "/resources/models/gpt-32l.json");
    const auto r = pipescope::test::runCli({"simulate", model, "--exchanges", "batched"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--exchanges: unknown exchange mode 'batched'; choose trace, blocking, overlapped or megatron"),
             qPrintable(r.err));
    // Refused before any work: the store is not even opened.
    const auto w = pipescope::test::runCli({"whatif", "/nonexistent/job.pipescope", "--exchanges", "batched"});
    QCOMPARE(w.exitCode, 1);
    QVERIFY2(w.err.contains("--exchanges: unknown exchange mode 'batched'") && !w.err.contains("nonexistent"),
             qPrintable(w.err));
}

QTEST_GUILESS_MAIN(TestExchanges)
#include "tst_exchanges.moc"
