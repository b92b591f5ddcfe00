// Trust on traces nobody here wrote: no pipeline is claimed without
// proof, communication that NCCL runs as SendRecv kernels or that is not NCCL
// at all is not read as pipeline transfers or compute, and jobs written by an
// independent simulator read exactly.
#include "ImportFixture.h"
#include "TestSupport.h"
#include "analysis/Analysis.h"
#include "analysis/Classify.h"
#include "analysis/CommRules.h"
#include "import/Import.h"
#include "store/Store.h"
#include "util/Error.h"
#include "util/Format.h"
#include "whatif/Levers.h"
#include "whatif/WhatIf.h"

#include <QFile>

#include <algorithm>
#include <cmath>
#include <QtTest>

#include <nlohmann/json.hpp>

using namespace pipescope;
using json = nlohmann::json;

namespace {


// One rank of a recommendation-model step as PyTorch writes it on older
// releases (the shape of torchrec's DLRM traces): the embedding all-to-all is
// a `nccl:all_to_all` annotation around the launch of a SendRecv kernel, with
// no peer or collective arguments anywhere; the dense part's gradients are an
// all-reduce. Compute on stream 7, NCCL on stream 84.
json recommendationRank(int rank, int world)
{
    json ev = json::array();
    const int64_t base = 1'000'000 + rank * 13; // ranks start a few µs apart
    int64_t corr = 100;
    const int64_t tid = 5000 + rank;
    ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#10"}, {"pid", tid}, {"tid", tid},
                  {"ts", base}, {"dur", 20'000}});
    int64_t t = base + 100;
    auto launch = [&](const std::string& kernel, int stream, int64_t at, int64_t dur, const std::string& around) {
        const int64_t c = corr++;
        if (!around.empty()) {
            ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "record_param_comms"}, {"pid", tid}, {"tid", tid},
                          {"ts", at - 20}, {"dur", 60}, {"args", {{"External id", c}}}});
            ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", around}, {"pid", tid}, {"tid", tid},
                          {"ts", at - 10}, {"dur", 40}, {"args", {{"External id", c + 10000}}}});
        }
        ev.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", tid}, {"tid", tid},
                      {"ts", at}, {"dur", 5}, {"args", {{"correlation", c}}}});
        ev.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", kernel}, {"pid", rank}, {"tid", stream}, {"ts", at + 15},
                      {"dur", dur}, {"args", {{"device", rank}, {"stream", stream}, {"correlation", c}, {"grid", {8, 1, 1}}}}});
    };
    for (int i = 0; i < 5; ++i) {
        launch("void embedding_forward_kernel<float>(float*, int)", 7, t, 400, "");
        t += 500;
        launch("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", 84, t,
               300 + 100 * ((rank + i) % world), "nccl:all_to_all");
        t += 900;
        launch("ampere_sgemm_128x64_nn", 7, t, 600, "");
        t += 700;
    }
    for (int i = 0; i < 3; ++i) {
        launch("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", 84, t, 200, "nccl:all_reduce");
        t += 300;
    }
    return {{"schemaVersion", 1},
            {"distributedInfo", {{"backend", "nccl"}, {"rank", rank}, {"world_size", world}}},
            {"traceEvents", ev}};
}

void writeJson(const QString& path, const json& j)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray::fromStdString(j.dump()));
}

int64_t count(const AnalysisResult& r, WorkClass c) { return r.kernelCounts[static_cast<size_t>(c)]; }

} // namespace

