#include "panels/HtaPanel.h"

#include "panels/HtaModel.h"

#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>

namespace pipescope::gui {

HtaPanel::HtaPanel(QWidget* parent)
    : AnalysisPanel(parent)
    , temporal_(new HtaModel(HtaModel::View::Temporal, this))
    , idle_(new HtaModel(HtaModel::View::StreamIdle, this))
    , mode_(new QLabel(this))
{
    mode_->setTextFormat(Qt::PlainText);
    mode_->setWordWrap(true);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(mode_);
    layout->addWidget(new QLabel(tr("Temporal breakdown per rank"), this));
    QTableView* t = makeTableView(temporal_, true, this);
    layout->addWidget(t, 1);
    layout->addWidget(new QLabel(tr("Idle time per stream"), this));
    QTableView* s = makeTableView(idle_, true, this);
    layout->addWidget(s, 1);
    registerTable(t);
    registerTable(s);
    setResult({}, {});
}

void HtaPanel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace)
{
    result_ = std::move(result);
    trace_ = std::move(trace);
    temporal_->setResult(result_, trace_);
    idle_->setResult(result_, trace_);
    if (!result_) {
        mode_->clear();
        return;
    }
    QString text = result_->hta.htaCompatible ? tr("HTA's own arithmetic: whole microseconds, last profiler step dropped.")
                                              : tr("Exact nanoseconds over the whole trace.");
    // Why these idle figures differ from the Bubbles panel's, said where they are read.
    text += tr(" As Holistic Trace Analysis counts them: every iteration, a GPU busy whenever any of its kernels runs. "
               "The Bubbles panel counts the analysed iteration only, and the compute stream's idle time by cause, "
               "so its idle shares differ.");
    for (const std::string& n : result_->hta.notes)
        text += QStringLiteral("\n") + QString::fromStdString(n);
    mode_->setText(text);
}

} // namespace pipescope::gui
