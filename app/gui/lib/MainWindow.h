#pragma once
// The main window: the timeline, the pipeline view and the what-if editor
// as tabs, the analysis panels as docks (their layout kept with QSettings),
// File > Open / Recent / Examples, drag and drop, exports. It only arranges
// views over one AppSession; all work happens in core and the session layer.
#include "session/AppSession.h"
#include "session/SavedView.h"

#include "compare/SavedPrediction.h"
#include "report/Report.h"

#include <QMainWindow>

#include <memory>

class QAction;
class QComboBox;
class QDockWidget;
class QLabel;
class QLineEdit;
class QMenu;
class QProgressBar;
class QScrollArea;
class QTabWidget;
class QToolButton;
class QCheckBox;
class QTimer;

namespace pipescope::gui {

class TimelineView;
class PipelineView;
class WhatIfEditor;
class AnalysisPanel;
class ExportWorker;
class BubblePanel;
class DetailsPanel;
class ComparePanel;
class QueryPanel;
class RemoteTiles;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum class View { Timeline, Pipeline, WhatIf };

    // restoreLayout false: the default dock layout, whatever was saved (screenshots, tests).
    explicit MainWindow(QWidget* parent = nullptr, bool restoreLayout = true);
    ~MainWindow() override;

    void open(const QStringList& inputs, const OpenOptions& options = {});
    // File > Open remote...: asks for a host and a path, opens ssh://host/path.
    void openRemote();
    // The status bar's link figures of a remote job ("" for a local one).
    QString linkText() const;
    // Shows a loaded job in every view (also used by --screenshot and tests).
    void showJob(std::shared_ptr<const Job> job);
    void setView(View view);

    // Compare mode (File > Compare with..., --compare): a baseline run (A)
    // loaded beside the job shown (B); the Compare panel holds their diff
    // and the Pipeline view draws the baseline's iteration above this one's.
    // The baseline stays while other jobs open, each compared with it.
    void compareWith(const QStringList& baselineInputs, const OpenOptions& options = {});
    void setBaseline(std::shared_ptr<const Job> baseline); // null ends compare mode
    std::shared_ptr<const Job> baseline() const { return baseline_; }
    // A prediction saved on the baseline (File > Save prediction on that job,
    // or whatif --save-prediction): the comparison checks the job against it.
    // False, with the error shown, for a file that is not one.
    bool setSavedPrediction(const QString& path);
    // File > Save prediction for the next run: the what-if editor's current
    // prediction with this job's identity. False, with the error shown, when
    // there is none or the file cannot be written.
    bool saveCurrentPrediction(const QString& path);
    ComparePanel* comparePanel() const { return compare_; }
    QueryPanel* queryPanel() const { return query_; }
    // A file name for an export, from the job's name: "job-report.html" for
    // "report.html" ("report.html" itself without a job).
    QString defaultFileName(const QString& what) const;
    // A job read in part (a sharded job too large to read whole): reads the
    // replicas of a stage that are not loaded yet, with the ranks already
    // loaded, and shows the stage expanded (a click on its folded row). The
    // job stays on screen while they load; false when there is nothing to load.
    bool loadReplicas(int stage);
    // Shows a step (or a bubble) of a rank on the timeline, zoomed to it and selected.
    void showOnTimeline(int rank, qint64 start, qint64 end, bool bubble);

    // Views kept beside the job (session/SavedView.h, docs/app.md "Saved
    // views and links"): the visible range, time origin, pinned tracks,
    // markers, notes and the iteration shown, written on close, on a job
    // switch and by File > Save view, restored when the job is shown again.
    // Off until set (the app sets it; tests and screenshots draw the same
    // picture whatever was kept). A damaged or unwritable file costs one
    // status-bar line.
    void setKeepsViews(bool on) { keepsViews_ = on; }
    bool keepsViews() const { return keepsViews_; }
    QString viewFile() const;      // where the shown job's view is kept ("" for none)
    SavedView currentView() const; // the shown job's view as it would be saved
    bool saveView();               // File > Save view: false, with the status line saying why
    // --at: the next job shown opens at this range, in ns from its start
    // (with --iteration N, from the start of iteration N), as links write it.
    void setStartRange(QPair<qint64, qint64> range) { startRange_ = range; }
    // Edit > Copy link: `pipescope-gui JOB --at A..B [--iteration N]` for the
    // range shown, counted from the start of the iteration shown (else the job's).
    QString viewLink() const;
    void copyLink();
    // Edit > Add marker...: a labelled marker at the mouse over the tracks,
    // else at the selected event, else in the middle of the range shown.
    void addMarkerAtCursor(const QString& label);
    // Edit > Add note on the selected range...: false when no area is selected.
    bool addNoteOnSelection(const QString& text);

    AppSession* session() const { return session_; }
    std::shared_ptr<const Job> job() const { return shown_.job; }
    TimelineView* timeline() const { return timeline_; }
    DetailsPanel* details() const { return details_; }
    PipelineView* pipelineView() const { return pipeline_; }
    WhatIfEditor* whatIfEditor() const { return editor_; }
    ExportWorker* exporter() const { return exporter_; }
    QLineEdit* searchField() const { return search_; }
    QComboBox* iterationBox() const { return iterations_; }

    enum class TraceRange { Visible, WholeStore };
    // File > Save HTML report and Export Chrome trace without their dialogs:
    // the export runs on a worker (progress and Cancel in the status bar);
    // the exporter's finished or failed signal follows. False when nothing
    // was started (no job, or an export still running: its reason is shown).
    bool saveReport(const QString& path);
    bool saveChromeTrace(const QString& path, TraceRange range);
    // The report's question as the what-if editor holds it now: the job's
    // layer count, model file and measured boundaries (or the editor's own
    // re-calibration) and the current scenario's changes from the measured one.
    report::ReportOptions reportOptions(QString* modelFile) const;
    // The last error shown to the user, for tests (the dialog is not modal to them).
    QString lastError() const { return lastError_; }

