#include "BubblePanel.h"

#include "BubbleTableModel.h"
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
    registerTable(view_);
    connect(view_, &QTableView::activated, this, &BubblePanel::activate);
}

void BubblePanel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace)
{
    result_ = std::move(result);
    trace_ = std::move(trace);
    model_->setResult(result_, trace_);
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
