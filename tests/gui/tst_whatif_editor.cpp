// The what-if editor driven as a user would: a mouse drag of a stage boundary
// on the layer strip re-predicts, and the shown prediction equals the CLI's
// for the same boundaries; undo restores it; a change core refuses shows its
// sentence beside the control and keeps the prediction; the worker answers
// the newest of a burst of drag requests; the strip asks for layers when the
// trace names none; the editor renders.
#include "whatif/LayerStrip.h"
#include "whatif/ParetoChart.h"
#include "views/PipelineView.h"
#include "whatif/WhatIfEditor.h"
#include "whatif/WhatIfWorker.h"

#include "TestSupport.h"
#include "analysis/Analysis.h"
#include "store/Sqlite.h"
#include "store/Store.h"
#include "timeline/Palette.h"
#include "util/Format.h"
#include "whatif/Microbatches.h"
#include "whatif/ModelDescription.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QTemporaryDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QToolButton>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QUndoStack>
#include <QtTest>
#include <qcustomplot.h>

using namespace pipescope;
using namespace pipescope::gui;

namespace {

const QString kExample = QString::fromUtf8(PIPESCOPE_SOURCE_DIR) + "/resources/examples/pipeline-1f1b-4stage.pipescope";

// The example without its pipescope/layer ranges: a trace that attributes no
// layers, which the user calibrates with a layer count (`--layers 16`).
QString layerlessStore()
{
    static QTemporaryDir dir;
    static const QString path = [] {
        const QString p = dir.path() + "/layerless.pipescope";
        QFile::copy(kExample, p);
        QFile::setPermissions(p, QFile::ReadOwner | QFile::WriteOwner);
        sql::Database db(p.toStdString(), sql::Database::Mode::ReadWrite);
        db.exec("DELETE FROM cpu_ranges WHERE name_id IN (SELECT id FROM strings WHERE value LIKE 'pipescope/layer%')");
        return p;
    }();
    return path;
}

struct Job {
    std::shared_ptr<const Trace> trace;
    std::shared_ptr<const AnalysisResult> analysis;
};

const Job& exampleJob()
{
    static const Job job = [] {
        Store store(layerlessStore().toStdString());
        auto trace = std::make_shared<const Trace>(store.load());
        auto analysis = std::make_shared<const AnalysisResult>(analyze(*trace));
        return Job{trace, analysis};
    }();
    return job;
}

whatif::CostModel exampleModel(std::optional<int> layers)
{
    whatif::CalibrateOptions co;
    co.measured.layers = layers;
    return whatif::calibrate(*exampleJob().trace, *exampleJob().analysis, co);
}

// The iteration_ns of each prediction `pipescope whatif` prints for the example.
std::vector<qint64> cliIterations(const QStringList& extra)
{
    const auto r = test::runCli(QStringList{"whatif", layerlessStore(), "--layers", "16", "--json", "--summary"} + extra);
    if (r.exitCode != 0)
        qWarning("%s", qPrintable(r.err));
    std::vector<qint64> out;
    for (const auto& p : QJsonDocument::fromJson(r.out.toUtf8()).object()["predictions"].toArray())
        out.push_back(qint64(p.toObject()["iteration_ns"].toDouble()));
    return out;
}

std::vector<int> shownBoundaries(const WhatIfEditor& e)
{
    const auto p = e.currentPrediction();
    return p ? p->partition.boundaries() : std::vector<int>{};
}

// Waits for predictions until `done` holds (each wait ends on a signal, not a clock).
template <typename F>
bool waitFor(QSignalSpy& spy, F done)
{
    for (int i = 0; i < 50 && !done(); ++i)
        if (!spy.wait())
            return false;
    return done();
}

void drag(LayerStrip* strip, int handle, int toLayer)
{
    const int y = strip->handleY();
    QTest::mousePress(strip, Qt::LeftButton, {}, QPoint(strip->handleX(handle), y));
    // Through every edge on the way, as a hand would.
    const int from = strip->boundaries()[size_t(handle)];
    for (int l = from; l != toLayer; l += toLayer > from ? 1 : -1)
        QTest::mouseMove(strip, QPoint(strip->edgeX(l), y));
    QTest::mouseMove(strip, QPoint(strip->edgeX(toLayer), y));
    QTest::mouseRelease(strip, Qt::LeftButton, {}, QPoint(strip->edgeX(toLayer), y));
}

} // namespace

