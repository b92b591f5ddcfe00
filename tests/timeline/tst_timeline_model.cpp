// The typed timeline model: lanes from a trace and a replay, folding, the
// draw list's size, hit testing, navigation, area statistics and search.
#include "SyntheticTrace.h"
#include "analysis/Analysis.h"
#include "timeline/Palette.h"
#include "timeline/TimelineBuild.h"
#include "timeline/TimelineCompare.h"
#include "timeline/TimelineLinks.h"
#include "timeline/TimelineModel.h"

#include <QtTest>

using namespace pipescope;
using namespace pipescope::timeline;

namespace {

Event ev(TimeNs s, TimeNs e, uint8_t code = 0, int32_t name = 0)
{
    Event x;
    x.start = s;
    x.end = e;
    x.code = code;
    x.name = name;
    return x;
}

TimelineModel oneLane(std::vector<Event> events, LaneKind kind = LaneKind::Kernels)
{
    TimelineModel m;
    Lane l;
    l.kind = kind;
    l.events = std::move(events);
    m.lanes.push_back(std::move(l));
    m.finalize();
    return m;
}

} // namespace

class TstTimelineModel : public QObject {
    Q_OBJECT

private slots:
    void eventIsCompact()
    {
        QVERIFY(sizeof(Event) <= 40);
        QVERIFY(sizeof(DrawItem) <= 64);
    }

