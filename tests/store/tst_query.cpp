// Read-only SQL over a store (core/store/Query): results as values and in
// the three output formats, statements that would write refused with their
// reason, bad SQL in SQLite's words, a sharded job shard by shard, and the
// file left untouched.
#include "TestSupport.h"
#include "store/JobIndex.h"
#include "store/Query.h"
#include "store/StoreWriter.h"
#include "util/Error.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QTemporaryDir>

#include <sstream>

using namespace pipescope;

namespace {

QByteArray sha(const std::string& path)
{
    QFile f(QString::fromStdString(path));
    f.open(QIODevice::ReadOnly);
    return QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256);
}

// Ranks `ranks`, each with two kernels of 100 and 50 ns and one memcpy of 30 ns.
void writeJob(const std::string& path, const std::vector<int>& ranks)
{
    StoreWriter w(path);
    auto gemm = w.intern("sm90_gemm");
    auto copy = w.intern("Memcpy DtoD");
    for (int r : ranks) {
        w.addRank({r, 4, "host-a", 40 + r, 0, std::nullopt});
        auto s = w.stream(r, 0, 7);
        const TimeNs t = 1000 * r;
        w.addActivity({r, s, ActivityKind::Kernel, t + 100, t + 200, gemm, 1});
        w.addActivity({r, s, ActivityKind::Kernel, t + 300, t + 350, gemm, 2});
        w.addActivity({r, s, ActivityKind::Memcpy, t + 400, t + 430, copy, std::nullopt, 4096, CopyKind::DtoD});
    }
    w.finish();
}

QueryResult collect(const std::string& path, const std::string& sql)
{
    QueryCollector c;
    runQuery(path, sql, c);
    return c.result;
}

std::string written(const std::string& path, const std::string& sql, QueryFormat format)
{
    std::ostringstream out;
    auto sink = makeQueryWriter(format, out);
    runQuery(path, sql, *sink);
    return out.str();
}

std::string refusal(const std::string& path, const std::string& sql)
{
    try {
        QueryCollector c;
        runQuery(path, sql, c);
    } catch (const QueryError& e) {
        return e.what();
    }
    return "(accepted)";
}

} // namespace