class TestWhatIfEditor : public QObject {
    Q_OBJECT
private slots:
    void dragMatchesCliAndUndoRestores();
    void extraWorkMatchesCli();
    void refusedChangeShowsInline();
    void newestDragWins();
    void stripKeyboard();
    void stripTellsLayersAndTakesTypedBoundaries();
    void predictedRowsShowTheOptimizer();
    void stripAsksForLayers();
    void rendersNotBlank();
    void balanceCancels();
    void paretoPointApplies();
    void microbatchOrderApplies();
    void gpuSpeedsApply();
    void gpuSpeedsStayShownAndKeepTheHistory();
};

void TestWhatIfEditor::dragMatchesCliAndUndoRestores()
{
    const std::vector<qint64> cli = cliIterations({"--boundaries", "3,8,12"});
    QCOMPARE(cli.size(), size_t(2)); // measured configuration, then the requested one

    WhatIfEditor editor;
    editor.resize(1200, 800);
    editor.show();
    QVERIFY(QTest::qWaitForWindowExposed(&editor));
    QSignalSpy changed(&editor, &WhatIfEditor::predictionChanged);
    editor.setJob(exampleJob().trace, exampleJob().analysis, exampleModel(16));
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction().has_value(); }));
    QCOMPARE(shownBoundaries(editor), (std::vector<int>{4, 8, 12}));
    QCOMPARE(editor.currentPrediction()->iterationNs(), cli[0]);
    QCOMPARE(editor.layerStrip()->boundaries(), (std::vector<int>{4, 8, 12}));

    QSignalSpy dragged(editor.layerStrip(), &LayerStrip::boundariesDragged);
    QSignalSpy committed(editor.layerStrip(), &LayerStrip::boundariesCommitted);
    drag(editor.layerStrip(), 0, 3);
    QCOMPARE(dragged.size(), 1); // one snapped change: layer edge 4 to 3
    QCOMPARE(committed.size(), 1);
    QCOMPARE(committed[0][0].value<std::vector<int>>(), (std::vector<int>{3, 8, 12}));
    QVERIFY(waitFor(changed, [&] { return editor.undoStack()->count() == 1; }));
    QCOMPARE(shownBoundaries(editor), (std::vector<int>{3, 8, 12}));
    QCOMPARE(editor.currentPrediction()->iterationNs(), cli[1]);
    QCOMPARE(editor.predictedIterationText(),
             QString("Predicted iteration %1").arg(QString::fromStdString(formatDuration(cli[1]))));

    editor.undoStack()->undo();
    QVERIFY(waitFor(changed, [&] { return shownBoundaries(editor) == std::vector<int>{4, 8, 12}; }));
    QCOMPARE(editor.currentPrediction()->iterationNs(), cli[0]);
    QCOMPARE(editor.layerStrip()->boundaries(), (std::vector<int>{4, 8, 12}));
    editor.undoStack()->redo();
    QVERIFY(waitFor(changed, [&] { return shownBoundaries(editor) == std::vector<int>{3, 8, 12}; }));
    QCOMPARE(editor.currentPrediction()->iterationNs(), cli[1]);
}

// "Extra work / iteration" on the shown prediction says what
// `pipescope whatif --extra-work` says for the same configuration.
void TestWhatIfEditor::extraWorkMatchesCli()
{
    const auto r = test::runCli({"whatif", layerlessStore(), "--layers", "16", "--json", "--summary", "--extra-work", "5"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const QJsonObject first = QJsonDocument::fromJson(r.out.toUtf8()).object()["predictions"].toArray()[0].toObject();
    const qint64 withWork = qint64(first["extra_work"].toObject()["iteration_ns"].toDouble());
    const qint64 extra = qint64(first["extra_work"].toObject()["extra_ns"].toDouble());
    QVERIFY(withWork > 0);

    WhatIfEditor editor;
    QSignalSpy changed(&editor, &WhatIfEditor::predictionChanged);
    editor.setJob(exampleJob().trace, exampleJob().analysis, exampleModel(16));
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction().has_value(); }));
    QCOMPARE(editor.extraWorkText(), QString());
    editor.setExtraWorkMs(5);
    const QString text = editor.extraWorkText();
    QVERIFY2(text.startsWith(QStringLiteral("With %1 of extra work per rank: iteration %2 (%3 longer); ")
                                 .arg(QString::fromStdString(formatDuration(5'000'000)), QString::fromStdString(formatDuration(withWork)),
                                      QString::fromStdString(formatDuration(extra)))),
             qPrintable(text));
    editor.setExtraWorkMs(0);
    QCOMPARE(editor.extraWorkText(), QString());
}