class TestTrust : public QObject {
    Q_OBJECT
private slots:
    // An all-to-all NCCL runs as SendRecv kernels is a collective,
    // and no pipeline is invented from it.
    void allToAllOverSendRecvIsNotAPipeline()
    {
        QTemporaryDir dir;
        std::vector<std::string> files;
        for (int r = 0; r < 4; ++r) {
            const QString f = dir.path() + QStringLiteral("/rank-%1.json").arg(r);
            writeJson(f, recommendationRank(r, 4));
            files.push_back(f.toStdString());
        }
        const Trace t = test::importAndLoad(files, dir);
        int allToAll = 0, allReduce = 0;
        for (const NcclOp& op : t.ncclOps) {
            allToAll += op.kind == Collective::AllToAll;
            allReduce += op.kind == Collective::AllReduce;
            QVERIFY(!op.isP2p);
        }
        QCOMPARE(allToAll, 4 * 5);
        QCOMPARE(allReduce, 4 * 3);
        const AnalysisResult r = analyze(t);
        QVERIFY(!r.pipeline.found);
        QCOMPARE(count(r, WorkClass::P2p), int64_t(0));
        QCOMPARE(count(r, WorkClass::Collective), int64_t(4 * 8));
        QCOMPARE(count(r, WorkClass::Compute), int64_t(4 * 10));
        QCOMPARE(r.pipeline.reason, std::string("no point-to-point traffic between ranks"));
        // The expert/embedding exchange is measured as all-to-all instead.
        QCOMPARE(r.allToAll.ranks.size(), size_t(4));
        for (const auto& a : r.allToAll.ranks)
            QCOMPARE(a.count, 5);
    }

    // Bare SendRecv kernels (no CPU op, no peers) prove nothing: no pipeline,
    // and the reason says how to ask for one.
    void bareSendRecvKernelsAreNoProof()
    {
        QTemporaryDir dir;
        std::vector<std::string> files;
        for (int r = 0; r < 4; ++r) {
            json j = recommendationRank(r, 4);
            json kept = json::array();
            for (const json& e : j["traceEvents"])
                if (e["cat"] == "kernel" || e["name"] == "ProfilerStep#10")
                    kept.push_back(e);
            j["traceEvents"] = kept;
            const QString f = dir.path() + QStringLiteral("/rank-%1.json").arg(r);
            writeJson(f, j);
            files.push_back(f.toStdString());
        }
        const Trace t = test::importAndLoad(files, dir);
        const AnalysisResult r = analyze(t);
        QCOMPARE(count(r, WorkClass::P2p), int64_t(4 * 5));
        QVERIFY(!r.pipeline.found);
        QVERIFY2(r.pipeline.reason.find("point-to-point kernels without peer ranks") != std::string::npos, r.pipeline.reason.c_str());
        QVERIFY(r.pipeline.reason.find("--pp N or --stage-map") != std::string::npos);
        // Asked for, it is analysed as one.
        AnalyzeOptions o;
        o.pipelineDegree = 4;
        const AnalysisResult asked = analyze(t, o);
        QVERIFY(asked.pipeline.found);
        QCOMPARE(std::string(toString(asked.pipeline.stageSource)), std::string("user"));
    }

    // Real: two ranks of a 128-rank recommendation job (HTA's sampled trace):
    // SendRecv kernels under nccl:all_to_all.
    void realRecommendationJobIsNotAPipeline()
    {
        PIPESCOPE_REQUIRE_EXTERNAL_DATA();
        QTemporaryDir dir;
        const Trace t = test::importAndLoad({test::externalData("kineto/hta-sampled-128rank-r0.json.gz"),
                                          test::externalData("kineto/hta-sampled-128rank-r1.json.gz")},
                                         dir);
        const AnalysisResult r = analyze(t);
        QVERIFY(!r.pipeline.found);
        QCOMPARE(r.ranks, (std::vector<int>{0, 1}));
        // The README's facts: 10 SendRecv kernels per rank, all of them the all-to-all.
        QCOMPARE(count(r, WorkClass::P2p), int64_t(0));
        int sendRecvKernels = 0;
        for (const Activity& a : t.activities)
            sendRecvKernels += t.str(a.name).find("SendRecv") != std::string::npos;
        QCOMPARE(sendRecvKernels, 20);
    }

