// The trace-event JSON writer shared by the Chrome trace export and the
// simulator's profiler traces: the exact bytes of a small document in each
// style (complete, instant, metadata and flow events, args with an array of
// objects, a string needing escapes), strings escaped exactly as
// nlohmann::json escapes them, microsecond times; and steps of the two
// writers: the export's lanes and record filter, its NCCL args, and the
// simulator's communication args and NCCL streams.
#include "SyntheticTrace.h"
#include "report/detail/ChromeTraceSteps.h"
#include "simulate/detail/KinetoSteps.h"
#include "util/JsonText.h"
#include "util/TraceEventWriter.h"

#include <QtTest>
#include <nlohmann/json.hpp>

#include <limits>
#include <sstream>

using namespace pipescope;
using nlohmann::json;

namespace {

// Quotes, a backslash, a tab, a newline, a control character, UTF-8 (µ) and
// an invalid byte.
const std::string kHostile = "say \"hi\" \\ \t\n\x01 \xC2\xB5s \xFF!";
// How JSON writes it: the invalid byte becomes U+FFFD, UTF-8 stays as it is.
const std::string kHostileJson = "\"say \\\"hi\\\" \\\\ \\t\\n\\u0001 \xC2\xB5s \xEF\xBF\xBD!\"";

} // namespace

class TestTraceEvents : public QObject {
    Q_OBJECT
private slots:
    void compactDocument();
    void kinetoDocument();
    void escapingMatchesNlohmann();
    void micros();
    void exportFilter();
    void lanes();
    void ncclArgs();
    void commArgs();
    void commStreams();
};

