// The analysis's rules one step at a time, on inputs small enough to work
// out by hand: how an idle gap is cut into parts by cause, what the verdict
// weighs (the critical path, else GPU time) and which verdict the thresholds
// give, and which iteration is analysed when the user names none.
#include "analysis/detail/BubbleSteps.h"
#include "analysis/detail/IterationSteps.h"
#include "analysis/detail/VerdictSteps.h"
#include "model/ScheduleShare.h"

#include <QtTest>

#include <string>
#include <vector>

using namespace pipescope;
using namespace pipescope::detail;

namespace {

// "cause start-end" per part, in order: one string compares and prints whole.
std::string describe(const std::vector<GapPart>& parts)
{
    std::string s;
    for (const GapPart& p : parts)
        s += (s.empty() ? "" : ", ") + std::string(toString(p.cause)) + " " + std::to_string(p.start) + "-" +
             std::to_string(p.end);
    return s;
}

std::string classified(const Gap& gap, const std::vector<GapOp>& ops, TimeNs launchGap, bool fillRegion)
{
    std::vector<GapPart> parts;
    TimeNs budget = fillRegion ? 1'000'000 : 0;
    classifyGap(gap, ops, launchGap, budget, parts);
    return describe(parts);
}

Gap gap(TimeNs start, TimeNs end, TimeNs dependency, bool beforeKernel, std::optional<TimeNs> nextLaunch)
{
    Gap g;
    g.start = start;
    g.end = end;
    g.dependency = dependency;
    g.beforeKernel = beforeKernel;
    g.nextLaunch = nextLaunch;
    return g;
}

GapOp p2p(TimeNs start, TimeNs end, TimeNs transferNs)
{
    GapOp op;
    op.start = start;
    op.end = end;
    op.p2p = true;
    op.transferNs = transferNs;
    return op;
}

GapOp collective(TimeNs start, TimeNs end, BubbleCause cause)
{
    GapOp op;
    op.start = start;
    op.end = end;
    op.cause = cause;
    return op;
}

size_t at(PathLimiter l) { return static_cast<size_t>(l); }
size_t at(BubbleCause c) { return static_cast<size_t>(c); }

// Compute-paced by the path, a pipeline of four stages with stage 2 the
// busiest at 1.2x the mean, 25% idle with fill/drain leading.
VerdictSignals computePacedPipeline()
{
    VerdictSignals s;
    s.computeShare = 0.7;
    s.busiestShare = 0.8;
    s.pipeline = true;
    s.bottleneck = true;
    s.stages = 4;
    s.maxOverMean = 1.2;
    s.idleFraction = 0.25;
    s.fillDrainLeads = true;
    s.byLimiter[at(PathLimiter::Compute)] = 70;
    s.byLimiter[at(PathLimiter::FillDrain)] = 30;
    return s;
}

// Neither the path (30% compute) nor the busiest rank (40% busy) is paced by compute.
VerdictSignals waiting(std::array<TimeNs, kPathLimiters> byLimiter, bool pipeline)
{
    VerdictSignals s;
    s.computeShare = 0.3;
    s.busiestShare = 0.4;
    s.pipeline = pipeline;
    s.byLimiter = byLimiter;
    return s;
}

QString kindOf(const VerdictSignals& s) { return QString::fromUtf8(toString(decideVerdict(s).kind).data()); }

std::vector<Iteration> lasting(std::initializer_list<TimeNs> durations)
{
    std::vector<Iteration> its;
    TimeNs t = 1000;
    for (TimeNs d : durations) {
        Iteration it;
        it.index = static_cast<int>(its.size());
        it.start = t;
        it.end = t + d;
        t = it.end;
        its.push_back(it);
    }
    return its;
}

} // namespace

