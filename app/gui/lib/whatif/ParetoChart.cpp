#include "whatif/ParetoChart.h"

#include "util/Format.h"

#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace pipescope::gui {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int kPickPixels = 8;

QCPGraph* scatter(QCustomPlot* plot, const QColor& color, QCPScatterStyle::ScatterShape shape, double size,
                  const QString& name)
{
    auto* g = plot->addGraph();
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(shape, color, color, size));
    g->setPen(QPen(color));
    g->setName(name);
    return g;
}

} // namespace

ParetoChart::ParetoChart(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    plot_ = new QCustomPlot(this);
    plot_->setMinimumHeight(110);
    plot_->xAxis->setLabel(tr("predicted iteration (ms)"));
    plot_->yAxis->setLabel(tr("peak memory (GiB)"));
    plot_->legend->setVisible(false);
    plot_->setToolTip(tr("Each searched configuration; the joined points are the time-memory front. Click a point to "
                         "apply its configuration."));
    layout->addWidget(plot_);
    connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
        const int row = rowAt(e->pos());
        if (row >= 0)
            emit rowClicked(row);
    });
}

void ParetoChart::setRows(std::shared_ptr<const std::vector<whatif::SearchRow>> rows,
                          std::optional<int64_t> memoryLimitBytes)
{
    rows_ = std::move(rows);
    plot_->clearGraphs();
    plot_->clearItems();
    if (!rows_ || rows_->empty()) {
        plot_->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    auto* others = scatter(plot_, QColor("#9aa0a6"), QCPScatterStyle::ssCircle, 6, tr("dominated"));
    auto* oom = scatter(plot_, QColor("#d1242f"), QCPScatterStyle::ssCross, 7, tr("out of memory"));
    auto* front = scatter(plot_, QColor("#1a73e8"), QCPScatterStyle::ssDisc, 8, tr("front"));
    front->setLineStyle(QCPGraph::lsStepLeft); // the front as a staircase, fastest first
    front->setPen(QPen(QColor("#1a73e8"), 1.2));
    double xMin = std::numeric_limits<double>::max(), xMax = 0, yMax = 0;
    std::vector<std::pair<double, double>> frontPoints;
    for (const whatif::SearchRow& r : *rows_) {
        const double x = static_cast<double>(r.iterationNs) / 1e6, y = static_cast<double>(r.peakBytes) / kGiB;
        xMin = std::min(xMin, x);
        xMax = std::max(xMax, x);
        yMax = std::max(yMax, y);
        if (r.pareto)
            frontPoints.emplace_back(x, y);
        (r.outOfMemory && !r.pareto ? oom : r.pareto ? front : others)->addData(x, y);
    }
    std::sort(frontPoints.begin(), frontPoints.end());
    QVector<double> fx, fy;
    for (const auto& [x, y] : frontPoints) {
        fx << x;
        fy << y;
    }
    front->setData(fx, fy, true);
    if (memoryLimitBytes) {
        const double limit = static_cast<double>(*memoryLimitBytes) / kGiB;
        auto* line = new QCPItemStraightLine(plot_);
        line->point1->setCoords(0, limit);
        line->point2->setCoords(1, limit);
        line->setPen(QPen(QColor("#d1242f"), 1, Qt::DashLine));
        yMax = std::max(yMax, limit);
    }
    const double pad = std::max(1e-3, (xMax - xMin) * 0.08);
    plot_->xAxis->setRange(std::max(0.0, xMin - pad), xMax + pad);
    plot_->yAxis->setRange(0, std::max(1e-3, yMax) * 1.12);
    // Sized now, so that pointOf and rowAt answer before the first paint.
    plot_->replot(QCustomPlot::rpImmediateRefresh);
}

QPoint ParetoChart::pointOf(int row) const
{
    if (!rows_ || row < 0 || row >= rowCount())
        return {};
    const whatif::SearchRow& r = (*rows_)[size_t(row)];
    return QPoint(static_cast<int>(std::lround(plot_->xAxis->coordToPixel(static_cast<double>(r.iterationNs) / 1e6))),
                  static_cast<int>(std::lround(plot_->yAxis->coordToPixel(static_cast<double>(r.peakBytes) / kGiB))));
}

int ParetoChart::rowAt(const QPoint& pos) const
{
    int best = -1;
    double bestD = kPickPixels * kPickPixels + 1;
    // Front points first among equals: they are drawn on top.
    for (int i = 0; i < rowCount(); ++i) {
        const QPoint p = pointOf(i);
        const double dx = p.x() - pos.x(), dy = p.y() - pos.y();
        const double d = dx * dx + dy * dy;
        if (d < bestD || (d == bestD && best >= 0 && (*rows_)[size_t(i)].pareto && !(*rows_)[size_t(best)].pareto)) {
            bestD = d;
            best = i;
        }
    }
    return best;
}

std::vector<int> ParetoChart::frontRows() const
{
    std::vector<int> out;
    for (int i = 0; i < rowCount(); ++i)
        if ((*rows_)[size_t(i)].pareto)
            out.push_back(i);
    return out;
}

} // namespace pipescope::gui
