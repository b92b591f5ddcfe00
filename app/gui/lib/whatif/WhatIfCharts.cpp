#include "whatif/WhatIfCharts.h"
#include "views/QtPalette.h"

#include "timeline/Palette.h"
#include "util/Format.h"

#include <QPainter>
#include <qcustomplot.h>

#include <algorithm>
#include <array>
#include <string_view>

namespace pipescope::gui {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

// Empty axes would look like zero memory: this says why there is nothing to show.
void addUnknownNote(QCustomPlot* plot, const QString& text)
{
    auto* note = new QCPItemText(plot);
    note->position->setType(QCPItemPosition::ptAxisRectRatio);
    note->position->setCoords(0.5, 0.45);
    note->setText(text);
    note->setColor(QColor("#666666"));
}

} // namespace

void BubbleBar::setPrediction(PredictionPtr p)
{
    prediction_ = std::move(p);
    QStringList tips;
    if (prediction_) {
        const auto& r = prediction_->replay;
        const double denom = double(std::max<TimeNs>(1, r.iterationNs)) * double(std::max<size_t>(1, r.ranks.size()));
        for (int c = 0; c < kBubbleCauses; ++c)
            if (r.bubbleNs[size_t(c)] > 0)
                tips << QString("%1 %2").arg(qs(std::string(toString(BubbleCause(c)))),
                                             qs(formatPercent(double(r.bubbleNs[size_t(c)]) / denom)));
    }
    setToolTip(tips.join('\n'));
    update();
}

void BubbleBar::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const int textW = 70;
    const QRect bar(0, 2, std::max(10, width() - textW), height() - 4);
    p.fillRect(bar, palette().alternateBase());
    if (!prediction_)
        return;
    const auto& r = prediction_->replay;
    const double denom = double(std::max<TimeNs>(1, r.iterationNs)) * double(std::max<size_t>(1, r.ranks.size()));
    double x = bar.left();
    for (int c = 0; c < kBubbleCauses; ++c) {
        const double w = bar.width() * double(r.bubbleNs[size_t(c)]) / denom;
        p.fillRect(QRectF(x, bar.top(), w, bar.height()), toQColor(timeline::causeColor(BubbleCause(c))));
        x += w;
    }
    p.setPen(palette().color(QPalette::Text));
    p.drawRect(bar.adjusted(0, 0, -1, -1));
    p.drawText(QRect(bar.right() + 6, 0, textW - 6, height()), Qt::AlignVCenter | Qt::AlignLeft,
               qs(formatPercent(r.bubbleFraction)));
}

QCustomPlot* smallPlot(QWidget* parent, const QString& yLabel)
{
    auto* plot = new QCustomPlot(parent);
    plot->setMinimumHeight(110);
    plot->yAxis->setLabel(yLabel);
    plot->setAntialiasedElements(QCP::aeNone);
    plot->legend->setVisible(false);
    return plot;
}

RankAxis rankAxis(const whatif::Prediction& p)
{
    RankAxis axis;
    axis.ranks = static_cast<int>(p.replay.ranks.size());
    QVector<QString> labels;
    for (int r = 0; r < axis.ranks; ++r) {
        axis.keys << r;
        labels << QString::number(r);
    }
    axis.ticker = QSharedPointer<QCPAxisTickerText>::create();
    axis.ticker->addTicks(axis.keys, labels);
    return axis;
}

// Busy and idle per rank, stacked.
void plotBusy(QCustomPlot* plot, const whatif::Prediction& p, const RankAxis& axis)
{
    QVector<double> busy, idle;
    for (int r = 0; r < axis.ranks; ++r) {
        busy << p.replay.ranks[size_t(r)].busyNs / 1e6;
        idle << (p.iterationNs() - p.replay.ranks[size_t(r)].busyNs) / 1e6;
    }
    plot->clearPlottables();
    auto* busyBars = new QCPBars(plot->xAxis, plot->yAxis);
    busyBars->setName(QObject::tr("busy"));
    busyBars->setBrush(toQColor(timeline::stepColor(StepKind::F)));
    busyBars->setPen(Qt::NoPen);
    busyBars->setData(axis.keys, busy);
    auto* idleBars = new QCPBars(plot->xAxis, plot->yAxis);
    idleBars->setName(QObject::tr("idle"));
    idleBars->setBrush(toQColor(timeline::causeColor(BubbleCause::Other)));
    idleBars->setPen(Qt::NoPen);
    idleBars->setData(axis.keys, idle);
    idleBars->moveAbove(busyBars);
    plot->xAxis->setTicker(axis.ticker);
    plot->xAxis->setLabel(QObject::tr("rank: busy below, idle above"));
    plot->xAxis->setRange(-0.6, axis.ranks - 0.4);
    plot->yAxis->setRange(0, std::max(1e-3, p.iterationNs() / 1e6) * 1.05);
    plot->replot(QCustomPlot::rpQueuedReplot);
}

