#include "views/TimelineView.h"
#include "views/TimelineLayers.h"
#include "views/QueryTrack.h"
#include "views/TimeAxis.h"
#include "views/QtPalette.h"

#include "views/PaletteLegend.h"

#include "timeline/Palette.h"
#include "timeline/TimelineLinks.h"
#include "util/Format.h"

#include <QApplication>
#include <QContextMenuEvent>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QMenu>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <qcustomplot.h>

#include <QResizeEvent>
#include <QScrollBar>
#include <QSettings>
#include <QSignalBlocker>
#include <algorithm>
#include <cmath>
#include <QCursor>

#include <limits>

namespace pipescope::gui {

using namespace pipescope::timeline;
using namespace timelineview;

namespace {

// Tick labels in the unit and with the decimals the tick spacing calls for (TimeAxis.h).
class TimeTicker : public QCPAxisTicker {
protected:
    double getTickStep(const QCPRange& range) override
    {
        step_ = QCPAxisTicker::getTickStep(range);
        return step_;
    }
    QString getTickLabel(double tick, const QLocale&, QChar, int) override { return timeTickLabel(tick, step_); }

private:
    double step_ = 1;
};

} // namespace

// ---------------------------------------------------------------------------

TimelineView::TimelineView(QWidget* parent) : QWidget(parent)
{
    plot_ = new QCustomPlot(this);
    plot_->setInteractions({}); // navigation is ours: see eventFilter
    plot_->setFocusPolicy(Qt::StrongFocus);
    plot_->setMouseTracking(true);
    plot_->yAxis->setVisible(false);
    plot_->xAxis->grid()->setVisible(false);
    plot_->yAxis->grid()->setVisible(false);
    plot_->xAxis->setTicker(QSharedPointer<QCPAxisTicker>(new TimeTicker));
    plot_->axisRect()->setAutoMargins(QCP::msBottom | QCP::msTop | QCP::msRight);
    plot_->axisRect()->setMargins(QMargins(labelWidth_, 4, 8, 0));
    plot_->addLayer(QStringLiteral("timelineOverlay"), plot_->layer(QStringLiteral("overlay")), QCustomPlot::limBelow);
    overlayLayer_ = plot_->layer(QStringLiteral("timelineOverlay"));
    overlayLayer_->setMode(QCPLayer::lmBuffered);
    body_ = new TimelineBody(plot_, this);
    overlay_ = new TimelineOverlay(plot_, this);
    plot_->installEventFilter(this);
    setFocusProxy(plot_);
    rowHeight_ = gui::rowHeight(savedAppearance().density);
    applyPlotColors();

    legend_ = new PaletteLegend(PaletteLegend::Steps | PaletteLegend::Causes | PaletteLegend::Work, this);
    shortcuts_ = new QLabel(plot_);
    shortcuts_->setText(shortcutsText(wheelMode_));
    shortcuts_->setStyleSheet(QStringLiteral("QLabel { background: rgba(29,35,41,235); color: white; padding: 10px; border-radius: 6px; }"));
    shortcuts_->hide();

    vscroll_ = new QScrollBar(Qt::Vertical, this);
    vscroll_->setObjectName(QStringLiteral("timelineRows"));
    vscroll_->setToolTip(tr("Scroll the tracks (↑ / ↓, or the wheel with Shift)"));
    connect(vscroll_, &QScrollBar::valueChanged, this, [this](int value) {
        if (value + stickyRows() != job_.firstRow)
            scrollRows(value + stickyRows() - job_.firstRow);
    });
    wheelMode_ = QSettings().value(QStringLiteral("timeline/wheel")).toString() == QLatin1String("scroll") ? WheelMode::Scroll
                                                                                                        : WheelMode::Zoom;

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);
    auto* row = new QHBoxLayout;
    row->setContentsMargins(0, 0, 0, 0);
    row->setSpacing(0);
    row->addWidget(plot_, 1);
    row->addWidget(vscroll_);
    layout->addLayout(row, 1);
    layout->addWidget(legend_);

    connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this](const QCPRange&) {
        const auto r = visibleRange();
        Q_EMIT visibleRangeChanged(r.first, r.second);
    });
    plot_->xAxis->setRange(0, 1000);
}

