#include "remote/RemoteAddress.h"

#include <QRegularExpression>

namespace pipescope::gui {

namespace {

bool safeName(const QString& s)
{
    static const QRegularExpression re(QStringLiteral("^[A-Za-z0-9_][A-Za-z0-9._-]*$"));
    return re.match(s).hasMatch();
}

bool safeHost(const QString& s)
{
    static const QRegularExpression v6(QStringLiteral("^\\[[0-9A-Fa-f:.]+\\]$"));
    return safeName(s) || v6.match(s).hasMatch();
}

} // namespace

std::optional<RemoteAddress> RemoteAddress::parse(const QString& text, QString* error)
{
    auto fail = [&](const QString& why) -> std::optional<RemoteAddress> {
        if (error)
            *error = QStringLiteral("%1: %2; write ssh://[user@]host[:port]/path/to/job").arg(text, why);
        return std::nullopt;
    };
    if (!isRemote(text))
        return fail(QStringLiteral("not an ssh:// address"));
    const QString rest = text.mid(6);
    const qsizetype slash = rest.indexOf(QLatin1Char('/'));
    if (slash < 0 || slash + 1 >= rest.size())
        return fail(QStringLiteral("no path to the job after the host"));
    QString authority = rest.left(slash);
    RemoteAddress a;
    a.path = rest.mid(slash);
    // ssh://host/~/job: relative to the remote home folder.
    if (a.path.startsWith(QLatin1String("/~/")))
        a.path = a.path.mid(1);
    if (a.path.contains(QChar(0)) || a.path.contains(QLatin1Char('\n')))
        return fail(QStringLiteral("the path holds a control character"));
    if (const qsizetype at = authority.lastIndexOf(QLatin1Char('@')); at >= 0) {
        a.user = authority.left(at);
        authority = authority.mid(at + 1);
        if (!safeName(a.user))
            return fail(QStringLiteral("the user name '%1' is not one (letters, digits and .-_ only)").arg(a.user));
    }
    // host:port, [v6]:port
    const qsizetype colon = authority.lastIndexOf(QLatin1Char(':'));
    if (colon >= 0 && colon > authority.lastIndexOf(QLatin1Char(']'))) {
        bool ok = false;
        a.port = authority.mid(colon + 1).toInt(&ok);
        if (!ok || a.port < 1 || a.port > 65535)
            return fail(QStringLiteral("the port '%1' is not a number from 1 to 65535").arg(authority.mid(colon + 1)));
        authority = authority.left(colon);
    }
    a.host = authority;
    if (a.host.isEmpty())
        return fail(QStringLiteral("no host"));
    if (!safeHost(a.host))
        return fail(QStringLiteral("the host '%1' is not a host name (letters, digits and .-_ only)").arg(a.host));
    return a;
}

QString RemoteAddress::toString() const
{
    QString s = QStringLiteral("ssh://");
    if (!user.isEmpty())
        s += user + QLatin1Char('@');
    s += host;
    if (port > 0)
        s += QLatin1Char(':') + QString::number(port);
    if (!path.startsWith(QLatin1Char('/')))
        s += QLatin1Char('/');
    return s + path;
}

QString RemoteAddress::shortName() const { return host + QLatin1Char(':') + path; }

QString shellQuoted(const QString& text)
{
    QString prefix, body = text;
    if (body.startsWith(QLatin1String("~/"))) {
        prefix = QStringLiteral("~/");
        body = body.mid(2);
    }
    QString q = body;
    q.replace(QLatin1Char('\''), QLatin1String("'\\''"));
    return prefix + QLatin1Char('\'') + q + QLatin1Char('\'');
}

QStringList RemoteAddress::sshCommand() const
{
    const QString ssh = qEnvironmentVariableIsEmpty("PIPESCOPE_SSH") ? QStringLiteral("ssh") : qEnvironmentVariable("PIPESCOPE_SSH");
    const QString serve =
        qEnvironmentVariableIsEmpty("PIPESCOPE_REMOTE_COMMAND") ? QStringLiteral("pipescope") : qEnvironmentVariable("PIPESCOPE_REMOTE_COMMAND");
    QStringList argv{ssh, QStringLiteral("-o"), QStringLiteral("BatchMode=yes"), QStringLiteral("-o"), QStringLiteral("ConnectTimeout=20")};
    if (port > 0)
        argv << QStringLiteral("-p") << QString::number(port);
    if (!user.isEmpty())
        argv << QStringLiteral("-l") << user;
    // "--": nothing after it is read as an option of ssh.
    // ssh takes an IPv6 address without its brackets.
    const QString destination = host.startsWith(QLatin1Char('[')) ? host.mid(1, host.size() - 2) : host;
    argv << QStringLiteral("--") << destination << shellQuoted(serve) + QStringLiteral(" serve --stdio ") + shellQuoted(path);
    return argv;
}

} // namespace pipescope::gui
