// Two runs compared: pairs of jobs run by an independent model of Megatron-LM
// (tests/common/MegatronJob.h, no jitter) whose differences are known
// exactly: the same job, re-partitioned, more microbatches, another
// schedule, one slower GPU. The prediction check is held against the other
// run as that model ran it.
#include "MegatronJob.h"
#include "TestSupport.h"
#include "compare/Diff.h"
#include "compare/SavedPrediction.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>

#include <QtTest>

#include <cmath>
#include <memory>

using namespace pipescope;
using namespace pipescope::compare;
using pipescope::test::MegatronSpec;
using pipescope::test::megatronTrace;

namespace {

struct Run {
    Trace trace;
    AnalysisResult analysis;
    std::optional<whatif::CostModel> model;
    RunInput input(const std::string& name) const { return {name, &trace, &analysis, model ? &*model : nullptr}; }
};

std::unique_ptr<Run> run(const MegatronSpec& s)
{
    auto r = std::make_unique<Run>();
    r->trace = megatronTrace(s).trace;
    r->analysis = analyze(r->trace);
    r->model = whatif::calibrate(r->trace, r->analysis);
    return r;
}

MegatronSpec base()
{
    MegatronSpec s;
    s.pp = 4;
    s.layers = 16;
    s.microbatches = 8;
    s.jitter = 0; // every step's time is exact
    return s;
}

const StageDiff& stage(const DiffResult& d, int s)
{
    for (const StageDiff& x : d.stages)
        if (x.stage == s)
            return x;
    qFatal("no stage %d", s);
}

constexpr TimeNs us(double v) { return static_cast<TimeNs>(v * 1000); }

bool hasDifference(const DiffResult& d, const std::string& field, const std::string& a, const std::string& b)
{
    for (const Difference& x : d.differences)
        if (x.field == field)
            return x.a == a && x.b == b;
    return false;
}

} // namespace

class TestDiff : public QObject {
    Q_OBJECT
private slots:
    void sameJobDiffersInNothing();
    void repartitioned();
    void moreMicrobatches();
    void sameGlobalBatch();
    void anotherSchedule();
    void oneSlowerGpu();
    void jsonHoldsTheDocumentedFields();
    void savedPredictionIsTheOneChecked();
    void repartitionedWithoutLayerRanges();
};

void TestDiff::sameJobDiffersInNothing()
{
    const auto a = run(base());
    const DiffResult d = diffRuns(a->input("a"), a->input("a"));
    QVERIFY(d.differences.empty());
    QCOMPARE(*d.iterationNs.delta(), TimeNs(0));
    QVERIFY(d.kernels.empty());
    QCOMPARE(d.kernelsAdded + d.kernelsRemoved, int64_t(0));
    QVERIFY(!d.prediction);
    QVERIFY2(d.predictionWhyNot.find("nothing to predict") != std::string::npos, d.predictionWhyNot.c_str());
    QCOMPARE(int(d.stages.size()), 4);
    QCOMPARE(int(d.microbatches.size()), 4 * 8);
    for (int c = 0; c < kBubbleCauses; ++c)
        QCOMPARE(d.idleByCause[size_t(c)].delta().value_or(0), TimeNs(0));
}