void TestWhatIfEditor::refusedChangeShowsInline()
{
    WhatIfEditor editor;
    QSignalSpy changed(&editor, &WhatIfEditor::predictionChanged);
    QSignalSpy failed(editor.worker(), &WhatIfWorker::failed);
    editor.setJob(exampleJob().trace, exampleJob().analysis, exampleModel(16));
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction().has_value(); }));

    // Interleaved 1F1B takes v 2 by itself: 8 virtual stages of 2 layers.
    QComboBox* schedule = editor.scheduleBox();
    const int interleaved = schedule->findData(QString("interleaved-1f1b"));
    QVERIFY(interleaved >= 0);
    schedule->setCurrentIndex(interleaved);
    emit schedule->activated(interleaved);
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction()->schedule.kind == ScheduleKind::Interleaved1F1B; }));
    QCOMPARE(editor.vBox()->value(), 2);
    QCOMPARE(shownBoundaries(editor), (std::vector<int>{2, 4, 6, 8, 10, 12, 14}));
    const TimeNs before = editor.currentPrediction()->iterationNs();

    // v 3: 12 virtual stages, which 16 layers do not fill evenly. Core names
    // no setting, so the message goes beside the control that asked.
    editor.vBox()->setValue(3);
    QVERIFY(failed.wait());
    QCOMPARE(editor.errorText("v"),
             QString("16 layers do not split evenly over 12 stages (pp x v); give stage boundaries, auto-balance, "
                     "or choose a pipeline degree and v that divide the layers"));
    QCOMPARE(editor.currentPrediction()->iterationNs(), before);
    QCOMPARE(editor.currentPrediction()->schedule.chunks(), 2);
    QCOMPARE(editor.undoStack()->count(), 1); // only the schedule change

    // A refusal that names its setting: Megatron's order needs m a multiple of pp.
    editor.microbatchBox()->setValue(6);
    QVERIFY(failed.wait());
    QCOMPARE(failed.last()[1].toString(), QString("microbatches"));
    QVERIFY(editor.errorText("microbatches").startsWith("interleaved-1f1b (Megatron's order) needs the number of microbatches"));
    QCOMPARE(editor.currentPrediction()->iterationNs(), before);
}

void TestWhatIfEditor::newestDragWins()
{
    const auto md = whatif::loadModelDescription(std::string(PIPESCOPE_SOURCE_DIR) + "/resources/models/gpt-32l.json");
    WhatIfWorker worker;
    QSignalSpy ready(&worker, &WhatIfWorker::predictionReady);
    QSignalSpy dropped(&worker, &WhatIfWorker::requestDropped);
    QSignalSpy failed(&worker, &WhatIfWorker::failed);
    const whatif::CostModel model = whatif::CostModel::fromModel(md);
    worker.setCostModel(model);
    // The model file describes no measured run: ask for its pipeline, pp 4 x 8 microbatches.
    whatif::ScenarioChanges pp4;
    pp4.pp = 4;
    pp4.microbatches = 8;
    const quint64 first = worker.apply(pp4);
    while (ready.isEmpty() || ready.last()[1].toULongLong() != first)
        QVERIFY(ready.wait());
    QCOMPARE(ready.last()[0].value<PredictionPtr>()->partition.boundaries(), (std::vector<int>{8, 16, 24}));
    ready.clear();

    // 100 drag steps of the first boundary over 1..15.
    std::vector<quint64> ids;
    for (int i = 0; i < 100; ++i)
        ids.push_back(worker.setBoundaries({1 + i % 15, 16, 24}));
    QVERIFY(worker.pendingRequests() <= 1); // never a backlog behind the mouse
    while (ready.isEmpty() || ready.last()[1].toULongLong() != ids.back())
        QVERIFY2(ready.wait(), qPrintable(QString("%1 answers, %2 dropped, last %3 of %4")
                                              .arg(ready.size())
                                              .arg(dropped.size())
                                              .arg(ready.isEmpty() ? 0 : ready.last()[1].toULongLong())
                                              .arg(ids.back())));
    QCoreApplication::processEvents(); // nothing else is queued after the last answer

    // Each request either ran or was dropped for a newer one; the answers come in order, the last one last.
    QCOMPARE(ready.size() + dropped.size(), 100);
    quint64 previous = first;
    for (const auto& args : ready) {
        QVERIFY(args[1].toULongLong() > previous);
        previous = args[1].toULongLong();
    }
    const auto last = ready.last()[0].value<PredictionPtr>();
    QCOMPARE(last->partition.boundaries(), (std::vector<int>{1 + 99 % 15, 16, 24}));
    // And it is what a fresh prediction of those boundaries gives.
    whatif::Scenario sc = whatif::applyChanges(whatif::measuredScenario(model), pp4);
    sc.boundaries = std::vector<int>{10, 16, 24};
    QCOMPARE(last->iterationNs(), whatif::predict(model, sc).iterationNs());
    QVERIFY(failed.isEmpty());
}

