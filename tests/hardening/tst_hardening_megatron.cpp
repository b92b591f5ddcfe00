// The Megatron step-timing importer's defects found by the security review
// (issue 39, defects 9 and 13; issue 36, item 9), kept fixed: a folder with a
// rank's file empty, records out of order, durations out of range, --rank,
// nesting, and MegatronApp's published folders with their aggregated file.
// Each test writes its small input and states the exit code and the message.
#include "TestSupport.h"
#include "store/Sqlite.h"

#include <QDir>
#include <QFile>
#include <QtTest>

#include <algorithm>

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

// One iteration of one rank of a 1F1B job, as MegatronApp's tracer writes
// it: records 1 to 6 are the iteration's begin, forward begin and end,
// backward begin and end, and the iteration's end.
QList<QByteArray> iterationRecords(int rank, const QByteArray& durationWall = "31000", const QByteArray& forwardEnd = "5000")
{
    const QByteArray pp = QByteArray::number(rank);
    return {"{\"name\": \"iteration\", \"ph\": \"B\", \"pad_before\": 0}",
            "{\"name\": \"forward\", \"ph\": \"B\", \"rel_ts\": 1000}",
            "{\"microbatch\": 0, \"model_chunk\": 0, \"pp_rank\": " + pp + ", \"name\": \"forward\", \"ph\": \"E\", \"rel_ts\": " +
                forwardEnd + "}",
            "{\"name\": \"backward\", \"ph\": \"B\", \"rel_ts\": 20000}",
            "{\"microbatch\": 0, \"model_chunk\": 0, \"pp_rank\": " + pp + ", \"name\": \"backward\", \"ph\": \"E\", \"rel_ts\": 28000}",
            "{\"name\": \"iteration\", \"ph\": \"E\", \"rel_ts\": 30000, \"duration_wall\": " + durationWall +
                ", \"duration_cuda\": 30000}"};
}

QByteArray list(const QList<QByteArray>& records) { return "[\n" + records.join(",\n") + "\n]\n"; }

QByteArray rankFile(int rank, int iterations = 1)
{
    QList<QByteArray> records;
    for (int i = 0; i < iterations; ++i)
        records += iterationRecords(rank);
    return list(records);
}

QString megatronName(int rank)
{
    return QString("benchmark-data-0-pipeline-%1-tensor-0.json").arg(rank);
}

// MegatronApp's aggregate.py output for two ranks, one iteration (ts in us).
QByteArray aggregatedFile()
{
    auto event = [](const char* name, const char* ph, int ts, int pid, const QByteArray& args) {
        return QByteArray("{\"name\": \"") + name + "\", \"cname\": \"thread_state_running\", \"ph\": \"" + ph +
               "\", \"ts\": " + QByteArray::number(ts) + ", \"pid\": " + QByteArray::number(pid) +
               ", \"tid\": 0, \"args\": {\"iteration\": 0" + args + "}}";
    };
    auto end = [](int rank) {
        return ", \"microbatch\": 0, \"model_chunk\": 0, \"pp_rank\": " + QByteArray::number(rank);
    };
    return list({event("forward", "B", 1, 0, ""), event("forward", "E", 5, 0, end(0)), event("forward", "B", 6, 1, ""),
                 event("forward", "E", 10, 1, end(1)), event("backward", "B", 11, 1, ""),
                 event("backward", "E", 19, 1, end(1)), event("backward", "B", 20, 0, ""),
                 event("backward", "E", 28, 0, end(0))});
}

int64_t count(const QString& store, const std::string& sql)
{
    sql::Database db(store.toStdString(), sql::Database::Mode::ReadOnly);
    auto st = db.prepare(sql);
    st.step();
    return st.int64(0);
}

