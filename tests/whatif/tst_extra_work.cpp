// Extra work in bubbles (`pipescope whatif --extra-work`): work placed into a
// replayed iteration's idle gaps first, the rest after each rank's last step.
// Worked on 1F1B, p = 2, m = 2, F = 1 ms, B = 2 ms, free transfers:
//   rank 0: F0 [0,1] F1 [1,2] idle [2,4] B0 [4,6] idle [6,7] B1 [7,9]
//   rank 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7], done at 7
// so rank 0 can hide 3 ms between its steps (2 ms with pieces of 1.5 ms),
// rank 1 nothing, but rank 1 has 2 ms of slack before the iteration ends at 9.
#include "WhatIfTestSupport.h"
#include "util/Error.h"
#include "whatif/ExtraWork.h"

#include <QtTest>

using namespace pipescope;
using namespace pipescope::whatif;
using namespace pipescope::whatif::test;

namespace {

constexpr TimeNs kMs = 1'000'000;

ReplayCosts twoStageCosts() { return uniformCosts(2, 1 * kMs, 2 * kMs); }

} // namespace

class TestExtraWork : public QObject {
    Q_OBJECT
private slots:
    void replayAsWorked();
    void fill_data();
    void fill();
    void pipelineWideCollective();
    void refusesNegativeWork();
    void textAndJson();
};

// The replay the numbers below are worked on.
void TestExtraWork::replayAsWorked()
{
    const ReplayResult r = Replay().run(makeSchedule(ScheduleKind::OneFOneB, 2, 1, 2), twoStageCosts());
    QCOMPARE(r.iterationNs, 9 * kMs);
    QCOMPARE(r.ranks.size(), size_t(2));
    std::vector<std::pair<TimeNs, TimeNs>> rank0, rank1;
    for (const TimedAction& a : r.ranks[0].actions)
        rank0.push_back({a.start, a.end});
    for (const TimedAction& a : r.ranks[1].actions)
        rank1.push_back({a.start, a.end});
    using Spans = std::vector<std::pair<TimeNs, TimeNs>>;
    QCOMPARE(rank0, (Spans{{0, 1 * kMs}, {1 * kMs, 2 * kMs}, {4 * kMs, 6 * kMs}, {7 * kMs, 9 * kMs}}));
    QCOMPARE(rank1, (Spans{{1 * kMs, 2 * kMs}, {2 * kMs, 4 * kMs}, {4 * kMs, 5 * kMs}, {5 * kMs, 7 * kMs}}));
    QCOMPARE(r.ranks[1].computeEnd, 7 * kMs);
}

void TestExtraWork::fill_data()
{
    QTest::addColumn<TimeNs>("work");
    QTest::addColumn<TimeNs>("piece");
    QTest::addColumn<TimeNs>("iteration");
    QTest::addColumn<TimeNs>("fillable0");
    QTest::addColumn<TimeNs>("hidden0");
    QTest::addColumn<TimeNs>("overflow1");
    const TimeNs p = kDefaultMinPieceNs;
    // W below rank 0's 3 ms and within rank 1's 2 ms of slack: no change.
    QTest::newRow("none") << TimeNs(0) << p << 9 * kMs << 3 * kMs << TimeNs(0) << TimeNs(0);
    QTest::newRow("0.5 ms") << TimeNs(500'000) << p << 9 * kMs << 3 * kMs << TimeNs(500'000) << TimeNs(500'000);
    QTest::newRow("2 ms") << 2 * kMs << p << 9 * kMs << 3 * kMs << 2 * kMs << 2 * kMs;
    // Above: rank 1 (nothing hidden, 2 ms of slack) sets the pace, 9 + (W - 2).
    QTest::newRow("3 ms") << 3 * kMs << p << 10 * kMs << 3 * kMs << 3 * kMs << 3 * kMs;
    QTest::newRow("5 ms") << 5 * kMs << p << 12 * kMs << 3 * kMs << 3 * kMs << 5 * kMs;
    // Pieces of at least 1.5 ms: rank 0's 1 ms gap takes nothing.
    QTest::newRow("3 ms, 1.5 ms pieces") << 3 * kMs << TimeNs(1'500'000) << 10 * kMs << 2 * kMs << 2 * kMs << 3 * kMs;
    QTest::newRow("1.5 ms, 1.5 ms pieces") << TimeNs(1'500'000) << TimeNs(1'500'000) << 9 * kMs << 2 * kMs << TimeNs(1'500'000)
                                           << TimeNs(1'500'000);
}

void TestExtraWork::fill()
{
    QFETCH(TimeNs, work);
    QFETCH(TimeNs, piece);
    QFETCH(TimeNs, iteration);
    QFETCH(TimeNs, fillable0);
    QFETCH(TimeNs, hidden0);
    QFETCH(TimeNs, overflow1);
    const Schedule s = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 2);
    const ReplayCosts c = twoStageCosts();
    const ExtraWorkPrediction e = addExtraWork(s, c, Replay().run(s, c), work, piece);
    QCOMPARE(e.baseIterationNs, 9 * kMs);
    QCOMPARE(e.iterationNs, iteration);
    QCOMPARE(e.extraNs(), iteration - 9 * kMs);
    QCOMPARE(e.ranks.size(), size_t(2));
    QCOMPARE(e.ranks[0].stages, std::vector<int>{0});
    QCOMPARE(e.ranks[0].fillableNs, fillable0);
    QCOMPARE(e.ranks[0].hiddenNs, hidden0);
    QCOMPARE(e.ranks[0].overflowNs, work - hidden0);
    QCOMPARE(e.ranks[1].fillableNs, TimeNs(0));
    QCOMPARE(e.ranks[1].hiddenNs, TimeNs(0));
    QCOMPARE(e.ranks[1].overflowNs, overflow1);
}