void TestWhatIfEditor::stripKeyboard()
{
    whatif::CostModel m;
    m.layerSource = whatif::LayerSource::Model;
    for (int i = 0; i < 8; ++i)
        m.layers.push_back(whatif::LayerCostModel{"l" + std::to_string(i), 1000, 2000, 0.5, 0, 0});
    LayerStrip strip;
    strip.resize(400, 60);
    strip.setCostModel(m);
    strip.setBoundaries({2, 3, 6});
    QSignalSpy committed(&strip, &LayerStrip::boundariesCommitted);
    strip.selectHandle(1);
    QTest::keyClick(&strip, Qt::Key_Left); // 3 -> 2 would empty stage 1: refused
    QCOMPARE(committed.size(), 0);
    QTest::keyClick(&strip, Qt::Key_Right);
    QCOMPARE(committed.size(), 1);
    QCOMPARE(strip.boundaries(), (std::vector<int>{2, 4, 6}));
    QTest::keyClick(&strip, Qt::Key_Down); // next handle
    QCOMPARE(strip.selectedHandle(), 2);
    QTest::keyClick(&strip, Qt::Key_Right);
    QTest::keyClick(&strip, Qt::Key_Right); // 7 is the last layer: stays
    QCOMPARE(strip.boundaries(), (std::vector<int>{2, 4, 7}));
    QCOMPARE(committed.size(), 2);
}

void TestWhatIfEditor::stripTellsLayersAndTakesTypedBoundaries()
{
    whatif::CostModel m;
    m.layerSource = whatif::LayerSource::Model;
    for (int i = 0; i < 8; ++i)
        m.layers.push_back(whatif::LayerCostModel{"block" + std::to_string(i), 1'500'000.0 + i * 1000, 3'000'000, 0.5,
                                                  i == 0 ? 0 : 12'000'000, i == 0 ? 0 : int64_t(64) << 20});
    m.layers[7].frozen = true;
    LayerStrip strip;
    strip.resize(400, 72);
    strip.setCostModel(m);
    strip.setBoundaries({2, 4, 6});
    // Hover: the layer's stage, forward and backward, parameters and activations ("—" where unknown).
    const int x5 = (strip.edgeX(5) + strip.edgeX(6)) / 2;
    QCOMPARE(strip.layerAt(x5), 5);
    QCOMPARE(strip.layerAt(strip.edgeX(0) - 1), -1);
    const QString tip = strip.layerToolTip(5);
    QVERIFY2(tip.contains(QStringLiteral("layer 5")) && tip.contains(QStringLiteral("block5")) &&
                 tip.contains(QStringLiteral("stage 2")),
             qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("forward 1.505 ms, backward 3.000 ms")), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("64.0 MiB")) || tip.contains(QStringLiteral("64 MiB")), qPrintable(tip));
    QVERIFY2(strip.layerToolTip(0).contains(QStringLiteral("parameters —")), qPrintable(strip.layerToolTip(0)));
    QVERIFY(strip.layerToolTip(7).contains(QStringLiteral("(frozen)")));
    // A typed boundary is clamped so each stage keeps a layer, and commits once.
    QSignalSpy committed(&strip, &LayerStrip::boundariesCommitted);
    QVERIFY(strip.typeBoundary(1, 5));
    QCOMPARE(strip.boundaries(), (std::vector<int>{2, 5, 6}));
    QVERIFY(strip.typeBoundary(0, 99)); // at most the next boundary - 1
    QCOMPARE(strip.boundaries(), (std::vector<int>{4, 5, 6}));
    QVERIFY(!strip.typeBoundary(0, 4)); // no change
    QCOMPARE(committed.size(), 2);
    QCOMPARE(strip.layerToolTip(5).contains(QStringLiteral("stage 2")), true);
}

