#include "MainWindow.h"
#include "views/Theme.h"
#include "store/Store.h"

#include "panels/BubblePanel.h"
#include "panels/ComparePanel.h"
#include "timeline/TimelineCompare.h"
#include "util/Format.h"
#include "panels/CriticalPathPanel.h"
#include "panels/DetailsPanel.h"
#include "panels/DiagnosticsPanel.h"
#include "session/ExportWorker.h"
#include "session/RecentJobs.h"
#include "remote/OpenRemoteDialog.h"
#include "remote/RemoteDetails.h"
#include "remote/RemoteLink.h"
#include "remote/RemoteTiles.h"
#include <QPointer>
#include <QThreadPool>
#include "views/PaletteLegend.h"
#include "panels/HtaPanel.h"
#include "panels/ImbalancePanel.h"
#include "panels/MicrobatchPanel.h"
#include "panels/PivotPanel.h"
#include "panels/QueryPanel.h"
#include "views/PipelineView.h"
#include "panels/SummaryPanel.h"
#include "views/TimelineView.h"
#include "whatif/WhatIfEditor.h"

#include "report/ChromeTrace.h"
#include "report/Report.h"
#include "util/Error.h"
#include "whatif/WhatIf.h"

#include <QAction>
#include <QActionGroup>
#include <QAbstractSpinBox>
#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QInputDialog>
#include <QCloseEvent>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QRegularExpression>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QSettings>
#include <QStatusBar>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QTabWidget>
#include <QToolBar>
#include <QToolButton>
#include <QUndoStack>
#include <QVBoxLayout>
#include <QTimer>
#include <QPainter>
#ifdef PIPESCOPE_HAVE_SVG
#include <QSvgGenerator>
#endif

#include <functional>
#include <set>

