// The adversarial sweep's defects, kept fixed: outputs never replace inputs
// or special files, damaged stores and out-of-range ranks and times are one
// clear error (or counted bad records), temporaries do not outlive their
// process, and quoted input cannot drive the terminal.
#include "StoreFixture.h"
#include "SyntheticTrace.h"
#include "TestSupport.h"
#include "analysis/Analysis.h"
#include "import/capture/CaptureSchema.h"
#include "store/Sqlite.h"
#include "store/Store.h"
#include "store/StoreWriter.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/InputFile.h"
#include "util/Limits.h"
#include "util/Work.h"
#include "whatif/ModelDescription.h"
#include "whatif/Replay.h"
#include "whatif/WhatIf.h"

#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

using namespace pipescope;
using namespace pipescope::test;

namespace {

QString writeFile(const QString& path, const QByteArray& contents)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly))
        qFatal("cannot write %s", qPrintable(path));
    f.write(contents);
    return path;
}

QByteArray readFile(const QString& path)
{
    QFile f(path);
    f.open(QIODevice::ReadOnly);
    return f.readAll();
}

// A Kineto trace with `kernels` kernels on one stream; `head` adds top-level members.
QByteArray trace(int kernels, const QByteArray& head = {}, int64_t firstTs = 1000)
{
    QByteArray t = "{" + head + (head.isEmpty() ? "" : ", ") + "\"traceEvents\": [\n";
    for (int i = 0; i < kernels; ++i) {
        t += (i ? ",\n" : "") + QByteArray("{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k") + QByteArray::number(i) +
             "\",\"pid\":0,\"tid\":7,\"ts\":" + QByteArray::number(static_cast<qlonglong>(firstTs + 20 * i)) +
             ",\"dur\":10,\"args\":{\"device\":0,\"stream\":7}}";
    }
    return t + "]}\n";
}

QString storeOf(const QTemporaryDir& dir, const QString& name = "job.pipescope")
{
    const QString in = writeFile(dir.path() + "/rank-0.json", trace(3, "\"distributedInfo\": {\"rank\": 0, \"world_size\": 1}"));
    const QString out = dir.path() + "/" + name;
    auto r = runCli({"import", in, "-o", out, "-q"});
    if (r.exitCode != 0)
        qWarning() << r.err;
    return out;
}

QStringList hiddenTemporaries(const QString& dir)
{
    QStringList out;
    for (const QString& f : QDir(dir).entryList(QDir::Files | QDir::Dirs | QDir::Hidden | QDir::NoDotAndDotDot))
        if (f.contains(".tmp-"))
            out << f;
    return out;
}

int64_t count(const std::string& store, const std::string& sql)
{
    sql::Database db(store, sql::Database::Mode::ReadOnly);
    auto st = db.prepare(sql);
    st.step();
    return st.int64(0);
}

void execSql(const QString& file, const std::string& sql)
{
    sql::Database db(file.toStdString(), sql::Database::Mode::Create);
    db.exec(sql);
}

QByteArray gzip(const QByteArray& data)
{
    z_stream z{};
    deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    QByteArray out(static_cast<int>(deflateBound(&z, static_cast<uLong>(data.size()))), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    deflate(&z, Z_FINISH);
    out.resize(static_cast<int>(z.total_out));
    deflateEnd(&z);
    return out;
}

QString model() { return QString::fromUtf8(PIPESCOPE_SOURCE_DIR) + "/resources/models/gpt-32l.json"; }

} // namespace

class TstHardening : public QObject {
    Q_OBJECT
private slots:
    // 1. An output that resolves to an input is refused, and the input survives.
    void outputEqualToInputIsRefused_data()
    {
        QTest::addColumn<QString>("command");
        QTest::addColumn<QString>("link"); // "", "symlink" or "hardlink"
        for (const char* cmd : {"import", "analyze", "report", "simulate", "whatif"})
            for (const char* link : {"", "symlink", "hardlink"})
                QTest::newRow(qPrintable(QString(cmd) + (*link ? QString("/") + link : QString())))
                    << QString(cmd) << QString(link);
    }
    // An input's inode number protects it only while the input holds it: a
    // long-running process (the app, a test binary) deletes inputs, and a new
    // file can be given the freed number. Here the number lives on in a hard
    // link after the input's own name is gone: writing the link is not
    // writing the input.
    void inodeOfADeletedInputIsNotTheInput()
    {
        QTemporaryDir dir;
        const std::string in = (dir.path() + "/in.json").toStdString();
        const std::string keep = (dir.path() + "/keep.json").toStdString();
        QVERIFY(!writeFile(QString::fromStdString(in), "{}").isEmpty());
        AtomicOutput::protectInput(in);
        QVERIFY(::link(in.c_str(), keep.c_str()) == 0);
        QVERIFY_THROWS_EXCEPTION(Error, AtomicOutput::refuseInput(keep)); // the input is still there: refused
        QVERIFY(::unlink(in.c_str()) == 0);
        AtomicOutput::refuseInput(keep); // the input is gone: its old number no longer protects anything
        QVERIFY_THROWS_EXCEPTION(Error, AtomicOutput::refuseInput(in)); // its path still does
    }