class TestAnalysisSteps : public QObject {
    Q_OBJECT
private slots:
    void gapWaitsThenTransfersThenLaunches();
    void gapInFillOrDrain();
    void gapOverCollectives();
    void gapTransferLongerThanTheWait();
    void gapWithinTheSchedulesShare();
    void stepOverheadAfterTheInput();
    void scheduleShareOf1f1b();
    void scheduleShareOfBreadthFirst();
    void scheduleShareDeadlock();
    void launchGapThreshold();
    void basisIsTheCriticalPath();
    void basisIsGpuTimeWithoutAPath();
    void verdictWhenComputePaced();
    void verdictByLimiter();
    void representativeIteration();
};

// Gap [0, 100) before a kernel launched at 80; a receive [10, 60) whose
// bytes need 20 ns was the last communication to end. Before the receive
// began: other; then waiting on the neighbour until 40, when the transfer
// could have started; the transfer to 60; the host launching late to 80;
// the 20 ns left are a launch gap (<= 30 ns).
void TestAnalysisSteps::gapWaitsThenTransfersThenLaunches()
{
    QCOMPARE(classified(gap(0, 100, 60, true, 80), {p2p(10, 60, 20)}, 30, false),
             std::string("other 0-10, wait_neighbor 10-40, p2p_transfer 40-60, host_bound 60-80, launch_gap 80-100"));
}

// The same gap with the schedule's share larger than it: other and waiting
// on the neighbour are fill/drain (one part); the transfer, the host and the
// launch keep their causes.
void TestAnalysisSteps::gapInFillOrDrain()
{
    QCOMPARE(classified(gap(0, 100, 60, true, 80), {p2p(10, 60, 20)}, 30, true),
             std::string("fill_drain 0-40, p2p_transfer 40-60, host_bound 60-80, launch_gap 80-100"));
}

// The gap closing the window (no kernel follows) over two overlapping
// collectives: the second takes over where the first ends; an op starting
// at the dependency plays no part; after the dependency, the rest is other.
void TestAnalysisSteps::gapOverCollectives()
{
    const std::vector<GapOp> ops{collective(0, 30, BubbleCause::DpSync), collective(20, 50, BubbleCause::FillDrain),
                                 collective(50, 90, BubbleCause::DpSync)};
    QCOMPARE(classified(gap(0, 100, 50, false, std::nullopt), ops, 30, false),
             std::string("dp_sync 0-30, fill_drain 30-50, other 50-100"));
    // An op wholly inside the time the previous one explained adds nothing.
    const std::vector<GapOp> nested{collective(0, 50, BubbleCause::DpSync), collective(10, 40, BubbleCause::FillDrain)};
    QCOMPARE(classified(gap(0, 100, 50, false, std::nullopt), nested, 30, false), std::string("dp_sync 0-50, other 50-100"));
}

// A transfer that needs longer than the receive overlaps the gap is all
// transfer: no waiting on the neighbour is left.
void TestAnalysisSteps::gapTransferLongerThanTheWait()
{
    QCOMPARE(classified(gap(20, 70, 60, true, std::nullopt), {p2p(10, 60, 100)}, 5, false),
             std::string("p2p_transfer 20-60, other 60-70"));
}

// No communication: a gap up to the launch-gap threshold before a kernel
// is a launch gap, a longer one other, and so is any gap closing the window.
void TestAnalysisSteps::launchGapThreshold()
{
    QCOMPARE(classified(gap(0, 30, 0, true, std::nullopt), {}, 30, false), std::string("launch_gap 0-30"));
    QCOMPARE(classified(gap(0, 31, 0, true, std::nullopt), {}, 30, false), std::string("other 0-31"));
    QCOMPARE(classified(gap(0, 30, 0, false, std::nullopt), {}, 30, false), std::string("other 0-30"));
    // A launch before the gap's start is not late; one after its end caps at the end.
    QCOMPARE(classified(gap(10, 30, 10, true, 5), {}, 30, false), std::string("launch_gap 10-30"));
    QCOMPARE(classified(gap(10, 30, 10, true, 50), {}, 30, false), std::string("host_bound 10-30"));
}