// An import that fails: exit status 1, its error in one line (the last)
// naming the input; `err` (when given) gets stderr.
void expectRefused(const QStringList& args, const QString& message, QString* err = nullptr)
{
    const CliResult r = runCli(QStringList{"import"} + args);
    const QStringList lines = r.err.split('\n', Qt::SkipEmptyParts);
    const QString last = lines.isEmpty() ? QString() : lines.last();
    if (r.exitCode != 1 || !last.startsWith("pipescope import: error: ") || !last.contains(message))
        qWarning("exit %d, stderr:\n%s\nexpected: %s", r.exitCode, qPrintable(r.err), qPrintable(message));
    QCOMPARE(r.exitCode, 1);
    QVERIFY(last.startsWith("pipescope import: error: "));
    QVERIFY(last.contains(message));
    if (err)
        *err = r.err;
}

} // namespace

class TstHardeningMegatron : public QObject {
    Q_OBJECT
private slots:
    // Defect 13.1: a folder whose last rank's file is empty imported as a
    // pipeline of 3 ranks with a warning. Every file of a Megatron folder is
    // a rank's: an empty one (or a list without steps) is an error naming it.
    void emptyRankFileInAFolderIsAnError_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QByteArray>("contents");
        QTest::addColumn<QString>("why");
        QTest::newRow("empty, named as MegatronApp names it") << megatronName(3) << QByteArray() << "file is empty";
        QTest::newRow("empty, other name") << "rank3.json" << QByteArray() << "file is empty";
        QTest::newRow("an empty list") << "rank3.json" << QByteArray("[]\n") << "a JSON list without Megatron step records";
    }
    void emptyRankFileInAFolderIsAnError()
    {
        QFETCH(QString, name);
        QFETCH(QByteArray, contents);
        QFETCH(QString, why);
        QTemporaryDir dir;
        for (int r = 0; r < 3; ++r)
            writeFile(dir.path() + "/" + megatronName(r), rankFile(r));
        writeFile(dir.path() + "/" + name, contents);
        expectRefused({dir.path(), "-o", dir.path() + "/job.pipescope"},
                      dir.path() + "/" + name + ": " + why +
                          ", in a folder of Megatron timing files: each is one rank's, and the pipeline would be wrong "
                          "without it; re-copy it, or name the rank files to import");
        QVERIFY(!QFile::exists(dir.path() + "/job.pipescope"));
    }

    // Defect 13.2: ranks missing from the files named no file. The message
    // names the file of the highest rank and the ranks missing.
    void missingRankNamesTheFile()
    {
        QTemporaryDir dir;
        for (int r : {0, 1, 3})
            writeFile(dir.path() + "/" + megatronName(r), rankFile(r));
        expectRefused({dir.path(), "-o", dir.path() + "/job.pipescope"},
                      dir.path() + "/" + megatronName(3) +
                          " holds pipeline rank 3, but no Megatron timing file holds rank 2 (ranks found: 0-1,3); "
                          "import every rank's file together");
    }

    // Defect 13.2: records shuffled within their iterations are read in time
    // order, and so is a file of one iteration in any order (its first
    // record need not be the iteration's begin).
    void shuffledRecordsAreRead_data()
    {
        QTest::addColumn<int>("iterations");
        QTest::newRow("one iteration, every record reversed") << 1;
        QTest::newRow("three iterations, steps reversed in each") << 3;
    }
    void shuffledRecordsAreRead()
    {
        QFETCH(int, iterations);
        QTemporaryDir dir;
        writeFile(dir.path() + "/" + megatronName(0), rankFile(0, iterations));
        QList<QByteArray> records;
        for (int i = 0; i < iterations; ++i) {
            QList<QByteArray> it = iterationRecords(1);
            if (iterations == 1)
                std::reverse(it.begin(), it.end());
            else
                std::reverse(it.begin() + 1, it.end() - 1);
            records += it;
        }
        writeFile(dir.path() + "/" + megatronName(1), list(records));
        const QString store = dir.path() + "/job.pipescope";
        const CliResult r = runCli({"import", dir.path(), "-o", store, "-q"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(count(store, "SELECT COUNT(*) FROM ranks"), int64_t(2));
        // Rank 1's forward keeps its recorded times in every iteration.
        QCOMPARE(count(store, "SELECT COUNT(*) FROM cpu_ranges c JOIN strings s ON s.id = c.name_id WHERE c.rank = 1 AND "
                              "s.value = 'pipescope/forward mb=0 chunk=0' AND c.end_ns - c.start_ns = 4000"),
                 int64_t(iterations));
    }

    // Defect 13.2: records moved out of their iteration in a file of several
    // cannot be placed: refused, naming the file and the record.
    void recordsOutsideTheirIterationAreRefused()
    {
        QTemporaryDir dir;
        QList<QByteArray> records = iterationRecords(0) + iterationRecords(0);
        records.move(1, 0); // the first forward's begin before the first iteration's
        writeFile(dir.path() + "/r0.json", list(records));
        expectRefused({dir.path() + "/r0.json", "-o", dir.path() + "/job.pipescope"},
                      dir.path() + "/r0.json: record 1 (forward begin): a forward record outside an iteration; in a file "
                                   "of 2 iterations each must hold its steps between its begin and end records (records "
                                   "out of order)");
    }

    // Defect 13.3: a duration_wall of 1 ns dropped rank 0 silently, 2^64 - 1
    // was printed as "lasts -1 ns". Out-of-range values are refused naming
    // the file and the record, never wrapped.
    void durationsOutOfRangeAreRefused_data()
    {
        QTest::addColumn<QByteArray>("durationWall");
        QTest::addColumn<QByteArray>("forwardEnd");
        QTest::addColumn<QString>("message");
        QTest::newRow("1 ns") << QByteArray("1") << QByteArray("5000")
                              << "r0.json: iteration 0 lasts 1 ns by its end record (record 6), but its steps run until "
                                 "28,000 ns; the file's times do not fit together";
        QTest::newRow("2^64 - 1") << QByteArray("18446744073709551615") << QByteArray("5000")
                                  << "r0.json: record 6 (iteration end): duration_wall 18446744073709551615 is not an "
                                     "iteration length from 1 ns to 10 s (in ns; longer iterations are not supported)";
        QTest::newRow("negative") << QByteArray("-1") << QByteArray("5000")
                                  << "r0.json: record 6 (iteration end): duration_wall -1 is not an iteration length";
        QTest::newRow("rel_ts 2^63 - 1") << QByteArray("31000") << QByteArray("9223372036854775807")
                                         << "r0.json: record 3 (forward end): rel_ts 9223372036854775807 is not a time "
                                            "from 0 to 10 s (in ns) since the iteration began";
        QTest::newRow("rel_ts a fraction") << QByteArray("31000") << QByteArray("5000.5")
                                           << "r0.json: record 3 (forward end): rel_ts 5000.5 is not a time";
    }
    void durationsOutOfRangeAreRefused()
    {
        QFETCH(QByteArray, durationWall);
        QFETCH(QByteArray, forwardEnd);
        QFETCH(QString, message);
        QTemporaryDir dir;
        writeFile(dir.path() + "/r0.json", list(iterationRecords(0, durationWall, forwardEnd)));
        expectRefused({dir.path() + "/r0.json", "-o", dir.path() + "/job.pipescope"}, dir.path() + "/" + message);
    }

    // Defect 9 (Megatron): --rank was ignored by the pipeline's rank check.
    // It sets the rank of its file.
    void explicitRankCounts()
    {
        QTemporaryDir dir;
        writeFile(dir.path() + "/r.json", rankFile(3));
        const QString store = dir.path() + "/job.pipescope";
        const CliResult r = runCli({"import", dir.path() + "/r.json", "--rank", "0", "-o", store, "-q"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(count(store, "SELECT COUNT(*) FROM ranks"), int64_t(1));
        QCOMPARE(count(store, "SELECT MAX(rank) FROM ranks"), int64_t(0));
        // Without --rank the file's own rank 3 is a pipeline with ranks 0-2 missing.
        expectRefused({dir.path() + "/r.json", "-o", store},
                      dir.path() + "/r.json holds pipeline rank 3, but no Megatron timing file holds ranks 0-2");
    }

    // Defect 13.5: "[[[[..." inside a Megatron list expanded to gigabytes.
    // Nesting is refused before parsing, in one line naming the file.
    void nestedJsonIsRefused()
    {
        QTemporaryDir dir;
        writeFile(dir.path() + "/r0.json", "[{\"name\": \"iteration\", \"ph\": \"B\", \"pad_before\": 0},\n" +
                                               QByteArray(200000, '[') + QByteArray(200000, ']') + "]\n");
        QString err;
        expectRefused({dir.path() + "/r0.json", "-o", dir.path() + "/job.pipescope"},
                      dir.path() + "/r0.json: nested more than 8 levels deep; a Megatron timing file is a JSON list of "
                                   "flat begin/end records (docs/import-megatron.md)",
                      &err);
        QCOMPARE(err.count('\n'), qsizetype(1));
    }

    // Issue 36 item 9: MegatronApp's published folders hold the aggregated
    // file beside the per-rank files; `import FOLDER` failed with "no step
    // records with a pp_rank". It is skipped with a note beside the rank files.
    void aggregatedFileBesideRankFilesIsSkipped()
    {
        QTemporaryDir dir;
        for (int r = 0; r < 2; ++r)
            writeFile(dir.path() + "/" + megatronName(r), rankFile(r));
        const QString aggregated = dir.path() + "/data-1-pipeline-2-tensor-1-app-aggregated.json";
        writeFile(aggregated, aggregatedFile());
        const QString store = dir.path() + "/job.pipescope";
        const CliResult r = runCli({"import", dir.path(), "-o", store});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("pipescope import: warning: " + aggregated +
                                ": MegatronApp's aggregated file (pipeline ranks 0-1 in one file); skipped, the per-rank "
                                "files are read"),
                 qPrintable(r.err));
        QVERIFY2(r.out.startsWith("Imported 2 files into"), qPrintable(r.out));
        QCOMPARE(count(store, "SELECT COUNT(*) FROM ranks"), int64_t(2));
    }

    // ... and read, every rank of it, when it is imported alone.
    void aggregatedFileAloneIsRead()
    {
        QTemporaryDir dir;
        const QString aggregated = dir.path() + "/aggregated.json";
        writeFile(aggregated, aggregatedFile());
        const QString store = dir.path() + "/job.pipescope";
        const CliResult r = runCli({"import", aggregated, "-o", store, "-q"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(count(store, "SELECT COUNT(*) FROM ranks"), int64_t(2));
        // Rank 1's forward: 6 us to 10 us, from the iteration's first record at 1 us.
        QCOMPARE(count(store, "SELECT COUNT(*) FROM cpu_ranges c JOIN strings s ON s.id = c.name_id WHERE c.rank = 1 AND "
                              "s.value = 'pipescope/forward mb=0 chunk=0' AND c.start_ns = 5000 AND c.end_ns = 9000"),
                 int64_t(1));
    }

    // pp_rank (with microbatch and model_chunk) under `args` is read too.
    void ppRankUnderArgsIsRead()
    {
        QTemporaryDir dir;
        QByteArray text = rankFile(1);
        text.replace("{\"microbatch\": 0, \"model_chunk\": 0, \"pp_rank\": 1, ", "{");
        text.replace("\"ph\": \"E\", \"rel_ts\": 5000}",
                     "\"ph\": \"E\", \"rel_ts\": 5000, \"args\": {\"microbatch\": 0, \"model_chunk\": 0, \"pp_rank\": 1}}");
        text.replace("\"ph\": \"E\", \"rel_ts\": 28000}",
                     "\"ph\": \"E\", \"rel_ts\": 28000, \"args\": {\"microbatch\": 0, \"model_chunk\": 0, \"pp_rank\": 1}}");
        writeFile(dir.path() + "/" + megatronName(0), rankFile(0));
        writeFile(dir.path() + "/" + megatronName(1), text);
        const QString store = dir.path() + "/job.pipescope";
        const CliResult r = runCli({"import", dir.path(), "-o", store, "-q"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(count(store, "SELECT COUNT(*) FROM ranks"), int64_t(2));
    }
};

QTEST_GUILESS_MAIN(TstHardeningMegatron)
#include "tst_hardening_megatron.moc"
