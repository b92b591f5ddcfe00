// The HTML report: the numbers a small synthetic pipeline must show,
// well-formed markup and embedded data, untrusted strings kept inert, the
// simulated banner, the generic report without a pipeline, folding of huge
// timelines, and the command line (exit codes, unwritable output, the real
// bundled capture).
#include "StoreFixture.h"
#include "report/AnalysisText.h"
#include "whatif/Levers.h"
#include "SyntheticTrace.h"
#include "TestSupport.h"
#include "report/CompareSection.h"
#include "report/Html.h"
#include "report/Report.h"
#include "report/Timeline.h"
#include "store/Store.h"
#include "store/StoreWriter.h"
#include "util/Format.h"

#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <sstream>
#include <nlohmann/json.hpp>

#include <set>
#include <vector>

using namespace pipescope;
using nlohmann::json;
using pipescope::test::writeStore;

namespace {

const std::string kEvil = "</script><img src=x onerror=alert(1)> & \"quotes\"";

test::PipelineSpec smallPipeline()
{
    test::PipelineSpec spec; // 4 stages, 8 microbatches, 1F1B, F 1 ms, B 2 ms, no communication time
    spec.annotate = true;
    return spec;
}

// The JSON inside <script type="application/json" id="ID">...</script>.
json embedded(const std::string& html, const std::string& id)
{
    const std::string open = "<script type=\"application/json\" id=\"" + id + "\">";
    const size_t a = html.find(open);
    if (a == std::string::npos)
        return json();
    const size_t from = a + open.size();
    const size_t b = html.find("</script>", from);
    if (b == std::string::npos)
        return json();
    return json::parse(html.substr(from, b - from));
}

size_t count(const std::string& text, const std::string& what)
{
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size()))
        ++n;
    return n;
}

// Every non-void element is closed in order; script and style bodies are
// skipped as raw text. Returns an empty string or the first problem.
std::string checkTags(const std::string& html)
{
    static const std::set<std::string> voids{"meta", "br", "img", "input", "hr", "link", "wbr", "col", "area", "base", "source"};
    std::vector<std::string> open;
    size_t i = 0;
    while ((i = html.find('<', i)) != std::string::npos) {
        if (html.compare(i, 4, "<!--") == 0) {
            i = html.find("-->", i);
            if (i == std::string::npos)
                return "unclosed comment";
            continue;
        }
        if (html.compare(i, 2, "<!") == 0) {
            i = html.find('>', i);
            continue;
        }
        const bool closing = html[i + 1] == '/';
        size_t n = i + (closing ? 2 : 1);
        size_t e = n;
        while (e < html.size() && std::isalnum(static_cast<unsigned char>(html[e])))
            ++e;
        const std::string name = html.substr(n, e - n);
        if (name.empty())
            return "a bare '<' at offset " + std::to_string(i);
        const size_t gt = html.find('>', e);
        if (gt == std::string::npos)
            return "unterminated tag " + name;
        if (closing) {
            if (open.empty() || open.back() != name)
                return "</" + name + "> closes " + (open.empty() ? std::string("nothing") : "<" + open.back() + ">");
            open.pop_back();
            i = gt + 1;
            continue;
        }
        i = gt + 1;
        if (name == "script" || name == "style") {
            const size_t end = html.find("</" + name + ">", i);
            if (end == std::string::npos)
                return "unclosed " + name;
            i = end + name.size() + 3;
            continue;
        }
        if (!voids.count(name))
            open.push_back(name);
    }
    return open.empty() ? std::string() : "<" + open.back() + "> never closed";
}


} // namespace

class TestReport : public QObject {
    Q_OBJECT
private slots:
    void escaping();
    void comparisonSection();
    void encodeTimeline();
    void foldedReplicas();
    void analysisTextOfManyRanks();
    void pipelineNumbers();
    void stragglerTable();
    void fillableTable();
    void wellFormed();
    void untrustedStrings();
    void simulatedBanner_data();
    void simulatedBanner();
    void noPipeline();
    void capAndFold();
    void iterationOption();
    void existingAnalysis();
    void cancelled();
    void cliExitCodes();
    void cliUnwritableOutput();
    void cliRealCapture();
    void rendersInBrowser();
};

void TestReport::escaping()
{
    QCOMPARE(QString::fromStdString(report::htmlEscape("a<b>&\"c'")), QString("a&lt;b&gt;&amp;&quot;c&#39;"));
    const json j{{"k", "</script>\xE2\x80\xA8&"}};
    const std::string s = report::scriptJson(j);
    QVERIFY(s.find('<') == std::string::npos);
    QVERIFY(s.find('>') == std::string::npos);
    QVERIFY(s.find('&') == std::string::npos);
    QVERIFY(s.find("\xE2\x80\xA8") == std::string::npos);
    QCOMPARE(json::parse(s), j);
}

