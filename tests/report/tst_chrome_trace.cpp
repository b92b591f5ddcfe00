// Chrome Trace Event JSON export: the exact document for a small hand-made
// job (names, lanes, args, timestamps, escaping of untrusted names), rank and
// time filters, stage and stream-role names from the analysis, and the
// command line: `pipescope export` of the bundled capture parses, and
// importing the exported files back gives the same kernels, busy time and
// NCCL operations as the store they came from.
#include "SyntheticTrace.h"
#include "TestSupport.h"
#include "analysis/Analysis.h"
#include "analysis/MeasuredPipeline.h"
#include "report/ChromeTrace.h"
#include "timeline/TimelineBuild.h"
#include "timeline/TimelineLinks.h"
#include "store/Store.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <nlohmann/json.hpp>

#include <fstream>
#include <limits>
#include <set>
#include <sstream>

using namespace pipescope;
using nlohmann::json;

namespace {

const QString kExample = QStringLiteral(PIPESCOPE_SOURCE_DIR "/resources/examples/pipeline-1f1b-4stage.pipescope");

// Two ranks: a kernel, a copy and a send on rank 0, the matching receive and
// a kernel with a hostile name on rank 1, and an NVTX range on rank 0.
Trace smallJob()
{
    test::TraceBuilder tb;
    tb.kernel(0, 7, "sm90_gemm", 1'000'000'000, 1'000'001'500, 999'995'000);
    Activity& copy = tb.kernel(0, 9, "Memcpy HtoD (Pageable -> Device)", 1'000'002'000, 1'000'002'250, std::nullopt,
                               ActivityKind::Memcpy);
    copy.bytes = 4096;
    copy.copyKind = CopyKind::HtoD;
    tb.nccl(0, 21, "Send", 1'000'003'000, 1'000'004'001, 1, 1 << 20, {0, 1});
    tb.nccl(1, 20, "Recv", 1'000'003'100, 1'000'004'001, 0, 1 << 20, {0, 1});
    tb.kernel(1, 7, "evil \"name\"\\\n\x01\xff</script>", 1'000'004'100, 1'000'005'099);
    tb.range(0, CpuRangeKind::Nvtx, "step", 999'990'000, 1'000'005'000, 4242);
    tb.worldSize(2);
    return tb.build();
}

report::ChromeTraceOptions namedLanes()
{
    report::ChromeTraceOptions o;
    o.stageOf = {{0, 0}, {1, 1}};
    // Store stream ids in creation order: (0,7) (0,9) (0,21) (1,20) (1,7).
    o.roleOf = {{1, "compute"}, {2, "copy"}, {3, "communication"}, {4, "communication"}, {5, "compute"}};
    return o;
}

std::string exportText(const Trace& t, const report::ChromeTraceOptions& o = {})
{
    std::ostringstream os;
    report::writeChromeTrace(t, os, o);
    return os.str();
}

std::string readText(const QString& path)
{
    std::ifstream in(path.toStdString(), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

json infoJson(const QString& store)
{
    auto r = test::runCli({"info", store, "--json"});
    if (r.exitCode != 0)
        qWarning("%s", qPrintable(r.err));
    return r.exitCode == 0 ? json::parse(r.out.toStdString()) : json();
}

} // namespace

class TestChromeTrace : public QObject {
    Q_OBJECT
private slots:
    void microsText();
    void exactDocument();
    void filters();
    void singleRankHeader();
    void fusedNcclOps();
    void namesFromAnalysis();
    void analysisTracks();
    void cliExportParses();
    void cliRoundTrip();
    void cliTimeRange();
    void cliErrors();
};

void TestChromeTrace::microsText()
{
    QCOMPARE(report::microsText(0), std::string("0.000"));
    QCOMPARE(report::microsText(1), std::string("0.001"));
    QCOMPARE(report::microsText(999), std::string("0.999"));
    QCOMPARE(report::microsText(1000), std::string("1.000"));
    QCOMPARE(report::microsText(1'234'567), std::string("1234.567"));
    QCOMPARE(report::microsText(-1), std::string("-0.001"));
    QCOMPARE(report::microsText(-1500), std::string("-1.500"));
    // Epoch nanoseconds keep every digit (a double would not).
    QCOMPARE(report::microsText(1'796'003'491'615'185'827), std::string("1796003491615185.827"));
    QCOMPARE(report::microsText(std::numeric_limits<int64_t>::max()), std::string("9223372036854775.807"));
    QCOMPARE(report::microsText(std::numeric_limits<int64_t>::min()), std::string("-9223372036854775.808"));
}

void TestChromeTrace::exactDocument()
{
    const Trace t = smallJob();
    const std::string got = exportText(t, namedLanes());
    // The invalid byte 0xFF becomes U+FFFD; control characters are \u escapes.
    const std::string evil = "\"evil \\\"name\\\"\\\\\\n\\u0001\xEF\xBF\xBD</script>\"";
    const std::string want =
        R"json({"displayTimeUnit":"ns","baseTimeNanoseconds":999990000,
"traceEvents":[
{"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"rank 0 (stage 0)"}},
{"ph":"M","name":"process_sort_index","pid":0,"tid":0,"args":{"sort_index":0}},
{"ph":"M","name":"thread_name","pid":0,"tid":1,"args":{"name":"stream 7 (compute)"}},
{"ph":"M","name":"thread_sort_index","pid":0,"tid":1,"args":{"sort_index":1}},
{"ph":"M","name":"thread_name","pid":0,"tid":2,"args":{"name":"stream 9 (copy)"}},
{"ph":"M","name":"thread_sort_index","pid":0,"tid":2,"args":{"sort_index":2}},
{"ph":"M","name":"thread_name","pid":0,"tid":3,"args":{"name":"stream 21 (communication)"}},
{"ph":"M","name":"thread_sort_index","pid":0,"tid":3,"args":{"sort_index":3}},
{"ph":"M","name":"thread_name","pid":0,"tid":4,"args":{"name":"thread 4242 (annotations)"}},
{"ph":"M","name":"thread_sort_index","pid":0,"tid":4,"args":{"sort_index":4}},
{"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"rank 1 (stage 1)"}},
{"ph":"M","name":"process_sort_index","pid":1,"tid":0,"args":{"sort_index":1}},
{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"stream 7 (compute)"}},
{"ph":"M","name":"thread_sort_index","pid":1,"tid":1,"args":{"sort_index":1}},
{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"stream 20 (communication)"}},
{"ph":"M","name":"thread_sort_index","pid":1,"tid":2,"args":{"sort_index":2}},
{"ph":"X","cat":"kernel","name":"sm90_gemm","pid":0,"tid":1,"ts":10.000,"dur":1.500,"args":{"device":0,"stream":7,"correlation":1}},
{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,"tid":2,"ts":12.000,"dur":0.250,"args":{"device":0,"stream":9,"bytes":4096,"kind":"HtoD"}},
{"ph":"X","cat":"kernel","name":"ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)","pid":0,"tid":3,"ts":13.000,"dur":1.001,"args":{"device":0,"stream":21,"correlation":3,"bytes":1048576,"Collective name":"Send","Dst Rank":1,"Process Group Ranks":[0,1]}},
{"ph":"X","cat":"kernel","name":"ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)","pid":1,"tid":2,"ts":13.100,"dur":0.901,"args":{"device":1,"stream":20,"correlation":4,"bytes":1048576,"Collective name":"Recv","Src Rank":0,"Process Group Ranks":[0,1]}},
{"ph":"X","cat":"kernel","name":)json" + evil + R"json(,"pid":1,"tid":1,"ts":14.100,"dur":0.999,"args":{"device":1,"stream":7}},
{"ph":"X","cat":"user_annotation","name":"step","pid":0,"tid":4,"ts":0.000,"dur":15.000}
]}
)json";
    QCOMPARE(got, want);

    // A JSON parser reads back the hostile name as written (the bad byte replaced).
    const json doc = json::parse(got);
    QCOMPARE(doc["traceEvents"].size(), size_t(22));
    QCOMPARE(doc["traceEvents"][20]["name"].get<std::string>(), std::string("evil \"name\"\\\n\x01\xEF\xBF\xBD</script>"));

    // Without stages and roles the names say only what the trace says.
    const std::string plain = exportText(t);
    const std::string rank0 = "\"args\":{\"name\":\"rank 0\"}", stream21 = "\"args\":{\"name\":\"stream 21\"}";
    QVERIFY(plain.find(rank0) != std::string::npos);
    QVERIFY(plain.find(stream21) != std::string::npos);
}

void TestChromeTrace::filters()
{
    const Trace t = smallJob();
    auto names = [](const std::string& text) {
        QStringList out;
        const json doc = json::parse(text);
        for (const auto& e : doc["traceEvents"])
            if (e["ph"] == "X")
                out << QString::fromStdString(std::to_string(e["pid"].get<int>()) + ":" + e["name"].get<std::string>().substr(0, 12));
        return out.join("|");
    };
    report::ChromeTraceOptions o;
    // Records overlapping [from, to): the copy ends at 1'000'002'250, so it is in.
    o.from = 1'000'002'250;
    o.to = 1'000'003'100;
    QCOMPARE(names(exportText(t, o)), QString("0:Memcpy HtoD |0:ncclDevKerne|0:step"));
    // The origin stays the job's, so exports of parts of a job line up.
    QVERIFY(exportText(t, o).find("\"baseTimeNanoseconds\":999990000,") != std::string::npos);

    report::ChromeTraceOptions r;
    r.ranks = std::vector<int>{1};
    const std::string one = exportText(t, r);
    QCOMPARE(names(one), QString("1:ncclDevKerne|1:evil \"name\"\\"));
    QVERIFY(one.find("\"pid\":0") == std::string::npos);

    report::ChromeTraceOptions none;
    none.ranks = std::vector<int>{7};
    QCOMPARE(exportText(t, none), std::string("{\"displayTimeUnit\":\"ns\",\"baseTimeNanoseconds\":999990000,\n"
                                               "\"traceEvents\":[\n]}\n"));
    QVERIFY(json::parse(exportText(t, none))["traceEvents"].empty());
}

void TestChromeTrace::singleRankHeader()
{
    Trace t = smallJob();
    t.ranks[1].host = "node-\"b\"";
    GpuInfo g;
    g.rank = 1;
    g.device = 1;
    g.name = "NVIDIA H100 80GB HBM3";
    g.memoryBytes = 85'000'000'000;
    g.smCount = 132;
    g.computeCapability = "9.0";
    t.gpus.push_back(g);
    t.meta["simulated"] = "1";
    t.meta["simulated_by"] = "pipescope simulate";
    report::ChromeTraceOptions o;
    o.ranks = std::vector<int>{1};
    const std::string text = exportText(t, o);
    const std::string head = text.substr(0, text.find("\"traceEvents\""));
    const std::string want = R"json({"displayTimeUnit":"ns","baseTimeNanoseconds":999990000,
"host_name":"node-\"b\"",
"distributedInfo":{"rank":1,"world_size":2},
"deviceProperties":[{"computeMajor":9,"computeMinor":0,"id":1,"name":"NVIDIA H100 80GB HBM3","numSms":132,"totalGlobalMem":85000000000}],
"pipescope":{"simulated":true,"simulated_by":"pipescope simulate"},
)json";
    QCOMPARE(head, want);
}

