// Measured memory (docs/analysis.md, "Measured memory"): each rank's GPU
// memory over the selected iteration from the allocator's events, absolute
// where they carry PyTorch's "Total Allocated", relative to the iteration's
// start from the changes alone otherwise; and a simulated job's measured
// peaks against the prediction's.
#include "SyntheticTrace.h"
#include "analysis/Analysis.h"
#include "analysis/AnalysisJson.h"
#include "analysis/MeasuredPipeline.h"
#include "import/Import.h"
#include "store/Store.h"
#include "simulate/KinetoEmitter.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"
#include "whatif/WhatIfJson.h"
#include "whatif/WhatIfText.h"

#include <QTemporaryDir>
#include <QtTest>

using namespace pipescope;
using namespace pipescope::test;

namespace {

constexpr TimeNs kUs = 1'000;

MemoryEvent mem(int rank, int device, TimeNs ts, int64_t bytes, std::optional<int64_t> total = std::nullopt,
                std::optional<int64_t> reserved = std::nullopt)
{
    MemoryEvent e;
    e.rank = rank;
    e.device = device;
    e.ts = ts;
    e.bytes = bytes;
    e.totalAllocated = total;
    e.totalReserved = reserved;
    return e;
}

// Two ranks, three iterations ProfilerStep#1..#3: iteration k's range is
// [2000k, 2000k + 1500) us, its one kernel [2000k + 100, 2000k + 1400) us,
// launched at 2000k + 50 us. Every iteration allocates before its first
// launch (inside the range only).
//
// Rank 0 records totals ("Total Allocated"): 1000 bytes were allocated before
// recording; each iteration adds 300 and 400, frees 100 and 600, so in
// iteration 1 memory goes 1000 -> 1300 -> 1700 (at 2500 us) -> 1600 -> 1000.
// Its device 1 has one event, so device 0 (more events) is the one read.
//
// Rank 1 records changes only: -30, +100, -50, +400 (at 2400 us), -450 in
// iteration 1, so relative to its start it goes to 420 at most, -30 at least.
Trace memoryJob(bool rank0Totals = true)
{
    TraceBuilder tb;
    for (int rank = 0; rank < 2; ++rank)
        for (int k = 0; k < 3; ++k) {
            const TimeNs b = 2000 * k * kUs;
            tb.range(rank, CpuRangeKind::Annotation, "ProfilerStep#" + std::to_string(k + 1), b, b + 1500 * kUs);
            tb.kernel(rank, 7, "ampere_sgemm_128x64_nn", b + 100 * kUs, b + 1400 * kUs, b + 50 * kUs);
        }
    Trace t = tb.build();
    auto total = [&](int64_t v) { return rank0Totals ? std::optional<int64_t>(v) : std::nullopt; };
    for (int k = 0; k < 3; ++k) {
        const TimeNs b = 2000 * k * kUs;
        t.memoryEvents.push_back(mem(0, 0, b + 10 * kUs, 300, total(1300), 2048));
        t.memoryEvents.push_back(mem(0, 0, b + 500 * kUs, 400, total(1700), k == 1 ? 4096 : 2048));
        t.memoryEvents.push_back(mem(0, 0, b + 600 * kUs, -100, total(1600), 2048));
        t.memoryEvents.push_back(mem(0, 0, b + 1200 * kUs, -600, total(1000), 2048));
        t.memoryEvents.push_back(mem(1, 0, b + 5 * kUs, -30));
        t.memoryEvents.push_back(mem(1, 0, b + 10 * kUs, 100));
        t.memoryEvents.push_back(mem(1, 0, b + 300 * kUs, -50));
        t.memoryEvents.push_back(mem(1, 0, b + 400 * kUs, 400));
        t.memoryEvents.push_back(mem(1, 0, b + 1100 * kUs, -450));
    }
    t.memoryEvents.push_back(mem(0, 1, 2700 * kUs, 1 << 20, int64_t(1) << 20));
    return t;
}

AnalyzeOptions iteration1()
{
    AnalyzeOptions o;
    o.iteration = 1;
    return o;
}

} // namespace

