// The Query and Pivot panels (issue 37, item 9): read-only SQL over the
// shown job's store, as `pipescope query` runs it, in a sortable, copyable
// table; a pivot of the analysis's steps by stage and kind. Exact results
// on the bundled example; a write refused in one line; a job switch clears
// the result.
#include "MainWindow.h"
#include "panels/PivotPanel.h"
#include "panels/QueryPanel.h"
#include "panels/StepPivot.h"
#include "views/TimelineView.h"
#include "store/Store.h"

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QDockWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <map>
#include <numeric>

using namespace pipescope;
using namespace pipescope::gui;

namespace {

const QString kStore = QString::fromUtf8(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";

std::shared_ptr<const AnalysisResult> exampleAnalysis()
{
    static const auto result = [] {
        Store store(kStore.toStdString());
        const Trace t = store.load();
        return std::make_shared<const AnalysisResult>(analyze(t));
    }();
    return result;
}

QString exampleSql(const QString& label)
{
    for (const auto& [l, sql] : QueryPanel::examples())
        if (l == label)
            return sql;
    qFatal("no example %s", qPrintable(label));
}

// The rows of a model as shown, one TSV line each (header first).
QStringList lines(const QAbstractItemModel& m) { return tsvOf(m).split('\n', Qt::SkipEmptyParts); }

bool openAndWait(MainWindow& w, const QStringList& inputs)
{
    QSignalSpy shown(&w, &MainWindow::jobShown);
    QSignalSpy error(&w, &MainWindow::errorShown);
    w.open(inputs);
    for (int i = 0; i < 600 && shown.isEmpty() && error.isEmpty(); ++i)
        QTest::qWait(100);
    return !shown.isEmpty();
}

} // namespace

class TestQueryPanel : public QObject {
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

