// The named steps behind the timeline and the views beside it: the enclosing
// step of each kernel, the folding of narrow events into one block, HTA's
// split of a stream's idle time, and the report's gathering of each rank's
// rows over a window.
#include "analysis/detail/HtaSteps.h"
#include "report/detail/TimelineSteps.h"
#include "timeline/detail/TimelineSteps.h"

#include <QtTest>

using namespace pipescope;
using namespace pipescope::timeline;

namespace {

Step step(int rank, StepKind kind, int microbatch, TimeNs start, TimeNs end)
{
    Step s;
    s.rank = rank;
    s.kind = kind;
    s.microbatch = microbatch;
    s.start = start;
    s.end = end;
    return s;
}

Event ev(TimeNs s, TimeNs e, uint8_t code)
{
    Event x;
    x.start = s;
    x.end = e;
    x.code = code;
    return x;
}

Lane lane(LaneKind kind, int rank, std::vector<Event> events)
{
    Lane l;
    l.kind = kind;
    l.rank = rank;
    l.events = std::move(events);
    return l;
}

std::vector<TimeNs> starts(const Lane& l)
{
    std::vector<TimeNs> v;
    for (const Event& e : l.events)
        v.push_back(e.start);
    return v;
}

constexpr uint8_t kCompute = static_cast<uint8_t>(WorkClass::Compute);
constexpr uint8_t kP2p = static_cast<uint8_t>(WorkClass::P2p);
constexpr uint8_t kCollective = static_cast<uint8_t>(WorkClass::Collective);

} // namespace

class TstTimelineSteps : public QObject {
    Q_OBJECT

private slots:
    // A kernel's step is the last step of its rank that starts at or before
    // it, while that step still runs; the answer is the same when the
    // kernels come out of order or from another rank in between.
    void enclosingStepFollowsTheTraceOrder()
    {
        const std::vector<Step> steps = {step(0, StepKind::F, 0, 0, 100), step(0, StepKind::B, 0, 150, 300),
                                         step(0, StepKind::F, 1, 300, 400)};
        const std::map<int, std::vector<const Step*>> stepsOfRank = {{0, {&steps[0], &steps[1], &steps[2]}}};
        timeline::detail::StepCursor cursor(stepsOfRank);
        QCOMPARE(cursor.enclosing(0, 50), &steps[0]);
        QCOMPARE(cursor.enclosing(0, 100), static_cast<const Step*>(nullptr)); // step 0 ended at 100
        QCOMPARE(cursor.enclosing(0, 120), static_cast<const Step*>(nullptr));
        QCOMPARE(cursor.enclosing(0, 150), &steps[1]);
        QCOMPARE(cursor.enclosing(0, 300), &steps[2]); // the step starting there, not the one ending there
        QCOMPARE(cursor.enclosing(1, 310), static_cast<const Step*>(nullptr)); // rank 1 has no steps
        QCOMPARE(cursor.enclosing(0, 60), &steps[0]);  // earlier again: found by search
        QCOMPARE(cursor.enclosing(0, 399), &steps[2]);
        QCOMPARE(cursor.enclosing(0, 400), static_cast<const Step*>(nullptr));
    }