namespace pipescope::gui {

namespace {
QString settingsKey(const char* key) { return QString::fromLatin1(key); }
} // namespace

MainWindow::MainWindow(QWidget* parent, bool restoreLayout)
    : QMainWindow(parent), session_(new AppSession(this)), exporter_(new ExportWorker(this))
{
    setWindowTitle(QStringLiteral("pipescope"));
    setAcceptDrops(true);
    resize(firstWindowSize());

    tabs_ = new QTabWidget(this);
    timeline_ = new TimelineView(tabs_);
    buildPipelineTab();
    // The editor scrolls inside its tab rather than setting the window's
    // smallest size: the window fits a 1366x768 laptop screen.
    whatIfTab_ = new QScrollArea(tabs_);
    whatIfTab_->setObjectName(QStringLiteral("whatif-scroll"));
    whatIfTab_->setWidgetResizable(true);
    whatIfTab_->setFrameShape(QFrame::NoFrame);
    editor_ = new WhatIfEditor(whatIfTab_);
    whatIfTab_->setWidget(editor_);
    tabs_->addTab(timeline_, QStringLiteral("Timeline"));
    tabs_->addTab(pipelineTab_, QStringLiteral("Pipeline"));
    tabs_->addTab(whatIfTab_, QStringLiteral("What-if"));
    setCentralWidget(tabs_);

    buildToolBar();
    buildDocks();
    buildMenus();

    progress_ = new QProgressBar(this);
    progress_->setMaximumWidth(220);
    progress_->setVisible(false);
    cancel_ = new QToolButton(this);
    cancel_->setText(QStringLiteral("Cancel"));
    cancel_->setVisible(false);
    status_ = new QLabel(this);
    statusBar()->addWidget(status_, 1);
    statusBar()->addPermanentWidget(progress_);
    statusBar()->addPermanentWidget(cancel_);
    link_ = new QLabel(this);
    link_->setObjectName(QStringLiteral("link"));
    link_->setVisible(false);
    statusBar()->addPermanentWidget(link_);
    linkTimer_ = new QTimer(this);
    linkTimer_->setInterval(2000);
    connect(linkTimer_, &QTimer::timeout, this, &MainWindow::refreshLink);
    // Cancel stops an export in flight first: a load behind it goes on.
    connect(cancel_, &QToolButton::clicked, this, [this] {
        if (exporter_->busy())
            exporter_->cancel();
        else
            session_->cancel();
    });

    connect(session_, &AppSession::progress, this, &MainWindow::showProgress);
    auto idle = [this] { hideProgress(); };
    connect(exporter_, &ExportWorker::progress, this, &MainWindow::showProgress);
    connect(exporter_, &ExportWorker::finished, this, [this](const QString&, const QString& message) {
        hideProgress();
        status_->setText(message);
    });
    connect(exporter_, &ExportWorker::failed, this, [this](const QString& message) {
        hideProgress();
        status_->clear();
        showError(message);
    });
    connect(exporter_, &ExportWorker::cancelled, this, [this] {
        hideProgress();
        status_->setText(QStringLiteral("Export cancelled; nothing was written"));
    });
    connect(session_, &AppSession::loaded, this, [this, idle](std::shared_ptr<const Job> job) {
        idle();
        onLoaded(std::move(job));
    });
    connect(session_, &AppSession::firstFrame, this, [this](std::shared_ptr<const Job> job) { showJob(std::move(job)); });
    connect(session_, &AppSession::failed, this, [this, idle](const QString& message) {
        idle();
        // A first frame already shown stays (the whole job may not fit in memory).
        expandAfterLoad_ = -1;
        pendingPrediction_.reset(); // it was for the job that did not open
        if (shown_.job && !shown_.job->complete)
            status_->setText(QStringLiteral("Showing only a window of %1: %2").arg(shown_.job->title, message));
        else if (shown_.job && shown_.job->partial())
            status_->setText(shown_.status); // the job read in part stays as it was
        else
            status_->clear();
        showError(message);
    });
    connect(session_, &AppSession::cancelled, this, [this, idle] {
        idle();
        expandAfterLoad_ = -1;
        pendingPrediction_.reset();
        if (shown_.job && shown_.job->complete && shown_.job->partial()) {
            status_->setText(shown_.status);
            return;
        }
        status_->setText(shown_.job && !shown_.job->complete ? QStringLiteral("Loading cancelled: showing only a window of %1").arg(shown_.job->title)
                                                 : QStringLiteral("Opening cancelled"));
    });

    baselineSession_ = new AppSession(this);
    connect(baselineSession_, &AppSession::progress, this, &MainWindow::showProgress);
    connect(baselineSession_, &AppSession::loaded, this, [this, idle](std::shared_ptr<const Job> job) {
        if (!job->complete)
            return; // the whole baseline follows
        idle();
        setBaseline(std::move(job));
    });
    connect(baselineSession_, &AppSession::failed, this, [this, idle](const QString& message) {
        idle();
        showError(QStringLiteral("The baseline could not be opened: %1").arg(message));
    });
    connect(baselineSession_, &AppSession::cancelled, this, idle);

    // The Pipeline tab shows what the editor shows, "no prediction" included
    // (a job without a what-if). Shared, not copied: a drag step replaces the
    // prediction, never changes it.
    connect(editor_, &WhatIfEditor::predictionChanged, this,
            [this] { pipeline_->setPrediction(editor_->currentPredictionShared()); });
    // A layer count or model file asked for in the strip re-calibrates inside the editor; nothing is reloaded.

    initialState_ = saveState(); // what View > Reset layout goes back to
    if (restoreLayout) {
        QSettings settings;
        restoreGeometry(settings.value(settingsKey("window/geometry")).toByteArray());
        savedState_ = settings.value(settingsKey("window/state")).toByteArray();
        restoredLayout_ = !savedState_.isEmpty();
    }
    status_->setText(QStringLiteral("Open a .pipescope store, PyTorch profiler traces or Nsight exports (File > Open, or drop them here)"));
}

MainWindow::~MainWindow() = default;

// The Pipeline tab: the diagram under its toolbar, its colour key beneath.
void MainWindow::buildPipelineTab()
{
    pipelineTab_ = new QWidget(tabs_);
    pipeline_ = new PipelineView(pipelineTab_);
    auto* pipelineLayout = new QVBoxLayout(pipelineTab_);
    pipelineLayout->setContentsMargins(0, 0, 0, 0);
    pipelineLayout->setSpacing(0);
    // The What-if tab's diagram has the same toggles beside its colour key.
    auto* pipelineBar = new QToolBar(pipelineTab_);
    QAction* ghost = pipelineBar->addAction(QStringLiteral("Prediction as ghost"));
    ghost->setObjectName(QStringLiteral("pipeline-ghost"));
    ghost->setCheckable(true);
    ghost->setToolTip(QStringLiteral("Draw the prediction as a translucent ghost over the measured rows, not underneath"));
    connect(ghost, &QAction::toggled, pipeline_, [this](bool on) { pipeline_->setMode(on ? PipelineView::Ghost : PipelineView::Stacked); });
    QAction* path = pipelineBar->addAction(QStringLiteral("Critical path"));
    path->setObjectName(QStringLiteral("pipeline-critical-path"));
    path->setCheckable(true);
    path->setChecked(pipeline_->criticalPathVisible());
    path->setToolTip(QStringLiteral("Overlay the critical path (of the analysed iteration)"));
    connect(path, &QAction::toggled, pipeline_, &PipelineView::setCriticalPathVisible);
    QAction* replicas = pipelineBar->addAction(QStringLiteral("Stack replicas"));
    replicas->setObjectName(QStringLiteral("pipeline-replicas"));
    replicas->setCheckable(true);
    replicas->setToolTip(QStringLiteral("One row per data-parallel replica of each stage, not only the first replica"));
    connect(replicas, &QAction::toggled, pipeline_, &PipelineView::setReplicasStacked);
    pipelineLayout->addWidget(pipelineBar);
    pipelineLayout->addWidget(pipeline_, 1);
    pipelineLayout->addWidget(new PaletteLegend(PaletteLegend::Steps | PaletteLegend::Causes | PaletteLegend::TranslucentCauses | PaletteLegend::CriticalPath, pipelineTab_));
}


QSize MainWindow::firstWindowSize()
{
    // 1400x900 where the screen has room, else the screen's available area
    // less the window frame (a 1366x768 laptop: all of it but the frame).
    constexpr QSize kPreferred(1400, 900);
    const QScreen* screen = QGuiApplication::primaryScreen();
    if (!screen)
        return kPreferred;
    const QSize frame(16, 48); // title bar and borders, about, on the common desktops
    return kPreferred.boundedTo(screen->availableGeometry().size() - frame).expandedTo(QSize(640, 480));
}

void MainWindow::showProgress(const QString& phase, double fraction)
{
    progress_->setVisible(true);
    cancel_->setVisible(true);
    if (fraction < 0) {
        progress_->setRange(0, 0);
    } else {
        progress_->setRange(0, 1000);
        progress_->setValue(static_cast<int>(fraction * 1000));
    }
    // While a first frame is shown, say that the rest is still coming.
    status_->setText(shown_.job && !shown_.job->complete && session_->busy()
                         ? QStringLiteral("%1: showing a window of the trace; loading the whole trace: %2").arg(shown_.job->title, phase)
                         : phase);
}

void MainWindow::hideProgress()
{
    // A load and an export may overlap: the bar stays while either runs.
    if (session_->busy() || exporter_->busy())
        return;
    progress_->setVisible(false);
    cancel_->setVisible(false);
}
void MainWindow::buildToolBar()
{
    QToolBar* bar = addToolBar(QStringLiteral("Navigation"));
    bar->setObjectName(QStringLiteral("navigation"));
    bar->addWidget(new QLabel(QStringLiteral(" Iteration "), bar));
    iterations_ = new QComboBox(bar);
    iterations_->setMinimumContentsLength(18);
    iterations_->setObjectName(QStringLiteral("iterations"));
    iterations_->setToolTip(QStringLiteral("Zoom the timeline to one iteration and show it in the Pipeline tab"));
    bar->addWidget(iterations_);
    connect(iterations_, &QComboBox::activated, this, &MainWindow::selectIteration);

    auto* colour = new QComboBox(bar);
    colour->addItem(QStringLiteral("Colour by class"));
    colour->addItem(QStringLiteral("Colour by step"));
    colour->setToolTip(QStringLiteral("Kernels coloured by class (compute, p2p, collective, copy) or by F/B/I/W step"));
    bar->addSeparator();
    bar->addWidget(colour);
    connect(colour, &QComboBox::currentIndexChanged, this, [this](int i) {
        timeline_->setColorBy(i == 0 ? TimelineView::ColorBy::Class : TimelineView::ColorBy::Step);
    });

    bar->addSeparator();
    search_ = new QLineEdit(bar);
    search_->setObjectName(QStringLiteral("search"));
    search_->installEventFilter(this); // Shift+Enter: the previous hit
    search_->setPlaceholderText(QStringLiteral("Search kernels (Ctrl+F)"));
    search_->setClearButtonEnabled(true);
    search_->setMaximumWidth(260);
    regex_ = new QCheckBox(QStringLiteral("regex"), bar);
    searchHits_ = new QLabel(bar);
    bar->addWidget(search_);
    bar->addWidget(regex_);
    QAction* prev = bar->addAction(QStringLiteral("◀"));
    prev->setToolTip(QStringLiteral("Previous hit (Shift+Enter)"));
    QAction* next = bar->addAction(QStringLiteral("▶"));
    next->setToolTip(QStringLiteral("Next hit (Enter)"));
    bar->addWidget(searchHits_);
    auto runSearch = [this] {
        const int hits = timeline_->setSearch(search_->text(), regex_->isChecked());
        if (search_->text().isEmpty())
            searchHits_->clear();
        else if (hits < 0)
            searchHits_->setText(QStringLiteral(" invalid regular expression"));
        else
            searchHits_->setText(QStringLiteral(" %1 hits").arg(hits));
    };
    connect(search_, &QLineEdit::textChanged, this, runSearch);
    connect(regex_, &QCheckBox::toggled, this, runSearch);
    connect(search_, &QLineEdit::returnPressed, timeline_, &TimelineView::nextSearchHit);
    connect(next, &QAction::triggered, timeline_, &TimelineView::nextSearchHit);
    connect(prev, &QAction::triggered, timeline_, &TimelineView::previousSearchHit);
    connect(timeline_, &TimelineView::searchChanged, this, [this](int hits, int current) {
        if (hits > 0)
            searchHits_->setText(QStringLiteral(" %1 of %2").arg(current + 1).arg(hits));
    });
    auto* find = new QAction(this);
    find->setShortcut(QKeySequence::Find);
    connect(find, &QAction::triggered, this, [this] {
        search_->setFocus();
        search_->selectAll();
    });
    addAction(find);
}

void MainWindow::buildDocks()
{
    // A bottom panel scrolls inside its dock rather than setting the
    // window's smallest height, so the timeline keeps most of a laptop screen.
    auto scrolled = [this](QWidget* panel) {
        auto* area = new QScrollArea(this);
        area->setWidgetResizable(true);
        area->setFrameShape(QFrame::NoFrame);
        area->setWidget(panel);
        return area;
    };
    auto dock = [this, scrolled](AnalysisPanel* panel, const QString& title, const char* name, Qt::DockWidgetArea area) {
        auto* d = new QDockWidget(title, this);
        d->setObjectName(QString::fromLatin1(name));
        d->setWidget(area == Qt::BottomDockWidgetArea ? static_cast<QWidget*>(scrolled(panel)) : panel);
        addDockWidget(area, d);
        panels_.push_back(panel);
        return d;
    };
    QDockWidget* summary = dock(new SummaryPanel(this), QStringLiteral("Summary"), "summary", Qt::RightDockWidgetArea);
    bubbles_ = new BubblePanel(this);
    QDockWidget* bubbles = dock(bubbles_, QStringLiteral("Bubbles"), "bubbles", Qt::BottomDockWidgetArea);
    QDockWidget* imbalance = dock(new ImbalancePanel(this), QStringLiteral("Imbalance"), "imbalance", Qt::BottomDockWidgetArea);
    QDockWidget* microbatches =
        dock(new MicrobatchPanel(this), QStringLiteral("Microbatches"), "microbatches", Qt::BottomDockWidgetArea);
    QDockWidget* path = dock(new CriticalPathPanel(this), QStringLiteral("Critical path"), "critical-path", Qt::BottomDockWidgetArea);
    QDockWidget* hta = dock(new HtaPanel(this), QStringLiteral("HTA views"), "hta", Qt::BottomDockWidgetArea);
    QDockWidget* diag = dock(new DiagnosticsPanel(this), QStringLiteral("Diagnostics"), "diagnostics", Qt::BottomDockWidgetArea);
    tabifyDockWidget(bubbles, imbalance);
    tabifyDockWidget(imbalance, microbatches);
    tabifyDockWidget(microbatches, path);
    tabifyDockWidget(path, hta);
    tabifyDockWidget(hta, diag);
    compare_ = new ComparePanel(this);
    compareDock_ = dock(compare_, QStringLiteral("Compare"), "compare", Qt::BottomDockWidgetArea);
    tabifyDockWidget(diag, compareDock_);
    // SQL over the job's store and a pivot of its steps (issue 37, item 9).
    query_ = new QueryPanel(this);
    connect(query_, &QueryPanel::tracksChanged, this, &MainWindow::showBaselineTracks); // a result drawn as a track
    QDockWidget* queryDock = dock(query_, QStringLiteral("Query"), "query", Qt::BottomDockWidgetArea);
    auto* pivot = new PivotPanel(this);
    QDockWidget* pivotDock = dock(pivot, QStringLiteral("Pivot"), "pivot", Qt::BottomDockWidgetArea);
    // An area selected on the timeline narrows the pivot to its steps; Details' link opens it.
    connect(timeline_, &TimelineView::areaSelected, pivot, [this, pivot](qint64 from, qint64 to, const timeline::AreaStats&) {
        pivot->setArea(StepArea{from, to, timeline_->areaRanks()}, timeline_->timeOrigin(), timeline_->timeOriginName());
    });
    tabifyDockWidget(compareDock_, queryDock);
    tabifyDockWidget(queryDock, pivotDock);
    bubbles->raise();
    details_ = new DetailsPanel(this);
    connect(details_, &DetailsPanel::pivotRequested, pivotDock, &QDockWidget::raise);
    auto* detailsDock = new QDockWidget(QStringLiteral("Details"), this);
    detailsDock->setObjectName(QStringLiteral("details"));
    detailsDock->setWidget(details_);
    addDockWidget(Qt::RightDockWidgetArea, detailsDock);
    splitDockWidget(summary, detailsDock, Qt::Vertical);
    connect(timeline_, &TimelineView::replicasRequested, this, &MainWindow::loadReplicas);
    connect(timeline_, &TimelineView::eventSelected, this, [this, detailsDock](int lane, qint64 event) {
        if (lane < 0) {
            details_->clear();
            return;
        }
        details_->showEvent(lane, event, timeline_->toolTipFor(TimelineEventRef{lane, event}));
        detailsDock->raise();
        askServerDetails(lane, event);
    });
    connect(timeline_, &TimelineView::areaSelected, this,
            [this, detailsDock](qint64, qint64, const timeline::AreaStats& stats) {
                details_->showArea(stats, timeline_->timeOrigin(), timeline_->timeOriginName());
                detailsDock->raise();
            });
    bottomDock_ = bubbles;
    setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea); // the summary runs the full height
    summaryDock_ = summary;