void TestTraceEvents::compactDocument()
{
    std::ostringstream os;
    TraceEventWriter w(os, TraceEventStyle::compact());
    w.beginDocument();
    w.raw("\"displayTimeUnit\":\"ns\",");
    w.member("host_name", "node-\"a\"");
    w.beginEvents();
    w.metadata("process_name", 3, 0, "name", "rank 3");
    w.metadata("thread_sort_index", 3, 1, "sort_index", 1);
    w.beginComplete("cpu_op", kHostile, 3, 1, 1'500, 2'000'001);
    w.beginArgs();
    w.arg("correlation", 42);
    w.arg("note", kHostile);
    w.arg("ranks", RawJson{"[0,1]"});
    w.beginArrayArg("ops");
    w.beginObject();
    w.arg("kind", "Send");
    w.arg("peer", 1);
    w.endObject();
    w.beginObject();
    w.arg("kind", "Recv");
    w.endObject();
    w.endArrayArg();
    w.endArgs();
    w.endEvent();
    w.flowStart("ac2g", "ac2g", 42, 3, 1, 1'500);
    w.flowEnd("ac2g", "ac2g", 42, 3, 7, 3'000);
    w.beginComplete("kernel", RawJson{"\"gemm\""}, 3, 7, 3'000, 999);
    w.endEvent();
    w.beginInstant("cpu_instant_event", "t", "[memory]", 3, 1, -1);
    w.beginArgs();
    w.arg("Bytes", -4096);
    w.endArgs();
    w.endEvent();
    w.endDocument();
    QCOMPARE(w.events(), int64_t(7));

    const std::string want =
        "{\"displayTimeUnit\":\"ns\",\"host_name\":\"node-\\\"a\\\"\",\n"
        "\"traceEvents\":[\n"
        "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":3,\"tid\":0,\"args\":{\"name\":\"rank 3\"}},\n"
        "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":3,\"tid\":1,\"args\":{\"sort_index\":1}},\n"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":" + kHostileJson +
        ",\"pid\":3,\"tid\":1,\"ts\":1.500,\"dur\":2000.001,\"args\":{\"correlation\":42,\"note\":" + kHostileJson +
        ",\"ranks\":[0,1],\"ops\":[{\"kind\":\"Send\",\"peer\":1},{\"kind\":\"Recv\"}]}},\n"
        "{\"ph\":\"s\",\"id\":42,\"pid\":3,\"tid\":1,\"ts\":1.500,\"cat\":\"ac2g\",\"name\":\"ac2g\"},\n"
        "{\"ph\":\"f\",\"id\":42,\"pid\":3,\"tid\":7,\"ts\":3.000,\"cat\":\"ac2g\",\"name\":\"ac2g\",\"bp\":\"e\"},\n"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":3,\"tid\":7,\"ts\":3.000,\"dur\":0.999},\n"
        "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\",\"name\":\"[memory]\",\"pid\":3,\"tid\":1,\"ts\":-0.001,"
        "\"args\":{\"Bytes\":-4096}}\n"
        "]}\n";
    QCOMPARE(os.str(), want);

    // A JSON parser reads the strings back (the invalid byte replaced).
    const json doc = json::parse(os.str());
    QCOMPARE(doc["traceEvents"][2]["args"]["note"].get<std::string>(), std::string("say \"hi\" \\ \t\n\x01 \xC2\xB5s \xEF\xBF\xBD!"));
    QCOMPARE(doc["traceEvents"].size(), size_t(7));

    // No events: the array is still closed on its own line.
    std::ostringstream empty;
    TraceEventWriter e(empty, TraceEventStyle::compact());
    e.beginDocument();
    e.beginEvents();
    e.endDocument();
    QCOMPARE(empty.str(), std::string("{\"traceEvents\":[\n]}\n"));
}

void TestTraceEvents::kinetoDocument()
{
    // The PyTorch profiler's layout: ": " and ", " inside events, each event
    // on its own line indented two spaces, the members ahead indented one.
    std::string out = "kept";
    TraceEventWriter w(out, TraceEventStyle::kineto());
    w.beginDocument();
    w.member("schemaVersion", RawJson{"1"});
    w.beginEvents();
    w.beginComplete("kernel", kHostile, 0, 7, 1'000'000, 2'500);
    w.beginArgs();
    w.arg("device", 0);
    w.arg("part", "input");
    w.arg("Python parent id", RawJson{"null"});
    w.endArgs();
    w.endEvent();
    w.flowEnd("ac2g", "ac2g", 1000, 0, 7, 1'000'000);
    w.beginComplete("user_annotation", "ProfilerStep#10", 0, 1, 0, 0);
    w.beginArgs();
    w.endArgs();
    w.endEvent();
    w.endDocument();

    const std::string want = "kept{\n"
                             " \"schemaVersion\": 1,\n"
                             "  \"traceEvents\": [\n"
                             "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": " + kHostileJson +
                             ", \"pid\": 0, \"tid\": 7, \"ts\": 1000.000, \"dur\": 2.500, "
                             "\"args\": {\"device\": 0, \"part\": \"input\", \"Python parent id\": null}},\n"
                             "  {\"ph\": \"f\", \"id\": 1000, \"pid\": 0, \"tid\": 7, \"ts\": 1000.000, \"cat\": \"ac2g\", "
                             "\"name\": \"ac2g\", \"bp\": \"e\"},\n"
                             "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#10\", \"pid\": 0, "
                             "\"tid\": 1, \"ts\": 0.000, \"dur\": 0.000, \"args\": {}}\n"
                             "  ]\n"
                             "}\n";
    QCOMPARE(out, want);
    QCOMPARE(json::parse(out.substr(4))["traceEvents"].size(), size_t(3));
}

void TestTraceEvents::escapingMatchesNlohmann()
{
    // Every byte, alone and between letters, and broken or odd UTF-8.
    std::vector<std::string> texts = {"", kHostile, "\xC2", "\xE2\x82", "\xE2\x82\xAC", "\xC0\xAF", "\xED\xA0\x80x",
                                      "\xF0\x9F\x98\x80", "\xF4\x90\x80\x80", "a\xC3(b", "\x7F"};
    for (int b = 0; b < 256; ++b) {
        texts.push_back(std::string(1, static_cast<char>(b)));
        texts.push_back("a" + std::string(1, static_cast<char>(b)) + "z");
    }
    for (const std::string& t : texts)
        QCOMPARE(TraceEventWriter::quoted(t), jsonText(json(t)));
    QCOMPARE(TraceEventWriter::quoted(kHostile), kHostileJson);
    QCOMPARE(TraceEventWriter::quoted("plain </script> #1"), std::string("\"plain </script> #1\""));
}

void TestTraceEvents::micros()
{
    QCOMPARE(TraceEventWriter::micros(0), std::string("0.000"));
    QCOMPARE(TraceEventWriter::micros(7), std::string("0.007"));
    QCOMPARE(TraceEventWriter::micros(1'234'567), std::string("1234.567"));
    QCOMPARE(TraceEventWriter::micros(-1'500), std::string("-1.500"));
    QCOMPARE(TraceEventWriter::micros(1'704'067'200'000'000'001), std::string("1704067200000000.001"));
    QCOMPARE(TraceEventWriter::micros(std::numeric_limits<int64_t>::min()), std::string("-9223372036854775.808"));
}

void TestTraceEvents::exportFilter()
{
    Activity a;
    a.rank = 1;
    a.start = 100;
    a.end = 200;
    report::ChromeTraceOptions o;
    QVERIFY(report::detail::ExportFilter(o).keep(a));
    // Records overlapping [from, to): one ending at `from` is in, one starting at `to` is out.
    o.from = 200;
    QVERIFY(report::detail::ExportFilter(o).keep(a));
    o.from = 201;
    QVERIFY(!report::detail::ExportFilter(o).keep(a));
    o.from.reset();
    o.to = 100;
    QVERIFY(!report::detail::ExportFilter(o).keep(a));
    o.to = 101;
    QVERIFY(report::detail::ExportFilter(o).keep(a));
    o.ranks = std::vector<int>{0, 2};
    QVERIFY(!report::detail::ExportFilter(o).keep(a));
    CpuRange r;
    r.rank = 2;
    r.start = 0;
    r.end = 100;
    QVERIFY(report::detail::ExportFilter(o).keep(r));
}

void TestTraceEvents::lanes()
{
    test::TraceBuilder tb;
    tb.kernel(0, 21, "send", 1'000, 2'000); // store stream 1
    tb.kernel(0, 7, "gemm", 3'000, 4'000);  // store stream 2
    tb.kernel(1, 7, "gemm", 3'000, 4'000);  // store stream 3
    tb.range(0, CpuRangeKind::Runtime, "cudaLaunchKernel", 900, 950, 4242);
    tb.range(0, CpuRangeKind::Nvtx, "step", 800, 5'000, 4242);
    tb.range(0, CpuRangeKind::CpuOp, "aten::mm", 850, 900, 17);
    Trace t = tb.build();
    for (StreamInfo& s : t.streams)
        if (s.id == 2)
            s.device = 1; // rank 0 runs on two devices

    report::ChromeTraceOptions o;
    const auto lanes = report::detail::planLanes(t, report::detail::ExportFilter(o), {{1, "communication"}});
    QCOMPARE(lanes.size(), size_t(2));
    QStringList got;
    for (const auto& [rank, rl] : lanes) {
        for (const auto& [id, lane] : rl.gpu)
            got << QString("%1/%2: %3 %4").arg(rank).arg(id).arg(lane.tid).arg(QString::fromStdString(lane.name));
        for (const auto& [key, lane] : rl.cpu)
            got << QString("%1/%2: %3 %4").arg(rank).arg(key.second).arg(lane.tid).arg(QString::fromStdString(lane.name));
    }
    // GPU lanes in (device, stream) order, "GPU d" only where the rank has
    // several devices; then CPU lanes by group (annotations, CPU ops, runtime), then thread.
    QCOMPARE(got, QStringList({"0/1: 1 GPU 0 stream 21 (communication)", "0/2: 2 GPU 1 stream 7",
                               "0/4242: 3 thread 4242 (annotations)", "0/17: 4 thread 17 (CPU ops)",
                               "0/4242: 5 thread 4242 (runtime calls)", "1/3: 1 stream 7"}));

    // Only lanes with records in the range get a tid.
    o.to = 1'000;
    const auto early = report::detail::planLanes(t, report::detail::ExportFilter(o), {});
    QCOMPARE(early.size(), size_t(1));
    QCOMPARE(early.at(0).gpu.size(), size_t(0));
    QCOMPARE(early.at(0).cpu.size(), size_t(3));
    QCOMPARE(early.at(0).cpu.begin()->second.tid, 1);
}

void TestTraceEvents::ncclArgs()
{
    NcclOp recv;
    recv.kind = Collective::Recv;
    recv.peer = 0;
    recv.inNelems = 8;
    recv.dtype = "BFloat16";
    recv.groupSize = 2;
    recv.groupName = "1";
    recv.groupDesc = "p\"p";
    recv.groupRanks = {0, 1};
    recv.seq = 3;
    recv.bytes = 16;
    NcclOp send;
    send.kind = Collective::Send;
    send.peer = 1;
    const std::vector<const NcclOp*> fused{&recv, &send};

    std::string out;
    TraceEventWriter w(out, TraceEventStyle::compact());
    w.beginComplete("kernel", "k", 0, 1, 0, 10);
    w.beginArgs();
    report::detail::writeNcclArgs(w, recv, &fused);
    w.endArgs();
    w.endEvent();
    w.beginComplete("kernel", "k", 0, 1, 0, 10);
    w.beginArgs();
    report::detail::writeNcclArgs(w, send, nullptr);
    w.endArgs();
    w.endEvent();
    QCOMPARE(out, std::string("\n{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":1,\"ts\":0.000,\"dur\":0.010,"
                              "\"args\":{\"Collective name\":\"Recv\",\"Src Rank\":0,\"In msg nelems\":8,\"dtype\":\"BFloat16\","
                              "\"Group size\":2,\"Process Group Name\":\"1\",\"Process Group Description\":\"p\\\"p\","
                              "\"Process Group Ranks\":[0,1],\"Seq\":3,"
                              "\"NCCL ops\":[{\"kind\":\"Recv\",\"peer\":0,\"bytes\":16},{\"kind\":\"Send\",\"peer\":1}]}},\n"
                              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":1,\"ts\":0.000,\"dur\":0.010,"
                              "\"args\":{\"Collective name\":\"Send\",\"Dst Rank\":1}}"));
}

void TestTraceEvents::commArgs()
{
    using simulate::detail::CommArgs;
    const CommArgs send{"send", 524'288, 2, "1", "pp", "[0, 2]", "Dst Rank", 2};
    const CommArgs batch{"coalesced", std::nullopt, 4, "1", "pp", "[0, 1, 2, 3]", "", 0};
    std::string out;
    TraceEventWriter w(out, TraceEventStyle::kineto());
    w.beginComplete("kernel", "k", 2, 20, 0, 0);
    w.beginArgs();
    w.arg("correlation", 1000);
    simulate::detail::writeCommArgs(w, send);
    w.endArgs();
    w.endEvent();
    w.beginComplete("cpu_op", "record_param_comms", 2, 1, 0, 0);
    w.beginArgs();
    simulate::detail::writeCommArgs(w, batch);
    w.endArgs();
    w.endEvent();
    QCOMPARE(out, std::string("  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 2, \"tid\": 20, \"ts\": 0.000, "
                              "\"dur\": 0.000, \"args\": {\"correlation\": 1000, \"Collective name\": \"send\", "
                              "\"In msg nelems\": 524288, \"Out msg nelems\": 524288, \"dtype\": \"BFloat16\", "
                              "\"Group size\": 2, \"Process Group Name\": \"1\", \"Process Group Description\": \"pp\", "
                              "\"Process Group Ranks\": \"[0, 2]\", \"Dst Rank\": 2}},\n"
                              "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 2, \"tid\": 1, "
                              "\"ts\": 0.000, \"dur\": 0.000, \"args\": {\"Collective name\": \"coalesced\", \"Group size\": 4, "
                              "\"Process Group Name\": \"1\", \"Process Group Description\": \"pp\", "
                              "\"Process Group Ranks\": \"[0, 1, 2, 3]\"}}"));
}

void TestTraceEvents::commStreams()
{
    simulate::detail::CommStreams streams;
    QCOMPARE(streams.pick(0, 100), 20);
    QCOMPARE(streams.pick(50, 150), 21);  // 20 is busy until 100
    QCOMPARE(streams.pick(100, 200), 20); // free again when its kernel ends
    QCOMPARE(streams.pick(120, 130), 22); // 20 and 21 both busy
    QCOMPARE(streams.pick(150, 160), 21);
}

QTEST_GUILESS_MAIN(TestTraceEvents)
#include "tst_trace_events.moc"
