// A query's result drawn as tracks on the timeline (issue 37, item 9;
// Perfetto's "show as debug track"): exact blocks from an exact query on the
// bundled example, overlaps on rows of their own, rows that cannot be drawn
// counted, the columns needed named when a result has none of them, and the
// tracks removed again.
#include "MainWindow.h"
#include "panels/QueryPanel.h"
#include "views/QueryTrack.h"
#include "views/TimelineView.h"

#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <map>

using namespace pipescope;
using namespace pipescope::gui;

namespace {

const QString kStore = QString::fromUtf8(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";

bool openAndWait(MainWindow& w, const QStringList& inputs)
{
    QSignalSpy shown(&w, &MainWindow::jobShown);
    QSignalSpy error(&w, &MainWindow::errorShown);
    w.open(inputs);
    for (int i = 0; i < 600 && shown.isEmpty() && error.isEmpty(); ++i)
        QTest::qWait(100);
    return !shown.isEmpty();
}

// The lanes of the timeline's model that are query tracks.
std::vector<int> queryLanes(const TimelineView& t)
{
    std::vector<int> out;
    for (size_t i = 0; i < t.model()->lanes.size(); ++i)
        if (isQueryTrack(t.model()->lanes[i]))
            out.push_back(static_cast<int>(i));
    return out;
}

struct Block {
    qint64 start, end;
    std::string name;
    bool operator==(const Block&) const = default;
};

std::vector<Block> blocksOf(const TimelineView& t, int lane)
{
    std::vector<Block> out;
    for (const timeline::Event& e : t.model()->lanes[static_cast<size_t>(lane)].events)
        out.push_back({e.start, e.end, t.model()->name(e.name)});
    return out;
}

} // namespace

class TestQueryTrack : public QObject {
    Q_OBJECT

private:
    QTemporaryDir cache_;

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(cache_.isValid());
        qputenv("PIPESCOPE_CACHE_DIR", cache_.path().toUtf8());
    }

    void resultDrawnAsTrack()
    {
        MainWindow w(nullptr, false);
        QVERIFY(openAndWait(w, {kStore}));
        QueryPanel* q = w.queryPanel();
        TimelineView* t = w.timeline();
        const size_t jobLanes = w.job()->timeline->lanes.size();
        QVERIFY(!q->drawButton()->isEnabled()); // nothing to draw yet
        t->addMarker(w.job()->timeline->start + 1000, QStringLiteral("kept"));

        // Rank 1's first three kernels, as the store holds them.
        QVERIFY(q->run("SELECT rank, start_ns, end_ns, 'k' || id AS name FROM activities "
                       "WHERE kind = 0 AND rank = 1 ORDER BY start_ns LIMIT 3"));
        QVERIFY(q->drawButton()->isEnabled());
        QVERIFY(q->drawAsTrack());
        QCOMPARE(q->statusText(), QStringLiteral("query 1: 3 of 3 rows on 1 track"));
        QCOMPARE(t->model()->lanes.size(), jobLanes + 1);
        const std::vector<int> lanes = queryLanes(*t);
        QCOMPARE(lanes.size(), size_t(1));
        const timeline::Lane& l = t->model()->lanes[static_cast<size_t>(lanes[0])];
        QCOMPARE(l.rank, 1);
        QCOMPARE(l.stage, 1); // in rank 1's group
        QCOMPARE(l.label, std::string("query 1"));
        QCOMPARE(blocksOf(*t, lanes[0]), (std::vector<Block>{{1796003492876204942, 1796003492884531823, "k1152"},
                                                              {1796003492953599817, 1796003492953640009, "k1154"},
                                                              {1796003492961343691, 1796003492961345067, "k1158"}}));
        QVERIFY(t->isLanePinned(lanes[0])); // on top, as Perfetto's debug tracks
        QCOMPARE(t->markers(), (std::vector<qint64>{w.job()->timeline->start + 1000})); // what the user set stays
        const QString tip = t->toolTipFor({lanes[0], 1});
        QVERIFY2(tip.contains("<b>k1154</b>") && tip.contains("query 1, row 2 of the result"), qPrintable(tip));

        // A track column, a duration, overlapping rows, a row outside the job and one without a start.
        QVERIFY(q->run("SELECT 'r<b>' AS track, 1796003492876204942 AS ts, 1000 AS dur, 'a' AS name "
                       "UNION ALL SELECT 'r<b>', 1796003492876205442, 1000, 'b' "
                       "UNION ALL SELECT 'r<b>', 5, 10, 'early' "
                       "UNION ALL SELECT 'r<b>', NULL, 10, 'no start'"));
        QVERIFY(q->drawAsTrack());
        QCOMPARE(q->statusText(), QStringLiteral("query 2: 2 of 4 rows on 2 tracks (1 without a whole-number rank, start and end, "
                                                 "1 outside the job's time span)"));
        const std::vector<int> all = queryLanes(*t);
        QCOMPARE(all.size(), size_t(3));
        QCOMPARE(t->model()->lanes[static_cast<size_t>(all[1])].label, std::string("query 2: r<b>"));
        QCOMPARE(t->model()->lanes[static_cast<size_t>(all[2])].label, std::string("query 2: r<b> · 2"));
        QCOMPARE(t->model()->lanes[static_cast<size_t>(all[1])].rank, -1);
        QCOMPARE(blocksOf(*t, all[1]), (std::vector<Block>{{1796003492876204942, 1796003492876205942, "a"}}));
        QCOMPARE(blocksOf(*t, all[2]), (std::vector<Block>{{1796003492876205442, 1796003492876206442, "b"}}));
        QVERIFY(t->isLanePinned(lanes[0])); // the first query's track is still pinned
        const QString valueTip = t->toolTipFor({all[1], 0});
        QVERIFY2(valueTip.contains("query 2: r&lt;b&gt;, row 1 of the result"), qPrintable(valueTip)); // escaped

        // Removed: the job's own model again.
        q->removeTracks();
        QCOMPARE(t->model(), w.job()->timeline);
        QVERIFY(queryLanes(*t).empty());
        QVERIFY(!q->removeButton()->isEnabled());
    }

