// The Gantt timeline widget, driven as a user would: the example capture
// loaded and analysed, wheel and keys moving the visible range, clicks
// hitting events, painting bounded by pixels, a frame that is not blank.
#include "views/TimeAxis.h"
#include "views/TimelineView.h"
#include "analysis/Analysis.h"
#include "store/Store.h"
#include "timeline/TimelineBuild.h"
#include "timeline/TimelineLinks.h"

#include <QSignalSpy>
#include <QScrollBar>
#include <QtTest>
#include <qcustomplot.h>

#include <set>

using namespace pipescope;
using namespace pipescope::timeline;
using pipescope::gui::SelectionArrow;
using pipescope::gui::TimelineEventRef;
using pipescope::gui::TimelineView;

namespace {

using Range = QPair<qint64, qint64>;

const std::string kExample = std::string(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";

std::shared_ptr<const TimelineModel> exampleModel()
{
    Store store(kExample);
    const Trace trace = store.load();
    const AnalysisResult result = analyze(trace);
    return std::make_shared<const TimelineModel>(buildMeasured(trace, result));
}

void wheel(QWidget* w, QPoint pos, int delta)
{
    QWheelEvent e(QPointF(pos), QPointF(w->mapToGlobal(pos)), QPoint(), QPoint(0, delta), Qt::NoButton, Qt::NoModifier,
                  Qt::NoScrollPhase, false);
    QApplication::sendEvent(w, &e);
}

// pp stages x dp replicas, one steps track per rank; replica `slow` runs
// each step 2 ms instead of 1 ms. Rank = replica * pp + stage.
std::shared_ptr<const TimelineModel> replicatedModel(int pp, int dp, int slow)
{
    auto m = std::make_shared<TimelineModel>();
    m->names = {""};
    for (int s = 0; s < pp; ++s)
        for (int r = 0; r < dp; ++r) {
            Lane l;
            l.kind = LaneKind::Steps;
            l.rank = r * pp + s;
            l.stage = s;
            l.replica = r;
            l.label = "steps";
            const TimeNs len = r == slow ? 2'000'000 : 1'000'000;
            for (int k = 0; k < 8; ++k) {
                Event e;
                e.start = k * 3'000'000;
                e.end = e.start + len;
                e.code = 0;
                e.microbatch = k;
                l.events.push_back(e);
            }
            m->lanes.push_back(std::move(l));
        }
    m->finalize();
    return m;
}

int laneOf(const TimelineModel& m, LaneKind kind, int rank)
{
    for (size_t i = 0; i < m.lanes.size(); ++i)
        if (m.lanes[i].kind == kind && m.lanes[i].rank == rank)
            return static_cast<int>(i);
    return -1;
}

} // namespace

class TstTimelineView : public QObject {
    Q_OBJECT

    std::shared_ptr<const TimelineModel> example_;

private slots:
    void initTestCase() { example_ = exampleModel(); }

    // Tick labels carry the unit and the decimals their spacing needs.
    void tickLabels()
    {
        QCOMPARE(gui::timeTickLabel(0, 2.5e9), QString("0.0 s"));
        QCOMPARE(gui::timeTickLabel(7.5e9, 2.5e9), QString("7.5 s"));
        QCOMPARE(gui::timeTickLabel(10e6, 10e6), QString("10 ms"));
        QCOMPARE(gui::timeTickLabel(100e6, 20e6), QString("100 ms"));
        QCOMPARE(gui::timeTickLabel(1.25e6, 0.25e6), QString("1250 µs"));
        QCOMPARE(gui::timeTickLabel(7860e6, 20e6), QString("7860 ms"));
        QCOMPARE(gui::timeTickLabel(350, 50), QString("350 ns"));
        QCOMPARE(gui::timeTickLabel(-1e-9, 1e6), QString("0 ms"));
    }