TimelineView::~TimelineView() = default;

QString TimelineView::wheelText(WheelMode mode)
{
    return mode == WheelMode::Zoom
               ? QStringLiteral("<tr><td>wheel</td><td>zoom at the cursor</td></tr>"
                                "<tr><td>Shift+wheel</td><td>scroll the tracks</td></tr>"
                                "<tr><td></td><td>(right-click: \u201cWheel scrolls, Ctrl+wheel zooms\u201d, as Nsight Systems)</td></tr>")
               : QStringLiteral("<tr><td>wheel</td><td>scroll the tracks</td></tr>"
                                "<tr><td>Ctrl+wheel</td><td>zoom at the cursor</td></tr>"
                                "<tr><td>Shift+wheel</td><td>pan</td></tr>"
                                "<tr><td></td><td>(right-click to make the wheel zoom again)</td></tr>");
}

QString TimelineView::shortcutsText(WheelMode mode)
{
    return QStringLiteral("<b>Timeline shortcuts</b><table>") + wheelText(mode) + QStringLiteral(
        "<tr><td>drag</td><td>pan</td></tr>"
        "<tr><td>shift-drag, right-drag</td><td>area statistics</td></tr>"
        "<tr><td>click / double-click</td><td>select / fit the event</td></tr>"
        "<tr><td>W / S</td><td>zoom in / out</td></tr>"
        "<tr><td>A / D, &larr; / &rarr;</td><td>pan</td></tr>"
        "<tr><td>&uarr; / &darr;</td><td>scroll tracks</td></tr>"
        "<tr><td>Alt+&uarr; / Alt+&darr;</td><td>move the selected track</td></tr>"
        "<tr><td>F</td><td>fit the selection</td></tr>"
        "<tr><td>0, Home</td><td>fit all</td></tr>"
        "<tr><td>. / ,</td><td>next / previous event on the track</td></tr>"
        "<tr><td>F3 / Shift+F3</td><td>next / previous search hit</td></tr>"
        "<tr><td>M</td><td>time marker at the cursor (the time between markers is shown)</td></tr>"
        "<tr><td>Esc</td><td>clear the selection</td></tr>"
        "<tr><td>?</td><td>this list</td></tr></table>");
}

void TimelineView::setShortcutsVisible(bool visible)
{
    if (visible) {
        shortcuts_->setText(shortcutsText(wheelMode_)); // the wheel as it is set now
        shortcuts_->adjustSize();
        shortcuts_->move(std::max(0, plot_->width() - shortcuts_->width() - 12), 12);
        shortcuts_->raise();
    }
    shortcuts_->setVisible(visible);
}

bool TimelineView::shortcutsVisible() const { return shortcuts_->isVisibleTo(plot_); }
QString TimelineView::shortcutsShown() const { return shortcuts_->text(); }

// ---- model and rows --------------------------------------------------------

// Whether one model is the other with tracks added at the end (a query's
// tracks drawn or removed, the baseline's shown or hidden): the same job.
static bool tracksAddedOrRemoved(const TimelineModel* a, const TimelineModel* b)
{
    if (!a || !b || a->lanes.size() == b->lanes.size())
        return false;
    const size_t common = std::min(a->lanes.size(), b->lanes.size());
    for (size_t i = 0; i < common; ++i) {
        const Lane &x = a->lanes[i], &y = b->lanes[i];
        if (x.kind != y.kind || x.rank != y.rank || x.stream != y.stream || x.tid != y.tid || x.depth != y.depth
            || x.label != y.label || x.baseline != y.baseline || x.events.size() != y.events.size())
            return false;
    }
    return true;
}

