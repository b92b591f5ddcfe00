// The desktop app on a remote job (issue 38, docs/remote.md "The app"):
// ssh://host/path opened through a stand-in for ssh that runs the locally
// built `pipescope serve --stdio` on the bundled example, so the whole path
// (ssh's command line, the protocol, the Job built from the server's
// answers) runs without a network. The remote job must give what the local
// one gives: the same ranks, iterations, steps, bubbles, critical path and
// what-if predictions; a failing ssh, a refusing server and a link that
// drops each give one line; --screenshot of a remote job works offscreen.
#include "LocalSshd.h"
#include "MainWindow.h"
#include "panels/DetailsPanel.h"
#include "views/TimelineView.h"
#include "remote/AnalysisFromJson.h"
#include "remote/OpenRemoteDialog.h"
#include "remote/RemoteAddress.h"
#include "remote/RemoteJob.h"
#include "remote/RemoteLink.h"
#include "remote/RemoteTiles.h"
#include "session/AppSession.h"
#include "session/ExportWorker.h"
#include "session/RecentJobs.h"
#include "analysis/AnalysisJson.h"
#include "whatif/Levers.h"
#include "whatif/WhatIf.h"

#include <QFile>
#include <QImage>
#include <QLineEdit>
#include <QProcess>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <QScopeGuard>

#include <csignal>
#include <pwd.h>

using namespace pipescope;
using namespace pipescope::gui;

namespace {

const QString kJob = QStringLiteral(PIPESCOPE_SOURCE_DIR "/resources/examples/pipeline-1f1b-4stage.pipescope");
const QString kRemote = QStringLiteral("ssh://localhost") + kJob;

// ssh's stand-in: it notes its arguments and its pid, answers for the hosts
// below as ssh does, and runs the remote command here (exec keeps the pid:
// the server is the process whose pid it wrote).
const char* kFakeSsh = R"(#!/bin/sh
[ -n "$FAKE_SSH_ARGS" ] && printf '%s\n' "$@" > "$FAKE_SSH_ARGS"
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
host=$1
shift
case "$host" in
nosuchhost) echo "ssh: Could not resolve hostname nosuchhost: Name or service not known" >&2; exit 255 ;;
deniedhost) echo "Warning: Permanently added 'deniedhost' (ED25519) to the list of known hosts." >&2
            echo "me@deniedhost: Permission denied (publickey)." >&2; exit 255 ;;
slowhost) exec sleep 60 ;;
esac
[ -n "$FAKE_SSH_PIDFILE" ] && echo $$ > "$FAKE_SSH_PIDFILE"
exec /bin/sh -c "exec $*"
)";

// Steps, bubbles and segments of the analysed iteration: what the server
// analyses (the app's own analysis has every iteration's).
template <class T>
std::vector<T> ofIteration(const std::vector<T>& all, int iteration)
{
    std::vector<T> out;
    for (const T& x : all)
        if (x.iteration == iteration)
            out.push_back(x);
    return out;
}

bool sameStep(const Step& a, const Step& b)
{
    return a.iteration == b.iteration && a.rank == b.rank && a.stage == b.stage && a.chunk == b.chunk && a.microbatch == b.microbatch &&
           a.kind == b.kind && a.start == b.start && a.end == b.end && a.computeNs == b.computeNs && a.annotated == b.annotated;
}

} // namespace

class TestRemoteApp : public QObject {
    Q_OBJECT

private:
    QTemporaryDir dir_;
    QString pidFile_, argsFile_;

    QString serverPid() const
    {
        QFile f(pidFile_);
        return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()).trimmed() : QString();
    }

