// The analysis models and panels of the desktop app: every model under
// QAbstractItemModelTester, exact cells for the bundled real capture and a
// hand-built pipeline, numeric sorting, TSV copying, and the panels built,
// fed and painted.
#include "SyntheticTrace.h"

#include "panels/AnalysisTableModel.h"
#include "panels/BubblePanel.h"
#include "panels/BubbleTableModel.h"
#include "panels/ComparePanel.h"
#include "panels/FillableModel.h"
#include "panels/CriticalPathModel.h"
#include "panels/CriticalPathPanel.h"
#include "panels/DiagnosticsModel.h"
#include "panels/DiagnosticsPanel.h"
#include "panels/HtaModel.h"
#include "panels/HtaPanel.h"
#include "panels/ImbalanceModel.h"
#include "panels/ImbalancePanel.h"
#include "panels/MicrobatchModel.h"
#include "panels/MicrobatchPanel.h"
#include "panels/StragglerModel.h"
#include "panels/SummaryModel.h"
#include "panels/SummaryPanel.h"
#include "analysis/Verdict.h"
#include "store/Store.h"

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QClipboard>
#include <QImage>
#include <QPixmap>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QtTest>
#include <qcustomplot.h>

#include <functional>
#include <set>

using namespace pipescope;
using namespace pipescope::gui;