void TimelineView::setModel(std::shared_ptr<const TimelineModel> model)
{
    const size_t oldLanes = model_ ? model_->lanes.size() : 0;
    // Tracks added to or removed from the same job keep what the user set on the others.
    const bool sameJob = tracksAddedOrRemoved(model_.get(), model.get());
    model_ = std::move(model);
    const size_t n = model_ ? model_->lanes.size() : 0;
    if (n != oldLanes) {
        const size_t kept = sameJob ? std::min(n, oldLanes) : 0;
        hidden_.resize(kept);
        pinned_.resize(kept);
        order_.resize(kept);
        hidden_.resize(n, 0);
        pinned_.resize(n, 0);
        order_.resize(n);
        for (size_t i = kept; i < n; ++i)
            order_[i] = static_cast<int>(i);
        if (!cpuShown_ && model_)
            for (size_t i = kept; i < n; ++i)
                if (model_->lanes[i].kind == LaneKind::Cpu && !isQueryTrack(model_->lanes[i]))
                    hidden_[i] = 1;
        // A query's tracks come pinned on top, as Perfetto's debug tracks do.
        for (size_t i = kept; i < n; ++i)
            if (isQueryTrack(model_->lanes[i]))
                pinned_[i] = 1;
        // Another job: replicas fold when it is large, every stage folded.
        std::set<int> ranks, replicas;
        if (model_)
            for (const Lane& l : model_->lanes) {
                ranks.insert(l.rank);
                replicas.insert(l.replica);
            }
        replicasFolded_ = static_cast<int>(ranks.size()) > kFoldReplicasAbove && replicas.size() > 1;
        expandedStages_.clear();
    }
    // What the view held of the last model goes whole.
    JobState next;
    if (sameJob) {
        next.markers = std::move(job_.markers);
        next.markerLabels = std::move(job_.markerLabels);
        next.notes = std::move(job_.notes);
    }
    next.origin = model_ ? model_->start : 0;
    next.originName = model_ && model_->predicted ? tr("the predicted iteration's start") : tr("the job start");
    job_ = std::move(next);
    plot_->xAxis->setLabel(tr("time from %1").arg(job_.originName));
    // Track labels as wide as the longest needs, within reason.
    if (model_) {
        const QFontMetrics fm(plot_->font());
        int widest = 0;
        for (size_t i = 0; i < n; ++i)
            widest = std::max(widest, fm.horizontalAdvance(laneTitle(static_cast<int>(i))));
        labelWidth_ = std::clamp(widest + 16, 150, 320);
        plot_->axisRect()->setMargins(QMargins(labelWidth_, 4, 8, 0));
    }
    rebuildGroups();
    rebuildRows();
    fitAll();
}

void TimelineView::refineModel(std::shared_ptr<const TimelineModel> model)
{
    if (!model_ || !model || model->lanes.size() != model_->lanes.size()) {
        setModel(std::move(model));
        return;
    }
    const std::shared_ptr<const TimelineModel> old = std::exchange(model_, std::move(model));
    TimelineEventRef selected;
    if (job_.selected.valid()) {
        const Event& e = old->event(job_.selected.lane, job_.selected.event);
        const auto& events = model_->lanes[static_cast<size_t>(job_.selected.lane)].events;
        auto it = std::lower_bound(events.begin(), events.end(), e.start, [](const Event& x, TimeNs t) { return x.start < t; });
        for (; it != events.end() && it->start == e.start && !selected.valid(); ++it)
            if (it->end == e.end && model_->name(it->name) == old->name(e.name))
                selected = {job_.selected.lane, static_cast<qint64>(it - events.begin())};
    }
    const bool lost = job_.selected.valid() && !selected.valid();
    job_.selected = selected;
    job_.hover = {};
    job_.hits.clear();
    job_.hitTimes.clear();
    job_.hitsPerLane.clear();
    job_.currentHit = -1;
    computeArrows();
    replotBody();
    replotOverlay();
    if (lost)
        Q_EMIT eventSelected(-1, -1);
}

void TimelineView::setTimeOrigin(qint64 ns, const QString& what)
{
    const auto range = visibleRange();
    job_.origin = ns;
    job_.originName = what;
    plot_->xAxis->setLabel(tr("time from %1").arg(what));
    setVisibleRange(range.first, range.second); // the same view, counted from the new origin
}

void TimelineView::addMarker(qint64 ns, const QString& label)
{
    const auto at = std::upper_bound(job_.markers.begin(), job_.markers.end(), ns);
    job_.markerLabels.insert(job_.markerLabels.begin() + (at - job_.markers.begin()), label);
    job_.markers.insert(at, ns);
    replotOverlay();
}