void TestReport::encodeTimeline()
{
    // One rank (3, stage 1) over [0, 100) at 10 columns: fold_ns 10. Its steps and
    // bubbles lanes, and two streams whose kernels gather into its comm and busy rows.
    using timeline::Event;
    using timeline::Lane;
    using timeline::LaneKind;
    auto ev = [](TimeNs s, TimeNs e, WorkClass code, int32_t name = 0) {
        Event x;
        x.start = s;
        x.end = e;
        x.code = static_cast<uint8_t>(code);
        x.name = name;
        return x;
    };
    auto step = [](TimeNs s, TimeNs e, StepKind kind, int mb) {
        Event x;
        x.start = s;
        x.end = e;
        x.code = static_cast<uint8_t>(kind);
        x.microbatch = mb;
        return x;
    };
    auto cause = [](TimeNs s, TimeNs e, BubbleCause c) {
        Event x;
        x.start = s;
        x.end = e;
        x.code = static_cast<uint8_t>(c);
        return x;
    };
    timeline::TimelineModel m;
    m.names = {"", "send", "ar"};
    Lane steps, bubbles, compute, comm;
    steps.kind = LaneKind::Steps;
    bubbles.kind = LaneKind::Bubbles;
    // Three narrow steps 2 apart fold into one (B holds most of their time); a wide one stays; a narrow one after a wide gap stays.
    steps.events = {step(0, 3, StepKind::F, 1), step(5, 9, StepKind::B, 2), step(11, 13, StepKind::B, 3),
                    step(20, 60, StepKind::F, 4), step(90, 94, StepKind::I, 5)};
    // The second bubble runs past the window: clipped to its end.
    bubbles.events = {cause(13, 20, BubbleCause::FillDrain), cause(94, 120, BubbleCause::P2pTransfer)};
    // A wide compute kernel, a memcpy (in neither row), two narrow compute kernels 1 apart.
    compute.events = {ev(0, 50, WorkClass::Compute), ev(55, 58, WorkClass::Memcpy), ev(60, 62, WorkClass::Compute),
                      ev(63, 65, WorkClass::Compute)};
    comm.events = {ev(10, 40, WorkClass::P2p, 1), ev(70, 72, WorkClass::Collective, 2)};
    for (Lane* l : {&steps, &bubbles, &compute, &comm}) {
        l->rank = 3;
        l->stage = 1;
        m.lanes.push_back(*l);
    }
    m.finalize();

    report::TimelineLimits limits;
    limits.foldColumns = 10;
    report::TimelineCounts counts;
    const json doc = report::encodeTimeline(m, 0, 100, limits, &counts);
    QCOMPARE(doc["start_ns"].get<TimeNs>(), TimeNs(0));
    QCOMPARE(doc["duration_ns"].get<TimeNs>(), TimeNs(100));
    QCOMPARE(doc["fold_ns"].get<TimeNs>(), TimeNs(10));
    QCOMPARE(doc["names"], json::parse(R"(["send", "ar"])"));
    QCOMPARE(doc["lanes"].size(), size_t(1));
    const json& lane = doc["lanes"][0];
    QCOMPARE(lane["rank"].get<int>(), 3);
    QCOMPARE(lane["stage"].get<int>(), 1);
    QCOMPARE(lane["replica"].get<int>(), 0);
    // [start, duration, kind, microbatch, chunk, count]
    QCOMPARE(lane["steps"], json::parse("[[0,13,1,-1,0,3],[20,40,0,4,0,1],[90,4,2,5,0,1]]"));
    // [start, duration, cause, count]
    QCOMPARE(lane["bubbles"], json::parse("[[13,7,0,1],[94,6,2,1]]"));
    // [start, duration, 0 p2p | 1 collective, name, count]
    QCOMPARE(lane["comm"], json::parse("[[10,30,0,0,1],[70,2,1,1,1]]"));
    // [start, duration, count]
    QCOMPARE(lane["busy"], json::parse("[[0,50,1],[60,5,2]]"));
    QCOMPARE(lane["truncated"].get<int64_t>(), int64_t(0));
    QCOMPARE(counts.blocks, int64_t(9));
    QCOMPARE(counts.folded, int64_t(5));
    QCOMPARE(counts.truncated, int64_t(0));

    // One block per row: the rest are counted as left out, earliest kept.
    limits.maxItemsPerLane = 1;
    const json capped = report::encodeTimeline(m, 0, 100, limits, &counts);
    QCOMPARE(capped["lanes"][0]["steps"], json::parse("[[0,13,1,-1,0,3]]"));
    QCOMPARE(capped["lanes"][0]["truncated"].get<int64_t>(), int64_t(2 + 1 + 1 + 1));
    QCOMPARE(counts.rowCap, 1);
    QCOMPARE(counts.blocks, int64_t(4));
    QCOMPARE(counts.truncated, int64_t(5));
}

