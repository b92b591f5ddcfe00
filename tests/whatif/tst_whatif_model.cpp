// Cost model (from a description and from a measured pipeline), memory per
// stage, what-if operations, auto-balance against brute force, the JSON
// schema and the simulated Kineto traces.
#include "WhatIfTestSupport.h"
#include "util/Error.h"
#include "whatif/CostModel.h"
#include "whatif/MeasuredFits.h"
#include "simulate/KinetoEmitter.h"
#include "whatif/WhatIf.h"
#include "whatif/WhatIfJson.h"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

using namespace pipescope;
using namespace pipescope::whatif;
using nlohmann::json;

namespace {

// A model with given per-layer F + B costs (B = 2F), no communication.
CostModel handModel(const std::vector<double>& forward, const std::vector<int64_t>& params = {},
                    const std::vector<int64_t>& activations = {})
{
    CostModel c;
    c.name = "hand";
    for (size_t i = 0; i < forward.size(); ++i) {
        LayerCostModel l;
        l.name = "l" + std::to_string(i);
        l.forwardNs = forward[i];
        l.backwardNs = 2 * forward[i];
        l.params = i < params.size() ? params[i] : 0;
        l.activationBytes = i < activations.size() ? activations[i] : 0;
        c.layers.push_back(l);
    }
    c.memory.weightBytesPerParam = 1;
    c.memory.gradBytesPerParam = 0;
    c.memory.optimizerBytesPerParam = 0;
    c.optimizerNsPerParam = 0;
    return c;
}

// Every partition of L layers into S non-empty stages.
void forEachPartition(int L, int S, const std::function<void(const std::vector<int>&)>& f)
{
    std::vector<int> b(size_t(S - 1));
    std::function<void(int, int)> rec = [&](int i, int lo) {
        if (i == S - 1) {
            f(b);
            return;
        }
        for (int x = lo; x <= L - (S - 1 - i); ++x) {
            b[size_t(i)] = x;
            rec(i + 1, x + 1);
        }
    };
    rec(0, 1);
}

std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace

class TestModel : public QObject {
    Q_OBJECT
private slots:
    void modelDescription();
    void modelDescriptionErrors_data();
    void modelDescriptionErrors();
    void partitions();
    void fromMeasuredSplitsStages();
    void fromMeasuredWithLayers();
    void fromMeasuredLatencySyncAndStarts();
    void rendezvousSendTellsTheLanding();
    void fitP2pLinkAlone();
    void smallestStepGapOverRanks();
    void staticMemoryAndZero();
    void memoryFollowsTheTimeline();
    void outOfMemoryFlag();
    void whatIfOperations();
    void microbatchesKeepGlobalBatch();
    void autoBalanceMatchesBruteForce_data();
    void autoBalanceMatchesBruteForce();
    void autoBalanceUnderMemoryLimit();
    void searchRanks();
    void jsonSchema();
    void kinetoEmitter();
};

void TestModel::modelDescription()
{
    const ModelDescription m = parseModelDescription(R"({
        "format": "pipescope.model/1", "name": "tiny",
        "hidden_size": 1024, "sequence_length": 512, "microbatch_size": 2,
        "layer_forward_ms": 1.5,
        "layers": [{"name": "block", "count": 3}, {"name": "big", "cost": 2.0, "params": 10, "activation_bytes": 7}],
        "first_stage": {"name": "embed", "forward_ms": 0.5, "backward_ms": 0.25, "params": 100},
        "communication": {"p2p_latency_us": 10, "p2p_bandwidth_gbps": 50},
        "memory": {"gpu_memory_gib": 16, "zero_stage": 2},
        "parallel": {"pp": 2, "dp": 4, "microbatches": 6, "schedule": "zb-h1"}
    })", "tiny.json");
    QCOMPARE(int(m.layers.size()), 4);
    QCOMPARE(m.layers[1].name, std::string("block.1"));
    QCOMPARE(*m.pp, 2);
    const CostModel c = CostModel::fromModel(m);
    QCOMPARE(c.layers[0].forwardNs, 1.5e6);
    QCOMPARE(c.layers[0].backwardNs, 3.0e6); // backward_ratio 2 by default
    QCOMPARE(c.layers[3].forwardNs, 3.0e6);  // cost 2
    QCOMPARE(c.layers[3].params, int64_t(10));
    QCOMPARE(c.layers[3].activationBytes, int64_t(7));
    // Transformer defaults: 12 h^2 + 13 h parameters, 34 s b h activation bytes.
    QCOMPARE(c.layers[0].params, int64_t(12) * 1024 * 1024 + 13 * 1024);
    QCOMPARE(c.layers[0].activationBytes, int64_t(34) * 512 * 2 * 1024);
    QCOMPARE(c.firstStageExtra.forwardNs, 0.5e6);
    QCOMPARE(c.firstStageExtra.params, int64_t(100));
    QCOMPARE(c.p2pLatencyNs, TimeNs(10'000));
    QCOMPARE(c.p2pBytesPerNs, 50.0);
    QCOMPARE(c.p2pBytes, int64_t(512) * 2 * 1024 * 2); // s b h x bf16
    QCOMPARE(c.dataParallel, 4);
    QCOMPARE(c.memory.zeroStage, 2);
    QCOMPARE(*c.memory.gpuMemoryBytes, int64_t(16) << 30);
}

void TestModel::modelDescriptionErrors_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("message");
    QTest::newRow("not json") << "{" << "tiny.json: not valid JSON";
    QTest::newRow("no layers") << R"({"name": "x"})" << "tiny.json: layers must be a non-empty array";
    QTest::newRow("negative") << R"({"layers": [{"forward_ms": -1}]})" << "tiny.json: layers[0].forward_ms must not be negative";
    QTest::newRow("string") << R"({"layers": [{"forward_ms": "fast"}]})" << "layers[0].forward_ms must be a number";
    QTest::newRow("count") << R"({"layers": [{"count": 0}]})" << "layers[0].count must be a whole number of at least 1";
    QTest::newRow("zero") << R"({"layers": [{}], "memory": {"zero_stage": 4}})" << "memory.zero_stage must be 0, 1, 2 or 3";
    QTest::newRow("format") << R"({"format": "pipescope.model/2", "layers": [{}]})" << "this pipescope reads pipescope.model/1";
    QTest::newRow("no times") << R"({"layers": [{}]})" << "layers[0] (layer) has no forward_ms";
}

void TestModel::modelDescriptionErrors()
{
    QFETCH(QString, text);
    QFETCH(QString, message);
    try {
        CostModel::fromModel(parseModelDescription(text.toStdString(), "tiny.json"));
        QFAIL("accepted");
    } catch (const Error& e) {
        QVERIFY2(QString::fromStdString(e.what()).contains(message), e.what());
    }
}

void TestModel::partitions()
{
    QCOMPARE(evenPartition(8, 4).firstLayer, (std::vector<int>{0, 2, 4, 6, 8}));
    QCOMPARE(partitionFromBoundaries({4, 9, 13}, 16, 4).firstLayer, (std::vector<int>{0, 4, 9, 13, 16}));
    QCOMPARE(partitionFromBoundaries({4, 9, 13}, 16, 4).layersOf(1), 5);
    auto fails = [](std::function<void()> f, const char* message) {
        try {
            f();
            return false;
        } catch (const Error& e) {
            return QString::fromStdString(e.what()).contains(message);
        }
    };
    QVERIFY(fails([] { evenPartition(30, 8); }, "30 layers do not split evenly over 8 stages"));
    QVERIFY(fails([] { partitionFromBoundaries({4, 3, 13}, 16, 4); }, "stage boundaries must increase"));
    QVERIFY(fails([] { partitionFromBoundaries({4, 9}, 16, 4); }, "2 stage boundaries given; 4 stages (pp x v) need 3"));
    QVERIFY(fails([] { partitionFromBoundaries({4, 9, 16}, 16, 4); }, "leaves no layer for the last stage"));
    QVERIFY(fails([] { partitionFromBoundaries({0, 9, 12}, 16, 4); }, "must increase and be above 0"));
}

// Two stages, two microbatches; stage times from the steps, split over four
// layers by weight; point-to-point fitted from two message sizes.
void TestModel::fromMeasuredSplitsStages()
{
    MeasuredPipeline mp;
    mp.pipelineDegree = 2;
    mp.microbatches = 2;
    mp.schedule = ScheduleKind::OneFOneB;
    auto step = [&](int rank, StepKind k, int mb, TimeNs start, TimeNs dur) {
        mp.steps.push_back(PipelineStep{rank, rank, 0, mb, k, start, start + dur, dur});
    };
    step(0, StepKind::F, 0, 0, 9);
    step(0, StepKind::F, 1, 9, 11);
    step(1, StepKind::F, 0, 30, 12);
    step(1, StepKind::B, 0, 42, 24);
    step(1, StepKind::F, 1, 66, 12);
    step(1, StepKind::B, 1, 78, 24);
    step(0, StepKind::B, 0, 80, 20);
    step(0, StepKind::B, 1, 110, 20);
    mp.transfers = {{0, 1, 1000, 15}, {1, 0, 2000, 25}};
    mp.iterationNs = 140;
    FromMeasuredOptions o;
    o.layers = 4;
    o.layerWeights = {1, 1, 1, 3};
    const CostModel c = CostModel::fromMeasured(mp, nullptr, o);
    QCOMPARE(c.layerCount(), 4);
    QCOMPARE(c.layers[0].forwardNs, 5.0);
    QCOMPARE(c.layers[1].backwardNs, 10.0);
    QCOMPARE(c.layers[2].forwardNs, 3.0);
    QCOMPARE(c.layers[3].forwardNs, 9.0);
    QCOMPARE(c.layers[3].backwardNs, 18.0);
    QCOMPARE(c.p2pLatencyNs, TimeNs(5));
    QCOMPARE(c.p2pBytesPerNs, 100.0);
    QCOMPARE(c.p2pBytes, int64_t(1500));
    QCOMPARE(c.measuredPartition->firstLayer, (std::vector<int>{0, 2, 4}));
    // The smallest gap between a rank's consecutive steps (F0 -> F1 on both), median over ranks.
    QCOMPARE(c.launchGapNs, TimeNs(0));
    // 10 ns after the last step (130) are the optimizer and the like.
    QCOMPARE(*c.measuredOptimizerNs, TimeNs(10));
    // The measured configuration replays with these costs.
    const Prediction p = predict(c, measuredScenario(c));
    QVERIFY(p.schedule.kind == ScheduleKind::OneFOneB);
    QCOMPARE(p.partition.boundaries(), (std::vector<int>{2}));
    QVERIFY(p.speedup().has_value());
}

// Messages a receiver was already waiting for say how long one takes to
// land; what exceeds the bytes' time (from the kernels) is latency. The
// collective over the pipeline and each rank's start are carried to the
// replay, the starts only while the pipeline degree is the measured one.
// A send that held its stream for most of a waiting receiver's wait ended
// when its bytes landed (a rendezvous): its own time is the transfer's, the
// rest the receiver's delay. A short (eager) send says nothing, nor does a
// send of exactly 1 ns (implied by a timing file, not measured).
void TestModel::rendezvousSendTellsTheLanding()
{
    MeasuredPipeline mp;
    mp.pipelineDegree = 2;
    mp.microbatches = 1;
    mp.schedule = ScheduleKind::OneFOneB;
    mp.steps = {PipelineStep{0, 0, 0, 0, StepKind::F, 0, 10, 10}, PipelineStep{1, 1, 0, 0, StepKind::F, 130, 140, 10},
                PipelineStep{1, 1, 0, 0, StepKind::B, 140, 160, 20}, PipelineStep{0, 0, 0, 0, StepKind::B, 170, 190, 20}};
    mp.stageOfRank = {0, 1};
    mp.iterationNs = 190;
    // Sent at 10, the receiver waiting since 0: the send ends at 110, the receive at 125.
    mp.messages = {{0, 1, 0, 10, 0, 125, 110}};
    FromMeasuredOptions o;
    o.layers = 2;
    QCOMPARE(CostModel::fromMeasured(mp, nullptr, o).p2pLatencyNs, TimeNs(100));
    // An eager send (done at 12): the receive's end tells the landing.
    mp.messages = {{0, 1, 0, 10, 0, 125, 12}};
    QCOMPARE(CostModel::fromMeasured(mp, nullptr, o).p2pLatencyNs, TimeNs(115));
    // An implied 1 ns send: no measure.
    mp.messages = {{0, 1, 0, 10, 0, 125, 11}};
    QCOMPARE(CostModel::fromMeasured(mp, nullptr, o).p2pLatencyNs, TimeNs(0));
}

// Two message sizes on a 10 ns + bytes / 100 link; then a landing 200 ns
// after a rendezvous send began, with 1000 bytes on the wire (10 ns), raises
// the latency to 190 ns.
void TestModel::fitP2pLinkAlone()
{
    const std::vector<MeasuredTransfer> transfers = {{0, 1, 1000, 20}, {0, 1, 3000, 40}, {1, 0, 1000, 20}, {1, 0, 3000, 40}};
    P2pLink link = fitP2pLink(transfers, {}, P2pLink{});
    QCOMPARE(link.latencyNs, TimeNs(10));
    QCOMPARE(link.bytesPerNs, 100.0);
    QCOMPARE(link.bytes, int64_t(2000));
    // Sent at 100, the receiver waiting since 0; the send held its stream to 300, the receive to 310.
    link = fitP2pLink(transfers, {{0, 1, 1000, 100, 0, 310, 300}}, P2pLink{});
    QCOMPARE(link.latencyNs, TimeNs(200 - 20)); // 2000 median bytes on the wire: 20 ns
    // Nothing measured: the link given stays.
    link = fitP2pLink({}, {}, P2pLink{7, 3.0, 5});
    QCOMPARE(link.latencyNs, TimeNs(7));
    QCOMPARE(link.bytesPerNs, 3.0);
    QCOMPARE(link.bytes, int64_t(5));
}

// Rank 0 runs back to back 5 ns apart; rank 1 waits 40 ns for data before
// each step: the launch gap is 5 ns, not a median of the two. With blocking
// exchanges a gap holding an exchange's end does not count.
void TestModel::smallestStepGapOverRanks()
{
    MeasuredPipeline mp;
    mp.steps = {PipelineStep{0, 0, 0, 0, StepKind::F, 0, 100, 100}, PipelineStep{0, 0, 0, 1, StepKind::F, 105, 205, 100},
                PipelineStep{1, 1, 0, 0, StepKind::F, 140, 200, 60}, PipelineStep{1, 1, 0, 1, StepKind::F, 240, 300, 60}};
    QCOMPARE(*smallestStepGap(mp), TimeNs(5));
    mp.blockingExchanges = true;
    mp.messages = {{0, 1, 0, 100, 0, 140, 102}}; // rank 0's send ends at 102, inside its 5 ns gap
    QCOMPARE(*smallestStepGap(mp), TimeNs(40));
    QVERIFY(!smallestStepGap(MeasuredPipeline{}));
}

void TestModel::fromMeasuredLatencySyncAndStarts()
{
    MeasuredPipeline mp;
    mp.pipelineDegree = 2;
    mp.microbatches = 2;
    mp.schedule = ScheduleKind::OneFOneB;
    auto step = [&](int rank, StepKind k, int mb, TimeNs start, TimeNs dur) {
        mp.steps.push_back(PipelineStep{rank, rank, 0, mb, k, start, start + dur, dur});
    };
    step(0, StepKind::F, 0, 0, 9);
    step(0, StepKind::F, 1, 9, 11);
    step(1, StepKind::F, 0, 30, 12);
    step(1, StepKind::B, 0, 42, 24);
    step(1, StepKind::F, 1, 66, 12);
    step(1, StepKind::B, 1, 78, 24);
    step(0, StepKind::B, 0, 80, 20);
    step(0, StepKind::B, 1, 110, 20);
    mp.transfers = {{0, 1, 1000, 15}, {1, 0, 2000, 25}}; // 100 bytes/ns, 5 ns latency
    mp.messages = {{0, 1, 1000, 10, 0, 60},    // landed 50 after the send
                   {0, 1, 1000, 20, 0, 80},    // 60
                   {1, 0, 2000, 100, 0, 170},  // 70
                   {0, 1, 1000, 50, 70, 75}};  // the receiver came late: not a measure
    mp.iterationNs = 140;
    mp.pipelineSyncNs = 4;
    mp.stageOfRank = {0, 1};
    mp.rankStartNs = {0, 25};
    FromMeasuredOptions o;
    o.layers = 4;
    const CostModel c = CostModel::fromMeasured(mp, nullptr, o);
    // Median landing 60, less 1500 bytes at 100 bytes/ns.
    QCOMPARE(c.p2pLatencyNs, TimeNs(45));
    QCOMPARE(c.p2pBytesPerNs, 100.0);
    QCOMPARE(c.pipelineSyncNs, TimeNs(4));
    // 10 ns after the last step, 4 of them the collective.
    QCOMPARE(*c.measuredOptimizerNs, TimeNs(6));
    QCOMPARE(c.rankStartNs, (std::vector<TimeNs>{0, 25}));
    const ReplayCosts same = c.replayCosts(evenPartition(4, 2), makeSchedule(ScheduleKind::OneFOneB, 2, 1, 2));
    QCOMPARE(same.rankStartNs, (std::vector<TimeNs>{0, 25}));
    QCOMPARE(same.pipelineSyncNs, TimeNs(4));
    QCOMPARE(same.eagerBytes, c.p2pEagerBytes);
    const ReplayCosts deeper = c.replayCosts(evenPartition(4, 4), makeSchedule(ScheduleKind::OneFOneB, 4, 1, 4));
    QVERIFY(deeper.rankStartNs.empty());
}

// Layers named by annotations keep their own times; a stage's remainder on
// the first or last stage becomes its extra (embedding, loss).
void TestModel::fromMeasuredWithLayers()
{
    MeasuredPipeline mp;
    mp.pipelineDegree = 2;
    mp.microbatches = 1;
    mp.schedule = ScheduleKind::GPipe;
    mp.steps.push_back(PipelineStep{0, 0, 0, 0, StepKind::F, 0, 10, 10});
    mp.steps.push_back(PipelineStep{1, 1, 0, 0, StepKind::F, 10, 30, 20});
    mp.steps.push_back(PipelineStep{1, 1, 0, 0, StepKind::B, 30, 70, 40});
    mp.steps.push_back(PipelineStep{0, 0, 0, 0, StepKind::B, 70, 90, 20});
    mp.layers = {{"a", 0, 4, 8, std::nullopt, std::nullopt},
                 {"b", 0, 4, 8, std::nullopt, std::nullopt},
                 {"c", 1, 6, 12, std::nullopt, std::nullopt}};
    const CostModel c = CostModel::fromMeasured(mp);
    QCOMPARE(c.layerCount(), 3);
    QCOMPARE(c.layers[0].forwardNs, 4.0);
    QCOMPARE(c.firstStageExtra.forwardNs, 2.0);  // 10 - 8
    QCOMPARE(c.firstStageExtra.backwardNs, 4.0); // 20 - 16
    QCOMPARE(c.lastStageExtra.forwardNs, 14.0);  // 20 - 6
    QCOMPARE(c.measuredPartition->firstLayer, (std::vector<int>{0, 2, 3}));
}

void TestModel::staticMemoryAndZero()
{
    MemoryConfig m; // 2 + 4 + 12 bytes per parameter
    m.dataParallel = 4;
    QCOMPARE(staticMemoryBytes(1000, m), int64_t(18000));
    m.zeroStage = 1; // optimizer / 4
    QCOMPARE(staticMemoryBytes(1000, m), int64_t(2000 + 4000 + 3000));
    m.zeroStage = 2; // + gradients / 4
    QCOMPARE(staticMemoryBytes(1000, m), int64_t(2000 + 1000 + 3000));
    m.zeroStage = 3; // + weights / 4
    QCOMPARE(staticMemoryBytes(1000, m), int64_t(500 + 1000 + 3000));
    m.reservedBytes = 7;
    QCOMPARE(staticMemoryBytes(1000, m), int64_t(4507));
}

// 1F1B, 2 stages, 3 microbatches: rank 0 holds up to 2 microbatches of
// activations, rank 1 one; memory steps up at each forward's start and
// down at each backward's end.
void TestModel::memoryFollowsTheTimeline()
{
    const Schedule s = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 3);
    const ReplayResult r = Replay().run(s, test::uniformCosts(2, 10, 20));
    MemoryConfig cfg;
    cfg.weightBytesPerParam = 1;
    cfg.gradBytesPerParam = 0;
    cfg.optimizerBytesPerParam = 0;
    const std::vector<RankMemory> m = whatif::memoryOverTime(r, {100, 50}, {1000, 3000}, cfg);
    QCOMPARE(m[0].staticBytes, int64_t(100));
    QCOMPARE(m[0].peakInFlight, 2);
    QCOMPARE(m[0].peakBytes, int64_t(100 + 2 * 1000));
    QCOMPARE(m[1].peakBytes, int64_t(50 + 3000));
    // Rank 0: F0 at 0, F1 at 10, B0 ends at 60, F2 at 60, B1 ends at 90, B2 ends at 120.
    QList<QPair<qint64, qint64>> pts;
    for (const MemoryPoint& p : m[0].overTime)
        pts << qMakePair(qint64(p.t), qint64(p.bytes));
    const QList<QPair<qint64, qint64>> expected{{0, 1100}, {10, 2100}, {60, 2100}, {90, 1100}, {120, 100}};
    QCOMPARE(pts, expected);
    QCOMPARE(m[0].peakAt, TimeNs(10));
    // A split backward frees the share W needs only when W ends.
    const ReplayResult zb = Replay().run(makeSchedule(ScheduleKind::ZeroBubbleH1, 1, 1, 1), test::uniformCosts(1, 10, 0, 10, 10));
    cfg.weightGradActivationShare = 0.25;
    const std::vector<RankMemory> mz = whatif::memoryOverTime(zb, {0}, {1000}, cfg);
    QCOMPARE(mz[0].overTime.size(), size_t(3));
    QCOMPARE(mz[0].overTime[0].bytes, int64_t(1000)); // F
    QCOMPARE(mz[0].overTime[1].bytes, int64_t(250));  // after I
    QCOMPARE(mz[0].overTime[2].bytes, int64_t(0));    // after W
}

