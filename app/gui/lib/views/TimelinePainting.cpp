// The timeline view's painting: the body (TimelineBody: lanes from their
// draw lists, counters, labels) and the overlay (TimelineOverlay: hover,
// selection, arrows, markers, the dragged area); views/TimelineLayers.h.
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
        const bool sel = r.lane == v.job_.selectedLane;
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
    if (!v.job_.hitTimes.empty()) {
        const QColor mark = toQColor(kHighlightHex);
        int runStart = -1;
        for (int x = 0; x <= ar.width(); ++x) {
            bool hit = false;
            if (x < ar.width()) {
                const qint64 t0 = v.timeAt(ar.left() + x), t1 = v.timeAt(ar.left() + x + 1);
                auto it = std::lower_bound(v.job_.hitTimes.begin(), v.job_.hitTimes.end(), t0);
                hit = it != v.job_.hitTimes.end() && *it < t1;
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
    const std::vector<int64_t>* hits = static_cast<size_t>(laneIndex) < v.job_.hitsPerLane.size() && !v.job_.hitsPerLane[static_cast<size_t>(laneIndex)].empty()
                                           ? &v.job_.hitsPerLane[static_cast<size_t>(laneIndex)]
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
    if (v.job_.haveArea) {
        // Only the rows the statistics count are shaded; the time range is marked over the whole height.
        const double x0 = v.xOf(v.job_.areaFrom), x1 = v.xOf(v.job_.areaTo);
        const int rh = v.rowHeight();
        for (int slot = 0; slot <= v.visibleRowCount(); ++slot) {
            const int row = v.rowInSlot(slot);
            if (row < 0 || static_cast<size_t>(row) >= v.job_.areaRows.size() || !v.job_.areaRows[static_cast<size_t>(row)])
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
    for (const TimelineView::TimeNote& n : v.job_.notes) {
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
    if (!v.job_.markers.empty()) {
        const QColor mc(0xc2, 0x18, 0x5b);
        p->setPen(QPen(mc, 1));
        const QFontMetrics fm(mParentPlot->font());
        double lastX = std::numeric_limits<double>::quiet_NaN();
        qint64 lastT = 0;
        for (size_t i = 0; i < v.job_.markers.size(); ++i) {
            const double x = v.xOf(v.job_.markers[i]);
            if (x >= ar.left() && x <= ar.right()) {
                p->drawLine(QPointF(x, ar.top()), QPointF(x, ar.bottom()));
                const QString& label = v.job_.markerLabels[i];
                if (!label.isEmpty()) { // under the ruler, right of the line
                    const QRectF box(x + 2, ar.top() + fm.height() + 5, fm.horizontalAdvance(label) + 6, fm.height() + 2);
                    p->fillRect(box, viewColors(v.palette()).labelBox);
                    p->drawText(box, Qt::AlignCenter, label);
                }
            }
            if (i > 0) {
                const double x0 = std::max<double>(lastX, ar.left()), x1 = std::min<double>(x, ar.right());
                if (x1 > x0) {
                    const QString d = qstr(formatDuration(v.job_.markers[i] - lastT));
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
            lastT = v.job_.markers[i];
        }
    }
    outline(p, v.job_.hover, viewColors(v.palette()).hoverOutline, 1);
    outline(p, v.job_.selected, toQColor(kSelectionHex), 2);
    // The selection's arrows (see TimelineView::selectionArrows); an end on a
    // track that is not on screen points at the top or bottom edge.
    for (const SelectionArrow& a : v.job_.arrows) {
        auto yOf = [&](int lane) -> std::optional<double> {
            const QRect r = v.laneRect(lane);
            if (!r.isEmpty())
                return r.center().y();
            const int row = v.rowOfLane(lane);
            if (row < 0)
                return std::nullopt;
            return row < v.job_.firstRow ? ar.top() + v.stickyRows() * v.rowHeight() + 1.0 : ar.bottom() - 1.0;
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
        if (a.toEvent >= 0 && a.toLane != v.job_.selected.lane)
            outline(p, {a.toLane, a.toEvent}, c, 1);
    }
}

} // namespace pipescope::gui
