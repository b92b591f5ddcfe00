// Fillable bubbles: the idle time per stage that extra work could fill
// (docs/analysis.md, section 4), on hand-built pipelines whose bubbles are
// known to the microsecond.
#include "SyntheticTrace.h"
#include "analysis/Analysis.h"
#include "analysis/AnalysisJson.h"

#include <QtTest>

using namespace pipescope;
using namespace pipescope::test;

namespace {

constexpr TimeNs kMs = 1'000'000;

using Histogram = std::array<int64_t, kFillableBuckets>;

Histogram histogram(std::initializer_list<std::pair<int, int64_t>> counts)
{
    Histogram h{};
    for (auto [bucket, n] : counts)
        h[static_cast<size_t>(bucket)] = n;
    return h;
}

const FillableBubbles* find(const AnalysisResult& r, int iteration, int stage)
{
    for (const auto& f : r.fillableBubbles)
        if (f.iteration == iteration && f.stage == stage)
            return &f;
    return nullptr;
}

// 1F1B, p = 2, m = 2, F = 1 ms, B = 2 ms, as pipelineTrace() plays it.
PipelineSpec twoStages(TimeNs commNs)
{
    PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 2;
    spec.forwardNs = 1 * kMs;
    spec.backwardNs = 2 * kMs;
    spec.commNs = commNs;
    return spec;
}

} // namespace

class TestFillable : public QObject {
    Q_OBJECT
private slots:
    void buckets();
    void causes();
    void freeTransfers();
    void transfersMergeWithWaiting();
    void everyIteration();
    void json();
};