// With a critical path, the basis is its breakdown as it stands.
void TestAnalysisSteps::basisIsTheCriticalPath()
{
    PathBreakdown pb;
    pb.totalNs = 100;
    pb.byLimiter = {60, 30, 0, 10, 0, 0, 0};
    pb.topRank = {2, 1, -1, 0, -1, -1, -1};
    IdleTotals idle;
    idle.ranks = 1;
    idle.windowNs = 500;
    idle.idleNs = 100;
    const VerdictBasis b = verdictBasis(pb, idle);
    QCOMPARE(b.name, std::string("the critical path"));
    QCOMPARE(b.totalNs, TimeNs(100));
    QCOMPARE(b.byLimiter, pb.byLimiter);
    QCOMPARE(b.topRank, pb.topRank);
}

// Without one, GPU time: the busy time is compute, each idle cause goes to
// its limiter (waiting and transfers to point-to-point, host and launch
// gaps to host), and each limiter but compute names its largest rank.
void TestAnalysisSteps::basisIsGpuTimeWithoutAPath()
{
    PathBreakdown pb;
    IdleTotals idle;
    idle.ranks = 2;
    idle.windowNs = 200;
    idle.idleNs = 80;
    auto& r0 = idle.perRank[0];
    r0[at(BubbleCause::FillDrain)] = 30;
    r0[at(BubbleCause::HostBound)] = 10;
    auto& r1 = idle.perRank[1];
    r1[at(BubbleCause::WaitNeighbor)] = 15;
    r1[at(BubbleCause::P2pTransfer)] = 5;
    r1[at(BubbleCause::LaunchGap)] = 20;
    const VerdictBasis b = verdictBasis(pb, idle);
    QCOMPARE(b.name, std::string("GPU time"));
    QCOMPARE(b.totalNs, TimeNs(200));
    const std::array<TimeNs, kPathLimiters> byLimiter{120, 20, 0, 30, 30, 0, 0};
    QCOMPARE(b.byLimiter, byLimiter);
    const std::array<int, kPathLimiters> topRank{-1, 1, -1, 1, 0, -1, -1};
    QCOMPARE(b.topRank, topRank);
}

void TestAnalysisSteps::verdictWhenComputePaced()
{
    VerdictSignals s = computePacedPipeline();
    QCOMPARE(kindOf(s), QString("stage-imbalance"));
    s.maxOverMean = kVerdictImbalance; // the threshold counts
    QCOMPARE(kindOf(s), QString("stage-imbalance"));
    s.stages = 1; // one stage cannot be out of balance
    QCOMPARE(kindOf(s), QString("pipeline-bubbles"));
    s.stages = 4;
    s.maxOverMean = 1.09;
    QCOMPARE(kindOf(s), QString("pipeline-bubbles"));
    s.idleFraction = kVerdictBubbleIdle;
    QCOMPARE(kindOf(s), QString("pipeline-bubbles"));
    s.idleFraction = 0.19;
    QCOMPARE(kindOf(s), QString("compute-bound"));
    s.idleFraction = 0.25;
    s.fillDrainLeads = false;
    QCOMPARE(kindOf(s), QString("compute-bound"));
    // The busiest rank alone makes the job compute-paced.
    VerdictSignals busy = waiting({30, 70, 0, 0, 0, 0, 0}, false);
    busy.busiestShare = kVerdictComputeShare;
    QCOMPARE(kindOf(busy), QString("compute-bound"));
    // Without a pipeline there is no imbalance or bubble verdict.
    VerdictSignals flat = computePacedPipeline();
    flat.pipeline = false;
    QCOMPARE(kindOf(flat), QString("compute-bound"));
}

