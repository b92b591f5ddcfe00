// pipescope serve and its protocol (core/remote, docs/remote.md): the
// protocol run in-process against the bundled example job with exact
// answers, the security checks (a baseline outside the job's folder, bad and
// oversized messages), and the real `pipescope serve --stdio` behind a link
// that adds 50 ms each way, timing the first frame.
#include "TestSupport.h"

#include "analysis/Analysis.h"
#include "analysis/JobPart.h"
#include "remote/Client.h"
#include "remote/CostModelWire.h"
#include "remote/Protocol.h"
#include "remote/Server.h"
#include "store/Store.h"
#include "timeline/TimelineBuild.h"
#include "whatif/WhatIf.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <unistd.h>

using namespace pipescope;
using namespace pipescope::remote;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kJob = std::string(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";

// A session served on a thread over two pipes, and a client on their other ends.
struct InProcess {
    Server& server;
    int toServer[2]{-1, -1}, fromServer[2]{-1, -1};
    std::thread thread;
    SessionResult result;
    bool finished = false;

    explicit InProcess(Server& s) : server(s)
    {
        if (::pipe(toServer) != 0 || ::pipe(fromServer) != 0)
            qFatal("pipe");
        thread = std::thread([this] {
            result = serveSession(server, toServer[0], fromServer[1]);
            ::close(fromServer[1]);
            fromServer[1] = -1;
        });
    }
    Client client() { return Client(fromServer[0], toServer[1]); }
    void writeRaw(const std::string& bytes) { QVERIFY(::write(toServer[1], bytes.data(), bytes.size()) == ssize_t(bytes.size())); }
    // Closes the client's side, returns everything the server wrote after what was read already.
    std::string finish()
    {
        if (toServer[1] >= 0)
            ::close(toServer[1]);
        toServer[1] = -1;
        std::string out;
        char buf[4096];
        for (ssize_t n; (n = ::read(fromServer[0], buf, sizeof buf)) > 0;)
            out.append(buf, size_t(n));
        thread.join();
        finished = true;
        return out;
    }
    ~InProcess()
    {
        if (!finished)
            finish();
        for (int fd : {toServer[0], fromServer[0]})
            if (fd >= 0)
                ::close(fd);
    }
};

// The messages in a byte stream.
std::vector<Response> responsesIn(const std::string& bytes)
{
    FrameReader r(kMaxResponseBytes);
    r.feed(bytes.data(), bytes.size());
    std::vector<Response> out;
    while (auto p = r.next())
        out.push_back(parseResponse(*p));
    return out;
}

std::string request(const json& j) { return frame(j.dump()); }

// Every file under a folder with its size and modification time.
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> listing(const fs::path& dir)
{
    std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        out[e.path().string()] = {e.is_regular_file() ? e.file_size() : 0, e.last_write_time()};
    return out;
}

} // namespace

