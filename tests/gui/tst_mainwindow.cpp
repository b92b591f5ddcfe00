// The main window as a user meets it: opening a store, a folder of PyTorch
// profiler traces (imported once into the cache, then reused) and a real
// external trace; a bad file gives one error and the app stays usable; and
// the app renders non-blank screenshots headless.
#include "AppSession.h"
#include "DetailsPanel.h"
#include "MainWindow.h"
#include "PipelineView.h"
#include "TimelineView.h"
#include "WhatIfEditor.h"

#include "TestSupport.h"

#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QLabel>
#include <QStatusBar>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <map>
#include <set>

using namespace pipescope;
using namespace pipescope::gui;

namespace {

const QString kSource = QString::fromUtf8(PIPESCOPE_SOURCE_DIR);
const QString kStore = kSource + "/resources/examples/pipeline-1f1b-4stage.pipescope";
const QString kSimulated = kSource + "/resources/examples/simulated-1f1b";

// Opens and waits for the window to show the job (or an error).
bool openAndWait(MainWindow& w, const QStringList& inputs, const OpenOptions& o = {})
{
    QSignalSpy shown(&w, &MainWindow::jobShown);
    QSignalSpy error(&w, &MainWindow::errorShown);
    w.open(inputs, o);
    for (int i = 0; i < 600 && shown.isEmpty() && error.isEmpty(); ++i)
        QTest::qWait(100);
    return !shown.isEmpty();
}

int distinctColours(const QImage& image)
{
    std::set<QRgb> colours;
    for (int y = 0; y < image.height(); y += 7)
        for (int x = 0; x < image.width(); x += 7)
            colours.insert(image.pixel(x, y));
    return static_cast<int>(colours.size());
}

} // namespace

class TestMainWindow : public QObject {
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

    void opensTheRealCapture()
    {
        MainWindow w(nullptr, false);
        w.resize(1200, 800);
        w.show();
        QVERIFY(openAndWait(w, {kStore}));
        const auto job = w.job();
        QCOMPARE(job->storePath, kStore); // a store is read where it is, not imported
        QCOMPARE(job->analysis->pipeline.pp, 4);
        QCOMPARE(job->analysis->pipeline.microbatches, 8);
        QCOMPARE(QString::fromStdString(job->analysis->pipeline.schedule), QStringLiteral("1f1b"));
        QVERIFY(job->costModel.has_value());
        QCOMPARE(w.windowTitle(), QStringLiteral("pipeline-1f1b-4stage.pipescope - pipescope"));
        // The timeline shows the selected iteration (with a margin of 2% each side).
        const Iteration& it = job->analysis->iterations[size_t(job->analysis->selectedIteration)];
        const auto [from, to] = w.timeline()->visibleRange();
        QCOMPARE(from, it.start - (it.end - it.start) / 50);
        QCOMPARE(to, it.end + (it.end - it.start) / 50);
        // The editor predicts the measured configuration once the worker answers.
        QTRY_VERIFY_WITH_TIMEOUT(w.whatIfEditor()->currentPrediction().has_value(), 10000);
        QCOMPARE(w.whatIfEditor()->currentPrediction()->schedule.pp, 4);
        QVERIFY(w.lastError().isEmpty());
    }

