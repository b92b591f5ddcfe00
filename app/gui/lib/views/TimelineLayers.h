#pragma once
// What the timeline view paints, private to it (views/TimelineView*.cpp):
// the body layer (lanes from their draw lists, labels, iteration lines,
// search marks) and the buffered overlay layer (hover, selection, arrows,
// the dragged area), and the figures the view's rooms share.
#include "views/TimelineView.h"

#include <qcustomplot.h>

#include <QString>

#include <string>
#include <vector>

namespace pipescope::gui {

namespace timelineview {

inline constexpr double kMinWidthNs = 10.0;
inline constexpr double kWheelZoom = 0.8; // width factor per wheel notch towards the user
inline constexpr double kKeyZoom = 0.5;
inline constexpr double kPanFraction = 0.1;

inline QString qstr(const std::string& s) { return QString::fromStdString(s); }

} // namespace timelineview

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
    std::vector<timeline::DrawItem> items_; // reused between frames
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

} // namespace pipescope::gui