// Bucket 0: < 0.1 ms; bucket k: [0.1 ms * 2^(k-1), 0.1 ms * 2^k); the last is open.
void TestFillable::buckets()
{
    QCOMPARE(fillableBucket(0), 0);
    QCOMPARE(fillableBucket(99'999), 0);
    QCOMPARE(fillableBucket(100'000), 1);
    QCOMPARE(fillableBucket(199'999), 1);
    QCOMPARE(fillableBucket(200'000), 2);
    QCOMPARE(fillableBucket(250'000), 2);
    QCOMPARE(fillableBucket(1 * kMs), 4);
    QCOMPARE(fillableBucket(1'600'000), 5);
    QCOMPARE(fillableBucket(2 * kMs), 5);
    QCOMPARE(fillableBucket(102'399'999), 10);
    QCOMPARE(fillableBucket(102'400'000), 11);
    QCOMPARE(fillableBucket(3600 * 1000 * kMs), 11);
    QCOMPARE(fillableBucketStartNs(0), TimeNs(0));
    QCOMPARE(fillableBucketStartNs(1), TimeNs(100'000));
    QCOMPARE(fillableBucketStartNs(5), TimeNs(1'600'000));
    QCOMPARE(fillableBucketStartNs(11), TimeNs(102'400'000));
}

void TestFillable::causes()
{
    QVERIFY(isFillable(BubbleCause::FillDrain));
    QVERIFY(isFillable(BubbleCause::WaitNeighbor));
    QVERIFY(isFillable(BubbleCause::P2pTransfer));
    QVERIFY(isFillable(BubbleCause::DpSync));
    QVERIFY(!isFillable(BubbleCause::LaunchGap));
    QVERIFY(!isFillable(BubbleCause::HostBound));
    QVERIFY(!isFillable(BubbleCause::Other));
}

// Rank 0: F0 [0,1] F1 [1,2] idle [2,4] B0 [4,6] idle [6,7] B1 [7,9].
// Rank 1: idle [0,1] F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] idle [7,9].
// Each stage: a 1 ms and a 2 ms bubble, 3 ms in all.
void TestFillable::freeTransfers()
{
    const AnalysisResult r = analyze(pipelineTrace(twoStages(0)).trace);
    QVERIFY(r.pipeline.found);
    QCOMPARE(r.fillableBubbles.size(), size_t(2));
    for (int stage = 0; stage < 2; ++stage) {
        const FillableBubbles* f = find(r, r.selectedIteration, stage);
        QVERIFY(f);
        QCOMPARE(f->rank, stage);
        QCOMPARE(f->count, int64_t(2));
        QCOMPARE(f->totalNs, 3 * kMs);
        QCOMPARE(f->longestNs, 2 * kMs);
        QCOMPARE(f->histogram, histogram({{4, 1}, {5, 1}})); // 0.8-1.6 ms, 1.6-3.2 ms
        QCOMPARE(f->totalNs, r.idleOf(r.selectedIteration, stage)->idleNs); // all of it fill/drain
    }
}

// Transfers of 0.25 ms. Rank 0: F0 [0,1] F1 [1,2], waits [2,4.25] then
// receives [4.25,4.5]: one 2.5 ms bubble; B0 [4.5,6.5], idle [6.5,7.75],
// B1 [7.75,9.75]. Rank 1: idle [0,1.25], F0 [1.25,2.25] B0 [2.25,4.25],
// receives [4.25,4.5], F1 [4.5,5.5] B1 [5.5,7.5], idle [7.5,9.75].
void TestFillable::transfersMergeWithWaiting()
{
    const AnalysisResult r = analyze(pipelineTrace(twoStages(250'000)).trace);
    QVERIFY(r.pipeline.found);
    const FillableBubbles* s0 = find(r, r.selectedIteration, 0);
    const FillableBubbles* s1 = find(r, r.selectedIteration, 1);
    QVERIFY(s0 && s1);
    QCOMPARE(s0->count, int64_t(2));
    QCOMPARE(s0->totalNs, TimeNs(3'750'000));
    QCOMPARE(s0->longestNs, TimeNs(2'500'000));
    QCOMPARE(s0->histogram, histogram({{4, 1}, {5, 1}})); // 1.25 ms, 2.5 ms
    QCOMPARE(s1->count, int64_t(3));
    QCOMPARE(s1->totalNs, TimeNs(3'750'000));
    QCOMPARE(s1->longestNs, TimeNs(2'250'000));
    QCOMPARE(s1->histogram, histogram({{2, 1}, {4, 1}, {5, 1}})); // 0.25 ms, 1.25 ms, 2.25 ms
    // The 2.5 ms hole of stage 0 is three bubble parts of different causes:
    // the 2 ms the schedule itself leaves there (stage 1's backward),
    // fill/drain; stage 1 waiting 0.25 ms for the activation, waiting on the
    // neighbour; the gradient's 0.25 ms transfer.
    std::vector<BubbleCause> causes;
    for (const Bubble& b : r.bubbles)
        if (b.rank == 0 && b.start >= r.iterations[0].start + 2 * kMs && b.end <= r.iterations[0].start + 4'500'000)
            causes.push_back(b.cause);
    QCOMPARE(causes, (std::vector<BubbleCause>{BubbleCause::FillDrain, BubbleCause::WaitNeighbor, BubbleCause::P2pTransfer}));
}

// Measured for every iteration, not only the selected one.
void TestFillable::everyIteration()
{
    PipelineSpec spec = twoStages(0);
    spec.iterations = 3;
    spec.profilerSteps = true;
    const AnalysisResult r = analyze(pipelineTrace(spec).trace);
    QCOMPARE(r.iterations.size(), size_t(3));
    QCOMPARE(r.fillableBubbles.size(), size_t(6));
    for (int it = 0; it < 3; ++it)
        for (int stage = 0; stage < 2; ++stage) {
            const FillableBubbles* f = find(r, it, stage);
            QVERIFY(f);
            QCOMPARE(f->totalNs, r.idleOf(it, stage)->idleNs);
            QVERIFY(f->totalNs >= 3 * kMs);
            QCOMPARE(f->longestNs >= 2 * kMs, true);
        }
}

void TestFillable::json()
{
    const AnalysisResult r = analyze(pipelineTrace(twoStages(0)).trace);
    const nlohmann::json j = toJson(r, AnalyzeOptions{});
    const auto& fb = j.at("fillable_bubbles");
    QCOMPARE(fb.at("causes"), nlohmann::json({"fill_drain", "wait_neighbor", "p2p_transfer", "dp_sync"}));
    QCOMPARE(fb.at("bucket_edges_ns").size(), size_t(kFillableBuckets - 1));
    QCOMPARE(fb.at("bucket_edges_ns").front().get<int64_t>(), int64_t(100'000));
    QCOMPARE(fb.at("bucket_edges_ns").back().get<int64_t>(), int64_t(102'400'000));
    const auto& s = fb.at("per_stage");
    QCOMPARE(s.size(), size_t(2));
    QCOMPARE(s[0].at("stage").get<int>(), 0);
    QCOMPARE(s[0].at("total_ns").get<int64_t>(), 3 * kMs);
    QCOMPARE(s[0].at("longest_ns").get<int64_t>(), 2 * kMs);
    QCOMPARE(s[0].at("count").get<int64_t>(), int64_t(2));
    QCOMPARE(s[0].at("histogram"), nlohmann::json({0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0}));
}

QTEST_GUILESS_MAIN(TestFillable)
#include "tst_fillable.moc"