    // Real, when present: the 8-rank torchrec DLRM step (facebookresearch/param,
    // et_replay/tests/inputs/dlrm_kineto.tar.gz), 5 SendRecv (all-to-all) and
    // 3 AllReduce kernels per rank.
    void realDlrmJobIsNotAPipeline()
    {
        const QString folder = test::extraTraces("dlrm_kineto");
        if (folder.isEmpty())
            QSKIP("PIPESCOPE_EXTRA_TRACES/dlrm_kineto not present (docs/testing-real-traces.md)");
        QTemporaryDir dir;
        const Trace t = test::importAndLoad({folder.toStdString()}, dir);
        const AnalysisResult r = analyze(t);
        QVERIFY(!r.pipeline.found);
        QCOMPARE(r.ranks.size(), size_t(8));
        QCOMPARE(count(r, WorkClass::P2p), int64_t(0));
        QCOMPARE(count(r, WorkClass::Collective), int64_t(8 * 8));
        QCOMPARE(r.allToAll.ranks.size(), size_t(8));
    }

    // The job an independent simulator wrote (shared/data/independent,
    // its README's facts): 1F1B, p 4, dp 1, v 1, m 4, no step annotations,
    // one SendRecv kernel per send and per receive on one stream.
    void independentOneFOneB()
    {
        PIPESCOPE_REQUIRE_INDEPENDENT_DATA();
        QTemporaryDir dir;
        const Trace t = test::importAndLoad({test::independentData("pp4-m4-1f1b-unannotated")}, dir);
        AnalyzeOptions o;
        o.allIterations = true;
        const AnalysisResult r = analyze(t, o);
        QVERIFY(r.pipeline.found);
        QCOMPARE(r.pipeline.pp, 4);
        QCOMPARE(r.pipeline.dp, 1);
        QCOMPARE(r.pipeline.chunks, 1);
        QCOMPARE(r.pipeline.microbatches, 4);
        QCOMPARE(scheduleName(r.pipeline.schedule), std::string("1f1b"));
        for (const auto& a : r.pipeline.stageMap)
            QCOMPARE(a.stage, a.rank);
        QCOMPARE(r.iterations.size(), size_t(2));
        QCOMPARE(r.iterations[0].label, std::string("ProfilerStep#4"));
        QCOMPARE(r.iterations[1].label, std::string("ProfilerStep#5"));
        // Megatron's order: min(m, p-1-stage) warm-up forwards, then one forward one backward.
        const std::vector<std::string> order{"F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 B0 F3 B1 B2 B3",
                                             "F0 F1 B0 F2 B1 F3 B2 B3", "F0 B0 F1 B1 F2 B2 F3 B3"};
        for (int it = 0; it < 2; ++it)
            for (int rank = 0; rank < 4; ++rank) {
                std::vector<const Step*> steps;
                for (const Step& st : r.steps)
                    if (st.iteration == it && st.rank == rank)
                        steps.push_back(&st);
                std::sort(steps.begin(), steps.end(), [](const Step* a, const Step* b) { return a->start < b->start; });
                std::string seen;
                for (const Step* st : steps)
                    seen += (seen.empty() ? "" : " ") + std::string(st->kind == StepKind::F ? "F" : "B") +
                            std::to_string(st->microbatch);
                QCOMPARE(QString::fromStdString(seen), QString::fromStdString(order[static_cast<size_t>(rank)]));
            }
        // About 73.7 ms an iteration; about 43 % of rank time idle; the stages balanced.
        for (const Iteration& it : r.iterations)
            QVERIFY2(std::abs(static_cast<double>(it.end - it.start) - 73.7e6) < 0.5e6, std::to_string(it.end - it.start).c_str());
        TimeNs idle = 0, window = 0;
        for (const RankIdle& ri : r.idle)
            if (ri.iteration == r.selectedIteration) {
                idle += ri.idleNs;
                window += ri.windowNs;
            }
        QVERIFY2(std::abs(static_cast<double>(idle) / static_cast<double>(window) - 0.43) < 0.02,
                 std::to_string(static_cast<double>(idle) / static_cast<double>(window)).c_str());
        QVERIFY(r.imbalance.maxOverMean < 1.01);

        // The levers, best first, each the what-if engine's own prediction.
        const whatif::CostModel model = whatif::calibrate(t, r);
        const whatif::Levers levers = whatif::rankLevers(model, r);
        QCOMPARE(levers.measuredNs, *model.measuredIterationNs);
        // Gains count against the replay of the measured run, the same model on both sides.
        QCOMPARE(levers.baselineNs, whatif::predict(model, whatif::measuredScenario(model)).iterationNs());
        QCOMPARE(*whatif::measuredReplayNs(model), levers.baselineNs);
        QVERIFY2(levers.bubbles.find("is at the ideal for 1f1b with p=4, m=4 (43%)") != std::string::npos, levers.bubbles.c_str());
        QVERIFY(levers.levers.size() >= 3);
        for (size_t i = 1; i < levers.levers.size(); ++i)
            QVERIFY(levers.levers[i - 1].gain >= levers.levers[i].gain);
        bool sawMicrobatches = false;
        for (const whatif::Lever& l : levers.levers) {
            QCOMPARE(l.gain, (static_cast<double>(levers.baselineNs) - static_cast<double>(l.predictedNs)) /
                                 static_cast<double>(levers.baselineNs));
            if (l.kind == "microbatches") {
                sawMicrobatches = true;
                whatif::ScenarioChanges c;
                c.microbatches = 8;
                whatif::BalanceOptions bo;
                bo.timeline = false;
                bo.maxRefineRounds = 4;
                const auto b = whatif::autoBalance(model, whatif::applyChanges(whatif::measuredScenario(model), c), bo);
                QCOMPARE(l.predictedNs, b.prediction.iterationNs());
                QCOMPARE(whatif::leverText(l), "m=8 microbatches (same global batch), auto-balanced: " + formatDuration(l.predictedNs) + " (-" +
                                                   QString::number(l.gain * 100.0, 'f', 1).toStdString() + "%)");
            }
        }
        QVERIFY(sawMicrobatches);

        // The basis, said once: the replay and its error, or the measured run where there is no replay.
        whatif::Levers basis;
        basis.measuredNs = 1'297'000'000;
        basis.baselineNs = 1'117'000'000;
        QCOMPARE(whatif::leversBasisText(basis),
                 std::string("against its replay of the measured run, 1.117 s (-13.9% from the measured 1.297 s)"));
        basis.baselineNs = basis.measuredNs;
        QCOMPARE(whatif::leversBasisText(basis), std::string("against the measured 1.297 s"));
    }