    // The Bubbles panel and the pipeline diagram show what they point at on the timeline, selected.
    connect(bubbles_, &BubblePanel::jumpTo, this,
            [this](qint64 start, qint64 end, int rank) { showOnTimeline(rank, start, end, true); });
    connect(pipeline_, &PipelineView::measuredClicked, this,
            [this](int rank, qint64 start, qint64 end, bool bubble) { showOnTimeline(rank, start, end, bubble); });
}

void MainWindow::buildMenus()
{
    QMenu* file = menuBar()->addMenu(QStringLiteral("&File"));
    QAction* openAct = file->addAction(QStringLiteral("&Open..."), this, [this] {
        const QStringList files = QFileDialog::getOpenFileNames(
            this, QStringLiteral("Open a job"), QString(),
            QStringLiteral("Traces (*.pipescope *.json *.json.gz *.sqlite);;pipescope stores (*.pipescope);;"
                           "PyTorch profiler traces (*.json *.json.gz);;Nsight Systems SQLite exports (*.sqlite);;All files (*)"));
        if (!files.isEmpty())
            open(files);
    });
    openAct->setShortcut(QKeySequence::Open);
    file->addAction(QStringLiteral("Open &folder of rank files..."), this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, QStringLiteral("Open a folder of rank files"));
        if (!dir.isEmpty())
            open({dir});
    });
    file->addAction(QStringLiteral("Open r&emote..."), this, &MainWindow::openRemote)->setObjectName(QStringLiteral("open-remote"));
    file->addAction(QStringLiteral("Co&mpare with..."), this, [this] {
        const QString path = QFileDialog::getOpenFileName(
            this, QStringLiteral("Compare with a baseline run"), QString(),
            QStringLiteral("Traces (*.pipescope *.json *.json.gz *.sqlite);;All files (*)"));
        if (!path.isEmpty())
            compareWith({path});
    });
    file->addAction(QStringLiteral("Compare with a &folder..."), this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, QStringLiteral("Compare with a folder of rank files"));
        if (!dir.isEmpty())
            compareWith({dir});
    });
    file->addAction(QStringLiteral("Check a sa&ved prediction..."), this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, QStringLiteral("A prediction saved on the baseline"), QString(),
                                                          QStringLiteral("Saved predictions (*.json);;All files (*)"));
        if (!path.isEmpty())
            setSavedPrediction(path);
    });
    file->addAction(QStringLiteral("Save &prediction for the next run..."), this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Save the prediction for the next run"),
                                                          defaultFileName(QStringLiteral("prediction.json")),
                                                          QStringLiteral("Saved predictions (*.json)"));
        if (!path.isEmpty())
            saveCurrentPrediction(path);
    });
    baselineTracks_ = new QAction(QStringLiteral("&Baseline tracks on the timeline"), this);
    baselineTracks_->setCheckable(true);
    baselineTracks_->setEnabled(false);
    baselineTracks_->setToolTip(QStringLiteral("In compare mode: the baseline's steps, bubbles and streams beside this job's, "
                                               "the compared iterations starting together"));
    connect(baselineTracks_, &QAction::toggled, this, [this] { showBaselineTracks(); });
    stopComparing_ = file->addAction(QStringLiteral("S&top comparing"), this, [this] {
        shown_.savedPrediction.reset();
        pendingPrediction_.reset();
        setBaseline(nullptr);
    });
    stopComparing_->setEnabled(false);
    recentMenu_ = file->addMenu(QStringLiteral("Open &recent"));
    recentMenu_->setObjectName(QStringLiteral("recent"));
    refreshRecentMenu();
    QMenu* examplesMenu = file->addMenu(QStringLiteral("&Examples"));
    for (const auto& [label, path] : examples())
        examplesMenu->addAction(label, this, [this, path = path] { open({path}); });
    if (examplesMenu->isEmpty())
        examplesMenu->addAction(QStringLiteral("(no bundled examples found)"))->setEnabled(false);
    file->addSeparator();
    file->addAction(QStringLiteral("Communication r&ules..."), this, [this] {
        // Kernels the built-in table does not know as communication: the job is analysed again with them.
        const QString path = QFileDialog::getOpenFileName(this, QStringLiteral("Communication rules (CLASS PATTERN per line)"),
                                                          QString(), QStringLiteral("Rule files (*.txt *.rules);;All files (*)"));
        if (path.isEmpty())
            return;
        commRulesFile_ = path;
        if (shown_.job) {
            OpenOptions o = shown_.job->options;
            o.commRulesFile = path;
            open(shown_.job->inputs, o);
        } else {
            status_->setText(QStringLiteral("Communication rules from %1 apply to the next job opened").arg(path));
        }
    });
    QAction* saveViewAct = file->addAction(QStringLiteral("Save &view"), this, [this] { saveView(); });
    saveViewAct->setObjectName(QStringLiteral("save-view"));
    saveViewAct->setToolTip(QStringLiteral("Keep the range, time origin, pinned tracks, markers, notes and the what-if scenario beside the job"));
    file->addAction(QStringLiteral("Save HTML &report..."), this, &MainWindow::exportReport);
    file->addAction(QStringLiteral("Export timeline &image (PNG, SVG)..."), this, &MainWindow::exportTimelineImage);
    file->addAction(QStringLiteral("Export &Chrome trace JSON (Perfetto) of the visible range..."), this,
                    [this] { exportChromeTrace(TraceRange::Visible); })
        ->setObjectName(QStringLiteral("export-chrome-visible"));
    file->addAction(QStringLiteral("Export Chrome trace JSON (Perfetto) of the &whole store..."), this,
                    [this] { exportChromeTrace(TraceRange::WholeStore); })
        ->setObjectName(QStringLiteral("export-chrome-whole"));
    file->addSeparator();
    QAction* quit = file->addAction(QStringLiteral("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    QMenu* edit = menuBar()->addMenu(QStringLiteral("&Edit"));
    QAction* undo = editor_->undoStack()->createUndoAction(this, QStringLiteral("&Undo what-if change"));
    undo->setShortcuts(QKeySequence::Undo); // every binding of the platform (Ctrl+Z)
    QAction* redo = editor_->undoStack()->createRedoAction(this, QStringLiteral("&Redo what-if change"));
    redo->setShortcuts(QKeySequence::Redo); // Ctrl+Shift+Z and Ctrl+Y where the platform has both
    edit->addAction(undo);
    edit->addAction(redo);
    // Search hits from anywhere in the window, the search box included.
    edit->addSeparator();
    QAction* nextHit = edit->addAction(QStringLiteral("&Next search hit"), timeline_, &TimelineView::nextSearchHit);
    nextHit->setShortcut(QKeySequence(Qt::Key_F3));
    nextHit->setObjectName(QStringLiteral("next-hit"));
    QAction* previousHit =
        edit->addAction(QStringLiteral("&Previous search hit"), timeline_, &TimelineView::previousSearchHit);
    previousHit->setShortcut(QKeySequence(Qt::SHIFT | Qt::Key_F3));
    previousHit->setObjectName(QStringLiteral("previous-hit"));
    edit->addSeparator();
    QAction* copyLinkAct = edit->addAction(QStringLiteral("Copy &link"), this, &MainWindow::copyLink);
    copyLinkAct->setObjectName(QStringLiteral("copy-link"));
    copyLinkAct->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_L));
    QAction* markerAct = edit->addAction(QStringLiteral("Add &marker..."), this, [this] {
        if (!timeline_->model())
            return;
        bool ok = false;
        const QString label = QInputDialog::getText(this, QStringLiteral("Add marker"), QStringLiteral("Label (may be empty):"),
                                                    QLineEdit::Normal, QString(), &ok);
        if (ok)
            addMarkerAtCursor(label);
    });
    markerAct->setObjectName(QStringLiteral("add-marker"));
    markerAct->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_M));
    QAction* noteAct = edit->addAction(QStringLiteral("Add &note on the selected range..."), this, [this] {
        if (!timeline_->selectedArea()) {
            status_->setText(QStringLiteral("Select a time range first (shift-drag or right-drag on the timeline)"));
            return;
        }
        bool ok = false;
        const QString text = QInputDialog::getText(this, QStringLiteral("Add note"), QStringLiteral("Note:"), QLineEdit::Normal,
                                                   QString(), &ok);
        if (ok && !text.isEmpty())
            addNoteOnSelection(text);
    });
    noteAct->setObjectName(QStringLiteral("add-note"));
    noteAct->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_N));
    // A number field would take Ctrl+Z for its own text: the what-if's undo
    // and redo win there (a field's value is committed as it changes).
    qApp->installEventFilter(this);

    buildViewMenu(menuBar()->addMenu(QStringLiteral("&View")));

    QMenu* help = menuBar()->addMenu(QStringLiteral("&Help"));
    help->addAction(QStringLiteral("Keyboard &shortcuts"), this, &MainWindow::showShortcuts);
    help->addAction(QStringLiteral("&About pipescope"), this, [this] {
        QMessageBox::about(this, QStringLiteral("About pipescope"),
                           QStringLiteral("<b>pipescope %1</b><p>Find where a pipeline-parallel training job loses time: "
                                          "bubbles by cause, stage imbalance, the critical path, and what-if replay "
                                          "of other partitions, schedules and microbatch counts.</p>")
                               .arg(QApplication::applicationVersion()));
    });
}

