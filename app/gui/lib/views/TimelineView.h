#pragma once
// The Gantt timeline of a measured or predicted run: one row per lane of a
// timeline::TimelineModel (steps, bubbles, GPU streams, CPU annotations),
// grouped by pipeline stage and data-parallel replica.
//
// A QCustomPlot draws the time axis; the body is one layerable painting the
// model's draw lists (never one item per kernel), so a frame costs about the
// pixels, not the events. Hover, selection and the dragged area live on a
// separate buffered layer: moving the mouse never repaints the body.
//
// Mouse: wheel zooms at the cursor (one notch: width x 0.8), left-drag pans,
// shift-drag or right-drag selects an area (areaSelected), click selects an
// event (eventSelected), double-click fits it; a click on a group header
// collapses or expands it; right-click opens the track menu (hide, pin,
// collapse, colours).
// Keys: W/S zoom in/out x2 about the centre, A/D and Left/Right pan by 10%
// of the width, Up/Down scroll the rows, F fits the selection, 0/Home fits
// all, '.'/',' select the next/previous event on the selected track,
// F3/Shift+F3 next/previous search hit, Esc clears, '?' lists the shortcuts.
//
// Times in this API are nanoseconds on the model's clock (the trace's, or 0
// at the start of a replay).
//
// The code is in rooms: TimelineView.cpp (the model, tracks and rows, the
// visible range), TimelineInput.cpp (selection, search, keys, mouse, the
// dragged area, the track menu), TimelineReadouts.cpp (tooltips) and
// TimelinePainting.cpp (the two layers of TimelineLayers.h). What the view
// holds of the job shown is one JobState, replaced whole by setModel.
#include "store/Store.h"
#include "timeline/TimelineModel.h"
#include "views/Theme.h"

#include <QPair>
#include <QWidget>

#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <vector>

class QCustomPlot;
class QCPLayer;
class QLabel;

class QScrollBar;

namespace pipescope::gui {

class TimelineBody;
class TimelineOverlay;
class PaletteLegend;

// One event of the model: lane index and index into that lane's events.
struct TimelineEventRef {
    int lane = -1;
    qint64 event = -1;
    bool valid() const { return lane >= 0 && event >= 0; }
    bool operator==(const TimelineEventRef&) const = default;
};

// An arrow the overlay draws for the selected event (see timeline/TimelineLinks.h).
struct SelectionArrow {
    enum class Kind { Message, Dependent, Preceding, Launch, WaitedOn };
    Kind kind = Kind::Message;
    int fromLane = -1;
    qint64 fromNs = 0;
    int toLane = -1;
    qint64 toNs = 0;
    qint64 toEvent = -1; // the event it points at on toLane, -1 for a point in time
};

class TimelineView : public QWidget {
    Q_OBJECT
public:
    enum class ColorBy { Class, Step };

    explicit TimelineView(QWidget* parent = nullptr);
    ~TimelineView() override;

    // Shows a model (null clears) and fits all of it. Collapsed groups,
    // hidden and pinned tracks survive when the new model has the same lanes.
    void setModel(std::shared_ptr<const timeline::TimelineModel> model);
    // The same job's model with other events on some lanes (a remote job's
    // tiles fetched again for the range on screen): the range, rows, tracks,
    // markers, notes and area stay; the selection follows its event (same
    // start, end and name) or goes; the search hits go (search again).
    // A model with other lanes is shown as setModel shows it.
    void refineModel(std::shared_ptr<const timeline::TimelineModel> model);
    std::shared_ptr<const timeline::TimelineModel> model() const { return model_; }

    void setVisibleRange(qint64 fromNs, qint64 toNs); // widened to at least 10 ns
    QPair<qint64, qint64> visibleRange() const;
    void fitAll();
    void fitSelection(); // the selected area, else the selected event with 5% each side

    // Kernels coloured by work class, or by the step (kind, microbatch) they ran in.
    void setColorBy(ColorBy by);
    ColorBy colorBy() const { return colorBy_; }

    // Number of rectangles, lines and texts the body painted in the last frame.
    int lastPaintPrimitives() const { return lastPrimitives_; }
    QCustomPlot* plot() const { return plot_; }