// The predicted rows end with the optimizer step as a box of its own (not an
// unexplained gap before the faster ranks' drain), hoverable like a step.
void TestWhatIfEditor::predictedRowsShowTheOptimizer()
{
    whatif::CostModel m;
    m.layerSource = whatif::LayerSource::Model;
    for (int i = 0; i < 8; ++i)
        m.layers.push_back(whatif::LayerCostModel{"l" + std::to_string(i), 1'000'000, 2'000'000, 0.5, 100'000'000, 0});
    m.optimizerNsPerParam = 0.05; // 5 ms per stage of two layers
    m.measuredPp = 4;
    m.measuredMicrobatches = 8;
    const auto p = std::make_shared<const whatif::Prediction>(whatif::predict(m, whatif::measuredScenario(m)));
    const whatif::RankReplay& r0 = p->replay.ranks.front();
    QCOMPARE(r0.optimizerEnd - r0.optimizerStart, TimeNs(10'000'000));
    PipelineView view;
    view.resize(900, 300);
    view.setPrediction(p);
    view.grab();
    int optimizerBoxes = 0;
    for (int y = 0; y < view.height(); y += 2) {
        bool inRow = false;
        for (int x = 100; x < view.width(); ++x)
            if (view.toolTipAt(QPointF(x, y)).contains(QStringLiteral("optimizer step"))) {
                inRow = true;
                break;
            }
        optimizerBoxes += inRow;
    }
    QVERIFY(optimizerBoxes > 4); // on every row, several pixel lines each
}

void TestWhatIfEditor::stripAsksForLayers()
{
    const whatif::CostModel stages = exampleModel(std::nullopt);
    QCOMPARE(QString::fromUtf8(toString(stages.layerSource).data()), QString("stages"));

    WhatIfEditor editor;
    editor.resize(1000, 700);
    editor.show();
    QVERIFY(QTest::qWaitForWindowExposed(&editor));
    QSignalSpy changed(&editor, &WhatIfEditor::predictionChanged);
    editor.setJob(exampleJob().trace, exampleJob().analysis, stages);
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction().has_value(); }));
    LayerStrip* strip = editor.layerStrip();
    QVERIFY(strip->needsLayers());
    // The prompt fills the strip, also when the strip was laid out while hidden
    // (the app's What-if tab is not shown when a job opens).
    QWidget* prompt = strip->findChild<QPushButton*>()->parentWidget();
    QCOMPARE(prompt->geometry(), strip->rect());
    editor.hide();
    editor.resize(1200, 800);
    QApplication::processEvents();
    editor.show();
    QVERIFY(QTest::qWaitForWindowExposed(&editor));
    QCOMPARE(prompt->geometry(), strip->rect());

    QSignalSpy requested(strip, &LayerStrip::layersRequested);
    QPushButton* use = nullptr;
    for (auto* b : strip->findChildren<QPushButton*>())
        if (b->text() == "Use layer count")
            use = b;
    QVERIFY(use && use->isVisible());
    strip->findChild<QSpinBox*>()->setValue(16);
    QTest::mouseClick(use, Qt::LeftButton);
    QCOMPARE(requested.size(), 1);
    QCOMPARE(requested[0][0].toInt(), 16);
    // Re-calibrated as `pipescope whatif --layers 16` does.
    QVERIFY(waitFor(changed, [&] { return editor.costModel().layerCount() == 16; }));
    QVERIFY(!strip->needsLayers());
    QCOMPARE(QString::fromUtf8(toString(editor.costModel().layerSource).data()), QString("count"));
    const std::vector<qint64> cli = cliIterations({});
    QCOMPARE(cli.size(), size_t(1));
    QCOMPARE(editor.currentPrediction()->iterationNs(), cli[0]);
}