    // In a long-lived process (the app, a test binary) a file is protected
    // while it is read or kept open, not for ever: a store opened, read and
    // closed may be rewritten by a later import (tst_nsys reimports into the
    // store it read), while an open one may not.
    // Found by fuzz_model: a GPU memory of 8.6e46 GiB overflowed the int64
    // byte count (undefined behaviour, caught by UBSan's float-cast-overflow).
    void modelMemoryBeyondInt64IsRefused_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("value");
        QTest::newRow("gpu_memory_gib huge") << "gpu_memory_gib" << "8.6e46";
        QTest::newRow("reserved_gib huge") << "reserved_gib" << "1e300";
    }
    void modelMemoryBeyondInt64IsRefused()
    {
        QFETCH(QString, field);
        QFETCH(QString, value);
        nlohmann::json doc = nlohmann::json::parse(
            InputFile::readAll(std::string(PIPESCOPE_SOURCE_DIR) + "/resources/models/gpt-32l.json"));
        doc["memory"][field.toStdString()] = nlohmann::json::parse(value.toStdString());
        try {
            whatif::parseModelDescription(doc.dump(), "model.json");
            QFAIL("accepted");
        } catch (const FormatError& e) {
            QCOMPARE(QString(e.what()), "model.json: memory." + field + " must be between 0 and 1,048,576 GiB");
        }
        // The largest allowed size still fits.
        doc["memory"][field.toStdString()] = 1048576;
        QVERIFY(whatif::parseModelDescription(doc.dump(), "model.json").memory.gpuMemoryBytes.has_value());
    }

    void inputProtectedWhileOpen()
    {
        QTemporaryDir dir;
        const std::string store = (dir.path() + "/job.pipescope").toStdString();
        {
            StoreWriter writer(store);
            writer.finish();
        }
        {
            sql::Database db(store, sql::Database::Mode::ReadOnly);
            QVERIFY_THROWS_EXCEPTION(Error, StoreWriter{store});
            db.close();
            AtomicOutput::refuseInput(store); // closed: no longer an input
            sql::Database again(store, sql::Database::Mode::ReadOnly);
            sql::Database moved = std::move(again); // the protection moves with the connection
            QVERIFY_THROWS_EXCEPTION(Error, AtomicOutput::refuseInput(store));
        }
        StoreWriter writer(store); // every reader is gone
        writer.finish();
        {
            AtomicOutput::InputGuard a(store), b(store); // two readers of one file
            a = AtomicOutput::InputGuard();
            QVERIFY_THROWS_EXCEPTION(Error, AtomicOutput::refuseInput(store));
        }
        AtomicOutput::refuseInput(store);
    }

    void outputEqualToInputIsRefused()
    {
        QFETCH(QString, command);
        QFETCH(QString, link);
        QTemporaryDir dir;
        QString input;
        QStringList args;
        if (command == "import") {
            input = writeFile(dir.path() + "/t.json", trace(2));
            args = {"import", input};
        } else if (command == "simulate") {
            input = dir.path() + "/m.json";
            QFile::copy(model(), input);
            args = {"simulate", input, "--summary"};
        } else if (command == "whatif") {
            // What-if needs a pipeline: a simulated 4-stage job.
            QCOMPARE(runCli({"simulate", model(), "--emit-kineto", dir.path() + "/t", "--summary"}).exitCode, 0);
            input = dir.path() + "/job.pipescope";
            QCOMPARE(runCli({"import", dir.path() + "/t", "-o", input, "-q"}).exitCode, 0);
            args = {"whatif", input, "--layers", "32", "--summary"};
        } else {
            input = storeOf(dir);
            args = {command, input};
        }
        QString output = input;
        if (link == "symlink") {
            output = dir.path() + "/alias";
            QVERIFY(QFile::link(input, output));
        } else if (link == "hardlink") {
            output = dir.path() + "/alias";
            QCOMPARE(::link(input.toUtf8().constData(), output.toUtf8().constData()), 0);
        }
        const QByteArray before = readFile(input);
        auto r = runCli(args << "-o" << output);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("it is also an input of this command and would be destroyed; choose another -o path"),
                 qPrintable(r.err));
        QCOMPARE(readFile(input), before);
        QVERIFY(hiddenTemporaries(dir.path()).isEmpty());
    }

    // 2. Special files are written in place or refused, never renamed over.
    void specialFilesAsOutput()
    {
        QTemporaryDir dir;
        const QString store = storeOf(dir);
        struct stat st{};
        auto text = runCli({"analyze", store, "-o", "/dev/null"});
        QCOMPARE(text.exitCode, 0);
        QCOMPARE(::stat("/dev/null", &st), 0);
        QVERIFY(S_ISCHR(st.st_mode));

        auto storeOut = runCli({"import", dir.path() + "/rank-0.json", "-o", "/dev/null"});
        QCOMPARE(storeOut.exitCode, 1);
        QVERIFY2(storeOut.err.contains("/dev/null: cannot write: it is not a regular file (a device, pipe or socket); "
                                       "a store must be written to a regular file"),
                 qPrintable(storeOut.err));
        QCOMPARE(::stat("/dev/null", &st), 0);
        QVERIFY(S_ISCHR(st.st_mode));

        // A symbolic link to a regular file stays a link; its target gets the output.
        const QString target = writeFile(dir.path() + "/target.txt", "old");
        const QString alias = dir.path() + "/alias.txt";
        QVERIFY(QFile::link(target, alias));
        QCOMPARE(runCli({"analyze", store, "--json", "-o", alias}).exitCode, 0);
        QVERIFY(QFileInfo(alias).isSymLink());
        QVERIFY(readFile(target).startsWith("{"));

        // A FIFO is written through, not replaced.
        const QString fifo = dir.path() + "/out.fifo";
        QCOMPARE(::mkfifo(fifo.toUtf8().constData(), 0600), 0);
        QProcess p;
        p.start(QString::fromUtf8(PIPESCOPE_CLI), {"analyze", store, "--json", "-o", fifo});
        QFile reader(fifo);
        QVERIFY(reader.open(QIODevice::ReadOnly));
        const QByteArray json = reader.readAll();
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        QVERIFY(json.startsWith("{"));
        QCOMPARE(::lstat(fifo.toUtf8().constData(), &st), 0);
        QVERIFY(S_ISFIFO(st.st_mode));
    }

    // 3. Crafted stores: one "damaged store" line, never a crash.
    void damagedStores_data()
    {
        QTest::addColumn<QString>("sql");
        QTest::addColumn<QString>("message");
        QTest::newRow("negative string id") << "INSERT INTO strings VALUES (-1, 'x')" << "strings.id holds an out-of-range value (-1)";
        QTest::newRow("huge string id") << "INSERT INTO strings VALUES (400000000000, 'x')"
                                        << "strings.id holds an out-of-range value (400000000000)";
        QTest::newRow("name id") << "UPDATE activities SET name_id = 99999999" << "activities.name_id holds an out-of-range value";
        QTest::newRow("activity kind") << "UPDATE activities SET kind = 200" << "activities.kind holds an out-of-range value (200)";
        QTest::newRow("rank") << "UPDATE activities SET rank = 2000000000" << "activities.rank holds a rank outside 0..1048575";
        QTest::newRow("stream rank") << "UPDATE streams SET rank = -5" << "streams.rank holds a rank outside 0..1048575";
        QTest::newRow("real time") << "UPDATE activities SET start_ns = start_ns + 0.5"
                                   << "activities.start_ns holds a time that is not an integer within the representable range";
        QTest::newRow("huge time") << "UPDATE activities SET end_ns = 9000000000000000000"
                                   << "activities.end_ns holds a time that is not an integer within the representable range";
        QTest::newRow("end before start") << "UPDATE activities SET end_ns = start_ns - 1" << "activities.end_ns lies before start_ns";
        QTest::newRow("world size") << "UPDATE ranks SET world_size = 2000000000" << "ranks.world_size holds an out-of-range value";
        QTest::newRow("missing table") << "DROP TABLE nccl_ops" << "table nccl_ops is missing";
        // Second sweep: rows the load query's time filter used to drop before the check saw them.
        QTest::newRow("float time out of range") << "UPDATE activities SET start_ns = 1.5e19 WHERE id % 2 = 0"
                                                 << "activities.start_ns holds a time that is not an integer within the representable range";
        QTest::newRow("stream that does not exist") << "UPDATE activities SET stream_id = 999999 WHERE id = (SELECT MIN(id) FROM activities)"
                                                    << "activity 1 names stream 999999, which the streams table does not hold";
    }
    void damagedStores()
    {
        QFETCH(QString, sql);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const QString store = storeOf(dir);
        execSql(store, sql.toStdString());
        for (const char* cmd : {"analyze", "report", "whatif"}) {
            QStringList args{cmd, store};
            if (QString(cmd) == "report")
                args << "-o" << dir.path() + "/r.html";
            if (QString(cmd) == "whatif")
                args << "--layers" << "4";
            auto r = runCli(args);
            QCOMPARE(r.exitCode, 1);
            QVERIFY2(r.err.contains(store + ": damaged store: " + message), qPrintable(r.err));
            QVERIFY2(r.err.endsWith("; re-import the traces\n"), qPrintable(r.err));
        }
    }

    // 4. Ranks are bounded: no allocation grows with a rank number.
    void ranksOutsideTheRangeAreRefused_data()
    {
        QTest::addColumn<QString>("fileName");
        QTest::addColumn<QByteArray>("head");
        QTest::addColumn<QString>("message");
        QTest::newRow("distributedInfo 2e9") << "t.json" << QByteArray("\"distributedInfo\": {\"rank\": 2000000000}")
                                             << "distributedInfo.rank 2000000000 is outside the supported ranks 0..1048575";
        QTest::newRow("distributedInfo INT_MAX") << "t.json" << QByteArray("\"distributedInfo\": {\"rank\": 2147483647}")
                                                 << "distributedInfo.rank 2147483647 is outside the supported ranks";
        QTest::newRow("negative") << "t.json" << QByteArray("\"distributedInfo\": {\"rank\": -1000002}")
                                  << "distributedInfo.rank -1000002 is outside the supported ranks";
        // 12: every digit of a file name's rank counts (it was cut to 214748364).
        QTest::newRow("file name") << "rank-2147483647.json" << QByteArray()
                                   << "the rank in the file name (2147483647) is outside the supported ranks 0..1048575";
    }
    void ranksOutsideTheRangeAreRefused()
    {
        QFETCH(QString, fileName);
        QFETCH(QByteArray, head);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const QString in = writeFile(dir.path() + "/" + fileName, trace(2, head));
        auto r = runCli({"import", in, "-o", dir.path() + "/job.pipescope"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
        QVERIFY(!QFile::exists(dir.path() + "/job.pipescope"));
        QVERIFY(hiddenTemporaries(dir.path()).isEmpty());
    }
    void largestRankIsAccepted()
    {
        QTemporaryDir dir;
        const QString in = writeFile(dir.path() + "/t.json", trace(4, "\"distributedInfo\": {\"rank\": 1048575, \"world_size\": 1048576}"));
        const QString store = dir.path() + "/job.pipescope";
        QCOMPARE(runCli({"import", in, "-o", store, "-q"}).exitCode, 0);
        auto r = runCli({"analyze", store, "--json"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(count(store.toStdString(), "SELECT MAX(rank) FROM activities"), 1048575);
        auto opt = runCli({"import", in, "-o", store, "--rank", "1048576"});
        QCOMPARE(opt.exitCode, 2);
    }
    void analysisRefusesRanksOutsideTheRange()
    {
        Trace t;
        t.strings = {""};
        t.streams.push_back({});
        t.streams[0].id = 1;
        t.streams[0].rank = 2'000'000'000;
        Activity a;
        a.rank = 2'000'000'000;
        a.streamId = 1;
        a.start = 0;
        a.end = 10;
        t.activities.push_back(a);
        QVERIFY_THROWS_EXCEPTION(Error, analyze(t));
    }

    // 5. Times: checked against the representable range after the time base.
    void timeBaseOverflowIsAnError()
    {
        QTemporaryDir dir;
        const QString in = writeFile(dir.path() + "/t.json", trace(2, "\"baseTimeNanoseconds\": 9223372036854775807"));
        auto r = runCli({"import", in, "-o", dir.path() + "/job.pipescope"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(in + ": every time lies outside the representable range once the file's time base is applied"),
                 qPrintable(r.err));
        QVERIFY(!QFile::exists(dir.path() + "/job.pipescope"));
    }
    void outOfRangeTimesAreCountedBadRecords()
    {
        QTemporaryDir dir;
        QByteArray t = "{\"traceEvents\": [\n"
                       "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\",\"pid\":0,\"tid\":7,\"ts\":-9000000000000000,\"dur\":10,\"args\":{\"device\":0,\"stream\":7}},\n"
                       "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"b\",\"pid\":0,\"tid\":7,\"ts\":9000000000000000,\"dur\":10,\"args\":{\"device\":0,\"stream\":7}},\n"
                       "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"c\",\"pid\":0,\"tid\":7,\"ts\":1000,\"dur\":10,\"args\":{\"device\":0,\"stream\":7}}]}";
        const QString in = writeFile(dir.path() + "/t.json", t);
        const QString store = dir.path() + "/job.pipescope";
        QCOMPARE(runCli({"import", in, "-o", store, "-q"}).exitCode, 0);
        QCOMPARE(count(store.toStdString(), "SELECT COUNT(*) FROM activities"), 1);
        QCOMPARE(count(store.toStdString(), "SELECT count FROM diagnostics WHERE kind = 'bad_value:ts'"), 2);
        QCOMPARE(runCli({"analyze", store}).exitCode, 0);
    }
    void durationOfTheMostNegativeTime()
    {
        QCOMPARE(formatDuration(std::numeric_limits<int64_t>::min()), std::string("-9223372036.855 s"));
        QCOMPARE(formatDuration(-999), std::string("-999 ns"));
    }

    // 6. A file whose distributedInfo follows its events keeps its own streams
    // beside a file whose rank is known first.
    void noPlaceholderRankCollision()
    {
        QTemporaryDir dir;
        const QString a = writeFile(dir.path() + "/a.json", trace(4, "\"distributedInfo\": {\"rank\": 0, \"world_size\": 2}"));
        QByteArray late = trace(10);
        late.chop(2); // "}\n"
        late += ", \"distributedInfo\": {\"rank\": 1, \"world_size\": 2}}\n";
        const QString b = writeFile(dir.path() + "/b.json", late);
        const QString store = dir.path() + "/job.pipescope";
        auto r = runCli({"import", a, b, "-o", store, "-q"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const std::string s = store.toStdString();
        QCOMPARE(count(s, "SELECT COUNT(*) FROM activities WHERE rank = 0"), 4);
        QCOMPARE(count(s, "SELECT COUNT(*) FROM activities WHERE rank = 1"), 10);
        QCOMPARE(count(s, "SELECT COUNT(*) FROM activities a JOIN streams s ON s.id = a.stream_id WHERE s.rank = a.rank"), 14);
        QCOMPARE(count(s, "SELECT COUNT(*) FROM streams WHERE rank < 0"), 0);
    }

    // 16. Control characters in quoted input are escaped.
    void controlCharactersAreEscaped()
    {
        QCOMPARE(printable("a\x1b[31mb\n\x7f"), std::string("a\\x1b[31mb\\x0a\\x7f"));
        QCOMPARE(printable("\xc2\x9b" "1m"), std::string("\\x9b1m"));
        QCOMPARE(printable("caf\xc3\xa9"), std::string("caf\xc3\xa9"));
        QCOMPARE(printable(std::string(300, 'x'), 10), std::string(10, 'x') + "...");

        QTemporaryDir dir;
        const QString file = dir.path() + "/report.sqlite";
        execSql(file, "CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT);"
                      "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '9' || char(27) || '[2J');");
        auto r = runCli({"import", file, "-o", dir.path() + "/job.pipescope"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY(!r.err.contains(QChar(27)));
        QVERIFY2(r.err.contains("schema 9\\x1b[2J is not supported"), qPrintable(r.err));
    }

    // 17. Many distinct streams: every one kept (the lookup is hashed, not scanned).
    void manyDistinctStreams()
    {
        QTemporaryDir dir;
        const int n = 20000;
        QByteArray t = "{\"traceEvents\": [\n";
        for (int i = 0; i < n; ++i)
            t += (i ? ",\n" : "") + QByteArray("{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":") +
                 QByteArray::number(i) + ",\"ts\":" + QByteArray::number(1000 + i) + ",\"dur\":1,\"args\":{\"device\":0,\"stream\":" +
                 QByteArray::number(i) + "}}";
        t += "]}";
        const QString in = writeFile(dir.path() + "/t.json", t);
        const QString store = dir.path() + "/job.pipescope";
        QCOMPARE(runCli({"import", in, "-o", store, "-q"}).exitCode, 0);
        QCOMPARE(count(store.toStdString(), "SELECT COUNT(*) FROM streams"), n);
        QCOMPARE(count(store.toStdString(), "SELECT COUNT(DISTINCT stream_id) FROM activities"), n);
    }

    // 12. A duplicate rank in --stage-map is refused.
    void duplicateRankInStageMap()
    {
        QTemporaryDir dir;
        const QString store = storeOf(dir);
        auto r = runCli({"analyze", store, "--stage-map", "0:0,0:1"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--stage-map names rank 0 twice; give each rank one stage"), qPrintable(r.err));
    }

    // 15. Messages that say what is wrong.
    void byteOrderMarkIsATrace()
    {
        QTemporaryDir dir;
        const QString in = writeFile(dir.path() + "/t.json", "\xEF\xBB\xBF" + trace(2));
        auto r = runCli({"import", in, "-o", dir.path() + "/job.pipescope", "-q"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    }
    void nonTraceFileInAFolderIsSkipped()
    {
        QTemporaryDir dir;
        QDir().mkdir(dir.path() + "/traces");
        writeFile(dir.path() + "/traces/rank-0.json", trace(2));
        writeFile(dir.path() + "/traces/notes.json", "just some notes");
        auto r = runCli({"import", dir.path() + "/traces", "-o", dir.path() + "/job.pipescope", "-q"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.err.contains("pipescope import: warning: " + dir.path() + "/traces/notes.json: unknown trace format"),
                 qPrintable(r.err));
        QVERIFY2(r.err.contains("; skipped"), qPrintable(r.err));
    }
    void damagedSqliteIsNamedSo()
    {
        QTemporaryDir dir;
        const QString file = dir.path() + "/report.sqlite";
        execSql(file, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
        QByteArray bytes = readFile(file);
        bytes.truncate(100); // the header survives, the pages do not
        bytes += QByteArray(4000, '\xff');
        writeFile(file, bytes);
        auto r = runCli({"import", file, "-o", dir.path() + "/job.pipescope"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(!r.err.contains("neither an Nsight Systems export"), qPrintable(r.err));
        QVERIFY2(r.err.contains(file + ": "), qPrintable(r.err));
    }
    void pipeWithNoDataIsNotCalledEmptyFile()
    {
        QTemporaryDir dir;
        QProcess p;
        p.start(QString::fromUtf8(PIPESCOPE_CLI), {"import", "/dev/stdin", "-o", dir.path() + "/job.pipescope"});
        QVERIFY(p.waitForStarted());
        p.closeWriteChannel();
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 1);
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QVERIFY2(err.contains("is not a regular file (a pipe or device) and gave no data"), qPrintable(err));
    }

    // 7. Temporaries go when a signal ends the process, and stale ones of dead processes on the next write.
    void temporaryRemovedOnSigint()
    {
        // A FIFO whose writer stops half-way: pipescope is reading it into its
        // private copy (TMPDIR) when SIGINT comes; the copy goes with it.
        QTemporaryDir dir;
        const QString fifo = dir.path() + "/rank-0.json";
        QCOMPARE(::mkfifo(fifo.toUtf8().constData(), 0600), 0);
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("TMPDIR", dir.path());
        p.setProcessEnvironment(env);
        p.start(QString::fromUtf8(PIPESCOPE_CLI), {"import", fifo, "-o", dir.path() + "/job.pipescope", "-q"});
        QVERIFY(p.waitForStarted());
        const QByteArray head = trace(50);
        int fd = ::open(fifo.toUtf8().constData(), O_WRONLY);
        QVERIFY(fd >= 0);
        QCOMPARE(::write(fd, head.constData(), 200), ssize_t(200)); // the rest never comes
        auto copies = [&] { return QDir(dir.path()).entryList({"pipescope-input-*"}, QDir::Dirs); };
        QVERIFY(QTest::qWaitFor([&] { return !copies().isEmpty(); }, 60000));
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(60000));
        ::close(fd);
        QCOMPARE(p.exitStatus(), QProcess::CrashExit);
        QCOMPARE(copies(), QStringList());
        QCOMPARE(hiddenTemporaries(dir.path()), QStringList());
        QVERIFY(!QFile::exists(dir.path() + "/job.pipescope"));
    }
    void staleTemporariesOfDeadProcessesAreRemoved()
    {
        QTemporaryDir dir;
        // A process that certainly existed and is gone: a child reaped here.
        pid_t child = ::fork();
        if (child == 0)
            ::_exit(0);
        ::waitpid(child, nullptr, 0);
        const QString stale = dir.path() + "/.job.pipescope.tmp-" + QString::number(child);
        writeFile(stale, "partial");
        writeFile(stale + "-journal", "partial");
        const QString live = dir.path() + "/.job.pipescope.tmp-1"; // pid 1 never goes away
        writeFile(live, "someone else's");
        const QString in = writeFile(dir.path() + "/t.json", trace(2));
        QCOMPARE(runCli({"import", in, "-o", dir.path() + "/job.pipescope", "-q"}).exitCode, 0);
        QVERIFY(!QFile::exists(stale));
        QVERIFY(!QFile::exists(stale + "-journal"));
        QVERIFY(QFile::exists(live));
    }

    // 13. A cache that cannot be written does not cost the result.
    void analyzeCachePrintsResultWhenTheCacheWriteFails()
    {
        QTemporaryDir dir;
        const QString store = storeOf(dir);
        sql::Database lock(store.toStdString(), sql::Database::Mode::ReadWrite);
        lock.exec("BEGIN EXCLUSIVE");
        auto r = runCli({"analyze", store, "--json", "--cache"});
        lock.exec("ROLLBACK");
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(QJsonDocument::fromJson(r.out.toUtf8()).object()["schema"].toString(), QString("pipescope.analysis/2"));
        QVERIFY2(r.err.contains("pipescope analyze: warning: the result was not cached in " + store), qPrintable(r.err));
    }

    // 11. SQLite inputs are opened without touching what lies beside them.
    void sqliteInputsInWalMode()
    {
        QTemporaryDir dir;
        const QString file = dir.path() + "/report.sqlite";
        execSql(file, "PRAGMA journal_mode = WAL; CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT);"
                      "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.13.2');");
        QVERIFY(!QFile::exists(file + "-wal")); // the last connection checkpointed it
        QDir().mkdir(dir.path() + "/copy");
        const QString copy = dir.path() + "/copy/report.sqlite";
        {
            // Copy the file while a writer holds un-checkpointed changes in its log.
            sql::Database writer(file.toStdString(), sql::Database::Mode::ReadWrite);
            writer.exec("PRAGMA wal_autocheckpoint = 0; CREATE TABLE StringIds(id INTEGER, value TEXT);");
            QVERIFY(QFile::copy(file, copy));
            QVERIFY(QFile::copy(file + "-wal", copy + "-wal"));
        }
        const QStringList before = QDir(dir.path() + "/copy").entryList(QDir::Files | QDir::Hidden);
        auto r = runCli({"import", copy, "-o", dir.path() + "/job.pipescope"});
        QCOMPARE(QDir(dir.path() + "/copy").entryList(QDir::Files | QDir::Hidden), before); // no -shm, no lock file
        QVERIFY(!QFile::exists(copy + "-shm"));
        QVERIFY2(r.err.contains("pipescope import: warning: " + copy + ": changes in its write-ahead log (" + copy +
                                "-wal) were not read"),
                 qPrintable(r.err));
        QVERIFY2(!r.err.contains("cannot open"), qPrintable(r.err));
    }

    // 9/10. Sizes are bounded: small compressed inputs cannot expand into gigabytes.
    void readAllIsBounded()
    {
        QTemporaryDir dir;
        const QString file = writeFile(dir.path() + "/s.csv.gz", gzip(QByteArray(4096, '0')));
        QVERIFY_THROWS_EXCEPTION(FormatError, InputFile::readAll(file.toStdString(), 1024));
        QCOMPARE(InputFile::readAll(file.toStdString(), 4096).size(), size_t(4096));
    }
    void oversizedNamesAndMetadataAreTruncatedAndCounted()
    {
        QTemporaryDir dir;
        const QByteArray longName(static_cast<int>(kMaxStringBytes) + 1000, 'n');
        QByteArray t = "{\"deviceProperties\": [{\"id\": 0, \"name\": \"" + QByteArray(static_cast<int>(kMaxMetadataBytes), 'g') +
                       "\"}], \"traceEvents\": [{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"" + longName +
                       "\",\"pid\":0,\"tid\":7,\"ts\":1000,\"dur\":10,\"args\":{\"device\":0,\"stream\":7}}]}";
        const QString in = writeFile(dir.path() + "/t.json.gz", gzip(t));
        const QString store = dir.path() + "/job.pipescope";
        auto r = runCli({"import", in, "-o", store, "-q"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const std::string s = store.toStdString();
        QCOMPARE(count(s, "SELECT MAX(LENGTH(value)) FROM strings"), int64_t(kMaxStringBytes));
        QCOMPARE(count(s, "SELECT count FROM diagnostics WHERE kind = 'truncated:string'"), 1);
        QCOMPARE(count(s, "SELECT count FROM diagnostics WHERE kind = 'truncated:metadata'"), 1);
    }

    // 10. A gzip bomb of one huge string: refused once the token passes
    // kMaxTokenBytes, instead of being held whole (2 GB asked for 4.2 GB).
    void hugeStringTokenIsRefused()
    {
        QTemporaryDir dir;
        QByteArray t = "{\"traceEvents\": [{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"";
        t += QByteArray(static_cast<int>(kMaxTokenBytes) + (1 << 20), 'n');
        t += "\",\"pid\":0,\"tid\":7,\"ts\":1000,\"dur\":10,\"args\":{\"device\":0,\"stream\":7}}]}";
        const QString in = writeFile(dir.path() + "/bomb.json.gz", gzip(t));
        const QString store = dir.path() + "/job.pipescope";
        const auto r = runCli({"import", in, "-o", store, "-q"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(in) && r.err.contains("a string longer than 64 MiB"), qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(store));
        QCOMPARE(hiddenTemporaries(dir.path()), QStringList());
    }

    // 14. --emit-kineto writes whole jobs, and jobs do not mix on import.
    void emittedJobsAreWholeAndDoNotMix()
    {
        QTemporaryDir dir;
        const QString job = dir.path() + "/job";
        QCOMPARE(runCli({"simulate", model(), "--pp", "8", "--emit-kineto", job, "--summary"}).exitCode, 0);
        QCOMPARE(QDir(job).entryList(QDir::Files).size(), 8);
        QCOMPARE(runCli({"simulate", model(), "--pp", "4", "--emit-kineto", job, "--summary"}).exitCode, 0);
        QCOMPARE(QDir(job).entryList(QDir::Files | QDir::Hidden).size(), 4); // the pp 8 job is gone whole
        QCOMPARE(hiddenTemporaries(dir.path()), QStringList());

        const QString other = dir.path() + "/other";
        QCOMPARE(runCli({"simulate", model(), "--pp", "4", "--seed", "2", "--emit-kineto", other, "--summary"}).exitCode, 0);
        QFile::remove(job + "/rank-3.json");
        QVERIFY(QFile::copy(other + "/rank-3.json", job + "/rank-3.json"));
        auto r = runCli({"import", job, "-o", dir.path() + "/mixed.pipescope"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("belong to different jobs (their job ids differ); import the files of one job only"),
                 qPrintable(r.err));

        writeFile(other + "/notes.txt", "mine");
        auto refused = runCli({"simulate", model(), "--emit-kineto", other, "--summary"});
        QCOMPARE(refused.exitCode, 1);
        QVERIFY2(refused.err.contains("holds files other than simulated traces (notes.txt)"), qPrintable(refused.err));
        QVERIFY(QFile::exists(other + "/notes.txt"));
    }

    // 8. What-if work is sized before it starts; what would not fit is refused
    // with its size, and balancing thousands of layers stays bounded.
    void replayTooLargeIsRefusedWithItsSize()
    {
        auto r = runCli({"simulate", model(), "--pp", "256", "--v", "4", "--schedule", "interleaved", "--microbatches",
                         "10240", "--summary"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--microbatches: the schedule would run 20,971,520 steps (1024 stages x 10240 "
                                "microbatches x 2), about 1.2 GiB to replay; pipescope replays at most 10,000,000 steps"),
                 qPrintable(r.err));
    }
    void timelineTooLargeIsRefusedWithItsSize()
    {
        auto r = runCli({"simulate", model(), "--pp", "32", "--microbatches", "8000", "--json"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("the timeline would hold 512,000 steps, about 1.1 GiB of JSON in memory; pipescope "
                                "writes timelines of at most 500,000 steps"),
                 qPrintable(r.err));
        QCOMPARE(r.out, QString());
        QTemporaryDir dir;
        auto e = runCli({"simulate", model(), "--pp", "32", "--microbatches", "4000", "--emit-kineto", dir.path() + "/job",
                         "--summary"});
        QCOMPARE(e.exitCode, 1);
        QVERIFY2(e.err.contains("the simulated traces would hold 256,000 steps x 2"), qPrintable(e.err));
        QVERIFY(!QFile::exists(dir.path() + "/job"));
    }
    void manyMicrobatchesWithoutATimeline()
    {
        // 6.4 million steps: replayed in tens of bytes each when no timeline is written.
        auto r = runCli({"simulate", model(), "--pp", "32", "--microbatches", "100000", "--json", "--summary"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QJsonObject p = QJsonDocument::fromJson(r.out.toUtf8()).object()["predictions"].toArray()[0].toObject();
        QCOMPARE(p["config"].toObject()["microbatches"].toInt(), 100000);
        QVERIFY(p["iteration_ns"].toDouble() > 0);
        QVERIFY(!p["ranks"].toArray()[0].toObject().contains("actions"));
    }
    void autoBalanceOfThousandsOfLayers()
    {
        whatif::CostModel c;
        for (int l = 0; l < 4096; ++l) {
            whatif::LayerCostModel lc;
            lc.name = "layer " + std::to_string(l);
            lc.forwardNs = 1000.0 + (l % 7) * 100.0;
            lc.backwardNs = 2 * lc.forwardNs;
            c.layers.push_back(lc);
        }
        whatif::Scenario sc;
        sc.schedule = ScheduleKind::Interleaved1F1B;
        sc.pp = 16;
        sc.v = 4;
        sc.microbatches = 64;
        std::atomic<bool> stop{false};
        int reports = 0;
        WorkControl work;
        work.stop = &stop;
        work.onProgress = [&](std::string_view phase, double f) {
            QCOMPARE(QString::fromUtf8(phase.data(), int(phase.size())), QString("balancing stages"));
            QVERIFY(f >= 0 && f <= 1);
            ++reports;
        };
        whatif::BalanceOptions o;
        o.work = &work;
        const whatif::BalanceResult b = whatif::autoBalance(c, sc, o);
        QVERIFY(reports > 0);
        QVERIFY(b.replays <= 1 + o.maxRefineSteps / whatif::scenarioSteps(sc) + 1);
        QCOMPARE(b.prediction.partition.stages(), 64);
        // The slowest stage is at least the mean and at most the mean plus one layer (F + B of 1600 at most).
        double total = 0;
        for (const auto& l : c.layers)
            total += l.forwardNs + l.backwardNs;
        QVERIFY(b.bottleneckNs >= TimeNs(total / 64) - 1);
        QVERIFY(b.bottleneckNs <= TimeNs(total / 64) + 3 * 1600);
        // Cancel: the stop flag ends balancing with Cancelled.
        stop = true;
        QVERIFY_THROWS_EXCEPTION(Cancelled, whatif::autoBalance(c, sc, o));
    }
    void searchOfThousandsOfLayersIsBounded()
    {
        whatif::CostModel c;
        c.layers.assign(4096, whatif::LayerCostModel{});
        for (auto& l : c.layers) {
            l.forwardNs = 1000;
            l.backwardNs = 2000;
        }
        whatif::Scenario base;
        base.pp = 8;
        base.microbatches = 16;
        whatif::SearchSpace space;
        space.schedules = {ScheduleKind::OneFOneB, ScheduleKind::Interleaved1F1B};
        space.vs = {1, 2};
        space.microbatches = {8, 16};
        const auto rows = whatif::searchConfigurations(c, base, space);
        QCOMPARE(int(rows.size()), 4); // 1f1b v1 m8/m16, interleaved v2 m8/m16
        // Equal layers: every stage gets the same share.
        for (const auto& r : rows) {
            const int stages = r.scenario.pp * r.scenario.v;
            QCOMPARE(int(r.boundaries.size()), stages - 1);
            QCOMPARE(r.boundaries.front(), 4096 / stages);
        }
    }

    // 12. Non-finite and overflowing numbers are refused by name.
    void nonFiniteWeightsAreRefused_data()
    {
        QTest::addColumn<QString>("weights");
        QTest::addColumn<QString>("message");
        QTest::newRow("nan") << "1,nan,1,1" << "--weights: layer weight 2 is nan; weights must be finite numbers of at least 0";
        QTest::newRow("inf") << "inf,1,1,1" << "--weights: layer weight 1 is inf; weights must be finite numbers of at least 0";
        QTest::newRow("negative") << "1,1,-2,1" << "--weights: layer weight 3 is -2; weights must be finite numbers of at least 0";
    }
    void nonFiniteWeightsAreRefused()
    {
        QFETCH(QString, weights);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const QString job = dir.path() + "/job";
        QCOMPARE(runCli({"simulate", model(), "--pp", "4", "--emit-kineto", job, "--summary"}).exitCode, 0);
        QCOMPARE(runCli({"import", job, "-o", dir.path() + "/job.pipescope", "-q"}).exitCode, 0);
        auto r = runCli({"whatif", dir.path() + "/job.pipescope", "--layers", "4", "--weights", weights});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
        QVERIFY2(!r.out.contains("speed-up"), qPrintable(r.out));
    }
    void overflowingCostsAreNotADeadlock()
    {
        Schedule s = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 4);
        whatif::ReplayCosts costs;
        costs.stages.assign(2, whatif::StageCost{kMaxTimeNs / 2, kMaxTimeNs / 2, 0, 0});
        try {
            whatif::Replay().run(s, costs);
            QFAIL("replayed times beyond the clock");
        } catch (const Error& e) {
            const QString m = e.what();
            QVERIFY2(m.contains("lies beyond the nanosecond clock (about 146 years); the costs are too large"), qPrintable(m));
            QVERIFY2(!m.contains("deadlock"), qPrintable(m));
        }
        costs.stages.assign(2, whatif::StageCost{-5, 1, 0, 0});
        QVERIFY_THROWS_EXCEPTION(Error, whatif::Replay().run(s, costs));
        whatif::ReplayCosts slow;
        slow.stages.assign(2, whatif::StageCost{1, 1, 0, 0});
        slow.boundaryBytes = {int64_t{1} << 62};
        slow.p2pBytesPerNs = 1e-9;
        try {
            whatif::Replay().run(s, slow);
            QFAIL("replayed a transfer beyond the clock");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("a transfer of 4611686018427387904 bytes lies beyond the nanosecond clock"),
                     qPrintable(QString(e.what())));
        }
    }

    // 15. One bad capture file is skipped by merge; an empty Nsight export is an error.
    void mergeSkipsABadFile()
    {
        QTemporaryDir dir;
        writeFile(dir.path() + "/rank0.host.1.pscap", "not a capture at all");
        writeFile(dir.path() + "/rank1.host.2.pscap", "neither");
        auto r = runCli({"merge", dir.path(), "-o", dir.path() + "/job.pipescope"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(dir.path() + ": none of its 2 capture files can be read (first: " + dir.path() +
                                "/rank0.host.1.pscap: "),
                 qPrintable(r.err));
        QVERIFY(!QFile::exists(dir.path() + "/job.pipescope"));
    }
    void mergeKeepsTheReadableFiles()
    {
        QTemporaryDir dir;
        {
            sql::Database db(test::path(dir, "rank0.host.1.pscap"), sql::Database::Mode::Create);
            db.exec(capture::kCaptureSchemaSql);
            db.exec("PRAGMA application_id = " + std::to_string(capture::kCaptureApplicationId));
            db.exec("PRAGMA user_version = " + std::to_string(capture::kCaptureVersion));
            db.exec("INSERT INTO meta VALUES ('rank', '0')");
            db.exec("INSERT INTO strings(value) VALUES ('gemm')");
            db.exec("INSERT INTO gpu_activities(kind, start_ns, end_ns, device, context, stream, correlation, name_id)"
                    " VALUES (0, 1000, 2000, 0, 1, 7, 1, 1)");
        }
        writeFile(dir.path() + "/rank1.host.2.pscap", "not a capture at all");
        auto r = runCli({"merge", dir.path(), "-o", dir.path() + "/job.pipescope"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("pipescope merge: warning: " + dir.path() + "/rank1.host.2.pscap: "), qPrintable(r.err));
        QVERIFY2(r.err.contains("; skipped"), qPrintable(r.err));
        QVERIFY2(r.out.contains("Merged 1 rank from 2 files"), qPrintable(r.out));
        QCOMPARE(count((dir.path() + "/job.pipescope").toStdString(), "SELECT count(*) FROM activities"), int64_t(1));
    }
    // A capture file whose every time lies outside the clock is skipped; the
    // other ranks are merged (it used to abort the whole merge in finish()).
    void mergeSkipsAFileWithoutUsableTimes()
    {
        QTemporaryDir dir;
        auto capture = [&](const char* name, int rank, const char* start, const char* end) {
            sql::Database db(test::path(dir, name), sql::Database::Mode::Create);
            db.exec(capture::kCaptureSchemaSql);
            db.exec("PRAGMA application_id = " + std::to_string(capture::kCaptureApplicationId));
            db.exec("PRAGMA user_version = " + std::to_string(capture::kCaptureVersion));
            db.exec("INSERT INTO meta VALUES ('rank', '" + std::to_string(rank) + "')");
            db.exec("INSERT INTO strings(value) VALUES ('gemm')");
            db.exec(std::string("INSERT INTO gpu_activities(kind, start_ns, end_ns, device, context, stream, correlation, name_id)"
                                " VALUES (0, ") + start + ", " + end + ", 0, 1, 7, 1, 1)");
        };
        capture("rank0.host.1.pscap", 0, "1000", "2000");
        capture("rank1.host.2.pscap", 1, "9000000000000000000", "9000000000000001000");
        auto r = runCli({"merge", dir.path(), "-o", dir.path() + "/job.pipescope"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("pipescope merge: warning: " + dir.path() + "/rank1.host.2.pscap: every time lies outside "
                                "the representable range"),
                 qPrintable(r.err));
        QVERIFY2(r.out.contains("Merged 1 rank from 2 files"), qPrintable(r.out));
        const std::string job = (dir.path() + "/job.pipescope").toStdString();
        QCOMPARE(count(job, "SELECT count(*) FROM activities"), int64_t(1));
        QCOMPARE(count(job, "SELECT count(*) FROM sources"), int64_t(1));
    }
    void emptyNsightExportIsAnError()
    {
        QTemporaryDir dir;
        const QString file = dir.path() + "/empty.sqlite";
        execSql(file, "CREATE TABLE EXPORT_META_DATA(name TEXT, value TEXT);"
                      "INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_SCHEMA_VERSION', '3');"
                      "CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);"
                      "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '');"
                      "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
                      "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER,"
                      " correlationId INTEGER, globalPid INTEGER, shortName INTEGER, demangledName INTEGER);");
        auto r = runCli({"import", file, "-o", dir.path() + "/job.pipescope"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(file + ": the Nsight export holds no CUDA activity, API calls or NVTX ranges"),
                 qPrintable(r.err));
        QVERIFY(!QFile::exists(dir.path() + "/job.pipescope"));
    }

    // ---- Second sweep ----------------------------------------------------

    // 1. A kernel's grid or block array is bounded while parsing, dropped
    // when it is not a launch shape, and counted; the store stays small.
    void hugeGridArrayIsBoundedAndCounted()
    {
        QTemporaryDir dir;
        QByteArray grid = "1";
        grid.reserve(4 << 20);
        for (int i = 0; i < 2'000'000; ++i)
            grid += ",1";
        const QByteArray t = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":1,"
                             "\"dur\":1,\"args\":{\"device\":0,\"stream\":7,\"grid\":[" + grid + "],\"block\":[1,2,3,4]}},"
                             "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":3,"
                             "\"dur\":1,\"args\":{\"device\":0,\"stream\":7,\"grid\":[8,1,1],\"block\":[640,1,1]}}]}";
        const QString in = writeFile(dir.path() + "/t.json.gz", gzip(t));
        const QString store = dir.path() + "/job.pipescope";
        auto r = runCli({"import", in, "-o", store, "-q"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(QFileInfo(store).size() < 1 << 20);
        const std::string s = store.toStdString();
        QCOMPARE(count(s, "SELECT COUNT(*) FROM activities WHERE grid IS NULL AND block IS NULL"), int64_t(1));
        QCOMPARE(count(s, "SELECT COUNT(*) FROM activities WHERE grid = '8,1,1' AND block = '640,1,1'"), int64_t(1));
        QCOMPARE(count(s, "SELECT COALESCE(SUM(count), 0) FROM diagnostics WHERE kind IN ('bad_value:grid', 'bad_value:block')"),
                 int64_t(2));
    }

    // 3. export writes to a pipe or device directly; its JSON stays clean on stdout.
    void exportToStandardOutput()
    {
        QTemporaryDir dir;
        const QString store = storeOf(dir);
        auto r = runCli({"export", store, "-o", "/dev/stdout"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QJsonParseError e{};
        const QJsonDocument doc = QJsonDocument::fromJson(r.out.toUtf8(), &e);
        QVERIFY2(e.error == QJsonParseError::NoError, qPrintable(e.errorString()));
        QCOMPARE(doc.object().value("traceEvents").toArray().isEmpty(), false);
        QVERIFY2(r.err.contains("Wrote /dev/stdout"), qPrintable(r.err));
        QVERIFY(!r.err.contains("a store"));
    }

    // 6. Piped input is read as a stream; a FIFO without a writer is an error in bounded time.
    void pipedInputIsImported()
    {
        QTemporaryDir dir;
        const QByteArray t = trace(3, "\"distributedInfo\": {\"rank\": 0, \"world_size\": 1}");
        QTemporaryDir tmp; // where the input is copied while it is read
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("TMPDIR", tmp.path());
        QProcess p;
        p.setProcessEnvironment(env);
        p.start(QString::fromUtf8(PIPESCOPE_CLI), {"import", "/dev/stdin", "-o", dir.path() + "/job.pipescope", "-q"});
        QVERIFY(p.waitForStarted());
        p.write(t);
        p.closeWriteChannel();
        QVERIFY(p.waitForFinished(60000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        const std::string s = (dir.path() + "/job.pipescope").toStdString();
        QCOMPARE(count(s, "SELECT COUNT(*) FROM activities"), int64_t(3));
        QCOMPARE(count(s, "SELECT COUNT(*) FROM sources WHERE path = '/dev/stdin'"), int64_t(1));
        // Compressed, too.
        QProcess z;
        z.setProcessEnvironment(env);
        z.start(QString::fromUtf8(PIPESCOPE_CLI), {"import", "/dev/stdin", "-o", dir.path() + "/z.pipescope", "-q"});
        QVERIFY(z.waitForStarted());
        z.write(gzip(t));
        z.closeWriteChannel();
        QVERIFY(z.waitForFinished(60000));
        QVERIFY2(z.exitCode() == 0, z.readAllStandardError().constData());
        QCOMPARE(count((dir.path() + "/z.pipescope").toStdString(), "SELECT COUNT(*) FROM activities"), int64_t(3));
        // The copy it was read from is gone.
        QCOMPARE(QDir(tmp.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden), QStringList());
    }
    void fifoWithoutWriterIsAnErrorInBoundedTime()
    {
        QTemporaryDir dir;
        const QString fifo = dir.path() + "/trace.fifo";
        QCOMPARE(::mkfifo(fifo.toLocal8Bit().constData(), 0600), 0);
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("PIPESCOPE_INPUT_WAIT_SECONDS", "1");
        p.setProcessEnvironment(env);
        p.start(QString::fromUtf8(PIPESCOPE_CLI), {"import", fifo, "-o", dir.path() + "/job.pipescope"});
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 1);
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QVERIFY2(err.contains(fifo + ": nothing arrived within 1 s (a pipe or FIFO with no writer?)"), qPrintable(err));
        QVERIFY(!QFile::exists(dir.path() + "/job.pipescope"));

        // The tokens file of a what-if is read the same way.
        QCOMPARE(runCli({"simulate", model(), "--emit-kineto", dir.path() + "/t", "--summary"}).exitCode, 0);
        QCOMPARE(runCli({"import", dir.path() + "/t", "-o", dir.path() + "/sim.pipescope", "-q"}).exitCode, 0);
        QProcess w;
        w.setProcessEnvironment(env);
        w.start(QString::fromUtf8(PIPESCOPE_CLI), {"whatif", dir.path() + "/sim.pipescope", "--microbatch-tokens", fifo});
        QVERIFY(w.waitForFinished(60000));
        QCOMPARE(w.exitCode(), 1);
        const QString werr = QString::fromUtf8(w.readAllStandardError());
        QVERIFY2(werr.contains(fifo + ": nothing arrived within 1 s"), qPrintable(werr));
    }

    // 7. Left-overs.
    void longOutputNamesCanBeWritten()
    {
        QTemporaryDir dir;
        const QString in = writeFile(dir.path() + "/rank-0.json", trace(2));
        for (int len : {250, 254, 255}) {
            const QString name = QString(len - 10, 'x') + ".pipescope";
            QCOMPARE(name.size(), len);
            auto r = runCli({"import", in, "-o", dir.path() + "/" + name, "-q"});
            QVERIFY2(r.exitCode == 0, qPrintable(r.err));
            QVERIFY(QFile::exists(dir.path() + "/" + name));
            auto rep = runCli({"report", dir.path() + "/" + name, "-o", dir.path() + "/" + QString(len - 5, 'r') + ".html"});
            QVERIFY2(rep.exitCode == 0, qPrintable(rep.err));
        }
        QVERIFY(hiddenTemporaries(dir.path()).isEmpty());
    }
    void scenarioFlagsNameThemselves()
    {
        QTemporaryDir dir;
        QCOMPARE(runCli({"simulate", model(), "--emit-kineto", dir.path() + "/t", "--summary"}).exitCode, 0);
        const QString store = dir.path() + "/sim.pipescope";
        QCOMPARE(runCli({"import", dir.path() + "/t", "-o", store, "-q"}).exitCode, 0);

        auto big = runCli({"whatif", store, "--boundaries", "99999999999"});
        QCOMPARE(big.exitCode, 2);
        QVERIFY2(big.err.contains("--boundaries") && big.err.contains("99999999999") && !big.err.contains("Could not convert"),
                 qPrintable(big.err));

        // A pipeline whose trace names no layers: --layers and --measured-boundaries say where they are.
        const std::string bare = test::path(dir, "bare.pipescope");
        writeStore(pipelineTrace(PipelineSpec{}).trace, bare);
        auto measured = runCli({"whatif", QString::fromStdString(bare), "--layers", "16", "--measured-boundaries", "5,3,12"});
        QCOMPARE(measured.exitCode, 1);
        QVERIFY2(measured.err.contains("error: --measured-boundaries: "), qPrintable(measured.err));
        QVERIFY(!measured.err.contains("error: --boundaries"));

        auto types = runCli({"whatif", store, "--gpu-types", "A,A,B", "--gpu-throughput", "A=1,B=0.5"});
        QCOMPARE(types.exitCode, 1);
        QVERIFY2(types.err.contains("error: --gpu-types: 3 GPU types given in --gpu-types; the measured pipeline has 4 stages"),
                 qPrintable(types.err));

        auto sizes = runCli({"simulate", model(), "--microbatch-sizes", "", "--summary"});
        QCOMPARE(sizes.exitCode, 1);
        QVERIFY2(sizes.err.contains("--microbatch-sizes: the value is empty"), qPrintable(sizes.err));
    }
    void danglingRankLinkInAFolderIsWarned()
    {
        QTemporaryDir dir;
        QDir().mkdir(dir.path() + "/traces");
        writeFile(dir.path() + "/traces/rank-0.json", trace(2, "\"distributedInfo\": {\"rank\": 0, \"world_size\": 2}"));
        QVERIFY(QFile::link(dir.path() + "/gone/rank-1.json", dir.path() + "/traces/rank-1.json"));
        auto r = runCli({"import", dir.path() + "/traces", "-o", dir.path() + "/job.pipescope", "-q"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains(dir.path() + "/traces/rank-1.json: a symbolic link to " + dir.path() +
                                "/gone/rank-1.json, which does not exist; skipped"),
                 qPrintable(r.err));
    }
    // JSON that is not a trace in a folder of rank files is skipped by name.
    void nonTraceJsonInAFolderIsSkipped()
    {
        QTemporaryDir dir;
        QDir().mkdir(dir.path() + "/traces");
        writeFile(dir.path() + "/traces/rank-0.json", trace(2, "\"distributedInfo\": {\"rank\": 0, \"world_size\": 1}"));
        writeFile(dir.path() + "/traces/notes.json", "{\"author\": \"me\", \"runs\": 3}");
        writeFile(dir.path() + "/traces/truth.json", "[1, 2, 3]");
        auto r = runCli({"import", dir.path() + "/traces", "-o", dir.path() + "/job.pipescope", "-q"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains(dir.path() + "/traces/notes.json: no \"traceEvents\" array; not a PyTorch profiler (Kineto) "
                                "JSON trace; skipped"),
                 qPrintable(r.err));
        QVERIFY2(r.err.contains(dir.path() + "/traces/truth.json: the top level is a JSON array"), qPrintable(r.err));
        const std::string s = (dir.path() + "/job.pipescope").toStdString();
        QCOMPARE(count(s, "SELECT COUNT(*) FROM activities"), int64_t(2));
        QCOMPARE(count(s, "SELECT COUNT(*) FROM sources"), int64_t(1));
        // Named on the command line, it is still an error.
        auto named = runCli({"import", dir.path() + "/traces/notes.json", "-o", dir.path() + "/n.pipescope"});
        QCOMPARE(named.exitCode, 1);
        // A damaged trace in a folder stays an error.
        writeFile(dir.path() + "/traces/rank-1.json", "{\"traceEvents\": [{\"ph\":\"X\",");
        auto damaged = runCli({"import", dir.path() + "/traces", "-o", dir.path() + "/d.pipescope"});
        QCOMPARE(damaged.exitCode, 1);
        QVERIFY2(damaged.err.contains(dir.path() + "/traces/rank-1.json: "), qPrintable(damaged.err));
    }
};

QTEST_GUILESS_MAIN(TstHardening)
#include "tst_hardening.moc"