void TestDiff::repartitioned()
{
    MegatronSpec sa = base(), sb = base();
    sb.chunkLayers = {5, 4, 4, 3};
    const auto a = run(sa), b = run(sb);
    const DiffResult d = diffRuns(a->input("a"), b->input("b"));
    QVERIFY(hasDifference(d, "layers_per_stage", "4,4,4,4", "5,4,4,3"));
    QCOMPARE(int(d.differences.size()), 1);
    // Forward per microbatch: the embedding (150 us) on stage 0, 400 us a
    // layer, the head and loss (300 us) on stage 3; backward twice that.
    QCOMPARE(*stage(d, 0).forwardNs.a, us(150 + 4 * 400));
    QCOMPARE(*stage(d, 0).forwardNs.b, us(150 + 5 * 400));
    QCOMPARE(*stage(d, 1).forwardNs.b, us(4 * 400));
    QCOMPARE(*stage(d, 3).forwardNs.a, us(4 * 400 + 300));
    QCOMPARE(*stage(d, 3).forwardNs.b, us(3 * 400 + 300));
    QCOMPARE(*stage(d, 0).backwardNs.b, us(2 * (150 + 5 * 400)));
    QCOMPARE(*stage(d, 0).fbNs.delta(), us(3 * 400));
    QCOMPARE(*stage(d, 3).fbNs.delta(), us(-3 * 400));
    // A's prediction for B's partition, against B as the model ran it.
    QVERIFY2(d.prediction, d.predictionWhyNot.c_str());
    const PredictionCheck& p = *d.prediction;
    QVERIFY(p.notModelled.empty());
    QCOMPARE(*p.scenario.boundaries, (std::vector<int>{5, 9, 13}));
    QCOMPARE(p.measuredNs, *d.iterationNs.b);
    // The same prediction as whatif's for that scenario.
    whatif::ScenarioChanges ch;
    ch.boundaries = std::vector<int>{5, 9, 13};
    whatif::ReplayOptions ro;
    ro.timeline = false;
    QCOMPARE(p.predictedNs, whatif::predict(*a->model, whatif::applyChanges(whatif::measuredScenario(*a->model), ch), ro).iterationNs());
    qInfo("predicted %.3f ms, measured %.3f ms (%+.2f%%)", p.predictedNs / 1e6, p.measuredNs / 1e6, p.error * 100);
    QVERIFY2(std::abs(p.error) < 0.03, qPrintable(QString::number(p.error * 100, 'f', 2) + "%"));
    // Stage 0 runs one more layer per microbatch: 8 x 400 us more forward kernels.
    bool found = false;
    for (const KernelDiff& k : d.kernels)
        if (k.stage == 0 && k.name == "sm90_xmma_gemm_bf16_fprop") {
            found = true;
            QCOMPARE(*k.count.a, int64_t(8 * 5));
            QCOMPARE(*k.count.b, int64_t(8 * 6));
            QCOMPARE(*k.totalNs.b - *k.totalNs.a, us(8 * 400));
            QCOMPARE(std::string(toString(k.change)), std::string("changed"));
        }
    QVERIFY(found);
}

void TestDiff::moreMicrobatches()
{
    MegatronSpec sa = base(), sb = base();
    sb.microbatches = 16;
    const auto a = run(sa), b = run(sb);
    const DiffResult d = diffRuns(a->input("a"), b->input("b"));
    QVERIFY(hasDifference(d, "microbatches", "8", "16"));
    QCOMPARE(int(d.differences.size()), 1);
    // Per microbatch, nothing changed.
    for (int s = 0; s < 4; ++s)
        QCOMPARE(*stage(d, s).fbNs.delta(), TimeNs(0));
    QVERIFY(d.microbatches.empty());
    QVERIFY(!d.microbatchesWhyNot.empty());
    QVERIFY(*d.iterationNs.b > *d.iterationNs.a);
    // Fill and drain are the same length with twice the microbatches: the
    // share of idle time falls.
    QVERIFY(*d.bubbleShare.b < *d.bubbleShare.a);
    QVERIFY2(d.prediction, d.predictionWhyNot.c_str());
    QCOMPARE(d.prediction->scenario.microbatches, 16);
    QCOMPARE(d.prediction->batch, std::string("microbatch")); // each microbatch costs what A's did
    qInfo("predicted %.3f ms, measured %.3f ms (%+.2f%%)", d.prediction->predictedNs / 1e6, d.prediction->measuredNs / 1e6,
          d.prediction->error * 100);
    QVERIFY(std::abs(d.prediction->error) < 0.03);
}

void TestDiff::sameGlobalBatch()
{
    // B cuts A's batch into twice the microbatches, each half the work.
    MegatronSpec sa = base(), sb = base();
    sb.microbatches = 16;
    sb.layerForwardNs = sa.layerForwardNs / 2;
    sb.embeddingNs = sa.embeddingNs / 2;
    sb.lossNs = sa.lossNs / 2;
    sb.activationBytes = sa.activationBytes / 2;
    const auto a = run(sa), b = run(sb);
    const DiffResult d = diffRuns(a->input("a"), b->input("b"));
    QCOMPARE(*stage(d, 1).forwardNs.b * 2, *stage(d, 1).forwardNs.a);
    QVERIFY2(d.prediction, d.predictionWhyNot.c_str());
    QCOMPARE(d.prediction->batch, std::string("global"));
    qInfo("predicted %.3f ms, measured %.3f ms (%+.2f%%)", d.prediction->predictedNs / 1e6, d.prediction->measuredNs / 1e6,
          d.prediction->error * 100);
    QVERIFY(std::abs(d.prediction->error) < 0.03);
}