void TimelineView::clearMarkers()
{
    job_.markers.clear();
    job_.markerLabels.clear();
    replotOverlay();
}

std::optional<qint64> TimelineView::cursorTime() const
{
    // At the mouse when it is over the tracks, else at the selected event's start.
    const QPoint at = plot_->mapFromGlobal(QCursor::pos());
    if (model_ && plot_->axisRect()->rect().contains(at))
        return timeAt(at.x());
    if (model_ && job_.selected.valid())
        return model_->event(job_.selected.lane, job_.selected.event).start;
    return std::nullopt;
}

void TimelineView::addNote(qint64 fromNs, qint64 toNs, const QString& text)
{
    if (toNs < fromNs)
        std::swap(fromNs, toNs);
    job_.notes.push_back({fromNs, toNs, text});
    replotOverlay();
}

void TimelineView::clearNotes()
{
    job_.notes.clear();
    replotOverlay();
}

std::optional<QPair<qint64, qint64>> TimelineView::selectedArea() const
{
    if (!job_.haveArea)
        return std::nullopt;
    return QPair<qint64, qint64>(job_.areaFrom, job_.areaTo);
}

QString TimelineView::laneKey(int lane) const
{
    if (!model_ || lane < 0 || static_cast<size_t>(lane) >= model_->lanes.size())
        return {};
    const Lane& l = model_->lanes[static_cast<size_t>(lane)];
    return QStringLiteral("%1/%2/%3/%4/%5/%6%7")
        .arg(l.rank)
        .arg(static_cast<int>(l.kind))
        .arg(l.device)
        .arg(l.stream)
        .arg(l.tid)
        .arg(qstr(l.label), l.baseline ? QStringLiteral("/baseline") : QString());
}

int TimelineView::laneWithKey(const QString& key) const
{
    if (!model_ || key.isEmpty())
        return -1;
    for (size_t i = 0; i < model_->lanes.size(); ++i)
        if (laneKey(static_cast<int>(i)) == key)
            return static_cast<int>(i);
    return -1;
}

void TimelineView::rebuildGroups()
{
    groups_.clear();
    if (!model_)
        return;
    std::map<std::pair<int, int>, size_t> index;
    for (size_t i = 0; i < model_->lanes.size(); ++i) {
        const Lane& l = model_->lanes[i];
        // Lanes come sorted by stage, replica and rank, so groups appear in order.
        auto [it, inserted] = index.try_emplace({l.stage, l.replica}, groups_.size());
        if (inserted)
            groups_.push_back({l.stage, l.replica, {}, {}, 0});
        groups_[it->second].lanes.push_back(static_cast<int>(i));
    }
    for (Group& g : groups_)
        std::stable_sort(g.lanes.begin(), g.lanes.end(),
                         [this](int a, int b) { return order_[static_cast<size_t>(a)] < order_[static_cast<size_t>(b)]; });
    for (Group& g : groups_) {
        std::map<int, int> best; // rank -> its steps lane, else its first compute stream
        for (int li : g.lanes) {
            const Lane& l = model_->lanes[static_cast<size_t>(li)];
            const bool steps = l.kind == LaneKind::Steps;
            const bool compute = l.kind == LaneKind::Kernels && l.role == StreamRole::Compute;
            auto f = best.find(l.rank);
            if (steps && (f == best.end() || model_->lanes[static_cast<size_t>(f->second)].kind != LaneKind::Steps))
                best[l.rank] = li;
            else if (compute && f == best.end())
                best[l.rank] = li;
        }
        for (auto& [r, li] : best)
            g.summaryLanes.push_back(li);
        for (int li : g.summaryLanes)
            for (const Event& e : model_->lanes[static_cast<size_t>(li)].events)
                g.workNs += e.duration();
        if (!g.summaryLanes.empty())
            g.workNs /= static_cast<TimeNs>(g.summaryLanes.size());
    }
    stageGroups_.clear();
    for (size_t g = 0; g < groups_.size(); ++g)
        if (groups_[g].stage >= 0)
            stageGroups_[groups_[g].stage].push_back(static_cast<int>(g));
    for (auto& [stage, gs] : stageGroups_)
        std::stable_sort(gs.begin(), gs.end(), [this](int a, int b) {
            return groups_[static_cast<size_t>(a)].workNs > groups_[static_cast<size_t>(b)].workNs;
        });
}