// Not compute-paced: the largest non-compute limiter, ties to the earlier.
void TestAnalysisSteps::verdictByLimiter()
{
    const VerdictDecision tie = decideVerdict(waiting({90, 30, 30, 0, 0, 0, 0}, true));
    QCOMPARE(QString::fromUtf8(toString(tie.kind).data()), QString("communication-bound"));
    QVERIFY(tie.limiter == PathLimiter::P2p);
    QCOMPARE(kindOf(waiting({30, 10, 40, 0, 0, 0, 0}, true)), QString("dp-sync"));
    QCOMPARE(kindOf(waiting({30, 10, 0, 40, 0, 0, 0}, true)), QString("host-bound"));
    QCOMPARE(kindOf(waiting({30, 10, 0, 0, 40, 0, 0}, true)), QString("pipeline-bubbles"));
    QCOMPARE(kindOf(waiting({30, 10, 0, 0, 0, 40, 0}, true)), QString("copy-bound"));
    QCOMPARE(kindOf(waiting({30, 10, 0, 0, 0, 0, 40}, true)), QString("idle"));
    // Fill/drain without a pipeline has no cause to name.
    const VerdictDecision fill = decideVerdict(waiting({30, 10, 0, 0, 40, 0, 0}, false));
    QCOMPARE(QString::fromUtf8(toString(fill.kind).data()), QString("idle"));
    QVERIFY(fill.limiter == PathLimiter::FillDrain);
}

void TestAnalysisSteps::representativeIteration()
{
    QCOMPARE(detail::representativeIteration({}), -1);
    QCOMPARE(detail::representativeIteration(lasting({100})), 0);
    // Two: no warm-up is skipped; the shorter of the two middles.
    QCOMPARE(detail::representativeIteration(lasting({50, 10})), 1);
    // Three or more: the first is skipped (it is long here, and would be the median).
    QCOMPARE(detail::representativeIteration(lasting({1000, 10, 20, 30})), 2);
    // 20, 30, 40, 50 after the first: the shorter middle, 30.
    QCOMPARE(detail::representativeIteration(lasting({10, 50, 20, 30, 40})), 3);
    // Equal durations keep their order.
    QCOMPARE(detail::representativeIteration(lasting({5, 30, 30, 30})), 2);
}

// The schedule's own idle before this step is 25 ns: waiting on the
// neighbour is fill/drain up to it, and beyond it stays waiting; the
// budget's unused part is what is left for the next gap.
void TestAnalysisSteps::gapWithinTheSchedulesShare()
{
    std::vector<GapPart> parts;
    TimeNs budget = 25;
    const std::vector<GapOp> ops = {p2p(10, 60, 20)};
    classifyGap(gap(0, 100, 60, true, 80), ops, 30, budget, parts);
    QCOMPARE(describe(parts),
             std::string("fill_drain 0-25, wait_neighbor 25-40, p2p_transfer 40-60, host_bound 60-80, launch_gap 80-100"));
    QCOMPARE(budget, TimeNs(0));
    parts.clear();
    budget = 500;
    classifyGap(gap(0, 100, 0, true, std::nullopt), {}, 30, budget, parts);
    QCOMPARE(describe(parts), std::string("fill_drain 0-100"));
    QCOMPARE(budget, TimeNs(400));
}

// Before a step with no launch recorded: the part after its input arrived is
// the step's overhead. Where the rank's transfers are recorded and none ends
// in the gap, the input was there all along; where they are not, the
// schedule's share comes first. The gap that closes the window after the
// last step waits on the stages still running.
void TestAnalysisSteps::stepOverheadAfterTheInput()
{
    auto run = [](Gap g, TimeNs budget) {
        std::vector<GapPart> parts;
        classifyGap(g, {}, 30, budget, parts);
        return describe(parts);
    };
    Gap g = gap(0, 100, 0, true, std::nullopt);
    g.beforeStep = true;
    g.transfersRecorded = true;
    QCOMPARE(run(g, 40), std::string("step_overhead 0-100"));
    g.transfersRecorded = false;
    QCOMPARE(run(g, 40), std::string("fill_drain 0-40, step_overhead 40-100"));
    Gap tail = gap(0, 100, 0, false, std::nullopt);
    tail.afterLastStep = true;
    QCOMPARE(run(tail, 30), std::string("fill_drain 0-30, wait_neighbor 30-100"));
    // Within a launch gap it stays one.
    QCOMPARE(run(gap(0, 20, 0, true, std::nullopt), 0), std::string("launch_gap 0-20"));
}