    void opensTheExample()
    {
        TimelineView v;
        v.resize(1200, 800);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        QSignalSpy range(&v, &TimelineView::visibleRangeChanged);
        v.setModel(example_);
        QVERIFY(!example_->lanes.empty());
        QCOMPARE(v.visibleRange(), (Range)qMakePair(example_->start, example_->end));
        QVERIFY(range.count() >= 1);
        // One header per stage group plus a row per lane.
        std::set<std::pair<int, int>> groups;
        for (const Lane& l : example_->lanes)
            groups.insert({l.stage, l.replica});
        QCOMPARE(v.rowCount(), static_cast<int>(example_->lanes.size() + groups.size()));
    }

    void wheelZoomsAtTheCursor()
    {
        TimelineView v;
        v.resize(1200, 800);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(example_);
        const QRect ar = v.plot()->axisRect()->rect();
        const QPoint at(ar.left() + ar.width() / 4, ar.top() + 30);
        const qint64 under = v.timeAt(at.x());
        const auto before = v.visibleRange();
        wheel(v.plot(), at, 120);
        const auto after = v.visibleRange();
        QCOMPARE(double(after.second - after.first), std::round((before.second - before.first) * 0.8));
        // The time under the cursor stays under it (to a pixel).
        QVERIFY(std::abs(v.timeAt(at.x()) - under) <= (after.second - after.first) / ar.width() + 1);
        wheel(v.plot(), at, -120);
        QVERIFY(std::abs((v.visibleRange().second - v.visibleRange().first) - (before.second - before.first)) <= 2);
    }

    void keysNavigate()
    {
        TimelineView v;
        v.resize(1200, 800);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(example_);
        auto width = [&] { return v.visibleRange().second - v.visibleRange().first; };
        const qint64 w0 = width();
        const auto r0 = v.visibleRange();
        QTest::keyClick(&v, Qt::Key_W);
        QVERIFY(std::abs(width() - w0 / 2) <= 1);
        QVERIFY(std::abs((v.visibleRange().first + v.visibleRange().second) / 2 - (r0.first + r0.second) / 2) <= 1);
        QTest::keyClick(&v, Qt::Key_S);
        QVERIFY(std::abs(width() - w0) <= 2);
        const auto r1 = v.visibleRange();
        QTest::keyClick(&v, Qt::Key_D);
        QVERIFY(std::abs(v.visibleRange().first - (r1.first + w0 / 10)) <= 1);
        QTest::keyClick(&v, Qt::Key_A);
        QTest::keyClick(&v, Qt::Key_Left);
        QVERIFY(std::abs(v.visibleRange().first - (r1.first - w0 / 10)) <= 2);
        QTest::keyClick(&v, Qt::Key_Right);
        QTest::keyClick(&v, Qt::Key_W);
        QTest::keyClick(&v, Qt::Key_W);
        QTest::keyClick(&v, Qt::Key_0);
        QCOMPARE(v.visibleRange(), (Range)qMakePair(example_->start, example_->end));
        QTest::keyClick(&v, Qt::Key_W);
        QTest::keyClick(&v, Qt::Key_Home);
        QCOMPARE(v.visibleRange(), (Range)qMakePair(example_->start, example_->end));
        QVERIFY(!v.shortcutsVisible());
        QTest::keyClick(&v, Qt::Key_Question);
        QVERIFY(v.shortcutsVisible());
        // Issue 37, defect 8: the list says what the wheel does as it is set, not the other way.
        v.setWheelMode(TimelineView::WheelMode::Zoom);
        QVERIFY2(v.shortcutsShown().contains(QStringLiteral("<td>wheel</td><td>zoom at the cursor</td>")), qPrintable(v.shortcutsShown()));
        v.setWheelMode(TimelineView::WheelMode::Scroll);
        QVERIFY2(v.shortcutsShown().contains(QStringLiteral("<td>wheel</td><td>scroll the tracks</td>")), qPrintable(v.shortcutsShown()));
        QVERIFY(v.shortcutsShown().contains(QStringLiteral("<td>Ctrl+wheel</td><td>zoom at the cursor</td>")));
        QVERIFY(!v.shortcutsShown().contains(QStringLiteral("<td>wheel</td><td>zoom")));
        v.setWheelMode(TimelineView::WheelMode::Zoom); // the saved setting back to the default
    }

