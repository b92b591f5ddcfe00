// The desktop app at scale: a generated multi-rank pipeline store of about
// 10M GPU activities (8 stages x 2 replicas, 1F1B, 16 microbatches, short
// kernels, point-to-point transfers, all-reduce and optimizer, ProfilerStep
// iterations), then, with QT_QPA_PLATFORM=offscreen:
//   - open to first frame: AppSession::loadFirstFrame (one window of the store
//     through its index, analysed and built), MainWindow::showJob, the first
//     paint; then AppSession::load of the whole trace by phase (store load,
//     analysis, timeline build, calibration) shown in its place;
//   - peak RSS of the app (VmHWM; the store is generated in a child process);
//   - TimelineView frame time fully zoomed out, at mid zoom and in a 1 us
//     window (median of N replots, panned by a pixel between frames);
//   - a drag of a LayerStrip boundary: mouse move to the repainted predicted
//     PipelineView, per layer step.
// Prints figures with their targets; asserts nothing.
//   bench_gui [activities=10000000] [dir=/tmp] [keep|reuse] [layers=128]
//   (keep: leave the store; reuse: use a store left by keep)
#include "session/AppSession.h"
#include "whatif/LayerStrip.h"
#include "MainWindow.h"
#include "views/PipelineView.h"
#include "views/TimelineView.h"
#include "whatif/WhatIfEditor.h"

#include "../tests/common/SyntheticTrace.h"
#include "store/StoreWriter.h"
#include "util/Work.h"

#include <QApplication>
#include <QEventLoop>
#include <QMouseEvent>
#include <QTimer>
#include <qcustomplot.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace pipescope;
using Clock = std::chrono::steady_clock;

namespace {

double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Kernel memory figures of this process, in MiB: VmHWM (peak) or VmRSS (now).
double procStatusMiB(const char* key)
{
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(key, 0) == 0)
            return std::atof(line.c_str() + std::strlen(key)) / 1024.0;
    return -1;
}

double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

