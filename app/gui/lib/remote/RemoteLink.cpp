#include "remote/RemoteLink.h"

#include "util/Format.h"
#include "util/Work.h"

#include <QFile>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <poll.h>
#include <thread>
#include <unistd.h>

namespace pipescope::gui {

using nlohmann::json;

namespace {

// A write to a server that has gone would otherwise end the app with SIGPIPE;
// the write's error says it instead.
void ignoreSigpipe()
{
    static std::once_flag once;
    std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

std::string scratchFile()
{
    const char* tmp = std::getenv("TMPDIR");
    std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/pipescope-ssh-XXXXXX";
    const int fd = ::mkstemp(path.data());
    if (fd < 0)
        return {};
    ::close(fd);
    return path;
}

} // namespace

std::shared_ptr<RemoteLink> RemoteLink::connect(const RemoteAddress& address, const WorkControl* work,
                                                const remote::SlowLink::Options* slow)
{
    ignoreSigpipe();
    std::shared_ptr<RemoteLink> link(new RemoteLink);
    link->address_ = address;
    link->started_ = std::chrono::steady_clock::now();
    link->stderrPath_ = scratchFile();
    std::vector<std::string> argv;
    for (const QString& a : address.sshCommand())
        argv.push_back(a.toStdString());
    try {
        link->child_ = remote::spawnChild(argv, link->stderrPath_);
    } catch (const std::exception& e) {
        throw Error(address.toString().toStdString() + ": " + e.what());
    }
    link->readFd_ = link->child_->fromChild;
    link->writeFd_ = link->child_->toChild;
    if (slow) {
        remote::SlowLink::Ends ends = remote::SlowLink::between(link->child_->toChild, link->child_->fromChild, *slow);
        link->child_->toChild = link->child_->fromChild = -1; // the slow link owns them now
        link->slow_ = std::move(ends.link);
        link->readFd_ = ends.clientRead;
        link->writeFd_ = ends.clientWrite;
    }
    link->client_ = std::make_unique<remote::Client>(link->readFd_, link->writeFd_);
    if (work)
        work->checkpoint("connecting to " + address.host.toStdString() + " (the server reads the job)", -1);
    std::lock_guard lock(link->mutex_);
    link->client_->setStop(work ? work->stop : nullptr);
    try {
        // The index is valid in every protocol version: it goes with hello.
        const int64_t hello = link->client_->sendHello({});
        const int64_t index = link->client_->send(remote::RequestType::Index);
        link->hello_ = link->client_->receiveHello(hello);
        try {
            link->index_ = link->client_->resultOf(index);
        } catch (const remote::ServerRefused&) {
            link->index_ = nullptr;
        }
    } catch (const std::exception& e) {
        link->fail(e);
    }
    return link;
}

RemoteLink::~RemoteLink()
{
    finish(200);
    if (!stderrPath_.empty())
        ::unlink(stderrPath_.c_str());
}

void RemoteLink::closeInput()
{
    if (writeFd_ >= 0)
        ::close(writeFd_);
    if (child_ && child_->toChild == writeFd_)
        child_->toChild = -1;
    writeFd_ = -1;
}

void RemoteLink::finish(int graceMs)
{
    // Closing its input ends the session; a server that does not go is stopped.
    closeInput();
    if (slow_ && readFd_ >= 0) {
        // What the link still carries is read (a relay that cannot write would not end).
        char buf[4096];
        for (int waited = 0; waited < graceMs + 2000;) {
            pollfd p{readFd_, POLLIN, 0};
            const int ready = ::poll(&p, 1, 50);
            if (ready == 0) {
                waited += 50;
                continue;
            }
            if (ready < 0 || ::read(readFd_, buf, sizeof buf) <= 0)
                break;
        }
        ::close(readFd_);
        readFd_ = -1;
    }
    if (child_) {
        for (int i = 0; i < graceMs / 10 && child_->running(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (child_->pid > 0)
            ::kill(child_->pid, SIGTERM);
        if (!slow_)
            readFd_ = -1; // wait() closes the child's pipes
        child_->wait();
    }
    slow_.reset();
}

QString RemoteLink::stderrLine() const
{
    QFile f(QString::fromStdString(stderrPath_));
    if (stderrPath_.empty() || !f.open(QIODevice::ReadOnly))
        return {};
    const QByteArray tail = f.size() > 8192 ? (f.seek(f.size() - 8192), f.readAll()) : f.readAll();
    const QList<QByteArray> lines = tail.split('\n');
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        QString line = QString::fromUtf8(it->trimmed());
        if (line.isEmpty())
            continue;
        // Untrusted text from the remote side: one line of printable characters.
        for (QChar& c : line)
            if (c.category() == QChar::Other_Control)
                c = QLatin1Char(' ');
        return line.left(400);
    }
    return {};
}

void RemoteLink::fail(const std::exception& e)
{
    // A server that had ended (killed, or the link dropped) is said as alive() says it.
    const bool gone = child_ && !child_->running();
    // The link is over: close our ends, give ssh a moment to say why, then stop it.
    finish(dynamic_cast<const Cancelled*>(&e) ? 0 : 3000);
    if (dynamic_cast<const Cancelled*>(&e)) {
        failure_ = QStringLiteral("%1: cancelled").arg(address_.toString());
        throw Cancelled();
    }
    QString why = stderrLine();
    if (why.isEmpty())
        why = gone ? QStringLiteral("the link closed") : QString::fromStdString(e.what());
    else if (child_ && child_->exitStatus == 127 && !why.startsWith(QLatin1String("cannot run ")))
        why += QStringLiteral(" (is pipescope installed there? PIPESCOPE_REMOTE_COMMAND names its path)");
    failure_ = QStringLiteral("%1: %2").arg(address_.toString(), why);
    throw Error(failure_.toStdString());
}

json RemoteLink::result(remote::RequestType type, const json& params, const WorkControl* work)
{
    std::lock_guard lock(mutex_);
    if (!failure_.isEmpty())
        throw Error(failure_.toStdString());
    client_->setStop(work ? work->stop : nullptr);
    try {
        return client_->result(type, params);
    } catch (const remote::ServerRefused&) {
        throw;
    } catch (const std::exception& e) {
        fail(e);
    }
}

RemoteLink::Pipeline::Pipeline(RemoteLink& link, const WorkControl* work) : link_(link), lock_(link.mutex_)
{
    if (!link_.failure_.isEmpty())
        throw Error(link_.failure_.toStdString());
    link_.client_->setStop(work ? work->stop : nullptr);
}

int64_t RemoteLink::Pipeline::send(remote::RequestType type, const json& params)
{
    if (!link_.failure_.isEmpty())
        throw Error(link_.failure_.toStdString());
    try {
        return link_.client_->send(type, params);
    } catch (const remote::ServerRefused&) {
        throw;
    } catch (const std::exception& e) {
        link_.fail(e);
    }
}

json RemoteLink::Pipeline::result(int64_t id)
{
    if (!link_.failure_.isEmpty())
        throw Error(link_.failure_.toStdString());
    try {
        return link_.client_->resultOf(id);
    } catch (const remote::ServerRefused&) {
        throw;
    } catch (const std::exception& e) {
        link_.fail(e);
    }
}

RemoteLink::Stats RemoteLink::stats() const
{
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock())
        return last_;
    const remote::Client& c = *client_;
    last_ = {c.lastRoundTripSeconds(), c.bestRoundTripSeconds(), c.bytesSent(), c.bytesReceived(), c.roundTrips(),
             c.payloadBytesReceived(), c.compressing()};
    return last_;
}

bool RemoteLink::alive()
{
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock())
        return true; // a request is in flight: it will say
    if (!failure_.isEmpty())
        return false;
    if (child_ && child_->running())
        return true;
    QString why = stderrLine();
    failure_ = QStringLiteral("%1: the link closed%2").arg(address_.toString(), why.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(why));
    return false;
}

QString RemoteLink::failure() const
{
    std::unique_lock lock(mutex_, std::try_to_lock);
    return lock.owns_lock() ? failure_ : QString();
}

RemoteLink::ServerEvent RemoteLink::serverEvent(int lane, int64_t event) const
{
    if (lane < 0 || static_cast<size_t>(lane) >= serverLanes_.size() || serverLanes_[static_cast<size_t>(lane)] < 0 || event < 0)
        return {};
    const auto& events = serverEvents_[static_cast<size_t>(lane)];
    if (static_cast<size_t>(event) >= events.size() || events[static_cast<size_t>(event)] < 0)
        return {};
    return {serverLanes_[static_cast<size_t>(lane)], events[static_cast<size_t>(event)]};
}

QString RemoteLink::describe() const
{
    const Stats s = stats();
    return QStringLiteral("ssh %1: %2 ms round trip, %3 moved in %4 requests")
        .arg(address_.host)
        .arg(s.bestSeconds * 1000.0, 0, 'f', s.bestSeconds < 0.01 ? 1 : 0)
        .arg(QString::fromStdString(formatBytes(s.bytesSent + s.bytesReceived)))
        .arg(s.roundTrips);
}

} // namespace pipescope::gui
