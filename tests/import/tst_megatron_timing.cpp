// Megatron-LM step timings (MegatronApp's tracer) read as a job: the real
// pp = 4, interleaved v = 4, m = 8 timeline of shared/data/external
// (its README's facts), and small files for what is refused.
#include "ImportFixture.h"
#include "TestSupport.h"
#include "analysis/Analysis.h"
#include "analysis/Verdict.h"
#include "import/Import.h"
#include "import/megatron/MegatronTiming.h"
#include "remote/CostModelWire.h"
#include "store/Store.h"
#include "util/Error.h"
#include "whatif/Levers.h"
#include "whatif/Replay.h"
#include "whatif/WhatIf.h"

#include <QFile>
#include <QtTest>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>

using namespace pipescope;

namespace {


void write(const QString& path, const QByteArray& text)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(text);
}

// One rank of a two-rank 1F1B job: iteration 0 runs F0 F1 B0 B1 (rank 0).
QByteArray twoRankFile(int rank, const char* extra = "")
{
    return QByteArray("[{\"name\": \"iteration\", \"ph\": \"B\", \"pad_before\": 0},\n") +
           "{\"name\": \"forward\", \"ph\": \"B\", \"rel_ts\": 1000},\n"
           "{\"microbatch\": 0, \"model_chunk\": 0, \"pp_rank\": " + QByteArray::number(rank) +
           ", \"name\": \"forward\", \"ph\": \"E\", \"rel_ts\": 5000},\n"
           "{\"name\": \"backward\", \"ph\": \"B\", \"rel_ts\": 20000},\n"
           "{\"microbatch\": 0, \"model_chunk\": 0, \"pp_rank\": " + QByteArray::number(rank) +
           ", \"name\": \"backward\", \"ph\": \"E\", \"rel_ts\": 28000},\n" + extra +
           "{\"name\": \"iteration\", \"ph\": \"E\", \"rel_ts\": 30000, \"duration_wall\": 31000, \"duration_cuda\": 30000}]\n";
}

} // namespace

class TestMegatronTiming : public QObject {
    Q_OBJECT

    // The real job, imported once for the tests that read it.
    QTemporaryDir realDir_;
    std::optional<Trace> real_;
    const Trace& realJob()
    {
        if (!real_)
            real_ = test::importAndLoad({test::externalData("megatron-pp4-interleaved")}, realDir_);
        return *real_;
    }

private slots:
    void detection()
    {
        QVERIFY(looksLikeMegatronTiming("[{\"name\": \"iteration\", \"ph\": \"B\", \"pad_before\": 0}, {"));
        QVERIFY(looksLikeMegatronTiming(" [\n  {\n \"ph\": \"B\", \"name\": \"iteration\"}]"));
        QVERIFY(!looksLikeMegatronTiming("[{\"ph\": \"X\", \"name\": \"gemm\"}]"));
        QVERIFY(!looksLikeMegatronTiming("{\"traceEvents\": []}"));
    }

    // Steps keep their recorded times; iterations start 10 s apart; each step
    // is one annotated range around one kernel; transfers go to the neighbours.
    void smallJob()
    {
        QTemporaryDir dir;
        write(dir.path() + "/benchmark-data-0-pipeline-0-tensor-0.json", twoRankFile(0));
        write(dir.path() + "/benchmark-data-0-pipeline-1-tensor-0.json", twoRankFile(1));
        const Trace t = test::importAndLoad({dir.path().toStdString()}, dir);
        QCOMPARE(t.ranks.size(), size_t(2));
        QCOMPARE(t.sources.front().format, std::string("megatron-timing"));
        std::map<std::string, std::pair<TimeNs, TimeNs>> ranges;
        for (const CpuRange& r : t.cpuRanges)
            if (r.rank == 0)
                ranges[t.str(r.name)] = {r.start, r.end};
        QCOMPARE(ranges["ProfilerStep#0"], (std::pair<TimeNs, TimeNs>{0, 31000}));
        QCOMPARE(ranges["pipescope/forward mb=0 chunk=0"], (std::pair<TimeNs, TimeNs>{1000, 5000}));
        QCOMPARE(ranges["pipescope/backward mb=0 chunk=0"], (std::pair<TimeNs, TimeNs>{20000, 28000}));
        int sends = 0, recvs = 0;
        for (const NcclOp& op : t.ncclOps) {
            QCOMPARE(*op.peer, 1 - op.rank);
            sends += op.kind == Collective::Send;
            recvs += op.kind == Collective::Recv;
        }
        // Rank 0 sends its forward's output and receives its backward's input; rank 1 the reverse.
        QCOMPARE(sends, 2);
        QCOMPARE(recvs, 2);
        const AnalysisResult r = analyze(t);
        QVERIFY(r.pipeline.found);
        QCOMPARE(r.pipeline.pp, 2);
        QCOMPARE(r.pipeline.microbatches, 1);
    }