void TestDiff::anotherSchedule()
{
    MegatronSpec sa = base(), sb = base();
    // Megatron's batched exchanges in both: A's 1F1B shows no more of how B
    // exchanges (overlap_p2p_comm is a choice the prediction cannot see).
    sb.v = 2;
    const auto a = run(sa), b = run(sb);
    const DiffResult d = diffRuns(a->input("a"), b->input("b"));
    QVERIFY(hasDifference(d, "schedule", "1f1b", "interleaved-1f1b"));
    QVERIFY(hasDifference(d, "v", "1", "2"));
    QVERIFY(hasDifference(d, "layers_per_stage", "4,4,4,4", "2,2,2,2,2,2,2,2"));
    // The same layers per rank, so the same work per microbatch.
    for (int s = 0; s < 4; ++s)
        QCOMPARE(*stage(d, s).fbNs.delta(), TimeNs(0));
    QVERIFY2(d.prediction, d.predictionWhyNot.c_str());
    QVERIFY(d.prediction->scenario.schedule == ScheduleKind::Interleaved1F1B);
    QCOMPARE(d.prediction->scenario.v, 2);
    qInfo("predicted %.3f ms, measured %.3f ms (%+.2f%%)", d.prediction->predictedNs / 1e6, d.prediction->measuredNs / 1e6,
          d.prediction->error * 100);
    QVERIFY(std::abs(d.prediction->error) < 0.03);
    // Interleaving shortens fill and drain.
    const auto fill = size_t(BubbleCause::FillDrain);
    QVERIFY(*d.idleByCause[fill].b < *d.idleByCause[fill].a);
}

void TestDiff::oneSlowerGpu()
{
    MegatronSpec sa = base(), sb = base();
    sb.rankSlowdown[2] = 1.25;
    const auto a = run(sa), b = run(sb);
    const DiffResult d = diffRuns(a->input("a"), b->input("b"));
    QVERIFY(d.differences.empty());
    // Nothing the what-if engine changes differs: no prediction to check.
    QVERIFY(!d.prediction);
    QCOMPARE(*stage(d, 2).forwardNs.a, us(4 * 400));
    QCOMPARE(*stage(d, 2).forwardNs.b, us(4 * 400 * 1.25));
    QCOMPARE(*stage(d, 2).backwardNs.b, us(2 * 4 * 400 * 1.25));
    for (int s : {0, 1, 3})
        QCOMPARE(*stage(d, s).fbNs.delta(), TimeNs(0));
    // Each microbatch's forward on stage 2, 25 % longer.
    int rows = 0;
    for (const MicrobatchDiff& m : d.microbatches)
        if (m.stage == 2) {
            ++rows;
            QCOMPARE(*m.forwardNs.a, us(1600));
            QCOMPARE(*m.forwardNs.b, us(2000));
        }
    QCOMPARE(rows, 8);
    // Of the compute kernels, only stage 2's changed, by exactly the slowdown.
    int computeRows = 0;
    for (const KernelDiff& k : d.kernels) {
        if (k.workClass != WorkClass::Compute)
            continue;
        ++computeRows;
        QCOMPARE(k.stage, 2);
        QCOMPARE(*k.count.a, *k.count.b);
        const TimeNs expected = k.name == "sm90_xmma_gemm_bf16_fprop" ? us(8 * 4 * 100) : us(8 * 4 * 200);
        QCOMPARE(*k.totalNs.b - *k.totalNs.a, expected);
    }
    QCOMPARE(computeRows, 2);
    QVERIFY(*d.iterationNs.b > *d.iterationNs.a);
}

void TestDiff::jsonHoldsTheDocumentedFields()
{
    MegatronSpec sa = base(), sb = base();
    sb.chunkLayers = {5, 4, 4, 3};
    const auto a = run(sa), b = run(sb);
    const nlohmann::json j = diffToJson(diffRuns(a->input("a.pipescope"), b->input("b.pipescope")));
    QCOMPARE(j["schema"].get<std::string>(), std::string("pipescope.diff/1"));
    QCOMPARE(j["iteration"]["delta_ns"].get<int64_t>(),
             j["iteration"]["b_ns"].get<int64_t>() - j["iteration"]["a_ns"].get<int64_t>());
    QCOMPARE(j["stages"].size(), size_t(4));
    QCOMPARE(j["stages"][0]["a_fb_per_microbatch_ns"].get<int64_t>(), us(3 * (150 + 1600)));
    QCOMPARE(j["stages"][0]["b_fb_per_microbatch_ns"].get<int64_t>(), us(3 * (150 + 2000)));
    QVERIFY(j["bubbles_by_cause_ns"]["fill_drain"]["a"].is_number());
    QVERIFY(j["bubbles_by_cause_ns"]["fill_drain"]["b"].is_number());
    QVERIFY(j["kernels"].is_array() && !j["kernels"].empty());
    QVERIFY(j["prediction_check"]["predicted_ns"].is_number());
    QCOMPARE(j["prediction_check"]["measured_ns"], j["iteration"]["b_ns"]);
    QVERIFY(j["prediction_check"]["error"].is_number());
    QCOMPARE(j["a"]["config"]["layers_per_stage"].dump(), std::string("[4,4,4,4]"));
    QVERIFY(j["prediction_check_note"].is_null());
    const nlohmann::json same = diffToJson(diffRuns(a->input("a"), a->input("a")));
    QVERIFY(same["prediction_check"].is_null());
    QVERIFY(same["prediction_check_note"].is_string());
}