void TestChromeTrace::fusedNcclOps()
{
    Trace t = smallJob();
    // The send kernel of rank 0 also ran a receive (one grouped NCCL call).
    NcclOp recv;
    recv.id = 99;
    recv.rank = 0;
    recv.activityId = 3;
    recv.kind = Collective::Recv;
    recv.isP2p = true;
    recv.peer = 1;
    recv.bytes = 2048;
    t.ncclOps.push_back(recv);
    report::ChromeTraceOptions o;
    o.ranks = std::vector<int>{0};
    const json doc = json::parse(exportText(t, o));
    json args;
    for (const auto& e : doc["traceEvents"])
        if (e["ph"] == "X" && e.contains("args") && e["args"].contains("Collective name"))
            args = e["args"];
    const json want = {{"device", 0}, {"stream", 21}, {"correlation", 3}, {"bytes", 1048576}, {"Collective name", "Send"},
                       {"Dst Rank", 1}, {"Process Group Ranks", {0, 1}},
                       {"NCCL ops", {{{"kind", "Send"}, {"peer", 1}, {"bytes", 1048576}},
                                     {{"kind", "Recv"}, {"peer", 1}, {"bytes", 2048}}}}};
    QCOMPARE(args, want);
}

void TestChromeTrace::namesFromAnalysis()
{
    test::PipelineSpec spec; // 4 stages, 1F1B, compute on stream 7, receives on 20, sends on 21
    spec.commNs = 50'000;
    const Trace t = test::pipelineTrace(spec).trace;
    report::ChromeTraceOptions o;
    report::addAnalysis(o, analyze(t));
    QCOMPARE(o.stageOf, (std::map<int, int>{{0, 0}, {1, 1}, {2, 2}, {3, 3}}));
    const json doc = json::parse(exportText(t, o));
    std::set<std::string> names;
    for (const auto& e : doc["traceEvents"])
        if (e["ph"] == "M" && (e["name"] == "process_name" || e["name"] == "thread_name"))
            names.insert(std::to_string(e["pid"].get<int>()) + " " + e["args"]["name"].get<std::string>());
    QCOMPARE(names, (std::set<std::string>{
                        "0 rank 0 (stage 0)", "0 stream 7 (compute)", "0 stream 20 (communication)", "0 stream 21 (communication)",
                        "1 rank 1 (stage 1)", "1 stream 7 (compute)", "1 stream 20 (communication)", "1 stream 21 (communication)",
                        "2 rank 2 (stage 2)", "2 stream 7 (compute)", "2 stream 20 (communication)", "2 stream 21 (communication)",
                        "3 rank 3 (stage 3)", "3 stream 7 (compute)", "3 stream 20 (communication)", "3 stream 21 (communication)",
                    }));
}