    // GPU memory in use over time, from the allocator totals the profiler
    // recorded, is a counter track per rank: one event per sample, holding
    // the value in KiB until the next sample; events without totals are not
    // samples. Past 8192 samples each slice of time keeps its highest.
    void memoryCounterTracks()
    {
        test::TraceBuilder tb;
        tb.kernel(0, 7, "gemm", 1'000, 9'000);
        tb.kernel(1, 7, "gemm", 1'000, 9'000);
        Trace t = tb.build();
        auto sample = [&](int rank, TimeNs ts, std::optional<int64_t> total) {
            MemoryEvent e;
            e.rank = rank;
            e.ts = ts;
            e.bytes = 1 << 20;
            e.totalAllocated = total;
            t.memoryEvents.push_back(e);
        };
        sample(0, 3'000, int64_t(3) << 20);
        sample(0, 2'000, int64_t(2) << 20); // out of order: sorted
        sample(0, 4'000, std::nullopt);     // no total: not a sample
        sample(1, 5'000, int64_t(7) << 30);
        for (int i = 0; i < 20'000; ++i) // rank 2: more samples than a lane keeps
            sample(2, 10'000 + i, i == 12'345 ? int64_t(9) << 30 : int64_t(1) << 30);
        const TimelineModel m = buildMeasured(t, analyze(t));
        std::map<int, const Lane*> memory;
        for (const Lane& l : m.lanes)
            if (l.kind == LaneKind::Memory)
                memory[l.rank] = &l;
        QCOMPARE(memory.size(), size_t(3));
        const Lane& r0 = *memory[0];
        QCOMPARE(r0.events.size(), size_t(2));
        QCOMPARE(r0.events[0].start, TimeNs(2'000));
        QCOMPARE(r0.events[0].end, TimeNs(3'000));
        QCOMPARE(r0.events[0].detail, int32_t(2 * 1024));
        QCOMPARE(r0.events[1].detail, int32_t(3 * 1024));
        QCOMPARE(r0.events[1].end, TimeNs(9'000)); // the last sample lasts to the job's end
        QCOMPARE(QString::fromStdString(r0.label), QStringLiteral("memory (peak 3.0 MiB)"));
        QCOMPARE(memory[1]->events.front().detail, int32_t(int64_t(7) << 20));
        const Lane& r2 = *memory[2];
        QVERIFY(r2.events.size() <= 8192);
        QVERIFY(r2.events.size() > 4000);
        int32_t peak = 0;
        for (const Event& e : r2.events)
            peak = std::max(peak, e.detail);
        QCOMPARE(peak, int32_t(int64_t(9) << 20)); // the peak survives
        QCOMPARE(QString::fromStdString(r2.label), QStringLiteral("memory (peak 9.0 GiB)"));
    }

    // Kernels recorded by mangled C++ names read demangled; CUPTI's stream -1,
    // holding only device-wide synchronizations, gets no lane.
    void readableNamesAndNoPseudoStream()
    {
        test::TraceBuilder tb;
        tb.kernel(0, 7, "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE", 1'000, 2'000);
        tb.kernel(0, 7, "ampere_sgemm_128x64_nn", 3'000, 4'000);
        tb.kernel(0, -1, "cudaDeviceSynchronize", 4'000, 5'000, std::nullopt, ActivityKind::Sync);
        const Trace t = tb.build();
        const AnalysisResult r = analyze(t);
        const TimelineModel m = buildMeasured(t, r);
        QStringList names, labels;
        for (const Lane& l : m.lanes) {
            labels << QString::fromStdString(l.label);
            if (l.kind == LaneKind::Kernels)
                for (const Event& e : l.events)
                    names << QString::fromStdString(m.names[size_t(e.name)]);
        }
        QCOMPARE(names, (QStringList{"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "ampere_sgemm_128x64_nn"}));
        QVERIFY2(!labels.join(' ').contains("stream -1"), qPrintable(labels.join(", ")));
        // CPU threads are labelled as the trace names them, else by id.
        test::TraceBuilder named;
        named.kernel(0, 7, "gemm", 1'000, 2'000);
        named.range(0, CpuRangeKind::Annotation, "forward_step", 500, 2'500, 4242);
        named.range(0, CpuRangeKind::Annotation, "optimizer", 3'000, 3'500, 4250);
        Trace nt = named.build();
        nt.threadNames[{0, 4242}] = "thread 4242 (python3)";
        const TimelineModel nm = buildMeasured(nt, analyze(nt));
        QStringList cpu;
        for (const Lane& l : nm.lanes)
            if (l.kind == LaneKind::Cpu)
                cpu << QString::fromStdString(l.label);
        QCOMPARE(cpu, (QStringList{"cpu thread 4242 (python3)", "cpu 4250"}));
        // The analysis still counts the synchronization.
        QCOMPARE(r.kernelCounts[size_t(WorkClass::Sync)], int64_t(1));
    }

    // An area's kernels per name: count, total, min and max of the full
    // kernel durations, most total time first.
    void areaStatsByKernelName()
    {
        test::TraceBuilder tb;
        tb.kernel(0, 7, "gemm", 1'000, 2'000);
        tb.kernel(0, 7, "softmax", 2'500, 3'000);
        tb.kernel(0, 7, "gemm", 4'000, 7'000);
        tb.kernel(0, 7, "gemm", 20'000, 21'000); // outside the area
        const Trace t = tb.build();
        const TimelineModel m = buildMeasured(t, analyze(t));
        std::vector<int> kernelLanes;
        for (size_t i = 0; i < m.lanes.size(); ++i)
            if (m.lanes[i].kind == LaneKind::Kernels)
                kernelLanes.push_back(int(i));
        const AreaStats st = m.areaStats(kernelLanes, 0, 10'000);
        QCOMPARE(st.kernelsByName.size(), size_t(2));
        const NameStats& gemm = st.kernelsByName[0];
        QCOMPARE(QString::fromStdString(m.names[size_t(gemm.name)]), QStringLiteral("gemm"));
        QCOMPARE(gemm.count, int64_t(2));
        QCOMPARE(gemm.totalNs, TimeNs(4'000));
        QCOMPARE(gemm.minNs, TimeNs(1'000));
        QCOMPARE(gemm.maxNs, TimeNs(3'000));
        const NameStats& softmax = st.kernelsByName[1];
        QCOMPARE(QString::fromStdString(m.names[size_t(softmax.name)]), QStringLiteral("softmax"));
        QCOMPARE(softmax.count, int64_t(1));
        QCOMPARE(softmax.totalNs, TimeNs(500));
        QCOMPARE(st.kernelSumNs, TimeNs(4'500));
    }

    // What a folded block stands for, counted from the events themselves.
    void summarizeAGroup()
    {
        TimelineModel m;
        Lane l;
        l.kind = LaneKind::Bubbles;
        for (int i = 0; i < 50; ++i) {
            Event e;
            e.start = i * 10'000;
            e.end = e.start + (i == 17 ? 4'000 : 1'000);
            e.code = static_cast<uint8_t>(i % 5 == 0 ? BubbleCause::WaitNeighbor : BubbleCause::LaunchGap);
            l.events.push_back(e);
        }
        m.lanes.push_back(std::move(l));
        m.finalize();
        const auto g = m.summarize(0, 0, 500'000);
        QCOMPARE(g.count, int64_t(50));
        QCOMPARE(g.busyNs, TimeNs(49 * 1'000 + 4'000));
        QCOMPARE(g.longest, int64_t(17));
        QCOMPARE(g.byCode[size_t(BubbleCause::WaitNeighbor)], TimeNs(10 * 1'000));
        QCOMPARE(g.byCode[size_t(BubbleCause::LaunchGap)], TimeNs(39 * 1'000 + 4'000));
        QVERIFY(g.complete);
        const auto capped = m.summarize(0, 0, 500'000, 10);
        QCOMPARE(capped.count, int64_t(10));
        QVERIFY(!capped.complete);
        QCOMPARE(m.summarize(0, 100'000, 200'000).count, int64_t(10));
    }

    // Compare mode: a baseline's tracks after the job's, shifted, linked to no trace.
    void baselineTracksBesideTheJob()
    {
        auto lane = [](LaneKind kind, int rank, const std::string& label, TimeNs start, int32_t name) {
            Lane l;
            l.kind = kind;
            l.rank = rank;
            l.stage = rank;
            l.label = label;
            Event e;
            e.start = start;
            e.end = start + 1'000;
            e.activity = 7;
            e.name = name;
            e.detail = 3;
            l.events.push_back(e);
            return l;
        };
        TimelineModel job;
        job.names = {"", "gemm"};
        job.lanes.push_back(lane(LaneKind::Kernels, 0, "stream 7 compute", 50'000, 1));
        job.finalize();
        TimelineModel base;
        base.names = {"", "F0", "softmax", "gemm"};
        base.lanes.push_back(lane(LaneKind::Steps, 0, "steps", 10'000, 1));
        base.lanes.push_back(lane(LaneKind::Kernels, 0, "stream 7 compute", 10'000, 3));
        base.lanes.push_back(lane(LaneKind::Cpu, 0, "cpu 1", 10'000, 2));
        base.finalize();
        const TimelineModel m = withBaselineTracks(job, base, 40'000, "");
        QCOMPARE(m.lanes.size(), size_t(3)); // the job's lane, the baseline's steps and stream; no CPU lane
        QVERIFY(!m.lanes[0].baseline);
        QVERIFY(m.lanes[1].baseline && m.lanes[2].baseline);
        QCOMPARE(m.lanes[1].events[0].start, TimeNs(50'000));
        QCOMPARE(m.lanes[1].events[0].activity, -1);
        QCOMPARE(m.lanes[1].events[0].detail, 3);  // a step's iteration stays
        QCOMPARE(m.lanes[2].events[0].detail, -1); // a kernel's comm detail is the baseline's
        QCOMPARE(m.name(m.lanes[1].events[0].name), std::string("F0"));
        QCOMPARE(m.lanes[2].events[0].name, 1); // "gemm" is the job's name already
        QCOMPARE(m.names.size(), size_t(3));
        QCOMPARE(m.start, TimeNs(50'000));
    }

    void lanesFromSyntheticTrace()
    {
        test::PipelineSpec spec;
        spec.stages = 2;
        spec.microbatches = 2;
        spec.commNs = 50'000;
        spec.annotate = true;
        const auto built = test::pipelineTrace(spec);
        const AnalysisResult result = analyze(built.trace);
        QVERIFY(result.pipeline.found);
        const TimelineModel m = buildMeasured(built.trace, result);

        // Rank 0 is stage 0, rank 1 stage 1; within a rank: steps, bubbles,
        // compute stream, communication streams, CPU annotations.
        QStringList shape;
        for (const Lane& l : m.lanes)
            shape << QStringLiteral("r%1 s%2 %3 %4 n=%5")
                         .arg(l.rank)
                         .arg(l.stage)
                         .arg(QString::fromStdString(std::string(toString(l.kind))))
                         .arg(QString::fromStdString(l.label))
                         .arg(l.events.size());
        const QStringList expected = {
            "r0 s0 steps steps n=4",
            "r0 s0 bubbles bubbles n=" + QString::number(m.lanes[1].events.size()),
            "r0 s0 kernels stream 7 compute n=12",
            "r0 s0 kernels stream 20 communication n=2",
            "r0 s0 kernels stream 21 communication n=2",
            "r0 s0 cpu cpu 1 n=4",
            "r1 s1 steps steps n=4",
            "r1 s1 bubbles bubbles n=" + QString::number(m.lanes[7].events.size()),
            "r1 s1 kernels stream 7 compute n=12",
            "r1 s1 kernels stream 20 communication n=2",
            "r1 s1 kernels stream 21 communication n=2",
            "r1 s1 cpu cpu 1 n=4",
        };
        QCOMPARE(shape, expected);
        QVERIFY(m.lanes[1].kind == LaneKind::Bubbles && !m.lanes[1].events.empty());

        // Every activity is on exactly one lane and points back to itself.
        size_t kernels = 0;
        for (const Lane& l : m.lanes)
            if (l.kind == LaneKind::Kernels)
                for (const Event& e : l.events) {
                    const Activity& a = built.trace.activities[static_cast<size_t>(e.activity)];
                    QCOMPARE(e.start, a.start);
                    QCOMPARE(e.end, a.end);
                    QCOMPARE(a.rank, l.rank);
                    QCOMPARE(m.name(e.name), built.trace.str(a.name));
                    ++kernels;
                }
        QCOMPARE(kernels, built.trace.activities.size());

        // Compute kernels carry their step; communication carries bytes and peer.
        const Lane& compute = m.lanes[2];
        QCOMPARE(compute.events[0].step, uint8_t(StepKind::F));
        QCOMPARE(compute.events[0].microbatch, 0);
        QCOMPARE(int(compute.events[0].code), int(WorkClass::Compute));
        const Lane& send = m.lanes[4];
        QCOMPARE(int(send.events[0].code), int(WorkClass::P2p));
        const CommDetail& d = m.comms[static_cast<size_t>(send.events[0].detail)];
        QCOMPARE(d.bytes, int64_t(1 << 20));
        QCOMPARE(d.peer, 1);
        QCOMPARE(m.name(d.op), std::string("Send"));
        // Steps are named by kind and microbatch, bubbles by cause.
        QCOMPARE(m.name(m.lanes[0].events[0].name), std::string("F0"));
        QCOMPARE(m.name(m.lanes[1].events[0].name), std::string(toString(BubbleCause(m.lanes[1].events[0].code))));
        QCOMPARE(m.iterations.size(), result.iterations.size());
        QCOMPARE(m.start, built.trace.activities.front().start < m.lanes[5].events.front().start
                              ? built.trace.activities.front().start
                              : m.lanes[5].events.front().start);
    }

    void lanesFromReplay()
    {
        whatif::Prediction p;
        p.schedule = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 2);
        whatif::ReplayCosts costs;
        costs.stages = {{10, 20, 0, 0}, {10, 20, 0, 0}};
        costs.boundaryBytes = {0};
        p.replay = whatif::Replay().run(p.schedule, costs);
        const TimelineModel m = buildPredicted(p);
        QVERIFY(m.predicted);
        // Per rank: steps, bubbles, and what it sends (zero-cost transfers included).
        QStringList shape;
        for (const Lane& l : m.lanes)
            shape << QStringLiteral("r%1 s%2 %3").arg(l.rank).arg(l.stage).arg(QString::fromStdString(std::string(toString(l.kind))));
        QCOMPARE(shape, QStringList({"r0 s0 steps", "r0 s0 bubbles", "r0 s0 transfers", "r1 s1 steps", "r1 s1 bubbles", "r1 s1 transfers"}));
        QCOMPARE(m.lanes[2].events.size(), size_t(2)); // activations of microbatches 0 and 1
        QCOMPARE(m.comms[size_t(m.lanes[2].events[0].detail)].peer, 1);
        QStringList steps;
        for (const Event& e : m.lanes[0].events)
            steps << QStringLiteral("%1 %2-%3").arg(QString::fromStdString(m.name(e.name))).arg(e.start).arg(e.end);
        QCOMPARE(steps, QStringList({"F0 0-10", "F1 10-20", "B0 40-60", "B1 70-90"}));
        QCOMPARE(m.end, TimeNs(90));
        QCOMPARE(m.iterations.size(), size_t(1));
        QCOMPARE(m.iterations[0].end, TimeNs(90));
        TimeNs idle0 = 0;
        for (const Event& e : m.lanes[1].events)
            idle0 += e.duration();
        QCOMPARE(idle0, TimeNs(90 - 60));
    }

    // What a selection is connected to: transfers to their other end, steps
    // to the step needing their output, bubbles to what their rank waited for.
    void linksOfMeasuredEvents()
    {
        test::PipelineSpec spec;
        spec.stages = 2;
        spec.microbatches = 2;
        spec.commNs = 50'000;
        spec.annotate = true;
        const auto built = test::pipelineTrace(spec);
        const AnalysisResult result = analyze(built.trace);
        const TimelineModel m = buildMeasured(built.trace, result);
        auto stepNamed = [&](int lane, const char* name) {
            const auto& evs = m.lanes[size_t(lane)].events;
            for (size_t i = 0; i < evs.size(); ++i)
                if (m.name(evs[i].name) == name)
                    return EventRef{lane, int64_t(i)};
            return EventRef{};
        };
        auto label = [&](std::optional<EventRef> r) {
            return r ? QStringLiteral("r%1 %2").arg(m.lanes[size_t(r->lane)].rank).arg(QString::fromStdString(m.name(m.event(r->lane, r->event).name)))
                     : QStringLiteral("none");
        };
        // Lanes 0 and 6 are the steps of ranks 0 and 1 (see lanesFromSyntheticTrace).
        QCOMPARE(label(dependentStep(m, stepNamed(0, "F0"))), QStringLiteral("r1 F0"));
        QCOMPARE(label(dependentStep(m, stepNamed(6, "F0"))), QStringLiteral("r1 B0")); // the last stage turns around
        QCOMPARE(label(dependentStep(m, stepNamed(6, "B1"))), QStringLiteral("r0 B1"));
        QCOMPARE(label(dependentStep(m, stepNamed(0, "B1"))), QStringLiteral("none"));
        QCOMPARE(label(precedingStep(m, stepNamed(6, "F1"))), QStringLiteral("r0 F1"));
        QCOMPARE(label(precedingStep(m, stepNamed(0, "B0"))), QStringLiteral("r1 B0"));
        QCOMPARE(label(precedingStep(m, stepNamed(0, "F0"))), QStringLiteral("none"));
        QCOMPARE(label(dependentStep(m, EventRef{2, 0})), QStringLiteral("none")); // a kernel is no step

        // The k-th send from rank 0 to rank 1 is the k-th receive on rank 1 from rank 0, and back.
        std::vector<EventRef> sends, recvs;
        for (size_t li = 0; li < m.lanes.size(); ++li)
            for (size_t i = 0; i < m.lanes[li].events.size(); ++i) {
                const P2pDirection d = p2pDirection(m, EventRef{int(li), int64_t(i)});
                if (d == P2pDirection::Send && m.lanes[li].rank == 0)
                    sends.push_back({int(li), int64_t(i)});
                if (d == P2pDirection::Recv && m.lanes[li].rank == 1)
                    recvs.push_back({int(li), int64_t(i)});
            }
        auto byStart = [&](EventRef a, EventRef b) { return m.event(a.lane, a.event).start < m.event(b.lane, b.event).start; };
        std::sort(sends.begin(), sends.end(), byStart);
        std::sort(recvs.begin(), recvs.end(), byStart);
        QCOMPARE(sends.size(), 2 * result.iterations.size()); // activations of microbatches 0 and 1
        QCOMPARE(recvs.size(), sends.size());
        for (size_t k = 0; k < sends.size(); ++k) {
            QCOMPARE(matchingTransfer(m, sends[k]), std::optional<EventRef>(recvs[k]));
            QCOMPARE(matchingTransfer(m, recvs[k]), std::optional<EventRef>(sends[k]));
        }
        // The activation of microbatch 1 lands before rank 1 starts its F1.
        QVERIFY(m.event(recvs[1].lane, recvs[1].event).end <= m.event(6, stepNamed(6, "F1").event).start);
        QVERIFY(!matchingTransfer(m, EventRef{2, 0})); // compute has no other end

        // Rank 1 idles from the iteration's start until rank 0's F0 reaches it.
        const Lane& idle1 = m.lanes[7];
        QVERIFY(!idle1.events.empty());
        const auto w = bubbleWait(m, EventRef{7, 0});
        QVERIFY(w.has_value());
        QCOMPARE(label(w->next), QStringLiteral("r1 F0"));
        QCOMPARE(label(w->waitedOn), QStringLiteral("r0 F0"));

        // The CPU lane of a thread at a time; none for a thread without annotations.
        const TimeNs t = m.lanes[5].events[0].start;
        QCOMPARE(cpuLaneAt(m, 0, m.lanes[5].tid, t), 5);
        QCOMPARE(cpuLaneAt(m, 0, 424242, t), -1);
    }

    void linksOfPredictedTransfers()
    {
        whatif::Prediction p;
        p.schedule = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 2);
        whatif::ReplayCosts costs;
        costs.stages = {{10, 20, 0, 0}, {10, 20, 0, 0}};
        costs.boundaryBytes = {0};
        p.replay = whatif::Replay().run(p.schedule, costs);
        const TimelineModel m = buildPredicted(p);
        // Lane 2: what rank 0 sends; its second activation feeds rank 1's F1.
        const auto to = matchingTransfer(m, EventRef{2, 1});
        QVERIFY(to.has_value());
        QCOMPARE(m.lanes[size_t(to->lane)].rank, 1);
        QCOMPARE(m.name(m.event(to->lane, to->event).name), std::string("F1"));
        // Rank 1's gradients feed rank 0's backward steps.
        const auto back = matchingTransfer(m, EventRef{5, 0});
        QVERIFY(back.has_value());
        QCOMPARE(m.name(m.event(back->lane, back->event).name), std::string("B0"));
    }

    void foldsNarrowRuns()
    {
        // A wide event, ten 2 ns events 3 ns apart, another wide event; 10 ns per pixel.
        std::vector<Event> e{ev(0, 100, 0)};
        for (int i = 0; i < 10; ++i)
            e.push_back(ev(200 + i * 5, 202 + i * 5, i == 3 ? 1 : 2));
        e.push_back(ev(500, 600, 0));
        const TimelineModel m = oneLane(e);
        const auto list = m.drawList(0, 0, 1000, 100);
        QCOMPARE(list.size(), size_t(3));
        QCOMPARE(list[0].event, int64_t(0));
        QCOMPARE(list[0].x0, 0.0);
        QCOMPARE(list[0].x1, 10.0);
        QCOMPARE(list[1].event, int64_t(-1));
        QCOMPARE(list[1].count, uint32_t(10));
        QCOMPARE(list[1].start, TimeNs(200));
        QCOMPARE(list[1].end, TimeNs(247));
        QCOMPARE(list[1].code, uint8_t(2)); // most of the folded time
        QCOMPARE(list[1].busyFraction, 20.0f / 47.0f);
        QCOMPARE(list[2].event, int64_t(11));

        // Zoomed in to 1 ns per pixel every event is drawn on its own.
        const auto close = m.drawList(0, 190, 250, 60);
        QCOMPARE(close.size(), size_t(10));
        for (const DrawItem& d : close)
            QCOMPARE(d.count, uint32_t(1));
    }

    void foldsFromPyramid()
    {
        // 1024 events of 10 ns every 20 ns: one counted block when the whole lane is 25 px wide.
        std::vector<Event> e;
        for (int i = 0; i < 1024; ++i)
            e.push_back(ev(i * 20, i * 20 + 10, 1));
        const TimelineModel m = oneLane(e);
        QCOMPARE(m.lanes[0].lod.base, TimeNs(128));
        const auto list = m.drawList(0, 0, 20'480, 25);
        QCOMPARE(list.size(), size_t(1));
        QCOMPARE(list[0].count, uint32_t(1024));
        QCOMPARE(list[0].start, TimeNs(0));
        QCOMPARE(list[0].end, TimeNs(20'470));
        QCOMPARE(list[0].code, uint8_t(1));
        QCOMPARE(list[0].busyFraction, float(10'240.0 / 20'470.0));

        // Alternating codes every 4 px keep their shape; within 3 px they fold.
        std::vector<Event> f;
        for (int i = 0; i < 1024; ++i)
            f.push_back(ev(i * 20, i * 20 + 10, uint8_t((i / 128) % 2)));
        const TimelineModel alt = oneLane(f);
        const auto pieces = alt.drawList(0, 0, 20'480, 25);
        QCOMPARE(pieces.size(), size_t(8));
        for (size_t k = 0; k < pieces.size(); ++k) {
            QCOMPARE(pieces[k].code, uint8_t(k % 2));
            QCOMPARE(pieces[k].count, uint32_t(128));
        }
    }

    void drawListBoundedByPixels()
    {
        // A million kernels, every 10 000th one long; the draw list follows the pixels.
        std::vector<Event> e;
        e.reserve(1'000'000);
        TimeNs t = 0;
        for (int i = 0; i < 1'000'000; ++i) {
            const TimeNs d = i % 10'000 == 0 ? 200'000 : 10;
            e.push_back(ev(t, t + d, i % 10'000 == 0 ? 0 : 2));
            t += d + 10;
        }
        const TimelineModel m = oneLane(std::move(e));
        const TimeNs span = m.end - m.start;
        for (int width : {200, 1000, 4000}) {
            const auto list = m.drawList(0, m.start, m.end, width);
            QVERIFY2(list.size() <= static_cast<size_t>(width) * 2 / 3 + 2, qPrintable(QString::number(list.size())));
            uint64_t counted = 0;
            int exactWide = 0;
            for (const DrawItem& d : list) {
                counted += d.count;
                if (d.event >= 0 && m.event(0, d.event).duration() == 200'000)
                    ++exactWide;
            }
            QCOMPARE(counted, uint64_t(1'000'000));
            // Long kernels are drawn exactly once they are three pixels wide.
            if (200'000.0 * width / static_cast<double>(span) >= 3.0)
                QCOMPARE(exactWide, 100);
        }
        // A window of 200 ns around one short kernel shows it exactly.
        const Event& k = m.event(0, 500'001);
        const auto near = m.drawList(0, k.start - 100, k.start + 100, 400);
        bool found = false;
        for (const DrawItem& d : near)
            found = found || d.event == 500'001;
        QVERIFY(found);
    }

    void hitTestAndNavigation()
    {
        const TimelineModel m = oneLane({ev(0, 100), ev(200, 300), ev(250, 260)});
        QCOMPARE(m.hitTest(0, 50), int64_t(0));
        QCOMPARE(m.hitTest(0, 100), int64_t(-1));
        QCOMPARE(m.hitTest(0, 105, 10), int64_t(0));
        QCOMPARE(m.hitTest(0, 150, 10), int64_t(-1));
        QCOMPARE(m.hitTest(0, 195, 10), int64_t(1));
        QCOMPARE(m.hitTest(0, 255), int64_t(2)); // the inner of two overlapping events
        QCOMPARE(m.hitTest(0, 270), int64_t(1));
        QCOMPARE(m.hitTest(0, -5, 10), int64_t(0));

        QCOMPARE(m.nextEvent(0, -1), int64_t(0));
        QCOMPARE(m.nextEvent(0, 0), int64_t(1));
        QCOMPARE(m.nextEvent(0, 250), int64_t(-1));
        QCOMPARE(m.previousEvent(0, 0), int64_t(-1));
        QCOMPARE(m.previousEvent(0, 200), int64_t(0));
        QCOMPARE(m.previousEvent(0, 201), int64_t(1));
    }

    void areaStatistics()
    {
        TimelineModel m;
        Lane steps, bubbles, kernels;
        steps.kind = LaneKind::Steps;
        steps.events = {ev(0, 150, uint8_t(StepKind::F))};
        bubbles.kind = LaneKind::Bubbles;
        bubbles.events = {ev(150, 200, uint8_t(BubbleCause::WaitNeighbor))};
        kernels.kind = LaneKind::Kernels;
        kernels.events = {ev(0, 100, uint8_t(WorkClass::Compute)), ev(100, 150, uint8_t(WorkClass::P2p)),
                          ev(200, 400, uint8_t(WorkClass::Compute))};
        m.lanes = {steps, bubbles, kernels};
        m.finalize();
        const std::vector<int> all{0, 1, 2};
        const AreaStats s = m.areaStats(all, 50, 250);
        QCOMPARE(s.classNs[size_t(WorkClass::Compute)], TimeNs(100));
        QCOMPARE(s.classCount[size_t(WorkClass::Compute)], int64_t(2));
        QCOMPARE(s.classNs[size_t(WorkClass::P2p)], TimeNs(50));
        QCOMPARE(s.classCount[size_t(WorkClass::P2p)], int64_t(1));
        QCOMPARE(s.stepNs[size_t(StepKind::F)], TimeNs(100));
        QCOMPARE(s.idleNs[size_t(BubbleCause::WaitNeighbor)], TimeNs(50));
        QCOMPARE(s.idleCount[size_t(BubbleCause::WaitNeighbor)], int64_t(1));
        QCOMPARE(s.kernels, int64_t(3));
        QCOMPARE(s.kernelSumNs, TimeNs(350));
        QCOMPARE(s.kernelMinNs, TimeNs(50));
        QCOMPARE(s.kernelMaxNs, TimeNs(200));
        QCOMPARE(s.kernelAvgNs, 350.0 / 3.0);
        const std::vector<int> one{2};
        QCOMPARE(m.areaStats(one, 400, 500).kernels, int64_t(0));
    }

    void searchByNames()
    {
        TimelineModel m;
        m.names = {"", "sm90_gemm_0", "ncclDevKernel_SendRecv(ncclDevComm*)", "elementwise_kernel", "SM90_GEMM_1"};
        Lane a, b;
        a.events = {ev(0, 10, 0, 1), ev(10, 20, 0, 2), ev(20, 30, 0, 3)};
        b.events = {ev(0, 10, 0, 4), ev(10, 20, 0, 2), ev(30, 40, 0, 1)};
        m.lanes = {a, b};
        m.finalize();
        auto s = m.search("gemm", false);
        QCOMPARE(s.total, int64_t(3));
        QCOMPARE(s.perLane[0], std::vector<int64_t>({0}));
        QCOMPARE(s.perLane[1], std::vector<int64_t>({0, 2}));
        QCOMPARE(m.search("gemm", false, true).total, int64_t(2));
        s = m.search("^nccl.*SendRecv", true);
        QCOMPARE(s.total, int64_t(2));
        QCOMPARE(s.perLane[1], std::vector<int64_t>({1}));
        QCOMPARE(m.search("", false).total, int64_t(0));
        s = m.search("(gemm", true);
        QVERIFY(!s.error.empty());
        QCOMPARE(s.total, int64_t(0));
    }

    void paletteMatchesTheReport()
    {
        QCOMPARE(stepColor(StepKind::F).r, uint8_t(0x4e));
        QCOMPARE(causeColor(BubbleCause::FillDrain).r, uint8_t(0xe1));
        QCOMPARE(classColor(WorkClass::Collective).b, uint8_t(0xb8));
        QCOMPARE(microbatchTint(stepColor(StepKind::F), 0).g, stepColor(StepKind::F).g);
        QVERIFY(microbatchTint(stepColor(StepKind::F), 1).g > stepColor(StepKind::F).g);
    }
};

QTEST_GUILESS_MAIN(TstTimelineModel)
#include "tst_timeline_model.moc"
