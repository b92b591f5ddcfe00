// Steps of the what-if engine on their own: the mean step times a measured
// pipeline gives each virtual stage, the time after the last step carried
// as optimizer or all-reduce time, and a replayed rank's idle time named by
// cause. Every number is worked by hand.
#include "analysis/MeasuredPipeline.h"
#include "whatif/CostModel.h"
#include "whatif/Replay.h"
#include "whatif/detail/MeasuredSteps.h"
#include "whatif/detail/ReplaySteps.h"

#include <QtTest>

#include <string>
#include <vector>

using namespace pipescope;
using namespace pipescope::whatif;

namespace {

PipelineStep step(int rank, int chunk, int microbatch, StepKind kind, TimeNs start, TimeNs end)
{
    return PipelineStep{rank, rank, chunk, microbatch, kind, start, end, end - start};
}

// "start-end cause" for each bubble, in order.
std::vector<std::string> bubblesText(const RankReplay& rr)
{
    std::vector<std::string> out;
    for (const Bubble& b : rr.bubbles)
        out.push_back(std::to_string(b.start) + "-" + std::to_string(b.end) + " " + std::string(toString(b.cause)));
    return out;
}

TimeNs total(const RankReplay& rr, BubbleCause cause)
{
    return rr.bubbleNs[static_cast<size_t>(cause)];
}

} // namespace

class TestWhatIfSteps : public QObject {
    Q_OBJECT
private slots:
    void stepTimesAreMeansPerStage();
    void stepTimesFollowChunksToVirtualStages();
    void tailBeyondTheCollectivesIsOptimizer();
    void tailShorterThanMeasuredCutsOptimizerThenAllReduce();
    void tailCountsFromTheIterationStartWithRankStarts();
    void noTailWithoutIterationTime();
    void idleNamedByCause();
    void idleWithoutTimelineKeepsTotalsOnly();
};

// Stage 0: forwards of 10 and 14 ns (mean 12), backwards of 20 and 30 (25).
// Stage 1: one forward of 8 ns and a split backward, I 6 and W 4: backward
// 10, I's share 0.6. A step ending before it starts and one on a stage
// outside the pipeline are left out.
void TestWhatIfSteps::stepTimesAreMeansPerStage()
{
    MeasuredPipeline mp;
    mp.steps = {step(0, 0, 0, StepKind::F, 0, 10),  step(0, 0, 1, StepKind::F, 10, 24),
                step(1, 0, 0, StepKind::F, 10, 18), step(1, 0, 0, StepKind::I, 20, 26),
                step(1, 0, 0, StepKind::W, 26, 30), step(0, 0, 0, StepKind::B, 30, 50),
                step(0, 0, 1, StepKind::B, 50, 80), step(1, 0, 1, StepKind::F, 40, 35),
                step(5, 0, 1, StepKind::F, 0, 1000)};
    const detail::StageStepTimes t = detail::fitStepTimes(mp, detail::MeasuredShape{2, 1, 2, 2, ScheduleKind::OneFOneB});
    QCOMPARE(t.forward, (std::vector<double>{12, 8}));
    QCOMPARE(t.backward, (std::vector<double>{25, 10}));
    QCOMPARE(t.inputShare, (std::vector<double>{-1, 0.6}));
}

// Two ranks of two chunks: interleaved, chunk 1 of rank r is virtual stage
// 2 + r; in a V, chunk 1 of rank r is 3 - r. A stage without steps stays -1.
void TestWhatIfSteps::stepTimesFollowChunksToVirtualStages()
{
    MeasuredPipeline mp;
    mp.steps = {step(0, 0, 0, StepKind::F, 0, 5), step(0, 1, 0, StepKind::F, 10, 17), step(1, 1, 0, StepKind::F, 20, 29),
                step(1, 1, 0, StepKind::B, 30, 48)};
    const detail::StageStepTimes looped =
        detail::fitStepTimes(mp, detail::MeasuredShape{2, 2, 4, 1, ScheduleKind::Interleaved1F1B});
    QCOMPARE(looped.forward, (std::vector<double>{5, -1, 7, 9}));
    QCOMPARE(looped.backward, (std::vector<double>{-1, -1, -1, 18}));
    const detail::StageStepTimes v = detail::fitStepTimes(mp, detail::MeasuredShape{2, 2, 4, 1, ScheduleKind::ZeroBubbleV});
    QCOMPARE(v.forward, (std::vector<double>{5, -1, 9, 7}));
    QCOMPARE(v.backward, (std::vector<double>{-1, -1, 18, -1}));
}

// Steps from 100 to 400 in an iteration of 350: 50 ns after the last step,
// 10 of them the pipeline-wide collective, 20 the all-reduce and 5 the
// optimizer; the 15 nobody names join the optimizer (20).
void TestWhatIfSteps::tailBeyondTheCollectivesIsOptimizer()
{
    MeasuredPipeline mp;
    mp.steps = {step(0, 0, 0, StepKind::F, 100, 200), step(1, 0, 0, StepKind::B, 300, 400)};
    mp.iterationNs = 350;
    mp.dataParallelSyncNs = 20;
    mp.optimizerNs = 5;
    CostModel c;
    c.pipelineSyncNs = 10;
    c.measuredAllReduceNs = 20;
    c.measuredOptimizerNs = 5;
    detail::attributeIterationTail(mp, c);
    QCOMPARE(c.measuredOptimizerNs, std::optional<TimeNs>(20));
    QCOMPARE(c.measuredAllReduceNs, std::optional<TimeNs>(20));
}