void TestModel::outOfMemoryFlag()
{
    CostModel c = handModel({1, 1, 1, 1}, {100, 100, 100, 100}, {50, 50, 50, 50});
    Scenario sc;
    sc.schedule = ScheduleKind::GPipe;
    sc.pp = 2;
    sc.microbatches = 4;
    // GPipe holds all 4 microbatches: 200 + 4 x 100 = 600 on each rank.
    c.memory.gpuMemoryBytes = 600;
    QVERIFY(!predict(c, sc).outOfMemory());
    c.memory.gpuMemoryBytes = 599;
    const Prediction p = predict(c, sc);
    QVERIFY(p.outOfMemory());
    QVERIFY(p.memory[0].outOfMemory && p.memory[1].outOfMemory);
    // 1F1B holds fewer on rank 1 (1 microbatch) and 2 on rank 0.
    sc.schedule = ScheduleKind::OneFOneB;
    const Prediction q = predict(c, sc);
    QCOMPARE(q.memory[0].peakBytes, int64_t(400));
    QCOMPARE(q.memory[1].peakBytes, int64_t(300));
    QVERIFY(!q.outOfMemory());
}

void TestModel::whatIfOperations()
{
    const CostModel c = handModel({1000, 1000, 1000, 1000, 1000, 1000, 3000, 3000});
    Scenario base;
    base.schedule = ScheduleKind::OneFOneB;
    base.pp = 2;
    base.microbatches = 4;
    // Even split: stage 1 holds the two heavy layers: 10 + 6 = ... F per stage 4k vs 8k.
    const Prediction even = predict(c, base);
    QCOMPARE(even.partition.boundaries(), (std::vector<int>{4}));
    // Moving the boundary to 5 balances 5k / 7k: faster.
    ScenarioChanges move;
    move.boundaries = std::vector<int>{5};
    const Prediction moved = predict(c, applyChanges(base, move));
    QVERIFY(moved.iterationNs() < even.iterationNs());
    // Changing v re-splits the layers; a v that does not divide them is refused.
    ScenarioChanges inter;
    inter.schedule = "interleaved";
    const Scenario s2 = applyChanges(base, inter);
    QCOMPARE(s2.v, 2);
    QCOMPARE(predict(c, s2).partition.firstLayer, (std::vector<int>{0, 2, 4, 6, 8}));
    ScenarioChanges v3;
    v3.schedule = "interleaved";
    v3.v = 3;
    try {
        predict(c, applyChanges(base, v3));
        QFAIL("accepted v = 3 for 8 layers on 2 stages");
    } catch (const Error& e) {
        QVERIFY2(QString(e.what()).contains("8 layers do not split evenly over 6 stages"), e.what());
    }
    ScenarioChanges bad;
    bad.schedule = "2f2b";
    try {
        applyChanges(base, bad);
        QFAIL("accepted");
    } catch (const Error& e) {
        QVERIFY(QString(e.what()).contains("unknown schedule '2f2b'; choose one of gpipe, 1f1b"));
    }
    // Pipeline degree 4 re-splits 8 layers in pairs.
    ScenarioChanges pp;
    pp.pp = 4;
    QCOMPARE(predict(c, applyChanges(base, pp)).partition.boundaries(), (std::vector<int>{2, 4, 6}));
}

