// Steps without annotations: simulated jobs of every built-in schedule,
// written as Kineto traces with no step annotations, must be read back with
// the right p, dp, v, m and schedule and every step's kind, chunk and
// microbatch right, in order, on every rank. The whole matrix (p up to 8,
// m up to 4p, dp 1 and 2) is bench/bench_inference; this is a slice of it
// that runs in seconds.
#include "InferenceMatrix.h"
#include "TestSupport.h"
#include "whatif/ModelDescription.h"

#include <QTemporaryDir>
#include <QtTest>

using namespace pipescope;
using namespace pipescope::whatif;

class TestStepInference : public QObject {
    Q_OBJECT
private slots:
    void schedules_data();
    void schedules();
    void indistinguishableSchedulesAreNamed();
    void autogradPairsBackwardsWithForwards_data();
    void autogradPairsBackwardsWithForwards();
};

void TestStepInference::schedules_data()
{
    QTest::addColumn<int>("kind");
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("v");
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("dp");
    QTest::addColumn<bool>("blocking");
    // Each job twice: sends that overlap the next step, and Megatron's blocking,
    // coalesced batches (simulate --exchanges blocking; ZB-V and DualPipeV,
    // which no batching fits, overlap their sends either way).
    auto row = [](ScheduleKind k, int pp, int v, int m, int dp) {
        const test::Config c{k, pp, v, m, dp};
        QTest::newRow(c.name().c_str()) << int(k) << pp << v << m << dp << false;
        QTest::newRow((c.name() + " blocking").c_str()) << int(k) << pp << v << m << dp << true;
    };
    row(ScheduleKind::GPipe, 4, 1, 8, 1);
    row(ScheduleKind::OneFOneB, 2, 1, 2, 1);      // m = p: warm-up is the whole pipeline
    row(ScheduleKind::OneFOneB, 4, 1, 16, 2);
    row(ScheduleKind::Interleaved1F1B, 2, 2, 4, 1); // p = 2: the next and the previous rank are the same rank
    row(ScheduleKind::Interleaved1F1B, 4, 4, 8, 1);
    row(ScheduleKind::LoopedBFS, 4, 2, 8, 1);     // backwards in reverse microbatch order
    row(ScheduleKind::ZeroBubbleH1, 4, 1, 8, 1);  // W steps move nothing
    row(ScheduleKind::ZeroBubbleH2, 2, 1, 4, 2);
    row(ScheduleKind::ZeroBubbleV, 4, 2, 8, 1);   // the V: stage 0 also runs the last virtual stage
    row(ScheduleKind::DualPipeV, 4, 2, 8, 1);
}

void TestStepInference::schedules()
{
    QFETCH(int, kind);
    QFETCH(int, pp);
    QFETCH(int, v);
    QFETCH(int, m);
    QFETCH(int, dp);
    QFETCH(bool, blocking);
    CostModel model = CostModel::fromModel(loadModelDescription(PIPESCOPE_SOURCE_DIR "/resources/models/gpt-32l.json"));
    model.blockingExchanges = blocking;
    model.exchangeGapNs = blocking ? kDefaultExchangeGapNs : 0;
    QTemporaryDir dir;
    const test::Outcome o = test::evaluateInference(model, {ScheduleKind(kind), pp, v, m, dp}, dir.path().toStdString(), false);
    QVERIFY(o.ran);
    QVERIFY2(o.shape, o.detail.c_str());
    QVERIFY2(o.steps, o.detail.c_str());
}

// Megatron's interleaved 1F1B with m = p runs every forward first, like
// looped BFS; the two differ only in the order of the backwards' microbatches,
// which no transfer shows. Read from kernel order and transfers alone, the
// analysis must say that it cannot tell them apart.
void TestStepInference::indistinguishableSchedulesAreNamed()
{
    const CostModel model = CostModel::fromModel(loadModelDescription(PIPESCOPE_SOURCE_DIR "/resources/models/gpt-32l.json"));
    QTemporaryDir dir;
    const test::Outcome o =
        test::evaluateInference(model, {ScheduleKind::LoopedBFS, 4, 2, 4, 1}, dir.path().toStdString(), false, false);
    QVERIFY(o.ran);
    QVERIFY2(!o.shape, "kernel order and transfers alone cannot tell looped BFS from interleaved 1F1B at m = p");
    QVERIFY2(o.ambiguous, o.detail.c_str());
}

// With autograd's sequence numbers (each backward op carries its forward
// op's), the same jobs are told apart: every backward takes the microbatch of
// the forward it differentiates.
void TestStepInference::autogradPairsBackwardsWithForwards_data()
{
    QTest::addColumn<int>("kind");
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("v");
    QTest::addColumn<int>("m");
    QTest::addColumn<bool>("modules");
    QTest::addColumn<bool>("blocking");
    for (bool blocking : {false, true}) {
        const std::string how = blocking ? " blocking" : "";
        QTest::newRow(("looped-bfs p4 v2 m4" + how).c_str()) << int(ScheduleKind::LoopedBFS) << 4 << 2 << 4 << false << blocking;
        QTest::newRow(("interleaved p4 v2 m4" + how).c_str()) << int(ScheduleKind::Interleaved1F1B) << 4 << 2 << 4 << false << blocking;
        QTest::newRow(("looped-bfs p2 v4 m2" + how).c_str()) << int(ScheduleKind::LoopedBFS) << 2 << 4 << 2 << false << blocking;
        // Megatron's interleaved order with m = 2p, as PyTorch's profiler
        // records it: module events and sequence numbers, no step annotations.
        QTest::newRow(("interleaved p4 v2 m8, modules" + how).c_str())
            << int(ScheduleKind::Interleaved1F1B) << 4 << 2 << 8 << true << blocking;
    }
}

void TestStepInference::autogradPairsBackwardsWithForwards()
{
    QFETCH(int, kind);
    QFETCH(int, pp);
    QFETCH(int, v);
    QFETCH(int, m);
    QFETCH(bool, modules);
    QFETCH(bool, blocking);
    CostModel model = CostModel::fromModel(loadModelDescription(PIPESCOPE_SOURCE_DIR "/resources/models/gpt-32l.json"));
    model.blockingExchanges = blocking;
    model.exchangeGapNs = blocking ? kDefaultExchangeGapNs : 0;
    QTemporaryDir dir;
    const test::Outcome o =
        test::evaluateInference(model, {ScheduleKind(kind), pp, v, m, 1}, dir.path().toStdString(), modules, true);
    QVERIFY(o.ran);
    QVERIFY2(o.shape, o.detail.c_str());
    QVERIFY2(o.steps, o.detail.c_str());
}

QTEST_GUILESS_MAIN(TestStepInference)
#include "tst_step_inference.moc"
