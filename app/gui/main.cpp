// pipescope-gui: the desktop app (see lib/MainWindow.h). With --screenshot it
// renders one view of a job offscreen to a PNG and exits, which is how the
// README's pictures are made and how a cluster node without a display can
// still produce them.
#include "MainWindow.h"
#include "session/SavedView.h"
#include "views/PipelineView.h"
#include "Version.h"
#include "views/Theme.h"
#include "whatif/WhatIfEditor.h"

#include "util/Error.h"

#include <QApplication>
#include <QDockWidget>
#include <QCommandLineParser>
#include <QEventLoop>
#include <QTimer>

#include <cstdio>
#include <iostream>

namespace {

using namespace pipescope;
using namespace pipescope::gui;

int fail(const QString& message)
{
    std::cerr << "pipescope-gui: error: " << message.toStdString() << "\n";
    return 1;
}

std::optional<std::vector<int>> parseInts(const QString& text, bool* ok)
{
    *ok = true;
    if (text.isEmpty())
        return std::nullopt;
    std::vector<int> out;
    for (const QString& part : text.split(QLatin1Char(','))) {
        bool good = false;
        out.push_back(part.trimmed().toInt(&good));
        *ok = *ok && good;
    }
    return out;
}

// Waits (processing events) until the editor shows a new prediction or an error.
void waitForPrediction(WhatIfEditor* editor, int timeoutMs)
{
    QEventLoop loop;
    QObject::connect(editor, &WhatIfEditor::predictionChanged, &loop, &QEventLoop::quit);
    QObject::connect(editor, &WhatIfEditor::errorShown, &loop, &QEventLoop::quit);
    QTimer::singleShot(timeoutMs, &loop, &QEventLoop::quit);
    loop.exec();
}

} // namespace