class TestMeasuredMemory : public QObject {
    Q_OBJECT

private slots:
    void absoluteFromTotals()
    {
        const AnalysisResult r = analyze(memoryJob(), iteration1());
        QCOMPARE(r.selectedIteration, 1);
        QCOMPARE(r.memory.size(), size_t(2));
        const MeasuredMemory& m = r.memory[0];
        QCOMPARE(m.rank, 0);
        QCOMPARE(m.device, 0);
        QVERIFY(m.absolute);
        QCOMPARE(m.startBytes, int64_t(1000));
        QCOMPARE(m.peakBytes, int64_t(1700));
        QCOMPARE(m.peakAt, 2500 * kUs);
        QCOMPARE(m.minBytes, int64_t(1000));
        QCOMPARE(m.endBytes, int64_t(1000));
        QCOMPARE(m.peakReservedBytes, std::optional<int64_t>(4096));
        QCOMPARE(m.events, int64_t(4));
    }

    void relativeFromChanges()
    {
        const AnalysisResult r = analyze(memoryJob(), iteration1());
        const MeasuredMemory& m = r.memory[1];
        QCOMPARE(m.rank, 1);
        QVERIFY(!m.absolute);
        QCOMPARE(m.startBytes, int64_t(0));
        // The -30 and +100 come before the iteration's first launch, inside
        // its ProfilerStep range: they count.
        QCOMPARE(m.peakBytes, int64_t(420));
        QCOMPARE(m.peakAt, 2400 * kUs);
        QCOMPARE(m.minBytes, int64_t(-30));
        QCOMPARE(m.endBytes, int64_t(-30));
        QVERIFY(!m.peakReservedBytes);
        QCOMPARE(m.events, int64_t(5));

        // Rank 0 without totals: the same changes, relative to its start.
        const AnalysisResult d = analyze(memoryJob(false), iteration1());
        QVERIFY(!d.memory[0].absolute);
        QCOMPARE(d.memory[0].startBytes, int64_t(0));
        QCOMPARE(d.memory[0].peakBytes, int64_t(700));
        QCOMPARE(d.memory[0].peakAt, 2500 * kUs);
        QCOMPARE(d.memory[0].endBytes, int64_t(0));
    }

    void totalInsideTheWindowGivesTheStart()
    {
        // Only iteration 1's third event says its total: the level before it
        // follows from the changes, 1600 - (300 + 400 - 100) = 1000.
        Trace t = memoryJob(false);
        for (MemoryEvent& e : t.memoryEvents)
            if (e.rank == 0 && e.ts == 2600 * kUs)
                e.totalAllocated = 1600;
        const AnalysisResult r = analyze(t, iteration1());
        const MeasuredMemory& m = r.memory[0];
        QVERIFY(m.absolute);
        QCOMPARE(m.startBytes, int64_t(1000));
        QCOMPARE(m.peakBytes, int64_t(1700));
        QCOMPARE(m.endBytes, int64_t(1000));
        // In iteration 2 the level carries over from iteration 1's total.
        AnalyzeOptions o;
        o.iteration = 2;
        const AnalysisResult r2 = analyze(t, o);
        QVERIFY(r2.memory[0].absolute);
        QCOMPARE(r2.memory[0].startBytes, int64_t(1000));
        QCOMPARE(r2.memory[0].peakBytes, int64_t(1700));
    }

    void noEventsNoEntries()
    {
        Trace t = memoryJob();
        t.memoryEvents.clear();
        QVERIFY(analyze(t).memory.empty());
        QVERIFY(toJson(analyze(t), {})["memory"]["per_rank"].empty());
    }

    void json()
    {
        const AnalysisResult r = analyze(memoryJob(), iteration1());
        const auto j = toJson(r, iteration1())["memory"];
        QCOMPARE(j["iteration"].get<int>(), 1);
        QCOMPARE(j["per_rank"].size(), size_t(2));
        QCOMPARE(j["per_rank"][0]["peak_bytes"].get<int64_t>(), int64_t(1700));
        QCOMPARE(j["per_rank"][0]["absolute"].get<bool>(), true);
        QCOMPARE(j["per_rank"][0]["peak_reserved_bytes"].get<int64_t>(), int64_t(4096));
        QCOMPARE(j["per_rank"][0]["peak_at"].get<int64_t>(), 2500 * kUs);
        QCOMPARE(j["per_rank"][1]["absolute"].get<bool>(), false);
        QVERIFY(j["per_rank"][1]["peak_reserved_bytes"].is_null());
        QCOMPARE(j["per_rank"][1]["min_bytes"].get<int64_t>(), int64_t(-30));
    }

