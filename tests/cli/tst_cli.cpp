// The command-line tool end to end: import and info on real traces, exit
// codes, and one clear error line for each kind of bad input.
#include "TestSupport.h"
#include "store/Store.h"
#include "util/Format.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>

#include <cstring>

using namespace pipescope::test;

namespace {

QJsonObject infoJson(const QString& store)
{
    auto r = runCli({"info", store, "--json"});
    if (r.exitCode != 0)
        qWarning() << r.err;
    return QJsonDocument::fromJson(r.out.toUtf8()).object();
}

QString writeFile(const QTemporaryDir& dir, const char* name, const QByteArray& contents)
{
    QString p = dir.path() + "/" + name;
    QFile f(p);
    f.open(QIODevice::WriteOnly);
    f.write(contents);
    return p;
}

int filesIn(const QTemporaryDir& dir)
{
    return QDir(dir.path()).entryList(QDir::Files | QDir::Hidden | QDir::NoDotAndDotDot).size();
}

} // namespace

class TstCli : public QObject {
    Q_OBJECT
private slots:
    void helpListsCommands()
    {
        auto r = runCli({"--help"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.contains("import"));
        QVERIFY(r.out.contains("info"));
        auto sub = runCli({"import", "--help"});
        QCOMPARE(sub.exitCode, 0);
        QVERIFY(sub.out.contains("--align"));
    }

    void usageErrorsExitTwo_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::newRow("no command") << QStringList{};
        QTest::newRow("unknown command") << QStringList{"frobnicate"};
        QTest::newRow("import without output") << QStringList{"import", "x.json"};
        QTest::newRow("bad align") << QStringList{"import", "x.json", "-o", "y", "--align", "sideways"};
        QTest::newRow("unknown flag") << QStringList{"info", "x", "--colour"};
    }
    void usageErrorsExitTwo()
    {
        QFETCH(QStringList, args);
        auto r = runCli(args);
        QCOMPARE(r.exitCode, 2);
        QVERIFY(!r.err.isEmpty());
    }

