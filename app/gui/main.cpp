// pipescope-gui: the desktop app (see lib/MainWindow.h). With --screenshot it
// renders one view of a job offscreen to a PNG and exits, which is how the
// README's pictures are made and how a cluster node without a display can
// still produce them. A job may be remote: ssh://[user@]host[:port]/path
// (lib/remote/RemoteJob.h, docs/remote.md).
//
// main() is Perfetto's shape: the flags are read into one GuiArgs, then
// runApp() or runScreenshot() does what they say.
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

// Everything the command line says, read and checked.
struct GuiArgs {
    QStringList inputs;
    OpenOptions options;
    whatif::ScenarioChanges changes;
    bool changesScenario = false;
    std::optional<QPair<qint64, qint64>> at;
    QString view = QStringLiteral("timeline");
    QString panel; // the dock's object name, "" for none
    QString compare, prediction;
    bool baselineTracks = false;
    QString screenshot; // OUT.png, "" for the app
    int width = 1600, height = 1000;
};

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

// Screenshots need no display: the offscreen platform is chosen before Qt starts.
bool wantsScreenshot(int argc, char** argv)
{
    bool screenshot = false;
    for (int i = 1; i < argc; ++i)
        screenshot = screenshot || QByteArray(argv[i]) == "--screenshot" || QByteArray(argv[i]).startsWith("--screenshot=");
    return screenshot;
}

QCommandLineOption option(const char* name, const QString& help, const char* value = nullptr, const char* fallback = nullptr)
{
    const QString n = QString::fromLatin1(name);
    if (!value)
        return QCommandLineOption(n, help);
    return fallback ? QCommandLineOption(n, help, QString::fromLatin1(value), QString::fromLatin1(fallback))
                    : QCommandLineOption(n, help, QString::fromLatin1(value));
}

void describeOptions(QCommandLineParser& parser)
{
    parser.setApplicationDescription(QStringLiteral(
        "pipescope desktop app: timelines per GPU, the pipeline view and the what-if editor.\n"
        "FILE: a .pipescope store, PyTorch profiler traces (.json, .json.gz), a folder of rank files, "
        "or Nsight Systems SQLite exports; or a remote job, ssh://[user@]host[:port]/path/to/job "
        "(served by `pipescope serve --stdio` over ssh, docs/remote.md)."));
    parser.addVersionOption();
    parser.addHelpOption();
    parser.addPositionalArgument(QStringLiteral("FILE"), QStringLiteral("What to open"), QStringLiteral("[FILE...]"));
    parser.addOptions({
        option("at", QStringLiteral("Open the timeline at this range, times as the app writes them (1.25s..1.5s, 250ms..300ms, "
                                    "1500ns..2000ns), from the job start or with --iteration N from the start of iteration N "
                                    "(Edit > Copy link writes one)"), "START..END"),
        option("theme", QStringLiteral("system, light or dark (default: as last chosen in View > Appearance; screenshots: system)"),
               "THEME"),
        option("compare", QStringLiteral("Compare mode: a baseline run (store, trace file or folder) to compare the job with "
                                         "(docs/diff.md)"), "BASELINE"),
        option("prediction", QStringLiteral("With --compare: check the job against this prediction saved on the baseline"), "FILE"),
        option("baseline-tracks", QStringLiteral("With --compare: the baseline's tracks beside the job's on the timeline")),
        option("comm-rules", QStringLiteral("Rule file: which kernels are communication beyond NCCL's "
                                            "(docs/communication-kernels.md)"), "FILE"),
        option("layers", QStringLiteral("Layer count when the trace names no layers"), "N"),
        option("model", QStringLiteral("Model description (docs/model-format.md)"), "FILE"),
        option("measured-boundaries", QStringLiteral("The measured run's partition when the trace does not say (default: even)"),
               "L1,L2,..."),
        option("iteration", QStringLiteral("Iteration to analyse and calibrate on"), "N"),
        option("screenshot", QStringLiteral("Render offscreen to this PNG and exit"), "OUT.png"),
        option("view", QStringLiteral("View to show: timeline, pipeline or whatif"), "VIEW", "timeline"),
        option("boundaries", QStringLiteral("What-if: first layer of each stage after the first"), "L1,L2,..."),
        option("schedule", QStringLiteral("What-if: schedule"), "NAME"),
        option("microbatches", QStringLiteral("What-if: microbatches"), "M"),
        option("size", QStringLiteral("Window size for --screenshot"), "WxH", "1600x1000"),
        option("panel", QStringLiteral("Bottom panel to show: bubbles, imbalance, microbatches, critical-path, hta, diagnostics, compare"),
               "PANEL"),
    });
}