    // ---- tracks --------------------------------------------------------------
    void setGroupCollapsed(int stage, int replica, bool collapsed);
    bool isGroupCollapsed(int stage, int replica) const;
    void setAllGroupsCollapsed(bool collapsed);
    // Data-parallel replicas folded: each pipeline stage is one row showing
    // its slowest replica (the one with the most step or compute time), with
    // the spread of the other replicas drawn under it; a click expands the
    // stage into its replicas' groups. On by default when the job has more
    // than kFoldReplicasAbove ranks and more than one replica, so a large job
    // reads stage by stage without scrolling.
    static constexpr int kFoldReplicasAbove = 16;
    void setReplicasFolded(bool folded);
    // Row height: compact, normal (the default) or comfortable (views/Theme.h).
    void setRowDensity(RowDensity density);
    bool replicasFolded() const { return replicasFolded_; }
    void setStageExpanded(int stage, bool expanded);
    // A job read in part (a sharded job too large to read whole): per stage,
    // its replicas in the whole job and the spread of their busy time, from
    // the job index. A stage with replicas not loaded folds into one row even
    // with one replica loaded; the row says how many are not, its tooltip
    // gives the spread, and a click asks for them (replicasRequested) instead
    // of expanding. Empty: every replica is loaded. Kept across setModel().
    struct ReplicaSpread {
        int replicas = 0; // in the whole job
        qint64 busyMinNs = 0, busyMedianNs = 0, busyMaxNs = 0;
        int busiestRank = -1, idlestRank = -1;
        QString iteration; // the iteration the figures are of
    };
    void setReplicaSpread(std::map<int, ReplicaSpread> spread);
    // Replicas of the stage in the whole job that are not loaded (0 when all are).
    int unloadedReplicas(int stage) const;
    bool isStageExpanded(int stage) const { return expandedStages_.count(stage) > 0; }
    // The replica a folded stage shows (-1: the stage has one replica or none).
    int slowestReplica(int stage) const;
    void setLaneHidden(int lane, bool hidden);
    bool isLaneHidden(int lane) const;
    void showAllLanes();
    void setLanePinned(int lane, bool pinned); // pinned tracks sit on top, above the groups
    bool isLanePinned(int lane) const;
    // Moves a track up (delta < 0) or down past its visible neighbours within
    // its group (or among the pinned tracks). The order survives a new model
    // with the same lanes.
    void moveLane(int lane, int delta);
    // Row of a lane (headers count as rows), -1 when hidden or in a collapsed group.
    int rowOfLane(int lane) const;
    // CPU annotation tracks on or off (all of them at once; Hide track hides one).
    void setCpuLanesShown(bool shown);
    bool cpuLanesShown() const { return cpuShown_; }
    int rowCount() const { return static_cast<int>(rows_.size()); }
    // Where a lane's row is in plot() coordinates; empty when not on screen.
    QRect laneRect(int lane) const;
    // Pixel x in plot() coordinates of a time, and back.
    double xOf(qint64 ns) const;
    qint64 timeAt(double x) const;

    // ---- events --------------------------------------------------------------
    // The event under a point of plot(), within tolerancePx horizontally.
    TimelineEventRef eventAt(const QPoint& plotPos, int tolerancePx = 3) const;
    // Rich text: name, start, duration, rank, stage, stream, step, bytes and peer.
    // Time origin: the axis, tooltips and markers count from this time (the
    // job's start until a job sets another; the main window uses the shown
    // iteration's start). `what` names it under the axis ("iteration 5 start").
    void setTimeOrigin(qint64 ns, const QString& what);
    qint64 timeOrigin() const { return job_.origin; }
    QString timeOriginName() const { return job_.originName; }
    // Time markers (M adds one at the cursor): vertical lines, each pair of
    // neighbours with the time between them written above (a ruler).
    // A marker may carry a label (Edit > Add marker...), written beside its line.
    void addMarker(qint64 ns, const QString& label = {});
    void clearMarkers();
    // Where M puts a marker: the mouse over the tracks, else the selected event's start.
    std::optional<qint64> cursorTime() const;
    const std::vector<qint64>& markers() const { return job_.markers; }
    const std::vector<QString>& markerLabels() const { return job_.markerLabels; } // [i]: of markers()[i]
    // Notes on time ranges (Edit > Add note on the selected range...): a
    // band over the tracks with its text at the top. Cleared with the model.
    struct TimeNote {
        qint64 fromNs = 0, toNs = 0;
        QString text;
        bool operator==(const TimeNote&) const = default;
    };
    void addNote(qint64 fromNs, qint64 toNs, const QString& text);
    void clearNotes();
    const std::vector<TimeNote>& notes() const { return job_.notes; }
    // The dragged area (shift-drag or right-drag), if one is selected.
    std::optional<QPair<qint64, qint64>> selectedArea() const;
    // The ranks of the tracks the last area counted (a collapsed group or a
    // folded stage counts for its tracks), sorted; query and baseline tracks
    // name none of the job's ranks and are left out.
    std::vector<int> areaRanks() const;
    // Selects [fromNs, toNs) over these lanes as a drag over their rows
    // would, and emits areaSelected.
    void selectArea(qint64 fromNs, qint64 toNs, const std::vector<int>& lanes);
    // A track's identity that survives another reading of the same job
    // (rank, kind, device, stream and label), and the lane that has it (-1: none).
    QString laneKey(int lane) const;
    int laneWithKey(const QString& key) const;
    // Pinned tracks in their shown order.
    std::vector<int> pinnedTracks() const { return pinnedLanes(); }

