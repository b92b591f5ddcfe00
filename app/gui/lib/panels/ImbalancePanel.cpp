#include "panels/ImbalancePanel.h"

#include "panels/AnalysisTableModel.h"
#include "panels/ImbalanceModel.h"
#include "panels/StragglerModel.h"
#include "timeline/Palette.h"
#include "util/Format.h"

#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <qcustomplot.h>

namespace pipescope::gui {

namespace {

// Plots in milliseconds: readable axis numbers for the usual step sizes.
double ms(double ns) { return ns / 1e6; }

void setupPlot(QCustomPlot* plot, const QString& yLabel)
{
    plot->setMinimumHeight(90);
    plot->yAxis->setLabel(yLabel);
    plot->xAxis->setLabel(QObject::tr("stage"));
    plot->legend->setVisible(true);
    plot->legend->setFont(plot->font());
    plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
}

QSharedPointer<QCPAxisTickerText> stageTicker(const std::vector<StageBalance>& stages)
{
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (size_t i = 0; i < stages.size(); ++i)
        ticker->addTick(static_cast<double>(i), QString::number(stages[i].stage));
    return ticker;
}

QCPBars* bars(QCustomPlot* plot, const QString& name, const QColor& colour)
{
    auto* b = new QCPBars(plot->xAxis, plot->yAxis);
    b->setName(name);
    b->setBrush(colour);
    b->setPen(QPen(colour.darker(130)));
    return b;
}

void hline(QCustomPlot* plot, const QString& name, double y, double x0, double x1, const QColor& colour, Qt::PenStyle style)
{
    QCPGraph* g = plot->addGraph();
    g->setName(name);
    g->setPen(QPen(colour, 2, style));
    g->setData(QVector<double>{x0, x1}, QVector<double>{y, y});
}

} // namespace

ImbalancePanel::ImbalancePanel(QWidget* parent)
    : AnalysisPanel(parent)
    , model_(new ImbalanceModel(this))
    , stragglers_(new StragglerModel(this))
    , stepPlot_(new QCustomPlot(this))
    , busyPlot_(new QCustomPlot(this))
    , stepGroup_(new QCPBarsGroup(stepPlot_))
    , note_(new QLabel(this))
    , view_(makeTableView(model_, true, this))
    , stragglerView_(makeTableView(stragglers_, true, this))
{
    setupPlot(stepPlot_, tr("compute per microbatch (ms)"));
    setupPlot(busyPlot_, tr("busy in the iteration (ms)"));
    note_->setTextFormat(Qt::PlainText);
    note_->setWordWrap(true);
    auto* layout = new QVBoxLayout(this);
    auto* split = new QSplitter(Qt::Vertical, this);
    auto* plots = new QSplitter(Qt::Horizontal, split);
    plots->addWidget(stepPlot_);
    plots->addWidget(busyPlot_);
    split->addWidget(plots);
    split->addWidget(view_);
    auto* bottom = new QWidget(split);
    auto* bl = new QVBoxLayout(bottom);
    bl->setContentsMargins(0, 0, 0, 0);
    bl->addWidget(note_);
    auto* stragglerNote = new QLabel(tr("Stragglers: replicas computing at least 5% longer than the median of their stage's "
                                        "other replicas; the all-reduce waits for them, costing at most their excess compute per "
                                        "iteration"),
                                     bottom);
    stragglerNote->setWordWrap(true);
    bl->addWidget(stragglerNote);
    bl->addWidget(stragglerView_);
    split->addWidget(bottom);
    layout->addWidget(split);
    registerTable(view_);
    registerTable(stragglerView_);
    setResult({}, {});
}

void ImbalancePanel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace)
{
    result_ = std::move(result);
    trace_ = std::move(trace);
    model_->setResult(result_, trace_);
    stragglers_->setResult(result_, trace_);
    if (result_ && result_->pipeline.found && !result_->imbalance.stages.empty()) {
        const Imbalance& im = result_->imbalance;
        note_->setText(tr("Busiest / mean stage %1, bottleneck stage %2. Iteration %3; a perfectly balanced partition with the same "
                          "schedule needs at least %4 (mean stage busy / (1 - ideal bubble fraction %5)).")
                           .arg(QString::number(im.maxOverMean, 'f', 3))
                           .arg(im.bottleneckStage)
                           .arg(QString::fromStdString(formatDuration(im.iterationNs)),
                                QString::fromStdString(formatDuration(im.balancedLowerBoundNs)),
                                QString::fromStdString(formatPercent(im.idealBubbleFraction))));
    } else {
        note_->setText(result_ ? tr("No pipeline stages, so nothing to compare.") : QString());
    }
    replot();
}