// The prediction the user acted on, saved on A with A's identity, is the
// one B is checked against; it survives the file; another job's is refused.
void TestDiff::savedPredictionIsTheOneChecked()
{
    MegatronSpec sa = base(), sb = base();
    sb.chunkLayers = {5, 4, 4, 3};
    const auto a = run(sa), b = run(sb);
    whatif::ScenarioChanges ch;
    ch.boundaries = std::vector<int>{5, 9, 13};
    whatif::Scenario sc = whatif::applyChanges(whatif::measuredScenario(*a->model), ch);
    sc.label = "move a layer to stage 0";
    const whatif::Prediction p = whatif::predict(*a->model, sc);
    QTemporaryDir dir;
    const std::string path = (dir.path() + "/prediction.json").toStdString();
    compare::writeSavedPrediction(path, compare::savePrediction("a", compare::jobIdentity(a->trace, a->analysis), p));
    const SavedPrediction saved = readSavedPrediction(path);
    QCOMPARE(saved.predictedNs, p.iterationNs());
    QCOMPARE(saved.boundaries, (std::vector<int>{5, 9, 13}));
    QCOMPARE(saved.label, std::string("move a layer to stage 0"));

    DiffOptions o;
    o.saved = &saved;
    const DiffResult d = diffRuns(a->input("a"), b->input("b"), o);
    QVERIFY(d.prediction && d.prediction->saved);
    QCOMPARE(d.prediction->predictedNs, p.iterationNs());
    QCOMPARE(int(d.prediction->changes.size()), 1);
    QCOMPARE(d.prediction->changes[0].field, std::string("boundaries"));
    QCOMPARE(d.prediction->changes[0].a, std::string("4,8,12"));
    QCOMPARE(d.prediction->changes[0].b, std::string("5,9,13"));
    QCOMPARE(d.prediction->measuredNs, *d.iterationNs.b);
    QVERIFY2(d.prediction->notModelled.empty(), d.prediction->notModelled.empty() ? "" : d.prediction->notModelled[0].c_str());

    // B ran something else than the saved scenario: the check says so.
    MegatronSpec sc2 = base();
    sc2.microbatches = 16;
    const auto other = run(sc2);
    const DiffResult d2 = diffRuns(a->input("a"), other->input("c"), o);
    QVERIFY(d2.prediction && d2.prediction->saved);
    QCOMPARE(int(d2.prediction->notModelled.size()), 2); // microbatches, and the partition
    QVERIFY(d2.prediction->notModelled[0].find("microbatches 16, the saved scenario 8") != std::string::npos);

    // Saved on another job than A.
    bool refused = false;
    try {
        diffRuns(b->input("b"), a->input("a"), o);
    } catch (const Error& e) {
        refused = std::string(e.what()).find("another job") != std::string::npos;
    }
    QVERIFY(refused);
    // A file that is not a saved prediction.
    const std::string junk = (dir.path() + "/junk.json").toStdString();
    compare::writeSavedPrediction(junk, saved);
    QFile f(QString::fromStdString(junk));
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write("{\"schema\": \"pipescope.whatif/1\"}");
    f.close();
    bool named = false;
    try {
        readSavedPrediction(junk);
    } catch (const FormatError& e) {
        named = std::string(e.what()).rfind(junk + ": not a saved prediction", 0) == 0;
    }
    QVERIFY(named);
}

