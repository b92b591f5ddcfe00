// Saved predictions (pipescope.prediction/1, docs/diff.md) kept hardened:
// every field is checked when a file is read (whole numbers exactly and in
// range, boundaries, a schedule the scenario can run), deep nesting and
// oversized documents are refused before they are parsed (model
// descriptions too), and `whatif --save-prediction` refuses an empty path
// and the file -o writes, and saves the search's best configuration. Each
// test: a small input, the exit status, the exact message, nothing written.
#include "TestSupport.h"

#include <QFile>
#include <QFileInfo>

#include <nlohmann/json.hpp>
#include <unistd.h>
#include <zlib.h>

using namespace pipescope::test;
using nlohmann::json;

namespace {

const QString kAdvice = "save one with pipescope whatif --save-prediction FILE or the app's File > Save prediction";

QString writeFile(const QString& path, const QByteArray& contents)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly))
        qFatal("cannot write %s", qPrintable(path));
    f.write(contents);
    return path;
}

QByteArray readFile(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return f.readAll();
}

QByteArray gzip(const QByteArray& data)
{
    z_stream z{};
    deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    QByteArray out(static_cast<int>(deflateBound(&z, static_cast<uLong>(data.size()))), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    deflate(&z, Z_FINISH);
    out.resize(static_cast<int>(z.total_out));
    deflateEnd(&z);
    return out;
}

QString model() { return QString::fromUtf8(PIPESCOPE_SOURCE_DIR) + "/resources/models/gpt-32l.json"; }

QStringList entries(const QString& dir)
{
    return QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot);
}

} // namespace