// dp = 2, p = 2, m = 4; replica 1 of stage 0 computes 10% longer than its
// only peer: 4 x 3.3 ms = 13.2 ms against 12 ms, 1.2 ms per iteration at most.
void TestReport::stragglerTable()
{
    test::PipelineSpec spec;
    spec.stages = 2;
    spec.replicas = 2;
    spec.microbatches = 4;
    spec.allReduceNs = 100'000;
    spec.slowdown[{1, 0}] = 1.1;
    const std::string html = report::renderReport(test::pipelineTrace(spec).trace, {});
    const size_t at = html.find("<table id=\"straggler-table\">");
    QVERIFY(at != std::string::npos);
    const std::string table = html.substr(at, html.find("</table>", at) - at);
    for (const std::string& cell : {formatDuration(13'200'000), formatDuration(12'000'000), formatPercent(0.1), formatDuration(1'200'000)})
        QVERIFY2(table.find(cell) != std::string::npos, cell.c_str());
    QVERIFY(table.find("<tr><td>1</td>") != std::string::npos); // rank 1
}

// 1F1B, p = 2, m = 2, F = 1 ms, B = 2 ms: each stage idles in a 1 ms and a
// 2 ms bubble (tests/analysis/tst_fillable.cpp works them out).
void TestReport::fillableTable()
{
    test::PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 2;
    spec.forwardNs = 1'000'000;
    spec.backwardNs = 2'000'000;
    const std::string html = report::renderReport(test::pipelineTrace(spec).trace, {});
    const size_t at = html.find("<table id=\"fillable-table\">");
    QVERIFY(at != std::string::npos);
    const std::string table = html.substr(at, html.find("</table>", at) - at);
    // Only the two length classes that occur: 0.8-1.6 ms and 1.6-3.2 ms.
    const std::string head = "<th>" + formatDuration(800'000) + "&ndash;" + formatDuration(1'600'000) + "</th><th>" +
                             formatDuration(1'600'000) + "&ndash;" + formatDuration(3'200'000) + "</th></tr>";
    QVERIFY2(table.find("<th>longest</th>" + head) != std::string::npos, table.c_str());
    for (int stage = 0; stage < 2; ++stage) {
        const std::string row = "<tr><td class=\"num\">" + std::to_string(stage) + "</td><td class=\"num\">" + std::to_string(stage) +
                                "</td><td class=\"num\">2</td><td class=\"num\" title=\"3000000 ns\">" + formatDuration(3'000'000) +
                                "</td><td class=\"num\" title=\"2000000 ns\">" + formatDuration(2'000'000) +
                                "</td><td class=\"num\">1</td><td class=\"num\">1</td></tr>";
        QVERIFY2(table.find(row) != std::string::npos, (row + "\n" + table).c_str());
    }
}

void TestReport::foldedReplicas()
{
    // 4 stages x 5 replicas (rank = stage * 5 + replica). In stage 1, replica
    // 3 (rank 8) computes 30% longer and replica 2 (rank 7) 20% shorter; the
    // other stages' replicas are equal, so the lowest rank is the slowest
    // and the next the fastest.
    test::PipelineSpec spec = smallPipeline();
    spec.replicas = 5;
    spec.slowdown[{3, 1}] = 1.3;
    spec.slowdown[{2, 1}] = 0.8;
    const Trace t = test::pipelineTrace(spec).trace;
    const AnalysisResult r = analyze(t);
    QCOMPARE(r.pipeline.pp, 4);
    auto lanesOf = [](const json& doc) {
        std::vector<std::tuple<int, int, std::string, int>> out; // rank, stage, role, of
        for (const json& l : doc["lanes"])
            out.emplace_back(l["rank"].get<int>(), l["stage"].get<int>(), l.value("role", std::string()), l.value("of", 0));
        return out;
    };
    report::TimelineLimits limits;
    const json folded = report::measuredTimeline(t, r, limits);
    const std::vector<std::tuple<int, int, std::string, int>> want{
        {0, 0, "slowest", 5}, {1, 0, "fastest", 5}, {7, 1, "fastest", 5}, {8, 1, "slowest", 5},
        {10, 2, "slowest", 5}, {11, 2, "fastest", 5}, {15, 3, "slowest", 5}, {16, 3, "fastest", 5}};
    QVERIFY(lanesOf(folded) == want);
    QCOMPARE(folded["folded"], (json{{"ranks", 20}, {"shown", 8}}));
    // The lanes shown are drawn as they are unfolded.
    limits.foldReplicasAbove = -1;
    const json all = report::measuredTimeline(t, r, limits);
    QCOMPARE(all["lanes"].size(), size_t(20));
    QVERIFY(!all.contains("folded"));
    for (const json& l : folded["lanes"])
        for (const json& m : all["lanes"])
            if (m["rank"] == l["rank"]) {
                QCOMPARE(m["steps"], l["steps"]);
                QCOMPARE(m["bubbles"], l["bubbles"]);
                QCOMPARE(m["busy"], l["busy"]);
            }
    // Up to the threshold every rank has its lane.
    limits.foldReplicasAbove = 20;
    QCOMPARE(report::measuredTimeline(t, r, limits)["lanes"].size(), size_t(20));
    // The page says so.
    const std::string html = report::renderReport(t, r, report::ReportOptions{});
    QVERIFY(html.find("<p class=\"note\" id=\"timeline-replicas\">Replicas folded: of the 20 ranks in the pipeline, each stage shows two") !=
            std::string::npos);
    QCOMPARE(embedded(html, "gantt-measured-data")["lanes"].size(), size_t(8));
    // Idle by cause: the same 8 ranks first, labelled, then every rank folded away.
    const size_t folds = html.find("<details id=\"idle-every-rank\"><summary>Every rank (20): bars and table</summary>");
    QVERIFY(folds != std::string::npos);
    const size_t idle = html.find("<section id=\"idle\">");
    QVERIFY(idle < folds);
    const std::string shown = html.substr(idle, folds - idle);
    QCOMPARE(count(shown, "<div class=\"barrow\">"), size_t(8));
    QVERIFY(shown.find("rank 8 <span class=\"dim\">s1 slowest</span>") != std::string::npos);
    QVERIFY(shown.find("rank 7 <span class=\"dim\">s1 fastest</span>") != std::string::npos);
    QCOMPARE(count(html.substr(folds), "<div class=\"barrow\">"), size_t(20));
    QVERIFY(html.find("<table id=\"idle-table\">", folds) != std::string::npos);
    const size_t hta = html.find("<details id=\"hta-every-rank\"><summary>Every rank (20): temporal breakdown");
    QVERIFY(hta != std::string::npos && html.find("<table id=\"hta-temporal\">", hta) != std::string::npos);
    QVERIFY(checkTags(html).empty());
    // Unfolded, no fold in the idle section either.
    const std::string small = report::renderReport(test::pipelineTrace(smallPipeline()).trace);
    QVERIFY(small.find("idle-every-rank") == std::string::npos);
    QVERIFY(small.find("idle-folded") == std::string::npos);
    QVERIFY(small.find("hta-every-rank") == std::string::npos);
}

void TestReport::analysisTextOfManyRanks()
{
    // 4 stages x 12 replicas: 48 ranks, rank = stage * 12 + replica.
    test::PipelineSpec spec = smallPipeline();
    spec.replicas = 12;
    const Trace t = test::pipelineTrace(spec).trace;
    const AnalysisResult r = analyze(t);
    QCOMPARE(r.pipeline.dp, 12);
    std::ostringstream os;
    report::printAnalysisText(os, "many.pipescope", r, whatif::Levers{});
    const std::string text = os.str();
    QVERIFY2(text.find("  stage map: stage 0 ranks 0-11; stage 1 ranks 12-23; stage 2 ranks 24-35; stage 3 ranks 36-47\n") !=
                 std::string::npos,
             text.c_str());
    // The idle table: 16 ranks, the total over all 48, and what was left out.
    TimeNs idle = 0;
    for (const RankIdle& ri : r.idle)
        if (ri.iteration == r.selectedIteration)
            idle += ri.idleNs;
    const size_t table = text.find("Idle time per rank");
    const size_t total = text.find("\n  all ", table);
    QVERIFY(table != std::string::npos && total != std::string::npos);
    QVERIFY(text.find("\n  15 ", table) < total && text.find("\n  16 ", table) > total);
    QVERIFY(text.find(formatDuration(idle), total) < text.find('\n', total + 1));
    QVERIFY(text.find("  ... and 32 more ranks, counted in the total (--json lists all)\n", total) != std::string::npos);
    // Each stage's ranks as runs in the imbalance table.
    QVERIFY(text.find(" 12-23 ") != std::string::npos);
    // A pipeline of 20 ranks is printed whole.
    test::PipelineSpec few = smallPipeline();
    few.replicas = 5;
    std::ostringstream small;
    const Trace ft = test::pipelineTrace(few).trace;
    report::printAnalysisText(small, "few.pipescope", analyze(ft), whatif::Levers{});
    QVERIFY(small.str().find("more ranks") == std::string::npos);
    QVERIFY(small.str().find("  stage map: 0:0 1:0 2:0 3:0 4:0 5:1") != std::string::npos);
}

void TestReport::pipelineNumbers()
{
    const test::PipelineSpec spec = smallPipeline();
    const auto built = test::pipelineTrace(spec);
    const std::string html = report::renderReport(built.trace, {});

    // Closed forms for equal stages without communication: iteration (m+p-1)(F+B), bubble fraction (p-1)/(m+p-1).
    const int p = spec.stages, m = spec.microbatches;
    const TimeNs iteration = (m + p - 1) * (spec.forwardNs + spec.backwardNs);
    const double bubble = double(p - 1) / double(m + p - 1);
    QCOMPARE(built.iterationEnd[0] - built.iterationStart[0], iteration);
    QVERIFY2(html.find(formatDuration(iteration)) != std::string::npos, formatDuration(iteration).c_str());
    QVERIFY2(html.find(formatPercent(bubble)) != std::string::npos, formatPercent(bubble).c_str());

    const json summary = embedded(html, "report-summary");
    QCOMPARE(summary["iteration_ns"].get<TimeNs>(), iteration);
    QVERIFY(std::abs(summary["bubble_fraction"].get<double>() - bubble) < 1e-9);
    QCOMPARE(summary["ranks"], json({0, 1, 2, 3}));
    QCOMPARE(summary["pp"].get<int>(), p);
    QCOMPARE(summary["microbatches"].get<int>(), m);
    QCOMPARE(summary["schedule"].get<std::string>(), std::string("1f1b"));
    TimeNs causes = 0;
    for (const auto& [cause, ns] : summary["idle_by_cause_ns"].items())
        causes += ns.get<TimeNs>();
    QCOMPARE(causes, summary["idle_ns"].get<TimeNs>());

    // The timeline: one lane per rank in stage order, each with m forwards and m backwards labelled by microbatch.
    const json tl = embedded(html, "gantt-measured-data");
    QCOMPARE(tl["duration_ns"].get<TimeNs>(), iteration);
    QCOMPARE(tl["lanes"].size(), size_t(p));
    for (int s = 0; s < p; ++s) {
        const json& lane = tl["lanes"][size_t(s)];
        QCOMPARE(lane["stage"].get<int>(), s);
        QCOMPARE(lane["steps"].size(), size_t(2 * m));
        std::multiset<int> mbs;
        int forwards = 0;
        for (const json& st : lane["steps"]) {
            mbs.insert(st[3].get<int>());
            forwards += st[2].get<int>() == 0;
            QCOMPARE(st[1].get<TimeNs>(), st[2].get<int>() == 0 ? spec.forwardNs : spec.backwardNs);
        }
        QCOMPARE(forwards, m);
        for (int mb = 0; mb < m; ++mb)
            QCOMPARE(int(mbs.count(mb)), 2);
    }
    // Sections of a pipeline report, with the bottleneck flagged and a what-if comparison.
    for (const char* id : {"id=\"timeline\"", "id=\"idle-table\"", "id=\"imbalance-table\"", "id=\"critical-stage\"", "id=\"warnings\"",
                           "id=\"whatif\""})
        QVERIFY2(html.find(id) != std::string::npos, id);
    QVERIFY(html.find("class=\"hot\"") != std::string::npos);
    QVERIFY2(html.find("id=\"whatif-table\"") != std::string::npos || html.find("id=\"whatif-error\"") != std::string::npos,
             "the what-if section shows a table or the engine's message");
    QVERIFY(html.find("No pipeline found") == std::string::npos);
}

void TestReport::wellFormed()
{
    const auto built = test::pipelineTrace(smallPipeline());
    const std::string html = report::renderReport(built.trace, {});
    QVERIFY(html.rfind("<!DOCTYPE html>", 0) == 0);
    const std::string problem = checkTags(html);
    QVERIFY2(problem.empty(), problem.c_str());
    QCOMPARE(count(html, "<script"), count(html, "</script>"));
    QCOMPARE(count(html, "<section"), count(html, "</section>"));
    // Self-contained: nothing is fetched.
    for (const char* ref : {"src=\"http", "href=\"http", "@import", "url(", "<link"})
        QVERIFY2(html.find(ref) == std::string::npos, ref);
    // Every embedded data block parses back.
    for (const char* id : {"report-summary", "gantt-measured-data"})
        QVERIFY2(embedded(html, id).is_object(), id);
    if (html.find("gantt-predicted-data") != std::string::npos)
        QVERIFY(embedded(html, "gantt-predicted-data").is_object());
}

void TestReport::untrustedStrings()
{
    // A collective kernel, a host name, a source file and the store path all carry markup.
    test::TraceBuilder tb;
    test::PipelineSpec spec = smallPipeline();
    spec.peers = true;
    test::pipelineTrace(spec, &tb);
    // A collective inside the iteration (which starts at 1 s), so that it is drawn with its name.
    tb.nccl(0, 23, "AllReduce", 1'000'500'000, 1'000'600'000, std::nullopt, 64, {0}, "ncclDevKernel_AllReduce" + kEvil);
    Trace t = tb.build();
    for (auto& r : t.ranks)
        r.host = kEvil;
    t.sources.push_back({1, "/data/" + kEvil + ".json", "kineto", 0, 0, 0, "", ""});
    report::ReportOptions o;
    o.storePath = kEvil;
    o.foldColumns = 1'000'000'000; // nothing folded: the kernel keeps its name
    const std::string html = report::renderReport(t, o);

    QVERIFY2(html.find(kEvil) == std::string::npos, "the raw string must not appear");
    QVERIFY(html.find("<img") == std::string::npos);
    QVERIFY(html.find("onerror=alert(1)>") == std::string::npos);
    QVERIFY(html.find(report::htmlEscape(kEvil)) != std::string::npos);
    QCOMPARE(count(html, "<script"), count(html, "</script>"));
    const std::string problem = checkTags(html);
    QVERIFY2(problem.empty(), problem.c_str());
    // In the data the name comes back exactly.
    const json tl = embedded(html, "gantt-measured-data");
    bool found = false;
    for (const json& n : tl["names"])
        found = found || n.get<std::string>() == "ncclDevKernel_AllReduce" + kEvil;
    QVERIFY(found);
}

void TestReport::simulatedBanner_data()
{
    QTest::addColumn<QString>("value");
    QTest::addColumn<bool>("banner");
    QTest::newRow("simulated=1") << "1" << true;
    QTest::newRow("simulated=0") << "0" << false;
    QTest::newRow("absent") << "" << false;
}

void TestReport::simulatedBanner()
{
    QFETCH(QString, value);
    QFETCH(bool, banner);
    Trace t = test::pipelineTrace(smallPipeline()).trace;
    if (!value.isEmpty()) {
        t.meta["simulated"] = value.toStdString();
        t.meta["simulated_by"] = "pipescope simulate";
    }
    const std::string html = report::renderReport(t, {});
    QCOMPARE(html.find("id=\"simulated-banner\"") != std::string::npos, banner);
    QCOMPARE(html.find("SIMULATED") != std::string::npos, banner);
    QCOMPARE(embedded(html, "report-summary")["simulated"].get<bool>(), banner);
}

void TestReport::noPipeline()
{
    // Two ranks computing without talking to each other: no stages to relate.
    test::TraceBuilder tb;
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k < 10; ++k)
            tb.kernel(r, 7, "sm90_gemm", 1'000'000 + k * 300'000, 1'000'000 + k * 300'000 + 200'000, 1'000'000 + k * 300'000 - 5'000);
    const std::string html = report::renderReport(tb.build(), {});
    QVERIFY(html.find("id=\"no-pipeline\"") != std::string::npos);
    QVERIFY(html.find("No pipeline found") != std::string::npos);
    QVERIFY(html.find("id=\"idle-table\"") != std::string::npos);
    QVERIFY(html.find("id=\"timeline\"") != std::string::npos);
    for (const char* id : {"id=\"imbalance\"", "id=\"critical-path\"", "id=\"whatif\""})
        QVERIFY2(html.find(id) == std::string::npos, id);
    const json summary = embedded(html, "report-summary");
    QCOMPARE(summary["pipeline_found"].get<bool>(), false);
    // 10 kernels of 200 us every 300 us on each rank: 9 gaps of 100 us idle in a 2.9 ms window.
    QCOMPARE(summary["idle_ns"].get<TimeNs>(), TimeNs(2 * 9 * 100'000));
    QCOMPARE(summary["window_ns"].get<TimeNs>(), TimeNs(2 * 2'900'000));
    const std::string problem = checkTags(html);
    QVERIFY2(problem.empty(), problem.c_str());
}

void TestReport::capAndFold()
{
    test::PipelineSpec spec = smallPipeline();
    spec.microbatches = 32;
    const auto built = test::pipelineTrace(spec);
    report::ReportOptions o;
    o.maxItemsPerLane = 5;
    o.whatIf = false;
    std::string html = report::renderReport(built.trace, o);
    json tl = embedded(html, "gantt-measured-data");
    for (const json& lane : tl["lanes"]) {
        QVERIFY(lane["steps"].size() <= 5);
        QVERIFY(lane["truncated"].get<int64_t>() > 0);
    }
    QVERIFY(html.find("blocks are left out") != std::string::npos);

    // Folding at 10 columns: each lane's steps are far fewer than its 64 and still account for all of them.
    o.maxItemsPerLane = 5000;
    o.foldColumns = 10;
    html = report::renderReport(built.trace, o);
    tl = embedded(html, "gantt-measured-data");
    for (const json& lane : tl["lanes"]) {
        int64_t steps = 0;
        for (const json& st : lane["steps"])
            steps += st[5].get<int64_t>();
        QCOMPARE(steps, int64_t(64));
        QVERIFY(lane["steps"].size() < 64);
    }
    QVERIFY(html.find("are folded into counted blocks") != std::string::npos);
}

void TestReport::iterationOption()
{
    test::PipelineSpec spec = smallPipeline();
    spec.iterations = 3;
    spec.profilerSteps = true;
    const auto built = test::pipelineTrace(spec);
    report::ReportOptions o;
    o.iteration = 1;
    o.whatIf = false;
    const json summary = embedded(report::renderReport(built.trace, o), "report-summary");
    QCOMPARE(summary["selected_iteration"].get<int>(), 1);
}

void TestReport::existingAnalysis()
{
    // The app's analysis covers every iteration; the page made from it equals the one that analyses itself.
    test::PipelineSpec spec = smallPipeline();
    spec.iterations = 3;
    spec.profilerSteps = true;
    const auto built = test::pipelineTrace(spec);
    report::ReportOptions o;
    o.iteration = 1;
    AnalyzeOptions ao;
    ao.iteration = 1;
    ao.allIterations = true;
    const AnalysisResult all = analyze(built.trace, ao);
    QVERIFY(std::any_of(all.steps.begin(), all.steps.end(), [](const Step& s) { return s.iteration != 1; }));
    QVERIFY(report::renderReport(built.trace, all, o) == report::renderReport(built.trace, o));
}

void TestReport::cancelled()
{
    const auto built = test::pipelineTrace(smallPipeline());
    std::atomic<bool> stop{true};
    WorkControl work;
    work.stop = &stop;
    report::ReportOptions o;
    o.work = &work;
    QVERIFY_THROWS_EXCEPTION(Cancelled, report::renderReport(built.trace, o));
}

void TestReport::cliExitCodes()
{
    QTemporaryDir dir;
    const std::string store = test::path(dir, "job.pipescope");
    writeStore(test::pipelineTrace(smallPipeline()).trace, store);
    const QString out = QString::fromStdString(test::path(dir, "r.html"));

    auto r = test::runCli({"report", QString::fromStdString(store), "-o", out});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QFile f(out);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const std::string html = f.readAll().toStdString();
    QVERIFY(checkTags(html).empty());
    QCOMPARE(embedded(html, "report-summary")["pp"].get<int>(), 4);
    QVERIFY(html.find(report::htmlEscape(store)) != std::string::npos);

    r = test::runCli({"report"}); // no FILE
    QCOMPARE(r.exitCode, 2);
    r = test::runCli({"report", QString::fromStdString(store), "--no-such-flag"});
    QCOMPARE(r.exitCode, 2);
    r = test::runCli({"report", QString::fromStdString(test::path(dir, "missing.pipescope")), "-o",
                      QString::fromStdString(test::path(dir, "m.html"))});
    QCOMPARE(r.exitCode, 1);
    QVERIFY(r.err.contains("missing.pipescope"));
    QVERIFY(!QFile::exists(QString::fromStdString(test::path(dir, "m.html"))));

    // An iteration the trace does not have: the analysis's message, no file.
    const QString none = QString::fromStdString(test::path(dir, "i.html"));
    r = test::runCli({"report", QString::fromStdString(store), "--iteration", "99", "-o", none});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("out of range"), qPrintable(r.err));
    QVERIFY(!QFile::exists(none));
    r = test::runCli({"report", QString::fromStdString(store), "--iteration", "-1", "-o", none});
    QCOMPARE(r.exitCode, 2);

    // Not a store: one line naming the file.
    const std::string junk = test::path(dir, "junk.pipescope");
    {
        QFile j(QString::fromStdString(junk));
        QVERIFY(j.open(QIODevice::WriteOnly));
        j.write("not a store");
    }
    r = test::runCli({"report", QString::fromStdString(junk), "-o", QString::fromStdString(test::path(dir, "j.html"))});
    QCOMPARE(r.exitCode, 1);
    QCOMPARE(r.err.trimmed().count('\n'), 0);
    QVERIFY(!QFile::exists(QString::fromStdString(test::path(dir, "j.html"))));
}

void TestReport::cliUnwritableOutput()
{
    QTemporaryDir dir;
    const std::string store = test::path(dir, "job.pipescope");
    writeStore(test::pipelineTrace(smallPipeline()).trace, store);
    const QString missingDir = dir.path() + "/no-such-folder/report.html";
    auto r = test::runCli({"report", QString::fromStdString(store), "-o", missingDir});
    QCOMPARE(r.exitCode, 1);
    QCOMPARE(r.err.trimmed().count('\n'), 0);
    QVERIFY2(r.err.contains("no-such-folder"), qPrintable(r.err));
    QVERIFY(!QFile::exists(missingDir));

    // A directory given as the output file.
    r = test::runCli({"report", QString::fromStdString(store), "-o", dir.path()});
    QCOMPARE(r.exitCode, 1);
    QCOMPARE(r.err.trimmed().count('\n'), 0);
    // Nothing but the store is left in the folder (no temporary files).
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 1);
}

void TestReport::cliRealCapture()
{
    const QString capture = QString::fromUtf8(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";
    if (!QFile::exists(capture))
        QSKIP("the bundled capture is not in this checkout");
    QTemporaryDir dir;
    const QString out = dir.path() + "/report.html";
    auto r = test::runCli({"report", capture, "-o", out});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QFile f(out);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const std::string html = f.readAll().toStdString();
    QVERIFY2(checkTags(html).empty(), checkTags(html).c_str());

    // The report agrees with `pipescope analyze --json` on the same store.
    auto a = test::runCli({"analyze", capture, "--json"});
    QCOMPARE(a.exitCode, 0);
    const json analysis = json::parse(a.out.toStdString());
    const json summary = embedded(html, "report-summary");
    const int sel = analysis["selected_iteration"].get<int>();
    QCOMPARE(summary["selected_iteration"].get<int>(), sel);
    QCOMPARE(summary["iteration_ns"].get<TimeNs>(), analysis["iterations"][size_t(sel)]["duration"].get<TimeNs>());
    QCOMPARE(summary["idle_ns"].get<TimeNs>(), analysis["idle"]["selected"]["idle_ns"].get<TimeNs>());
    QCOMPARE(summary["schedule"], analysis["pipeline"]["schedule"]["name"]);
    QCOMPARE(summary["ranks"], analysis["ranks"]);
    QVERIFY(html.find("SIMULATED") == std::string::npos);
    QVERIFY(html.find("NVIDIA H200") != std::string::npos);
    QVERIFY2(html.find("id=\"whatif-table\"") != std::string::npos, "the what-if engine calibrates on the real capture");
    QVERIFY(embedded(html, "gantt-predicted-data").is_object());
    // Small enough to mail around.
    QVERIFY2(html.size() < 2'000'000, std::to_string(html.size()).c_str());
}

void TestReport::rendersInBrowser()
{
    // Optional: only where a Chromium is installed (it is not a build dependency).
    QString browser;
    for (const char* name : {"chromium", "chromium-browser", "google-chrome"})
        if (browser.isEmpty())
            browser = QStandardPaths::findExecutable(QString::fromUtf8(name));
    if (browser.isEmpty())
        QSKIP("no chromium installed: the headless render check is skipped");

    test::TraceBuilder tb;
    test::pipelineTrace(smallPipeline(), &tb);
    tb.nccl(0, 23, "AllReduce", 1'000'500'000, 1'000'600'000, std::nullopt, 64, {0}, "ncclDevKernel_AllReduce" + kEvil);
    Trace t = tb.build();
    for (auto& r : t.ranks)
        r.host = kEvil;
    report::ReportOptions o;
    o.storePath = kEvil;
    QTemporaryDir dir;
    const QString file = dir.path() + "/report.html";
    {
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray::fromStdString(report::renderReport(t, o)));
    }
    QProcess p;
    p.start(browser, {"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + dir.path() + "/profile",
                      "--enable-logging=stderr", "--v=0", "--dump-dom", "file://" + file});
    QVERIFY(p.waitForFinished(120000));
    const QString dom = QString::fromUtf8(p.readAllStandardOutput());
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(p.exitCode() == 0, qPrintable(err.right(2000)));
    // The script ran to the end and drew both timelines, without errors.
    QVERIFY2(dom.contains(QRegularExpression("<div[^>]*id=\"gantt-measured\"[^>]*data-drawn=\"4\"")), qPrintable(dom.left(2000)));
    QVERIFY2(!err.contains("Uncaught"), qPrintable(err.right(2000)));
    // The browser's own parser found no injected element.
    QVERIFY(!dom.contains("<img"));
    QVERIFY(dom.contains("id=\"whatif\""));
}

// The comparison section of `report --compare`: the prediction check on
// top, changes coloured by direction, every name from a trace escaped.
void TestReport::comparisonSection()
{
    compare::DiffResult d;
    d.aName = "<b>before</b>.pipescope";
    d.bName = "after.pipescope";
    d.a.pipeline = d.b.pipeline = true;
    d.a.ranks = d.b.ranks = 4;
    d.a.pp = d.b.pp = 4;
    d.a.microbatches = 8;
    d.b.microbatches = 16;
    d.a.schedule = d.b.schedule = ScheduleKind::OneFOneB;
    d.iterationNs = {100'000'000, 90'000'000};
    compare::StageDiff st;
    st.stage = 0;
    st.fbNs = {5'000'000, 5'500'000};
    d.stages.push_back(st);
    compare::KernelDiff k;
    k.stage = 0;
    k.name = "<img src=x onerror=alert(1)>";
    k.count = {int64_t(3), int64_t(4)};
    k.totalNs = {TimeNs(1000), TimeNs(2000)};
    k.change = compare::KernelChange::Changed;
    d.kernels.push_back(k);
    compare::PredictionCheck p;
    p.predictedNs = 91'000'000;
    p.measuredNs = 90'000'000;
    p.error = 1.0 / 90;
    p.changes.push_back({"microbatches", "8", "16"});
    d.prediction = p;
    std::string html;
    report::compareSection(html, d);
    const QString h = QString::fromStdString(html);
    QVERIFY(h.contains("<section id=\"comparison\"><h2>Compared with &lt;b&gt;before&lt;/b&gt;.pipescope</h2>"));
    QVERIFY(!h.contains("<img"));
    QVERIFY(h.contains("&lt;img src=x onerror=alert(1)&gt;"));
    QVERIFY2(h.contains("Predicted 91.000 ms from run A, measured 90.000 ms (+1.1%)"), qPrintable(h));
    // Less time in B reads green (faster), more reads red (slower).
    QVERIFY(h.contains("<td class=\"num faster\" title=\"-10000000 ns\">-10.000 ms (-10.0%)</td>"));
    QVERIFY(h.contains("<td class=\"num slower\" title=\"500000 ns\">+500.000 µs (+10.0%)</td>"));
    // The microbatch count differs, and says so.
    QVERIFY(h.contains("<tr class=\"differs\"><td>microbatches</td>"));
    QVERIFY(!h.contains("<tr class=\"differs\"><td>schedule</td>"));
}

QTEST_GUILESS_MAIN(TestReport)
#include "tst_report.moc"
