#include "report/AnalysisText.h"
#include "report/JobPartText.h"

#include "analysis/Verdict.h"
#include "util/Format.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace pipescope::report {

namespace {

std::string fmtTime(TimeNs ns)
{
    char buf[64];
    double v = static_cast<double>(ns);
    double a = std::abs(v);
    if (a >= 1e9)
        std::snprintf(buf, sizeof buf, "%.3f s", v / 1e9);
    else if (a >= 1e6)
        std::snprintf(buf, sizeof buf, "%.3f ms", v / 1e6);
    else if (a >= 1e3)
        std::snprintf(buf, sizeof buf, "%.1f µs", v / 1e3);
    else
        std::snprintf(buf, sizeof buf, "%" PRId64 " ns", static_cast<int64_t>(ns));
    return buf;
}

std::string fmtPct(double f)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", f * 100.0);
    return buf;
}

std::string fmtUs(TimeNs ns)
{
    char buf[48];
    if (ns % 1000 == 0)
        std::snprintf(buf, sizeof buf, "%" PRId64, static_cast<int64_t>(ns / 1000));
    else
        std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e3);
    return buf;
}

// The analysis tables: first column left-aligned, the numbers right-aligned.
TextTable table(std::vector<std::string> header)
{
    for (size_t i = 1; i < header.size(); ++i)
        header[i] = ">" + header[i];
    return TextTable(std::move(header));
}

// What limits the job first; the tables below are the evidence.
void printVerdict(std::ostream& os, const AnalysisResult& r)
{
    const Verdict v = verdict(r);
    os << "verdict: " << v.headline << "\n";
    for (const auto& f : v.facts)
        os << "  " << f << "\n";
    os << "\n";
}

// The same list as the report's and the app's Summary, best first.
void printLevers(std::ostream& os, const whatif::Levers& levers)
{
    if (levers.bubbles.empty() && levers.levers.empty())
        return;
    os << "what would help most (predicted by the what-if engine, " << whatif::leversBasisText(levers) << "):\n";
    if (!levers.bubbles.empty())
        os << "  " << levers.bubbles << "\n";
    for (const whatif::Lever& l : levers.levers)
        os << "  " << whatif::leverText(l) << "\n";
    if (levers.levers.empty())
        os << "  none of rebalancing, more microbatches, interleaving, a zero-bubble schedule or fixing a straggler "
              "is predicted to gain more than 0.5%\n";
    os << "\n";
}

void printOverview(std::ostream& os, const AnalysisResult& r)
{
    os << "ranks: " << r.ranks.size();
    if (r.worldSize)
        os << " of " << *r.worldSize;
    os << "    iterations: " << r.iterations.size();
    if (!r.iterations.empty())
        os << " (from " << toString(r.iterations.front().source) << ")";
    os << "\n";
    if (r.selectedIteration >= 0) {
        const auto& it = r.iterations[static_cast<size_t>(r.selectedIteration)];
        os << "selected iteration: " << it.index << " (" << it.label << "), " << fmtTime(it.end - it.start) << "\n";
    }
}

void printPipeline(std::ostream& os, const AnalysisResult& r)
{
    const auto& p = r.pipeline;
    os << "\nPipeline\n";
    if (!p.found) {
        os << "  no pipeline found: " << p.reason << "\n  (generic idle analysis below; give --pp N or --stage-map if the job is pipeline-parallel)\n";
        return;
    }
    char conf[16];
    std::snprintf(conf, sizeof conf, "%.0f%%", p.scheduleConfidence * 100);
    os << "  stages " << p.pp << ", data-parallel replicas " << p.dp << ", chunks " << p.chunks << ", microbatches "
       << p.microbatches << "    (stages from " << toString(p.stageSource) << ", " << describeStepSource(p.labelsFrom) << ")\n";
    os << "  schedule: " << scheduleName(p.schedule) << " (confidence " << conf << "): " << p.scheduleEvidence << "\n";
    if (r.imbalance.idealBubbleFraction > 0)
        os << "  ideal bubble fraction (p-1)/(v*m+p-1): " << fmtPct(r.imbalance.idealBubbleFraction) << "\n";
    if (p.stageMap.size() <= kRowsWhole) {
        os << "  stage map:";
        for (const auto& a : p.stageMap)
            os << " " << a.rank << ":" << (a.stage >= 0 ? std::to_string(a.stage) : "-");
        os << "\n";
        return;
    }
    // Many ranks: each stage's ranks as runs.
    std::map<int, std::vector<int>> byStage;
    for (const auto& a : p.stageMap)
        byStage[a.stage].push_back(a.rank);
    os << "  stage map:";
    for (const auto& [stage, ranks] : byStage)
        os << (stage == byStage.begin()->first ? " " : "; ") << (stage >= 0 ? "stage " + std::to_string(stage) : std::string("no stage"))
           << " ranks " << rankRuns(ranks);
    os << "\n";
}