    void refused()
    {
        QTemporaryDir dir;
        write(dir.path() + "/a.json", twoRankFile(0));
        write(dir.path() + "/b.json", twoRankFile(0));
        try {
            test::importAndLoad({(dir.path() + "/a.json").toStdString(), (dir.path() + "/b.json").toStdString()}, dir);
            QFAIL("two files of rank 0 were accepted");
        } catch (const FormatError& e) {
            QVERIFY2(std::string(e.what()).find("both hold pipeline rank 0") != std::string::npos, e.what());
        }
        QTemporaryDir d2;
        write(d2.path() + "/r.json", twoRankFile(0, "{\"name\": \"forward\", \"ph\": \"E\", \"rel_ts\": 29000, \"microbatch\": 1, "
                                                  "\"model_chunk\": 0, \"pp_rank\": 0},\n"));
        try {
            test::importAndLoad({(d2.path() + "/r.json").toStdString()}, d2);
            QFAIL("an end without its begin was accepted");
        } catch (const FormatError& e) {
            QVERIFY2(std::string(e.what()).find("r.json: a forward end without its begin") != std::string::npos, e.what());
        }
    }

    // The real job: the README's facts.
    void realInterleavedJob()
    {
        PIPESCOPE_REQUIRE_EXTERNAL_DATA();
        const Trace& t = realJob();
        QCOMPARE(t.ranks.size(), size_t(4));
        AnalyzeOptions o;
        o.iteration = 10;
        const AnalysisResult r = analyze(t, o);
        QCOMPARE(r.iterations.size(), size_t(20));
        QVERIFY(r.pipeline.found);
        QCOMPARE(r.pipeline.pp, 4);
        QCOMPARE(r.pipeline.dp, 1);
        QCOMPARE(r.pipeline.chunks, 4);
        QCOMPARE(r.pipeline.microbatches, 8);
        QCOMPARE(scheduleName(r.pipeline.schedule), std::string("interleaved-1f1b"));
        QCOMPARE(r.pipeline.scheduleConfidence, 1.0);
        // 32 forwards and 32 backwards per rank; the last step's end, iteration 10.
        // Times from the iteration's begin record (its ProfilerStep range), as rel_ts counts them.
        TimeNs begin = -1;
        for (const CpuRange& c : t.cpuRanges)
            if (c.rank == 0 && t.str(c.name) == "ProfilerStep#10")
                begin = c.start;
        QCOMPARE(begin, TimeNs(100'000'000'000));
        const double lastEndMs[4] = {679.6, 669.8, 661.1, 651.7};
        for (int rank = 0; rank < 4; ++rank) {
            int f = 0, b = 0;
            TimeNs last = 0;
            for (const Step& s : r.steps)
                if (s.rank == rank && s.iteration == 10) {
                    (s.kind == StepKind::F ? f : b) += 1;
                    last = std::max(last, s.end);
                }
            QCOMPARE(f, 32);
            QCOMPARE(b, 32);
            QVERIFY2(std::abs(static_cast<double>(last - begin) / 1e6 - lastEndMs[rank]) < 0.05,
                     std::to_string(static_cast<double>(last - begin) / 1e6).c_str());
        }
        // Every idle moment has a cause: before a step the rank waited for its
        // neighbour (its receive lasts the wait), never "other".
        TimeNs waited = 0, other = 0;
        for (const RankIdle& ri : r.idle)
            if (ri.iteration == 10) {
                waited += ri.byCause[size_t(BubbleCause::WaitNeighbor)];
                other += ri.byCause[size_t(BubbleCause::Other)];
            }
        QCOMPARE(other, TimeNs(0));
        QVERIFY2(waited > 200'000'000, std::to_string(waited).c_str());
        // The last stage (its last chunk carries the loss) is the bottleneck.
        QCOMPARE(r.imbalance.bottleneckStage, 3);
        const Verdict v = verdict(r, &t);
        QCOMPARE(std::string(toString(v.kind)), std::string("stage-imbalance"));
        QVERIFY2(v.headline.rfind("stage 3 is the bottleneck", 0) == 0, v.headline.c_str());
        // Its last chunk, with the loss, carries the excess: 19.26 ms of backward alone (the README).
        QVERIFY(!v.facts.empty());
        QVERIFY2(v.facts[0].rfind("most of stage 3's excess is its chunk 3 (virtual stage 15 of 16, the last, where the "
                                  "loss is computed)",
                                  0) == 0,
                 v.facts[0].c_str());
    }

    // Replaying each of iterations 5 to 18 from its own steps (each step its
    // recorded length; exchanges as Megatron issues them, over the medium
    // calibration chose, each transfer taking what the iteration's first
    // hand-off took) ends within 3% of the recorded last step, and starts the
    // median step within 5% of the iteration of its recorded start. Waiting
    // on the data alone would end near 577 ms, 15% early.
    void replayReproducesIterations()
    {
        PIPESCOPE_REQUIRE_EXTERNAL_DATA();
        const Trace& t = realJob();
        for (int iteration = 5; iteration <= 18; ++iteration) {
            AnalyzeOptions o;
            o.iteration = iteration;
            const AnalysisResult r = analyze(t, o);
            const whatif::CostModel model = whatif::calibrate(t, r);
            QVERIFY(model.megatronExchanges);
            QVERIFY(model.sharedLinks);
            // The first hand-off: rank 0's first send, about 1.0 ms.
            QVERIFY2(model.p2pLatencyNs > 950'000 && model.p2pLatencyNs < 1'100'000,
                     std::to_string(model.p2pLatencyNs).c_str());
            const whatif::Scenario sc = whatif::measuredScenario(model);
            const Schedule s = whatif::scheduleFor(sc);
            QVERIFY(s.kind == ScheduleKind::Interleaved1F1B);
            whatif::ReplayCosts costs = model.replayCosts(whatif::partitionFor(model, sc, s.stages), s);
            const int P = s.pp, M = s.microbatches;
            costs.microbatchCosts.assign(size_t(s.stages) * size_t(M), whatif::StageCost{});
            const TimeNs begin = r.iterations[size_t(iteration)].start;
            std::map<std::tuple<int, int, int>, TimeNs> recorded; // (F/B, virtual stage, microbatch) -> start
            TimeNs lastEnd = 0;
            for (const Step& st : r.steps) {
                QCOMPARE(st.iteration, iteration);
                const int stage = st.chunk * P + st.rank;
                whatif::StageCost& c = costs.microbatchCosts[size_t(stage) * size_t(M) + size_t(st.microbatch)];
                (st.kind == StepKind::F ? c.forward : c.backward) = st.end - st.start;
                recorded[{st.kind == StepKind::F ? 0 : 1, stage, st.microbatch}] = st.start - begin;
                lastEnd = std::max(lastEnd, st.end - begin);
            }
            QCOMPARE(recorded.size(), size_t(2 * 16 * 8));
            const whatif::ReplayResult res = whatif::Replay().run(s, costs);
            TimeNs replayedEnd = 0;
            std::vector<double> off;
            for (const whatif::RankReplay& rr : res.ranks)
                for (const whatif::TimedAction& a : rr.actions) {
                    replayedEnd = std::max(replayedEnd, a.end);
                    const auto it = recorded.find({a.kind == StepKind::F ? 0 : 1, a.stage, a.microbatch});
                    QVERIFY(it != recorded.end());
                    off.push_back(std::abs(static_cast<double>(a.start - it->second)));
                }
            QCOMPARE(off.size(), recorded.size());
            std::nth_element(off.begin(), off.begin() + off.size() / 2, off.end());
            const double endError = static_cast<double>(replayedEnd) / static_cast<double>(lastEnd) - 1;
            const double startError = off[off.size() / 2] / static_cast<double>(lastEnd);
            QVERIFY2(std::abs(endError) < 0.03 && startError < 0.05,
                     qPrintable(QString("iteration %1: last step %2 ms replayed, %3 ms recorded (%4%); median start "
                                        "%5% of the iteration off")
                                    .arg(iteration)
                                    .arg(static_cast<double>(replayedEnd) / 1e6)
                                    .arg(static_cast<double>(lastEnd) / 1e6)
                                    .arg(endError * 100, 0, 'f', 2)
                                    .arg(startError * 100, 0, 'f', 2)));
            qInfo("iteration %d: replayed %.1f ms, recorded %.1f ms (%+.2f%%), median start off %.2f%% of the iteration",
                  iteration, static_cast<double>(replayedEnd) / 1e6, static_cast<double>(lastEnd) / 1e6, endError * 100,
                  startError * 100);
        }
    }

    // The measured iteration and its replay name idle time alike: fill/drain
    // and waits on a neighbour each within 2 points of rank time (the replay
    // of the measured configuration is 1.2% long; the rest is where the
    // model puts waiting between the two causes).
    void measuredAndReplayedCausesAgree()
    {
        PIPESCOPE_REQUIRE_EXTERNAL_DATA();
        const Trace& t = realJob();
        AnalyzeOptions o;
        o.iteration = 10;
        const AnalysisResult r = analyze(t, o);
        std::array<double, kBubbleCauses> measured{};
        double rankTime = 0;
        for (const RankIdle& ri : r.idle)
            if (ri.iteration == 10) {
                rankTime += static_cast<double>(ri.windowNs);
                for (int c = 0; c < kBubbleCauses; ++c)
                    measured[size_t(c)] += static_cast<double>(ri.byCause[size_t(c)]);
            }
        const whatif::CostModel model = whatif::calibrate(t, r);
        const whatif::Prediction p = whatif::predict(model, whatif::measuredScenario(model));
        const double replayTime = static_cast<double>(p.replay.iterationNs) * static_cast<double>(p.replay.ranks.size());
        for (BubbleCause c : {BubbleCause::FillDrain, BubbleCause::WaitNeighbor, BubbleCause::Other}) {
            const double m = measured[size_t(c)] / rankTime;
            const double q = static_cast<double>(p.replay.bubbleNs[size_t(c)]) / replayTime;
            qInfo("%s: measured %.1f%%, replayed %.1f%% of rank time", std::string(toString(c)).c_str(), m * 100, q * 100);
            QVERIFY2(std::abs(m - q) < 0.02, std::string(toString(c)).c_str());
        }
    }

    // The breadth-first sibling run (megatron-pp4-app): every step is
    // preceded by a 4-13 ms gap (its README), and its ranks run their steps
    // in an order of their own. The replay runs that order with each rank's
    // measured gap before a forward and before a backward (apart for steps
    // whose input the rank made itself: the loss's backward after its
    // forward, the first stage's forwards fed by the data loader), and a
    // remote input costs what the steps that waited for one show: from its
    // producer's end to their start (the README: "about 14 ms" for rank 1's
    // F of chunk 0, microbatch 1). It reproduced these iterations 11.7-13.9%
    // short at first, then -2.7 to +6.6% with a 3 ms link.
    void breadthFirstRunReplaysItsGaps()
    {
        PIPESCOPE_REQUIRE_EXTERNAL_DATA();
        QTemporaryDir dir;
        const Trace t = test::importAndLoad({test::externalData("megatron-pp4-app")}, dir);
        for (int iteration : {3, 5, 7, 10}) {
            AnalyzeOptions o;
            o.iteration = iteration;
            const AnalysisResult r = analyze(t, o);
            const whatif::CostModel model = whatif::calibrate(t, r);
            QVERIFY(model.measuredOrder.has_value());
            QCOMPARE(model.stepGapNs.size(), size_t(4));
            // The gap before a forward, median over the ranks: within the README's 4-13 ms.
            std::vector<TimeNs> forwardGaps;
            for (const auto& g : model.stepGapNs)
                forwardGaps.push_back(g[0]);
            std::sort(forwardGaps.begin(), forwardGaps.end());
            const TimeNs typical = forwardGaps[2];
            QVERIFY2(typical > 4'000'000 && typical < 13'000'000, std::to_string(typical).c_str());
            QVERIFY2(model.p2pLatencyNs > 9'000'000 && model.p2pLatencyNs < 14'000'000, std::to_string(model.p2pLatencyNs).c_str());
            // Rank 3's backward of the loss chunk starts as its forward ends,
            // and rank 0's first forwards run back to back.
            QCOMPARE(model.localStepGapNs.size(), size_t(4));
            QVERIFY2(model.localStepGapNs[3][1] >= 0 && model.localStepGapNs[3][1] < 500'000,
                     std::to_string(model.localStepGapNs[3][1]).c_str());
            QVERIFY2(model.localStepGapNs[0][0] >= 0 && model.localStepGapNs[0][0] < 500'000,
                     std::to_string(model.localStepGapNs[0][0]).c_str());
            const whatif::Prediction p = whatif::predict(model, whatif::measuredScenario(model));
            QVERIFY(p.measuredConfiguration);
            // The app's drag on a remote job replays the model the server sent: the same.
            const whatif::CostModel sent = remote::costModelFromWire(remote::costModelToWire(model));
            QCOMPARE(sent.localStepGapNs, model.localStepGapNs);
            QCOMPARE(whatif::predict(sent, whatif::measuredScenario(sent)).iterationNs(), p.iterationNs());
            const double err = *p.calibrationError();
            qInfo("iteration %d: replayed %.1f ms, measured %.1f ms (%+.1f%%)", iteration, p.iterationNs() / 1e6,
                  *model.measuredIterationNs / 1e6, err * 100);
            QVERIFY2(std::abs(err) < 0.025, std::to_string(err).c_str());
            // The gaps are the steps' own overhead, in the replay as in the
            // measured run, not the pipeline's fill or drain: that is the
            // schedule's own share, (p - 1)(F + B) per rank at a chunk's
            // median step, some 30 ms of a rank's 1.3 s.
            double measuredOverhead = 0, measuredFill = 0, rankTime = 0;
            for (const RankIdle& ri : r.idle)
                if (ri.iteration == iteration) {
                    rankTime += static_cast<double>(ri.windowNs);
                    measuredOverhead += static_cast<double>(ri.byCause[size_t(BubbleCause::StepOverhead)]);
                    measuredFill += static_cast<double>(ri.byCause[size_t(BubbleCause::FillDrain)]);
                }
            const double replayTime = static_cast<double>(p.replay.iterationNs) * static_cast<double>(p.replay.ranks.size());
            const double replayOverhead = static_cast<double>(p.replay.bubbleNs[size_t(BubbleCause::StepOverhead)]) / replayTime;
            qInfo("  step_overhead: measured %.1f%%, replayed %.1f%%; fill_drain measured %.1f%%", measuredOverhead / rankTime * 100,
                  replayOverhead * 100, measuredFill / rankTime * 100);
            QVERIFY(measuredOverhead / rankTime > 0.3);
            // The replay charges part of what the analysis calls overhead to
            // the remote input's measured cost.
            QVERIFY(replayOverhead > 0.25);
            QVERIFY(measuredFill / rankTime < 0.05);
            // Cutting that overhead is the lever, priced by the replay.
            const whatif::Levers levers = whatif::rankLevers(model, r);
            QVERIFY(!levers.levers.empty());
            QCOMPARE(levers.levers.front().kind, std::string("overhead"));
            QVERIFY(levers.levers.front().gain > 0.2);
            // Ranks 0 to 2 wait mostly behind the last virtual stage, the chunk with the loss.
            for (const RankIdle& ri : r.idle)
                if (ri.iteration == iteration && ri.rank <= 2) {
                    QVERIFY(!ri.waitedOn.empty());
                    const auto top = std::max_element(ri.waitedOn.begin(), ri.waitedOn.end(),
                                                      [](const auto& a, const auto& b) { return a.second < b.second; });
                    QCOMPARE(top->first, 15);
                }
            // And the verdict says so, not "balance the stages".
            const Verdict v = verdict(r);
            QCOMPARE(std::string(toString(v.kind)), std::string("host-bound"));
            QVERIFY2(v.headline.starts_with("per-step overhead: "), v.headline.c_str());
        }
        // Every iteration after the warm-up: the replay of 13 of the 19 within
        // 2%, of all within 5% (an iteration's own noise: the measured ones
        // range 1.20-1.43 s), and the typical one (the analysis's default)
        // within 2%.
        int within2 = 0;
        double worst = 0;
        for (int iteration = 1; iteration < 20; ++iteration) {
            AnalyzeOptions o;
            o.iteration = iteration;
            const AnalysisResult r = analyze(t, o);
            const whatif::CostModel model = whatif::calibrate(t, r);
            const double err = *whatif::predict(model, whatif::measuredScenario(model)).calibrationError();
            within2 += std::abs(err) < 0.02;
            worst = std::max(worst, std::abs(err));
        }
        qInfo("iterations 1-19: %d within 2%%, worst %.1f%%", within2, worst * 100);
        QVERIFY2(within2 >= 13, std::to_string(within2).c_str());
        QVERIFY2(worst < 0.05, std::to_string(worst).c_str());
        {
            const AnalysisResult r = analyze(t, AnalyzeOptions{});
            const whatif::CostModel model = whatif::calibrate(t, r);
            const double err = *whatif::predict(model, whatif::measuredScenario(model)).calibrationError();
            QVERIFY2(std::abs(err) < 0.02, std::to_string(err).c_str());
        }
        // The interleaved run's gaps are launch noise beside its exchanges: not modelled.
        AnalyzeOptions o;
        o.iteration = 10;
        const whatif::CostModel il = whatif::calibrate(realJob(), analyze(realJob(), o));
        QVERIFY(il.stepGapNs.empty());
        QVERIFY(!il.measuredOrder);
    }

    // What-ifs on the same calibrated model keep Megatron's exchanges over the
    // shared medium: v = 2 moves half as many messages (7 boundaries x 8
    // microbatches x 2 ways) and, on this medium, beats the measured v = 4;
    // plain 1F1B posts Megatron's blocking batches (3 x 8 x 2 messages).
    void whatIfsKeepTheExchanges()
    {
        PIPESCOPE_REQUIRE_EXTERNAL_DATA();
        const Trace& t = realJob();
        AnalyzeOptions o;
        o.iteration = 10;
        const AnalysisResult r = analyze(t, o);
        const whatif::CostModel model = whatif::calibrate(t, r);
        const whatif::Scenario base = whatif::measuredScenario(model);
        const whatif::Prediction measured = whatif::predict(model, base);
        QVERIFY(measured.replay.blockingExchanges);
        QCOMPARE(measured.replay.transfers.size(), size_t(15 * 8 * 2));
        QVERIFY2(std::abs(*measured.calibrationError()) < 0.03, std::to_string(*measured.calibrationError()).c_str());

        whatif::ScenarioChanges v2;
        v2.v = 2;
        const whatif::Prediction half = whatif::predict(model, whatif::applyChanges(base, v2));
        QVERIFY(half.replay.blockingExchanges);
        QCOMPARE(half.replay.transfers.size(), size_t(7 * 8 * 2));
        QVERIFY(half.iterationNs() < measured.iterationNs());

        whatif::ScenarioChanges plain;
        plain.schedule = "1f1b";
        plain.v = 1;
        const whatif::Prediction one = whatif::predict(model, whatif::applyChanges(base, plain));
        QVERIFY(one.schedule.kind == ScheduleKind::OneFOneB);
        QVERIFY(one.replay.blockingExchanges);
        QCOMPARE(one.replay.transfers.size(), size_t(3 * 8 * 2));
    }
};

QTEST_GUILESS_MAIN(TestMegatronTiming)
#include "tst_megatron_timing.moc"
