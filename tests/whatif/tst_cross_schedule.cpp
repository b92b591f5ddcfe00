// What-ifs across schedules, held against an independent model of the other
// run (tests/common/MegatronJob.h: Megatron-LM's 1F1B and interleaved loops,
// torch.distributed.pipelining's GPipe; it shares no code with the replay):
// calibrate on one job, predict another schedule, partition or chunk count,
// and compare with that job run by the independent model. Balanced and
// imbalanced stages, one and two data-parallel replicas, one replica slower.
#include "MegatronJob.h"
#include "TestSupport.h"
#include "analysis/Analysis.h"
#include "whatif/WhatIf.h"

#include <QtTest>

#include <cmath>
#include <string>

using namespace pipescope;
using namespace pipescope::whatif;
using pipescope::test::MegatronSpec;
using pipescope::test::megatronTrace;

namespace {

struct Job {
    std::string schedule = "1f1b"; // 1f1b, interleaved-1f1b, gpipe or zb-h1
    int v = 1;
    std::vector<int> chunkLayers;  // empty: even
    bool overlapP2p = false;       // interleaved: Megatron's overlap_p2p_comm (its default there)
    bool layerRanges = true;       // false: no per-layer ranges in the trace (costs from --layers alone)
    TimeNs lossNs = 300'000;       // the output layer and loss (a layer's forward is 400 us)
};

MegatronSpec specFor(const MegatronSpec& base, const Job& j)
{
    MegatronSpec s = base;
    s.v = j.v;
    s.gpipe = j.schedule == "gpipe";
    s.zeroBubble = j.schedule == "zb-h1";
    s.overlapP2p = j.overlapP2p;
    s.chunkLayers = j.chunkLayers;
    s.layerRanges = j.layerRanges;
    s.lossNs = j.lossNs;
    return s;
}

// First layer of each virtual stage after the first.
std::vector<int> boundariesOf(const std::vector<int>& chunkLayers)
{
    std::vector<int> b;
    int at = 0;
    for (size_t i = 0; i + 1 < chunkLayers.size(); ++i)
        b.push_back(at += chunkLayers[i]);
    return b;
}

CostModel calibrated(const Trace& t, int layers, const std::vector<int>& measuredBoundaries = {})
{
    const AnalysisResult a = analyze(t);
    CalibrateOptions o;
    o.measured.layers = layers;
    o.measured.measuredBoundaries = measuredBoundaries;
    return calibrate(t, a, o);
}

} // namespace

Q_DECLARE_METATYPE(Job)

class TestCrossSchedule : public QObject {
    Q_OBJECT
private slots:
    void predictsTheOtherRun_data();
    void predictsTheOtherRun();
    void replicasWithTheirOwnData_data();
    void replicasWithTheirOwnData();
};