// View: the tabs, CPU and baseline tracks, Timeline only, Reset layout, Appearance, the docks.
void MainWindow::buildViewMenu(QMenu* view)
{
    auto viewAct = [&](const QString& name, View v, const QString& key) {
        QAction* a = view->addAction(name, this, [this, v] { setView(v); });
        a->setShortcut(QKeySequence(key));
    };
    viewAct(QStringLiteral("&Timeline"), View::Timeline, QStringLiteral("Ctrl+1"));
    viewAct(QStringLiteral("&Pipeline"), View::Pipeline, QStringLiteral("Ctrl+2"));
    viewAct(QStringLiteral("&What-if editor"), View::WhatIf, QStringLiteral("Ctrl+3"));
    view->addSeparator();
    QAction* cpuTracks = view->addAction(QStringLiteral("&CPU annotation tracks"), this,
                                         [this](bool on) { timeline_->setCpuLanesShown(on); });
    cpuTracks->setCheckable(true);
    cpuTracks->setChecked(true);
    cpuTracks->setObjectName(QStringLiteral("cpu-tracks"));
    view->addAction(baselineTracks_);
    // The timeline's own menu can change it too: keep the check mark honest.
    connect(view, &QMenu::aboutToShow, cpuTracks, [this, cpuTracks] { cpuTracks->setChecked(timeline_->cpuLanesShown()); });
    view->addSeparator();
    // The timeline alone, as a full-screen trace viewer shows it; again to bring the panels back.
    QAction* timelineOnly = view->addAction(QStringLiteral("Timeline &only"), this, [this](bool on) { setTimelineOnly(on); });
    timelineOnly->setCheckable(true);
    timelineOnly->setShortcut(QKeySequence(Qt::Key_F11));
    timelineOnly->setObjectName(QStringLiteral("timeline-only"));
    timelineOnly_ = timelineOnly;
    QAction* reset = view->addAction(QStringLiteral("&Reset layout"), this, &MainWindow::resetLayout);
    reset->setObjectName(QStringLiteral("reset-layout"));
    buildAppearanceMenu(view->addMenu(QStringLiteral("&Appearance")));
    view->addSeparator();
    for (QDockWidget* d : findChildren<QDockWidget*>())
        view->addAction(d->toggleViewAction());
}

void MainWindow::showShortcuts()
{
    QMessageBox box(this);
    box.setWindowTitle(QStringLiteral("Keyboard shortcuts"));
    // The wheel's rows as the timeline's wheel works now (its track menu switches it).
    box.setText(QStringLiteral("<table>") + TimelineView::wheelText(timeline_->wheelMode()) + QStringLiteral(
        "<tr><td><b>Drag</b></td><td>pan</td></tr>"
        "<tr><td><b>Shift+drag</b></td><td>select a time range (area statistics)</td></tr>"
        "<tr><td><b>W / S</b></td><td>zoom in / out</td></tr>"
        "<tr><td><b>A / D</b>, arrows</td><td>pan left / right</td></tr>"
        "<tr><td><b>F</b>, double-click</td><td>fit the selection</td></tr>"
        "<tr><td><b>0</b>, Home</td><td>fit everything</td></tr>"
        "<tr><td><b>. / ,</b></td><td>next / previous event on the track</td></tr>"
        "<tr><td><b>Ctrl+F</b></td><td>search kernels; Enter for the next hit, Shift+Enter for the previous</td></tr>"
        "<tr><td><b>Ctrl+1/2/3</b></td><td>timeline / pipeline / what-if</td></tr>"
        "<tr><td><b>F11</b></td><td>the timeline alone (again: the panels back)</td></tr>"
        "<tr><td><b>Ctrl+Z / Ctrl+Shift+Z</b></td><td>undo / redo a what-if change, from a number field too</td></tr>"
        "<tr><td><b>F3 / Shift+F3</b></td><td>next / previous search hit, from the search box too</td></tr>"
        "<tr><td><b>Ctrl+Shift+M / N</b></td><td>a labelled marker at the cursor / a note on the selected range</td></tr>"
        "<tr><td><b>Ctrl+Shift+L</b></td><td>copy a link that opens this range (pipescope-gui JOB --at A..B)</td></tr>"
        "<tr><td><b>?</b></td><td>this list</td></tr></table>"));
    box.exec();
}

QList<QPair<QString, QString>> MainWindow::examples()
{
    QList<QPair<QString, QString>> out;
    QStringList roots;
#ifdef PIPESCOPE_SOURCE_RESOURCES
    roots << QStringLiteral(PIPESCOPE_SOURCE_RESOURCES);
#endif
    roots << QCoreApplication::applicationDirPath() + QStringLiteral("/../share/pipescope");
    for (const QString& root : roots) {
        QDir dir(root + QStringLiteral("/examples"));
        if (!dir.exists())
            continue;
        for (const QFileInfo& fi : dir.entryInfoList(QDir::Files | QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name)) {
            if (fi.isFile() && fi.suffix() != QLatin1String("pipescope"))
                continue;
            const QString kind = fi.isDir() ? QStringLiteral("folder of rank files") : QStringLiteral("store");
            out.push_back({fi.fileName() + QStringLiteral("  (") + kind + QLatin1Char(')'), fi.absoluteFilePath()});
        }
        if (!out.isEmpty())
            break;
    }
    return out;
}

void MainWindow::refreshRecentMenu()
{
    if (!recentMenu_)
        return;
    recentMenu_->clear();
    for (const RecentJob& job : recentJobs())
        recentMenu_->addAction(job.label(), this, [this, job] { open(job.inputs, job.options); });
    recentMenu_->setEnabled(!recentMenu_->isEmpty());
}

void MainWindow::open(const QStringList& inputs, const OpenOptions& given)
{
    OpenOptions options = given;
    if (options.commRulesFile.isEmpty())
        options.commRulesFile = commRulesFile_; // chosen in File > Communication rules
    else
        commRulesFile_ = options.commRulesFile;
    lastError_.clear();
    expandAfterLoad_ = -1; // another job: no stage of the last one to expand
    status_->setText(QStringLiteral("Opening %1 ...").arg(inputs.join(QStringLiteral(", "))));
    session_->open(inputs, options);
}

void MainWindow::openRemote()
{
    const QString address = OpenRemoteDialog::ask(this);
    if (!address.isEmpty())
        open({address});
}

// A remote job's event: the server says more of it (the whole name, its NCCL
// operation, the call that launched it) in one details request, off the GUI
// thread; the Details panel adds it if the event is still the one shown.
void MainWindow::askServerDetails(int lane, qint64 event)
{
    if (!shown_.job || !shown_.job->remote)
        return;
    const std::shared_ptr<RemoteLink> link = shown_.job->remote;
    const RemoteLink::ServerEvent ref = link->serverEvent(lane, event);
    if (ref.lane < 0)
        return;
    const QString summary = timeline_->toolTipFor(TimelineEventRef{lane, event});
    QPointer<MainWindow> self(this);
    const auto job = shown_.job;
    QThreadPool::globalInstance()->start([self, link, ref, lane, event, summary, job] {
        QString more;
        try {
            more = serverDetailsHtml(link->result(remote::RequestType::Details, {{"lane", ref.lane}, {"event", ref.event}}));
        } catch (const std::exception& e) {
            more = QStringLiteral("<br>The server could not say more: %1").arg(QString::fromStdString(e.what()).toHtmlEscaped());
        }
        QMetaObject::invokeMethod(self, [self, lane, event, summary, more, job] {
            if (self && self->shown_.job == job && self->timeline_->selectedEvent().lane == lane && self->timeline_->selectedEvent().event == event)
                self->details_->showEvent(lane, event, summary + more);
        }, Qt::QueuedConnection);
    });
}