void TestWhatIfEditor::balanceCancels()
{
    WhatIfEditor editor;
    editor.resize(1200, 800);
    editor.show();
    QSignalSpy changed(&editor, &WhatIfEditor::predictionChanged);
    editor.setJob(exampleJob().trace, exampleJob().analysis, exampleModel(16));
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction().has_value(); }));
    QVERIFY(!editor.cancelButton()->isEnabled());

    // Changes queued ahead keep the worker busy (thousands of microbatches to replay), so the
    // balance behind them is still waiting when Cancel comes; the last change goes back to 8.
    const int changes = 5;
    for (int i = 0; i < changes; ++i) {
        whatif::ScenarioChanges c;
        c.microbatches = i + 1 < changes ? 4096 - i : 8;
        c.boundaries = std::vector<int>{3, 8, 12};
        editor.applyChanges(c);
    }
    editor.autoBalance();
    QVERIFY(!editor.balanceButton()->isEnabled());
    QVERIFY(editor.cancelButton()->isEnabled());
    QTest::mouseClick(editor.cancelButton(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(editor.balanceButton()->isEnabled(), 20000);
    QVERIFY(!editor.cancelButton()->isEnabled());
    QCOMPARE(editor.statusText(), QStringLiteral("auto-balance cancelled"));
    QVERIFY(editor.firstError().isEmpty()); // a cancel is no error
    QVERIFY(waitFor(changed, [&] { return editor.undoStack()->count() == changes; }));
    QCOMPARE(shownBoundaries(editor), (std::vector<int>{3, 8, 12})); // the balance changed nothing
    QCOMPARE(editor.currentScenario()->microbatches, 8);

    // Not cancelled, it balances as before.
    editor.autoBalance();
    QTRY_VERIFY_WITH_TIMEOUT(editor.balanceButton()->isEnabled(), 20000);
    QVERIFY(editor.firstError().isEmpty());
    QVERIFY(editor.statusText() != QStringLiteral("auto-balance cancelled"));
}

void TestWhatIfEditor::rendersNotBlank()
{
    WhatIfEditor editor;
    editor.resize(1200, 800);
    QSignalSpy changed(&editor, &WhatIfEditor::predictionChanged);
    editor.setJob(exampleJob().trace, exampleJob().analysis, exampleModel(16));
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction().has_value(); }));
    const QImage whole = editor.grab().toImage();
    QVERIFY(!whole.isNull());
    const QImage diagram = editor.pipelineView()->grab().toImage();
    // Forward steps of even microbatches carry the palette's F colour exactly.
    const auto f = timeline::stepColor(StepKind::F);
    const QRgb fRgb = qRgb(f.r, f.g, f.b);
    int fPixels = 0;
    for (int y = 0; y < diagram.height(); ++y)
        for (int x = 0; x < diagram.width(); ++x)
            fPixels += diagram.pixel(x, y) == fRgb;
    QVERIFY2(fPixels > 100, qPrintable(QString::number(fPixels)));
    QVERIFY(editor.pipelineView()->paintedBoxes() > 0);
    // The whole editor is more than one colour.
    const QRgb corner = whole.pixel(0, 0);
    bool varied = false;
    for (int y = 0; y < whole.height() && !varied; y += 7)
        for (int x = 0; x < whole.width() && !varied; x += 7)
            varied = whole.pixel(x, y) != corner;
    QVERIFY(varied);
}

// Search with recomputation fills the memory-time front; clicking one of
// its points applies that row: schedule, v, microbatches, boundaries and
// each stage's recomputation, shown in the Recompute control.
void TestWhatIfEditor::paretoPointApplies()
{
    whatif::CostModel model = exampleModel(16);
    for (whatif::LayerCostModel& l : model.layers)
        l.activationBytes = int64_t(1) << 30; // 1 GiB per layer and microbatch
    model.p2pBytes = int64_t(64) << 20;
    WhatIfEditor editor;
    editor.resize(1200, 800);
    editor.show();
    QVERIFY(QTest::qWaitForWindowExposed(&editor));
    QSignalSpy changed(&editor, &WhatIfEditor::predictionChanged);
    editor.setJob(exampleJob().trace, exampleJob().analysis, model);
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction().has_value(); }));
    QCOMPARE(editor.recomputeBox()->currentText(), QString("none"));

    editor.searchRecomputeBox()->setChecked(true);
    editor.search();
    QTRY_VERIFY_WITH_TIMEOUT(editor.paretoChart()->rowCount() > 0, 120000);
    QVERIFY(editor.firstError().isEmpty());
    QCOMPARE(editor.paretoChart()->rowCount(), editor.searchTable()->rowCount());
    // Recomputation stores less: some row on the front recomputes.
    int pick = -1;
    for (int row : editor.paretoChart()->frontRows())
        if (editor.searchTable()->item(row, 8)->text() != "none")
            pick = row;
    QVERIFY(pick >= 0);

    auto* tabs = qobject_cast<QTabWidget*>(editor.paretoChart()->parentWidget()->parentWidget());
    QVERIFY(tabs);
    tabs->setCurrentWidget(editor.paretoChart());
    QCoreApplication::processEvents();
    editor.paretoChart()->plot()->replot(QCustomPlot::rpImmediateRefresh);
    const QPoint at = editor.paretoChart()->pointOf(pick);
    QVERIFY(editor.paretoChart()->rowAt(at) >= 0);
    const int clicked = editor.paretoChart()->rowAt(at);
    QSignalSpy rowClicked(editor.paretoChart(), &ParetoChart::rowClicked);
    QTest::mouseClick(editor.paretoChart()->plot(), Qt::LeftButton, {}, at);
    QCOMPARE(rowClicked.size(), 1);
    QCOMPARE(rowClicked[0][0].toInt(), clicked);
    const QString recompute = editor.searchTable()->item(clicked, 8)->text();
    QVERIFY(waitFor(changed, [&] { return editor.undoStack()->count() == 1; }));
    const auto p = editor.currentPrediction();
    QVERIFY(p.has_value());
    QCOMPARE(QString::fromStdString(std::string(toString(p->schedule.kind))), editor.searchTable()->item(clicked, 1)->text());
    QCOMPARE(QString::fromStdString(whatif::recomputeText(p->recompute)), recompute.startsWith("per stage: ") ? recompute.mid(11) : recompute);
    QVERIFY(editor.recomputeBox()->currentText().endsWith(QString::fromStdString(whatif::recomputeText(p->recompute))));
    QVERIFY(whatif::anyRecompute(p->recompute));
}