class TestServe : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { std::signal(SIGPIPE, SIG_IGN); }

    // ---- framing and validation, without a job ------------------------------

    void framingSplitsAnywhere()
    {
        const std::string two = frame(R"({"id":1,"type":"index"})") + frame(R"({"id":2,"type":"costmodel"})");
        for (size_t cut = 0; cut <= two.size(); ++cut) {
            FrameReader r(kMaxRequestBytes);
            std::vector<std::string> got;
            r.feed(two.data(), cut);
            while (auto p = r.next())
                got.push_back(*p);
            r.feed(two.data() + cut, two.size() - cut);
            while (auto p = r.next())
                got.push_back(*p);
            QCOMPARE(got.size(), size_t(2));
            QCOMPARE(got[1], std::string(R"({"id":2,"type":"costmodel"})"));
            QVERIFY(!r.midMessage());
        }
    }

    void badFramesAreRefused_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("message");
        QTest::newRow("other magic") << QByteArray("HTTP/1.1 200\n") << "not a pipescope remote message (it starts with 'HTTP/1.1 200\\x0a', expected 'PSR1 <length>')";
        QTest::newRow("oversized") << QByteArray("PSR1 70000\n") << "a message of 70000 bytes, over the limit of 65536 bytes";
        QTest::newRow("huge length") << QByteArray("PSR1 99999999999\n") << "a message length of more than 10 digits ('99999999999')";
        QTest::newRow("not a number") << QByteArray("PSR1 12a\n") << "a message length that is not a decimal number ('12a')";
        QTest::newRow("leading zero") << QByteArray("PSR1 012\n") << "a message length that is not a decimal number ('012')";
        QTest::newRow("negative") << QByteArray("PSR1 -5\n") << "a message length that is not a decimal number ('-5')";
        QTest::newRow("long header") << QByteArray("PSR1 12345678901234") << "a message header longer than 18 bytes (expected 'PSR1 <length>')";
        QTest::newRow("compressed, not agreed") << QByteArray("PSR1 12 z\n")
                                                << "a compressed message ('PSR1 <length> z') in a session that did not agree on compression in hello";
        QTest::newRow("other flag") << QByteArray("PSR1 12 x\n") << "a message length that is not a decimal number ('12 x')";
        QTest::newRow("empty") << QByteArray("PSR1 0\n") << "an empty message (a message is one JSON object)";
    }
    void badFramesAreRefused()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, message);
        FrameReader r(kMaxRequestBytes);
        try {
            r.feed(bytes.constData(), size_t(bytes.size()));
            r.next();
            QFAIL("accepted");
        } catch (const ProtocolError& e) {
            QCOMPARE(QString::fromUtf8(e.what()), message);
        }
    }

    void badRequestsAreRefused_data()
    {
        QTest::addColumn<QString>("payload");
        QTest::addColumn<QString>("message");
        QTest::newRow("not json") << "{\"id\":1," << "a request that is not JSON";
        QTest::newRow("array") << "[1,2]" << "a request that is not a JSON object";
        QTest::newRow("no id") << R"({"type":"index"})" << "a request without an 'id'";
        QTest::newRow("string id") << R"({"id":"1","type":"index"})" << "a request whose 'id' is not a whole number from 0 to 2^53";
        QTest::newRow("unknown type") << R"({"id":1,"type":"shell"})" << "a request of unknown type 'shell'";
        QTest::newRow("unknown field") << R"({"id":1,"type":"index","x":1})" << "a index request with an unknown field 'x'";
        QTest::newRow("no versions") << R"({"id":1,"type":"hello"})" << "a hello request without 'versions'";
        QTest::newRow("width") << R"({"id":1,"type":"tiles","from_ns":0,"to_ns":10,"width_px":0})"
                               << "'width_px' of a tiles request is 0, outside 1..16384";
        QTest::newRow("backwards") << R"({"id":1,"type":"tiles","from_ns":10,"to_ns":10,"width_px":5})"
                                   << "a tiles request whose to_ns is not after its from_ns";
        QTest::newRow("pixels") << QString(R"({"id":1,"type":"tiles","from_ns":0,"to_ns":10,"width_px":16384,"lanes":[)") +
                                       QString("0,").repeated(199) + "0]}"
                                << "a tiles request of 200 lanes x 16384 px, over the limit of 2000000 pixels";
        QTest::newRow("deep") << R"({"id":1,"type":"index","a":[[[[[[[[[[1]]]]]]]]]]})" << "a request nested deeper than 8 levels";
        QTest::newRow("nul path") << QString::fromUtf8("{\"id\":1,\"type\":\"diff\",\"baseline\":\"a\\u0000b\"}") << "'baseline' of a diff request holds a NUL byte";
        QTest::newRow("pattern") << QString(R"({"id":1,"type":"search","pattern":""})") << "'pattern' of a search request has 0 bytes, outside 1..1024";
        QTest::newRow("parts") << QString(R"({"id":1,"type":"analysis","parts":"steps"})") << "'parts' of a analysis request is not \"summary\" or \"full\"";
        QTest::newRow("compression") << QString(R"({"id":1,"type":"hello","versions":[2],"compression":"deflate"})")
                                     << "'compression' of a hello request is not a list of at most 8 names";
        QTest::newRow("ranks and range") << QString(R"({"id":1,"type":"steps","ranks":[1],"rank_range":[0,3]})")
                                         << "a steps request with both 'ranks' and 'rank_range' (one or the other)";
        QTest::newRow("range backwards") << QString(R"({"id":1,"type":"steps","rank_range":[3,0]})") << "a steps request whose rank_range ends before it starts";
        QTest::newRow("half a range") << QString(R"({"id":1,"type":"steps","from_ns":5})") << "a steps request with one of 'from_ns' and 'to_ns' (both or neither)";
        QTest::newRow("step parts") << QString(R"({"id":1,"type":"steps","parts":["kernels"]})")
                                    << "'parts' of a steps request names something other than \"steps\", \"bubbles\" and \"critical_path\"";
        QTest::newRow("step limit") << QString(R"({"id":1,"type":"steps","limit":0})") << "'limit' of a steps request is 0, outside 1..1000000";
    }
    void badRequestsAreRefused()
    {
        QFETCH(QString, payload);
        QFETCH(QString, message);
        try {
            parseRequest(payload.toStdString());
            QFAIL("accepted");
        } catch (const ProtocolError& e) {
            QVERIFY2(QString::fromUtf8(e.what()).startsWith(message), e.what());
        }
    }

    // ---- a session in-process ----------------------------------------------

    void helloAndIndex()
    {
        Server server(kJob);
        InProcess s(server);
        Client c = s.client();
        const json h = c.hello();
        QCOMPARE(h["protocol"].get<int>(), 2);
        QCOMPARE(h["compression"].get<std::string>(), std::string("deflate"));
        QVERIFY(c.compressing());
        QCOMPARE(h["limits"]["max_step_items"].get<int64_t>(), int64_t(1'000'000));
        QCOMPARE(h["limits"]["response_bytes"]["steps"].get<int64_t>(), int64_t(16) << 20);
        const json& job = h["job"];
        QCOMPARE(job["path"].get<std::string>(), fs::canonical(kJob).string());
        QCOMPARE(job["name"].get<std::string>(), std::string("pipeline-1f1b-4stage.pipescope"));
        QCOMPARE(job["kind"].get<std::string>(), std::string("store"));
        QCOMPARE(job["format_version"].get<std::string>(), std::string("pipescope.store/1"));
        QCOMPARE(job["ranks"].get<int>(), 4);
        QCOMPARE(job["gpus"].get<int>(), 4);
        QCOMPARE(job["activities"].get<int64_t>(), int64_t(6325));
        QCOMPARE(job["iterations"].get<int>(), 3);
        QCOMPARE(job["selected_iteration"].get<int>(), 2);
        QCOMPARE(job["simulated"].get<bool>(), false);
        QCOMPARE(job["read"]["partial"].get<bool>(), false);
        QCOMPARE(h["limits"]["request_bytes"].get<int>(), 65536);
        QCOMPARE(h["limits"]["response_bytes"]["tiles"].get<int64_t>(), int64_t(16) << 20);

        const json ix = c.result(RequestType::Index);
        QCOMPARE(ix["ranks"], json({0, 1, 2, 3}));
        QCOMPARE(ix["partial"].get<bool>(), false);
        QVERIFY(ix["job_index"].is_null());
        QCOMPARE(ix["iterations"].size(), size_t(3));
        QCOMPARE(ix["iterations"][2]["label"].get<std::string>(), std::string("iteration 2"));
        const auto& m = server.timelineModel();
        QCOMPARE(ix["timeline"]["lanes"].size(), m.lanes.size());
        QCOMPARE(ix["timeline"]["start_ns"].get<int64_t>(), m.start);
        const json& lane0 = ix["timeline"]["lanes"][0];
        QCOMPARE(lane0["kind"].get<std::string>(), std::string("steps"));
        QCOMPARE(lane0["rank"].get<int>(), 0);
        QCOMPARE(lane0["stage"].get<int>(), 0);
        QCOMPARE(lane0["events"].get<int>(), 16);
        QCOMPARE(c.roundTrips(), int64_t(2));
        s.finish();
        QCOMPARE(s.result.exitCode, 0);
        QCOMPARE(s.result.requests, int64_t(2));
        QCOMPARE(s.result.bytesIn, c.bytesSent());
        QCOMPARE(s.result.bytesOut, c.bytesReceived());
    }

    // The analysis response is `pipescope analyze --json`'s document.
    void analysisIsAnalyzeJson()
    {
        Server server(kJob);
        InProcess s(server);
        Client c = s.client();
        c.hello();
        const json doc = c.result(RequestType::Analysis);
        QProcess p;
        p.start(PIPESCOPE_CLI, {"analyze", "--json", QString::fromStdString(kJob)});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        const json cli = json::parse(p.readAllStandardOutput().toStdString());
        QCOMPARE(doc["schema"].get<std::string>(), std::string("pipescope.analysis/2"));
        QVERIFY2(doc == cli, "the served analysis differs from analyze --json");
        // Another iteration is analysed on request; one not in the job is refused, the session goes on.
        const json first = c.result(RequestType::Analysis, {{"iteration", 1}});
        QCOMPARE(first["selected_iteration"].get<int>(), 1);
        const Response none = c.call(RequestType::Analysis, {{"iteration", 7}});
        QVERIFY(!none.ok);
        QCOMPARE(none.errorCode, std::string("not_found"));
        QCOMPARE(none.errorMessage, std::string("iteration 7 is not in the job (it has 3, numbered from 0)"));
        QCOMPARE(c.result(RequestType::Analysis), doc);
    }

    void tilesAreBoundedByPixels()
    {
        Server server(kJob);
        const auto& m = server.timelineModel();
        InProcess s(server);
        Client c = s.client();
        c.hello();
        // The whole job, every lane, 1,000 px.
        const json all = c.result(RequestType::Tiles, {{"from_ns", m.start}, {"to_ns", m.end}, {"width_px", 1000}});
        QCOMPARE(all["lanes"].size(), m.lanes.size());
        int64_t items = 0;
        for (const json& lane : all["lanes"]) {
            QVERIFY(lane["items"].size() <= 1000 / 3 * 2 + 2);
            items += int64_t(lane["items"].size());
        }
        QCOMPARE(all["items"].get<int64_t>(), items);
        QVERIFY2(c.bytesReceived() < 200'000, std::to_string(c.bytesReceived()).c_str());
        qInfo("whole job at 1000 px: %zu lanes, %lld items, %lld bytes", m.lanes.size(), (long long)items, (long long)c.bytesReceived());

        // Rank 0's steps in the analysed iteration: its 16 steps, each one exact.
        const json ix = c.result(RequestType::Index);
        const json& it = ix["iterations"][2];
        const int64_t from = it["start_ns"].get<int64_t>(), to = it["end_ns"].get<int64_t>();
        const json steps = c.result(RequestType::Tiles, {{"from_ns", from}, {"to_ns", to}, {"width_px", 1000}, {"lanes", {0}}});
        const json& items0 = steps["lanes"][0]["items"];
        const auto expected = m.drawList(0, from, to, 1000);
        QCOMPARE(items0.size(), expected.size());
        int exact = 0;
        uint32_t counted = 0;
        std::string kinds;
        for (size_t i = 0; i < expected.size(); ++i) {
            const json& x = items0[i];
            QCOMPARE(x[0].get<int64_t>(), expected[i].start - from);
            QCOMPARE(x[1].get<int64_t>(), expected[i].end - from);
            QCOMPARE(x[2].get<uint32_t>(), expected[i].count);
            QCOMPARE(x[5].get<int64_t>(), expected[i].event);
            counted += x[2].get<uint32_t>();
            if (x[5].get<int64_t>() >= 0) {
                ++exact;
                kinds += "FBIW"[x[3].get<int>()];
                kinds += std::to_string(x[7].get<int>());
            }
        }
        // The example idles 98% of its iteration: most steps are narrower
        // than 3 px at 1,000 px and fold; the last three are drawn one by one.
        QCOMPARE(items0.size(), size_t(8));
        QCOMPARE(counted, uint32_t(16));
        QCOMPARE(exact, 3);
        QCOMPARE(kinds, std::string("F5B6B7"));

        // Ranks select lanes; a lane not in the timeline is refused.
        const json r3 = c.result(RequestType::Tiles, {{"from_ns", from}, {"to_ns", to}, {"width_px", 200}, {"ranks", {3}}});
        for (const json& lane : r3["lanes"])
            QCOMPARE(m.lanes[lane["lane"].get<size_t>()].rank, 3);
        const Response bad = c.call(RequestType::Tiles, {{"from_ns", from}, {"to_ns", to}, {"width_px", 200}, {"lanes", {100000}}});
        QCOMPARE(bad.errorCode, std::string("not_found"));
    }

    void detailsOfKnownEvents()
    {
        Server server(kJob);
        InProcess s(server);
        Client c = s.client();
        c.hello();
        const json step = c.result(RequestType::Details, {{"lane", 0}, {"event", 0}});
        QCOMPARE(step["lane_kind"].get<std::string>(), std::string("steps"));
        QCOMPARE(step["what"].get<std::string>(), std::string("F"));
        QCOMPARE(step["microbatch"].get<int>(), 0);
        QCOMPARE(step["rank"].get<int>(), 0);
        QCOMPARE(step["iteration"].get<int>(), 2);

        // The first NCCL send/receive kernel the search finds.
        const json hits = c.result(RequestType::Search, {{"pattern", "ncclDevKernel_SendRecv"}, {"limit", 1}});
        QVERIFY(hits["total"].get<int64_t>() > 0);
        const json& h = hits["hits"][0];
        const json k = c.result(RequestType::Details, {{"lane", h[0]}, {"event", h[1]}});
        QCOMPARE(k["lane_kind"].get<std::string>(), std::string("kernels"));
        QCOMPARE(k["start_ns"].get<int64_t>(), h[2].get<int64_t>());
        QVERIFY(k["activity"]["recorded_name"].get<std::string>().find("ncclDevKernel_SendRecv") != std::string::npos);
        QCOMPARE(k["activity"]["kind"].get<std::string>(), std::string("kernel"));
        QCOMPARE(k["lane"].get<int>(), 3);
        QCOMPARE(k["event"].get<int>(), 2);
        QCOMPARE(k["what"].get<std::string>(), std::string("p2p"));
        QCOMPARE(k["stream"].get<int>(), 16);
        QCOMPARE(k["duration_ns"].get<int64_t>(), int64_t(9058494));
        QCOMPARE(k["name"].get<std::string>(), std::string("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"));
        const json& act = k["activity"];
        QCOMPARE(act["id"].get<int64_t>(), int64_t(48));
        QCOMPARE(act["recorded_name"].get<std::string>(), std::string("_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE"));
        QCOMPARE(act["nccl"].size(), size_t(1));
        QCOMPARE(act["nccl"][0]["kind"].get<std::string>(), std::string("Send"));
        QCOMPARE(act["nccl"][0]["peer"].get<int>(), 1);
        QCOMPARE(act["nccl"][0]["bytes"].get<int64_t>(), int64_t(524288));
        QCOMPARE(act["launch"]["name"].get<std::string>(), std::string("cuLaunchKernelEx"));
        QCOMPARE(act["launch"]["delay_ns"].get<int64_t>(), int64_t(8893722));

        const Response none = c.call(RequestType::Details, {{"lane", 0}, {"event", 999999}});
        QCOMPARE(none.errorCode, std::string("not_found"));
        QCOMPARE(none.errorMessage, std::string("event 999999 is not on lane 0 (it has 16)"));
    }

    void searchIsBounded()
    {
        Server server(kJob);
        InProcess s(server);
        Client c = s.client();
        c.hello();
        const json r = c.result(RequestType::Search, {{"pattern", "nccl"}, {"limit", 3}});
        QCOMPARE(r["total"].get<int64_t>(), int64_t(1448));
        QCOMPARE(r["truncated"].get<bool>(), true);
        QCOMPARE(r["hits"].size(), size_t(3));
        // By start, each name in the table.
        QVERIFY(r["hits"][0][2].get<int64_t>() <= r["hits"][1][2].get<int64_t>());
        QCOMPARE(r["names"][std::to_string(r["hits"][0][4].get<int>())].get<std::string>(), std::string("ncclCommInitRankConfig"));
        const Response re = c.call(RequestType::Search, {{"pattern", "("}, {"regex", true}});
        QCOMPARE(re.errorCode, std::string("refused"));
        const json none = c.result(RequestType::Search, {{"pattern", "no kernel is called this"}});
        QCOMPARE(none["total"].get<int64_t>(), int64_t(0));
        QCOMPARE(none["hits"].size(), size_t(0));
    }

    // The cost model crosses the link whole: the client replays what the server would.
    void costModelRoundTrips()
    {
        Server server(kJob);
        InProcess s(server);
        Client c = s.client();
        c.hello();
        const json r = c.result(RequestType::CostModel);
        QCOMPARE(r["schema"].get<std::string>(), std::string(kCostModelWireSchema));
        const whatif::CostModel remoteModel = costModelFromWire(r["model"]);
        QCOMPARE(costModelToWire(remoteModel), r["model"]);

        Store store(kJob);
        Trace trace = store.load();
        AnalyzeOptions ao;
        ao.autogradSequences = [&store](const std::vector<int64_t>& ids) { return store.autogradSequences(ids); };
        const AnalysisResult a = analyze(trace, ao);
        const whatif::CostModel local = whatif::calibrate(trace, a);
        QCOMPARE(costModelToWire(local), r["model"]);
        const auto here = whatif::predict(local, whatif::measuredScenario(local));
        const auto there = whatif::predict(remoteModel, whatif::measuredScenario(remoteModel));
        QCOMPARE(there.replay.iterationNs, here.replay.iterationNs);
        // Another partition too.
        whatif::Scenario moved = whatif::measuredScenario(local);
        moved.boundaries = std::vector<int>{5, 10, 15};
        QCOMPARE(whatif::predict(remoteModel, moved).replay.iterationNs, whatif::predict(local, moved).replay.iterationNs);

        // A damaged model is refused with the field named.
        json broken = r["model"];
        broken["layers"][0].erase("forward_ns");
        try {
            costModelFromWire(broken);
            QFAIL("accepted");
        } catch (const FormatError& e) {
            QCOMPARE(QString::fromUtf8(e.what()),
                     QString("the server's cost model: 'layers[].forward_ns' is missing; the server and this pipescope may differ in version"));
        }
    }

    // Only the job and the baselines beside it are read; nothing is written.
    void diffReadsOnlyBeside()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        fs::create_directories(dir / "runs");
        fs::copy_file(kJob, dir / "runs" / "after.pipescope");
        fs::copy_file(kJob, dir / "runs" / "before.pipescope");
        fs::copy_file(kJob, dir / "elsewhere.pipescope");
        fs::create_symlink(dir / "elsewhere.pipescope", dir / "runs" / "link.pipescope");
        { std::ofstream(dir / "runs" / "notes.txt") << "not a store\n"; }
        const auto before = listing(dir);

        Server server((dir / "runs" / "after.pipescope").string());
        InProcess s(server);
        Client c = s.client();
        c.hello();
        const json d = c.result(RequestType::Diff, {{"baseline", "before.pipescope"}});
        QCOMPARE(d["a"]["name"].get<std::string>(), std::string("before.pipescope"));
        QCOMPARE(d["b"]["name"].get<std::string>(), std::string("after.pipescope"));
        QCOMPARE(d["schema"].get<std::string>(), std::string("pipescope.diff/1"));
        QCOMPARE(d["iteration"]["a_ns"].get<int64_t>(), int64_t(84877485));
        QCOMPARE(d["iteration"]["delta_ns"].get<int64_t>(), int64_t(0));
        // An absolute path beside it is the same.
        QCOMPARE(c.result(RequestType::Diff, {{"baseline", (dir / "runs" / "before.pipescope").string()}}), d);

        const std::string folder = fs::canonical(dir / "runs").string();
        const std::map<std::string, std::string> refused{
            {"../elsewhere.pipescope", "'../elsewhere.pipescope' does not lie beside the job (in " + folder +
                                           "); this server reads only the job it serves and the baselines in its folder"},
            {(dir / "elsewhere.pipescope").string(), "'" + (dir / "elsewhere.pipescope").string() + "' does not lie beside the job (in " + folder +
                                                         "); this server reads only the job it serves and the baselines in its folder"},
            {"link.pipescope", "'link.pipescope' does not lie beside the job (in " + folder +
                                   "); this server reads only the job it serves and the baselines in its folder"},
            {"/etc/passwd", "'/etc/passwd' does not lie beside the job (in " + folder +
                                "); this server reads only the job it serves and the baselines in its folder"},
            {"missing.pipescope", "'missing.pipescope' is not a file or folder beside the job (No such file or directory)"},
        };
        for (const auto& [name, message] : refused) {
            const Response r = c.call(RequestType::Diff, {{"baseline", name}});
            QVERIFY(!r.ok);
            QCOMPARE(r.errorCode, std::string("refused"));
            QCOMPARE(r.errorMessage, message);
        }
        const Response txt = c.call(RequestType::Diff, {{"baseline", "notes.txt"}});
        QCOMPARE(txt.errorCode, std::string("refused"));
        QVERIFY2(txt.errorMessage.rfind("notes.txt is not a pipescope store or sharded job", 0) == 0, txt.errorMessage.c_str());
        s.finish();
        QCOMPARE(s.result.exitCode, 0);
        QCOMPARE(listing(dir), before); // read-only: no file made, none changed
    }

    // ---- protocol 2: the analysis's summary, steps on demand, compression ----

    // The summary is analyze --json's document without its three big arrays,
    // which it counts; steps gives them back, item for item.
    void summaryOfTheExample()
    {
        Server server(kJob);
        InProcess s(server);
        Client c = s.client();
        c.hello();
        const json full = c.result(RequestType::Analysis);
        const json summary = c.result(RequestType::Analysis, {{"parts", "summary"}});
        QCOMPARE(c.result(RequestType::Analysis, {{"parts", "full"}}), full);

        json expected = full;
        expected.erase("steps");
        expected.erase("bubbles");
        expected["critical_path"].erase("segments");
        expected["summary"] = {{"steps", 64}, {"bubbles", 937}, {"critical_path_segments", 597}};
        QVERIFY2(summary == expected, "the summary is not the document less steps, bubbles and critical_path.segments");
        QCOMPARE(full["steps"].size(), size_t(64));
        QCOMPARE(full["bubbles"].size(), size_t(937));
        QCOMPARE(full["critical_path"]["segments"].size(), size_t(597));
        // What the first frame draws from is all there.
        std::vector<std::string> keys;
        for (const auto& [k, v] : summary.items())
            keys.push_back(k);
        QCOMPARE(keys, (std::vector<std::string>{"all_to_all", "classification", "critical_path", "fillable_bubbles", "hta", "idle", "imbalance",
                                                 "iterations", "layer_source", "layers", "levers", "memory", "microbatches", "options", "pipeline",
                                                 "ranks", "schema", "selected_iteration", "summary", "time_unit", "verdict", "warnings",
                                                 "world_size"}));
        QCOMPARE(summary["pipeline"]["pp"].get<int>(), 4);
        QCOMPARE(summary["pipeline"]["schedule"]["name"].get<std::string>(), std::string("1f1b"));
        QCOMPARE(summary["selected_iteration"].get<int>(), 2);
        QCOMPARE(summary["idle"]["per_rank"].size(), size_t(12));
        QCOMPARE(summary["critical_path"]["by_stage"].size(), size_t(4));
        QCOMPARE(summary["critical_path"]["by_kind"]["p2p"].get<int64_t>(), int64_t(65011645));
        QCOMPARE(summary["levers"], full["levers"]);
        QCOMPARE(summary["verdict"], full["verdict"]);
        const size_t summaryBytes = summary.dump().size(), fullBytes = full.dump().size();
        qInfo("summary %zu bytes, whole document %zu bytes", summaryBytes, fullBytes);
        QVERIFY2(summaryBytes * 4 < fullBytes, std::to_string(summaryBytes).c_str());

        // Every item of every rank over the whole iteration: the document's arrays.
        const json all = c.result(RequestType::Steps);
        QCOMPARE(all["iteration"].get<int>(), 2);
        QCOMPARE(all["steps"], full["steps"]);
        QCOMPARE(all["bubbles"], full["bubbles"]);
        QCOMPARE(all["critical_path"], full["critical_path"]["segments"]);
        QCOMPARE(all["total"], json({{"steps", 64}, {"bubbles", 937}, {"critical_path", 597}}));
        QCOMPARE(all["truncated"].get<bool>(), false);
        json rebuilt = summary;
        rebuilt.erase("summary");
        rebuilt["steps"] = all["steps"];
        rebuilt["bubbles"] = all["bubbles"];
        rebuilt["critical_path"]["segments"] = all["critical_path"];
        QVERIFY2(rebuilt == full, "the summary and steps do not give back the whole document");

        // Another iteration's summary, and its steps.
        const json first = c.result(RequestType::Analysis, {{"iteration", 1}, {"parts", "summary"}});
        QCOMPARE(first["selected_iteration"].get<int>(), 1);
        const json firstSteps = c.result(RequestType::Steps, {{"iteration", 1}, {"parts", {"steps"}}});
        QCOMPARE(firstSteps["iteration"].get<int>(), 1);
        QCOMPARE(int64_t(firstSteps["steps"].size()), first["summary"]["steps"].get<int64_t>());
        QVERIFY(!firstSteps.contains("bubbles"));
        for (const json& x : firstSteps["steps"])
            QCOMPARE(x["iteration"].get<int>(), 1);
    }

    // steps returns what lies in the ranks and the range asked for, no more
    // than the limit of each kind.
    void stepsByRangeBounded()
    {
        Server server(kJob);
        InProcess s(server);
        Client c = s.client();
        c.hello();
        const json full = c.result(RequestType::Analysis);
        const int64_t start = full["critical_path"]["start"].get<int64_t>(), end = full["critical_path"]["end"].get<int64_t>();
        const int64_t from = start + (end - start) / 3, to = start + (end - start) / 2;
        auto inside = [&](const json& x) {
            const int rank = x["rank"].get<int>();
            const int64_t a = x["start"].get<int64_t>(), b = x["end"].get<int64_t>();
            return rank >= 1 && rank <= 2 && a < to && (b > from || (a == b && a >= from));
        };
        const json got = c.result(RequestType::Steps, {{"rank_range", {1, 2}}, {"from_ns", from}, {"to_ns", to}});
        for (const auto& [part, items] : {std::pair{"steps", full["steps"]}, std::pair{"bubbles", full["bubbles"]},
                                          std::pair{"critical_path", full["critical_path"]["segments"]}}) {
            json expected = json::array();
            for (const json& x : items)
                if (inside(x))
                    expected.push_back(x);
            QCOMPARE(got[part], expected);
            QCOMPARE(got["total"][part].get<size_t>(), expected.size());
        }
        qInfo("ranks 1-2, a sixth of the iteration: %zu steps, %zu bubbles, %zu segments", got["steps"].size(), got["bubbles"].size(),
              got["critical_path"].size());
        QCOMPARE(got["steps"].size(), size_t(9));
        QCOMPARE(got["bubbles"].size(), size_t(110));
        QCOMPARE(got["critical_path"].size(), size_t(34));
        QCOMPARE(got["truncated"].get<bool>(), false);
        // A list of ranks is the same as a range of them.
        QCOMPARE(c.result(RequestType::Steps, {{"ranks", {2, 1}}, {"from_ns", from}, {"to_ns", to}}), got);

        // The limit cuts each kind to its first items; the totals still count them all.
        const json cut = c.result(RequestType::Steps, {{"rank_range", {1, 2}}, {"from_ns", from}, {"to_ns", to}, {"limit", 5}});
        QCOMPARE(cut["truncated"].get<bool>(), true);
        QCOMPARE(cut["total"], got["total"]);
        QCOMPARE(cut["steps"].size(), size_t(5));
        QCOMPARE(cut["bubbles"], json(std::vector<json>(got["bubbles"].begin(), got["bubbles"].begin() + 5)));
        // Ranks the job does not have: nothing; an iteration it does not have: not_found.
        const json none = c.result(RequestType::Steps, {{"ranks", {900}}});
        QCOMPARE(none["total"], json({{"steps", 0}, {"bubbles", 0}, {"critical_path", 0}}));
        const Response missing = c.call(RequestType::Steps, {{"iteration", 7}});
        QCOMPARE(missing.errorCode, std::string("not_found"));
        s.finish();
        QCOMPARE(s.result.exitCode, 0);
    }

    // What protocol 2 added is malformed in a session that agreed on 1, and
    // hello's answer there is protocol 1's.
    void protocolOneSession()
    {
        Server server(kJob);
        InProcess s(server);
        Client c = s.client();
        Client::HelloOptions ho;
        ho.versions = {1};
        const json h = c.hello(ho);
        QCOMPARE(h["protocol"].get<int>(), 1);
        QVERIFY(!h.contains("compression"));
        QVERIFY(!h["limits"]["response_bytes"].contains("steps"));
        QVERIFY(!c.compressing());
        QVERIFY(c.result(RequestType::Analysis).contains("steps"));
        try {
            c.call(RequestType::Steps);
            QFAIL("accepted");
        } catch (const ServerRefused& e) {
            QCOMPARE(e.code(), std::string("malformed"));
        }
        s.finish();
        QCOMPARE(s.result.exitCode, kExitProtocol);
        QCOMPARE(s.result.error, std::string("malformed message: a steps request in a protocol 1 session (it needs protocol 2); the session is closed"));
    }

    void inflateIsBounded()
    {
        const std::string json1k(1000, ' ');
        QCOMPARE(inflateBounded(deflateBytes(json1k), 1000), json1k);
        try {
            inflateBounded(deflateBytes(json1k), 999);
            QFAIL("accepted");
        } catch (const ProtocolError& e) {
            QCOMPARE(QString::fromUtf8(e.what()), QString("a compressed message of %1 bytes that inflates past the limit of 999 bytes (inflating stopped there)")
                                                      .arg(deflateBytes(json1k).size()));
        }
        const std::string z = deflateBytes("{\"id\":1}");
        for (const auto& [bytes, message] : std::vector<std::pair<std::string, std::string>>{
                 {z.substr(0, z.size() - 3), "a compressed message whose zlib stream is cut short"},
                 {z + "xy", "a compressed message with 2 bytes after its zlib stream"},
                 {"not zlib at all", "a compressed message that is not a zlib stream (incorrect header check)"}}) {
            try {
                inflateBounded(bytes, 1000);
                QFAIL("accepted");
            } catch (const ProtocolError& e) {
                QCOMPARE(std::string(e.what()), message);
            }
        }
    }

    // Compressed both ways: the same answers as without, a fraction of the bytes.
    void compressedRoundTrip()
    {
        Server server(kJob);
        json plainDoc, plainTiles;
        int64_t plainBytes = 0;
        const auto& m = server.timelineModel();
        const json tilesRequest{{"from_ns", m.start}, {"to_ns", m.end}, {"width_px", 1000}};
        {
            InProcess s(server);
            Client c = s.client();
            Client::HelloOptions ho;
            ho.compress = false;
            QVERIFY(c.hello(ho)["compression"].is_null());
            plainDoc = c.result(RequestType::Analysis);
            plainTiles = c.result(RequestType::Tiles, tilesRequest);
            plainBytes = c.bytesReceived();
            // Uncompressed, the wire has the JSON and two headers.
            QVERIFY(c.bytesReceived() - c.payloadBytesReceived() <= 2 * int64_t(kMaxHeaderBytes));
        }
        server.resetSession();
        InProcess s(server);
        Client c = s.client();
        c.hello();
        QVERIFY(c.compressing());
        c.compressRequests(true);
        QCOMPARE(c.result(RequestType::Analysis), plainDoc);
        QCOMPARE(c.result(RequestType::Tiles, tilesRequest), plainTiles);
        qInfo("compressed %lld bytes on the wire for %lld of JSON (uncompressed: %lld)", (long long)c.bytesReceived(),
              (long long)c.payloadBytesReceived(), (long long)plainBytes);
        QVERIFY2(c.bytesReceived() * 5 < plainBytes, std::to_string(c.bytesReceived()).c_str());
        s.finish();
        QCOMPARE(s.result.exitCode, 0);
        QCOMPARE(s.result.bytesOut, c.bytesReceived());
        QCOMPARE(s.result.payloadBytesOut, c.payloadBytesReceived());

        // On the wire: hello's answer as it is, then "PSR1 <len> z" for what is worth compressing.
        Server again(kJob);
        InProcess raw(again);
        raw.writeRaw(request({{"id", 1}, {"type", "hello"}, {"versions", {1, 2}}, {"compression", {"gzip", "deflate"}}}) +
                     frameDeflated(json({{"id", 2}, {"type", "analysis"}, {"parts", "summary"}}).dump()) +
                     request({{"id", 3}, {"type", "details"}, {"lane", 0}, {"event", 0}}));
        const std::string bytes = raw.finish();
        QCOMPARE(raw.result.exitCode, 0);
        const size_t h1 = bytes.find('\n');
        QVERIFY(bytes.rfind("PSR1 ", 0) == 0 && bytes.substr(h1 - 2, 2) != " z");
        const size_t len1 = std::stoul(bytes.substr(5, h1 - 5));
        const size_t h2 = bytes.find('\n', h1 + 1 + len1);
        const std::string header2 = bytes.substr(h1 + 1 + len1, h2 - h1 - len1);
        QVERIFY2(header2.size() > 7 && header2.substr(header2.size() - 3) == " z\n", header2.c_str());
        FrameReader reader(kMaxResponseBytes);
        reader.allowCompressed(true);
        reader.feed(bytes.data(), bytes.size());
        std::vector<Response> out;
        std::vector<bool> compressed;
        while (auto p = reader.next()) {
            out.push_back(parseResponse(*p));
            compressed.push_back(reader.lastCompressed());
        }
        QCOMPARE(out.size(), size_t(3));
        QCOMPARE(out[0].result["compression"].get<std::string>(), std::string("deflate"));
        QCOMPARE(out[1].result["summary"]["bubbles"].get<int>(), 937);
        // The details answer is under 1 KiB: sent as it is.
        QCOMPARE(compressed, (std::vector<bool>{false, true, out[2].result.dump().size() >= kCompressAbove}));
    }

    // A compressed request that inflates past 64 KiB closes the session, and
    // the server stops inflating at the limit.
    void decompressionBombClosesTheSession_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("line");
        const std::string hello = request({{"id", 1}, {"type", "hello"}, {"versions", {2}}, {"compression", {"deflate"}}});
        // 32 MiB of spaces, 32 KB deflated (within the 64 KiB a compressed
        // request may have); a little over the limit, a few hundred bytes.
        std::string big = "{\"id\":2,\"type\":\"index\",\"x\":\"" + std::string(size_t(32) << 20, ' ');
        const std::string bomb = deflateBytes(big, 9);
        big.clear();
        big.shrink_to_fit();
        const std::string small = deflateBytes(std::string(70'000, ' '), 9);
        QTest::newRow("32 MiB") << QByteArray::fromStdString(hello + "PSR1 " + std::to_string(bomb.size()) + " z\n" + bomb)
                                    << QString("malformed message: a compressed message of %1 bytes that inflates past the limit of 65536 bytes "
                                               "(inflating stopped there); the session is closed").arg(bomb.size());
        QTest::newRow("just over") << QByteArray::fromStdString(hello + "PSR1 " + std::to_string(small.size()) + " z\n" + small)
                                   << QString("malformed message: a compressed message of %1 bytes that inflates past the limit of 65536 bytes "
                                              "(inflating stopped there); the session is closed").arg(small.size());
        QTest::newRow("not zlib") << QByteArray::fromStdString(hello + "PSR1 10 z\n{\"id\":2,..}")
                                  << "malformed message: a compressed message that is not a zlib stream (incorrect header check); the session is closed";
        const std::string noDeflate = request({{"id", 1}, {"type", "hello"}, {"versions", {2}}});
        QTest::newRow("not agreed") << QByteArray::fromStdString(noDeflate + frameDeflated(R"({"id":2,"type":"index"})"))
                                    << "malformed message: a compressed message ('PSR1 <length> z') in a session that did not agree on compression in "
                                       "hello; the session is closed";
        QTest::newRow("too long") << QByteArray::fromStdString(hello + "PSR1 9999999 z\n")
                                  << QString("malformed message: a compressed message of 9999999 bytes, over the limit of %1 bytes; the session is closed")
                                         .arg(deflatedBound(kMaxRequestBytes));
    }
    void decompressionBombClosesTheSession()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, line);
        Server server(kJob);
        InProcess s(server);
        s.writeRaw(bytes.toStdString());
        const std::string out = s.finish();
        QCOMPARE(s.result.exitCode, kExitProtocol);
        QCOMPARE(QString::fromStdString(s.result.error), line);
        FrameReader reader(kMaxResponseBytes);
        reader.allowCompressed(true);
        reader.feed(out.data(), out.size());
        std::vector<Response> got;
        while (auto p = reader.next())
            got.push_back(parseResponse(*p));
        QCOMPARE(got.size(), size_t(2)); // hello answered, then the last word
        QVERIFY(got[0].ok);
        QCOMPARE(got[1].id, int64_t(-1));
        QCOMPARE(got[1].errorCode, std::string("malformed"));
    }

    // The client is bounded the same way: a server's answer that inflates
    // past 32 MiB is refused without inflating the rest.
    void clientRefusesABomb()
    {
        int toClient[2];
        QVERIFY(::pipe(toClient) == 0);
        std::string big(kMaxResponseBytes + 10, ' ');
        big[0] = '{';
        const std::string framed = frameDeflated(big, 9);
        big = {};
        std::thread writer([&] {
            (void)!::write(toClient[1], framed.data(), framed.size());
            ::close(toClient[1]);
        });
        FrameReader reader(kMaxResponseBytes);
        reader.allowCompressed(true);
        std::string got;
        char buf[65536];
        try {
            for (ssize_t n; (n = ::read(toClient[0], buf, sizeof buf)) > 0;) {
                reader.feed(buf, size_t(n));
                if (reader.next())
                    QFAIL("inflated");
            }
            QFAIL("accepted");
        } catch (const ProtocolError& e) {
            QVERIFY2(std::string(e.what()).find("inflates past the limit of 33554432 bytes") != std::string::npos, e.what());
        }
        writer.join();
        ::close(toClient[0]);
    }

    // A malformed message ends the session: one line, the client told why, exit 3.
    void malformedClosesTheSession_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<int>("answered"); // responses before the last word
        QTest::addColumn<QString>("line");
        const std::string hello = request({{"id", 1}, {"type", "hello"}, {"versions", {1}}});
        QTest::newRow("garbage") << QByteArray("GET / HTTP/1.1\r\n") << 0
                                 << "malformed message: not a pipescope remote message (it starts with 'GET / HTTP/1.1\\x0d\\x0a', expected 'PSR1 <length>'); the session is closed";
        QTest::newRow("oversized") << QByteArray::fromStdString(hello + "PSR1 65537\n") << 1
                                   << "malformed message: a message of 65537 bytes, over the limit of 65536 bytes; the session is closed";
        QTest::newRow("before hello") << QByteArray::fromStdString(request({{"id", 1}, {"type", "index"}})) << 0
                                      << "malformed message: a index request before hello (hello comes first); the session is closed";
        QTest::newRow("cut off") << QByteArray::fromStdString(hello + "PSR1 40\n{\"id\":2") << 1
                                 << "malformed message: the input ended inside a message; the session is closed";
        QTest::newRow("bad field") << QByteArray::fromStdString(hello + request({{"id", 2}, {"type", "details"}, {"lane", -1}, {"event", 0}})) << 1
                                   << "malformed message: 'lane' of a details request is -1, outside 0..2147483647; the session is closed";
        QTest::newRow("second hello") << QByteArray::fromStdString(hello + hello) << 1
                                      << "malformed message: a second hello in one session; the session is closed";
    }
    void malformedClosesTheSession()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(int, answered);
        QFETCH(QString, line);
        Server server(kJob);
        InProcess s(server);
        s.writeRaw(bytes.toStdString());
        const std::vector<Response> out = responsesIn(s.finish());
        QCOMPARE(s.result.exitCode, kExitProtocol);
        QCOMPARE(QString::fromStdString(s.result.error), line);
        QCOMPARE(int(out.size()), answered + 1);
        for (int i = 0; i < answered; ++i)
            QVERIFY(out[size_t(i)].ok);
        QCOMPARE(out.back().id, int64_t(-1));
        QCOMPARE(out.back().errorCode, std::string("malformed"));
    }

    void versionWithoutCommonGround()
    {
        Server server(kJob);
        InProcess s(server);
        s.writeRaw(request({{"id", 1}, {"type", "hello"}, {"versions", {7, 8}}}));
        const auto out = responsesIn(s.finish());
        QCOMPARE(out.size(), size_t(1));
        QCOMPARE(out[0].errorCode, std::string("version"));
        QCOMPARE(s.result.exitCode, kExitProtocol);
        QCOMPARE(s.result.error, std::string("the client speaks no protocol version this server speaks (1 to 2); the session is closed"));
    }

    // ---- the real command ---------------------------------------------------

    void listenRefusesOtherAddresses_data()
    {
        QTest::addColumn<QString>("address");
        QTest::addColumn<QString>("reason");
        QTest::newRow("any") << "0.0.0.0:7000" << "is not a loopback address";
        QTest::newRow("lan") << "192.168.1.5:7000" << "is not a loopback address";
        QTest::newRow("v6 any") << "[::]:7000" << "is not a loopback address";
        QTest::newRow("name") << "example.com:7000" << "is not a loopback address";
        QTest::newRow("no port") << "127.0.0.1" << "is not HOST:PORT";
        QTest::newRow("port") << "127.0.0.1:70000" << "has no port from 0 to 65535";
    }
    void listenRefusesOtherAddresses()
    {
        QFETCH(QString, address);
        QFETCH(QString, reason);
        QProcess p;
        p.start(PIPESCOPE_CLI, {"serve", QString::fromStdString(kJob), "--listen", address});
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 1);
        QCOMPARE(QString::fromUtf8(p.readAllStandardError()),
                 "pipescope serve: error: --listen: '" + address + "' " + reason +
                     "; serve listens only on the loopback interface (127.0.0.1:PORT, [::1]:PORT or localhost:PORT): reach it "
                     "from elsewhere through an SSH tunnel (ssh -L)\n");
        QCOMPARE(p.readAllStandardOutput(), QByteArray());
    }

    void notAJob()
    {
        QProcess p;
        p.start(PIPESCOPE_CLI, {"serve", "/nonexistent/job.pipescope"});
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 1);
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QVERIFY2(err.startsWith("pipescope serve: error: ") && err.count('\n') == 1, qPrintable(err));
        QCOMPARE(p.readAllStandardOutput(), QByteArray());
    }

    // The real binary behind a link of 50 ms each way: the first frame.
    void firstFrameThroughSlowLink()
    {
        QTemporaryDir tmp;
        const std::string errPath = tmp.filePath("stderr").toStdString();
        auto child = spawnChild({PIPESCOPE_CLI, "serve", "--stdio", kJob}, errPath);
        SlowLink::Options slow;
        slow.latency = std::chrono::milliseconds(50);
        slow.bytesPerSecond = 20e6;
        SlowLink::Ends ends = SlowLink::between(child->toChild, child->fromChild, slow);
        child->toChild = child->fromChild = -1; // the link owns them now
        Client c(ends.clientRead, ends.clientWrite);
        const auto t0 = std::chrono::steady_clock::now();
        const json h = c.hello();
        const json ix = c.result(RequestType::Index);
        const json a = c.result(RequestType::Analysis, {{"parts", "summary"}});
        const json t = c.result(RequestType::Tiles, {{"from_ns", ix["timeline"]["start_ns"]}, {"to_ns", ix["timeline"]["end_ns"]}, {"width_px", 1000}});
        QVERIFY(c.compressing());
        QCOMPARE(a["summary"]["steps"].get<int>(), 64);
        // Compressed, the first frame moves a fraction of its JSON.
        QVERIFY2(c.bytesReceived() * 2 < c.payloadBytesReceived(), std::to_string(c.bytesReceived()).c_str());
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        QCOMPARE(h["job"]["ranks"].get<int>(), 4);
        QCOMPARE(t["lanes"].size(), ix["timeline"]["lanes"].size());
        QCOMPARE(c.roundTrips(), int64_t(4));
        // Four round trips of 100 ms at the least.
        QVERIFY2(seconds >= 0.4, std::to_string(seconds).c_str());
        QVERIFY2(seconds < 5.0, std::to_string(seconds).c_str());
        qInfo("first frame through 50 ms each way, 20 MB/s: %.3f s, %lld round trips, %lld bytes sent, %lld bytes received (%lld inflated)",
              seconds, (long long)c.roundTrips(), (long long)c.bytesSent(), (long long)c.bytesReceived(), (long long)c.payloadBytesReceived());
        // A pan: the next iteration's worth of tiles.
        const auto t1 = std::chrono::steady_clock::now();
        const int64_t before = c.bytesReceived();
        c.result(RequestType::Tiles, {{"from_ns", ix["iterations"][1]["start_ns"]}, {"to_ns", ix["iterations"][1]["end_ns"]}, {"width_px", 1000}});
        const double pan = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
        qInfo("pan: %.3f s, %lld bytes", pan, (long long)(c.bytesReceived() - before));
        QVERIFY(pan >= 0.1);
        ::close(ends.clientWrite);
        std::string rest;
        char buf[256];
        for (ssize_t n; (n = ::read(ends.clientRead, buf, sizeof buf)) > 0;)
            rest.append(buf, size_t(n));
        ::close(ends.clientRead);
        QCOMPARE(rest, std::string());
        QCOMPARE(child->wait(), 0);
        ends.link->stop();
        std::ifstream err(errPath);
        QCOMPARE(std::string(std::istreambuf_iterator<char>(err), {}), std::string());
    }

    // A malformed message to the real binary: one line on stderr, exit 3.
    void realServerMalformed()
    {
        QProcess p;
        p.start(PIPESCOPE_CLI, {"serve", "--stdio", QString::fromStdString(kJob)});
        QVERIFY(p.waitForStarted());
        p.write(QByteArray::fromStdString(request({{"id", 1}, {"type", "hello"}, {"versions", {1}}})));
        p.write("PSR1 99999999\n");
        p.closeWriteChannel();
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), kExitProtocol);
        QCOMPARE(QString::fromUtf8(p.readAllStandardError()),
                 QString("pipescope serve: error: malformed message: a message of 99999999 bytes, over the limit of 65536 bytes; the session "
                         "is closed\n"));
        const auto out = responsesIn(p.readAllStandardOutput().toStdString());
        QCOMPARE(out.size(), size_t(2));
        QVERIFY(out[0].ok);
        QCOMPARE(out[1].errorCode, std::string("malformed"));
    }
};

QTEST_GUILESS_MAIN(TestServe)
#include "tst_serve.moc"
