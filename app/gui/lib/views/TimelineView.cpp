#include "views/TimelineView.h"
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

namespace {

constexpr double kMinWidthNs = 10.0;
constexpr double kWheelZoom = 0.8; // width factor per wheel notch towards the user
constexpr double kKeyZoom = 0.5;
constexpr double kPanFraction = 0.1;

QString qstr(const std::string& s) { return QString::fromStdString(s); }

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

// ---- the body: lanes from draw lists, labels, iteration lines, search marks --

class TimelineBody : public QCPLayerable {
public:
    TimelineBody(QCustomPlot* plot, TimelineView* view) : QCPLayerable(plot, QStringLiteral("main")), view_(view) {}

protected:
    void applyDefaultAntialiasingHint(QCPPainter* painter) const override { painter->setAntialiasing(false); }
    // Rows and their labels, never over the time axis below them.
    QRect clipRect() const override
    {
        const QRect ar = mParentPlot->axisRect()->rect();
        return QRect(0, ar.top(), mParentPlot->viewport().width(), ar.height());
    }
    void draw(QCPPainter* painter) override;

private:
    void drawLane(QCPPainter* p, int lane, const QRect& r, int& prims, bool summary, double* busyPx);
    void drawCounter(QCPPainter* p, const timeline::Lane& lane, const QRect& r, qint64 from, qint64 to, int& prims);

    TimelineView* view_;
    std::vector<DrawItem> items_; // reused between frames
};

// ---- the overlay: hover, selection, the dragged area ----------------------

class TimelineOverlay : public QCPLayerable {
public:
    TimelineOverlay(QCustomPlot* plot, TimelineView* view) : QCPLayerable(plot, QStringLiteral("timelineOverlay")), view_(view) {}
    QRect dragRect;

protected:
    void applyDefaultAntialiasingHint(QCPPainter* painter) const override { painter->setAntialiasing(true); }
    QRect clipRect() const override { return mParentPlot->axisRect()->rect(); }
    void draw(QCPPainter* painter) override;

private:
    void outline(QCPPainter* p, const TimelineEventRef& ref, const QColor& c, int width);
    TimelineView* view_;
};

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
        if (value + stickyRows() != firstRow_)
            scrollRows(value + stickyRows() - firstRow_);
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
    arrows_.clear();
    hover_ = selected_ = {};
    selectedLane_ = -1;
    haveArea_ = false;
    hits_.clear();
    hitTimes_.clear();
    hitsPerLane_.clear();
    currentHit_ = -1;
    firstRow_ = 0;
    origin_ = model_ ? model_->start : 0;
    originName_ = model_ && model_->predicted ? tr("the predicted iteration's start") : tr("the job start");
    plot_->xAxis->setLabel(tr("time from %1").arg(originName_));
    if (!sameJob) {
        markers_.clear();
        markerLabels_.clear();
        notes_.clear();
    }
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

void TimelineView::setTimeOrigin(qint64 ns, const QString& what)
{
    const auto range = visibleRange();
    origin_ = ns;
    originName_ = what;
    plot_->xAxis->setLabel(tr("time from %1").arg(what));
    setVisibleRange(range.first, range.second); // the same view, counted from the new origin
}

void TimelineView::addMarker(qint64 ns, const QString& label)
{
    const auto at = std::upper_bound(markers_.begin(), markers_.end(), ns);
    markerLabels_.insert(markerLabels_.begin() + (at - markers_.begin()), label);
    markers_.insert(at, ns);
    replotOverlay();
}

void TimelineView::clearMarkers()
{
    markers_.clear();
    markerLabels_.clear();
    replotOverlay();
}

std::optional<qint64> TimelineView::cursorTime() const
{
    // At the mouse when it is over the tracks, else at the selected event's start.
    const QPoint at = plot_->mapFromGlobal(QCursor::pos());
    if (model_ && plot_->axisRect()->rect().contains(at))
        return timeAt(at.x());
    if (model_ && selected_.valid())
        return model_->event(selected_.lane, selected_.event).start;
    return std::nullopt;
}

void TimelineView::addNote(qint64 fromNs, qint64 toNs, const QString& text)
{
    if (toNs < fromNs)
        std::swap(fromNs, toNs);
    notes_.push_back({fromNs, toNs, text});
    replotOverlay();
}

void TimelineView::clearNotes()
{
    notes_.clear();
    replotOverlay();
}

std::optional<QPair<qint64, qint64>> TimelineView::selectedArea() const
{
    if (!haveArea_)
        return std::nullopt;
    return QPair<qint64, qint64>(areaFrom_, areaTo_);
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
    firstRow_ = clampedFirstRow(firstRow_);
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
    areaRows_.clear();
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
    firstRow_ = clampedFirstRow(firstRow_);
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
    if (firstRow_ >= rowCount() || firstRow_ < stickyRows())
        return -1;
    const Row& r = rows_[static_cast<size_t>(firstRow_)];
    if (r.kind != Row::LaneRow || r.group < 0)
        return -1;
    for (int h = firstRow_ - 1; h >= 0; --h)
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
    const int r = firstRow_ + slot - sticky;
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
    const int slot = row < sticky ? row : sticky + row - firstRow_;
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
    const bool shown = row < sticky || (row >= firstRow_ && row < firstRow_ + visibleRowCount() - sticky &&
                                        !(row == firstRow_ && stickyHeaderRow() >= 0)); // under the sticky header
    if (!shown)
        return {};
    const QRect ar = plot_->axisRect()->rect();
    return QRect(ar.left(), rowTop(row), ar.width(), rowHeight());
}

void TimelineView::scrollRows(int delta)
{
    const int old = firstRow_;
    firstRow_ = clampedFirstRow(firstRow_ + delta);
    if (firstRow_ != old)
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
    return {origin_ + std::llround(r.lower), origin_ + std::llround(r.upper)};
}

void TimelineView::setVisibleRange(qint64 fromNs, qint64 toNs)
{
    double lo = static_cast<double>(fromNs - origin_), hi = static_cast<double>(toNs - origin_);
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
        setVisibleRange(origin_, origin_ + 1000);
        return;
    }
    setVisibleRange(model_->start, model_->end);
}