// Issue 37, defect 3: B re-partitioned 4,5,5,4 against A's 5,4,4,5, neither
// trace with layer ranges. B's partition is unknown, not A's: the
// configurations are not said to be the same, and there is no "nothing to
// predict"; a saved prediction's line names what it asked for.
void TestDiff::repartitionedWithoutLayerRanges()
{
    MegatronSpec sa = base(), sb = base();
    sa.layers = sb.layers = 18;
    sa.chunkLayers = {5, 4, 4, 5};
    sb.chunkLayers = {4, 5, 5, 4};
    sa.layerRanges = sb.layerRanges = false;
    const auto a = run(sa), b = run(sb);
    const DiffResult d = diffRuns(a->input("a"), b->input("b"));
    QVERIFY(d.a.layersPerStage.empty() && d.b.layersPerStage.empty());
    QCOMPARE(int(d.differences.size()), 1);
    QVERIFY(hasDifference(d, "layers_per_stage", "unknown", "unknown"));
    QCOMPARE(*stage(d, 0).fbNs.a, us(3 * (150 + 5 * 400)));
    QCOMPARE(*stage(d, 0).fbNs.b, us(3 * (150 + 4 * 400)));
    QVERIFY(!d.prediction);
    QCOMPARE(d.predictionWhyNot,
             std::string("run B's partition is unknown (its trace has no layer ranges), and the rest of its configuration is "
                         "A's: give B's boundaries (diff --b-measured-boundaries, with --layers) to predict it"));
    const std::string text = diffText(d);
    qInfo("%s", text.c_str());
    const QStringList lines = QString::fromStdString(text).split('\n');
    QVERIFY(lines.contains("Prediction check: none: " + QString::fromStdString(d.predictionWhyNot)));
    QVERIFY(text.find("same configuration") == std::string::npos);
    QVERIFY(text.find("nothing to predict") == std::string::npos);
    QVERIFY(text.find("(* differs)") == std::string::npos);
    QVERIFY(lines.contains("  (layers per stage unknown: neither trace has layer ranges, so a partition that moved does "
                           "not show here)"));
    QVERIFY(lines.contains("layers per stage  unknown    unknown"));

    // Saved on A: a scenario of A's own configuration, then one that moves layers.
    SavedPrediction saved;
    saved.jobName = "a";
    saved.job = jobIdentity(a->trace, a->analysis);
    saved.label = "requested";
    saved.pp = 4;
    saved.microbatches = 8;
    saved.predictedNs = *d.iterationNs.a;
    DiffOptions o;
    o.saved = &saved;
    DiffResult ds = diffRuns(a->input("a"), b->input("b"), o);
    QVERIFY(ds.prediction && ds.prediction->saved);
    QVERIFY(ds.prediction->changes.empty());
    QCOMPARE(ds.prediction->notModelled,
             std::vector<std::string>{"B's partition is unknown (no layer ranges in its trace): not checked against the "
                                      "saved scenario's"});
    QStringList savedLines = QString::fromStdString(diffText(ds)).split('\n');
    QVERIFY2(savedLines.contains("  the prediction saved on A (\"requested\"): no change from A's configuration as its trace "
                                 "records it"),
             qPrintable(savedLines.join('\n')));
    QVERIFY(savedLines.contains("  differs: B's partition is unknown (no layer ranges in its trace): not checked against "
                                "the saved scenario's"));
    saved.boundaries = {4, 9, 14};
    saved.layers = 18;
    ds = diffRuns(a->input("a"), b->input("b"), o);
    QCOMPARE(int(ds.prediction->changes.size()), 1);
    savedLines = QString::fromStdString(diffText(ds)).split('\n');
    QVERIFY2(savedLines.contains("  the prediction saved on A (\"requested\"): boundaries unknown -> 4,9,14"),
             qPrintable(savedLines.join('\n')));

    // Given B's partition (and the layer count), B's configuration is predicted.
    auto model = [](const Run& r, std::vector<int> boundaries) {
        whatif::CalibrateOptions co;
        co.measured.layers = 18;
        co.measured.measuredBoundaries = std::move(boundaries);
        return whatif::calibrate(r.trace, r.analysis, co);
    };
    const whatif::CostModel ma = model(*a, {5, 9, 13}), mb = model(*b, {4, 9, 14});
    const DiffResult dk = diffRuns({"a", &a->trace, &a->analysis, &ma}, {"b", &b->trace, &b->analysis, &mb});
    QVERIFY(hasDifference(dk, "layers_per_stage", "5,4,4,5", "4,5,5,4"));
    QVERIFY2(dk.prediction, dk.predictionWhyNot.c_str());
    QCOMPARE(*dk.prediction->scenario.boundaries, (std::vector<int>{4, 9, 14}));
    QVERIFY(dk.prediction->notModelled.empty());
}

QTEST_GUILESS_MAIN(TestDiff)
#include "tst_diff.moc"