    void selectionShowsDetails()
    {
        MainWindow w(nullptr, false);
        w.resize(1400, 900);
        w.show();
        QVERIFY(openAndWait(w, {kStore}));
        const auto model = w.timeline()->model();
        // The first bubble of rank 1, and the first NCCL kernel of rank 1.
        int bubbleLane = -1, kernelLane = -1;
        qint64 kernel = -1;
        for (size_t i = 0; i < model->lanes.size(); ++i) {
            const auto& l = model->lanes[i];
            if (l.rank != 1)
                continue;
            if (l.kind == timeline::LaneKind::Bubbles && bubbleLane < 0 && !l.events.empty())
                bubbleLane = int(i);
            if (l.kind == timeline::LaneKind::Kernels && kernelLane < 0)
                for (size_t k = 0; k < l.events.size(); ++k) {
                    const int act = l.events[k].activity;
                    if (act >= 0 && w.job()->trace->activities[size_t(act)].ncclIndex >= 0) {
                        kernelLane = int(i);
                        kernel = qint64(k);
                        break;
                    }
                }
        }
        QVERIFY(bubbleLane >= 0 && kernelLane >= 0);
        const auto& b = model->lanes[size_t(bubbleLane)].events[0];
        w.timeline()->selectEvent({bubbleLane, 0});
        const QString bubbleText = w.details()->plainText();
        QVERIFY2(bubbleText.contains(QStringLiteral("cause\n") + QString::fromUtf8(toString(BubbleCause(b.code)).data())),
                 qPrintable(bubbleText));
        QVERIFY(bubbleText.contains(causeExplanation(BubbleCause(b.code)).left(30)));
        QVERIFY(bubbleText.contains(QStringLiteral("%1 ns on the job clock").arg(b.start)));

        w.timeline()->selectEvent({kernelLane, kernel});
        const Activity& a = w.job()->trace->activities[size_t(model->lanes[size_t(kernelLane)].events[size_t(kernel)].activity)];
        const NcclOp& op = w.job()->trace->ncclOps[size_t(a.ncclIndex)];
        const QString kernelText = w.details()->plainText();
        QVERIFY2(kernelText.contains(QStringLiteral("NCCL\n") + QString::fromStdString(op.kind)), qPrintable(kernelText));
        QVERIFY(kernelText.contains(QString::fromStdString(w.job()->trace->str(a.name))));
        QVERIFY(kernelText.contains(QStringLiteral("correlation\n%1").arg(*a.correlation)));
    }

    void importsAFolderOnceIntoTheCache()
    {
        const QString cached = AppSession::cachedStorePath({kSimulated});
        QVERIFY(cached.startsWith(cache_.path() + "/imports/"));
        QVERIFY(!QFileInfo::exists(cached));
        MainWindow w(nullptr, false);
        QVERIFY(openAndWait(w, {kSimulated}));
        QCOMPARE(w.job()->storePath, cached);
        QVERIFY(w.job()->simulated);
        QVERIFY(w.windowTitle().contains(QStringLiteral("[SIMULATED]")));
        QCOMPARE(w.job()->analysis->pipeline.pp, 4);
        QCOMPARE(w.job()->analysis->pipeline.dp, 2);
        const QDateTime first = QFileInfo(cached).lastModified();
        // Unchanged inputs: the cached store is reused, not imported again.
        QVERIFY(openAndWait(w, {kSimulated}));
        QCOMPARE(QFileInfo(cached).lastModified(), first);
    }

    void opensAnExternalTrace()
    {
        PIPESCOPE_REQUIRE_EXTERNAL_DATA();
        const QString file = QString::fromStdString(test::externalData("kineto/hta-nccl-2rank-r0.json.gz"));
        MainWindow w(nullptr, false);
        QVERIFY(openAndWait(w, {file}));
        QCOMPARE(w.job()->analysis->ranks, std::vector<int>{0});
        QVERIFY(w.job()->trace->activities.size() > 0);
    }

    void badFileShowsOneErrorAndTheAppStaysUsable()
    {
        QTemporaryDir dir;
        const QString bad = dir.path() + "/bad.json";
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("{\"traceEvents\": [ {\"ph\": \"X\", \"ts\": ");
        f.close();
        MainWindow w(nullptr, false);
        w.show();
        QSignalSpy error(&w, &MainWindow::errorShown);
        QVERIFY(!openAndWait(w, {bad}));
        QCOMPARE(error.count(), 1);
        QVERIFY2(w.lastError().contains(bad), qPrintable(w.lastError()));
        QVERIFY(!w.job());
        // Still usable: the next file opens.
        QVERIFY(openAndWait(w, {kStore}));
        QVERIFY(w.lastError().isEmpty());

        QVERIFY(!openAndWait(w, {dir.path() + "/missing.pipescope"}));
        QCOMPARE(w.lastError(), dir.path() + "/missing.pipescope: no such file or folder");
        QCOMPARE(w.job()->storePath, kStore); // the job shown before stays
    }

    void screenshotsAreNotBlank_data()
    {
        QTest::addColumn<QString>("view");
        QTest::newRow("timeline") << "timeline";
        QTest::newRow("pipeline") << "pipeline";
        QTest::newRow("whatif") << "whatif";
    }

