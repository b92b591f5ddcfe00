// Schedules and their replay: closed forms where they hold (equal stage
// times, no communication), hand-worked timelines where they do not, and the
// refusal of broken user schedules.
#include "WhatIfTestSupport.h"
#include "util/Error.h"
#include "whatif/Memory.h"

#include <QtTest>

using namespace pipescope;
using namespace pipescope::whatif;
using pipescope::whatif::test::uniformCosts;

Q_DECLARE_METATYPE(pipescope::ScheduleKind)

class TestSchedule : public QObject {
    Q_OBJECT
private slots:
    void fillDrainRule();
    void inputOnRank();
    void everyBuiltinIsValid_data();
    void everyBuiltinIsValid();
    void bubbleClosedForm_data();
    void bubbleClosedForm();
    void interleavedClosedForm_data();
    void interleavedClosedForm();
    void interleavedMegatronOrder();
    void inFlightClosedForm_data();
    void inFlightClosedForm();
    void zeroBubbleH1ClosedForm_data();
    void zeroBubbleH1ClosedForm();
    void zeroBubbleH2FillsWarmup();
    void zeroBubbleBoundByASlowLastStage();
    void bubbleCauses();
    void handWorkedWithCommunication();
    void linkSerialisesTransfers();
    void latencyPipelinesOnALink();
    void eagerSendLandsBeforeThePost();
    void pipelineSyncWaitsForTheLastRank();
    void rankStartDelaysTheFirstReceive();
    void dataParallelSyncAndOptimizer();
    void launchGap();
    void csvRoundTrip();
    void csvErrors_data();
    void csvErrors();
    void badCombinations_data();
    void badCombinations();
    void scheduleNames();
};

void TestSchedule::everyBuiltinIsValid_data()
{
    QTest::addColumn<ScheduleKind>("kind");
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("v");
    QTest::addColumn<int>("m");
    for (int pp : {1, 2, 3, 4, 8})
        for (int m : {1, 2, 3, 4, 8, 12, 16}) {
            const QByteArray tag = "p" + QByteArray::number(pp) + "m" + QByteArray::number(m);
            QTest::newRow(("gpipe " + tag).constData()) << ScheduleKind::GPipe << pp << 1 << m;
            QTest::newRow(("1f1b " + tag).constData()) << ScheduleKind::OneFOneB << pp << 1 << m;
            QTest::newRow(("zb-h2 " + tag).constData()) << ScheduleKind::ZeroBubbleH2 << pp << 1 << m;
            QTest::newRow(("zb-v " + tag).constData()) << ScheduleKind::ZeroBubbleV << pp << 2 << m;
            for (int v : {2, 3}) {
                const QByteArray vt = tag + "v" + QByteArray::number(v);
                if (m % pp == 0)
                    QTest::newRow(("interleaved " + vt).constData()) << ScheduleKind::Interleaved1F1B << pp << v << m;
                QTest::newRow(("looped-bfs " + vt).constData()) << ScheduleKind::LoopedBFS << pp << v << m;
            }
            if (m % std::max(1, m / pp) == 0) {
                QTest::newRow(("zb-h1 " + tag).constData()) << ScheduleKind::ZeroBubbleH1 << pp << 1 << m;
                QTest::newRow(("zb-h1 v2 " + tag).constData()) << ScheduleKind::ZeroBubbleH1 << pp << 2 << m;
            }
            if (m >= 2 * pp)
                QTest::newRow(("dualpipev " + tag).constData()) << ScheduleKind::DualPipeV << pp << 2 << m;
        }
}

// Every built-in order runs each microbatch's F once and its backward once
// per stage, in dependency order, without deadlock.
void TestSchedule::everyBuiltinIsValid()
{
    QFETCH(ScheduleKind, kind);
    QFETCH(int, pp);
    QFETCH(int, v);
    QFETCH(int, m);
    const Schedule s = makeSchedule(kind, pp, v, m);
    QCOMPARE(s.stages, pp * v);
    QCOMPARE(s.microbatches, m);
    try {
        validateSchedule(s, "built-in");
    } catch (const Error& e) {
        QFAIL(e.what());
    }
    size_t expected = static_cast<size_t>(pp * v * m) * (splitsBackward(kind) ? 3 : 2);
    if (kind == ScheduleKind::DualPipeV) {
        // Some backwards stay whole (B), the rest are split (I + W).
        QVERIFY(s.actionCount() >= static_cast<size_t>(pp * v * m) * 2);
        expected = s.actionCount();
    }
    QCOMPARE(s.actionCount(), expected);
    const ReplayResult r = Replay().run(s, uniformCosts(s.stages, 10, 20, 10, 10));
    QVERIFY(r.iterationNs > 0);
}