void TimelineView::setRowDensity(RowDensity density)
{
    rowHeight_ = gui::rowHeight(density);
    job_.firstRow = clampedFirstRow(job_.firstRow);
    replotBody();
}

void TimelineView::applyPlotColors()
{
    const QColor text = palette().color(QPalette::Text);
    plot_->setBackground(palette().brush(QPalette::Base));
    for (QCPAxis* axis : {plot_->xAxis, plot_->xAxis2}) {
        axis->setBasePen(QPen(text, 0));
        axis->setTickPen(QPen(text, 0));
        axis->setSubTickPen(QPen(text, 0));
        axis->setTickLabelColor(text);
        axis->setLabelColor(text);
    }
}

void TimelineView::changeEvent(QEvent* event)
{
    if (event->type() == QEvent::PaletteChange) {
        applyPlotColors();
        replotBody();
    }
    QWidget::changeEvent(event);
}

void TimelineView::setReplicasFolded(bool folded)
{
    replicasFolded_ = folded;
    rebuildRows();
    replotBody();
}

void TimelineView::setStageExpanded(int stage, bool expanded)
{
    if (expanded)
        expandedStages_.insert(stage);
    else
        expandedStages_.erase(stage);
    rebuildRows();
    replotBody();
}

void TimelineView::setReplicaSpread(std::map<int, ReplicaSpread> spread)
{
    spread_ = std::move(spread);
    for (const auto& [stage, sp] : spread_)
        if (unloadedReplicas(stage) > 0)
            replicasFolded_ = true; // a stage of many replicas reads as one row, as in a job read whole
    rebuildRows();
    replotBody();
}

int TimelineView::unloadedReplicas(int stage) const
{
    const auto it = spread_.find(stage);
    if (it == spread_.end())
        return 0;
    const auto sg = stageGroups_.find(stage);
    const int loaded = sg == stageGroups_.end() ? 0 : static_cast<int>(sg->second.size());
    return std::max(0, it->second.replicas - loaded);
}

int TimelineView::slowestReplica(int stage) const
{
    const auto it = stageGroups_.find(stage);
    if (it == stageGroups_.end() || it->second.size() < 2)
        return -1;
    return groups_[static_cast<size_t>(it->second.front())].replica;
}

void TimelineView::rebuildRows()
{
    // Rows move when groups fold: a selection's shading would cover other rows.
    job_.areaRows.clear();
    rows_.clear();
    const size_t n = model_ ? model_->lanes.size() : 0;
    rowOfLane_.assign(n, -1);
    if (!model_)
        return;
    bool anyPinned = false;
    for (int i : pinnedLanes())
        if (!hidden_[static_cast<size_t>(i)]) {
            if (!anyPinned)
                rows_.push_back({Row::PinnedHeader, -1, -1});
            anyPinned = true;
            rowOfLane_[static_cast<size_t>(i)] = static_cast<int>(rows_.size());
            rows_.push_back({Row::LaneRow, i, -1});
        }
    std::set<int> folded; // stages already given their one row
    for (size_t g = 0; g < groups_.size(); ++g) {
        const int stage = groups_[g].stage;
        const auto sg = stageGroups_.find(stage);
        if (replicasFolded_ && sg != stageGroups_.end() && (sg->second.size() > 1 || unloadedReplicas(stage) > 0) &&
            !isStageExpanded(stage)) {
            if (folded.insert(stage).second)
                rows_.push_back({Row::StageFold, -1, sg->second.front()});
            continue;
        }
        rows_.push_back({Row::GroupHeader, -1, static_cast<int>(g)});
        if (isGroupCollapsed(groups_[g].stage, groups_[g].replica))
            continue;
        for (int li : groups_[g].lanes)
            if (!hidden_[static_cast<size_t>(li)] && !pinned_[static_cast<size_t>(li)]) {
                rowOfLane_[static_cast<size_t>(li)] = static_cast<int>(rows_.size());
                rows_.push_back({Row::LaneRow, li, static_cast<int>(g)});
            }
    }
    job_.firstRow = clampedFirstRow(job_.firstRow);
}