// With a fixed global batch, twice the microbatches are each half as long.
void TestModel::microbatchesKeepGlobalBatch()
{
    CostModel c = handModel({1000, 1000});
    c.keepGlobalBatch = true;
    c.referenceMicrobatches = 4;
    c.p2pBytes = 800;
    Scenario s;
    s.pp = 2;
    s.microbatches = 8;
    const Prediction p = predict(c, s);
    QCOMPARE(p.costs.stages[0].forward, TimeNs(500));
    QCOMPARE(p.costs.stages[0].backward, TimeNs(1000));
    QCOMPARE(p.costs.boundaryBytes[0], int64_t(400));
    // (m + p - 1)(F + B) with no communication.
    QCOMPARE(p.iterationNs(), TimeNs(9 * 1500));
}

void TestModel::autoBalanceMatchesBruteForce_data()
{
    QTest::addColumn<QVector<double>>("forward");
    QTest::addColumn<int>("stages");
    QTest::addColumn<int>("microbatches");
    QTest::newRow("8 layers / 2") << QVector<double>{5, 1, 3, 8, 2, 2, 7, 4} << 2 << 4;
    QTest::newRow("8 layers / 3") << QVector<double>{5, 1, 3, 8, 2, 2, 7, 4} << 3 << 6;
    QTest::newRow("9 layers / 4") << QVector<double>{1, 9, 2, 2, 6, 3, 3, 5, 1} << 4 << 8;
    QTest::newRow("10 layers / 3 heavy end") << QVector<double>{1, 1, 1, 1, 1, 1, 1, 1, 9, 9} << 3 << 3;
    QTest::newRow("7 layers / 7") << QVector<double>{3, 1, 4, 1, 5, 9, 2} << 7 << 7;
}