void ImbalancePanel::replot()
{
    for (QCustomPlot* plot : {stepPlot_, busyPlot_}) {
        plot->clearPlottables();
        plot->clearItems();
    }
    const bool any = result_ && result_->pipeline.found && !result_->imbalance.stages.empty();
    if (any) {
        const auto& stages = result_->imbalance.stages;
        const double n = static_cast<double>(stages.size());
        QVector<double> x, f, b, busy;
        double meanBusy = 0, top = 0;
        for (size_t i = 0; i < stages.size(); ++i) {
            const StageBalance& s = stages[i];
            x << static_cast<double>(i);
            f << ms(s.forwardNs.count > 0 ? s.forwardNs.mean : 0.0);
            // Zero-bubble schedules split B into I and W; their sum is the stage's backward.
            double back = s.backwardNs.count > 0 ? s.backwardNs.mean : 0.0;
            if (s.backwardInputNs.count > 0)
                back += s.backwardInputNs.mean;
            if (s.backwardWeightNs.count > 0)
                back += s.backwardWeightNs.mean;
            b << ms(back);
            busy << ms(static_cast<double>(s.busyNs));
            meanBusy += static_cast<double>(s.busyNs) / n;
            top = std::max(top, std::max(f.back(), b.back()));
        }
        QCPBars* fb = bars(stepPlot_, tr("F"), pathKindColor("F"));
        QCPBars* bb = bars(stepPlot_, tr("B"), pathKindColor("B"));
        for (QCPBars* bar : {fb, bb}) {
            bar->setWidth(0.35);
            bar->setBarsGroup(stepGroup_);
        }
        fb->setData(x, f);
        bb->setData(x, b);
        stepPlot_->xAxis->setTicker(stageTicker(stages));
        stepPlot_->xAxis->setRange(-0.6, n - 0.4);
        stepPlot_->yAxis->setRange(0, top > 0 ? top * 1.25 : 1.0);

        QCPBars* busyBars = bars(busyPlot_, tr("busy"), pathKindColor("compute"));
        busyBars->setWidth(0.6);
        busyBars->setData(x, busy);
        const Imbalance& im = result_->imbalance;
        hline(busyPlot_, tr("mean (balanced)"), ms(meanBusy), -0.5, n - 0.5, QColor(QLatin1String(timeline::kSelectionHex.data(), static_cast<int>(timeline::kSelectionHex.size()))), Qt::DashLine);
        hline(busyPlot_, tr("balanced lower bound"), ms(static_cast<double>(im.balancedLowerBoundNs)), -0.5, n - 0.5, pathKindColor("B"),
              Qt::SolidLine);
        hline(busyPlot_, tr("iteration"), ms(static_cast<double>(im.iterationNs)), -0.5, n - 0.5, causeColor(BubbleCause::FillDrain), Qt::SolidLine);
        double ytop = std::max(ms(static_cast<double>(std::max(im.iterationNs, im.balancedLowerBoundNs))), *std::max_element(busy.begin(), busy.end()));
        busyPlot_->xAxis->setTicker(stageTicker(stages));
        busyPlot_->xAxis->setRange(-0.6, n - 0.4);
        busyPlot_->yAxis->setRange(0, ytop > 0 ? ytop * 1.25 : 1.0);
    }
    for (QCustomPlot* plot : {stepPlot_, busyPlot_}) {
        plot->legend->setVisible(any);
        plot->replot();
    }
}

} // namespace pipescope::gui