// Uneven microbatches: the order box is enabled once the model has sizes, the
// line gives the study's spread cost, and an order replays as predict() does.
void TestWhatIfEditor::microbatchOrderApplies()
{
    whatif::CostModel model = exampleModel(16);
    WhatIfEditor plain;
    QSignalSpy plainChanged(&plain, &WhatIfEditor::predictionChanged);
    plain.setJob(exampleJob().trace, exampleJob().analysis, model);
    QVERIFY(waitFor(plainChanged, [&] { return plain.currentPrediction().has_value(); }));
    QVERIFY(!plain.microbatchOrderBox()->isEnabled());
    QCOMPARE(plain.microbatchText(), QString());

    const int m = model.measuredMicrobatches;
    std::vector<double> sizes;
    for (int i = 0; i < m; ++i)
        sizes.push_back(i % 4 == 0 ? 2.0 : 0.5);
    model.microbatchSizes = whatif::uniformRows(sizes, whatif::SizeSource::Tokens);
    const whatif::Scenario base = whatif::measuredScenario(model);
    const whatif::MicrobatchStudy st = whatif::studyMicrobatches(model, base);
    QVERIFY(st.applies && st.spreadCostNs > 0);

    WhatIfEditor editor;
    editor.show();
    QSignalSpy changed(&editor, &WhatIfEditor::predictionChanged);
    editor.setJob(exampleJob().trace, exampleJob().analysis, model);
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction().has_value(); }));
    QVERIFY(editor.microbatchOrderBox()->isEnabled());
    QCOMPARE(editor.currentPrediction()->iterationNs(), st.givenNs);
    const QString text = editor.microbatchText();
    QVERIFY2(text.contains(QStringLiteral("the spread costs %1 per iteration").arg(QString::fromStdString(formatDuration(st.spreadCostNs)))),
             qPrintable(text));

    QComboBox* box = editor.microbatchOrderBox();
    const int longest = box->findData(QString("longest-first"));
    QVERIFY(longest >= 0);
    box->setCurrentIndex(longest);
    emit box->activated(longest);
    whatif::Scenario want = base;
    want.microbatchOrder = whatif::MicrobatchOrder::LongestFirst;
    const TimeNs expected = whatif::predict(model, want).iterationNs();
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction()->microbatchOrder == whatif::MicrobatchOrder::LongestFirst; }));
    QCOMPARE(editor.currentPrediction()->iterationNs(), expected);
    QCOMPARE(editor.undoStack()->count(), 1);
    editor.undoStack()->undo();
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction()->microbatchOrder == whatif::MicrobatchOrder::Given; }));
    QCOMPARE(box->currentData().toString(), QString("given"));
}