// The same 40 ns after the last step, but an all-reduce of 30 and an
// optimizer of 25 measured on other ranks: the optimizer keeps its 25, the
// all-reduce gets the 15 left.
void TestWhatIfSteps::tailShorterThanMeasuredCutsOptimizerThenAllReduce()
{
    MeasuredPipeline mp;
    mp.steps = {step(0, 0, 0, StepKind::F, 100, 200), step(1, 0, 0, StepKind::B, 300, 400)};
    mp.iterationNs = 350;
    mp.dataParallelSyncNs = 30;
    mp.optimizerNs = 25;
    CostModel c;
    c.pipelineSyncNs = 10;
    c.measuredAllReduceNs = 30;
    c.measuredOptimizerNs = 25;
    detail::attributeIterationTail(mp, c);
    QCOMPARE(c.measuredOptimizerNs, std::optional<TimeNs>(25));
    QCOMPARE(c.measuredAllReduceNs, std::optional<TimeNs>(15));
}

// With the ranks' starts the iteration counts from its start (50), not its
// first step (100): the steps fill all 350 ns, so nothing after the last
// step is left for the all-reduce or the optimizer.
void TestWhatIfSteps::tailCountsFromTheIterationStartWithRankStarts()
{
    MeasuredPipeline mp;
    mp.steps = {step(0, 0, 0, StepKind::F, 100, 200), step(1, 0, 0, StepKind::B, 300, 400)};
    mp.iterationNs = 350;
    mp.iterationStart = 50;
    mp.dataParallelSyncNs = 20;
    mp.optimizerNs = 5;
    CostModel c;
    c.pipelineSyncNs = 10;
    c.rankStartNs = {0, 30};
    c.measuredAllReduceNs = 20;
    c.measuredOptimizerNs = 5;
    detail::attributeIterationTail(mp, c);
    QVERIFY(!c.measuredOptimizerNs);
    QVERIFY(!c.measuredAllReduceNs);
}

void TestWhatIfSteps::noTailWithoutIterationTime()
{
    MeasuredPipeline mp;
    mp.steps = {step(0, 0, 0, StepKind::F, 100, 200)};
    mp.optimizerNs = 5;
    CostModel c;
    c.measuredOptimizerNs = 5;
    detail::attributeIterationTail(mp, c);
    QCOMPARE(c.measuredOptimizerNs, std::optional<TimeNs>(5));
    QVERIFY(!c.measuredAllReduceNs);
}

// F0 10..20, B0 30..50, F1 60..70, B1 71..91 with a host gap of 2: the fill
// lasts until B0 begins (30), the drain from F1's end (70). Before F0 and
// in the fill, fill/drain; between B0 and F1, a wait on a neighbour; each
// gap's first 2 ns are the launch gap. Then an all-reduce 91..100, the
// collective 100..104, the optimizer 104..110 and the wait for the last
// rank until 120.
void TestWhatIfSteps::idleNamedByCause()
{
    RankReplay rr;
    rr.actions = {{StepKind::F, 0, 0, 0, 10, 20}, {StepKind::B, 0, 0, 0, 30, 50}, {StepKind::F, 0, 0, 1, 60, 70},
                  {StepKind::B, 0, 0, 1, 71, 91}};
    rr.computeEnd = rr.allReduceStart = 91;
    rr.allReduceEnd = rr.syncStart = 100;
    rr.syncEnd = rr.optimizerStart = 104;
    rr.optimizerEnd = 110;
    detail::classifyIdle(rr, 2, 120, true);
    QCOMPARE(bubblesText(rr), (std::vector<std::string>{"0-10 fill_drain", "20-22 launch_gap", "22-30 fill_drain",
                                                        "50-52 launch_gap", "52-60 wait_neighbor", "70-71 launch_gap",
                                                        "91-100 dp_sync", "100-104 fill_drain", "110-120 fill_drain"}));
    QCOMPARE(total(rr, BubbleCause::FillDrain), TimeNs(32));
    QCOMPARE(total(rr, BubbleCause::LaunchGap), TimeNs(5));
    QCOMPARE(total(rr, BubbleCause::WaitNeighbor), TimeNs(8));
    QCOMPARE(total(rr, BubbleCause::DpSync), TimeNs(9));
    QCOMPARE(total(rr, BubbleCause::P2pTransfer), TimeNs(0));
    QCOMPARE(rr.busyNs, TimeNs(66)); // steps 60 and optimizer 6
}

// A searching replay records no bubbles; the totals are the same.
void TestWhatIfSteps::idleWithoutTimelineKeepsTotalsOnly()
{
    RankReplay rr;
    rr.actions = {{StepKind::F, 0, 0, 0, 10, 20}, {StepKind::B, 0, 0, 0, 30, 50}};
    rr.computeEnd = rr.allReduceStart = rr.allReduceEnd = rr.syncStart = rr.syncEnd = rr.optimizerStart =
        rr.optimizerEnd = 50;
    detail::classifyIdle(rr, 100, 60, false);
    QVERIFY(rr.bubbles.empty());
    // 10 ns before F0 and 10 after the optimizer; the 10 ns gap is all host time.
    QCOMPARE(total(rr, BubbleCause::FillDrain), TimeNs(20));
    QCOMPARE(total(rr, BubbleCause::LaunchGap), TimeNs(10));
    QCOMPARE(rr.busyNs, TimeNs(30));
}

QTEST_GUILESS_MAIN(TestWhatIfSteps)
#include "tst_whatif_steps.moc"
