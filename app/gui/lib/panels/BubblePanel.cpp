#include "panels/BubblePanel.h"

#include "panels/BubbleTableModel.h"
#include "panels/FillableModel.h"
#include "util/Format.h"

#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>

namespace pipescope::gui {

BubblePanel::BubblePanel(QWidget* parent)
    : AnalysisPanel(parent)
    , model_(new BubbleTableModel(this))
    , view_(makeTableView(model_, true, this))
    , totals_(new QLabel(this))
    , fillable_(new FillableModel(this))
    , fillableView_(makeTableView(fillable_, true, this))
{
    auto* layout = new QVBoxLayout(this);
    auto* note = new QLabel(tr("Idle time of each rank in the selected iteration, by cause; the causes of a rank add up to its idle time. "
                               "Double-click a cell to show that rank's longest bubble of that cause on the timeline."),
                            this);
    note->setWordWrap(true);
    layout->addWidget(note);
    layout->addWidget(view_, 1);
    totals_->setTextFormat(Qt::PlainText);
    layout->addWidget(totals_);
    auto* fillNote = new QLabel(tr("<b>Fillable bubbles</b>: per stage, the idle time extra work could use (fill and drain, "
                                   "waiting for a neighbour, transfers, data-parallel sync) on its replica with the least of it, "
                                   "and how many bubbles fall in each length class. "
                                   "<tt>pipescope whatif --extra-work MS</tt> predicts what adding work costs."),
                                this);
    fillNote->setWordWrap(true);
    layout->addWidget(fillNote);
    layout->addWidget(fillableView_, 1);
    registerTable(view_);
    registerTable(fillableView_);
    connect(view_, &QTableView::activated, this, &BubblePanel::activate);
}

void BubblePanel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace)
{
    result_ = std::move(result);
    trace_ = std::move(trace);
    model_->setResult(result_, trace_);
    fillable_->setResult(result_, trace_);
    TimeNs window = 0, idle = 0;
    if (result_)
        for (const RankIdle& ri : result_->idle)
            if (ri.iteration == result_->selectedIteration) {
                window += ri.windowNs;
                idle += ri.idleNs;
            }
    totals_->setText(window > 0 ? tr("All ranks: %1 idle of %2 (%3)")
                                      .arg(QString::fromStdString(formatDuration(idle)), QString::fromStdString(formatDuration(window)),
                                           QString::fromStdString(formatPercent(static_cast<double>(idle) / static_cast<double>(window))))
                                : QString());
}

void BubblePanel::activate(const QModelIndex& proxyIndex)
{
    const QAbstractItemModel* m = view_->model();
    if (!proxyIndex.isValid() || !m)
        return;
    const QVariant span = m->data(proxyIndex, BubbleTableModel::BiggestBubbleRole);
    const QVariant rank = m->data(proxyIndex, BubbleTableModel::RankRole);
    if (!span.isValid() || !rank.isValid())
        return;
    const QVariantList se = span.toList();
    Q_EMIT jumpTo(se.value(0).toLongLong(), se.value(1).toLongLong(), rank.toInt());
}

} // namespace pipescope::gui