// One row per rank of the selected iteration, then their sum.
void printIdle(std::ostream& os, const AnalysisResult& r)
{
    os << "\nIdle time per rank (selected iteration)\n";
    std::vector<std::string> head{"rank", "stage", "iteration", "busy", "idle", "idle %"};
    for (int c = 0; c < kBubbleCauses; ++c)
        head.emplace_back(toString(static_cast<BubbleCause>(c)));
    TextTable idle = table(head);
    std::array<TimeNs, kBubbleCauses> tot{};
    TimeNs win = 0, idl = 0;
    const RowLimit rows(static_cast<size_t>(std::count_if(r.idle.begin(), r.idle.end(),
                                                          [&](const RankIdle& ri) { return ri.iteration == r.selectedIteration; })));
    size_t row = 0;
    for (const auto& ri : r.idle) {
        if (ri.iteration != r.selectedIteration)
            continue;
        const bool shown = rows.show(row++);
        std::vector<std::string> cells{std::to_string(ri.rank), ri.stage >= 0 ? std::to_string(ri.stage) : "-",
                                       fmtTime(ri.windowNs), fmtTime(ri.busyNs), fmtTime(ri.idleNs),
                                       fmtPct(ri.windowNs ? static_cast<double>(ri.idleNs) / static_cast<double>(ri.windowNs) : 0)};
        for (int c = 0; c < kBubbleCauses; ++c) {
            cells.push_back(fmtTime(ri.byCause[static_cast<size_t>(c)]));
            tot[static_cast<size_t>(c)] += ri.byCause[static_cast<size_t>(c)];
        }
        win += ri.windowNs;
        idl += ri.idleNs;
        if (shown)
            idle.add(cells);
    }
    std::vector<std::string> total{"all", "", fmtTime(win), fmtTime(win - idl), fmtTime(idl),
                                   fmtPct(win ? static_cast<double>(idl) / static_cast<double>(win) : 0)};
    for (TimeNs v : tot)
        total.push_back(fmtTime(v));
    idle.add(total);
    os << idle.render() << rows.more("ranks, counted in the total", "--json lists all");
}

// The histogram's non-empty buckets: "<0.1 ms: 2, 0.8-1.6 ms: 1, ...".
std::string fillableBuckets(const FillableBubbles& f)
{
    std::string buckets;
    for (int k = 0; k < kFillableBuckets; ++k) {
        const int64_t n = f.histogram[static_cast<size_t>(k)];
        if (n == 0)
            continue;
        const double lo = static_cast<double>(fillableBucketStartNs(k)) / 1e6;
        char label[64];
        if (k == 0)
            std::snprintf(label, sizeof label, "<%g ms", static_cast<double>(kFillableBucketBaseNs) / 1e6);
        else if (k == kFillableBuckets - 1)
            std::snprintf(label, sizeof label, ">=%g ms", lo);
        else
            std::snprintf(label, sizeof label, "%g-%g ms", lo, 2 * lo);
        buckets += (buckets.empty() ? "" : ", ") + std::string(label) + ": " + std::to_string(n);
    }
    return buckets;
}

void printFillable(std::ostream& os, const AnalysisResult& r)
{
    bool fillHeader = false;
    for (const auto& f : r.fillableBubbles) {
        if (f.iteration != r.selectedIteration)
            continue;
        if (!fillHeader) {
            os << "\nFillable bubbles per stage (fill_drain, wait_neighbor, p2p_transfer, dp_sync; selected iteration)\n";
            fillHeader = true;
        }
        os << "  stage " << f.stage << " (rank " << f.rank << "): " << fmtTime(f.totalNs) << " in " << f.count
           << (f.count == 1 ? " bubble" : " bubbles") << ", longest " << fmtTime(f.longestNs);
        const std::string buckets = fillableBuckets(f);
        if (!buckets.empty())
            os << "; " << buckets;
        os << "\n";
    }
}

void printAllToAll(std::ostream& os, const AnalysisResult& r)
{
    const AllToAll& a2a = r.allToAll;
    if (a2a.ranks.empty())
        return;
    int64_t count = 0;
    for (const auto& x : a2a.ranks)
        count += x.count;
    os << "\nAll-to-all (expert parallel; selected iteration): " << count << " kernels on " << a2a.ranks.size()
       << (a2a.ranks.size() == 1 ? " rank" : " ranks") << ", per rank " << fmtTime(a2a.minNs) << " min, "
       << fmtTime(a2a.medianNs) << " median, " << fmtTime(a2a.maxNs) << " max; " << fmtPct(a2a.criticalShare)
       << " of the critical path\n";
    for (const auto& s : a2a.stages)
        os << "  " << (s.stage >= 0 ? "stage " + std::to_string(s.stage) : std::string("outside the pipeline")) << ": "
           << fmtTime(s.meanKernelNs) << " per rank (" << fmtPct(s.share) << " of its time)\n";
}

