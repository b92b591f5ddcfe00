#pragma once
// Helpers shared by the QtTest executables.
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QString>
#include <QTemporaryDir>
#include <QtTest>

#include <string>

namespace pipescope::test {

inline std::string externalData(const char* relative)
{
    return std::string(PIPESCOPE_EXTERNAL_DATA) + "/" + relative;
}

inline bool haveExternalData()
{
    return QDir(QString::fromUtf8(PIPESCOPE_EXTERNAL_DATA)).exists();
}

#define PIPESCOPE_REQUIRE_EXTERNAL_DATA()                                                                   \
    do {                                                                                                   \
        if (!pipescope::test::haveExternalData())                                                          \
            QSKIP("external trace corpus not found at " PIPESCOPE_EXTERNAL_DATA);                          \
    } while (0)

inline std::string independentData(const char* relative)
{
    return std::string(PIPESCOPE_INDEPENDENT_DATA) + "/" + relative;
}

#define PIPESCOPE_REQUIRE_INDEPENDENT_DATA()                                                                \
    do {                                                                                                   \
        if (!QDir(QString::fromUtf8(PIPESCOPE_INDEPENDENT_DATA)).exists())                                 \
            QSKIP("independent pipeline jobs not found at " PIPESCOPE_INDEPENDENT_DATA);                   \
    } while (0)

// Real public traces that are not in the shared corpus (PIPESCOPE_EXTRA_TRACES
// names a folder holding them, see docs/testing-real-traces.md); empty when unset.
inline QString extraTraces(const char* relative)
{
    const QString root = qEnvironmentVariable("PIPESCOPE_EXTRA_TRACES");
    if (root.isEmpty())
        return {};
    const QString p = root + "/" + QString::fromUtf8(relative);
    return QFileInfo::exists(p) ? p : QString();
}

inline std::string path(const QTemporaryDir& dir, const char* name)
{
    return (dir.path() + "/" + QString::fromUtf8(name)).toStdString();
}

struct CliResult {
    int exitCode = -1;
    QString out;
    QString err;
};

#ifdef PIPESCOPE_CLI
// Runs the pipescope command-line tool with arguments; waits up to 5 minutes.
inline CliResult runCli(const QStringList& args, const QString& workdir = {})
{
    QProcess p;
    if (!workdir.isEmpty())
        p.setWorkingDirectory(workdir);
    p.start(QString::fromUtf8(PIPESCOPE_CLI), args);
    p.waitForFinished(300000);
    CliResult r;
    r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}
#endif

} // namespace pipescope::test