// The min-max partition is the brute-force optimum of the slowest stage, and
// after replay refinement the predicted iteration is the brute-force best.
void TestModel::autoBalanceMatchesBruteForce()
{
    QFETCH(QVector<double>, forward);
    QFETCH(int, stages);
    QFETCH(int, microbatches);
    std::vector<double> f;
    for (double x : forward)
        f.push_back(x * 1000);
    CostModel c = handModel(f);
    c.firstStageExtra.forwardNs = 500; // embedding on stage 0
    c.lastStageExtra.forwardNs = 1500; // loss on the last stage
    c.lastStageExtra.backwardNs = 1500;
    Scenario sc;
    sc.schedule = ScheduleKind::OneFOneB;
    sc.pp = stages;
    sc.microbatches = microbatches;
    const int L = c.layerCount();
    double bestBottleneck = std::numeric_limits<double>::infinity();
    TimeNs bestTime = std::numeric_limits<TimeNs>::max();
    forEachPartition(L, stages, [&](const std::vector<int>& b) {
        const Partition part = partitionFromBoundaries(b, L, stages);
        double worst = 0;
        for (int s = 0; s < stages; ++s) {
            double t = 0;
            for (int l = part.firstLayer[size_t(s)]; l < part.firstLayer[size_t(s) + 1]; ++l)
                t += 3 * f[size_t(l)];
            if (s == 0)
                t += 500;
            if (s == stages - 1)
                t += 3000;
            worst = std::max(worst, t);
        }
        bestBottleneck = std::min(bestBottleneck, worst);
        Scenario x = sc;
        x.boundaries = b;
        bestTime = std::min(bestTime, predict(c, x).iterationNs());
    });
    const BalanceResult r = autoBalance(c, sc);
    QCOMPARE(r.bottleneckNs, TimeNs(std::llround(bestBottleneck)));
    QCOMPARE(r.prediction.iterationNs(), bestTime);
    QVERIFY(r.memoryFeasible);
}