void printMicrobatches(std::ostream& os, const AnalysisResult& r)
{
    const MicrobatchSpread& mbs = r.microbatchSpread;
    if (mbs.microbatches < 2 || mbs.size.empty())
        return;
    char line[200];
    const auto [lo, hi] = std::minmax_element(mbs.size.begin(), mbs.size.end());
    std::snprintf(line, sizeof line, "%.2fx to %.2fx of the mean (CV %.2f)", *lo, *hi, mbs.cv);
    os << "\nMicrobatches (selected iteration): " << mbs.microbatches << ", sizes " << line << ": "
       << (mbs.uneven ? "uneven" : "even") << "; longest " << mbs.longest << ", shortest " << mbs.shortest << "\n";
    if (mbs.uneven) {
        TextTable t = table({"stage", "F min", "F p50", "F p95", "F max", "B min", "B p50", "B p95", "B max"});
        for (const MicrobatchStage& st : mbs.stages)
            t.add({std::to_string(st.stage), fmtTime(st.forward.minNs), fmtTime(st.forward.p50Ns),
                   fmtTime(st.forward.p95Ns), fmtTime(st.forward.maxNs), fmtTime(st.backward.minNs),
                   fmtTime(st.backward.p50Ns), fmtTime(st.backward.p95Ns), fmtTime(st.backward.maxNs)});
        os << t.render();
    }
}

void printMemory(std::ostream& os, const AnalysisResult& r)
{
    if (r.memory.empty())
        return;
    const bool absolute = std::all_of(r.memory.begin(), r.memory.end(), [](const MeasuredMemory& m) { return m.absolute; });
    os << "\nMeasured memory (selected iteration; allocator events"
       << (absolute ? "" : "; +: relative to the rank's memory as the iteration began, the trace has no totals") << ")\n";
    TextTable t = table({"rank", "stage", "peak", "start", "end", "reserved", "events"});
    const RowLimit rows(r.memory.size());
    for (size_t i = 0; i < r.memory.size() && rows.show(i); ++i) {
        const MeasuredMemory& m = r.memory[i];
        auto b = [&](int64_t v) { return (m.absolute ? "" : "+") + formatBytes(v); };
        t.add({std::to_string(m.rank), m.stage >= 0 ? std::to_string(m.stage) : std::string("-"), b(m.peakBytes),
               b(m.startBytes), b(m.endBytes), m.peakReservedBytes ? formatBytes(*m.peakReservedBytes) : std::string("-"),
               std::to_string(m.events)});
    }
    os << t.render() << rows.more("ranks", "--json lists all");
}

void printImbalance(std::ostream& os, const AnalysisResult& r)
{
    const auto& im = r.imbalance;
    if (!r.pipeline.found || im.stages.empty())
        return;
    os << "\nImbalance per stage (compute per microbatch)\n";
    TextTable t = table({"stage", "ranks", "busy", "F mean", "F p50", "F p95", "B mean", "B p50", "B p95"});
    for (const auto& s : im.stages) {
        const std::string ranks = rankRuns(s.ranks);
        auto d = [](const Distribution& x, double v) { return x.count ? fmtTime(static_cast<TimeNs>(v)) : std::string("-"); };
        t.add({std::to_string(s.stage), ranks, fmtTime(s.busyNs), d(s.forwardNs, s.forwardNs.mean), d(s.forwardNs, s.forwardNs.p50),
               d(s.forwardNs, s.forwardNs.p95), d(s.backwardNs, s.backwardNs.mean), d(s.backwardNs, s.backwardNs.p50),
               d(s.backwardNs, s.backwardNs.p95)});
    }
    os << t.render();
    char mm[32];
    std::snprintf(mm, sizeof mm, "%.3f", im.maxOverMean);
    os << "  busiest/mean stage: " << mm << "    bottleneck stage: " << im.bottleneckStage
       << "\n  iteration " << fmtTime(im.iterationNs) << ", balanced-partition lower bound " << fmtTime(im.balancedLowerBoundNs)
       << "\n";
    for (const auto& s : im.stragglers)
        os << "  straggler: rank " << s.rank << " (stage " << s.stage << ") computes " << fmtTime(s.computeNs) << ", "
           << fmtPct(s.relative - 1.0) << " over its peers' median " << fmtTime(s.peerMedianNs) << ", costing up to "
           << fmtTime(s.costNs) << " per iteration\n";
}

