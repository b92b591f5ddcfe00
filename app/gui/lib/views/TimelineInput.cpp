// The timeline view's interaction: selecting events and stepping through
// them, search hits, keys, the mouse (zoom, pan, the dragged area) and the
// track menu (TimelineView.h).
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
#include <QCursor>
#include <QKeyEvent>
#include <QMenu>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollBar>
#include <QSettings>
#include <QToolTip>
#include <QWheelEvent>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace pipescope::gui {

using namespace pipescope::timeline;
using namespace timelineview;

// ---- selection -------------------------------------------------------------

void TimelineView::selectEvent(const TimelineEventRef& ref)
{
    job_.selected = ref;
    if (ref.valid()) {
        job_.selectedLane = ref.lane;
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
        job_.firstRow = clampedFirstRow(row - (visibleRowCount() - stickyRows()) / 2);
        scrolled = true;
    }
    if (rebuilt || scrolled)
        replotBody();
}

void TimelineView::selectNextEvent()
{
    if (!model_ || job_.selectedLane < 0)
        return;
    const qint64 t = job_.selected.valid() ? model_->event(job_.selected.lane, job_.selected.event).start : visibleRange().first - 1;
    const int64_t e = model_->nextEvent(job_.selectedLane, t);
    if (e < 0)
        return;
    selectEvent({job_.selectedLane, e});
    centreOn(model_->event(job_.selectedLane, e).start);
}

void TimelineView::selectPreviousEvent()
{
    if (!model_ || job_.selectedLane < 0)
        return;
    const qint64 t = job_.selected.valid() ? model_->event(job_.selected.lane, job_.selected.event).start : visibleRange().second;
    const int64_t e = model_->previousEvent(job_.selectedLane, t);
    if (e < 0)
        return;
    selectEvent({job_.selectedLane, e});
    centreOn(model_->event(job_.selectedLane, e).start);
}

void TimelineView::computeArrows()
{
    job_.arrows.clear();
    if (!model_ || !job_.selected.valid())
        return;
    const TimelineModel& m = *model_;
    const EventRef ref{job_.selected.lane, job_.selected.event};
    const Lane& l = m.lanes[static_cast<size_t>(ref.lane)];
    const Event& e = m.event(ref.lane, ref.event);
    auto add = [&](SelectionArrow::Kind kind, int fromLane, qint64 fromNs, EventRef to, qint64 toNs) {
        job_.arrows.push_back({kind, fromLane, fromNs, to.lane, toNs, to.event});
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
                job_.arrows.push_back({SelectionArrow::Kind::Message, o->lane, oe.start, ref.lane, e.end, ref.event});
        }
        if (launchLookup_ && e.activity >= 0) {
            if (auto call = launchLookup_(e.activity)) {
                const int cpu = cpuLaneAt(m, l.rank, call->tid, call->start);
                if (cpu >= 0)
                    job_.arrows.push_back({SelectionArrow::Kind::Launch, cpu, call->start, ref.lane, e.start, ref.event});
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
    job_.hits.clear();
    job_.hitTimes.clear();
    job_.hitsPerLane.clear();
    job_.currentHit = -1;
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
                    job_.hits.push_back({model_->event(static_cast<int>(li), e).start, static_cast<int>(li), e});
            std::stable_sort(job_.hits.begin(), job_.hits.end(), [](const Hit& a, const Hit& b) { return a.start < b.start; });
            job_.hitTimes.reserve(job_.hits.size());
            for (const Hit& h : job_.hits)
                job_.hitTimes.push_back(h.start);
            job_.hitsPerLane = std::move(r.perLane);
            result = static_cast<int>(job_.hits.size());
        }
    }
    replotBody();
    Q_EMIT searchChanged(searchHitCount(), job_.currentHit);
    return result;
}

void TimelineView::selectHit(int index)
{
    if (job_.hits.empty())
        return;
    job_.currentHit = (index % searchHitCount() + searchHitCount()) % searchHitCount();
    const Hit& h = job_.hits[static_cast<size_t>(job_.currentHit)];
    selectEvent({h.lane, h.event});
    centreOn(h.start);
    Q_EMIT searchChanged(searchHitCount(), job_.currentHit);
}

void TimelineView::nextSearchHit() { selectHit(job_.currentHit + 1); }

void TimelineView::previousSearchHit() { selectHit(job_.currentHit < 0 ? -1 : job_.currentHit - 1); }

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
            if (job_.selectedLane >= 0)
                moveLane(job_.selectedLane, delta);
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
        job_.haveArea = false;
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
            if (!(h == job_.hover)) {
                job_.hover = h;
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
                    job_.selectedLane = rows_[static_cast<size_t>(row)].lane;
                job_.haveArea = false;
                selectEvent(eventAt(pos));
            }
        }
        return true;
    }
    case QEvent::MouseButtonDblClick: {
        const TimelineEventRef h = eventAt(pos);
        if (h.valid()) {
            job_.haveArea = false;
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
    job_.areaFrom = timeAt(ax);
    job_.areaTo = timeAt(bx);
    job_.haveArea = job_.areaTo > job_.areaFrom;
    // The lanes of the rows in the slots the drag crossed (pinned and scrolled
    // rows alike, as shown); a collapsed group or folded stage stands for all its lanes.
    const int top = plot_->axisRect()->top(), rh = rowHeight();
    const int s0 = std::max(0, (std::max(std::min(a.y(), b.y()), top) - top) / rh);
    const int s1 = std::min(visibleRowCount(), (std::min(std::max(a.y(), b.y()), plot_->axisRect()->bottom() - 1) - top) / rh);
    job_.areaRows.assign(static_cast<size_t>(rowCount()), 0);
    std::vector<int> lanes;
    for (int s = s0; s <= s1; ++s) {
        const int r = rowInSlot(s);
        if (r < 0 || job_.areaRows[static_cast<size_t>(r)])
            continue;
        job_.areaRows[static_cast<size_t>(r)] = 1;
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
    job_.areaFrom = std::min(fromNs, toNs);
    job_.areaTo = std::max(fromNs, toNs);
    job_.haveArea = job_.areaTo > job_.areaFrom;
    job_.areaRows.assign(static_cast<size_t>(rowCount()), 0);
    std::vector<int> valid;
    for (int lane : lanes) {
        if (lane < 0 || static_cast<size_t>(lane) >= model_->lanes.size())
            continue;
        valid.push_back(lane);
        if (const int row = rowOfLane(lane); row >= 0)
            job_.areaRows[static_cast<size_t>(row)] = 1;
    }
    emitArea(std::move(valid));
}

void TimelineView::emitArea(std::vector<int> lanes)
{
    job_.areaLanes = lanes;
    replotOverlay();
    Q_EMIT areaSelected(job_.areaFrom, job_.areaTo, model_->areaStats(lanes, job_.areaFrom, job_.areaTo));
}

std::vector<int> TimelineView::areaRanks() const
{
    std::set<int> ranks;
    if (model_ && job_.haveArea)
        for (int lane : job_.areaLanes) {
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
    if (!job_.markers.empty())
        menu.addAction(tr("Clear %1 time markers").arg(job_.markers.size()), this, [this] { clearMarkers(); });
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

} // namespace pipescope::gui
