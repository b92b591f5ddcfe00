// The timeline view's readouts: what is under the mouse, and the tooltips
// of events, folded blocks and folded stages (TimelineView.h).
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

// ---- events ----------------------------------------------------------------

int TimelineView::laneAtPoint(const QPoint& pos) const
{
    if (!model_ || pos.x() < plot_->axisRect()->left() || pos.x() >= plot_->axisRect()->right())
        return -1;
    const int row = rowAt(pos.y());
    if (row < 0 || rows_[static_cast<size_t>(row)].kind != Row::LaneRow)
        return -1;
    return rows_[static_cast<size_t>(row)].lane;
}

TimelineEventRef TimelineView::eventAt(const QPoint& pos, int tolerancePx) const
{
    const int lane = laneAtPoint(pos);
    if (lane < 0)
        return {};
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
    const int lane = laneAtPoint(pos);
    if (lane < 0)
        return {};
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
    const qint64 rel = e.start - job_.origin; // from the time origin, as the axis counts
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

} // namespace pipescope::gui