void TimelineView::setGroupCollapsed(int stage, int replica, bool collapsed)
{
    collapsed_[{stage, replica}] = collapsed;
    rebuildRows();
    replotBody();
}

bool TimelineView::isGroupCollapsed(int stage, int replica) const
{
    auto it = collapsed_.find({stage, replica});
    return it != collapsed_.end() && it->second;
}

void TimelineView::setAllGroupsCollapsed(bool collapsed)
{
    for (const Group& g : groups_)
        collapsed_[{g.stage, g.replica}] = collapsed;
    rebuildRows();
    replotBody();
}

void TimelineView::setLaneHidden(int lane, bool hidden)
{
    if (lane < 0 || static_cast<size_t>(lane) >= hidden_.size())
        return;
    hidden_[static_cast<size_t>(lane)] = hidden;
    rebuildRows();
    replotBody();
}

bool TimelineView::isLaneHidden(int lane) const
{
    return lane >= 0 && static_cast<size_t>(lane) < hidden_.size() && hidden_[static_cast<size_t>(lane)];
}

void TimelineView::showAllLanes()
{
    std::fill(hidden_.begin(), hidden_.end(), 0);
    rebuildRows();
    replotBody();
}

void TimelineView::setLanePinned(int lane, bool pinned)
{
    if (lane < 0 || static_cast<size_t>(lane) >= pinned_.size())
        return;
    pinned_[static_cast<size_t>(lane)] = pinned;
    rebuildRows();
    replotBody();
}

bool TimelineView::isLanePinned(int lane) const
{
    return lane >= 0 && static_cast<size_t>(lane) < pinned_.size() && pinned_[static_cast<size_t>(lane)];
}

std::vector<int> TimelineView::pinnedLanes() const
{
    std::vector<int> out;
    for (size_t i = 0; i < pinned_.size(); ++i)
        if (pinned_[i])
            out.push_back(static_cast<int>(i));
    std::stable_sort(out.begin(), out.end(),
                     [this](int a, int b) { return order_[static_cast<size_t>(a)] < order_[static_cast<size_t>(b)]; });
    return out;
}

void TimelineView::moveLane(int lane, int delta)
{
    if (!model_ || lane < 0 || static_cast<size_t>(lane) >= order_.size() || delta == 0)
        return;
    // The tracks it moves among, in their shown order, hidden ones left out.
    std::vector<int> peers;
    if (isLanePinned(lane)) {
        peers = pinnedLanes();
    } else {
        for (const Group& g : groups_)
            if (std::find(g.lanes.begin(), g.lanes.end(), lane) != g.lanes.end())
                for (int li : g.lanes)
                    if (!pinned_[static_cast<size_t>(li)])
                        peers.push_back(li);
    }
    std::erase_if(peers, [&](int li) { return li != lane && hidden_[static_cast<size_t>(li)]; });
    const auto at = std::find(peers.begin(), peers.end(), lane);
    if (at == peers.end())
        return;
    const long to = std::clamp<long>((at - peers.begin()) + delta, 0, static_cast<long>(peers.size()) - 1);
    if (to == at - peers.begin())
        return;
    const int other = peers[static_cast<size_t>(to)];
    // Moving past `other` takes its place; everything in between shifts by one.
    const int from = order_[static_cast<size_t>(lane)], dest = order_[static_cast<size_t>(other)];
    for (int& o : order_) {
        if (delta > 0 && o > from && o <= dest)
            --o;
        else if (delta < 0 && o >= dest && o < from)
            ++o;
    }
    order_[static_cast<size_t>(lane)] = dest;
    rebuildGroups();
    rebuildRows();
    replotBody();
}

int TimelineView::rowOfLane(int lane) const
{
    return lane >= 0 && static_cast<size_t>(lane) < rowOfLane_.size() ? rowOfLane_[static_cast<size_t>(lane)] : -1;
}