    void screenshotsAreNotBlank()
    {
        QFETCH(QString, view);
        QTemporaryDir dir;
        const QString out = dir.path() + "/" + view + ".png";
        QProcess p;
        p.start(QStringLiteral(PIPESCOPE_GUI), {"--screenshot", out, "--view", view, "--size", "1700x1100", kStore});
        QVERIFY(p.waitForFinished(120000));
        QCOMPARE(p.exitCode(), 0);
        const QImage image(out);
        QCOMPARE(image.size(), QSize(1700, 1100));
        QVERIFY2(distinctColours(image) > 20, qPrintable(QString::number(distinctColours(image))));
    }

    void screenshotRefusesWhatCoreRefuses()
    {
        QTemporaryDir dir;
        QProcess p;
        p.start(QStringLiteral(PIPESCOPE_GUI), {"--screenshot", dir.path() + "/x.png", "--view", "whatif", "--layers", "16",
                                                 "--boundaries", "8,4,12", kStore});
        QVERIFY(p.waitForFinished(120000));
        QCOMPARE(p.exitCode(), 1);
        QVERIFY2(QString::fromUtf8(p.readAllStandardError()).contains("stage boundaries must increase"),
                 qPrintable(QString::fromUtf8(p.readAllStandardError())));
        QVERIFY(!QFileInfo::exists(dir.path() + "/x.png"));

        p.start(QStringLiteral(PIPESCOPE_GUI), {"--screenshot", dir.path() + "/x.png", "--view", "gantt", kStore});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 1);
        QVERIFY(QString::fromUtf8(p.readAllStandardError())
                    .split('\n')
                    .contains(QStringLiteral("pipescope-gui: error: --view must be timeline, pipeline or whatif (got 'gantt')")));
    }

    // A large store shows a first frame of one window, then the whole trace in
    // its place; each job is whole for what it covers. firstFrameAbove 0 makes
    // the example store "large".
    void firstFrameThenWholeTrace()
    {
        MainWindow w(nullptr, false);
        w.resize(1200, 800);
        w.show();
        QSignalSpy first(&w, &MainWindow::firstFrameShown);
        std::shared_ptr<const Job> partial;
        QString statusWhileLoading;
        connect(&w, &MainWindow::firstFrameShown, this, [&] {
            partial = w.job();
            statusWhileLoading = w.statusBar()->findChild<QLabel*>()->text();
        });
        OpenOptions o;
        o.firstFrameAbove = 0;
        QVERIFY(openAndWait(w, {kStore}, o));
        QCOMPARE(first.count(), 1);
        QVERIFY(partial);
        QVERIFY(!partial->complete);
        QVERIFY(!partial->costModel);
        QVERIFY(statusWhileLoading.contains(QStringLiteral("loading the whole trace")));
        const auto full = w.job();
        QVERIFY(full->complete);
        QVERIFY(full->costModel.has_value());

        // The window: on the rank with the most GPU activities, the middle 1/20 of them by count.
        std::map<int, std::vector<TimeNs>> starts;
        for (const Activity& a : full->trace->activities)
            starts[a.rank].push_back(a.start);
        const std::vector<TimeNs>* busiest = nullptr;
        for (const auto& [r, v] : starts)
            if (!busiest || v.size() > busiest->size())
                busiest = &v;
        QVERIFY(busiest);
        const size_t n = busiest->size(), k = n / 20, lo = (n - k) / 2;
        QVERIFY(k > 0);
        const TimeNs from = (*busiest)[lo], to = (*busiest)[lo + k];
        QCOMPARE(partial->windowFrom, from);
        QCOMPARE(partial->windowTo, to);
        // Exactly the whole trace's activities starting in the window, and a timeline of them.
        std::vector<int64_t> expected, got;
        for (const Activity& a : full->trace->activities)
            if (a.start >= from && a.start < to)
                expected.push_back(a.id);
        for (const Activity& a : partial->trace->activities)
            got.push_back(a.id);
        QVERIFY(!got.empty());
        QCOMPARE(got, expected);
        size_t kernelEvents = 0;
        for (const auto& l : partial->timeline->lanes)
            if (l.kind == timeline::LaneKind::Kernels)
                kernelEvents += l.events.size();
        QCOMPARE(kernelEvents, got.size());
        // The whole trace keeps the range the first frame showed.
        QCOMPARE(w.timeline()->model(), full->timeline);
        QVERIFY(w.lastError().isEmpty());
    }
};

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