    void columnsItNeedsAreNamed()
    {
        MainWindow w(nullptr, false);
        QVERIFY(openAndWait(w, {kStore}));
        QueryPanel* q = w.queryPanel();
        QVERIFY(q->run("SELECT id, start_ns FROM activities LIMIT 1"));
        QVERIFY(!q->drawAsTrack());
        QCOMPARE(q->errorText(), QStringLiteral("To draw a result as a track it needs a column rank (or track), a start (start_ns, ts "
                                                "or start) and an end (end_ns or end) or a duration (dur or dur_ns), in ns on the "
                                                "job's clock; name is optional. This result has: id, start_ns"));
        QCOMPARE(w.timeline()->model(), w.job()->timeline);
        // Every row unusable: nothing drawn, and said.
        QVERIFY(q->run("SELECT 0 AS rank, 'x' AS start_ns, 5 AS end_ns"));
        QVERIFY(!q->drawAsTrack());
        QCOMPARE(q->errorText(), QStringLiteral("Nothing to draw: query 1: 0 of 1 rows on 0 tracks (1 without a whole-number rank, "
                                                "start and end)"));
    }

    // The example made for it: each rank's kernels over 1 ms, one track per rank.
    void exampleDrawsAsTrack()
    {
        MainWindow w(nullptr, false);
        QVERIFY(openAndWait(w, {kStore}));
        QueryPanel* q = w.queryPanel();
        QString sql;
        for (const auto& [label, text] : QueryPanel::examples())
            if (label == QStringLiteral("Kernels over 1 ms (Draw as track)"))
                sql = text;
        QVERIFY(q->run(sql));
        QVERIFY(q->drawAsTrack());
        std::map<int, size_t> blocksPerRank;
        for (int lane : queryLanes(*w.timeline()))
            blocksPerRank[w.timeline()->model()->lanes[size_t(lane)].rank] += w.timeline()->model()->lanes[size_t(lane)].events.size();
        // As `pipescope query` counts them: 19, 24, 26 and 22 kernels over 1 ms on ranks 0-3.
        QCOMPARE(blocksPerRank, (std::map<int, size_t>{{0, 19}, {1, 24}, {2, 26}, {3, 22}}));
        QVERIFY2(q->statusText().startsWith(QStringLiteral("query 1: 91 of 91 rows on ")), qPrintable(q->statusText()));
    }

    void anotherJobRemovesTheTracks()
    {
        MainWindow w(nullptr, false);
        QVERIFY(openAndWait(w, {kStore}));
        QueryPanel* q = w.queryPanel();
        QVERIFY(q->run("SELECT rank, start_ns, end_ns FROM activities WHERE kind = 0 AND rank = 0 LIMIT 2"));
        QVERIFY(q->drawAsTrack());
        QCOMPARE(queryLanes(*w.timeline()).size(), size_t(1));
        QTemporaryDir dir;
        const QString copy = dir.path() + "/copy.pipescope";
        QVERIFY(QFile::copy(kStore, copy));
        QVERIFY(openAndWait(w, {copy}));
        QVERIFY(q->tracks().empty());
        QVERIFY(queryLanes(*w.timeline()).empty());
        QCOMPARE(w.timeline()->model(), w.job()->timeline);
    }
};

QTEST_MAIN(TestQueryTrack)
#include "tst_query_track.moc"
