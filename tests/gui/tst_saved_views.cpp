// Views kept beside the job and links that open one (docs/app.md, "Saved
// views and links"): a view saved and reopened in a new window comes back
// exactly; a damaged or unwritable view file costs one status line; --at
// parses exactly; Edit > Copy link writes the command that opens the same place.
#include "MainWindow.h"
#include "session/SavedView.h"
#include "views/TimelineView.h"
#include "whatif/WhatIfEditor.h"

#include "TestSupport.h"

#include <QClipboard>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QGuiApplication>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QUndoStack>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QtTest>

#include <functional>

using namespace pipescope;
using namespace pipescope::gui;

namespace {

const QString kStore = QString::fromUtf8(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";

bool openAndWait(MainWindow& w, const QStringList& inputs, const OpenOptions& o = {})
{
    QSignalSpy shown(&w, &MainWindow::jobShown);
    QSignalSpy error(&w, &MainWindow::errorShown);
    w.open(inputs, o);
    for (int i = 0; i < 600 && shown.isEmpty() && error.isEmpty(); ++i)
        QTest::qWait(100);
    return !shown.isEmpty();
}

QString statusLine(MainWindow& w) { return w.statusBar()->findChild<QLabel*>()->text(); }

// The editor's prediction once the scenario it was asked for is answered.
bool waitForPrediction(WhatIfEditor* e, const std::function<bool(const whatif::Prediction&)>& done)
{
    for (int i = 0; i < 300; ++i) {
        if (e->currentPredictionShared() && !e->controller()->restoring() && done(*e->currentPredictionShared()))
            return true;
        QTest::qWait(50);
    }
    return false;
}

void writeFile(const QString& path, const QByteArray& bytes)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(bytes);
}

// The lanes pinned, as their keys, in order.
QStringList pinnedKeys(const TimelineView& t)
{
    QStringList out;
    for (int lane : t.pinnedTracks())
        out << t.laneKey(lane);
    return out;
}

} // namespace