// Under a memory limit the partition keeps every stage within it (1F1B:
// stage s stores p - s microbatches), at the best feasible bottleneck.
void TestModel::autoBalanceUnderMemoryLimit()
{
    const std::vector<double> f{2000, 2000, 2000, 2000, 2000, 2000};
    CostModel c = handModel(f, {10, 10, 10, 10, 10, 10}, {100, 100, 100, 100, 100, 100});
    Scenario sc;
    sc.pp = 3;
    sc.microbatches = 6;
    // Unlimited: 2 / 2 / 2. Stage 0 stores 3 microbatches: 2 layers = 20 + 600.
    BalanceResult free = autoBalance(c, sc);
    QCOMPARE(free.prediction.partition.boundaries(), (std::vector<int>{2, 4}));
    BalanceOptions o;
    o.memoryLimitBytes = 500; // stage 0 can hold only one layer now (10 + 300)
    const BalanceResult lim = autoBalance(c, sc, o);
    QVERIFY(lim.memoryFeasible);
    QCOMPARE(lim.prediction.partition.layersOf(0), 1);
    for (const RankMemory& m : lim.prediction.memory)
        QVERIFY(m.peakBytes <= 500);
    // Brute force over the feasible partitions: the same bottleneck.
    double best = std::numeric_limits<double>::infinity();
    forEachPartition(6, 3, [&](const std::vector<int>& b) {
        const Partition part = partitionFromBoundaries(b, 6, 3);
        double worst = 0;
        for (int s = 0; s < 3; ++s) {
            const int n = part.layersOf(s);
            if (n * 10 + n * 100 * (3 - s) > 500)
                return;
            worst = std::max(worst, n * 6000.0);
        }
        best = std::min(best, worst);
    });
    QCOMPARE(lim.bottleneckNs, TimeNs(best));
    o.memoryLimitBytes = 100; // nothing fits
    const BalanceResult none = autoBalance(c, sc, o);
    QVERIFY(!none.memoryFeasible);
    QVERIFY(none.prediction.outOfMemory());
}