    // The NCCL example on the bundled job: exactly what `pipescope query` prints.
    void exampleQueryGivesExactRows()
    {
        QueryPanel panel;
        QAbstractItemModelTester tester(panel.model());
        panel.setStorePath(kStore);
        QVERIFY2(panel.run(exampleSql("NCCL operations by kind")), qPrintable(panel.errorText()));
        QCOMPARE(panel.errorText(), QString());
        QCOMPARE(panel.statusText(), QStringLiteral("3 rows"));
        const QStringList rows = lines(*panel.view()->model());
        QCOMPARE(rows, (QStringList{QStringLiteral("kind\tops\tbytes\ttotal_ns"),
                                    QStringLiteral("Recv\t144\t75497472\t1028116090"),
                                    QStringLiteral("Send\t144\t75497472\t846258436"),
                                    QStringLiteral("AllReduce\t16\t64\t189244477")}));
        // Sortable: by ops, descending, then AllReduce last.
        panel.view()->sortByColumn(1, Qt::DescendingOrder);
        QVERIFY(lines(*panel.view()->model()).last().startsWith(QStringLiteral("AllReduce\t16\t64\t")));
        // Copyable: Ctrl+C on the table copies what it shows.
        panel.show();
        panel.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&panel));
        panel.view()->setFocus();
        panel.view()->clearSelection();
        QTest::keySequence(panel.view(), QKeySequence::Copy);
        QCOMPARE(QApplication::clipboard()->text(), tsvOf(*panel.view()->model()));
        // The drop-down puts an example in the editor and runs it.
        const int kernels = panel.examplesBox()->findText(QStringLiteral("Kernels by total time"));
        QVERIFY(kernels > 0);
        panel.examplesBox()->activated(kernels);
        QCOMPARE(panel.editor()->toPlainText(), exampleSql("Kernels by total time"));
        QCOMPARE(panel.model()->headerData(0, Qt::Horizontal).toString(), QStringLiteral("kernel"));
        QVERIFY(panel.model()->rowCount() > 0);
    }

    // A write is refused by core's authorizer: one line, no rows.
    void writeIsRefusedInOneLine()
    {
        QueryPanel panel;
        panel.setStorePath(kStore);
        QVERIFY(panel.run(QStringLiteral("SELECT 1 AS one")));
        QCOMPARE(panel.model()->rowCount(), 1);
        QVERIFY(!panel.run(QStringLiteral("DELETE FROM meta")));
        QCOMPARE(panel.errorText(), QStringLiteral("SQL: only reading is allowed; DELETE from meta is refused "
                                                   "(pipescope query opens the store read-only)"));
        QVERIFY(!panel.errorText().contains('\n'));
        QCOMPARE(panel.model()->rowCount(), 0);
        // A multi-line statement's error is one line too.
        QVERIFY(!panel.run(QStringLiteral("SELECT *\nFROM no_such_table")));
        QVERIFY2(panel.errorText().startsWith(QStringLiteral("SQL: no such table: no_such_table")), qPrintable(panel.errorText()));
        QVERIFY(!panel.errorText().contains('\n'));
        // The next query that runs clears the error.
        QVERIFY(panel.run(QStringLiteral("SELECT COUNT(*) FROM ranks")));
        QCOMPARE(panel.errorText(), QString());
        QCOMPARE(lines(*panel.model()), (QStringList{QStringLiteral("COUNT(*)"), QStringLiteral("4")}));
        // Without a store there is nothing to run.
        panel.setStorePath({});
        QCOMPARE(panel.model()->rowCount(), 0);
        QVERIFY(!panel.run(QStringLiteral("SELECT 1")));
    }

    // The steps of the example (4 stages, 8 microbatches, 1F1B) by stage and kind.
    void pivotRowsAreExact()
    {
        PivotPanel panel;
        QAbstractItemModelTester tester(panel.model());
        panel.setResult(exampleAnalysis(), {});
        const QStringList rows = lines(*panel.model());
        // The analysed iteration's steps: 8 microbatches per stage and kind.
        QCOMPARE(rows, (QStringList{
                           QStringLiteral("stage\tkind\tcount\ttotal\tmean\tp50\tp95"),
                           QStringLiteral("0\tF\t8\t657.598 µs\t82.200 µs\t82.368 µs\t83.775 µs"),
                           QStringLiteral("0\tB\t8\t835.039 µs\t104.380 µs\t107.488 µs\t111.712 µs"),
                           QStringLiteral("1\tF\t8\t1.006 ms\t125.704 µs\t124.767 µs\t130.464 µs"),
                           QStringLiteral("1\tB\t8\t1.527 ms\t190.831 µs\t196.095 µs\t198.271 µs"),
                           QStringLiteral("2\tF\t8\t659.839 µs\t82.480 µs\t82.112 µs\t84.576 µs"),
                           QStringLiteral("2\tB\t8\t1.007 ms\t125.908 µs\t129.472 µs\t130.591 µs"),
                           QStringLiteral("3\tF\t8\t1.005 ms\t125.620 µs\t125.311 µs\t128.128 µs"),
                           QStringLiteral("3\tB\t8\t1.509 ms\t188.655 µs\t193.600 µs\t195.551 µs"),
                       }));
        // Each row against the steps themselves.
        std::map<std::pair<int, char>, std::vector<TimeNs>> byGroup;
        for (const Step& s : exampleAnalysis()->steps)
            byGroup[{s.stage, toChar(s.kind)}].push_back(s.end - s.start);
        const std::vector<PivotRow> pivot = pivotSteps(*exampleAnalysis(), PivotBy::StageKind);
        QCOMPARE(pivot.size(), byGroup.size());
        for (const PivotRow& r : pivot) {
            std::vector<TimeNs> v = byGroup[{r.stage, toChar(r.kind)}];
            std::sort(v.begin(), v.end());
            QCOMPARE(r.count, int64_t(v.size()));
            QCOMPARE(r.totalNs, std::accumulate(v.begin(), v.end(), TimeNs(0)));
            QCOMPARE(r.p50Ns, v[(v.size() + 1) / 2 - 1]);
            QCOMPARE(r.p95Ns, v[size_t(std::ceil(0.95 * double(v.size()))) - 1]);
        }
        // By microbatch: one row per stage, kind and microbatch.
        panel.groupingBox()->setCurrentIndex(1);
        QCOMPARE(panel.model()->columnCount(), 8);
        QCOMPARE(panel.model()->rowCount(), 4 * 2 * 8);
        panel.setResult(nullptr, nullptr);
        QCOMPARE(panel.model()->rowCount(), 0);
    }

    // Issue 37, item 9: the pivot over the steps of an area (time range x
    // ranks), each step that overlaps it counted whole.
    void pivotOfAnAreaIsExact()
    {
        auto result = std::make_shared<AnalysisResult>();
        auto step = [](int rank, int stage, StepKind kind, int mb, TimeNs start, TimeNs end) {
            Step s;
            s.rank = rank;
            s.stage = stage;
            s.kind = kind;
            s.microbatch = mb;
            s.start = start;
            s.end = end;
            return s;
        };
        result->steps = {step(0, 0, StepKind::F, 0, 0, 100'000),        step(0, 0, StepKind::F, 1, 100'000, 300'000),
                         step(0, 0, StepKind::F, 2, 310'000, 400'000),  step(0, 0, StepKind::B, 0, 400'000, 700'000),
                         step(1, 1, StepKind::F, 0, 100'000, 150'000),  step(1, 1, StepKind::B, 0, 450'000, 500'000)};
        PivotPanel panel;
        QAbstractItemModelTester tester(panel.model());
        panel.setResult(result, {});
        QCOMPARE(panel.model()->rowCount(), 4);
        QVERIFY(!panel.allStepsButton()->isEnabled());
        // 120-450 µs on rank 0: F 1 and F 2 overlap, F 0 ends before; B 0 starts inside.
        panel.setArea(StepArea{120'000, 450'000, {0}}, 20'000, QStringLiteral("my origin"));
        QCOMPARE(lines(*panel.model()), (QStringList{
                                            QStringLiteral("stage\tkind\tcount\ttotal\tmean\tp50\tp95"),
                                            QStringLiteral("0\tF\t2\t290.000 µs\t145.000 µs\t90.000 µs\t200.000 µs"),
                                            QStringLiteral("0\tB\t1\t300.000 µs\t300.000 µs\t300.000 µs\t300.000 µs"),
                                        }));
        QCOMPARE(panel.noteText(), QStringLiteral("The steps in the area selected on the timeline: rank 0, 330.000 µs from 100.000 µs to "
                                                  "430.000 µs (from my origin); each step that overlaps it, whole; duration = step "
                                                  "end − start; p50 and p95 by nearest rank."));
        QVERIFY(panel.allStepsButton()->isEnabled());
        // Both ranks, the range ending where rank 1's B starts: that B is not in it.
        panel.setArea(StepArea{120'000, 450'000, {0, 1}}, 0, {});
        QCOMPARE(lines(*panel.model()), (QStringList{
                                            QStringLiteral("stage\tkind\tcount\ttotal\tmean\tp50\tp95"),
                                            QStringLiteral("0\tF\t2\t290.000 µs\t145.000 µs\t90.000 µs\t200.000 µs"),
                                            QStringLiteral("0\tB\t1\t300.000 µs\t300.000 µs\t300.000 µs\t300.000 µs"),
                                            QStringLiteral("1\tF\t1\t50.000 µs\t50.000 µs\t50.000 µs\t50.000 µs"),
                                        }));
        // By microbatch, within the area.
        panel.groupingBox()->setCurrentIndex(1);
        QCOMPARE(lines(*panel.model()).mid(1), (QStringList{
                                                   QStringLiteral("0\tF\t1\t1\t200.000 µs\t200.000 µs\t200.000 µs\t200.000 µs"),
                                                   QStringLiteral("0\tF\t2\t1\t90.000 µs\t90.000 µs\t90.000 µs\t90.000 µs"),
                                                   QStringLiteral("0\tB\t0\t1\t300.000 µs\t300.000 µs\t300.000 µs\t300.000 µs"),
                                                   QStringLiteral("1\tF\t0\t1\t50.000 µs\t50.000 µs\t50.000 µs\t50.000 µs"),
                                               }));
        panel.groupingBox()->setCurrentIndex(0);
        // Outside every step: none, and said.
        panel.setArea(StepArea{800'000, 900'000, {0, 1}}, 0, {});
        QCOMPARE(panel.model()->rowCount(), 0);
        QVERIFY2(panel.noteText().endsWith("No analysed step is in it (the analysis holds the analysed iteration's steps)."),
                 qPrintable(panel.noteText()));
        // All steps again.
        panel.allStepsButton()->click();
        QCOMPARE(panel.model()->rowCount(), 4);
        QVERIFY(!panel.model()->area());
    }

    // In the window: an area dragged on the timeline over rank 1's steps opens the pivot over them.
    void areaOnTheTimelinePivotsItsSteps()
    {
        MainWindow w(nullptr, false);
        w.resize(1366, 768);
        w.show();
        QVERIFY(openAndWait(w, {kStore}));
        auto* pivot = w.findChild<PivotPanel*>();
        TimelineView* t = w.timeline();
        const auto& lanes = t->model()->lanes;
        int stepsOfRank1 = -1;
        for (size_t i = 0; i < lanes.size(); ++i)
            if (lanes[i].kind == timeline::LaneKind::Steps && lanes[i].rank == 1)
                stepsOfRank1 = int(i);
        QVERIFY(stepsOfRank1 >= 0);
        const AnalysisResult& a = *w.job()->analysis;
        const Iteration& it = a.iterations[size_t(a.selectedIteration)];
        const qint64 from = it.start, to = it.start + (it.end - it.start) / 3;
        t->selectArea(from, to, {stepsOfRank1});
        QCOMPARE(t->areaRanks(), (std::vector<int>{1}));
        QCOMPARE(pivot->model()->area(), std::optional<StepArea>(StepArea{from, to, {1}}));
        // The rows against the steps themselves: rank 1's that overlap the range.
        std::map<int, std::pair<int64_t, TimeNs>> byKind; // kind -> count, total
        for (const Step& s : a.steps)
            if (s.rank == 1 && s.end > from && s.start < to) {
                ++byKind[int(s.kind)].first;
                byKind[int(s.kind)].second += s.end - s.start;
            }
        QVERIFY(!byKind.empty());
        const std::vector<PivotRow> rows = pivotSteps(a, PivotBy::StageKind, &*pivot->model()->area());
        QCOMPARE(rows.size(), byKind.size());
        for (const PivotRow& r : rows) {
            QCOMPARE(r.stage, 1);
            QCOMPARE(r.count, byKind[int(r.kind)].first);
            QCOMPARE(r.totalNs, byKind[int(r.kind)].second);
        }
        QCOMPARE(pivot->model()->rowCount(), int(byKind.size()));
        QVERIFY2(pivot->noteText().contains("rank 1, "), qPrintable(pivot->noteText()));
        // Another job: every step again.
        QTemporaryDir dir;
        QVERIFY(QFile::copy(kStore, dir.path() + "/again.pipescope"));
        QVERIFY(openAndWait(w, {dir.path() + "/again.pipescope"}));
        QVERIFY(!pivot->model()->area());
        QCOMPARE(pivot->model()->rowCount(), 8);
    }

    void nearestRankPercentiles()
    {
        QCOMPARE(nearestRank({}, 0.5), TimeNs(0));
        QCOMPARE(nearestRank({7}, 0.95), TimeNs(7));
        const std::vector<TimeNs> v{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
        QCOMPARE(nearestRank(v, 0.50), TimeNs(5));
        QCOMPARE(nearestRank(v, 0.95), TimeNs(10));
        QCOMPARE(nearestRank(v, 0.10), TimeNs(1));
    }

    // In the window: a dock beside the others; another job clears the result,
    // the same store's job keeps it.
    void jobSwitchClearsTheResult()
    {
        MainWindow w(nullptr, false);
        w.resize(1366, 768);
        w.show();
        QVERIFY(openAndWait(w, {kStore}));
        QueryPanel* q = w.queryPanel();
        QVERIFY(q);
        QVERIFY(w.findChild<QDockWidget*>(QStringLiteral("query")));
        QVERIFY(w.findChild<QDockWidget*>(QStringLiteral("pivot")));
        QCOMPARE(q->storePath(), kStore);
        auto* pivot = w.findChild<PivotPanel*>();
        QVERIFY(pivot);
        QCOMPARE(pivot->model()->rowCount(), 8);
        QVERIFY(q->run(QStringLiteral("SELECT rank FROM ranks ORDER BY rank")));
        QCOMPARE(q->model()->rowCount(), 4);
        QVERIFY(!q->run(QStringLiteral("DROP TABLE meta")));
        QVERIFY(!q->errorText().isEmpty());
        // Another job (a copy of the store under another name): result and error go.
        QTemporaryDir dir;
        const QString copy = dir.path() + "/other.pipescope";
        QVERIFY(QFile::copy(kStore, copy));
        QVERIFY(openAndWait(w, {copy}));
        QCOMPARE(q->storePath(), copy);
        QCOMPARE(q->model()->rowCount(), 0);
        QCOMPARE(q->model()->columnCount(), 0);
        QCOMPARE(q->errorText(), QString());
        QCOMPARE(q->statusText(), QString());
        QVERIFY(q->run(QStringLiteral("SELECT COUNT(*) FROM ranks")));
        QCOMPARE(lines(*q->model()).value(1), QStringLiteral("4"));
    }
};

QTEST_MAIN(TestQueryPanel)
#include "tst_query_panel.moc"