class TstHardeningPrediction : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    QString job_;  // a simulated 4-stage 1F1B job of 32 layers
    QString good_; // a prediction saved on it: boundaries 5,9,13

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        auto sim = runCli({"simulate", model(), "--emit-kineto", dir_.path() + "/t", "--summary"});
        QVERIFY2(sim.exitCode == 0, qPrintable(sim.err));
        job_ = dir_.path() + "/job.pipescope";
        auto imp = runCli({"import", dir_.path() + "/t", "-o", job_, "-q"});
        QVERIFY2(imp.exitCode == 0, qPrintable(imp.err));
        good_ = dir_.path() + "/good.json";
        auto save = runCli({"whatif", job_, "--layers", "32", "--boundaries", "5,9,13", "--summary", "--save-prediction", good_});
        QVERIFY2(save.exitCode == 0, qPrintable(save.err));
        QVERIFY2(save.err.contains("pipescope whatif: saved the prediction \"requested\" ("), qPrintable(save.err));
        const json saved = json::parse(readFile(good_).toStdString());
        QCOMPARE(saved["scenario"]["boundaries"], json({5, 9, 13}));
        QCOMPARE(saved["scenario"]["layers"], json(32));
    }

    // Defect 12: each field of a saved prediction read exactly and in range.
    void savedPredictionFieldsAreChecked_data()
    {
        QTest::addColumn<QString>("patch"); // a JSON merge patch on the good prediction
        QTest::addColumn<QString>("why");
        QTest::newRow("pp beyond 32 bits") << R"({"scenario": {"pp": 4294967300}})"
                                           << "scenario.pp must be a whole number from 1 to 4,096, got 4294967300";
        QTest::newRow("fractional microbatches")
            << R"({"scenario": {"microbatches": 8.5}})"
            << "scenario.microbatches must be a whole number from 1 to 100,000, got 8.5";
        QTest::newRow("negative boundary")
            << R"({"scenario": {"boundaries": [-5, 9, 13]}})"
            << "scenario.boundaries[0] must be a whole number from 1 to 2,147,483,647, got -5";
        QTest::newRow("unsorted boundaries")
            << R"({"scenario": {"boundaries": [9, 5, 13]}})"
            << "scenario.boundaries: stage boundaries must increase and be above 0: boundary 2 (5) does not exceed 9";
        QTest::newRow("too few boundaries")
            << R"({"scenario": {"schedule": "1f1b", "pp": 4, "v": 1, "boundaries": [5, 9]}})"
            << "scenario.boundaries holds 2 boundaries; pp x v = 4 stages need 3 (or none, for an even split)";
        QTest::newRow("boundary past the layers")
            << R"({"scenario": {"schedule": "1f1b", "pp": 4, "v": 1, "layers": 32, "boundaries": [5, 9, 32]}})"
            << "scenario.boundaries: stage boundary 32 leaves no layer for the last stage (the model has 32 layers, "
               "numbered 0..31)";
        QTest::newRow("unknown schedule")
            << R"({"scenario": {"schedule": "warp"}})"
            << "scenario.schedule \"warp\" is not a built-in schedule (gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, "
               "zb-h2, zb-v, dualpipev)";
        QTest::newRow("schedule CSV order")
            << R"({"scenario": {"schedule": "custom"}})"
            << "scenario.schedule \"custom\" is not a built-in schedule (gpipe, 1f1b, interleaved-1f1b, looped-bfs, "
               "zb-h1, zb-h2, zb-v, dualpipev)";
        QTest::newRow("chunks the schedule cannot run")
            << R"({"scenario": {"schedule": "zb-v", "v": 3}})"
            << "scenario.v: zb-v places exactly two chunks per rank (v 2; got 3)";
        QTest::newRow("microbatches the schedule cannot run")
            << R"({"scenario": {"schedule": "interleaved-1f1b", "pp": 4, "v": 2, "microbatches": 6, "boundaries": []}})"
            << "scenario.microbatches: interleaved-1f1b (Megatron's order) needs the number of microbatches (6) to be "
               "a multiple of the pipeline degree (4)";
        QTest::newRow("unknown recomputation")
            << R"({"scenario": {"recompute": "sometimes"}})"
            << "scenario.recompute: 'sometimes' is not a recomputation; give none, selective or full, for every stage "
               "or one per virtual stage, comma-separated";
        QTest::newRow("no ranks") << R"({"job": {"ranks": 0}})"
                                  << "job.ranks must be a whole number from 1 to 1,048,576, got 0";
        QTest::newRow("time as text") << R"({"predicted_iteration_ns": "fast"})"
                                      << "predicted_iteration_ns must be a whole number of at least 1, got \"fast\"";
        QTest::newRow("fractional measured time")
            << R"({"measured_iteration_ns": 1.5})" << "measured_iteration_ns must be a whole number of at least 0, got 1.5";
        QTest::newRow("no scenario") << R"({"scenario": null})" << "scenario is missing";
        QTest::newRow("another schema") << R"({"schema": "pipescope.whatif/1"})"
                                        << "its schema is not pipescope.prediction/1";
    }
    void savedPredictionFieldsAreChecked()
    {
        QFETCH(QString, patch);
        QFETCH(QString, why);
        QTemporaryDir dir;
        json doc = json::parse(readFile(good_).toStdString());
        doc.merge_patch(json::parse(patch.toStdString()));
        const QString bad = writeFile(dir.path() + "/bad.json", QByteArray::fromStdString(doc.dump(1)));
        const QString out = dir.path() + "/diff.json";
        auto r = runCli({"diff", job_, job_, "--prediction", bad, "-o", out});
        QCOMPARE(r.exitCode, 1);
        const QString expected = "pipescope diff: error: " + bad + ": not a saved prediction (" + why + "); " + kAdvice + "\n";
        QCOMPARE(r.err, expected);
        QVERIFY(!QFileInfo::exists(out));
    }

    // The prediction the CLI saves reads back: checked against its own job.
    void savedPredictionIsAccepted()
    {
        QTemporaryDir dir;
        const QString out = dir.path() + "/diff.json";
        auto r = runCli({"diff", job_, job_, "--prediction", good_, "-o", out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(QFileInfo::exists(out));
    }

    // "[[[[..." of a few KB gzip-compressed expands to a megabyte of nesting:
    // refused before it is parsed, as is a document beyond 16 MiB.
    void nestedOrOversizedPredictionIsRefused()
    {
        QTemporaryDir dir;
        const QString nested = writeFile(dir.path() + "/nested.json", gzip(QByteArray(1 << 20, '[')));
        const QString out = dir.path() + "/diff.json";
        auto r = runCli({"diff", job_, job_, "--prediction", nested, "-o", out});
        QCOMPARE(r.exitCode, 1);
        QCOMPARE(r.err, "pipescope diff: error: " + nested + ": nested more than 64 levels deep; " + kAdvice + "\n");
        QVERIFY(!QFileInfo::exists(out));

        const QString big = writeFile(dir.path() + "/big.json", gzip("{" + QByteArray(17 << 20, ' ') + "}"));
        auto b = runCli({"diff", job_, job_, "--prediction", big, "-o", out});
        QCOMPARE(b.exitCode, 1);
        QVERIFY2(b.err.startsWith("pipescope diff: error: " + big + ": is larger than 16 MiB once decompressed"),
                 qPrintable(b.err));
        QVERIFY(!QFileInfo::exists(out));
    }

    // Model descriptions are read through the same bounds.
    void nestedModelDescriptionIsRefused()
    {
        QTemporaryDir dir;
        const QString nested =
            writeFile(dir.path() + "/model.json", "{\"layers\": " + QByteArray(100000, '[') + "}");
        const QString out = dir.path() + "/sim.json";
        auto r = runCli({"simulate", nested, "--summary", "-o", out});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(nested + ": nested more than 64 levels deep; see docs/model-format.md for the model "
                                         "description format"),
                 qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(out));
        // Broken JSON within the bounds still says where it breaks.
        writeFile(nested, "{\"layers\": [");
        auto broken = runCli({"simulate", nested, "--summary", "-o", out});
        QCOMPARE(broken.exitCode, 1);
        QVERIFY2(broken.err.contains(nested + ": not valid JSON ("), qPrintable(broken.err));
        QVERIFY(!QFileInfo::exists(out));
    }

    // Defect 9: --save-prediction F -o F would leave F holding the what-if JSON.
    void savePredictionOverTheOutputIsRefused_data()
    {
        QTest::addColumn<QString>("how"); // how -o names the prediction's file
        QTest::newRow("same path") << "same";
        QTest::newRow("another spelling") << "dot";
        QTest::newRow("symbolic link") << "symlink";
        QTest::newRow("hard link") << "hardlink";
    }
    void savePredictionOverTheOutputIsRefused()
    {
        QFETCH(QString, how);
        QTemporaryDir dir;
        const QString saved = dir.path() + "/p.json";
        QString output = saved;
        if (how == "dot") {
            output = dir.path() + "/./p.json";
        } else if (how == "symlink") {
            writeFile(saved, "keep");
            output = dir.path() + "/alias.json";
            QVERIFY(QFile::link(saved, output));
        } else if (how == "hardlink") {
            writeFile(saved, "keep");
            output = dir.path() + "/alias.json";
            QCOMPARE(::link(saved.toUtf8().constData(), output.toUtf8().constData()), 0);
        }
        const QStringList before = entries(dir.path());
        auto r = runCli({"whatif", job_, "--layers", "32", "--summary", "--save-prediction", saved, "--json", "-o", output});
        QCOMPARE(r.exitCode, 1);
        QCOMPARE(r.err, "pipescope whatif: error: --save-prediction: " + saved +
                            " is also the -o file, and one output would replace the other; give them different paths\n");
        QVERIFY(r.out.isEmpty());
        QCOMPARE(entries(dir.path()), before);
        if (how == "symlink" || how == "hardlink")
            QCOMPARE(readFile(saved), QByteArray("keep"));
    }

    // --save-prediction '' used to save nothing and exit 0.
    void emptySavePredictionPathIsRefused()
    {
        QTemporaryDir dir;
        auto r = runCli({"whatif", job_, "--layers", "32", "--summary", "--save-prediction", ""}, dir.path());
        QCOMPARE(r.exitCode, 1);
        QCOMPARE(r.err, QString("pipescope whatif: error: --save-prediction: the path is empty; give the file to save "
                                "the prediction to\n"));
        QVERIFY(r.out.isEmpty());
        QVERIFY(entries(dir.path()).isEmpty());
    }

    // A schedule CSV's order cannot be read back from a saved prediction: refused before it is read.
    void scheduleCsvPredictionIsRefused()
    {
        QTemporaryDir dir;
        const QString saved = dir.path() + "/p.json";
        auto r = runCli({"whatif", job_, "--layers", "32", "--schedule-csv", dir.path() + "/order.csv",
                         "--save-prediction", saved});
        QCOMPARE(r.exitCode, 1);
        QCOMPARE(r.err, QString("pipescope whatif: error: --save-prediction: a prediction of a schedule CSV's order "
                                "(--schedule-csv) cannot be saved: a saved prediction holds a built-in schedule\n"));
        QVERIFY(entries(dir.path()).isEmpty());
    }

    // --search --save-prediction saves the best configuration found, not the measured one.
    void searchSavesItsBestConfiguration()
    {
        QTemporaryDir dir;
        const QString saved = dir.path() + "/best.json";
        // The model description gives each configuration its memory: the best is the fastest that fits.
        auto r = runCli({"whatif", job_, "--model", model(), "--search", "--json", "--summary", "--save-prediction", saved});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const json doc = json::parse(r.out.toStdString());
        json best;
        for (const json& row : doc["search"])
            if (!row["out_of_memory"].get<bool>()) {
                best = row;
                break;
            }
        QVERIFY(best.is_object());
        const json p = json::parse(readFile(saved).toStdString());
        const json& sc = p["scenario"];
        QVERIFY2(sc["label"].get<std::string>().rfind("search best: ", 0) == 0, sc["label"].dump().c_str());
        QCOMPARE(sc["schedule"], best["schedule"]);
        QCOMPARE(sc["pp"], best["pp"]);
        QCOMPARE(sc["v"], best["v"]);
        QCOMPARE(sc["microbatches"], best["microbatches"]);
        QCOMPARE(sc["boundaries"], best["boundaries"]);
        QCOMPARE(p["predicted_iteration_ns"], best["iteration_ns"]);
        QVERIFY2(r.err.contains("pipescope whatif: saved the prediction \"" + QString::fromStdString(sc["label"].get<std::string>()) +
                                "\" ("),
                 qPrintable(r.err));
        // ... and it reads back.
        auto check = runCli({"diff", job_, job_, "--prediction", saved, "-o", dir.path() + "/diff.json"});
        QVERIFY2(check.exitCode == 0, qPrintable(check.err));
    }

    // Nothing the search found fits the GPU memory: nothing to save, and nothing written.
    void searchWithNothingThatFitsSavesNothing()
    {
        QTemporaryDir dir;
        auto r = runCli({"whatif", job_, "--model", model(), "--search", "--gpu-memory", "0.0009765625", "--summary",
                         "--save-prediction", dir.path() + "/best.json", "--json", "-o", dir.path() + "/doc.json"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.endsWith("pipescope whatif: error: --save-prediction: no configuration the search found fits the "
                                "GPU memory, so there is no best one to save; nothing was written\n"),
                 qPrintable(r.err));
        QVERIFY(r.out.isEmpty());
        QVERIFY(entries(dir.path()).isEmpty());
    }
};

QTEST_GUILESS_MAIN(TstHardeningPrediction)
#include "tst_hardening_prediction.moc"