    // PyTorch's elementwise kernels name their lambdas ({lambda()#2}): they are
    // not the LAMB optimizer, and must not cut a step in two.
    void lambdasAreNotTheLambOptimizer()
    {
        QVERIFY(!isOptimizerKernel("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl("
                                   "at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const>"));
        QVERIFY(isOptimizerKernel("void multi_tensor_apply_kernel<TensorListMetadata<4>, LAMBStage1Functor<float>>"));
        QVERIFY(isOptimizerKernel("fused_lamb_kernel"));
        QVERIFY(isOptimizerKernel("void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>"));
        QVERIFY(!isOptimizerKernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n"));
    }

    // DeepEP's kernels are communication (all-to-all); its layout kernel is compute.
    void communicationBeyondNccl_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("cls");
        QTest::addColumn<QString>("op");
        const int coll = static_cast<int>(WorkClass::Collective), comp = static_cast<int>(WorkClass::Compute),
                  p2p = static_cast<int>(WorkClass::P2p);
        QTest::newRow("dpsk combine") << "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*)" << coll << "AllToAll";
        QTest::newRow("dpsk cached_notify") << "void dpsk::ep::internode::cached_notify<false>(int, int)" << coll << "AllToAll";
        QTest::newRow("dpsk notify_dispatch") << "void dpsk::ep::internode::notify_dispatch<false, 8>(int const*)" << coll << "AllToAll";
        QTest::newRow("deep_ep intranode dispatch") << "void deep_ep::intranode::dispatch<8, 768>(int4*, float*)" << coll << "AllToAll";
        QTest::newRow("deep_ep low latency") << "void deep_ep::internode_ll::combine<false>(void*)" << coll << "AllToAll";
        QTest::newRow("layout is compute") << "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*)" << comp << "";
        QTest::newRow("nvshmem") << "nvshmemi_barrier_all_on_stream_kernel" << coll << "";
        QTest::newRow("symmetric memory") << "void c10d::symmetric_memory::multimem_all_reduce_kernel<bf16>(bf16*)" << coll << "AllReduce";
        QTest::newRow("one shot") << "void one_shot_all_reduce_kernel<float, 8>(float**)" << coll << "AllReduce";
        QTest::newRow("two shot") << "two_shot_all_reduce_kernel_inplace" << coll << "AllReduce";
        QTest::newRow("vllm") << "void vllm::cross_device_reduce_1stage<half, 8>(vllm::RankData*)" << coll << "AllReduce";
        QTest::newRow("nccl 2.19 generic") << "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)" << coll << "";
        QTest::newRow("nccl 2.19 sendrecv") << "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)" << p2p << "";
        QTest::newRow("nccl 2.x") << "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)" << coll << "";
        QTest::newRow("nccl <2.6") << "ncclAllReduceRingLLKernel_sum_f32(CollectiveArgs)" << coll << "";
        QTest::newRow("gemm") << "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64" << comp << "";
    }
    void communicationBeyondNccl()
    {
        QFETCH(QString, name);
        QFETCH(int, cls);
        QFETCH(QString, op);
        QCOMPARE(static_cast<int>(classify(ActivityKind::Kernel, name.toStdString(), nullptr)), cls);
        auto m = CommRules::builtIn().match(name.toStdString());
        QCOMPARE(QString::fromStdString(std::string(m ? m->op : std::string_view())), op);
    }