    // The mouse wheel: Zoom (wheel zooms at the cursor, Shift+wheel scrolls
    // the tracks; Perfetto's way) or Scroll (wheel scrolls the tracks,
    // Ctrl+wheel zooms, Shift+wheel pans; Nsight Systems' way). Kept between sessions.
    enum class WheelMode { Zoom, Scroll };
    void setWheelMode(WheelMode mode);
    WheelMode wheelMode() const { return wheelMode_; }
    // The vertical scroll bar beside the tracks (its value is the first row shown).
    QScrollBar* verticalScrollBar() const { return vscroll_; }
    int firstRow() const { return job_.firstRow; }

    // The tooltip of the folded block under a point (count, busy share,
    // longest, share per class); empty where there is none.
    QString foldedToolTipAt(const QPoint& plotPos) const;
    QString toolTipFor(const TimelineEventRef& ref) const;
    void selectEvent(const TimelineEventRef& ref); // emits eventSelected
    // The arrows of the selection: a transfer to its other end, a kernel from
    // the CPU call that launched it, a step to the step that needs its output
    // and from the one it needed, a bubble from what its rank waited for.
    const std::vector<SelectionArrow>& selectionArrows() const { return job_.arrows; }
    // Finds the CPU call that launched an activity (index into the trace's
    // activities); unset, kernels get no launch arrow.
    void setLaunchLookup(std::function<std::optional<LaunchCall>(int32_t activity)> lookup) { launchLookup_ = std::move(lookup); }
    TimelineEventRef selectedEvent() const { return job_.selected; }
    int selectedLane() const { return job_.selectedLane; }
    void selectNextEvent();     // on the selected track, after the selected event
    void selectPreviousEvent();

    // ---- search --------------------------------------------------------------
    // Finds events by name (substring, case-insensitive, or ECMAScript regex);
    // returns the hit count, -1 for a bad pattern (searchError says why).
    int setSearch(const QString& pattern, bool regex = false);
    QString searchError() const { return searchError_; }
    int searchHitCount() const { return static_cast<int>(job_.hits.size()); }
    int currentSearchHit() const { return job_.currentHit; }
    void nextSearchHit();     // selects the hit and brings it into view
    void previousSearchHit();

