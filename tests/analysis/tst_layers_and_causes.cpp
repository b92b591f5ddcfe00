// Per-layer costs from module and layer ranges, and what a wait inside an
// end-of-iteration collective is called (docs/analysis.md sections 4 and 10).
#include "SyntheticTrace.h"
#include "analysis/Analysis.h"
#include "analysis/AnalysisJson.h"
#include "analysis/MeasuredPipeline.h"
#include "whatif/CostModel.h"

#include <QtTest>

using namespace pipescope;
using namespace pipescope::test;

namespace {

constexpr TimeNs kMs = 1'000'000;

TimeNs cause(const AnalysisResult& r, int rank, BubbleCause c)
{
    const RankIdle* ri = r.idleOf(r.selectedIteration, rank);
    return ri ? ri->byCause[static_cast<size_t>(c)] : -1;
}

void sortRanges(Trace& t)
{
    std::stable_sort(t.cpuRanges.begin(), t.cpuRanges.end(),
                     [](const CpuRange& x, const CpuRange& y) { return std::tie(x.rank, x.tid, x.start) < std::tie(y.rank, y.tid, y.start); });
    for (size_t i = 0; i < t.cpuRanges.size(); ++i)
        t.cpuRanges[i].id = static_cast<int64_t>(i) + 1;
}

// Two stages, two microbatches, 1F1B: each forward runs two 600 us kernels,
// each backward four 500 us kernels, so a kernel's duration says its kind.
PipelineSpec layeredSpec()
{
    PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 2;
    spec.forwardNs = 1'200'000;
    spec.backwardNs = 2'000'000;
    spec.forwardKernels = 2;
    spec.backwardKernels = 4;
    spec.annotate = true;
    return spec;
}

// What PyTorch's profiler records around those kernels with with_stack=True:
// on thread 1 each forward kernel's launch inside an op (with its autograd
// sequence number) inside a module call; on thread 2 each backward kernel's
// launch inside autograd's evaluate_function op carrying the number of the
// forward op it differentiates. `moduleOf[stage][q]` names the module of
// forward kernel q; "Root/Leaf" puts Leaf inside the root module Root, a
// bare name is a root of its own (a loss module called outside the model).
void addModuleRanges(Trace& t, const std::vector<std::vector<std::string>>& moduleOf)
{
    std::map<int, int> forwards, backwards;
    for (const Activity& a : t.activities) {
        if (!t.str(a.name).starts_with("sm90_gemm_") || !a.launchStart)
            continue;
        const int stage = a.rank;
        const TimeNs l = *a.launchStart;
        if (a.end - a.start == 600'000) {
            const int n = forwards[a.rank]++;
            const int mb = n / 2, q = n % 2;
            const int64_t seq = 100 * a.rank + 10 * mb + q;
            const std::string& path = moduleOf[size_t(stage)][size_t(q)];
            const size_t slash = path.find('/');
            if (slash != std::string::npos) {
                addRange(t, a.rank, 1, CpuRangeKind::Other, "nn.Module: " + path.substr(0, slash), l - 300, l + 1'300);
                addRange(t, a.rank, 1, CpuRangeKind::Other, "nn.Module: " + path.substr(slash + 1), l - 200, l + 1'200);
            } else {
                addRange(t, a.rank, 1, CpuRangeKind::Other, "nn.Module: " + path, l - 200, l + 1'200);
            }
            addRange(t, a.rank, 1, CpuRangeKind::CpuOp, "aten::mm", l - 100, l + 1'100, seq);
            addRange(t, a.rank, 1, CpuRangeKind::Runtime, "cudaLaunchKernel", l, l + 1'000, a.correlation);
        } else {
            const int n = backwards[a.rank]++;
            const int mb = n / 4, q = 1 - (n % 4) / 2; // the second forward op's gradient runs first
            const int64_t seq = 100 * a.rank + 10 * mb + q;
            addRange(t, a.rank, 2, CpuRangeKind::CpuOp, "autograd::engine::evaluate_function: MmBackward0", l - 100,
                     l + 1'100, seq);
            addRange(t, a.rank, 2, CpuRangeKind::Runtime, "cudaLaunchKernel", l, l + 1'000, a.correlation);
        }
    }
    sortRanges(t);
}

void compareLayer(const LayerCost& l, const char* name, int stage, TimeNs f, TimeNs b)
{
    QCOMPARE(l.name, std::string(name));
    QCOMPARE(l.stage, stage);
    QCOMPARE(l.forwardNs, f);
    QCOMPARE(l.backwardNs, b);
    QVERIFY(!l.backwardInputNs);
}

} // namespace

class TestLayersAndCauses : public QObject {
    Q_OBJECT
private slots:
    void pipelineWideAllReduceIsDrain();
    void gradientAllReduceIsDpSync();
    void modulesGiveLayers();
    void oneBlockPerStage();
    void layerRangesGiveLayers();
    void nothingToAttribute();
};

// dp = 1: stage 1 finishes at 7 ms and waits in a loss all-reduce over both
// stages until stage 0 joins at 9 ms. That wait is drain, not data-parallel sync.
void TestLayersAndCauses::pipelineWideAllReduceIsDrain()
{
    TraceBuilder tb;
    PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 2;
    const BuiltPipeline bp = pipelineTrace(spec, &tb);
    const TimeNs t0 = bp.iterationStart[0];
    QCOMPARE(bp.iterationEnd[0] - t0, 9 * kMs);
    tb.nccl(1, 22, "AllReduce", t0 + 7 * kMs, t0 + 9 * kMs + 100'000, std::nullopt, 4, {0, 1});
    tb.nccl(0, 22, "AllReduce", t0 + 9 * kMs, t0 + 9 * kMs + 100'000, std::nullopt, 4, {0, 1});
    const AnalysisResult r = analyze(tb.build());
    QVERIFY(r.pipeline.found);
    QCOMPARE(r.pipeline.dp, 1);
    for (int rank : {0, 1}) {
        QCOMPARE(cause(r, rank, BubbleCause::DpSync), TimeNs(0));
        QCOMPARE(cause(r, rank, BubbleCause::FillDrain), r.idleOf(r.selectedIteration, rank)->idleNs);
    }
    // Rank 1: 1 ms waiting for its first forward, 2.1 ms in the all-reduce.
    QCOMPARE(cause(r, 1, BubbleCause::FillDrain), 3 * kMs + 100'000);
    QCOMPARE(measurePipeline(tb.build(), r).dataParallelSyncNs, TimeNs(0));
}

// dp = 2: replica 1 of stage 0 runs 1.5x slower; its peer waits for it in the
// gradient all-reduce over the stage's replicas. That is dp_sync.
void TestLayersAndCauses::gradientAllReduceIsDpSync()
{
    PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 2;
    spec.replicas = 2;
    spec.allReduceNs = 500'000;
    spec.slowdown[{1, 0}] = 1.5;
    const BuiltPipeline bp = pipelineTrace(spec);
    const AnalysisResult r = analyze(bp.trace);
    QVERIFY(r.pipeline.found);
    QCOMPARE(r.pipeline.dp, 2);
    // Stage 0 ends at 9 ms (replica 0) and 10.5 ms (replica 1), stage 1 at 7 and 7.5 ms.
    QCOMPARE(cause(r, 0, BubbleCause::DpSync), 2 * kMs);
    QCOMPARE(cause(r, 1, BubbleCause::DpSync), TimeNs(500'000));
    QCOMPARE(cause(r, 2, BubbleCause::DpSync), 1 * kMs);
    QCOMPARE(cause(r, 3, BubbleCause::DpSync), TimeNs(500'000));
    QCOMPARE(measurePipeline(bp.trace, r).dataParallelSyncNs, 2 * kMs);
}

// Model_0 holds two Block modules on stage 0; stage 1 holds one Block and a
// loss module called outside the model. Each forward kernel is 600 us and each
// module's backward two 500 us kernels, per microbatch.
void TestLayersAndCauses::modulesGiveLayers()
{
    Trace t = pipelineTrace(layeredSpec()).trace;
    addModuleRanges(t, {{"Model_0/Block_0", "Model_0/Block_1"}, {"Model_0/Block_0", "CrossEntropyLoss_0"}});
    const AnalysisResult r = analyze(t);
    QCOMPARE(r.pipeline.microbatches, 2);
    QCOMPARE(std::string(toString(r.layers.source)), std::string("modules"));
    QCOMPARE(r.layers.layers.size(), size_t(3));
    compareLayer(r.layers.layers[0], "layers.0", 0, 600'000, 1'000'000);
    compareLayer(r.layers.layers[1], "layers.1", 0, 600'000, 1'000'000);
    compareLayer(r.layers.layers[2], "layers.2", 1, 600'000, 1'000'000);
    QVERIFY(r.layers.before.empty());
    QCOMPARE(r.layers.after.size(), size_t(1));
    compareLayer(r.layers.after[0], "CrossEntropyLoss", 1, 600'000, 1'000'000);
    QCOMPARE(r.layers.attributedNs, r.layers.computeNs);
    QCOMPARE(r.layers.computeNs, TimeNs(2 * 2 * (1'200'000 + 2'000'000)));
    QCOMPARE(r.layers.note, std::string("3 layers from module ranges, 100% of the compute time attributed"));

    const MeasuredPipeline mp = measurePipeline(t, r);
    QCOMPARE(mp.layers.size(), size_t(3));
    const whatif::CostModel cm = whatif::CostModel::fromMeasured(mp);
    QCOMPARE(std::string(toString(cm.layerSource)), std::string("trace"));
    QCOMPARE(cm.layerCount(), 3);
    QCOMPARE(cm.measuredPartition->firstLayer, (std::vector<int>{0, 2, 3}));

    const nlohmann::json j = toJson(r, {});
    QCOMPARE(j["layers"].size(), size_t(4));
    QCOMPARE(j["layers"][3]["role"].get<std::string>(), std::string("after"));
    QCOMPARE(j["layers"][0]["forward_ns"].get<TimeNs>(), TimeNs(600'000));
    QCOMPARE(j["layer_source"]["source"].get<std::string>(), std::string("modules"));
}

// Each stage holds a single block (as p = 8, v = 4 does with 32 layers): no
// module calls a class twice, so the block class is the one every stage's
// model calls. This crashed the attribution before (kernels kept module
// indices where unit indices were expected).
void TestLayersAndCauses::oneBlockPerStage()
{
    Trace t = pipelineTrace(layeredSpec()).trace;
    addModuleRanges(t, {{"Model_0/Block_0", "Model_0/Block_0"}, {"Model_0/Block_1", "Model_0/Block_1"}});
    const AnalysisResult r = analyze(t);
    QCOMPARE(std::string(toString(r.layers.source)), std::string("modules"));
    QCOMPARE(r.layers.layers.size(), size_t(2));
    compareLayer(r.layers.layers[0], "layers.0", 0, 1'200'000, 2'000'000);
    compareLayer(r.layers.layers[1], "layers.1", 1, 1'200'000, 2'000'000);
    QVERIFY(r.layers.before.empty());
    QVERIFY(r.layers.after.empty());
    QCOMPARE(r.layers.attributedNs, r.layers.computeNs);
}

// The annotation helper's NVTX ranges around each layer's forward, no launch
// calls and no sequence numbers: backward kernels follow the forward's layers
// in reverse, in proportion to their forward time.
void TestLayersAndCauses::layerRangesGiveLayers()
{
    Trace t = pipelineTrace(layeredSpec()).trace;
    std::map<int, int> forwards;
    const std::vector<std::vector<std::string>> names{{"layers.0", "layers.1"}, {"layers.2", "lm_head"}};
    for (const Activity& a : t.activities)
        if (t.str(a.name).starts_with("sm90_gemm_") && a.launchStart && a.end - a.start == 600'000) {
            const int q = forwards[a.rank]++ % 2;
            addRange(t, a.rank, 1, CpuRangeKind::Nvtx, "pipescope/layer " + names[size_t(a.rank)][size_t(q)],
                     *a.launchStart - 100, *a.launchStart + 1'000);
        }
    sortRanges(t);
    const AnalysisResult r = analyze(t);
    QCOMPARE(std::string(toString(r.layers.source)), std::string("annotations"));
    QCOMPARE(r.layers.layers.size(), size_t(3));
    compareLayer(r.layers.layers[0], "layers.0", 0, 600'000, 1'000'000);
    compareLayer(r.layers.layers[1], "layers.1", 0, 600'000, 1'000'000);
    compareLayer(r.layers.layers[2], "layers.2", 1, 600'000, 1'000'000);
    QCOMPARE(r.layers.after.size(), size_t(1));
    compareLayer(r.layers.after[0], "lm_head", 1, 600'000, 1'000'000);
}

void TestLayersAndCauses::nothingToAttribute()
{
    const AnalysisResult r = analyze(pipelineTrace(layeredSpec()).trace);
    QCOMPARE(std::string(toString(r.layers.source)), std::string("none"));
    QVERIFY(r.layers.layers.empty());
    QCOMPARE(r.layers.note, std::string("the trace has neither module ranges (record with with_stack=True or "
                                        "with_modules=True) nor pipescope/layer ranges (the annotation helper)"));
}

QTEST_GUILESS_MAIN(TestLayersAndCauses)
#include "tst_layers_and_causes.moc"