void TestSchedule::bubbleClosedForm_data()
{
    QTest::addColumn<ScheduleKind>("kind");
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("m");
    for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
        for (int pp : {1, 2, 4, 8})
            for (int m : {1, 3, 4, 8, 16, 64})
                QTest::addRow("%s p%d m%d", toString(k).data(), pp, m) << k << pp << m;
}

// (p - 1) / (m + p - 1) for GPipe and 1F1B.
void TestSchedule::bubbleClosedForm()
{
    QFETCH(ScheduleKind, kind);
    QFETCH(int, pp);
    QFETCH(int, m);
    const TimeNs F = 1000, B = 2000;
    const ReplayResult r = Replay().run(makeSchedule(kind, pp, 1, m), uniformCosts(pp, F, B));
    QCOMPARE(r.iterationNs, (m + pp - 1) * (F + B));
    QCOMPARE(r.bubbleFraction, double(pp - 1) / double(m + pp - 1));
    // All of it is filling and draining: nothing waits in the steady state.
    QCOMPARE(r.bubbleNs[size_t(BubbleCause::WaitNeighbor)], TimeNs(0));
}

void TestSchedule::interleavedClosedForm_data()
{
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("v");
    QTest::addColumn<int>("m");
    for (int pp : {2, 4, 8})
        for (int v : {2, 3, 4})
            for (int mult : {1, 2, 4})
                QTest::addRow("p%d v%d m%d", pp, v, pp * mult) << pp << v << pp * mult;
}

// (p - 1) / (v m + p - 1) for interleaved 1F1B, each chunk 1/v of a stage.
void TestSchedule::interleavedClosedForm()
{
    QFETCH(int, pp);
    QFETCH(int, v);
    QFETCH(int, m);
    const TimeNs F = 100, B = 200; // per chunk
    const ReplayResult r = Replay().run(makeSchedule(ScheduleKind::Interleaved1F1B, pp, v, m), uniformCosts(pp * v, F, B));
    QCOMPARE(r.iterationNs, (v * m + pp - 1) * (F + B));
    QCOMPARE(r.bubbleFraction, double(pp - 1) / double(v * m + pp - 1));
}

// Megatron's order on p = 2, v = 2, m = 4: warm-up (p - r - 1) * 2 + (v - 1) * p
// forwards, microbatches in groups of p through the chunks; and the m == p
// special case runs all forwards first.
void TestSchedule::interleavedMegatronOrder()
{
    auto labels = [](const Schedule& s, int r) {
        QStringList out;
        for (const Action& a : s.ranks[size_t(r)])
            out << QString::fromStdString(actionLabel(a));
        return out.join(' ');
    };
    const Schedule s = makeSchedule(ScheduleKind::Interleaved1F1B, 2, 2, 4);
    QCOMPARE(labels(s, 0), QString("0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3"));
    QCOMPARE(labels(s, 1), QString("1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3"));
    const Schedule eq = makeSchedule(ScheduleKind::Interleaved1F1B, 2, 2, 2);
    QCOMPARE(labels(eq, 1), QString("1F0 1F1 3F0 3F1 3B0 3B1 1B0 1B1"));
}

void TestSchedule::inFlightClosedForm_data()
{
    QTest::addColumn<ScheduleKind>("kind");
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("m");
    for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
        for (int pp : {1, 2, 4, 8})
            for (int m : {1, 2, 4, 8, 16})
                QTest::addRow("%s p%d m%d", toString(k).data(), pp, m) << k << pp << m;
}

// 1F1B holds min(m, p - r) microbatches on rank r, GPipe holds m.
void TestSchedule::inFlightClosedForm()
{
    QFETCH(ScheduleKind, kind);
    QFETCH(int, pp);
    QFETCH(int, m);
    const ReplayResult r = Replay().run(makeSchedule(kind, pp, 1, m), uniformCosts(pp, 10, 20));
    const std::vector<int> inFlight = peakInFlight(r);
    QCOMPARE(int(inFlight.size()), pp);
    for (int rank = 0; rank < pp; ++rank)
        QCOMPARE(inFlight[size_t(rank)], kind == ScheduleKind::GPipe ? m : std::min(m, pp - rank));
}