    void setShortcutsVisible(bool visible);
    bool shortcutsVisible() const;
    // The list `?` shows, the wheel's rows as `mode` makes it work; and
    // those rows alone (Help > Keyboard shortcuts has them too).
    static QString shortcutsText(WheelMode mode);
    static QString wheelText(WheelMode mode);
    QString shortcutsShown() const; // the text of the list as shown now

Q_SIGNALS:
    void eventSelected(int lane, qint64 event); // -1, -1 when the selection is cleared
    void areaSelected(qint64 fromNs, qint64 toNs, const pipescope::timeline::AreaStats& stats);
    void visibleRangeChanged(qint64 fromNs, qint64 toNs);
    void searchChanged(int hits, int current);
    // A click on a folded stage whose replicas are not all loaded.
    void replicasRequested(int stage);

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;
    void changeEvent(QEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;

private:
    friend class TimelineBody;
    friend class TimelineOverlay;

    struct Group {
        int stage = -1;
        int replica = 0;
        std::vector<int> lanes;
        std::vector<int> summaryLanes; // what a collapsed group shows: each rank's steps or compute stream
        double busyShare = 0;          // of the summary lanes over the visible range, from the last paint
        TimeNs workNs = 0;             // the summary lanes' event time per rank: what "slowest" compares
    };
    struct Row {
        enum Kind { PinnedHeader, GroupHeader, LaneRow, StageFold } kind = LaneRow;
        int lane = -1;
        int group = -1;
    };

    void rebuildGroups();
    void computeArrows();
    std::vector<int> pinnedLanes() const; // in their shown order
    void rebuildRows();
    // Rows on screen: the pinned tracks (rows [0, stickyRows())) stay on top
    // while the others scroll beneath them from firstRow_, and the header of
    // the group the first scrolled row belongs to stays over that row
    // (Perfetto's sticky headers). A slot is a row's place on screen.
    int stickyRows() const;
    int stickyHeaderRow() const; // -1: none
    int rowInSlot(int slot) const; // -1: nothing there
    int clampedFirstRow(int first) const;
    int rowAt(int y) const;
    // The lane under a point of the plot area; -1 outside it or on a header row.
    int laneAtPoint(const QPoint& pos) const;
    int rowTop(int row) const;
    int rowHeight() const { return rowHeight_; }
    void applyPlotColors(); // the axis and background from the palette (a theme change)
    int visibleRowCount() const;
    void scrollRows(int delta);
    double nsPerPixel() const;
    void zoomAbout(double factor, double anchorX); // anchorX NaN: about the middle
    void panBy(double fraction);
    void replotBody();
    void replotOverlay();
    bool handleKey(QKeyEvent* event);
    bool handleMouse(QEvent* event);
    void showContextMenu(const QPoint& plotPos);
    void finishArea(const QPoint& a, const QPoint& b);
    void centreOn(qint64 ns);
    void selectHit(int index);
    QString laneTitle(int lane) const;

    QCustomPlot* plot_ = nullptr;
    QCPLayer* overlayLayer_ = nullptr;
    TimelineBody* body_ = nullptr;
    TimelineOverlay* overlay_ = nullptr;
    PaletteLegend* legend_ = nullptr;
    QLabel* shortcuts_ = nullptr;

    std::shared_ptr<const timeline::TimelineModel> model_;
    QScrollBar* vscroll_ = nullptr;
    WheelMode wheelMode_ = WheelMode::Zoom;
    void syncScrollBar();
    ColorBy colorBy_ = ColorBy::Class;
    std::vector<Group> groups_;
    std::vector<Row> rows_;
    std::vector<int> rowOfLane_;
    std::map<std::pair<int, int>, bool> collapsed_;
    std::vector<char> hidden_, pinned_;
    std::vector<int> order_;       // [lane]: position among its group's (or the pinned) tracks
    bool cpuShown_ = true;
    bool replicasFolded_ = false;
    int rowHeight_ = 18;
    std::set<int> expandedStages_;
    std::map<int, ReplicaSpread> spread_;
    // A folded stage: its replica groups, slowest first. Built with the groups.
    std::map<int, std::vector<int>> stageGroups_;
    QString stageFoldToolTip(int row) const;
    // A selected event's track comes on screen: its folded stage expands,
    // its collapsed group opens, the rows scroll to it.
    void revealLane(int lane);
    std::function<std::optional<LaunchCall>(int32_t)> launchLookup_;
    int labelWidth_ = 190;
    int lastPrimitives_ = 0;

    void emitArea(std::vector<int> lanes);

    enum class Drag { None, Pan, Area, Maybe } drag_ = Drag::None;
    QPoint pressPos_, lastPos_;
    Qt::MouseButton pressButton_ = Qt::NoButton;

    QString searchError_;

    // What the view holds of the job shown, replaced whole when another
    // model comes (setModel), so nothing of the last job's stays: the time
    // origin, markers and notes, the selection and its arrows, the dragged
    // area, the search hits and the first row scrolled to. Tracks added to
    // or removed from the same job (a query's, the baseline's) keep the
    // markers and notes.
    struct Hit {
        qint64 start;
        int lane;
        qint64 event;
    };
    struct JobState {
        qint64 origin = 0; // the axis shows ns relative to this (the time origin), doubles keep full precision
        QString originName;
        std::vector<qint64> markers;       // sorted
        std::vector<QString> markerLabels; // [i]: of markers[i]
        std::vector<TimeNote> notes;
        TimelineEventRef hover, selected;
        int selectedLane = -1;
        std::vector<SelectionArrow> arrows;
        bool haveArea = false;
        std::vector<char> areaRows; // [row]: counted by the area selection, shaded alone
        std::vector<int> areaLanes; // the lanes it counted
        qint64 areaFrom = 0, areaTo = 0;
        std::vector<std::vector<int64_t>> hitsPerLane;
        std::vector<Hit> hits; // by start
        std::vector<qint64> hitTimes;
        int currentHit = -1;
        int firstRow = 0;
    };
    JobState job_;
};

} // namespace pipescope::gui
