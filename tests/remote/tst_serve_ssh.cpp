// `pipescope serve` through a real sshd, as the app runs it: `ssh host
// pipescope serve --stdio JOB`. The test starts sshd itself on 127.0.0.1
// (tests/common/LocalSshd.h: a free high port, as the current user, with a
// host key, a user key and a configuration made for it in a temporary
// folder), connects with the system's ssh client and speaks the protocol
// through it with remote::Client. Every answer must equal a local
// server's, byte for byte on the wire. Skipped, with the reason, where
// openssh-server is not installed (scripts/setup-deps.sh --tests installs it).
#include "LocalSshd.h"
#include "TestSupport.h"

#include "remote/Client.h"
#include "remote/Protocol.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <unistd.h>

using namespace pipescope;
using namespace pipescope::remote;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kJob = std::string(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";
std::string readFile(const fs::path& p)
{
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// Single quotes for the remote shell.
std::string shellQuoted(const std::string& s)
{
    std::string out = "'";
    for (char c : s)
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// The first frame and what follows it, as the app asks: every answer kept.
struct Conversation {
    json hello, index, summary, analysis, tiles, zoom, details, costModel;
    int64_t sent = 0, received = 0, roundTrips = 0;
};

Conversation converse(Client& c)
{
    Conversation v;
    v.hello = c.hello();
    v.index = c.result(RequestType::Index);
    v.summary = c.result(RequestType::Analysis, {{"parts", "summary"}});
    v.analysis = c.result(RequestType::Analysis);
    const json& tl = v.index["timeline"];
    v.tiles = c.result(RequestType::Tiles, {{"from_ns", tl["start_ns"]}, {"to_ns", tl["end_ns"]}, {"width_px", 1000}});
    const json& it = v.index["iterations"][1];
    v.zoom = c.result(RequestType::Tiles, {{"from_ns", it["start_ns"]}, {"to_ns", it["end_ns"]}, {"width_px", 1600}, {"lanes", {0, 1, 2, 3}}});
    v.details = c.result(RequestType::Details, {{"lane", 0}, {"event", 3}});
    v.costModel = c.result(RequestType::CostModel);
    v.sent = c.bytesSent();
    v.received = c.bytesReceived();
    v.roundTrips = c.roundTrips();
    return v;
}

// Ends a session: closes the request pipe, reads what is left, waits.
std::string finish(ChildProcess& child)
{
    ::close(child.toChild);
    child.toChild = -1;
    std::string rest;
    char buf[4096];
    for (ssize_t n; (n = ::read(child.fromChild, buf, sizeof buf)) > 0;)
        rest.append(buf, size_t(n));
    return rest;
}

} // namespace

class TestServeSsh : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::unique_ptr<LocalSshd> sshd_;
    std::string skip_; // why sshd could not be started here

    fs::path at(const char* name) const { return fs::path(dir_.path().toStdString()) / name; }

    // The ssh command line to the test's sshd (tests/common/LocalSshd.h: its
    // port, its key, no known hosts, none of the user's configuration).
    std::vector<std::string> sshCommand(const std::string& remote) const
    {
        return {sshd_->wrapper().toStdString(), "-o", "BatchMode=yes", "127.0.0.1", remote};
    }

private slots:
    void initTestCase()
    {
        std::signal(SIGPIPE, SIG_IGN);
        QVERIFY(dir_.isValid());
        sshd_ = std::make_unique<LocalSshd>(dir_.path());
        sshd_->start();
        skip_ = sshd_->skip().toStdString();
    }

    void cleanupTestCase() { sshd_.reset(); }

    // The login itself: a command through sshd, its output back.
    void sshRunsACommand()
    {
        if (!skip_.empty())
            QSKIP(skip_.c_str());
        QProcess p;
        const auto argv = sshCommand("echo pipescope-over-ssh");
        QStringList args;
        for (size_t i = 1; i < argv.size(); ++i)
            args << QString::fromStdString(argv[i]);
        p.start(QString::fromStdString(argv[0]), args);
        QVERIFY(p.waitForFinished(30'000));
        QVERIFY2(p.exitCode() == 0, (p.readAllStandardError().toStdString() + readFile(at("sshd.log"))).c_str());
        QCOMPARE(p.readAllStandardOutput(), QByteArray("pipescope-over-ssh\n"));
    }

    // `ssh 127.0.0.1 pipescope serve --stdio JOB`: the first frame, a zoom,
    // a click and the cost model, equal to a local server's, byte for byte.
    void serveThroughSshEqualsLocal()
    {
        if (!skip_.empty())
            QSKIP(skip_.c_str());
        const fs::path localErr = at("local.err"), remoteErr = at("remote.err");
        auto local = spawnChild({PIPESCOPE_CLI, "serve", "--stdio", kJob}, localErr.string());
        Client lc(local->fromChild, local->toChild);
        const Conversation want = converse(lc);
        QCOMPARE(finish(*local), std::string());
        QCOMPARE(local->wait(), 0);

        const std::string remoteCommand = shellQuoted(PIPESCOPE_CLI) + " serve --stdio " + shellQuoted(kJob);
        auto remote = spawnChild(sshCommand(remoteCommand), remoteErr.string());
        Client rc(remote->fromChild, remote->toChild);
        Conversation got;
        try {
            got = converse(rc);
        } catch (const std::exception& e) {
            QFAIL((std::string("through ssh: ") + e.what() + "; ssh: " + readFile(remoteErr) + "; sshd: " + readFile(at("sshd.log"))).c_str());
        }
        QCOMPARE(finish(*remote), std::string());
        QCOMPARE(remote->wait(), 0);
        QCOMPARE(readFile(remoteErr), std::string());

        QVERIFY(rc.compressing());
        QCOMPARE(got.hello["job"]["path"].get<std::string>(), fs::canonical(kJob).string());
        QCOMPARE(got.hello["job"]["ranks"].get<int>(), 4);
        QCOMPARE(got.summary["summary"]["steps"].get<int>(), 64);
        QCOMPARE(got.tiles["lanes"].size(), got.index["timeline"]["lanes"].size());
        QCOMPARE(got.zoom["lanes"].size(), size_t(4));
        QVERIFY(got.costModel.contains("model"));
        QCOMPARE(got.hello, want.hello);
        QCOMPARE(got.index, want.index);
        QCOMPARE(got.summary, want.summary);
        QCOMPARE(got.analysis, want.analysis);
        QCOMPARE(got.tiles, want.tiles);
        QCOMPARE(got.zoom, want.zoom);
        QCOMPARE(got.details, want.details);
        QCOMPARE(got.costModel, want.costModel);
        // ssh passes the frames as they are: the same bytes, the same round trips.
        QCOMPARE(got.roundTrips, int64_t(8));
        QCOMPARE(got.roundTrips, want.roundTrips);
        QCOMPARE(got.sent, want.sent);
        QCOMPARE(got.received, want.received);
    }

    // A job the remote side cannot open: ssh carries the server's one line and its exit status.
    void missingJobThroughSsh()
    {
        if (!skip_.empty())
            QSKIP(skip_.c_str());
        QProcess p;
        const auto argv = sshCommand(shellQuoted(PIPESCOPE_CLI) + " serve --stdio /nonexistent/job.pipescope");
        QStringList args;
        for (size_t i = 1; i < argv.size(); ++i)
            args << QString::fromStdString(argv[i]);
        p.start(QString::fromStdString(argv[0]), args);
        p.closeWriteChannel();
        QVERIFY(p.waitForFinished(30'000));
        QVERIFY(p.exitCode() != 0);
        QCOMPARE(p.readAllStandardOutput(), QByteArray());
        const QByteArray err = p.readAllStandardError();
        QVERIFY2(err.contains("/nonexistent/job.pipescope"), err.constData());
    }
};

QTEST_GUILESS_MAIN(TestServeSsh)
#include "tst_serve_ssh.moc"