int main(int argc, char** argv)
{
    // Screenshots need no display: choose the offscreen platform before Qt starts.
    bool screenshot = false;
    for (int i = 1; i < argc; ++i)
        screenshot = screenshot || QByteArray(argv[i]) == "--screenshot" || QByteArray(argv[i]).startsWith("--screenshot=");
    if (screenshot && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");

    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("pipescope"));
    QApplication::setOrganizationName(QStringLiteral("pipescope"));
    QApplication::setApplicationVersion(QString::fromUtf8(pipescope::kVersion));
    QApplication::setWindowIcon(QIcon::fromTheme(QStringLiteral("pipescope")));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "pipescope desktop app: timelines per GPU, the pipeline view and the what-if editor.\n"
        "FILE: a .pipescope store, PyTorch profiler traces (.json, .json.gz), a folder of rank files, "
        "or Nsight Systems SQLite exports."));
    parser.addVersionOption();
    parser.addHelpOption();
    parser.addPositionalArgument(QStringLiteral("FILE"), QStringLiteral("What to open"), QStringLiteral("[FILE...]"));
    QCommandLineOption layersOpt(QStringLiteral("layers"), QStringLiteral("Layer count when the trace names no layers"), QStringLiteral("N"));
    QCommandLineOption modelOpt(QStringLiteral("model"), QStringLiteral("Model description (docs/model-format.md)"), QStringLiteral("FILE"));
    QCommandLineOption measuredOpt(QStringLiteral("measured-boundaries"),
                                   QStringLiteral("The measured run's partition when the trace does not say (default: even)"),
                                   QStringLiteral("L1,L2,..."));
    QCommandLineOption iterationOpt(QStringLiteral("iteration"), QStringLiteral("Iteration to analyse and calibrate on"), QStringLiteral("N"));
    QCommandLineOption shotOpt(QStringLiteral("screenshot"), QStringLiteral("Render offscreen to this PNG and exit"), QStringLiteral("OUT.png"));
    QCommandLineOption viewOpt(QStringLiteral("view"), QStringLiteral("View to show: timeline, pipeline or whatif"), QStringLiteral("VIEW"),
                               QStringLiteral("timeline"));
    QCommandLineOption boundariesOpt(QStringLiteral("boundaries"), QStringLiteral("What-if: first layer of each stage after the first"),
                                     QStringLiteral("L1,L2,..."));
    QCommandLineOption scheduleOpt(QStringLiteral("schedule"), QStringLiteral("What-if: schedule"), QStringLiteral("NAME"));
    QCommandLineOption microbatchesOpt(QStringLiteral("microbatches"), QStringLiteral("What-if: microbatches"), QStringLiteral("M"));
    QCommandLineOption sizeOpt(QStringLiteral("size"), QStringLiteral("Window size for --screenshot"), QStringLiteral("WxH"),
                               QStringLiteral("1600x1000"));
    QCommandLineOption panelOpt(QStringLiteral("panel"),
                                QStringLiteral("Bottom panel to show: bubbles, imbalance, microbatches, critical-path, hta, diagnostics, compare"),
                                QStringLiteral("PANEL"));
    QCommandLineOption commRulesOpt(QStringLiteral("comm-rules"),
                                    QStringLiteral("Rule file: which kernels are communication beyond NCCL's "
                                                   "(docs/communication-kernels.md)"),
                                    QStringLiteral("FILE"));
    QCommandLineOption compareOpt(QStringLiteral("compare"),
                                  QStringLiteral("Compare mode: a baseline run (store, trace file or folder) to compare the job with "
                                                 "(docs/diff.md)"),
                                  QStringLiteral("BASELINE"));
    QCommandLineOption predictionOpt(QStringLiteral("prediction"),
                                     QStringLiteral("With --compare: check the job against this prediction saved on the baseline"),
                                     QStringLiteral("FILE"));
    QCommandLineOption baselineTracksOpt(QStringLiteral("baseline-tracks"),
                                         QStringLiteral("With --compare: the baseline's tracks beside the job's on the timeline"));
    QCommandLineOption themeOpt(QStringLiteral("theme"),
                                QStringLiteral("system, light or dark (default: as last chosen in View > Appearance; "
                                               "screenshots: system)"),
                                QStringLiteral("THEME"));
    QCommandLineOption atOpt(QStringLiteral("at"),
                             QStringLiteral("Open the timeline at this range, times as the app writes them (1.25s..1.5s, "
                                            "250ms..300ms, 1500ns..2000ns), from the job start or with --iteration N from "
                                            "the start of iteration N (Edit > Copy link writes one)"),
                             QStringLiteral("START..END"));
    parser.addOption(atOpt);
    parser.addOption(themeOpt);
    parser.addOptions({compareOpt, predictionOpt, baselineTracksOpt, commRulesOpt, layersOpt, modelOpt, measuredOpt, iterationOpt, shotOpt, viewOpt, boundariesOpt, scheduleOpt, microbatchesOpt, sizeOpt,
                       panelOpt});
    parser.process(app);

    // Appearance: the saved one (View > Appearance), --theme over it;
    // screenshots take only --theme, so the same command draws the same picture.
    {
        Appearance look = screenshot ? Appearance{} : savedAppearance();
        if (parser.isSet(themeOpt)) {
            const QString t = parser.value(themeOpt);
            if (t != QLatin1String("system") && t != QLatin1String("light") && t != QLatin1String("dark"))
                return fail(QStringLiteral("--theme %1: choose system, light or dark").arg(t));
            look.theme = themeFromString(t);
        }
        applyAppearance(look);
    }

    OpenOptions options;
    if (parser.isSet(layersOpt)) {
        bool ok = false;
        options.layers = parser.value(layersOpt).toInt(&ok);
        if (!ok || options.layers < 1 || options.layers > 100000)
            return fail(QStringLiteral("--layers must be a whole number between 1 and 100000 (got '%1')").arg(parser.value(layersOpt)));
    }
    options.modelFile = parser.value(modelOpt);
    options.commRulesFile = parser.value(commRulesOpt);
    if (parser.isSet(iterationOpt)) {
        bool ok = false;
        const int it = parser.value(iterationOpt).toInt(&ok);
        if (!ok || it < 0)
            return fail(QStringLiteral("--iteration must be a non-negative whole number (got '%1')").arg(parser.value(iterationOpt)));
        options.iteration = it;
    }
    whatif::ScenarioChanges changes;
    bool ok = true;
    if (auto measured = parseInts(parser.value(measuredOpt), &ok))
        options.measuredBoundaries = *measured;
    if (!ok)
        return fail(QStringLiteral("--measured-boundaries must be comma-separated layer numbers, e.g. 6,14,26"));
    changes.boundaries = parseInts(parser.value(boundariesOpt), &ok);
    if (!ok)
        return fail(QStringLiteral("--boundaries must be comma-separated layer numbers, e.g. 4,9,13"));
    if (parser.isSet(scheduleOpt))
        changes.schedule = parser.value(scheduleOpt).toStdString();
    if (parser.isSet(microbatchesOpt)) {
        const int m = parser.value(microbatchesOpt).toInt(&ok);
        if (!ok)
            return fail(QStringLiteral("--microbatches must be a whole number"));
        changes.microbatches = m;
    }
    const bool changesScenario = changes.boundaries || changes.schedule || changes.microbatches;

    std::optional<QPair<qint64, qint64>> at;
    if (parser.isSet(atOpt)) {
        QString error;
        at = parseTimeRange(parser.value(atOpt), &error);
        if (!at)
            return fail(error);
    }

    MainWindow window(nullptr, !screenshot);
    window.setKeepsViews(!screenshot); // a screenshot draws the same picture whatever was kept
    if (at)
        window.setStartRange(*at);
    const QStringList inputs = parser.positionalArguments();

    const QString view = parser.value(viewOpt);
    if (view != QLatin1String("timeline") && view != QLatin1String("pipeline") && view != QLatin1String("whatif"))
        return fail(QStringLiteral("--view must be timeline, pipeline or whatif (got '%1')").arg(view));
    QDockWidget* panel = nullptr;
    if (parser.isSet(panelOpt)) {
        const QString name = parser.value(panelOpt);
        for (const char* known : {"bubbles", "imbalance", "microbatches", "critical-path", "hta", "diagnostics", "compare"})
            if (name == QLatin1String(known))
                panel = window.findChild<QDockWidget*>(name);
        if (!panel)
            return fail(QStringLiteral("--panel must be bubbles, imbalance, microbatches, critical-path, hta, diagnostics or compare (got '%1')")
                            .arg(name));
    }
    const MainWindow::View shownView = view == QLatin1String("timeline") ? MainWindow::View::Timeline
                                       : view == QLatin1String("pipeline") ? MainWindow::View::Pipeline
                                                                           : MainWindow::View::WhatIf;

    if (!screenshot) {
        window.show();
        if (!inputs.isEmpty())
            window.open(inputs, options);
        if (parser.isSet(predictionOpt))
            window.setSavedPrediction(parser.value(predictionOpt));
        if (parser.isSet(baselineTracksOpt))
            window.baselineTracksAction()->setChecked(true);
        if (parser.isSet(compareOpt))
            window.compareWith({parser.value(compareOpt)}, options);
        QObject::connect(&window, &MainWindow::jobShown, &window, [&window, changes, changesScenario, shownView] {
            if (changesScenario)
                window.whatIfEditor()->applyChanges(changes);
            window.setView(changesScenario ? MainWindow::View::WhatIf : shownView);
        }, Qt::SingleShotConnection);
        if (panel)
            panel->raise();
        return app.exec();
    }

    // --screenshot OUT.png
    if (inputs.isEmpty())
        return fail(QStringLiteral("--screenshot needs a FILE to open"));
    const QString out = parser.value(shotOpt);
    const QStringList size = parser.value(sizeOpt).split(QLatin1Char('x'));
    const int w = size.value(0).toInt(), h = size.value(1).toInt();
    if (size.size() != 2 || w < 200 || h < 150 || w > 8000 || h > 8000)
        return fail(QStringLiteral("--size must be WIDTHxHEIGHT between 200x150 and 8000x8000 (got '%1')").arg(parser.value(sizeOpt)));
    std::shared_ptr<const Job> job;
    try {
        job = AppSession::load(inputs, options);
    } catch (const std::exception& e) {
        return fail(QString::fromStdString(e.what()));
    }
    std::shared_ptr<const Job> baseline;
    if (parser.isSet(compareOpt)) {
        try {
            baseline = AppSession::load({parser.value(compareOpt)}, options);
        } catch (const std::exception& e) {
            return fail(QStringLiteral("the baseline: %1").arg(QString::fromStdString(e.what())));
        }
    }
    window.resize(w, h);
    window.show();
    window.showJob(job);
    if (parser.isSet(predictionOpt) && !window.setSavedPrediction(parser.value(predictionOpt)))
        return fail(window.lastError());
    if (baseline)
        window.setBaseline(baseline);
    if (baseline && parser.isSet(baselineTracksOpt))
        window.baselineTracksAction()->setChecked(true);
    if (job->costModel)
        waitForPrediction(window.whatIfEditor(), 5000);
    if (changesScenario) {
        if (!job->costModel)
            return fail(QStringLiteral("the what-if engine could not calibrate on this job: %1").arg(job->whatIfError));
        window.whatIfEditor()->applyChanges(changes);
        waitForPrediction(window.whatIfEditor(), 5000);
        if (!window.whatIfEditor()->firstError().isEmpty())
            return fail(window.whatIfEditor()->firstError());
    }
    window.setView(shownView);
    if (panel)
        panel->raise();
    for (int i = 0; i < 5; ++i)
        QApplication::processEvents();
    const QImage image = window.grab().toImage();
    if (image.width() > w || image.height() > h)
        std::cerr << "pipescope-gui: note: the window needs at least " << image.width() << "x" << image.height()
                  << " for its panels; the screenshot has that size\n";
    if (!image.save(out, "PNG"))
        return fail(QStringLiteral("%1: cannot write the screenshot; choose a writable folder").arg(out));
    std::cout << out.toStdString() << ": " << image.width() << "x" << image.height() << " " << view.toStdString() << "\n";
    return 0;
}
