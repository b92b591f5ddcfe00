#pragma once
// A real sshd for tests, on 127.0.0.1 at a free port, run as the current
// user from a temporary folder with its own host key, a user key made for
// it and nothing of the machine's or the user's SSH configuration. start()
// leaves skip() saying why not where openssh-server is missing (the tests
// then QSKIP). wrapper() writes an ssh that reaches it: the system's ssh
// with the port, the key and no known-hosts file, every other argument
// passed on (what PIPESCOPE_SSH names for the app).
#include <QFile>
#include <QProcess>
#include <QStandardPaths>
#include <QString>
#include <QTextStream>

#include <arpa/inet.h>
#include <chrono>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

class LocalSshd {
public:
    explicit LocalSshd(QString folder) : dir_(std::move(folder)) {}
    ~LocalSshd()
    {
        if (sshd_.state() != QProcess::NotRunning) {
            sshd_.terminate();
            if (!sshd_.waitForFinished(10'000))
                sshd_.kill();
        }
    }

    const QString& skip() const { return skip_; }
    int port() const { return port_; }

    void start()
    {
        const QString sshd = QStringLiteral("/usr/sbin/sshd");
        if (!QFile::exists(sshd))
            return setSkip(sshd + QStringLiteral(" is not installed (openssh-server; scripts/setup-deps.sh --tests installs it)"));
        if (QStandardPaths::findExecutable(QStringLiteral("ssh")).isEmpty() || QStandardPaths::findExecutable(QStringLiteral("ssh-keygen")).isEmpty())
            return setSkip(QStringLiteral("ssh or ssh-keygen is not installed (openssh-client)"));
        // sshd run by root separates privileges into this folder, which the service makes at boot.
        if (::geteuid() == 0 && !QFile::exists(QStringLiteral("/run/sshd")) && ::mkdir("/run/sshd", 0755) != 0)
            return setSkip(QStringLiteral("sshd runs as root here and /run/sshd cannot be made"));
        const passwd* pw = ::getpwuid(::geteuid());
        if (!pw)
            return setSkip(QStringLiteral("the current user has no account entry"));
        for (const char* key : {"host_ed25519", "user_ed25519", "stranger_ed25519"})
            if (!keygen(at(key)))
                return setSkip(QStringLiteral("ssh-keygen failed"));
        QFile::copy(at("user_ed25519.pub"), at("authorized_keys"));
        port_ = freePort();
        QFile config(at("sshd_config"));
        if (!config.open(QIODevice::WriteOnly))
            return setSkip(QStringLiteral("cannot write sshd_config"));
        QTextStream(&config) << "Port " << port_ << "\nListenAddress 127.0.0.1\nHostKey " << at("host_ed25519") << "\nPidFile "
                             << at("sshd.pid") << "\nAuthorizedKeysFile " << at("authorized_keys") << "\nAllowUsers " << pw->pw_name
                             << "\nPubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                                "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\nPrintMotd no\nPrintLastLog no\n"
                                "X11Forwarding no\nAllowTcpForwarding no\nLogLevel ERROR\n";
        config.close();
        sshd_.setStandardErrorFile(at("sshd.log"));
        sshd_.start(sshd, {QStringLiteral("-D"), QStringLiteral("-e"), QStringLiteral("-f"), at("sshd_config")});
        if (!sshd_.waitForStarted(10'000))
            return setSkip(QStringLiteral("sshd did not start"));
        for (int i = 0; i < 200 && sshd_.state() == QProcess::Running && !accepts(port_); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (sshd_.state() != QProcess::Running || !accepts(port_))
            setSkip(QStringLiteral("sshd did not listen on 127.0.0.1:%1").arg(port_));
    }

    // An ssh that reaches this sshd with the authorized key (or, stranger,
    // with a key it does not know); the other arguments are the caller's.
    QString wrapper(bool stranger = false) const
    {
        const QString path = at(stranger ? "ssh-stranger" : "ssh-to-test-sshd");
        QFile f(path);
        if (!f.open(QIODevice::WriteOnly))
            return {};
        QTextStream(&f) << "#!/bin/sh\nexec " << QStandardPaths::findExecutable(QStringLiteral("ssh")) << " -F /dev/null -p " << port_
                        << " -i " << at(stranger ? "stranger_ed25519" : "user_ed25519")
                        << " -o IdentitiesOnly=yes -o IdentityAgent=none -o StrictHostKeyChecking=no"
                           " -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \"$@\"\n";
        f.close();
        f.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);
        return path;
    }

private:
    QString at(const char* name) const { return dir_ + QLatin1Char('/') + QLatin1String(name); }
    void setSkip(const QString& why) { skip_ = why; }

    static bool keygen(const QString& key)
    {
        QProcess p;
        p.start(QStringLiteral("ssh-keygen"), {"-q", "-t", "ed25519", "-N", "", "-C", "pipescope-test", "-f", key});
        return p.waitForFinished(30'000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
    }
    static sockaddr_in loopback(int port)
    {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(static_cast<uint16_t>(port));
        return a;
    }
    // A port on 127.0.0.1 that nothing listens on now (the kernel's choice).
    static int freePort()
    {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a = loopback(0);
        socklen_t len = sizeof a;
        int port = -1;
        if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
            port = ntohs(a.sin_port);
        ::close(fd);
        return port;
    }
    static bool accepts(int port)
    {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a = loopback(port);
        const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        ::close(fd);
        return ok;
    }

    QString dir_;
    QProcess sshd_;
    int port_ = -1;
    QString skip_;
};