namespace {
Action act(StepKind k, int stage, int mb) { return Action{k, stage, mb}; }
}

// 1F1B, p = 2, m = 2, F = 1, B = 2, free communication: rank 0 runs F0 F1
// B0 B1 and idles 2 before B0 (B0 comes back at 4) and 1 before B1; rank 1
// runs F0 B0 F1 B1, idles 1 before F0 and 2 after B1 (rank 0 ends at 9).
// 3 each: (p - 1)(F + B).
void TestAnalysisSteps::scheduleShareOf1f1b()
{
    const std::vector<std::vector<Action>> order = {
        {act(StepKind::F, 0, 0), act(StepKind::F, 0, 1), act(StepKind::B, 0, 0), act(StepKind::B, 0, 1)},
        {act(StepKind::F, 1, 0), act(StepKind::B, 1, 0), act(StepKind::F, 1, 1), act(StepKind::B, 1, 1)}};
    const ScheduleShare s = scheduleShare(order, {1, 2, 0, 0});
    QVERIFY(s.complete);
    QCOMPARE(s.idleBefore[0], (std::vector<TimeNs>{0, 0, 2, 1}));
    QCOMPARE(s.idleBefore[1], (std::vector<TimeNs>{1, 0, 0, 0}));
    QCOMPARE(s.idleAfter, (std::vector<TimeNs>{0, 2}));
}

// Breadth-first over two chunks (virtual stages 0..3 on ranks 0 1 0 1),
// m = 2, F = 1, B = 1: every forward, then every backward. Rank 0 runs
// 0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1 and rank 1 1F0 1F1 3F0 3F1 3B0 3B1 1B0 1B1.
// Rank 1 waits 1 before 1F0; rank 0 waits 2 before 2B0 (rank 1 ends 3F1
// at 5 and 3B0 at 6); rank 1 ends at 9, rank 0 at 10. Each rank idles
// (p - 1)(F + B) = 2, not the whole forward phase before its first backward.
void TestAnalysisSteps::scheduleShareOfBreadthFirst()
{
    const std::vector<std::vector<Action>> order = {
        {act(StepKind::F, 0, 0), act(StepKind::F, 0, 1), act(StepKind::F, 2, 0), act(StepKind::F, 2, 1),
         act(StepKind::B, 2, 0), act(StepKind::B, 2, 1), act(StepKind::B, 0, 0), act(StepKind::B, 0, 1)},
        {act(StepKind::F, 1, 0), act(StepKind::F, 1, 1), act(StepKind::F, 3, 0), act(StepKind::F, 3, 1),
         act(StepKind::B, 3, 0), act(StepKind::B, 3, 1), act(StepKind::B, 1, 0), act(StepKind::B, 1, 1)}};
    const ScheduleShare s = scheduleShare(order, {1, 1, 0, 0});
    QVERIFY(s.complete);
    QCOMPARE(s.idleBefore[0], (std::vector<TimeNs>{0, 0, 0, 0, 2, 0, 0, 0}));
    QCOMPARE(s.idleBefore[1], (std::vector<TimeNs>{1, 0, 0, 0, 0, 0, 0, 0}));
    QCOMPARE(s.idleAfter, (std::vector<TimeNs>{0, 1}));
}

// An order whose first step waits on a step behind it: no share.
void TestAnalysisSteps::scheduleShareDeadlock()
{
    const std::vector<std::vector<Action>> order = {{act(StepKind::B, 0, 0), act(StepKind::F, 0, 0)},
                                                    {act(StepKind::F, 1, 0), act(StepKind::B, 1, 0)}};
    const ScheduleShare s = scheduleShare(order, {1, 2, 0, 0});
    QVERIFY(!s.complete);
    QVERIFY(s.idleBefore.empty());
}

QTEST_GUILESS_MAIN(TestAnalysisSteps)
#include "tst_analysis_steps.moc"