    void hitTestAndSelection()
    {
        TimelineView v;
        v.resize(1200, 800);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(example_);
        const int steps = laneOf(*example_, LaneKind::Steps, 0);
        QVERIFY(steps >= 0);
        // Zoom onto the third step of rank 0 and point at its middle.
        const Event& e = example_->event(steps, 2);
        v.setVisibleRange(e.start - e.duration(), e.end + e.duration());
        const QRect lr = v.laneRect(steps);
        QVERIFY(!lr.isEmpty());
        const QPoint mid(int(std::lround(v.xOf((e.start + e.end) / 2))), lr.center().y());
        QCOMPARE(v.eventAt(mid), (TimelineEventRef{steps, 2}));
        QVERIFY(v.toolTipFor({steps, 2}).contains(QStringLiteral("microbatch")));
        // Beside the lane's events there is nothing; two pixels off the end still hits.
        const QPoint justAfter(int(std::lround(v.xOf(e.end))) + 1, lr.center().y());
        QCOMPARE(v.eventAt(justAfter, 3).lane, steps);

        QSignalSpy selected(&v, &TimelineView::eventSelected);
        QTest::mouseClick(v.plot(), Qt::LeftButton, {}, mid);
        QCOMPARE(selected.count(), 1);
        QCOMPARE(selected.at(0).at(0).toInt(), steps);
        QCOMPARE(selected.at(0).at(1).toLongLong(), qint64(2));
        QCOMPARE(v.selectedEvent(), (TimelineEventRef{steps, 2}));
        // '.' and ',' walk the track.
        QTest::keyClick(&v, Qt::Key_Period);
        QCOMPARE(v.selectedEvent(), (TimelineEventRef{steps, 3}));
        QTest::keyClick(&v, Qt::Key_Comma);
        QTest::keyClick(&v, Qt::Key_Comma);
        QCOMPARE(v.selectedEvent(), (TimelineEventRef{steps, 1}));
        // F fits the selected step with 5% each side.
        QTest::keyClick(&v, Qt::Key_F);
        const Event& e1 = example_->event(steps, 1);
        const qint64 pad = std::max<qint64>(5, e1.duration() / 20);
        QCOMPARE(v.visibleRange(), (Range)qMakePair(e1.start - pad, e1.end + pad));
    }

    void areaSelectionEmitsStatistics()
    {
        TimelineView v;
        v.resize(1200, 800);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(example_);
        const int steps = laneOf(*example_, LaneKind::Steps, 0);
        const Lane& sl = example_->lanes[size_t(steps)];
        // Around the first two steps (the example's steps are short, with long waits between).
        v.setVisibleRange(sl.events[0].start - sl.events[0].duration(), sl.events[1].end + sl.events[1].duration());
        for (int i = 0; i < 3; ++i)
            QApplication::processEvents(); // the range's replot and layout, before any position is taken
        const QRect lr = v.laneRect(steps);
        QSignalSpy area(&v, &TimelineView::areaSelected);
        const QPoint a(lr.left() + 100, lr.center().y()), b(lr.left() + 400, lr.center().y());
        // A row the drag does not cross, a few rows down: it is not shaded.
        int other = -1;
        for (size_t i = size_t(steps) + 3; i < example_->lanes.size() && other < 0; ++i)
            if (!v.laneRect(int(i)).isEmpty())
                other = int(i);
        QVERIFY(other >= 0);
        const QPoint inOther(lr.left() + 250, v.laneRect(other).center().y()), inSelected(lr.left() + 250, lr.top() + 1);
        const QImage before = v.grab().toImage();
        QTest::mousePress(v.plot(), Qt::LeftButton, Qt::ShiftModifier, a);
        QMouseEvent move(QEvent::MouseMove, QPointF(b), QPointF(v.plot()->mapToGlobal(b)), Qt::NoButton, Qt::LeftButton, Qt::ShiftModifier);
        QApplication::sendEvent(v.plot(), &move);
        QTest::mouseRelease(v.plot(), Qt::LeftButton, Qt::ShiftModifier, b);
        QCOMPARE(area.count(), 1);
        const qint64 from = area.at(0).at(0).toLongLong(), to = area.at(0).at(1).toLongLong();
        QCOMPARE(from, v.timeAt(a.x()));
        QCOMPARE(to, v.timeAt(b.x()));
        const auto stats = qvariant_cast<AreaStats>(area.at(0).at(2));
        const std::vector<int> one{steps};
        const AreaStats expect = example_->areaStats(one, from, to);
        QCOMPARE(stats.stepNs, expect.stepNs);
        QVERIFY(stats.stepNs[0] > 0);
        QCOMPARE(stats.stepCount, expect.stepCount);
        QApplication::processEvents();
        const QImage after = v.grab().toImage();
        const QPoint po = v.plot()->mapTo(&v, inOther), ps = v.plot()->mapTo(&v, inSelected);
        QCOMPARE(after.pixel(po), before.pixel(po));
        QVERIFY(after.pixel(ps) != before.pixel(ps));
    }