class TestSavedViews : public QObject {
    Q_OBJECT

private:
    QTemporaryDir cache_, dir_;
    // A writable copy of the example store in the test's folder.
    QString copyOfStore(const QString& name)
    {
        const QString p = dir_.path() + "/" + name;
        if (!QFileInfo::exists(p)) {
            QFile::copy(kStore, p);
            QFile::setPermissions(p, QFile::ReadOwner | QFile::WriteOwner);
        }
        return p;
    }

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(cache_.isValid() && dir_.isValid());
        qputenv("PIPESCOPE_CACHE_DIR", cache_.path().toUtf8());
    }

    void viewFileSitsBesideTheJob()
    {
        const QString store = copyOfStore("where.pipescope");
        QCOMPARE(savedViewPath({store}), store + ".view.json");
        // A job folder: beside it, never inside (given with a trailing slash or not).
        QDir(dir_.path()).mkpath("J");
        QFile job(dir_.path() + "/J/job.json");
        QVERIFY(job.open(QIODevice::WriteOnly));
        job.close();
        QCOMPARE(savedViewPath({dir_.path() + "/J/"}), dir_.path() + "/J.view.json");
        QCOMPARE(savedViewPath({dir_.path() + "/J"}), dir_.path() + "/J.view.json");
        // A file inside a job folder, or several inputs: not kept.
        QCOMPARE(savedViewPath({dir_.path() + "/J/shard-0.pipescope"}), QString());
        QCOMPARE(savedViewPath({store, store}), QString());
    }

    void savedViewComesBackExactly()
    {
        const QString store = copyOfStore("kept.pipescope");
        const QString file = store + ".view.json";
        SavedView saved;
        QStringList pins;
        std::vector<qint64> markers;
        QPair<qint64, qint64> range;
        {
            MainWindow w(nullptr, false);
            w.setKeepsViews(true);
            QVERIFY(openAndWait(w, {store}));
            TimelineView* t = w.timeline();
            const qint64 start = w.job()->timeline->start;
            w.iterationBox()->setCurrentIndex(2);
            Q_EMIT w.iterationBox()->activated(2);
            t->setLanePinned(3, true);
            t->setLanePinned(1, true);
            t->addMarker(start + 1'234'567, QStringLiteral("slow step"));
            t->addMarker(start + 7'654'321);
            t->addNote(start + 2'000'000, start + 3'500'000, QStringLiteral("bubble here"));
            t->setTimeOrigin(start + 111'111, QStringLiteral("my origin"));
            t->setVisibleRange(start + 1'000'003, start + 4'000'007);
            saved = w.currentView();
            pins = pinnedKeys(*t);
            markers = t->markers();
            range = t->visibleRange();
            QCOMPARE(range, qMakePair(start + 1'000'003, start + 4'000'007));
            QCOMPARE(saved.iteration, 1);
            QCOMPARE(pins.size(), 2);
            QVERIFY(w.saveView());
            QVERIFY(QFileInfo::exists(file));
            QVERIFY(statusLine(w).startsWith("Saved the view to"));
        }
        MainWindow w(nullptr, false);
        w.setKeepsViews(true);
        QVERIFY(openAndWait(w, {store}));
        const TimelineView* t = w.timeline();
        QCOMPARE(w.currentView(), saved);
        QCOMPARE(t->visibleRange(), range);
        QCOMPARE(t->markers(), markers);
        QCOMPARE(t->markerLabels(), (std::vector<QString>{QStringLiteral("slow step"), QString()}));
        QCOMPARE(pinnedKeys(*t), pins);
        QVERIFY(t->isLanePinned(1) && t->isLanePinned(3));
        QCOMPARE(t->notes().size(), size_t(1));
        QCOMPARE(t->notes()[0].text, QStringLiteral("bubble here"));
        QCOMPARE(t->timeOrigin(), w.job()->timeline->start + 111'111);
        QCOMPARE(t->timeOriginName(), QStringLiteral("my origin"));
        QCOMPARE(w.iterationBox()->currentIndex(), 2);
        QVERIFY(!statusLine(w).contains("view"));
    }

    void jobSwitchAndCloseKeepTheView()
    {
        const QString a = copyOfStore("a.pipescope"), b = copyOfStore("b.pipescope");
        QFile::remove(a + ".view.json");
        QFile::remove(b + ".view.json");
        MainWindow w(nullptr, false);
        w.setKeepsViews(true);
        QVERIFY(openAndWait(w, {a}));
        const qint64 start = w.job()->timeline->start;
        w.timeline()->addMarker(start + 42, QStringLiteral("a's"));
        QVERIFY(openAndWait(w, {b}));
        QVERIFY(QFileInfo::exists(a + ".view.json"));
        QVERIFY(w.timeline()->markers().empty()); // nothing of a's view reaches b
        QString error;
        const auto kept = readSavedView(a + ".view.json", &error);
        QVERIFY2(kept, qPrintable(error));
        QCOMPARE(kept->markers, (QList<SavedView::Marker>{{42, QStringLiteral("a's")}}));
        w.close();
        QVERIFY(QFileInfo::exists(b + ".view.json"));
        // Without keeping views (tests, screenshots) nothing is written.
        QFile::remove(b + ".view.json");
        MainWindow quiet(nullptr, false);
        QVERIFY(openAndWait(quiet, {b}));
        quiet.close();
        QVERIFY(!QFileInfo::exists(b + ".view.json"));
    }

    void damagedViewIsIgnored_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::newRow("not json") << QByteArray("{\"format\": \"pipescope-view\", ");
        QTest::newRow("binary") << QByteArray("\x00\x01\x02garbage", 10);
        QTest::newRow("array") << QByteArray("[1, 2, 3]");
        QTest::newRow("other format") << QByteArray(R"({"format": "something", "version": 1})");
        QTest::newRow("no range") << QByteArray(R"({"format": "pipescope-view", "version": 1})");
        QTest::newRow("empty range") << QByteArray(R"({"format": "pipescope-view", "version": 1, "range": {"from": 5, "to": 5}})");
        QTest::newRow("bad marker")
            << QByteArray(R"({"format": "pipescope-view", "version": 1, "range": {"from": 0, "to": 9}, "markers": [{"ns": "x"}]})");
        QTest::newRow("bad what-if") << QByteArray(
            R"({"format": "pipescope-view", "version": 2, "range": {"from": 0, "to": 9}, "whatIf": {"layers": "20"}})");
        QTest::newRow("bad job") << QByteArray(
            R"({"format": "pipescope-view", "version": 2, "range": {"from": 0, "to": 9}, "job": {"ranks": -1, "activities": 3}})");
        QTest::newRow("fractional ns") << QByteArray(R"({"format": "pipescope-view", "version": 1, "range": {"from": 0.5, "to": 9}})");
    }

    void damagedViewIsIgnored()
    {
        QFETCH(QByteArray, content);
        const QString store = copyOfStore("damaged.pipescope");
        QFile f(store + ".view.json");
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(content);
        f.close();
        MainWindow w(nullptr, false);
        w.setKeepsViews(true);
        QVERIFY(openAndWait(w, {store}));
        QVERIFY(w.timeline()->markers().empty());
        QVERIFY2(statusLine(w).contains(QStringLiteral("The saved view damaged.pipescope.view.json is damaged")), qPrintable(statusLine(w)));
        QVERIFY(!statusLine(w).contains('\n'));
        QVERIFY(w.lastError().isEmpty()); // no dialog
    }

    void unwritablePlaceIsOneStatusLine()
    {
        // The view's path is a folder: nothing can be written there (whoever runs the test).
        const QString store = copyOfStore("readonly.pipescope");
        QVERIFY(QDir().mkpath(store + ".view.json"));
        MainWindow w(nullptr, false);
        w.setKeepsViews(true);
        QVERIFY(openAndWait(w, {store}));
        QVERIFY(!w.saveView());
        QVERIFY2(statusLine(w).startsWith(QStringLiteral("The view could not be saved to ") + store + ".view.json"),
                 qPrintable(statusLine(w)));
        QVERIFY(!statusLine(w).contains('\n'));
        w.close(); // no crash, nothing thrown
        QVERIFY(QFileInfo(store + ".view.json").isDir());
    }

    // Issue 37, item 10: the what-if scenario is kept beside the job with the
    // view and comes back when the job is opened again, predicting the same.
    void whatIfScenarioComesBack()
    {
        const QString store = copyOfStore("scenario.pipescope");
        QFile::remove(store + ".view.json");
        TimeNs predicted = 0;
        std::vector<int> boundaries;
        KeptScenario kept;
        {
            MainWindow w(nullptr, false);
            w.setKeepsViews(true);
            QVERIFY(openAndWait(w, {store}));
            WhatIfEditor* e = w.whatIfEditor();
            // The demo: 1f1b, pp 4, 8 microbatches, 20 layers split 4,10,14.
            QVERIFY(waitForPrediction(e, [](const whatif::Prediction& p) { return p.partition.boundaries() == std::vector<int>{4, 10, 14}; }));
            QVERIFY(!w.currentView().whatIf); // the job's own scenario is not kept
            whatif::ScenarioChanges c;
            c.schedule = "gpipe";
            c.microbatches = 12;
            c.boundaries = std::vector<int>{5, 10, 15};
            e->applyChanges(c);
            QVERIFY(waitForPrediction(e, [](const whatif::Prediction& p) { return p.schedule.microbatches == 12; }));
            const TimeNs atReference = e->currentPredictionShared()->iterationNs();
            e->setStageSpeeds(QStringLiteral("1,1,0.8,1"));
            // The speeds' session answers with the job's scenario first, then this one comes back.
            QVERIFY(waitForPrediction(e, [&](const whatif::Prediction& p) {
                return p.schedule.microbatches == 12 && p.iterationNs() != atReference && e->worker()->pendingRequests() == 0;
            }));
            QVERIFY(e->costModel().heterogeneous());
            e->setExtraWorkMs(2.5);
            predicted = e->currentPredictionShared()->iterationNs();
            boundaries = e->currentPredictionShared()->partition.boundaries();
            QCOMPARE(boundaries, (std::vector<int>{5, 10, 15}));
            QVERIFY(e->currentPredictionShared()->iterationNs() != e->measuredPredictionShared()->iterationNs());
            const std::optional<KeptScenario> k = w.currentView().whatIf;
            QVERIFY(k);
            kept = *k;
            QCOMPARE(kept.layers, 20);
            QCOMPARE(kept.schedule, QStringLiteral("gpipe"));
            QCOMPARE(kept.pp, 4);
            QCOMPARE(kept.v, 1);
            QCOMPARE(kept.microbatches, 12);
            QCOMPARE(kept.boundaries, (QList<int>{5, 10, 15}));
            QCOMPARE(kept.stageSpeeds, (QList<double>{1, 1, 0.8, 1}));
            QCOMPARE(kept.extraWorkMs, 2.5);
            QCOMPARE(kept.recompute, QStringLiteral("none"));
            w.close(); // closing keeps the view
        }
        QString error;
        const auto file = readSavedView(store + ".view.json", &error);
        QVERIFY2(file && file->whatIf, qPrintable(error));
        QCOMPARE(*file->whatIf, kept);
        QVERIFY(file->job);

        MainWindow w(nullptr, false);
        w.setKeepsViews(true);
        QVERIFY(openAndWait(w, {store}));
        WhatIfEditor* e = w.whatIfEditor();
        QCOMPARE(w.currentView().whatIf, std::optional<KeptScenario>(kept)); // while it is on its way too
        QVERIFY(waitForPrediction(e, [](const whatif::Prediction& p) { return p.schedule.microbatches == 12; }));
        QCOMPARE(e->currentPredictionShared()->iterationNs(), predicted);
        QCOMPARE(e->currentPredictionShared()->partition.boundaries(), boundaries);
        QCOMPARE(e->scheduleBox()->currentData().toString(), QStringLiteral("gpipe"));
        QCOMPARE(e->microbatchBox()->value(), 12);
        QCOMPARE(e->speedsBox()->text(), QStringLiteral("1,1,0.8,1"));
        QCOMPARE(e->extraWorkMs(), 2.5);
        QCOMPARE(e->undoStack()->count(), 0); // the history starts from it
        QCOMPARE(w.currentView().whatIf, std::optional<KeptScenario>(kept));
        QVERIFY2(!statusLine(w).contains("does not fit") && !statusLine(w).contains("ignored"), qPrintable(statusLine(w)));
    }

    // A kept scenario that does not fit the job is never applied: one line says why.
    void scenarioThatDoesNotFitIsIgnored_data()
    {
        QTest::addColumn<QByteArray>("whatIf");
        QTest::addColumn<QString>("why");
        const QByteArray rest = R"("v": 1, "microbatches": 8, "microbatchOrder": "given", "recompute": "none", "stageSpeeds": [], "extraWorkMs": 0)";
        QTest::newRow("layers") << (R"({"layers": 32, "schedule": "gpipe", "pp": 4, "boundaries": [8, 16, 24], )" + rest + "}")
                                << QString("(it splits 32 layers; this job's what-if has 20)");
        QTest::newRow("boundaries") << (R"({"layers": 20, "schedule": "gpipe", "pp": 4, "boundaries": [5, 3, 15], )" + rest + "}")
                                    << QString("(stage boundaries must increase and be above 0: boundary 2 (3) does not exceed 5)");
        QTest::newRow("schedule") << (R"({"layers": 20, "schedule": "<b>nope</b>", "pp": 4, "boundaries": [5, 10, 15], )" + rest + "}")
                                  << QString("(unknown schedule '<b>nope</b>'");
        QTest::newRow("speeds") << QByteArray(R"({"layers": 20, "schedule": "gpipe", "pp": 4, "boundaries": [5, 10, 15], "v": 1, "microbatches": 8, )"
                                    R"("microbatchOrder": "given", "recompute": "none", "stageSpeeds": [1, 1], "extraWorkMs": 0})")
                                << QString("(2 GPU speeds for pp 4)");
    }

    void scenarioThatDoesNotFitIsIgnored()
    {
        QFETCH(QByteArray, whatIf);
        QFETCH(QString, why);
        const QString store = copyOfStore("misfit.pipescope");
        writeFile(store + ".view.json", R"({"format": "pipescope-view", "version": 2, "range": {"from": 1000, "to": 9000000},
            "markers": [{"ns": 77, "label": "kept"}], "whatIf": )" + whatIf + "}");
        MainWindow w(nullptr, false);
        w.setKeepsViews(true);
        QVERIFY(openAndWait(w, {store}));
        QVERIFY2(statusLine(w).contains("The saved what-if scenario does not fit this job " + why), qPrintable(statusLine(w)));
        QVERIFY(statusLine(w).endsWith(" and was ignored"));
        QVERIFY(!statusLine(w).contains('\n'));
        QCOMPARE(w.timeline()->markers(), (std::vector<qint64>{w.job()->timeline->start + 77})); // the rest of the view applies
        WhatIfEditor* e = w.whatIfEditor();
        QVERIFY(waitForPrediction(e, [](const whatif::Prediction&) { return true; }));
        QTest::qWait(300);
        QCOMPARE(e->currentPredictionShared()->partition.boundaries(), (std::vector<int>{4, 10, 14})); // the job's own
        QCOMPARE(e->currentPredictionShared()->schedule.microbatches, 8);
        QVERIFY(!w.currentView().whatIf);
    }

    // A view kept for another job at the same path (the store imported again) is never applied.
    void viewOfAnotherJobIsIgnored()
    {
        const QString store = copyOfStore("other.pipescope");
        writeFile(store + ".view.json", R"({"format": "pipescope-view", "version": 2, "range": {"from": 1000, "to": 9000000},
            "markers": [{"ns": 77}], "job": {"ranks": 4, "activities": 12345},
            "whatIf": {"layers": 20, "schedule": "gpipe", "pp": 4, "v": 1, "microbatches": 12, "boundaries": [5, 10, 15],
                       "microbatchOrder": "given", "recompute": "none", "stageSpeeds": [], "extraWorkMs": 0}})");
        MainWindow w(nullptr, false);
        w.setKeepsViews(true);
        QVERIFY(openAndWait(w, {store}));
        const QString activities = QString::number(w.job()->trace->activities.size());
        QVERIFY2(statusLine(w).endsWith("The saved view other.pipescope.view.json was kept for another job (4 ranks, 12345 GPU "
                                        "activities; this one has 4 ranks, " + activities + " GPU activities) and was ignored"),
                 qPrintable(statusLine(w)));
        QVERIFY(w.timeline()->markers().empty());
        WhatIfEditor* e = w.whatIfEditor();
        QVERIFY(waitForPrediction(e, [](const whatif::Prediction&) { return true; }));
        QTest::qWait(300);
        QCOMPARE(e->currentPredictionShared()->schedule.microbatches, 8);
    }

    void atParsesExactly_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<bool>("valid");
        QTest::addColumn<qint64>("from");
        QTest::addColumn<qint64>("to");
        QTest::newRow("seconds") << "1.25s..1.5s" << true << qint64(1'250'000'000) << qint64(1'500'000'000);
        QTest::newRow("as shown") << "1.25 s..1.5 s" << true << qint64(1'250'000'000) << qint64(1'500'000'000);
        QTest::newRow("ms") << "250ms..300.5ms" << true << qint64(250'000'000) << qint64(300'500'000);
        QTest::newRow("us") << "12us..13.001us" << true << qint64(12'000) << qint64(13'001);
        QTest::newRow("µs") << QString::fromUtf8("12µs..14µs") << true << qint64(12'000) << qint64(14'000);
        QTest::newRow("ns") << "1500ns..2000ns" << true << qint64(1500) << qint64(2000);
        QTest::newRow("bare ns") << "1500..2000" << true << qint64(1500) << qint64(2000);
        QTest::newRow("mixed") << "999ms..1s" << true << qint64(999'000'000) << qint64(1'000'000'000);
        QTest::newRow("negative") << "-2ms..1s" << true << qint64(-2'000'000) << qint64(1'000'000'000);
        QTest::newRow("to the ns") << "1.000000001s..1.000000002s" << true << qint64(1'000'000'001) << qint64(1'000'000'002);
        QTest::newRow("trailing zeros") << "1.2500000000s..2s" << true << qint64(1'250'000'000) << qint64(2'000'000'000);
        QTest::newRow("no dots") << "1s-2s" << false << qint64(0) << qint64(0);
        QTest::newRow("empty") << "" << false << qint64(0) << qint64(0);
        QTest::newRow("no end") << "1s.." << false << qint64(0) << qint64(0);
        QTest::newRow("no start") << "..1s" << false << qint64(0) << qint64(0);
        QTest::newRow("backwards") << "2s..1s" << false << qint64(0) << qint64(0);
        QTest::newRow("zero width") << "1s..1000ms" << false << qint64(0) << qint64(0);
        QTest::newRow("unit") << "1h..2h" << false << qint64(0) << qint64(0);
        QTest::newRow("finer than ns") << "1.5ns..2ns" << false << qint64(0) << qint64(0);
        QTest::newRow("bare fraction") << "1.5..2" << false << qint64(0) << qint64(0);
        QTest::newRow("too large") << "99999999999s..999999999999s" << false << qint64(0) << qint64(0);
        QTest::newRow("words") << "start..end" << false << qint64(0) << qint64(0);
        QTest::newRow("three dots") << "1s...2s" << false << qint64(0) << qint64(0);
    }

    void atParsesExactly()
    {
        QFETCH(QString, text);
        QFETCH(bool, valid);
        QFETCH(qint64, from);
        QFETCH(qint64, to);
        QString error;
        const auto r = parseTimeRange(text, &error);
        QCOMPARE(bool(r), valid);
        QCOMPARE(error.isEmpty(), valid);
        if (valid)
            QCOMPARE(*r, qMakePair(from, to));
        else
            QVERIFY2(error.startsWith("--at"), qPrintable(error));
    }

    void linkTimesReadBackExactly()
    {
        QCOMPARE(formatLinkTime(1'250'000'000), QStringLiteral("1.25s"));
        QCOMPARE(formatLinkTime(1'500'000), QStringLiteral("1.5ms"));
        QCOMPARE(formatLinkTime(12'345), QStringLiteral("12.345us"));
        QCOMPARE(formatLinkTime(750), QStringLiteral("750ns"));
        QCOMPARE(formatLinkTime(0), QStringLiteral("0s"));
        QCOMPARE(formatLinkTime(-2'000'000), QStringLiteral("-2ms"));
        QCOMPARE(formatLinkTime(1'000'000'001), QStringLiteral("1.000000001s"));
        for (qint64 ns : {qint64(1), qint64(999), qint64(1'000), qint64(123'456'789), qint64(-987'654'321'012), qint64(86'400'000'000'123)}) {
            QString error;
            const auto r = parseTimeRange(formatLinkTime(ns) + ".." + formatLinkTime(ns + 1), &error);
            QVERIFY2(r, qPrintable(error));
            QCOMPARE(*r, qMakePair(ns, ns + 1));
        }
    }

    void copyLinkOpensTheSamePlace()
    {
        const QString store = copyOfStore("linked.pipescope");
        QFile::remove(store + ".view.json");
        QString link;
        QPair<qint64, qint64> range;
        {
            MainWindow w(nullptr, false);
            QVERIFY(openAndWait(w, {store}));
            QVERIFY(w.job()->analysis->iterations.size() >= 2);
            w.iterationBox()->setCurrentIndex(2);
            Q_EMIT w.iterationBox()->activated(2);
            const qint64 itStart = w.job()->analysis->iterations[1].start;
            w.timeline()->setVisibleRange(itStart + 1'250'000, itStart + 1'500'000);
            range = w.timeline()->visibleRange();
            w.copyLink();
            link = QGuiApplication::clipboard()->text();
            QCOMPARE(link, "pipescope-gui " + QFileInfo(store).absoluteFilePath() + " --at 1.25ms..1.5ms --iteration 1");
            QCOMPARE(w.viewLink(), link);
            // The whole trace: from the job start, no iteration.
            w.iterationBox()->setCurrentIndex(0);
            Q_EMIT w.iterationBox()->activated(0);
            const qint64 start = w.job()->timeline->start;
            w.timeline()->setVisibleRange(start + 1'000, start + 2'000'000'000);
            QCOMPARE(w.viewLink(), "pipescope-gui " + QFileInfo(store).absoluteFilePath() + " --at 1us..2s");
        }
        // The link's words opened: the same range, the same iteration.
        MainWindow w(nullptr, false);
        QString error;
        w.setStartRange(*parseTimeRange("1.25ms..1.5ms", &error));
        OpenOptions o;
        o.iteration = 1;
        QVERIFY(openAndWait(w, {store}, o));
        QCOMPARE(w.timeline()->visibleRange(), range);
        QCOMPARE(w.iterationBox()->currentIndex(), 2);
        QCOMPARE(w.viewLink(), link);
        // A path a shell would split is quoted.
        QCOMPARE(viewLink({"/tmp/my job's.pipescope"}, 0, 1000, -1),
                 QStringLiteral("pipescope-gui '/tmp/my job'\\''s.pipescope' --at 0s..1us"));
    }

    void atWithoutIterationCountsFromTheJobStart()
    {
        const QString store = copyOfStore("at.pipescope");
        MainWindow w(nullptr, false);
        w.setStartRange({2'000'000, 3'000'000});
        QVERIFY(openAndWait(w, {store}));
        const qint64 start = w.job()->timeline->start;
        QCOMPARE(w.timeline()->visibleRange(), qMakePair(start + 2'000'000, start + 3'000'000));
        QCOMPARE(w.iterationBox()->currentIndex(), 0);
        QCOMPARE(w.timeline()->timeOrigin(), start);
    }

    void markerAtCursorAndNoteOnSelection()
    {
        const QString store = copyOfStore("marks.pipescope");
        MainWindow w(nullptr, false);
        QVERIFY(openAndWait(w, {store}));
        const auto range = w.timeline()->visibleRange();
        w.addMarkerAtCursor(QStringLiteral("here")); // no mouse over the tracks, nothing selected: the middle
        QCOMPARE(w.timeline()->markers(), (std::vector<qint64>{range.first + (range.second - range.first) / 2}));
        QCOMPARE(w.timeline()->markerLabels().front(), QStringLiteral("here"));
        QVERIFY(!w.addNoteOnSelection(QStringLiteral("no area")));
        QVERIFY(w.findChild<QAction*>("copy-link") && w.findChild<QAction*>("add-marker") && w.findChild<QAction*>("save-view"));
    }
};

QTEST_MAIN(TestSavedViews)
#include "tst_saved_views.moc"