    // `simulate --emit-kineto` writes the prediction's memory as [memory]
    // events with totals; imported and analysed, every rank's measured peak
    // is the predicted one.
    void simulatedJobMeasuresThePrediction()
    {
        using namespace whatif;
        const std::string text = R"({"format": "pipescope.model/1", "name": "gpt-8l", "hidden_size": 1024,
            "attention_heads": 16, "sequence_length": 1024, "vocab_size": 32000, "gpu_tflops": 300,
            "layers": [{"name": "decoder", "count": 8}],
            "communication": {"p2p_latency_us": 20, "p2p_bandwidth_gbps": 25, "allreduce_latency_us": 30,
                              "allreduce_bandwidth_gbps": 40}})";
        const CostModel model = CostModel::fromModel(parseModelDescription(text, "test model"));
        Scenario base;
        base.pp = 4;
        base.microbatches = 8;
        ScenarioChanges changes;
        changes.schedule = "1f1b";
        const Prediction p = predict(model, applyChanges(base, changes));
        QTemporaryDir dir;
        const std::string jobDir = dir.filePath("job").toStdString();
        simulate::KinetoEmitOptions eo;
        eo.iterations = 3;
        eo.costModel = &model;
        const simulate::KinetoEmitSummary emitted = simulate::emitKineto(p, eo, jobDir);

        ImportJobOptions io;
        io.inputs = emitted.files;
        io.output = dir.filePath("job.pipescope").toStdString();
        io.progress = false;
        importJob(io);
        Store store(io.output);
        const Trace trace = store.load();
        QVERIFY(!trace.memoryEvents.empty());
        const AnalysisResult r = analyze(trace);
        QVERIFY(r.pipeline.found);
        QCOMPARE(r.memory.size(), size_t(4));
        const MeasuredPipeline mp = measurePipeline(trace, r);
        QCOMPARE(mp.measuredPeakBytes.size(), size_t(4));
        for (const MeasuredMemory& m : r.memory) {
            const RankMemory& predicted = p.memory[size_t(m.rank)];
            QVERIFY(m.absolute);
            QCOMPARE(m.stage, m.rank);
            QCOMPARE(m.startBytes, predicted.staticBytes);
            const double off = std::abs(double(m.peakBytes) / double(predicted.peakBytes) - 1.0);
            QVERIFY2(off < 0.01, qPrintable(QString("rank %1: measured %2, predicted %3")
                                                .arg(m.rank).arg(m.peakBytes).arg(predicted.peakBytes)));
            QCOMPARE(mp.measuredPeakBytes[size_t(m.rank)], m.peakBytes);
            QVERIFY(m.peakReservedBytes && *m.peakReservedBytes >= m.peakBytes);
        }

        // The what-if calibrated on the trace (sizes from the same model
        // description) shows the measured peaks beside its own, which agree.
        const ModelDescription md = parseModelDescription(text, "test model");
        CalibrateOptions co;
        co.model = &md;
        const CostModel calibrated = calibrate(trace, r, co);
        QCOMPARE(calibrated.measuredPeakBytes, mp.measuredPeakBytes);
        const Prediction replayed = predict(calibrated, measuredScenario(calibrated));
        QCOMPARE(replayed.measuredPeakBytes, mp.measuredPeakBytes);
        for (size_t rank = 0; rank < 4; ++rank) {
            const double off = std::abs(double(replayed.memory[rank].peakBytes) / double(replayed.measuredPeakBytes[rank]) - 1.0);
            QVERIFY2(off < 0.01, qPrintable(QString("rank %1: predicted %2, measured %3")
                                                .arg(rank).arg(replayed.memory[rank].peakBytes).arg(replayed.measuredPeakBytes[rank])));
        }
        const nlohmann::json j = predictionToJson(replayed, JsonOptions{false});
        QCOMPARE(j["ranks"][0]["memory"]["measured_peak_bytes"].get<int64_t>(), mp.measuredPeakBytes[0]);
        QVERIFY(predictionText(replayed).find("measured peak") != std::string::npos);
        // Another pipeline degree has no measured counterpart.
        Scenario two = measuredScenario(calibrated);
        two.pp = 2;
        two.boundaries.reset();
        QVERIFY(predict(calibrated, two).measuredPeakBytes.empty());
    }
};

QTEST_GUILESS_MAIN(TestMeasuredMemory)
#include "tst_measured_memory.moc"
