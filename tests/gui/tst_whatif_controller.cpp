// The what-if controller driven without any widget: every prediction it
// passes on is the one whatif::predict gives for the same scenario, the very
// object the worker made; drag steps say they are drag steps; a whole drag is
// one undo step, and undo and redo bring each state back; a refused change
// names its setting and keeps the prediction; and the answers for a job that
// was replaced before they came never come out.
#include "whatif/WhatIfController.h"
#include "whatif/WhatIfWorker.h"

#include "whatif/WhatIf.h"

#include <QSignalSpy>
#include <QUndoStack>
#include <QtTest>

using namespace pipescope;
using namespace pipescope::gui;
using Origin = WhatIfController::Origin;

namespace {

// Eight layers, each dearer than the one before (layer l: F = (l + 1) x
// `forwardNs`, B = twice that), measured as 1F1B over pp 4 with 8
// microbatches: two layers a stage, boundaries 2,4,6.
whatif::CostModel growingLayers(double forwardNs)
{
    whatif::CostModel m;
    m.name = "growing";
    m.layerSource = whatif::LayerSource::Model;
    for (int l = 0; l < 8; ++l) {
        whatif::LayerCostModel lc;
        lc.name = "layer " + std::to_string(l);
        lc.forwardNs = forwardNs * (l + 1);
        lc.backwardNs = 2 * lc.forwardNs;
        m.layers.push_back(lc);
    }
    m.measuredPp = 4;
    m.measuredMicrobatches = 8;
    return m;
}

// The measured configuration of `model` with these boundaries, as the engine predicts it.
TimeNs predicted(const whatif::CostModel& model, const std::vector<int>& boundaries)
{
    whatif::Scenario s = whatif::measuredScenario(model);
    s.boundaries = boundaries;
    return whatif::predict(model, s).iterationNs();
}

struct Shown {
    PredictionPtr prediction;
    Origin origin = Origin::Model;
};

// Waits for predictions until `done` holds (each wait ends on a signal, not a clock).
template <typename F>
bool waitFor(QSignalSpy& spy, F done)
{
    for (int i = 0; i < 50 && !done(); ++i)
        if (!spy.wait())
            return false;
    return done();
}

} // namespace

// Checks the prediction shown last (expectShown, a lambda of the test) and
// stops the test at the first one that is not as expected.
#define EXPECT_SHOWN(...)               \
    do {                                \
        expectShown(__VA_ARGS__);       \
        if (QTest::currentTestFailed()) \
            return;                     \
    } while (false)

class TestWhatIfController : public QObject {
    Q_OBJECT
private slots:
    void dragIsOneUndoStep();
    void refusedChangeKeepsThePrediction();
    void olderJobsAnswersAreDropped();
};