    // A visible scroll bar for the tracks, and the wheel either zooming
    // (Shift scrolls) or scrolling (Ctrl zooms), as the user chooses.
    void scrollBarAndWheelModes()
    {
        TimelineView v;
        v.resize(900, 300); // fewer rows than the example has
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(example_);
        QApplication::processEvents();
        QScrollBar* bar = v.verticalScrollBar();
        QVERIFY(bar->isVisible());
        QVERIFY(bar->isEnabled());
        QVERIFY(bar->maximum() > 0);
        bar->setValue(2);
        QCOMPARE(v.firstRow(), 2);
        bar->setValue(0);
        QCOMPARE(v.firstRow(), 0);
        const QPoint centre = v.plot()->axisRect()->rect().center();
        auto wheel = [&](Qt::KeyboardModifiers mods) {
            QWheelEvent e(QPointF(centre), QPointF(v.plot()->mapToGlobal(centre)), QPoint(), QPoint(0, -120), Qt::NoButton, mods,
                          Qt::NoScrollPhase, false);
            QApplication::sendEvent(v.plot(), &e);
        };
        const auto range = v.visibleRange();
        v.setWheelMode(TimelineView::WheelMode::Zoom);
        wheel(Qt::NoModifier); // zooms out
        QVERIFY(v.visibleRange().second - v.visibleRange().first > range.second - range.first);
        QCOMPARE(v.firstRow(), 0);
        wheel(Qt::ShiftModifier); // scrolls
        QCOMPARE(v.firstRow(), 3);
        QCOMPARE(bar->value(), 3);
        v.setWheelMode(TimelineView::WheelMode::Scroll);
        const auto before = v.visibleRange();
        wheel(Qt::NoModifier); // scrolls
        QVERIFY(v.firstRow() > 3);
        QCOMPARE(v.visibleRange(), before);
        wheel(Qt::ControlModifier); // zooms
        QVERIFY(v.visibleRange().second - v.visibleRange().first > before.second - before.first);
        v.setWheelMode(TimelineView::WheelMode::Zoom); // the saved setting back to the default
    }