// A remote job's timeline follows the view: after a zoom, a pan or a scroll,
// the tiles of the rows and range on screen are asked for again
// (remote/RemoteTiles.h) and the view is given the refined model.
void MainWindow::followViewWithTiles()
{
    delete tiles_;
    tiles_ = nullptr;
    if (!shown_.job || !shown_.job->remote || !shown_.job->timeline)
        return;
    tiles_ = new RemoteTiles(shown_.job, this);
    auto ask = [this] {
        const auto model = timeline_->model();
        if (!tiles_ || !model)
            return;
        std::vector<int> lanes;
        int width = 0;
        for (int l = 0; l < static_cast<int>(model->lanes.size()); ++l)
            if (const QRect r = timeline_->laneRect(l); !r.isEmpty()) {
                lanes.push_back(l);
                width = r.width();
            }
        const auto range = timeline_->visibleRange();
        tiles_->viewChanged(range.first, range.second, width, std::move(lanes));
    };
    connect(timeline_, &TimelineView::visibleRangeChanged, tiles_, ask);
    connect(timeline_->verticalScrollBar(), &QScrollBar::valueChanged, tiles_, ask);
    connect(tiles_, &RemoteTiles::refined, this, [this](std::shared_ptr<const timeline::TimelineModel> model) {
        // With the baseline's or a query's tracks beside the job's, that picture stays.
        if (!shown_.job || !timeline_->model() || timeline_->model()->lanes.size() != model->lanes.size())
            return;
        timeline_->refineModel(model);
        // Details reads the new model's events; the selected one (if it is still there) is shown again.
        details_->setJob(shown_.job->trace, model);
        if (const TimelineEventRef sel = timeline_->selectedEvent(); sel.valid()) {
            details_->showEvent(sel.lane, sel.event, timeline_->toolTipFor(sel));
            askServerDetails(sel.lane, sel.event);
        }
        if (!search_->text().isEmpty())
            timeline_->setSearch(search_->text(), regex_->isChecked());
    });
}

QString MainWindow::linkText() const { return link_->isVisible() || (shown_.job && shown_.job->remote) ? link_->text() : QString(); }

void MainWindow::refreshLink()
{
    const auto& j = shown_.job;
    if (!j || !j->remote) {
        link_->clear();
        link_->setVisible(false);
        linkTimer_->stop();
        return;
    }
    link_->setVisible(true);
    if (!j->remote->alive()) {
        linkTimer_->stop();
        link_->setText(QStringLiteral("ssh %1: link closed").arg(j->remote->address().host));
        showError(QStringLiteral("%1; what is on screen stays, File > Open recent connects again").arg(j->remote->failure()));
        return;
    }
    link_->setText(j->remote->describe());
    if (!linkTimer_->isActive())
        linkTimer_->start();
}

bool MainWindow::loadReplicas(int stage)
{
    if (!shown_.job || !shown_.job->partial() || session_->busy())
        return false;
    const auto it = shown_.job->part.stageRanks.find(stage);
    if (it == shown_.job->part.stageRanks.end())
        return false;
    std::set<int> ranks(shown_.job->part.loadedRanks.begin(), shown_.job->part.loadedRanks.end());
    const size_t before = ranks.size();
    ranks.insert(it->second.begin(), it->second.end());
    if (ranks.size() == before)
        return false;
    OpenOptions options = shown_.job->options;
    options.ranks.assign(ranks.begin(), ranks.end());
    expandAfterLoad_ = stage;
    lastError_.clear();
    status_->setText(QStringLiteral("Loading the %1 replicas of stage %2 from their shards ...").arg(it->second.size()).arg(stage));
    session_->open(shown_.job->inputs, options);
    return true;
}

void MainWindow::onLoaded(std::shared_ptr<const Job> job)
{
    rememberRecentJob(job->inputs, job->options);
    refreshRecentMenu();
    const QString notice = job->notice;
    showJob(std::move(job));
    if (!notice.isEmpty())
        status_->setText(notice);
}

void MainWindow::showOnTimeline(int rank, qint64 start, qint64 end, bool bubble)
{
    tabs_->setCurrentWidget(timeline_);
    const qint64 pad = std::max<qint64>((end - start) / 2, 1000);
    timeline_->setVisibleRange(start - pad, end + pad);
    const auto model = timeline_->model();
    if (!model)
        return;
    const auto kind = bubble ? timeline::LaneKind::Bubbles : timeline::LaneKind::Steps;
    for (size_t i = 0; i < model->lanes.size(); ++i)
        if (model->lanes[i].kind == kind && model->lanes[i].rank == rank && !model->lanes[i].baseline) {
            const int64_t e = model->hitTest(int(i), start + (end - start) / 2);
            if (e >= 0)
                timeline_->selectEvent({int(i), e});
            return;
        }
}

QString MainWindow::defaultFileName(const QString& what) const
{
    if (!shown_.job)
        return what;
    // "job.pipescope" -> "job-report.html"; a folder of rank files by its name.
    QString base = QFileInfo(shown_.job->inputs.value(0)).fileName();
    for (const char* ext : {".pipescope", ".json.gz", ".json", ".sqlite"})
        if (base.endsWith(QLatin1String(ext)))
            base.chop(int(qstrlen(ext)));
    base.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9._-]+")), QStringLiteral("_"));
    if (base.isEmpty() || base.startsWith(QLatin1Char('.')))
        return what;
    return base + QLatin1Char('-') + what;
}

void MainWindow::compareWith(const QStringList& baselineInputs, const OpenOptions& options)
{
    OpenOptions o = options;
    if (shown_.job) {
        // The baseline is calibrated as the job is (the same layer count and model file).
        o.layers = shown_.job->options.layers;
        o.modelFile = shown_.job->options.modelFile;
    }
    if (o.commRulesFile.isEmpty())
        o.commRulesFile = commRulesFile_;
    o.firstFrameAbove = -1; // a comparison needs the whole baseline
    status_->setText(QStringLiteral("Opening the baseline %1").arg(baselineInputs.join(QStringLiteral(", "))));
    baselineSession_->open(baselineInputs, o);
}

void MainWindow::setBaseline(std::shared_ptr<const Job> baseline)
{
    baseline_ = std::move(baseline);
    stopComparing_->setEnabled(baseline_ != nullptr);
    updateComparison();
    if (baseline_) {
        compareDock_->show();
        compareDock_->raise();
        status_->setText(QStringLiteral("Comparing with %1").arg(baseline_->title));
    }
}

bool MainWindow::setSavedPrediction(const QString& path)
{
    std::shared_ptr<const compare::SavedPrediction> saved;
    try {
        saved = std::make_shared<const compare::SavedPrediction>(compare::readSavedPrediction(path.toStdString()));
    } catch (const std::exception& e) {
        showError(QString::fromStdString(e.what()));
        return false;
    }
    // It is checked against one job: the one shown, or the one being opened.
    if (!shown_.job || session_->busy()) {
        pendingPrediction_ = std::move(saved);
        return true;
    }
    shown_.savedPrediction = std::move(saved);
    updateComparison();
    return true;
}

bool MainWindow::saveCurrentPrediction(const QString& path)
{
    const PredictionPtr p = editor_->currentPredictionShared();
    if (!shown_.job || !shown_.job->analysis || !shown_.job->trace || !p) {
        showError(QStringLiteral("There is no prediction to save: open a job whose pipeline the what-if engine calibrates"));
        return false;
    }
    try {
        compare::writeSavedPrediction(path.toStdString(),
                                      compare::savePrediction(shown_.job->title.toStdString(),
                                                              compare::jobIdentity(*shown_.job->trace, *shown_.job->analysis), *p));
    } catch (const std::exception& e) {
        showError(QString::fromStdString(e.what()));
        return false;
    }
    status_->setText(QStringLiteral("Saved the prediction (%1) to %2; open the next run and compare it with this one")
                         .arg(QString::fromStdString(formatDuration(p->iterationNs())), path));
    return true;
}

void MainWindow::showBaselineTracks()
{
    if (!shown_.job || !shown_.job->timeline)
        return;
    std::shared_ptr<const timeline::TimelineModel> model = shown_.job->timeline;
    if (baselineTracks_->isChecked() && baseline_ && baseline_->timeline && shown_.job->complete && shown_.job->analysis &&
        baseline_->analysis) {
        // The two compared iterations start together.
        auto startOf = [](const AnalysisResult& r) -> std::optional<TimeNs> {
            for (const Iteration& it : r.iterations)
                if (it.index == r.selectedIteration)
                    return it.start;
            return std::nullopt;
        };
        const auto a = startOf(*baseline_->analysis), b = startOf(*shown_.job->analysis);
        const TimeNs shift = a && b ? *b - *a : shown_.job->timeline->start - baseline_->timeline->start;
        model = std::make_shared<const timeline::TimelineModel>(
            timeline::withBaselineTracks(*shown_.job->timeline, *baseline_->timeline, shift, std::string()));
    }
    model = query_->withQueryTracks(model);
    if (timeline_->model() == model)
        return;
    const auto range = timeline_->visibleRange();
    const qint64 origin = timeline_->timeOrigin();
    const QString originName = timeline_->timeOriginName();
    timeline_->setModel(model);
    details_->setJob(shown_.job->trace, model);
    timeline_->setTimeOrigin(origin, originName); // the view stays as the user set it
    if (range.second > range.first)
        timeline_->setVisibleRange(range.first, range.second);
}