void TestWhatIfController::dragIsOneUndoStep()
{
    const whatif::CostModel model = growingLayers(1e6);
    std::vector<Shown> shown;
    WhatIfController c;
    connect(&c, &WhatIfController::predictionChanged, this, [&](PredictionPtr p, Origin o) { shown.push_back({p, o}); });
    QSignalSpy changed(&c, &WhatIfController::predictionChanged);
    QSignalSpy ready(c.worker(), &WhatIfWorker::predictionReady);
    // The last prediction shown, checked against the engine and against what the worker sent.
    auto expectShown = [&](size_t count, Origin origin, const std::vector<int>& boundaries) {
        QVERIFY(waitFor(changed, [&] { return shown.size() == count; }));
        const Shown& s = shown.back();
        QVERIFY(s.origin == origin);
        QCOMPARE(s.prediction->partition.boundaries(), boundaries);
        QCOMPARE(s.prediction->iterationNs(), predicted(model, boundaries));
        QCOMPARE(s.prediction.get(), c.current().get());
        QCOMPARE(s.prediction.get(), ready.last()[0].value<PredictionPtr>().get()); // shared, never copied
    };

    c.setJob(nullptr, nullptr, model);
    EXPECT_SHOWN(1, Origin::Model, {2, 4, 6});
    QCOMPARE(c.undoStack()->count(), 0);

    whatif::ScenarioChanges first;
    first.boundaries = std::vector<int>{2, 4, 7};
    c.applyChange(first, "boundaries", "Boundaries 2,4,7");
    EXPECT_SHOWN(2, Origin::Control, {2, 4, 7});
    QCOMPARE(c.undoStack()->count(), 1);
    // The last stage is the bottleneck, so these partitions take different times and the steps below are told apart.
    QVERIFY(predicted(model, {2, 4, 7}) != predicted(model, {2, 4, 6}));
    QVERIFY(predicted(model, {2, 4, 6}) != predicted(model, {2, 4, 5}));
    QVERIFY(predicted(model, {2, 4, 7}) != predicted(model, {2, 4, 5}));

    // The last boundary dragged from layer 7 to 5, one step at a time as a hand would, then released.
    c.dragBoundaries({2, 4, 6});
    EXPECT_SHOWN(3, Origin::DragStep, {2, 4, 6});
    c.dragBoundaries({2, 4, 5});
    EXPECT_SHOWN(4, Origin::DragStep, {2, 4, 5});
    QCOMPARE(c.undoStack()->count(), 1); // no step while the mouse moves
    c.commitBoundaries({2, 4, 5});
    EXPECT_SHOWN(5, Origin::DragCommit, {2, 4, 5});
    QCOMPARE(c.undoStack()->count(), 2); // the whole drag is one step
    QCOMPARE(c.undoStack()->text(1), QString("Move stage boundary"));

    c.undoStack()->undo();
    EXPECT_SHOWN(6, Origin::Restore, {2, 4, 7});
    c.undoStack()->undo();
    EXPECT_SHOWN(7, Origin::Restore, {2, 4, 6});
    QCOMPARE(c.undoStack()->index(), 0);
    c.undoStack()->redo();
    EXPECT_SHOWN(8, Origin::Restore, {2, 4, 7});
    c.undoStack()->redo();
    EXPECT_SHOWN(9, Origin::Restore, {2, 4, 5});
    QCOMPARE(c.undoStack()->count(), 2); // undo and redo add no steps
    QCOMPARE(c.undoStack()->index(), 2);
    QVERIFY(c.scenario()->boundaries.has_value());
    QCOMPARE(*c.scenario()->boundaries, (std::vector<int>{2, 4, 5}));
}

void TestWhatIfController::refusedChangeKeepsThePrediction()
{
    WhatIfController c;
    QSignalSpy changed(&c, &WhatIfController::predictionChanged);
    QSignalSpy errors(&c, &WhatIfController::errorChanged);
    c.setJob(nullptr, nullptr, growingLayers(1e6));
    QVERIFY(waitFor(changed, [&] { return c.current() != nullptr; }));
    const PredictionPtr before = c.current();

    c.commitBoundaries({3, 3, 6}); // an empty stage
    QVERIFY(errors.wait());
    QCOMPARE(errors.size(), 1);
    QCOMPARE(errors[0][0].toString(), QString("boundaries"));
    QVERIFY2(errors[0][1].toString().startsWith("stage boundaries must increase"), qPrintable(errors[0][1].toString()));
    QCOMPARE(changed.size(), 1); // only the job's own prediction
    QCOMPARE(c.current().get(), before.get());
    QCOMPARE(c.undoStack()->count(), 0);
}

void TestWhatIfController::olderJobsAnswersAreDropped()
{
    const whatif::CostModel older = growingLayers(1e6), newer = growingLayers(3e6);
    const TimeNs olderNs = predicted(older, {2, 4, 6}), newerNs = predicted(newer, {2, 4, 6});
    QVERIFY(olderNs != newerNs);
    std::vector<Shown> shown;
    WhatIfController c;
    connect(&c, &WhatIfController::predictionChanged, this, [&](PredictionPtr p, Origin o) { shown.push_back({p, o}); });
    QSignalSpy changed(&c, &WhatIfController::predictionChanged);
    QSignalSpy ready(c.worker(), &WhatIfWorker::predictionReady);

    // The second job comes before the first one's answer: that answer belongs to a job no longer shown.
    c.setJob(nullptr, nullptr, older);
    c.setJob(nullptr, nullptr, newer);
    QVERIFY(waitFor(changed, [&] { return !shown.empty(); }));
    QCOMPARE(ready.size(), 2); // the worker answered both, in order
    QCOMPARE(ready[0][0].value<PredictionPtr>()->iterationNs(), olderNs);
    QCOMPARE(shown.size(), size_t(1)); // only the newer job's came out
    QVERIFY(shown[0].origin == Origin::Model);
    QCOMPARE(shown[0].prediction->iterationNs(), newerNs);
    QCOMPARE(c.measured()->iterationNs(), newerNs);
    QCOMPARE(c.costModel().layers[0].forwardNs, 3e6);
    QCOMPARE(c.undoStack()->count(), 0);
}

QTEST_MAIN(TestWhatIfController)
#include "tst_whatif_controller.moc"