void TestModel::searchRanks()
{
    CostModel c = handModel(std::vector<double>(8, 1000.0));
    c.keepGlobalBatch = true; // the same work split into more or fewer microbatches
    c.referenceMicrobatches = 4;
    Scenario base;
    base.pp = 2;
    base.microbatches = 4;
    SearchSpace space;
    space.schedules = {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved1F1B, ScheduleKind::ZeroBubbleV};
    space.vs = {1, 2};
    space.microbatches = {2, 4};
    const std::vector<SearchRow> rows = searchConfigurations(c, base, space);
    // gpipe, 1f1b: v 1 only; interleaved: v 2 (m multiple of 2); zb-v: v 2.
    QCOMPARE(int(rows.size()), 2 * 2 + 2 + 2);
    for (size_t i = 1; i < rows.size(); ++i)
        QVERIFY(rows[i - 1].iterationNs <= rows[i].iterationNs);
    // With equal layers and no communication the most microbatches and chunks win.
    QCOMPARE(rows.front().scenario.microbatches, 4);
    QCOMPARE(rows.front().scenario.v, 2);
}

void TestModel::jsonSchema()
{
    CostModel c = handModel({1000, 2000, 3000, 4000});
    c.measuredIterationNs = 40'000;
    c.dataParallel = 2;
    c.allReduceBytesPerNs = 1;
    Scenario s;
    s.pp = 2;
    s.microbatches = 3;
    s.label = "requested";
    const Prediction p = predict(c, s);
    const json doc = whatIfDocument(WhatIfSource{"model", "m.json", false}, c, {p});
    QCOMPARE(doc["schema"].get<std::string>(), std::string("pipescope.whatif/1"));
    QVERIFY(doc["generator"].get<std::string>().rfind("pipescope ", 0) == 0);
    QCOMPARE(doc["source"]["kind"].get<std::string>(), std::string("model"));
    QCOMPARE(int(doc["cost_model"]["layers"].size()), 4);
    const json& jp = doc["predictions"][0];
    QCOMPARE(jp["label"].get<std::string>(), std::string("requested"));
    QCOMPARE(jp["config"]["schedule"].get<std::string>(), std::string("1f1b"));
    QCOMPARE(jp["config"]["boundaries"], json::array({2}));
    QCOMPARE(jp["config"]["layers_per_stage"], json::array({2, 2}));
    QCOMPARE(jp["iteration_ns"].get<int64_t>(), p.iterationNs());
    QCOMPARE(jp["speedup"].get<double>(), 40'000.0 / double(p.iterationNs()));
    QCOMPARE(jp["bubbles_by_cause_ns"].size(), size_t(kBubbleCauseCount));
    for (const char* cause : {"fill_drain", "wait_neighbor", "p2p_transfer", "dp_sync", "host_bound", "launch_gap", "other"})
        QVERIFY2(jp["bubbles_by_cause_ns"].contains(cause), cause);
    QCOMPARE(jp["ranks"].size(), size_t(2));
    for (const json& r : jp["ranks"]) {
        QCOMPARE(r["actions"].size(), size_t(6));
        const json& a = r["actions"][0];
        for (const char* k : {"kind", "stage", "chunk", "microbatch", "start_ns", "end_ns"})
            QVERIFY2(a.contains(k), k);
        // Busy plus every bubble covers the whole iteration.
        int64_t idle = 0;
        for (const auto& [k, v] : r["bubbles_by_cause_ns"].items())
            idle += v.get<int64_t>();
        QCOMPARE(idle + r["busy_ns"].get<int64_t>(), p.iterationNs());
        QVERIFY(r["memory"].contains("over_time"));
        QVERIFY(r["memory"].contains("peak_bytes"));
        QVERIFY(r["memory"].contains("out_of_memory"));
        QVERIFY(r["all_reduce"]["end_ns"].get<int64_t>() >= r["all_reduce"]["start_ns"].get<int64_t>());
    }
    QCOMPARE(jp["transfers"].size(), size_t(6)); // 3 forward + 3 backward
    QVERIFY(doc["search"].is_null());
    // Without timelines the per-step arrays are left out.
    JsonOptions o;
    o.timeline = false;
    const json slim = predictionToJson(p, o);
    QVERIFY(!slim["ranks"][0].contains("actions"));
    QVERIFY(!slim.contains("transfers"));
}

void TestModel::kinetoEmitter()
{
    QTemporaryDir dir;
    const ModelDescription md = parseModelDescription(R"({"name": "demo", "hidden_size": 1024,
        "sequence_length": 1024, "gpu_tflops": 300, "vocab_size": 32000,
        "layers": [{"name": "block", "count": 8}], "parallel": {"pp": 2, "dp": 2, "microbatches": 4}})", "demo.json");
    const CostModel c = CostModel::fromModel(md);
    Scenario s;
    s.pp = 2;
    s.microbatches = 4;
    const Prediction p = predict(c, s);
    simulate::KinetoEmitOptions o;
    o.iterations = 3;
    o.modelName = "demo";
    const std::string out = (dir.path() + "/k").toStdString();
    const simulate::KinetoEmitSummary sum = simulate::emitKineto(p, o, out);
    QCOMPARE(int(sum.files.size()), 4); // pp 2 x dp 2
    for (int g = 0; g < 4; ++g) {
        const std::string text = readFile(sum.files[size_t(g)]);
        const json d = json::parse(text);
        QCOMPARE(d["schemaVersion"].get<int>(), 1);
        QCOMPARE(d["distributedInfo"]["rank"].get<int>(), g);
        QCOMPARE(d["distributedInfo"]["world_size"].get<int>(), 4);
        QCOMPARE(d["pipescope"]["simulated"].get<bool>(), true);
        QCOMPARE(d["pipescope"]["pp"].get<int>(), 2);
        QCOMPARE(d["pipescope"]["dp"].get<int>(), 2);
        const json& pp = d["distributedInfo"]["pg_config"][1];
        QCOMPARE(pp["pg_desc"].get<std::string>(), std::string("pp"));
        QCOMPARE(pp["ranks"], (g % 2 == 0 ? json::array({0, 2}) : json::array({1, 3})));
        int compute = 0, nccl = 0, allReduce = 0, steps = 0, launches = 0, fwd = 0;
        for (const json& e : d["traceEvents"]) {
            const std::string cat = e.value("cat", "");
            const std::string name = e.value("name", "");
            if (cat == "kernel") {
                QCOMPARE(e["args"]["device"].get<int>(), g);
                if (name.find("SendRecv") != std::string::npos) {
                    ++nccl;
                    QCOMPARE(e["args"]["Process Group Description"].get<std::string>(), std::string("pp"));
                } else if (name.find("AllReduce") != std::string::npos) {
                    ++allReduce;
                } else {
                    ++compute;
                    QCOMPARE(e["args"]["stream"].get<int>(), 7);
                }
            } else if (cat == "cuda_runtime") {
                ++launches;
            } else if (cat == "user_annotation") {
                if (name.rfind("ProfilerStep#", 0) == 0)
                    ++steps;
                if (name == "forward_step")
                    ++fwd;
            }
        }
        // Per iteration: 4 F and 4 B steps of 5 kernels each, one optimizer;
        // 4 sends and 4 receives (one per microbatch and direction); one all-reduce.
        QCOMPARE(compute, 3 * (8 * 5 + 1));
        QCOMPARE(nccl, 3 * 8);
        QCOMPARE(allReduce, 3);
        QCOMPARE(steps, 3);
        QCOMPARE(fwd, 3 * 4);
        QCOMPARE(launches, compute + nccl + allReduce);
        QCOMPARE(sum.kernelsPerRank[size_t(g)], int64_t(compute + nccl + allReduce));
        // Timestamps are microseconds with three decimals.
        const size_t ts = text.find("\"ts\": ");
        QVERIFY(ts != std::string::npos);
        const size_t dot = text.find('.', ts);
        QVERIFY(std::isdigit(static_cast<unsigned char>(text[dot + 3])) && !std::isdigit(static_cast<unsigned char>(text[dot + 4])));
    }
    // Deterministic for a seed, different for another.
    const simulate::KinetoEmitSummary again = simulate::emitKineto(p, o, (dir.path() + "/k2").toStdString());
    QCOMPARE(readFile(again.files[0]), readFile(sum.files[0]));
    o.seed = 2;
    const simulate::KinetoEmitSummary other = simulate::emitKineto(p, o, (dir.path() + "/k3").toStdString());
    QVERIFY(readFile(other.files[0]) != readFile(sum.files[0]));
}

QTEST_GUILESS_MAIN(TestModel)
#include "tst_whatif_model.moc"