// With the trace, the analysis leaves with it: per rank its steps, its idle
// time by cause and its matched messages (a send and a receive joined by a
// flow), each on a thread of its own; an import reads the recorded events
// back and skips these.
void TestChromeTrace::analysisTracks()
{
    test::PipelineSpec spec; // 4 stages, 1F1B
    spec.commNs = 50'000;
    const Trace t = test::pipelineTrace(spec).trace;
    const AnalysisResult r = analyze(t);
    QVERIFY(r.pipeline.found);
    report::ChromeTraceOptions o;
    report::addAnalysis(o, r, &t);
    const size_t messages = measurePipeline(t, r).messages.size();
    QVERIFY(messages > 0);
    QCOMPARE(o.steps.size(), r.steps.size());
    QCOMPARE(o.messages.size(), messages);
    std::ostringstream os;
    const report::ChromeTraceStats stats = report::writeChromeTrace(t, os, o);
    const json doc = json::parse(os.str());

    std::map<std::string, size_t> cats;
    std::map<int64_t, std::pair<int, int>> flows; // transfers: id -> (start pid, end pid)
    // Step dependencies: id -> ((rank, start ns), (rank, start ns)).
    std::map<int64_t, std::pair<std::pair<int, TimeNs>, std::pair<int, TimeNs>>> needs;
    const TimeNs base = doc["baseTimeNanoseconds"].get<TimeNs>();
    auto nsOf = [&](const json& e) { return base + TimeNs(std::llround(e["ts"].get<double>() * 1000)); };
    std::set<std::string> names;
    std::map<std::pair<int, int>, std::string> threadName; // (pid, tid)
    std::multiset<std::string> stepNames, expectedStepNames;
    for (const auto& e : doc["traceEvents"]) {
        if (e["ph"] == "M" && e["name"] == "thread_name")
            threadName[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"].get<std::string>();
        if (e["ph"] == "X") {
            ++cats[e["cat"].get<std::string>()];
            if (e["cat"] == "pipescope.step")
                stepNames.insert(std::to_string(e["pid"].get<int>()) + " " + e["name"].get<std::string>());
        }
        if ((e["ph"] == "s" || e["ph"] == "f") && e["cat"] == "pipescope.step") {
            auto& n = needs[e["id"].get<int64_t>()];
            (e["ph"] == "s" ? n.first : n.second) = {e["pid"].get<int>(), nsOf(e)};
            continue;
        }
        if (e["ph"] == "s")
            flows[e["id"].get<int64_t>()].first = e["pid"].get<int>();
        if (e["ph"] == "f") {
            flows[e["id"].get<int64_t>()].second = e["pid"].get<int>();
            QCOMPARE(e["bp"].get<std::string>(), std::string("e"));
        }
    }
    for (const Step& st : r.steps)
        expectedStepNames.insert(std::to_string(st.rank) + " " + toChar(st.kind) + " " + std::to_string(st.microbatch));
    QCOMPARE(stepNames, expectedStepNames);
    QCOMPARE(cats["pipescope.step"], r.steps.size());
    QCOMPARE(cats["pipescope.bubble"], r.bubbles.size());
    QCOMPARE(cats["pipescope.transfer"], 2 * messages);
    QCOMPARE(stats.analysisEvents, int64_t(r.steps.size() + r.bubbles.size() + 2 * messages));
    QCOMPARE(flows.size(), messages);
    // Each step joined to the step that needs its output, as the app's
    // timeline links them (an implementation of its own over the timeline model).
    const timeline::TimelineModel model = timeline::buildMeasured(t, r);
    std::set<std::pair<std::pair<int, TimeNs>, std::pair<int, TimeNs>>> expectedNeeds, exportedNeeds;
    for (size_t lane = 0; lane < model.lanes.size(); ++lane) {
        const timeline::Lane& l = model.lanes[lane];
        if (l.kind != timeline::LaneKind::Steps)
            continue;
        for (size_t i = 0; i < l.events.size(); ++i)
            if (const auto next = timeline::dependentStep(model, {int(lane), int64_t(i)})) {
                const timeline::Lane& nl = model.lanes[size_t(next->lane)];
                expectedNeeds.insert({{l.rank, l.events[i].start}, {nl.rank, model.event(next->lane, next->event).start}});
            }
    }
    for (const auto& [id, ends] : needs)
        exportedNeeds.insert(ends);
    QVERIFY(expectedNeeds.size() > 10);
    QCOMPARE(needs.size(), o.stepFlows.size());
    QVERIFY(exportedNeeds == expectedNeeds);
    for (const auto& [id, ends] : flows)
        QCOMPARE(std::abs(ends.first - ends.second), 1); // neighbouring stages of the pipeline
    for (int rank = 0; rank < 4; ++rank) {
        std::set<std::string> mine;
        for (const auto& [key, name] : threadName)
            if (key.first == rank)
                mine.insert(name);
        QVERIFY(mine.count("pipeline steps") && mine.count("idle by cause") && mine.count("transfers"));
    }

    // The import skips them: the same recorded events as an export without them.
    QTemporaryDir dir;
    auto importOf = [&](const report::ChromeTraceOptions& opts, const QString& name) {
        // The same file name in two folders: diagnostics name the file.
        QDir(dir.path()).mkdir(name);
        const QString json = dir.filePath(name + "/job.json"), store = dir.filePath(name + "/job.pipescope");
        {
            std::ofstream out(json.toStdString(), std::ios::binary);
            report::writeChromeTrace(t, out, opts);
        }
        const auto run = test::runCli({"import", json, "-o", store, "--quiet"});
        if (run.exitCode != 0)
            qWarning("%s", qPrintable(run.err));
        return infoJson(store);
    };
    const json with = importOf(o, "with"), without = importOf(report::ChromeTraceOptions{}, "without");
    QVERIFY(!with.is_null() && !without.is_null());
    QCOMPARE(with["activities"], without["activities"]);
    QCOMPARE(with["cpu_ranges"], without["cpu_ranges"]);
    std::string diagWith = with["diagnostics"].dump(), diagWithout = without["diagnostics"].dump();
    QCOMPARE(QString::fromStdString(diagWith).replace("/with/", "/x/"), QString::fromStdString(diagWithout).replace("/without/", "/x/"));
}

void TestChromeTrace::cliExportParses()
{
    QTemporaryDir dir;
    const QString out = dir.filePath("all.json");
    auto r = test::runCli({"export", kExample, "-o", out});
    QCOMPARE(r.exitCode, 0);
    QCOMPARE(r.out, QString("Wrote %1: 4 ranks, 6,325 GPU activities, 1,928 CPU ranges. "
                            "Open it in ui.perfetto.dev or chrome://tracing.\n").arg(out));
    QVERIFY(r.err.isEmpty());
    const json doc = json::parse(readText(out));
    Store store(kExample.toStdString());
    const Trace t = store.load();
    std::map<std::string, int64_t> cats;
    std::set<int> pids;
    for (const auto& e : doc["traceEvents"]) {
        if (e["ph"] == "X")
            ++cats[e["cat"].get<std::string>()];
        pids.insert(e["pid"].get<int>());
        if (e["ph"] == "M" && e["name"] == "process_name")
            QVERIFY2(e["args"]["name"].get<std::string>().find(" (stage ") != std::string::npos, "stages named");
    }
    QCOMPARE(pids, (std::set<int>{0, 1, 2, 3}));
    QCOMPARE(cats["kernel"], int64_t(2444));
    QCOMPARE(cats["gpu_memcpy"], int64_t(140));
    QCOMPARE(cats["gpu_memset"], int64_t(296));
    QCOMPARE(cats["cuda_sync"], int64_t(3445));
    QCOMPARE(cats["user_annotation"], int64_t(t.cpuRanges.size()));
    QCOMPARE(doc["baseTimeNanoseconds"].get<int64_t>(), report::chromeTraceOrigin(t));
    QVERIFY(!doc.contains("distributedInfo")); // several ranks: no single rank to name
}

void TestChromeTrace::cliRoundTrip()
{
    // One file per rank, as the profiler writes them: the import keeps each rank.
    QTemporaryDir dir;
    QStringList files;
    for (int rank = 0; rank < 4; ++rank) {
        const QString out = dir.filePath(QString("rank-%1.json").arg(rank));
        auto r = test::runCli({"export", kExample, "--ranks", QString::number(rank), "-o", out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        files << out;
    }
    const QString back = dir.filePath("back.pipescope");
    auto r = test::runCli(QStringList{"import"} + files + QStringList{"-o", back, "--quiet"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));

    const json src = infoJson(kExample), dst = infoJson(back);
    QVERIFY(!src.is_null() && !dst.is_null());
    QCOMPARE(dst["activities"], src["activities"]);
    // One NCCL operation per kernel: the profiler's format names one collective
    // per kernel, so the 108 kernels that fused a send with a receive come back
    // with the first of the two (the export lists both under "NCCL ops").
    const json srcOps = {{"AllReduce", 16}, {"Recv", 144}, {"Send", 144}};
    const json dstOps = {{"AllReduce", 16}, {"Recv", 90}, {"Send", 90}};
    QCOMPARE(src["nccl_ops"], srcOps);
    QCOMPARE(dst["nccl_ops"], dstOps);
    QCOMPARE(dst["gpu_busy"].size(), size_t(4));
    for (size_t i = 0; i < 4; ++i)
        for (const char* k : {"rank", "device", "kernels", "kernel_busy_ns", "gpu_busy_ns", "kernel_first_ns",
                              "kernel_last_ns", "gpu_first_ns", "gpu_last_ns"})
            QVERIFY2(dst["gpu_busy"][i][k] == src["gpu_busy"][i][k],
                     qPrintable(QString("rank %1 %2: %3 vs %4").arg(i).arg(k)
                                    .arg(QString::fromStdString(dst["gpu_busy"][i][k].dump()))
                                    .arg(QString::fromStdString(src["gpu_busy"][i][k].dump()))));
    QCOMPARE(dst["span_ns"], src["span_ns"]);

    // The whole job in one file imports as one rank with every kernel.
    const QString all = dir.filePath("all.json"), allBack = dir.filePath("all.pipescope");
    QCOMPARE(test::runCli({"export", kExample, "-o", all}).exitCode, 0);
    r = test::runCli({"import", all, "-o", allBack, "--quiet"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const json one = infoJson(allBack);
    int64_t kernels = 0;
    for (const auto& g : one["gpu_busy"])
        kernels += g["kernels"].get<int64_t>();
    QCOMPARE(kernels, int64_t(2444));
}

void TestChromeTrace::cliTimeRange()
{
    Store store(kExample.toStdString());
    const Trace t = store.load();
    const TimeNs origin = report::chromeTraceOrigin(t);
    const TimeNs from = origin + 7'500'000'000, to = origin + 7'750'500'000;
    int64_t want = 0;
    for (const auto& a : t.activities)
        if ((a.rank == 1 || a.rank == 2) && a.kind == ActivityKind::Kernel && a.end >= from && a.start < to)
            ++want;
    QVERIFY(want > 0);

    QTemporaryDir dir;
    const QString out = dir.filePath("part.json");
    auto r = test::runCli({"export", kExample, "--from", "7.5s", "--to", "7750.5ms", "--ranks", "1,2", "-o", out});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const json doc = json::parse(readText(out));
    int64_t kernels = 0;
    for (const auto& e : doc["traceEvents"]) {
        QVERIFY(e["pid"] == 1 || e["pid"] == 2);
        if (e["ph"] == "X" && e["cat"] == "kernel") {
            ++kernels;
            // ts and dur in microseconds from the origin; the event overlaps the range.
            const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
            QVERIFY(ts < 7'750'500.0 && ts + dur >= 7'500'000.0);
        }
    }
    QCOMPARE(kernels, want);

    // The same range in other units, and a bare number of microseconds.
    const QString same = dir.filePath("same.json");
    r = test::runCli({"export", kExample, "--from", "7500000000ns", "--to", "7750500", "--ranks", "1,2", "-o", same});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QCOMPARE(readText(same), readText(out));
}

void TestChromeTrace::cliErrors()
{
    QTemporaryDir dir;
    const QString out = dir.filePath("x.json");
    auto r = test::runCli({"export", kExample, "--ranks", "9", "-o", out});
    QCOMPARE(r.exitCode, 1);
    QCOMPARE(r.err, QString("pipescope export: error: --ranks: %1 has no rank 9 (its ranks: 0,1,2,3); pick ranks from "
                            "`pipescope info %1`\n").arg(kExample));
    r = test::runCli({"export", kExample, "--from", "5x", "-o", out});
    QCOMPARE(r.exitCode, 1);
    QCOMPARE(r.err, QString("pipescope export: error: --from 5x: not a time; give a non-negative number with a unit "
                            "(250ms, 1.5s, 800us, 1200ns), measured from the start of the trace\n"));
    r = test::runCli({"export", kExample, "--from", "2s", "--to", "1s", "-o", out});
    QCOMPARE(r.exitCode, 1);
    QCOMPARE(r.err, QString("pipescope export: error: --from 2s --to 1s: the range is empty; give a --to later than --from\n"));
    r = test::runCli({"export", kExample, "--from", "3600s", "-o", out});
    QCOMPARE(r.exitCode, 1);
    QCOMPARE(r.err, QString("pipescope export: error: %1: nothing to export in the chosen --from/--to range and --ranks; "
                            "widen them (`pipescope info %1` shows the time span)\n").arg(kExample));
    r = test::runCli({"export", kExample, "-o", dir.filePath("no/such/folder/x.json")});
    QCOMPARE(r.exitCode, 1);
    QVERIFY(r.err.contains("does not exist"));
    r = test::runCli({"export", dir.filePath("missing.pipescope"), "-o", out});
    QCOMPARE(r.exitCode, 1);
    r = test::runCli({"export", kExample}); // no -o
    QCOMPARE(r.exitCode, 2);
    // Nothing was written by the failed runs, not even a temporary file.
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden), QStringList());
}

QTEST_GUILESS_MAIN(TestChromeTrace)
#include "tst_chrome_trace.moc"