// Appearance: the saved one (View > Appearance), --theme over it; screenshots
// take only --theme, so the same command draws the same picture.
std::optional<QString> applyTheme(const QCommandLineParser& parser, bool screenshot)
{
    Appearance look = screenshot ? Appearance{} : savedAppearance();
    if (parser.isSet(QStringLiteral("theme"))) {
        const QString t = parser.value(QStringLiteral("theme"));
        if (t != QLatin1String("system") && t != QLatin1String("light") && t != QLatin1String("dark"))
            return QStringLiteral("--theme %1: choose system, light or dark").arg(t);
        look.theme = themeFromString(t);
    }
    applyAppearance(look);
    return std::nullopt;
}

// --layers, --model, --comm-rules, --iteration, --measured-boundaries.
std::optional<QString> readOpenOptions(const QCommandLineParser& parser, OpenOptions& options)
{
    if (parser.isSet(QStringLiteral("layers"))) {
        bool ok = false;
        options.layers = parser.value(QStringLiteral("layers")).toInt(&ok);
        if (!ok || options.layers < 1 || options.layers > 100000)
            return QStringLiteral("--layers must be a whole number between 1 and 100000 (got '%1')").arg(parser.value(QStringLiteral("layers")));
    }
    options.modelFile = parser.value(QStringLiteral("model"));
    options.commRulesFile = parser.value(QStringLiteral("comm-rules"));
    if (parser.isSet(QStringLiteral("iteration"))) {
        bool ok = false;
        const int it = parser.value(QStringLiteral("iteration")).toInt(&ok);
        if (!ok || it < 0)
            return QStringLiteral("--iteration must be a non-negative whole number (got '%1')").arg(parser.value(QStringLiteral("iteration")));
        options.iteration = it;
    }
    bool ok = true;
    if (auto measured = parseInts(parser.value(QStringLiteral("measured-boundaries")), &ok))
        options.measuredBoundaries = *measured;
    if (!ok)
        return QStringLiteral("--measured-boundaries must be comma-separated layer numbers, e.g. 6,14,26");
    return std::nullopt;
}

// --boundaries, --schedule, --microbatches: the what-if scenario to show.
std::optional<QString> readScenario(const QCommandLineParser& parser, GuiArgs& args)
{
    bool ok = true;
    args.changes.boundaries = parseInts(parser.value(QStringLiteral("boundaries")), &ok);
    if (!ok)
        return QStringLiteral("--boundaries must be comma-separated layer numbers, e.g. 4,9,13");
    if (parser.isSet(QStringLiteral("schedule")))
        args.changes.schedule = parser.value(QStringLiteral("schedule")).toStdString();
    if (parser.isSet(QStringLiteral("microbatches"))) {
        const int m = parser.value(QStringLiteral("microbatches")).toInt(&ok);
        if (!ok)
            return QStringLiteral("--microbatches must be a whole number");
        args.changes.microbatches = m;
    }
    args.changesScenario = args.changes.boundaries || args.changes.schedule || args.changes.microbatches;
    return std::nullopt;
}

// --at, --view, --panel, --compare, --prediction, --baseline-tracks, --screenshot, --size.
std::optional<QString> readShown(const QCommandLineParser& parser, bool screenshot, GuiArgs& args)
{
    if (parser.isSet(QStringLiteral("at"))) {
        QString error;
        args.at = parseTimeRange(parser.value(QStringLiteral("at")), &error);
        if (!args.at)
            return error;
    }
    args.view = parser.value(QStringLiteral("view"));
    if (args.view != QLatin1String("timeline") && args.view != QLatin1String("pipeline") && args.view != QLatin1String("whatif"))
        return QStringLiteral("--view must be timeline, pipeline or whatif (got '%1')").arg(args.view);
    if (parser.isSet(QStringLiteral("panel"))) {
        args.panel = parser.value(QStringLiteral("panel"));
        const QStringList known{QStringLiteral("bubbles"), QStringLiteral("imbalance"), QStringLiteral("microbatches"),
                                QStringLiteral("critical-path"), QStringLiteral("hta"), QStringLiteral("diagnostics"), QStringLiteral("compare")};
        if (!known.contains(args.panel))
            return QStringLiteral("--panel must be bubbles, imbalance, microbatches, critical-path, hta, diagnostics or compare (got '%1')")
                .arg(args.panel);
    }
    args.compare = parser.value(QStringLiteral("compare"));
    args.prediction = parser.value(QStringLiteral("prediction"));
    args.baselineTracks = parser.isSet(QStringLiteral("baseline-tracks"));
    if (!screenshot)
        return std::nullopt;
    args.screenshot = parser.value(QStringLiteral("screenshot"));
    if (args.inputs.isEmpty())
        return QStringLiteral("--screenshot needs a FILE to open");
    const QStringList size = parser.value(QStringLiteral("size")).split(QLatin1Char('x'));
    args.width = size.value(0).toInt();
    args.height = size.value(1).toInt();
    if (size.size() != 2 || args.width < 200 || args.height < 150 || args.width > 8000 || args.height > 8000)
        return QStringLiteral("--size must be WIDTHxHEIGHT between 200x150 and 8000x8000 (got '%1')").arg(parser.value(QStringLiteral("size")));
    return std::nullopt;
}