void TestSchedule::zeroBubbleH1ClosedForm_data()
{
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("m");
    QTest::addColumn<qint64>("f");
    QTest::addColumn<qint64>("i");
    QTest::addColumn<qint64>("w");
    for (int pp : {2, 4, 8})
        for (int m : {pp, 2 * pp, 4 * pp}) {
            QTest::addRow("p%d m%d equal", pp, m) << pp << m << qint64(100) << qint64(100) << qint64(100);
            QTest::addRow("p%d m%d unequal", pp, m) << pp << m << qint64(120) << qint64(100) << qint64(80);
        }
}

// ZB-H1 leaves (p - 1)(F + I - W) idle on each rank.
void TestSchedule::zeroBubbleH1ClosedForm()
{
    QFETCH(int, pp);
    QFETCH(int, m);
    QFETCH(qint64, f);
    QFETCH(qint64, i);
    QFETCH(qint64, w);
    const ReplayResult r = Replay().run(makeSchedule(ScheduleKind::ZeroBubbleH1, pp, 1, m), uniformCosts(pp, f, 0, i, w));
    QCOMPARE(r.iterationNs, m * (f + i + w) + (pp - 1) * (f + i - w));
    for (const RankReplay& rank : r.ranks) {
        TimeNs idle = 0;
        for (TimeNs t : rank.bubbleNs)
            idle += t;
        QCOMPARE(idle, (pp - 1) * (f + i - w));
    }
    // Same peak memory as 1F1B.
    const std::vector<int> zb = peakInFlight(r, /*untilWeightGradient=*/false);
    for (int rank = 0; rank < pp; ++rank)
        QCOMPARE(zb[size_t(rank)], std::min(m, pp - rank));
}

// ZB-H2 spends up to 2(p - r) - 1 microbatches of memory to fill the warm-up:
// with F = I = W no rank idles between its first and last step.
void TestSchedule::zeroBubbleH2FillsWarmup()
{
    for (int pp : {2, 4, 8}) {
        const int m = 3 * pp;
        const ReplayResult eq = Replay().run(makeSchedule(ScheduleKind::ZeroBubbleH2, pp, 1, m), uniformCosts(pp, 100, 0, 100, 100));
        QCOMPARE(eq.iterationNs, TimeNs(3 * m * 100 + (pp - 1) * 100));
        for (int rank = 0; rank < pp; ++rank) {
            const RankReplay& rr = eq.ranks[size_t(rank)];
            QCOMPARE(rr.actions.front().start, TimeNs(rank * 100));
            QCOMPARE(rr.computeEnd - rr.actions.front().start, TimeNs(3 * m * 100));
        }
        const std::vector<int> inFlight = peakInFlight(eq, /*untilWeightGradient=*/false);
        QCOMPARE(inFlight[0], std::min(m, 2 * pp - 1));
    }
}

// ZB-H2 fills the warm-up that ZB-H1 leaves idle, so with equal stages and
// W shorter than I it is faster; but when the last stage is slow enough (the
// head and loss), it runs without a gap from its first forward on and
// finishes last under both, so both take its fill plus its work.
void TestSchedule::zeroBubbleBoundByASlowLastStage()
{
    const int pp = 4, m = 8;
    const Schedule h1 = makeSchedule(ScheduleKind::ZeroBubbleH1, pp, 1, m);
    const Schedule h2 = makeSchedule(ScheduleKind::ZeroBubbleH2, pp, 1, m);
    const ReplayCosts equal = uniformCosts(pp, 100, 0, 100, 50);
    QVERIFY(Replay().run(h2, equal).iterationNs < Replay().run(h1, equal).iterationNs);
    ReplayCosts slowLast = equal;
    // After its last I the last stage still has the W it deferred (ZB-H1:
    // four of them, 400), longer than that I's way back to stage 0 and its W (350).
    slowLast.stages[pp - 1] = StageCost{200, 0, 200, 100};
    const TimeNs bound = (pp - 1) * 100 + m * (200 + 200 + 100);
    QCOMPARE(Replay().run(h1, slowLast).iterationNs, bound);
    QCOMPARE(Replay().run(h2, slowLast).iterationNs, bound);
}