// With an all-reduce of 1 ms, a pipeline-wide collective of 0.2 ms and an
// optimizer of 0.5 ms every rank waits for the last to join (rank 0 at 10):
// the iteration is 10.7 ms. W = 4 ms: rank 0 joins at 9 + 1 + 1 = 11, rank 1 at
// 7 + 4 + 1 = 12, so 12.7 ms (+2 ms = W minus rank 1's 2 ms of slack).
void TestExtraWork::pipelineWideCollective()
{
    const Schedule s = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 2);
    ReplayCosts c = twoStageCosts();
    c.allReduceNs = {1 * kMs, 1 * kMs};
    c.pipelineSyncNs = 200'000;
    c.optimizerNs = {500'000, 500'000};
    const ReplayResult r = Replay().run(s, c);
    QCOMPARE(r.iterationNs, TimeNs(10'700'000));
    QCOMPARE(addExtraWork(s, c, r, 2 * kMs).iterationNs, TimeNs(10'700'000));
    const ExtraWorkPrediction e = addExtraWork(s, c, r, 4 * kMs);
    QCOMPARE(e.iterationNs, TimeNs(12'700'000));
    QCOMPARE(e.extraNs(), 2 * kMs);
    QCOMPARE(e.ranks[0].endNs, TimeNs(12'700'000));
    QCOMPARE(e.ranks[1].endNs, TimeNs(12'700'000));
}

void TestExtraWork::refusesNegativeWork()
{
    const Schedule s = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 2);
    const ReplayCosts c = twoStageCosts();
    const ReplayResult r = Replay().run(s, c);
    QVERIFY_THROWS_EXCEPTION(Error, addExtraWork(s, c, r, -1));
    QVERIFY_THROWS_EXCEPTION(Error, addExtraWork(s, c, r, kMs, -1));
}

void TestExtraWork::textAndJson()
{
    const Schedule s = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 2);
    const ReplayCosts c = twoStageCosts();
    const ExtraWorkPrediction e = addExtraWork(s, c, Replay().run(s, c), 5 * kMs);
    const std::string text = extraWorkText(e);
    QVERIFY2(text.find("iteration 12.000 ms (+3.000 ms)") != std::string::npos, text.c_str());
    QVERIFY2(text.find("stage 0 3.000 ms, stage 1 0") != std::string::npos, text.c_str());
    const nlohmann::json j = extraWorkToJson(e);
    QCOMPARE(j.at("work_ns").get<int64_t>(), 5 * kMs);
    QCOMPARE(j.at("min_piece_ns").get<int64_t>(), kDefaultMinPieceNs);
    QCOMPARE(j.at("iteration_ns").get<int64_t>(), 12 * kMs);
    QCOMPARE(j.at("extra_ns").get<int64_t>(), 3 * kMs);
    QCOMPARE(j.at("ranks")[0].at("hidden_ns").get<int64_t>(), 3 * kMs);
    QCOMPARE(j.at("ranks")[1].at("overflow_ns").get<int64_t>(), 5 * kMs);
}

QTEST_GUILESS_MAIN(TestExtraWork)
#include "tst_extra_work.moc"
