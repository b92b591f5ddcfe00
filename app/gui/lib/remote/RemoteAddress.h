#pragma once
// A remote job's address, as the user writes it on the command line and in
// File > Open remote...: ssh://[user@]host[:port]/path/to/job, and the ssh
// command that serves it (docs/remote.md, "The app").
#include <QString>
#include <QStringList>

#include <optional>

namespace pipescope::gui {

struct RemoteAddress {
    QString user;  // empty: ssh's own choice (~/.ssh/config, the login name)
    QString host;  // a name or address ssh resolves, or a Host alias of ~/.ssh/config
    int port = -1; // -1: ssh's own choice
    QString path;  // on the remote machine: "/lustre/run/job", or "~/job" relative to the home folder

    // Parses "ssh://[user@]host[:port]/path"; nullopt with *error set (one
    // sentence naming the text) when it is not one. Host and user names are
    // limited to letters, digits and ".-_" (and ':' inside [brackets] for an
    // IPv6 address), so that nothing in them reaches ssh as an option.
    static std::optional<RemoteAddress> parse(const QString& text, QString* error);
    static bool isRemote(const QString& text) { return text.startsWith(QLatin1String("ssh://")); }
    // ssh://[user@]host[:port]/path, as parse() reads it back.
    QString toString() const;
    // "host:/path" for titles.
    QString shortName() const;

    // The command that serves the job: $PIPESCOPE_SSH (default "ssh"), its
    // options (BatchMode: a missing key fails at once with ssh's message, no
    // password prompt; a connect timeout), the destination, and the remote
    // command `pipescope serve --stdio PATH` (its program $PIPESCOPE_REMOTE_COMMAND,
    // default "pipescope"), the path quoted for the remote shell.
    QStringList sshCommand() const;
};

// The text quoted for a POSIX shell: 'text' with each ' written '\''; a
// leading "~/" stays outside the quotes so that the remote shell expands it.
QString shellQuoted(const QString& text);

} // namespace pipescope::gui