void MainWindow::updateComparison()
{
    baselineTracks_->setEnabled(baseline_ != nullptr);
    showBaselineTracks();
    if (!baseline_ || !shown_.job || !shown_.job->complete || !shown_.job->analysis || !baseline_->analysis) {
        compare_->setDiff(nullptr);
        pipeline_->setBaseline(nullptr, {});
        return;
    }
    // A few milliseconds: both jobs are analysed and calibrated already.
    const compare::RunInput a{baseline_->title.toStdString(), baseline_->trace.get(), baseline_->analysis.get(),
                              baseline_->costModel ? &*baseline_->costModel : nullptr};
    const compare::RunInput b{shown_.job->title.toStdString(), shown_.job->trace.get(), shown_.job->analysis.get(),
                              shown_.job->costModel ? &*shown_.job->costModel : nullptr};
    compare::DiffOptions o;
    o.saved = shown_.savedPrediction.get();
    try {
        compare_->setDiff(std::make_shared<const compare::DiffResult>(compare::diffRuns(a, b, o)));
        pipeline_->setBaseline(baseline_->analysis, baseline_->title);
    } catch (const std::exception& e) {
        if (shown_.savedPrediction) {
            // The saved prediction is another job's: compare without it.
            shown_.savedPrediction.reset();
            showError(QStringLiteral("The saved prediction is not checked: %1").arg(QString::fromStdString(e.what())));
            updateComparison();
            return;
        }
        compare_->setDiff(nullptr);
        pipeline_->setBaseline(nullptr, {});
        showError(QStringLiteral("The comparison failed: %1").arg(QString::fromStdString(e.what())));
    }
}

void MainWindow::showJob(std::shared_ptr<const Job> job)
{
    // The whole trace after its first frame, or more ranks of a job read in
    // part: the view stays where the user is looking.
    const bool detailOfShown = job->complete && shown_.job && shown_.job->storePath == job->storePath &&
                               (!shown_.job->complete || (shown_.job->partial() && job->options.ranks != shown_.job->options.ranks));
    const auto range = timeline_->visibleRange();
    // The first time the whole job is on screen, the view kept beside it comes back.
    const bool firstComplete = job->complete && (!detailOfShown || !shown_.job->complete);
    if (detailOfShown) {
        shown_.job = std::move(job);
    } else {
        keepView(); // the last job's view stays beside it
        // Another job: everything held of the last one goes at once.
        shown_ = ShownJob{std::move(job), nullptr, QString()};
        forgetShownJob();
    }
    if (pendingPrediction_)
        shown_.savedPrediction = std::exchange(pendingPrediction_, nullptr);
    const Job& j = *shown_.job;
    setWindowTitle(j.title + (j.simulated ? QStringLiteral(" [SIMULATED]") : QString()) + QStringLiteral(" - pipescope"));
    showJobOnTimeline(j);
    for (AnalysisPanel* p : panels_)
        p->setResult(j.analysis, j.trace);
    query_->setTimeline(j.timeline);
    query_->setStorePath(j.storePath); // another store: the last job's result goes
    if (auto* summary = findChild<SummaryPanel*>()) {
        summary->setLevers(j.levers);
        summary->setJobPart(std::shared_ptr<const JobPart>(shown_.job, &shown_.job->part));
    }
    pipeline_->setMeasured(j.analysis); // and no prediction until the editor has this job's
    updateComparison();
    if (!restoredLayout_ && !jobsShown_++)
        QTimer::singleShot(0, this, &MainWindow::sizeDocks); // after the panels' first layout
    editor_->setSourcePath(j.storePath);
    if (j.costModel)
        editor_->setJob(j.trace, j.analysis, *j.costModel);
    else
        editor_->setUnavailable(j.whatIfError);

    iterations_->clear();
    iterations_->addItem(QStringLiteral("whole trace"));
    for (const Iteration& it : j.analysis->iterations)
        iterations_->addItem(QStringLiteral("%1%2").arg(it.index).arg(
            it.label.empty() ? QString() : QStringLiteral("  ") + QString::fromStdString(it.label)));
    refreshLink();
    followViewWithTiles();
    if (detailOfShown) {
        timeline_->setVisibleRange(range.first, range.second);
    } else if (j.analysis->selectedIteration >= 0) {
        iterations_->setCurrentIndex(j.analysis->selectedIteration + 1);
        selectIteration(j.analysis->selectedIteration + 1);
    } else {
        timeline_->fitAll();
    }
    if (firstComplete) {
        restoreView(j);
        applyStartRange();
    }
    showJobStatus(j);
}

// A remote job keeps no view: there is no folder of it here to keep one in.
QString MainWindow::viewFile() const { return shown_.job && !shown_.job->remote ? savedViewPath(shown_.job->inputs) : QString(); }

SavedView MainWindow::currentView() const
{
    SavedView v;
    if (!shown_.job || !shown_.job->timeline || !timeline_->model())
        return v;
    const qint64 base = shown_.job->timeline->start; // times count from the job start
    const auto range = timeline_->visibleRange();
    v.fromNs = range.first - base;
    v.toNs = range.second - base;
    v.originNs = timeline_->timeOrigin() - base;
    v.originName = timeline_->timeOriginName();
    for (int lane : timeline_->pinnedTracks())
        v.pinned << timeline_->laneKey(lane);
    const auto& markers = timeline_->markers();
    for (size_t i = 0; i < markers.size(); ++i)
        v.markers << SavedView::Marker{markers[i] - base, timeline_->markerLabels()[i]};
    for (const TimelineView::TimeNote& n : timeline_->notes())
        v.notes << SavedView::Note{n.fromNs - base, n.toNs - base, n.text};
    v.iteration = std::max(-1, iterations_->currentIndex() - 1);
    if (shown_.job->trace)
        v.job = jobStamp(*shown_.job->trace);
    v.whatIf = editor_->keptScenario();
    return v;
}

bool MainWindow::saveView()
{
    if (!shown_.job || !shown_.job->complete || !timeline_->model()) {
        status_->setText(QStringLiteral("No job is shown: there is no view to save"));
        return false;
    }
    QString error;
    if (!writeSavedView(viewFile(), currentView(), &error)) {
        status_->setText(error);
        return false;
    }
    status_->setText(QStringLiteral("Saved the view to %1; it comes back when the job is opened again").arg(viewFile()));
    return true;
}

bool MainWindow::keepView()
{
    if (!keepsViews_ || !shown_.job || !shown_.job->complete || !timeline_->model() || viewFile().isEmpty())
        return false;
    QString error;
    if (writeSavedView(viewFile(), currentView(), &error))
        return true;
    viewNotice_ = error; // said with the next job's status line
    status_->setText(error);
    return false;
}

void MainWindow::restoreView(const Job& j)
{
    if (!keepsViews_ || !j.timeline || !timeline_->model())
        return;
    QString error;
    const std::optional<SavedView> v = readSavedView(savedViewPath(j.inputs), &error);
    if (!error.isEmpty())
        viewNotice_ = error;
    if (!v)
        return;
    if (const QString other = j.trace ? otherJobNotice(*v, *j.trace, savedViewPath(j.inputs)) : QString(); !other.isEmpty()) {
        viewNotice_ = other; // never applied
        return;
    }
    const qint64 base = j.timeline->start;
    const int iterations = static_cast<int>(j.analysis->iterations.size());
    if (v->iteration < iterations) {
        iterations_->setCurrentIndex(v->iteration + 1);
        selectIteration(v->iteration + 1);
    }
    if (v->originNs)
        timeline_->setTimeOrigin(base + *v->originNs,
                                 v->originName.isEmpty() ? QStringLiteral("the saved time origin") : v->originName);
    // Exactly the tracks kept pinned (a track the job no longer has is left out).
    for (int lane : timeline_->pinnedTracks())
        timeline_->setLanePinned(lane, false);
    for (const QString& key : v->pinned)
        timeline_->setLanePinned(timeline_->laneWithKey(key), true);
    timeline_->clearMarkers();
    for (const SavedView::Marker& m : v->markers)
        timeline_->addMarker(base + m.ns, m.label);
    timeline_->clearNotes();
    for (const SavedView::Note& n : v->notes)
        timeline_->addNote(base + n.fromNs, base + n.toNs, n.text);
    timeline_->setVisibleRange(base + v->fromNs, base + v->toNs);
    if (QString why; v->whatIf && !editor_->restoreScenario(*v->whatIf, &why))
        viewNotice_ = QStringLiteral("The saved what-if scenario does not fit this job (%1) and was ignored").arg(why);
}

void MainWindow::applyStartRange()
{
    if (!startRange_ || !shown_.job || !shown_.job->timeline)
        return;
    const auto range = *std::exchange(startRange_, std::nullopt);
    const Job& j = *shown_.job;
    // As the link counts: from the start of the iteration it names, else from the job start.
    const int it = j.options.iteration.value_or(-1);
    const bool haveIt = it >= 0 && it < static_cast<int>(j.analysis->iterations.size());
    iterations_->setCurrentIndex(haveIt ? it + 1 : 0);
    selectIteration(haveIt ? it + 1 : 0);
    const qint64 origin = haveIt ? j.analysis->iterations[static_cast<size_t>(it)].start : j.timeline->start;
    timeline_->setVisibleRange(origin + range.first, origin + range.second);
}

QString MainWindow::viewLink() const
{
    if (!shown_.job || !shown_.job->timeline || !timeline_->model())
        return {};
    const auto& its = shown_.job->analysis->iterations;
    int it = iterations_->currentIndex() - 1;
    if (it >= static_cast<int>(its.size()))
        it = -1;
    const qint64 origin = it >= 0 ? its[static_cast<size_t>(it)].start : shown_.job->timeline->start;
    const auto range = timeline_->visibleRange();
    return pipescope::gui::viewLink(shown_.job->inputs, range.first - origin, range.second - origin, it);
}