namespace {

using ResultPtr = std::shared_ptr<const AnalysisResult>;
using TracePtr = std::shared_ptr<const Trace>;

struct Job {
    TracePtr trace;
    ResultPtr result;
};

const Job& realJob()
{
    static const Job job = [] {
        Store store(std::string(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope");
        auto t = std::make_shared<const Trace>(store.load());
        return Job{t, std::make_shared<const AnalysisResult>(analyze(*t))};
    }();
    return job;
}

// p=4, m=8, F=1 ms, B=2 ms, free transfers: 24 ms busy and 9 ms of fill/drain per rank.
const Job& syntheticJob()
{
    static const Job job = [] {
        auto t = std::make_shared<const Trace>(test::pipelineTrace(test::PipelineSpec{}).trace);
        return Job{t, std::make_shared<const AnalysisResult>(analyze(*t))};
    }();
    return job;
}

// Four ranks whose idle times sort differently as text and as numbers.
ResultPtr handMadeIdle()
{
    auto r = std::make_shared<AnalysisResult>();
    r->selectedIteration = 0;
    r->iterations.push_back({0, "step", IterationSource::Range, 0, 2'000'000'000, {}});
    const TimeNs idle[] = {9'000'000, 12'000'000, 850'000, 1'500'000'000};
    for (int rank = 0; rank < 4; ++rank) {
        RankIdle ri;
        ri.rank = rank;
        ri.windowNs = 2'000'000'000;
        ri.idleNs = idle[rank];
        ri.busyNs = ri.windowNs - ri.idleNs;
        ri.byCause[static_cast<size_t>(BubbleCause::HostBound)] = idle[rank];
        r->idle.push_back(ri);
        r->ranks.push_back(rank);
    }
    r->bubbles.push_back({0, 1, 100, 200, BubbleCause::HostBound});
    r->bubbles.push_back({0, 1, 300, 700, BubbleCause::HostBound});
    r->bubbles.push_back({0, 1, 800, 850, BubbleCause::LaunchGap});
    return r;
}

QString cell(const QAbstractItemModel& m, int row, int col) { return m.data(m.index(row, col)).toString(); }

QStringList rowText(const QAbstractItemModel& m, int row)
{
    QStringList out;
    for (int c = 0; c < m.columnCount(); ++c)
        out << cell(m, row, c);
    return out;
}

QStringList header(const QAbstractItemModel& m)
{
    QStringList out;
    for (int c = 0; c < m.columnCount(); ++c)
        out << m.headerData(c, Qt::Horizontal).toString();
    return out;
}

// Every model the panels use, built fresh.
std::vector<std::function<std::unique_ptr<AnalysisTableModel>()>> allModels()
{
    return {
        [] { return std::make_unique<BubbleTableModel>(); },
        [] { return std::make_unique<FillableModel>(); },
        [] { return std::make_unique<ImbalanceModel>(); },
        [] { return std::make_unique<StragglerModel>(); },
        [] { return std::make_unique<MicrobatchModel>(); },
        [] { return std::make_unique<CriticalPathModel>(CriticalPathModel::Breakdown::ByStage); },
        [] { return std::make_unique<CriticalPathModel>(CriticalPathModel::Breakdown::ByKind); },
        [] { return std::make_unique<CriticalPathModel>(CriticalPathModel::Breakdown::ByLimiter); },
        [] { return std::make_unique<HtaModel>(HtaModel::View::Temporal); },
        [] { return std::make_unique<HtaModel>(HtaModel::View::StreamIdle); },
        [] { return std::make_unique<DiagnosticsModel>(); },
        [] { return std::make_unique<SummaryModel>(); },
    };
}

// Distinct colours in a widget's rendering: a blank widget has one or two.
int colours(QWidget& w)
{
    const QImage img = w.grab().toImage();
    std::set<QRgb> seen;
    for (int y = 0; y < img.height(); y += 2)
        for (int x = 0; x < img.width(); x += 2)
            seen.insert(img.pixel(x, y));
    return static_cast<int>(seen.size());
}

} // namespace

class TestModels : public QObject {
    Q_OBJECT
private slots:
    void modelsPassTheTester();
    void bubbleTableRealCapture();
    void bubbleTableSynthetic();
    void fillableSynthetic();
    void biggestBubble();
    void imbalanceSynthetic();
    void stragglerRows();
    void microbatchesUneven();
    void imbalanceRealCapture();
    void criticalPathRealCapture();
    void htaSynthetic();
    void diagnosticsRealCapture();
    void summarySynthetic();
    void sortsNumerically();
    void tsvOfTinyModel();
    void panelsTakeResults();
    void panelsPaint();
    void bubblePanelJumps();
    void copyTableToClipboard();
    void compareNotesNeverEmptyOrWrong();
};

void TestModels::modelsPassTheTester()
{
    for (const auto& make : allModels()) {
        auto model = make();
        QAbstractItemModelTester tester(model.get(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        model->setResult(realJob().result, realJob().trace);
        QVERIFY(model->columnCount() > 0);
        model->setResult(syntheticJob().result, syntheticJob().trace);
        model->setResult(handMadeIdle(), {});
        model->setResult({}, {});
        QVERIFY(model->columnCount() > 0); // headers stay for an empty table
        // Behind the sorting proxy the panels use, too.
        QSortFilterProxyModel proxy;
        proxy.setSourceModel(model.get());
        proxy.setSortRole(AnalysisTableModel::SortRole);
        QAbstractItemModelTester proxyTester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model->setResult(realJob().result, realJob().trace);
        for (int c = 0; c < proxy.columnCount(); ++c) {
            proxy.sort(c, Qt::DescendingOrder);
            proxy.sort(c, Qt::AscendingOrder);
        }
    }
}

void TestModels::bubbleTableRealCapture()
{
    BubbleTableModel m;
    m.setResult(realJob().result, realJob().trace);
    QCOMPARE(header(m), (QStringList{"rank", "stage", "fill_drain", "wait_neighbor", "p2p_transfer", "dp_sync", "all_to_all",
                                     "host_bound", "step_overhead", "launch_gap", "other", "idle", "idle %"}));
    QCOMPARE(m.rowCount(), 4);
    QCOMPARE(rowText(m, 0), (QStringList{"0", "0", "735.869 µs", "77.327 ms", "315.744 µs", "0", "0", "507.706 µs", "0",
                                         "225.435 µs", "4.380 ms", "83.492 ms", "98.37%"}));
    QCOMPARE(rowText(m, 3), (QStringList{"3", "3", "25.628 ms", "51.618 ms", "269.280 µs", "0", "0", "0", "0", "421.562 µs",
                                         "4.531 ms", "82.468 ms", "97.16%"}));
    // Sort values are the raw nanoseconds the text rounds.
    const RankIdle* ri = realJob().result->idleOf(realJob().result->selectedIteration, 0);
    QVERIFY(ri);
    QCOMPARE(m.data(m.index(0, BubbleTableModel::IdleColumn), AnalysisTableModel::SortRole).toLongLong(), ri->idleNs);
    QCOMPARE(m.data(m.index(0, BubbleTableModel::IdleColumn), Qt::ToolTipRole).toString(), QString::number(ri->idleNs) + " ns");
    // Cause columns carry the cause's colour in the header.
    QCOMPARE(m.headerData(BubbleTableModel::FirstCauseColumn, Qt::Horizontal, Qt::DecorationRole).value<QColor>(), QColor("#e15759"));
}

void TestModels::bubbleTableSynthetic()
{
    BubbleTableModel m;
    m.setResult(syntheticJob().result, syntheticJob().trace);
    QCOMPARE(m.rowCount(), 4);
    for (int row = 0; row < 4; ++row)
        QCOMPARE(rowText(m, row), (QStringList{QString::number(row), QString::number(row), "9.000 ms", "0", "0", "0", "0",
                                               "0", "0", "0", "0", "9.000 ms", "27.27%"}));
}

// All of each rank's 9 ms of idle is fill and drain, so all of it is fillable.
void TestModels::fillableSynthetic()
{
    FillableModel m;
    m.setResult(syntheticJob().result, syntheticJob().trace);
    QCOMPARE(m.rowCount(), 4);
    const QStringList h = header(m);
    QCOMPARE(h.mid(0, 5), (QStringList{"stage", "rank", "bubbles", "total", "longest"}));
    for (int row = 0; row < 4; ++row) {
        QCOMPARE(cell(m, row, 0), QString::number(row));
        QCOMPARE(cell(m, row, 3), QStringLiteral("9.000 ms"));
        // The length classes hold every bubble once.
        int64_t inClasses = 0;
        for (int c = 5; c < m.columnCount(); ++c)
            inClasses += m.data(m.index(row, c), AnalysisTableModel::SortRole).toLongLong();
        QCOMPARE(inClasses, m.data(m.index(row, 2), AnalysisTableModel::SortRole).toLongLong());
    }
    // Stage 0 runs F0-F3 in [0, 4] ms and waits for B0 until 10 ms (6 ms), then
    // waits 1 ms before each of B1-B3. Stage 3 waits 3 ms for F0 and idles
    // 6 ms while the last backward drains through stages 2 to 0.
    QCOMPARE(h.mid(5), (QStringList{"800.000 µs–1.600 ms", "1.600 ms–3.200 ms", "3.200 ms–6.400 ms"}));
    QCOMPARE(rowText(m, 0), (QStringList{"0", "0", "4", "9.000 ms", "6.000 ms", "3", "0", "1"}));
    QCOMPARE(rowText(m, 3), (QStringList{"3", "3", "2", "9.000 ms", "6.000 ms", "0", "1", "1"}));
}

void TestModels::biggestBubble()
{
    BubbleTableModel m;
    m.setResult(handMadeIdle(), {});
    const int host = BubbleTableModel::FirstCauseColumn + static_cast<int>(BubbleCause::HostBound);
    const int gap = BubbleTableModel::FirstCauseColumn + static_cast<int>(BubbleCause::LaunchGap);
    QCOMPARE(m.data(m.index(1, host), BubbleTableModel::BiggestBubbleRole).toList(), (QVariantList{qint64(300), qint64(700)}));
    QCOMPARE(m.data(m.index(1, gap), BubbleTableModel::BiggestBubbleRole).toList(), (QVariantList{qint64(800), qint64(850)}));
    // Outside the cause columns: the longest of any cause.
    QCOMPARE(m.data(m.index(1, BubbleTableModel::IdleColumn), BubbleTableModel::BiggestBubbleRole).toList(),
             (QVariantList{qint64(300), qint64(700)}));
    QVERIFY(!m.data(m.index(0, host), BubbleTableModel::BiggestBubbleRole).isValid()); // rank 0 has no bubble records
    QCOMPARE(m.data(m.index(2, 0), BubbleTableModel::RankRole).toInt(), 2);

    // On the real capture the biggest fill/drain bubble of rank 0 lies in the iteration.
    m.setResult(realJob().result, realJob().trace);
    const auto se = m.data(m.index(0, BubbleTableModel::FirstCauseColumn), BubbleTableModel::BiggestBubbleRole).toList();
    QCOMPARE(se.size(), 2);
    const Iteration& it = realJob().result->iterations[static_cast<size_t>(realJob().result->selectedIteration)];
    QVERIFY(se[0].toLongLong() >= it.start && se[1].toLongLong() <= it.end && se[0].toLongLong() < se[1].toLongLong());
    TimeNs longest = 0;
    for (const Bubble& b : realJob().result->bubbles)
        if (b.rank == 0 && b.cause == BubbleCause::FillDrain && b.iteration == realJob().result->selectedIteration)
            longest = std::max(longest, b.end - b.start);
    QCOMPARE(se[1].toLongLong() - se[0].toLongLong(), longest);
}

void TestModels::imbalanceSynthetic()
{
    ImbalanceModel m;
    m.setResult(syntheticJob().result, syntheticJob().trace);
    QCOMPARE(header(m), (QStringList{"stage", "ranks", "F mean", "F p50", "F p95", "B mean", "B p50", "B p95", "busy", "busy / mean"}));
    QCOMPARE(m.rowCount(), 4);
    QCOMPARE(rowText(m, 2), (QStringList{"2", "2", "1.000 ms", "1.000 ms", "1.000 ms", "2.000 ms", "2.000 ms", "2.000 ms", "24.000 ms",
                                         "1.000x"}));
    StragglerModel s;
    s.setResult(syntheticJob().result, syntheticJob().trace);
    QCOMPARE(s.rowCount(), 0);
}

// dp = 2, p = 2, m = 4; replica 1 of stage 0 computes 10% longer than its
// only peer (4 x 3.3 ms against 4 x 3 ms).
void TestModels::stragglerRows()
{
    test::PipelineSpec spec;
    spec.stages = 2;
    spec.replicas = 2;
    spec.microbatches = 4;
    spec.allReduceNs = 100'000;
    spec.slowdown[{1, 0}] = 1.1;
    const auto trace = std::make_shared<const Trace>(test::pipelineTrace(spec).trace);
    StragglerModel s;
    QAbstractItemModelTester tester(&s, QAbstractItemModelTester::FailureReportingMode::QtTest);
    s.setResult(std::make_shared<const AnalysisResult>(analyze(*trace)), trace);
    QCOMPARE(header(s), (QStringList{"rank", "stage", "compute", "peers' median", "slower by", "max cost / iteration"}));
    QCOMPARE(s.rowCount(), 1);
    QCOMPARE(rowText(s, 0), (QStringList{"1", "0", "13.200 ms", "12.000 ms", "10.00%", "1.200 ms"}));
}

void TestModels::imbalanceRealCapture()
{
    ImbalanceModel m;
    m.setResult(realJob().result, realJob().trace);
    QCOMPARE(m.rowCount(), 4);
    QCOMPARE(rowText(m, 3), (QStringList{"3", "3", "113.856 µs", "113.537 µs", "116.174 µs", "166.328 µs", "171.041 µs", "171.548 µs",
                                         "2.409 ms", "1.257x"}));
    // The bottleneck (stage 3) is bold, the others are not.
    QCOMPARE(m.data(m.index(3, 0), Qt::FontRole).value<QFont>().bold(), true);
    QVERIFY(!m.data(m.index(0, 0), Qt::FontRole).isValid());
}

void TestModels::criticalPathRealCapture()
{
    CriticalPathModel byKind(CriticalPathModel::Breakdown::ByKind);
    byKind.setResult(realJob().result, realJob().trace);
    QCOMPARE(header(byKind), (QStringList{"kind", "time", "share"}));
    QCOMPARE(byKind.rowCount(), 8);
    QCOMPARE(rowText(byKind, 0), (QStringList{"p2p", "65.012 ms", "76.59%"}));
    QCOMPARE(rowText(byKind, 1), (QStringList{"idle", "12.210 ms", "14.39%"}));
    QCOMPARE(byKind.data(byKind.index(0, 0), CriticalPathModel::KeyRole).toString(), QString("p2p"));

    CriticalPathModel byStage(CriticalPathModel::Breakdown::ByStage);
    byStage.setResult(realJob().result, realJob().trace);
    QCOMPARE(byStage.rowCount(), 4);
    QCOMPARE(rowText(byStage, 1), (QStringList{"stage 1", "34.816 ms", "41.02%"}));
    QCOMPARE(byStage.data(byStage.index(1, 0), AnalysisTableModel::SortRole).toLongLong(), 1);

    // The limiters the verdict reads: the same numbers as its headline.
    CriticalPathModel byLimiter(CriticalPathModel::Breakdown::ByLimiter);
    byLimiter.setResult(realJob().result, realJob().trace);
    QCOMPARE(rowText(byLimiter, 1), (QStringList{"point-to-point", "65.013 ms", "76.60%"}));
    QCOMPARE(byLimiter.rowCount(), kPathLimiters);
}

void TestModels::htaSynthetic()
{
    HtaModel t(HtaModel::View::Temporal);
    t.setResult(syntheticJob().result, syntheticJob().trace);
    QCOMPARE(t.rowCount(), 4);
    QCOMPARE(rowText(t, 3), (QStringList{"3", "27.000 ms", "0", "0.00%", "24.000 ms", "88.89%", "3.000 ms", "11.11%", "0.00%"}));
    HtaModel s(HtaModel::View::StreamIdle);
    s.setResult(syntheticJob().result, syntheticJob().trace);
    QCOMPARE(header(s), (QStringList{"rank", "stream", "host wait", "kernel wait", "other"}));
    QCOMPARE(s.rowCount(), 12);
    QCOMPARE(rowText(s, 0), (QStringList{"0", "7", "9.000 ms", "0", "0"}));
}

void TestModels::diagnosticsRealCapture()
{
    DiagnosticsModel m;
    m.setResult(realJob().result, realJob().trace);
    QCOMPARE(m.rowCount(), 4);
    QCOMPARE(cell(m, 0, DiagnosticsModel::OriginColumn), QString("import"));
    QCOMPARE(cell(m, 0, DiagnosticsModel::SeverityColumn), QString("info"));
    QCOMPARE(cell(m, 0, DiagnosticsModel::KindColumn), QString("capture_nvtx_unclosed"));
    QCOMPARE(cell(m, 0, DiagnosticsModel::CountColumn), QString("2"));
    QVERIFY(cell(m, 0, DiagnosticsModel::SourceColumn).endsWith("rank0.vm.1101.pscap"));
    QCOMPARE(cell(m, 0, DiagnosticsModel::MessageColumn),
             QString("an NVTX range was still open when recording ended; it is closed at the end"));
    // The synthetic trace has no diagnostics but the analysis warns it found no iteration markers.
    m.setResult(syntheticJob().result, syntheticJob().trace);
    QCOMPARE(m.rowCount(), 1);
    QCOMPARE(rowText(m, 0).mid(0, 4), (QStringList{"analysis", "warning", "no_iterations", "1"}));
}

void TestModels::summarySynthetic()
{
    SummaryModel m;
    m.setResult(syntheticJob().result, syntheticJob().trace);
    QCOMPARE(rowText(m, 0), (QStringList{"verdict", "pipeline bubbles: 27% of GPU time idle, 27 points of it fill/drain (ideal for p=4, m=8 is 27%)"}));
    QCOMPARE(rowText(m, 1), (QStringList{"ranks", "4"}));
    QCOMPARE(rowText(m, 2), (QStringList{"pipeline", "p=4, dp=1, v=1, m=8"}));
    QCOMPARE(rowText(m, 3), (QStringList{"schedule", "1f1b (confidence 85%)"}));
    QCOMPARE(rowText(m, 4), (QStringList{"iteration", "whole trace: 33.000 ms (1 of 1)"}));
    QCOMPARE(rowText(m, 5), (QStringList{"GPU idle", "27.27% of GPU time (36.000 ms over all ranks)"}));
    QCOMPARE(rowText(m, 6), (QStringList{"idle: fill_drain", "36.000 ms (27.27%)"}));
    QCOMPARE(rowText(m, m.rowCount() - 1), (QStringList{"balanced lower bound", "33.000 ms"}));
    m.setResult(realJob().result, realJob().trace);
    QCOMPARE(rowText(m, 0)[1], QString::fromStdString(verdict(*realJob().result, realJob().trace.get()).headline));
}

void TestModels::sortsNumerically()
{
    BubbleTableModel m;
    m.setResult(handMadeIdle(), {});
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(&m);
    proxy.setSortRole(AnalysisTableModel::SortRole);
    proxy.sort(BubbleTableModel::IdleColumn, Qt::AscendingOrder);
    QStringList ranks, idle;
    for (int row = 0; row < proxy.rowCount(); ++row) {
        ranks << cell(proxy, row, BubbleTableModel::RankColumn);
        idle << cell(proxy, row, BubbleTableModel::IdleColumn);
    }
    // As text "1.500 s" < "12.000 ms" < "850.000 µs" < "9.000 ms"; as time the other way round.
    QCOMPARE(idle, (QStringList{"850.000 µs", "9.000 ms", "12.000 ms", "1.500 s"}));
    QCOMPARE(ranks, (QStringList{"2", "0", "1", "3"}));
    proxy.sort(BubbleTableModel::IdleShareColumn, Qt::DescendingOrder);
    QCOMPARE(cell(proxy, 0, BubbleTableModel::RankColumn), QString("3"));
    QCOMPARE(cell(proxy, 3, BubbleTableModel::RankColumn), QString("2"));
}

// A tab or line break inside trace text must not split the TSV's cells or rows.
void TestModels::tsvOfTinyModel()
{
    auto trace = std::make_shared<Trace>();
    trace->sources.push_back({7, "run/rank0.json", "kineto", 0, 0, 0, "", ""});
    trace->diagnostics.push_back({7, Severity::Error, "bad_event", 3, "name\twith tab\nand newline"});
    auto result = std::make_shared<AnalysisResult>();
    result->warnings.push_back({"missing_ranks", "ranks 2, 3 of 4 are missing"});
    DiagnosticsModel m;
    m.setResult(result, trace);
    QCOMPARE(tsvOf(m), QString("origin\tseverity\tkind\tcount\tsource\tmessage\n"
                               "import\terror\tbad_event\t3\trun/rank0.json\tname with tab and newline\n"
                               "analysis\twarning\tmissing_ranks\t1\t\tranks 2, 3 of 4 are missing\n"));
    // Only the rows asked for, in model order, each once.
    QCOMPARE(tsvOf(m, {m.index(1, 2), m.index(1, 0)}),
             QString("origin\tseverity\tkind\tcount\tsource\tmessage\nanalysis\twarning\tmissing_ranks\t1\t\tranks 2, 3 of 4 are missing\n"));
}

// p = 2, m = 4, microbatches 1.5x, 0.5x, 1x and 1x: one row per stage with
// each one's spread, and the panel's bars and line.
void TestModels::microbatchesUneven()
{
    test::PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 4;
    spec.annotate = true;
    spec.microbatchScale = {1.5, 0.5, 1.0, 1.0};
    auto t = std::make_shared<const Trace>(test::pipelineTrace(spec).trace);
    auto r = std::make_shared<const AnalysisResult>(analyze(*t));
    MicrobatchModel model;
    model.setResult(r, t);
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(header(model), (QStringList{"stage", "F min", "F p50", "F p95", "F max", "longest F", "B min", "B p50",
                                          "B p95", "B max", "longest B"}));
    QCOMPARE(rowText(model, 0), (QStringList{"0", "500.000 µs", "1.000 ms", "1.425 ms", "1.500 ms", "0", "1.000 ms",
                                             "2.000 ms", "2.850 ms", "3.000 ms", "0"}));
    MicrobatchPanel panel;
    panel.resize(800, 500);
    panel.setResult(r, t);
    QCOMPARE(panel.summary(), QStringLiteral("4 microbatches, 0.50x to 1.50x of the mean (coefficient of variation "
                                             "0.35): uneven. Longest: microbatch 0, shortest: 1. A stage waits on its "
                                             "neighbour's long microbatches; the What-if tab prices the spread and the "
                                             "orders to run them in."));
    QCOMPARE(panel.sizePlot()->plottableCount(), 3); // two bar sets and the mean
    auto* far = qobject_cast<QCPBars*>(panel.sizePlot()->plottable(1));
    QVERIFY(far);
    QCOMPARE(far->data()->size(), 4);
    QCOMPARE(far->data()->at(0)->value, 1.5); // far from the mean
    QCOMPARE(far->data()->at(2)->value, 0.0); // at the mean: in the other set
    // Even microbatches: said so, no legend.
    panel.setResult(syntheticJob().result, syntheticJob().trace);
    QVERIFY(panel.summary().endsWith(QStringLiteral("(coefficient of variation 0.00): even.")));
}

void TestModels::panelsTakeResults()
{
    SummaryPanel summary;
    BubblePanel bubbles;
    ImbalancePanel imbalance;
    MicrobatchPanel microbatches;
    CriticalPathPanel path;
    HtaPanel hta;
    DiagnosticsPanel diagnostics;
    for (AnalysisPanel* p :
         std::initializer_list<AnalysisPanel*>{&summary, &bubbles, &imbalance, &microbatches, &path, &hta, &diagnostics}) {
        p->resize(900, 700);
        p->setResult(realJob().result, realJob().trace);
        p->setResult({}, {});
        p->setResult(syntheticJob().result, syntheticJob().trace);
        p->setResult(handMadeIdle(), {});
        p->setResult(realJob().result, realJob().trace);
        QVERIFY(p->tableCount() >= 1);
        QVERIFY(p->tableTsv().endsWith('\n')); // at least the header line
    }
    QCOMPARE(summary.verdictText(), QString::fromStdString(verdict(*realJob().result, realJob().trace.get()).headline));
    QVERIFY(summary.factsText().startsWith(QString::fromUtf8("\u2022 iteration 2: 84.877 ms on 4 ranks")));
    QCOMPARE(imbalance.tableCount(), 2);
    QCOMPARE(path.tableCount(), 3);
    QCOMPARE(hta.tableCount(), 2);
    QCOMPARE(imbalance.tableTsv(0), tsvOf(*imbalance.model()));
    QCOMPARE(path.tableTsv(1), tsvOf(*path.kindModel()));
}

void TestModels::panelsPaint()
{
    ImbalancePanel imbalance;
    imbalance.resize(900, 700);
    SummaryPanel summary;
    summary.resize(700, 500);
    CriticalPathPanel path;
    path.resize(900, 700);
    const int blankImbalance = colours(imbalance);
    imbalance.setResult(realJob().result, realJob().trace);
    summary.setResult(realJob().result, realJob().trace);
    path.setResult(realJob().result, realJob().trace);
    // Bars, lines, text and tables: far more colours than an empty frame.
    QVERIFY2(colours(imbalance) > blankImbalance, "the imbalance charts drew nothing");
    QVERIFY(colours(imbalance) > 20);
    QVERIFY(colours(summary) > 20);
    QVERIFY(colours(path) > 20);
    // The F and B bars and the busy bars with their three lines.
    QCOMPARE(imbalance.stepPlot()->plottableCount(), 2);
    QCOMPARE(imbalance.busyPlot()->plottableCount(), 4);
}

void TestModels::bubblePanelJumps()
{
    BubblePanel panel;
    panel.setResult(handMadeIdle(), {});
    QSignalSpy spy(&panel, &BubblePanel::jumpTo);
    QTableView* view = panel.view();
    const int host = BubbleTableModel::FirstCauseColumn + static_cast<int>(BubbleCause::HostBound);
    // Sorted by idle ascending, rank 1 (12 ms) is the third row.
    view->sortByColumn(BubbleTableModel::IdleColumn, Qt::AscendingOrder);
    Q_EMIT view->activated(view->model()->index(2, host));
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).toLongLong(), qint64(300));
    QCOMPARE(spy.at(0).at(1).toLongLong(), qint64(700));
    QCOMPARE(spy.at(0).at(2).toInt(), 1);
    // A cell without a bubble behind it does nothing.
    Q_EMIT view->activated(view->model()->index(0, host));
    QCOMPARE(spy.count(), 1);
}

void TestModels::copyTableToClipboard()
{
    BubblePanel panel;
    panel.setResult(handMadeIdle(), {});
    panel.view()->sortByColumn(BubbleTableModel::IdleColumn, Qt::DescendingOrder);
    panel.copyTable();
    const QString all = QApplication::clipboard()->text();
    QCOMPARE(all.split('\n').size(), 6); // header, four ranks, final newline
    QVERIFY(all.startsWith("rank\tstage\tfill_drain\t"));
    QVERIFY(all.split('\n')[1].startsWith(QString::fromUtf8("3\t—\t"))); // as the view sorts: rank 3 idles longest
    // With a selection only the selected rows; Ctrl+C on the table does the same.
    panel.view()->selectRow(1);
    panel.copyTable();
    QCOMPARE(QApplication::clipboard()->text().split('\n').size(), 3);
    QVERIFY(QApplication::clipboard()->text().split('\n')[1].startsWith(QString::fromUtf8("1\t—\t")));
    QApplication::clipboard()->clear();
    panel.show();
    panel.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&panel)); // shortcuts reach only the active window
    panel.view()->setFocus();
    QTest::keySequence(panel.view(), QKeySequence::Copy);
    QVERIFY(QApplication::clipboard()->text().split('\n')[1].startsWith(QString::fromUtf8("1\t—\t")));
}

// Issue 37, defect 3: the compare panel's lines under the headline. A saved
// prediction whose changes A's trace cannot list names what it asked for (or
// says it changes nothing), never "...: ." with an empty list; and where the
// partitions are unknown (no layer ranges), the stages' moved work is said
// beside core's "nothing to predict".
void TestModels::compareNotesNeverEmptyOrWrong()
{
    compare::DiffResult d;
    d.aName = "A";
    d.bName = "B";
    d.a.pipeline = d.b.pipeline = true;
    d.a.pp = d.b.pp = 4;
    d.iterationNs = {100'000'000, 90'000'000};
    compare::PredictionCheck p;
    p.saved = true;
    p.savedLabel = "requested";
    p.predictedNs = 95'000'000;
    p.measuredNs = 90'000'000;
    p.scenario.boundaries = std::vector<int>{5, 9, 13};
    d.prediction = p;
    QString notes = ComparePanel::notesText(d);
    QVERIFY2(!notes.contains(QStringLiteral(": .")), qPrintable(notes));
    QVERIFY2(notes.contains(QString::fromUtf8("The prediction saved on A (“requested”): boundaries 5,9,13 (A's own partition is not in its trace).")),
             qPrintable(notes));
    d.prediction->scenario.boundaries.reset();
    notes = ComparePanel::notesText(d);
    QVERIFY2(notes.contains(QStringLiteral("(“requested”): no change from A's configuration as its trace records it.")), qPrintable(notes));
    QVERIFY(ComparePanel::headlineText(d).startsWith(QStringLiteral("Predicted 95.000 ms from run A")));

    // B re-partitioned 4,5,5,4 against A's 5,4,4,5, no layer ranges in either trace.
    d.prediction.reset();
    d.predictionWhyNot = "run B has run A's configuration: there is nothing to predict";
    for (int s = 0; s < 4; ++s) {
        compare::StageDiff sd;
        sd.stage = s;
        const TimeNs a = (s == 0 || s == 3) ? 50'000'000 : 40'000'000;
        const TimeNs b = (s == 0 || s == 3) ? 40'000'000 : 50'000'000;
        sd.fbNs = {a, b};
        d.stages.push_back(sd);
    }
    notes = ComparePanel::notesText(d);
    QVERIFY2(notes.contains(QStringLiteral("Neither trace gives layer ranges, so a changed partition does not show")), qPrintable(notes));
    QVERIFY2(notes.contains(QStringLiteral("B may have moved layers")), qPrintable(notes));
    QVERIFY2(notes.contains(QStringLiteral("stage 0 ")) && notes.contains(QStringLiteral("stage 1 ")), qPrintable(notes));
    // With both partitions known and equal, nothing is added.
    d.a.layersPerStage = d.b.layersPerStage = {5, 4, 4, 5};
    QVERIFY(!ComparePanel::notesText(d).contains(QStringLiteral("moved layers")));
}

QTEST_MAIN(TestModels)
#include "tst_models.moc"
