// Expert-parallel all-to-all (docs/analysis.md, "Mixture-of-experts
// all-to-all"): per rank the exchanges' kernel time, their share of the
// stage's time and of the critical path, and the spread across ranks, on
// hand-built traces whose exchanges are known to the microsecond.
#include "SyntheticTrace.h"
#include "analysis/Analysis.h"
#include "analysis/AnalysisJson.h"
#include "report/Report.h"
#include "util/Format.h"

#include <QtTest>

using namespace pipescope;
using namespace pipescope::test;

namespace {

constexpr TimeNs kUs = 1'000;

// Two ranks of one expert-parallel group, one iteration (ProfilerStep#1):
// compute [0, 1000) us, an all-to-all, compute again from 1500 us. Rank 0's
// exchange takes 400 us [1000, 1400) and its last kernel ends at 2500 us;
// rank 1's takes 500 us [1000, 1500) and its last kernel ends at 2600 us, so
// the critical path runs through rank 1: compute, its all-to-all, compute.
Trace twoExperts()
{
    TraceBuilder tb;
    for (int rank = 0; rank < 2; ++rank) {
        const TimeNs a2aEnd = rank == 0 ? 1400 * kUs : 1500 * kUs, end = rank == 0 ? 2500 * kUs : 2600 * kUs;
        tb.range(rank, CpuRangeKind::Annotation, "ProfilerStep#1", 0, end);
        tb.kernel(rank, 7, "ampere_sgemm_128x64_nn", 0, 1000 * kUs);
        tb.nccl(rank, 20, "AllToAll", 1000 * kUs, a2aEnd, std::nullopt, 8 << 20, {0, 1},
                "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)");
        tb.kernel(rank, 7, "ampere_sgemm_128x64_nn", 1500 * kUs, end);
    }
    return tb.build();
}

} // namespace

class TestAllToAll : public QObject {
    Q_OBJECT

private slots:
    void perRankAndSpread()
    {
        const AnalysisResult r = analyze(twoExperts());
        const AllToAll& a = r.allToAll;
        QCOMPARE(a.ranks.size(), size_t(2));
        QCOMPARE(a.ranks[0].rank, 0);
        QCOMPARE(a.ranks[0].count, int64_t(1));
        QCOMPARE(a.ranks[0].bytes, int64_t(8 << 20));
        QCOMPARE(a.ranks[0].kernelNs, 400 * kUs);
        QCOMPARE(a.ranks[1].kernelNs, 500 * kUs);
        QCOMPARE(a.ranks[0].windowNs, 2500 * kUs);
        QCOMPARE(a.ranks[1].windowNs, 2600 * kUs);
        QCOMPARE(a.minNs, 400 * kUs);
        QCOMPARE(a.medianNs, 450 * kUs);
        QCOMPARE(a.maxNs, 500 * kUs);
        // No pipeline: both ranks count as outside it, 0.9 ms of 5.1 ms.
        QCOMPARE(a.stages.size(), size_t(1));
        QCOMPARE(a.stages[0].stage, -1);
        QCOMPARE(a.stages[0].ranks, 2);
        QCOMPARE(a.stages[0].meanKernelNs, 450 * kUs);
        QCOMPARE(a.stages[0].share, 900.0 / 5100.0);
        // The critical path [0, 2600) us runs through rank 1's exchange.
        QCOMPARE(r.criticalPath.end - r.criticalPath.start, 2600 * kUs);
        QCOMPARE(a.ranks[0].criticalNs, TimeNs(0));
        QCOMPARE(a.ranks[1].criticalNs, 500 * kUs);
        QCOMPARE(a.criticalNs, 500 * kUs);
        QCOMPARE(a.criticalShare, 500.0 / 2600.0);
    }

    void json()
    {
        const AnalysisResult r = analyze(twoExperts());
        const auto j = toJson(r, {})["all_to_all"];
        QCOMPARE(j["per_rank"].size(), size_t(2));
        QCOMPARE(j["per_rank"][1]["kernel_ns"].get<int64_t>(), 500 * kUs);
        QCOMPARE(j["per_rank"][1]["critical_ns"].get<int64_t>(), 500 * kUs);
        QCOMPARE(j["median_ns"].get<int64_t>(), 450 * kUs);
        QCOMPARE(j["per_stage"][0]["stage"].get<int>(), -1);
    }

    // The report's table: one row for the ranks outside a pipeline.
    void report()
    {
        const std::string html = report::renderReport(twoExperts(), {});
        const size_t at = html.find("<table id=\"all-to-all-table\">");
        QVERIFY(at != std::string::npos);
        const std::string row = "<tr><td class=\"num\">-</td><td class=\"num\">2</td><td class=\"num\" title=\"450000 ns\">" +
                                formatDuration(450 * kUs) + "</td><td class=\"num\">" + formatPercent(900.0 / 5100.0) + "</td></tr>";
        QVERIFY2(html.find(row, at) != std::string::npos, html.substr(at, 600).c_str());
        QVERIFY(html.find("2 all-to-all kernels on 2 ranks in this iteration; " + formatPercent(500.0 / 2600.0)) != std::string::npos);
    }

    // A job without all-to-all has an empty block; a SendRecv of a pipeline is no all-to-all.
    void noneInAPipeline()
    {
        PipelineSpec spec;
        spec.stages = 2;
        spec.microbatches = 2;
        spec.commNs = 50'000;
        const AnalysisResult r = analyze(pipelineTrace(spec).trace);
        QVERIFY(r.pipeline.found);
        QVERIFY(r.allToAll.ranks.empty());
        QCOMPARE(toJson(r, {})["all_to_all"]["per_rank"].size(), size_t(0));
    }
};

QTEST_GUILESS_MAIN(TestAllToAll)
#include "tst_all_to_all.moc"