    // A DualPipe rank whose time goes to DeepEP is not "compute-bound".
    void deepEpTimeIsCommunication()
    {
        QTemporaryDir dir;
        json ev = json::array();
        int64_t t = 1000;
        auto kernel = [&](const std::string& name, int stream, int64_t dur) {
            ev.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", name}, {"pid", 0}, {"tid", stream}, {"ts", t}, {"dur", dur},
                          {"args", {{"device", 0}, {"stream", stream}}}});
        };
        for (int i = 0; i < 4; ++i) {
            kernel("void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*)", 7, 10);
            kernel("void dpsk::ep::internode::dispatch<false, 8, false, 8>(int4*)", 27, 3000);
            t += 3000;
            kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 7, 1000);
            kernel("void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*)", 27, 3000);
            t += 3000;
        }
        // One profiler step around it all, as the real profile has.
        ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#1"}, {"pid", 100}, {"tid", 100},
                      {"ts", 900}, {"dur", t - 900 + 1000}});
        const QString f = dir.path() + "/train.json";
        writeJson(f, {{"distributedInfo", {{"rank", 0}, {"world_size", 64}}}, {"traceEvents", ev}});
        const Trace tr = test::importAndLoad({f.toStdString()}, dir);
        const AnalysisResult r = analyze(tr);
        QCOMPARE(count(r, WorkClass::Collective), int64_t(8));
        QCOMPARE(count(r, WorkClass::Compute), int64_t(8));
        QCOMPARE(r.allToAll.ranks.size(), size_t(1));
        QCOMPARE(r.allToAll.ranks[0].count, 8);
        QCOMPARE(r.allToAll.ranks[0].kernelNs, TimeNs(24'000'000));
        QCOMPARE(r.hta.temporal.size() > 0, true);
        QVERIFY(r.hta.temporal[0].computeTimeNs < r.hta.temporal[0].nonComputeTimeNs);
    }

    // Real, when present: DeepSeek-V3's published DualPipe training profile
    // (deepseek-ai/profile-data train.json): 32 DeepEP kernels, 113.030 ms.
    void realDeepSeekProfile()
    {
        const QString file = test::extraTraces("deepseek/train.json");
        if (file.isEmpty())
            QSKIP("PIPESCOPE_EXTRA_TRACES/deepseek/train.json not present (docs/testing-real-traces.md)");
        QTemporaryDir dir;
        const Trace t = test::importAndLoad({file.toStdString()}, dir);
        const AnalysisResult r = analyze(t);
        int64_t deepEpNs = 0, deepEp = 0;
        for (size_t i = 0; i < t.activities.size(); ++i) {
            const std::string& n = t.str(t.activities[i].name);
            if (n.find("dpsk::ep::inter") != std::string::npos) {
                QCOMPARE(static_cast<int>(classify(ActivityKind::Kernel, n, nullptr)), static_cast<int>(WorkClass::Collective));
                deepEpNs += t.activities[i].end - t.activities[i].start;
                ++deepEp;
            }
        }
        QCOMPARE(deepEp, int64_t(32));
        QCOMPARE(deepEpNs, int64_t(113'030'000));
    }

    // The rule file: the user's rules first, in order; mistakes named by line.
    void ruleFiles()
    {
        const CommRules rules = CommRules::fromText("# mine\n"
                                                    "all-to-all   *my_moe::dispatch_tokens*\n"
                                                    "\n"
                                                    "compute nvshmem_gemm\r\n"
                                                    "p2p fancy_send\n",
                                                    "rules.txt");
        auto m = rules.match("void my_moe::dispatch_tokens<8>(int*)");
        QVERIFY(m);
        QCOMPARE(static_cast<int>(m->cls), static_cast<int>(WorkClass::Collective));
        QCOMPARE(std::string(m->op), std::string("AllToAll"));
        QCOMPARE(std::string(m->family), std::string("rule file rules.txt line 2"));
        // The user's compute rule wins over the built-in NVSHMEM entry.
        QCOMPARE(static_cast<int>(classify(ActivityKind::Kernel, "nvshmem_gemm_fused", nullptr, &rules)),
                 static_cast<int>(WorkClass::Compute));
        QCOMPARE(static_cast<int>(classify(ActivityKind::Kernel, "nvshmem_barrier", nullptr, &rules)),
                 static_cast<int>(WorkClass::Collective));
        QCOMPARE(static_cast<int>(classify(ActivityKind::Kernel, "my_fancy_send_kernel", nullptr, &rules)),
                 static_cast<int>(WorkClass::P2p));
        QCOMPARE(static_cast<int>(classify(ActivityKind::Kernel, "my_fancy_send_kernel", nullptr)),
                 static_cast<int>(WorkClass::Compute));

        auto error = [](const char* text) {
            try {
                CommRules::fromText(text, "r.txt");
            } catch (const Error& e) {
                return std::string(e.what());
            }
            return std::string();
        };
        QCOMPARE(error("all-to-all *x*\nbogus *y*\n"),
                 std::string("r.txt line 2: unknown class 'bogus'; use collective, all-to-all, all-reduce, all-gather, "
                             "reduce-scatter, p2p, compute or memcpy"));
        QCOMPARE(error("collective\n"), std::string("r.txt line 1: 'collective' is not CLASS PATTERN (e.g. `all-to-all *my_ep::dispatch*`)"));
        QCOMPARE(error("collective **\n"), std::string("r.txt line 1: the pattern matches every kernel; name the kernels the rule is for"));
        QVERIFY(commPatternMatches("a*b?d", "AxxBcD"));
        QVERIFY(!commPatternMatches("a*b?d", "AxxBD"));
        QVERIFY(commPatternMatches("mid", "xxMIDxx"));
    }

    // The replay of the measured configuration is the model's
    // calibration error, not a speed-up; other scenarios compare with that replay.
    void calibrationIsNotASpeedup()
    {
#ifndef PIPESCOPE_CLI
        QSKIP("the pipescope command-line tool is not built");
#else
        const QString store = QString::fromUtf8(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";
        auto r = test::runCli({"whatif", store, "--microbatches", "16", "--json"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const json doc = json::parse(r.out.toStdString());
        const json& preds = doc["predictions"];
        QCOMPARE(preds.size(), size_t(2));
        const json& measured = preds[0];
        QCOMPARE(measured["measured_configuration"].get<bool>(), true);
        const double m = measured["measured_iteration_ns"].get<double>(), p = measured["iteration_ns"].get<double>();
        QCOMPARE(measured["calibration_error"].get<double>(), (p - m) / m);
        const json& requested = preds[1];
        QCOMPARE(requested["measured_configuration"].get<bool>(), false);
        QVERIFY(requested["calibration_error"].is_null());
        // Its speed-up counts against the replay of the measured run (baseline_ns), not the measured run:
        // the model's calibration error is not a gain.
        QCOMPARE(requested["baseline_ns"].get<double>(), p);
        QCOMPARE(requested["speedup"].get<double>(), p / requested["iteration_ns"].get<double>());

        auto text = test::runCli({"whatif", store});
        QVERIFY(text.out.contains("(replay of the measured run: "));
        QVERIFY(text.out.contains(" measured, calibration error "));
        QVERIFY(!text.out.contains("speed-up 1.00x"));
#endif
    }

    // The CLI takes --comm-rules, and a bad file is one clear error.
    void cliCommRules()
    {
#ifndef PIPESCOPE_CLI
        QSKIP("the pipescope command-line tool is not built");
#else
        QTemporaryDir dir;
        json ev = json::array();
        for (int i = 0; i < 4; ++i) {
            ev.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "my_moe::dispatch_tokens"}, {"pid", 0}, {"tid", 7},
                          {"ts", 1000 + 100 * i}, {"dur", 50}, {"args", {{"device", 0}, {"stream", 7}}}});
        }
        writeJson(dir.path() + "/t.json", {{"traceEvents", ev}});
        QCOMPARE(test::runCli({"import", dir.path() + "/t.json", "-o", dir.path() + "/t.pipescope", "-q"}).exitCode, 0);
        QFile rules(dir.path() + "/rules.txt");
        QVERIFY(rules.open(QIODevice::WriteOnly));
        rules.write("all-to-all my_moe::dispatch\n");
        rules.close();
        auto plain = test::runCli({"analyze", dir.path() + "/t.pipescope", "--json"});
        QCOMPARE(plain.exitCode, 0);
        auto with = test::runCli({"analyze", dir.path() + "/t.pipescope", "--json", "--comm-rules", dir.path() + "/rules.txt"});
        QVERIFY2(with.exitCode == 0, qPrintable(with.err));
        const json a = json::parse(plain.out.toStdString()), b = json::parse(with.out.toStdString());
        QCOMPARE(a["classification"]["activities"]["compute"].get<int>(), 4);
        QCOMPARE(a["classification"]["activities"]["collective"].get<int>(), 0);
        QCOMPARE(b["classification"]["activities"]["collective"].get<int>(), 4);
        QCOMPARE(b["classification"]["activities"]["compute"].get<int>(), 0);
        auto bad = test::runCli({"analyze", dir.path() + "/t.pipescope", "--comm-rules", dir.path() + "/missing.txt"});
        QCOMPARE(bad.exitCode, 1);
        QVERIFY2(bad.err.contains(dir.path() + "/missing.txt: cannot open"), qPrintable(bad.err));
#endif
    }
};

QTEST_GUILESS_MAIN(TestTrust)
#include "tst_trust.moc"
