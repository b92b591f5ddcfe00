// The verdict line: hand-built pipelines whose limiter is known, the bundled
// real capture, and the thresholds of docs/analysis.md section 9.
#include "SyntheticTrace.h"
#include "analysis/Analysis.h"
#include "analysis/AnalysisJson.h"
#include "analysis/Verdict.h"
#include "store/Store.h"

#include <QtTest>

using namespace pipescope;
using namespace pipescope::test;

namespace {

const std::string kCapture = std::string(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";

AnalysisResult analyzed(const PipelineSpec& spec) { return analyze(pipelineTrace(spec).trace); }

TimeNs ns(PathLimiter l, const PathBreakdown& pb) { return pb.byLimiter[static_cast<size_t>(l)]; }

} // namespace

class TestVerdict : public QObject {
    Q_OBJECT
private slots:
    void realCaptureIsCommunicationBound();
    void balancedPipelineIsBubbles();
    void slowStageIsBottleneck();
    void imbalanceThreshold_data();
    void imbalanceThreshold();
    void slowTransfersAreCommunicationBound();
    void hostStallsAreHostBound();
    void slowAllReduceIsDpSync();
    void manyMicrobatchesIsComputeBound();
    void noIterationIsNoVerdict();
    void pathBreakdownTilesThePath();
    void traceFacts();
    void json();
};

// The bundled capture: four tiny stages sharing one GPU, so compute is a
// sliver of the iteration and the receives dominate the critical path.
void TestVerdict::realCaptureIsCommunicationBound()
{
    Store store(kCapture);
    const Trace trace = store.load();
    const AnalysisResult r = analyze(trace);
    const Verdict v = verdict(r);
    QCOMPARE(std::string(toString(v.kind)), std::string("communication-bound"));
    QCOMPARE(v.headline, std::string("communication-bound: 77% of the critical path (65.013 ms of 84.877 ms) is point-to-point "
                                     "communication, most of it on rank 1 (stage 1)"));
    QCOMPARE(v.lossNs, TimeNs(65'012'733));
    QVERIFY(v.facts.size() >= 5);
    QCOMPARE(v.facts[0], std::string("iteration 2: 84.877 ms on 4 ranks; critical path in 597 segments"));
    // The path's idle is no fill/drain of the schedule's own: with steps of a
    // few microseconds the schedule idles a rank for almost nothing. Its 13%
    // are idle no operation explains: ranks 1 to 3 before their first
    // receive was posted, rank 0 between its last step and the loss all-reduce.
    QCOMPARE(v.facts[1], std::string("the critical path: point-to-point 77%, other idle 13%, collectives 6%, compute 3%, host 1%, "
                                     "fill/drain <1%, copies <1%"));
    // The loss all-reduce over the four stages is drain (dp = 1: no data-parallel sync).
    QCOMPARE(v.facts[2], std::string("GPU idle: 98% of GPU time; wait_neighbor 74 points, fill_drain 17 points, other 5 points"));
    QCOMPARE(v.facts[3], std::string("pipeline: p=4, dp=1, v=1, m=8, schedule 1f1b (confidence 100%), ideal bubble 27%; "
                                       "stages from process_group"));
    // Stage 3 is 1.26x the mean, but with compute at 3% of the path it is not what limits the job.
    QVERIFY(r.imbalance.maxOverMean > kVerdictImbalance);
}

// Equal stages, free communication, p=4, m=8: every rank idles 3 of 11
// F+B slots (9 ms of 33 ms), all of it fill and drain, exactly the ideal.
void TestVerdict::balancedPipelineIsBubbles()
{
    const AnalysisResult r = analyzed(PipelineSpec{});
    const Verdict v = verdict(r);
    QCOMPARE(std::string(toString(v.kind)), std::string("pipeline-bubbles"));
    QCOMPARE(v.headline, std::string("pipeline bubbles: 27% of GPU time idle, 27 points of it fill/drain (ideal for p=4, m=8 is 27%)"));
    QCOMPARE(v.lossNs, TimeNs(9'000'000)); // per rank: 3 x (1 ms + 2 ms)
    QCOMPARE(v.facts[1], std::string("the critical path: compute 73%, point-to-point 27%"));
}

// Stage 2 runs 1.4x slower: F+B 4.2 ms against a mean of 3.3 ms (1.27x).
// Busy 33.6 ms against a mean of 26.4 ms would suggest 7.2 ms, but the
// iteration (41.4 ms) is only 5.1 ms above the balanced lower bound
// (26.4 / (8/11) = 36.3 ms), which caps the estimate.
void TestVerdict::slowStageIsBottleneck()
{
    PipelineSpec spec;
    spec.slowdown[{0, 2}] = 1.4;
    const AnalysisResult r = analyzed(spec);
    QCOMPARE(r.imbalance.iterationNs, TimeNs(41'400'000));
    QCOMPARE(r.imbalance.balancedLowerBoundNs, TimeNs(36'300'000));
    const Verdict v = verdict(r);
    QCOMPARE(std::string(toString(v.kind)), std::string("stage-imbalance"));
    QCOMPARE(v.headline, std::string("stage 2 is the bottleneck: its F+B per microbatch is 1.27x the mean; "
                                     "balancing the stages could save ~5.100 ms per iteration"));
    QCOMPARE(v.lossNs, TimeNs(5'100'000));
    QCOMPARE(v.facts[4], std::string("busiest stage 2: busy 1.27x the mean; iteration 41.400 ms, balanced-partition lower bound 36.300 ms"));
}

void TestVerdict::imbalanceThreshold_data()
{
    QTest::addColumn<double>("slowdown");
    QTest::addColumn<QString>("kind");
    // busiest / mean = s / ((3 + s) / 4)
    QTest::newRow("1.10: 1.07x the mean") << 1.10 << "pipeline-bubbles";
    QTest::newRow("1.15: 1.11x the mean") << 1.15 << "stage-imbalance";
    QTest::newRow("2.00: 1.60x the mean") << 2.00 << "stage-imbalance";
    // The path then runs mostly through receives waiting on stage 2 (31 of 55 ms
    // at 2x), but stage 2 computes 87% of the iteration: it, not the network, paces the job.
    QTest::newRow("3.00: 2.00x the mean") << 3.00 << "stage-imbalance";
}

void TestVerdict::imbalanceThreshold()
{
    QFETCH(double, slowdown);
    QFETCH(QString, kind);
    PipelineSpec spec;
    spec.slowdown[{0, 2}] = slowdown;
    const AnalysisResult r = analyzed(spec);
    QCOMPARE(r.imbalance.maxOverMean, slowdown / ((3 + slowdown) / 4));
    QCOMPARE(QString::fromStdString(std::string(toString(verdict(r).kind))), kind);
}

// 5 ms transfers against 3 ms of F+B: 95 of the path's 128 ms are receives.
void TestVerdict::slowTransfersAreCommunicationBound()
{
    PipelineSpec spec;
    spec.commNs = 5'000'000;
    const Verdict v = verdict(analyzed(spec));
    QCOMPARE(std::string(toString(v.kind)), std::string("communication-bound"));
    QCOMPARE(v.headline, std::string("communication-bound: 74% of the critical path (95.000 ms of 128.000 ms) is point-to-point "
                                     "communication, most of it on rank 2 (stage 2)"));
    QCOMPARE(v.lossNs, TimeNs(95'000'000));
}

// Every step's launch reaches the GPU 3 ms late on every rank: 16 stalls of
// rank 0 lie on the path, 48 ms of idle whose bubbles say host_bound.
void TestVerdict::hostStallsAreHostBound()
{
    PipelineSpec spec;
    for (int rank = 0; rank < 4; ++rank)
        for (int step = 0; step < 16; ++step)
            spec.hostStall[{rank, step, 0}] = 3'000'000;
    const AnalysisResult r = analyzed(spec);
    QCOMPARE(r.criticalPath.byKind.at("idle"), TimeNs(48'000'000));
    const Verdict v = verdict(r);
    QCOMPARE(std::string(toString(v.kind)), std::string("host-bound"));
    QCOMPARE(v.headline, std::string("host-bound: 48% of the critical path (48.000 ms of 99.000 ms) is the GPU waiting for the host "
                                     "to launch work, most of it on rank 0 (stage 0)"));
    QCOMPARE(v.lossNs, TimeNs(48'000'000));
}

// Two replicas, an 80 ms gradient all-reduce per stage after 33 ms of pipeline.
void TestVerdict::slowAllReduceIsDpSync()
{
    PipelineSpec spec;
    spec.replicas = 2;
    spec.allReduceNs = 80'000'000;
    const Verdict v = verdict(analyzed(spec));
    QCOMPARE(std::string(toString(v.kind)), std::string("dp-sync"));
    QCOMPARE(v.headline, std::string("data-parallel sync: 71% of the critical path (80.000 ms of 113.000 ms) is collectives "
                                     "(gradient all-reduce and the like), most of it on rank 0 (stage 0)"));
    QCOMPARE(v.lossNs, TimeNs(80'000'000));
}

// p=2, m=64: fill/drain is 1/65 of the iteration (3 ms of 195 ms per rank),
// under the 20% at which bubbles become the verdict.
void TestVerdict::manyMicrobatchesIsComputeBound()
{
    PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 64;
    const Verdict v = verdict(analyzed(spec));
    QCOMPARE(std::string(toString(v.kind)), std::string("compute-bound"));
    QCOMPARE(v.headline, std::string("compute-bound: 98% of GPU time is compute, the busiest stage 1.00x the mean, 98% of the critical path"));
    QCOMPARE(v.lossNs, TimeNs(3'000'000));
}

void TestVerdict::noIterationIsNoVerdict()
{
    AnalysisResult r;
    r.warnings.push_back({"no_iterations", "no iteration markers"});
    const Verdict v = verdict(r);
    QCOMPARE(std::string(toString(v.kind)), std::string("none"));
    QCOMPARE(v.headline, std::string("no verdict: no iteration with GPU work was analysed"));
    QCOMPARE(v.lossNs, TimeNs(0));
    QCOMPARE(v.facts, std::vector<std::string>{"no iteration markers"});
}

// Every nanosecond of the path lands in exactly one limiter.
void TestVerdict::pathBreakdownTilesThePath()
{
    Store store(kCapture);
    const AnalysisResult r = analyze(store.load());
    const PathBreakdown pb = pathBreakdown(r);
    TimeNs sum = 0;
    for (TimeNs v : pb.byLimiter)
        sum += v;
    QCOMPARE(pb.totalNs, r.criticalPath.end - r.criticalPath.start);
    QCOMPARE(sum, pb.totalNs);
    // Path kinds map one to one onto the limiters that are not idle.
    QCOMPARE(ns(PathLimiter::P2p, pb) >= r.criticalPath.byKind.at("p2p"), true);
    QCOMPARE(ns(PathLimiter::Compute, pb), r.criticalPath.byKind.at("F") + r.criticalPath.byKind.at("B") + r.criticalPath.byKind.at("compute"));
    QCOMPARE(ns(PathLimiter::Copy, pb), r.criticalPath.byKind.at("memcpy") + r.criticalPath.byKind.at("memset"));
}

void TestVerdict::traceFacts()
{
    BuiltPipeline built = pipelineTrace(PipelineSpec{});
    built.trace.meta["simulated"] = "1";
    built.trace.diagnostics.push_back({std::nullopt, Severity::Warning, "bad_event", 12, "{...}"});
    built.trace.diagnostics.push_back({std::nullopt, Severity::Info, "note", 5, ""});
    const AnalysisResult r = analyze(built.trace);
    const Verdict v = verdict(r, &built.trace);
    QCOMPARE(v.facts[v.facts.size() - 2], std::string("the trace is SIMULATED: these numbers describe the simulator, not hardware"));
    QCOMPARE(v.facts.back(), std::string("the import reported 12 problem records (see the diagnostics)"));
    // The headline does not depend on the trace's own metadata.
    QCOMPARE(v.headline, verdict(r).headline);
}

void TestVerdict::json()
{
    const AnalysisResult r = analyzed(PipelineSpec{});
    const nlohmann::json j = toJson(r, {});
    QCOMPARE(j["schema"].get<std::string>(), std::string("pipescope.analysis/2"));
    const nlohmann::json& v = j["verdict"];
    QCOMPARE(v["kind"].get<std::string>(), std::string("pipeline-bubbles"));
    QCOMPARE(v["headline"].get<std::string>(), verdict(r).headline);
    QCOMPARE(v["loss_ns"].get<TimeNs>(), TimeNs(9'000'000));
    QCOMPARE(v["facts"].size(), verdict(r).facts.size());
}

QTEST_GUILESS_MAIN(TestVerdict)
#include "tst_verdict.moc"