    // Narrow events and short gaps fold into one block; an event inside the
    // block adds nothing, an overlapping one only its part past the block,
    // and a gap of foldNs ends the block.
    void narrowEventsFoldUntilAGap()
    {
        const Lane l = lane(LaneKind::Kernels, 0, {ev(0, 2, 1), ev(3, 5, 1), ev(3, 4, 3), ev(4, 6, 2), ev(16, 18, 1)});
        const timeline::detail::Fold f = timeline::detail::foldNarrowEvents(l, 0, 0, 1'000, 10);
        QCOMPARE(f.end, TimeNs(6));
        QCOMPARE(f.busy, TimeNs(5));
        const std::array<TimeNs, kMaxCodes> codes{0, 4, 1, 0, 0, 0, 0, 0};
        QCOMPARE(f.codeNs, codes);

        // Drawn from a later point than its first event's start (an earlier block ended there).
        const timeline::detail::Fold late = timeline::detail::foldNarrowEvents(l, 1, 4, 1'000, 10);
        QCOMPARE(late.end, TimeNs(6));
        QCOMPARE(late.busy, TimeNs(2));
    }

    // A block foldNs wide ends where the dominant code changes; a wide event
    // or an event starting at the query's end ends it too.
    void foldingStopsAtACodeChangeAWideEventOrTheEnd()
    {
        const Lane codes = lane(LaneKind::Kernels, 0, {ev(0, 3, 1), ev(3, 5, 1), ev(5, 7, 2)});
        const timeline::detail::Fold byCode = timeline::detail::foldNarrowEvents(codes, 0, 0, 1'000, 4);
        QCOMPARE(byCode.end, TimeNs(5));
        QCOMPARE(byCode.busy, TimeNs(5));
        QCOMPARE(byCode.codeNs[1], TimeNs(5));
        QCOMPARE(byCode.codeNs[2], TimeNs(0));

        const Lane wide = lane(LaneKind::Kernels, 0, {ev(0, 1, 1), ev(2, 3, 2), ev(3, 13, 2)});
        QCOMPARE(timeline::detail::foldNarrowEvents(wide, 0, 0, 1'000, 4).end, TimeNs(3));
        QCOMPARE(timeline::detail::foldNarrowEvents(wide, 0, 0, 2, 4).end, TimeNs(1));
    }

    // HTA's idle time of a stream: a gap before work launched after the
    // previous work ended waits for the host; otherwise a gap under 30 us
    // waits for kernels and a longer one is other; overlap counts negative.
    void streamGapsSplitAsHtaDoes()
    {
        pipescope::detail::HtaStreamGaps g;
        g.add(0, 10, std::nullopt); // the first: no gap
        QVERIFY(g.any);
        g.add(15, 20, TimeNs(5)); // launched before the previous end: kernel wait 5
        g.add(100'000, 100'010, TimeNs(50'000)); // launched after it: host wait
        g.add(200'000, 200'005, std::nullopt);   // 99'990 without a launch: other
        g.add(199'000, 199'500, std::nullopt);   // starts 1'005 before the previous end
        QCOMPARE(g.idle.kernelWaitNs, TimeNs(5 - 1'005));
        QCOMPARE(g.idle.hostWaitNs, TimeNs(99'980));
        QCOMPARE(g.idle.otherNs, TimeNs(99'990));
        QCOMPARE(g.prevEnd, TimeNs(199'500));
    }

    // Each rank in lane order with its steps and bubbles lanes, and its
    // kernels overlapping the window gathered into a communication lane and
    // a compute lane, each made when the rank's first such kernel is found.
    void rankRowsGatherTheWindowsKernels()
    {
        TimelineModel m;
        m.lanes.push_back(lane(LaneKind::Steps, 0, {ev(0, 40, 0)}));
        m.lanes.push_back(lane(LaneKind::Bubbles, 0, {ev(40, 50, 0)}));
        m.lanes.push_back(lane(LaneKind::Kernels, 0,
                               {ev(0, 10, kCompute), ev(5, 15, kP2p), ev(20, 30, kCompute), ev(100, 110, kCollective)}));
        m.lanes.push_back(lane(LaneKind::Kernels, 1, {ev(2, 8, kCompute), ev(9, 12, kCompute)}));
        m.lanes.push_back(lane(LaneKind::Kernels, 1, {ev(50, 60, kCollective)}));
        m.lanes.push_back(lane(LaneKind::Cpu, 1, {ev(0, 90, 0)}));
        m.lanes[3].stage = 1;
        m.lanes[3].replica = 2;
        m.finalize();

        const auto g = report::detail::gatherRankRows(m, 8, 100);
        QCOMPARE(g.ranks.size(), size_t(2));
        const auto& r0 = g.ranks[0];
        QCOMPARE((std::array<int, 7>{r0.rank, r0.stage, r0.replica, r0.steps, r0.bubbles, r0.comm, r0.busy}),
                 (std::array<int, 7>{0, -1, 0, 0, 1, 0, 1}));
        const auto& r1 = g.ranks[1];
        QCOMPARE((std::array<int, 7>{r1.rank, r1.stage, r1.replica, r1.steps, r1.bubbles, r1.comm, r1.busy}),
                 (std::array<int, 7>{1, 1, 2, -1, -1, 3, 2}));
        QCOMPARE(g.window.lanes.size(), size_t(4));
        // Rank 0: its transfer, then its compute ending after the window's start;
        // the collective starting at the window's end is left out.
        QCOMPARE(starts(g.window.lanes[0]), (std::vector<TimeNs>{5}));
        QCOMPARE(starts(g.window.lanes[1]), (std::vector<TimeNs>{0, 20}));
        // Rank 1: compute from its first kernel lane (the kernel ending at 8 is out), then its collective.
        QCOMPARE(starts(g.window.lanes[2]), (std::vector<TimeNs>{9}));
        QCOMPARE(starts(g.window.lanes[3]), (std::vector<TimeNs>{50}));
        QCOMPARE(g.window.lanes[2].rank, 1);
        QVERIFY(g.window.lanes[3].kind == LaneKind::Kernels);
        QCOMPARE(g.window.start, TimeNs(0));
        QCOMPARE(g.window.end, TimeNs(60));
    }
};

QTEST_GUILESS_MAIN(TstTimelineSteps)
#include "tst_timeline_steps.moc"