void TestCrossSchedule::predictsTheOtherRun_data()
{
    QTest::addColumn<int>("layers");
    QTest::addColumn<int>("dp");
    QTest::addColumn<int>("slowRank"); // -1: none; else 10% slower
    QTest::addColumn<Job>("from");
    QTest::addColumn<Job>("to");
    const Job oneF{"1f1b", 1, {}}, gpipe{"gpipe", 1, {}}, v2{"interleaved-1f1b", 2, {}}, v4{"interleaved-1f1b", 4, {}};
    QTest::newRow("1f1b to gpipe") << 16 << 1 << -1 << oneF << gpipe;
    QTest::newRow("gpipe to 1f1b") << 16 << 1 << -1 << gpipe << oneF;
    // From torch's schedules, whose sends overlap compute, to Megatron's
    // interleaved with overlap_p2p_comm.
    const Job v2overlap{"interleaved-1f1b", 2, {}, true};
    QTest::newRow("gpipe to interleaved v2 (overlapped)") << 16 << 1 << -1 << gpipe << v2overlap;
    QTest::newRow("1f1b to interleaved v4") << 16 << 1 << -1 << oneF << v4;
    QTest::newRow("interleaved v4 to gpipe") << 16 << 1 << -1 << v4 << gpipe;
    // 18 layers 5/4/4/5 on two replicas, replica 1's stage 1 10% slower,
    // to interleaved with 3/3/2/2/2/2/2/2 and back.
    const Job uneven1f{"1f1b", 1, {5, 4, 4, 5}}, unevenGpipe{"gpipe", 1, {5, 4, 4, 5}};
    const Job uneven2{"interleaved-1f1b", 2, {3, 3, 2, 2, 2, 2, 2, 2}};
    QTest::newRow("imbalanced dp2 slow: 1f1b to interleaved v2") << 18 << 2 << 5 << uneven1f << uneven2;
    QTest::newRow("imbalanced dp2 slow: interleaved v2 to 1f1b") << 18 << 2 << 5 << uneven2 << uneven1f;
    QTest::newRow("imbalanced dp2 slow: 1f1b to gpipe") << 18 << 2 << 5 << uneven1f << unevenGpipe;
    const Job zb{"zb-h1", 1, {}}, unevenZb{"zb-h1", 1, {5, 4, 4, 5}};
    QTest::newRow("1f1b to zb-h1") << 16 << 1 << -1 << oneF << zb;
    QTest::newRow("zb-h1 to 1f1b") << 16 << 1 << -1 << zb << oneF;
    QTest::newRow("zb-h1 to interleaved v2 (overlapped)") << 16 << 1 << -1 << zb << v2overlap;
    QTest::newRow("interleaved v2 (overlapped) to zb-h1") << 16 << 1 << -1 << v2overlap << zb;
    const Job v4overlap{"interleaved-1f1b", 4, {}, true};
    QTest::newRow("interleaved v2 to v4 (both overlapped)") << 16 << 1 << -1 << v2overlap << v4overlap;
    QTest::newRow("interleaved v2 (overlapped) to 1f1b") << 16 << 1 << -1 << v2overlap << oneF;
    QTest::newRow("gpipe to zb-h1") << 16 << 1 << -1 << gpipe << zb;
    QTest::newRow("imbalanced dp2 slow: 1f1b to zb-h1") << 18 << 2 << 5 << uneven1f << unevenZb;
    const Job uneven2overlap{"interleaved-1f1b", 2, {3, 3, 2, 2, 2, 2, 2, 2}, true};
    QTest::newRow("imbalanced dp2 slow: zb-h1 to interleaved v2 (overlapped)") << 18 << 2 << 5 << unevenZb << uneven2overlap;
    QTest::newRow("imbalanced dp1: gpipe to 1f1b") << 18 << 1 << -1 << unevenGpipe << uneven1f;
    // No layer ranges, and a head and loss as heavy as 2.25 layers: the first
    // and last stages' extras estimated from the interior stages' per-layer time.
    const Job bareHeavy1f{"1f1b", 1, {5, 4, 4, 5}, false, false, 900'000};
    const Job bareHeavy2{"interleaved-1f1b", 2, {3, 3, 2, 2, 2, 2, 2, 2}, false, false, 900'000};
    QTest::newRow("no layer ranges, heavy head, dp2: 1f1b to interleaved v2") << 18 << 2 << -1 << bareHeavy1f << bareHeavy2;
    const Job bareHeavyGpipe{"gpipe", 1, {5, 4, 4, 5}, false, false, 900'000};
    QTest::newRow("no layer ranges, heavy head: 1f1b to gpipe") << 18 << 1 << -1 << bareHeavy1f << bareHeavyGpipe;
}

void TestCrossSchedule::predictsTheOtherRun()
{
    QFETCH(int, layers);
    QFETCH(int, dp);
    QFETCH(int, slowRank);
    QFETCH(Job, from);
    QFETCH(Job, to);
    MegatronSpec base;
    base.layers = layers;
    base.dp = dp;
    if (slowRank >= 0)
        base.rankSlowdown[slowRank] = 1.10;
    // Without layer ranges the user says where the measured stages split.
    const CostModel model = calibrated(megatronTrace(specFor(base, from)).trace, layers,
                                       from.layerRanges ? std::vector<int>{} : boundariesOf(from.chunkLayers));
    const pipescope::test::MegatronRun other = megatronTrace(specFor(base, to));
    const CostModel truth = calibrated(other.trace, layers, to.layerRanges ? std::vector<int>{} : boundariesOf(to.chunkLayers));

    ScenarioChanges ch;
    ch.schedule = to.schedule;
    ch.v = to.v;
    if (!to.chunkLayers.empty())
        ch.boundaries = boundariesOf(to.chunkLayers);
    const Prediction p = predict(model, applyChanges(measuredScenario(model), ch));
    const double measured = static_cast<double>(*truth.measuredIterationNs);
    const double err = static_cast<double>(p.iterationNs()) / measured - 1;
    qInfo("%s: predicted %.3f ms, the other run %.3f ms (%+.2f%%)", QTest::currentDataTag(),
          static_cast<double>(p.iterationNs()) / 1e6, measured / 1e6, err * 100);
    QVERIFY2(std::abs(err) < 0.03, qPrintable(QString::number(err * 100, 'f', 2) + "%"));
}

// Four replicas, each microbatch of each replica its own length (other
// sequences: 0.6x to 1.6x, fixed per replica and microbatch): the measured
// run, and the same data cut into twice as many microbatches, against the
// independent model. One pipeline at each stage's slowest replica's pace
// cannot reproduce them: the slowest replica of the job is the one whose
// own long microbatches stall its pipeline.
void TestCrossSchedule::replicasWithTheirOwnData_data()
{
    QTest::addColumn<int>("microbatches");
    QTest::newRow("measured: 1f1b, dp 4, m 8") << 8;
    QTest::newRow("m 16, same global batch") << 16;
}

void TestCrossSchedule::replicasWithTheirOwnData()
{
    QFETCH(int, microbatches);
    auto specAt = [](int m) {
        MegatronSpec s;
        s.pp = 4;
        s.dp = 4;
        s.microbatches = m;
        s.layerForwardNs = s.layerForwardNs * 8 / m;
        s.embeddingNs = s.embeddingNs * 8 / m;
        s.lossNs = s.lossNs * 8 / m;
        s.activationBytes = s.activationBytes * 8 / m;
        for (int d = 0; d < s.dp; ++d)
            for (int k = 0; k < m; ++k) {
                // The measured microbatch k * 8 / m of replica d: the same sequences.
                const int measured = k * 8 / m;
                const uint64_t h = (uint64_t(d) * 2654435761u) ^ (uint64_t(measured) * 40503u);
                s.replicaMicrobatchScale[{d, k}] = 0.6 + double(h % 1001) / 1000.0;
            }
        return s;
    };
    const CostModel model = calibrated(megatronTrace(specAt(8)).trace, 16);
    QCOMPARE(static_cast<int>(model.replicaSizes.size()), 4);
    const CostModel truth = calibrated(megatronTrace(specAt(microbatches)).trace, 16);
    ScenarioChanges ch;
    ch.microbatches = microbatches;
    const Prediction p = predict(model, applyChanges(measuredScenario(model), ch));
    const double measured = static_cast<double>(*truth.measuredIterationNs);
    const double err = static_cast<double>(p.iterationNs()) / measured - 1;
    qInfo("%s: predicted %.3f ms (replica %d the slowest), the run %.3f ms (%+.2f%%)", QTest::currentDataTag(),
          static_cast<double>(p.iterationNs()) / 1e6, p.slowestReplica, measured / 1e6, err * 100);
    QVERIFY2(std::abs(err) < 0.02, qPrintable(QString::number(err * 100, 'f', 2) + "%"));
    QVERIFY(p.slowestReplica >= 0);

    // The stage-pace model, one pipeline for all, misses it.
    CostModel paced = model;
    paced.replicaSizes.clear();
    const Prediction q = predict(paced, applyChanges(measuredScenario(model), ch));
    qInfo("one pipeline at each stage's slowest pace: %.3f ms", static_cast<double>(q.iterationNs()) / 1e6);
    QVERIFY(static_cast<double>(q.iterationNs()) / measured - 1 < -0.05);
}

QTEST_GUILESS_MAIN(TestCrossSchedule)
#include "tst_cross_schedule.moc"