void MainWindow::copyLink()
{
    const QString link = viewLink();
    if (link.isEmpty()) {
        status_->setText(QStringLiteral("No job is shown: there is no link to copy"));
        return;
    }
    QApplication::clipboard()->setText(link);
    status_->setText(QStringLiteral("Copied: %1").arg(link));
}

void MainWindow::addMarkerAtCursor(const QString& label)
{
    if (!timeline_->model())
        return;
    const auto range = timeline_->visibleRange();
    timeline_->addMarker(timeline_->cursorTime().value_or(range.first + (range.second - range.first) / 2), label);
}

bool MainWindow::addNoteOnSelection(const QString& text)
{
    const auto area = timeline_->selectedArea();
    if (!area)
        return false;
    timeline_->addNote(area->first, area->second, text);
    return true;
}

void MainWindow::forgetShownJob()
{
    // The last job's search does not carry over.
    search_->clear();
    searchHits_->clear();
    // Nor its prediction (the pipeline view waits for this job's), nor where its editor was scrolled to.
    pipeline_->setPrediction(nullptr);
    whatIfTab_->horizontalScrollBar()->setValue(0);
    whatIfTab_->verticalScrollBar()->setValue(0);
}

// The timeline and the Details panel on a job: its tracks, folded stages and launch links.
void MainWindow::showJobOnTimeline(const Job& j)
{
    timeline_->setModel(j.timeline);
    {
        // A job read in part: its stages fold with what the index says of the replicas not loaded.
        std::map<int, TimelineView::ReplicaSpread> spread;
        if (j.partial() && j.part.overview)
            for (const StageReplicas& st : j.part.overview->stages) {
                TimelineView::ReplicaSpread sp;
                const auto members = j.part.stageRanks.find(st.stage);
                sp.replicas = members == j.part.stageRanks.end() ? st.replicas : static_cast<int>(members->second.size());
                sp.busyMinNs = st.busyMin;
                sp.busyMedianNs = st.busyMedian;
                sp.busyMaxNs = st.busyMax;
                sp.busiestRank = st.busiestRank;
                sp.idlestRank = st.idlestRank;
                sp.iteration = QString::fromStdString(j.part.overview->iteration);
                spread[st.stage] = sp;
            }
        timeline_->setReplicaSpread(std::move(spread));
        if (expandAfterLoad_ >= 0 && j.complete) {
            timeline_->setStageExpanded(expandAfterLoad_, true);
            expandAfterLoad_ = -1;
        }
    }
    details_->setJob(j.trace, j.timeline);
    // The CPU call that launched a kernel is read from the store on a
    // click (the app does not keep every runtime call in memory).
    struct Lookup {
        std::string path;
        std::shared_ptr<const Trace> trace;
        std::shared_ptr<Store> store;
        bool failed = false;
    };
    auto lookup = std::make_shared<Lookup>(Lookup{j.storePath.toStdString(), j.trace, nullptr, false});
    auto find = [lookup](int32_t activity) -> std::optional<LaunchCall> {
        if (!lookup->trace || activity < 0 || static_cast<size_t>(activity) >= lookup->trace->activities.size()
            || lookup->failed)
            return std::nullopt;
        try {
            if (!lookup->store)
                lookup->store = std::make_shared<Store>(lookup->path);
            return lookup->store->launchOf(lookup->trace->activities[static_cast<size_t>(activity)].id);
        } catch (const std::exception&) {
            lookup->failed = true; // the store went away or is damaged: no launch links, nothing else changes
            return std::nullopt;
        }
    };
    timeline_->setLaunchLookup(find);
    details_->setLaunchLookup(find);
}

// What the status bar says of the job shown; then jobShown (or firstFrameShown).
void MainWindow::showJobStatus(const Job& j)
{
    const auto& pl = j.analysis->pipeline;
    QString text = pl.found ? QStringLiteral("%1: pp %2, dp %3, %4 microbatches, %5 schedule")
                                  .arg(j.title).arg(pl.pp).arg(pl.dp).arg(pl.microbatches)
                                  .arg(QString::fromStdString(scheduleName(pl.schedule)))
                            : QStringLiteral("%1: no pipeline found (%2)").arg(j.title, QString::fromStdString(pl.reason));
    if (!j.complete) {
        status_->setText(text + QStringLiteral("; showing a window of %1 activities, loading the whole trace ...")
                                    .arg(j.trace->activities.size()));
        Q_EMIT firstFrameShown();
        return;
    }
    if (j.partial()) {
        // Said plainly: the analysis and the what-if are of the ranks read.
        text = QStringLiteral("%1: %2 of %3 ranks loaded (%4)")
                   .arg(j.title)
                   .arg(j.part.loadedRanks.size())
                   .arg(j.part.jobRanks)
                   .arg(QStringLiteral("ranks ") + QString::fromStdString(rankListShort(j.part.loadedRanks)));
        if (pl.found)
            text += QStringLiteral("; pp %1, %2 microbatches, %3 schedule").arg(pl.pp).arg(pl.microbatches)
                        .arg(QString::fromStdString(scheduleName(pl.schedule)));
        if (j.part.overview)
            text += QStringLiteral("; the other replicas are summarised from the job index: click a folded stage to load them");
    }
    if (!viewNotice_.isEmpty()) // one line: the job, then what became of its view file
        text += QStringLiteral("; ") + std::exchange(viewNotice_, QString());
    shown_.status = text;
    status_->setText(text);
    Q_EMIT jobShown();
}

void MainWindow::selectIteration(int index)
{
    if (!shown_.job)
        return;
    const auto& its = shown_.job->analysis->iterations;
    if (index <= 0 || index > static_cast<int>(its.size())) {
        timeline_->setTimeOrigin(shown_.job->timeline->start, QStringLiteral("the job start"));
        timeline_->fitAll();
        pipeline_->setIteration(-1); // the whole trace: the diagram keeps the analysed iteration
        return;
    }
    // The app analyses every iteration (AnalyzeOptions::allIterations), so the diagram can show any.
    pipeline_->setIteration(index - 1);
    const Iteration& it = its[static_cast<size_t>(index - 1)];
    // Times count from the shown iteration's start, as Nsight and Perfetto users set their origin.
    timeline_->setTimeOrigin(it.start, QStringLiteral("the start of %1").arg(QString::fromStdString(it.label.empty() ? "iteration " + std::to_string(it.index) : it.label)));
    const qint64 pad = (it.end - it.start) / 50;
    timeline_->setVisibleRange(it.start - pad, it.end + pad);
}

void MainWindow::setView(View view)
{
    switch (view) {
    case View::Timeline: tabs_->setCurrentWidget(timeline_); break;
    case View::Pipeline: tabs_->setCurrentWidget(pipelineTab_); break;
    case View::WhatIf: tabs_->setCurrentWidget(whatIfTab_); break;
    }
}