void TimelineView::fitSelection()
{
    qint64 s = 0, e = 0;
    if (haveArea_) {
        s = areaFrom_;
        e = areaTo_;
    } else if (selected_.valid() && model_) {
        const Event& ev = model_->event(selected_.lane, selected_.event);
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

double TimelineView::xOf(qint64 ns) const { return plot_->xAxis->coordToPixel(static_cast<double>(ns - origin_)); }

qint64 TimelineView::timeAt(double x) const { return origin_ + std::llround(plot_->xAxis->pixelToCoord(x)); }

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
    vscroll_->setValue(firstRow_ - sticky);
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

// ---- events ----------------------------------------------------------------

TimelineEventRef TimelineView::eventAt(const QPoint& pos, int tolerancePx) const
{
    if (!model_ || pos.x() < plot_->axisRect()->left() || pos.x() >= plot_->axisRect()->right())
        return {};
    const int row = rowAt(pos.y());
    if (row < 0 || rows_[static_cast<size_t>(row)].kind != Row::LaneRow)
        return {};
    const int lane = rows_[static_cast<size_t>(row)].lane;
    const qint64 t = timeAt(pos.x());
    const qint64 tol = std::llround(tolerancePx * nsPerPixel());
    const int64_t e = model_->hitTest(lane, t, tol);
    return e < 0 ? TimelineEventRef{} : TimelineEventRef{lane, e};
}

QString TimelineView::stageFoldToolTip(int row) const
{
    const Group& first = groups_[static_cast<size_t>(rows_[static_cast<size_t>(row)].group)];
    const std::vector<int>& gs = stageGroups_.at(first.stage);
    const Group& slow = groups_[static_cast<size_t>(gs.front())];
    const Group& fast = groups_[static_cast<size_t>(gs.back())];
    const int unloaded = unloadedReplicas(first.stage);
    if (unloaded > 0) {
        const ReplicaSpread& sp = spread_.at(first.stage);
        QString t = tr("<b>stage %1: %2 data-parallel replicas, %3 loaded</b>").arg(first.stage).arg(sp.replicas).arg(gs.size());
        t += tr("<br>drawn: replica %1 (%2 of step or compute time per rank; %3% busy in view)")
                 .arg(slow.replica)
                 .arg(qstr(formatDuration(slow.workNs)))
                 .arg(qRound(slow.busyShare * 100));
        t += tr("<br>all %1 replicas in %2 (job index): busy %3 min, %4 median, %5 max")
                 .arg(sp.replicas)
                 .arg(sp.iteration.toHtmlEscaped())
                 .arg(qstr(formatDuration(sp.busyMinNs)), qstr(formatDuration(sp.busyMedianNs)),
                      qstr(formatDuration(sp.busyMaxNs)));
        if (sp.busiestRank >= 0)
            t += tr("<br>busiest: rank %1; idlest: rank %2").arg(sp.busiestRank).arg(sp.idlestRank);
        t += tr("<br><i>click: load the other %1 replicas' kernels from their shards</i>").arg(unloaded);
        return t;
    }
    QString t = tr("<b>stage %1: %2 data-parallel replicas folded</b>").arg(first.stage).arg(gs.size());
    t += tr("<br>drawn: replica %1, the slowest (%2 of step or compute time per rank; %3% busy in view)")
             .arg(slow.replica)
             .arg(qstr(formatDuration(slow.workNs)))
             .arg(qRound(slow.busyShare * 100));
    t += tr("<br>fastest: replica %1 (%2); the band underneath overlays all the others")
             .arg(fast.replica)
             .arg(qstr(formatDuration(fast.workNs)));
    t += tr("<br><i>click: expand the stage into its replicas</i>");
    return t;
}

QString TimelineView::foldedToolTipAt(const QPoint& pos) const
{
    if (!model_ || pos.x() < plot_->axisRect()->left() || pos.x() >= plot_->axisRect()->right())
        return {};
    const int row = rowAt(pos.y());
    if (row < 0 || rows_[static_cast<size_t>(row)].kind != Row::LaneRow)
        return {};
    const int lane = rows_[static_cast<size_t>(row)].lane;
    const auto range = visibleRange();
    const double x = pos.x() - plot_->axisRect()->left();
    const std::vector<DrawItem> items = model_->drawList(lane, range.first, range.second, plot_->axisRect()->width());
    const auto it = std::find_if(items.begin(), items.end(), [&](const DrawItem& d) { return d.x0 <= x && x < std::max(d.x1, d.x0 + 1); });
    if (it == items.end() || it->count <= 1 || it->event >= 0)
        return {};
    const TimelineModel::GroupSummary g = model_->summarize(lane, it->start, it->end);
    if (g.count <= 1)
        return {};
    const Lane& l = model_->lanes[static_cast<size_t>(lane)];
    QStringList lines;
    const TimeNs span = it->end - it->start;
    lines << QStringLiteral("<b>%1%2 %3 folded</b> (zoom in to see them one by one)")
                 .arg(g.complete ? QString() : QStringLiteral("at least "))
                 .arg(g.count)
                 .arg(l.kind == LaneKind::Bubbles ? QStringLiteral("idle intervals")
                      : l.kind == LaneKind::Steps ? QStringLiteral("steps")
                      : l.kind == LaneKind::Cpu   ? QStringLiteral("CPU ranges")
                                                  : QStringLiteral("kernels"));
    lines << QStringLiteral("over %1: %2 busy (%3 of the span)")
                 .arg(qstr(formatDuration(span)), qstr(formatDuration(g.busyNs)),
                      qstr(formatPercent(span > 0 ? std::min(1.0, double(g.busyNs) / double(span)) : 0.0)));
    if (g.longest >= 0) {
        const Event& e = model_->event(lane, g.longest);
        QString name = qstr(model_->name(e.name));
        if (name.size() > 120)
            name = name.left(120) + QStringLiteral("…");
        lines << QStringLiteral("longest: %1, %2").arg(name.toHtmlEscaped(), qstr(formatDuration(e.duration())));
    }
    // The share of each class (or cause, or step kind) in the group.
    QStringList shares;
    for (size_t c = 0; c < g.byCode.size(); ++c) {
        if (g.byCode[c] <= 0)
            continue;
        QString what;
        switch (l.kind) {
        case LaneKind::Bubbles: what = qstr(std::string(toString(BubbleCause(std::min<int>(int(c), kBubbleCauses - 1))))); break;
        case LaneKind::Steps: what = QString(QChar::fromLatin1(toChar(StepKind(c & 3)))); break;
        case LaneKind::Kernels:
        case LaneKind::Transfers: what = qstr(std::string(toString(WorkClass(std::min<int>(int(c), 6))))); break;
        case LaneKind::Cpu: what = QStringLiteral("CPU"); break;
        case LaneKind::Memory: what = QStringLiteral("memory"); break;
        }
        shares << QStringLiteral("%1 %2").arg(what, qstr(formatPercent(g.busyNs > 0 ? double(g.byCode[c]) / double(g.busyNs) : 0.0)));
    }
    if (shares.size() > 1)
        lines << shares.join(QStringLiteral(" · "));
    return lines.join(QStringLiteral("<br>"));
}

QString TimelineView::toolTipFor(const TimelineEventRef& ref) const
{
    if (!model_ || !ref.valid())
        return {};
    const Lane& l = model_->lanes[static_cast<size_t>(ref.lane)];
    const Event& e = model_->event(ref.lane, ref.event);
    QString name = qstr(model_->name(e.name));
    if (name.size() > 400)
        name = name.left(400) + QStringLiteral("…");
    QStringList lines;
    const qint64 rel = e.start - origin_; // from the time origin, as the axis counts
    if (l.kind == LaneKind::Memory) {
        lines << QStringLiteral("<b>GPU memory in use: %1</b>").arg(qstr(formatBytes(int64_t(e.detail) * kMemoryUnitBytes)));
        lines << QStringLiteral("from %1 for %2 · rank %3 · gpu %4")
                     .arg(qstr(formatDuration(rel)), qstr(formatDuration(e.duration())))
                     .arg(l.rank)
                     .arg(l.device);
        lines << QStringLiteral("the allocator's total after the event recorded then (%1)").arg(qstr(l.label));
        return lines.join(QStringLiteral("<br>"));
    }
    lines << QStringLiteral("<b>%1</b>").arg(name.toHtmlEscaped());
    lines << QStringLiteral("start %1 · duration %2")
                 .arg(qstr(formatDuration(rel)), qstr(formatDuration(e.duration())));
    QString where = QStringLiteral("rank %1").arg(l.rank);
    if (l.stage >= 0)
        where += QStringLiteral(" · stage %1 · replica %2").arg(l.stage).arg(l.replica);
    if (l.kind == LaneKind::Kernels)
        where += QStringLiteral(" · gpu %1 · stream %2 (%3)").arg(l.device).arg(l.stream).arg(qstr(std::string(toString(l.role))));
    lines << where;
    switch (l.kind) {
    case LaneKind::Steps:
        lines << QStringLiteral("step %1 · microbatch %2%3")
                     .arg(QChar::fromLatin1(toChar(StepKind(e.code & 3))))
                     .arg(e.microbatch)
                     .arg(e.chunk ? QStringLiteral(" · chunk %1").arg(e.chunk) : QString());
        break;
    case LaneKind::Bubbles:
        lines << QStringLiteral("idle: %1").arg(qstr(std::string(toString(BubbleCause(std::min<int>(e.code, kBubbleCauses - 1))))));
        break;
    case LaneKind::Kernels:
    case LaneKind::Transfers:
        lines << QStringLiteral("%1").arg(qstr(std::string(toString(WorkClass(std::min<int>(e.code, 6))))));
        if (e.step != kNoStep)
            lines << QStringLiteral("in step %1 · microbatch %2").arg(QChar::fromLatin1(toChar(StepKind(e.step & 3)))).arg(e.microbatch);
        else if (l.kind == LaneKind::Transfers && e.microbatch >= 0)
            lines << QStringLiteral("microbatch %1").arg(e.microbatch);
        break;
    case LaneKind::Cpu:
        if (isQueryTrack(l))
            lines << QStringLiteral("%1, row %2 of the result").arg(qstr(l.label).toHtmlEscaped()).arg(e.detail + 1);
        else
            lines << QStringLiteral("CPU thread %1").arg(l.tid);
        break;
    case LaneKind::Memory:
        break; // answered above
    }
    if (e.detail >= 0 && (l.kind == LaneKind::Kernels || l.kind == LaneKind::Transfers)
        && static_cast<size_t>(e.detail) < model_->comms.size()) {
        const CommDetail& d = model_->comms[static_cast<size_t>(e.detail)];
        QStringList c;
        if (d.op > 0)
            c << qstr(model_->name(d.op)).toHtmlEscaped();
        if (d.bytes >= 0)
            c << qstr(formatBytes(d.bytes));
        if (d.peer >= 0)
            c << QStringLiteral("peer rank %1").arg(d.peer);
        if (d.groupSize > 0)
            c << QStringLiteral("group of %1").arg(d.groupSize);
        if (!c.isEmpty())
            lines << c.join(QStringLiteral(" · "));
    }
    return lines.join(QStringLiteral("<br>"));
}

void TimelineView::selectEvent(const TimelineEventRef& ref)
{
    selected_ = ref;
    if (ref.valid()) {
        selectedLane_ = ref.lane;
        revealLane(ref.lane);
    }
    computeArrows();
    replotOverlay();
    Q_EMIT eventSelected(ref.lane, ref.event);
}

void TimelineView::revealLane(int lane)
{
    if (!model_ || lane < 0 || static_cast<size_t>(lane) >= model_->lanes.size() || hidden_[static_cast<size_t>(lane)])
        return;
    const Lane& l = model_->lanes[static_cast<size_t>(lane)];
    bool rebuilt = false;
    if (replicasFolded_ && rowOfLane(lane) < 0 && !pinned_[static_cast<size_t>(lane)]) {
        const auto sg = stageGroups_.find(l.stage);
        if (sg != stageGroups_.end() && sg->second.size() > 1 && !isStageExpanded(l.stage)) {
            expandedStages_.insert(l.stage);
            rebuilt = true;
        }
    }
    if (rowOfLane(lane) < 0 && !pinned_[static_cast<size_t>(lane)] && isGroupCollapsed(l.stage, l.replica)) {
        collapsed_[{l.stage, l.replica}] = false;
        rebuilt = true;
    }
    if (rebuilt)
        rebuildRows();
    const int row = rowOfLane(lane);
    bool scrolled = false;
    if (row >= 0 && laneRect(lane).isEmpty() && row >= stickyRows()) {
        firstRow_ = clampedFirstRow(row - (visibleRowCount() - stickyRows()) / 2);
        scrolled = true;
    }
    if (rebuilt || scrolled)
        replotBody();
}

void TimelineView::selectNextEvent()
{
    if (!model_ || selectedLane_ < 0)
        return;
    const qint64 t = selected_.valid() ? model_->event(selected_.lane, selected_.event).start : visibleRange().first - 1;
    const int64_t e = model_->nextEvent(selectedLane_, t);
    if (e < 0)
        return;
    selectEvent({selectedLane_, e});
    centreOn(model_->event(selectedLane_, e).start);
}

void TimelineView::selectPreviousEvent()
{
    if (!model_ || selectedLane_ < 0)
        return;
    const qint64 t = selected_.valid() ? model_->event(selected_.lane, selected_.event).start : visibleRange().second;
    const int64_t e = model_->previousEvent(selectedLane_, t);
    if (e < 0)
        return;
    selectEvent({selectedLane_, e});
    centreOn(model_->event(selectedLane_, e).start);
}

void TimelineView::computeArrows()
{
    arrows_.clear();
    if (!model_ || !selected_.valid())
        return;
    const TimelineModel& m = *model_;
    const EventRef ref{selected_.lane, selected_.event};
    const Lane& l = m.lanes[static_cast<size_t>(ref.lane)];
    const Event& e = m.event(ref.lane, ref.event);
    auto add = [&](SelectionArrow::Kind kind, int fromLane, qint64 fromNs, EventRef to, qint64 toNs) {
        arrows_.push_back({kind, fromLane, fromNs, to.lane, toNs, to.event});
    };
    switch (l.kind) {
    case LaneKind::Steps:
        if (auto p = precedingStep(m, ref))
            add(SelectionArrow::Kind::Preceding, p->lane, m.event(p->lane, p->event).end, ref, e.start);
        if (auto d = dependentStep(m, ref))
            add(SelectionArrow::Kind::Dependent, ref.lane, e.end, *d, m.event(d->lane, d->event).start);
        break;
    case LaneKind::Bubbles:
        if (auto w = bubbleWait(m, ref)) {
            if (w->waitedOn)
                add(SelectionArrow::Kind::WaitedOn, w->waitedOn->lane, m.event(w->waitedOn->lane, w->waitedOn->event).end,
                    w->next, m.event(w->next.lane, w->next.event).start);
        }
        break;
    case LaneKind::Kernels:
    case LaneKind::Transfers:
        if (auto o = matchingTransfer(m, ref)) {
            const Event& oe = m.event(o->lane, o->event);
            if (l.kind == LaneKind::Transfers) // a predicted transfer to the step it feeds
                add(SelectionArrow::Kind::Message, ref.lane, e.start, *o, oe.start);
            else if (p2pDirection(m, ref) == P2pDirection::Send) // bytes leave at the send's start, land at the receive's end
                add(SelectionArrow::Kind::Message, ref.lane, e.start, *o, oe.end);
            else
                arrows_.push_back({SelectionArrow::Kind::Message, o->lane, oe.start, ref.lane, e.end, ref.event});
        }
        if (launchLookup_ && e.activity >= 0) {
            if (auto call = launchLookup_(e.activity)) {
                const int cpu = cpuLaneAt(m, l.rank, call->tid, call->start);
                if (cpu >= 0)
                    arrows_.push_back({SelectionArrow::Kind::Launch, cpu, call->start, ref.lane, e.start, ref.event});
            }
        }
        break;
    case LaneKind::Cpu:
    case LaneKind::Memory:
        break;
    }
}

// ---- search ----------------------------------------------------------------

int TimelineView::setSearch(const QString& pattern, bool regex)
{
    hits_.clear();
    hitTimes_.clear();
    hitsPerLane_.clear();
    currentHit_ = -1;
    searchError_.clear();
    int result = 0;
    if (model_ && !pattern.isEmpty()) {
        SearchResult r = model_->search(pattern.toStdString(), regex);
        if (!r.error.empty()) {
            searchError_ = qstr(r.error);
            result = -1;
        } else {
            for (size_t li = 0; li < r.perLane.size(); ++li)
                for (int64_t e : r.perLane[li])
                    hits_.push_back({model_->event(static_cast<int>(li), e).start, static_cast<int>(li), e});
            std::stable_sort(hits_.begin(), hits_.end(), [](const Hit& a, const Hit& b) { return a.start < b.start; });
            hitTimes_.reserve(hits_.size());
            for (const Hit& h : hits_)
                hitTimes_.push_back(h.start);
            hitsPerLane_ = std::move(r.perLane);
            result = static_cast<int>(hits_.size());
        }
    }
    replotBody();
    Q_EMIT searchChanged(searchHitCount(), currentHit_);
    return result;
}

void TimelineView::selectHit(int index)
{
    if (hits_.empty())
        return;
    currentHit_ = (index % searchHitCount() + searchHitCount()) % searchHitCount();
    const Hit& h = hits_[static_cast<size_t>(currentHit_)];
    selectEvent({h.lane, h.event});
    centreOn(h.start);
    Q_EMIT searchChanged(searchHitCount(), currentHit_);
}

void TimelineView::nextSearchHit() { selectHit(currentHit_ + 1); }

void TimelineView::previousSearchHit() { selectHit(currentHit_ < 0 ? -1 : currentHit_ - 1); }

// ---- input -----------------------------------------------------------------

void TimelineView::keyPressEvent(QKeyEvent* event)
{
    if (!handleKey(event))
        QWidget::keyPressEvent(event);
}

bool TimelineView::handleKey(QKeyEvent* event)
{
    const double centre = std::numeric_limits<double>::quiet_NaN();
    switch (event->key()) {
    case Qt::Key_W:
        zoomAbout(kKeyZoom, centre);
        return true;
    case Qt::Key_S:
        zoomAbout(1 / kKeyZoom, centre);
        return true;
    case Qt::Key_A:
    case Qt::Key_Left:
        panBy(-kPanFraction);
        return true;
    case Qt::Key_D:
    case Qt::Key_Right:
        panBy(kPanFraction);
        return true;
    case Qt::Key_Up:
    case Qt::Key_Down: {
        const int delta = event->key() == Qt::Key_Up ? -1 : 1;
        if (event->modifiers() & Qt::AltModifier) {
            if (selectedLane_ >= 0)
                moveLane(selectedLane_, delta);
        } else {
            scrollRows(delta);
        }
        return true;
    }
    case Qt::Key_F:
        fitSelection();
        return true;
    case Qt::Key_0:
    case Qt::Key_Home:
        fitAll();
        return true;
    case Qt::Key_Period:
        selectNextEvent();
        return true;
    case Qt::Key_Comma:
        selectPreviousEvent();
        return true;
    case Qt::Key_F3:
        if (event->modifiers() & Qt::ShiftModifier)
            previousSearchHit();
        else
            nextSearchHit();
        return true;
    case Qt::Key_M:
        if (const auto at = cursorTime())
            addMarker(*at);
        return true;
    case Qt::Key_Question:
        setShortcutsVisible(!shortcutsVisible());
        return true;
    case Qt::Key_Escape:
        haveArea_ = false;
        setShortcutsVisible(false);
        selectEvent({});
        return true;
    default:
        return false;
    }
}

bool TimelineView::eventFilter(QObject* watched, QEvent* event)
{
    if (watched != plot_)
        return QWidget::eventFilter(watched, event);
    switch (event->type()) {
    case QEvent::KeyPress:
        return handleKey(static_cast<QKeyEvent*>(event));
    case QEvent::Wheel:
    case QEvent::MouseButtonPress:
    case QEvent::MouseMove:
    case QEvent::MouseButtonRelease:
    case QEvent::MouseButtonDblClick:
    case QEvent::ContextMenu:
        return handleMouse(event);
    case QEvent::Resize:
        replotBody();
        return false;
    default:
        return false;
    }
}

bool TimelineView::handleMouse(QEvent* event)
{
    if (event->type() == QEvent::ContextMenu)
        return true; // opened on a right click without a drag, see below
    if (event->type() == QEvent::Wheel) {
        auto* w = static_cast<QWheelEvent*>(event);
        const double notches = w->angleDelta().y() / 120.0;
        if (notches == 0)
            return true;
        const bool shift = w->modifiers() & Qt::ShiftModifier, ctrl = w->modifiers() & Qt::ControlModifier;
        if (wheelMode_ == WheelMode::Zoom) {
            if (shift)
                scrollRows(notches > 0 ? -3 : 3);
            else
                zoomAbout(std::pow(kWheelZoom, notches), w->position().x());
        } else {
            if (ctrl)
                zoomAbout(std::pow(kWheelZoom, notches), w->position().x());
            else if (shift)
                panBy(notches > 0 ? -kPanFraction : kPanFraction);
            else
                scrollRows(notches > 0 ? -3 : 3);
        }
        return true;
    }
    auto* m = static_cast<QMouseEvent*>(event);
    const QPoint pos = m->position().toPoint();
    switch (event->type()) {
    case QEvent::MouseButtonPress:
        plot_->setFocus(Qt::MouseFocusReason);
        pressPos_ = lastPos_ = pos;
        pressButton_ = m->button();
        if (m->button() == Qt::LeftButton)
            drag_ = (m->modifiers() & Qt::ShiftModifier) ? Drag::Area : Drag::Pan;
        else if (m->button() == Qt::RightButton)
            drag_ = Drag::Maybe;
        return true;
    case QEvent::MouseMove: {
        const bool moved = (pos - pressPos_).manhattanLength() >= 4;
        if (drag_ == Drag::Maybe && moved)
            drag_ = Drag::Area;
        if (drag_ == Drag::Pan) {
            const double dx = pos.x() - lastPos_.x();
            const QCPRange r = plot_->xAxis->range();
            const double d = -dx * nsPerPixel();
            plot_->xAxis->setRange(r.lower + d, r.upper + d);
            lastPos_ = pos;
            replotBody();
        } else if (drag_ == Drag::Area) {
            overlay_->dragRect = QRect(pressPos_, pos).normalized();
            lastPos_ = pos;
            replotOverlay();
        } else {
            const TimelineEventRef h = eventAt(pos);
            if (!(h == hover_)) {
                hover_ = h;
                replotOverlay();
            }
            // Over a folded block, the tooltip is the group's, not one arbitrary event's.
            const int overRow = rowAt(pos.y());
            const QString group = overRow >= 0 && rows_[static_cast<size_t>(overRow)].kind == Row::StageFold
                                      ? stageFoldToolTip(overRow)
                                      : foldedToolTipAt(pos);
            if (!group.isEmpty())
                QToolTip::showText(m->globalPosition().toPoint(), group, plot_);
            else if (h.valid())
                QToolTip::showText(m->globalPosition().toPoint(), toolTipFor(h), plot_);
            else
                QToolTip::hideText();
        }
        return true;
    }
    case QEvent::MouseButtonRelease: {
        const Drag d = drag_;
        drag_ = Drag::None;
        const bool moved = (pos - pressPos_).manhattanLength() >= 4;
        if (d == Drag::Area) {
            overlay_->dragRect = {};
            finishArea(pressPos_, pos);
        } else if (d == Drag::Maybe) {
            showContextMenu(pos);
        } else if (d == Drag::Pan && !moved) {
            const int row = rowAt(pos.y());
            if (row >= 0 && rows_[static_cast<size_t>(row)].kind == Row::StageFold) {
                const int stage = groups_[static_cast<size_t>(rows_[static_cast<size_t>(row)].group)].stage;
                if (unloadedReplicas(stage) > 0)
                    Q_EMIT replicasRequested(stage);
                else
                    setStageExpanded(stage, true);
            } else if (row >= 0 && rows_[static_cast<size_t>(row)].kind == Row::GroupHeader) {
                const Group& g = groups_[static_cast<size_t>(rows_[static_cast<size_t>(row)].group)];
                setGroupCollapsed(g.stage, g.replica, !isGroupCollapsed(g.stage, g.replica));
            } else {
                if (row >= 0 && rows_[static_cast<size_t>(row)].kind == Row::LaneRow)
                    selectedLane_ = rows_[static_cast<size_t>(row)].lane;
                haveArea_ = false;
                selectEvent(eventAt(pos));
            }
        }
        return true;
    }
    case QEvent::MouseButtonDblClick: {
        const TimelineEventRef h = eventAt(pos);
        if (h.valid()) {
            haveArea_ = false;
            selectEvent(h);
        }
        fitSelection();
        return true;
    }
    default:
        return false;
    }
}

void TimelineView::finishArea(const QPoint& a, const QPoint& b)
{
    if (!model_)
        return;
    const double ax = std::clamp<double>(std::min(a.x(), b.x()), plot_->axisRect()->left(), plot_->axisRect()->right());
    const double bx = std::clamp<double>(std::max(a.x(), b.x()), plot_->axisRect()->left(), plot_->axisRect()->right());
    areaFrom_ = timeAt(ax);
    areaTo_ = timeAt(bx);
    haveArea_ = areaTo_ > areaFrom_;
    // The lanes of the rows in the slots the drag crossed (pinned and scrolled
    // rows alike, as shown); a collapsed group or folded stage stands for all its lanes.
    const int top = plot_->axisRect()->top(), rh = rowHeight();
    const int s0 = std::max(0, (std::max(std::min(a.y(), b.y()), top) - top) / rh);
    const int s1 = std::min(visibleRowCount(), (std::min(std::max(a.y(), b.y()), plot_->axisRect()->bottom() - 1) - top) / rh);
    areaRows_.assign(static_cast<size_t>(rowCount()), 0);
    std::vector<int> lanes;
    for (int s = s0; s <= s1; ++s) {
        const int r = rowInSlot(s);
        if (r < 0 || areaRows_[static_cast<size_t>(r)])
            continue;
        areaRows_[static_cast<size_t>(r)] = 1;
        const Row& row = rows_[static_cast<size_t>(r)];
        if (row.kind == Row::LaneRow)
            lanes.push_back(row.lane);
        else if (row.kind == Row::StageFold) {
            for (int gi : stageGroups_.at(groups_[static_cast<size_t>(row.group)].stage))
                for (int li : groups_[static_cast<size_t>(gi)].lanes)
                    if (!hidden_[static_cast<size_t>(li)])
                        lanes.push_back(li);
        } else if (row.kind == Row::GroupHeader) {
            const Group& g = groups_[static_cast<size_t>(row.group)];
            if (isGroupCollapsed(g.stage, g.replica))
                for (int li : g.lanes)
                    if (!hidden_[static_cast<size_t>(li)])
                        lanes.push_back(li);
        }
    }
    emitArea(std::move(lanes));
}

void TimelineView::selectArea(qint64 fromNs, qint64 toNs, const std::vector<int>& lanes)
{
    if (!model_)
        return;
    areaFrom_ = std::min(fromNs, toNs);
    areaTo_ = std::max(fromNs, toNs);
    haveArea_ = areaTo_ > areaFrom_;
    areaRows_.assign(static_cast<size_t>(rowCount()), 0);
    std::vector<int> valid;
    for (int lane : lanes) {
        if (lane < 0 || static_cast<size_t>(lane) >= model_->lanes.size())
            continue;
        valid.push_back(lane);
        if (const int row = rowOfLane(lane); row >= 0)
            areaRows_[static_cast<size_t>(row)] = 1;
    }
    emitArea(std::move(valid));
}

void TimelineView::emitArea(std::vector<int> lanes)
{
    areaLanes_ = lanes;
    replotOverlay();
    Q_EMIT areaSelected(areaFrom_, areaTo_, model_->areaStats(lanes, areaFrom_, areaTo_));
}

std::vector<int> TimelineView::areaRanks() const
{
    std::set<int> ranks;
    if (model_ && haveArea_)
        for (int lane : areaLanes_) {
            const Lane& l = model_->lanes[static_cast<size_t>(lane)];
            if (!l.baseline && !isQueryTrack(l) && l.rank >= 0)
                ranks.insert(l.rank);
        }
    return {ranks.begin(), ranks.end()};
}

void TimelineView::showContextMenu(const QPoint& pos)
{
    if (!model_)
        return;
    QMenu menu(this);
    const int row = rowAt(pos.y());
    if (row >= 0) {
        const Row& r = rows_[static_cast<size_t>(row)];
        if (r.kind == Row::LaneRow) {
            const int lane = r.lane;
            menu.addAction(tr("Hide track"), this, [this, lane] { setLaneHidden(lane, true); });
            menu.addAction(isLanePinned(lane) ? tr("Unpin track") : tr("Pin track to the top"), this,
                           [this, lane] { setLanePinned(lane, !isLanePinned(lane)); });
            menu.addAction(tr("Move track up\tAlt+Up"), this, [this, lane] { moveLane(lane, -1); });
            menu.addAction(tr("Move track down\tAlt+Down"), this, [this, lane] { moveLane(lane, 1); });
        }
        if (r.kind == Row::StageFold) {
            const int s = groups_[static_cast<size_t>(r.group)].stage;
            menu.addAction(tr("Expand stage %1's replicas").arg(s), this, [this, s] { setStageExpanded(s, true); });
        } else if (r.group >= 0 && replicasFolded_ && isStageExpanded(groups_[static_cast<size_t>(r.group)].stage)) {
            const int s = groups_[static_cast<size_t>(r.group)].stage;
            menu.addAction(tr("Fold stage %1's replicas").arg(s), this, [this, s] { setStageExpanded(s, false); });
        }
        if (r.group >= 0 && r.kind != Row::StageFold) {
            const Group& g = groups_[static_cast<size_t>(r.group)];
            const int s = g.stage, rep = g.replica;
            menu.addAction(isGroupCollapsed(s, rep) ? tr("Expand group") : tr("Collapse group"), this,
                           [this, s, rep] { setGroupCollapsed(s, rep, !isGroupCollapsed(s, rep)); });
        }
    }
    if (!stageGroups_.empty() && std::any_of(stageGroups_.begin(), stageGroups_.end(), [](const auto& sg) { return sg.second.size() > 1; })) {
        QAction* fold = menu.addAction(tr("Fold replicas: one row per stage"), this, [this](bool on) { setReplicasFolded(on); });
        fold->setCheckable(true);
        fold->setChecked(replicasFolded_);
    }
    const auto hiddenCount = std::count(hidden_.begin(), hidden_.end(), 1);
    if (hiddenCount > 0)
        menu.addAction(tr("Show %1 hidden tracks").arg(hiddenCount), this, [this] { showAllLanes(); });
    if (std::any_of(model_->lanes.begin(), model_->lanes.end(), [](const Lane& l) { return l.kind == LaneKind::Cpu; })) {
        QAction* cpu = menu.addAction(tr("Show CPU annotation tracks"), this, [this](bool on) { setCpuLanesShown(on); });
        cpu->setCheckable(true);
        cpu->setChecked(cpuShown_);
    }
    menu.addSeparator();
    const qint64 at = timeAt(pos.x());
    menu.addAction(tr("Count time from here"), this, [this, at] {
        setTimeOrigin(at, tr("%1 after the job start").arg(qstr(formatDuration(at - model_->start))));
    });
    menu.addAction(tr("Count time from the job start"), this, [this] { setTimeOrigin(model_->start, tr("the job start")); });
    menu.addAction(tr("Add a time marker here\tM"), this, [this, at] { addMarker(at); });
    if (!markers_.empty())
        menu.addAction(tr("Clear %1 time markers").arg(markers_.size()), this, [this] { clearMarkers(); });
    menu.addSeparator();
    menu.addAction(tr("Collapse all groups"), this, [this] { setAllGroupsCollapsed(true); });
    menu.addAction(tr("Expand all groups"), this, [this] { setAllGroupsCollapsed(false); });
    menu.addSeparator();
    QAction* wheelScrolls = menu.addAction(tr("Wheel scrolls, Ctrl+wheel zooms (as Nsight Systems)"), this,
                                           [this](bool on) { setWheelMode(on ? WheelMode::Scroll : WheelMode::Zoom); });
    wheelScrolls->setCheckable(true);
    wheelScrolls->setChecked(wheelMode_ == WheelMode::Scroll);
    menu.addSeparator();
    QAction* byClass = menu.addAction(tr("Colour kernels by work class"), this, [this] { setColorBy(ColorBy::Class); });
    QAction* byStep = menu.addAction(tr("Colour kernels by step"), this, [this] { setColorBy(ColorBy::Step); });
    byClass->setCheckable(true);
    byStep->setCheckable(true);
    byClass->setChecked(colorBy_ == ColorBy::Class);
    byStep->setChecked(colorBy_ == ColorBy::Step);
    menu.exec(plot_->mapToGlobal(pos));
}

// ---- painting ----------------------------------------------------------------

void TimelineBody::draw(QCPPainter* p)
{
    TimelineView& v = *view_;
    int prims = 0;
    const QRect ar = mParentPlot->axisRect()->rect();
    const int rh = v.rowHeight();
    const QFontMetrics fm(mParentPlot->font());
    p->setFont(mParentPlot->font());
    if (!v.model_) {
        v.lastPrimitives_ = 0;
        return;
    }
    const ViewColors colors = viewColors(v.palette());
    const QColor text = colors.text;
    const int sticky = v.stickyRows();
    for (int slot = 0; slot <= v.visibleRowCount(); ++slot) {
        const int row = v.rowInSlot(slot);
        if (row < 0)
            break;
        const TimelineView::Row& r = v.rows_[static_cast<size_t>(row)];
        const int y = ar.top() + slot * rh;
        const QRect body(ar.left(), y, ar.width(), rh);
        if (r.kind != TimelineView::Row::LaneRow) {
            p->fillRect(QRect(0, y, r.kind == TimelineView::Row::StageFold ? ar.left() : ar.right(), rh), colors.header);
            ++prims;
            QString label;
            if (r.kind == TimelineView::Row::PinnedHeader) {
                label = QStringLiteral("pinned");
            } else if (r.kind == TimelineView::Row::StageFold) {
                // The slowest replica on top; under it, every other replica
                // faintly, so the spread across replicas shows as density.
                const std::vector<int>& gs = v.stageGroups_.at(v.groups_[static_cast<size_t>(r.group)].stage);
                TimelineView::Group& slow = v.groups_[static_cast<size_t>(gs.front())];
                const int spreadH = std::max(3, rh / 4);
                const QRect top(body.left(), body.top(), body.width(), rh - spreadH - 1);
                const QRect spread(body.left(), body.bottom() - spreadH + 1, body.width(), spreadH);
                double busyPx = 0;
                for (int li : slow.summaryLanes)
                    drawLane(p, li, top, prims, true, &busyPx);
                slow.busyShare = slow.summaryLanes.empty() ? 0 : busyPx / (ar.width() * static_cast<double>(slow.summaryLanes.size()));
                p->setOpacity(std::clamp(2.0 / static_cast<double>(gs.size()), 0.08, 0.5));
                for (size_t k = 1; k < gs.size(); ++k)
                    for (int li : v.groups_[static_cast<size_t>(gs[k])].summaryLanes)
                        drawLane(p, li, spread, prims, true, nullptr);
                p->setOpacity(1.0);
                // The busy share and the other replicas are in the tooltip.
                const int unloaded = v.unloadedReplicas(slow.stage);
                // Replicas not loaded: how many are, in as few words (the tooltip says the rest).
                label = QString::fromUtf8("▸ ") +
                        (unloaded > 0 ? QStringLiteral("stage %1 · ×%2 · %3 loaded")
                                            .arg(slow.stage)
                                            .arg(gs.size() + static_cast<size_t>(unloaded))
                                            .arg(gs.size())
                                      : QStringLiteral("stage %1 · ×%2 · replica %3").arg(slow.stage).arg(gs.size()).arg(slow.replica));
            } else {
                TimelineView::Group& g = v.groups_[static_cast<size_t>(r.group)];
                const bool collapsed = v.isGroupCollapsed(g.stage, g.replica);
                label = QString::fromUtf8(collapsed ? "▸ " : "▾ ")
                        + (g.stage < 0 ? QStringLiteral("outside the pipeline") : QStringLiteral("stage %1 · replica %2").arg(g.stage).arg(g.replica));
                if (collapsed) {
                    // Utilisation: each rank's steps (or compute stream) drawn with its busy share.
                    double busyPx = 0;
                    for (int li : g.summaryLanes)
                        drawLane(p, li, body, prims, true, &busyPx);
                    g.busyShare = g.summaryLanes.empty() ? 0 : busyPx / (ar.width() * static_cast<double>(g.summaryLanes.size()));
                    label += QStringLiteral(" · %1% busy").arg(qRound(g.busyShare * 100));
                }
            }
            QFont bold = mParentPlot->font();
            bold.setBold(true);
            p->setFont(bold);
            p->setPen(text);
            if (r.kind == TimelineView::Row::StageFold)
                label = fm.elidedText(label, Qt::ElideRight, v.labelWidth_ - 8);
            p->drawText(QRect(4, y, v.labelWidth_ - 8 + (r.kind == TimelineView::Row::GroupHeader ? ar.width() : 0), rh),
                        Qt::AlignVCenter | Qt::AlignLeft, label);
            p->setFont(mParentPlot->font());
            ++prims;
            continue;
        }
        drawLane(p, r.lane, body, prims, false, nullptr);
        const bool sel = r.lane == v.selectedLane_;
        p->setPen(sel ? toQColor(kSelectionHex) : text);
        p->drawText(QRect(4, y, v.labelWidth_ - 8, rh), Qt::AlignVCenter | Qt::AlignLeft,
                    fm.elidedText(v.laneTitle(r.lane), Qt::ElideMiddle, v.labelWidth_ - 8));
        ++prims;
    }
    // A line under what stays on top (the pinned tracks, a sticky group header) while the rest scrolls.
    const int stuck = sticky + (v.stickyHeaderRow() >= 0 ? 1 : 0);
    if (stuck > 0) {
        p->setPen(QPen(colors.separator, 1));
        p->drawLine(QPoint(0, ar.top() + stuck * rh), QPoint(ar.right(), ar.top() + stuck * rh));
        ++prims;
    }
    // Iteration boundaries.
    QPen dashed(isDark(v.palette()) ? colors.separator : toQColor(kIterationHex));
    dashed.setStyle(Qt::DashLine);
    p->setPen(dashed);
    const auto range = v.visibleRange();
    for (const IterationMark& it : v.model_->iterations)
        for (TimeNs t : {it.start, it.end})
            if (t >= range.first && t <= range.second) {
                const double x = v.xOf(t);
                p->drawLine(QPointF(x, ar.top()), QPointF(x, ar.bottom()));
                ++prims;
            }
    // Search hits along the time axis: one mark per pixel column holding a hit.
    if (!v.hitTimes_.empty()) {
        const QColor mark = toQColor(kHighlightHex);
        int runStart = -1;
        for (int x = 0; x <= ar.width(); ++x) {
            bool hit = false;
            if (x < ar.width()) {
                const qint64 t0 = v.timeAt(ar.left() + x), t1 = v.timeAt(ar.left() + x + 1);
                auto it = std::lower_bound(v.hitTimes_.begin(), v.hitTimes_.end(), t0);
                hit = it != v.hitTimes_.end() && *it < t1;
            }
            if (hit && runStart < 0)
                runStart = x;
            if (!hit && runStart >= 0) {
                p->fillRect(QRect(ar.left() + runStart, ar.bottom() - 5, x - runStart, 6), mark);
                ++prims;
                runStart = -1;
            }
        }
    }
    v.lastPrimitives_ = prims;
}

// A counter track: the value as a filled step line, scaled to the lane's
// peak (so panning keeps the scale), per pixel column its highest sample.
void TimelineBody::drawCounter(QCPPainter* p, const Lane& lane, const QRect& r, qint64 from, qint64 to, int& prims)
{
    if (lane.events.empty() || to <= from)
        return;
    int32_t peak = 1;
    for (const Event& e : lane.events)
        peak = std::max(peak, e.detail);
    const double pxPerNs = double(r.width()) / double(to - from);
    auto first = std::upper_bound(lane.events.begin(), lane.events.end(), from,
                                  [](qint64 t, const Event& e) { return t < e.start; });
    if (first != lane.events.begin())
        --first;
    const int top = r.top() + 1, h = r.height() - 2;
    QPolygonF poly;
    poly << QPointF(r.left(), top + h);
    int column = -1;
    double columnY = top + h;
    for (auto it = first; it != lane.events.end() && it->start < to; ++it) {
        const double x0 = std::clamp(double(it->start - from) * pxPerNs, 0.0, double(r.width()));
        const double x1 = std::clamp(double(it->end - from) * pxPerNs, 0.0, double(r.width()));
        const double y = top + h - double(h) * double(it->detail) / double(peak);
        const int col = int(x0);
        if (col == column) { // several samples in one pixel: keep the highest
            columnY = std::min(columnY, y);
            poly.back().setY(columnY);
            poly[poly.size() - 2].setY(columnY);
            if (x1 > poly.back().x())
                poly.back().setX(r.left() + x1);
            continue;
        }
        column = col;
        columnY = y;
        poly << QPointF(r.left() + x0, y) << QPointF(r.left() + std::max(x1, x0 + 1), y);
    }
    poly << QPointF(poly.back().x(), top + h);
    // The text colour, faint: no colour of the legend (which gives each one a meaning) is taken.
    const QColor line = viewColors(view_->palette()).text;
    QColor fill = line;
    fill.setAlpha(40);
    p->setPen(QPen(line, 1));
    p->setBrush(fill);
    p->drawPolygon(poly);
    p->setBrush(Qt::NoBrush);
    ++prims;
}

void TimelineBody::drawLane(QCPPainter* p, int laneIndex, const QRect& r, int& prims, bool summary, double* busyPx)
{
    TimelineView& v = *view_;
    const TimelineModel& m = *v.model_;
    const Lane& lane = m.lanes[static_cast<size_t>(laneIndex)];
    const auto range = v.visibleRange();
    if (lane.kind == LaneKind::Memory) {
        drawCounter(p, lane, r, range.first, range.second, prims);
        return;
    }
    m.drawList(laneIndex, range.first, range.second, r.width(), items_);
    const std::vector<int64_t>* hits = static_cast<size_t>(laneIndex) < v.hitsPerLane_.size() && !v.hitsPerLane_[static_cast<size_t>(laneIndex)].empty()
                                           ? &v.hitsPerLane_[static_cast<size_t>(laneIndex)]
                                           : nullptr;
    const QFontMetrics fm(mParentPlot->font());
    const int top = r.top() + 2, h = r.height() - 4;
    const QColor highlight = toQColor(kHighlightHex);
    for (const DrawItem& d : items_) {
        const double x0 = std::max(0.0, d.x0), x1 = std::min<double>(r.width(), d.x1);
        if (x1 <= x0 && d.x1 < 0)
            continue;
        Rgb c{};
        const Event* ev = d.event >= 0 ? &lane.events[static_cast<size_t>(d.event)] : nullptr;
        switch (lane.kind) {
        case LaneKind::Steps:
            c = microbatchTint(stepColor(StepKind(d.code & 3)), ev ? ev->microbatch : -1);
            break;
        case LaneKind::Bubbles:
            c = causeColor(BubbleCause(std::min<int>(d.code, kBubbleCauses - 1)));
            break;
        case LaneKind::Kernels:
        case LaneKind::Transfers:
            c = classColor(WorkClass(std::min<int>(d.code, 6)));
            if (v.colorBy_ == TimelineView::ColorBy::Step && ev && ev->step != kNoStep)
                c = microbatchTint(stepColor(StepKind(ev->step & 3)), ev->microbatch);
            break;
        case LaneKind::Cpu:
        case LaneKind::Memory:
            c = rgbFromHex(kCpuHex);
            break;
        }
        // A folded block is drawn as what it holds: a faint band over its span
        // and, rising from the bottom, a bar as tall as the share of the span
        // its events fill. Fifty 1 µs gaps across 10 ms of work read as a
        // sliver, not as a solid idle bar.
        QRectF rect(r.left() + x0, top, std::max(1.0, x1 - x0), h);
        const bool folded = d.count > 1 && !ev;
        if (summary || (folded && d.busyFraction < 0.98f)) {
            if (!summary) {
                p->fillRect(rect, toQColor(c, 45));
                ++prims;
            }
            const double bh = std::max(2.0, h * static_cast<double>(d.busyFraction));
            rect = QRectF(rect.left(), top + h - bh, rect.width(), bh);
        }
        if (busyPx)
            *busyPx += (x1 - x0) * static_cast<double>(d.busyFraction);
        p->fillRect(rect, toQColor(c, 255));
        ++prims;
        if (folded && !summary)
            rect = QRectF(r.left() + x0, top, std::max(1.0, x1 - x0), h); // the count and outline use the whole span
        if (summary)
            continue;
        if (hits) {
            // A hit inside this item: outline it.
            const auto& ev0 = lane.events;
            const int64_t first = d.event >= 0 ? d.event
                                               : std::lower_bound(ev0.begin(), ev0.end(), d.start, [](const Event& e, TimeNs t) { return e.start < t; }) - ev0.begin();
            const int64_t last = d.event >= 0 ? d.event + 1
                                              : std::lower_bound(ev0.begin(), ev0.end(), d.end, [](const Event& e, TimeNs t) { return e.start < t; }) - ev0.begin();
            auto it = std::lower_bound(hits->begin(), hits->end(), first);
            if (it != hits->end() && *it < last) {
                p->setPen(QPen(highlight, 2));
                p->setBrush(Qt::NoBrush);
                p->drawRect(rect.adjusted(0, 0, -1, -1));
                ++prims;
            }
        }
        // A folded block says how many events it stands for, when that fits.
        if (!ev && d.count > 1 && rect.width() >= 14) {
            const QString n = QString::number(d.count);
            if (fm.horizontalAdvance(n) + 4 <= rect.width()) {
                p->setPen(toQColor(kTextHex));
                p->drawText(rect, Qt::AlignCenter, n);
                ++prims;
            }
        }
        // The microbatch inside a step (or a kernel coloured by step) when it fits.
        if (ev && rect.width() >= 12) {
            QString label;
            if (lane.kind == LaneKind::Steps)
                label = qstr(m.name(ev->name));
            else if (v.colorBy_ == TimelineView::ColorBy::Step && ev->microbatch >= 0)
                label = QString::number(ev->microbatch);
            if (!label.isEmpty()) {
                if (fm.horizontalAdvance(label) + 4 > rect.width() && ev->microbatch >= 0)
                    label = QString::number(ev->microbatch);
                if (fm.horizontalAdvance(label) + 4 <= rect.width()) {
                    p->setPen(toQColor(kTextHex));
                    p->drawText(rect, Qt::AlignCenter, label);
                    ++prims;
                }
            }
        }
    }
}

void TimelineOverlay::outline(QCPPainter* p, const TimelineEventRef& ref, const QColor& c, int width)
{
    TimelineView& v = *view_;
    if (!ref.valid())
        return;
    const QRect lr = v.laneRect(ref.lane);
    if (lr.isEmpty())
        return;
    const Event& e = v.model_->event(ref.lane, ref.event);
    const double x0 = std::max<double>(lr.left() - 2, v.xOf(e.start));
    const double x1 = std::min<double>(lr.right() + 2, v.xOf(e.end));
    p->setPen(QPen(c, width));
    p->setBrush(Qt::NoBrush);
    p->drawRect(QRectF(x0 - 1, lr.top() + 1, std::max(2.0, x1 - x0 + 2), lr.height() - 2));
}

void TimelineOverlay::draw(QCPPainter* p)
{
    TimelineView& v = *view_;
    if (!v.model_)
        return;
    const QRect ar = mParentPlot->axisRect()->rect();
    if (v.haveArea_) {
        // Only the rows the statistics count are shaded; the time range is marked over the whole height.
        const double x0 = v.xOf(v.areaFrom_), x1 = v.xOf(v.areaTo_);
        const int rh = v.rowHeight();
        for (int slot = 0; slot <= v.visibleRowCount(); ++slot) {
            const int row = v.rowInSlot(slot);
            if (row < 0 || static_cast<size_t>(row) >= v.areaRows_.size() || !v.areaRows_[static_cast<size_t>(row)])
                continue;
            const int top = ar.top() + slot * rh, bottom = std::min(ar.bottom(), top + rh);
            if (bottom > top)
                p->fillRect(QRectF(x0, top, x1 - x0, bottom - top), QColor(9, 105, 218, 40));
        }
        p->setPen(QPen(QColor(9, 105, 218, 160), 1, Qt::DashLine));
        p->drawLine(QPointF(x0, ar.top()), QPointF(x0, ar.bottom()));
        p->drawLine(QPointF(x1, ar.top()), QPointF(x1, ar.bottom()));
    }
    if (!dragRect.isNull())
        p->fillRect(QRectF(dragRect.left(), ar.top(), dragRect.width(), ar.height()), QColor(9, 105, 218, 50));
    // Notes on time ranges: a band over the tracks, the text at its top.
    for (const TimelineView::TimeNote& n : v.notes_) {
        const double x0 = std::max<double>(v.xOf(n.fromNs), ar.left()), x1 = std::min<double>(v.xOf(n.toNs), ar.right());
        if (x1 < x0)
            continue;
        const QColor nc(0xbf, 0x87, 0x00);
        p->fillRect(QRectF(x0, ar.top(), std::max(1.0, x1 - x0), ar.height()), QColor(nc.red(), nc.green(), nc.blue(), 28));
        const QFontMetrics fm(mParentPlot->font());
        const QString t = fm.elidedText(n.text, Qt::ElideRight, std::max(0, int(x1 - x0) - 6));
        if (!t.isEmpty()) {
            const QRectF box(x0 + 2, ar.bottom() - fm.height() - 4, fm.horizontalAdvance(t) + 6, fm.height() + 2);
            p->fillRect(box, viewColors(v.palette()).labelBox);
            p->setPen(QPen(nc, 1));
            p->drawText(box, Qt::AlignCenter, t);
        }
    }
    // Time markers, and between neighbours the time between them (a ruler).
    if (!v.markers_.empty()) {
        const QColor mc(0xc2, 0x18, 0x5b);
        p->setPen(QPen(mc, 1));
        const QFontMetrics fm(mParentPlot->font());
        double lastX = std::numeric_limits<double>::quiet_NaN();
        qint64 lastT = 0;
        for (size_t i = 0; i < v.markers_.size(); ++i) {
            const double x = v.xOf(v.markers_[i]);
            if (x >= ar.left() && x <= ar.right()) {
                p->drawLine(QPointF(x, ar.top()), QPointF(x, ar.bottom()));
                const QString& label = v.markerLabels_[i];
                if (!label.isEmpty()) { // under the ruler, right of the line
                    const QRectF box(x + 2, ar.top() + fm.height() + 5, fm.horizontalAdvance(label) + 6, fm.height() + 2);
                    p->fillRect(box, viewColors(v.palette()).labelBox);
                    p->drawText(box, Qt::AlignCenter, label);
                }
            }
            if (i > 0) {
                const double x0 = std::max<double>(lastX, ar.left()), x1 = std::min<double>(x, ar.right());
                if (x1 > x0) {
                    const QString d = qstr(formatDuration(v.markers_[i] - lastT));
                    const int w = fm.horizontalAdvance(d) + 8;
                    const QRectF box((x0 + x1) / 2 - w / 2.0, ar.top() + 1, w, fm.height() + 2);
                    p->drawLine(QPointF(x0, ar.top() + 1 + box.height() / 2), QPointF(x1, ar.top() + 1 + box.height() / 2));
                    if (x1 - x0 > w) {
                        p->fillRect(box, viewColors(v.palette()).labelBox);
                        p->drawText(box, Qt::AlignCenter, d);
                    }
                }
            }
            lastX = x;
            lastT = v.markers_[i];
        }
    }
    outline(p, v.hover_, viewColors(v.palette()).hoverOutline, 1);
    outline(p, v.selected_, toQColor(kSelectionHex), 2);
    // The selection's arrows (see TimelineView::selectionArrows); an end on a
    // track that is not on screen points at the top or bottom edge.
    for (const SelectionArrow& a : v.arrows_) {
        auto yOf = [&](int lane) -> std::optional<double> {
            const QRect r = v.laneRect(lane);
            if (!r.isEmpty())
                return r.center().y();
            const int row = v.rowOfLane(lane);
            if (row < 0)
                return std::nullopt;
            return row < v.firstRow_ ? ar.top() + v.stickyRows() * v.rowHeight() + 1.0 : ar.bottom() - 1.0;
        };
        const auto y0 = yOf(a.fromLane), y1 = yOf(a.toLane);
        if (!y0 || !y1)
            continue;
        QColor c = toQColor(kSelectionHex);
        Qt::PenStyle style = Qt::SolidLine;
        switch (a.kind) {
        case SelectionArrow::Kind::Preceding:
        case SelectionArrow::Kind::WaitedOn:
            style = Qt::DashLine;
            break;
        case SelectionArrow::Kind::Launch:
            c = QColor(0x6e, 0x40, 0xc9);
            break;
        default:
            break;
        }
        const QPointF from(v.xOf(a.fromNs), *y0), to(v.xOf(a.toNs), *y1);
        QPen pen(c, 1.5);
        pen.setStyle(style);
        p->setPen(pen);
        p->drawLine(from, to);
        p->setPen(QPen(c, 1.5));
        const double ang = std::atan2(to.y() - from.y(), to.x() - from.x());
        for (double d : {0.5, -0.5})
            p->drawLine(to, to - QPointF(8 * std::cos(ang + d), 8 * std::sin(ang + d)));
        if (a.toEvent >= 0 && a.toLane != v.selected_.lane)
            outline(p, {a.toLane, a.toEvent}, c, 1);
    }
}

} // namespace pipescope::gui