// GPU speeds typed in the editor replay as whatif --stage-speed does, keep
// the scenario shown, and refuse what core refuses beside the field.
void TestWhatIfEditor::gpuSpeedsApply()
{
    const whatif::CostModel model = exampleModel(16);
    WhatIfEditor editor;
    QSignalSpy changed(&editor, &WhatIfEditor::predictionChanged);
    editor.setJob(exampleJob().trace, exampleJob().analysis, model);
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction().has_value(); }));
    const int pp = editor.currentPrediction()->schedule.pp;
    QVERIFY(pp >= 2);

    whatif::ScenarioChanges c;
    c.boundaries = std::vector<int>{3, 8, 12};
    editor.applyChanges(c);
    QVERIFY(waitFor(changed, [&] { return shownBoundaries(editor) == std::vector<int>{3, 8, 12}; }));

    QStringList speeds;
    std::vector<double> values;
    for (int r = 0; r < pp; ++r) {
        values.push_back(r == 0 ? 0.5 : 1.0); // layer 3 leaves the slow rank 0
        speeds << (r == 0 ? "0.5" : "1");
    }
    whatif::CostModel sped = model;
    sped.setStageSpeeds(values);
    whatif::Scenario want = whatif::measuredScenario(model);
    want.boundaries = std::vector<int>{3, 8, 12};
    const TimeNs expected = whatif::predict(sped, want).iterationNs();
    const TimeNs before = editor.currentPrediction()->iterationNs();
    QVERIFY(expected != before);

    editor.setStageSpeeds(speeds.join(','));
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction()->iterationNs() == expected; }));
    QCOMPARE(shownBoundaries(editor), (std::vector<int>{3, 8, 12})); // the scenario stays
    QCOMPARE(editor.costModel().stageSpeed, values);
    QCOMPARE(editor.errorText("stage-speed"), QString());

    // Layers split evenly over each stage say nothing of speed.
    editor.setStageSpeeds("trace");
    QVERIFY2(editor.errorText("stage-speed").startsWith("speeds come from the trace only when it times each layer"),
             qPrintable(editor.errorText("stage-speed")));
    editor.setStageSpeeds("1,fast");
    QVERIFY2(editor.errorText("stage-speed").contains("the speed of stage 1 is 'fast', not a number"),
             qPrintable(editor.errorText("stage-speed")));
    QCOMPARE(editor.costModel().stageSpeed, values); // refused: the model stays

    // Cleared: every GPU the reference again.
    editor.setStageSpeeds(QString());
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction()->iterationNs() == before; }));
    QVERIFY(editor.costModel().stageSpeed.empty());
}

// Issue 37, defect 6: speeds typed and applied with Enter stay in the field
// while they are in effect, and the undo history of the scenario stays.
void TestWhatIfEditor::gpuSpeedsStayShownAndKeepTheHistory()
{
    WhatIfEditor editor;
    editor.resize(1200, 800);
    editor.show();
    QVERIFY(QTest::qWaitForWindowExposed(&editor));
    QSignalSpy changed(&editor, &WhatIfEditor::predictionChanged);
    editor.setJob(exampleJob().trace, exampleJob().analysis, exampleModel(16));
    QVERIFY(waitFor(changed, [&] { return editor.currentPrediction().has_value(); }));
    const int pp = editor.currentPrediction()->schedule.pp;
    whatif::ScenarioChanges c;
    c.boundaries = std::vector<int>{3, 8, 12};
    auto* undoButton = editor.findChild<QToolButton*>(QStringLiteral("undo"));
    QVERIFY(undoButton);
    const int undoWidth = undoButton->width();
    QVERIFY(!undoButton->isEnabled());
    editor.applyChanges(c);
    QVERIFY(waitFor(changed, [&] { return editor.undoStack()->count() == 1; }));
    // Issue 37, defect 8: the button keeps its width; the step it undoes is its tooltip.
    QVERIFY(undoButton->isEnabled());
    QCOMPARE(undoButton->text(), QStringLiteral("Undo"));
    QCOMPARE(undoButton->width(), undoWidth);
    QCOMPARE(undoButton->toolTip(), QStringLiteral("Undo Apply changes"));

    QStringList typed;
    for (int r = 0; r < pp; ++r)
        typed << (r == 0 ? "0.5" : "1");
    QLineEdit* field = editor.speedsBox();
    QVERIFY(field->isEnabled());
    field->setFocus();
    QTest::keyClicks(field, typed.join(','));
    const TimeNs before = editor.currentPrediction()->iterationNs();
    QTest::keyClick(field, Qt::Key_Return);
    QVERIFY(waitFor(changed, [&] { return !editor.costModel().stageSpeed.empty() && editor.currentPrediction()->iterationNs() != before; }));
    QApplication::processEvents();
    QCOMPARE(field->text(), typed.join(','));                 // what is in effect, not the placeholder
    QCOMPARE(shownBoundaries(editor), (std::vector<int>{3, 8, 12}));
    QCOMPARE(editor.undoStack()->count(), 1);                 // the history stays
    QVERIFY(editor.undoStack()->canUndo());

    // Undo goes back to the measured boundaries, at the speeds in effect.
    editor.undoStack()->undo();
    QVERIFY(waitFor(changed, [&] { return shownBoundaries(editor) == std::vector<int>{4, 8, 12}; }));
    QVERIFY(!editor.costModel().stageSpeed.empty());
    QCOMPARE(field->text(), typed.join(','));
}

QTEST_MAIN(TestWhatIfEditor)
#include "tst_whatif_editor.moc"