void MainWindow::showError(const QString& message)
{
    lastError_ = message;
    Q_EMIT errorShown(message);
    // Not modal to the rest of the app: the user can dismiss it or carry on.
    auto* box = new QMessageBox(QMessageBox::Warning, QStringLiteral("pipescope"), message, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

bool MainWindow::startExport()
{
    if (!shown_.job)
        return false;
    if (exporter_->busy()) {
        showError(QStringLiteral("An export is still being written; wait for it to finish or press Cancel."));
        return false;
    }
    return true;
}

report::ReportOptions MainWindow::reportOptions(QString* modelFile) const
{
    report::ReportOptions o;
    if (!shown_.job)
        return o;
    o.storePath = shown_.job->storePath.toStdString();
    o.iteration = shown_.job->analysis->selectedIteration; // as the app analysed it
    const OpenOptions& opened = shown_.job->options;
    if (opened.layers > 0)
        o.calibrate.measured.layers = opened.layers;
    o.calibrate.measured.measuredBoundaries = opened.measuredBoundaries;
    QString model = opened.modelFile;
    // A layer count or model file asked for in the editor's strip replaced the job's.
    if (const auto re = editor_->recalibration()) {
        o.calibrate.measured = {};
        o.calibrate.measured.layers = re->layers;
        model = re->modelFile;
    }
    if (modelFile)
        *modelFile = model;
    const auto scenario = editor_->currentScenario();
    const PredictionPtr current = editor_->currentPredictionShared();
    const PredictionPtr measured = editor_->measuredPredictionShared();
    if (current && current->gpuMemoryBytes)
        o.calibrate.gpuMemoryBytes = current->gpuMemoryBytes;
    o.calibrate.replicaPace = shown_.job->part.replicaPace; // a job read in part: its stages' pace across all replicas
    o.jobPart = &shown_.job->part; // the job outlives the report: the exporter holds it while it writes
    if (!scenario || !measured || !shown_.job->costModel)
        return o;
    // Only what differs from the measured run: an unchanged editor asks nothing besides it.
    const whatif::Scenario base = whatif::measuredScenario(editor_->costModel());
    whatif::ScenarioChanges& ch = o.whatIfChanges;
    if (scenario->schedule != base.schedule)
        ch.schedule = std::string(toString(scenario->schedule));
    if (scenario->pp != base.pp)
        ch.pp = scenario->pp;
    if (scenario->v != base.v)
        ch.v = scenario->v;
    if (scenario->microbatches != base.microbatches)
        ch.microbatches = scenario->microbatches;
    if (current && current->partition.boundaries() != measured->partition.boundaries())
        ch.boundaries = current->partition.boundaries();
    return o;
}

bool MainWindow::saveReport(const QString& path)
{
    if (!startExport())
        return false;
    QString modelFile;
    report::ReportOptions o = reportOptions(&modelFile);
    status_->setText(QStringLiteral("Saving the report to %1 ...").arg(path));
    showProgress(QStringLiteral("writing the report"), -1);
    exporter_->saveReport(shown_.job, std::move(o), modelFile, path);
    return true;
}

bool MainWindow::saveChromeTrace(const QString& path, TraceRange range)
{
    if (shown_.job && shown_.job->remote) {
        showError(QStringLiteral("%1: the Chrome trace holds every kernel, and a remote job copies none; run `pipescope export` "
                                 "where the job lies, or save the HTML report")
                      .arg(path));
        return false;
    }
    if (!startExport())
        return false;
    report::ChromeTraceOptions o;
    report::addAnalysis(o, *shown_.job->analysis, shown_.job->trace.get());
    if (range == TraceRange::Visible) {
        const auto [from, to] = timeline_->visibleRange();
        o.from = from;
        o.to = to;
    }
    showProgress(QStringLiteral("writing the Chrome trace"), -1);
    exporter_->saveChromeTrace(shown_.job, std::move(o), path);
    return true;
}

void MainWindow::exportReport()
{
    if (!shown_.job)
        return;
    const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Save HTML report"), defaultFileName(QStringLiteral("report.html")),
                                                      QStringLiteral("HTML (*.html)"));
    if (!path.isEmpty())
        saveReport(path);
}

void MainWindow::exportTimelineImage()
{
    const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Export timeline"), defaultFileName(QStringLiteral("timeline.png")),
                                                      QStringLiteral("PNG image (*.png);;SVG image (*.svg)"));
    if (path.isEmpty())
        return;
    if (path.endsWith(QLatin1String(".svg"), Qt::CaseInsensitive)) {
#ifdef PIPESCOPE_HAVE_SVG
        QSvgGenerator svg;
        svg.setFileName(path);
        svg.setSize(timeline_->size());
        svg.setViewBox(timeline_->rect());
        svg.setTitle(windowTitle());
        QPainter painter(&svg);
        timeline_->render(&painter);
        painter.end();
        status_->setText(QStringLiteral("Timeline saved to %1").arg(path));
#else
        showError(QStringLiteral("%1: this build has no SVG support; save the timeline as PNG").arg(path));
#endif
        return;
    }
    if (!timeline_->grab().save(path, "PNG"))
        showError(QStringLiteral("%1: cannot write the image; choose a writable folder").arg(path));
    else
        status_->setText(QStringLiteral("Timeline saved to %1").arg(path));
}

void MainWindow::exportChromeTrace(TraceRange range)
{
    if (!shown_.job)
        return;
    const QString title = range == TraceRange::Visible ? QStringLiteral("Export Chrome trace JSON of the visible range")
                          : shown_.job->partial()
                              ? QStringLiteral("Export Chrome trace JSON of the %1 ranks read").arg(shown_.job->part.loadedRanks.size())
                              : QStringLiteral("Export Chrome trace JSON of the whole store");
    const QString path = QFileDialog::getSaveFileName(this, title, defaultFileName(QStringLiteral("trace.json")), QStringLiteral("Chrome trace JSON (*.json)"));
    if (!path.isEmpty())
        saveChromeTrace(path, range);
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event)
{
    if (event->type() == QEvent::ShortcutOverride) {
        const auto* key = static_cast<QKeyEvent*>(event);
        auto* widget = qobject_cast<QWidget*>(watched);
        const bool numberField = widget && (qobject_cast<QAbstractSpinBox*>(widget) ||
                                            qobject_cast<QAbstractSpinBox*>(widget->parentWidget()));
        if (numberField && widget->window() == this &&
            (key->matches(QKeySequence::Undo) || key->matches(QKeySequence::Redo))) {
            event->ignore(); // not overridden: the window's Undo / Redo take the key
            return true;
        }
    }
    // QLineEdit sends returnPressed for Shift+Enter too: take it here for the previous hit.
    if (watched == search_ && event->type() == QEvent::KeyPress) {
        const auto* key = static_cast<QKeyEvent*>(event);
        if ((key->key() == Qt::Key_Return || key->key() == Qt::Key_Enter) && (key->modifiers() & Qt::ShiftModifier)) {
            timeline_->previousSearchHit();
            return true;
        }
    }
    return QMainWindow::eventFilter(watched, event);
}

void MainWindow::showEvent(QShowEvent* event)
{
    QMainWindow::showEvent(event);
    // Docks get their first sizes once the window has its own; a saved layout wins.
    // The saved layout is restored once the window has its size: restored
    // before, the docks' saved pixel sizes are fitted to a window that is not
    // laid out yet, and come back larger on every start.
    if (!docksSized_ && !savedState_.isEmpty())
        restoredLayout_ = restoreState(std::exchange(savedState_, QByteArray()));
    if (!docksSized_ && !restoredLayout_)
        sizeDocks();
    docksSized_ = true;
}

void MainWindow::setTimelineOnly(bool on)
{
    timelineOnly_->setChecked(on);
    if (on == !hiddenDocks_.isEmpty())
        return; // already so
    if (on) {
        hiddenDocks_.clear();
        for (QDockWidget* d : findChildren<QDockWidget*>())
            if (d->isVisible()) {
                hiddenDocks_.push_back(d);
                d->hide();
            }
        setView(View::Timeline);
    } else {
        for (QDockWidget* d : std::as_const(hiddenDocks_))
            d->show();
        hiddenDocks_.clear();
    }
}

// Theme (system, light, dark), text size and row density; each choice
// applies at once and is kept for the next session (views/Theme.h).
void MainWindow::buildAppearanceMenu(QMenu* menu)
{
    menu->setObjectName(QStringLiteral("appearance"));
    auto change = [this](const std::function<void(Appearance&)>& edit) {
        Appearance a = savedAppearance();
        edit(a);
        saveAppearance(a);
        applyAppearance(a);
        timeline_->setRowDensity(a.density);
    };
    auto group = [menu](const QString& objectName) {
        auto* g = new QActionGroup(menu);
        g->setObjectName(objectName);
        return g;
    };
    const Appearance now = savedAppearance();
    QActionGroup* themes = group(QStringLiteral("theme"));
    for (auto [name, t] : {std::pair{QStringLiteral("&System theme"), ThemeChoice::System},
                           std::pair{QStringLiteral("&Light"), ThemeChoice::Light},
                           std::pair{QStringLiteral("&Dark"), ThemeChoice::Dark}}) {
        QAction* a = menu->addAction(name, this, [change, t] { change([t](Appearance& x) { x.theme = t; }); });
        a->setCheckable(true);
        a->setChecked(now.theme == t);
        a->setData(QString::fromLatin1(toString(t)));
        themes->addAction(a);
    }
    menu->addSeparator();
    menu->addAction(QStringLiteral("&Larger text"), this, [change] {
        change([](Appearance& x) { x.fontPoint = std::min(32, (x.fontPoint > 0 ? x.fontPoint : QApplication::font().pointSize()) + 1); });
    });
    menu->addAction(QStringLiteral("S&maller text"), this, [change] {
        change([](Appearance& x) { x.fontPoint = std::max(6, (x.fontPoint > 0 ? x.fontPoint : QApplication::font().pointSize()) - 1); });
    });
    menu->addAction(QStringLiteral("System text si&ze"), this, [change] { change([](Appearance& x) { x.fontPoint = 0; }); });
    menu->addSeparator();
    QActionGroup* densities = group(QStringLiteral("density"));
    for (auto [name, d] : {std::pair{QStringLiteral("&Compact rows"), RowDensity::Compact},
                           std::pair{QStringLiteral("&Normal rows"), RowDensity::Normal},
                           std::pair{QStringLiteral("Comfor&table rows"), RowDensity::Comfortable}}) {
        QAction* a = menu->addAction(name, this, [change, d] { change([d](Appearance& x) { x.density = d; }); });
        a->setCheckable(true);
        a->setChecked(now.density == d);
        densities->addAction(a);
    }
}

void MainWindow::resetLayout()
{
    // Every dock back where a first start puts it, at the first start's sizes.
    setTimelineOnly(false);
    for (QDockWidget* d : findChildren<QDockWidget*>()) {
        d->setFloating(false);
        d->show();
    }
    if (!initialState_.isEmpty())
        restoreState(initialState_);
    sizeDocks();
}

void MainWindow::sizeDocks()
{
    resizeDocks({summaryDock_}, {std::max(300, width() / 5)}, Qt::Horizontal);
    // The timeline keeps about three quarters of the height.
    resizeDocks({bottomDock_}, {std::max(180, height() / 4)}, Qt::Vertical);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasUrls())
        event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event)
{
    QStringList files;
    for (const QUrl& url : event->mimeData()->urls())
        if (url.isLocalFile())
            files << url.toLocalFile();
    if (!files.isEmpty()) {
        event->acceptProposedAction();
        open(files);
    }
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    keepView();
    QSettings settings;
    settings.setValue(settingsKey("window/geometry"), saveGeometry());
    settings.setValue(settingsKey("window/state"), saveState());
    QMainWindow::closeEvent(event);
}

} // namespace pipescope::gui