    // A settable time origin: the view stays where it was, the axis counts
    // from the origin; markers keep their order and are cleared with the job.
    void timeOriginAndMarkers()
    {
        TimelineView v;
        v.resize(1200, 800);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(example_);
        QCOMPARE(v.timeOrigin(), qint64(example_->start));
        QCOMPARE(v.plot()->xAxis->label(), QStringLiteral("time from the job start"));
        const auto range = v.visibleRange();
        const qint64 origin = example_->start + (example_->end - example_->start) / 3;
        v.setTimeOrigin(origin, QStringLiteral("the start of ProfilerStep#2"));
        QCOMPARE(v.visibleRange(), range);
        QCOMPARE(v.timeOrigin(), origin);
        QCOMPARE(v.plot()->xAxis->label(), QStringLiteral("time from the start of ProfilerStep#2"));
        // The axis coordinate 0 is the origin.
        QCOMPARE(v.timeAt(v.plot()->xAxis->coordToPixel(0)), origin);
        v.addMarker(origin + 5'000);
        v.addMarker(origin - 2'000);
        v.addMarker(origin + 1'000);
        QCOMPARE(v.markers(), (std::vector<qint64>{origin - 2'000, origin + 1'000, origin + 5'000}));
        v.clearMarkers();
        QVERIFY(v.markers().empty());
        v.addMarker(origin);
        v.setModel(example_);
        QVERIFY(v.markers().empty());
        QCOMPARE(v.timeOrigin(), qint64(example_->start));
    }

    // Hovering a folded block tells about the group: how many, how busy, the longest.
    void foldedBlockTooltipSummarizesTheGroup()
    {
        auto m = std::make_shared<TimelineModel>();
        Lane l;
        l.kind = LaneKind::Bubbles;
        l.label = "bubbles";
        for (int i = 0; i < 2'000; ++i) {
            Event e;
            e.start = i * 10'000;
            e.end = e.start + 1'000;
            e.code = static_cast<uint8_t>(BubbleCause::LaunchGap);
            e.name = 0;
            l.events.push_back(e);
        }
        m->lanes.push_back(std::move(l));
        m->finalize();
        TimelineView v;
        v.resize(1000, 400);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(m);
        for (int i = 0; i < 3; ++i)
            QApplication::processEvents();
        const QRect lr = v.laneRect(0);
        QVERIFY(!lr.isEmpty());
        const QString tip = v.foldedToolTipAt(QPoint(lr.left() + lr.width() / 2, lr.center().y()));
        QVERIFY2(tip.contains(QStringLiteral("folded")), qPrintable(tip));
        QVERIFY2(tip.contains(QStringLiteral("idle intervals")), qPrintable(tip));
        QVERIFY2(tip.contains(QStringLiteral("(10.00% of the span)")), qPrintable(tip)); // 1 µs busy in every 10 µs
    }

    void paintingFollowsPixels()
    {
        // 16 lanes of 250 000 kernels each: 4M events.
        auto m = std::make_shared<TimelineModel>();
        for (int r = 0; r < 16; ++r) {
            Lane l;
            l.kind = LaneKind::Kernels;
            l.rank = r;
            l.stage = r;
            l.label = "stream 7 compute";
            TimeNs t = 0;
            for (int i = 0; i < 250'000; ++i) {
                Event e;
                e.start = t;
                e.end = t + 3'000 + (i * 7919 + r) % 5'000;
                e.code = static_cast<uint8_t>(i % 50 == 0 ? 2 : 0);
                l.events.push_back(e);
                t = e.end + 500;
            }
            m->lanes.push_back(std::move(l));
        }
        m->finalize();
        TimelineView v;
        v.resize(1000, 600);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(m);
        const int width = v.plot()->axisRect()->width();
        const int rows = v.plot()->axisRect()->height() / 18 + 1;
        for (int zoom = 0; zoom < 6; ++zoom) {
            v.plot()->replot();
            // Per row at most a rectangle, an outline and a label per 1.5 px, plus labels and lines.
            QVERIFY2(v.lastPaintPrimitives() <= rows * (width * 2 / 3 + 4) * 2,
                     qPrintable(QString::number(v.lastPaintPrimitives())));
            QVERIFY(v.lastPaintPrimitives() > 0);
            QTest::keyClick(&v, Qt::Key_W);
            QTest::keyClick(&v, Qt::Key_W);
            QTest::keyClick(&v, Qt::Key_W);
        }
    }

    void searchFindsAndWalksHits()
    {
        TimelineView v;
        v.resize(1200, 800);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(example_);
        const SearchResult expect = example_->search("nccl", false);
        QVERIFY(expect.total > 0);
        QCOMPARE(v.setSearch(QStringLiteral("nccl")), int(expect.total));
        QCOMPARE(v.searchHitCount(), int(expect.total));
        v.nextSearchHit();
        QCOMPARE(v.currentSearchHit(), 0);
        QVERIFY(v.selectedEvent().valid());
        v.previousSearchHit();
        QCOMPARE(v.currentSearchHit(), int(expect.total) - 1);
        QCOMPARE(v.setSearch(QStringLiteral("(nccl"), true), -1);
        QVERIFY(!v.searchError().isEmpty());
    }

    void tracksHideCollapseAndPin()
    {
        TimelineView v;
        v.resize(1200, 800);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(example_);
        const int n = v.rowCount();
        const int steps = laneOf(*example_, LaneKind::Steps, 0);
        v.setLaneHidden(steps, true);
        QCOMPARE(v.rowCount(), n - 1);
        QVERIFY(v.laneRect(steps).isEmpty());
        v.showAllLanes();
        QCOMPARE(v.rowCount(), n);
        v.setLanePinned(steps, true);
        QCOMPARE(v.rowCount(), n + 1); // the "pinned" header
        QCOMPARE(v.laneRect(steps).top(), v.plot()->axisRect()->top() + 18);
        v.setLanePinned(steps, false);
        const Lane& l = example_->lanes[size_t(steps)];
        int inGroup = 0;
        for (const Lane& x : example_->lanes)
            inGroup += x.stage == l.stage && x.replica == l.replica;
        v.setGroupCollapsed(l.stage, l.replica, true);
        QCOMPARE(v.rowCount(), n - inGroup);
    }

    // Pinned tracks stay on top while the others scroll beneath them, and
    // the header of the group being scrolled through stays over its tracks.
    void pinnedTracksAndGroupHeadersStick()
    {
        TimelineView v;
        v.resize(900, 300); // fewer rows than the example has
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(example_);
        QApplication::processEvents();
        const int top = v.plot()->axisRect()->top();
        const int steps = laneOf(*example_, LaneKind::Steps, 0);
        v.setLanePinned(steps, true);
        QApplication::processEvents();
        QCOMPARE(v.firstRow(), 2); // the "pinned" header and the pinned track stay above
        QCOMPARE(v.laneRect(steps).top(), top + 18);
        QScrollBar* bar = v.verticalScrollBar();
        QCOMPARE(bar->value(), 0);
        bar->setValue(bar->maximum());
        QApplication::processEvents();
        QVERIFY(v.firstRow() > 2);
        QCOMPARE(v.laneRect(steps).top(), top + 18); // still there
        // The first scrolled slot shows the header of the group being scrolled through, not its track.
        const int underHeader = v.firstRow();
        int laneThere = -1;
        for (int lane = 0; lane < int(example_->lanes.size()); ++lane)
            if (v.rowOfLane(lane) == underHeader)
                laneThere = lane;
        QVERIFY(laneThere >= 0);
        QVERIFY(v.laneRect(laneThere).isEmpty());
        const int nextLaneRow = underHeader + 1;
        for (int lane = 0; lane < int(example_->lanes.size()); ++lane)
            if (v.rowOfLane(lane) == nextLaneRow)
                QCOMPARE(v.laneRect(lane).top(), top + 3 * 18);
        // A click on the sticky header folds the group it names.
        const Lane& l = example_->lanes[size_t(laneThere)];
        QVERIFY(!v.isGroupCollapsed(l.stage, l.replica));
        QTest::mouseClick(v.plot(), Qt::LeftButton, Qt::NoModifier, QPoint(40, top + 2 * 18 + 9));
        QVERIFY(v.isGroupCollapsed(l.stage, l.replica));
        // Unpinned, the rows scroll from the top again.
        v.setLanePinned(steps, false);
        bar->setValue(0);
        QCOMPARE(v.firstRow(), 0);
    }

    // Past 16 ranks, each stage is one row: its slowest replica, with the
    // others' spread under it; a click expands a stage, selecting an event
    // of a folded replica expands its stage too.
    void replicasFoldAtScale()
    {
        TimelineView v;
        v.resize(1000, 600);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(replicatedModel(4, 8, 5)); // 32 ranks
        QApplication::processEvents();
        QVERIFY(v.replicasFolded());
        QCOMPARE(v.rowCount(), 4); // one row per stage, no scrolling
        QCOMPARE(v.slowestReplica(0), 5);
        QCOMPARE(v.slowestReplica(3), 5);
        for (int lane = 0; lane < 32; ++lane)
            QCOMPARE(v.rowOfLane(lane), -1);
        // A click on stage 1's row shows its 8 replica groups (a header and a track each).
        const int top = v.plot()->axisRect()->top();
        QTest::mouseClick(v.plot(), Qt::LeftButton, Qt::NoModifier, QPoint(60, top + 18 + 9));
        QVERIFY(v.isStageExpanded(1));
        QCOMPARE(v.rowCount(), 3 + 8 * 2);
        // Selecting an event of stage 2, replica 3 (rank 3 * 4 + 2, lane 2 * 8 + 3) expands stage 2.
        v.selectEvent({2 * 8 + 3, 0});
        QVERIFY(v.isStageExpanded(2));
        QVERIFY(v.rowOfLane(2 * 8 + 3) >= 0);
        QVERIFY(!v.laneRect(2 * 8 + 3).isEmpty()); // and scrolls to it
        // Folding off: every replica's group, as for a small job.
        v.setReplicasFolded(false);
        QCOMPARE(v.rowCount(), 32 * 2);
        // A small job does not fold.
        v.setModel(replicatedModel(4, 4, 1)); // 16 ranks
        QVERIFY(!v.replicasFolded());
        QCOMPARE(v.rowCount(), 16 * 2);
    }

    // The dark theme: the palette, the plot's background and its text follow;
    // "system" gives back the palette the application started with. Row
    // density sets the rows' height.
    void themeAndDensity()
    {
        const bool wasDark = gui::isDark(QApplication::palette());
        gui::applyAppearance({gui::ThemeChoice::Dark, 0, gui::RowDensity::Normal});
        QVERIFY(gui::isDark(QApplication::palette()));
        TimelineView v;
        v.resize(900, 300);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(example_);
        QApplication::processEvents();
        const QImage dark = v.plot()->grab().toImage();
        const QColor corner = dark.pixelColor(dark.width() - 3, 1);
        QVERIFY2(corner.lightness() < 80, qPrintable(corner.name()));
        QVERIFY(gui::viewColors(v.palette()).text.lightness() > 180);
        gui::applyAppearance({gui::ThemeChoice::System, 0, gui::RowDensity::Normal});
        QCOMPARE(gui::isDark(QApplication::palette()), wasDark);
        QApplication::processEvents();
        const QImage light = v.plot()->grab().toImage();
        QCOMPARE(light.pixelColor(light.width() - 3, 1).lightness() > 128, !wasDark);

        const int steps = laneOf(*example_, LaneKind::Steps, 0);
        QCOMPARE(v.laneRect(steps).height(), 18);
        v.setRowDensity(gui::RowDensity::Compact);
        QCOMPARE(v.laneRect(steps).height(), 15);
        v.setRowDensity(gui::RowDensity::Comfortable);
        QCOMPARE(v.laneRect(steps).height(), 22);
    }

    void tracksMoveAndCpuTracksToggle()
    {
        TimelineView v;
        v.resize(1200, 800);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(example_);
        // Rank 0's steps lead its group; moving its bubbles up puts them first.
        const int steps = laneOf(*example_, LaneKind::Steps, 0), bubbles = laneOf(*example_, LaneKind::Bubbles, 0);
        const int stepsRow = v.rowOfLane(steps);
        QCOMPARE(v.rowOfLane(bubbles), stepsRow + 1);
        v.moveLane(bubbles, -1);
        QCOMPARE(v.rowOfLane(bubbles), stepsRow);
        QCOMPARE(v.rowOfLane(steps), stepsRow + 1);
        v.moveLane(bubbles, -1); // already first in its group
        QCOMPARE(v.rowOfLane(bubbles), stepsRow);
        // Alt+Down moves the selected track back; the order survives the same model again.
        QTest::mouseClick(v.plot(), Qt::LeftButton, {}, QPoint(5, v.laneRect(bubbles).center().y()));
        QCOMPARE(v.selectedLane(), bubbles);
        QTest::keyClick(&v, Qt::Key_Down, Qt::AltModifier);
        QCOMPARE(v.rowOfLane(steps), stepsRow);
        QCOMPARE(v.rowOfLane(bubbles), stepsRow + 1);
        v.moveLane(steps, 1);
        v.setModel(example_);
        QCOMPARE(v.rowOfLane(bubbles), stepsRow);

        // CPU annotation tracks off and on together.
        int cpu = 0;
        for (const Lane& l : example_->lanes)
            cpu += l.kind == LaneKind::Cpu;
        QVERIFY(cpu > 0);
        const int n = v.rowCount();
        v.setCpuLanesShown(false);
        QCOMPARE(v.rowCount(), n - cpu);
        QVERIFY(!v.cpuLanesShown());
        v.setCpuLanesShown(true);
        QCOMPARE(v.rowCount(), n);
    }

    void selectionDrawsItsArrows()
    {
        TimelineView v;
        v.resize(1200, 800);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setModel(example_);
        // Rank 1's first forward: from rank 0's, to rank 2's.
        const int steps1 = laneOf(*example_, LaneKind::Steps, 1);
        v.selectEvent({steps1, 0});
        const auto before = precedingStep(*example_, {steps1, 0}), after = dependentStep(*example_, {steps1, 0});
        QVERIFY(before && after);
        QCOMPARE(example_->lanes[size_t(before->lane)].rank, 0);
        QCOMPARE(example_->lanes[size_t(after->lane)].rank, 2);
        const auto& arrows = v.selectionArrows();
        QCOMPARE(arrows.size(), size_t(2));
        QCOMPARE(int(arrows[0].kind), int(SelectionArrow::Kind::Preceding));
        QCOMPARE(arrows[0].fromLane, before->lane);
        QCOMPARE(arrows[0].fromNs, example_->event(before->lane, before->event).end);
        QCOMPARE(arrows[0].toNs, example_->event(steps1, 0).start);
        QCOMPARE(int(arrows[1].kind), int(SelectionArrow::Kind::Dependent));
        QCOMPARE(arrows[1].toLane, after->lane);
        QCOMPARE(arrows[1].toEvent, after->event);
        v.selectEvent({});
        QVERIFY(v.selectionArrows().empty());

        // A kernel, from the CPU call that launched it, on that thread's track.
        auto m = std::make_shared<TimelineModel>();
        Lane cpu, kernels;
        cpu.kind = LaneKind::Cpu;
        cpu.tid = 5;
        Event range;
        range.start = 0;
        range.end = 100;
        cpu.events = {range};
        kernels.kind = LaneKind::Kernels;
        Event k;
        k.start = 150;
        k.end = 300;
        k.activity = 0;
        kernels.events = {k};
        m->lanes = {cpu, kernels};
        m->finalize();
        v.setModel(m);
        v.setLaunchLookup([](int32_t activity) -> std::optional<LaunchCall> {
            if (activity != 0)
                return std::nullopt;
            return LaunchCall{5, 20, 30, "cudaLaunchKernel"};
        });
        v.selectEvent({1, 0});
        QCOMPARE(v.selectionArrows().size(), size_t(1));
        const SelectionArrow& a = v.selectionArrows()[0];
        QCOMPARE(int(a.kind), int(SelectionArrow::Kind::Launch));
        QCOMPARE(a.fromLane, 0);
        QCOMPARE(a.fromNs, qint64(20));
        QCOMPARE(a.toLane, 1);
        QCOMPARE(a.toNs, qint64(150));
    }

    void rendersSomething()
    {
        TimelineView v;
        v.resize(1000, 600);
        v.setModel(example_);
        v.setColorBy(TimelineView::ColorBy::Step);
        v.plot()->replot();
        const QImage img = v.grab().toImage();
        QVERIFY(!img.isNull());
        std::set<QRgb> colours;
        for (int y = 0; y < img.height(); y += 3)
            for (int x = 0; x < img.width(); x += 3)
                colours.insert(img.pixel(x, y));
        QVERIFY2(colours.size() > 8, qPrintable(QString::number(colours.size())));
        QVERIFY(v.lastPaintPrimitives() > 0);
    }
};

QTEST_MAIN(TstTimelineView)
#include "tst_timeline_view.moc"