    // A misspelt command is named, with the nearest command when one is close.
    void unknownCommandSuggests_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("err");
        QTest::newRow("analyse") << QStringList{"analyse", "x"}
                                 << "pipescope: unknown command 'analyse'; did you mean 'analyze'?\n";
        QTest::newRow("swapped letters") << QStringList{"improt", "x", "-o", "y"}
                                         << "pipescope: unknown command 'improt'; did you mean 'import'?\n";
        QTest::newRow("capitalised") << QStringList{"Info", "x"}
                                     << "pipescope: unknown command 'Info'; did you mean 'info'?\n";
        QTest::newRow("two slips in a long name") << QStringList{"anlyse", "x"}
                                                  << "pipescope: unknown command 'anlyse'; did you mean 'analyze'?\n";
        QTest::newRow("one slip in a short name") << QStringList{"ifo", "x"}
                                                  << "pipescope: unknown command 'ifo'; did you mean 'info'?\n";
        QTest::newRow("two slips in a short name")
            << QStringList{"if", "x"} << "pipescope: unknown command 'if'; run pipescope --help for the list of commands\n";
        QTest::newRow("nothing close")
            << QStringList{"frobnicate"}
            << "pipescope: unknown command 'frobnicate'; run pipescope --help for the list of commands\n";
    }
    void unknownCommandSuggests()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, err);
        auto r = runCli(args);
        QCOMPARE(r.exitCode, 2);
        QCOMPARE(r.err, err);
        QVERIFY(r.out.isEmpty());
    }

    // Refused option values: the allowed values in words, never CLI11's raw
    // limits (numeric_limits<double>::max() printed with 309 digits).
    void optionErrorsInWords_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("line");
        QTest::newRow("microbatches") << QStringList{"whatif", "x.pipescope", "--microbatches", "-5"}
                                      << "--microbatches: must be a whole number from 1 to 100,000 (got -5)";
        QTest::newRow("pp not a number") << QStringList{"whatif", "x.pipescope", "--pp", "abc"}
                                         << "--pp: must be a whole number from 1 to 4,096 (got 'abc')";
        QTest::newRow("pp a fraction") << QStringList{"simulate", "m.json", "--pp", "1.5"}
                                       << "--pp: must be a whole number from 1 to 4,096 (got '1.5')";
        QTest::newRow("weights") << QStringList{"whatif", "x.pipescope", "--weights", "1,a,2"}
                                 << "--weights: must be a number (got 'a')";
        QTest::newRow("boundaries") << QStringList{"whatif", "x.pipescope", "--boundaries", "4,x"}
                                    << "--boundaries: must be a whole number from 1 to 100,000 (got 'x')";
        QTest::newRow("stage speed") << QStringList{"whatif", "x.pipescope", "--stage-speed", "1,fast"}
                                     << "--stage-speed: must be a number or 'trace' (got 'fast')";
        QTest::newRow("fix straggler") << QStringList{"whatif", "x.pipescope", "--fix-straggler", "-1"}
                                       << "--fix-straggler: must be a whole number from 0 to 1,048,575 (got -1)";
        QTest::newRow("gpu memory") << QStringList{"whatif", "x.pipescope", "--gpu-memory", "0"}
                                    << "--gpu-memory: must be a number from 0.0009765625 to 1,048,576 GiB (got 0)";
        QTest::newRow("whatif iteration") << QStringList{"whatif", "x.pipescope", "--iteration", "-1"}
                                          << "--iteration: must be a whole number, at least 0 (got -1)";
        QTest::newRow("report iteration") << QStringList{"report", "x.pipescope", "--iteration", "-1"}
                                          << "--iteration: must be a whole number, at least 0 (got -1)";
        QTest::newRow("analyze iteration") << QStringList{"analyze", "x.pipescope", "--iteration", "-1"}
                                           << "--iteration: must be a whole number, at least 0 (got -1)";
        QTest::newRow("analyze pp") << QStringList{"analyze", "x.pipescope", "--pp", "0"}
                                    << "--pp: must be a whole number, at least 1 (got 0)";
        QTest::newRow("capture delay") << QStringList{"capture", "--delay", "-1", "--", "true"}
                                       << "--delay: must be a number, at least 0 seconds (got -1)";
        QTest::newRow("capture duration") << QStringList{"capture", "--duration", "nan", "--", "true"}
                                          << "--duration: must be a number, at least 0 seconds (got nan)";
        QTest::newRow("import rank") << QStringList{"import", "x.json", "-o", "y", "--rank", "-1"}
                                     << "--rank: must be a whole number from 0 to 1,048,575 (got -1)";
        QTest::newRow("export ranks") << QStringList{"export", "x.pipescope", "-o", "y", "--ranks", "0,-1"}
                                      << "--ranks: must be a whole number from 0 to 1,048,575 (got -1)";
        QTest::newRow("simulate dp") << QStringList{"simulate", "m.json", "--dp", "0"}
                                     << "--dp: must be a whole number from 1 to 100,000 (got 0)";
        QTest::newRow("huge") << QStringList{"whatif", "x.pipescope", "--v", "99999999999999999999"}
                              << "--v: must be a whole number from 1 to 64 (got 99999999999999999999)";
    }
    void optionErrorsInWords()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, line);
        auto r = runCli(args);
        QCOMPARE(r.exitCode, 2);
        QCOMPARE(r.err.section('\n', 0, 0), line);
    }

    // --freeze ranges that are malformed or run backwards: one line naming
    // the flag, before the store is opened (the layer count is checked after).
    void freezeRangesInWords_data()
    {
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("line");
        const QString shape = "' is not a layer range; give FIRST..LAST (0-based, inclusive), several comma-separated, "
                              "e.g. 0..3,30..31";
        QTest::newRow("dash") << "0-3" << "pipescope whatif: error: --freeze: '0-3" + shape;
        QTest::newRow("second of two") << "0..3,x..5" << "pipescope whatif: error: --freeze: 'x..5" + shape;
        QTest::newRow("open") << "4.." << "pipescope whatif: error: --freeze: '4.." + shape;
        QTest::newRow("backwards") << "0..1,5..2"
                                   << "pipescope whatif: error: --freeze: the range 5..2 runs backwards; give FIRST..LAST "
                                      "with FIRST at most LAST";
    }
    void freezeRangesInWords()
    {
        QFETCH(QString, value);
        QFETCH(QString, line);
        auto r = runCli({"whatif", "x.pipescope", "--freeze", value});
        QCOMPARE(r.exitCode, 1);
        QCOMPARE(r.err.trimmed(), line);
        QVERIFY(r.out.isEmpty());
    }

    void helpShowsBoundsPlainly()
    {
        const QRegularExpression longNumber("[0-9]{13,}");
        for (const char* command : {"import", "analyze", "whatif", "simulate", "report", "export", "capture", "merge"}) {
            auto r = runCli({command, "--help"});
            QCOMPARE(r.exitCode, 0);
            QVERIFY2(!longNumber.match(r.out).hasMatch(), qPrintable(r.out));
        }
        QVERIFY(runCli({"whatif", "--help"}).out.contains("--microbatches INT:1..100000"));
        QVERIFY(runCli({"report", "--help"}).out.contains("--iteration INT:>=0"));
    }

    // One line on success: the file, its size and the report's verdict.
    void reportSaysWhatItWrote()
    {
        const QString store = QString(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";
        auto analyzed = runCli({"analyze", store});
        QCOMPARE(analyzed.exitCode, 0);
        const QString verdictLine = analyzed.out.split('\n').filter(QRegularExpression("^verdict: ")).value(0);
        QVERIFY(!verdictLine.isEmpty());
        const QString verdict = verdictLine.mid(int(strlen("verdict: ")));

        QTemporaryDir dir;
        const QString out = dir.path() + "/out.html";
        auto r = runCli({"report", store, "-o", out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QString size = QString::fromStdString(pipescope::formatBytes(QFileInfo(out).size()));
        QCOMPARE(r.out, "Wrote " + out + " (" + size + "): " + verdict + "\n");
        QVERIFY(r.err.isEmpty());

        // The page itself on standard output: the line goes to standard error.
        r = runCli({"report", store, "-o", "/dev/stdout"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.startsWith("<!DOCTYPE html>"));
        const QString streamed = QString::fromStdString(pipescope::formatBytes(r.out.toUtf8().size()));
        QCOMPARE(r.err, "Wrote /dev/stdout (" + streamed + "): " + verdict + "\n");
    }

    // diff takes a store and a folder of traces alike; the traces are
    // imported into a temporary folder that is gone when it exits.
    void diffOfAStoreAndATraceFolder()
    {
        const QString store = QString(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";
        const QString traces = QString(PIPESCOPE_SOURCE_DIR) + "/resources/examples/simulated-1f1b";
        QTemporaryDir tmp;
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("TMPDIR", tmp.path());
        p.setProcessEnvironment(env);
        p.start(QString::fromUtf8(PIPESCOPE_CLI), {"diff", store, traces, "--json", "-q"});
        QVERIFY(p.waitForFinished(300000));
        QCOMPARE(p.exitCode(), 0);
        const QJsonObject j = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
        QCOMPARE(j["schema"].toString(), QString("pipescope.diff/1"));
        QCOMPARE(j["a"].toObject()["config"].toObject()["ranks"].toInt(), 4);
        QCOMPARE(j["b"].toObject()["config"].toObject()["ranks"].toInt(), 8);
        QCOMPARE(j["b"].toObject()["config"].toObject()["dp"].toInt(), 2);
        const QJsonObject it = j["iteration"].toObject();
        QCOMPARE(it["delta_ns"].toInteger(), it["b_ns"].toInteger() - it["a_ns"].toInteger());
        // Only the data-parallel degree differs in what a prediction covers:
        // no check, and the note says why.
        QVERIFY(j["prediction_check"].isNull());
        QVERIFY2(j["prediction_check_note"].toString().contains("data-parallel"), qPrintable(j["prediction_check_note"].toString()));
        QCOMPARE(QDir(tmp.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot).size(), 0);

        // A run that is not there: one line naming it, exit 1.
        auto r = runCli({"diff", store, tmp.path() + "/missing.pipescope"});
        QCOMPARE(r.exitCode, 1);
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY2(r.err.contains(tmp.path() + "/missing.pipescope: no such file or folder"), qPrintable(r.err));
        // An output that is one of the runs is refused before any work.
        r = runCli({"diff", store, traces, "-o", store});
        QCOMPARE(r.exitCode, 1);
        QVERIFY(QFileInfo(store).size() > 0);
    }

    // diff --fail-if gates CI: 0 when nothing regressed, 3 with one line per
    // regression, 4 when the runs cannot be gated, 2 for a malformed condition.
    void diffGateExitCodes()
    {
        const QString store = QString(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";
        const QString traces = QString(PIPESCOPE_SOURCE_DIR) + "/resources/examples/simulated-1f1b";
        auto r = runCli({"diff", store, store, "-q", "--fail-if", "iteration>+3%", "--fail-if", "stage>+1%,bubble>+1ms"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.err, QString("pipescope diff: no regression (iteration>+3%, stage>+1%, bubble>+1ms)\n"));
        QVERIFY(r.out.contains("Stages"));

        r = runCli({"diff", store, traces, "-q", "--fail-if", "iteration>+3%"});
        QCOMPARE(r.exitCode, 3);
        QCOMPARE(r.err, QString("pipescope diff: regression: iteration +795.5% (84.877 ms -> 760.085 ms) exceeds +3%\n"));
        r = runCli({"diff", store, traces, "-q", "--fail-if", "iteration>+1000%,stage[2]>+5%"});
        QCOMPARE(r.exitCode, 3);
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY2(r.err.startsWith("pipescope diff: regression: stage[2] +"), qPrintable(r.err));
        // The JSON says the same.
        r = runCli({"diff", store, traces, "-q", "--json", "--fail-if", "iteration>+3%"});
        QCOMPARE(r.exitCode, 3);
        const QJsonObject doc = QJsonDocument::fromJson(r.out.toUtf8()).object();
        const QJsonObject gate = doc["gate"].toObject();
        QCOMPARE(gate["passed"].toBool(true), false);
        QCOMPARE(gate["regressions"].toArray().size(), 1);
        QCOMPARE(gate["regressions"].toArray()[0].toObject()["b_ns"].toInteger(),
                 doc["iteration"].toObject()["b_ns"].toInteger());

        // Two stages against four: refused with the reason, exit 4.
        QTemporaryDir tmp;
        const QString sim = tmp.path() + "/pp2";
        r = runCli({"simulate", QString(PIPESCOPE_SOURCE_DIR) + "/resources/models/gpt-32l.json", "--schedule", "1f1b",
                    "--pp", "2", "--microbatches", "4", "--emit-kineto", sim});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        r = runCli({"diff", store, sim, "-q", "--fail-if", "iteration>+3%"});
        QCOMPARE(r.exitCode, 4);
        QCOMPARE(r.err, QString("pipescope diff: error: cannot gate: A has 4 stages and B 2; a baseline gates runs of "
                                "the same pipeline (save a new one for this job)\n"));
        // Without --fail-if the same runs still compare.
        QCOMPARE(runCli({"diff", store, sim, "-q"}).exitCode, 0);

        // A malformed condition: refused before any work, with the accepted forms.
        r = runCli({"diff", store, store, "--fail-if", "iteration>3"});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.startsWith("--fail-if: 'iteration>3' is not a gate condition: the threshold 3 needs a unit: % (of "
                                  "the baseline) or ns, us, ms, s; write METRIC>THRESHOLD (or >=), e.g. iteration>+3%"),
                 qPrintable(r.err));
        QVERIFY(r.out.isEmpty());
        r = runCli({"diff", store, store, "--fail-if", "latency>+3%"});
        QCOMPARE(r.exitCode, 2);
        QVERIFY(r.err.startsWith("--fail-if: 'latency>+3%' is not a gate condition: 'latency' is not a metric; "));
    }

    // Named baselines: kept with --save-baseline in --baseline-dir or
    // $PIPESCOPE_BASELINE_DIR, compared with --baseline NAME.
    void diffNamedBaselines()
    {
        const QString store = QString(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";
        QTemporaryDir tmp;
        const QString dir = tmp.path() + "/baselines";
        auto r = runCli({"diff", "--save-baseline", "main", store, "--baseline-dir", dir});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QString saved = dir + "/main.pipescope";
        QCOMPARE(QFileInfo(saved).size(), QFileInfo(store).size());
        QVERIFY(r.out.startsWith("Saved baseline 'main': " + saved + " ("));

        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("PIPESCOPE_BASELINE_DIR", dir);
        p.setProcessEnvironment(env);
        p.start(QString::fromUtf8(PIPESCOPE_CLI), {"diff", "--baseline", "main", store, "--fail-if", "iteration>+3%"});
        QVERIFY(p.waitForFinished(300000));
        QCOMPARE(p.exitCode(), 0);
        QCOMPARE(QString::fromUtf8(p.readAllStandardError()), QString("pipescope diff: no regression (iteration>+3%)\n"));

        // A name that was not saved: the folder's names, exit 1.
        r = runCli({"diff", "--baseline", "release", store, "--baseline-dir", dir});
        QCOMPARE(r.exitCode, 1);
        QCOMPARE(r.err, "pipescope diff: error: --baseline: no baseline 'release' in " + dir + " (no " + dir +
                            "/release.pipescope); save one with pipescope diff --save-baseline release JOB (saved "
                            "there: main)\n");
        // Usage: no folder, a name that is a path, two runs with --baseline.
        QProcess q;
        env.remove("PIPESCOPE_BASELINE_DIR");
        q.setProcessEnvironment(env);
        q.start(QString::fromUtf8(PIPESCOPE_CLI), {"diff", "--baseline", "main", store});
        QVERIFY(q.waitForFinished(300000));
        QCOMPARE(q.exitCode(), 2);
        QCOMPARE(QString::fromUtf8(q.readAllStandardError()),
                 QString("pipescope diff: error: --baseline: no baseline folder; give --baseline-dir DIR or set "
                         "PIPESCOPE_BASELINE_DIR; see `pipescope diff --help`\n"));
        r = runCli({"diff", "--baseline", "../main", store, "--baseline-dir", dir});
        QCOMPARE(r.exitCode, 2);
        QVERIFY(r.err.startsWith("--baseline: '../main' is not a baseline name; use up to 100 letters, digits, '.', '_' "
                                 "and '-' (e.g. main, release-1.2)\n"));
        r = runCli({"diff", "--baseline", "main", store, store, "--baseline-dir", dir});
        QCOMPARE(r.exitCode, 2);
        QCOMPARE(r.err, QString("pipescope diff: error: --baseline NAME takes one run, the new one: pipescope diff "
                                "--baseline NAME NEW; see `pipescope diff --help`\n"));
        r = runCli({"diff", store});
        QCOMPARE(r.exitCode, 2);
        QCOMPARE(r.err, QString("pipescope diff: error: give two runs, A and B (or --baseline NAME and B); see "
                                "`pipescope diff --help`\n"));
        // A file that is not a store or a trace is not saved.
        const QString notes = writeFile(tmp, "notes.txt", "hello");
        r = runCli({"diff", "--save-baseline", "notes", notes, "--baseline-dir", dir});
        QCOMPARE(r.exitCode, 1);
        QVERIFY(!QFileInfo::exists(dir + "/notes.pipescope"));
    }

    // query: read-only SQL in three formats, one line for bad SQL.
    void queryFormatsAndErrors()
    {
        const QString store = QString(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";
        auto r = runCli({"query", store, "SELECT rank, host FROM ranks ORDER BY rank", "--format", "csv"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.out, QString("rank,host\n0,vm\n1,vm\n2,vm\n3,vm\n"));
        r = runCli({"query", store, "SELECT rank, COUNT(*) AS kernels FROM activities WHERE kind = 0 GROUP BY rank"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.out, QString("rank  kernels\n   0      440\n   1      704\n   2      488\n   3      812\n(4 rows)\n"));
        r = runCli({"query", store, "SELECT rank, world_size FROM ranks WHERE rank < 2", "--format", "json"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.out, QString("[\n{\"rank\": 0, \"world_size\": 4},\n{\"rank\": 1, \"world_size\": 4}\n]\n"));

        r = runCli({"query", store, "SELECT * FROM activity"});
        QCOMPARE(r.exitCode, 1);
        QCOMPARE(r.err, QString("pipescope query: error: SQL: no such table: activity; the store's tables and columns "
                                "are in docs/trace-format.md (or SELECT name, sql FROM sqlite_master)\n"));
        QVERIFY(r.out.isEmpty());
        r = runCli({"query", store, "ATTACH DATABASE 'x.db' AS x"});
        QCOMPARE(r.exitCode, 1);
        QCOMPARE(r.err, QString("pipescope query: error: SQL: only reading is allowed; ATTACH is refused (pipescope "
                                "query opens the store read-only)\n"));
        r = runCli({"query", store, "SELECT 1", "--format", "xml"});
        QCOMPARE(r.exitCode, 2);

        QTemporaryDir tmp;
        const QString out = tmp.path() + "/ranks.json";
        r = runCli({"query", store, "SELECT rank FROM ranks", "--format", "json", "-o", out});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.out, "Wrote " + out + ": 4 rows\n");
        QFile f(out);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(QJsonDocument::fromJson(f.readAll()).array().size(), 4);
        // A failed query writes nothing.
        r = runCli({"query", store, "SELEC 1", "-o", tmp.path() + "/bad.csv"});
        QCOMPARE(r.exitCode, 1);
        QCOMPARE(r.err, QString("pipescope query: error: SQL: near \"SELEC\": syntax error\n"));
        QVERIFY(!QFileInfo::exists(tmp.path() + "/bad.csv"));
        QCOMPARE(filesIn(tmp), 1);
    }

    // Time bases print as dates, shifts as durations: no 19-digit numbers.
    void importShowsTimeBasesAsDates()
    {
        QTemporaryDir dir;
        const qint64 base = 1700000000123456789LL; // 2023-11-14 22:13:20.123456789 UTC
        for (int rank = 0; rank < 2; ++rank) {
            QJsonArray events;
            for (int k = 0; k < 3; ++k) {
                QJsonObject args{{"device", rank}, {"stream", 20}, {"correlation", k + 1},
                                 {"Collective name", "allreduce"}, {"Process Group Name", "0"},
                                 {"Process Group Description", "default_pg"}, {"Group size", 2},
                                 {"In msg nelems", 1024}, {"Out msg nelems", 1024}, {"dtype", "Float"}};
                events.append(QJsonObject{{"ph", "X"}, {"cat", "kernel"}, {"name", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"},
                                          {"pid", rank}, {"tid", 20}, {"ts", 1000 + k * 10000}, {"dur", 100}, {"args", args}});
            }
            // Rank 1's profiler started 2 ms later: the same collectives, 2 ms later on the epoch clock.
            QJsonObject trace{{"distributedInfo", QJsonObject{{"rank", rank}, {"world_size", 2}, {"backend", "nccl"}}},
                              {"baseTimeNanoseconds", base + rank * 2000000LL},
                              {"traceEvents", events}};
            writeFile(dir, qPrintable(QString("rank-%1.json").arg(rank)), QJsonDocument(trace).toJson());
        }
        const QString out = dir.path() + "/job.pipescope";
        auto r = runCli({"import", dir.path(), "-o", out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("Clock alignment: each file's time base\n"
                                "  rank  time base\n"
                                "     0  2023-11-14 22:13:20.123456789 UTC\n"
                                "     1  2023-11-14 22:13:20.125456789 UTC\n"),
                 qPrintable(r.out));
        auto info = runCli({"info", out});
        QVERIFY2(info.out.contains(QRegularExpression(" 2023-11-14 22:13:20.125456789 UTC +time base +time_base\n")),
                 qPrintable(info.out));

        r = runCli({"import", dir.path(), "--align", "collectives", "-o", out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("Clock alignment: matched collectives\n"
                                "  rank  time base                          shift by collectives\n"
                                "     0  2023-11-14 22:13:20.123456789 UTC                  0 ns\n"
                                "     1  2023-11-14 22:13:20.125456789 UTC             -2.000 ms\n"),
                 qPrintable(r.out));
        info = runCli({"info", out});
        QVERIFY2(info.out.contains(QRegularExpression(" 2023-11-14 22:13:20.125456789 UTC +time base -2.000 ms +collectives\n")),
                 qPrintable(info.out));
        QVERIFY(!QRegularExpression("[0-9]{13,}").match(r.out + info.out).hasMatch());
    }

    void importTwoRanksAndInfo()
    {
        PIPESCOPE_REQUIRE_EXTERNAL_DATA();
        QTemporaryDir dir;
        QString out = dir.path() + "/job.pipescope";
        auto r = runCli({"import", QString::fromStdString(externalData("kineto/hta-sampled-128rank-r0.json.gz")),
                         QString::fromStdString(externalData("kineto/hta-sampled-128rank-r1.json.gz")), "-o", out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(r.out.contains("Imported 2 files"));
        auto j = infoJson(out);
        QCOMPARE(j["schema"].toString(), QString("pipescope.info/1"));
        QCOMPARE(j["ranks"].toArray().size(), 2);
        QCOMPARE(j["ranks"].toArray()[0].toObject()["world_size"].toInt(), 128);
        QCOMPARE(j["activities"].toObject()["kernel"].toInteger(), qint64(1154 + 1104));
        // The 20 SendRecv kernels run the collectives their CPU ops name (nccl:all_to_all, ...).
        QCOMPARE(j["nccl_ops"].toObject()["AllToAll"].toInteger(), qint64(8));
        QCOMPARE(j["nccl_ops"].toObject()["AllReduce"].toInteger(), qint64(8));
        QCOMPARE(j["nccl_ops"].toObject()["AllGather"].toInteger(), qint64(4));
        QVERIFY(!j["nccl_ops"].toObject().contains("SendRecv"));
        QCOMPARE(j["simulated"].toBool(), false);
        // Busy union per GPU, exact (README facts: 547303 us and 575496 us).
        auto busy = j["gpu_busy"].toArray();
        QCOMPARE(busy.size(), 2);
        QCOMPARE(busy[0].toObject()["kernel_busy_ns"].toInteger(), qint64(547303000));
        QCOMPARE(busy[1].toObject()["kernel_busy_ns"].toInteger(), qint64(575496000));
        auto text = runCli({"info", out});
        QCOMPARE(text.exitCode, 0);
        QVERIFY(text.out.contains("GPU busy time"));
    }

    void sameRankTwiceIsRefused()
    {
        PIPESCOPE_REQUIRE_EXTERNAL_DATA();
        QTemporaryDir dir;
        QString out = dir.path() + "/job.pipescope";
        QString in = QString::fromStdString(externalData("kineto/hta-sampled-128rank-r0.json.gz"));
        QString copy = dir.path() + "/copy-r0.json.gz";
        QVERIFY(QFile::copy(in, copy));
        auto r = runCli({"import", in, copy, "-o", out});
        QCOMPARE(r.exitCode, 1);
        QVERIFY(r.err.contains("rank 0"));
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY(!QFile::exists(out));
        QCOMPARE(filesIn(dir), 1); // only the copy: no temporary file left
    }

    void badInputsGiveOneLine_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QByteArray>("contents");
        QTest::addColumn<QString>("mentions");
        QTest::newRow("empty file") << "rank-0.json" << QByteArray() << "empty";
        QTest::newRow("nsys report") << "profile.nsys-rep" << QByteArray("QDSTRM\x01\x02", 8) << "nsys export";
        QTest::newRow("binary junk") << "junk.bin" << QByteArray(64, '\x07') << "unknown trace format";
        QTest::newRow("sqlite that is not nsys") << "other.sqlite" << QByteArray() << "";
    }
    void badInputsGiveOneLine()
    {
        QFETCH(QString, name);
        QFETCH(QByteArray, contents);
        QFETCH(QString, mentions);
        QTemporaryDir dir;
        QString in = writeFile(dir, qPrintable(name), contents);
        if (name == "other.sqlite") {
            QFile::remove(in);
            QProcess::execute("sqlite3", {in, "CREATE TABLE t(x);"});
            if (!QFile::exists(in))
                QSKIP("sqlite3 command not available");
            mentions = "neither";
        }
        QString out = dir.path() + "/job.pipescope";
        auto r = runCli({"import", in, "-o", out});
        QCOMPARE(r.exitCode, 1);
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY2(r.err.contains(in), qPrintable(r.err));
        QVERIFY2(r.err.contains(mentions), qPrintable(r.err));
        QVERIFY(!QFile::exists(out));
    }

    void directoryWithoutTraces()
    {
        QTemporaryDir dir;
        writeFile(dir, "notes.txt", "hello");
        auto r = runCli({"import", dir.path(), "-o", dir.path() + "/job.pipescope"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY(r.err.contains("no traces"));
    }

    void unwritableOutput()
    {
        PIPESCOPE_REQUIRE_EXTERNAL_DATA();
        auto r = runCli({"import", QString::fromStdString(externalData("kineto/hta-alexnet-1rank.json.gz")), "-o",
                         "/nonexistent-folder/job.pipescope"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY(r.err.contains("/nonexistent-folder/job.pipescope"));
        QCOMPARE(r.err.count('\n'), 1);
    }

    void infoOnNonStore()
    {
        QTemporaryDir dir;
        QString p = writeFile(dir, "trace.json", "{\"traceEvents\": []}");
        auto r = runCli({"info", p});
        QCOMPARE(r.exitCode, 1);
        QVERIFY(r.err.contains("not a pipescope store"));
        auto missing = runCli({"info", dir.path() + "/none.pipescope"});
        QCOMPARE(missing.exitCode, 1);
        QVERIFY(missing.err.contains("no such file"));
    }

    void alignByCollectives()
    {
        // Two ranks run the same 5 all-reduces; rank 1's clock reads 5 ms late
        // (plus a little jitter on each end). Alignment must find -5 ms.
        QTemporaryDir dir;
        const qint64 skewUs = 5000;
        const int jitterUs[] = {3, -2, 0, 4, -1};
        for (int rank = 0; rank < 2; ++rank) {
            QJsonArray events;
            for (int k = 0; k < 5; ++k) {
                qint64 start = 1700000000000000LL + k * 10000 + (rank == 1 ? skewUs + jitterUs[k] : 0);
                QJsonObject args{{"device", rank}, {"stream", 20}, {"correlation", k + 1},
                                 {"Collective name", "allreduce"}, {"Process Group Name", "0"},
                                 {"Process Group Description", "default_pg"}, {"Group size", 2},
                                 {"In msg nelems", 1024}, {"Out msg nelems", 1024}, {"dtype", "Float"}};
                events.append(QJsonObject{{"ph", "X"}, {"cat", "kernel"}, {"name", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"},
                                          {"pid", rank}, {"tid", 20}, {"ts", start}, {"dur", 100}, {"args", args}});
            }
            QJsonObject trace{{"distributedInfo", QJsonObject{{"rank", rank}, {"world_size", 2}, {"backend", "nccl"}}},
                              {"traceEvents", events}};
            QFile f(dir.path() + QString("/rank-%1.json").arg(rank));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QJsonDocument(trace).toJson());
        }
        QString out = dir.path() + "/job.pipescope";
        auto r = runCli({"import", dir.path(), "--align", "collectives", "-o", out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(r.out.contains("matched collectives"));
        auto j = infoJson(out);
        auto sources = j["sources"].toArray();
        QCOMPARE(sources.size(), 2);
        QCOMPARE(sources[0].toObject()["clock_offset_ns"].toInteger(), qint64(0));
        // Median of ends' differences: -(5000 + median{3,-2,0,4,-1}) us = -5000 us.
        QCOMPARE(sources[1].toObject()["clock_offset_ns"].toInteger(), qint64(-5000000));
        QCOMPARE(sources[1].toObject()["alignment"].toString(), QString("collectives"));
        auto busy = j["gpu_busy"].toArray();
        QCOMPARE(busy[1].toObject()["kernel_first_ns"].toInteger(), busy[0].toObject()["kernel_first_ns"].toInteger() + 3000);
    }

    void alignPipelineNeighboursByTransfers()
    {
        // A 3-stage pipeline with no collective: rank r sends to r+1 four times.
        // Clocks are skewed by +2 ms (rank 1) and -7 ms (rank 2); receives end
        // with the sends, give or take a microsecond.
        QTemporaryDir dir;
        const qint64 skewUs[] = {0, 2000, -7000};
        const int jitterUs[] = {1, 0, -1, 0};
        for (int rank = 0; rank < 3; ++rank) {
            QJsonArray events;
            int corr = 1;
            auto add = [&](const char* name, int peer, qint64 endUs) {
                QJsonObject args{{"device", rank}, {"stream", 20}, {"correlation", corr++},
                                 {"Collective name", name}, {"Group size", 3}, {"Process Group Name", "1"},
                                 {"Process Group Description", "pp"}, {"Process Group Ranks", "[0, 1, 2]"},
                                 {"In msg nelems", 4096}, {"Out msg nelems", 4096}, {"dtype", "BFloat16"}};
                args[QString(name) == "send" ? "Dst Rank" : "Src Rank"] = peer;
                events.append(QJsonObject{{"ph", "X"}, {"cat", "kernel"}, {"name", "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"},
                                          {"pid", rank}, {"tid", 20}, {"ts", endUs - 50}, {"dur", 50}, {"args", args}});
            };
            for (int k = 0; k < 4; ++k) {
                qint64 base = 1700000000000000LL + k * 10000;
                if (rank > 0) // receive from rank-1 of transfer k on link (rank-1 -> rank)
                    add("recv", rank - 1, base + rank * 1000 + skewUs[rank] + jitterUs[k]);
                if (rank < 2)
                    add("send", rank + 1, base + (rank + 1) * 1000 + skewUs[rank]);
            }
            QJsonObject trace{{"distributedInfo", QJsonObject{{"rank", rank}, {"world_size", 3}, {"backend", "nccl"}}},
                              {"traceEvents", events}};
            QFile f(dir.path() + QString("/rank-%1.json").arg(rank));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QJsonDocument(trace).toJson());
        }
        QString out = dir.path() + "/job.pipescope";
        auto r = runCli({"import", dir.path(), "--align", "collectives", "-o", out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        auto sources = infoJson(out)["sources"].toArray();
        QCOMPARE(sources.size(), 3);
        // Median over k of (send end - recv end): rank 1 by -(2000 + median{1,0,-1,0}) us.
        QCOMPARE(sources[1].toObject()["clock_offset_ns"].toInteger(), qint64(-2000000));
        QCOMPARE(sources[2].toObject()["clock_offset_ns"].toInteger(), qint64(7000000));
        QCOMPARE(sources[2].toObject()["alignment"].toString(), QString("collectives"));
    }

    void nsysShortKernelNames()
    {
        PIPESCOPE_REQUIRE_EXTERNAL_DATA();
        QTemporaryDir dir;
        QString out = dir.path() + "/job.pipescope";
        auto r = runCli({"import", QString::fromStdString(externalData("nsys/pipit-cloverleaf.sqlite")),
                         "--short-kernel-names", "-q", "-o", out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(r.out.isEmpty());
        auto trace = pipescope::Store(out.toStdString()).load();
        std::map<std::string, int> byName;
        for (const auto& a : trace.activities)
            if (a.kind == pipescope::ActivityKind::Kernel)
                ++byName[trace.str(a.name)];
        QCOMPARE(byName.size(), size_t(3));
        QCOMPARE(byName["par_ranged1d_kernel"], 968);
        QCOMPARE(byName["par_ranged2d_kernel"], 331);
        QCOMPARE(byName["par_reduce_kernel"], 13);
    }

    void nsysImportKeepsSessionTimeBase()
    {
        PIPESCOPE_REQUIRE_EXTERNAL_DATA();
        QTemporaryDir dir;
        QString out = dir.path() + "/job.pipescope";
        auto r = runCli({"import", QString::fromStdString(externalData("nsys/pipit-cloverleaf.sqlite")), "-o", out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        auto j = infoJson(out);
        auto busy = j["gpu_busy"].toArray();
        QCOMPARE(busy.size(), 1);
        // Times are aligned on the session's epoch start: 1696392839587175550 + 533338240.
        QCOMPARE(busy[0].toObject()["kernel_first_ns"].toInteger(), qint64(1696392839587175550LL + 533338240LL));
        QCOMPARE(busy[0].toObject()["kernel_busy_ns"].toInteger(), qint64(294404540));
        auto none = runCli({"import", QString::fromStdString(externalData("nsys/pipit-cloverleaf.sqlite")), "-o",
                            dir.path() + "/raw.pipescope", "--align", "none"});
        QCOMPARE(none.exitCode, 0);
        QCOMPARE(infoJson(dir.path() + "/raw.pipescope")["gpu_busy"].toArray()[0].toObject()["kernel_first_ns"].toInteger(),
                 qint64(533338240));
    }
};

QTEST_GUILESS_MAIN(TstCli)
#include "tst_cli.moc"
