#include "panels/MicrobatchPanel.h"

#include "panels/MicrobatchModel.h"
#include "views/QtPalette.h"
#include "timeline/Palette.h"

#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>

namespace pipescope::gui {

MicrobatchPanel::MicrobatchPanel(QWidget* parent)
    : AnalysisPanel(parent)
    , model_(new MicrobatchModel(this))
    , plot_(new QCustomPlot(this))
    , note_(new QLabel(this))
    , view_(makeTableView(model_, true, this))
{
    plot_->setMinimumHeight(150);
    plot_->xAxis->setLabel(tr("microbatch"));
    // Whole microbatch numbers, every one while they fit.
    auto ticker = QSharedPointer<QCPAxisTickerFixed>::create();
    ticker->setTickStep(1.0);
    ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
    ticker->setTickCount(32); // every microbatch up to 32, multiples beyond
    plot_->xAxis->setTicker(ticker);
    plot_->yAxis->setLabel(tr("size (x mean)"));
    // The key on a row of its own above the bars, which it would otherwise hide.
    plot_->plotLayout()->insertRow(0);
    plot_->plotLayout()->addElement(0, 0, plot_->legend);
    plot_->legend->setFillOrder(QCPLegend::foColumnsFirst);
    plot_->legend->setBorderPen(Qt::NoPen);
    plot_->legend->setFont(plot_->font());
    plot_->plotLayout()->setRowStretchFactor(0, 0.001);
    note_->setTextFormat(Qt::PlainText);
    note_->setWordWrap(true);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addWidget(note_);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(plot_);
    split->addWidget(view_);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    layout->addWidget(split, 1);
    registerTable(view_);
    setResult({}, {});
}

QString MicrobatchPanel::summary() const { return note_->text(); }

void MicrobatchPanel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace)
{
    result_ = std::move(result);
    trace_ = std::move(trace);
    model_->setResult(result_, trace_);
    plot_->clearPlottables();
    plot_->clearItems();
    const MicrobatchSpread* ms = result_ ? &result_->microbatchSpread : nullptr;
    if (!ms || ms->size.empty()) {
        note_->setText(tr("No microbatches to compare: the selected iteration has fewer than two, or no pipeline steps."));
        plot_->replot();
        return;
    }
    const auto [lo, hi] = std::minmax_element(ms->size.begin(), ms->size.end());
    QString text = tr("%1 microbatches, %2x to %3x of the mean (coefficient of variation %4): %5.")
                       .arg(ms->microbatches)
                       .arg(*lo, 0, 'f', 2)
                       .arg(*hi, 0, 'f', 2)
                       .arg(ms->cv, 0, 'f', 2)
                       .arg(ms->uneven ? tr("uneven") : tr("even"));
    if (ms->uneven)
        text += tr(" Longest: microbatch %1, shortest: %2. A stage waits on its neighbour's long microbatches; the "
                   "What-if tab prices the spread and the orders to run them in.")
                    .arg(ms->longest)
                    .arg(ms->shortest);
    note_->setText(text);

    // Bars: each microbatch's size; those far from the mean in the warning colour.
    QVector<double> x, even, far;
    for (size_t m = 0; m < ms->size.size(); ++m) {
        const double s = ms->size[m];
        const bool off = ms->uneven && std::abs(s - 1.0) >= 2 * kUnevenMicrobatchCv;
        x << static_cast<double>(m);
        even << (off ? 0.0 : s);
        far << (off ? s : 0.0);
    }
    auto bars = [this, &x](const QVector<double>& y, const QColor& colour, const QString& name) {
        auto* b = new QCPBars(plot_->xAxis, plot_->yAxis);
        b->setName(name);
        b->setBrush(colour);
        b->setPen(QPen(colour.darker(130)));
        b->setWidth(0.8);
        b->setData(x, y, true);
        return b;
    };
    bars(even, toQColor(timeline::stepColor(StepKind::F)), tr("within 10% of the mean"));
    bars(far, toQColor(timeline::causeColor(BubbleCause::WaitNeighbor)), tr("10% or more from it"));
    QCPGraph* mean = plot_->addGraph();
    mean->setName(tr("mean"));
    mean->setPen(QPen(Qt::darkGray, 1.5, Qt::DashLine));
    mean->setData(QVector<double>{-0.5, static_cast<double>(ms->size.size()) - 0.5}, QVector<double>{1.0, 1.0});
    plot_->xAxis->setRange(-0.6, static_cast<double>(ms->size.size()) - 0.4);
    plot_->yAxis->setRange(0, std::max(1.2, *hi * 1.1));
    plot_->legend->setVisible(ms->uneven);
    plot_->replot();
}

} // namespace pipescope::gui