    // The size of a first window (no saved geometry): 1400x900, or less to fit the screen.
    static QSize firstWindowSize();
    // Bundled examples: (label, path) from the source tree or the installed share/pipescope.
    static QList<QPair<QString, QString>> examples();

Q_SIGNALS:
    void jobShown();        // a complete job is shown
    void firstFrameShown(); // the first frame of a large store is shown; jobShown follows with the whole trace
    void errorShown(const QString& message);

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void closeEvent(QCloseEvent* event) override;
    void showEvent(QShowEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;
    void sizeDocks();
    void setTimelineOnly(bool on); // View > Timeline only (F11)
    void resetLayout();            // View > Reset layout
    void buildAppearanceMenu(QMenu* menu); // View > Appearance

private:
    void buildMenus();
    void buildPipelineTab();
    void buildViewMenu(QMenu* view);
    void buildDocks();
    void buildToolBar();
    void showError(const QString& message);
    void refreshRecentMenu(); // File > Open recent, from session/RecentJobs
    void onLoaded(std::shared_ptr<const Job> job);
    void showJobOnTimeline(const Job& job);
    void showJobStatus(const Job& job);
    void selectIteration(int index);
    void exportReport();
    void exportTimelineImage();
    void exportChromeTrace(TraceRange range);
    bool startExport(); // false, with the reason shown, while another export runs
    void showProgress(const QString& phase, double fraction);
    void hideProgress();
    void showShortcuts();
    void updateComparison();
public:
    // View > Baseline tracks on the timeline (compare mode): the baseline's
    // tracks beside the job's; the action is there for menus and tests.
    QAction* baselineTracksAction() const { return baselineTracks_; }
private:
    void showBaselineTracks();

    // Everything the window holds of the job it shows, in one object: showing
    // another job replaces it whole (showJob), so nothing of one job -- a
    // saved prediction checked against it, its status line -- reaches the
    // next. The views forget their own per-job state at the same moment
    // (forgetShownJob).
    struct ShownJob {
        std::shared_ptr<const Job> job;
        // A prediction saved on the baseline, checked against this job in compare mode.
        std::shared_ptr<const compare::SavedPrediction> savedPrediction;
        QString status; // what the status bar says of the job
    };
    void restoreView(const Job& job); // the view kept beside the job, if any
    void applyStartRange();           // --at, after the kept view
    bool keepView();                  // writes the shown job's view (on close and job switch)
    void forgetShownJob(); // the views' state of the job shown so far (search, what-if scroll, pipeline prediction)

    AppSession* session_ = nullptr;
    ExportWorker* exporter_ = nullptr;
    ShownJob shown_;
    // A saved prediction given while no job is shown or one is being opened
    // (--prediction, File > Check a saved prediction): it goes to the job shown next.
    std::shared_ptr<const compare::SavedPrediction> pendingPrediction_;
    QTabWidget* tabs_ = nullptr;
    TimelineView* timeline_ = nullptr;
    QWidget* pipelineTab_ = nullptr; // the pipeline view and its colour key
    PipelineView* pipeline_ = nullptr;
    WhatIfEditor* editor_ = nullptr;
    QScrollArea* whatIfTab_ = nullptr; // holds editor_, so that it scrolls
    QAction* timelineOnly_ = nullptr;
    QList<QDockWidget*> hiddenDocks_; // hidden by Timeline only, shown again after
    QByteArray initialState_;         // the docks as first laid out
    QList<AnalysisPanel*> panels_;
    BubblePanel* bubbles_ = nullptr;
    DetailsPanel* details_ = nullptr;
    QMenu* recentMenu_ = nullptr;
    QComboBox* iterations_ = nullptr;
    QLineEdit* search_ = nullptr;
    QCheckBox* regex_ = nullptr;
    QLabel* searchHits_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QToolButton* cancel_ = nullptr;
    QLabel* status_ = nullptr;
    // A remote job's link (round trip, bytes moved), refreshed while it is shown;
    // a link that drops is said once (docs/remote.md, "The app").
    QLabel* link_ = nullptr;
    QTimer* linkTimer_ = nullptr;
    void refreshLink();
    void askServerDetails(int lane, qint64 event); // a remote job's event: what the server says of it, in Details
    RemoteTiles* tiles_ = nullptr; // a remote job's tiles, asked again for the view
    void followViewWithTiles();
    QString lastError_;
    QDockWidget* bottomDock_ = nullptr;
    QDockWidget* summaryDock_ = nullptr;
    bool docksSized_ = false;
    bool restoredLayout_ = false;
    QByteArray savedState_;
    int jobsShown_ = 0;
    QString commRulesFile_; // File > Communication rules (or --comm-rules): kept for every job opened
    AppSession* baselineSession_ = nullptr; // loads the baseline of compare mode
    std::shared_ptr<const Job> baseline_;
    ComparePanel* compare_ = nullptr;
    QueryPanel* query_ = nullptr;
    QDockWidget* compareDock_ = nullptr;
    QAction* stopComparing_ = nullptr;
    QAction* baselineTracks_ = nullptr;
    bool keepsViews_ = false;
    std::optional<QPair<qint64, qint64>> startRange_; // --at, for the next job shown
    QString viewNotice_; // a view file that could not be read or written: said once with the job's status
    int expandAfterLoad_ = -1; // the stage loadReplicas() asked for, expanded once shown
};

} // namespace pipescope::gui