void printOverlap(std::ostream& os, const AnalysisResult& r)
{
    const auto& im = r.imbalance;
    if (im.overlap.empty())
        return;
    os << "\nCompute/communication overlap (selected iteration)\n";
    TextTable t = table({"rank", "communication", "overlapped", "share"});
    const RowLimit rows(im.overlap.size());
    for (size_t i = 0; i < im.overlap.size() && rows.show(i); ++i) {
        const auto& o = im.overlap[i];
        t.add({std::to_string(o.rank), fmtTime(o.commNs), fmtTime(o.overlappedNs),
               o.commNs ? fmtPct(static_cast<double>(o.overlappedNs) / static_cast<double>(o.commNs)) : "-"});
    }
    os << t.render() << rows.more("ranks", "--json lists all");
}

void printCriticalPath(std::ostream& os, const AnalysisResult& r)
{
    const auto& cp = r.criticalPath;
    if (cp.segments.empty())
        return;
    TimeNs len = cp.end - cp.start;
    os << "\nCritical path (" << fmtTime(len) << ", " << cp.segments.size() << " segments)\n";
    TextTable t = table({"stage", "time", "share"});
    for (const auto& [stage, ns] : cp.byStage)
        t.add({stage >= 0 ? std::to_string(stage) : "-", fmtTime(ns), fmtPct(len ? static_cast<double>(ns) / static_cast<double>(len) : 0)});
    os << t.render();
    TextTable k = table({"kind", "time", "share"});
    for (const auto& [kind, ns] : cp.byKind)
        k.add({kind, fmtTime(ns), fmtPct(len ? static_cast<double>(ns) / static_cast<double>(len) : 0)});
    os << k.render();
}

void printHta(std::ostream& os, const AnalysisResult& r)
{
    const auto& h = r.hta;
    if (h.temporal.empty())
        return;
    bool us = h.htaCompatible;
    os << "\nHTA temporal breakdown (" << (us ? "HTA-compatible, us" : "exact, us") << ")\n";
    TextTable t = table({"rank", "kernel_time", "idle", "idle %", "compute", "compute %", "non_compute", "non-compute %", "comm/comp overlap"});
    const RowLimit rows(h.temporal.size());
    for (size_t i = 0; i < h.temporal.size() && rows.show(i); ++i) {
        const auto& x = h.temporal[i];
        auto pct = [&](TimeNs v) { return fmtPct(x.kernelTimeNs ? static_cast<double>(v) / static_cast<double>(x.kernelTimeNs) : 0); };
        char ov[32] = "-";
        if (x.commCompOverlapPct)
            std::snprintf(ov, sizeof ov, "%.2f%%", *x.commCompOverlapPct);
        t.add({std::to_string(x.rank), fmtUs(x.kernelTimeNs), fmtUs(x.idleTimeNs), pct(x.idleTimeNs), fmtUs(x.computeTimeNs),
               pct(x.computeTimeNs), fmtUs(x.nonComputeTimeNs), pct(x.nonComputeTimeNs), ov});
    }
    os << t.render() << rows.more("ranks", "--json lists all");
    os << "\nHTA idle time per stream (us)\n";
    TextTable s = table({"rank", "stream", "host wait", "kernel wait", "other"});
    const RowLimit streams(h.idle.size());
    for (size_t i = 0; i < h.idle.size() && streams.show(i); ++i) {
        const auto& x = h.idle[i];
        s.add({std::to_string(x.rank), std::to_string(x.stream), fmtUs(x.hostWaitNs), fmtUs(x.kernelWaitNs), fmtUs(x.otherNs)});
    }
    os << s.render() << streams.more("streams", "--json lists all");
}

void printWarnings(std::ostream& os, const AnalysisResult& r)
{
    if (r.warnings.empty())
        return;
    os << "\nWarnings\n";
    for (const auto& w : r.warnings)
        os << "  " << w.message << "\n";
}

} // namespace

void printAnalysisText(std::ostream& os, const std::string& file, const AnalysisResult& r, const whatif::Levers& levers,
                       const JobPart* part)
{
    os << "pipescope analyze " << file << "\n\n";
    if (part)
        printJobPart(os, *part, file);
    printVerdict(os, r);
    printLevers(os, levers);
    printOverview(os, r);
    printPipeline(os, r);
    printIdle(os, r);
    printFillable(os, r);
    printAllToAll(os, r);
    printMicrobatches(os, r);
    printMemory(os, r);
    printImbalance(os, r);
    printOverlap(os, r);
    printCriticalPath(os, r);
    printHta(os, r);
    printWarnings(os, r);
}


} // namespace pipescope::report
