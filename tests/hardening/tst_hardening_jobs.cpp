// The third sweep's defects of sharded jobs, kept fixed: no command writes
// into a job folder it reads, a folder with files that are not traces
// imports sharded as it does into one store, the index's clock offsets,
// task counts and shard stores are checked, a FIFO never hangs a command, a
// lock left behind is named and taken over, and the index is written once
// per import, by its last task.
#include "EmittedJob.h"
#include "TestSupport.h"
#include "import/Import.h"
#include "import/ShardedImport.h"
#include "store/JobIndex.h"
#include "util/BoundedJson.h"
#include "util/Error.h"
#include "util/Format.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace pipescope;

namespace {

QByteArray readAll(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

void writeAll(const QString& path, const QByteArray& bytes)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(bytes) != bytes.size())
        qFatal("cannot write %s", qPrintable(path));
}

struct Run {
    int exitCode = -1;
    bool finished = false;
    QString out, err;
};

// The CLI with extra environment variables, given at most `seconds`; killed beyond.
Run cli(const QStringList& args, const std::map<QString, QString>& env = {}, int seconds = 300)
{
    QProcess p;
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    for (const char* v : {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE"})
        e.remove(v);
    for (const auto& [k, v] : env)
        e.insert(k, v);
    p.setProcessEnvironment(e);
    p.start(QString::fromUtf8(PIPESCOPE_CLI), args);
    Run r;
    r.finished = p.waitForFinished(seconds * 1000);
    if (!r.finished) {
        p.kill();
        p.waitForFinished(5000);
    }
    r.exitCode = r.finished && p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

QStringList entries(const QString& dir)
{
    return QDir(dir).entryList(QDir::Files | QDir::Dirs | QDir::Hidden | QDir::NoDotAndDotDot, QDir::Name);
}

} // namespace

class TstHardeningJobs : public QObject {
    Q_OBJECT

    QTemporaryDir data_;
    QString traces_; // 4 stages x 2 replicas, 2 iterations
    QString job_;    // imported with --shards 2

    // A fresh copy of the job folder to damage.
    QString copyOfJob(const QTemporaryDir& dir) const
    {
        const QString to = dir.path() + "/job";
        QDir().mkpath(to);
        for (const QString& f : QDir(job_).entryList(QDir::Files | QDir::Hidden))
            if (!QFile::copy(job_ + "/" + f, to + "/" + f))
                qFatal("cannot copy %s", qPrintable(f));
        return to;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(data_.isValid());
        traces_ = data_.path() + "/traces";
        QDir().mkpath(traces_);
        test::emitJob(traces_, 4, 2, 2);
        job_ = data_.path() + "/job";
        const Run r = cli({"import", "-q", traces_, "--shards", "2", "-o", job_});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(QFile::exists(job_ + "/job.json"));
    }

    // 1. No command writes into the job folder it reads.
    void jobFolderFilesAreNotOverwritten_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("target");
        QTest::newRow("report over the index") << QStringList{"report"} << "job.json";
        QTest::newRow("analyze --json over the index") << QStringList{"analyze", "--json"} << "job.json";
        QTest::newRow("export over a shard record") << QStringList{"export"} << "shard-0001-of-0002.json";
        QTest::newRow("whatif over a shard store") << QStringList{"whatif", "--summary"} << "shard-0000-of-0002.pipescope";
        QTest::newRow("analyze text into the folder") << QStringList{"analyze"} << "notes.txt";
        QTest::newRow("diff with the job as A") << QStringList{"diff", "JOB"} << "job.json";
    }
    void jobFolderFilesAreNotOverwritten()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, target);
        QTemporaryDir dir;
        const QString job = copyOfJob(dir);
        const QStringList before = entries(job);
        QMap<QString, QByteArray> contents;
        for (const QString& f : before)
            contents[f] = readAll(job + "/" + f);
        QStringList full = args;
        if (full.contains("JOB"))
            full.replaceInStrings("JOB", job);
        full.insert(1, job);
        full << "-o" << job + "/" + target;
        const Run r = cli(full);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(": cannot write: it lies in job folder ") &&
                     r.err.contains(", an input of this command, and would damage the job; choose an -o path outside it"),
                 qPrintable(r.err));
        QCOMPARE(entries(job), before);
        for (const QString& f : before)
            QVERIFY2(readAll(job + "/" + f) == contents[f], qPrintable(f));
        QCOMPARE(cli({"analyze", job}).exitCode, 0);
        // Beside the folder is fine, and so is a folder of traces (not a job).
        const Run beside = cli({"analyze", job, "--json", "-o", dir.path() + "/a.json"});
        QVERIFY2(beside.exitCode == 0, qPrintable(beside.err));
    }

    // 2. A folder holding JSON that is not a trace imports sharded, with any N.
    void nonTraceJsonInAShardedImport()
    {
        QTemporaryDir dir;
        const QString traces = dir.path() + "/traces";
        QDir().mkpath(traces);
        for (const QString& f : QDir(traces_).entryList(QDir::Files))
            QVERIFY(QFile::copy(traces_ + "/" + f, traces + "/" + f));
        writeAll(traces + "/truth.json", "[1, 2, 3]");
        writeAll(traces + "/notes.json", "{\"author\": \"me\"}");
        for (int n : {3, 5}) {
            const QString job = dir.path() + QString("/job%1").arg(n);
            const Run r = cli({"import", "-q", traces, "--shards", QString::number(n), "-o", job});
            QVERIFY2(r.exitCode == 0, qPrintable(r.err));
            const JobIndex index = readJobIndex(job.toStdString());
            QVERIFY(index.complete());
            std::vector<int> ranks;
            for (const auto& rec : index.records)
                ranks.insert(ranks.end(), rec.ranks.begin(), rec.ranks.end());
            std::sort(ranks.begin(), ranks.end());
            QCOMPARE(ranks, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
            QVERIFY2(r.err.contains("truth.json: the top level is a JSON array"), qPrintable(r.err));
        }
        // The re-run of one task, as the incomplete-job message recommends.
        const QString job = dir.path() + "/job3";
        for (int k = 0; k < 3; ++k) {
            const Run again = cli({"import", "-q", traces, "--shard", QString("%1/3").arg(k), "-o", job});
            QVERIFY2(again.exitCode == 0, qPrintable(again.err));
        }
        QCOMPARE(cli({"analyze", job}).exitCode, 0);
    }

    // 3. Clock offsets in the index are checked like times in a store.
    void clockOffsetsAreRangeChecked_data()
    {
        QTest::addColumn<QByteArray>("offsets");
        QTest::addColumn<QString>("message");
        QTest::newRow("most negative") << QByteArray("[0, -9223372036854775807]")
                                       << "shard 1's clock offset -9223372036854775807 ns is outside the times a job can hold";
        QTest::newRow("146 years") << QByteArray("[0, 4600000000000000000]")
                                   << "shard 1's clock offset 4600000000000000000 ns moves its records outside the times a job can hold";
        QTest::newRow("a day away") << QByteArray("[0, 86400000000000]")
                                    << "shard 1's clock offset 86400000000000 ns moves it more than an hour away from every other shard";
    }
    void clockOffsetsAreRangeChecked()
    {
        QFETCH(QByteArray, offsets);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const QString job = copyOfJob(dir);
        QJsonObject index = QJsonDocument::fromJson(readAll(job + "/job.json")).object();
        index["shard_clock_offsets_ns"] = QJsonValue(); // replaced textually below (64-bit values)
        QByteArray text = QJsonDocument(index).toJson();
        text.replace("\"shard_clock_offsets_ns\": null", "\"shard_clock_offsets_ns\": " + offsets);
        writeAll(job + "/job.json", text);
        for (const char* command : {"analyze", "report", "export", "info"}) {
            const QStringList args = QString(command) == "info" ? QStringList{command, job}
                                                                  : QStringList{command, job, "-o", dir.path() + "/out"};
            const Run r = cli(args);
            QCOMPARE(r.exitCode, 1);
            QVERIFY2(r.err.contains(job + "/job.json: the job index is damaged: " + message) && r.err.contains("re-run the import"),
                     qPrintable(command + (": " + r.err)));
            QVERIFY(!QFile::exists(dir.path() + "/out"));
        }
        // Offsets that keep the shards together are read.
        text = QJsonDocument(QJsonDocument::fromJson(readAll(job_ + "/job.json")).object()).toJson();
        text.replace("\"shard_clock_offsets_ns\": null", "\"shard_clock_offsets_ns\": [0, 1000]");
        writeAll(job + "/job.json", text);
        QCOMPARE(cli({"analyze", job}).exitCode, 0);
    }

    // 4. A FIFO with no writer never hangs a store-reading command.
    void fifoWithoutAWriterIsRefused()
    {
        QTemporaryDir dir;
        const QString fifo = dir.path() + "/store.fifo";
        QCOMPARE(::mkfifo(fifo.toUtf8().constData(), 0600), 0);
        for (const QStringList& args : {QStringList{"analyze", fifo}, QStringList{"info", fifo}, QStringList{"report", fifo, "-o", dir.path() + "/r.html"},
                                        QStringList{"whatif", fifo, "--pp", "2"}, QStringList{"export", fifo, "-o", dir.path() + "/t.json"}}) {
            const Run r = cli(args, {}, 20);
            QVERIFY2(r.finished, qPrintable(args.join(' ') + " hung on a FIFO"));
            QCOMPARE(r.exitCode, 1);
            QVERIFY2(r.err.contains(fifo + ": is a pipe or device, not a store file;"), qPrintable(r.err));
        }
        // diff imports a pipe (a copy first), waiting a bounded time for its writer.
        const Run d = cli({"diff", fifo, job_}, {{"PIPESCOPE_INPUT_WAIT_SECONDS", "1"}}, 30);
        QVERIFY2(d.finished, "diff hung on a FIFO");
        QCOMPARE(d.exitCode, 1);
    }

    // 5. Task counts are bounded, with the flag or variable named.
    void taskCountsAreBounded()
    {
        QTemporaryDir dir;
        const QString job = dir.path() + "/job";
        Run r = cli({"import", traces_, "-o", job, "--shard", "0/999999999"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--shard 0/999999999: at most 65536 tasks may import one job"), qPrintable(r.err));
        r = cli({"import", traces_, "-o", job}, {{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "999999999"}});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("SLURM_STEP_NUM_TASKS=999999999: at most 65536 tasks"), qPrintable(r.err));
        QVERIFY(!QFile::exists(job + "/.job.lock"));
        QVERIFY(!QFile::exists(job + "/job.json"));
    }

    // 6. The index is written by the last task only; a lock left behind is taken over or named.
    void lastTaskWritesTheIndex()
    {
        QTemporaryDir dir;
        const QString job = dir.path() + "/job";
        Run r = cli({"import", traces_, "-o", job, "--shard", "1/3"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("Waiting for the tasks of 2 more shards;"), qPrintable(r.out));
        const QByteArray shell = readAll(job + "/job.json");
        r = cli({"import", traces_, "-o", job, "--shard", "0/3"});
        QVERIFY2(r.out.contains("Waiting for the tasks of 1 more shard;"), qPrintable(r.out));
        QCOMPARE(readAll(job + "/job.json"), shell); // not rewritten by a task that is not the last
        // Readers still see which tasks ended.
        r = cli({"analyze", job});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("1 of 3 shards are missing (2;"), qPrintable(r.err));
        // A lock left by a task of this host that is gone is taken over at once.
        writeAll(job + "/.job.lock", QByteArray(QSysInfo::machineHostName().toUtf8()) + " 2147483646\n");
        r = cli({"import", traces_, "-o", job, "--shard", "2/3"}, {}, 60);
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("The job is complete: 3 shards"), qPrintable(r.out));
        QVERIFY(!QFile::exists(job + "/.job.lock"));
        QCOMPARE(cli({"analyze", job}).exitCode, 0);
        // One of another host, old: removed with a warning naming its owner and age.
        writeAll(job + "/.job.lock", "far-away-host 1234\n");
        const QByteArray lock = (job + "/.job.lock").toUtf8();
        struct timespec old[2] = {{::time(nullptr) - 600, 0}, {::time(nullptr) - 600, 0}};
        QCOMPARE(::utimensat(AT_FDCWD, lock.constData(), old, 0), 0);
        r = cli({"import", traces_, "-o", job, "--shard", "2/3"}, {}, 60);
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("removed a lock left 6") && r.err.contains(" s ago by task 1234 on far-away-host"), qPrintable(r.err));
    }

    // Many tasks, most without a rank file: every one ends, the last writes the index.
    void manyTasksSideBySide()
    {
        QTemporaryDir dir;
        const QString job = dir.path() + "/job";
        const Run r = cli({"import", "-q", traces_, "--shards", "24", "-o", job});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const JobIndex index = readJobIndex(job.toStdString());
        QVERIFY(index.complete());
        QCOMPARE(static_cast<int>(index.records.size()), 24);
        QCOMPARE(cli({"analyze", job}).exitCode, 0);
    }

    // 7. A damaged job folder is refused, not merged.
    void damagedFoldersAreRefused()
    {
        QTemporaryDir dir;
        QTemporaryDir other;
        const QString job = copyOfJob(dir);
        // Another store (here the other shard's) in place of shard 1's.
        QVERIFY(QFile::remove(job + "/shard-0001-of-0002.pipescope"));
        QVERIFY(QFile::copy(job + "/shard-0000-of-0002.pipescope", job + "/shard-0001-of-0002.pipescope"));
        Run r = cli({"analyze", job});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("shard 1 of 2 (shard-0001-of-0002.pipescope) holds ranks ") &&
                     r.err.contains("the store is not this job's (replaced or copied from another import); re-run the "
                                    "import of that shard with --shard 1/2"),
                 qPrintable(r.err));
        // A done record that names no store but lists ranks.
        const QString job2 = copyOfJob(other);
        QByteArray text = readAll(job2 + "/job.json");
        text.replace("\"file\": \"shard-0000-of-0002.pipescope\"", "\"file\": \"\"");
        writeAll(job2 + "/job.json", text);
        r = cli({"analyze", job2});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("the job index is damaged: shard 0 of 2 lists 4 ranks but names no store"), qPrintable(r.err));
    }

    // 9. The index and shard records refuse deep nesting and oversize before parsing.
    void nestedIndexIsRefused()
    {
        QTemporaryDir dir;
        const QString job = copyOfJob(dir);
        writeAll(job + "/job.json", QByteArray(100000, '['));
        const Run r = cli({"info", job});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(job + "/job.json: the job index is damaged (nested more than 64 levels deep; re-run the import)"),
                 qPrintable(r.err));
        // Found by fuzz_jobindex: fields of the wrong type are a damaged index or record, not a crash.
        writeAll(job + "/job.json", "{\"format\": 5}");
        Run wrong = cli({"info", job});
        QCOMPARE(wrong.exitCode, 1);
        QVERIFY2(wrong.err.contains(job + "/job.json: not a pipescope job index; re-run the import"), qPrintable(wrong.err));
        QByteArray fraction = readAll(job_ + "/job.json");
        QVERIFY(fraction.contains("\"pid\": "));
        fraction.replace("\"pid\": ", "\"pid\": 4.4e57, \"was_pid\": ");
        writeAll(job + "/job.json", fraction);
        wrong = cli({"info", job});
        QCOMPARE(wrong.exitCode, 1);
        QVERIFY2(wrong.err.contains(job + "/job.json: the job index is damaged (a fraction where a whole number belongs); "
                                          "re-run the import"),
                 qPrintable(wrong.err));
        const QString partial = dir.path() + "/partial";
        QCOMPARE(cli({"import", "-q", traces_, "--shard", "0/3", "-o", partial}).exitCode, 0);
        writeAll(partial + "/shard-0001-of-0003.json", "{\"plan\": \"x\", \"shards\": [3]}");
        wrong = cli({"analyze", partial});
        QCOMPARE(wrong.exitCode, 1);
        QVERIFY2(wrong.err.contains("the sharded job is incomplete: 2 of 3 shards are missing (1, 2;"), qPrintable(wrong.err));
        QCOMPARE(jsonDepth("{\"a\": [1, {\"b\": \"[[[[\"}]}"), size_t(3));
        QCOMPARE(jsonDepth(std::string(100, '['), 10), size_t(11));
    }

    // 11. An interrupted diff leaves no temporary folder.
    void interruptedDiffLeavesNoTemporaries()
    {
        QTemporaryDir tmp;
        for (int sig : {SIGINT, SIGTERM}) {
            QProcess p;
            QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
            e.insert("TMPDIR", tmp.path());
            p.setProcessEnvironment(e);
            p.start(QString::fromUtf8(PIPESCOPE_CLI), {"diff", traces_, traces_});
            QVERIFY(p.waitForStarted());
            bool seen = false;
            for (int i = 0; i < 400 && !seen && p.state() == QProcess::Running; ++i) {
                QTest::qWait(5);
                seen = !QDir(tmp.path()).entryList({"pipescope-run-*"}, QDir::Dirs).isEmpty();
            }
            if (!seen) {
                p.waitForFinished(60000);
                QSKIP("the diff ended before it could be interrupted");
            }
            ::kill(static_cast<pid_t>(p.processId()), sig);
            QVERIFY(p.waitForFinished(30000));
            QVERIFY2(QDir(tmp.path()).entryList({"pipescope-run-*"}, QDir::Dirs).isEmpty(),
                     qPrintable(QDir(tmp.path()).entryList().join(' ')));
        }
    }

    // 14. Messages.
    void messagesNameTheInput()
    {
        QTemporaryDir dir;
        // import of a job folder
        Run r = cli({"import", job_, "-o", dir.path() + "/x.pipescope"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(job_ + ": is a pipescope job folder (a sharded import's result), not a folder of traces"),
                 qPrintable(r.err));
        // an iteration no int holds
        r = cli({"analyze", job_, "--iteration", "99999999999"});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("pipescope analyze: error: --iteration 99999999999: not a value this option takes"),
                 qPrintable(r.err));
        // -o - is standard output
        r = cli({"analyze", job_, "--json", "-o", "-"}, {}, 120);
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.contains("\"schema\""));
        QVERIFY(!QFile::exists("-"));
        r = cli({"import", traces_ + "/rank-0.json", "-o", "-"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("-o -: a store cannot be written to standard output"), qPrintable(r.err));
        // --auto-balance of a pipeline whose layers do not split evenly: balanced, not refused
        r = cli({"whatif", job_, "--layers", "8", "--pp", "3", "--auto-balance", "--summary"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("auto-balance"), qPrintable(r.out));
        QVERIFY(!r.err.contains("give stage boundaries, auto-balance"));
        // bidirectional controls are shown as their code, in messages and in info's tables
        QCOMPARE(QString::fromStdString(printable("a\xE2\x80\xAE" "b\xD8\x9C" "c")), QString("a\\u202eb\\u061cc"));
        const QString bidi = dir.path() + QString::fromUtf8("/rank-0-\xE2\x80\xAEtxt.json");
        QVERIFY(QFile::copy(traces_ + "/rank-0.json", bidi));
        QCOMPARE(cli({"import", "-q", bidi, "-o", dir.path() + "/b.pipescope"}).exitCode, 0);
        r = cli({"info", dir.path() + "/b.pipescope"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.out.contains("rank-0-\\u202etxt.json") && !r.out.contains(QString::fromUtf8("\xE2\x80\xAE")),
                 qPrintable(r.out));
    }

    // 15. diff of a data-parallel job without a pipeline: every rank a replica.
    void diffDpWithoutAPipeline()
    {
        const QString trace = QString::fromUtf8(PIPESCOPE_EXTERNAL_DATA) + "/kineto/hta-sampled-128rank-r0.json.gz";
        const QString trace1 = QString::fromUtf8(PIPESCOPE_EXTERNAL_DATA) + "/kineto/hta-sampled-128rank-r1.json.gz";
        if (!QFile::exists(trace) || !QFile::exists(trace1))
            QSKIP("shared external data not found");
        QTemporaryDir dir;
        const QString store = dir.path() + "/two.pipescope";
        QCOMPARE(cli({"import", "-q", trace, trace1, "-o", store}).exitCode, 0);
        const Run r = cli({"diff", store, store, "--json"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QJsonObject a = QJsonDocument::fromJson(r.out.toUtf8()).object()["a"].toObject()["config"].toObject();
        QCOMPARE(a["pipeline"].toBool(), false);
        QCOMPARE(a["dp"].toInt(), 2);
    }
};

QTEST_GUILESS_MAIN(TstHardeningJobs)
#include "tst_hardening_jobs.moc"