MainWindow::View shownView(const GuiArgs& args)
{
    return args.view == QLatin1String("timeline") ? MainWindow::View::Timeline
           : args.view == QLatin1String("pipeline") ? MainWindow::View::Pipeline
                                                    : MainWindow::View::WhatIf;
}

void raisePanel(MainWindow& window, const GuiArgs& args)
{
    if (args.panel.isEmpty())
        return;
    if (auto* panel = window.findChild<QDockWidget*>(args.panel))
        panel->raise();
}

// The app: opens what the command line names; the loads run on the session's worker.
int runApp(QApplication& app, MainWindow& window, const GuiArgs& args)
{
    window.show();
    if (!args.inputs.isEmpty())
        window.open(args.inputs, args.options);
    if (!args.prediction.isEmpty())
        window.setSavedPrediction(args.prediction);
    if (args.baselineTracks)
        window.baselineTracksAction()->setChecked(true);
    if (!args.compare.isEmpty())
        window.compareWith({args.compare}, args.options);
    const MainWindow::View view = shownView(args);
    QObject::connect(&window, &MainWindow::jobShown, &window, [&window, changes = args.changes, scenario = args.changesScenario, view] {
        if (scenario)
            window.whatIfEditor()->applyChanges(changes);
        window.setView(scenario ? MainWindow::View::WhatIf : view);
    }, Qt::SingleShotConnection);
    raisePanel(window, args);
    return app.exec();
}

// The job (and the baseline) of a screenshot, loaded on this thread: a remote
// job's failure (ssh's or the server's line) ends the run like a local one's.
int showForScreenshot(MainWindow& window, const GuiArgs& args)
{
    std::shared_ptr<const Job> job, baseline;
    try {
        job = AppSession::load(args.inputs, args.options);
    } catch (const std::exception& e) {
        return fail(QString::fromStdString(e.what()));
    }
    if (!args.compare.isEmpty()) {
        try {
            baseline = AppSession::load({args.compare}, args.options);
        } catch (const std::exception& e) {
            return fail(QStringLiteral("the baseline: %1").arg(QString::fromStdString(e.what())));
        }
    }
    window.resize(args.width, args.height);
    window.show();
    window.showJob(job);
    if (!args.prediction.isEmpty() && !window.setSavedPrediction(args.prediction))
        return fail(window.lastError());
    if (baseline)
        window.setBaseline(baseline);
    if (baseline && args.baselineTracks)
        window.baselineTracksAction()->setChecked(true);
    if (job->costModel)
        waitForPrediction(window.whatIfEditor(), 5000);
    if (args.changesScenario) {
        if (!job->costModel)
            return fail(QStringLiteral("the what-if engine could not calibrate on this job: %1").arg(job->whatIfError));
        window.whatIfEditor()->applyChanges(args.changes);
        waitForPrediction(window.whatIfEditor(), 5000);
        if (!window.whatIfEditor()->firstError().isEmpty())
            return fail(window.whatIfEditor()->firstError());
    }
    return 0;
}

// --screenshot OUT.png
int runScreenshot(MainWindow& window, const GuiArgs& args)
{
    if (const int rc = showForScreenshot(window, args))
        return rc;
    window.setView(shownView(args));
    raisePanel(window, args);
    for (int i = 0; i < 5; ++i)
        QApplication::processEvents();
    const QImage image = window.grab().toImage();
    if (image.width() > args.width || image.height() > args.height)
        std::cerr << "pipescope-gui: note: the window needs at least " << image.width() << "x" << image.height()
                  << " for its panels; the screenshot has that size\n";
    if (!image.save(args.screenshot, "PNG"))
        return fail(QStringLiteral("%1: cannot write the screenshot; choose a writable folder").arg(args.screenshot));
    std::cout << args.screenshot.toStdString() << ": " << image.width() << "x" << image.height() << " " << args.view.toStdString();
    if (const QString link = window.linkText(); !link.isEmpty())
        std::cout << " (" << link.toStdString() << ")";
    std::cout << "\n";
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    const bool screenshot = wantsScreenshot(argc, argv);
    if (screenshot && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");

    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("pipescope"));
    QApplication::setOrganizationName(QStringLiteral("pipescope"));
    QApplication::setApplicationVersion(QString::fromUtf8(pipescope::kVersion));
    QApplication::setWindowIcon(QIcon::fromTheme(QStringLiteral("pipescope")));

    QCommandLineParser parser;
    describeOptions(parser);
    parser.process(app);

    GuiArgs args;
    args.inputs = parser.positionalArguments();
    for (const auto& read : {applyTheme(parser, screenshot), readOpenOptions(parser, args.options), readScenario(parser, args),
                             readShown(parser, screenshot, args)})
        if (read)
            return fail(*read);

    MainWindow window(nullptr, !screenshot);
    window.setKeepsViews(!screenshot); // a screenshot draws the same picture whatever was kept
    if (args.at)
        window.setStartRange(*args.at);
    return screenshot ? runScreenshot(window, args) : runApp(app, window, args);
}