private Q_SLOTS:
    void initTestCase()
    {
        std::signal(SIGPIPE, SIG_IGN);
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(dir_.isValid());
        qputenv("PIPESCOPE_CACHE_DIR", dir_.filePath(QStringLiteral("cache")).toUtf8());
        const QString ssh = dir_.filePath(QStringLiteral("fake-ssh"));
        QFile f(ssh);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(kFakeSsh);
        f.close();
        QVERIFY(f.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner));
        pidFile_ = dir_.filePath(QStringLiteral("server.pid"));
        argsFile_ = dir_.filePath(QStringLiteral("ssh.args"));
        qputenv("PIPESCOPE_SSH", ssh.toUtf8());
        qputenv("PIPESCOPE_REMOTE_COMMAND", PIPESCOPE_CLI);
        qputenv("FAKE_SSH_PIDFILE", pidFile_.toUtf8());
        qputenv("FAKE_SSH_ARGS", argsFile_.toUtf8());
    }

    void addresses_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("user");
        QTest::addColumn<QString>("host");
        QTest::addColumn<int>("port");
        QTest::addColumn<QString>("path");
        QTest::addColumn<QStringList>("ssh");
        const QString fake = qEnvironmentVariable("PIPESCOPE_SSH"), cli = QStringLiteral("'" PIPESCOPE_CLI "'");
        const QStringList opts{fake, "-o", "BatchMode=yes", "-o", "ConnectTimeout=20"};
        QTest::newRow("host and path") << "ssh://login.cluster/lustre/run 1/it's" << "" << "login.cluster" << -1 << "/lustre/run 1/it's"
                                       << (opts + QStringList{"--", "login.cluster", cli + " serve --stdio '/lustre/run 1/it'\\''s'"});
        QTest::newRow("user and port") << "ssh://me@login:2222/j.pipescope" << "me" << "login" << 2222 << "/j.pipescope"
                                       << (opts + QStringList{"-p", "2222", "-l", "me", "--", "login", cli + " serve --stdio '/j.pipescope'"});
        QTest::newRow("home") << "ssh://login/~/runs/job" << "" << "login" << -1 << "~/runs/job"
                              << (opts + QStringList{"--", "login", cli + " serve --stdio ~/'runs/job'"});
        QTest::newRow("ipv6") << "ssh://[::1]:22/job" << "" << "[::1]" << 22 << "/job"
                              << (opts + QStringList{"-p", "22", "--", "::1", cli + " serve --stdio '/job'"});
    }
    void addresses()
    {
        QFETCH(QString, text);
        QFETCH(QString, user);
        QFETCH(QString, host);
        QFETCH(int, port);
        QFETCH(QString, path);
        QFETCH(QStringList, ssh);
        QString error;
        const auto a = RemoteAddress::parse(text, &error);
        QVERIFY2(a, qPrintable(error));
        QCOMPARE(a->user, user);
        QCOMPARE(a->host, host);
        QCOMPARE(a->port, port);
        QCOMPARE(a->path, path);
        QCOMPARE(a->sshCommand(), ssh);
        QCOMPARE(RemoteAddress::parse(a->toString(), nullptr)->toString(), a->toString());
    }

    // Nothing in an address reaches ssh as an option or the remote shell unquoted.
    void badAddresses_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("error");
        const QString tail = QStringLiteral("; write ssh://[user@]host[:port]/path/to/job");
        QTest::newRow("no path") << "ssh://login" << "ssh://login: no path to the job after the host" + tail;
        QTest::newRow("option as host") << "ssh://-oProxyCommand=x/job"
                                        << "ssh://-oProxyCommand=x/job: the host '-oProxyCommand=x' is not a host name (letters, digits and .-_ only)" + tail;
        QTest::newRow("shell in user") << "ssh://a;b@login/job" << "ssh://a;b@login/job: the user name 'a;b' is not one (letters, digits and .-_ only)" + tail;
        QTest::newRow("port") << "ssh://login:99999/job" << "ssh://login:99999/job: the port '99999' is not a number from 1 to 65535" + tail;
        QTest::newRow("not ssh") << "http://login/job" << "http://login/job: not an ssh:// address" + tail;
    }
    void badAddresses()
    {
        QFETCH(QString, text);
        QFETCH(QString, error);
        QString why;
        QVERIFY(!RemoteAddress::parse(text, &why));
        QCOMPARE(why, error);
    }

    // The remote job gives what the local one gives.
    void sameAsLocal()
    {
        const auto local = AppSession::load({kJob}, {});
        QFile::remove(argsFile_);
        const auto remote = AppSession::load({kRemote}, {});
        // ssh ran in batch mode: no password prompt, a missing key fails at once.
        QFile args(argsFile_);
        QVERIFY(args.open(QIODevice::ReadOnly));
        QCOMPARE(QString::fromUtf8(args.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts),
                 (QStringList{"-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "--", "localhost",
                              QStringLiteral("'" PIPESCOPE_CLI "' serve --stdio '") + kJob + "'"}));

        QVERIFY(remote->isRemote());
        QVERIFY(!local->isRemote());
        QCOMPARE(remote->title, QStringLiteral("localhost:") + kJob);
        QCOMPARE(remote->inputs, QStringList{kRemote});
        const AnalysisResult& a = *local->analysis;
        const AnalysisResult& b = *remote->analysis;
        QVERIFY(b.ranks == a.ranks);
        QVERIFY(b.ranks == (std::vector<int>{0, 1, 2, 3}));
        QCOMPARE(b.selectedIteration, a.selectedIteration);
        QCOMPARE(b.selectedIteration, 2);
        QCOMPARE(b.iterations.size(), a.iterations.size());
        for (size_t i = 0; i < a.iterations.size(); ++i) {
            QCOMPARE(b.iterations[i].start, a.iterations[i].start);
            QCOMPARE(b.iterations[i].end, a.iterations[i].end);
        }
        const Iteration& it = b.iterations[2];
        QCOMPARE(it.end - it.start, TimeNs(84'877'485)); // the iteration time the Summary says: 84.877 ms
        QCOMPARE(b.pipeline.pp, 4);
        QCOMPARE(b.pipeline.microbatches, a.pipeline.microbatches);
        QVERIFY(b.pipeline.schedule == a.pipeline.schedule);
        // Every iteration's steps and bubbles (the server analyses each on
        // request for a job this small), and the critical path of the analysed one, item for item.
        QCOMPARE(ofIteration(b.steps, 2).size(), size_t(64));
        QCOMPARE(b.steps.size(), size_t(3 * 64));
        QCOMPARE(b.steps.size(), a.steps.size());
        for (size_t i = 0; i < b.steps.size(); ++i)
            QVERIFY2(sameStep(b.steps[i], a.steps[i]), qPrintable(QString::number(i)));
        // (The document lists bubbles rank by rank; the app's own analysis, iteration by iteration.)
        auto byRank = [](std::vector<Bubble> v) {
            std::stable_sort(v.begin(), v.end(), [](const Bubble& x, const Bubble& y) { return std::tie(x.iteration, x.rank, x.start) < std::tie(y.iteration, y.rank, y.start); });
            return v;
        };
        const std::vector<Bubble> ab = byRank(a.bubbles), bb = byRank(b.bubbles);
        QCOMPARE(bb.size(), ab.size());
        for (size_t i = 0; i < bb.size(); ++i)
            QVERIFY2(bb[i].start == ab[i].start && bb[i].end == ab[i].end && bb[i].cause == ab[i].cause && bb[i].rank == ab[i].rank,
                     qPrintable(QString::number(i)));
        QCOMPARE(b.criticalPath.segments.size(), a.criticalPath.segments.size());
        QVERIFY(b.criticalPath.byKind == a.criticalPath.byKind);
        QCOMPARE(b.idle.size(), a.idle.size());
        for (size_t i = 0; i < a.idle.size(); ++i)
            QVERIFY(b.idle[i].byCause == a.idle[i].byCause);
        QCOMPARE(b.imbalance.bottleneckStage, a.imbalance.bottleneckStage);
        QCOMPARE(b.layers.layers.size(), a.layers.layers.size());

        // The what-if: the server's cost model predicts here what the local one does.
        QVERIFY(local->costModel);
        QVERIFY2(remote->costModel, qPrintable(remote->whatIfError));
        for (const auto& [schedule, m] : {std::pair{ScheduleKind::OneFOneB, 8}, std::pair{ScheduleKind::GPipe, 8}, std::pair{ScheduleKind::OneFOneB, 16}}) {
            whatif::Scenario s = whatif::measuredScenario(*local->costModel);
            s.schedule = schedule;
            s.microbatches = m;
            const TimeNs here = whatif::predict(*local->costModel, s).iterationNs();
            QCOMPARE(whatif::predict(*remote->costModel, s).iterationNs(), here);
        }
        QCOMPARE(whatif::leversToJson(remote->levers).dump(), whatif::leversToJson(local->levers).dump());

        // The timeline: the same lanes (memory tracks aside), steps and bubbles event for event.
        const auto& lt = *local->timeline;
        const auto& rt = *remote->timeline;
        QCOMPARE(rt.lanes.size(), lt.lanes.size());
        for (size_t i = 0; i < lt.lanes.size(); ++i) {
            QVERIFY(rt.lanes[i].kind == lt.lanes[i].kind);
            QCOMPARE(rt.lanes[i].rank, lt.lanes[i].rank);
            QCOMPARE(rt.lanes[i].label, lt.lanes[i].label);
            if (lt.lanes[i].kind == timeline::LaneKind::Steps || lt.lanes[i].kind == timeline::LaneKind::Bubbles) {
                QCOMPARE(rt.lanes[i].events.size(), lt.lanes[i].events.size());
                for (size_t e = 0; e < lt.lanes[i].events.size(); ++e) {
                    QCOMPARE(rt.lanes[i].events[e].start, lt.lanes[i].events[e].start);
                    QCOMPARE(rt.name(rt.lanes[i].events[e].name), lt.name(lt.lanes[i].events[e].name));
                }
            }
        }
        // Every kernel of the analysed iteration at least 1/50,000 of it long is there, exact.
        QCOMPARE(rt.iterations.size(), lt.iterations.size());

        // What moved: 13 round trips (hello, index, the analysis's summary,
        // the steps of each of the 3 iterations, seven of tiles, the cost
        // model), and well under the bytes of the job's JSON.
        const RemoteLink::Stats s = remote->remote->stats();
        QCOMPARE(s.roundTrips, int64_t(13));
        QVERIFY(s.compressing);
        QVERIFY2(s.bytesReceived < s.payloadBytesReceived / 3, qPrintable(QString::number(s.bytesReceived)));
        qInfo("remote open of the example: %.3f s, %lld bytes on the wire (%lld of JSON), %lld round trips",
              remote->remote->openSeconds(), static_cast<long long>(s.bytesSent + s.bytesReceived),
              static_cast<long long>(s.payloadBytesReceived), static_cast<long long>(s.roundTrips));
    }

    // The analysis document read back is the one the server sent.
    void analysisReadsBack()
    {
        const auto local = AppSession::load({kJob}, {});
        AnalyzeOptions o;
        const nlohmann::json doc = toJson(*local->analysis, o);
        const AnalysisResult back = analysisFromJson(doc);
        QCOMPARE(toJson(back, o).dump(), doc.dump());
        QVERIFY_THROWS_EXCEPTION(FormatError, analysisFromJson(nlohmann::json{{"schema", "pipescope.analysis/1"}}));
        nlohmann::json broken = doc;
        broken["steps"][0].erase("kind");
        QVERIFY_THROWS_EXCEPTION(FormatError, analysisFromJson(broken));
        // Numbers the views index with, out of range: refused in one line, never shown.
        auto refusal = [](const nlohmann::json& d) {
            try {
                analysisFromJson(d);
            } catch (const FormatError& e) {
                return QString::fromStdString(e.what());
            }
            return QString();
        };
        broken = doc;
        broken["steps"][0]["stage"] = 70000;
        QCOMPARE(refusal(broken), QStringLiteral("the server's analysis: a step of stage 70000, chunk 0, microbatch 0; the session is closed"));
        broken = doc;
        broken["selected_iteration"] = 3;
        QCOMPARE(refusal(broken), QStringLiteral("the server's analysis: the analysed iteration 3 of 3; the session is closed"));
        broken = doc;
        broken["bubbles"][5]["iteration"] = -1;
        QCOMPARE(refusal(broken), QStringLiteral("the server's analysis: iteration -1 of 3; the session is closed"));
        broken = doc;
        broken["pipeline"]["chunks"] = 0;
        QCOMPARE(refusal(broken), QStringLiteral("the server's analysis: a pipeline of pp 4, dp 1, 0 chunks and 8 microbatches; the session is closed"));
    }

    // Through the issue's link, 50 ms each way and 20 MB/s: the same job, each round trip at least the latency.
    void throughSlowLink()
    {
        remote::SlowLink::Options slow;
        slow.latency = std::chrono::milliseconds(50);
        slow.bytesPerSecond = 20e6;
        auto link = RemoteLink::connect(*RemoteAddress::parse(kRemote, nullptr), nullptr, &slow);
        const auto remote = loadRemote(link, {});
        const auto local = AppSession::load({kJob}, {});
        QCOMPARE(remote->analysis->steps.size(), size_t(3 * 64));
        QCOMPARE(whatif::predict(*remote->costModel, whatif::measuredScenario(*remote->costModel)).iterationNs(),
                 whatif::predict(*local->costModel, whatif::measuredScenario(*local->costModel)).iterationNs());
        const RemoteLink::Stats s = link->stats();
        QCOMPARE(s.roundTrips, int64_t(13));
        QVERIFY2(s.bestSeconds >= 0.100, qPrintable(QString::number(s.bestSeconds)));
        QVERIFY(link->describe().startsWith(QStringLiteral("ssh localhost: ")));
        // Pipelined: three requests in flight, their answers read in another
        // order than sent; one refused, and the session goes on.
        {
            const auto t0 = std::chrono::steady_clock::now();
            auto pipe = link->pipeline();
            const int64_t index = pipe.send(remote::RequestType::Index);
            const int64_t search = pipe.send(remote::RequestType::Search, {{"pattern", "SendRecv"}, {"limit", 3}});
            const int64_t missing = pipe.send(remote::RequestType::Details, {{"lane", 9999}, {"event", 0}});
            QCOMPARE(pipe.result(search).at("hits").size(), size_t(3));
            QVERIFY_THROWS_EXCEPTION(remote::ServerRefused, pipe.result(missing));
            QCOMPARE(pipe.result(index).at("timeline").at("lanes").size(), remote->timeline->lanes.size());
            // One round trip's latency for the three (about 100 ms), not three: printed, not asserted.
            qInfo("three pipelined requests through the link: %.3f s",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        QCOMPARE(link->stats().roundTrips, int64_t(16));
        QCOMPARE(link->result(remote::RequestType::Index).at("ranks").size(), size_t(4));
        qInfo("through 50 ms each way and 20 MB/s: open %.3f s, best round trip %.3f s, %lld bytes", link->openSeconds(),
              s.bestSeconds, static_cast<long long>(s.bytesSent + s.bytesReceived));
    }

    // ssh's own words, the server's, in one line; never a hang.
    void failures_data()
    {
        QTest::addColumn<QString>("address");
        QTest::addColumn<QString>("error");
        QTest::newRow("unknown host") << "ssh://nosuchhost/job"
                                      << "ssh://nosuchhost/job: ssh: Could not resolve hostname nosuchhost: Name or service not known";
        QTest::newRow("key refused") << "ssh://deniedhost/job" << "ssh://deniedhost/job: me@deniedhost: Permission denied (publickey).";
        const QString missing = dir_.filePath(QStringLiteral("nothere.pipescope"));
        QTest::newRow("not a job") << "ssh://localhost" + missing
                                   << "ssh://localhost" + missing + ": pipescope serve: error: " + missing + ": no such file";
        QTest::newRow("bad address") << "ssh://-x/job"
                                     << "ssh://-x/job: the host '-x' is not a host name (letters, digits and .-_ only); write ssh://[user@]host[:port]/path/to/job";
    }
    void failures()
    {
        QFETCH(QString, address);
        QFETCH(QString, error);
        QString what;
        try {
            AppSession::load({address}, {});
        } catch (const Error& e) {
            what = QString::fromStdString(e.what());
        }
        QCOMPARE(what, error);
        // The app says the same, loading off the GUI thread.
        MainWindow w(nullptr, false);
        QSignalSpy errors(&w, &MainWindow::errorShown);
        w.open({address});
        QVERIFY(errors.wait(20000));
        QCOMPARE(errors.first().first().toString(), error);
        QVERIFY(!w.job());
    }

    // Cancel stops a remote open that waits on a server that does not answer, at once.
    void cancelWhileConnecting()
    {
        AppSession session;
        QSignalSpy cancelled(&session, &AppSession::cancelled);
        QSignalSpy failed(&session, &AppSession::failed);
        QElapsedTimer clock;
        clock.start();
        session.open({QStringLiteral("ssh://slowhost/job")});
        QTest::qWait(300);
        QVERIFY(session.busy());
        session.cancel();
        QVERIFY(cancelled.wait(5000));
        QVERIFY2(clock.elapsed() < 3000, qPrintable(QString::number(clock.elapsed())));
        QCOMPARE(failed.count(), 0);
        QVERIFY(!session.job());
    }

    // The app: the link in the status bar, Open recent keeps the address, and a link that drops is said once.
    void appShowsTheLink()
    {
        MainWindow w(nullptr, false);
        w.resize(1400, 900);
        w.show();
        QSignalSpy shown(&w, &MainWindow::jobShown);
        QFile::remove(pidFile_);
        w.open({kRemote});
        QVERIFY(shown.wait(30000));
        QVERIFY(w.job()->isRemote());
        QVERIFY2(w.linkText().startsWith(QStringLiteral("ssh localhost: ")), qPrintable(w.linkText()));
        QVERIFY2(w.linkText().endsWith(QStringLiteral(" moved in 13 requests")), qPrintable(w.linkText()));
        QCOMPARE(recentJobs().value(0).inputs, QStringList{kRemote});
        QCOMPARE(w.viewFile(), QString()); // no view is kept beside a remote job
        QVERIFY(!w.saveChromeTrace(dir_.filePath(QStringLiteral("t.json")), MainWindow::TraceRange::Visible));
        QVERIFY(w.lastError().contains(QStringLiteral("a remote job copies none")));
        // The HTML report is written here.
        const QString report = dir_.filePath(QStringLiteral("remote-report.html"));
        QSignalSpy exported(w.exporter(), &ExportWorker::finished);
        QVERIFY(w.saveReport(report));
        QVERIFY(exported.wait(30000));
        QVERIFY(QFileInfo(report).size() > 10000);

        // A click on a kernel: Details adds what the server says of it (its whole name, its NCCL operation, its launch).
        const auto local = AppSession::load({kJob}, {});
        const auto& model = *w.job()->timeline;
        int lane = -1;
        int64_t event = -1;
        for (size_t l = 0; l < model.lanes.size() && lane < 0; ++l)
            if (model.lanes[l].label == "stream 16 communication" && model.lanes[l].rank == 1)
                for (size_t e = 0; e < model.lanes[l].events.size() && lane < 0; ++e)
                    if (w.job()->remote->serverEvent(int(l), int64_t(e)).event >= 0 &&
                        model.name(model.lanes[l].events[e].name).find("SendRecv") != std::string::npos) {
                        lane = int(l);
                        event = int64_t(e);
                    }
        QVERIFY(lane >= 0);
        const auto ref = w.job()->remote->serverEvent(lane, event);
        QCOMPARE(ref.lane, lane); // the example has no memory track: the lanes are numbered as on the server
        const timeline::Event& remoteEvent = model.event(lane, event);
        const timeline::Event& localEvent = local->timeline->event(lane, ref.event);
        QCOMPARE(remoteEvent.start, localEvent.start);
        QCOMPARE(model.name(remoteEvent.name), local->timeline->name(localEvent.name));
        w.timeline()->selectEvent({lane, event});
        QTRY_VERIFY_WITH_TIMEOUT(w.details()->plainText().contains(QStringLiteral("From the server: ")), 10000);
        const QString details = w.details()->plainText();
        QVERIFY2(details.contains(QStringLiteral("From the server: ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)")), qPrintable(details));
        QVERIFY2(details.contains(QStringLiteral("communication: ")), qPrintable(details));
        QVERIFY2(details.contains(QStringLiteral("launched by cuLaunchKernelEx")), qPrintable(details));

        const QString pid = serverPid();
        QVERIFY(!pid.isEmpty());
        QSignalSpy errors(&w, &MainWindow::errorShown);
        QCOMPARE(QProcess::execute(QStringLiteral("kill"), {QStringLiteral("-KILL"), pid}), 0);
        QVERIFY(errors.wait(10000));
        QCOMPARE(errors.first().first().toString(),
                 kRemote + QStringLiteral(": the link closed; what is on screen stays, File > Open recent connects again"));
        QCOMPARE(w.linkText(), QStringLiteral("ssh localhost: link closed"));
        // A request after the drop fails at once with the same line.
        QVERIFY_THROWS_EXCEPTION(Error, w.job()->remote->result(remote::RequestType::Index));
        QVERIFY(w.job()->analysis); // what is on screen stays
    }

    // A zoom asks the server for the tiles of the rows and range on screen
    // at the view's width: a block folded in the first frame opens into the
    // events the local open shows there, exact, for a few KB.
    void zoomFetchesTiles()
    {
        MainWindow w(nullptr, false);
        w.resize(1400, 900);
        w.show();
        QSignalSpy shown(&w, &MainWindow::jobShown);
        w.open({kRemote});
        QVERIFY(shown.wait(30000));
        auto* tiles = w.findChild<RemoteTiles*>();
        QVERIFY(tiles);
        const auto first = w.timeline()->model();
        const auto link = w.job()->remote;
        // The widest block the server folded in the analysed iteration, on a track on screen.
        const Iteration& it = w.job()->analysis->iterations[2];
        int lane = -1;
        timeline::Event block;
        for (size_t l = 0; l < first->lanes.size(); ++l)
            if (link->serverLanes()[l] >= 0 && !w.timeline()->laneRect(int(l)).isEmpty())
                for (size_t e = 0; e < first->lanes[l].events.size(); ++e) {
                    const timeline::Event& x = first->lanes[l].events[e];
                    if (x.start >= it.start && x.end <= it.end && link->serverEvent(int(l), int64_t(e)).event < 0 &&
                        first->name(x.name).find("events, folded") != std::string::npos && x.duration() > block.duration()) {
                        lane = int(l);
                        block = x;
                    }
                }
        QVERIFY(lane >= 0);
        const qint64 from = block.start - block.duration(), to = block.end + block.duration();
        const int width = w.timeline()->laneRect(lane).width();
        auto exact = [&](const timeline::TimelineModel& m, bool remote) {
            std::vector<std::tuple<TimeNs, TimeNs, std::string>> out;
            for (const timeline::DrawItem& d : m.drawList(lane, from, to, width))
                if (d.count == 1 && d.event >= 0 && (!remote || link->serverEvent(lane, d.event).event >= 0))
                    out.emplace_back(d.start, d.end, m.name(m.event(lane, d.event).name));
            return out;
        };
        const size_t before = exact(*first, true).size();
        // A step selected before the zoom stays selected, with its details.
        int stepsLane = -1;
        for (size_t l = 0; l < first->lanes.size() && stepsLane < 0; ++l)
            if (first->lanes[l].kind == timeline::LaneKind::Steps && !first->lanes[l].events.empty())
                stepsLane = int(l);
        QVERIFY(stepsLane >= 0);
        w.timeline()->selectEvent({stepsLane, 0});
        QVERIFY(w.details()->plainText().contains(QStringLiteral("F0")));
        const RemoteLink::Stats s0 = link->stats();
        QSignalSpy refined(tiles, &RemoteTiles::refined);
        w.timeline()->setVisibleRange(from, to);
        QVERIFY(refined.wait(10000));
        const auto zoomed = w.timeline()->model();
        QVERIFY(zoomed != first);
        QCOMPARE(zoomed->lanes.size(), first->lanes.size());
        QCOMPARE(w.timeline()->visibleRange().first, from); // the view did not move
        QCOMPARE(w.timeline()->selectedEvent(), (TimelineEventRef{stepsLane, 0}));
        QVERIFY(w.details()->plainText().contains(QStringLiteral("F0")));
        const auto local = AppSession::load({kJob}, {});
        const auto here = exact(*local->timeline, false);
        const auto there = exact(*zoomed, true);
        QVERIFY2(there.size() > before, qPrintable(QStringLiteral("%1 exact before, %2 after").arg(before).arg(there.size())));
        QCOMPARE(there.size(), here.size());
        // The same blocks, start and end; names as tiles carry them (cut to 256 bytes).
        for (size_t i = 0; i < here.size(); ++i) {
            QCOMPARE(std::get<0>(there[i]), std::get<0>(here[i]));
            QCOMPARE(std::get<1>(there[i]), std::get<1>(here[i]));
            QCOMPARE(std::get<2>(there[i]), std::get<2>(here[i]).substr(0, std::get<2>(there[i]).size()));
            QVERIFY(std::get<2>(there[i]).size() == std::get<2>(here[i]).size() || std::get<2>(there[i]).size() >= 250);
        }
        const RemoteLink::Stats s1 = link->stats();
        QCOMPARE(tiles->fetches(), 1);
        QVERIFY2(s1.bytesSent + s1.bytesReceived - s0.bytesSent - s0.bytesReceived < 20000,
                 qPrintable(QString::number(s1.bytesSent + s1.bytesReceived - s0.bytesSent - s0.bytesReceived)));
        qInfo("zoom to %lld ns: %zu exact blocks before, %zu after (the local open: %zu), %lld bytes moved in %lld requests", (long long)(to - from),
              before, there.size(), here.size(), (long long)(s1.bytesSent + s1.bytesReceived - s0.bytesSent - s0.bytesReceived),
              (long long)(s1.roundTrips - s0.roundTrips));
        // A small pan stays within what was fetched: nothing is asked.
        w.timeline()->setVisibleRange(from + (to - from) / 4, to + (to - from) / 4);
        QTest::qWait(RemoteTiles::kPauseMs * 3);
        QCOMPARE(tiles->fetches(), 1);
    }

    // The system's ssh against a real sshd on 127.0.0.1, with the app's own
    // command line (BatchMode): the job opens as through the stand-in, and a
    // key sshd does not know fails at once with ssh's line, no prompt.
    void throughRealSshd()
    {
        QVERIFY(QDir(dir_.path()).mkpath(QStringLiteral("sshd")));
        LocalSshd sshd(dir_.filePath(QStringLiteral("sshd")));
        sshd.start();
        if (!sshd.skip().isEmpty())
            QSKIP(qPrintable(sshd.skip()));
        const QByteArray stand = qgetenv("PIPESCOPE_SSH");
        const auto restore = qScopeGuard([stand] { qputenv("PIPESCOPE_SSH", stand); });
        qputenv("PIPESCOPE_SSH", sshd.wrapper().toUtf8());
        const QString address = QStringLiteral("ssh://127.0.0.1") + kJob;
        const auto remote = AppSession::load({address}, {});
        const auto local = AppSession::load({kJob}, {});
        QCOMPARE(remote->analysis->steps.size(), size_t(3 * 64));
        QCOMPARE(remote->analysis->iterations[2].end - remote->analysis->iterations[2].start, TimeNs(84'877'485));
        QCOMPARE(whatif::predict(*remote->costModel, whatif::measuredScenario(*remote->costModel)).iterationNs(),
                 whatif::predict(*local->costModel, whatif::measuredScenario(*local->costModel)).iterationNs());
        QCOMPARE(remote->remote->stats().roundTrips, int64_t(13));

        qputenv("PIPESCOPE_SSH", sshd.wrapper(true).toUtf8());
        QString what;
        QElapsedTimer clock;
        clock.start();
        try {
            AppSession::load({address}, {});
        } catch (const Error& e) {
            what = QString::fromStdString(e.what());
        }
        QCOMPARE(what, address + QStringLiteral(": %1@127.0.0.1: Permission denied (publickey).").arg(QString::fromLocal8Bit(::getpwuid(::geteuid())->pw_name)));
        QVERIFY2(clock.elapsed() < 20000, qPrintable(QString::number(clock.elapsed())));
    }

    void openRemoteDialog()
    {
        OpenRemoteDialog d;
        d.hostField()->setText(QStringLiteral("me@login:2222"));
        d.pathField()->setText(QStringLiteral("~/runs/job"));
        QCOMPARE(d.address(), QStringLiteral("ssh://me@login:2222/~/runs/job"));
        d.hostField()->setText(QStringLiteral("-oProxyCommand=x"));
        QCOMPARE(d.address(), QString());
    }

    // --screenshot of a remote job, offscreen; a failing one exits 1 with the line.
    void screenshot()
    {
        const QString out = dir_.filePath(QStringLiteral("remote.png"));
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        p.setProcessEnvironment(env);
        p.start(QStringLiteral(PIPESCOPE_GUI), {kRemote, QStringLiteral("--screenshot"), out, QStringLiteral("--view"), QStringLiteral("pipeline")});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        const QString said = QString::fromUtf8(p.readAllStandardOutput()).trimmed();
        QVERIFY2(said.startsWith(out + QStringLiteral(": 1600x1000 pipeline (ssh localhost: ")), qPrintable(said));
        QCOMPARE(QImage(out).size(), QSize(1600, 1000));

        p.start(QStringLiteral(PIPESCOPE_GUI), {QStringLiteral("ssh://nosuchhost/job"), QStringLiteral("--screenshot"), out});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 1);
        QStringList lines;
        for (const QString& l : QString::fromUtf8(p.readAllStandardError()).split(QLatin1Char('\n')))
            if (l.startsWith(QLatin1String("pipescope-gui:")))
                lines << l;
        QCOMPARE(lines, QStringList{QStringLiteral("pipescope-gui: error: ssh://nosuchhost/job: ssh: Could not resolve hostname "
                                                   "nosuchhost: Name or service not known")});
    }
};

QTEST_MAIN(TestRemoteApp)
#include "tst_remote_app.moc"