// Whether the prediction knows any rank's memory: the model gave parameter or activation sizes.
bool memoryKnown(const whatif::Prediction& p)
{
    return std::any_of(p.memory.begin(), p.memory.end(), [](const auto& m) { return m.peakBytes > 0; });
}

// Peak memory per rank against the GPU's; ranks out of memory in red, the
// measured run's peaks (the trace's allocator totals) as black ticks over the bars.
void plotPeakMemory(QCustomPlot* plot, const whatif::Prediction& p, const RankAxis& axis, bool known)
{
    const int ranks = axis.ranks;
    plot->clearPlottables();
    plot->clearItems();
    auto* ok = new QCPBars(plot->xAxis, plot->yAxis);
    auto* oom = new QCPBars(plot->xAxis, plot->yAxis);
    ok->setBrush(toQColor(timeline::stepColor(StepKind::B)));
    oom->setBrush(QColor("#d1242f"));
    ok->setPen(Qt::NoPen);
    oom->setPen(Qt::NoPen);
    double top = 0;
    for (int r = 0; r < ranks && size_t(r) < p.memory.size(); ++r) {
        const double gib = p.memory[size_t(r)].peakBytes / kGiB;
        (p.memory[size_t(r)].outOfMemory ? oom : ok)->addData(r, gib);
        top = std::max(top, gib);
    }
    bool measuredShown = false;
    {
        auto* measured = new QCPGraph(plot->xAxis, plot->yAxis);
        measured->setName(QObject::tr("measured"));
        measured->setLineStyle(QCPGraph::lsNone);
        measured->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssPlus, QPen(QColor("#1d2329"), 2), Qt::NoBrush, 10));
        for (int r = 0; r < ranks && size_t(r) < p.measuredPeakBytes.size(); ++r)
            if (p.measuredPeakBytes[size_t(r)] >= 0) {
                const double gib = p.measuredPeakBytes[size_t(r)] / kGiB;
                measured->addData(r, gib);
                top = std::max(top, gib);
                measuredShown = true;
            }
        measured->setVisible(measuredShown);
    }
    if (p.gpuMemoryBytes) {
        const double limit = *p.gpuMemoryBytes / kGiB;
        auto* line = new QCPItemStraightLine(plot);
        line->point1->setCoords(-1, limit);
        line->point2->setCoords(1, limit);
        line->setPen(QPen(QColor("#d1242f"), 1, Qt::DashLine));
        top = std::max(top, limit);
    }
    plot->xAxis->setTicker(axis.ticker);
    QString rankLabel = p.outOfMemory() ? QObject::tr("rank (out of memory)") : QObject::tr("rank");
    if (measuredShown)
        rankLabel += QObject::tr("; + measured peak");
    plot->xAxis->setLabel(rankLabel);
    plot->xAxis->setRange(-0.6, ranks - 0.4);
    plot->yAxis->setRange(0, std::max(1e-3, top) * 1.1);
    if (!known)
        addUnknownNote(plot, measuredShown ? QObject::tr("predicted: unknown") : QObject::tr("unknown"));
    plot->replot(QCustomPlot::rpQueuedReplot);
}

// Memory over the iteration, a step line per rank.
void plotMemoryOverTime(QCustomPlot* plot, const whatif::Prediction& p, int ranks, bool known)
{
    plot->clearGraphs();
    plot->clearItems();
    if (!known)
        addUnknownNote(plot, QObject::tr("memory unknown: the trace gives no parameter or\nactivation sizes (open it with a model file, --model)"));
    static const std::array<std::string_view, 8> hues = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1",
                                                         "#edc948", "#76b7b2", "#ff9da7", "#9c755f"};
    double peak = 0;
    for (int r = 0; r < ranks && size_t(r) < p.memory.size(); ++r) {
        auto* g = plot->addGraph();
        g->setLineStyle(QCPGraph::lsStepLeft);
        g->setPen(QPen(toQColor(timeline::rgbFromHex(hues[size_t(r) % hues.size()])), 1.5));
        g->setName(QObject::tr("rank %1").arg(r));
        QVector<double> t, y;
        for (const auto& pt : p.memory[size_t(r)].overTime) {
            t << pt.t / 1e6;
            y << pt.bytes / kGiB;
            peak = std::max(peak, pt.bytes / kGiB);
        }
        g->setData(t, y, true);
    }
    plot->xAxis->setLabel(QObject::tr("ms"));
    plot->xAxis->setRange(0, std::max(1e-3, p.iterationNs() / 1e6));
    plot->yAxis->setRange(0, std::max(1e-3, peak) * 1.1);
    plot->legend->setVisible(known && ranks <= 8);
    plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace pipescope::gui