void TimelineView::setCpuLanesShown(bool shown)
{
    cpuShown_ = shown;
    if (model_)
        for (size_t i = 0; i < model_->lanes.size() && i < hidden_.size(); ++i)
            if (model_->lanes[i].kind == LaneKind::Cpu && !isQueryTrack(model_->lanes[i]))
                hidden_[i] = !shown;
    rebuildRows();
    replotBody();
}

int TimelineView::stickyRows() const
{
    int p = 0;
    while (p < rowCount() && rows_[static_cast<size_t>(p)].group < 0)
        ++p;
    // Pinned tracks that would fill the view leave nothing to scroll: then they scroll with the rest.
    return p < visibleRowCount() - 1 ? p : 0;
}

int TimelineView::stickyHeaderRow() const
{
    if (job_.firstRow >= rowCount() || job_.firstRow < stickyRows())
        return -1;
    const Row& r = rows_[static_cast<size_t>(job_.firstRow)];
    if (r.kind != Row::LaneRow || r.group < 0)
        return -1;
    for (int h = job_.firstRow - 1; h >= 0; --h)
        if (rows_[static_cast<size_t>(h)].kind == Row::GroupHeader)
            return h;
    return -1;
}

int TimelineView::rowInSlot(int slot) const
{
    const int sticky = stickyRows();
    if (slot < 0)
        return -1;
    if (slot < sticky)
        return slot;
    if (slot == sticky)
        if (const int h = stickyHeaderRow(); h >= 0)
            return h;
    const int r = job_.firstRow + slot - sticky;
    return r < rowCount() ? r : -1;
}

int TimelineView::clampedFirstRow(int first) const
{
    const int sticky = stickyRows();
    return std::clamp(first, sticky, std::max(sticky, rowCount() - visibleRowCount() + sticky));
}

int TimelineView::rowTop(int row) const
{
    const int sticky = stickyRows();
    const int slot = row < sticky ? row : sticky + row - job_.firstRow;
    return plot_->axisRect()->top() + slot * rowHeight();
}

int TimelineView::visibleRowCount() const { return std::max(1, plot_->axisRect()->height() / rowHeight()); }

int TimelineView::rowAt(int y) const
{
    const int top = plot_->axisRect()->top();
    if (y < top || y >= plot_->axisRect()->bottom())
        return -1;
    return rowInSlot((y - top) / rowHeight());
}

QRect TimelineView::laneRect(int lane) const
{
    if (lane < 0 || static_cast<size_t>(lane) >= rowOfLane_.size() || rowOfLane_[static_cast<size_t>(lane)] < 0)
        return {};
    const int row = rowOfLane_[static_cast<size_t>(lane)];
    const int sticky = stickyRows();
    const bool shown = row < sticky || (row >= job_.firstRow && row < job_.firstRow + visibleRowCount() - sticky &&
                                        !(row == job_.firstRow && stickyHeaderRow() >= 0)); // under the sticky header
    if (!shown)
        return {};
    const QRect ar = plot_->axisRect()->rect();
    return QRect(ar.left(), rowTop(row), ar.width(), rowHeight());
}

void TimelineView::scrollRows(int delta)
{
    const int old = job_.firstRow;
    job_.firstRow = clampedFirstRow(job_.firstRow + delta);
    if (job_.firstRow != old)
        replotBody();
}

QString TimelineView::laneTitle(int lane) const
{
    const Lane& l = model_->lanes[static_cast<size_t>(lane)];
    if (isQueryTrack(l) && l.rank < 0)
        return qstr(l.label); // a track column's value: no rank
    QString s = l.baseline ? QStringLiteral("baseline r%1 ").arg(l.rank) : QStringLiteral("r%1 ").arg(l.rank);
    if (l.kind == LaneKind::Kernels && l.device >= 0)
        s += QStringLiteral("gpu%1 ").arg(l.device);
    return s + qstr(l.label);
}

// ---- range -----------------------------------------------------------------

QPair<qint64, qint64> TimelineView::visibleRange() const
{
    const QCPRange r = plot_->xAxis->range();
    return {job_.origin + std::llround(r.lower), job_.origin + std::llround(r.upper)};
}