double maxOf(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

// One iteration of the pipeline from the tests' generator, replayed as many
// times as it takes to reach `activities`, written rank by rank.
void generateStore(const std::string& path, int64_t activities)
{
    test::PipelineSpec spec;
    spec.stages = 8;
    spec.replicas = 2;
    spec.microbatches = 16;
    spec.forwardNs = 960'000;
    spec.backwardNs = 1'920'000;
    spec.forwardKernels = 96; // 10 us kernels
    spec.backwardKernels = 192;
    spec.commNs = 40'000;
    spec.allReduceNs = 2'000'000;
    spec.optimizerNs = 1'000'000;
    spec.profilerSteps = true;
    spec.iterations = 1;
    const auto built = test::pipelineTrace(spec);
    const Trace& t = built.trace;
    const TimeNs period = built.iterationEnd[0] + spec.iterationGapNs - built.iterationStart[0];
    const int64_t perIteration = static_cast<int64_t>(t.activities.size());
    const int64_t iterations = std::max<int64_t>(1, (activities + perIteration - 1) / perIteration);

    StoreWriter w(path);
    const auto src = w.addSource({"bench_gui", "simulated", std::nullopt, 0, ""});
    w.setMeta("simulated", "1");
    w.setMeta("simulated_by", "bench_gui");
    for (RankInfo ri : t.ranks) {
        ri.host = "node-" + std::to_string(ri.rank / 8);
        ri.sourceId = src;
        w.addRank(ri);
    }
    std::map<int64_t, int64_t> streamOf;
    for (const auto& s : t.streams)
        streamOf[s.id] = w.stream(s.rank, s.device, s.stream, s.name);
    std::vector<StringId> nameOf;
    for (const auto& s : t.strings)
        nameOf.push_back(w.intern(s));
    std::vector<StringId> stepName;
    for (int64_t k = 0; k < iterations; ++k)
        stepName.push_back(w.intern("ProfilerStep#" + std::to_string(k + 1)));
    std::map<int, std::vector<const Activity*>> byRank;
    for (const Activity& a : t.activities)
        byRank[a.rank].push_back(&a);
    int64_t correlation = 0;
    for (const auto& [rank, acts] : byRank)
        for (int64_t k = 0; k < iterations; ++k) {
            const TimeNs shift = k * period;
            for (const Activity* a : acts) {
                const int64_t id = w.addActivity({a->rank, streamOf[a->streamId], a->kind, a->start + shift, a->end + shift,
                                                  nameOf[static_cast<size_t>(a->name)], ++correlation, a->bytes, std::nullopt, {}, {}});
                if (a->ncclIndex >= 0) {
                    const NcclOp& op = t.ncclOps[static_cast<size_t>(a->ncclIndex)];
                    NcclRecord r;
                    r.rank = op.rank;
                    r.activityId = id;
                    r.kind = op.kind;
                    r.isP2p = op.isP2p;
                    r.bytes = op.bytes;
                    r.peer = op.peer;
                    std::string ranks = "[";
                    for (size_t g = 0; g < op.groupRanks.size(); ++g)
                        ranks += (g ? "," : "") + std::to_string(op.groupRanks[g]);
                    r.groupRanks = ranks + "]";
                    if (op.start)
                        r.start = *op.start + shift;
                    if (op.end)
                        r.end = *op.end + shift;
                    r.streamId = streamOf[a->streamId];
                    w.addNcclOp(r);
                }
            }
            for (const CpuRange& c : t.cpuRanges)
                if (c.rank == rank)
                    w.addCpuRange({c.rank, c.tid, c.kind, c.start + shift, c.end + shift, stepName[static_cast<size_t>(k)], std::nullopt,
                                   std::nullopt});
        }
    w.finish();
    std::printf("  generated %lld iterations x %lld activities over %zu ranks\n", static_cast<long long>(iterations),
                static_cast<long long>(perIteration), t.ranks.size());
}

// Runs generateStore in a child, so that the parent's peak RSS is the app's alone.
bool generateInChild(const std::string& path, int64_t activities)
{
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        try {
            generateStore(path, activities);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_gui: %s\n", e.what());
            std::fflush(stdout);
            _exit(1);
        }
        std::fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Waits for `signal` of `sender` (at most 30 s); true when it came.
template <typename Sender, typename Signal>
bool waitForSignal(Sender* sender, Signal signal, int timeoutMs = 30'000)
{
    QEventLoop loop;
    QTimer timer;
    timer.setSingleShot(true);
    bool fired = false;
    QObject::connect(sender, signal, &loop, [&] {
        fired = true;
        loop.quit();
    });
    QObject::connect(&timer, &QTimer::timeout, &loop, &QEventLoop::quit);
    timer.start(timeoutMs);
    loop.exec();
    return fired;
}

void row(const char* what, double value, const char* unit, const char* target = "")
{
    std::printf("  %-58s %10.1f %-4s %s\n", what, value, unit, target);
}

struct FrameFigures {
    double medianMs = 0, maxMs = 0;
    int primitives = 0;
};

// N frames of the timeline over [from, to), each panned by one pixel from the last.
FrameFigures frames(gui::TimelineView* view, qint64 from, qint64 to, int n)
{
    view->setVisibleRange(from, to);
    QCoreApplication::processEvents();
    const double px = std::max(1.0, double(to - from) / std::max(1, view->plot()->axisRect()->width()));
    std::vector<double> ms;
    int primitives = 0;
    for (int i = 0; i < n; ++i) {
        const qint64 d = static_cast<qint64>((i % 2 ? -1 : 1) * px);
        view->setVisibleRange(from + d, to + d);
        const auto t0 = Clock::now();
        view->plot()->replot(QCustomPlot::rpImmediateRefresh);
        ms.push_back(msSince(t0));
        primitives = std::max(primitives, view->lastPaintPrimitives());
        QCoreApplication::processEvents();
    }
    return {median(ms), maxOf(ms), primitives};
}

} // namespace

int main(int argc, char** argv)
{
    const int64_t n = argc > 1 ? std::atoll(argv[1]) : 10'000'000;
    const std::string dir = argc > 2 ? argv[2] : "/tmp";
    const std::string mode = argc > 3 ? argv[3] : "";
    const int layers = argc > 4 ? std::atoi(argv[4]) : 128;
    const std::string path = dir + "/bench_gui_" + std::to_string(n) + ".pipescope";
    if (n <= 0 || layers <= 0) {
        std::fprintf(stderr, "usage: bench_gui [activities] [dir] [keep|reuse] [layers]\n");
        return 2;
    }
    std::printf("bench_gui: %lld activities, store %s\n", static_cast<long long>(n), path.c_str());
    if (!(mode == "reuse" && std::filesystem::exists(path))) {
        const auto tg = Clock::now();
        if (!generateInChild(path, n)) {
            std::fprintf(stderr, "bench_gui: generating the store failed\n");
            return 1;
        }
        std::printf("  store written in %.1f s, %.0f MiB\n", msSince(tg) / 1e3, double(std::filesystem::file_size(path)) / 1048576.0);
    }

    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    const auto tStart = Clock::now();
    QApplication app(argc, argv);
    QApplication::setApplicationName("pipescope-bench");
    gui::MainWindow window(nullptr, false);
    window.resize(1600, 1000);
    window.show();
    QCoreApplication::processEvents();
    const double windowMs = msSince(tStart);
    const double rssEmpty = procStatusMiB("VmRSS:");

    // ---- open to first frame ------------------------------------------------------------
    // As AppSession::open does it on its worker: the first frame (one window of
    // the store, when it is large), shown; then the whole trace, shown in its place.
    std::vector<std::pair<std::string, Clock::time_point>> marks;
    WorkControl work;
    work.onProgress = [&](std::string_view phase, double) {
        if (marks.empty() || marks.back().first != phase)
            marks.emplace_back(std::string(phase), Clock::now());
    };
    auto at = [&](std::string_view phase, Clock::time_point fallback) {
        for (const auto& [p, t] : marks)
            if (p == phase)
                return t;
        return fallback;
    };
    auto span = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    auto paintNow = [&] {
        QCoreApplication::processEvents(); // the queued replot and the window's paint
        window.timeline()->plot()->replot(QCustomPlot::rpImmediateRefresh);
        window.timeline()->repaint();
    };
    gui::OpenOptions options;
    options.layers = layers;

    const auto t0 = Clock::now();
    auto first = gui::AppSession::loadFirstFrame({QString::fromStdString(path)}, options, &work);
    const auto tFirstLoaded = Clock::now();
    double firstShowMs = 0, firstPaintMs = 0;
    if (first) {
        const auto ts = Clock::now();
        window.showJob(first);
        firstShowMs = msSince(ts);
        const auto tp = Clock::now();
        paintNow();
        firstPaintMs = msSince(tp);
    }
    const double firstFrameMs = msSince(t0);
    const auto firstMarks = marks;
    const double rssFirst = procStatusMiB("VmRSS:");
    if (first) {
        std::printf("\nFirst frame (a window of %zu activities in [%.3f s, %.3f s), %zu timeline events, %zu iterations, pipeline %s)\n",
                    first->trace->activities.size(), double(first->windowFrom) / 1e9, double(first->windowTo) / 1e9,
                    first->timeline->eventCount(), first->analysis->iterations.size(),
                    first->analysis->pipeline.found ? "found" : "not found");
        row("store summary and window load (Store::load, indexed)", span(t0, at("classifying kernels", tFirstLoaded)), "ms");
        row("analysis of the window", span(at("classifying kernels", tFirstLoaded), at("building the timeline", tFirstLoaded)), "ms");
        row("timeline build of the window", span(at("building the timeline", tFirstLoaded), tFirstLoaded), "ms");
        row("MainWindow::showJob", firstShowMs, "ms");
        row("first paint of the timeline", firstPaintMs, "ms");
    } else {
        std::printf("\nNo first frame: the store is loaded whole at once\n");
    }
    row("open to first frame (total)", firstFrameMs, "ms", "target <= 3000 ms");

    marks.clear();
    const auto t1 = Clock::now();
    const auto job = gui::AppSession::load({QString::fromStdString(path)}, options, &work);
    const auto tLoaded = Clock::now();
    const double rssLoaded = procStatusMiB("VmRSS:");
    const auto tAnalysis = at("classifying kernels", tLoaded);
    const auto tTimeline = at("building the timeline", tLoaded);
    const auto tCalibrate = at("calibrating the what-if model", tLoaded);

    const auto tShow = Clock::now();
    window.showJob(job);
    first.reset(); // the window no longer holds it
    const double showMs = msSince(tShow);
    const auto tPaint = Clock::now();
    paintNow();
    const double paintMs = msSince(tPaint);
    const double openMs = msSince(t0);

    std::printf("\nWhole trace, after the first frame (%zu activities, %zu timeline events, %zu lanes; %zu iterations, pipeline %s pp %d dp %d)\n",
                job->trace->activities.size(), job->timeline->eventCount(), job->timeline->lanes.size(),
                job->analysis->iterations.size(), job->analysis->pipeline.found ? "found" : "not found", job->analysis->pipeline.pp,
                job->analysis->pipeline.dp);
    row("window created and shown (before open)", windowMs, "ms");
    row("store load (Store::load)", span(t1, tAnalysis), "ms");
    row("analysis (all iterations)", span(tAnalysis, tTimeline), "ms");
    row("timeline build (buildMeasured)", span(tTimeline, tCalibrate), "ms");
    row("calibration (what-if cost model)", span(tCalibrate, tLoaded), "ms");
    row("MainWindow::showJob", showMs, "ms");
    row("first paint of the timeline", paintMs, "ms");
    row("open to the whole trace shown (total)", openMs, "ms");
    std::printf("  phases reported: ");
    for (const auto& [p, t] : firstMarks)
        std::printf("%s +%.0f ms; ", p.c_str(), span(t0, t));
    for (const auto& [p, t] : marks)
        std::printf("%s +%.0f ms; ", p.c_str(), span(t0, t));
    std::printf("\n");

    // ---- memory -----------------------------------------------------------------------
    std::printf("\nMemory\n");
    row("RSS with the empty window", rssEmpty, "MiB");
    row("RSS with the first frame shown", rssFirst, "MiB");
    row("RSS after AppSession::load (first frame still shown)", rssLoaded, "MiB");
    row("  of which the timeline model (memoryBytes)", double(job->timeline->memoryBytes()) / 1048576.0, "MiB");
    row("  of which trace activities (capacity x size)",
        double(job->trace->activities.capacity() * sizeof(Activity)) / 1048576.0, "MiB");
    row("RSS with the job shown", procStatusMiB("VmRSS:"), "MiB");
    row("peak RSS (VmHWM)", procStatusMiB("VmHWM:"), "MiB", "target <= 1536 MiB");

    // ---- timeline frames ------------------------------------------------------------------
    window.setView(gui::MainWindow::View::Timeline);
    QCoreApplication::processEvents();
    gui::TimelineView* view = window.timeline();
    const auto& model = *job->timeline;
    const qint64 all = model.end - model.start, mid = model.start + all / 2;
    std::printf("\nTimeline frame (plot %dx%d px, %d rows; median of N replots, each panned by 1 px)\n",
                view->plot()->width(), view->plot()->height(), view->rowCount());
    struct Zoom {
        const char* what;
        qint64 from, to;
        int n;
    };
    for (const Zoom& z : {Zoom{"fully zoomed out", model.start, model.end, 15},
                          Zoom{"mid zoom (1/1000 of the trace)", mid, mid + all / 1000, 31},
                          Zoom{"1 us window", mid, mid + 1'000, 31}}) {
        const FrameFigures f = frames(view, z.from, z.to, z.n);
        char what[96];
        std::snprintf(what, sizeof what, "%s (max %.1f ms, %d primitives)", z.what, f.maxMs, f.primitives);
        row(what, f.medianMs, "ms", "target <= 16 ms");
    }
    view->setAllGroupsCollapsed(true);
    {
        const FrameFigures f = frames(view, model.start, model.end, 15);
        char what[96];
        std::snprintf(what, sizeof what, "zoomed out, groups collapsed (%d primitives)", f.primitives);
        row(what, f.medianMs, "ms", "target <= 16 ms");
    }
    view->setAllGroupsCollapsed(false);

    // ---- drag a stage boundary -----------------------------------------------------------------
    std::printf("\nDrag of a stage boundary (%d layers; mouse move to the repainted prediction)\n", layers);
    window.setView(gui::MainWindow::View::WhatIf);
    QCoreApplication::processEvents();
    gui::WhatIfEditor* editor = window.whatIfEditor();
    if (!job->costModel) {
        std::printf("  no what-if: %s\n", qPrintable(job->whatIfError));
    } else {
        if (!editor->currentPrediction())
            waitForSignal(editor, &gui::WhatIfEditor::predictionChanged);
        gui::LayerStrip* strip = editor->layerStrip();
        gui::PipelineView* pipeline = editor->pipelineView();
        const int handle = static_cast<int>(strip->boundaries().size()) / 2;
        const int y = strip->handleY();
        auto send = [&](QEvent::Type type, int x, Qt::MouseButton button, Qt::MouseButtons buttons) {
            const QPointF local(x, y);
            QMouseEvent e(type, local, strip->mapToGlobal(local), button, buttons, Qt::NoModifier);
            QApplication::sendEvent(strip, &e);
        };
        const int from = strip->boundaries()[static_cast<size_t>(handle)];
        const int lo = handle > 0 ? strip->boundaries()[static_cast<size_t>(handle - 1)] + 1 : 1;
        send(QEvent::MouseButtonPress, strip->handleX(handle), Qt::LeftButton, Qt::LeftButton);
        std::vector<double> total, predict, paint;
        int dropped = 0;
        for (int l = from - 1; l >= std::max(lo, from - 12); --l) {
            const auto tm = Clock::now();
            send(QEvent::MouseMove, strip->edgeX(l), Qt::NoButton, Qt::LeftButton);
            if (strip->boundaries()[static_cast<size_t>(handle)] != l) {
                ++dropped;
                continue;
            }
            bool shown = false;
            for (int k = 0; k < 20 && !shown; ++k) {
                if (!waitForSignal(editor, &gui::WhatIfEditor::predictionChanged))
                    break;
                const auto p = editor->currentPrediction();
                shown = p && p->partition.boundaries()[static_cast<size_t>(handle)] == l;
            }
            const double predicted = msSince(tm);
            const auto tp = Clock::now();
            pipeline->repaint();
            paint.push_back(msSince(tp));
            predict.push_back(predicted);
            total.push_back(msSince(tm));
            if (!shown)
                ++dropped;
        }
        send(QEvent::MouseButtonRelease, strip->edgeX(strip->boundaries()[static_cast<size_t>(handle)]), Qt::LeftButton, Qt::NoButton);
        QCoreApplication::processEvents();
        const auto p = editor->currentPrediction();
        std::printf("  %zu steps of one layer (handle %d from layer %d), %d not shown; %s\n", total.size(), handle,
                    from, dropped, p ? qPrintable(editor->predictedIterationText()) : "-");
        row("move to prediction shown (median)", median(predict), "ms");
        row("PipelineView repaint (median)", median(paint), "ms");
        char what[96];
        std::snprintf(what, sizeof what, "move to repainted prediction (median; max %.1f ms)", maxOf(total));
        row(what, median(total), "ms", "target <= 16 ms");
    }

    // Compare mode, the job against itself as the baseline: the comparison
    // (computed as the baseline is set) and the Pipeline view's frame with
    // the baseline's iteration above this one's.
    {
        std::printf("\nCompare mode (the job against itself as the baseline)\n");
        window.setView(gui::MainWindow::View::Pipeline);
        QCoreApplication::processEvents();
        const auto tc = Clock::now();
        window.setBaseline(job);
        row("comparison computed and shown", msSince(tc), "ms");
        gui::PipelineView* pv = window.pipelineView();
        std::vector<double> paint;
        for (int i = 0; i < 21; ++i) {
            const auto tp = Clock::now();
            pv->repaint();
            paint.push_back(msSince(tp));
        }
        char what[96];
        std::snprintf(what, sizeof what, "Pipeline view with the baseline, repaint (median; max %.1f ms)", maxOf(paint));
        row(what, median(paint), "ms", "target <= 16 ms");
    }
    row("peak RSS at the end (VmHWM)", procStatusMiB("VmHWM:"), "MiB", "target <= 1536 MiB");

    // No close(): closing saves the window layout to the user's settings.
    if (mode != "keep" && mode != "reuse")
        std::filesystem::remove(path);
    else
        std::printf("kept %s\n", path.c_str());
    return 0;
}
