// pipescope serve JOB [--stdio | --listen 127.0.0.1:PORT]
// A read-only server of one job for a desktop app elsewhere (docs/remote.md):
// over standard input and output (`ssh host pipescope serve --stdio JOB`),
// or on a loopback port for an SSH tunnel. It never binds another address
// and never writes to the job.
#include "Command.h"
#include "remote/Protocol.h"
#include "remote/Server.h"
#include "util/Error.h"
#include "util/Format.h"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace pipescope::cli {
namespace {

struct ServeArgs {
    std::string job;
    bool stdio = false;
    std::string listen;
    bool once = false;
};

struct Endpoint {
    bool v6 = false;
    int port = 0;
};

// 127.0.0.1:PORT, [::1]:PORT, ::1:PORT or localhost:PORT; anything else is refused.
Endpoint parseListen(const std::string& text)
{
    const size_t colon = text.rfind(':');
    auto refuse = [&](const std::string& why) {
        return FlagError("--listen", "'" + printable(text, 100) + "' " + why +
                                         "; serve listens only on the loopback interface (127.0.0.1:PORT, [::1]:PORT or "
                                         "localhost:PORT): reach it from elsewhere through an SSH tunnel (ssh -L)");
    };
    if (colon == std::string::npos || colon == 0)
        throw refuse("is not HOST:PORT");
    std::string host = text.substr(0, colon);
    const std::string port = text.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    Endpoint e;
    if (host == "127.0.0.1" || host == "localhost")
        e.v6 = false;
    else if (host == "::1")
        e.v6 = true;
    else
        throw refuse("is not a loopback address");
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535)
        throw refuse("has no port from 0 to 65535");
    e.port = std::stoi(port);
    return e;
}

int say(const remote::SessionResult& s)
{
    if (s.exitCode != 0)
        std::cerr << "pipescope serve: error: " << printable(s.error, 600) << "\n";
    return s.exitCode;
}

int serveStdio(remote::Server& server)
{
    // The protocol owns standard output: anything else printed (a warning
    // of a library) goes to standard error instead of into a message.
    std::cout.flush();
    const int protocolOut = ::dup(1);
    if (protocolOut < 0 || ::dup2(2, 1) < 0)
        throw Error(std::string("cannot set up standard output (") + std::strerror(errno) + ")");
    return say(remote::serveSession(server, 0, protocolOut));
}

int serveListen(remote::Server& server, const Endpoint& e, bool once)
{
    const int fd = ::socket(e.v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        throw Error(std::string("cannot make a socket (") + std::strerror(errno) + ")");
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (e.v6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        a->sin6_port = htons(static_cast<uint16_t>(e.port));
        len = sizeof *a;
    } else {
        auto* a = reinterpret_cast<sockaddr_in*>(&addr);
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a->sin_port = htons(static_cast<uint16_t>(e.port));
        len = sizeof *a;
    }
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 1) != 0) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        throw FlagError("--listen", "cannot listen on port " + std::to_string(e.port) + " (" + why + "); choose another port");
    }
    socklen_t got = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &got);
    const int port = e.v6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port) : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    // The port chosen (with port 0) on standard output, then nothing else there.
    std::cout << "pipescope serve: listening on " << (e.v6 ? "[::1]" : "127.0.0.1") << ":" << port << "\n" << std::flush;
    int status = 0;
    for (;;) {
        const int client = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) {
            if (errno == EINTR)
                continue;
            const std::string why = std::strerror(errno);
            ::close(fd);
            throw Error("cannot accept a connection (" + why + ")");
        }
        server.resetSession();
        status = say(remote::serveSession(server, client, client));
        ::close(client);
        if (once)
            break;
    }
    ::close(fd);
    return status;
}

int runServe(const ServeArgs& a)
{
    if (a.stdio && !a.listen.empty())
        throw FlagError("--listen", "serve speaks either on standard input and output (--stdio) or on a port (--listen), not both");
    std::optional<Endpoint> endpoint;
    if (!a.listen.empty())
        endpoint = parseListen(a.listen); // refused before the job is opened
    remote::preferHugePages();            // may start this program again, before anything is read
    // A client that goes away must not end the server with SIGPIPE mid-write.
    std::signal(SIGPIPE, SIG_IGN);
    remote::Server server(a.job);
    if (endpoint)
        return serveListen(server, *endpoint, a.once);
    return serveStdio(server);
}

RegisterCommand reg{{"serve", "Serve a job read-only to a desktop app elsewhere (over SSH: serve --stdio JOB)", 90,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<ServeArgs>();
                         app.add_option("JOB", a->job, "A store (.pipescope) or a sharded job folder")->required();
                         app.add_flag("--stdio", a->stdio, "Speak the protocol on standard input and output (the default)");
                         app.add_option("--listen", a->listen,
                                        "Listen on a loopback port instead, 127.0.0.1:PORT or [::1]:PORT (for an SSH tunnel; "
                                        "port 0 picks one and prints it); one client at a time");
                         app.add_flag("--once", a->once, "With --listen: end after the first client");
                         app.footer("The protocol, its limits and its security model: docs/remote.md. The server reads only JOB "
                                    "and baselines in JOB's folder, and writes nothing.");
                         return [a]() { return runServe(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