void TimelineView::setVisibleRange(qint64 fromNs, qint64 toNs)
{
    double lo = static_cast<double>(fromNs - job_.origin), hi = static_cast<double>(toNs - job_.origin);
    if (hi < lo)
        std::swap(lo, hi);
    if (hi - lo < kMinWidthNs) {
        const double c = (lo + hi) / 2;
        lo = c - kMinWidthNs / 2;
        hi = c + kMinWidthNs / 2;
    }
    plot_->xAxis->setRange(lo, hi);
    replotBody();
}

void TimelineView::fitAll()
{
    if (!model_ || model_->end <= model_->start) {
        setVisibleRange(job_.origin, job_.origin + 1000);
        return;
    }
    setVisibleRange(model_->start, model_->end);
}

void TimelineView::fitSelection()
{
    qint64 s = 0, e = 0;
    if (job_.haveArea) {
        s = job_.areaFrom;
        e = job_.areaTo;
    } else if (job_.selected.valid() && model_) {
        const Event& ev = model_->event(job_.selected.lane, job_.selected.event);
        const qint64 pad = std::max<qint64>(5, ev.duration() / 20);
        s = ev.start - pad;
        e = ev.end + pad;
    } else {
        return;
    }
    setVisibleRange(s, e);
}

double TimelineView::nsPerPixel() const
{
    return plot_->xAxis->range().size() / std::max(1, plot_->axisRect()->width());
}

double TimelineView::xOf(qint64 ns) const { return plot_->xAxis->coordToPixel(static_cast<double>(ns - job_.origin)); }

qint64 TimelineView::timeAt(double x) const { return job_.origin + std::llround(plot_->xAxis->pixelToCoord(x)); }

void TimelineView::zoomAbout(double factor, double anchorX)
{
    const QCPRange r = plot_->xAxis->range();
    // NaN: the middle of the range (a pixel's time would be off by rounding).
    const double anchor = std::isnan(anchorX) ? r.center() : plot_->xAxis->pixelToCoord(anchorX);
    // Whole nanoseconds at both ends, so the new width is exactly the old one times factor.
    double lo = std::round(anchor + (r.lower - anchor) * factor);
    double hi = lo + std::round(r.size() * factor);
    if (hi - lo < kMinWidthNs) {
        const double k = kMinWidthNs / (hi - lo);
        lo = anchor + (lo - anchor) * k;
        hi = anchor + (hi - anchor) * k;
    }
    plot_->xAxis->setRange(lo, hi);
    replotBody();
}

void TimelineView::panBy(double fraction)
{
    const QCPRange r = plot_->xAxis->range();
    const double d = r.size() * fraction;
    plot_->xAxis->setRange(r.lower + d, r.upper + d);
    replotBody();
}

void TimelineView::centreOn(qint64 ns)
{
    const auto r = visibleRange();
    if (ns >= r.first && ns < r.second)
        return;
    const qint64 half = (r.second - r.first) / 2;
    setVisibleRange(ns - half, ns - half + (r.second - r.first));
}

void TimelineView::replotBody()
{
    syncScrollBar();
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void TimelineView::syncScrollBar()
{
    const QSignalBlocker block(vscroll_);
    // The bar scrolls the rows under the pinned ones: value 0 is the first of them.
    const int visible = visibleRowCount(), sticky = stickyRows();
    vscroll_->setRange(0, std::max(0, rowCount() - visible));
    vscroll_->setPageStep(visible - sticky);
    vscroll_->setSingleStep(1);
    vscroll_->setValue(job_.firstRow - sticky);
    vscroll_->setEnabled(rowCount() > visible);
}

void TimelineView::setWheelMode(WheelMode mode)
{
    wheelMode_ = mode;
    if (shortcutsVisible())
        setShortcutsVisible(true); // the list says what the wheel does now
    QSettings().setValue(QStringLiteral("timeline/wheel"), mode == WheelMode::Scroll ? QStringLiteral("scroll") : QStringLiteral("zoom"));
}

void TimelineView::replotOverlay() { overlayLayer_->replot(); }

void TimelineView::setColorBy(ColorBy by)
{
    colorBy_ = by;
    replotBody();
}

} // namespace pipescope::gui