class TstQuery : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::string store_;

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        store_ = dir_.filePath("job.pipescope").toStdString();
        writeJob(store_, {0, 1});
    }

    void valuesOfAResult()
    {
        const QueryResult r = collect(store_, "SELECT rank, COUNT(*) AS kernels, SUM(end_ns - start_ns) AS busy_ns "
                                              "FROM activities WHERE kind = 0 GROUP BY rank ORDER BY rank");
        QCOMPARE(r.columns, (std::vector<std::string>{"rank", "kernels", "busy_ns"}));
        QCOMPARE(r.rows.size(), size_t(2));
        for (int rank : {0, 1}) {
            const auto& row = r.rows[static_cast<size_t>(rank)];
            QVERIFY(row[0].type == QueryCell::Type::Integer);
            QCOMPARE(row[0].integer, int64_t(rank));
            QCOMPARE(row[1].integer, int64_t(2));
            QCOMPARE(row[2].integer, int64_t(150));
        }
        // Names through the strings table; a bound-free join as the docs show it.
        const QueryResult names = collect(store_, "SELECT DISTINCT s.value FROM activities a JOIN strings s ON s.id = "
                                                  "a.name_id ORDER BY s.value");
        QCOMPARE(names.rows.size(), size_t(2));
        QCOMPARE(names.rows[0][0].bytes, std::string("Memcpy DtoD"));
        QCOMPARE(names.rows[1][0].bytes, std::string("sm90_gemm"));
    }

    void textIsAnAlignedTable()
    {
        QCOMPARE(written(store_,
                         "SELECT rank, host, pid * 1.5 AS half, NULL AS none FROM ranks ORDER BY rank",
                         QueryFormat::Text),
                 std::string("rank  host    half  none\n"
                             "   0  host-a  60.0  NULL\n"
                             "   1  host-a  61.5  NULL\n"
                             "(2 rows)\n"));
        QCOMPARE(written(store_, "SELECT rank FROM ranks WHERE rank > 5", QueryFormat::Text),
                 std::string("rank\n(0 rows)\n"));
    }

    void csvQuotesAsRfc4180()
    {
        QCOMPARE(written(store_,
                         "SELECT 'a,b' AS \"x,y\", 'say \"hi\"' AS q, 'two\nlines' AS nl, NULL AS z, 1.5 AS r, "
                         "2.0 AS w, X'0AFF' AS b, -7 AS i",
                         QueryFormat::Csv),
                 std::string("\"x,y\",q,nl,z,r,w,b,i\n"
                             "\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",,1.5,2.0,X'0AFF',-7\n"));
    }

    void jsonIsAnArrayOfObjects()
    {
        QCOMPARE(written(store_,
                         "SELECT rank AS a, host AS a, NULL AS n, 0.25 AS r, 9e999 AS inf, 'q\"\\' AS s FROM ranks "
                         "ORDER BY rank",
                         QueryFormat::Json),
                 std::string("[\n"
                             "{\"a\": 0, \"a_2\": \"host-a\", \"n\": null, \"r\": 0.25, \"inf\": null, \"s\": \"q\\\"\\\\\"},\n"
                             "{\"a\": 1, \"a_2\": \"host-a\", \"n\": null, \"r\": 0.25, \"inf\": null, \"s\": \"q\\\"\\\\\"}\n"
                             "]\n"));
        QCOMPARE(written(store_, "SELECT rank FROM ranks WHERE rank > 5", QueryFormat::Json), std::string("[]\n"));
    }

    // Reading is all a query may do, and the refusal says what was refused.
    void onlyReading_data()
    {
        QTest::addColumn<QString>("sql");
        QTest::addColumn<QString>("message");
        const QString ro = " (pipescope query opens the store read-only)";
        QTest::newRow("insert") << "INSERT INTO meta VALUES ('k', 'v')"
                                << "SQL: only reading is allowed; INSERT into meta is refused" + ro;
        QTest::newRow("update") << "UPDATE ranks SET host = 'x'"
                                << "SQL: only reading is allowed; UPDATE of ranks is refused" + ro;
        QTest::newRow("delete") << "DELETE FROM activities"
                                << "SQL: only reading is allowed; DELETE from activities is refused" + ro;
        QTest::newRow("drop") << "DROP TABLE meta"
                              << "SQL: only reading is allowed; changing the schema (CREATE, DROP, ALTER) is refused" + ro;
        QTest::newRow("create temp")
            << "CREATE TEMP TABLE t (x)"
            << "SQL: only reading is allowed; changing the schema (CREATE, DROP, ALTER) is refused" + ro;
        QTest::newRow("create view") << "CREATE VIEW v AS SELECT 1"
                                     << "SQL: only reading is allowed; changing the schema (CREATE, DROP, ALTER) is "
                                        "refused" + ro;
        QTest::newRow("update schema") << "UPDATE sqlite_master SET sql = ''"
                                       << "SQL: table sqlite_master may not be modified";
        QTest::newRow("attach") << "ATTACH DATABASE '/tmp/pipescope-query-attach.db' AS other"
                                << "SQL: only reading is allowed; ATTACH is refused" + ro;
        QTest::newRow("load_extension") << "SELECT load_extension('/tmp/x.so')"
                                        << "SQL: only reading is allowed; the function load_extension() is refused" + ro;
        QTest::newRow("pragma query_only off") << "PRAGMA query_only = 0"
                                               << "SQL: only reading is allowed; PRAGMA query_only=0 is refused" + ro;
        QTest::newRow("pragma user_version set") << "PRAGMA user_version = 9"
                                                 << "SQL: only reading is allowed; PRAGMA user_version=9 is refused" + ro;
        QTest::newRow("pragma writable_schema") << "PRAGMA writable_schema = 1"
                                                << "SQL: only reading is allowed; PRAGMA writable_schema=1 is refused" + ro;
        QTest::newRow("begin") << "BEGIN"
                               << "SQL: only reading is allowed; a transaction (BEGIN, COMMIT, ROLLBACK) is refused" + ro;
        QTest::newRow("vacuum into") << "VACUUM INTO '/tmp/pipescope-query-vacuum.db'"
                                     << "SQL: only reading is allowed; this statement would change the store" + ro;
        QTest::newRow("two statements") << "SELECT 1; DELETE FROM meta"
                                        << "SQL: give one statement; found more after the first ( DELETE FROM meta)";
        QTest::newRow("empty") << "  -- nothing\n"
                               << "SQL: no statement (the text is empty or only comments); give one, e.g. SELECT "
                                  "COUNT(*) FROM activities";
        QTest::newRow("syntax") << "SELEC 1" << "SQL: near \"SELEC\": syntax error";
        QTest::newRow("no table") << "SELECT * FROM activity"
                                  << "SQL: no such table: activity; the store's tables and columns are in "
                                     "docs/trace-format.md (or SELECT name, sql FROM sqlite_master)";
    }
    void onlyReading()
    {
        QFETCH(QString, sql);
        QFETCH(QString, message);
        const QByteArray before = sha(store_);
        QCOMPARE(QString::fromStdString(refusal(store_, sql.toStdString())), message);
        QCOMPARE(sha(store_), before);
        QVERIFY(!QFile::exists("/tmp/pipescope-query-vacuum.db"));
        QVERIFY(!QFile::exists("/tmp/pipescope-query-attach.db"));
    }

    // What a reader needs to learn the schema stays allowed.
    void schemaQueriesAreAllowed()
    {
        QCOMPARE(collect(store_, "PRAGMA user_version").rows.at(0).at(0).integer, int64_t(3));
        const QueryResult info = collect(store_, "PRAGMA table_info(ranks)");
        QCOMPARE(info.rows.at(0).at(1).bytes, std::string("rank"));
        const QueryResult tv = collect(store_, "SELECT name FROM pragma_table_info('ranks') ORDER BY cid LIMIT 2");
        QCOMPARE(tv.rows.size(), size_t(2));
        QCOMPARE(tv.rows.at(1).at(0).bytes, std::string("world_size"));
        QVERIFY(collect(store_, "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'activities'").rows.size() == 1);
        QCOMPARE(collect(store_, "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 4) "
                                 "SELECT SUM(x) FROM n")
                     .rows.at(0)
                     .at(0)
                     .integer,
                 int64_t(10));
    }

    void notAStore()
    {
        const std::string text = dir_.filePath("notes.txt").toStdString();
        QFile f(QString::fromStdString(text));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("hello");
        f.close();
        try {
            QueryCollector c;
            runQuery(text, "SELECT 1", c);
            QFAIL("accepted a text file");
        } catch (const QueryError&) {
            QFAIL("a file that is not a store is not a query error");
        } catch (const Error& e) {
            QCOMPARE(QString(e.what()), QString::fromStdString(
                                            text + ": not a pipescope store (not a SQLite database); import traces with "
                                                   "`pipescope import`"));
        }
    }

    // A sharded job: every shard in turn, its index in a first column.
    void shardedJobShardByShard()
    {
        const QString folder = dir_.filePath("job");
        QVERIFY(QDir().mkpath(folder));
        JobIndex index;
        index.plan = "test";
        index.shards = 3;
        for (int k = 0; k < 3; ++k) {
            ShardRecord r;
            r.index = k;
            r.ok = true;
            if (k < 2) {
                r.file = shardStoreName(k, 3);
                r.ranks = {2 * k, 2 * k + 1};
                writeJob((folder + "/").toStdString() + r.file, r.ranks);
            } // shard 2 had no traces: no store
            index.records.push_back(r);
        }
        writeJobIndex(folder.toStdString(), index);
        const std::string job = folder.toStdString();
        QCOMPARE(written(job, "SELECT rank, COUNT(*) AS n FROM activities GROUP BY rank ORDER BY rank", QueryFormat::Csv),
                 std::string("shard,rank,n\n0,0,3\n0,1,3\n1,2,3\n1,3,3\n"));
        // Aggregates are per shard.
        QCOMPARE(written(job, "SELECT COUNT(*) AS ranks FROM ranks", QueryFormat::Text),
                 std::string("shard  ranks\n    0      2\n    1      2\n(2 rows)\n"));
        QCOMPARE(QString::fromStdString(refusal(job, "SELECT nope FROM ranks")),
                 QString("SQL: no such column: nope (shard 0, shard-0000-of-0003.pipescope); the store's tables and "
                         "columns are in docs/trace-format.md (or SELECT name, sql FROM sqlite_master)"));
    }
};

QTEST_GUILESS_MAIN(TstQuery)
#include "tst_query.moc"