// Where the idle time of a 1F1B pipeline with one slow stage goes.
void TestSchedule::bubbleCauses()
{
    ReplayCosts c = uniformCosts(3, 10, 20);
    c.stages[1] = StageCost{20, 40, 0, 0}; // the middle stage is twice as slow
    const ReplayResult r = Replay().run(makeSchedule(ScheduleKind::OneFOneB, 3, 1, 6), c);
    // Worked by hand: stage 1 starts at 10, waits 10 for its first gradient
    // (50..60), then runs its 6 x 60 back to back until 380; stage 0's last
    // backward follows: 400.
    QCOMPARE(r.iterationNs, TimeNs(400));
    QCOMPARE(r.ranks[1].bubbleNs[size_t(BubbleCause::FillDrain)], TimeNs(10 + 10 + 20));
    // Stage 1 never waits once started, so it only has fill/drain idle.
    QCOMPARE(r.ranks[1].bubbleNs[size_t(BubbleCause::WaitNeighbor)], TimeNs(0));
    // Ranks 0 and 2 wait for the slow neighbour in the steady state.
    QVERIFY(r.ranks[0].bubbleNs[size_t(BubbleCause::WaitNeighbor)] > 0);
    QVERIFY(r.ranks[2].bubbleNs[size_t(BubbleCause::WaitNeighbor)] > 0);
    TimeNs idle = 0;
    for (TimeNs t : r.bubbleNs)
        idle += t;
    TimeNs busy = 0;
    for (const RankReplay& rr : r.ranks)
        busy += rr.busyNs;
    QCOMPARE(idle + busy, 3 * r.iterationNs);
}

// Two stages, two microbatches, GPipe; F = 10, B = 20; each transfer 5 us
// latency + 1000 bytes at 100 bytes/us = 15 us. A transfer starts when the
// data is ready, the link is free and the receiver has posted its receive
// (its previous step ended). Worked by hand:
//   rank 0: F0 [0,10) F1 [10,20)                       B0 [95,115) B1 [130,150)
//   rank 1: F0 [25,35) F1 [50,60) B0 [60,80) B1 [80,100)
// F0 moves 10..25. F1 is ready at 20 but rank 1 posts its receive only after
// F0, at 35: it moves 35..50. B0's gradient moves 80..95 (rank 0 has been
// waiting since 20); B1's is ready at 100 but rank 0 posts at 115: 115..130.
void TestSchedule::handWorkedWithCommunication()
{
    ReplayCosts c = uniformCosts(2, 10'000, 20'000);
    c.boundaryBytes = {1000};
    c.p2pLatencyNs = 5'000;
    c.p2pBytesPerNs = 0.1; // 100 bytes per microsecond
    const ReplayResult r = Replay().run(makeSchedule(ScheduleKind::GPipe, 2, 1, 2), c);
    auto times = [](const RankReplay& rr) {
        QList<qint64> out;
        for (const TimedAction& a : rr.actions)
            out << a.start / 1000 << a.end / 1000;
        return out;
    };
    QCOMPARE(times(r.ranks[0]), (QList<qint64>{0, 10, 10, 20, 95, 115, 130, 150}));
    QCOMPARE(times(r.ranks[1]), (QList<qint64>{25, 35, 50, 60, 60, 80, 80, 100}));
    QCOMPARE(r.iterationNs, TimeNs(150'000));
    QCOMPARE(int(r.transfers.size()), 4);
    QCOMPARE(r.transfers[1].start, TimeNs(35'000));
    QCOMPARE(r.transfers[1].end, TimeNs(50'000));
    QCOMPARE(r.transfers[3].start, TimeNs(115'000));
    QVERIFY(!r.transfers[0].backward);
    QVERIFY(r.transfers[3].backward);
    QCOMPARE(r.transfers[3].srcRank, 1);
    QCOMPARE(r.transfers[3].dstRank, 0);
    // Free communication, the schedule itself idles rank 0 30 before B0 (rank
    // 1's F1 and B0), rank 1 10 before F0 and 20 after B1: fill/drain. The
    // rest is waiting on the transfers. Rank 0: 75 waiting for the first
    // gradient, 15 between its backwards.
    QCOMPARE(r.ranks[0].bubbleNs[size_t(BubbleCause::FillDrain)], TimeNs(30'000));
    QCOMPARE(r.ranks[0].bubbleNs[size_t(BubbleCause::WaitNeighbor)], TimeNs(45'000 + 15'000));
    // Rank 1: 25 before its first step, 15 waiting for F1, 50 after its last.
    QCOMPARE(r.ranks[1].bubbleNs[size_t(BubbleCause::FillDrain)], TimeNs(10'000 + 20'000));
    QCOMPARE(r.ranks[1].bubbleNs[size_t(BubbleCause::WaitNeighbor)], TimeNs(15'000 + 15'000 + 30'000));
}

// Transfers on one link queue behind each other while their bytes move: the
// second forward waits for the link (and for rank 1 to post its receive after
// the first).
void TestSchedule::linkSerialisesTransfers()
{
    ReplayCosts c = uniformCosts(2, 0, 10'000);
    c.stages[0].forward = 1'000;
    c.boundaryBytes = {1000};
    c.p2pBytesPerNs = 0.1; // 10 us for the bytes
    const ReplayResult r = Replay().run(makeSchedule(ScheduleKind::GPipe, 2, 1, 2), c);
    // F0 ends at 1 us, F1 at 2 us; the link is busy 1..11 then 11..21.
    QCOMPARE(r.transfers[0].end, TimeNs(11'000));
    QCOMPARE(r.transfers[1].start, TimeNs(11'000));
    QCOMPARE(r.transfers[1].end, TimeNs(21'000));
    QCOMPARE(r.ranks[1].actions[1].start, TimeNs(21'000));
}

// Latency does not hold the link: the second message leaves as soon as it
// is ready and lands one latency later, behind the first.
void TestSchedule::latencyPipelinesOnALink()
{
    ReplayCosts c = uniformCosts(2, 0, 10'000);
    c.stages[0].forward = 1'000;
    c.p2pLatencyNs = 10'000;
    c.eagerBytes = 1;
    const ReplayResult r = Replay().run(makeSchedule(ScheduleKind::GPipe, 2, 1, 2), c);
    QCOMPARE(r.transfers[0].start, TimeNs(1'000));
    QCOMPARE(r.transfers[0].end, TimeNs(11'000));
    QCOMPARE(r.transfers[1].start, TimeNs(2'000));
    QCOMPARE(r.transfers[1].end, TimeNs(12'000));
    QCOMPARE(r.ranks[1].actions[1].start, TimeNs(12'000));
}

// The worked example of handWorkedWithCommunication, with the messages
// fitting the receiver's buffer: they no longer wait for the receive to be
// posted. F1 leaves at 20 (the link is free from 20, when F0's bytes are
// through) and lands at 35, as rank 1 finishes F0, instead of moving 35..50.
//   rank 0: F0 [0,10) F1 [10,20)                    B0 [80,100) B1 [100,120)
//   rank 1: F0 [25,35) F1 [35,45) B0 [45,65) B1 [65,85)
void TestSchedule::eagerSendLandsBeforeThePost()
{
    ReplayCosts c = uniformCosts(2, 10'000, 20'000);
    c.boundaryBytes = {1000};
    c.p2pLatencyNs = 5'000;
    c.p2pBytesPerNs = 0.1;
    c.eagerBytes = 1000;
    const ReplayResult r = Replay().run(makeSchedule(ScheduleKind::GPipe, 2, 1, 2), c);
    auto times = [](const RankReplay& rr) {
        QList<qint64> out;
        for (const TimedAction& a : rr.actions)
            out << a.start / 1000 << a.end / 1000;
        return out;
    };
    QCOMPARE(times(r.ranks[1]), (QList<qint64>{25, 35, 35, 45, 45, 65, 65, 85}));
    QCOMPARE(times(r.ranks[0]), (QList<qint64>{0, 10, 10, 20, 80, 100, 100, 120}));
    QCOMPARE(r.transfers[1].start, TimeNs(20'000));
    QCOMPARE(r.transfers[1].end, TimeNs(35'000));
    QCOMPARE(r.iterationNs, TimeNs(120'000));
}

// A collective over all pipeline ranks at the end starts once the last rank
// has joined (after its own all-reduce); every rank leaves it together and
// then runs its optimizer. The wait in it is pipeline drain (fill_drain), as
// in the analysis; only the data-parallel all-reduce is dp_sync.
void TestSchedule::pipelineSyncWaitsForTheLastRank()
{
    ReplayCosts c = uniformCosts(2, 10, 20);
    c.allReduceNs = {7, 0};
    c.optimizerNs = {3, 3};
    c.pipelineSyncNs = 5;
    const ReplayResult r = Replay().run(makeSchedule(ScheduleKind::OneFOneB, 2, 1, 2), c);
    // Compute ends at 90 (rank 0) and 70 (rank 1); rank 0 joins at 97.
    QCOMPARE(r.ranks[1].syncStart, TimeNs(70));
    QCOMPARE(r.ranks[0].syncEnd, TimeNs(102));
    QCOMPARE(r.ranks[1].syncEnd, TimeNs(102));
    QCOMPARE(r.ranks[1].optimizerEnd, TimeNs(105));
    QCOMPARE(r.iterationNs, TimeNs(105));
    QCOMPARE(r.ranks[0].bubbleNs[size_t(BubbleCause::DpSync)], TimeNs(7));
    QCOMPARE(r.ranks[1].bubbleNs[size_t(BubbleCause::DpSync)], TimeNs(0));
    // Rank 1: 10 before its first forward, 32 in the collective waiting for rank 0.
    QCOMPARE(r.ranks[1].bubbleNs[size_t(BubbleCause::FillDrain)], TimeNs(10 + 32));
}

// A rank that begins the iteration late posts its first receive late: a
// message in its buffer waits for it.
void TestSchedule::rankStartDelaysTheFirstReceive()
{
    ReplayCosts c = uniformCosts(2, 10, 20);
    c.p2pLatencyNs = 4;
    c.eagerBytes = 1;
    c.rankStartNs = {0, 30};
    const ReplayResult r = Replay().run(makeSchedule(ScheduleKind::GPipe, 2, 1, 1), c);
    // F0 lands on rank 1 at 14 but rank 1 only starts at 30.
    QCOMPARE(r.ranks[1].actions[0].start, TimeNs(30));
    QCOMPARE(r.ranks[0].actions[1].start, TimeNs(30 + 10 + 20 + 4));
    // Rank 1 idles 30 before F0 and 24 after B0; the schedule's own share is
    // 10 before F0 (rank 0's F0) and 20 after B0 (rank 0's B0).
    QCOMPARE(r.ranks[1].bubbleNs[size_t(BubbleCause::FillDrain)], TimeNs(10 + 20));
    QCOMPARE(r.ranks[1].bubbleNs[size_t(BubbleCause::WaitNeighbor)], TimeNs(20 + 4));
}

// The all-reduce starts when a rank's last backward ends; the optimizer follows;
// the idle time waiting for it is dp_sync, a rank that is done early drains.
void TestSchedule::dataParallelSyncAndOptimizer()
{
    ReplayCosts c = uniformCosts(2, 10, 20);
    c.allReduceNs = {7, 7};
    c.optimizerNs = {3, 3};
    const ReplayResult r = Replay().run(makeSchedule(ScheduleKind::OneFOneB, 2, 1, 2), c);
    // Pipeline part: (m + p - 1)(F + B) = 90 on rank 0; rank 1 ends at 70.
    QCOMPARE(r.ranks[0].computeEnd, TimeNs(90));
    QCOMPARE(r.ranks[1].computeEnd, TimeNs(70));
    QCOMPARE(r.iterationNs, TimeNs(100));
    QCOMPARE(r.ranks[0].bubbleNs[size_t(BubbleCause::DpSync)], TimeNs(7));
    QCOMPARE(r.ranks[1].optimizerEnd, TimeNs(80));
    // Rank 1: 10 before its first forward, 20 after its optimizer.
    QCOMPARE(r.ranks[1].bubbleNs[size_t(BubbleCause::FillDrain)], TimeNs(10 + 20));
}

void TestSchedule::launchGap()
{
    ReplayCosts c = uniformCosts(1, 10, 20);
    c.launchGapNs = 2;
    const ReplayResult r = Replay().run(makeSchedule(ScheduleKind::OneFOneB, 1, 1, 3), c);
    // F B F B F B back to back with a 2 ns gap between steps.
    QCOMPARE(r.iterationNs, TimeNs(3 * 30 + 5 * 2));
    QCOMPARE(r.bubbleNs[size_t(BubbleCause::LaunchGap)], TimeNs(10));
}

void TestSchedule::csvRoundTrip()
{
    // torch's compute-only format: one row per rank; blanks are idle slots;
    // communication cells are ignored.
    const std::string csv = "0F0,0F1,,0B0,0B1\n"
                            ",1F0,1B0,1F1,1B1,1SEND_B1\n";
    const Schedule s = parseScheduleCsv(csv, "two.csv");
    QCOMPARE(s.pp, 2);
    QCOMPARE(s.stages, 2);
    QCOMPARE(s.microbatches, 2);
    QCOMPARE(int(s.ranks[1].size()), 4);
    const ReplayResult r = Replay().run(s, uniformCosts(2, 10, 20));
    QCOMPARE(r.iterationNs, TimeNs(90));

    // V placement, split backward and an overlapped F+B cell.
    const std::string v = "0F0,(0F1;),3F0,3I0,3W0,0I0,0W0,3F1,3B1,0B1\n"
                          "1F0,2F0,2I0,1I0,1W0,1F1,2F1,2B1,1B1,2W0\n";
    const Schedule sv = parseScheduleCsv(v, "v.csv");
    QCOMPARE(sv.stages, 4);
    QCOMPARE(sv.rankOfStage, (std::vector<int>{0, 1, 1, 0}));
    QCOMPARE(sv.chunkOfStage, (std::vector<int>{0, 0, 1, 1}));
}

void TestSchedule::csvErrors_data()
{
    QTest::addColumn<QString>("csv");
    QTest::addColumn<QString>("message");
    QTest::newRow("backward before forward") << "0B0,0F0\n" << "rank 0, step 1 (0B0) runs before its forward 0F0";
    QTest::newRow("weight before input") << "0F0,0W0,0I0\n" << "rank 0, step 2 (0W0) runs before its input-gradient step 0I0";
    QTest::newRow("twice") << "0F0,0F0,0B0\n" << "rank 0, step 2 (0F0) runs twice";
    QTest::newRow("stage on two ranks") << "0F0,1F0,1B0,0B0\n1F0\n" << "rank 1, step 1 (1F0): stage 1 belongs to rank 0";
    QTest::newRow("missing backward") << "0F0,0F1,0B0\n" << "stage 0, microbatch 1 has no backward step";
    QTest::newRow("missing W") << "0F0,0I0\n" << "stage 0, microbatch 0 has an I step but no W step";
    QTest::newRow("unknown type") << "0F0,0X0\n" << "'0X0' has an unknown step type 'X'";
    QTest::newRow("garbage") << "hello\n" << "'hello' is not a step like 0F1";
    QTest::newRow("empty") << "\n\n" << "no steps found";
    // Rank 0 waits for 1B0 before it sends F1; rank 1 needs F1 before its B0.
    QTest::newRow("deadlock") << "0F0,0B0,0F1,0B1\n1F0,1F1,1B0,1B1\n"
                              << "rank 0, step 2 (0B0) waits for 1B0, which rank 1 only runs at step 3, "
                                 "behind its own waiting step 2 (1F1): the schedule deadlocks";
}

void TestSchedule::csvErrors()
{
    QFETCH(QString, csv);
    QFETCH(QString, message);
    try {
        parseScheduleCsv(csv.toStdString(), "bad.csv");
        QFAIL("accepted a broken schedule");
    } catch (const Error& e) {
        const QString what = QString::fromStdString(e.what());
        QVERIFY2(what.startsWith("bad.csv: "), qPrintable(what));
        QVERIFY2(what.contains(message), qPrintable(what));
    }
}

void TestSchedule::badCombinations_data()
{
    QTest::addColumn<ScheduleKind>("kind");
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("v");
    QTest::addColumn<int>("m");
    QTest::addColumn<QString>("message");
    QTest::newRow("zb-v v3") << ScheduleKind::ZeroBubbleV << 4 << 3 << 8 << "zb-v places exactly two chunks per rank";
    QTest::newRow("1f1b v2") << ScheduleKind::OneFOneB << 4 << 2 << 8 << "1f1b runs one chunk per rank";
    QTest::newRow("interleaved v1") << ScheduleKind::Interleaved1F1B << 4 << 1 << 8 << "interleaved-1f1b needs v 2 or more";
    QTest::newRow("interleaved m") << ScheduleKind::Interleaved1F1B << 4 << 2 << 6 << "multiple of the pipeline degree (4)";
    QTest::newRow("dualpipev few") << ScheduleKind::DualPipeV << 4 << 2 << 6 << "dualpipev needs at least 2 x pp = 8";
    QTest::newRow("zb-h1 rounds") << ScheduleKind::ZeroBubbleH1 << 4 << 1 << 9 << "multiple of the number of rounds (2)";
    QTest::newRow("no microbatches") << ScheduleKind::GPipe << 4 << 1 << 0 << "at least 1";
}

void TestSchedule::badCombinations()
{
    QFETCH(ScheduleKind, kind);
    QFETCH(int, pp);
    QFETCH(int, v);
    QFETCH(int, m);
    QFETCH(QString, message);
    try {
        makeSchedule(kind, pp, v, m);
        QFAIL("accepted");
    } catch (const Error& e) {
        QVERIFY2(QString::fromStdString(e.what()).contains(message), e.what());
    }
}

void TestSchedule::scheduleNames()
{
    for (ScheduleKind k : builtinScheduleKinds())
        QCOMPARE(scheduleKindFromString(toString(k)), std::optional<ScheduleKind>(k));
    QCOMPARE(scheduleKindFromString("Interleaved"), std::optional<ScheduleKind>(ScheduleKind::Interleaved1F1B));
    QCOMPARE(scheduleKindFromString("ZBVZeroBubble"), std::optional<ScheduleKind>(ScheduleKind::ZeroBubbleV));
    QCOMPARE(scheduleKindFromString("DualPipeV"), std::optional<ScheduleKind>(ScheduleKind::DualPipeV));
    QVERIFY(!scheduleKindFromString("2f2b").has_value());
}

// The fill/drain rule both the analysis and the replay use: a rank running
// F0 0-10, F1 12-20, I0 30-40, F2 41-50, W0 52-60, I1 70-80 fills until its
// first non-forward (30) and drains after its last forward (50).
void TestSchedule::fillDrainRule()
{
    FillDrainBounds b;
    QVERIFY(b.inFillOrDrain(0, 100)); // no steps: all of it
    b.add(true, 0, 10);
    b.add(true, 12, 20);
    b.add(false, 30, 40);
    b.add(true, 41, 50);
    b.add(false, 52, 60);
    b.add(false, 70, 80);
    QCOMPARE(b.fillEnd(), TimeNs(30));
    QCOMPARE(b.drainStart(), TimeNs(50));
    QVERIFY(b.inFillOrDrain(20, 30));   // before the first input-gradient step
    QVERIFY(!b.inFillOrDrain(40, 41));  // between I0 and F2: waiting
    QVERIFY(b.inFillOrDrain(60, 70));   // after the last forward
    FillDrainBounds onlyForwards;
    onlyForwards.add(true, 0, 10);
    onlyForwards.add(true, 20, 30);
    QVERIFY(onlyForwards.inFillOrDrain(10, 20));
}

QTEST_GUILESS_MAIN(TestSchedule)
// Whose work feeds a step: the replay's host gap before a step whose input its
// own rank made (CostModel::localStepGapNs) hangs on this.
void TestSchedule::inputOnRank()
{
    const Schedule s = makeSchedule(ScheduleKind::Interleaved1F1B, 2, 2, 4); // stages 0,1,2,3 on ranks 0,1,0,1
    QCOMPARE(s.rankOfStage, (std::vector<int>{0, 1, 0, 1}));
    QVERIFY(s.inputOnRank(Action{StepKind::F, 0, 0}, 0));  // the data loader
    QVERIFY(!s.inputOnRank(Action{StepKind::F, 1, 0}, 1)); // stage 0's forward, on rank 0
    QVERIFY(!s.inputOnRank(Action{StepKind::F, 2, 0}, 0)); // stage 1's, on rank 1
    QVERIFY(s.inputOnRank(Action{StepKind::B, 3, 0}, 1));  // the loss: its own forward
    QVERIFY(!s.inputOnRank(Action{StepKind::B, 2, 0}, 0)); // stage 3's backward, on rank 1
    QVERIFY(s.inputOnRank(Action{StepKind::W, 1, 0}, 1));  // its own input gradient
    const Schedule v = makeSchedule(ScheduleKind::ZeroBubbleV, 2, 2, 4); // V: stages 0,1 | 2,3 on ranks 0,1,1,0
    QCOMPARE(v.rankOfStage, (std::vector<int>{0, 1, 1, 0}));
    QVERIFY(v.inputOnRank(Action{StepKind::F, 2, 0}, 1));  // the turn of the V stays on rank 1
    QVERIFY(v.inputOnRank(Action{StepKind::I, 1, 0}, 1));
    QVERIFY(!v.inputOnRank(Action{StepKind::I, 2, 0}, 1));
}

#include "tst_whatif_schedule.moc"
